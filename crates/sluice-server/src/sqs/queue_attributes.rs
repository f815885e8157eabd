//! Queue attributes between SQS's names and units (seconds, text values, a redrive policy in
//! JSON) and Sluice's `QueueAttributes` (milliseconds, a `DeadLetter`).
//!
//! One function, [`patch`], reads every writable SQS attribute into a `QueueAttributesPatch`,
//! so `CreateQueue`, `SetQueueAttributes` and `CreateQueue`'s comparison with an existing
//! queue all read attributes the same way. Attributes Sluice keeps but does not act on
//! (`Policy`, `RedriveAllowPolicy`, `Kms*`, `SqsManagedSseEnabled`) live verbatim in
//! `sqs_attributes`; values equal to AWS's defaults are not stored, so a queue configured with
//! a default reads back exactly like one that never mentioned it.

use std::collections::BTreeMap;

use serde_json::Value;
use sluice_core::broker::QueueView;
use sluice_core::{DeadLetter, QueueAttributesPatch, ValidationError};

use super::errors::SqsError;
use super::limits::*;
use super::urls::{self, ArnError};

pub const POLICY: &str = "Policy";
const REDRIVE_ALLOW_POLICY: &str = "RedriveAllowPolicy";
const KMS_MASTER_KEY_ID: &str = "KmsMasterKeyId";
const KMS_REUSE: &str = "KmsDataKeyReusePeriodSeconds";
const SSE_ENABLED: &str = "SqsManagedSseEnabled";

/// Every name `GetQueueAttributes` knows (the model's `QueueAttributeName`, less `All`).
const KNOWN: &[&str] = &[
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesDelayed",
    "ApproximateNumberOfMessagesNotVisible",
    "ContentBasedDeduplication",
    "CreatedTimestamp",
    "DeduplicationScope",
    "DelaySeconds",
    "FifoQueue",
    "FifoThroughputLimit",
    KMS_REUSE,
    KMS_MASTER_KEY_ID,
    "LastModifiedTimestamp",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    POLICY,
    "QueueArn",
    "ReceiveMessageWaitTimeSeconds",
    REDRIVE_ALLOW_POLICY,
    "RedrivePolicy",
    SSE_ENABLED,
    "VisibilityTimeout",
];

/// Which request the attributes come with: FIFO attributes are refused differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    Create,
    Set,
}

/// Reads SQS attributes into a patch. `account` is needed to resolve the dead-letter ARN.
pub fn patch(
    attributes: &BTreeMap<String, String>,
    request: Request,
    account: &str,
) -> Result<QueueAttributesPatch, SqsError> {
    let mut p = QueueAttributesPatch::default();
    for (name, value) in attributes {
        let seconds_ms = |min: u64, max: u64| whole_number(name, value, min, max).map(|s| s * 1000);
        match name.as_str() {
            "DelaySeconds" => p.delay_ms = Some(seconds_ms(0, DELAY_SECONDS_MAX)?),
            "MaximumMessageSize" => {
                p.message_bytes_max = Some(whole_number(name, value, MESSAGE_BYTES_MIN, MESSAGE_BYTES_MAX)?);
            }
            "MessageRetentionPeriod" => {
                p.retention_ms = Some(seconds_ms(RETENTION_SECONDS_MIN, RETENTION_SECONDS_MAX)?);
            }
            "ReceiveMessageWaitTimeSeconds" => p.receive_wait_ms = Some(seconds_ms(0, WAIT_SECONDS_MAX)?),
            "VisibilityTimeout" => p.visibility_timeout_ms = Some(seconds_ms(0, VISIBILITY_TIMEOUT_SECONDS_MAX)?),
            "RedrivePolicy" => p.dead_letter = Some(redrive_policy(value, account)?),
            POLICY => {
                json_object(name, value)?;
                p.sqs_attributes.insert(name.clone(), (!value.is_empty()).then(|| value.clone()));
            }
            REDRIVE_ALLOW_POLICY => {
                redrive_allow_policy(value)?;
                p.sqs_attributes.insert(name.clone(), (!value.is_empty()).then(|| value.clone()));
            }
            KMS_MASTER_KEY_ID => {
                p.sqs_attributes.insert(name.clone(), (!value.is_empty()).then(|| value.clone()));
                if !value.is_empty() {
                    // AWS turns SQS-managed encryption off when a KMS key is set.
                    p.sqs_attributes.insert(SSE_ENABLED.to_string(), Some("false".to_string()));
                }
            }
            KMS_REUSE => {
                let s = whole_number(name, value, KMS_REUSE_SECONDS_MIN, KMS_REUSE_SECONDS_MAX)?;
                p.sqs_attributes.insert(name.clone(), (s != KMS_REUSE_SECONDS_DEFAULT).then(|| s.to_string()));
            }
            SSE_ENABLED => {}
            "FifoQueue" if request == Request::Create && value.eq_ignore_ascii_case("true") => {
                return Err(fifo_unsupported());
            }
            "DeduplicationScope" | "FifoThroughputLimit" => {
                return Err(SqsError::invalid_attribute_name(format!(
                    "You can specify the {name} only when FifoQueue is set to true."
                )));
            }
            _ => return Err(SqsError::unknown_attribute(name)),
        }
    }
    // Read last so that it wins over the `false` a KMS key implies, and so that asking for
    // both kinds of encryption at once can be refused as AWS does.
    if let Some(value) = attributes.get(SSE_ENABLED) {
        let enabled = boolean(SSE_ENABLED, value)?;
        if enabled && attributes.get(KMS_MASTER_KEY_ID).is_some_and(|k| !k.is_empty()) {
            return Err(SqsError::invalid_attribute_name(
                "You can use one type of server-side encryption (SSE) at one time. You can either enable KMS SSE or SQS SSE.",
            ));
        }
        p.sqs_attributes.insert(SSE_ENABLED.to_string(), (!enabled).then(|| "false".to_string()));
    }
    Ok(p)
}

pub fn fifo_unsupported() -> SqsError {
    SqsError::invalid_attribute_value(
        "Invalid value for the parameter FifoQueue. Reason: FIFO queues are not supported by this Sluice version yet.",
    )
}

fn invalid(name: &str) -> SqsError {
    SqsError::invalid_attribute_value(format!("Invalid value for the parameter {name}."))
}

/// A whole number (of seconds or bytes) in `min..=max`.
fn whole_number(name: &str, value: &str, min: u64, max: u64) -> Result<u64, SqsError> {
    match value.trim().parse::<u64>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(invalid(name)),
    }
}

fn boolean(name: &str, value: &str) -> Result<bool, SqsError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(name)),
    }
}

/// An empty value (which removes the attribute) or a JSON object.
fn json_object(name: &str, value: &str) -> Result<Option<serde_json::Map<String, Value>>, SqsError> {
    if value.is_empty() {
        return Ok(None);
    }
    match serde_json::from_str::<Value>(value) {
        Ok(Value::Object(o)) => Ok(Some(o)),
        _ => Err(invalid(name)),
    }
}

/// `{"deadLetterTargetArn": "...", "maxReceiveCount": N}` (N may be text); `""` removes it.
fn redrive_policy(value: &str, account: &str) -> Result<Option<DeadLetter>, SqsError> {
    let reason = |why: &str| SqsError::invalid_value("RedrivePolicy", value, why);
    let Some(policy) =
        json_object("RedrivePolicy", value).map_err(|_| reason("Redrive policy is not a valid JSON map."))?
    else {
        return Ok(None);
    };
    let target = policy.get("deadLetterTargetArn").and_then(Value::as_str);
    let target =
        target.ok_or_else(|| reason("Redrive policy does not contain mandatory attribute: deadLetterTargetArn."))?;
    let count = policy
        .get("maxReceiveCount")
        .ok_or_else(|| reason("Redrive policy does not contain mandatory attribute: maxReceiveCount."))?;
    let count_text = match count {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let max_receive_count = count_text
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_RECEIVE_COUNT_MAX).contains(&u64::from(*n)))
        .ok_or_else(|| {
            reason(&format!(
                "Invalid value for maxReceiveCount: {count_text}, valid values are from 1 to {MAX_RECEIVE_COUNT_MAX} both inclusive."
            ))
        })?;
    let queue = match urls::queue_name_from_arn(target, account) {
        Ok(name) => name.to_string(),
        Err(ArnError::OtherAccount) => return Err(reason("Dead letter target does not exist.")),
        Err(ArnError::Malformed) => return Err(reason("Invalid value for deadLetterTargetArn.")),
    };
    Ok(Some(DeadLetter { queue, max_receive_count }))
}

/// `{"redrivePermission": "allowAll|denyAll|byQueue", "sourceQueueArns": [...]}`.
fn redrive_allow_policy(value: &str) -> Result<(), SqsError> {
    let Some(policy) = json_object(REDRIVE_ALLOW_POLICY, value)? else {
        return Ok(());
    };
    match policy.get("redrivePermission").and_then(Value::as_str) {
        Some("allowAll" | "denyAll" | "byQueue") => Ok(()),
        _ => Err(SqsError::invalid_value(
            REDRIVE_ALLOW_POLICY,
            value,
            "Amazon SQS can't create the redrive allow policy, as it's in an unsupported format.",
        )),
    }
}

/// A rule the core found broken after the SQS checks passed (the delay longer than the
/// retention, say), named by its SQS attribute.
pub fn core_error(e: ValidationError) -> SqsError {
    let name = match e.field.split(['.', '[']).next().unwrap_or("") {
        "visibility_timeout_ms" => "VisibilityTimeout",
        "delay_ms" => "DelaySeconds",
        "retention_ms" => "MessageRetentionPeriod",
        "message_bytes_max" => "MaximumMessageSize",
        "receive_wait_ms" => "ReceiveMessageWaitTimeSeconds",
        "dead_letter" => "RedrivePolicy",
        "tags" => return SqsError::invalid_parameter_value(format!("Invalid tags: {}", e.message)),
        "name" => {
            return SqsError::invalid_parameter_value(
                "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length",
            );
        }
        _ => return SqsError::invalid_parameter_value(e.message),
    };
    SqsError::invalid_attribute_value(format!("Invalid value for the parameter {name}. Reason: {}", e.message))
}

/// Everything `GetQueueAttributes` with `All` returns for a standard queue, by name.
pub fn render(view: &QueueView, region: &str, account: &str) -> BTreeMap<String, String> {
    let a = &view.attributes;
    let s = &view.stats;
    let mut out: BTreeMap<String, String> = [
        ("ApproximateNumberOfMessages", s.visible.to_string()),
        ("ApproximateNumberOfMessagesNotVisible", s.in_flight.to_string()),
        ("ApproximateNumberOfMessagesDelayed", s.delayed.to_string()),
        ("CreatedTimestamp", (view.created_at / 1000).to_string()),
        ("LastModifiedTimestamp", (view.modified_at / 1000).to_string()),
        ("DelaySeconds", (a.delay_ms / 1000).to_string()),
        ("MaximumMessageSize", a.message_bytes_max.to_string()),
        ("MessageRetentionPeriod", (a.retention_ms / 1000).to_string()),
        ("QueueArn", urls::queue_arn(region, account, &view.name)),
        ("ReceiveMessageWaitTimeSeconds", (a.receive_wait_ms / 1000).to_string()),
        ("VisibilityTimeout", (a.visibility_timeout_ms / 1000).to_string()),
        (SSE_ENABLED, a.sqs_attributes.get(SSE_ENABLED).cloned().unwrap_or_else(|| "true".to_string())),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if let Some(dl) = &a.dead_letter {
        let policy = serde_json::json!({
            "deadLetterTargetArn": urls::queue_arn(region, account, &dl.queue),
            "maxReceiveCount": dl.max_receive_count,
        });
        out.insert("RedrivePolicy".to_string(), policy.to_string());
    }
    for name in [POLICY, REDRIVE_ALLOW_POLICY, KMS_MASTER_KEY_ID, KMS_REUSE] {
        if let Some(v) = a.sqs_attributes.get(name) {
            out.insert(name.to_string(), v.clone());
        }
    }
    out
}

/// The attributes asked for: `All`, or each name (unknown names are an error, names that do
/// not apply to a standard queue are simply absent).
pub fn select(all: BTreeMap<String, String>, names: &[String]) -> Result<BTreeMap<String, String>, SqsError> {
    if names.iter().any(|n| n == "All") {
        return Ok(all);
    }
    let mut out = BTreeMap::new();
    for name in names {
        if !KNOWN.contains(&name.as_str()) {
            return Err(SqsError::unknown_attribute(name));
        }
        if let Some(v) = all.get(name) {
            out.insert(name.clone(), v.clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::QueueAttributes;

    const ACCOUNT: &str = "000000000000";

    fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn apply(pairs: &[(&str, &str)]) -> Result<QueueAttributes, SqsError> {
        patch(&attrs(pairs), Request::Create, ACCOUNT).map(|p| QueueAttributes::default().apply(&p))
    }

    #[test]
    fn seconds_become_milliseconds() {
        let a =
            apply(&[("DelaySeconds", "5"), ("VisibilityTimeout", "60"), ("MessageRetentionPeriod", "120")]).unwrap();
        assert_eq!((a.delay_ms, a.visibility_timeout_ms, a.retention_ms), (5_000, 60_000, 120_000));
        let a = apply(&[("MaximumMessageSize", "2048"), ("ReceiveMessageWaitTimeSeconds", "20")]).unwrap();
        assert_eq!((a.message_bytes_max, a.receive_wait_ms), (2048, 20_000));
    }

    #[test]
    fn aws_bounds_apply() {
        for (name, bad) in [
            ("DelaySeconds", "901"),
            ("MaximumMessageSize", "1023"),
            ("MaximumMessageSize", "1048577"),
            ("MessageRetentionPeriod", "59"),
            ("MessageRetentionPeriod", "1209601"),
            ("ReceiveMessageWaitTimeSeconds", "21"),
            ("VisibilityTimeout", "43201"),
            ("VisibilityTimeout", "-1"),
            ("KmsDataKeyReusePeriodSeconds", "59"),
            ("SqsManagedSseEnabled", "yes"),
        ] {
            let e = apply(&[(name, bad)]).unwrap_err();
            assert_eq!(e.code, "InvalidAttributeValue", "{name}={bad}");
            assert_eq!(e.message, format!("Invalid value for the parameter {name}."));
        }
    }

    #[test]
    fn redrive_policy_in_both_spellings() {
        let arn = "arn:aws:sqs:us-east-1:000000000000:dlq";
        for policy in [
            format!(r#"{{"deadLetterTargetArn":"{arn}","maxReceiveCount":3}}"#),
            format!(r#"{{"deadLetterTargetArn":"{arn}","maxReceiveCount":"3"}}"#),
        ] {
            let a = apply(&[("RedrivePolicy", &policy)]).unwrap();
            assert_eq!(a.dead_letter, Some(DeadLetter { queue: "dlq".into(), max_receive_count: 3 }));
        }
        let removed = patch(&attrs(&[("RedrivePolicy", "")]), Request::Set, ACCOUNT).unwrap();
        assert_eq!(removed.dead_letter, Some(None));
        let e = apply(&[("RedrivePolicy", &format!(r#"{{"deadLetterTargetArn":"{arn}","maxReceiveCount":0}}"#))])
            .unwrap_err();
        assert!(e.message.contains("valid values are from 1 to 1000"), "{}", e.message);
        let e = apply(&[("RedrivePolicy", r#"{"maxReceiveCount":2}"#)]).unwrap_err();
        assert!(e.message.contains("deadLetterTargetArn"), "{}", e.message);
    }

    #[test]
    fn fifo_and_unknown_attributes() {
        assert!(apply(&[("FifoQueue", "true")]).unwrap_err().message.contains("FIFO queues are not supported"));
        assert_eq!(apply(&[("FifoQueue", "false")]).unwrap_err().message, "Unknown Attribute FifoQueue.");
        let e = patch(&attrs(&[("FifoQueue", "true")]), Request::Set, ACCOUNT).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), ("InvalidAttributeName", "Unknown Attribute FifoQueue."));
        assert_eq!(
            apply(&[("ContentBasedDeduplication", "false")]).unwrap_err().message,
            "Unknown Attribute ContentBasedDeduplication."
        );
        assert_eq!(
            apply(&[("DeduplicationScope", "queue")]).unwrap_err().message,
            "You can specify the DeduplicationScope only when FifoQueue is set to true."
        );
        assert_eq!(apply(&[("QueueArn", "x")]).unwrap_err().code, "InvalidAttributeName");
    }

    #[test]
    fn encryption_attributes_follow_aws() {
        let a = apply(&[("KmsMasterKeyId", "k"), ("KmsDataKeyReusePeriodSeconds", "6000")]).unwrap();
        assert_eq!(a.sqs_attributes.get("SqsManagedSseEnabled").map(String::as_str), Some("false"));
        assert_eq!(a.sqs_attributes.get("KmsDataKeyReusePeriodSeconds").map(String::as_str), Some("6000"));
        let back = a.apply(
            &patch(&attrs(&[("KmsMasterKeyId", ""), ("KmsDataKeyReusePeriodSeconds", "300")]), Request::Set, ACCOUNT)
                .unwrap(),
        );
        assert!(!back.sqs_attributes.contains_key("KmsMasterKeyId"));
        assert!(!back.sqs_attributes.contains_key("KmsDataKeyReusePeriodSeconds"));
        assert_eq!(back.sqs_attributes.get("SqsManagedSseEnabled").map(String::as_str), Some("false"));
        let e = apply(&[("KmsMasterKeyId", "k"), ("SqsManagedSseEnabled", "true")]).unwrap_err();
        assert_eq!(e.code, "InvalidAttributeName");
        // The default is not stored, so a queue that says `true` equals one that says nothing.
        assert_eq!(apply(&[("SqsManagedSseEnabled", "true")]).unwrap(), QueueAttributes::default());
    }

    #[test]
    fn select_all_or_by_name() {
        let all = attrs(&[("DelaySeconds", "0"), ("QueueArn", "a")]);
        assert_eq!(select(all.clone(), &["All".into()]).unwrap(), all);
        assert_eq!(select(all.clone(), &["QueueArn".into(), "FifoQueue".into()]).unwrap(), attrs(&[("QueueArn", "a")]));
        assert_eq!(select(all.clone(), &[]).unwrap(), BTreeMap::new());
        assert_eq!(select(all, &["Nope".into()]).unwrap_err().message, "Unknown Attribute Nope.");
    }
}
