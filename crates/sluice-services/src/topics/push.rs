//! The seam between publishing and the HTTP/S push worker (`worker.rs`): durable delivery
//! records.
//!
//! An HTTP/S subscription owns a queue, `sluice-push-<subscription id>`, created when it
//! subscribes and deleted when it unsubscribes. Publishing to the topic sends each matching
//! message there as a [`PushDelivery`] (JSON in the message body): the exact body to POST and
//! the headers SNS sends with it. The confirmation request of a new subscription waits there
//! too. Because the deliveries are ordinary queue messages, they are as durable as any send
//! (the publish is acknowledged only after they are), and the push worker consumes them as any
//! consumer would: receive, POST, ack on success; on failure nack with the delay the
//! subscription's delivery policy gives (`sluice_core::delivery`), and after the last attempt
//! move the delivery to the subscription's dead-letter queue. A crash between a POST and its ack
//! makes the delivery visible again after its timeout: at-least-once, as SNS.
//!
//! These queues are visible in queue listings under their prefix, so that an operator can see
//! a subscription's backlog.

use serde::{Deserialize, Serialize};
use sluice_core::NewMessage;

/// The name prefix of the queues HTTP/S deliveries wait in.
pub const PUSH_QUEUE_PREFIX: &str = "sluice-push-";

/// How long a delivery may wait in a push queue for its endpoint (SNS gives up on HTTP/S
/// deliveries after an hour of retries; a queue keeps them for longer so that an open circuit
/// breaker or a stopped push worker does not lose them).
pub const PUSH_QUEUE_RETENTION_MS: u64 = 14 * 24 * 60 * 60 * 1000;

pub const PUSH_FORMAT: u8 = 1;

/// `x-amz-sns-message-type`, or another feature's delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MessageType {
    Notification,
    SubscriptionConfirmation,
    /// An alert webhook's notification (`alerts/notify.rs`): a JSON body, sent with
    /// `x-sluice-message-type: Alert` and without SNS's headers.
    Alert,
}

/// One POST to make.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushDelivery {
    pub format: u8,
    pub message_type: MessageType,
    /// `x-amz-sns-message-id`.
    pub message_id: String,
    /// `x-amz-sns-topic-arn`.
    pub topic_arn: String,
    /// `x-amz-sns-subscription-arn` (absent on confirmations, as in SNS).
    pub subscription_arn: Option<String>,
    /// Raw delivery: the body is the message itself, sent with `x-amz-sns-rawdelivery: true`.
    pub raw: bool,
    /// The request body: the JSON envelope, or the raw message.
    pub body: String,
}

impl PushDelivery {
    pub fn to_message(&self) -> NewMessage {
        NewMessage { body: serde_json::to_vec(self).unwrap_or_default(), ..Default::default() }
    }

    /// The delivery a push queue's message holds.
    pub fn from_body(body: &[u8]) -> Result<PushDelivery, String> {
        let delivery: PushDelivery = serde_json::from_slice(body).map_err(|e| format!("not a push delivery: {e}"))?;
        if delivery.format != PUSH_FORMAT {
            return Err(format!("push delivery format {}, this version reads {PUSH_FORMAT}", delivery.format));
        }
        Ok(delivery)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deliveries_round_trip_through_a_message() {
        let d = PushDelivery {
            format: PUSH_FORMAT,
            message_type: MessageType::Notification,
            message_id: "m".into(),
            topic_arn: "arn:aws:sns:r:0:t".into(),
            subscription_arn: Some("arn:aws:sns:r:0:t:s".into()),
            raw: true,
            body: "hello".into(),
        };
        assert_eq!(PushDelivery::from_body(&d.to_message().body).unwrap(), d);
        assert!(PushDelivery::from_body(b"hello").is_err());
    }
}
