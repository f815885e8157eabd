//! Wire types of `/v1/schemas`: JSON Schema versions per message type, their compatibility
//! mode, and the checks of a schema or a message before it is registered or sent.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// How each new version of a type must relate to earlier ones. `backward` (the default): a
/// consumer on the new version reads messages of the latest earlier one; `forward`: a consumer
/// on the latest earlier version reads messages of the new one; `full`: both; `_transitive`:
/// against every earlier version; `none`: anything goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Compatibility {
    #[default]
    Backward,
    BackwardTransitive,
    Forward,
    ForwardTransitive,
    Full,
    FullTransitive,
    None,
}

/// `POST /v1/schemas/{type}/versions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterSchemaRequest {
    /// A JSON Schema 2020-12 document (local `$ref`s only), at most 256 KiB as JSON.
    #[schema(value_type = Object)]
    pub schema: serde_json::Value,
}

/// The version a registration answers: new (201) or the same schema's existing one (200).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RegisteredSchema {
    #[serde(rename = "type")]
    pub message_type: String,
    pub version: u32,
}

/// A message type in the registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SchemaType {
    #[serde(rename = "type")]
    pub message_type: String,
    pub compatibility: Compatibility,
    /// The newest version; absent before the first is registered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_version: Option<u32>,
    /// Every version, oldest first (on `GET /v1/schemas/{type}`; absent in lists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versions: Option<Vec<u32>>,
    pub created_at: String,
    pub created_at_ms: u64,
    pub updated_at: String,
    pub updated_at_ms: u64,
}

/// `GET /v1/schemas`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SchemaTypeList {
    pub types: Vec<SchemaType>,
    /// Pass as `next_token` to get the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
}

/// `GET /v1/schemas/{type}/versions/{version}` (a number, or `latest`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SchemaVersion {
    #[serde(rename = "type")]
    pub message_type: String,
    pub version: u32,
    #[schema(value_type = Object)]
    pub schema: serde_json::Value,
    pub created_at: String,
    pub created_at_ms: u64,
}

/// `PUT /v1/schemas/{type}/config`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SchemaConfig {
    pub compatibility: Compatibility,
}

/// `POST /v1/schemas/{type}/check`: give `schema` to learn whether registering it would be
/// accepted, or `body` (and optionally `version`, default the latest) to learn whether a
/// message would pass.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckSchemaRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub schema: Option<serde_json::Value>,
    /// A message body, as text, as it would be sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
}

/// One way a new version breaks compatibility with an earlier one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IncompatibilityReason {
    /// The earlier version.
    pub version: u32,
    /// `backward`: that version's messages would fail the new schema; `forward`: the new
    /// schema's messages would fail that version.
    pub direction: String,
    /// A stable name: `type_narrowed`, `required_added`, `property_added_to_open_model`,
    /// `property_removed_from_closed_model`, `values_restricted`, `value_refused`,
    /// `bound_tightened`, `pattern_changed`, `unique_items_added`, `any_of_narrowed`,
    /// `one_of_changed`, `keyword_changed`, `unresolved_ref`, `everything_refused`.
    pub kind: String,
    /// Where, as a JSON pointer into the schemas.
    pub path: String,
    pub message: String,
}

/// One way a message body breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SchemaFailure {
    /// Where in the body, as a JSON pointer (`""`: the whole body).
    pub pointer: String,
    /// The failing keyword, as a JSON pointer into the schema.
    pub schema_path: String,
    pub message: String,
}

/// The answer of a check: `compatible` and `reasons` for a schema, `valid` and `errors` for
/// a body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CheckSchemaResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compatible: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<IncompatibilityReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid: Option<bool>,
    /// The version a body was checked against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<SchemaFailure>,
}

/// A message's schema `version` as sent: a string (`"2"`, as the attribute `sluice.version`
/// carries it) or a JSON number (`2`, as `/v1/schemas` answers it); kept as text.
pub(crate) fn version_text<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Text {
        Text(String),
        Number(u64),
    }
    Ok(Option::<Text>::deserialize(deserializer)?.map(|v| match v {
        Text::Text(t) => t,
        Text::Number(n) => n.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use crate::{PublishMessage, SendMessage};

    #[test]
    fn a_version_is_a_string_or_a_number() {
        let text: SendMessage = serde_json::from_str(r#"{"body": "{}", "version": "2"}"#).unwrap();
        let number: SendMessage = serde_json::from_str(r#"{"body": "{}", "version": 2}"#).unwrap();
        assert_eq!((text.version.as_deref(), number.version.as_deref()), (Some("2"), Some("2")));
        let published: PublishMessage = serde_json::from_str(r#"{"body": "{}", "version": 3}"#).unwrap();
        assert_eq!(published.version.as_deref(), Some("3"));
        assert!(serde_json::from_str::<SendMessage>(r#"{"body": "{}", "version": [2]}"#).is_err());
        assert_eq!(serde_json::from_str::<SendMessage>(r#"{"body": "{}"}"#).unwrap().version, None);
    }
}
