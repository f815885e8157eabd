//! Message attributes and message system attributes as SQS sends and returns them: AWS's
//! rules and error texts on the way in, name filters and the wire shape on the way out.
//!
//! Values are kept byte-exact (data type with its custom suffix, Number text as sent), because
//! the attribute digest clients check is computed over exactly those bytes.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sluice_core::AttributeValue;
use sluice_core::message::AttributeData;

use super::errors::AwsError;
use super::limits::{ATTRIBUTE_NAME_LEN_MAX, ATTRIBUTE_TYPE_LEN_MAX, MESSAGE_ATTRIBUTES_MAX};

/// The only message system attribute SQS accepts on a send.
pub const TRACE_HEADER: &str = "AWSTraceHeader";

/// A `MessageAttributeValue` as sent. The list members are reserved by AWS and unused.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct AttributeIn {
    pub data_type: Option<String>,
    pub string_value: Option<String>,
    pub binary_value: Option<String>,
}

impl AttributeIn {
    /// Bytes the attribute counts toward a message's size besides its name: type and value,
    /// as sent (a base64 binary value counts decoded, so this estimates from above). SQS and
    /// SNS count alike.
    pub fn payload_bytes(&self) -> usize {
        self.data_type.as_ref().map_or(0, String::len)
            + self.string_value.as_ref().map_or(0, String::len)
            + self.binary_value.as_ref().map_or(0, |b| b.len() / 4 * 3)
    }
}

/// Checks and converts a message's attributes.
pub fn user_attributes(
    attributes: Option<&BTreeMap<String, AttributeIn>>,
) -> Result<BTreeMap<String, AttributeValue>, AwsError> {
    let Some(attributes) = attributes else { return Ok(BTreeMap::new()) };
    if attributes.len() > MESSAGE_ATTRIBUTES_MAX {
        return Err(AwsError::invalid_parameter_value(format!(
            "Number of message attributes [{}] exceeds the allowed maximum [{MESSAGE_ATTRIBUTES_MAX}].",
            attributes.len()
        )));
    }
    let mut out = BTreeMap::new();
    for (name, value) in attributes {
        check_name(name)?;
        out.insert(name.clone(), convert(name, value, "user")?);
    }
    Ok(out)
}

/// Checks and converts a message's system attributes: only `AWSTraceHeader`, as a String.
pub fn system_attributes(
    attributes: Option<&BTreeMap<String, AttributeIn>>,
) -> Result<BTreeMap<String, AttributeValue>, AwsError> {
    let Some(attributes) = attributes else { return Ok(BTreeMap::new()) };
    let mut out = BTreeMap::new();
    for (name, value) in attributes {
        if name != TRACE_HEADER {
            return Err(AwsError::invalid_parameter_value(format!(
                "Message system attribute name '{name}' is invalid."
            )));
        }
        if value.data_type.as_deref() != Some("String") {
            return Err(AwsError::invalid_parameter_value(format!(
                "Message system attribute '{name}' must have a data type of 'String'."
            )));
        }
        out.insert(name.clone(), convert(name, value, "system")?);
    }
    Ok(out)
}

/// AWS's rule for a message attribute name: at most 256 characters of letters (of any script:
/// AWS takes `attr.1øßä`), digits, `_`, `-` and `.`; no `AWS.` or `Amazon.` prefix in any case;
/// no `.` first, last or twice in a row. The texts are AWS's.
fn check_name(name: &str) -> Result<(), AwsError> {
    if name.is_empty() || name.chars().count() > ATTRIBUTE_NAME_LEN_MAX {
        return Err(AwsError::invalid_parameter_value(format!(
            "Message (user) attribute names must be shorter than {ATTRIBUTE_NAME_LEN_MAX} Bytes"
        )));
    }
    if !name.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.')) {
        return Err(AwsError::invalid_parameter_value(
            "Message (user) attributes name can only contain upper and lower score characters, digits, periods, hyphens and underscores. ",
        ));
    }
    let lower = name.to_ascii_lowercase();
    if lower.starts_with("aws.") || lower.starts_with("amazon.") || name.starts_with('.') || name.ends_with('.') {
        return Err(AwsError::invalid_parameter_value(
            "You can't use message attribute names beginning with 'AWS.' or 'Amazon.'. These strings are reserved for internal use. Additionally, they cannot start or end with '.'.",
        ));
    }
    if name.contains("..") {
        return Err(AwsError::invalid_parameter_value(format!(
            "Message (user) attribute name '{name}' can not have successive '.' characters."
        )));
    }
    Ok(())
}

fn convert(name: &str, value: &AttributeIn, kind: &str) -> Result<AttributeValue, AwsError> {
    let data_type = match value.data_type.as_deref() {
        Some(t) if !t.is_empty() => t,
        _ => {
            return Err(AwsError::invalid_parameter_value(format!(
                "The message attribute '{name}' must contain non-empty message attribute type."
            )));
        }
    };
    if data_type.len() >= ATTRIBUTE_TYPE_LEN_MAX {
        return Err(AwsError::invalid_parameter_value(format!(
            "Message ({kind}) attribute types must be shorter than {ATTRIBUTE_TYPE_LEN_MAX} Bytes"
        )));
    }
    let base = data_type.split('.').next().unwrap_or("");
    let empty = || {
        AwsError::invalid_parameter_value(format!(
            "Message ({kind}) attribute '{name}' must contain a non-empty value of type '{base}'."
        ))
    };
    let data = match base {
        "String" | "Number" => {
            let text = value.string_value.as_deref().filter(|s| !s.is_empty()).ok_or_else(empty)?;
            if !valid_text(text) {
                return Err(AwsError::invalid_parameter_value(AwsError::invalid_message_contents().message));
            }
            AttributeData::Text(text.to_string())
        }
        "Binary" => {
            let encoded = value.binary_value.as_deref().filter(|s| !s.is_empty()).ok_or_else(empty)?;
            let bytes = STANDARD.decode(encoded.as_bytes()).map_err(|_| {
                AwsError::invalid_parameter_value(format!(
                    "The value of message ({kind}) attribute '{name}' is not valid base64."
                ))
            })?;
            if bytes.is_empty() {
                return Err(empty());
            }
            AttributeData::Bytes(bytes)
        }
        _ => {
            return Err(AwsError::invalid_parameter_value(format!(
                "The type of message ({kind}) attribute '{name}' is invalid. You must use only the following supported type prefixes: Binary, Number, String."
            )));
        }
    };
    Ok(AttributeValue { data_type: data_type.to_string(), value: data })
}

/// The characters SQS accepts in a body or a text attribute: `#x9 | #xA | #xD | #x20-#xD7FF |
/// #xE000-#xFFFD | #x10000-#x10FFFF` (a Rust string cannot hold surrogates).
pub fn valid_text(text: &str) -> bool {
    text.chars().all(|c| matches!(c, '\t' | '\n' | '\r' | ' '..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..))
}

/// The attributes a receive asked for: `All`, `*` and `.*` mean every one, `prefix.*` those
/// whose name starts with the prefix, anything else one exact name. Names that match nothing
/// (illegal ones included) just select nothing, as in AWS.
pub fn select(all: &BTreeMap<String, AttributeValue>, names: &[String]) -> BTreeMap<String, AttributeValue> {
    if names.iter().any(|n| matches!(n.as_str(), "All" | "*" | ".*")) {
        return all.clone();
    }
    all.iter()
        .filter(|(name, _)| {
            names.iter().any(|wanted| match wanted.strip_suffix(".*") {
                Some(prefix) => name.starts_with(prefix),
                None => *name == wanted,
            })
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The wire shape: `{"Name": {"DataType": "...", "StringValue"|"BinaryValue": "..."}}`.
pub fn render(attributes: &BTreeMap<String, AttributeValue>) -> Value {
    let mut out = Map::new();
    for (name, value) in attributes {
        let v = match &value.value {
            AttributeData::Text(t) => json!({ "DataType": value.data_type, "StringValue": t }),
            AttributeData::Bytes(b) => json!({ "DataType": value.data_type, "BinaryValue": STANDARD.encode(b) }),
        };
        out.insert(name.clone(), v);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(data_type: &str, string: Option<&str>, binary: Option<&str>) -> AttributeIn {
        AttributeIn {
            data_type: Some(data_type.into()),
            string_value: string.map(Into::into),
            binary_value: binary.map(Into::into),
        }
    }

    fn check(name: &str, value: AttributeIn) -> Result<AttributeValue, String> {
        let map = BTreeMap::from([(name.to_string(), value)]);
        user_attributes(Some(&map)).map(|mut m| m.remove(name).unwrap()).map_err(|e| e.message)
    }

    #[test]
    fn accepted_values_stay_byte_exact() {
        let v = check("n", attr("Number.float", Some("01.50"), None)).unwrap();
        assert_eq!((v.data_type.as_str(), v.value), ("Number.float", AttributeData::Text("01.50".into())));
        let v = check("b", attr("Binary", None, Some("AAE="))).unwrap();
        assert_eq!(v.value, AttributeData::Bytes(vec![0, 1]));
    }

    #[test]
    fn aws_rules_and_messages() {
        assert_eq!(
            check("ErrorDetails", attr("String", Some(""), None)).unwrap_err(),
            "Message (user) attribute 'ErrorDetails' must contain a non-empty value of type 'String'."
        );
        for bad in ["AWS.x", "amazon.x", ".x", "x.", "a b", "a§b", "", &"L".repeat(257)] {
            assert!(check(bad, attr("String", Some("v"), None)).is_err(), "{bad}");
        }
        for good in ["attr.1øßä", "ключ", &"L".repeat(256)] {
            assert!(check(good, attr("String", Some("v"), None)).is_ok(), "{good}");
        }
        assert!(check("a..b", attr("String", Some("v"), None)).is_err());
        assert!(check("x", attr("Blob", Some("v"), None)).unwrap_err().contains("supported type prefixes"));
        assert!(check("x", attr("Binary", None, Some("%%%"))).is_err());
        assert!(check("x", attr("String", Some("\u{0}"), None)).is_err());
        let many: BTreeMap<String, AttributeIn> =
            (0..11).map(|i| (format!("a{i}"), attr("String", Some("v"), None))).collect();
        assert!(user_attributes(Some(&many)).unwrap_err().message.contains("[11]"));
    }

    #[test]
    fn system_attributes_take_only_the_trace_header() {
        let ok = BTreeMap::from([(TRACE_HEADER.to_string(), attr("String", Some("Root=1"), None))]);
        assert_eq!(system_attributes(Some(&ok)).unwrap().len(), 1);
        let other = BTreeMap::from([("SenderId".to_string(), attr("String", Some("x"), None))]);
        assert!(system_attributes(Some(&other)).is_err());
    }

    #[test]
    fn selection_like_aws() {
        let v = || AttributeValue { data_type: "String".into(), value: AttributeData::Text("v".into()) };
        let all =
            BTreeMap::from([("Help.Me".to_string(), v()), ("Hello".to_string(), v()), ("General".to_string(), v())]);
        let names = |n: &[&str]| -> Vec<String> {
            select(&all, &n.iter().map(|s| s.to_string()).collect::<Vec<_>>()).into_keys().collect()
        };
        assert_eq!(names(&["All"]).len(), 3);
        assert_eq!(names(&["*"]).len(), 3);
        assert_eq!(names(&[".*"]).len(), 3);
        assert_eq!(names(&["Hel.*"]), ["Hello", "Help.Me"]);
        assert_eq!(names(&["Foo", "Hello"]), ["Hello"]);
        assert!(names(&["AWS."]).is_empty());
        assert!(names(&[]).is_empty());
    }

    #[test]
    fn text_rules() {
        assert!(valid_text("tab\tnl\ncr\r ok \u{10FFFF}"));
        assert!(!valid_text("\u{1}"));
        assert!(!valid_text("\u{FFFE}"));
    }
}
