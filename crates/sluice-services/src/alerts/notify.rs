//! Alert webhooks, through the push worker (`topics/worker.rs`): each rule with a webhook owns a
//! FIFO queue, `sluice-alert-<rule>.fifo`, and every change of one of its alerts is sent there as
//! a [`PushDelivery`] whose body is the JSON notification. The worker drains it as it drains a
//! subscription's queue: signed POSTs (`x-sluice-signature`, with the rule's secret), retries
//! with backoff on [`ALERT_DELIVERY_POLICY`], the breaker of the endpoint's `host:port`.
//!
//! Exactly one notification per change: the evaluator first stores the change with the alert
//! (`Notice`), then sends it with a dedup id made of the rule, the subject and the change's
//! sequence number, then clears it. A crash between any two steps makes the next evaluation
//! send it again, and the queue's dedup window (a day) drops the copy. Per alert the queue keeps
//! order (the alert is the message group, and the worker takes one delivery at a time), so a
//! `resolved` is never POSTed before the `firing` it ends.
//!
//! After the last retry (about a quarter of an hour) a notification is dropped with a warning and counted
//! in `sluice_push_dropped_total{endpoint}`; deleting a rule deletes its queue and with it any
//! notification not yet delivered.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use sluice_core::delivery::{BackoffFunction, DeliveryPolicy};
use sluice_core::limits::DEDUP_WINDOW_MS_MAX;
use sluice_core::message::MessageEnvelope;
use sluice_core::{BrokerError, NewMessage, QueueAttributes};
use sluice_store::{RECORD_LIST_LIMIT_MAX, Store, StoreError};

use super::model::{self, Notice, RULE_KIND, RuleRecord};
use crate::topics::push::{MessageType, PUSH_FORMAT, PUSH_QUEUE_RETENTION_MS, PushDelivery};
use crate::topics::worker::{Target, TargetSource, TargetsFuture, endpoint_key};

/// The prefix and suffix of a rule's notification queue.
pub const ALERT_QUEUE_PREFIX: &str = "sluice-alert-";
const ALERT_QUEUE_SUFFIX: &str = ".fifo";

/// Retries of a webhook POST: 20, the first after a second, then growing to a minute, and the
/// last 10 a minute apart (a quarter of an hour in all, give or take the jitter).
pub const ALERT_DELIVERY_POLICY: DeliveryPolicy = DeliveryPolicy {
    retries: 20,
    no_delay_retries: 0,
    min_delay_retries: 1,
    max_delay_retries: 10,
    min_delay_ms: 1_000,
    max_delay_ms: 60_000,
    backoff_function: BackoffFunction::Exponential,
    max_receives_per_second: None,
    header_content_type: None,
};

pub fn queue_name(rule: &str) -> String {
    format!("{ALERT_QUEUE_PREFIX}{rule}{ALERT_QUEUE_SUFFIX}")
}

fn queue_attributes() -> QueueAttributes {
    QueueAttributes {
        fifo: true,
        dedup_window_ms: DEDUP_WINDOW_MS_MAX,
        retention_ms: PUSH_QUEUE_RETENTION_MS,
        ..QueueAttributes::default()
    }
}

/// Creates a rule's notification queue (nothing when it exists).
pub async fn create_queue(store: &dyn Store, rule: &str) -> Result<(), StoreError> {
    store.create_queue(&queue_name(rule), queue_attributes()).await.map(|_| ())
}

pub async fn delete_queue(store: &dyn Store, rule: &str) -> Result<(), StoreError> {
    match store.delete_queue(&queue_name(rule)).await {
        Ok(()) | Err(StoreError::Broker(BrokerError::QueueNotFound(_))) => Ok(()),
        Err(e) => Err(e),
    }
}

fn hex_digest(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The JSON a webhook receives.
pub fn payload(rule: &RuleRecord, subject: &str, notice: &Notice) -> serde_json::Value {
    serde_json::json!({
        "status": notice.status.as_str(),
        "rule": rule.name,
        "kind": rule.kind.as_str(),
        "target": rule.target,
        "subject": subject,
        "threshold": rule.threshold,
        "value": notice.value,
        "since": rfc3339(notice.since_ms),
        "since_ms": notice.since_ms,
        "at": rfc3339(notice.at_ms),
        "at_ms": notice.at_ms,
        "sequence": notice.sequence,
    })
}

pub fn rfc3339(ms: u64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default()
}

/// Sends one notice into the rule's queue (creating the queue if it went missing); a copy of
/// a notice sent before is dropped by the queue's dedup window.
pub async fn send(store: &dyn Store, rule: &RuleRecord, subject: &str, notice: &Notice) -> Result<(), StoreError> {
    let sequence = notice.sequence.to_string();
    let id = hex_digest(&[&rule.name, subject, &sequence]);
    let delivery = PushDelivery {
        format: PUSH_FORMAT,
        message_type: MessageType::Alert,
        message_id: id.clone(),
        topic_arn: String::new(),
        subscription_arn: None,
        raw: true,
        body: payload(rule, subject, notice).to_string(),
    };
    let mut message = delivery.to_message();
    message.dedup_id = Some(id);
    message.envelope = MessageEnvelope { group_id: Some(hex_digest(&[subject])), ..MessageEnvelope::default() };
    let queue = queue_name(&rule.name);
    match send_one(store, &queue, message.clone()).await {
        Err(StoreError::Broker(BrokerError::QueueNotFound(_))) => {
            create_queue(store, &rule.name).await?;
            send_one(store, &queue, message).await
        }
        other => other,
    }
}

async fn send_one(store: &dyn Store, queue: &str, message: NewMessage) -> Result<(), StoreError> {
    let mut results = store.send(queue, vec![message]).await?;
    match results.pop() {
        Some(Ok(_)) => Ok(()),
        Some(Err(e)) => Err(StoreError::Broker(BrokerError::Invalid(sluice_core::ValidationError::new(
            "notify",
            format!("the alert queue {queue} refused a notification: {e}"),
        )))),
        None => Ok(()),
    }
}

/// The push worker's view of the rules with webhooks.
pub struct WebhookTargets {
    pub store: Arc<dyn Store>,
}

impl TargetSource for WebhookTargets {
    fn targets(&self) -> TargetsFuture<'_> {
        Box::pin(async move {
            let mut out = Vec::new();
            let mut after: Option<String> = None;
            loop {
                let page = self
                    .store
                    .list_records(RULE_KIND, "", after.as_deref(), RECORD_LIST_LIMIT_MAX)
                    .await
                    .map_err(|e| e.to_string())?;
                let last = page.len() < RECORD_LIST_LIMIT_MAX;
                after = page.last().map(|r| r.key.clone());
                for record in page {
                    let rule = match model::decode::<RuleRecord>(&record.value, "alert rule") {
                        Ok(rule) => rule,
                        Err(e) => {
                            tracing::error!(key = %record.key, "alert webhooks: unreadable rule: {e}");
                            continue;
                        }
                    };
                    let Some(url) = rule.webhook.clone().filter(|_| !rule.disabled) else { continue };
                    let target = Target {
                        id: format!("alert:{}", rule.name),
                        queue: queue_name(&rule.name),
                        endpoint: endpoint_key(&url).unwrap_or_else(|| url.clone()),
                        url,
                        signing_secret: rule.signing_secret.clone(),
                        dead_letter_queue: None,
                        policy: ALERT_DELIVERY_POLICY,
                        receive_max: 1,
                    };
                    // Subscription keys are `<topic>/<id>`, and topic names have no ':'.
                    out.push((format!("alert:{}", rule.name), target));
                }
                if last {
                    return Ok(out);
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_is_valid_and_retries_for_minutes() {
        ALERT_DELIVERY_POLICY.validate().expect("a valid policy");
        let longest: u64 = (0..ALERT_DELIVERY_POLICY.retries)
            .map(|retry| ALERT_DELIVERY_POLICY.retry_delay_ms(retry, u64::MAX).unwrap_or(0))
            .sum();
        assert!((10 * 60_000..=30 * 60_000).contains(&longest), "{longest} ms of retries");
        assert_eq!(queue_name("x"), "sluice-alert-x.fifo");
        assert!(queue_name(&"n".repeat(model::ALERT_RULE_NAME_LEN_MAX)).len() <= 80);
    }
}
