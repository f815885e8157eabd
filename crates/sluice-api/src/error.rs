//! The error body and the stable table of error codes. A code, once published, keeps its
//! meaning; clients match on it, never on the message.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `{"error": {...}}`, the body of every non-2xx answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorResponse {
    pub error: ErrorBody,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// A stable code from the table in `ErrorCode`.
    pub code: String,
    /// What went wrong and what to do about it, for people.
    pub message: String,
    /// Structured context, e.g. `{"field": "priority"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub details: Option<serde_json::Value>,
}

macro_rules! codes {
    ($($variant:ident = $code:literal, $status:literal, $doc:literal;)*) => {
        /// Every error code the native API returns, with its HTTP status.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode { $(#[doc = $doc] $variant,)* }

        impl ErrorCode {
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $code,)* }
            }

            /// The HTTP status of a whole-request error with this code. Per-entry errors in
            /// batch answers carry the code only.
            pub fn status(self) -> u16 {
                match self { $(ErrorCode::$variant => $status,)* }
            }

            pub fn description(self) -> &'static str {
                match self { $(ErrorCode::$variant => $doc,)* }
            }

            pub fn parse(code: &str) -> Option<ErrorCode> {
                match code { $($code => Some(ErrorCode::$variant),)* _ => None }
            }
        }
    };
}

codes! {
    InvalidJson = "invalid_json", 400, "The body is not valid JSON or does not have the expected shape.";
    InvalidArgument = "invalid_argument", 400, "A field breaks a rule; `details.field` names it.";
    BatchTooLarge = "batch_too_large", 400, "More entries than a batch may hold (1,000).";
    EmptyBatch = "empty_batch", 400, "A batch with no entries.";
    InvalidReceipt = "invalid_receipt", 400, "The receipt is not one this server issued.";
    ForeignReceipt = "foreign_receipt", 400, "The receipt belongs to another queue.";
    StaleReceipt = "stale_receipt", 409, "The receipt's delivery is over: the message was acked, moved or received again.";
    NotInFlight = "not_in_flight", 409, "The message's visibility timeout already passed.";
    MessageTooLarge = "message_too_large", 413, "A message is larger than the queue's message_bytes_max.";
    PayloadTooLarge = "payload_too_large", 413, "The request body is larger than the server accepts.";
    RequestTimeout = "request_timeout", 408, "The request body did not arrive in time (30 s); the connection is closed.";
    QueueNotFound = "queue_not_found", 404, "No queue has this name.";
    DeadLetterQueueNotFound = "dead_letter_queue_not_found", 400, "The dead-letter queue named in the policy does not exist.";
    QueueExists = "queue_exists", 409, "A queue of this name exists with different attributes.";
    RedriveNotFound = "redrive_not_found", 404, "No redrive task has this id.";
    RedriveRunning = "redrive_running", 409, "A redrive of this queue is already running.";
    LimitExceeded = "limit_exceeded", 400, "A server-wide limit (such as the number of queues) is reached.";
    TopicNotFound = "topic_not_found", 404, "No topic has this name.";
    TopicExists = "topic_exists", 409, "A topic of this name exists with different attributes or tags.";
    SubscriptionNotFound = "subscription_not_found", 404, "The topic has no subscription with this id.";
    SubscriptionExists = "subscription_exists", 409, "The endpoint is subscribed to the topic with different settings.";
    PublishIncomplete = "publish_incomplete", 503, "The message reached some matching subscriptions but the store refused it for others (full disk, failed sync): it is not acknowledged. Retry; subscriptions that have it may get it twice.";
    Contended = "contended", 409, "The topic or subscription kept changing under this call; retry it.";
    NotFound = "not_found", 404, "No such route.";
    MethodNotAllowed = "method_not_allowed", 405, "The route does not take this method.";
    UnsupportedMediaType = "unsupported_media_type", 415, "Send `Content-Type: application/json`.";
    StorePoisoned = "store_poisoned", 503, "A disk write or sync failed; the server refuses writes until restarted.";
    StoreUnavailable = "store_unavailable", 503, "The server's database could not be reached or failed this call (connection lost, failover, timeout); the call did not take effect, unless the connection broke while it committed. Retry; no restart is needed.";
    InsufficientStorage = "insufficient_storage", 507, "The disk holding the server's data is full; calls are refused until space is freed, then served again without a restart. Retry later.";
    ShuttingDown = "shutting_down", 503, "The server is shutting down.";
    Internal = "internal", 500, "An unexpected server error; the log has the details.";
    // Auth
    Unauthenticated = "unauthenticated", 401, "The call needs an API key (`Authorization: Bearer <key>`) and carries none, or one that is unknown, wrong or revoked.";
    Forbidden = "forbidden", 403, "The key lacks the scope this call needs; `details.scope_needed` names it (e.g. `queues:orders:send`).";
    KeyNotFound = "key_not_found", 404, "No API key has this id.";
    TenantNotFound = "tenant_not_found", 404, "No tenant of this name has quotas.";
    QuotaExceeded = "quota_exceeded", 429, "The tenant is at a quota (`details.quota`: max_resources or max_stored_bytes, with `limit` and `used`): delete resources or messages, or have the quota raised.";
    // Backpressure
    QueueFull = "queue_full", 429, "The queue is at its max_depth_messages or max_depth_bytes and its overflow policy is reject (`details` has the depth and the limits); retry after `Retry-After` seconds, or slow down as the send answers' depth nears the limit.";
    RateLimited = "rate_limited", 429, "The resource's rate_limit (token bucket) has no token for this call; retry after `Retry-After` seconds.";
    Shedding = "shedding", 503, "The server is past a load-shedding watermark (write backlog, memory or disk; `details.reason`) and refuses writes of this priority; retry after `Retry-After` seconds.";
    // Schedules
    ScheduleNotFound = "schedule_not_found", 404, "No schedule has this name.";
    ScheduleExists = "schedule_exists", 409, "A schedule of this name exists with a different definition.";
    // Streams
    StreamNotFound = "stream_not_found", 404, "No stream has this name.";
    StreamExists = "stream_exists", 409, "A stream of this name exists with different settings.";
    GroupNotFound = "group_not_found", 404, "The stream has no consumer group of this name.";
    GroupExists = "group_exists", 409, "A group of this name exists on the stream with different settings.";
    PartitionOutOfRange = "partition_out_of_range", 400, "The stream has no partition of this number; `details` names it and the partition count.";
    OffsetOutOfRange = "offset_out_of_range", 416, "The offset is below the partition's first kept offset (`details.first_offset`), or a commit is past its end.";
    OffsetRegression = "offset_regression", 409, "A commit below the committed offset: commits only move forward; seek to go back.";
    StaleGeneration = "stale_generation", 409, "The partition was reassigned or sought since the generation given, or is not this member's: fetch again.";
    RecordTooLarge = "record_too_large", 413, "A record is larger than the stream's record_bytes_max.";
    WrongGroupMode = "wrong_group_mode", 409, "The call is for the other group mode (commit and seek-free fetches are offsets mode; ack, release and nack are shared mode).";
    // Alerts
    AlertRuleNotFound = "alert_rule_not_found", 404, "No alert rule has this name.";
    AlertRuleExists = "alert_rule_exists", 409, "An alert rule of this name exists with other settings; delete it first.";
    // Relays
    RelayNotFound = "relay_not_found", 404, "No relay has this name.";
    RelayExists = "relay_exists", 409, "A relay of this name exists with a different configuration.";
    RelaySourceInUse = "relay_source_in_use", 409, "Another relay already publishes this table of this source (`details.relay`).";
    RelaySourceUnreachable = "relay_source_unreachable", 400, "The relay's source database could not be reached (connection refused, wrong host or credentials); nothing was created.";
    RelaySourceInvalid = "relay_source_invalid", 400, "The relay's source database answered, but the table or a mapped column is missing or cannot be read; nothing was created.";
    // Jobs
    JobNotFound = "job_not_found", 404, "No job has this id (it never existed, or it finished and was pruned after its result_ttl_ms).";
    StaleLease = "stale_lease", 409, "The lease names an attempt that is over (completed, failed, lapsed, cancelled): it changes nothing, and never a newer attempt.";
    JobFinished = "job_finished", 409, "The job already finished (succeeded or dead); it cannot be cancelled.";
    // Idempotency keys
    IdempotencyKeyInvalid = "idempotency_key_invalid", 400, "The Idempotency-Key header is not 1 to 255 visible ASCII characters; nothing was executed.";
    IdempotencyKeyMismatch = "idempotency_key_mismatch", 409, "The Idempotency-Key was used for this method and path with another body; nothing was executed.";
    IdempotencyKeyInUse = "idempotency_key_in_use", 409, "A request with this Idempotency-Key is still running; retry later, or send `Prefer: wait=N` to wait for its answer.";
    IdempotencyKeysFull = "idempotency_keys_full", 429, "The stored idempotency answers reached their bound (`details.bound`); nothing was executed. Retry after older keys expire, or raise the bound.";
    // Sagas
    SagaNotFound = "saga_not_found", 404, "No saga has this name (or it has no such version).";
    SagaInstanceNotFound = "saga_instance_not_found", 404, "No saga instance has this id.";
    SagaReplyUnmatched = "saga_reply_unmatched", 404, "No running instance with this correlation id waits for an answer from this step (check `kind` and `attempt`); nothing changed.";
    SagaWrongState = "saga_wrong_state", 409, "The instance is not in a state this call applies to (a settled instance cannot be cancelled; only a failed one's compensation can be retried).";
    // Schemas
    SchemaNotFound = "schema_not_found", 404, "No schema is registered for this type (or it has no such version).";
    SchemaInvalid = "schema_invalid", 400, "The schema is not a valid JSON Schema 2020-12 document (`details.reason` says why), or is larger than 256 KiB.";
    SchemaIncompatible = "schema_incompatible", 409, "The new version breaks the type's compatibility mode with an earlier version; `details.reasons` lists each way.";
    SchemaValidationFailed = "schema_validation_failed", 400, "The message breaks the schema of its type and version, or names none; `details.pointer` is where in the body.";
    // Event store
    WrongExpectedVersion = "wrong_expected_version", 409, "The stream is not at the expected version; `details.actual_version` is its last version (null: no stream). Nothing was appended.";
    EventIdConflict = "event_id_conflict", 409, "An event id of the append is already in the stream (`details.version`), and the append is not a retry of the one that put it there. Nothing was appended.";
    EventStreamNotFound = "event_stream_not_found", 404, "No event stream has this id (never written, or soft-deleted).";
    EventStreamDeleted = "event_stream_deleted", 410, "The event stream was hard-deleted and takes no more events.";
    EventSubscriptionNotFound = "event_subscription_not_found", 404, "No event subscription has this name.";
    EventSubscriptionExists = "event_subscription_exists", 409, "An event subscription of this name exists with different settings.";
    CheckpointRegression = "checkpoint_regression", 409, "A checkpoint below the subscription's current one (`details.checkpoint`): checkpoints only move forward.";
    SnapshotNotFound = "snapshot_not_found", 404, "The event stream has no snapshot.";
}
