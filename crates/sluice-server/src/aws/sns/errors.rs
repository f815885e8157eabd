//! SNS's errors, as AWS names and words them (reference §5.1 and `recorded-sns.json`), in the
//! AWS error type the SQS layer renders (`AwsError`: shape, Query code, status, message).

use axum::http::StatusCode;

use crate::aws::common::AwsError;
use sluice_services::topics::{ArnError, TAG_LIMIT_EXCEEDED, TopicError};

const BAD_REQUEST: StatusCode = StatusCode::BAD_REQUEST;

pub fn invalid_parameter(message: impl Into<String>) -> AwsError {
    AwsError::new("InvalidParameterException", "InvalidParameter", BAD_REQUEST, message)
}

pub fn parameter_value_invalid(message: impl Into<String>) -> AwsError {
    AwsError::new("InvalidParameterValueException", "ParameterValueInvalid", BAD_REQUEST, message)
}

/// The model's `ValidationException`, which AWS answers with the code `ValidationError`
/// (recorded).
pub fn validation_error(message: impl Into<String>) -> AwsError {
    AwsError::new("ValidationException", "ValidationError", BAD_REQUEST, message)
}

pub fn not_found(message: &str) -> AwsError {
    AwsError::new("NotFoundException", "NotFound", StatusCode::NOT_FOUND, message)
}

pub fn topic_not_found() -> AwsError {
    not_found("Topic does not exist")
}

pub fn subscription_not_found() -> AwsError {
    not_found("Subscription does not exist")
}

pub fn resource_not_found() -> AwsError {
    AwsError::new("ResourceNotFoundException", "ResourceNotFound", StatusCode::NOT_FOUND, "Resource does not exist")
}

pub fn internal(message: impl Into<String>) -> AwsError {
    AwsError::new("InternalErrorException", "InternalError", StatusCode::INTERNAL_SERVER_ERROR, message)
}

/// A required parameter that is absent or empty: `Invalid parameter: <name> Reason: no value
/// for required parameter` (recorded for `SubscriptionArn`).
pub fn required(parameter: &str) -> AwsError {
    invalid_parameter(format!("Invalid parameter: {parameter} Reason: no value for required parameter"))
}

/// Why an ARN parameter names nothing of this server. Another account's topic is a topic that
/// does not exist here.
pub fn arn_error(parameter: &str, e: ArnError, missing: fn() -> AwsError) -> AwsError {
    match e {
        ArnError::TooShort(n) => invalid_parameter(format!(
            "Invalid parameter: {parameter} Reason: An ARN must have at least 6 elements, not {n}"
        )),
        ArnError::Malformed => invalid_parameter(format!("Invalid parameter: {parameter}")),
        ArnError::OtherAccount => missing(),
    }
}

pub fn batch(shape: &'static str, code: &'static str, message: impl Into<String>) -> AwsError {
    AwsError::new(shape, code, BAD_REQUEST, message)
}

/// What a topics-service error means to an SNS client.
pub fn topic_error(e: TopicError) -> AwsError {
    match e {
        TopicError::TopicNotFound(_) => topic_not_found(),
        TopicError::SubscriptionNotFound(_) => subscription_not_found(),
        TopicError::TopicExists { tags: false, .. } => {
            invalid_parameter("Invalid parameter: Attributes Reason: Topic already exists with different attributes")
        }
        TopicError::TopicExists { tags: true, .. } => {
            invalid_parameter("Invalid parameter: Tags Reason: Topic already exists with different tags")
        }
        TopicError::SubscriptionExists(_) => invalid_parameter(
            "Invalid parameter: Attributes Reason: Subscription already exists with different attributes",
        ),
        TopicError::Invalid(i) => match i.sns_code {
            "ParameterValueInvalid" => parameter_value_invalid(i.sns_message),
            TAG_LIMIT_EXCEEDED => {
                AwsError::new("TagLimitExceededException", TAG_LIMIT_EXCEEDED, BAD_REQUEST, i.sns_message)
            }
            _ => invalid_parameter(i.sns_message),
        },
        TopicError::LimitExceeded { sns_code, sns_message, .. } => {
            let shape = match sns_code {
                "SubscriptionLimitExceeded" => "SubscriptionLimitExceededException",
                _ => "FilterPolicyLimitExceededException",
            };
            AwsError::new(shape, sns_code, StatusCode::FORBIDDEN, sns_message)
        }
        TopicError::Contended => AwsError::new(
            "ConcurrentAccessException",
            "ConcurrentAccess",
            BAD_REQUEST,
            "Can't perform multiple operations on a topic or subscription simultaneously.",
        ),
        TopicError::Corrupt(reason) => {
            tracing::error!("SNS request failed on a stored record: {reason}");
            internal("The request processing has failed because of an unknown error.")
        }
        TopicError::Store(e) => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_words() {
        let e = arn_error("TopicArn", ArnError::TooShort(1), topic_not_found);
        assert_eq!(
            (e.code, e.status.as_u16(), e.message.as_str()),
            (
                "InvalidParameter",
                400,
                "Invalid parameter: TopicArn Reason: An ARN must have at least 6 elements, not 1"
            )
        );
        let e = arn_error("TopicArn", ArnError::OtherAccount, topic_not_found);
        assert_eq!((e.code, e.status.as_u16(), e.message.as_str()), ("NotFound", 404, "Topic does not exist"));
        let e = topic_error(TopicError::TopicExists { name: "t".into(), tags: true });
        assert_eq!(e.message, "Invalid parameter: Tags Reason: Topic already exists with different tags");
    }
}
