//! The rules for topic names and for topic and subscription attributes, by their SNS names,
//! with AWS's error texts. Both APIs go through here: the native API translates its fields to
//! these names first, so that one set of rules applies whichever API set a value.

use serde_json::Value;
use sluice_core::delivery::{DeliveryPolicy, TopicDeliveryPolicy};
use sluice_core::filter::{FilterPolicy, FilterScope, SnsCall};
use sluice_core::limits::{FIFO_SUFFIX, TAG_KEY_LEN_MAX, TAG_VALUE_LEN_MAX, TAGS_MAX};
use sluice_core::rate::RateLimit;

use super::error::{Invalid, TAG_LIMIT_EXCEEDED};
use super::limits::{TOPIC_ATTRIBUTE_BYTES_MAX, TOPIC_NAME_LEN_MAX};
use super::model::{Arns, CONTENT_BASED_DEDUPLICATION, FIFO_TOPIC, RATE_LIMIT, SCHEMA_VALIDATION};

/// 1 to 256 characters of ASCII letters, digits, `-` and `_`; a FIFO topic's name ends in
/// `.fifo` and only a FIFO topic's may. A stored name may start with its tenant
/// (`acme~orders`, see `sluice_core::name`).
pub fn check_topic_name(name: &str, fifo: bool) -> Result<(), Invalid> {
    // A bad tenant leaves the separator in, which the rule below refuses.
    let name = sluice_core::name::without_tenant(name).unwrap_or(name);
    let base = name.strip_suffix(FIFO_SUFFIX);
    let ok = !name.is_empty()
        && name.len() <= TOPIC_NAME_LEN_MAX
        && base.is_some() == fifo
        && base.unwrap_or(name).chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && base != Some("");
    if ok {
        return Ok(());
    }
    let message = if fifo && base.is_none() {
        "a FIFO topic's name ends in .fifo".to_string()
    } else if !fifo && base.is_some() {
        "only FIFO topics have names ending in .fifo (set fifo)".to_string()
    } else {
        format!("topic names are 1 to {TOPIC_NAME_LEN_MAX} ASCII letters, digits, '-' and '_' (FIFO topics add .fifo)")
    };
    Err(Invalid::new("name", message, "Invalid parameter: Topic Name"))
}

/// Topic attributes Sluice keeps and shows but does not act on (feedback roles, KMS, archive
/// and data-protection policies): accepted so that infrastructure code setting them works.
const KEPT_TOPIC_ATTRIBUTES: &[&str] = &[
    "KmsMasterKeyId",
    "TracingConfig",
    "HTTPSuccessFeedbackRoleArn",
    "HTTPSuccessFeedbackSampleRate",
    "HTTPFailureFeedbackRoleArn",
    "SQSSuccessFeedbackRoleArn",
    "SQSSuccessFeedbackSampleRate",
    "SQSFailureFeedbackRoleArn",
    "LambdaSuccessFeedbackRoleArn",
    "LambdaSuccessFeedbackSampleRate",
    "LambdaFailureFeedbackRoleArn",
    "FirehoseSuccessFeedbackRoleArn",
    "FirehoseSuccessFeedbackSampleRate",
    "FirehoseFailureFeedbackRoleArn",
    "ApplicationSuccessFeedbackRoleArn",
    "ApplicationSuccessFeedbackSampleRate",
    "ApplicationFailureFeedbackRoleArn",
];

fn attribute_name_error(name: &str) -> Invalid {
    Invalid::new(
        format!("attributes.{name}"),
        format!("{name} is not a topic attribute this topic can have"),
        "Invalid parameter: AttributeName",
    )
}

fn value_error(name: &str, reason: &str) -> Invalid {
    Invalid::new(
        format!("attributes.{name}"),
        format!("{name}: {reason}"),
        format!("Invalid parameter: {name} Reason: {reason}"),
    )
}

/// Checks one topic attribute and returns the value to keep (booleans lower-cased). `FifoTopic`
/// is not an attribute here: it is the topic's type, given at creation.
pub fn check_topic_attribute(fifo: bool, name: &str, value: &str) -> Result<String, Invalid> {
    if value.len() > TOPIC_ATTRIBUTE_BYTES_MAX {
        return Err(value_error(name, &format!("the value is longer than {TOPIC_ATTRIBUTE_BYTES_MAX} bytes")));
    }
    match name {
        "DisplayName" => Ok(value.to_string()),
        "Policy" | "ArchivePolicy" => match serde_json::from_str::<Value>(value) {
            Ok(Value::Object(_)) => {
                if name == "ArchivePolicy" && !fifo {
                    return Err(attribute_name_error(name));
                }
                Ok(value.to_string())
            }
            _ => Err(value_error(name, "must be a JSON object")),
        },
        "DeliveryPolicy" => {
            if !value.is_empty() {
                TopicDeliveryPolicy::parse(value).map_err(|e| {
                    Invalid::new(
                        "attributes.DeliveryPolicy",
                        format!("DeliveryPolicy: {e}"),
                        format!("Invalid parameter: DeliveryPolicy: {e}"),
                    )
                })?;
            }
            Ok(value.to_string())
        }
        "SignatureVersion" => match value {
            "1" | "2" => Ok(value.to_string()),
            _ => Err(value_error(name, "must be 1 or 2")),
        },
        CONTENT_BASED_DEDUPLICATION if fifo => boolean(name, value),
        SCHEMA_VALIDATION => boolean(name, value),
        RATE_LIMIT => rate_limit(value),
        "FifoThroughputScope" if fifo => match value {
            "Topic" | "MessageGroup" => Ok(value.to_string()),
            _ => Err(value_error(name, "must be Topic or MessageGroup")),
        },
        _ if KEPT_TOPIC_ATTRIBUTES.contains(&name) => Ok(value.to_string()),
        _ => Err(attribute_name_error(name)),
    }
}

/// A `RateLimit` value, `{"per_second": N, "burst": M}`, kept in its canonical form (`""`
/// removes the limit).
fn rate_limit(value: &str) -> Result<String, Invalid> {
    if value.is_empty() {
        return Ok(String::new());
    }
    let limit: RateLimit = serde_json::from_str(value)
        .map_err(|e| value_error(RATE_LIMIT, &format!("must be {{\"per_second\": N, \"burst\": M}} ({e})")))?;
    limit.validate("rate_limit").map_err(|e| {
        Invalid::new(e.field.clone(), e.to_string(), format!("Invalid parameter: Attributes Reason: RateLimit: {e}"))
    })?;
    Ok(serde_json::to_string(&limit).expect("a rate limit serializes"))
}

fn boolean(name: &str, value: &str) -> Result<String, Invalid> {
    match value.to_ascii_lowercase().as_str() {
        v @ ("true" | "false") => Ok(v.to_string()),
        _ => Err(value_error(name, "must be true or false")),
    }
}

/// Whether a `FifoTopic` attribute value says FIFO.
pub fn fifo_topic_value(value: &str) -> Result<bool, Invalid> {
    boolean(FIFO_TOPIC, value).map(|v| v == "true")
}

/// Tags: at most 50, keys 1 to 128 characters, values up to 256. More than 50 is SNS's
/// `TagLimitExceeded`, not an invalid parameter, so that boto3's `TagLimitExceededException`
/// catches it; its text is AWS's as moto and other emulators give it (not recorded here).
pub fn check_tags<'a>(tags: impl IntoIterator<Item = (&'a String, &'a String)>, count: usize) -> Result<(), Invalid> {
    if count > TAGS_MAX {
        return Err(Invalid {
            sns_code: TAG_LIMIT_EXCEEDED,
            ..Invalid::new(
                "tags",
                format!("a topic has at most {TAGS_MAX} tags"),
                "Could not complete request: tag quota of per resource exceeded",
            )
        });
    }
    for (key, value) in tags {
        if key.is_empty() || key.chars().count() > TAG_KEY_LEN_MAX || value.chars().count() > TAG_VALUE_LEN_MAX {
            return Err(Invalid::new(
                format!("tags.{key}"),
                format!("tag keys are 1 to {TAG_KEY_LEN_MAX} characters and values up to {TAG_VALUE_LEN_MAX}"),
                "Invalid parameter: Tags Reason: Tag keys must be 1 to 128 characters and values at most 256",
            ));
        }
    }
    Ok(())
}

/// One subscription attribute, checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Setting {
    Raw(bool),
    /// `None` removes the policy (set to `""`).
    FilterPolicy(Option<String>),
    FilterScope(FilterScope),
    /// The policy text and its dead-letter queue; `None` removes it.
    Redrive(Option<(String, String)>),
    DeliveryPolicy(Option<String>),
}

/// What the checks of a subscription attribute need to know about the subscription.
pub struct SubscriptionContext<'a> {
    pub call: SnsCall,
    pub arns: &'a Arns,
    pub topic_fifo: bool,
    pub queue_fifo: bool,
}

impl SubscriptionContext<'_> {
    /// `Invalid parameter: <name>: <reason>` (SetSubscriptionAttributes) or `Invalid parameter:
    /// Attributes Reason: <name>: <reason>` (Subscribe), as AWS frames them.
    fn error(&self, name: &str, reason: &str) -> Invalid {
        let sns_message = match self.call {
            SnsCall::Subscribe => format!("Invalid parameter: Attributes Reason: {name}: {reason}"),
            SnsCall::SetSubscriptionAttributes => format!("Invalid parameter: {name}: {reason}"),
        };
        Invalid::new(format!("attributes.{name}"), format!("{name}: {reason}"), sns_message)
    }
}

/// Checks one subscription attribute. A filter policy is checked against `scope`, the scope the
/// subscription will have.
pub fn check_subscription_attribute(
    ctx: &SubscriptionContext<'_>,
    name: &str,
    value: &str,
    scope: FilterScope,
) -> Result<Setting, Invalid> {
    match name {
        "RawMessageDelivery" => match value.to_ascii_lowercase().as_str() {
            "true" => Ok(Setting::Raw(true)),
            "false" => Ok(Setting::Raw(false)),
            _ => Err(ctx.error(name, &format!("Invalid value [{value}]. Must be true or false."))),
        },
        "FilterPolicy" if value.is_empty() => Ok(Setting::FilterPolicy(None)),
        "FilterPolicy" => match FilterPolicy::parse(value, scope) {
            Ok(_) => Ok(Setting::FilterPolicy(Some(value.to_string()))),
            Err(e) => Err(Invalid {
                sns_message: e.sns_message(ctx.call),
                ..Invalid::new("attributes.FilterPolicy", format!("FilterPolicy: {e}"), "")
            }),
        },
        "FilterPolicyScope" => match value.parse::<FilterScope>() {
            Ok(scope) => Ok(Setting::FilterScope(scope)),
            Err(e) => Err(ctx.error(name, &e.to_string())),
        },
        "RedrivePolicy" if value.is_empty() => Ok(Setting::Redrive(None)),
        "RedrivePolicy" => {
            let policy: Value =
                serde_json::from_str(value).map_err(|e| ctx.error(name, &format!("failed to parse JSON. {e}")))?;
            let arn = policy.get("deadLetterTargetArn").and_then(Value::as_str).unwrap_or("");
            let queue =
                ctx.arns.parse_queue(arn).map_err(|_| ctx.error(name, "deadLetterTargetArn is an invalid arn"))?;
            if ctx.topic_fifo && ctx.queue_fifo && !queue.ends_with(FIFO_SUFFIX) {
                return Err(ctx.error(name, "must use a FIFO queue as DLQ for a FIFO Subscription to a FIFO Topic."));
            }
            Ok(Setting::Redrive(Some((value.to_string(), queue))))
        }
        "DeliveryPolicy" if value.is_empty() => Ok(Setting::DeliveryPolicy(None)),
        "DeliveryPolicy" => match DeliveryPolicy::parse(value) {
            Ok(_) => Ok(Setting::DeliveryPolicy(Some(value.to_string()))),
            Err(e) => Err(Invalid {
                sns_message: e.sns_message(ctx.call),
                ..Invalid::new("attributes.DeliveryPolicy", format!("DeliveryPolicy: {e}"), "")
            }),
        },
        _ => Err(Invalid::new(
            format!("attributes.{name}"),
            format!(
                "{name} is not a subscription attribute (RawMessageDelivery, FilterPolicy, FilterPolicyScope, RedrivePolicy, DeliveryPolicy)"
            ),
            match ctx.call {
                SnsCall::Subscribe => format!("Invalid parameter: Attributes Reason: Unknown attribute {name}"),
                SnsCall::SetSubscriptionAttributes => "Invalid parameter: AttributeName".to_string(),
            },
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names() {
        assert!(check_topic_name("orders_v2-eu", false).is_ok());
        assert!(check_topic_name(&"a".repeat(256), false).is_ok());
        assert!(check_topic_name("orders.fifo", true).is_ok());
        for (name, fifo) in [
            ("", false),
            (&"a".repeat(257) as &str, false),
            ("a.fifo", false),
            ("a", true),
            (".fifo", true),
            ("a b", false),
            ("a.b", false),
            ("é", false),
        ] {
            let e = check_topic_name(name, fifo).unwrap_err();
            assert_eq!(e.sns_message, "Invalid parameter: Topic Name", "{name:?} {fifo}");
        }
    }

    #[test]
    fn topic_attributes() {
        assert_eq!(check_topic_attribute(true, "ContentBasedDeduplication", "TRUE").unwrap(), "true");
        assert_eq!(
            check_topic_attribute(false, "ContentBasedDeduplication", "true").unwrap_err().sns_message,
            "Invalid parameter: AttributeName"
        );
        assert_eq!(
            check_topic_attribute(false, "FifoTopic", "false").unwrap_err().sns_message,
            "Invalid parameter: AttributeName"
        );
        assert!(check_topic_attribute(false, "DisplayName", "x").is_ok());
        assert!(check_topic_attribute(false, "Policy", "[]").is_err());
        assert!(
            check_topic_attribute(
                false,
                "DeliveryPolicy",
                r#"{"http":{"defaultHealthyRetryPolicy":{"numRetries":1,"minDelayTarget":5,"maxDelayTarget":6}}}"#
            )
            .is_ok()
        );
        assert!(check_topic_attribute(false, "DeliveryPolicy", "{").is_err());
        assert!(check_topic_attribute(false, "Nope", "x").is_err());
    }

    #[test]
    fn subscription_attributes_are_framed_per_call() {
        let arns = Arns { region: "r".into(), account: "000000000000".into() };
        let set = SubscriptionContext {
            call: SnsCall::SetSubscriptionAttributes,
            arns: &arns,
            topic_fifo: false,
            queue_fifo: false,
        };
        let sub = SubscriptionContext { call: SnsCall::Subscribe, ..set };
        let scope = FilterScope::MessageAttributes;
        assert_eq!(
            check_subscription_attribute(&sub, "RawMessageDelivery", "True", scope).unwrap(),
            Setting::Raw(true)
        );
        assert_eq!(
            check_subscription_attribute(&set, "RawMessageDelivery", "test-ValUe", scope).unwrap_err().sns_message,
            "Invalid parameter: RawMessageDelivery: Invalid value [test-ValUe]. Must be true or false."
        );
        assert_eq!(
            check_subscription_attribute(&sub, "RawMessageDelivery", "wrongvalue", scope).unwrap_err().sns_message,
            "Invalid parameter: Attributes Reason: RawMessageDelivery: Invalid value [wrongvalue]. Must be true or false."
        );
        assert_eq!(
            check_subscription_attribute(&set, "Fake", "x", scope).unwrap_err().sns_message,
            "Invalid parameter: AttributeName"
        );
        assert_eq!(
            check_subscription_attribute(&set, "RedrivePolicy", r#"{"deadLetterTargetArn":"fake"}"#, scope)
                .unwrap_err()
                .sns_message,
            "Invalid parameter: RedrivePolicy: deadLetterTargetArn is an invalid arn"
        );
        assert!(
            check_subscription_attribute(&set, "RedrivePolicy", "{invalid", scope)
                .unwrap_err()
                .sns_message
                .starts_with("Invalid parameter: RedrivePolicy: failed to parse JSON. ")
        );
        let redrive = check_subscription_attribute(
            &set,
            "RedrivePolicy",
            r#"{"deadLetterTargetArn":"arn:aws:sqs:r:000000000000:dlq"}"#,
            scope,
        )
        .unwrap();
        assert!(matches!(redrive, Setting::Redrive(Some((_, ref q))) if q == "dlq"));
        let fifo = SubscriptionContext { topic_fifo: true, queue_fifo: true, ..set };
        assert_eq!(
            check_subscription_attribute(
                &fifo,
                "RedrivePolicy",
                r#"{"deadLetterTargetArn":"arn:aws:sqs:r:000000000000:dlq"}"#,
                scope
            )
            .unwrap_err()
            .sns_message,
            "Invalid parameter: RedrivePolicy: must use a FIFO queue as DLQ for a FIFO Subscription to a FIFO Topic."
        );
        assert!(
            check_subscription_attribute(&set, "FilterPolicy", "{invalid", scope)
                .unwrap_err()
                .sns_message
                .starts_with("Invalid parameter: FilterPolicy: failed to parse JSON.")
        );
        assert_eq!(check_subscription_attribute(&set, "FilterPolicy", "", scope).unwrap(), Setting::FilterPolicy(None));
        assert_eq!(
            check_subscription_attribute(&sub, "FilterPolicyScope", "Nope", scope).unwrap_err().sns_message,
            "Invalid parameter: Attributes Reason: FilterPolicyScope: Invalid value [Nope]. Please use either MessageBody or MessageAttributes"
        );
    }
}
