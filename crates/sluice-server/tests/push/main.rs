//! The HTTP/S push worker against local receivers on port 0 that fail, hang or succeed on
//! purpose: confirmation then signed notifications with SNS's headers, the retry schedule and
//! the dead-letter queue, the circuit breaker opening and recovering with one probe, and a
//! hanging endpoint not delaying a healthy one on the same topic.
//!
//! Each test runs a real server (`run_with_push`) on port 0 with short breaker figures, and
//! asserts counts, order and lower bounds of gaps (which the delays guarantee), never upper
//! bounds that a loaded machine could miss, except where the point is that nothing waits.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use sluice_core::breaker::BreakerConfig;
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_server::{LAST_ERROR_ATTRIBUTE, PushConfig, SIGNATURE_HEADER, ServerConfig, TIMESTAMP_HEADER};
use sluice_store::Store;
use tempfile::TempDir;

/// How long a test waits for something that should happen (generous: CI machines are slow).
const WAIT_MS: u64 = 20_000;

fn config() -> PushConfig {
    PushConfig {
        request_timeout_ms: 2_000,
        connect_timeout_ms: 1_000,
        endpoint_concurrency_max: 4,
        refresh_ms: 50,
        // Failure-free by default: tests of the breaker pass their own figures.
        breaker: BreakerConfig {
            window_ms: 1_000,
            calls_min: 100_000,
            failure_percent: 100,
            ..BreakerConfig::default()
        },
    }
}

// ----- the server ------------------------------------------------------------------------

struct Server {
    base: String,
    client: reqwest::Client,
    store: Arc<EmbeddedStore>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    _dir: TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        self.store.close();
    }
}

impl Server {
    async fn start(push: PushConfig) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Arc::new(
            EmbeddedStore::open(EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync })
                .expect("open embedded store"),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let shared = store.clone() as Arc<dyn Store>;
        tokio::spawn(async move {
            let shutdown = async move {
                let _ = rx.await;
            };
            sluice_server::run_with_push(listener, shared, ServerConfig::default(), push, shutdown).await
        });
        Server { base, client: reqwest::Client::new(), store, shutdown: Some(tx), _dir: dir }
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let request = match method {
            "GET" => self.client.get(&url),
            _ => self.client.post(&url),
        };
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        let response = request.send().await.expect("server answers");
        let status = response.status();
        let text = response.text().await.expect("body");
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    async fn publish(&self, topic: &str, body: &str) -> String {
        let answer = self
            .call("POST", &format!("/v1/topics/{topic}/publish"), Some(json!({ "messages": [{ "body": body }] })))
            .await;
        answer["results"][0]["id"].as_str().expect("message id").to_string()
    }

    /// Subscribes `url`, answers its confirmation through `SubscribeURL`, and returns the
    /// subscription as the native API shows it.
    async fn subscribe(&self, topic: &str, url: &str, receiver: &Receiver, settings: Value) -> Value {
        let mut request = json!({ "endpoint": url });
        if let (Some(request), Some(settings)) = (request.as_object_mut(), settings.as_object()) {
            request.extend(settings.clone());
        }
        let sub = self.call("POST", &format!("/v1/topics/{topic}/subscriptions"), Some(request)).await;
        assert_eq!(sub["pending_confirmation"], json!(true), "{sub}");
        let path = url.trim_start_matches(&receiver.base);
        let confirmation = receiver
            .wait_for(|hits| hits.iter().find(|h| h.path == path && h.kind() == "SubscriptionConfirmation").cloned())
            .await;
        assert!(confirmation.headers.get("x-amz-sns-subscription-arn").is_none(), "SNS sends none on confirmations");
        let envelope: Value = serde_json::from_str(&confirmation.body).expect("confirmation JSON");
        let subscribe_url = envelope["SubscribeURL"].as_str().expect("SubscribeURL");
        let answer = self.client.get(subscribe_url).send().await.expect("confirm");
        assert!(answer.status().is_success(), "ConfirmSubscription: {}", answer.text().await.unwrap_or_default());
        let id = sub["id"].as_str().expect("id");
        let confirmed = self.call("GET", &format!("/v1/topics/{topic}/subscriptions/{id}"), None).await;
        assert_eq!(confirmed["pending_confirmation"], json!(false), "{confirmed}");
        confirmed
    }
}

// ----- the receiver ----------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Hit {
    path: String,
    headers: HeaderMap,
    body: String,
    at: Instant,
}

impl Hit {
    fn kind(&self) -> &str {
        self.headers.get("x-amz-sns-message-type").and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }
}

/// How a receiver answers notifications (confirmations always get 200 at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Ok,
    /// 500.
    Fail,
    /// Accepts the request and never answers.
    Hang,
}

#[derive(Default)]
struct ReceiverState {
    hits: Mutex<Vec<Hit>>,
    answer: Mutex<Option<Answer>>,
    /// Times each answer left, in arrival order of the requests answered.
    answered: Mutex<Vec<Instant>>,
    delay_ms: Mutex<u64>,
}

#[derive(Clone)]
struct Receiver {
    base: String,
    state: Arc<ReceiverState>,
}

impl Receiver {
    async fn start(answer: Answer) -> Receiver {
        let state = Arc::new(ReceiverState::default());
        *state.answer.lock().unwrap() = Some(answer);
        let app = Router::new().fallback(receive).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr: SocketAddr = listener.local_addr().expect("address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { base: format!("http://{addr}"), state }
    }

    fn endpoint(&self) -> String {
        self.base.trim_start_matches("http://").to_string()
    }

    fn set(&self, answer: Answer) {
        *self.state.answer.lock().unwrap() = Some(answer);
    }

    fn hits(&self) -> Vec<Hit> {
        self.state.hits.lock().unwrap().clone()
    }

    fn notifications(&self) -> Vec<Hit> {
        self.hits().into_iter().filter(|h| h.kind() == "Notification").collect()
    }

    /// Polls until `found` returns something.
    async fn wait_for<T>(&self, found: impl Fn(&[Hit]) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
        loop {
            if let Some(value) = found(&self.hits()) {
                return value;
            }
            assert!(Instant::now() < deadline, "timed out; the receiver saw {:#?}", self.hits());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn receive(State(state): State<Arc<ReceiverState>>, uri: Uri, headers: HeaderMap, body: String) -> StatusCode {
    let hit = Hit { path: uri.path().to_string(), headers, body, at: Instant::now() };
    let confirmation = hit.kind() == "SubscriptionConfirmation";
    state.hits.lock().unwrap().push(hit);
    if confirmation {
        return StatusCode::OK;
    }
    let delay = *state.delay_ms.lock().unwrap();
    tokio::time::sleep(Duration::from_millis(delay)).await;
    let answer = state.answer.lock().unwrap().unwrap_or(Answer::Ok);
    let status = match answer {
        Answer::Ok => StatusCode::OK,
        Answer::Fail => StatusCode::INTERNAL_SERVER_ERROR,
        Answer::Hang => std::future::pending().await,
    };
    state.answered.lock().unwrap().push(Instant::now());
    status
}

fn verify(secret: &str, hit: &Hit) {
    let timestamp = hit.header(TIMESTAMP_HEADER);
    let seconds: u64 = timestamp.parse().expect("timestamp in Unix seconds");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    assert!(seconds.abs_diff(now) < 300, "timestamp {seconds} vs now {now}");
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(format!("{timestamp}.{}", hit.body).as_bytes());
    let expected: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hit.header(SIGNATURE_HEADER), format!("sha256={expected}"));
}

// ----- the tests -------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmed_subscriptions_get_signed_notifications_with_sns_headers() {
    let server = Server::start(config()).await;
    let receiver = Receiver::start(Answer::Ok).await;
    server.call("POST", "/v1/topics", Some(json!({ "name": "t" }))).await;

    // Before confirming, the subscription gets its confirmation and nothing else.
    let url = format!("{}/hook", receiver.base);
    let sub = server.call("POST", "/v1/topics/t/subscriptions", Some(json!({ "endpoint": url }))).await;
    receiver.wait_for(|hits| hits.iter().find(|h| h.kind() == "SubscriptionConfirmation").cloned()).await;
    server.publish("t", "before confirming").await;
    let sub = {
        // Subscribing again sends the confirmation again; answer that one.
        let confirmed = server.subscribe("t", &url, &receiver, json!({})).await;
        assert_eq!(confirmed["id"], sub["id"]);
        confirmed
    };
    let raw = server.subscribe("t", &format!("{}/raw", receiver.base), &receiver, json!({ "raw": true })).await;

    let id = server.publish("t", "hello").await;
    let hits = receiver
        .wait_for(|_| {
            let n = receiver.notifications();
            (n.len() >= 2).then_some(n)
        })
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.notifications().len(), 2, "one per subscription, nothing from before confirming: {hits:#?}");

    let secret = sub["signing_secret"].as_str().expect("signing secret shown");
    assert_eq!(secret.len(), 64);
    let enveloped = hits.iter().find(|h| h.path == "/hook").expect("enveloped delivery");
    let envelope: Value = serde_json::from_str(&enveloped.body).expect("envelope JSON");
    assert_eq!(envelope["Message"], "hello");
    assert_eq!(envelope["Type"], "Notification");
    assert_eq!(enveloped.header("x-amz-sns-message-id"), envelope["MessageId"].as_str().unwrap());
    assert_eq!(enveloped.header("x-amz-sns-topic-arn"), "arn:aws:sns:us-east-1:000000000000:t");
    assert_eq!(enveloped.header("x-amz-sns-subscription-arn"), sub["arn"].as_str().unwrap());
    assert_eq!(enveloped.header("content-type"), "text/plain; charset=UTF-8");
    assert!(enveloped.headers.get("x-amz-sns-rawdelivery").is_none());
    verify(secret, enveloped);

    let raw_hit = hits.iter().find(|h| h.path == "/raw").expect("raw delivery");
    assert_eq!(raw_hit.body, "hello");
    assert_eq!(raw_hit.header("x-amz-sns-rawdelivery"), "true");
    assert_eq!(raw_hit.header("x-amz-sns-subscription-arn"), raw["arn"].as_str().unwrap());
    assert!(!id.is_empty());
    verify(raw["signing_secret"].as_str().expect("secret"), raw_hit);
    assert_ne!(raw["signing_secret"], sub["signing_secret"], "a secret per subscription");

    // The tampered body does not verify.
    let mut forged = raw_hit.clone();
    forged.body.push('!');
    let result = std::panic::catch_unwind(|| verify(raw["signing_secret"].as_str().unwrap(), &forged));
    assert!(result.is_err(), "a changed body must not verify");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_retry_on_the_policy_schedule_then_dead_letter_with_the_last_error() {
    let server = Server::start(config()).await;
    let receiver = Receiver::start(Answer::Fail).await;
    server.call("POST", "/v1/topics", Some(json!({ "name": "t" }))).await;
    server.call("POST", "/v1/queues", Some(json!({ "name": "dlq" }))).await;
    // Three attempts: the first, one retry at once, one after a second.
    let policy = json!({ "healthyRetryPolicy": {
        "numRetries": 2, "numNoDelayRetries": 1, "numMinDelayRetries": 1,
        "minDelayTarget": 1, "maxDelayTarget": 1
    }});
    let url = format!("{}/hook", receiver.base);
    server.subscribe("t", &url, &receiver, json!({ "delivery_policy": policy, "dead_letter_queue": "dlq" })).await;

    server.publish("t", "doomed").await;
    let dead = {
        let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
        loop {
            let answer = server.call("POST", "/v1/queues/dlq/receive", Some(json!({ "max": 10 }))).await;
            let messages = answer["messages"].as_array().cloned().unwrap_or_default();
            if let Some(first) = messages.into_iter().next() {
                break first;
            }
            assert!(Instant::now() < deadline, "nothing dead-lettered; receiver saw {:#?}", receiver.hits());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let attempts = receiver.notifications();
    assert_eq!(attempts.len(), 3, "the first attempt and two retries: {attempts:#?}");
    let ids: Vec<&str> = attempts.iter().map(|h| h.header("x-amz-sns-message-id")).collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "the same delivery each time: {ids:?}");
    // The second retry waited the policy's minimum delay (1 s); the first none.
    let gap = attempts[2].at - attempts[1].at;
    assert!(gap >= Duration::from_millis(900), "second retry after {gap:?}");

    let envelope: Value = serde_json::from_str(dead["body"].as_str().expect("body")).expect("envelope");
    assert_eq!(envelope["Message"], "doomed");
    let error = dead["attributes"][LAST_ERROR_ATTRIBUTE]["value"].as_str().expect("last error attribute");
    assert!(error.contains("500"), "{error}");
    // Acked from the push queue: nothing comes after the dead-lettering.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(receiver.notifications().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_breaker_opens_on_failures_and_closes_after_one_probe() {
    let cooldown_ms = 800;
    let push = PushConfig {
        breaker: BreakerConfig {
            window_ms: 5_000,
            calls_min: 3,
            failure_percent: 50,
            cooldown_ms,
            probe_timeout_ms: 5_000,
        },
        ..config()
    };
    let server = Server::start(push).await;
    let receiver = Receiver::start(Answer::Fail).await;
    *receiver.state.delay_ms.lock().unwrap() = 100;
    server.call("POST", "/v1/topics", Some(json!({ "name": "t" }))).await;
    // Retries at once, many of them: only the breaker spaces the calls.
    let policy = json!({ "healthyRetryPolicy": { "numRetries": 50, "numNoDelayRetries": 50 } });
    let sub = server
        .subscribe("t", &format!("{}/hook", receiver.base), &receiver, json!({ "delivery_policy": policy }))
        .await;
    let id = sub["id"].as_str().unwrap();
    let path = format!("/v1/topics/t/subscriptions/{id}");
    let view = || server.call("GET", &path, None);

    for i in 0..5 {
        server.publish("t", &format!("m{i}")).await;
    }
    // Calls fail until the breaker opens.
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    while view().await["breaker"] != json!("open") {
        assert!(Instant::now() < deadline, "the breaker never opened: {:#?}", receiver.notifications().len());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let opened = Instant::now();
    let metrics = server.client.get(format!("{}/metrics", server.base)).send().await.unwrap().text().await.unwrap();
    let gauge = format!("sluice_push_breaker_state{{endpoint=\"{}\"}} 1", receiver.endpoint());
    assert!(metrics.contains(&gauge), "{gauge} not in metrics");
    // Calls already in flight when it opened may still finish; after them, none until the
    // cooldown ends.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = receiver.notifications().len();
    receiver.set(Answer::Ok);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(view().await["breaker"], json!("open"));
    assert_eq!(receiver.notifications().len(), before, "nothing is attempted while open");

    // After the cooldown, one probe alone; its success closes the breaker and the rest flow.
    let all = receiver
        .wait_for(|_| {
            let answered = receiver.state.answered.lock().unwrap().len();
            let hits = receiver.notifications();
            (answered >= hits.len() && hits.len() >= before + 5).then_some(hits)
        })
        .await;
    let probe = &all[before];
    assert!(
        probe.at - opened >= Duration::from_millis(cooldown_ms - 350),
        "probe {:?} after opening",
        probe.at - opened
    );
    let probe_answered = receiver.state.answered.lock().unwrap()[before];
    let second = &all[before + 1];
    assert!(second.at >= probe_answered, "a second call went out before the probe was answered");
    assert_eq!(view().await["breaker"], json!("closed"));
    let bodies: std::collections::BTreeSet<String> = all[before..]
        .iter()
        .map(|h| serde_json::from_str::<Value>(&h.body).unwrap()["Message"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(bodies.len(), 5, "every message delivered after recovery: {bodies:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_endpoint_does_not_delay_a_healthy_one() {
    // Longer than the test takes: the hanging endpoint's calls never end on their own.
    let push = PushConfig { request_timeout_ms: 60_000, endpoint_concurrency_max: 2, ..config() };
    let server = Server::start(push).await;
    let dead = Receiver::start(Answer::Hang).await;
    let healthy = Receiver::start(Answer::Ok).await;
    server.call("POST", "/v1/topics", Some(json!({ "name": "t" }))).await;
    server.subscribe("t", &format!("{}/dead", dead.base), &dead, json!({})).await;
    server.subscribe("t", &format!("{}/ok", healthy.base), &healthy, json!({})).await;

    let started = Instant::now();
    let count = 30;
    for i in 0..count {
        server.publish("t", &format!("m{i}")).await;
    }
    healthy.wait_for(|_| (healthy.notifications().len() >= count).then_some(())).await;
    let took = started.elapsed();
    // The hanging endpoint holds both of its permits, forever.
    assert_eq!(dead.notifications().len(), 2, "bounded by the endpoint's concurrency");
    assert!(took < Duration::from_millis(10_000), "the healthy endpoint took {took:?}");
}
