//! Sluice's HTTP surface, and only that: the native JSON API (`/v1/...`), the AWS APIs side by
//! side in `aws/` (SQS in JSON and Query protocols, SNS in Query, STS), Prometheus metrics,
//! health probes, the OpenAPI document, error mapping and request observation.
//!
//! Handlers translate between the wire types of `sluice_api` (or AWS's) and the store or the
//! services (`sluice_services`), which hold every piece of state that outlives a request and
//! run the background work (push delivery, redrives). Every rule of Sluice lives in
//! `sluice_core` and is applied by the store, never here. The server depends on no storage
//! backend: the binary picks one and hands it in.
//!
//! [`app`] builds the router without a socket (tests drive it with `tower::ServiceExt::oneshot`);
//! [`run`] serves it on a listener until a shutdown future completes. [`app_with`] and
//! [`run_with`] do the same with a [`ServerConfig`] (account, region, access keys).

mod access;
mod alert_routes;
pub mod auth;
mod aws;
mod conn;
mod convert;
mod error;
mod events;
mod extract;
mod health;
mod idempotency;
mod jobs;
mod key_routes;
mod messages;
mod metrics;
mod observe;
mod openapi;
mod paging;
mod queues;
mod redrive;
mod relays;
mod sagas;
mod schedule_routes;
mod schema_routes;
mod shed;
mod stats_routes;
mod streams;
mod tenant;
mod tenant_routes;
pub mod tls;
mod topic_routes;
mod trace_routes;
mod ui;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
pub use sluice_clock::{Clock, ManualClock, Sleep, SystemClock};
use sluice_core::limits::REQUEST_BYTES_MAX;
use sluice_services::alerts::{Alerts, AlertsConfig};
use sluice_services::idempotency::IdempotencyConfig;
use sluice_services::jobs::JobsConfig;
use sluice_services::redrive::Redrives;
pub use sluice_services::shedding::ShedConfig;
use sluice_services::sqs::SqsState;
use sluice_services::stats::Stats;
use sluice_services::topics::worker::Endpoints;
use sluice_services::topics::{Arns, Topics};
use sluice_services::{Services, ServicesConfig};
use sluice_store::Store;

pub use access::routes::Protected;
pub use auth::AccessKey;
pub use error::ApiError;
pub use idempotency::{ANSWER_BYTES_MAX, KEY_HEADER, NOT_STORED, REPLAYED_HEADER};
pub use openapi::ApiDoc;
/// What `serve` needs to configure idempotency keys.
pub mod idempotency_settings {
    pub use sluice_services::idempotency::{
        ENTRIES_BYTES_MAX_DEFAULT, ENTRIES_COUNT_MAX_DEFAULT, IdempotencyConfig, TTL_MS_MAX, TTL_MS_MIN,
    };
}
/// Egress rules for the server's outbound calls (`--egress-allow`, `--egress-deny`).
pub use sluice_services::egress;

/// What `serve` needs to configure authentication.
pub mod auth_settings {
    pub use sluice_services::auth::{API_KEY_KIND, AuthConfig, KEY_REFRESH_MS, keys_exist};
}
pub use sluice_services::redrive::{REDRIVE_RATE_DEFAULT, REDRIVE_RATE_MAX, REDRIVE_STEP_MS};
pub use sluice_services::stats::{STATS_SAMPLE_MS_DEFAULT, STATS_SAMPLE_MS_MAX, STATS_SAMPLE_MS_MIN};
pub use sluice_services::topics::worker::{LAST_ERROR_ATTRIBUTE, PushConfig, SIGNATURE_HEADER, TIMESTAMP_HEADER};

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
    /// How often the dashboard's history is sampled (`sluice_services::stats`).
    pub stats_sample_ms: u64,
    /// How often alert rules are evaluated (`sluice_services::alerts`); tests shorten it.
    pub alert_evaluate_ms: u64,
    /// This node's name on outbox relay leases: a node restarted under the same name takes
    /// its relays back at once. `None`: a random name (a restart then waits for the leases
    /// to run out, as another node would).
    pub relay_node: Option<String>,
    /// The secret job completion webhooks are signed with; made once and shared by every node
    /// through the store when `None`.
    pub job_callback_secret: Option<String>,
    /// Load shedding's watermarks (`sluice_services::shedding`).
    pub shed: sluice_services::shedding::ShedConfig,
    /// Idempotency keys: TTL, bounds, whether other processes share the store.
    pub idempotency: IdempotencyConfig,
    /// How long causal trace entries are kept (`sluice_services::trace`).
    pub trace_retention_ms: u64,
    /// API keys: the bootstrap admin token and `--insecure-no-auth` (`sluice_services::auth`).
    pub auth: sluice_services::auth::AuthConfig,
    /// Whether `/metrics` and the health probes need a key too (`access/routes.rs`).
    pub protected: Protected,
    /// TLS on the port (`--tls-cert`, `--tls-key`); `None`: plain HTTP.
    pub tls: Option<Arc<tls::Tls>>,
    /// Where outbound calls may go (`sluice_services::egress`).
    pub egress: sluice_services::egress::Egress,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            account: "000000000000".to_string(),
            region: "us-east-1".to_string(),
            access_keys: Vec::new(),
            stats_sample_ms: sluice_services::stats::STATS_SAMPLE_MS_DEFAULT,
            alert_evaluate_ms: sluice_services::alerts::ALERT_EVALUATE_MS_DEFAULT,
            relay_node: None,
            job_callback_secret: None,
            shed: sluice_services::shedding::ShedConfig::default(),
            idempotency: IdempotencyConfig::default(),
            trace_retention_ms: sluice_services::trace::TRACE_RETENTION_MS_DEFAULT,
            auth: sluice_services::auth::AuthConfig::default(),
            protected: Protected::default(),
            tls: None,
            egress: sluice_services::egress::Egress::default(),
        }
    }
}

/// What every handler shares: the services (which hold every piece of state that outlives a
/// request) and who the server is.
#[derive(Clone)]
pub(crate) struct AppState {
    services: Arc<Services>,
    config: Arc<ServerConfig>,
}

impl AppState {
    fn store(&self) -> &Arc<dyn Store> {
        self.services.store()
    }

    fn topics(&self) -> &Topics {
        self.services.topics()
    }

    fn redrives(&self) -> &Arc<Redrives> {
        self.services.redrives()
    }

    fn push(&self) -> &Endpoints {
        self.services.push_endpoints()
    }

    fn sqs(&self) -> &SqsState {
        self.services.sqs()
    }

    fn stats(&self) -> &Stats {
        self.services.stats()
    }

    fn alerts(&self) -> &Alerts {
        self.services.alerts()
    }

    fn shedder(&self) -> &sluice_services::shedding::Shedder {
        self.services.shedder()
    }

    /// `https` when the port serves TLS, else `http`: the scheme of the URLs the server writes
    /// (SQS queue URLs, SNS confirmation links).
    fn scheme(&self) -> &'static str {
        if self.config.tls.is_some() { "https" } else { "http" }
    }

    /// Now, on the services' clock.
    fn now_ms(&self) -> u64 {
        self.services.clock().now_ms()
    }
}

/// Every route, with its middleware, over `store`, with the default [`ServerConfig`] and the
/// system clock. No socket: serve it with [`run`], or call it directly in tests.
pub fn app(store: Arc<dyn Store>) -> Router {
    app_with(store, ServerConfig::default())
}

/// [`app`] with a configuration.
pub fn app_with(store: Arc<dyn Store>, config: ServerConfig) -> Router {
    let services = services(store, Arc::new(SystemClock), &config, PushConfig::default());
    router(services, config)
}

/// The services of a server with this configuration.
pub fn services(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: &ServerConfig,
    push: PushConfig,
) -> Arc<Services> {
    let arns = Arns { region: config.region.clone(), account: config.account.clone() };
    let alerts = AlertsConfig { evaluate_ms: config.alert_evaluate_ms, ..AlertsConfig::default() };
    let jobs = JobsConfig { callback_secret: config.job_callback_secret.clone(), ..JobsConfig::default() };
    let services = ServicesConfig {
        push,
        stats_sample_ms: config.stats_sample_ms,
        alerts,
        relay_node: config.relay_node.clone(),
        jobs,
        shed: config.shed.clone(),
        idempotency: config.idempotency.clone(),
        trace_retention_ms: config.trace_retention_ms,
        auth: config.auth.clone(),
        egress: config.egress.clone(),
        ..ServicesConfig::new(arns)
    };
    Services::new(store, clock, services)
}

/// Every route, with its middleware, over `services`.
pub fn router(services: Arc<Services>, config: ServerConfig) -> Router {
    // Installed before the first request so that the first request is measured too.
    metrics::handle();
    // Completion webhooks carry the job as `GET /v1/jobs/{id}` shows it.
    services.jobs().set_renderer(Arc::new(jobs::webhook_body));
    let state = AppState { services, config: Arc::new(config) };
    Router::new()
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
        .route(
            "/v1/topics/{name}",
            get(topic_routes::get_topic).patch(topic_routes::update_topic).delete(topic_routes::delete_topic),
        )
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
        .merge(schedule_routes::routes())
        .merge(schema_routes::routes())
        .merge(streams::routes())
        .merge(events::routes())
        .merge(relays::routes())
        .merge(jobs::routes())
        .merge(sagas::routes())
        .route("/v1/openapi.json", get(openapi::openapi_json))
        .route("/metrics", get(metrics::scrape))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .merge(stats_routes::routes())
        .merge(alert_routes::routes())
        .merge(trace_routes::routes())
        .merge(key_routes::routes())
        .merge(tenant_routes::routes())
        .merge(ui::routes())
        // Applies to the routes added above, so it must come after them.
        .method_not_allowed_fallback(health::method_not_allowed)
        // AWS requests (SQS, SNS, STS) come to `/` and to queue-URL paths; anything else that
        // matches no route still gets the native 404.
        .fallback(aws::fallback)
        // Inside the body guard, so that it reads a body already bounded and in memory.
        .layer(axum::middleware::from_fn_with_state(state.clone(), idempotency::layer))
        // Outside idempotency keys, which are scoped by the principal it finds.
        .layer(axum::middleware::from_fn_with_state(state.clone(), access::layer))
        .layer(DefaultBodyLimit::max(REQUEST_BYTES_MAX))
        .layer(axum::middleware::from_fn(observe::limit_body))
        .layer(axum::middleware::from_fn(observe::observe))
        .with_state(state)
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

/// [`run_with_push`] with the clock every service takes its time from (tests pass a
/// [`ManualClock`]; `serve` runs on the [`SystemClock`]).
pub async fn run_with_clock(
    listener: tokio::net::TcpListener,
    store: Arc<dyn Store>,
    config: ServerConfig,
    push: PushConfig,
    clock: Arc<dyn Clock>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let services = services(store, clock, &config, push);
    run_services(listener, services, config, shutdown).await
}

/// Serves `services` on `listener` until `shutdown` completes, with their background work
/// started, then stops accepting connections, finishes the requests in progress, and stops the
/// background work (each redrive after its current step).
pub async fn run_services(
    listener: tokio::net::TcpListener,
    services: Arc<Services>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let tls = config.tls.clone();
    let router = router(services.clone(), config);
    let running = services.start();
    let upkeep = tokio::spawn(async {
        let mut every = tokio::time::interval(Duration::from_millis(METRICS_UPKEEP_MS));
        loop {
            every.tick().await;
            metrics::upkeep();
        }
    });
    let signal = async move {
        shutdown.await;
        tracing::info!("shutting down: finishing requests in progress");
        services.stop();
    };
    conn::serve(listener, router, tls, signal).await;
    upkeep.abort();
    running.join().await;
    Ok(())
}
