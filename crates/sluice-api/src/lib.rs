//! Wire types of the native HTTP API (`/v1/...`), shared by the server and the Rust client.
//!
//! Field names are `snake_case` with units last (`visibility_timeout_ms`); times are RFC 3339
//! strings with an `_ms` twin holding milliseconds since the Unix epoch. Every type derives
//! `utoipa::ToSchema` so that `/v1/openapi.json` is generated from these definitions.

pub mod alerts;
pub mod backpressure;
pub mod error;
pub mod events;
pub mod jobs;
pub mod keys;
pub mod relays;
pub mod sagas;
pub mod schedules;
pub mod schemas;
pub mod stats;
pub mod streams;
pub mod tenants;
pub mod topics;
pub mod trace;

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

pub use alerts::{Alert, AlertKind, AlertList, AlertNotify, AlertRule, AlertRuleList, CreateAlertRuleRequest};
pub use backpressure::{Overflow, QueueDepth, RateLimit, Refusals};
pub use error::{ErrorBody, ErrorCode, ErrorResponse};
pub use jobs::{
    CallbackSecret, ClaimJobsRequest, ClaimJobsResponse, ClaimedJob, CompleteJobRequest, EnqueueJobRequest,
    FailJobRequest, HeartbeatRequest, HeartbeatResponse, Job, JobBackoff, JobList, JobQueueStats, JobStatsList,
};
pub use keys::{ApiKey, CreateKeyRequest, CreatedKey, KeyList};
pub use relays::{AfterPublish, CreateRelayRequest, Relay, RelayColumns, RelayList, RelayStatus, RelayTarget};
pub use sagas::{
    DefineSagaRequest, Saga, SagaAttempt, SagaCall, SagaHttpCall, SagaInstance, SagaInstanceList, SagaList,
    SagaQueueCall, SagaReply, SagaReplyResponse, SagaRetry, SagaStep, SagaStepState, StartSagaRequest,
};
pub use schedules::{CatchUp, CreateScheduleRequest, Schedule, ScheduleJob, ScheduleList, ScheduleTarget};
pub use schemas::{
    CheckSchemaRequest, CheckSchemaResponse, Compatibility, IncompatibilityReason, RegisterSchemaRequest,
    RegisteredSchema, SchemaConfig, SchemaFailure, SchemaType, SchemaTypeList, SchemaVersion,
};
pub use stats::{QueueHistory, QueuePoint, QueueRates, QueueRatesList, Stats, StoreHealth, TotalsPoint};
pub use streams::{
    AppendRecord, AppendRequest, AppendResponse, AppendResult, CommitRequest, CreateGroupRequest, CreateStreamRequest,
    FetchRequest, FetchResponse, GroupList, GroupMode, GroupPartition, GroupStart, ReadResponse, ReceiptsRequest,
    SeekRequest, SeekResponse, StartName, Stream, StreamGroup, StreamList, StreamPartition, StreamRecord,
    UpdateStreamRequest,
};
pub use tenants::{Tenant, TenantList, TenantQuotas, TenantUsage};
pub use topics::{
    CreateTopicRequest, FilterPolicyScope, PublishMessage, PublishRequest, PublishResponse, PublishResult,
    SubscribeRequest, Subscription, SubscriptionCounts, SubscriptionList, Topic, TopicList, UpdateTopicRequest,
};
pub use trace::{TraceEntry, TraceResponse};

/// Dead-letter policy of a queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeadLetter {
    /// Name of the dead-letter queue (must exist).
    pub queue: String,
    /// Receives after which a message moves to the dead-letter queue (1 to 1000).
    pub max_receive_count: u32,
}

/// `POST /v1/queues`. Omitted attributes take their defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateQueueRequest {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility_timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_bytes_max: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive_wait_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<DeadLetter>,
    /// Strict order per message group, deduplication and sequence numbers. Set only at
    /// creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fifo: Option<bool>,
    /// FIFO: deduplicate sends without a `dedup_id` by the SHA-256 of their body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_based_dedup: Option<bool>,
    /// FIFO: how long a dedup id is remembered (default 300000, at most one day).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_window_ms: Option<u64>,
    /// FIFO: dedup ids are unique per `queue` (default) or per `message_group`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_scope: Option<DedupScope>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    /// Refuse a message whose body breaks the schema registered for its `type` and
    /// `version` (`/v1/schemas`); default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_validation: Option<bool>,
    /// Most messages the queue holds, whatever their state; a send past it follows
    /// `overflow`. Absent: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth_messages: Option<u64>,
    /// Most bytes (bodies and attributes) the queue holds; at least `message_bytes_max`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth_bytes: Option<u64>,
    /// What a send into a full queue does (default `reject`); `drop_head` and
    /// `reject_to_dlq` need a `dead_letter` policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overflow: Option<Overflow>,
    /// Move messages whose retention ran out to the dead-letter queue instead of deleting
    /// them (needs a `dead_letter` policy); default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expired_to_dlq: Option<bool>,
    /// A token bucket on sends: past it an entry is refused as `rate_limited` (429 with
    /// `Retry-After` when every entry is). Absent: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
}

/// What a FIFO dedup id is unique within.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DedupScope {
    Queue,
    MessageGroup,
}

/// `PATCH /v1/queues/{name}`. Omitted fields stay; `"dead_letter": null` removes the policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateQueueRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility_timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_bytes_max: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive_wait_ms: Option<u64>,
    /// Absent: unchanged. `null`: remove the policy. An object: set it.
    #[serde(default, deserialize_with = "double_option", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DeadLetter>)]
    pub dead_letter: Option<Option<DeadLetter>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_based_dedup: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_window_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_validation: Option<bool>,
    /// Absent: unchanged. `null`: remove the bound. A number: set it.
    #[serde(default, deserialize_with = "double_option", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<u64>)]
    pub max_depth_messages: Option<Option<u64>>,
    #[serde(default, deserialize_with = "double_option", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<u64>)]
    pub max_depth_bytes: Option<Option<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overflow: Option<Overflow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expired_to_dlq: Option<bool>,
    /// Absent: unchanged. `null`: remove the limit. An object: set it.
    #[serde(default, deserialize_with = "double_option", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<RateLimit>)]
    pub rate_limit: Option<Option<RateLimit>>,
}

pub(crate) fn double_option<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// Live counts of a queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct QueueCounts {
    /// Messages a receive could get now.
    pub visible: u64,
    /// Messages received and not yet acked, within their visibility timeout.
    pub in_flight: u64,
    /// Messages waiting for a delay (from a send or a nack).
    pub delayed: u64,
    /// Age of the oldest message in the queue, whatever its state; absent when empty.
    pub oldest_age_ms: Option<u64>,
    /// Messages in this queue's dead-letter queue; absent without a policy.
    pub dlq_depth: Option<u64>,
    /// Bytes of every message in the queue, as `max_depth_bytes` counts them.
    #[serde(default)]
    pub depth_bytes: u64,
    /// What the queue's depth limits refused or moved.
    #[serde(default)]
    pub refusals: Refusals,
}

/// A queue: its attributes and live counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Queue {
    pub name: String,
    pub visibility_timeout_ms: u64,
    pub delay_ms: u64,
    pub retention_ms: u64,
    pub message_bytes_max: u64,
    pub receive_wait_ms: u64,
    pub dead_letter: Option<DeadLetter>,
    pub fifo: bool,
    /// FIFO queues only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_based_dedup: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_window_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_scope: Option<DedupScope>,
    pub tags: BTreeMap<String, String>,
    /// Sends are checked against the schema registry.
    #[serde(default)]
    pub schema_validation: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth_messages: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth_bytes: Option<u64>,
    #[serde(default)]
    pub overflow: Overflow,
    #[serde(default)]
    pub expired_to_dlq: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    pub created_at: String,
    pub created_at_ms: u64,
    pub counts: QueueCounts,
}

/// `GET /v1/queues`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct QueueList {
    pub queues: Vec<Queue>,
    /// Pass as `next_token` to get the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
}

/// `POST /v1/queues/{name}/purge`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PurgeResponse {
    pub purged: u64,
}

/// A typed message attribute: `type` is `String`, `Number` or `Binary` (optionally with a
/// `.label`); a Binary value is base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Attribute {
    #[serde(rename = "type")]
    pub data_type: String,
    pub value: String,
}

/// One message to send. Give `body` (UTF-8 text) or `body_base64` (bytes), not both.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, Attribute>,
    /// Hide the message this long after the send (no 15-minute cap: anything within retention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Hide the message until this RFC 3339 time (alternative to `delay_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliver_at: Option<String>,
    /// 0 (default) to 9; higher first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    /// The message's type; on a queue with `schema_validation`, the schema its body must pass.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub message_type: Option<String>,
    /// The schema version to check against (default: the type's latest); `"2"` or `2`.
    #[serde(default, deserialize_with = "schemas::version_text", skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Names the business operation the message belongs to: `GET /v1/trace/{correlation_id}`
    /// lists every message, publish, event, job and saga step that carried it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// The id of what caused this message (a message, event, job or saga step id): the link
    /// the trace orders by. Kept as the system attribute `sluice.causation_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// Reserved for FIFO queues; refused on standard queues for now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_id: Option<String>,
}

/// `POST /v1/queues/{name}/messages`: up to 1,000 messages.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendRequest {
    pub messages: Vec<SendMessage>,
}

/// Per-entry outcome of a send: the new message's `id`, or `error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SendResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
    /// The queue was full and its `overflow` is `reject_to_dlq`: the message was accepted into
    /// the dead-letter queue instead.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dead_lettered: bool,
}

impl SendResult {
    pub fn sent(id: String) -> SendResult {
        SendResult { id: Some(id), error: None, dead_lettered: false }
    }

    pub fn refused(error: ErrorBody) -> SendResult {
        SendResult { id: None, error: Some(error), dead_lettered: false }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SendResponse {
    pub results: Vec<SendResult>,
    /// The queue's depth after the send and its limits, for a queue with a limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<QueueDepth>,
}

/// `POST /v1/queues/{name}/receive`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiveRequest {
    /// Most messages to return (1 to 1000, default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
    /// Long-poll: wait up to this long (at most 20000) for a message; the queue's
    /// `receive_wait_ms` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
    /// Visibility timeout for these deliveries; the queue's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility_timeout_ms: Option<u64>,
}

/// A message as receive and peek return it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Message {
    pub id: String,
    /// The body, when it was sent as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The body, when it was sent as bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    /// Present on received messages: pass it to ack, visibility and nack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
    /// Present on peeked messages: `visible`, `in_flight` or `delayed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    pub receive_count: u32,
    /// The message's sequence number, increasing in send order across the server, as a
    /// decimal string (FIFO queues order each group by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence_number: Option<String>,
    pub sent_at: String,
    pub sent_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_received_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_received_at_ms: Option<u64>,
    /// When an in-flight message becomes visible again, or a delayed one first does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visible_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, Attribute>,
    pub priority: u8,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub message_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// On a dead-lettered message: the queue it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_source: Option<String>,
    /// The reason given by the last nack, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// Answer of receive and peek.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MessageList {
    pub messages: Vec<Message>,
}

/// `POST /v1/queues/{name}/ack`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
    pub receipts: Vec<String>,
}

/// One entry of `POST /v1/queues/{name}/visibility`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VisibilityEntry {
    pub receipt: String,
    /// Remaining visibility from now; 0 makes the message visible at once.
    pub timeout_ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VisibilityRequest {
    pub entries: Vec<VisibilityEntry>,
}

/// One entry of `POST /v1/queues/{name}/nack`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NackEntry {
    pub receipt: String,
    /// Visible again after this long (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Why processing failed; kept on the message as `last_error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NackRequest {
    pub entries: Vec<NackEntry>,
}

/// Per-entry outcome of ack, visibility and nack: `ok`, or `error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EntryResult {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BatchResponse {
    pub results: Vec<EntryResult>,
}

/// `POST /v1/queues/{name}/redrive`: move this (dead-letter) queue's messages back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RedriveRequest {
    /// Destination queue; absent sends each message back to the queue it was dead-lettered from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Most messages moved per second (1 to 100000, default 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_per_second: Option<u32>,
}

/// A redrive task and its progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RedriveTask {
    pub id: String,
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    pub max_per_second: u32,
    /// `running`, `completed`, `cancelled` or `failed`.
    pub status: String,
    pub moved: u64,
    /// Messages left behind because their destination does not exist.
    pub failed: u64,
    /// Visible messages in the source when the task started.
    pub total: u64,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RedriveTaskList {
    pub tasks: Vec<RedriveTask>,
}
