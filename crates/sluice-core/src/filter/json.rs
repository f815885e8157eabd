//! A JSON tree that keeps object keys in document order, for compiling filter policies.
//!
//! `serde_json::Value` sorts object keys (the workspace does not enable `preserve_order`, and
//! turning it on would change every crate's output). SNS reports the *first* mistake in a
//! policy as it reads it, so the compiler needs the keys as written, duplicates included.
//! Parsing still goes through `serde_json`'s deserializer, so its recursion limit (128 levels)
//! keeps a hostile policy from overflowing the stack.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// One JSON value, objects as `(key, value)` pairs in document order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

/// A JSON number: its value, and its integer value if it was written as an integer (which
/// decides how it is shown back in error messages).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Number {
    pub value: f64,
    integer: Option<i128>,
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.integer {
            Some(i) => write!(f, "{i}"),
            None => write!(f, "{}", self.value),
        }
    }
}

impl Json {
    /// The token as SNS names it in error messages: the text of a scalar, `[` or `{` for the
    /// start of a container.
    pub fn token_text(&self) -> String {
        match self {
            Json::Null => "null".into(),
            Json::Bool(b) => b.to_string(),
            Json::Number(n) => n.to_string(),
            Json::String(s) => s.clone(),
            Json::Array(_) => "[".into(),
            Json::Object(_) => "{".into(),
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(Number { value: v as f64, integer: Some(i128::from(v)) }))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(Number { value: v as f64, integer: Some(i128::from(v)) }))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        Ok(Json::Number(Number { value: v, integer: None }))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut entries = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, Json>()? {
            entries.push((key, value));
        }
        Ok(Json::Object(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_document_order_and_duplicates() {
        let json: Json = serde_json::from_str(r#"{"b":1,"a":[true,null,"x"],"b":2.5}"#).unwrap();
        let Json::Object(entries) = json else { panic!("an object") };
        let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a", "b"]);
        assert_eq!(entries[1].1, Json::Array(vec![Json::Bool(true), Json::Null, Json::String("x".into())]));
    }

    #[test]
    fn numbers_show_as_written() {
        let parse = |s: &str| match serde_json::from_str::<Json>(s).unwrap() {
            Json::Number(n) => n,
            other => panic!("{other:?}"),
        };
        assert_eq!(parse("300").to_string(), "300");
        assert_eq!(parse("-7").to_string(), "-7");
        assert_eq!(parse("1.5").to_string(), "1.5");
        assert_eq!(parse("3.018e2").to_string(), "301.8");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = "[".repeat(100_000);
        assert!(serde_json::from_str::<Json>(&deep).is_err());
    }
}
