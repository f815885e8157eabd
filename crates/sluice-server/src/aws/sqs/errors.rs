//! SQS's errors: the constructors for what only SQS answers, and core's errors in SQS's words.

use axum::http::StatusCode;
use sluice_core::{BrokerError, EntryError};

use super::limits::{BATCH_ENTRIES_MAX, BATCH_PAYLOAD_BYTES_MAX};
use crate::aws::common::AwsError;

const BAD_REQUEST: StatusCode = StatusCode::BAD_REQUEST;

impl AwsError {
    pub fn queue_does_not_exist() -> AwsError {
        AwsError::new(
            "QueueDoesNotExist",
            "AWS.SimpleQueueService.NonExistentQueue",
            BAD_REQUEST,
            "The specified queue does not exist.",
        )
    }

    pub fn queue_name_exists(attribute: &str) -> AwsError {
        AwsError::new(
            "QueueNameExists",
            "QueueAlreadyExists",
            BAD_REQUEST,
            format!("A queue already exists with the same name and a different value for attribute {attribute}"),
        )
    }

    pub fn queue_deleted_recently() -> AwsError {
        AwsError::new(
            "QueueDeletedRecently",
            "AWS.SimpleQueueService.QueueDeletedRecently",
            BAD_REQUEST,
            "You must wait 60 seconds after deleting a queue before you can create another with the same name.",
        )
    }

    pub fn purge_in_progress(queue: &str) -> AwsError {
        AwsError::new(
            "PurgeQueueInProgress",
            "AWS.SimpleQueueService.PurgeQueueInProgress",
            StatusCode::FORBIDDEN,
            format!("Only one PurgeQueue operation on {queue} is allowed every 60 seconds."),
        )
    }

    pub fn receipt_handle_invalid(handle: &str) -> AwsError {
        AwsError::new(
            "ReceiptHandleIsInvalid",
            "ReceiptHandleIsInvalid",
            BAD_REQUEST,
            format!("The input receipt handle \"{handle}\" is not a valid receipt handle."),
        )
    }

    pub fn invalid_message_contents() -> AwsError {
        AwsError::new(
            "InvalidMessageContents",
            "InvalidMessageContents",
            BAD_REQUEST,
            "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF",
        )
    }

    pub fn empty_batch(entry: &str) -> AwsError {
        AwsError::new(
            "EmptyBatchRequest",
            "AWS.SimpleQueueService.EmptyBatchRequest",
            BAD_REQUEST,
            format!("There should be at least one {entry} in the request."),
        )
    }

    pub fn too_many_entries(count: usize) -> AwsError {
        AwsError::new(
            "TooManyEntriesInBatchRequest",
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
            BAD_REQUEST,
            format!("Maximum number of entries per request are {BATCH_ENTRIES_MAX}. You have sent {count}."),
        )
    }

    pub fn invalid_batch_entry_id() -> AwsError {
        AwsError::new(
            "InvalidBatchEntryId",
            "AWS.SimpleQueueService.InvalidBatchEntryId",
            BAD_REQUEST,
            "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.",
        )
    }

    pub fn batch_ids_not_distinct(id: &str) -> AwsError {
        AwsError::new(
            "BatchEntryIdsNotDistinct",
            "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
            BAD_REQUEST,
            format!("Id {id} repeated."),
        )
    }

    pub fn batch_too_long(bytes: u64) -> AwsError {
        AwsError::new(
            "BatchRequestTooLong",
            "AWS.SimpleQueueService.BatchRequestTooLong",
            BAD_REQUEST,
            format!(
                "Batch requests cannot be longer than {BATCH_PAYLOAD_BYTES_MAX} bytes. You have sent {bytes} bytes."
            ),
        )
    }
}

impl From<BrokerError> for AwsError {
    fn from(e: BrokerError) -> AwsError {
        match e {
            BrokerError::QueueNotFound(_) => AwsError::queue_does_not_exist(),
            // Callers that can meet this name the attribute; this is the fallback.
            BrokerError::QueueExists(_) => AwsError::queue_name_exists("QueueName"),
            BrokerError::DeadLetterQueueNotFound(_) => {
                AwsError::invalid_parameter_value("Dead letter target does not exist.")
            }
            BrokerError::TooManyQueues => AwsError::over_limit(e.to_string()),
            BrokerError::Invalid(v) => AwsError::invalid_parameter_value(v.message),
        }
    }
}

/// What a per-message store error means to an SQS client, for actions that take a receipt
/// handle. Stale receipts whose message is still in the queue are decided by each action (a
/// delete and a standard queue's visibility change succeed without effect), so the mapping
/// here is only their fallback.
pub fn receipt_error(e: &EntryError, handle: &str) -> AwsError {
    match e {
        EntryError::InvalidReceipt(_) | EntryError::ForeignReceipt => AwsError::receipt_handle_invalid(handle),
        EntryError::StaleReceipt | EntryError::MessageGone | EntryError::NotInFlight => AwsError::invalid_value(
            "ReceiptHandle",
            handle,
            "Message does not exist or is not available for visibility timeout change.",
        ),
        EntryError::Invalid(v) => AwsError::invalid_parameter_value(v.message.clone()),
        EntryError::MessageTooLarge { max_bytes, .. } => AwsError::invalid_parameter_value(format!(
            "One or more parameters are invalid. Reason: Message must be shorter than {max_bytes} bytes."
        )),
        e @ (EntryError::QueueFull { .. } | EntryError::RateLimited { .. }) => {
            AwsError::request_throttled(e.to_string())
        }
    }
}
