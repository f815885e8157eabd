//! Reply queues: a participant may answer a queue step with a message to the step's
//! `reply_queue` instead of calling `POST /v1/replies`. Every node consumes every reply queue a
//! definition has named (competing consumers; an answer is applied by compare-and-swap, so two
//! nodes taking two copies of one reply apply it once).
//!
//! A reply message's body is the JSON of `POST /v1/replies` (`{ok, output, error, retry}`);
//! `correlation_id`, `step`, `kind` and `attempt` may be in the body and otherwise come from
//! the message's attributes, which a participant copies from the step's message
//! (`X-Correlation-Id` or the envelope's correlation id, `sluice.saga.step`,
//! `sluice.saga.kind`, `sluice.saga.attempt`). Every reply is acknowledged once it was applied,
//! and also when nothing waits for it (late, duplicate) or it does not parse: such a reply can
//! never apply, so keeping it would only redeliver it forever. Those are counted
//! (`sluice_saga_queue_replies_total{queue, result}`, and `tenant` for a tenant's queue) and
//! logged. A reply that could not be applied for a passing reason (the store unavailable, the
//! instance contended) is given back with a delay and tried again. A reply queue is its
//! tenant's, so its replies answer only the instances of that tenant's sagas.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use sluice_core::BrokerError;
use sluice_core::message::{AttributeData, AttributeValue};
use sluice_core::name::{Namespace, resource_labels};
use sluice_core::saga::{CallKind, Outcome};
use sluice_store::{NackEntry, ReceiveRequest, ReceivedMessage, StoreError};
use tokio::task::JoinSet;

use super::records::SAGA_REPLY_QUEUE_KIND;
use super::runner::{ATTR_ATTEMPT, ATTR_CORRELATION_ID, ATTR_KIND, ATTR_STEP};
use super::{SagaError, Sagas};

/// Replies taken from one reply queue per receive.
pub const REPLY_RECEIVE_COUNT_MAX: u32 = 10;
/// How long one receive of a reply queue long-polls (real time: it only decides how soon a
/// reply is seen).
pub const REPLY_RECEIVE_WAIT_MS: u64 = 1_000;
/// How long a received reply stays hidden while it is applied.
pub const REPLY_VISIBILITY_MS: u64 = 30_000;
/// How long a reply that could not be applied for a passing reason waits before it is tried
/// again.
pub const REPLY_RETRY_DELAY_MS: u64 = 1_000;
/// The counter of replies taken from reply queues, by queue and result (`applied`,
/// `unmatched`, `malformed`, `retried`).
pub const QUEUE_REPLIES_METRIC: &str = "sluice_saga_queue_replies_total";

/// A reply as a message body: `POST /v1/replies`'s fields, each of the four that name what is
/// answered optional (the attributes supply them).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyBody {
    #[serde(default)]
    correlation_id: Option<String>,
    #[serde(default)]
    step: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    attempt: Option<u32>,
    ok: bool,
    #[serde(default)]
    output: Value,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    retry: Option<bool>,
}

/// A reply read from a message, ready for [`Sagas::reply`].
#[derive(Debug, Clone, PartialEq)]
pub struct QueueReply {
    pub correlation_id: String,
    pub step: String,
    pub kind: CallKind,
    pub attempt: Option<u32>,
    pub outcome: Outcome,
}

/// What a participant's answer means: success with its output, or a failure (retried unless
/// `retry` is `false`). Shared by `POST /v1/replies` and reply queues.
pub fn reply_outcome(ok: bool, output: Value, error: Option<String>, retry: Option<bool>) -> Outcome {
    if ok {
        Outcome::Succeeded(output)
    } else {
        Outcome::Failed { error: error.unwrap_or_else(|| "failed".into()), retry: retry.unwrap_or(true) }
    }
}

fn attribute(message: &ReceivedMessage, name: &str) -> Option<String> {
    match message.message.content.attributes.get(name) {
        Some(AttributeValue { value: AttributeData::Text(t), .. }) => Some(t.clone()),
        _ => None,
    }
}

/// Reads a reply message; the error says why it cannot be one.
pub fn parse_reply(message: &ReceivedMessage) -> Result<QueueReply, String> {
    let body: ReplyBody = serde_json::from_slice(&message.message.content.body)
        .map_err(|e| format!("the body is not a reply ({{ok, output, error, retry}}): {e}"))?;
    let correlation_id = body
        .correlation_id
        .or_else(|| attribute(message, ATTR_CORRELATION_ID))
        .or_else(|| message.message.content.envelope.correlation_id.clone())
        .ok_or("no correlation id: neither the body, the X-Correlation-Id attribute nor the envelope names one")?;
    let step = body
        .step
        .or_else(|| attribute(message, ATTR_STEP))
        .ok_or("no step: neither the body nor the sluice.saga.step attribute names one")?;
    let kind = match body.kind.or_else(|| attribute(message, ATTR_KIND)) {
        None => CallKind::Action,
        Some(k) => CallKind::parse(&k).ok_or_else(|| format!("kind {k:?} is not `action` or `compensation`"))?,
    };
    let attempt = match body.attempt {
        Some(a) => Some(a),
        None => match attribute(message, ATTR_ATTEMPT) {
            Some(a) => Some(a.trim().parse().map_err(|_| format!("attempt {a:?} is not a number"))?),
            None => None,
        },
    };
    Ok(QueueReply {
        correlation_id,
        step,
        kind,
        attempt,
        outcome: reply_outcome(body.ok, body.output, body.error, body.retry),
    })
}

/// The consumers of this node: one task per reply queue named by any definition, found in the
/// `saga_reply_queue` records at the orchestrator's scan cadence (or at once after a
/// definition through this node). Runs until aborted; its consumers end with it.
pub(super) async fn run(sagas: Arc<Sagas>) {
    let mut consumers = JoinSet::new();
    let mut consumed: HashSet<String> = HashSet::new();
    loop {
        let named = sagas.reply_queues_named.notified();
        match sagas.records(SAGA_REPLY_QUEUE_KIND, "").await {
            Ok(records) => {
                for record in records {
                    if consumed.insert(record.key.clone()) {
                        consumers.spawn(consume(sagas.clone(), record.key));
                    }
                }
            }
            Err(e) => tracing::warn!("sagas: the reply queues could not be listed: {e}"),
        }
        // A cadence in real time, as the orchestrator's scan.
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(sagas.calls.scan_ms)) => {}
            _ = named => {}
        }
    }
}

/// Takes replies from `queue` until aborted.
async fn consume(sagas: Arc<Sagas>, queue: String) {
    loop {
        let request = ReceiveRequest {
            max: REPLY_RECEIVE_COUNT_MAX,
            wait_ms: Some(REPLY_RECEIVE_WAIT_MS),
            visibility_timeout_ms: Some(REPLY_VISIBILITY_MS),
        };
        let received = match sagas.store.receive(&queue, request).await {
            Ok(received) => received,
            Err(e) => {
                match e {
                    // Not created yet: a definition may name its reply queue first.
                    StoreError::Broker(BrokerError::QueueNotFound(_)) => {}
                    e => tracing::debug!("sagas: reply queue {queue}: receive failed: {e}"),
                }
                tokio::time::sleep(Duration::from_millis(sagas.calls.scan_ms)).await;
                continue;
            }
        };
        for message in received {
            take(&sagas, &queue, message).await;
        }
    }
}

/// Applies one reply, then acknowledges it or gives it back. A reply queue is its tenant's
/// (only its tenant can send to it), so its replies answer only that tenant's instances.
async fn take(sagas: &Sagas, queue: &str, message: ReceivedMessage) {
    let tenant = Namespace::of_stored(queue);
    let result = match parse_reply(&message) {
        Err(why) => {
            tracing::warn!("sagas: reply queue {queue}: message {} is no reply: {why}", message.message.meta.id);
            "malformed"
        }
        Ok(reply) => match sagas
            .reply(&tenant, &reply.correlation_id, &reply.step, Some(reply.kind), reply.attempt, reply.outcome)
            .await
        {
            Ok(_) => "applied",
            Err(SagaError::ReplyUnmatched { correlation_id, step }) => {
                tracing::debug!("sagas: reply queue {queue}: nothing waits for {correlation_id}/{step}");
                "unmatched"
            }
            Err(e) => {
                tracing::debug!("sagas: reply queue {queue}: a reply could not be applied now: {e}");
                let entry =
                    NackEntry { receipt: message.receipt, delay_ms: REPLY_RETRY_DELAY_MS, error: Some(e.to_string()) };
                if let Err(e) = sagas.store.nack(queue, vec![entry]).await {
                    tracing::debug!(
                        "sagas: reply queue {queue}: a reply could not be given back ({e}); it returns after its visibility timeout"
                    );
                }
                metrics::counter!(QUEUE_REPLIES_METRIC, labels(queue, "retried").as_slice()).increment(1);
                return;
            }
        },
    };
    metrics::counter!(QUEUE_REPLIES_METRIC, labels(queue, result).as_slice()).increment(1);
    match sagas.store.ack(queue, vec![message.receipt]).await {
        Ok(results) if results.iter().all(Result::is_ok) => {}
        // Applied and not acknowledged: it comes back, and then finds nothing waiting for it.
        Ok(_) => tracing::debug!("sagas: reply queue {queue}: a reply's receipt was stale"),
        Err(e) => tracing::debug!("sagas: reply queue {queue}: a reply could not be acknowledged: {e}"),
    }
}

/// A reply queue's labels: the queue within its tenant, the tenant unless it is the default
/// one, and the result.
fn labels(queue: &str, result: &str) -> Vec<(&'static str, String)> {
    let mut labels = resource_labels("queue", queue);
    labels.push(("result", result.to_owned()));
    labels
}
