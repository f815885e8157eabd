//! The HTTP/S push worker: drains every push queue (`push.rs`) and POSTs its deliveries to the
//! subscription's endpoint, signed, with retries under the subscription's delivery policy, a
//! dead-letter queue after the last attempt, and a circuit breaker per endpoint.
//!
//! Shape: one supervisor task lists the HTTP/S subscriptions from the store every
//! `refresh_ms` and keeps one task per subscription (started for new ones, told of changed
//! ones, stopped for gone ones). A subscription's task receives from its queue only as many
//! deliveries as its endpoint has free permits (`endpoint_concurrency_max` per `host:port`,
//! shared by every subscription of that endpoint), and each delivery is POSTed in a task of its
//! own holding one permit. So a slow or dead endpoint holds only its own permits and its own
//! subscriptions' tasks; other endpoints never wait behind it.
//!
//! Attempts are counted by the message's receive count, less the receives that the breaker
//! turned back (kept in memory per subscription; after a restart they count, which can only
//! shorten a schedule). While an endpoint's breaker is open, its subscriptions do not receive
//! at all until the probe time, so those deliveries are not attempts.
//!
//! Time: every time the worker decides by (attempts, retry delays, the breakers, signature
//! timestamps) comes from the [`Clock`] it is given, the system clock under `serve`; see
//! `clock.rs` for what follows it and what does not.
//!
//! Signature: `x-sluice-timestamp: <Unix seconds>` and
//! `x-sluice-signature: sha256=<hex HMAC-SHA256(signing secret, "<timestamp>.<body>")>`.
//!
//! Other features push through the same machinery (alert webhooks, `alerts/notify.rs`): a
//! [`TargetSource`] handed to [`spawn_with`] lists their [`Target`]s, each a queue of
//! [`PushDelivery`] records and a URL, and the worker treats them as it treats subscriptions.

use crate::egress::Egress;
use crate::trace::{TraceEntry, TraceKind, Traces};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use sluice_core::breaker::{Admission, Breaker, BreakerConfig, BreakerState, Outcome, Permit};
use sluice_core::delivery::{DeliveryPolicy, TopicDeliveryPolicy};
use sluice_core::message::{AttributeData, AttributeValue};
use sluice_core::{BrokerError, NewMessage};
use sluice_store::{NackEntry, RECORD_LIST_LIMIT_MAX, ReceiveRequest, ReceivedMessage, Store, StoreError};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use sluice_clock::Clock;

use super::model::{self, SUBSCRIPTION_KIND, SubscriptionRecord, TOPIC_KIND};
use super::push::{MessageType, PushDelivery};

/// The signature header and the timestamp it covers.
pub const SIGNATURE_HEADER: &str = "x-sluice-signature";
pub const TIMESTAMP_HEADER: &str = "x-sluice-timestamp";
/// The message attribute that carries a dead-lettered delivery's last error.
pub const LAST_ERROR_ATTRIBUTE: &str = "SluicePushError";

/// How long one POST may take, connection included (SNS's HTTP timeout is 15 s).
pub const PUSH_REQUEST_TIMEOUT_MS: u64 = 15_000;
/// How long connecting may take, within the request timeout.
pub const PUSH_CONNECT_TIMEOUT_MS: u64 = 5_000;
/// POSTs in flight to one `host:port` at most, over all its subscriptions.
pub const PUSH_ENDPOINT_CONCURRENCY_MAX: usize = 16;
/// How often the subscriptions are listed again.
pub const PUSH_REFRESH_MS: u64 = 2_000;
/// The long poll of a subscription's receive.
pub const PUSH_RECEIVE_WAIT_MS: u64 = 1_000;
/// Deliveries one receive takes at most (also bounded by the endpoint's free permits).
pub const PUSH_RECEIVE_COUNT_MAX: u32 = 10;
/// Added to the request timeout for a delivery's visibility timeout, so that a delivery does
/// not reappear while its POST may still be running.
pub const PUSH_VISIBILITY_MARGIN_MS: u64 = 5_000;
/// The longest error text kept with a retried or dead-lettered delivery.
pub const PUSH_ERROR_BYTES_MAX: usize = 1_024;
/// How long a subscription waits before trying its queue again after a store error (the queue
/// is gone until the next refresh stops the task, or the store is failing).
pub const PUSH_STORE_RETRY_MS: u64 = 1_000;
/// How often a subscription whose endpoint's probe is out looks whether it was answered.
pub const PUSH_HALF_OPEN_POLL_MS: u64 = 50;
/// Breaker rejections remembered per subscription; past it the memory is cleared (those
/// receives then count as attempts, as after a restart).
pub const PUSH_SKIPS_TRACKED_MAX: usize = 10_000;

/// The push worker's settings. Tests shorten the breaker's figures and the timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PushConfig {
    pub request_timeout_ms: u64,
    pub connect_timeout_ms: u64,
    pub endpoint_concurrency_max: usize,
    pub refresh_ms: u64,
    pub breaker: BreakerConfig,
}

impl Default for PushConfig {
    fn default() -> Self {
        PushConfig {
            request_timeout_ms: PUSH_REQUEST_TIMEOUT_MS,
            connect_timeout_ms: PUSH_CONNECT_TIMEOUT_MS,
            endpoint_concurrency_max: PUSH_ENDPOINT_CONCURRENCY_MAX,
            refresh_ms: PUSH_REFRESH_MS,
            breaker: BreakerConfig::default(),
        }
    }
}

/// The circuit breakers and concurrency permits of every endpoint this node pushes to, shared
/// by the worker and the API (which shows a subscription's breaker state).
pub struct Endpoints {
    config: PushConfig,
    /// Where deliveries may go (`crate::egress`); the job callbacks share it.
    egress: Arc<Egress>,
    /// `host:port` → its breaker and permits. Held for map operations only, never across an
    /// await.
    map: Mutex<HashMap<String, EndpointState>>,
}

struct EndpointState {
    breaker: Breaker,
    permits: Arc<Semaphore>,
}

impl Endpoints {
    /// Breakers and permits for deliveries under `config`, which go only where `egress` lets them.
    pub fn new(config: PushConfig, egress: Arc<Egress>) -> Endpoints {
        Endpoints { config, egress, map: Mutex::new(HashMap::new()) }
    }

    /// Where deliveries may go.
    pub fn egress(&self) -> &Arc<Egress> {
        &self.egress
    }

    /// The timeouts and breaker settings every delivery from this node uses.
    pub fn config(&self) -> PushConfig {
        self.config
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, EndpointState>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn with<T>(&self, endpoint: &str, f: impl FnOnce(&mut EndpointState) -> T) -> T {
        let mut map = self.map();
        let state = map.entry(endpoint.to_string()).or_insert_with(|| EndpointState {
            breaker: Breaker::new(self.config.breaker),
            permits: Arc::new(Semaphore::new(self.config.endpoint_concurrency_max.max(1))),
        });
        f(state)
    }

    pub(crate) fn permits(&self, endpoint: &str) -> Arc<Semaphore> {
        self.with(endpoint, |s| s.permits.clone())
    }

    pub(crate) fn allow(&self, endpoint: &str, now_ms: u64) -> Admission {
        self.with(endpoint, |s| s.breaker.allow(now_ms))
    }

    pub(crate) fn record(&self, endpoint: &str, now_ms: u64, permit: Permit, outcome: Outcome) {
        if let Some(state) = self.with(endpoint, |s| s.breaker.record(now_ms, permit, outcome)) {
            tracing::info!(endpoint, state = breaker_state_name(state), "push endpoint's circuit breaker changed");
            metrics::gauge!("sluice_push_breaker_state", "endpoint" => endpoint.to_string())
                .set(breaker_state_value(state));
            if state == BreakerState::Open {
                metrics::counter!("sluice_push_breaker_opened_total", "endpoint" => endpoint.to_string()).increment(1);
            }
        }
    }

    /// Why the subscriptions of `endpoint` must not receive at `now_ms`, if they must not.
    fn hold(&self, endpoint: &str, now_ms: u64) -> Option<Hold> {
        self.with(endpoint, |s| {
            let snapshot = s.breaker.snapshot(now_ms);
            let until_ms = snapshot.next_probe_at_ms.filter(|&at| at > now_ms)?;
            match snapshot.state {
                BreakerState::Closed => None,
                BreakerState::Open => Some(Hold::Cooldown { until_ms }),
                BreakerState::HalfOpen => Some(Hold::ProbeOut { until_ms }),
            }
        })
    }

    /// The breaker state of an endpoint this node has pushed to (`None`: not yet).
    pub fn state(&self, endpoint: &str) -> Option<BreakerState> {
        self.map().get(endpoint).map(|s| s.breaker.state())
    }
}

/// What keeps a subscription from receiving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// The breaker is open: nothing may change before its cooldown ends at `until_ms`.
    Cooldown { until_ms: u64 },
    /// A probe is out: its answer may close the breaker at any moment, so look again every
    /// `PUSH_HALF_OPEN_POLL_MS`, or at `until_ms` when it is presumed lost.
    ProbeOut { until_ms: u64 },
}

pub fn breaker_state_name(state: BreakerState) -> &'static str {
    match state {
        BreakerState::Closed => "closed",
        BreakerState::Open => "open",
        BreakerState::HalfOpen => "half_open",
    }
}

/// `sluice_push_breaker_state`: 0 closed, 1 open, 2 half-open.
fn breaker_state_value(state: BreakerState) -> f64 {
    match state {
        BreakerState::Closed => 0.0,
        BreakerState::Open => 1.0,
        BreakerState::HalfOpen => 2.0,
    }
}

/// The breaker key of an endpoint URL: `host:port` (the scheme's port when none is given).
pub fn endpoint_key(url: &str) -> Option<String> {
    let url = reqwest::Url::parse(url).ok()?;
    Some(format!("{}:{}", url.host_str()?, url.port_or_known_default()?))
}

/// The `x-sluice-signature` value of `body` sent at `timestamp` (Unix seconds).
pub fn signature(secret: &str, timestamp: u64, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// What to do after attempt number `attempt` (1 for the first) failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    RetryInMs(u64),
    DeadLetter,
}

/// The retry decision, from the policy alone. `draw` is the jitter's random number.
pub fn after_failure(policy: &DeliveryPolicy, attempt: u32, draw: u64) -> AfterFailure {
    match policy.retry_delay_ms(attempt.saturating_sub(1), draw) {
        Some(delay) => AfterFailure::RetryInMs(delay),
        None => AfterFailure::DeadLetter,
    }
}

/// The jitter draw of one retry: derived from the message id and the attempt, so that a run
/// replays exactly while different deliveries spread apart.
pub(crate) fn draw(message_id: &str, attempt: u32) -> u64 {
    let digest = Sha256::new().chain_update(message_id.as_bytes()).chain_update(attempt.to_le_bytes()).finalize();
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(bytes)
}

/// One push destination as its task uses it: a queue of [`PushDelivery`] records and the URL
/// they are POSTed to (a subscription's, or another feature's from a [`TargetSource`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Names it in logs: the subscription id, or what the source calls it.
    pub id: String,
    /// The queue its deliveries wait in.
    pub queue: String,
    pub url: String,
    /// The key of the signature on every POST; unsigned without one.
    pub signing_secret: Option<String>,
    /// Where a delivery goes after its last attempt; dropped (and counted) without one.
    pub dead_letter_queue: Option<String>,
    pub policy: DeliveryPolicy,
    /// `host:port`, or the URL itself when it does not parse (every POST then fails).
    pub endpoint: String,
    /// Deliveries one receive takes at most (up to `PUSH_RECEIVE_COUNT_MAX`). 1 over a FIFO
    /// queue delivers each message group in order: the next one is received only once the
    /// previous one was acked, or nacked for a retry that then holds the group back.
    pub receive_max: u32,
}

impl Target {
    fn of_subscription(record: SubscriptionRecord, policy: DeliveryPolicy) -> Target {
        Target {
            endpoint: endpoint_key(&record.endpoint).unwrap_or_else(|| record.endpoint.clone()),
            id: record.id,
            queue: record.queue,
            url: record.endpoint,
            signing_secret: record.signing_secret,
            dead_letter_queue: record.dead_letter_queue,
            policy,
            receive_max: PUSH_RECEIVE_COUNT_MAX,
        }
    }
}

/// What [`TargetSource::targets`] returns: every target by a key unique across sources.
pub type TargetsFuture<'a> = Pin<Box<dyn Future<Output = Result<Vec<(String, Target)>, String>> + Send + 'a>>;

/// Targets besides the subscriptions, listed again at every refresh.
pub trait TargetSource: Send + Sync + 'static {
    fn targets(&self) -> TargetsFuture<'_>;
}

/// Starts the worker over `store`, on `clock`, pushing to every HTTP/S subscription and to the
/// targets of `sources`; it runs until the handle is aborted (dropping every task, which leaves
/// deliveries in flight to reappear after their visibility timeout).
pub fn spawn_with(
    store: Arc<dyn Store>,
    endpoints: Arc<Endpoints>,
    clock: Arc<dyn Clock>,
    traces: Arc<Traces>,
    sources: Vec<Arc<dyn TargetSource>>,
) -> tokio::task::JoinHandle<()> {
    let config = endpoints.config;
    let client = endpoints
        .egress
        .client(reqwest::Client::builder())
        .timeout(Duration::from_millis(config.request_timeout_ms))
        .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("Sluice-Push/", env!("CARGO_PKG_VERSION")))
        .build();
    let client = match client {
        Ok(client) => client,
        Err(e) => {
            tracing::error!("push worker not started: cannot build its HTTP client: {e}");
            return tokio::spawn(async {});
        }
    };
    let shared = Arc::new(Shared { store, endpoints, client, config, clock, traces, sources });
    tokio::spawn(supervise(shared))
}

struct Shared {
    store: Arc<dyn Store>,
    sources: Vec<Arc<dyn TargetSource>>,
    endpoints: Arc<Endpoints>,
    client: reqwest::Client,
    config: PushConfig,
    clock: Arc<dyn Clock>,
    /// A delivered push of a correlated publication is listed in its trace.
    traces: Arc<Traces>,
}

/// Keeps one task per HTTP/S subscription, refreshed every `refresh_ms`.
async fn supervise(shared: Arc<Shared>) {
    let mut tasks: HashMap<String, (watch::Sender<Arc<Target>>, tokio::task::AbortHandle)> = HashMap::new();
    let mut set = JoinSet::new();
    let mut every = tokio::time::interval(Duration::from_millis(shared.config.refresh_ms.max(1)));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        while set.try_join_next().is_some() {}
        let targets = match all_targets(&shared).await {
            Ok(targets) => targets,
            Err(e) => {
                tracing::warn!("push worker: cannot list subscriptions: {e}");
                continue;
            }
        };
        tasks.retain(|key, (_, handle)| {
            let keep = targets.contains_key(key) && !handle.is_finished();
            if !keep {
                handle.abort();
            }
            keep
        });
        for (key, target) in targets {
            match tasks.get(&key) {
                Some((sender, _)) => {
                    sender.send_if_modified(|current| {
                        let changed = **current != target;
                        if changed {
                            *current = Arc::new(target.clone());
                        }
                        changed
                    });
                }
                None => {
                    let (sender, receiver) = watch::channel(Arc::new(target));
                    let handle = set.spawn(run_subscription(shared.clone(), receiver));
                    tasks.insert(key, (sender, handle));
                }
            }
        }
    }
}

/// Every subscription's target and every source's, by key.
async fn all_targets(shared: &Shared) -> Result<HashMap<String, Target>, String> {
    let mut out = targets(shared.store.as_ref()).await?;
    for source in &shared.sources {
        out.extend(source.targets().await?);
    }
    Ok(out)
}

/// Every HTTP/S subscription with the delivery policy it follows, by record key.
async fn targets(store: &dyn Store) -> Result<HashMap<String, Target>, String> {
    let mut out = HashMap::new();
    let mut topic_policies: HashMap<String, TopicDeliveryPolicy> = HashMap::new();
    let mut after: Option<String> = None;
    loop {
        let page = store
            .list_records(SUBSCRIPTION_KIND, "", after.as_deref(), RECORD_LIST_LIMIT_MAX)
            .await
            .map_err(|e| e.to_string())?;
        let done = page.len() < RECORD_LIST_LIMIT_MAX;
        after = page.last().map(|r| r.key.clone());
        for entry in page {
            let record = match model::decode_subscription(&entry.value) {
                Ok(record) if record.protocol.is_push() => record,
                Ok(_) => continue,
                Err(e) => {
                    tracing::error!(key = %entry.key, "push worker: unreadable subscription: {e}");
                    continue;
                }
            };
            if !topic_policies.contains_key(&record.topic) {
                let topic = match store.get_record(TOPIC_KIND, &record.topic).await.map_err(|e| e.to_string())? {
                    Some(bytes) => model::decode_topic(&bytes).ok(),
                    None => None,
                };
                // Checked when set; a topic without one (or gone) gives SNS's default.
                let policy = topic
                    .and_then(|t| t.attributes.get("DeliveryPolicy").cloned())
                    .and_then(|text| TopicDeliveryPolicy::parse(&text).ok())
                    .unwrap_or_default();
                topic_policies.insert(record.topic.clone(), policy);
            }
            let own = record.delivery_policy.as_deref().and_then(|text| DeliveryPolicy::parse(text).ok());
            let policy = topic_policies[&record.topic].effective_for(own.as_ref());
            out.insert(record.key(), Target::of_subscription(record, policy));
        }
        if done {
            return Ok(out);
        }
    }
}

/// One subscription's loop: wait for the breaker and for free permits, receive, hand each
/// delivery to a task of its own.
async fn run_subscription(shared: Arc<Shared>, mut target: watch::Receiver<Arc<Target>>) {
    let skips: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let mut deliveries = JoinSet::new();
    loop {
        while deliveries.try_join_next().is_some() {}
        let current = target.borrow_and_update().clone();
        match shared.endpoints.hold(&current.endpoint, shared.clock.now_ms()) {
            None => {}
            Some(Hold::Cooldown { until_ms }) => {
                shared.clock.sleep_until(until_ms).await;
                continue;
            }
            Some(Hold::ProbeOut { until_ms }) => {
                tokio::select! {
                    () = shared.clock.sleep_until(until_ms) => {}
                    () = tokio::time::sleep(Duration::from_millis(PUSH_HALF_OPEN_POLL_MS)) => {}
                }
                continue;
            }
        }
        let permits = shared.endpoints.permits(&current.endpoint);
        let Ok(first) = permits.clone().acquire_owned().await else { return };
        let mut held = vec![first];
        while held.len() < current.receive_max.clamp(1, PUSH_RECEIVE_COUNT_MAX) as usize {
            match permits.clone().try_acquire_owned() {
                Ok(permit) => held.push(permit),
                Err(_) => break,
            }
        }
        // A breaker that is due a probe lets one call through: take one delivery for it.
        if shared.endpoints.state(&current.endpoint) != Some(BreakerState::Closed) {
            held.truncate(1);
        }
        let request = ReceiveRequest {
            max: u32::try_from(held.len()).unwrap_or(1),
            wait_ms: Some(PUSH_RECEIVE_WAIT_MS),
            visibility_timeout_ms: Some(shared.config.request_timeout_ms + PUSH_VISIBILITY_MARGIN_MS),
        };
        let received = match shared.store.receive(&current.queue, request).await {
            Ok(received) => received,
            Err(e) => {
                tracing::debug!(queue = %current.queue, "push worker: receive failed: {e}");
                drop(held);
                // Real time, not the clock's: a pause before asking a failing store again.
                tokio::time::sleep(Duration::from_millis(PUSH_STORE_RETRY_MS)).await;
                continue;
            }
        };
        for (message, permit) in received.into_iter().zip(held) {
            let shared = shared.clone();
            let current = current.clone();
            let skips = skips.clone();
            deliveries.spawn(async move {
                deliver(&shared, &current, &skips, message).await;
                drop(permit);
            });
        }
    }
}

/// One delivery: POST it, then ack, retry later, or dead-letter.
async fn deliver(shared: &Shared, target: &Target, skips: &Mutex<HashMap<String, u32>>, message: ReceivedMessage) {
    let queue = &target.queue;
    let message_id = message.message.meta.id.to_string();
    let lock = || skips.lock().unwrap_or_else(PoisonError::into_inner);
    let skipped = lock().get(&message_id).copied().unwrap_or(0);
    let attempt = message.message.meta.receive_count.saturating_sub(skipped).max(1);

    let delivery = match PushDelivery::from_body(&message.message.content.body) {
        Ok(delivery) => delivery,
        Err(e) => {
            let body = String::from_utf8_lossy(&message.message.content.body).into_owned();
            give_up(shared, target, &message, &body, &e).await;
            return;
        }
    };

    let now = shared.clock.now_ms();
    let permit = match shared.endpoints.allow(&target.endpoint, now) {
        Admission::Permitted(permit) => permit,
        Admission::Rejected { retry_at_ms } => {
            // Turned back without a call: not an attempt.
            {
                let mut skips = lock();
                if skips.len() >= PUSH_SKIPS_TRACKED_MAX {
                    skips.clear();
                }
                *skips.entry(message_id).or_insert(0) += 1;
            }
            metrics::counter!("sluice_push_deliveries_total", "endpoint" => target.endpoint.clone(), "outcome" => "rejected")
                .increment(1);
            nack(shared, queue, &message, retry_at_ms.saturating_sub(now), None).await;
            return;
        }
    };

    let result = post(shared, target, &delivery).await;
    let outcome = if result.is_ok() { Outcome::Success } else { Outcome::Failure };
    shared.endpoints.record(&target.endpoint, shared.clock.now_ms(), permit, outcome);
    metrics::counter!(
        "sluice_push_deliveries_total",
        "endpoint" => target.endpoint.clone(),
        "outcome" => if result.is_ok() { "success" } else { "failure" }
    )
    .increment(1);
    match result {
        Ok(()) => {
            lock().remove(&message_id);
            if let Some(correlation_id) = &message.message.content.envelope.correlation_id {
                let id = format!("{}/{}", delivery.message_id, target.id);
                let entry = TraceEntry::new(TraceKind::Push, id, correlation_id, format!("push:{}", target.url))
                    .caused_by(Some(&delivery.message_id));
                shared.traces.record(vec![entry]).await;
            }
            ack(shared, queue, &message).await;
        }
        Err(error) => match after_failure(&target.policy, attempt, draw(&message_id, attempt)) {
            AfterFailure::RetryInMs(delay) => {
                tracing::debug!(target = %target.id, attempt, delay, "push failed: {error}");
                nack(shared, queue, &message, delay, Some(error)).await;
            }
            AfterFailure::DeadLetter => {
                lock().remove(&message_id);
                give_up(shared, target, &message, &delivery.body, &error).await;
            }
        },
    }
}

/// POSTs a delivery; `Err` names why it failed.
async fn post(shared: &Shared, target: &Target, delivery: &PushDelivery) -> Result<(), String> {
    let message_type = match delivery.message_type {
        MessageType::Notification => "Notification",
        MessageType::SubscriptionConfirmation => "SubscriptionConfirmation",
        MessageType::Alert => "Alert",
    };
    shared.endpoints.egress.check_url(&target.url).map_err(|e| e.to_string())?;
    let mut request = shared.client.post(&target.url);
    if delivery.message_type == MessageType::Alert {
        request = request
            .header("content-type", "application/json")
            .header("x-sluice-message-type", message_type)
            .header("x-sluice-message-id", &delivery.message_id);
    } else {
        let content_type = target.policy.header_content_type.as_deref().unwrap_or("text/plain; charset=UTF-8");
        request = request
            .header("content-type", content_type)
            .header("x-amz-sns-message-type", message_type)
            .header("x-amz-sns-message-id", &delivery.message_id)
            .header("x-amz-sns-topic-arn", &delivery.topic_arn);
        if let Some(arn) = &delivery.subscription_arn {
            request = request.header("x-amz-sns-subscription-arn", arn);
        }
        if delivery.raw {
            request = request.header("x-amz-sns-rawdelivery", "true");
        }
    }
    if let Some(secret) = &target.signing_secret {
        let timestamp = shared.clock.now_ms() / 1000;
        request = request
            .header(TIMESTAMP_HEADER, timestamp.to_string())
            .header(SIGNATURE_HEADER, signature(secret, timestamp, delivery.body.as_bytes()));
    }
    let response = request.body(delivery.body.clone()).send().await.map_err(|e| describe(&e))?;
    let status = response.status();
    if status.is_success() { Ok(()) } else { Err(format!("the endpoint answered {status}")) }
}

/// A request error with its causes, cut to `PUSH_ERROR_BYTES_MAX`.
pub(crate) fn describe(error: &reqwest::Error) -> String {
    let mut text = if error.is_timeout() { "timed out".to_string() } else { error.to_string() };
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    truncate(text)
}

pub(crate) fn truncate(mut text: String) -> String {
    if text.len() > PUSH_ERROR_BYTES_MAX {
        let mut end = PUSH_ERROR_BYTES_MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// After the last attempt: into the subscription's dead-letter queue with the last error, or
/// dropped with a warning when it has none. Acked either way, unless the dead-letter queue
/// refuses it, in which case it is tried again after `PUSH_STORE_RETRY_MS`.
async fn give_up(shared: &Shared, target: &Target, message: &ReceivedMessage, body: &str, error: &str) {
    let queue = &target.queue;
    let endpoint = target.endpoint.clone();
    let Some(dead_letter_queue) = &target.dead_letter_queue else {
        tracing::warn!(target = %target.id, endpoint = %target.url,
            "push delivery dropped after its last attempt (no dead-letter queue): {error}");
        metrics::counter!("sluice_push_dropped_total", "endpoint" => endpoint).increment(1);
        ack(shared, queue, message).await;
        return;
    };
    let text = |value: String| AttributeValue { data_type: "String".to_string(), value: AttributeData::Text(value) };
    let mut dead = NewMessage { body: body.as_bytes().to_vec(), ..Default::default() };
    dead.attributes.insert(LAST_ERROR_ATTRIBUTE.to_string(), text(truncate(error.to_string())));
    dead.attributes.insert("SluicePushEndpoint".to_string(), text(target.url.clone()));
    let sent = shared.store.send(dead_letter_queue, vec![dead]).await;
    match sent.as_ref().map(|results| results.iter().all(Result::is_ok)) {
        Ok(true) => {
            metrics::counter!("sluice_push_dead_lettered_total", "endpoint" => endpoint).increment(1);
            ack(shared, queue, message).await;
        }
        _ => {
            tracing::warn!(target = %target.id, queue = %dead_letter_queue,
                "push delivery not dead-lettered (the queue refused it), kept: {sent:?}");
            nack(shared, queue, message, PUSH_STORE_RETRY_MS, Some(error.to_string())).await;
        }
    }
}

async fn ack(shared: &Shared, queue: &str, message: &ReceivedMessage) {
    if let Err(e) = shared.store.ack(queue, vec![message.receipt.clone()]).await {
        // The delivery reappears after its visibility timeout and is pushed again.
        log_store_error("ack", queue, &e);
    }
}

async fn nack(shared: &Shared, queue: &str, message: &ReceivedMessage, delay_ms: u64, error: Option<String>) {
    let entry = NackEntry { receipt: message.receipt.clone(), delay_ms, error };
    if let Err(e) = shared.store.nack(queue, vec![entry]).await {
        log_store_error("nack", queue, &e);
    }
}

fn log_store_error(call: &str, queue: &str, e: &StoreError) {
    match e {
        // Unsubscribed meanwhile: nothing left to deliver.
        StoreError::Broker(BrokerError::QueueNotFound(_)) => {}
        _ => tracing::warn!(queue, "push worker: {call} failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_cover_timestamp_and_body() {
        // `printf 1700000000.hello | openssl dgst -sha256 -hmac key`.
        let got = signature("key", 1_700_000_000, b"hello");
        assert_eq!(got, "sha256=4d583a269f4f276a3fa80ff31b5a01879a848096983222a17893d198418939aa");
        assert_ne!(got, signature("key", 1_700_000_001, b"hello"));
        assert_ne!(got, signature("key2", 1_700_000_000, b"hello"));
    }

    #[test]
    fn retries_follow_the_policy_then_dead_letter() {
        let policy = DeliveryPolicy {
            retries: 4,
            no_delay_retries: 1,
            min_delay_retries: 1,
            max_delay_retries: 1,
            min_delay_ms: 1_000,
            max_delay_ms: 8_000,
            ..DeliveryPolicy::default()
        };
        let schedule: Vec<AfterFailure> = (1..=5).map(|attempt| after_failure(&policy, attempt, 0)).collect();
        assert_eq!(
            schedule,
            [
                AfterFailure::RetryInMs(0),
                AfterFailure::RetryInMs(1_000),
                AfterFailure::RetryInMs(1_000),
                AfterFailure::RetryInMs(8_000),
                AfterFailure::DeadLetter,
            ]
        );
        for seed in 0..64u32 {
            let AfterFailure::RetryInMs(delay) = after_failure(&policy, 3, draw("m", seed)) else {
                panic!("attempt 3 of 5 retries (seed {seed})");
            };
            assert!((1_000..=8_000).contains(&delay), "backoff delay {delay} (seed {seed})");
        }
    }

    #[test]
    fn endpoints_are_host_and_port() {
        assert_eq!(endpoint_key("http://127.0.0.1:8080/hook").as_deref(), Some("127.0.0.1:8080"));
        assert_eq!(endpoint_key("https://example.com/a?b").as_deref(), Some("example.com:443"));
        assert_eq!(endpoint_key("http://example.com").as_deref(), Some("example.com:80"));
        assert_eq!(endpoint_key("not a url"), None);
    }
}
