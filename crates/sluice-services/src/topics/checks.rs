//! The checks a message meets before it is published: SNS's rules (size, attributes, subject,
//! `MessageStructure=json`, FIFO ids) and the topic's type, with SNS's own wording for its
//! clients beside the native error.

use std::collections::BTreeMap;

use sluice_core::limits::ATTRIBUTE_NAME_LEN_MAX;
use sluice_core::message::AttributeData;
use sluice_core::{AttributeValue, NewMessage};

use super::error::Invalid;
use super::limits::{FIFO_ID_LEN_MAX, PUBLISH_ATTRIBUTES_MAX, PUBLISH_BYTES_MAX, SUBJECT_LEN_MAX};
use super::model::{Protocol, TopicRecord};

/// What the checks of a message found.
#[derive(Debug)]
pub(super) struct Checked {
    /// The text for protocols without their own (all of them without `MessageStructure=json`).
    pub(super) default_text: String,
    pub(super) per_protocol: BTreeMap<String, String>,
    pub(super) dedup_id: Option<String>,
}

/// One message to publish.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Publication {
    pub message: String,
    pub subject: Option<String>,
    pub attributes: BTreeMap<String, AttributeValue>,
    /// `MessageStructure=json`: `message` is a JSON object with a text per protocol (`sqs`,
    /// `http`, `https`) and a required `default`.
    pub structure_json: bool,
    /// Required on FIFO topics; on standard topics forwarded to standard queues (fair queues).
    pub group_id: Option<String>,
    /// FIFO topics only.
    pub dedup_id: Option<String>,
    /// The message id (the envelope's `MessageId`), when the caller has one of its own: the
    /// outbox relay gives the row id, so that a row published twice carries one id. A new
    /// UUIDv7 when `None`.
    pub message_id: Option<String>,
    /// The schema type when the attribute `sluice.type` does not name one: the outbox relay's
    /// row type. Not sent to subscribers.
    pub schema_type: Option<String>,
}

/// Checks a message against SNS's rules and the topic's type.
pub(super) fn check(topic: &TopicRecord, p: &Publication) -> Result<Checked, Invalid> {
    if p.message.is_empty() {
        return Err(Invalid::new("body", "the message is empty", "Invalid parameter: Empty message"));
    }
    if let Some(subject) = &p.subject {
        let ok = !subject.is_empty()
            && subject.chars().count() <= SUBJECT_LEN_MAX
            && !subject.starts_with(char::is_whitespace)
            && !subject.chars().any(char::is_control);
        if !ok {
            return Err(Invalid::new(
                "subject",
                format!("a subject is 1 to {SUBJECT_LEN_MAX} characters without line breaks or control characters"),
                "Invalid parameter: Subject",
            ));
        }
    }
    check_attributes(&p.attributes)?;
    let size = p.message.len()
        + p.attributes.iter().map(|(k, v)| k.len() + v.data_type.len() + attribute_len(&v.value)).sum::<usize>();
    if size > PUBLISH_BYTES_MAX {
        return Err(Invalid::new(
            "body",
            format!("the message and its attributes are {size} bytes, more than {PUBLISH_BYTES_MAX}"),
            "Invalid parameter: Message too long",
        ));
    }
    let (default_text, per_protocol) =
        if p.structure_json { structured(&p.message)? } else { (p.message.clone(), BTreeMap::new()) };
    check_fifo_id("group_id", "MessageGroupId", p.group_id.as_deref())?;
    check_fifo_id("dedup_id", "MessageDeduplicationId", p.dedup_id.as_deref())?;
    let dedup_id = if topic.fifo {
        if p.group_id.is_none() {
            return Err(Invalid::new(
                "group_id",
                "messages to a FIFO topic need a group_id",
                "Invalid parameter: The MessageGroupId parameter is required for FIFO topics",
            ));
        }
        match &p.dedup_id {
            Some(id) => Some(id.clone()),
            None if topic.content_based_dedup() => Some(sluice_core::broker::content_dedup_id(p.message.as_bytes())),
            None => {
                return Err(Invalid::new(
                    "dedup_id",
                    "give a dedup_id, or create the topic with content_based_dedup",
                    "Invalid parameter: The topic should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
                ));
            }
        }
    } else {
        if p.dedup_id.is_some() {
            return Err(Invalid::new(
                "dedup_id",
                "only FIFO topics take a dedup_id",
                "Invalid parameter: MessageDeduplicationId Reason: The request includes MessageDeduplicationId parameter that is not valid for this topic type",
            ));
        }
        None
    };
    Ok(Checked { default_text, per_protocol, dedup_id })
}

fn attribute_len(value: &AttributeData) -> usize {
    match value {
        AttributeData::Text(t) => t.len(),
        AttributeData::Bytes(b) => b.len(),
    }
}

/// SNS's attribute rules: at most ten; names of letters (any script's), digits, `_`, `-` and
/// `.`; types `String`, `String.Array`, `Number` and `Binary`, each with an optional custom
/// label; non-empty values. A `String.Array` need not hold a JSON array: SNS takes `100` too, and
/// filters on that one value (`sluice_core::filter`).
fn check_attributes(attributes: &BTreeMap<String, AttributeValue>) -> Result<(), Invalid> {
    if attributes.len() > PUBLISH_ATTRIBUTES_MAX {
        return Err(Invalid::attribute(
            "attributes",
            format!("a message has at most {PUBLISH_ATTRIBUTES_MAX} attributes"),
            format!(
                "Number of message attributes [{}] exceeds the allowed maximum [{PUBLISH_ATTRIBUTES_MAX}].",
                attributes.len()
            ),
        ));
    }
    for (name, attribute) in attributes {
        check_attribute_name(name)?;
        let empty = match &attribute.value {
            AttributeData::Text(t) => t.is_empty(),
            AttributeData::Bytes(b) => b.is_empty(),
        };
        if empty {
            return Err(Invalid::attribute(
                format!("attributes.{name}"),
                format!("attribute {name:?} has an empty value"),
                format!(
                    "The message attribute '{name}' must contain non-empty message attribute value for message attribute type '{}'.",
                    attribute.base_type()
                ),
            ));
        }
    }
    // The rest (types, numbers) as the queues that take the copies check them.
    let probe = NewMessage { attributes: attributes.clone(), ..Default::default() };
    probe.validate().map_err(|e| {
        // The field is `attributes.<name>` or `attributes.<name>.<part>`, and a name may hold dots.
        let field = e.field.strip_prefix("attributes.").unwrap_or(&e.field);
        let sns_message = if let Some(name) = field.strip_suffix(".value") {
            format!("Could not cast message attribute '{name}' value to number.")
        } else if let Some(name) = field.strip_suffix(".type") {
            format!(
                "The message attribute '{name}' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String."
            )
        } else {
            format!("Invalid attribute name: {field}")
        };
        Invalid::attribute(e.field.clone(), e.to_string(), sns_message)
    })
}

/// SNS's rule for a message attribute name, with AWS's texts (recorded): at most 256
/// characters; letters (of any script, as `attr.1øßä`), digits, `-`, `_` and `.`, but no `.`
/// first, last or twice in a row. The first fault in the name is the one reported, as AWS does.
fn check_attribute_name(name: &str) -> Result<(), Invalid> {
    let invalid = |sns_message: String| {
        Invalid::attribute(
            format!("attributes.{name}"),
            format!(
                "attribute names are 1 to {ATTRIBUTE_NAME_LEN_MAX} characters of letters, digits, '_', '-' and '.' (not leading, trailing or doubled)"
            ),
            sns_message,
        )
    };
    if name.chars().count() > ATTRIBUTE_NAME_LEN_MAX {
        return Err(invalid(format!(
            "Length of message attribute name must be less than {ATTRIBUTE_NAME_LEN_MAX} bytes."
        )));
    }
    if name.starts_with('.') {
        return Err(invalid("Invalid message attribute name starting with character '.' was found.".into()));
    }
    if name.ends_with('.') {
        return Err(invalid("Invalid message attribute name ending with character '.' was found.".into()));
    }
    let mut previous = None;
    for c in name.chars() {
        if !(c.is_alphanumeric() || matches!(c, '-' | '_' | '.')) {
            return Err(invalid(format!(
                "Invalid non-alphanumeric character '#x{:X}' was found in the message attribute name. Can only include alphanumeric characters, hyphens, underscores, or dots.",
                u32::from(c)
            )));
        }
        if c == '.' && previous == Some('.') {
            return Err(invalid("Message attribute name can not have successive '.' character.".into()));
        }
        previous = Some(c);
    }
    Ok(())
}

/// `MessageStructure=json`: the `default` text and the per-protocol ones.
fn structured(message: &str) -> Result<(String, BTreeMap<String, String>), Invalid> {
    let invalid = |why: &str| {
        Invalid::new(
            "body",
            format!("with structure json, {why}"),
            format!("Invalid parameter: Message Structure - {why}"),
        )
    };
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(message) else {
        return Err(invalid("JSON message body failed to parse"));
    };
    let Some(serde_json::Value::String(default)) = map.get("default") else {
        return Err(invalid("No default entry in JSON message body"));
    };
    let per_protocol = map
        .iter()
        .filter_map(|(k, v)| v.as_str().map(|text| (k.clone(), text.to_string())))
        .filter(|(k, _)| Protocol::parse(k).is_some())
        .collect();
    Ok((default.clone(), per_protocol))
}

/// `MessageGroupId` and `MessageDeduplicationId`: 1 to 128 ASCII letters, digits and
/// punctuation.
fn check_fifo_id(field: &str, parameter: &str, value: Option<&str>) -> Result<(), Invalid> {
    let Some(value) = value else { return Ok(()) };
    let ok = !value.is_empty()
        && value.chars().count() <= FIFO_ID_LEN_MAX
        && value.chars().all(|c| c.is_ascii_alphanumeric() || c.is_ascii_punctuation());
    if ok {
        return Ok(());
    }
    Err(Invalid::new(
        field,
        format!("{field} is 1 to {FIFO_ID_LEN_MAX} ASCII letters, digits and punctuation"),
        format!(
            "Invalid parameter: {parameter} Reason: {parameter} can only include alphanumeric and punctuation characters. 1 to 128 in length."
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(fifo: bool, content_dedup: bool) -> TopicRecord {
        let mut attributes = BTreeMap::new();
        if content_dedup {
            attributes.insert("ContentBasedDeduplication".to_string(), "true".to_string());
        }
        TopicRecord { format: 1, name: "t".into(), fifo, attributes, tags: BTreeMap::new(), created_at_ms: 0 }
    }

    fn message(text: &str) -> Publication {
        Publication { message: text.into(), ..Default::default() }
    }

    fn sns(result: Result<Checked, Invalid>) -> String {
        result.err().map(|e| e.sns_message).unwrap_or_default()
    }

    #[test]
    fn sns_publish_rules() {
        let std = topic(false, false);
        assert_eq!(sns(check(&std, &message(""))), "Invalid parameter: Empty message");
        assert_eq!(
            sns(check(&std, &message(&"x".repeat(PUBLISH_BYTES_MAX + 1)))),
            "Invalid parameter: Message too long"
        );
        assert!(check(&std, &message(&"x".repeat(PUBLISH_BYTES_MAX))).is_ok());
        let empty_subject = Publication { subject: Some(String::new()), ..message("m") };
        assert_eq!(sns(check(&std, &empty_subject)), "Invalid parameter: Subject");
        let dedup = Publication { dedup_id: Some("d".into()), ..message("m") };
        assert!(sns(check(&std, &dedup)).starts_with("Invalid parameter: MessageDeduplicationId Reason:"));
        let grouped = Publication { group_id: Some("g".into()), ..message("m") };
        assert!(check(&std, &grouped).is_ok(), "standard topics forward group ids");

        let fifo = topic(true, false);
        assert_eq!(
            sns(check(&fifo, &message("m"))),
            "Invalid parameter: The MessageGroupId parameter is required for FIFO topics"
        );
        assert_eq!(
            sns(check(&fifo, &grouped)),
            "Invalid parameter: The topic should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly"
        );
        let content = topic(true, true);
        let checked = check(&content, &Publication { group_id: Some("g".into()), ..message("Test") }).unwrap();
        assert_eq!(
            checked.dedup_id.as_deref(),
            Some("532eaabd9574880dbf76b9b8cc00832c20a6ec113d682299550d7a6e0f345e25")
        );
    }

    #[test]
    fn message_structure_json() {
        let std = topic(false, false);
        let structured = |text: &str| Publication { structure_json: true, ..message(text) };
        assert_eq!(
            sns(check(&std, &structured("{\"sqs\": \"x\"}"))),
            "Invalid parameter: Message Structure - No default entry in JSON message body"
        );
        assert_eq!(
            sns(check(&std, &structured("not json"))),
            "Invalid parameter: Message Structure - JSON message body failed to parse"
        );
        assert_eq!(
            sns(check(&std, &structured("{\"default\": 1}"))),
            "Invalid parameter: Message Structure - No default entry in JSON message body"
        );
        let checked = check(&std, &structured(r#"{"default": "d", "sqs": "q", "email": "e"}"#)).unwrap();
        assert_eq!(checked.default_text, "d");
        assert_eq!(checked.per_protocol, BTreeMap::from([("sqs".to_string(), "q".to_string())]));
    }

    #[test]
    fn attribute_rules_in_sns_words() {
        let std = topic(false, false);
        let with = |name: &str, data_type: &str, value: AttributeData| Publication {
            attributes: BTreeMap::from([(name.to_string(), AttributeValue { data_type: data_type.into(), value })]),
            ..message("m")
        };
        let e = check(&std, &with("attr1", "String", AttributeData::Text(String::new()))).unwrap_err();
        assert_eq!(
            (e.sns_code, e.sns_message.as_str()),
            (
                "ParameterValueInvalid",
                "The message attribute 'attr1' must contain non-empty message attribute value for message attribute type 'String'."
            )
        );
        assert!(check(&std, &with("n", "Number", AttributeData::Text("x".into()))).is_err());
        assert!(check(&std, &with("arr", "String.Array", AttributeData::Text("[\"a\", 1]".into()))).is_ok());
        // SNS takes a String.Array that is no JSON array, and filters on its one value.
        assert!(check(&std, &with("arr", "String.Array", AttributeData::Text("100".into()))).is_ok());
        assert!(check(&std, &with("arr", "String.Array", AttributeData::Text("a".into()))).is_ok());
        assert!(check(&std, &with("b", "Binary", AttributeData::Bytes(vec![1]))).is_ok());
        let text = || AttributeData::Text("v".into());
        assert!(check(&std, &with("attr.1øßä", "String", text())).is_ok(), "letters of any script");
        // AWS's texts, recorded.
        for (name, sns_message) in [
            (
                "a^b",
                "Invalid non-alphanumeric character '#x5E' was found in the message attribute name. Can only include alphanumeric characters, hyphens, underscores, or dots.",
            ),
            (".a", "Invalid message attribute name starting with character '.' was found."),
            ("a.", "Invalid message attribute name ending with character '.' was found."),
            ("a..b", "Message attribute name can not have successive '.' character."),
            (&"a".repeat(257), "Length of message attribute name must be less than 256 bytes."),
        ] {
            let e = check(&std, &with(name, "String", text())).unwrap_err();
            assert_eq!((e.sns_code, e.sns_message.as_str()), ("ParameterValueInvalid", sns_message), "{name}");
        }
        assert!(check(&std, &with(&"a".repeat(256), "String", text())).is_ok());
        // A name with dots is quoted whole in errors about its value or type.
        let e = check(&std, &with("a.b.c", "Number", AttributeData::Text("x".into()))).unwrap_err();
        assert_eq!(e.sns_message, "Could not cast message attribute 'a.b.c' value to number.");
        let e = check(&std, &with("a.b.c", "Blob", text())).unwrap_err();
        assert!(e.sns_message.starts_with("The message attribute 'a.b.c' has an invalid"), "{}", e.sns_message);
    }
}
