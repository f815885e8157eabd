//! Sluice's HTTP surface: the native JSON API (`/v1/...`), the AWS SQS API (JSON and Query
//! protocols, on `/` and queue-URL paths, in `sqs/`), the AWS SNS API (Query protocol, in
//! `sns/`) over the topics service (`topics/`), Prometheus metrics, health probes, the OpenAPI
//! document, and the background tasks: redrives and the HTTP/S push worker (`topics/worker.rs`).
//!
//! Handlers translate between the wire types of `sluice_api` (or SQS's) and the [`Store`]
//! trait; every rule of Sluice lives in `sluice_core` and is applied by the store, never here.
//!
//! [`app`] builds the router without a socket (tests drive it with `tower::ServiceExt::oneshot`);
//! [`run`] serves it on a listener until a shutdown future completes. [`app_with`] and
//! [`run_with`] do the same with a [`ServerConfig`] (account, region, access keys).

pub mod auth;
mod clock;
mod conn;
mod convert;
mod error;
mod extract;
mod health;
mod messages;
mod metrics;
mod observe;
mod openapi;
mod paging;
mod queues;
mod redrive;
mod redrive_tasks;
mod sns;
mod sqs;
mod topic_routes;
mod topics;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use sluice_core::limits::REQUEST_BYTES_MAX;
use sluice_store::Store;

pub use auth::AccessKey;
pub use clock::{Clock, ManualClock, Sleep, SystemClock};
pub use error::ApiError;
pub use openapi::ApiDoc;
pub use redrive_tasks::{REDRIVE_RATE_DEFAULT, REDRIVE_RATE_MAX, REDRIVE_STEP_MS};
pub use topics::worker::{LAST_ERROR_ATTRIBUTE, PushConfig, SIGNATURE_HEADER, TIMESTAMP_HEADER};

/// Who the server is to AWS clients, and whom it lets in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// The account id in queue URLs and ARNs (12 digits).
    pub account: String,
    /// The region in ARNs.
    pub region: String,
    /// Keys that AWS requests must be signed with (SigV4). Empty: any request is accepted,
    /// signed with anything or not at all.
    pub access_keys: Vec<AccessKey>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig { account: "000000000000".to_string(), region: "us-east-1".to_string(), access_keys: Vec::new() }
    }
}

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    store: Arc<dyn Store>,
    redrives: Arc<redrive_tasks::Redrives>,
    config: Arc<ServerConfig>,
    sqs: Arc<sqs::SqsState>,
    topics: Arc<topics::Topics>,
    /// The push worker's breakers and permits per endpoint (shown in subscription views).
    push: Arc<topics::worker::Endpoints>,
}

/// Every route, with its middleware, over `store`, with the default [`ServerConfig`]. No
/// socket: serve it with [`run`], or call it directly in tests.
pub fn app(store: Arc<dyn Store>) -> Router {
    app_with(store, ServerConfig::default())
}

/// [`app`] with a configuration.
pub fn app_with(store: Arc<dyn Store>, config: ServerConfig) -> Router {
    build(store, config, PushConfig::default()).0
}

fn build(store: Arc<dyn Store>, config: ServerConfig, push: PushConfig) -> (Router, AppState) {
    // Installed before the first request so that the first request is measured too.
    metrics::handle();
    let arns = topics::Arns { region: config.region.clone(), account: config.account.clone() };
    let state = AppState {
        redrives: redrive_tasks::Redrives::new(store.clone()),
        topics: Arc::new(topics::Topics::new(store.clone(), arns)),
        store,
        config: Arc::new(config),
        sqs: Arc::new(sqs::SqsState::default()),
        push: Arc::new(topics::worker::Endpoints::new(push)),
    };
    let router = Router::new()
        .route("/v1/queues", get(queues::list_queues).post(queues::create_queue))
        .route("/v1/queues/{name}", get(queues::get_queue).patch(queues::update_queue).delete(queues::delete_queue))
        .route("/v1/queues/{name}/purge", post(queues::purge_queue))
        .route("/v1/queues/{name}/messages", post(messages::send).get(messages::peek))
        .route("/v1/queues/{name}/receive", post(messages::receive))
        .route("/v1/queues/{name}/ack", post(messages::ack))
        .route("/v1/queues/{name}/visibility", post(messages::change_visibility))
        .route("/v1/queues/{name}/nack", post(messages::nack))
        .route("/v1/queues/{name}/redrive", post(redrive::start).get(redrive::list_for_queue))
        .route("/v1/topics", get(topic_routes::list_topics).post(topic_routes::create_topic))
        .route("/v1/topics/{name}", get(topic_routes::get_topic).delete(topic_routes::delete_topic))
        .route(
            "/v1/topics/{name}/subscriptions",
            get(topic_routes::list_topic_subscriptions).post(topic_routes::subscribe),
        )
        .route(
            "/v1/topics/{name}/subscriptions/{id}",
            get(topic_routes::get_subscription).delete(topic_routes::unsubscribe),
        )
        .route("/v1/topics/{name}/publish", post(topic_routes::publish))
        .route("/v1/subscriptions", get(topic_routes::list_subscriptions))
        .route("/v1/redrives", get(redrive::list))
        .route("/v1/redrives/{id}", get(redrive::get).delete(redrive::cancel))
        .route("/v1/openapi.json", get(openapi::openapi_json))
        .route("/metrics", get(metrics::scrape))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        // Applies to the routes added above, so it must come after them.
        .method_not_allowed_fallback(health::method_not_allowed)
        // AWS requests (SQS, STS) come to `/` and to queue-URL paths; anything else that
        // matches no route still gets the native 404.
        .fallback(sqs::fallback)
        .layer(DefaultBodyLimit::max(REQUEST_BYTES_MAX))
        .layer(axum::middleware::from_fn(observe::limit_body))
        .layer(axum::middleware::from_fn(observe::observe))
        .with_state(state.clone());
    (router, state)
}

/// How often the latency histogram is folded, so that its memory stays bounded between scrapes.
const METRICS_UPKEEP_MS: u64 = 5_000;

/// Serves the API on `listener` until `shutdown` completes, then stops accepting connections,
/// finishes the requests in progress, and stops the redrive tasks (each after its current step).
pub async fn run(
    listener: tokio::net::TcpListener,
    store: Arc<dyn Store>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    run_with(listener, store, ServerConfig::default(), shutdown).await
}

/// [`run`] with a configuration.
pub async fn run_with(
    listener: tokio::net::TcpListener,
    store: Arc<dyn Store>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    run_with_push(listener, store, config, PushConfig::default(), shutdown).await
}

/// [`run_with`] with the HTTP/S push worker's settings (tests shorten its timeouts and breaker).
pub async fn run_with_push(
    listener: tokio::net::TcpListener,
    store: Arc<dyn Store>,
    config: ServerConfig,
    push: PushConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    run_with_clock(listener, store, config, push, Arc::new(SystemClock), shutdown).await
}

/// [`run_with_push`] with the clock the push worker takes its time from (tests pass a
/// [`ManualClock`]; `serve` runs on the [`SystemClock`]).
pub async fn run_with_clock(
    listener: tokio::net::TcpListener,
    store: Arc<dyn Store>,
    config: ServerConfig,
    push: PushConfig,
    clock: Arc<dyn Clock>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (router, state) = build(store, config, push);
    // Stopped with the server: a POST cut short leaves its delivery to reappear after its
    // visibility timeout and be pushed again (at least once).
    let push_worker = topics::worker::spawn(state.store.clone(), state.push.clone(), clock);
    let upkeep = tokio::spawn(async {
        let mut every = tokio::time::interval(Duration::from_millis(METRICS_UPKEEP_MS));
        loop {
            every.tick().await;
            metrics::upkeep();
        }
    });
    let redrives = state.redrives.clone();
    let signal = async move {
        shutdown.await;
        tracing::info!("shutting down: finishing requests in progress");
        // Stopped at the signal rather than after draining, so that a long redrive does not
        // keep moving messages while the server winds down.
        redrives.stop_all();
    };
    conn::serve(listener, router, signal).await;
    state.redrives.join_all().await;
    upkeep.abort();
    push_worker.abort();
    Ok(())
}
