//! Wire types of topics and subscriptions (`/v1/topics...`, `/v1/subscriptions`).
//!
//! Topic and subscription settings Sluice shares with SNS keep SNS's meaning; a filter policy
//! and a delivery policy are JSON objects in SNS's format. Settings that only SNS clients use
//! (a topic's `Policy`, feedback roles, ...) are in `attributes`, by their SNS names.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{Attribute, ErrorBody, RateLimit};

/// `POST /v1/topics`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTopicRequest {
    /// 1 to 256 ASCII letters, digits, `-` and `_`; a FIFO topic's name ends in `.fifo`.
    pub name: String,
    /// Order per message group, deduplication; subscriptions deliver into queues only. Set
    /// only at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fifo: Option<bool>,
    /// FIFO: deduplicate publishes without a `dedup_id` by the SHA-256 of their body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_based_dedup: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// The default delivery policy of HTTP/S subscriptions, in SNS's format
    /// (`{"http": {"defaultHealthyRetryPolicy": {...}}}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub delivery_policy: Option<serde_json::Value>,
    /// Other SNS topic attributes, by their SNS names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    /// Refuse a publish whose body breaks the schema registered for its `type` and `version`
    /// (the topic attribute `SchemaValidation`); default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_validation: Option<bool>,
    /// A token bucket on publishes (the topic attribute `RateLimit`): each message takes one;
    /// past it a message is refused as `rate_limited` (429 with `Retry-After` when every
    /// message of the call is). Absent: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
}

/// `PATCH /v1/topics/{name}`: the settings given change, the others stay (all in one write).
/// `fifo` and the tags are not changed here.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateTopicRequest {
    /// FIFO topics only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_based_dedup: Option<bool>,
    /// `""` removes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub delivery_policy: Option<serde_json::Value>,
    /// Other SNS topic attributes, by their SNS names (`""` removes an optional one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<BTreeMap<String, String>>,
    /// Check publishes against the schema registry (the topic attribute `SchemaValidation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_validation: Option<bool>,
    /// Absent: unchanged. `null`: remove the limit. An object: set it.
    #[serde(default, deserialize_with = "crate::double_option", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<RateLimit>)]
    pub rate_limit: Option<Option<RateLimit>>,
}

/// How many subscriptions a topic has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SubscriptionCounts {
    pub confirmed: u64,
    /// HTTP/S subscriptions waiting for confirmation.
    pub pending: u64,
}

/// A topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Topic {
    pub name: String,
    /// The ARN SNS clients name it by.
    pub arn: String,
    pub fifo: bool,
    /// FIFO topics only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_based_dedup: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Every attribute set on the topic, by its SNS name.
    pub attributes: BTreeMap<String, String>,
    pub tags: BTreeMap<String, String>,
    /// Publishes are checked against the schema registry.
    #[serde(default)]
    pub schema_validation: bool,
    /// The token bucket on publishes, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// Present on a single topic (`GET /v1/topics/{name}`), absent in lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscriptions: Option<SubscriptionCounts>,
    pub created_at: String,
    pub created_at_ms: u64,
}

/// `GET /v1/topics`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TopicList {
    pub topics: Vec<Topic>,
    /// Pass as `next_token` to get the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
}

/// What a filter policy's keys name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FilterPolicyScope {
    /// Message attributes (the default).
    Attributes,
    /// Properties of the JSON body.
    Body,
}

/// `POST /v1/topics/{name}/subscriptions`: give `queue` (a queue of this server, by name or
/// SQS ARN) or `endpoint` (an `http://` or `https://` URL).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubscribeRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Deliver the message itself instead of the SNS JSON envelope (attributes become the
    /// queue message's attributes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<bool>,
    /// An SNS filter policy: only matching messages are delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub filter_policy: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter_policy_scope: Option<FilterPolicyScope>,
    /// A queue for messages this subscription can never take (its queue is gone or refuses
    /// them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_queue: Option<String>,
    /// HTTP/S: retries in SNS's format (`{"healthyRetryPolicy": {...}}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub delivery_policy: Option<serde_json::Value>,
}

/// A subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Subscription {
    pub id: String,
    pub arn: String,
    pub topic: String,
    /// `sqs`, `http` or `https`.
    pub protocol: String,
    /// The queue's ARN, or the URL.
    pub endpoint: String,
    /// The queue the subscription delivers into (for HTTP/S: the queue its deliveries wait
    /// in for the push worker).
    pub queue: String,
    pub raw: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub filter_policy: Option<serde_json::Value>,
    pub filter_policy_scope: FilterPolicyScope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub delivery_policy: Option<serde_json::Value>,
    /// HTTP/S: waiting for the endpoint to confirm; nothing is delivered before.
    pub pending_confirmation: bool,
    /// HTTP/S: the key of the `x-sluice-signature` HMAC-SHA256 on every POST, for the endpoint
    /// to verify deliveries with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
    /// HTTP/S: the circuit breaker of the endpoint's `host:port` on the node that answered
    /// (`closed`, `open`, `half_open`); absent before that node has pushed to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<String>,
    pub created_at: String,
    pub created_at_ms: u64,
}

/// `GET /v1/topics/{name}/subscriptions` and `GET /v1/subscriptions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SubscriptionList {
    pub subscriptions: Vec<Subscription>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
}

/// One message to publish.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishMessage {
    /// UTF-8 text, at most 256 KiB with the attributes.
    pub body: String,
    /// Shown in the envelope's `Subject`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Typed attributes: `String`, `String.Array` (a JSON array), `Number`, `Binary`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, Attribute>,
    /// Required on FIFO topics; on standard topics passed on to standard queues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// FIFO topics only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_id: Option<String>,
    /// The message's type: the schema a topic with `schema_validation` checks it against.
    /// Carried to subscribers as the attribute `sluice.type`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub message_type: Option<String>,
    /// The schema version (default: the type's latest), carried as `sluice.version`; `"2"` or
    /// `2`.
    #[serde(default, deserialize_with = "crate::schemas::version_text", skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Carried to subscribers as the attribute `sluice.correlation_id`, and the key of the
    /// publish's entry in `GET /v1/trace/{correlation_id}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// What caused this publish, carried as the attribute `sluice.causation_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causation_id: Option<String>,
}

/// `POST /v1/topics/{name}/publish`: 1 to 100 messages.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishRequest {
    pub messages: Vec<PublishMessage>,
}

/// Per-message outcome of a publish: the message's `id` (and how many subscriptions it went
/// to), or `error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PublishResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// FIFO topics only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence_number: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliveries: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PublishResponse {
    pub results: Vec<PublishResult>,
}
