//! The HTTP/S push worker against local receivers on port 0 that fail, hang or succeed on
//! purpose: confirmation then signed notifications with SNS's headers, the retry schedule and
//! the dead-letter queue, the circuit breaker opening and recovering with one probe, and a
//! hanging endpoint not delaying a healthy one on the same topic.
//!
//! Each test runs a real server on port 0 over the real embedded store. The schedule and the
//! breaker run on a [`ManualClock`] (`Server::start_on`, with the store wrapped so that retry
//! delays follow it too, see `clocked.rs`): the receiver records the manual time of every
//! POST, the test moves the clock only once the worker has handed the delivery back (its nack
//! is logged) or is asleep on the clock, and asserts every time exactly, so nothing waits for
//! a delay in real time and nothing depends on the machine's speed. The test of a hanging
//! endpoint runs on the system clock, since its point is that nothing waits in real time.

mod alerts;
mod clocked;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sluice_core::breaker::BreakerConfig;
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_server::{
    Clock, LAST_ERROR_ATTRIBUTE, ManualClock, PushConfig, SIGNATURE_HEADER, ServerConfig, SystemClock, TIMESTAMP_HEADER,
};
use sluice_store::Store;
use tempfile::TempDir;

use clocked::ClockedStore;
use sluice_store::prelude::*;

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

/// Where the manual clock starts: 2026-01-01T00:00:00Z, a whole number of breaker buckets.
const T0_MS: u64 = 1_767_225_600_000;

/// Polls `found` every few milliseconds until it returns something, for at most `WAIT_MS`.
async fn eventually<T>(what: &str, mut found: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    loop {
        if let Some(value) = found().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// An SNS healthy retry policy, with its schedule worked out here from SNS's description
/// rather than from the server's code: retries at once, then after the minimum delay, then
/// backing off exponentially from the minimum delay with full jitter up to the maximum delay,
/// then after the maximum delay.
struct RetryPolicy {
    retries: u32,
    no_delay: u32,
    min_delay: u32,
    max_delay: u32,
    min_delay_target_s: u64,
    max_delay_target_s: u64,
}

impl RetryPolicy {
    fn json(&self) -> Value {
        json!({ "healthyRetryPolicy": {
            "numRetries": self.retries,
            "numNoDelayRetries": self.no_delay,
            "numMinDelayRetries": self.min_delay,
            "numMaxDelayRetries": self.max_delay,
            "minDelayTarget": self.min_delay_target_s,
            "maxDelayTarget": self.max_delay_target_s,
        }})
    }

    /// The wait after attempt `attempt` (1 for the first) of the delivery `id` failed; `None`
    /// when it was the last.
    fn delay_ms(&self, id: &str, attempt: u32) -> Option<u64> {
        let retry = attempt - 1;
        let (min, max) = (self.min_delay_target_s * 1_000, self.max_delay_target_s * 1_000);
        if retry >= self.retries {
            return None;
        }
        if retry < self.no_delay {
            return Some(0);
        }
        if retry < self.no_delay + self.min_delay {
            return Some(min);
        }
        if retry >= self.retries - self.max_delay {
            return Some(max);
        }
        // Backoff step n waits the minimum plus a uniform draw in 0..=min(min·2^n, max − min);
        // the draw is the first 8 bytes (little-endian) of SHA-256(id ‖ attempt as u32 LE),
        // scaled without modulo.
        let n = retry - self.no_delay - self.min_delay;
        let bound = min.checked_shl(n).unwrap_or(u64::MAX).min(max - min);
        let digest =
            <Sha256 as Digest>::new().chain_update(id.as_bytes()).chain_update(attempt.to_le_bytes()).finalize();
        let draw = u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"));
        let jitter = u64::try_from((u128::from(draw) * (u128::from(bound) + 1)) >> 64).expect("at most the bound");
        Some(min + jitter)
    }
}

// ----- the server ------------------------------------------------------------------------

struct Server {
    base: String,
    client: reqwest::Client,
    store: Arc<EmbeddedStore>,
    /// The manual time each nack of the worker is due at (`clocked.rs`; empty on the system
    /// clock).
    nacks: Arc<Mutex<Vec<u64>>>,
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
    /// A server on the system clock.
    async fn start(push: PushConfig) -> Server {
        Server::start_with(push, None).await
    }

    /// A server whose push worker, and the delays of its retries, run on `clock`.
    async fn start_on(push: PushConfig, clock: &ManualClock) -> Server {
        Server::start_with(push, Some(clock.clone())).await
    }

    async fn start_with(push: PushConfig, clock: Option<ManualClock>) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Arc::new(
            EmbeddedStore::open(EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync })
                .expect("open embedded store"),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (shared, clock, nacks): (Arc<dyn Store>, Arc<dyn Clock>, _) = match clock {
            Some(clock) => {
                let clocked = ClockedStore::new(store.clone(), clock.clone());
                let nacks = clocked.nacks();
                (clocked.into_store(), Arc::new(clock), nacks)
            }
            None => (store.clone(), Arc::new(SystemClock), Arc::default()),
        };
        tokio::spawn(async move {
            let shutdown = async move {
                let _ = rx.await;
            };
            sluice_server::run_with_clock(listener, shared, ServerConfig::default(), push, clock, shutdown).await
        });
        Server { base, client: reqwest::Client::new(), store, nacks, shutdown: Some(tx), _dir: dir }
    }

    /// Whether `queue` holds no message at all, in flight or not.
    async fn queue_empty(&self, queue: &str) -> bool {
        self.store.peek(queue, 1).await.expect("peek").is_empty()
    }

    /// How many nacks the worker made (`clocked.rs`).
    fn nack_count(&self) -> usize {
        self.nacks.lock().unwrap().len()
    }

    fn nacks(&self) -> Vec<u64> {
        self.nacks.lock().unwrap().clone()
    }

    /// The breaker state the API shows for a subscription (`null` before its first call).
    async fn breaker(&self, topic: &str, id: &str) -> Value {
        self.call("GET", &format!("/v1/topics/{topic}/subscriptions/{id}"), None).await["breaker"].clone()
    }

    async fn metrics(&self) -> String {
        let response = self.client.get(format!("{}/metrics", self.base)).send().await.expect("metrics");
        response.text().await.expect("metrics text")
    }

    /// The value of the series `name` with (at least) these labels, if it is shown.
    async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let text = self.metrics().await;
        let line = text.lines().find(|line| {
            line.strip_prefix(name).is_some_and(|rest| rest.starts_with('{'))
                && labels.iter().all(|(k, v)| line.contains(&format!("{k}=\"{v}\"")))
        })?;
        line.rsplit(' ').next()?.parse().ok()
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
    /// The manual clock's time when the request arrived, for a receiver given one.
    at_ms: Option<u64>,
}

impl Hit {
    fn kind(&self) -> &str {
        self.headers.get("x-amz-sns-message-type").and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    /// The notification's message (from the SNS envelope).
    fn message(&self) -> String {
        let envelope: Value = serde_json::from_str(&self.body).expect("envelope JSON");
        envelope["Message"].as_str().expect("Message").to_string()
    }

    fn at_ms(&self) -> u64 {
        self.at_ms.expect("a receiver on the manual clock")
    }
}

/// How a receiver answers notifications (confirmations always get 200 at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Ok,
    /// 500.
    Fail,
    /// 503.
    Unavailable,
    /// Accepts the request and never answers.
    Hang,
}

#[derive(Default)]
struct ReceiverState {
    hits: Mutex<Vec<Hit>>,
    answer: Mutex<Option<Answer>>,
    clock: Option<ManualClock>,
    /// While set, each notification waits for a permit of `gate` before it is answered.
    gated: Mutex<bool>,
    gate: Gate,
}

/// Permits for held notifications: none until `Receiver::open_gate`.
struct Gate(tokio::sync::Semaphore);

impl Default for Gate {
    fn default() -> Self {
        Gate(tokio::sync::Semaphore::new(0))
    }
}

#[derive(Clone)]
struct Receiver {
    base: String,
    state: Arc<ReceiverState>,
}

impl Receiver {
    async fn start(answer: Answer) -> Receiver {
        Receiver::start_with(answer, None).await
    }

    /// A receiver that records `clock`'s time at each request.
    async fn start_on(answer: Answer, clock: &ManualClock) -> Receiver {
        Receiver::start_with(answer, Some(clock.clone())).await
    }

    async fn start_with(answer: Answer, clock: Option<ManualClock>) -> Receiver {
        let state = Arc::new(ReceiverState { clock, ..ReceiverState::default() });
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

    /// Holds every notification from now on until `release`d (and answers it as set then).
    fn close_gate(&self) {
        *self.state.gated.lock().unwrap() = true;
    }

    /// Stops holding new notifications and lets `held` held ones be answered.
    fn open_gate(&self, held: usize) {
        *self.state.gated.lock().unwrap() = false;
        self.state.gate.0.add_permits(held);
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
    let at_ms = state.clock.as_ref().map(Clock::now_ms);
    let hit = Hit { path: uri.path().to_string(), headers, body, at_ms };
    let confirmation = hit.kind() == "SubscriptionConfirmation";
    let gated = *state.gated.lock().unwrap();
    state.hits.lock().unwrap().push(hit);
    if confirmation {
        return StatusCode::OK;
    }
    if gated {
        state.gate.0.acquire().await.expect("gate open").forget();
    }
    let answer = state.answer.lock().unwrap().unwrap_or(Answer::Ok);
    match answer {
        Answer::Ok => StatusCode::OK,
        Answer::Fail => StatusCode::INTERNAL_SERVER_ERROR,
        Answer::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Answer::Hang => std::future::pending().await,
    }
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
async fn retries_happen_exactly_on_the_policy_schedule_then_dead_letter_with_the_last_error() {
    let clock = ManualClock::new(T0_MS);
    let server = Server::start_on(config(), &clock).await;
    let receiver = Receiver::start_on(Answer::Fail, &clock).await;
    server.call("POST", "/v1/topics", Some(json!({ "name": "t" }))).await;
    server.call("POST", "/v1/queues", Some(json!({ "name": "dlq" }))).await;
    // Every phase of SNS's policy: one retry at once, one after the minimum delay, three of
    // backoff with full jitter, one after the maximum delay; seven attempts in all.
    let policy = RetryPolicy {
        retries: 6,
        no_delay: 1,
        min_delay: 1,
        max_delay: 1,
        min_delay_target_s: 2,
        max_delay_target_s: 40,
    };
    let url = format!("{}/hook", receiver.base);
    let settings = json!({ "delivery_policy": policy.json(), "dead_letter_queue": "dlq" });
    let sub = server.subscribe("t", &url, &receiver, settings).await;
    let push_queue = sub["queue"].as_str().expect("delivery queue").to_string();

    server.publish("t", "doomed").await;
    // The delivery waits in the subscription's queue; the jitter is drawn from its id there.
    let id = eventually("the delivery in its queue", async || {
        let peeked = server.store.peek(&push_queue, 10).await.expect("peek");
        peeked.into_iter().find_map(|p| {
            let delivery: Value = serde_json::from_slice(&p.message.content.body).ok()?;
            (delivery["message_type"] == "Notification").then(|| p.message.meta.id.to_string())
        })
    })
    .await;

    // Each time the worker hands the failed delivery back, move the clock to when it is due.
    let attempts = policy.retries as usize + 1;
    for attempt in 1..attempts {
        eventually(&format!("attempt {attempt}"), async || (receiver.notifications().len() >= attempt).then_some(()))
            .await;
        let handed_back = eventually(&format!("the nack of attempt {attempt}"), async || {
            if server.nack_count() >= attempt {
                return Some(true);
            }
            (!server.queue_empty("dlq").await).then_some(false)
        })
        .await;
        assert!(handed_back, "dead-lettered after {attempt} attempts instead of {attempts}");
        if attempt + 1 == attempts {
            // The last attempt fails differently, so that the dead letter's error is its own.
            receiver.set(Answer::Unavailable);
        }
        clock.advance_to(server.nacks()[attempt - 1]);
    }
    let dead = eventually("the dead-lettered delivery", async || {
        assert!(server.nack_count() < attempts, "a nack after the last attempt: {:?}", server.nacks());
        let answer = server.call("POST", "/v1/queues/dlq/receive", Some(json!({ "max": 10 }))).await;
        answer["messages"].as_array().and_then(|m| m.first()).cloned()
    })
    .await;

    let hits = receiver.notifications();
    let times: Vec<u64> = hits.iter().map(Hit::at_ms).collect();
    let mut expected = vec![T0_MS];
    for attempt in 1..attempts {
        let delay = policy.delay_ms(&id, attempt as u32).expect("a retry before the last attempt");
        expected.push(expected[attempt - 1] + delay);
    }
    assert_eq!(policy.delay_ms(&id, attempts as u32), None, "the last attempt is the last");
    assert_eq!(times, expected, "attempt times of delivery {id} (T0 = {T0_MS})");
    let ids: Vec<&str> = hits.iter().map(|h| h.header("x-amz-sns-message-id")).collect();
    assert!(ids.iter().all(|i| *i == ids[0]), "the same message each time: {ids:?}");

    let envelope: Value = serde_json::from_str(dead["body"].as_str().expect("body")).expect("envelope");
    assert_eq!(envelope["Message"], "doomed");
    let error = dead["attributes"][LAST_ERROR_ATTRIBUTE]["value"].as_str().expect("last error attribute");
    assert_eq!(error, "the endpoint answered 503 Service Unavailable");
    // Acked from the delivery queue, no timer left: nothing can come after the dead-lettering.
    eventually("the delivery queue to empty", async || server.queue_empty(&push_queue).await.then_some(())).await;
    assert_eq!(clock.deadlines_ms(), Vec::<u64>::new());
    assert_eq!(receiver.notifications().len(), attempts);
    assert_eq!(server.nack_count(), attempts - 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_breaker_opens_at_the_failure_rate_fails_fast_and_closes_after_one_probe() {
    let breaker = BreakerConfig {
        window_ms: 10_000,
        calls_min: 3,
        failure_percent: 60,
        cooldown_ms: 5_000,
        probe_timeout_ms: 60_000,
    };
    // One call at a time, so that calls happen in the order the test makes them.
    let push = PushConfig { endpoint_concurrency_max: 1, breaker, ..config() };
    let clock = ManualClock::new(T0_MS);
    let server = Server::start_on(push, &clock).await;
    let receiver = Receiver::start_on(Answer::Ok, &clock).await;
    let endpoint = receiver.endpoint();
    server.call("POST", "/v1/topics", Some(json!({ "name": "t" }))).await;
    // Every retry one second later.
    let policy = json!({ "healthyRetryPolicy": { "numRetries": 10, "minDelayTarget": 1, "maxDelayTarget": 1 } });
    let url = format!("{}/hook", receiver.base);
    let sub = server.subscribe("t", &url, &receiver, json!({ "delivery_policy": policy })).await;
    let id = sub["id"].as_str().expect("id");
    let push_queue = sub["queue"].as_str().expect("delivery queue");
    let settled = async || server.queue_empty(push_queue).await.then_some(());

    // The confirmation succeeded at T0. At T1 it has left the window (a whole window later, T0
    // being a whole number of buckets), so from T1 the window holds only what follows.
    eventually("the confirmation to be acked", settled).await;
    let t1 = T0_MS + 10_000;
    clock.advance_to(t1);

    // Two successes, then failures: the third call in the window is the first that may open
    // the breaker, and it opens at the first failure that brings the rate to 60 %.
    for body in ["a1", "a2"] {
        server.publish("t", body).await;
    }
    eventually("a1 and a2", async || (receiver.notifications().len() == 2).then_some(())).await;
    eventually("a1 and a2 to be acked", settled).await;
    assert_eq!(server.breaker("t", id).await, json!("closed"));
    receiver.set(Answer::Fail);
    server.publish("t", "b").await;
    // 1 failure in 3 calls (33 %), then 2 in 4 (50 %): closed, and b retried a second later.
    for (calls, retry_at) in [(3, t1 + 1_000), (4, t1 + 2_000)] {
        eventually(&format!("call {calls}"), async || (receiver.notifications().len() == calls).then_some(())).await;
        eventually("the nack", async || (server.nack_count() == calls - 2).then_some(())).await;
        assert_eq!(server.breaker("t", id).await, json!("closed"), "after call {calls}");
        assert_eq!(server.nacks().last(), Some(&retry_at));
        if calls == 4 {
            // The next call is held until c is published (below); closed before the clock
            // lets that call go.
            receiver.close_gate();
        }
        clock.advance_to(retry_at);
    }
    // The third failure (3 in 5: 60 %) opens it. c is published while that call is held, so
    // that the worker, free again once the call fails, takes c and must turn it back.
    eventually("call 5", async || (receiver.notifications().len() == 5).then_some(())).await;
    server.publish("t", "c").await;
    receiver.open_gate(1);
    let opened = t1 + 2_000;
    let cooldown_end = opened + 5_000;
    eventually("b's nack and c's", async || (server.nack_count() == 4).then_some(())).await;
    // b is retried a second later; c, refused without a call, waits for the cooldown's end.
    assert_eq!(server.nacks()[2..], [opened + 1_000, cooldown_end], "due times of b's retry and of c");
    // Both held, and the subscription asleep until the cooldown ends.
    eventually("the subscription to sleep until the cooldown ends", async || {
        (clock.deadlines_ms() == [opened + 1_000, cooldown_end, cooldown_end]).then_some(())
    })
    .await;
    assert_eq!(server.breaker("t", id).await, json!("open"));
    assert_eq!(server.metric("sluice_push_breaker_state", &[("endpoint", &endpoint)]).await, Some(1.0));
    assert_eq!(server.metric("sluice_push_breaker_opened_total", &[("endpoint", &endpoint)]).await, Some(1.0));
    let rejected = [("endpoint", endpoint.as_str()), ("outcome", "rejected")];
    assert_eq!(server.metric("sluice_push_deliveries_total", &rejected).await, Some(1.0), "c failed fast");

    // While open, nothing reaches the endpoint, though b is due again and visible.
    clock.advance_to(opened + 1_000);
    eventually("b visible again", async || {
        let view = server.store.get_queue(push_queue).await.expect("queue");
        (view.stats.visible == 1).then_some(())
    })
    .await;
    clock.advance_to(cooldown_end - 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(receiver.notifications().len(), 5, "a call while the breaker is open");
    assert_eq!(server.nack_count(), 4);
    assert_eq!(server.breaker("t", id).await, json!("open"));

    // At the cooldown's end exactly one probe goes; the breaker is half-open while it is out.
    receiver.set(Answer::Ok);
    receiver.close_gate();
    clock.advance_to(cooldown_end);
    eventually("the probe", async || (receiver.notifications().len() == 6).then_some(())).await;
    assert_eq!(server.breaker("t", id).await, json!("half_open"));
    eventually("the other delivery visible", async || {
        let view = server.store.get_queue(push_queue).await.expect("queue");
        (view.stats.visible == 1).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(receiver.notifications().len(), 6, "a second call while the probe is out");

    // Its success closes the breaker, and the other delivery follows at once.
    receiver.open_gate(1);
    eventually("the last delivery", async || (receiver.notifications().len() == 7).then_some(())).await;
    eventually("every delivery acked", settled).await;
    assert_eq!(server.breaker("t", id).await, json!("closed"));
    assert_eq!(server.metric("sluice_push_breaker_state", &[("endpoint", &endpoint)]).await, Some(0.0));

    let hits = receiver.notifications();
    let calls: Vec<(String, u64)> = hits.iter().map(|h| (h.message(), h.at_ms())).collect();
    let (probe, last) = (&calls[5].0, &calls[6].0);
    assert!(
        [probe.as_str(), last.as_str()] == ["b", "c"] || [probe.as_str(), last.as_str()] == ["c", "b"],
        "{calls:?}"
    );
    let expected = [
        ("a1", t1),
        ("a2", t1),
        ("b", t1),
        ("b", t1 + 1_000),
        ("b", t1 + 2_000),
        (probe.as_str(), cooldown_end),
        (last.as_str(), cooldown_end),
    ];
    let expected: Vec<(String, u64)> = expected.iter().map(|(m, at)| (m.to_string(), *at)).collect();
    assert_eq!(calls, expected, "calls (message, manual time), T1 = {t1}");
    assert_eq!(server.nack_count(), 4, "no failure after the probe");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correlated_publish_and_its_pushes_are_listed_in_its_trace() {
    let server = Server::start(config()).await;
    let receiver = Receiver::start(Answer::Ok).await;
    server.call("POST", "/v1/topics", Some(json!({ "name": "t" }))).await;
    let url = format!("{}/hook", receiver.base);
    let sub = server.subscribe("t", &url, &receiver, json!({})).await;
    let message = json!({ "body": "hi", "correlation_id": "order-9", "causation_id": "cmd-1" });
    let answer = server.call("POST", "/v1/topics/t/publish", Some(json!({ "messages": [message] }))).await;
    let id = answer["results"][0]["id"].as_str().expect("message id").to_string();
    let hits = receiver
        .wait_for(|_| {
            let n = receiver.notifications();
            (!n.is_empty()).then_some(n)
        })
        .await;
    let envelope: Value = serde_json::from_str(&hits[0].body).expect("envelope JSON");
    let attributes = &envelope["MessageAttributes"];
    assert_eq!(attributes["sluice.correlation_id"]["Value"], "order-9", "{envelope}");
    assert_eq!(attributes["sluice.causation_id"]["Value"], "cmd-1", "{envelope}");

    // The push is recorded once the endpoint answered 2xx.
    let trace = eventually("the push in the trace", async || {
        let trace = server.call("GET", "/v1/trace/order-9", None).await;
        (trace["entries"].as_array()?.len() == 2).then_some(trace)
    })
    .await;
    let entries = &trace["entries"];
    assert_eq!(entries[0]["kind"], "publish", "{trace}");
    assert_eq!(entries[0]["id"], id.as_str());
    assert_eq!(entries[0]["causation_id"], "cmd-1");
    assert_eq!((entries[0]["target"].clone(), entries[0]["depth"].clone()), (json!("topic:t"), json!(0)));
    assert_eq!(entries[1]["kind"], "push", "{trace}");
    assert_eq!(entries[1]["id"], format!("{id}/{}", sub["id"].as_str().expect("subscription id")).as_str());
    assert_eq!(entries[1]["causation_id"], id.as_str());
    assert_eq!(entries[1]["target"], format!("push:{url}").as_str());
    assert_eq!(entries[1]["depth"], 1);
    assert_eq!(server.metric("sluice_trace_entries_total", &[("kind", "push")]).await, Some(1.0));
}
