//! AWS errors: one type that carries what both protocols (JSON and Query) need to render an
//! error the way AWS does, for SQS, SNS and STS alike, and the one place where store errors
//! become AWS errors. SQS's own errors (and core's errors in SQS's words) are constructed in
//! `aws/sqs/errors.rs`, SNS's in `aws/sns/errors.rs`.
//!
//! Each error has two names. The *shape* is the JSON protocol's `__type` suffix and the name
//! of boto3's exception class; the *code* is the Query protocol's `<Code>`, the
//! `x-amzn-query-error` header and the key aws-sdk-rust matches typed errors on. The pairs and
//! statuses come from the SQS models (see `shared/reference/sqs-sns-wire.md` §1.4).

use axum::http::StatusCode;
use sluice_store::StoreError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct AwsError {
    pub shape: &'static str,
    pub code: &'static str,
    pub status: StatusCode,
    pub message: String,
}

const BAD_REQUEST: StatusCode = StatusCode::BAD_REQUEST;

impl AwsError {
    pub fn new(shape: &'static str, code: &'static str, status: StatusCode, message: impl Into<String>) -> AwsError {
        AwsError { shape, code, status, message: message.into() }
    }

    /// `Sender` for the client's mistakes, `Receiver` for the server's, as AWS reports them.
    pub fn fault(&self) -> &'static str {
        if self.status.is_server_error() { "Receiver" } else { "Sender" }
    }

    /// SNS's throttling error (`Throttled`, 429), which AWS SDKs retry with backoff.
    pub fn sns_throttled(message: impl Into<String>) -> AwsError {
        AwsError::new("ThrottledException", "Throttled", StatusCode::TOO_MANY_REQUESTS, message)
    }

    /// SQS's throttling error (`RequestThrottled`, 400), which AWS SDKs class as throttling
    /// and retry with backoff: Sluice answers it for a send into a full queue (`queue_full`),
    /// a rate limit and load shedding.
    pub fn request_throttled(message: impl Into<String>) -> AwsError {
        AwsError::new("RequestThrottled", "RequestThrottled", BAD_REQUEST, message)
    }

    pub fn invalid_parameter_value(message: impl Into<String>) -> AwsError {
        AwsError::new("InvalidParameterValueException", "InvalidParameterValue", BAD_REQUEST, message)
    }

    /// AWS's wording for a parameter outside its range: `Value 11 for parameter X is invalid.
    /// Reason: ...`.
    pub fn invalid_value(parameter: &str, value: impl std::fmt::Display, reason: &str) -> AwsError {
        AwsError::invalid_parameter_value(format!(
            "Value {value} for parameter {parameter} is invalid. Reason: {reason}"
        ))
    }

    pub fn missing_parameter(parameter: &str) -> AwsError {
        AwsError::new(
            "MissingRequiredParameterException",
            "MissingParameter",
            BAD_REQUEST,
            format!("The request must contain the parameter {parameter}."),
        )
    }

    pub fn malformed(detail: impl std::fmt::Display) -> AwsError {
        AwsError::invalid_parameter_value(format!("The request could not be read: {detail}"))
    }

    pub fn invalid_attribute_name(message: impl Into<String>) -> AwsError {
        AwsError::new("InvalidAttributeName", "InvalidAttributeName", BAD_REQUEST, message)
    }

    pub fn unknown_attribute(name: &str) -> AwsError {
        AwsError::invalid_attribute_name(format!("Unknown Attribute {name}."))
    }

    pub fn invalid_attribute_value(message: impl Into<String>) -> AwsError {
        AwsError::new("InvalidAttributeValue", "InvalidAttributeValue", BAD_REQUEST, message)
    }

    pub fn resource_not_found(message: impl Into<String>) -> AwsError {
        AwsError::new("ResourceNotFoundException", "ResourceNotFoundException", StatusCode::NOT_FOUND, message)
    }

    pub fn over_limit(message: impl Into<String>) -> AwsError {
        AwsError::new("OverLimit", "OverLimit", StatusCode::FORBIDDEN, message)
    }

    pub fn invalid_action(action: &str) -> AwsError {
        AwsError::new(
            "InvalidAction",
            "InvalidAction",
            BAD_REQUEST,
            format!("The action {action} is not valid for this endpoint."),
        )
    }

    pub fn missing_action() -> AwsError {
        AwsError::new("MissingAction", "MissingAction", BAD_REQUEST, "The request must contain the parameter Action.")
    }

    pub fn payload_too_large(limit: usize) -> AwsError {
        AwsError::new(
            "RequestEntityTooLarge",
            "RequestEntityTooLarge",
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("The request body is larger than {limit} bytes."),
        )
    }

    /// The store refused the call (poisoned after a failed sync, a full disk, its database
    /// unavailable) or is shutting down. The cause goes to the log, never to the client.
    pub fn service_unavailable() -> AwsError {
        AwsError::new(
            "ServiceUnavailable",
            "ServiceUnavailable",
            StatusCode::SERVICE_UNAVAILABLE,
            "The service is unavailable. Try again later.",
        )
    }

    pub fn internal() -> AwsError {
        AwsError::new(
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

/// A tenant's quota refusal in AWS's words: too many resources is `OverLimit` (SQS) or
/// `TopicLimitExceeded` (SNS), both 403; too many stored bytes is the service's throttling
/// error, which SDKs retry with backoff while consumers drain the queues.
pub fn tenant_refusal(sns: bool, e: sluice_services::tenants::TenantError) -> AwsError {
    use sluice_services::tenants::TenantError;
    let message = e.to_string();
    match e {
        TenantError::Quota(q) if q.quota == "max_resources" && sns => {
            AwsError::new("TopicLimitExceededException", "TopicLimitExceeded", StatusCode::FORBIDDEN, message)
        }
        TenantError::Quota(q) if q.quota == "max_resources" => AwsError::over_limit(message),
        TenantError::Quota(_) if sns => AwsError::sns_throttled(message),
        TenantError::Quota(_) => AwsError::request_throttled(message),
        TenantError::Store(s) => s.into(),
        _ => AwsError::new("InternalError", "InternalError", StatusCode::INTERNAL_SERVER_ERROR, message),
    }
}

impl From<StoreError> for AwsError {
    fn from(e: StoreError) -> AwsError {
        match e {
            StoreError::Broker(b) => b.into(),
            StoreError::Poisoned(reason) => {
                tracing::warn!(%reason, "SQS request refused: the store is poisoned");
                AwsError::service_unavailable()
            }
            StoreError::StorageFull(reason) => {
                // SQS has no "disk full"; ServiceUnavailable is what its SDKs retry with backoff.
                tracing::warn!(%reason, "SQS request refused: the disk is full");
                AwsError::service_unavailable()
            }
            StoreError::Unavailable(reason) => {
                // What SQS itself answers when it cannot serve a call for now; its SDKs retry it.
                tracing::warn!(%reason, "SQS request refused: the database is unavailable");
                AwsError::service_unavailable()
            }
            StoreError::ShuttingDown => AwsError::service_unavailable(),
            // No SQS or SNS action calls the job store.
            StoreError::Job(e) => {
                tracing::error!("an AWS request met a job error: {e}");
                AwsError::internal()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use sluice_core::BrokerError;

    use super::*;

    #[test]
    fn store_errors_keep_their_causes_out_of_answers() {
        let e: AwsError = StoreError::Poisoned("fsync of /secret failed".into()).into();
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(e.fault(), "Receiver");
        assert!(!e.message.contains("/secret"), "{}", e.message);
        let e: AwsError = StoreError::Unavailable("connection to db.internal:5432 refused".into()).into();
        assert_eq!((e.status, e.code), (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable"));
        assert!(!e.message.contains("db.internal"), "{}", e.message);
        let e: AwsError = StoreError::Broker(BrokerError::QueueNotFound("q".into())).into();
        assert_eq!((e.shape, e.code), ("QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue"));
    }

    #[test]
    fn batch_entries_carry_the_short_code() {
        let entry = AwsError::invalid_value("DelaySeconds", 901, "x").entry("a");
        assert_eq!(entry.code, "InvalidParameterValue");
        assert!(entry.sender_fault);
    }
}
