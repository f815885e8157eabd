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
use sluice_core::attributes::DedupScope;
use sluice_core::broker::QueueView;
use sluice_core::{DeadLetter, QueueAttributes, QueueAttributesPatch, ValidationError};

use super::limits::*;
use super::urls::{self, ArnError};
use crate::aws::common::AwsError;

pub const POLICY: &str = "Policy";
const REDRIVE_ALLOW_POLICY: &str = "RedriveAllowPolicy";
const KMS_MASTER_KEY_ID: &str = "KmsMasterKeyId";
const KMS_REUSE: &str = "KmsDataKeyReusePeriodSeconds";
const SSE_ENABLED: &str = "SqsManagedSseEnabled";
pub const FIFO_QUEUE: &str = "FifoQueue";
const CONTENT_BASED_DEDUP: &str = "ContentBasedDeduplication";
/// Kept in `sqs_attributes` only once SetQueueAttributes changed it: the scope the queue
/// reports from then on. Deduplication keeps the scope chosen at creation (the core's
/// `dedup_scope`), as AWS does (LocalStack's recordings of real AWS,
/// `test_fifo_change_to_high_throughput_after_creation`).
const DEDUP_SCOPE: &str = "DeduplicationScope";
/// Kept in `sqs_attributes` when not the default `perQueue`; Sluice has no throughput quota.
const THROUGHPUT_LIMIT: &str = "FifoThroughputLimit";
const PER_MESSAGE_GROUP: &str = "perMessageGroupId";

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

/// SQS attributes read for the core: a patch, plus what only a new queue takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Patch {
    pub core: QueueAttributesPatch,
    /// CreateQueue of a FIFO queue: the deduplication scope, fixed for the queue's life.
    pub dedup_scope: Option<DedupScope>,
}

impl Patch {
    pub fn apply_to(&self, attributes: &QueueAttributes) -> QueueAttributes {
        let mut next = attributes.apply(&self.core);
        if let Some(scope) = self.dedup_scope {
            next.dedup_scope = scope;
        }
        next
    }
}

/// The attributes of a new queue: AWS's defaults, FIFO or not, with `attributes` applied.
pub fn new_queue(
    attributes: &BTreeMap<String, String>,
    fifo: bool,
    account: &str,
) -> Result<QueueAttributes, AwsError> {
    let config =
        patch(attributes, Request::Create, fifo, account)?.apply_to(&QueueAttributes { fifo, ..Default::default() });
    check_fifo(&config)?;
    Ok(config)
}

/// Whether CreateQueue asks for a FIFO queue: `FifoQueue` is `true`, in any case.
pub fn wants_fifo(attributes: &BTreeMap<String, String>) -> bool {
    attributes.get(FIFO_QUEUE).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// Reads SQS attributes into a patch for a queue that is (or, at creation, will be) FIFO or
/// standard. `account` is needed to resolve the dead-letter ARN.
pub fn patch(
    attributes: &BTreeMap<String, String>,
    request: Request,
    fifo: bool,
    account: &str,
) -> Result<Patch, AwsError> {
    let mut p = QueueAttributesPatch::default();
    let mut dedup_scope = None;
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
            // At creation `fifo` was read from this very value; afterwards only `true` is no change.
            FIFO_QUEUE if fifo => {
                if request == Request::Set && !value.eq_ignore_ascii_case("true") {
                    return Err(AwsError::invalid_attribute_value(
                        "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.",
                    ));
                }
            }
            CONTENT_BASED_DEDUP if fifo => p.content_based_dedup = Some(boolean(name, value)?),
            DEDUP_SCOPE if fifo => {
                let scope = match value.as_str() {
                    "queue" => DedupScope::Queue,
                    "messageGroup" => DedupScope::MessageGroup,
                    _ => return Err(invalid(name)),
                };
                match request {
                    Request::Create => dedup_scope = Some(scope),
                    Request::Set => {
                        p.sqs_attributes.insert(name.clone(), Some(value.clone()));
                    }
                }
            }
            THROUGHPUT_LIMIT if fifo => {
                if value != "perQueue" && value != PER_MESSAGE_GROUP {
                    return Err(invalid(name));
                }
                p.sqs_attributes.insert(name.clone(), (value == PER_MESSAGE_GROUP).then(|| value.clone()));
            }
            DEDUP_SCOPE | THROUGHPUT_LIMIT => {
                return Err(AwsError::invalid_attribute_name(format!(
                    "You can specify the {name} only when FifoQueue is set to true."
                )));
            }
            _ => return Err(AwsError::unknown_attribute(name)),
        }
    }
    // Read last so that it wins over the `false` a KMS key implies, and so that asking for
    // both kinds of encryption at once can be refused as AWS does.
    if let Some(value) = attributes.get(SSE_ENABLED) {
        let enabled = boolean(SSE_ENABLED, value)?;
        if enabled && attributes.get(KMS_MASTER_KEY_ID).is_some_and(|k| !k.is_empty()) {
            return Err(AwsError::invalid_attribute_name(
                "You can use one type of server-side encryption (SSE) at one time. You can either enable KMS SSE or SQS SSE.",
            ));
        }
        p.sqs_attributes.insert(SSE_ENABLED.to_string(), (!enabled).then(|| "false".to_string()));
    }
    Ok(Patch { core: p, dedup_scope })
}

/// The deduplication scope a FIFO queue reports: the last one set, else the one it was
/// created with.
pub fn reported_scope(attributes: &QueueAttributes) -> &str {
    match attributes.sqs_attributes.get(DEDUP_SCOPE) {
        Some(scope) => scope,
        None => match attributes.dedup_scope {
            DedupScope::Queue => "queue",
            DedupScope::MessageGroup => "messageGroup",
        },
    }
}

/// AWS's rule across FIFO attributes: `FifoThroughputLimit=perMessageGroupId` only with
/// `DeduplicationScope=messageGroup` (checked on the queue's configuration as it would be).
pub fn check_fifo(attributes: &QueueAttributes) -> Result<(), AwsError> {
    let per_group = attributes.sqs_attributes.get(THROUGHPUT_LIMIT).is_some_and(|v| v == PER_MESSAGE_GROUP);
    if attributes.fifo && per_group && reported_scope(attributes) != "messageGroup" {
        return Err(AwsError::invalid_attribute_value(
            "Invalid value for the parameter FifoThroughputLimit. Reason: The perMessageGroupId value is allowed only when the value for DeduplicationScope is messageGroup.",
        ));
    }
    Ok(())
}

fn invalid(name: &str) -> AwsError {
    AwsError::invalid_attribute_value(format!("Invalid value for the parameter {name}."))
}

/// A whole number (of seconds or bytes) in `min..=max`.
fn whole_number(name: &str, value: &str, min: u64, max: u64) -> Result<u64, AwsError> {
    match value.trim().parse::<u64>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(invalid(name)),
    }
}

fn boolean(name: &str, value: &str) -> Result<bool, AwsError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(name)),
    }
}

/// An empty value (which removes the attribute) or a JSON object.
fn json_object(name: &str, value: &str) -> Result<Option<serde_json::Map<String, Value>>, AwsError> {
    if value.is_empty() {
        return Ok(None);
    }
    match serde_json::from_str::<Value>(value) {
        Ok(Value::Object(o)) => Ok(Some(o)),
        _ => Err(invalid(name)),
    }
}

/// `{"deadLetterTargetArn": "...", "maxReceiveCount": N}` (N may be text); `""` removes it.
fn redrive_policy(value: &str, account: &str) -> Result<Option<DeadLetter>, AwsError> {
    let reason = |why: &str| AwsError::invalid_value("RedrivePolicy", value, why);
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
fn redrive_allow_policy(value: &str) -> Result<(), AwsError> {
    let Some(policy) = json_object(REDRIVE_ALLOW_POLICY, value)? else {
        return Ok(());
    };
    match policy.get("redrivePermission").and_then(Value::as_str) {
        Some("allowAll" | "denyAll" | "byQueue") => Ok(()),
        _ => Err(AwsError::invalid_value(
            REDRIVE_ALLOW_POLICY,
            value,
            "Amazon SQS can't create the redrive allow policy, as it's in an unsupported format.",
        )),
    }
}

/// A rule the core found broken after the SQS checks passed (the delay longer than the
/// retention, say), named by its SQS attribute.
pub fn core_error(e: ValidationError) -> AwsError {
    let name = match e.field.split(['.', '[']).next().unwrap_or("") {
        "visibility_timeout_ms" => "VisibilityTimeout",
        "delay_ms" => "DelaySeconds",
        "retention_ms" => "MessageRetentionPeriod",
        "message_bytes_max" => "MaximumMessageSize",
        "receive_wait_ms" => "ReceiveMessageWaitTimeSeconds",
        "dead_letter" => "RedrivePolicy",
        "fifo" => FIFO_QUEUE,
        "content_based_dedup" => CONTENT_BASED_DEDUP,
        "dedup_scope" => DEDUP_SCOPE,
        "tags" => return AwsError::invalid_parameter_value(format!("Invalid tags: {}", e.message)),
        "name" => {
            return AwsError::invalid_parameter_value(
                "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length",
            );
        }
        _ => return AwsError::invalid_parameter_value(e.message),
    };
    AwsError::invalid_attribute_value(format!("Invalid value for the parameter {name}. Reason: {}", e.message))
}

/// Everything `GetQueueAttributes` with `All` returns, by name: a standard queue's set, and
/// for a FIFO queue also `FifoQueue`, `ContentBasedDeduplication`, `DeduplicationScope` and
/// `FifoThroughputLimit` (reference §2.1).
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
    if a.fifo {
        out.insert(FIFO_QUEUE.to_string(), "true".to_string());
        out.insert(CONTENT_BASED_DEDUP.to_string(), a.content_based_dedup.to_string());
        out.insert(DEDUP_SCOPE.to_string(), reported_scope(a).to_string());
        let limit = a.sqs_attributes.get(THROUGHPUT_LIMIT).map_or("perQueue", String::as_str);
        out.insert(THROUGHPUT_LIMIT.to_string(), limit.to_string());
    }
    out
}

/// The attributes asked for: `All`, or each name (unknown names are an error, names that do
/// not apply to the queue, such as `FifoQueue` of a standard queue, are simply absent).
pub fn select(all: BTreeMap<String, String>, names: &[String]) -> Result<BTreeMap<String, String>, AwsError> {
    if names.iter().any(|n| n == "All") {
        return Ok(all);
    }
    let mut out = BTreeMap::new();
    for name in names {
        if !KNOWN.contains(&name.as_str()) {
            return Err(AwsError::unknown_attribute(name));
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

    fn apply(pairs: &[(&str, &str)]) -> Result<QueueAttributes, AwsError> {
        new_queue(&attrs(pairs), false, ACCOUNT)
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
        let removed = patch(&attrs(&[("RedrivePolicy", "")]), Request::Set, false, ACCOUNT).unwrap();
        assert_eq!(removed.core.dead_letter, Some(None));
        let e = apply(&[("RedrivePolicy", &format!(r#"{{"deadLetterTargetArn":"{arn}","maxReceiveCount":0}}"#))])
            .unwrap_err();
        assert!(e.message.contains("valid values are from 1 to 1000"), "{}", e.message);
        let e = apply(&[("RedrivePolicy", r#"{"maxReceiveCount":2}"#)]).unwrap_err();
        assert!(e.message.contains("deadLetterTargetArn"), "{}", e.message);
    }

    #[test]
    fn fifo_attributes_on_a_standard_queue_are_refused_as_aws_does() {
        assert_eq!(apply(&[("FifoQueue", "false")]).unwrap_err().message, "Unknown Attribute FifoQueue.");
        let e = patch(&attrs(&[("FifoQueue", "true")]), Request::Set, false, ACCOUNT).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), ("InvalidAttributeName", "Unknown Attribute FifoQueue."));
        assert_eq!(
            apply(&[("ContentBasedDeduplication", "false")]).unwrap_err().message,
            "Unknown Attribute ContentBasedDeduplication."
        );
        for name in ["DeduplicationScope", "FifoThroughputLimit"] {
            for request in [Request::Create, Request::Set] {
                let e = patch(&attrs(&[(name, "queue")]), request, false, ACCOUNT).unwrap_err();
                assert_eq!(
                    (e.code, e.message),
                    ("InvalidAttributeName", format!("You can specify the {name} only when FifoQueue is set to true."))
                );
            }
        }
        assert_eq!(apply(&[("QueueArn", "x")]).unwrap_err().code, "InvalidAttributeName");
    }

    fn fifo(pairs: &[(&str, &str)]) -> Result<QueueAttributes, AwsError> {
        new_queue(&attrs(pairs), true, ACCOUNT)
    }

    #[test]
    fn fifo_attributes_at_creation() {
        let a = fifo(&[("FifoQueue", "True"), ("ContentBasedDeduplication", "TRUE")]).unwrap();
        assert!(a.fifo && a.content_based_dedup);
        assert_eq!(a.dedup_scope, DedupScope::Queue);
        assert!(a.sqs_attributes.is_empty(), "defaults are not stored: {:?}", a.sqs_attributes);
        let a = fifo(&[("DeduplicationScope", "messageGroup"), ("FifoThroughputLimit", "perMessageGroupId")]).unwrap();
        assert_eq!(a.dedup_scope, DedupScope::MessageGroup);
        assert_eq!(a.sqs_attributes.get("FifoThroughputLimit").map(String::as_str), Some("perMessageGroupId"));
        assert!(!a.sqs_attributes.contains_key("DeduplicationScope"));
        // perQueue is the default and not stored, so it reads back like a queue that never said it.
        assert_eq!(fifo(&[("FifoThroughputLimit", "perQueue")]).unwrap(), fifo(&[]).unwrap());
        for (name, bad) in [
            ("ContentBasedDeduplication", "yes"),
            ("DeduplicationScope", "group"),
            ("DeduplicationScope", "Queue"),
            ("FifoThroughputLimit", "perGroup"),
        ] {
            let e = fifo(&[(name, bad)]).unwrap_err();
            assert_eq!(
                (e.code, e.message),
                ("InvalidAttributeValue", format!("Invalid value for the parameter {name}."))
            );
        }
        let e = fifo(&[("FifoThroughputLimit", "perMessageGroupId")]).unwrap_err();
        assert_eq!(e.code, "InvalidAttributeValue");
        assert!(e.message.starts_with("Invalid value for the parameter FifoThroughputLimit. Reason:"), "{}", e.message);
    }

    #[test]
    fn fifo_attributes_afterwards() {
        let created = fifo(&[("DeduplicationScope", "queue")]).unwrap();
        let set = |pairs: &[(&str, &str)]| patch(&attrs(pairs), Request::Set, true, ACCOUNT);
        let e = set(&[("FifoQueue", "false")]).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                "InvalidAttributeValue",
                "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported."
            )
        );
        assert_eq!(set(&[("FifoQueue", "true")]).unwrap().apply_to(&created), created);
        // The scope reported changes; the scope deduplication uses stays the creation's.
        let high = set(&[("DeduplicationScope", "messageGroup"), ("FifoThroughputLimit", "perMessageGroupId")])
            .unwrap()
            .apply_to(&created);
        assert_eq!(high.dedup_scope, DedupScope::Queue);
        assert_eq!(reported_scope(&high), "messageGroup");
        check_fifo(&high).unwrap();
        let view = QueueView {
            id: 1,
            name: "q.fifo".into(),
            attributes: high.clone(),
            created_at: 0,
            modified_at: 0,
            stats: Default::default(),
        };
        let shown = render(&view, "us-east-1", ACCOUNT);
        assert_eq!(shown["DeduplicationScope"], "messageGroup");
        assert_eq!(shown["FifoThroughputLimit"], "perMessageGroupId");
        let back = set(&[("FifoThroughputLimit", "perQueue")]).unwrap().apply_to(&high);
        assert!(!back.sqs_attributes.contains_key("FifoThroughputLimit"));
        // perMessageGroupId needs the messageGroup scope, as the queue would report it.
        let per_group = set(&[("FifoThroughputLimit", "perMessageGroupId")]).unwrap().apply_to(&created);
        assert_eq!(check_fifo(&per_group).unwrap_err().code, "InvalidAttributeValue");
        let toggled = set(&[("ContentBasedDeduplication", "true")]).unwrap().apply_to(&created);
        assert!(toggled.content_based_dedup);
    }

    #[test]
    fn fifo_queues_show_their_four_attributes() {
        let view = |attributes: QueueAttributes| QueueView {
            id: 1,
            name: "q".into(),
            attributes,
            created_at: 0,
            modified_at: 0,
            stats: Default::default(),
        };
        let standard = render(&view(QueueAttributes::default()), "us-east-1", ACCOUNT);
        let fifo_queue = render(&view(fifo(&[("ContentBasedDeduplication", "true")]).unwrap()), "us-east-1", ACCOUNT);
        let added: Vec<&String> = fifo_queue.keys().filter(|k| !standard.contains_key(*k)).collect();
        assert_eq!(added, ["ContentBasedDeduplication", "DeduplicationScope", "FifoQueue", "FifoThroughputLimit"]);
        assert_eq!(fifo_queue["FifoQueue"], "true");
        assert_eq!(fifo_queue["ContentBasedDeduplication"], "true");
        assert_eq!(fifo_queue["DeduplicationScope"], "queue");
        assert_eq!(fifo_queue["FifoThroughputLimit"], "perQueue");
    }

    #[test]
    fn encryption_attributes_follow_aws() {
        let a = apply(&[("KmsMasterKeyId", "k"), ("KmsDataKeyReusePeriodSeconds", "6000")]).unwrap();
        assert_eq!(a.sqs_attributes.get("SqsManagedSseEnabled").map(String::as_str), Some("false"));
        assert_eq!(a.sqs_attributes.get("KmsDataKeyReusePeriodSeconds").map(String::as_str), Some("6000"));
        let back = a.apply(
            &patch(
                &attrs(&[("KmsMasterKeyId", ""), ("KmsDataKeyReusePeriodSeconds", "300")]),
                Request::Set,
                false,
                ACCOUNT,
            )
            .unwrap()
            .core,
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
