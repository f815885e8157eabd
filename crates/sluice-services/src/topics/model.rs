//! Topics and subscriptions as stored (store records, JSON with a format number), their ids,
//! and their ARNs.
//!
//! A topic is the record `topic/<name>`. A subscription is `subscription/<topic>/<id>`, so a
//! topic's subscriptions are one prefix. A subscription's id is derived from its topic, protocol
//! and endpoint (the first 128 bits of a SHA-256, shown as a UUID): subscribing the same endpoint
//! twice names the same record, which is how two nodes subscribing it at once end up with one
//! subscription (`insert_record` lets exactly one of them create it).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sluice_core::filter::FilterScope;
use sluice_core::rate::RateLimit;

use super::error::TopicError;

pub const TOPIC_KIND: &str = "topic";
pub const SUBSCRIPTION_KIND: &str = "subscription";

/// The format of both records; a reader refuses others rather than guess.
pub const RECORD_FORMAT: u8 = 1;

/// The SNS attribute that makes a FIFO topic, settable only at creation.
pub const FIFO_TOPIC: &str = "FifoTopic";
pub const CONTENT_BASED_DEDUPLICATION: &str = "ContentBasedDeduplication";
/// Sluice's own topic attribute (not AWS's): publishes are checked against the schema
/// registry; `true` or `false`, settable over SNS and the native API alike.
pub const SCHEMA_VALIDATION: &str = "SchemaValidation";
/// Sluice's own topic attribute: a token bucket on publishes, as JSON
/// `{"per_second": N, "burst": M}` (the native API's `rate_limit`); each published message
/// takes one token, shared by every node of the store.
pub const RATE_LIMIT: &str = "RateLimit";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRecord {
    pub format: u8,
    pub name: String,
    pub fifo: bool,
    /// The attributes set on the topic, by their SNS names, as set (`DisplayName`,
    /// `DeliveryPolicy`, `ContentBasedDeduplication`, ...); `FifoTopic` is `fifo`.
    pub attributes: BTreeMap<String, String>,
    pub tags: BTreeMap<String, String>,
    pub created_at_ms: u64,
}

impl TopicRecord {
    pub fn content_based_dedup(&self) -> bool {
        self.attributes.get(CONTENT_BASED_DEDUPLICATION).is_some_and(|v| v == "true")
    }

    pub fn schema_validation(&self) -> bool {
        self.attributes.get(SCHEMA_VALIDATION).is_some_and(|v| v == "true")
    }

    /// The token bucket on publishes, if any (the attribute was checked when it was set).
    pub fn rate_limit(&self) -> Option<RateLimit> {
        serde_json::from_str(self.attributes.get(RATE_LIMIT)?).ok()
    }
}

/// Where a subscription delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// Into a Sluice queue.
    Sqs,
    /// POSTs to a URL, made by the push worker from the subscription's delivery queue.
    Http,
    Https,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Sqs => "sqs",
            Protocol::Http => "http",
            Protocol::Https => "https",
        }
    }

    pub fn parse(text: &str) -> Option<Protocol> {
        match text {
            "sqs" => Some(Protocol::Sqs),
            "http" => Some(Protocol::Http),
            "https" => Some(Protocol::Https),
            _ => None,
        }
    }

    pub fn is_push(self) -> bool {
        matches!(self, Protocol::Http | Protocol::Https)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionRecord {
    pub format: u8,
    pub id: String,
    pub topic: String,
    pub protocol: Protocol,
    /// The endpoint as SNS shows it: the queue's ARN, or the URL.
    pub endpoint: String,
    /// The queue the subscription delivers into: the subscribed queue (`sqs`), or the
    /// subscription's own delivery queue that the push worker drains (`http`/`https`).
    pub queue: String,
    /// Whether `queue` is a FIFO queue (by its attributes when it existed at subscribe time,
    /// else by its `.fifo` name), which decides whether group and deduplication ids go with
    /// each delivery.
    pub queue_fifo: bool,
    pub raw: bool,
    /// The policy as set (its text is what SNS shows back); compiled when the topic is loaded.
    pub filter_policy: Option<String>,
    pub filter_scope: FilterScope,
    /// `RedrivePolicy` as set, and the dead-letter queue it names: where deliveries that can
    /// never succeed go (the queue is gone or refuses the message).
    pub redrive_policy: Option<String>,
    pub dead_letter_queue: Option<String>,
    /// HTTP/S: `DeliveryPolicy` as set (validated by `sluice_core::delivery`).
    pub delivery_policy: Option<String>,
    /// HTTP/S subscriptions wait for `ConfirmSubscription` with `token`; nothing is delivered
    /// to them before.
    pub pending: bool,
    pub token: Option<String>,
    /// HTTP/S: the key of the HMAC-SHA256 signature on every POST (`worker.rs`), 64 hex
    /// digits, shown to the owner so that the endpoint can verify deliveries. Absent on
    /// records written before pushes were signed; their POSTs go unsigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
    pub created_at_ms: u64,
}

impl SubscriptionRecord {
    pub fn key(&self) -> String {
        subscription_key(&self.topic, &self.id)
    }
}

pub fn subscription_key(topic: &str, id: &str) -> String {
    format!("{topic}/{id}")
}

/// A subscription's id: the first 128 bits of SHA-256 over topic, protocol and endpoint (the
/// queue's name for `sqs`, so that an ARN and a name subscribe the same queue once).
pub fn subscription_id(topic: &str, protocol: Protocol, endpoint: &str) -> String {
    let mut input = Vec::with_capacity(topic.len() + endpoint.len() + 8);
    for part in [topic, protocol.as_str(), endpoint] {
        input.extend_from_slice(part.as_bytes());
        input.push(0);
    }
    let hex = sluice_core::broker::content_dedup_id(&input);
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// The queue an HTTP/S subscription's deliveries wait in for the push worker.
pub fn push_queue_name(id: &str) -> String {
    format!("{}{id}", super::push::PUSH_QUEUE_PREFIX)
}

pub fn encode<T: Serialize>(record: &T) -> Vec<u8> {
    // Plain structs of strings, maps and numbers always serialise.
    serde_json::to_vec(record).unwrap_or_default()
}

pub fn decode_topic(bytes: &[u8]) -> Result<TopicRecord, TopicError> {
    let record: TopicRecord = serde_json::from_slice(bytes).map_err(|e| TopicError::Corrupt(format!("topic: {e}")))?;
    check_format(record.format)?;
    Ok(record)
}

pub fn decode_subscription(bytes: &[u8]) -> Result<SubscriptionRecord, TopicError> {
    let record: SubscriptionRecord =
        serde_json::from_slice(bytes).map_err(|e| TopicError::Corrupt(format!("subscription: {e}")))?;
    check_format(record.format)?;
    Ok(record)
}

fn check_format(format: u8) -> Result<(), TopicError> {
    if format == RECORD_FORMAT {
        Ok(())
    } else {
        Err(TopicError::Corrupt(format!("record format {format}, this version reads {RECORD_FORMAT}")))
    }
}

/// ARNs of this server's topics, subscriptions and queues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arns {
    pub region: String,
    pub account: String,
}

/// Why an ARN names nothing of this server, in SNS's words where it has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArnError {
    /// Fewer than six `:`-separated elements: `An ARN must have at least 6 elements, not N`.
    TooShort(usize),
    /// Six or more elements, but not an ARN of this kind.
    Malformed,
    /// Another account's resource: nothing of this server.
    OtherAccount,
}

impl Arns {
    pub fn topic(&self, name: &str) -> String {
        format!("arn:aws:sns:{}:{}:{name}", self.region, self.account)
    }

    pub fn subscription(&self, topic: &str, id: &str) -> String {
        format!("{}:{id}", self.topic(topic))
    }

    pub fn queue(&self, name: &str) -> String {
        format!("arn:aws:sqs:{}:{}:{name}", self.region, self.account)
    }

    /// The elements after `arn:<partition>:<service>:<region>:<account>:`, checked. The
    /// region is not compared: clients configured for another region still reach this server.
    fn resource<'a>(&self, arn: &'a str, service: &str) -> Result<Vec<&'a str>, ArnError> {
        let parts: Vec<&str> = arn.split(':').collect();
        if parts.len() < 6 {
            return Err(ArnError::TooShort(parts.len()));
        }
        if parts[0] != "arn" || parts[2] != service || parts[5].is_empty() {
            return Err(ArnError::Malformed);
        }
        if parts[4] != self.account {
            return Err(ArnError::OtherAccount);
        }
        Ok(parts[5..].to_vec())
    }

    /// The topic name of a topic ARN.
    pub fn parse_topic(&self, arn: &str) -> Result<String, ArnError> {
        match self.resource(arn, "sns")?.as_slice() {
            [name] => Ok(name.to_string()),
            _ => Err(ArnError::Malformed),
        }
    }

    /// The topic name and id of a subscription ARN.
    pub fn parse_subscription(&self, arn: &str) -> Result<(String, String), ArnError> {
        match self.resource(arn, "sns")?.as_slice() {
            [topic, id] if !id.is_empty() => Ok((topic.to_string(), id.to_string())),
            _ => Err(ArnError::Malformed),
        }
    }

    /// The queue name of an SQS queue ARN.
    pub fn parse_queue(&self, arn: &str) -> Result<String, ArnError> {
        match self.resource(arn, "sqs")?.as_slice() {
            [name] => Ok(name.to_string()),
            _ => Err(ArnError::Malformed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arns() -> Arns {
        Arns { region: "us-east-1".into(), account: "000000000000".into() }
    }

    #[test]
    fn arns_round_trip_and_refuse_others() {
        let a = arns();
        assert_eq!(a.parse_topic(&a.topic("t")).unwrap(), "t");
        assert_eq!(a.parse_topic("arn:aws:sns:eu-west-1:000000000000:t").unwrap(), "t", "any region");
        assert_eq!(a.parse_topic("t"), Err(ArnError::TooShort(1)));
        assert_eq!(a.parse_topic("arn:aws:sns:r:000000000000"), Err(ArnError::TooShort(5)));
        assert_eq!(a.parse_topic("arn:aws:sns:r:111111111111:t"), Err(ArnError::OtherAccount));
        assert_eq!(a.parse_topic("arn:aws:sqs:r:000000000000:t"), Err(ArnError::Malformed));
        let sub = a.subscription("t", "id-1");
        assert_eq!(a.parse_subscription(&sub).unwrap(), ("t".to_string(), "id-1".to_string()));
        assert_eq!(a.parse_subscription(&a.topic("t")), Err(ArnError::Malformed));
        assert_eq!(a.parse_queue(&a.queue("q")).unwrap(), "q");
    }

    #[test]
    fn ids_are_stable_per_endpoint() {
        let id = subscription_id("t", Protocol::Sqs, "q");
        assert_eq!(id, subscription_id("t", Protocol::Sqs, "q"));
        assert_ne!(id, subscription_id("t", Protocol::Sqs, "q2"));
        assert_ne!(id, subscription_id("t2", Protocol::Sqs, "q"));
        assert_ne!(id, subscription_id("t", Protocol::Http, "q"));
        assert_eq!(id.len(), 36);
        assert!(push_queue_name(&id).len() <= sluice_core::limits::QUEUE_NAME_LEN_MAX);
    }
}
