//! The compatibility checker on a table of schema pairs, after the schema registries' JSON
//! Schema rules: each row is an earlier and a later schema and whether backward (the later one
//! accepts everything the earlier one did) and forward (the other way round) hold, with the kind
//! of the first reason when one does not.

use serde_json::{Value, json};

use super::compat::accepts_all;

struct Row {
    name: &'static str,
    earlier: Value,
    later: Value,
    /// `None`: backward holds; `Some(kind)`: it fails with this kind first.
    backward: Option<&'static str>,
    forward: Option<&'static str>,
}

fn object(properties: Value, required: &[&str], closed: bool) -> Value {
    let mut schema = json!({"type": "object", "properties": properties, "required": required});
    if closed {
        schema["additionalProperties"] = json!(false);
    }
    schema
}

fn table() -> Vec<Row> {
    let id = json!({"type": "string"});
    let note = json!({"type": "string"});
    vec![
        Row {
            name: "identical",
            earlier: object(json!({"id": id}), &["id"], false),
            later: object(json!({"id": id}), &["id"], false),
            backward: None,
            forward: None,
        },
        Row {
            name: "optional property added to a closed model",
            earlier: object(json!({"id": id}), &["id"], true),
            later: object(json!({"id": id, "note": note}), &["id"], true),
            backward: None,
            forward: Some("property_removed_from_closed_model"),
        },
        Row {
            name: "optional property added to an open model",
            earlier: object(json!({"id": id}), &["id"], false),
            later: object(json!({"id": id, "note": note}), &["id"], false),
            backward: Some("property_added_to_open_model"),
            forward: None,
        },
        Row {
            name: "optional property removed from an open model",
            earlier: object(json!({"id": id, "note": note}), &["id"], false),
            later: object(json!({"id": id}), &["id"], false),
            backward: None,
            forward: Some("property_added_to_open_model"),
        },
        Row {
            name: "optional property removed from a closed model",
            earlier: object(json!({"id": id, "note": note}), &["id"], true),
            later: object(json!({"id": id}), &["id"], true),
            backward: Some("property_removed_from_closed_model"),
            forward: None,
        },
        Row {
            name: "required property added",
            earlier: object(json!({"id": id, "note": note}), &["id"], true),
            later: object(json!({"id": id, "note": note}), &["id", "note"], true),
            backward: Some("required_added"),
            forward: None,
        },
        Row {
            name: "property no longer required",
            earlier: object(json!({"id": id, "note": note}), &["id", "note"], false),
            later: object(json!({"id": id, "note": note}), &["id"], false),
            backward: None,
            forward: Some("required_added"),
        },
        Row {
            name: "integer widened to number",
            earlier: object(json!({"total": {"type": "integer"}}), &[], false),
            later: object(json!({"total": {"type": "number"}}), &[], false),
            backward: None,
            forward: Some("type_narrowed"),
        },
        Row {
            name: "string changed to integer",
            earlier: object(json!({"total": {"type": "string"}}), &[], false),
            later: object(json!({"total": {"type": "integer"}}), &[], false),
            backward: Some("type_narrowed"),
            forward: Some("type_narrowed"),
        },
        Row {
            name: "null allowed as well",
            earlier: json!({"type": "string"}),
            later: json!({"type": ["string", "null"]}),
            backward: None,
            forward: Some("type_narrowed"),
        },
        Row {
            name: "enum extended",
            earlier: json!({"enum": ["new", "paid"]}),
            later: json!({"enum": ["new", "paid", "shipped"]}),
            backward: None,
            forward: Some("value_refused"),
        },
        Row {
            name: "enum added to a free string",
            earlier: json!({"type": "string"}),
            later: json!({"type": "string", "enum": ["new", "paid"]}),
            backward: Some("values_restricted"),
            forward: None,
        },
        Row {
            name: "const replaced",
            earlier: json!({"const": "v1"}),
            later: json!({"const": "v2"}),
            backward: Some("value_refused"),
            forward: Some("value_refused"),
        },
        Row {
            name: "nested object gains a required property",
            earlier: object(json!({"address": object(json!({"city": note}), &["city"], true)}), &["address"], true),
            later: object(
                json!({"address": object(json!({"city": note, "zip": note}), &["city", "zip"], true)}),
                &["address"],
                true,
            ),
            backward: Some("required_added"),
            forward: Some("property_removed_from_closed_model"),
        },
        Row {
            name: "nested type change deep down",
            earlier: object(json!({"a": object(json!({"b": {"type": "integer"}}), &[], false)}), &[], false),
            later: object(json!({"a": object(json!({"b": {"type": "boolean"}}), &[], false)}), &[], false),
            backward: Some("type_narrowed"),
            forward: Some("type_narrowed"),
        },
        Row {
            name: "maximum length raised",
            earlier: json!({"type": "string", "maxLength": 10}),
            later: json!({"type": "string", "maxLength": 20}),
            backward: None,
            forward: Some("bound_tightened"),
        },
        Row {
            name: "minimum raised",
            earlier: json!({"type": "integer", "minimum": 0}),
            later: json!({"type": "integer", "minimum": 1}),
            backward: Some("bound_tightened"),
            forward: None,
        },
        Row {
            name: "array items widened",
            earlier: json!({"type": "array", "items": {"type": "integer"}}),
            later: json!({"type": "array", "items": {"type": ["integer", "string"]}}),
            backward: None,
            forward: Some("type_narrowed"),
        },
        Row {
            name: "pattern added",
            earlier: json!({"type": "string"}),
            later: json!({"type": "string", "pattern": "^[A-Z]+$"}),
            backward: Some("pattern_changed"),
            forward: None,
        },
        Row {
            name: "anyOf gains an alternative",
            earlier: json!({"anyOf": [{"type": "string"}, {"type": "integer"}]}),
            later: json!({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}),
            backward: None,
            forward: Some("any_of_narrowed"),
        },
        Row {
            name: "tagged oneOf gains a variant",
            earlier: json!({"oneOf": [
                object(json!({"kind": {"const": "card"}, "last4": note}), &["kind"], false),
            ]}),
            later: json!({"oneOf": [
                object(json!({"kind": {"const": "card"}, "last4": note}), &["kind"], false),
                object(json!({"kind": {"const": "bank"}, "iban": note}), &["kind"], false),
            ]}),
            backward: None,
            forward: Some("one_of_changed"),
        },
        Row {
            name: "local references on both sides",
            earlier: json!({"$defs": {"money": {"type": "integer"}}, "type": "object",
                "properties": {"total": {"$ref": "#/$defs/money"}}}),
            later: json!({"$defs": {"money": {"type": "number"}}, "type": "object",
                "properties": {"total": {"$ref": "#/$defs/money"}}}),
            backward: None,
            forward: Some("type_narrowed"),
        },
        Row {
            name: "additionalProperties given a schema",
            earlier: json!({"type": "object", "additionalProperties": {"type": "string"}}),
            later: json!({"type": "object", "additionalProperties": {"type": ["string", "integer"]}}),
            backward: None,
            forward: Some("type_narrowed"),
        },
        Row {
            name: "anything to nothing",
            earlier: json!(true),
            later: json!(false),
            backward: Some("everything_refused"),
            forward: None,
        },
    ]
}

fn first_kind(writer: &Value, reader: &Value) -> Option<&'static str> {
    accepts_all(writer, reader).first().map(|i| i.kind)
}

#[test]
fn the_table_of_schema_pairs() {
    let mut wrong = Vec::new();
    for row in table() {
        let backward = first_kind(&row.earlier, &row.later);
        let forward = first_kind(&row.later, &row.earlier);
        if backward != row.backward || forward != row.forward {
            wrong.push(format!(
                "{}: backward {backward:?} (want {:?}), forward {forward:?} (want {:?})",
                row.name, row.backward, row.forward
            ));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[test]
fn reasons_point_into_the_schema() {
    let earlier = object(json!({"a": object(json!({"b": {"type": "integer"}}), &[], false)}), &[], false);
    let later = object(json!({"a": object(json!({"b": {"type": "boolean"}}), &[], false)}), &[], false);
    let found = accepts_all(&earlier, &later);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].path, "/properties/a/properties/b/type");
    assert!(found[0].message.contains("integer"), "{}", found[0].message);
}

#[test]
fn every_difference_is_reported_not_only_the_first() {
    let earlier = object(json!({"id": {"type": "string"}, "n": {"type": "integer"}}), &["id"], true);
    let later = object(json!({"id": {"type": "integer"}, "n": {"type": "integer", "minimum": 5}}), &["id", "n"], true);
    let kinds: Vec<_> = accepts_all(&earlier, &later).into_iter().map(|i| i.kind).collect();
    assert!(kinds.contains(&"required_added"), "{kinds:?}");
    assert!(kinds.contains(&"type_narrowed"), "{kinds:?}");
    assert!(kinds.contains(&"bound_tightened"), "{kinds:?}");
}

#[test]
fn recursive_references_end() {
    let tree = json!({"$defs": {"node": {"type": "object", "properties": {
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"});
    assert!(accepts_all(&tree, &tree.clone()).is_empty());
    let mut stricter = tree.clone();
    stricter["$defs"]["node"]["required"] = json!(["children"]);
    assert_eq!(first_kind(&tree, &stricter), Some("required_added"));
    assert_eq!(first_kind(&stricter, &tree), None);
}

#[test]
fn unknown_keywords_must_not_change() {
    let earlier = json!({"type": "object", "x-custom": 1});
    assert!(accepts_all(&earlier, &json!({"type": "object", "x-custom": 1})).is_empty());
    assert_eq!(first_kind(&earlier, &json!({"type": "object", "x-custom": 2})), Some("keyword_changed"));
    // Annotations change nothing.
    assert!(accepts_all(&json!({"type": "string"}), &json!({"type": "string", "description": "new"})).is_empty());
}
