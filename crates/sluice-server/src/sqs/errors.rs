//! SQS errors: one type that carries what both protocols need to render an error the way AWS
//! does, and the one place where store and core errors become SQS errors.
//!
//! Each error has two names. The *shape* is the JSON protocol's `__type` suffix and the name
//! of boto3's exception class; the *code* is the Query protocol's `<Code>`, the
//! `x-amzn-query-error` header and the key aws-sdk-rust matches typed errors on. The pairs and
//! statuses come from the SQS models (see `shared/reference/sqs-sns-wire.md` §1.4).

use axum::http::StatusCode;
use sluice_core::{BrokerError, EntryError};
use sluice_store::StoreError;

use super::limits::{BATCH_ENTRIES_MAX, BATCH_PAYLOAD_BYTES_MAX};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct SqsError {
    pub shape: &'static str,
    pub code: &'static str,
    pub status: StatusCode,
    pub message: String,
}

const BAD_REQUEST: StatusCode = StatusCode::BAD_REQUEST;

impl SqsError {
    pub fn new(shape: &'static str, code: &'static str, status: StatusCode, message: impl Into<String>) -> SqsError {
        SqsError { shape, code, status, message: message.into() }
    }

    /// `Sender` for the client's mistakes, `Receiver` for the server's, as AWS reports them.
    pub fn fault(&self) -> &'static str {
        if self.status.is_server_error() { "Receiver" } else { "Sender" }
    }

    pub fn invalid_parameter_value(message: impl Into<String>) -> SqsError {
        SqsError::new("InvalidParameterValueException", "InvalidParameterValue", BAD_REQUEST, message)
    }

    /// AWS's wording for a parameter outside its range: `Value 11 for parameter X is invalid.
    /// Reason: ...`.
    pub fn invalid_value(parameter: &str, value: impl std::fmt::Display, reason: &str) -> SqsError {
        SqsError::invalid_parameter_value(format!(
            "Value {value} for parameter {parameter} is invalid. Reason: {reason}"
        ))
    }

    pub fn missing_parameter(parameter: &str) -> SqsError {
        SqsError::new(
            "MissingRequiredParameterException",
            "MissingParameter",
            BAD_REQUEST,
            format!("The request must contain the parameter {parameter}."),
        )
    }

    pub fn malformed(detail: impl std::fmt::Display) -> SqsError {
        SqsError::invalid_parameter_value(format!("The request could not be read: {detail}"))
    }

    pub fn invalid_attribute_name(message: impl Into<String>) -> SqsError {
        SqsError::new("InvalidAttributeName", "InvalidAttributeName", BAD_REQUEST, message)
    }

    pub fn unknown_attribute(name: &str) -> SqsError {
        SqsError::invalid_attribute_name(format!("Unknown Attribute {name}."))
    }

    pub fn invalid_attribute_value(message: impl Into<String>) -> SqsError {
        SqsError::new("InvalidAttributeValue", "InvalidAttributeValue", BAD_REQUEST, message)
    }

    pub fn queue_does_not_exist() -> SqsError {
        SqsError::new(
            "QueueDoesNotExist",
            "AWS.SimpleQueueService.NonExistentQueue",
            BAD_REQUEST,
            "The specified queue does not exist.",
        )
    }

    pub fn queue_name_exists(attribute: &str) -> SqsError {
        SqsError::new(
            "QueueNameExists",
            "QueueAlreadyExists",
            BAD_REQUEST,
            format!("A queue already exists with the same name and a different value for attribute {attribute}"),
        )
    }

    pub fn queue_deleted_recently() -> SqsError {
        SqsError::new(
            "QueueDeletedRecently",
            "AWS.SimpleQueueService.QueueDeletedRecently",
            BAD_REQUEST,
            "You must wait 60 seconds after deleting a queue before you can create another with the same name.",
        )
    }

    pub fn purge_in_progress(queue: &str) -> SqsError {
        SqsError::new(
            "PurgeQueueInProgress",
            "AWS.SimpleQueueService.PurgeQueueInProgress",
            StatusCode::FORBIDDEN,
            format!("Only one PurgeQueue operation on {queue} is allowed every 60 seconds."),
        )
    }

    pub fn receipt_handle_invalid(handle: &str) -> SqsError {
        SqsError::new(
            "ReceiptHandleIsInvalid",
            "ReceiptHandleIsInvalid",
            BAD_REQUEST,
            format!("The input receipt handle \"{handle}\" is not a valid receipt handle."),
        )
    }

    pub fn invalid_message_contents() -> SqsError {
        SqsError::new(
            "InvalidMessageContents",
            "InvalidMessageContents",
            BAD_REQUEST,
            "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF",
        )
    }

    pub fn empty_batch(entry: &str) -> SqsError {
        SqsError::new(
            "EmptyBatchRequest",
            "AWS.SimpleQueueService.EmptyBatchRequest",
            BAD_REQUEST,
            format!("There should be at least one {entry} in the request."),
        )
    }

    pub fn too_many_entries(count: usize) -> SqsError {
        SqsError::new(
            "TooManyEntriesInBatchRequest",
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
            BAD_REQUEST,
            format!("Maximum number of entries per request are {BATCH_ENTRIES_MAX}. You have sent {count}."),
        )
    }

    pub fn invalid_batch_entry_id() -> SqsError {
        SqsError::new(
            "InvalidBatchEntryId",
            "AWS.SimpleQueueService.InvalidBatchEntryId",
            BAD_REQUEST,
            "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.",
        )
    }

    pub fn batch_ids_not_distinct(id: &str) -> SqsError {
        SqsError::new(
            "BatchEntryIdsNotDistinct",
            "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
            BAD_REQUEST,
            format!("Id {id} repeated."),
        )
    }

    pub fn batch_too_long(bytes: u64) -> SqsError {
        SqsError::new(
            "BatchRequestTooLong",
            "AWS.SimpleQueueService.BatchRequestTooLong",
            BAD_REQUEST,
            format!(
                "Batch requests cannot be longer than {BATCH_PAYLOAD_BYTES_MAX} bytes. You have sent {bytes} bytes."
            ),
        )
    }

    pub fn resource_not_found(message: impl Into<String>) -> SqsError {
        SqsError::new("ResourceNotFoundException", "ResourceNotFoundException", StatusCode::NOT_FOUND, message)
    }

    pub fn over_limit(message: impl Into<String>) -> SqsError {
        SqsError::new("OverLimit", "OverLimit", StatusCode::FORBIDDEN, message)
    }

    pub fn invalid_action(action: &str) -> SqsError {
        SqsError::new(
            "InvalidAction",
            "InvalidAction",
            BAD_REQUEST,
            format!("The action {action} is not valid for this endpoint."),
        )
    }

    pub fn missing_action() -> SqsError {
        SqsError::new("MissingAction", "MissingAction", BAD_REQUEST, "The request must contain the parameter Action.")
    }

    pub fn payload_too_large(limit: usize) -> SqsError {
        SqsError::new(
            "RequestEntityTooLarge",
            "RequestEntityTooLarge",
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("The request body is larger than {limit} bytes."),
        )
    }

    /// The store refused the call (poisoned after a failed sync, a full disk, its database
    /// unavailable) or is shutting down. The cause goes to the log, never to the client.
    pub fn service_unavailable() -> SqsError {
        SqsError::new(
            "ServiceUnavailable",
            "ServiceUnavailable",
            StatusCode::SERVICE_UNAVAILABLE,
            "The service is unavailable. Try again later.",
        )
    }

    pub fn internal() -> SqsError {
        SqsError::new(
            "InternalFailure",
            "InternalFailure",
            StatusCode::INTERNAL_SERVER_ERROR,
            "The request processing has failed because of an unknown error.",
        )
    }

    /// The same error as a batch entry's failure: batch entries carry the short query code.
    pub fn entry(&self, id: &str) -> BatchError {
        BatchError {
            id: id.to_string(),
            code: self.code,
            message: self.message.clone(),
            sender_fault: !self.status.is_server_error(),
        }
    }
}

/// One failed entry of a batch answer (`BatchResultErrorEntry`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BatchError {
    #[serde(rename = "Id")]
    pub id: String,
    #[serde(rename = "Code")]
    pub code: &'static str,
    #[serde(rename = "Message")]
    pub message: String,
    #[serde(rename = "SenderFault")]
    pub sender_fault: bool,
}

impl From<StoreError> for SqsError {
    fn from(e: StoreError) -> SqsError {
        match e {
            StoreError::Broker(b) => b.into(),
            StoreError::Poisoned(reason) => {
                tracing::warn!(%reason, "SQS request refused: the store is poisoned");
                SqsError::service_unavailable()
            }
            StoreError::StorageFull(reason) => {
                // SQS has no "disk full"; ServiceUnavailable is what its SDKs retry with backoff.
                tracing::warn!(%reason, "SQS request refused: the disk is full");
                SqsError::service_unavailable()
            }
            StoreError::Unavailable(reason) => {
                // What SQS itself answers when it cannot serve a call for now; its SDKs retry it.
                tracing::warn!(%reason, "SQS request refused: the database is unavailable");
                SqsError::service_unavailable()
            }
            StoreError::ShuttingDown => SqsError::service_unavailable(),
        }
    }
}

impl From<BrokerError> for SqsError {
    fn from(e: BrokerError) -> SqsError {
        match e {
            BrokerError::QueueNotFound(_) => SqsError::queue_does_not_exist(),
            // Callers that can meet this name the attribute; this is the fallback.
            BrokerError::QueueExists(_) => SqsError::queue_name_exists("QueueName"),
            BrokerError::DeadLetterQueueNotFound(_) => {
                SqsError::invalid_parameter_value("Dead letter target does not exist.")
            }
            BrokerError::TooManyQueues => SqsError::over_limit(e.to_string()),
            BrokerError::Invalid(v) => SqsError::invalid_parameter_value(v.message),
        }
    }
}

/// What a per-message store error means to an SQS client, for actions that take a receipt
/// handle. Stale receipts are decided by each action (delete succeeds, a visibility change
/// does not), so they are not mapped here.
pub fn receipt_error(e: &EntryError, handle: &str) -> SqsError {
    match e {
        EntryError::InvalidReceipt(_) | EntryError::ForeignReceipt => SqsError::receipt_handle_invalid(handle),
        EntryError::StaleReceipt | EntryError::NotInFlight => SqsError::invalid_value(
            "ReceiptHandle",
            handle,
            "Message does not exist or is not available for visibility timeout change.",
        ),
        EntryError::Invalid(v) => SqsError::invalid_parameter_value(v.message.clone()),
        EntryError::MessageTooLarge { max_bytes, .. } => SqsError::invalid_parameter_value(format!(
            "One or more parameters are invalid. Reason: Message must be shorter than {max_bytes} bytes."
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_keep_their_causes_out_of_answers() {
        let e: SqsError = StoreError::Poisoned("fsync of /secret failed".into()).into();
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(e.fault(), "Receiver");
        assert!(!e.message.contains("/secret"), "{}", e.message);
        let e: SqsError = StoreError::Unavailable("connection to db.internal:5432 refused".into()).into();
        assert_eq!((e.status, e.code), (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable"));
        assert!(!e.message.contains("db.internal"), "{}", e.message);
        let e: SqsError = StoreError::Broker(BrokerError::QueueNotFound("q".into())).into();
        assert_eq!((e.shape, e.code), ("QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue"));
    }

    #[test]
    fn batch_entries_carry_the_short_code() {
        let entry = SqsError::invalid_value("DelaySeconds", 901, "x").entry("a");
        assert_eq!(entry.code, "InvalidParameterValue");
        assert!(entry.sender_fault);
    }
}
