//! Publish and PublishBatch: SNS's parameters and message attributes in, the topics service's
//! answers out.
//!
//! A message that reached some matching subscriptions but that the store refused for others
//! (`PublishError::Incomplete`) is not acknowledged: Publish answers `InternalError` (500, which
//! the SDKs retry), and a PublishBatch entry is `Failed` with the code `InternalError` and
//! `SenderFault: false`. A retry may deliver it again to the subscriptions that have it.
//! PublishBatch refuses the whole request when any entry breaks a rule, as AWS does (recorded),
//! so no entry is published from a batch that fails.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_core::AttributeValue;
use sluice_core::message::AttributeData;

use super::errors::{self, batch, invalid_parameter, parameter_value_invalid, topic_error, validation_error};
use super::{Ctx, lenient, output, parse};
use crate::aws::common::{AttributeIn, AwsError};
use sluice_services::topics::limits::{PUBLISH_BYTES_MAX, SNS_BATCH_ENTRIES_MAX, SNS_BATCH_ENTRY_ID_LEN_MAX};
use sluice_services::topics::{Publication, PublishError, TopicError};

type Outcome = Result<Option<Value>, AwsError>;

/// One message: Publish's parameters, or one PublishBatch entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct MessageIn {
    id: Option<String>,
    message: Option<String>,
    subject: Option<String>,
    message_structure: Option<String>,
    #[serde(deserialize_with = "lenient")]
    message_attributes: BTreeMap<String, AttributeIn>,
    message_group_id: Option<String>,
    message_deduplication_id: Option<String>,
}

impl MessageIn {
    /// `entry`: the 1-based position of a batch entry, for AWS's validation messages.
    fn publication(self, entry: Option<usize>) -> Result<Publication, AwsError> {
        let structure_json = match self.message_structure.as_deref() {
            None | Some("") => false,
            Some("json") => true,
            Some(_) => return Err(invalid_parameter("Invalid parameter: MessageStructure")),
        };
        Ok(Publication {
            message: self.message.unwrap_or_default(),
            subject: self.subject,
            attributes: attributes(self.message_attributes, entry)?,
            structure_json,
            group_id: self.message_group_id,
            dedup_id: self.message_deduplication_id,
            message_id: None,
            // The type is the attribute sluice.type (set from `type` above, natively).
            schema_type: None,
        })
    }

    fn payload_bytes(&self) -> usize {
        let attributes: usize = self.message_attributes.iter().map(|(name, a)| name.len() + a.payload_bytes()).sum();
        self.message.as_ref().map_or(0, String::len) + attributes
    }
}

/// SNS's message-attribute rules, with AWS's texts (recorded).
fn attributes(
    attributes: BTreeMap<String, AttributeIn>,
    entry: Option<usize>,
) -> Result<BTreeMap<String, AttributeValue>, AwsError> {
    let mut out = BTreeMap::new();
    for (name, a) in attributes {
        let Some(data_type) = a.data_type.filter(|t| !t.is_empty()) else {
            let at = match entry {
                Some(i) => format!("publishBatchRequestEntries.{i}.member.messageAttributes.{name}.member.dataType"),
                None => format!("messageAttributes.{name}.member.dataType"),
            };
            return Err(validation_error(format!(
                "1 validation error detected: Value null at '{at}' failed to satisfy constraint: Member must not be null"
            )));
        };
        let base = data_type.split('.').next().unwrap_or("").to_string();
        let value = match base.as_str() {
            "String" | "Number" => match (a.string_value, a.binary_value) {
                (Some(text), _) if !text.is_empty() => AttributeData::Text(text),
                (None, Some(_)) => {
                    return Err(parameter_value_invalid(format!(
                        "The message attribute '{name}' with type '{base}' must use field 'String'."
                    )));
                }
                _ => return Err(empty_attribute(&name, &base)),
            },
            "Binary" => match (a.binary_value, a.string_value) {
                (Some(encoded), _) if !encoded.is_empty() => match STANDARD.decode(encoded.as_bytes()) {
                    Ok(bytes) if !bytes.is_empty() => AttributeData::Bytes(bytes),
                    _ => return Err(empty_attribute(&name, &base)),
                },
                (None, Some(_)) => {
                    return Err(parameter_value_invalid(format!(
                        "The message attribute '{name}' with type 'Binary' must use field 'Binary'."
                    )));
                }
                _ => return Err(empty_attribute(&name, &base)),
            },
            _ => {
                return Err(parameter_value_invalid(format!(
                    "The message attribute '{name}' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String."
                )));
            }
        };
        out.insert(name, AttributeValue { data_type, value });
    }
    Ok(out)
}

fn empty_attribute(name: &str, base: &str) -> AwsError {
    parameter_value_invalid(format!(
        "The message attribute '{name}' must contain non-empty message attribute value for message attribute type '{base}'."
    ))
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct PublishInput {
    topic_arn: Option<String>,
    target_arn: Option<String>,
    phone_number: Option<String>,
    #[serde(flatten)]
    message: MessageIn,
}

/// The topic a publish names: `TopicArn`, or a topic's ARN in `TargetArn`.
fn target(ctx: &Ctx<'_>, topic_arn: &Option<String>, target_arn: &Option<String>) -> Result<String, AwsError> {
    if topic_arn.is_some() {
        return ctx.topic("TopicArn", topic_arn);
    }
    if let Some(target) = target_arn {
        // A platform endpoint's ARN (`.../endpoint/APNS/app/id`) names no topic.
        let is_topic_name = |name: &String| {
            let (_, local) = sluice_core::name::split_tenant(name);
            let base = local.strip_suffix(sluice_core::limits::FIFO_SUFFIX).unwrap_or(local);
            base.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        let topic = ctx.topics.arns().parse_topic(target).ok().filter(is_topic_name);
        return topic.and_then(|name| ctx.own(name)).ok_or_else(|| {
            invalid_parameter("Invalid parameter: TargetArn Reason: No endpoint found for the target arn specified")
        });
    }
    ctx.topic("TopicArn", &None)
}

pub async fn publish(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: PublishInput = parse(input)?;
    if input.topic_arn.is_none() && input.target_arn.is_none() && input.phone_number.is_some() {
        return Err(invalid_parameter(
            "Invalid parameter: PhoneNumber Reason: Sluice does not send SMS; publish to a topic",
        ));
    }
    let topic = target(ctx, &input.topic_arn, &input.target_arn)?;
    ctx.check_write(input.message.payload_bytes() as u64).await?;
    let publication = input.message.publication(None)?;
    let mut results = ctx.topics.publish(&topic, vec![publication], &ctx.origin).await.map_err(topic_error)?;
    match results.pop() {
        Some(Ok(published)) => {
            let mut out = json!({ "MessageId": published.message_id });
            if let Some(seq) = published.sequence_number {
                out["SequenceNumber"] = json!(seq);
            }
            output(out)
        }
        Some(Err(PublishError::Invalid(invalid))) => Err(topic_error(TopicError::Invalid(invalid))),
        Some(Err(PublishError::Schema(violation))) => Err(schema_refusal(&violation)),
        Some(Err(e @ PublishError::Incomplete { .. })) => Err(incomplete(&e)),
        Some(Err(e @ (PublishError::QueueFull { .. } | PublishError::RateLimited { .. }))) => Err(throttled(&e)),
        None => Err(errors::internal("The request processing has failed because of an unknown error.")),
    }
}

/// A message that breaks its schema (the topic has `SchemaValidation`). Sluice's own refusal,
/// so not one AWS words: the code is `InvalidParameterValue`, as for SQS.
fn schema_refusal(violation: &sluice_services::schemas::Violation) -> AwsError {
    AwsError::new(
        "InvalidParameterValueException",
        "InvalidParameterValue",
        axum::http::StatusCode::BAD_REQUEST,
        violation.to_string(),
    )
}

/// A message some subscriptions have and others could not take now.
fn incomplete(e: &PublishError) -> AwsError {
    tracing::warn!("SNS publish not acknowledged: {e}");
    errors::internal(
        "The message reached only some of the topic's subscriptions and was not acknowledged; retry it (subscriptions that have it may receive it twice).",
    )
}

/// A subscription's queue is full (its `overflow` is `reject`): SNS's throttling error,
/// `Throttled` (429), which AWS SDKs retry with backoff.
fn throttled(e: &PublishError) -> AwsError {
    AwsError::sns_throttled(e.to_string())
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct PublishBatchInput {
    topic_arn: Option<String>,
    #[serde(deserialize_with = "lenient")]
    publish_batch_request_entries: Vec<MessageIn>,
}

fn check_batch(entries: &[MessageIn]) -> Result<(), AwsError> {
    if entries.is_empty() {
        return Err(batch(
            "EmptyBatchRequestException",
            "EmptyBatchRequest",
            "The batch request doesn't contain any entries.",
        ));
    }
    if entries.len() > SNS_BATCH_ENTRIES_MAX {
        return Err(batch(
            "TooManyEntriesInBatchRequestException",
            "TooManyEntriesInBatchRequest",
            "The batch request contains more entries than permissible.",
        ));
    }
    let mut seen = BTreeSet::new();
    for entry in entries {
        let id = entry.id.as_deref().unwrap_or("");
        if id.chars().count() > SNS_BATCH_ENTRY_ID_LEN_MAX {
            return Err(batch(
                "InvalidBatchEntryIdException",
                "InvalidBatchEntryId",
                format!("The Id of a batch entry in the batch request is too long: {id}"),
            ));
        }
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(batch(
                "InvalidBatchEntryIdException",
                "InvalidBatchEntryId",
                format!("The Id of a batch entry in the batch request contains an impermissible character: {id}"),
            ));
        }
        if !seen.insert(id) {
            return Err(batch(
                "BatchEntryIdsNotDistinctException",
                "BatchEntryIdsNotDistinct",
                "Two or more batch entries in the request have the same Id.",
            ));
        }
    }
    if entries.iter().map(MessageIn::payload_bytes).sum::<usize>() > PUBLISH_BYTES_MAX {
        return Err(batch(
            "BatchRequestTooLongException",
            "BatchRequestTooLong",
            "The length of all the messages put together is more than the limit.",
        ));
    }
    Ok(())
}

pub async fn publish_batch(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: PublishBatchInput = parse(input)?;
    let topic = ctx.topic("TopicArn", &input.topic_arn)?;
    let entries = input.publish_batch_request_entries;
    check_batch(&entries)?;
    ctx.check_write(entries.iter().map(|e| e.payload_bytes() as u64).sum()).await?;
    let mut ids = Vec::with_capacity(entries.len());
    let mut publications = Vec::with_capacity(entries.len());
    for (i, entry) in entries.into_iter().enumerate() {
        ids.push(entry.id.clone().unwrap_or_default());
        let publication = entry.publication(Some(i + 1))?;
        ctx.topics.check_publication(&topic, &publication).await.map_err(topic_error)?;
        publications.push(publication);
    }
    let results = ctx.topics.publish(&topic, publications, &ctx.origin).await.map_err(topic_error)?;
    let mut successful = Vec::new();
    let mut failed = Vec::new();
    for (id, result) in ids.into_iter().zip(results) {
        match result {
            Ok(published) => {
                let mut entry = json!({ "Id": id, "MessageId": published.message_id });
                if let Some(seq) = published.sequence_number {
                    entry["SequenceNumber"] = json!(seq);
                }
                successful.push(entry);
            }
            Err(e) => {
                let error = match &e {
                    PublishError::Invalid(invalid) => topic_error(TopicError::Invalid(invalid.clone())),
                    PublishError::Schema(violation) => schema_refusal(violation),
                    PublishError::Incomplete { .. } => incomplete(&e),
                    PublishError::QueueFull { .. } | PublishError::RateLimited { .. } => throttled(&e),
                };
                failed.push(error.entry(&id));
            }
        }
    }
    output(json!({ "Successful": successful, "Failed": failed }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attribute(data_type: Option<&str>, string: Option<&str>, binary: Option<&str>) -> BTreeMap<String, AttributeIn> {
        BTreeMap::from([(
            "attr1".to_string(),
            AttributeIn {
                data_type: data_type.map(str::to_string),
                string_value: string.map(str::to_string),
                binary_value: binary.map(str::to_string),
            },
        )])
    }

    #[test]
    fn attribute_errors_in_aws_words() {
        let message = |a, entry| attributes(a, entry).unwrap_err();
        let e = message(attribute(Some("String"), None, None), None);
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                "ParameterValueInvalid",
                "The message attribute 'attr1' must contain non-empty message attribute value for message attribute type 'String'."
            )
        );
        let e = message(attribute(None, Some("x"), None), Some(1));
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                "ValidationError",
                "1 validation error detected: Value null at 'publishBatchRequestEntries.1.member.messageAttributes.attr1.member.dataType' failed to satisfy constraint: Member must not be null"
            )
        );
        assert_eq!(
            message(attribute(Some("String"), None, Some("AQ==")), None).message,
            "The message attribute 'attr1' with type 'String' must use field 'String'."
        );
        assert_eq!(
            message(attribute(Some("Number"), None, Some("AQ==")), None).message,
            "The message attribute 'attr1' with type 'Number' must use field 'String'."
        );
        assert_eq!(
            message(attribute(Some("Binary"), Some("x"), None), None).message,
            "The message attribute 'attr1' with type 'Binary' must use field 'Binary'."
        );
        let ok = attributes(attribute(Some("Binary"), None, Some("AgME")), None).unwrap();
        assert_eq!(ok["attr1"].value, AttributeData::Bytes(vec![2, 3, 4]));
    }

    #[test]
    fn batch_rules_in_aws_words() {
        let entry = |id: &str| MessageIn { id: Some(id.into()), message: Some("m".into()), ..Default::default() };
        assert_eq!(check_batch(&[]).unwrap_err().code, "EmptyBatchRequest");
        let eleven: Vec<MessageIn> = (0..11).map(|i| entry(&i.to_string())).collect();
        assert_eq!(check_batch(&eleven).unwrap_err().code, "TooManyEntriesInBatchRequest");
        assert_eq!(check_batch(&[entry("a"), entry("a")]).unwrap_err().code, "BatchEntryIdsNotDistinct");
        assert_eq!(
            check_batch(&[entry("message.id")]).unwrap_err().message,
            "The Id of a batch entry in the batch request contains an impermissible character: message.id"
        );
        let long = "a".repeat(81);
        assert_eq!(
            check_batch(&[entry(&long)]).unwrap_err().message,
            format!("The Id of a batch entry in the batch request is too long: {long}")
        );
        assert!(check_batch(&[entry(&"a".repeat(80)), entry("valid-message_123")]).is_ok());
        let big = MessageIn { message: Some("x".repeat(PUBLISH_BYTES_MAX)), ..entry("b") };
        assert_eq!(check_batch(&[entry("a"), big]).unwrap_err().code, "BatchRequestTooLong");
    }
}
