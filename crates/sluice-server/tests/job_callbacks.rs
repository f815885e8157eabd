//! Job completion webhooks against local receivers on port 0: the final view POSTed with the
//! push worker's HMAC signature, retried after failures with backoff, and dead-lettered to
//! `sluice-job-callbacks-dlq` with the last error after the last attempt. The retry delays
//! are shortened (milliseconds) so that the test waits for no second; nothing is asserted on
//! how long anything took.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use sluice_core::breaker::BreakerConfig;
use sluice_core::delivery::DeliveryPolicy;
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_server::{PushConfig, ServerConfig, SystemClock};
use sluice_services::jobs::{Jobs, JobsConfig};
use sluice_services::topics::Arns;
use sluice_services::{Services, ServicesConfig};
use sluice_store::prelude::*;
use sluice_store::{JOB_CALLBACK_DLQ, JOB_CALLBACK_QUEUE, JobCallback, Store};

const SECRET: &str = "s3cret";
const WAIT: Duration = Duration::from_secs(20);

/// One POST a receiver got: path, headers, body, and the status it answered.
type Hit = (String, HeaderMap, Vec<u8>, u16);

#[derive(Default)]
struct Receiver {
    hits: Mutex<Vec<Hit>>,
    /// How many POSTs to `/flaky` still fail.
    flaky_failures: AtomicUsize,
}

async fn hook(
    State(r): State<Arc<Receiver>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let status = match uri.path() {
        "/flaky" if r.flaky_failures.load(Ordering::SeqCst) > 0 => {
            r.flaky_failures.fetch_sub(1, Ordering::SeqCst);
            StatusCode::SERVICE_UNAVAILABLE
        }
        "/flaky" => StatusCode::OK,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    r.hits.lock().unwrap().push((uri.path().to_string(), headers, body.to_vec(), status.as_u16()));
    status
}

async fn receiver() -> (String, Arc<Receiver>) {
    let state = Arc::new(Receiver { flaky_failures: AtomicUsize::new(2), ..Receiver::default() });
    let app = Router::new().fallback(hook).with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, state)
}

fn fast_policy() -> DeliveryPolicy {
    DeliveryPolicy { retries: 3, min_delay_ms: 5, max_delay_ms: 20, ..DeliveryPolicy::default() }
}

async fn eventually<T>(what: &str, mut found: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = found().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn signed(secret: &str, headers: &HeaderMap, body: &[u8]) -> bool {
    let ts = headers["x-sluice-timestamp"].to_str().unwrap();
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{ts}.").as_bytes());
    mac.update(body);
    let hex: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    headers["x-sluice-signature"] == format!("sha256={hex}").as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_are_signed_retried_and_dead_lettered_after_their_last_attempt() {
    let (hooks, received) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        EmbeddedStore::open(EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync })
            .unwrap(),
    );
    let push = PushConfig {
        request_timeout_ms: 2_000,
        connect_timeout_ms: 1_000,
        endpoint_concurrency_max: 4,
        refresh_ms: 50,
        breaker: BreakerConfig { calls_min: 100_000, ..BreakerConfig::default() },
    };
    let jobs = JobsConfig { callback_secret: Some(SECRET.into()), callback_policy: fast_policy() };
    let arns = Arns { region: "us-east-1".into(), account: "000000000000".into() };
    let services = Services::new(
        store.clone() as Arc<dyn Store>,
        Arc::new(SystemClock),
        ServicesConfig { push, jobs, ..ServicesConfig::new(arns) },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(sluice_server::run_services(listener, services, ServerConfig::default(), async {
        let _ = stopped.await;
    }));
    let http = reqwest::Client::new();
    let call = async |path: &str, body: Value| -> Value {
        let response = http.post(format!("{base}{path}")).json(&body).send().await.unwrap();
        assert!(response.status().is_success(), "{path}: {}", response.status());
        response.json().await.unwrap()
    };

    let flaky = call("/v1/jobs", json!({ "queue": "q", "type": "t", "callback_url": format!("{hooks}/flaky") })).await;
    let dead = call("/v1/jobs", json!({ "queue": "q", "type": "t", "callback_url": format!("{hooks}/dead") })).await;
    let claimed = call("/v1/jobs/claim", json!({ "queues": ["q"], "max": 2 })).await;
    for job in claimed["jobs"].as_array().unwrap() {
        let id = job["id"].as_str().unwrap();
        call(&format!("/v1/jobs/{id}/complete"), json!({ "lease": job["lease"], "result": { "ok": id } })).await;
    }

    // The flaky endpoint: two failures, then delivered; every POST signed, each the final view.
    let hits = eventually("the flaky endpoint's success", async || {
        let hits: Vec<_> = received.hits.lock().unwrap().iter().filter(|h| h.0 == "/flaky").cloned().collect();
        hits.iter().any(|h| h.3 == 200).then_some(hits)
    })
    .await;
    assert_eq!(hits.iter().map(|h| h.3).collect::<Vec<_>>(), [503, 503, 200]);
    for (_, headers, body, _) in &hits {
        assert!(signed(SECRET, headers, body), "a valid signature");
        let view: Value = serde_json::from_slice(body).unwrap();
        assert_eq!((view["id"].clone(), view["status"].clone()), (flaky["id"].clone(), json!("succeeded")));
        assert_eq!(view["result"], json!({ "ok": flaky["id"] }));
        assert_eq!(headers["x-sluice-job-id"], flaky["id"].as_str().unwrap());
        assert_eq!(headers["x-sluice-job-status"], "succeeded");
        assert_eq!(headers["content-type"], "application/json");
    }

    // The dead endpoint: the first attempt and 3 retries, then the dead-letter queue.
    let parked = eventually("the dead-lettered webhook", async || {
        let messages = store.peek(JOB_CALLBACK_DLQ, 10).await.ok()?;
        (!messages.is_empty()).then_some(messages)
    })
    .await;
    assert_eq!(parked.len(), 1);
    let callback = JobCallback::from_body(&parked[0].message.content.body).unwrap();
    assert_eq!((callback.job_id.as_str(), callback.status.as_str()), (dead["id"].as_str().unwrap(), "succeeded"));
    let error = &parked[0].message.content.attributes["SluicePushError"];
    assert!(format!("{error:?}").contains("500"), "{error:?}");
    assert_eq!(received.hits.lock().unwrap().iter().filter(|h| h.0 == "/dead").count(), 4);
    eventually("an empty callback queue", async || {
        store.peek(JOB_CALLBACK_QUEUE, 1).await.ok()?.is_empty().then_some(())
    })
    .await;

    let secret: Value = http.get(format!("{base}/v1/jobs/callback-secret")).send().await.unwrap().json().await.unwrap();
    assert_eq!(secret["secret"], SECRET);
    let _ = stop.send(());
    server.await.unwrap().unwrap();
    store.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_configured_secret_every_node_signs_with_one_made_once() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        EmbeddedStore::open(EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync })
            .unwrap(),
    );
    let node = || Jobs::new(store.clone(), Arc::new(SystemClock), JobsConfig::default());
    let (a, b) = (node(), node());
    let first = a.callback_secret().await.unwrap();
    assert_eq!(first.len(), 64);
    assert!(first.bytes().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(b.callback_secret().await.unwrap(), first, "the second node reads the first one's");
    assert_eq!(a.callback_secret().await.unwrap(), first);
}
