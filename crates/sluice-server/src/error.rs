//! The one error type every handler returns, and how each lower-layer error maps to a stable
//! code from `sluice_api::ErrorCode`.
//!
//! The mapping lives here, and only here, so that a code keeps its meaning whichever handler
//! produced it. Answers with a 5xx status never carry the underlying error text (it can name
//! files, disks or internal state); it goes to the log instead.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sluice_api::{ErrorBody, ErrorCode, ErrorResponse};
use sluice_core::jobs::JobError;
use sluice_core::{BrokerError, EntryError, ValidationError};
use sluice_services::redrive::RedriveError;
use sluice_store::StoreError;

/// A whole-request failure: a code, a message for people, and optional structured details.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {message}", code.as_str())]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub details: Option<serde_json::Value>,
    /// Seconds a client should wait before retrying, sent as `Retry-After` (refusals of
    /// backpressure: `queue_full`, `rate_limited`, `shedding`).
    pub retry_after_s: Option<u64>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError { code, message: message.into(), details: None, retry_after_s: None }
    }

    pub fn with_retry_after(mut self, seconds: u64) -> ApiError {
        self.retry_after_s = Some(seconds.max(1));
        self
    }

    pub fn with_details(mut self, details: serde_json::Value) -> ApiError {
        self.details = Some(details);
        self
    }

    /// A bad request field: `invalid_argument` with `details.field`.
    pub fn invalid(field: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::InvalidArgument, message).with_details(json!({ "field": field }))
    }

    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// Whether the answer hides its cause: every 5xx, except `shedding`, a deliberate refusal
    /// whose reason (backlog, memory, disk) is what a client needs to back off.
    fn hides_cause(&self) -> bool {
        self.status().is_server_error() && self.code != ErrorCode::Shedding
    }

    /// The body a client sees. On 5xx the message is the code's fixed description.
    pub fn body(&self) -> ErrorBody {
        if self.hides_cause() {
            return ErrorBody {
                code: self.code.as_str().to_string(),
                message: self.code.description().to_string(),
                details: None,
            };
        }
        ErrorBody { code: self.code.as_str().to_string(), message: self.message.clone(), details: self.details.clone() }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if self.hides_cause() {
            // The client gets the generic description; the operator gets the cause.
            tracing::warn!(code = self.code.as_str(), cause = %self.message, "request failed");
        }
        let mut response = (status, Json(ErrorResponse { error: self.body() })).into_response();
        if let Some(seconds) = self.retry_after_s {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

impl From<ValidationError> for ApiError {
    fn from(e: ValidationError) -> ApiError {
        ApiError::invalid(&e.field, e.to_string())
    }
}

impl From<BrokerError> for ApiError {
    fn from(e: BrokerError) -> ApiError {
        let message = e.to_string();
        match e {
            BrokerError::QueueNotFound(queue) => {
                ApiError::new(ErrorCode::QueueNotFound, message).with_details(json!({ "queue": queue }))
            }
            BrokerError::QueueExists(queue) => {
                ApiError::new(ErrorCode::QueueExists, message).with_details(json!({ "queue": queue }))
            }
            BrokerError::DeadLetterQueueNotFound(queue) => ApiError::new(ErrorCode::DeadLetterQueueNotFound, message)
                .with_details(json!({ "field": "dead_letter.queue", "queue": queue })),
            BrokerError::TooManyQueues => ApiError::new(ErrorCode::LimitExceeded, message),
            BrokerError::Invalid(v) => v.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        match e {
            StoreError::Broker(b) => b.into(),
            StoreError::Poisoned(reason) => ApiError::new(ErrorCode::StorePoisoned, reason),
            StoreError::StorageFull(reason) => ApiError::new(ErrorCode::InsufficientStorage, reason),
            StoreError::Unavailable(reason) => ApiError::new(ErrorCode::StoreUnavailable, reason),
            StoreError::ShuttingDown => ApiError::new(ErrorCode::ShuttingDown, "storage is shutting down"),
            StoreError::Job(j) => j.into(),
        }
    }
}

impl From<JobError> for ApiError {
    fn from(e: JobError) -> ApiError {
        let message = e.to_string();
        match e {
            JobError::NotFound(id) => {
                ApiError::new(ErrorCode::JobNotFound, message).with_details(json!({ "job": id.to_string() }))
            }
            JobError::StaleLease { id, status } => ApiError::new(ErrorCode::StaleLease, message)
                .with_details(json!({ "job": id.to_string(), "status": status.as_str() })),
            JobError::Finished { id, status } => ApiError::new(ErrorCode::JobFinished, message)
                .with_details(json!({ "job": id.to_string(), "status": status.as_str() })),
            JobError::Invalid(v) => v.into(),
        }
    }
}

impl From<RedriveError> for ApiError {
    fn from(e: RedriveError) -> ApiError {
        match e {
            RedriveError::Invalid(v) => v.into(),
            RedriveError::Store(s) => s.into(),
            RedriveError::Running { ref queue, id } => ApiError::new(ErrorCode::RedriveRunning, e.to_string())
                .with_details(json!({ "queue": queue, "redrive": id.to_string() })),
            RedriveError::ShuttingDown => ApiError::new(ErrorCode::ShuttingDown, "the server is shutting down"),
        }
    }
}

impl From<sluice_services::topics::TopicError> for ApiError {
    fn from(e: sluice_services::topics::TopicError) -> ApiError {
        use sluice_services::topics::TopicError as T;
        let message = e.to_string();
        match e {
            T::TopicNotFound(topic) => {
                ApiError::new(ErrorCode::TopicNotFound, message).with_details(json!({ "topic": topic }))
            }
            T::SubscriptionNotFound(arn) => {
                ApiError::new(ErrorCode::SubscriptionNotFound, message).with_details(json!({ "subscription": arn }))
            }
            T::TopicExists { name, tags } => ApiError::new(ErrorCode::TopicExists, message)
                .with_details(json!({ "topic": name, "field": if tags { "tags" } else { "attributes" } })),
            T::SubscriptionExists(arn) => {
                ApiError::new(ErrorCode::SubscriptionExists, message).with_details(json!({ "subscription": arn }))
            }
            T::Invalid(i) => ApiError::invalid(&i.field, i.message),
            T::LimitExceeded { message, .. } => ApiError::new(ErrorCode::LimitExceeded, message),
            T::Contended => ApiError::new(ErrorCode::Contended, message),
            T::Corrupt(reason) => ApiError::new(ErrorCode::Internal, reason),
            T::Store(e) => e.into(),
        }
    }
}

impl From<sluice_store::LogError> for ApiError {
    fn from(e: sluice_store::LogError) -> ApiError {
        use sluice_core::stream::group::CommitError as C;
        use sluice_store::LogError as L;
        let message = e.to_string();
        match e {
            L::StreamNotFound(stream) => ApiError::new(ErrorCode::StreamNotFound, message).with_details(json!({ "stream": stream })),
            L::StreamExists(stream) => ApiError::new(ErrorCode::StreamExists, message).with_details(json!({ "stream": stream })),
            L::GroupNotFound { stream, group } => {
                ApiError::new(ErrorCode::GroupNotFound, message).with_details(json!({ "stream": stream, "group": group }))
            }
            L::GroupExists { stream, group } => {
                ApiError::new(ErrorCode::GroupExists, message).with_details(json!({ "stream": stream, "group": group }))
            }
            L::NoSuchPartition { partition, partitions } | L::Commit(C::NoSuchPartition { partition, partitions }) => {
                ApiError::new(ErrorCode::PartitionOutOfRange, message)
                    .with_details(json!({ "field": "partition", "partition": partition, "partitions": partitions }))
            }
            L::OffsetOutOfRange { partition, offset, first_offset, next_offset } => ApiError::new(ErrorCode::OffsetOutOfRange, message)
                .with_details(json!({ "partition": partition, "offset": offset, "first_offset": first_offset, "next_offset": next_offset })),
            L::Commit(C::UnknownMember { member }) => {
                ApiError::new(ErrorCode::StaleGeneration, message).with_details(json!({ "member": member }))
            }
            L::Commit(C::StaleGeneration { partition, given, assigned, current }) => ApiError::new(ErrorCode::StaleGeneration, message)
                .with_details(json!({ "partition": partition, "generation": given, "assigned_generation": assigned, "current_generation": current })),
            L::Commit(C::Regression { partition, offset, committed }) => ApiError::new(ErrorCode::OffsetRegression, message)
                .with_details(json!({ "partition": partition, "offset": offset, "committed_offset": committed })),
            L::Commit(C::BeyondEnd { partition, offset, next_offset }) => ApiError::new(ErrorCode::OffsetOutOfRange, message)
                .with_details(json!({ "partition": partition, "offset": offset, "next_offset": next_offset })),
            L::WrongMode { group, mode } => {
                ApiError::new(ErrorCode::WrongGroupMode, message).with_details(json!({ "group": group, "mode": mode }))
            }
            L::DeadLetterQueueNotFound(queue) => ApiError::new(ErrorCode::DeadLetterQueueNotFound, message)
                .with_details(json!({ "field": "dead_letter_queue", "queue": queue })),
            L::ExpectationFailed { .. } => ApiError::new(ErrorCode::Contended, message),
            L::LimitExceeded(m) => ApiError::new(ErrorCode::LimitExceeded, m),
            L::Unsupported => ApiError::new(ErrorCode::Internal, message),
            L::Invalid(v) => v.into(),
            L::Store(s) => s.into(),
        }
    }
}

impl From<sluice_store::EventError> for ApiError {
    fn from(e: sluice_store::EventError) -> ApiError {
        use sluice_core::events::AppendError as A;
        use sluice_store::EventError as E;
        let message = e.to_string();
        match e {
            E::Append(A::WrongExpectedVersion { expected, actual }) => {
                ApiError::new(ErrorCode::WrongExpectedVersion, message)
                    .with_details(json!({ "expected_version": expected.to_string(), "actual_version": actual }))
            }
            E::Append(A::EventIdConflict { id, version }) => ApiError::new(ErrorCode::EventIdConflict, message)
                .with_details(json!({ "event_id": id, "version": version })),
            E::Append(A::StreamNotFound) => ApiError::new(ErrorCode::EventStreamNotFound, message),
            E::Append(A::StreamTombstoned) => ApiError::new(ErrorCode::EventStreamDeleted, message),
            E::Invalid(v) => v.into(),
            E::Unsupported => ApiError::new(ErrorCode::Internal, message),
            E::Store(s) => s.into(),
        }
    }
}

impl From<sluice_services::events::EventsError> for ApiError {
    fn from(e: sluice_services::events::EventsError) -> ApiError {
        use sluice_core::events::CheckpointError as C;
        use sluice_services::events::EventsError as E;
        let message = e.to_string();
        match e {
            E::SubscriptionNotFound(name) => ApiError::new(ErrorCode::EventSubscriptionNotFound, message)
                .with_details(json!({ "subscription": name })),
            E::SubscriptionExists(name) => {
                ApiError::new(ErrorCode::EventSubscriptionExists, message).with_details(json!({ "subscription": name }))
            }
            E::TooManySubscriptions => ApiError::new(ErrorCode::LimitExceeded, message),
            E::SnapshotNotFound(stream) => {
                ApiError::new(ErrorCode::SnapshotNotFound, message).with_details(json!({ "stream_id": stream }))
            }
            E::Checkpoint(C::Regression { current, asked }) => ApiError::new(ErrorCode::CheckpointRegression, message)
                .with_details(json!({ "checkpoint": current, "position": asked })),
            E::Checkpoint(C::PastEnd { asked, head }) => ApiError::new(ErrorCode::InvalidArgument, message)
                .with_details(json!({ "field": "position", "position": asked, "head_position": head })),
            E::Contended => ApiError::new(ErrorCode::Contended, message),
            E::Event(e) => e.into(),
        }
    }
}

impl From<sluice_services::alerts::AlertError> for ApiError {
    fn from(e: sluice_services::alerts::AlertError) -> ApiError {
        use sluice_services::alerts::AlertError as A;
        let message = e.to_string();
        match e {
            A::Invalid(v) => v.into(),
            A::RuleNotFound(rule) => {
                ApiError::new(ErrorCode::AlertRuleNotFound, message).with_details(json!({ "rule": rule }))
            }
            A::RuleExists(rule) => {
                ApiError::new(ErrorCode::AlertRuleExists, message).with_details(json!({ "rule": rule }))
            }
            A::TooManyRules => ApiError::new(ErrorCode::LimitExceeded, message)
                .with_details(json!({ "alert_rules_max": sluice_services::alerts::ALERT_RULES_MAX })),
            A::Corrupt(reason) => ApiError::new(ErrorCode::Internal, reason),
            A::Store(s) => s.into(),
        }
    }
}

impl From<sluice_services::relays::RelayError> for ApiError {
    fn from(e: sluice_services::relays::RelayError) -> ApiError {
        use sluice_services::relays::RelayError;
        let message = e.to_string();
        match e {
            RelayError::NotFound(name) => {
                ApiError::new(ErrorCode::RelayNotFound, message).with_details(json!({ "relay": name }))
            }
            RelayError::Exists(name) => {
                ApiError::new(ErrorCode::RelayExists, message).with_details(json!({ "relay": name }))
            }
            RelayError::SourceInUse { relay } => {
                ApiError::new(ErrorCode::RelaySourceInUse, message).with_details(json!({ "relay": relay }))
            }
            RelayError::Invalid(v) => v.into(),
            RelayError::SourceUnreachable(why) => ApiError::new(ErrorCode::RelaySourceUnreachable, why),
            RelayError::SourceInvalid(why) => ApiError::new(ErrorCode::RelaySourceInvalid, why),
            RelayError::LimitExceeded => ApiError::new(ErrorCode::LimitExceeded, message),
            RelayError::Contended => ApiError::new(ErrorCode::Contended, message),
            RelayError::Corrupt(why) => ApiError::new(ErrorCode::Internal, why),
            RelayError::Store(e) => e.into(),
        }
    }
}

impl From<sluice_services::sagas::SagaError> for ApiError {
    fn from(e: sluice_services::sagas::SagaError) -> ApiError {
        use sluice_services::sagas::SagaError as S;
        let message = e.to_string();
        match e {
            S::NotFound(name) => ApiError::new(ErrorCode::SagaNotFound, message).with_details(json!({ "saga": name })),
            S::VersionNotFound { name, version } => ApiError::new(ErrorCode::SagaNotFound, message)
                .with_details(json!({ "saga": name, "version": version })),
            S::InstanceNotFound(id) => {
                ApiError::new(ErrorCode::SagaInstanceNotFound, message).with_details(json!({ "instance": id }))
            }
            S::ReplyUnmatched { correlation_id, step } => ApiError::new(ErrorCode::SagaReplyUnmatched, message)
                .with_details(json!({ "correlation_id": correlation_id, "step": step })),
            S::WrongState { status, .. } => {
                ApiError::new(ErrorCode::SagaWrongState, message).with_details(json!({ "status": status }))
            }
            S::Invalid(v) => v.into(),
            S::LimitExceeded(why) => ApiError::new(ErrorCode::LimitExceeded, why),
            S::Contended => ApiError::new(ErrorCode::Contended, message),
            S::Corrupt(why) => ApiError::new(ErrorCode::Internal, why),
            S::Store(e) => e.into(),
        }
    }
}

/// A refusal at the door, as a native per-entry error (or a whole answer's error).
pub fn violation_body(v: &sluice_services::schemas::Violation) -> ErrorBody {
    let errors: Vec<_> = v.failures.iter().map(failure).collect();
    ErrorBody {
        code: ErrorCode::SchemaValidationFailed.as_str().to_string(),
        message: v.to_string(),
        details: Some(json!({
            "pointer": v.pointer,
            "type": v.r#type,
            "version": v.version,
            "reason": v.reason,
            "errors": errors,
        })),
    }
}

/// A refusal at the door of a single call (a job's enqueue): 400 `schema_validation_failed`.
pub fn violation_error(v: &sluice_services::schemas::Violation) -> ApiError {
    let body = violation_body(v);
    let error = ApiError::new(ErrorCode::SchemaValidationFailed, body.message);
    match body.details {
        Some(details) => error.with_details(details),
        None => error,
    }
}

pub(crate) fn failure(f: &sluice_services::schemas::validate::Failure) -> sluice_api::SchemaFailure {
    sluice_api::SchemaFailure {
        pointer: f.pointer.clone(),
        schema_path: f.schema_path.clone(),
        message: f.message.clone(),
    }
}

/// A publish entry's error.
pub fn publish_error(e: &sluice_services::topics::PublishError, prefix: &str) -> ErrorBody {
    use sluice_services::topics::PublishError as P;
    match e {
        P::Schema(v) => violation_body(v),
        P::Invalid(i) => ErrorBody {
            code: ErrorCode::InvalidArgument.as_str().to_string(),
            message: i.message.clone(),
            details: Some(json!({ "field": format!("{prefix}.{}", i.field) })),
        },
        P::QueueFull { delivered, matched, queue } => ErrorBody {
            code: ErrorCode::QueueFull.as_str().to_string(),
            message: e.to_string(),
            details: Some(json!({ "delivered": delivered, "matched": matched, "queue": queue })),
        },
        P::RateLimited { retry_after_ms } => ErrorBody {
            code: ErrorCode::RateLimited.as_str().to_string(),
            message: e.to_string(),
            details: Some(json!({ "retry_after_ms": retry_after_ms })),
        },
        P::Incomplete { delivered, matched, cause } => {
            tracing::warn!(%cause, delivered, matched, "a publish reached only some of its subscriptions");
            ErrorBody {
                code: ErrorCode::PublishIncomplete.as_str().to_string(),
                message: ErrorCode::PublishIncomplete.description().to_string(),
                details: Some(json!({ "delivered": delivered, "matched": matched })),
            }
        }
    }
}

/// The per-entry error of a batch answer. Entries carry a code, never a status.
pub fn entry_error(e: &EntryError) -> ErrorBody {
    let (code, details) = match e {
        EntryError::Invalid(v) => (ErrorCode::InvalidArgument, Some(json!({ "field": v.field }))),
        EntryError::MessageTooLarge { size_bytes, max_bytes } => {
            (ErrorCode::MessageTooLarge, Some(json!({ "size_bytes": size_bytes, "max_bytes": max_bytes })))
        }
        EntryError::InvalidReceipt(_) => (ErrorCode::InvalidReceipt, None),
        EntryError::ForeignReceipt => (ErrorCode::ForeignReceipt, None),
        // The native API does not tell a message that left the queue from one received again
        // (only the SQS rule of visibility changes reports it), and both are stale receipts.
        EntryError::StaleReceipt | EntryError::MessageGone => (ErrorCode::StaleReceipt, None),
        EntryError::NotInFlight => (ErrorCode::NotInFlight, None),
        EntryError::QueueFull { depth, max_messages, max_bytes } => {
            (ErrorCode::QueueFull, Some(queue_full_details(*depth, *max_messages, *max_bytes)))
        }
        EntryError::RateLimited { retry_after_ms } => {
            (ErrorCode::RateLimited, Some(json!({ "retry_after_ms": retry_after_ms })))
        }
    };
    ErrorBody { code: code.as_str().to_string(), message: e.to_string(), details }
}

/// How long a producer refused by a full queue should wait: a queue drains at the pace of its
/// consumers, which the server does not know, so one second, the smallest `Retry-After`.
pub const QUEUE_FULL_RETRY_AFTER_S: u64 = 1;

pub(crate) fn queue_full_details(
    depth: sluice_core::overflow::Depth,
    max_messages: Option<u64>,
    max_bytes: Option<u64>,
) -> serde_json::Value {
    json!({
        "depth_messages": depth.messages,
        "depth_bytes": depth.bytes,
        "max_depth_messages": max_messages,
        "max_depth_bytes": max_bytes,
        "retry_after_ms": QUEUE_FULL_RETRY_AFTER_S * 1000,
    })
}

/// The `Retry-After` (whole seconds, at least 1) of an entry refused by backpressure, `None`
/// for any other refusal.
pub fn retry_after_s(e: &EntryError) -> Option<u64> {
    match e {
        EntryError::QueueFull { .. } => Some(QUEUE_FULL_RETRY_AFTER_S),
        EntryError::RateLimited { retry_after_ms } => Some(retry_after_secs(*retry_after_ms)),
        _ => None,
    }
}

/// A wait in milliseconds as a `Retry-After` in whole seconds (rounded up, at least 1).
pub fn retry_after_secs(ms: u64) -> u64 {
    ms.div_ceil(1000).max(1)
}

/// A whole call refused by `what`'s rate limit ("the stream's", ...): 429 `rate_limited`, with
/// `Retry-After` and `details.retry_after_ms`.
pub fn rate_limited(what: &str, retry_after_ms: u64) -> ApiError {
    ApiError::new(ErrorCode::RateLimited, format!("{what} rate limit is reached: retry in {retry_after_ms} ms"))
        .with_retry_after(retry_after_secs(retry_after_ms))
        .with_details(json!({ "retry_after_ms": retry_after_ms }))
}

/// A per-entry error found by the server before the store saw the entry.
pub fn entry_validation_error(e: &ValidationError) -> ErrorBody {
    ErrorBody {
        code: ErrorCode::InvalidArgument.as_str().to_string(),
        message: e.to_string(),
        details: Some(json!({ "field": e.field })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_hide_their_cause() {
        let e: ApiError = StoreError::Poisoned("fsync of /secret/path failed: EIO".into()).into();
        assert_eq!(e.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body = e.body();
        assert_eq!(body.code, "store_poisoned");
        assert!(!body.message.contains("/secret/path"), "{}", body.message);
    }

    #[test]
    fn a_full_disk_is_507_and_says_it_resumes() {
        let e: ApiError = StoreError::StorageFull("no space left on /secret/path".into()).into();
        assert_eq!(e.status(), StatusCode::INSUFFICIENT_STORAGE);
        let body = e.body();
        assert_eq!(body.code, "insufficient_storage");
        assert!(!body.message.contains("/secret/path"), "{}", body.message);
        assert!(body.message.contains("without a restart"), "{}", body.message);
    }

    #[test]
    fn an_unavailable_database_is_503_and_says_retry_not_restart() {
        let e: ApiError = StoreError::Unavailable("connection refused to db.internal:5432".into()).into();
        assert_eq!(e.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body = e.body();
        assert_eq!(body.code, "store_unavailable");
        assert!(!body.message.contains("db.internal"), "{}", body.message);
        assert!(body.message.contains("Retry"), "{}", body.message);
        assert!(!body.message.contains("until restarted"), "{}", body.message);
    }

    #[test]
    fn validation_errors_name_the_field() {
        let e: ApiError = StoreError::from(ValidationError::new("priority", "must be 0 to 9")).into();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert_eq!(e.body().details, Some(json!({ "field": "priority" })));
    }

    #[test]
    fn entry_errors_have_their_codes() {
        let table = [
            (EntryError::StaleReceipt, "stale_receipt"),
            (EntryError::MessageGone, "stale_receipt"),
            (EntryError::ForeignReceipt, "foreign_receipt"),
            (EntryError::NotInFlight, "not_in_flight"),
            (EntryError::InvalidReceipt("x".into()), "invalid_receipt"),
            (EntryError::MessageTooLarge { size_bytes: 2, max_bytes: 1 }, "message_too_large"),
            (EntryError::Invalid(ValidationError::new("delay_ms", "x")), "invalid_argument"),
            (EntryError::RateLimited { retry_after_ms: 10 }, "rate_limited"),
            (
                EntryError::QueueFull {
                    depth: sluice_core::overflow::Depth { messages: 3, bytes: 9 },
                    max_messages: Some(3),
                    max_bytes: None,
                },
                "queue_full",
            ),
        ];
        for (e, code) in table {
            assert_eq!(entry_error(&e).code, code, "{e:?}");
        }
    }
}
