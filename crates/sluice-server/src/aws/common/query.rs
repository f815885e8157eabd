//! The Query protocol's input: `Action=...&Version=...&...` parameters from a form body or a
//! GET query string, turned into the JSON protocol's shape so that every action reads one
//! input format.
//!
//! Query flattens lists and maps into numbered names (`AttributeName.1`,
//! `Attribute.1.Name`/`Attribute.1.Value`, `SendMessageBatchRequestEntry.2.MessageAttribute.1.Value.StringValue`).
//! The table in [`hint`] says, for each such name, which JSON member it becomes and how its
//! numbered items are built; the names come from the query model
//! (`shared/reference/aws-data/sqs-query-model-2012-11-05.json`).
//!
//! SNS flattens differently, and regularly: a list is `Name.member.N` and a map is
//! `Name.entry.N.key`/`.value` (`Name`/`Value` for message attributes), so [`to_sns_input`]
//! needs no table.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::errors::AwsError;
use super::limits::{QUERY_PARAM_NAME_PARTS_MAX, QUERY_PARAMS_MAX};

/// Parameters that frame the request rather than belong to the action's input.
const FRAMING: &[&str] = &[
    "Action",
    "Version",
    "AWSAccessKeyId",
    "Signature",
    "SignatureMethod",
    "SignatureVersion",
    "Timestamp",
    "Expires",
    "SecurityToken",
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-Expires",
    "X-Amz-SignedHeaders",
    "X-Amz-Signature",
    "X-Amz-Security-Token",
];

/// Decodes `application/x-www-form-urlencoded` text (a body or a query string).
pub fn decode(text: &[u8]) -> Result<Vec<(String, String)>, AwsError> {
    let mut params = Vec::new();
    for (k, v) in form_urlencoded::parse(text) {
        if params.len() == QUERY_PARAMS_MAX {
            return Err(AwsError::invalid_parameter_value(format!(
                "A request may carry at most {QUERY_PARAMS_MAX} parameters."
            )));
        }
        params.push((k.into_owned(), v.into_owned()));
    }
    Ok(params)
}

/// The value of the first parameter called `name`.
pub fn get<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// How a flattened name becomes a JSON member.
#[derive(Debug, Clone, Copy)]
enum Hint {
    /// `Name.N` (or `Name.N.Field` for structures) → a JSON array named `json`.
    List { json: &'static str, items_are_structures: bool },
    /// `Name.N.<key>` and `Name.N.<value>` → a JSON object named `json`.
    Map { json: &'static str, key: &'static str, value: &'static str, values_are_structures: bool },
}

/// Each flattened name and how it becomes a JSON member.
const HINTS: &[(&str, Hint)] = &[
    ("Attribute", Hint::Map { json: "Attributes", key: "Name", value: "Value", values_are_structures: false }),
    ("Tag", Hint::Map { json: "Tags", key: "Key", value: "Value", values_are_structures: false }),
    (
        "MessageAttribute",
        Hint::Map { json: "MessageAttributes", key: "Name", value: "Value", values_are_structures: true },
    ),
    (
        "MessageSystemAttribute",
        Hint::Map { json: "MessageSystemAttributes", key: "Name", value: "Value", values_are_structures: true },
    ),
    ("AttributeName", Hint::List { json: "AttributeNames", items_are_structures: false }),
    ("MessageAttributeName", Hint::List { json: "MessageAttributeNames", items_are_structures: false }),
    ("MessageSystemAttributeName", Hint::List { json: "MessageSystemAttributeNames", items_are_structures: false }),
    ("AWSAccountId", Hint::List { json: "AWSAccountIds", items_are_structures: false }),
    ("ActionName", Hint::List { json: "Actions", items_are_structures: false }),
    ("TagKey", Hint::List { json: "TagKeys", items_are_structures: false }),
    ("SendMessageBatchRequestEntry", Hint::List { json: "Entries", items_are_structures: true }),
    ("DeleteMessageBatchRequestEntry", Hint::List { json: "Entries", items_are_structures: true }),
    ("ChangeMessageVisibilityBatchRequestEntry", Hint::List { json: "Entries", items_are_structures: true }),
];

fn hint(name: &str) -> Option<Hint> {
    HINTS.iter().find(|(flattened, _)| *flattened == name).map(|(_, hint)| *hint)
}

/// Whether `name` is the JSON name of a flattened list. botocore sends an empty list as that
/// name with no value (`TagKeys=`, `AWSAccountIds=`), since `Name.N` cannot say "none": it is
/// read as the empty list, the JSON protocol's `[]`.
fn is_list_member(name: &str) -> bool {
    HINTS.iter().any(|(_, hint)| matches!(hint, Hint::List { json, .. } if *json == name))
}

/// The parameters split on `.` into a tree: `A.1.B=x` is `A → 1 → B = x`.
#[derive(Debug, Default)]
struct Node {
    value: Option<String>,
    children: BTreeMap<String, Node>,
}

/// The action's input in the JSON protocol's shape.
pub fn to_input(params: &[(String, String)]) -> Result<Value, AwsError> {
    structure(&tree(params)?, "")
}

/// An SNS action's input as JSON: `X.member.N` lists become arrays and `X.entry.N` maps become
/// objects (see the module documentation).
pub fn to_sns_input(params: &[(String, String)]) -> Result<Value, AwsError> {
    sns_structure(&tree(params)?, "")
}

fn tree(params: &[(String, String)]) -> Result<Node, AwsError> {
    let mut root = Node::default();
    for (key, value) in params {
        if FRAMING.contains(&key.as_str()) {
            continue;
        }
        // Checked before the tree grows: its depth is the recursion depth of `structure` (and
        // of dropping the tree).
        if key.split('.').nth(QUERY_PARAM_NAME_PARTS_MAX).is_some() {
            return Err(AwsError::invalid_parameter_value(format!(
                "The parameter {} is not valid: a name has at most {QUERY_PARAM_NAME_PARTS_MAX} parts.",
                key.chars().take(80).collect::<String>()
            )));
        }
        let mut node = &mut root;
        for part in key.split('.') {
            node = node.children.entry(part.to_string()).or_default();
        }
        node.value = Some(value.clone());
    }
    Ok(root)
}

fn sns_structure(node: &Node, path: &str) -> Result<Value, AwsError> {
    let mut out = Map::new();
    for (name, child) in &node.children {
        let here = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
        out.insert(name.clone(), sns_value(child, &here)?);
    }
    Ok(Value::Object(out))
}

fn sns_value(node: &Node, path: &str) -> Result<Value, AwsError> {
    let only = |name: &str| node.children.len() == 1 && node.children.contains_key(name);
    if only("member") {
        let at = format!("{path}.member");
        let mut items = Vec::new();
        for (index, item) in numbered(&node.children["member"], &at)? {
            items.push(sns_value(item, &format!("{at}.{index}"))?);
        }
        return Ok(Value::Array(items));
    }
    if only("entry") {
        let at = format!("{path}.entry");
        let mut entries = Map::new();
        for (index, item) in numbered(&node.children["entry"], &at)? {
            let at = format!("{at}.{index}");
            let (key, value) = if item.children.contains_key("Name") { ("Name", "Value") } else { ("key", "value") };
            let k = item.children.get(key).and_then(|n| n.value.clone());
            let k = k.ok_or_else(|| AwsError::missing_parameter(&format!("{at}.{key}")))?;
            let v = match item.children.get(value) {
                Some(v) => sns_value(v, &format!("{at}.{value}"))?,
                None => Value::Null,
            };
            entries.insert(k, v);
        }
        return Ok(Value::Object(entries));
    }
    if node.children.is_empty() { Ok(leaf(node)) } else { sns_structure(node, path) }
}

fn structure(node: &Node, path: &str) -> Result<Value, AwsError> {
    let mut out = Map::new();
    for (name, child) in &node.children {
        let here = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
        match hint(name) {
            Some(Hint::List { json, items_are_structures }) => {
                let mut items = Vec::new();
                for (index, item) in numbered(child, &here)? {
                    let at = format!("{here}.{index}");
                    items.push(if items_are_structures { structure(item, &at)? } else { leaf(item) });
                }
                out.insert(json.to_string(), Value::Array(items));
            }
            Some(Hint::Map { json, key, value, values_are_structures }) => {
                let mut entries = Map::new();
                for (index, item) in numbered(child, &here)? {
                    let at = format!("{here}.{index}");
                    let k = item.children.get(key).and_then(|n| n.value.clone());
                    let k = k.ok_or_else(|| AwsError::missing_parameter(&format!("{at}.{key}")))?;
                    let v = item
                        .children
                        .get(value)
                        .ok_or_else(|| AwsError::missing_parameter(&format!("{at}.{value}")))?;
                    let v = if values_are_structures { structure(v, &format!("{at}.{value}"))? } else { leaf(v) };
                    entries.insert(k, v);
                }
                out.insert(json.to_string(), Value::Object(entries));
            }
            None if child.children.is_empty() && is_list_member(name) && child.value.as_deref() == Some("") => {
                out.entry(name.clone()).or_insert_with(|| Value::Array(Vec::new()));
            }
            None if child.children.is_empty() => {
                out.insert(name.clone(), leaf(child));
            }
            None => {
                out.insert(name.clone(), structure(child, &here)?);
            }
        }
    }
    Ok(Value::Object(out))
}

fn leaf(node: &Node) -> Value {
    Value::String(node.value.clone().unwrap_or_default())
}

/// The numbered items of a flattened list or map, in numeric order (`.10` after `.9`).
fn numbered<'a>(node: &'a Node, path: &str) -> Result<Vec<(u32, &'a Node)>, AwsError> {
    let mut items = Vec::with_capacity(node.children.len());
    for (index, item) in &node.children {
        let n: u32 = index
            .parse()
            .map_err(|_| AwsError::invalid_parameter_value(format!("The parameter {path}.{index} is not valid.")))?;
        items.push((n, item));
    }
    items.sort_by_key(|(n, _)| *n);
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(query: &str) -> Value {
        to_input(&decode(query.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn scalars_lists_and_maps() {
        assert_eq!(
            input(
                "Action=CreateQueue&Version=2012-11-05&QueueName=q&Attribute.1.Name=DelaySeconds&Attribute.1.Value=5&Tag.1.Key=team&Tag.1.Value=a+b"
            ),
            json!({"QueueName": "q", "Attributes": {"DelaySeconds": "5"}, "Tags": {"team": "a b"}})
        );
        assert_eq!(
            input("AttributeName.2=B&AttributeName.10=C&AttributeName.1=A&MaxNumberOfMessages=3"),
            json!({"AttributeNames": ["A", "B", "C"], "MaxNumberOfMessages": "3"})
        );
    }

    #[test]
    fn batch_entries_nest_their_attributes() {
        let got = input(concat!(
            "SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageBody=x%0Dy",
            "&SendMessageBatchRequestEntry.1.MessageAttribute.1.Name=k",
            "&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType=String",
            "&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue=v",
            "&SendMessageBatchRequestEntry.2.Id=b&SendMessageBatchRequestEntry.2.MessageBody=z",
        ));
        assert_eq!(
            got,
            json!({"Entries": [
                {"Id": "a", "MessageBody": "x\ry", "MessageAttributes": {"k": {"DataType": "String", "StringValue": "v"}}},
                {"Id": "b", "MessageBody": "z"},
            ]})
        );
    }

    #[test]
    fn empty_lists_as_botocore_sends_them() {
        assert_eq!(input("Action=UntagQueue&TagKeys=&QueueUrl=u"), json!({"TagKeys": [], "QueueUrl": "u"}));
        assert_eq!(
            input("AWSAccountIds=&ActionName.1=ReceiveMessage"),
            json!({"AWSAccountIds": [], "Actions": ["ReceiveMessage"]})
        );
        // Items given after all win over the empty form, and other names stay text.
        assert_eq!(input("TagKeys=&TagKey.1=a"), json!({"TagKeys": ["a"]}));
        assert_eq!(input("Label="), json!({"Label": ""}));
    }

    #[test]
    fn broken_numbering_is_refused() {
        let e = to_input(&decode(b"AttributeName.x=A").unwrap()).unwrap_err();
        assert_eq!(e.code, "InvalidParameterValue");
        let e = to_input(&decode(b"Attribute.1.Value=5").unwrap()).unwrap_err();
        assert_eq!(e.message, "The request must contain the parameter Attribute.1.Name.");
    }

    #[test]
    fn deep_names_are_refused_before_the_tree_is_built() {
        let seven = concat!(
            "SendMessageBatchRequestEntry.1.MessageAttribute.1.Name=k",
            "&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringListValue.1=x"
        );
        assert!(to_input(&decode(seven.as_bytes()).unwrap()).is_ok());
        let deep = format!("{}b=1", "a.".repeat(100_000));
        let e = to_input(&decode(deep.as_bytes()).unwrap()).unwrap_err();
        assert_eq!(e.code, "InvalidParameterValue");
        assert!(e.message.len() < 200, "the error does not echo the whole name: {}", e.message);
    }

    #[test]
    fn sns_members_and_entries() {
        let got = to_sns_input(
            &decode(
                concat!(
                    "Action=CreateTopic&Name=t&Attributes.entry.1.key=FifoTopic&Attributes.entry.1.value=true",
                    "&Tags.member.1.Key=k&Tags.member.1.Value=v&TagKeys.member.2=b&TagKeys.member.1=a",
                    "&PublishBatchRequestEntries.member.1.Id=x",
                    "&PublishBatchRequestEntries.member.1.MessageAttributes.entry.1.Name=n",
                    "&PublishBatchRequestEntries.member.1.MessageAttributes.entry.1.Value.DataType=String",
                    "&PublishBatchRequestEntries.member.1.MessageAttributes.entry.1.Value.StringValue=s",
                )
                .as_bytes(),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            got,
            json!({
                "Name": "t",
                "Attributes": {"FifoTopic": "true"},
                "Tags": [{"Key": "k", "Value": "v"}],
                "TagKeys": ["a", "b"],
                "PublishBatchRequestEntries": [
                    {"Id": "x", "MessageAttributes": {"n": {"DataType": "String", "StringValue": "s"}}}
                ],
            })
        );
    }

    #[test]
    fn too_many_parameters_are_refused_while_decoding() {
        let query = "a=1&".repeat(QUERY_PARAMS_MAX + 1);
        assert!(decode(query.as_bytes()).is_err());
    }
}
