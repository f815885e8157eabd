//! Compiling a schema and checking a message body against it, with the jsonschema crate
//! (JSON Schema 2020-12). Built without its remote resolvers, so a `$ref` to a file or URL is
//! a schema error rather than a request the server makes.

use jsonschema::Validator;
use serde_json::Value;

/// The only dialect accepted; a schema naming another in `$schema` is refused.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// Most failures one refusal lists (the first is the one its message names).
pub const VIOLATION_ERRORS_MAX: usize = 10;

/// Compiles a schema, checking it against the 2020-12 meta-schema; the error says what is wrong.
pub fn compile(schema: &Value) -> Result<Validator, String> {
    if let Some(dialect) = schema.get("$schema") {
        let dialect = dialect.as_str().unwrap_or_default().trim_end_matches('#');
        if dialect != DIALECT {
            return Err(format!("$schema must be {DIALECT:?} (JSON Schema 2020-12), not {dialect:?}"));
        }
    }
    if !(schema.is_object() || schema.is_boolean()) {
        return Err("a schema is a JSON object (or true or false)".into());
    }
    jsonschema::draft202012::new(schema).map_err(|e| {
        let at = e.instance_path().to_string();
        if at.is_empty() { e.to_string() } else { format!("{e} (at {at})") }
    })
}

/// One way a body breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Where in the body, as a JSON pointer (`""` is the whole body).
    pub pointer: String,
    /// Where in the schema the failing keyword is.
    pub schema_path: String,
    pub message: String,
}

/// The failures of `instance` against `validator`, at most [`VIOLATION_ERRORS_MAX`]; empty
/// when it is valid.
pub fn failures(validator: &Validator, instance: &Value) -> Vec<Failure> {
    validator
        .iter_errors(instance)
        .take(VIOLATION_ERRORS_MAX)
        .map(|e| Failure {
            pointer: e.instance_path().to_string(),
            schema_path: e.schema_path().to_string(),
            message: e.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn failures_name_the_pointer_in_the_body() {
        let schema = json!({
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"type": "object", "properties": {"qty": {"type": "integer", "minimum": 1}}}}},
        });
        let v = compile(&schema).unwrap();
        assert!(failures(&v, &json!({"items": [{"qty": 2}]})).is_empty());
        let found = failures(&v, &json!({"items": [{"qty": 2}, {"qty": 0}]}));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].pointer, "/items/1/qty");
        assert!(found[0].schema_path.ends_with("/minimum"), "{found:?}");
    }

    #[test]
    fn schemas_are_checked_against_the_meta_schema() {
        assert!(compile(&json!({"type": "strin"})).is_err());
        assert!(compile(&json!({"minimum": "one"})).is_err());
        assert!(compile(&json!([1])).is_err());
        assert!(compile(&json!(true)).is_ok());
        assert!(compile(&json!({"$schema": "http://json-schema.org/draft-07/schema#"})).is_err());
        assert!(compile(&json!({"$schema": DIALECT, "type": "object"})).is_ok());
    }

    #[test]
    fn remote_references_are_refused_not_fetched() {
        let e = compile(&json!({"$ref": "https://example.com/schema.json"})).unwrap_err();
        assert!(!e.is_empty());
        let e = compile(&json!({"$ref": "file:///etc/passwd"})).unwrap_err();
        assert!(!e.is_empty());
        assert!(compile(&json!({"$defs": {"a": {"type": "string"}}, "$ref": "#/$defs/a"})).is_ok());
    }
}
