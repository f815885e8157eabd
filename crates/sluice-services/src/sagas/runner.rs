//! The orchestrator every node runs. It scans the active entries for instances that are due,
//! and for each records the next attempt as in flight by compare-and-swap before it makes the
//! call: of two nodes racing for an instance exactly one makes it, and a node that dies
//! mid-call leaves an attempt whose deadline passes, after which any node retries it (steps are
//! at-least-once; the `Idempotency-Key` a participant gets is the same for every attempt).
//!
//! HTTP steps are answered by the response (2xx: success, its JSON body the output; 408, 429,
//! 5xx and transport errors: retried; any other 4xx: failed for good). Queue steps send a
//! message and wait for the participant's `POST /v1/replies` (or its message to the step's reply
//! queue, `replies.rs`) until the attempt's deadline.

use crate::trace::{TraceEntry, TraceKind};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use sluice_core::message::{AttributeData, AttributeValue};
use sluice_core::name::split_tenant;
use sluice_core::saga::{Dispatch, Outcome, SagaInstance, StepCall};
use sluice_core::{BrokerError, MessageEnvelope, NewMessage};
use sluice_store::StoreError;

use super::records::{ActiveEntry, SAGA_ACTIVE_KIND, decode};
use super::{SagaError, Sagas, jitter};

/// The orchestrator's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SagaCallConfig {
    /// The longest one HTTP call may take, whatever its step's timeout.
    pub request_timeout_ms: u64,
    pub connect_timeout_ms: u64,
    /// How often the active entries are scanned when nothing wakes the orchestrator sooner
    /// (work started through another node is seen within this).
    pub scan_ms: u64,
}

impl Default for SagaCallConfig {
    fn default() -> Self {
        SagaCallConfig { request_timeout_ms: 30_000, connect_timeout_ms: 5_000, scan_ms: 1_000 }
    }
}

/// Message attributes of a queue step's message: which instance, step, call and attempt it is,
/// to be echoed in the reply.
pub const ATTR_INSTANCE: &str = "sluice.saga.instance";
pub const ATTR_STEP: &str = "sluice.saga.step";
pub const ATTR_KIND: &str = "sluice.saga.kind";
pub const ATTR_ATTEMPT: &str = "sluice.saga.attempt";
pub const ATTR_IDEMPOTENCY_KEY: &str = "Idempotency-Key";
pub const ATTR_CORRELATION_ID: &str = "X-Correlation-Id";
/// Where the participant may send its answer as a message (only when the step names one).
pub const ATTR_REPLY_QUEUE: &str = "sluice.saga.reply_queue";

pub(super) async fn run(sagas: Arc<Sagas>) {
    let builder = sagas.egress().client(reqwest::Client::builder());
    let client = match builder.connect_timeout(Duration::from_millis(sagas.calls.connect_timeout_ms)).build() {
        Ok(client) => client,
        Err(e) => {
            tracing::error!("sagas: no HTTP client ({e}); the orchestrator does not run");
            return;
        }
    };
    loop {
        let next = match scan(&sagas, &client).await {
            Ok(next) => next,
            Err(e) => {
                tracing::warn!("sagas: a scan failed: {e}");
                None
            }
        };
        // The next due attempt or deadline is a timer on the clock; the scan for work started
        // through other nodes is a cadence in real time (as the alert evaluator's), so that an
        // idle orchestrator leaves a manual clock's deadlines alone.
        let notified = sagas.wake.notified();
        let due = async {
            match next {
                Some(at) => sagas.clock.sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = due => {}
            _ = tokio::time::sleep(Duration::from_millis(sagas.calls.scan_ms)) => {}
            _ = notified => {}
        }
    }
}

/// Advances every due instance; answers when the next one not yet due is.
async fn scan(sagas: &Arc<Sagas>, client: &reqwest::Client) -> Result<Option<u64>, SagaError> {
    let active = sagas.records(SAGA_ACTIVE_KIND, "").await?;
    sagas.active_seen.store(active.len(), Ordering::Relaxed);
    let now = sagas.now();
    let mut next: Option<u64> = None;
    for record in active {
        let entry: ActiveEntry = decode(&record.value).map_err(SagaError::Corrupt)?;
        match entry.due_at_ms {
            Some(at) if at <= now => advance(sagas, client, &record.key).await,
            Some(at) => next = Some(next.map_or(at, |n| n.min(at))),
            None => {}
        }
    }
    Ok(next)
}

/// Records the instance's next due attempt as in flight and starts the call. Boxed: a call
/// advances its instance again once answered, and that cycle needs a named `Send` future.
fn advance<'a>(sagas: &'a Arc<Sagas>, client: &'a reqwest::Client, id: &'a str) -> BoxFuture<'a> {
    Box::pin(async move {
        // The attempt's trace entry commits with the attempt recorded in flight: one write.
        let dispatched = sagas
            .update_traced(
                id,
                |i, d, now| Ok(i.dispatch(d, now, jitter(&i.id, now))),
                |i, dispatch| dispatch.iter().map(|d| attempt_entry(i, d)).collect(),
            )
            .await;
        match dispatched {
            Ok((instance, Some(dispatch))) => {
                let (sagas, client) = (sagas.clone(), client.clone());
                tokio::spawn(async move { call(&sagas, &client, instance, dispatch).await });
            }
            Ok((_, None)) => {}
            Err(SagaError::InstanceNotFound(_)) => {}
            Err(e) => tracing::warn!("sagas: instance {id} could not advance: {e}"),
        }
    })
}

type BoxFuture<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;

/// Makes one call and applies its outcome (a queue step's outcome comes later, as a reply).
async fn call(sagas: &Arc<Sagas>, client: &reqwest::Client, instance: SagaInstance, dispatch: Dispatch) {
    let outcome = match &dispatch.call {
        StepCall::Http { url, method, body } => {
            Some(http(sagas, client, &instance, &dispatch, url, method, body.as_ref()).await)
        }
        StepCall::Queue { queue, body, reply_queue, .. } => {
            send(sagas, &instance, &dispatch, queue, body, reply_queue.as_deref()).await
        }
    };
    let Some(outcome) = outcome else { return };
    let applied = sagas
        .update(&instance.id, |i, d, now| {
            Ok(i.on_result(d, dispatch.step, dispatch.kind, dispatch.attempt, outcome.clone(), now, jitter(&i.id, now)))
        })
        .await;
    match applied {
        // The next step is due at once: do not wait for the next scan.
        Ok(_) => advance(sagas, client, &instance.id).await,
        Err(e) => tracing::warn!("sagas: the answer to {} could not be kept: {e}", dispatch.idempotency_key),
    }
}

#[allow(clippy::too_many_arguments)]
async fn http(
    sagas: &Sagas,
    client: &reqwest::Client,
    instance: &SagaInstance,
    dispatch: &Dispatch,
    url: &str,
    method: &str,
    body: Option<&Value>,
) -> Outcome {
    let left_ms = dispatch.deadline_at_ms.saturating_sub(sagas.now()).clamp(1, sagas.calls.request_timeout_ms);
    if let Err(refused) = sagas.egress().check_url(url) {
        return Outcome::Failed { error: format!("{url}: {refused}"), retry: true };
    }
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap_or(reqwest::Method::POST);
    let mut request = client
        .request(method, url)
        .timeout(Duration::from_millis(left_ms))
        .header("Idempotency-Key", &dispatch.idempotency_key)
        .header("X-Correlation-Id", &instance.correlation_id)
        .header("X-Sluice-Saga-Instance", &instance.id)
        .header("X-Sluice-Saga-Step", &dispatch.step_name)
        .header("X-Sluice-Saga-Kind", dispatch.kind.as_str())
        .header("X-Sluice-Saga-Attempt", dispatch.attempt.to_string());
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => return Outcome::Failed { error: format!("{url}: {e}"), retry: true },
    };
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if status.is_success() {
        let output = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        return Outcome::Succeeded(output);
    }
    let retry = status.is_server_error() || status.as_u16() == 408 || status.as_u16() == 429;
    let excerpt: String = text.chars().take(300).collect();
    Outcome::Failed { error: format!("{url} answered {status}: {excerpt}"), retry }
}

/// The trace entry of an attempt the instance dispatched.
fn attempt_entry(instance: &SagaInstance, dispatch: &Dispatch) -> TraceEntry {
    let detail = format!("{} {} attempt {}", dispatch.step_name, dispatch.kind.as_str(), dispatch.attempt);
    TraceEntry::new(
        TraceKind::SagaStep,
        attempt_id(dispatch),
        &instance.correlation_id,
        format!("saga:{}", instance.saga),
    )
    .caused_by(Some(&instance.id))
    .detail(Some(&detail))
}

/// An attempt's id in the trace: `<instance>/<step>/<kind>/<attempt>`.
fn attempt_id(dispatch: &Dispatch) -> String {
    format!("{}/{}", dispatch.idempotency_key, dispatch.attempt)
}

fn text(value: impl Into<String>) -> AttributeValue {
    AttributeValue { data_type: "String".into(), value: AttributeData::Text(value.into()) }
}

/// Sends a queue step's message; `None` once sent (the reply decides), or the failure.
async fn send(
    sagas: &Sagas,
    instance: &SagaInstance,
    dispatch: &Dispatch,
    queue: &str,
    body: &Value,
    reply_queue: Option<&str>,
) -> Option<Outcome> {
    let mut attributes = BTreeMap::from([
        (ATTR_INSTANCE.to_owned(), text(&instance.id)),
        (ATTR_STEP.to_owned(), text(&dispatch.step_name)),
        (ATTR_KIND.to_owned(), text(dispatch.kind.as_str())),
        (
            ATTR_ATTEMPT.to_owned(),
            AttributeValue { data_type: "Number".into(), value: AttributeData::Text(dispatch.attempt.to_string()) },
        ),
        (ATTR_IDEMPOTENCY_KEY.to_owned(), text(&dispatch.idempotency_key)),
        (ATTR_CORRELATION_ID.to_owned(), text(&instance.correlation_id)),
    ]);
    // The step's queues are stored in the definer's tenant; its participants name them within
    // it (the reply queue they answer to, and the queue in an error the tenant reads).
    if let Some(reply_queue) = reply_queue {
        attributes.insert(ATTR_REPLY_QUEUE.to_owned(), text(split_tenant(reply_queue).1));
    }
    let shown = split_tenant(queue).1;
    let message = NewMessage {
        body: serde_json::to_vec(body).unwrap_or_default(),
        attributes,
        envelope: MessageEnvelope { correlation_id: Some(instance.correlation_id.clone()), ..Default::default() },
        ..Default::default()
    };
    match sagas.store.send(queue, vec![message]).await {
        Ok(results) => match results.into_iter().next() {
            Some(Ok(sent)) => {
                let attempt_id = attempt_id(dispatch);
                let entry = TraceEntry::new(
                    TraceKind::Message,
                    sent.id.to_string(),
                    &instance.correlation_id,
                    format!("queue:{queue}"),
                )
                .caused_by(Some(&attempt_id))
                .detail(Some(&dispatch.step_name));
                sagas.traces.record(vec![entry]).await;
                None
            }
            Some(Err(e)) => {
                Some(Outcome::Failed { error: format!("queue {shown} refused the message: {e}"), retry: false })
            }
            None => Some(Outcome::Failed { error: format!("queue {shown} answered nothing"), retry: true }),
        },
        Err(StoreError::Broker(BrokerError::QueueNotFound(_))) => {
            Some(Outcome::Failed { error: format!("no queue is named {shown}"), retry: false })
        }
        Err(e) => Some(Outcome::Failed { error: format!("queue {shown}: {e}"), retry: true }),
    }
}
