//! Matching a compiled policy against one message.
//!
//! First the values of every key the policy names are gathered from the message (its
//! attributes, or its JSON body), once; then the policy's groups are tested against them. Each
//! step is linear in what it reads: gathering walks the body once, descending only into keys
//! that lead to a policy key, and testing costs the number of conditions times the number of
//! values of their key. Nothing here panics on any message.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::IpAddr;

use super::compile::{Cidr, Condition, Exclusion, Group, Range, Scalar, scaled};
use crate::limits::FILTER_POLICY_NUMBER_MAGNITUDE_MAX;
use crate::message::{AttributeData, AttributeValue};

/// One value of a message key, typed as SNS types it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    Str(Cow<'a, str>),
    Num(f64),
    Bool(bool),
    Null,
}

/// What the message holds under one policy key.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Field<'a> {
    /// The key is there (an attribute that is not Binary; a body path with at least one value).
    pub present: bool,
    /// Its values: one for a String or Number attribute, each element of a String.Array, each
    /// leaf reached by the path in the body (arrays contribute each element).
    pub values: Vec<Value<'a>>,
}

pub(crate) fn group_matches(group: &Group, fields: &[Field<'_>]) -> bool {
    let leaves = group.leaves.iter().all(|leaf| {
        let Some(field) = fields.get(leaf.path) else { return false };
        leaf.conditions.iter().any(|condition| condition_matches(condition, field))
    });
    leaves && group.ors.iter().all(|alternatives| alternatives.iter().any(|g| group_matches(g, fields)))
}

fn condition_matches(condition: &Condition, field: &Field<'_>) -> bool {
    match condition {
        Condition::Exists(wanted) => field.present == *wanted,
        _ => field.values.iter().any(|value| accepts(condition, value)),
    }
}

/// Whether one present value satisfies a condition other than `exists`.
fn accepts(condition: &Condition, value: &Value<'_>) -> bool {
    let text = match value {
        Value::Str(s) => Some(s.as_ref()),
        _ => None,
    };
    match condition {
        Condition::Equals(scalar) => scalar_equals(scalar, value),
        Condition::Prefix(prefix) => text.is_some_and(|t| t.starts_with(prefix.as_str())),
        Condition::Suffix(suffix) => text.is_some_and(|t| t.ends_with(suffix.as_str())),
        Condition::EqualsIgnoreCase(lower) => text.is_some_and(|t| equals_lowercase(t, lower)),
        Condition::AnythingBut(exclusion) => !excludes(exclusion, value),
        Condition::Numeric(range) => match value {
            Value::Num(n) => in_range(range, *n),
            _ => false,
        },
        Condition::Cidr(cidr) => text.is_some_and(|t| in_network(cidr, t)),
        Condition::Exists(_) => false,
    }
}

fn excludes(exclusion: &Exclusion, value: &Value<'_>) -> bool {
    let text = match value {
        Value::Str(s) => Some(s.as_ref()),
        _ => None,
    };
    match exclusion {
        Exclusion::Values(values) => values.iter().any(|scalar| scalar_equals(scalar, value)),
        Exclusion::Prefix(prefix) => text.is_some_and(|t| t.starts_with(prefix.as_str())),
        Exclusion::Suffix(suffix) => text.is_some_and(|t| t.ends_with(suffix.as_str())),
        Exclusion::EqualsIgnoreCase(lowers) => text.is_some_and(|t| lowers.iter().any(|l| equals_lowercase(t, l))),
    }
}

/// Equality by type: a string never equals a number, `"true"` never equals `true`. Numbers
/// are equal when they agree to five decimal places, as SNS compares them.
fn scalar_equals(scalar: &Scalar, value: &Value<'_>) -> bool {
    match (scalar, value) {
        (Scalar::String(a), Value::Str(b)) => a == b,
        (Scalar::Number(a), Value::Num(b)) => numbers_equal(*a, *b),
        (Scalar::Bool(a), Value::Bool(b)) => a == b,
        (Scalar::Null, Value::Null) => true,
        _ => false,
    }
}

fn numbers_equal(a: f64, b: f64) -> bool {
    let comparable = |n: f64| n.abs() <= FILTER_POLICY_NUMBER_MAGNITUDE_MAX;
    if comparable(a) && comparable(b) { scaled(a) == scaled(b) } else { a == b }
}

/// A message number on the policy's integer scale. Numbers beyond SNS's magnitude keep their
/// order against every policy bound (which is within it); NaN compares with nothing.
fn comparable(n: f64) -> Option<i64> {
    if n.is_nan() {
        None
    } else if n.abs() <= FILTER_POLICY_NUMBER_MAGNITUDE_MAX {
        Some(scaled(n))
    } else if n > 0.0 {
        Some(i64::MAX)
    } else {
        Some(i64::MIN)
    }
}

fn in_range(range: &Range, n: f64) -> bool {
    let Some(k) = comparable(n) else { return false };
    let above = range.lower.is_none_or(|b| if b.inclusive { k >= b.scaled } else { k > b.scaled });
    let below = range.upper.is_none_or(|b| if b.inclusive { k <= b.scaled } else { k < b.scaled });
    above && below
}

fn in_network(cidr: &Cidr, text: &str) -> bool {
    let Ok(address) = text.parse::<IpAddr>() else { return false };
    address.is_ipv4() == cidr.network.is_ipv4() && Cidr::masked(address, cidr.prefix_len) == cidr.network
}

/// `text` lowercased equals `lower` (already lowercased), without allocating.
fn equals_lowercase(text: &str, lower: &str) -> bool {
    text.chars().flat_map(char::to_lowercase).eq(lower.chars())
}

/// The fields of `paths` among message attributes. Binary attributes are ignored, as SNS
/// ignores them; a String.Array's StringValue is a JSON array whose elements are its values.
pub(crate) fn attribute_fields<'a>(
    paths: &[String],
    attributes: &'a BTreeMap<String, AttributeValue>,
) -> Vec<Field<'a>> {
    paths
        .iter()
        .map(|path| {
            let Some(attribute) = attributes.get(path) else { return Field::default() };
            let AttributeData::Text(text) = &attribute.value else { return Field::default() };
            let values = if attribute.data_type == "String.Array" {
                string_array(text)
            } else {
                match attribute.base_type() {
                    "String" => vec![Value::Str(Cow::Borrowed(text))],
                    "Number" => match text.trim().parse::<f64>() {
                        Ok(n) => vec![Value::Num(n)],
                        Err(_) => vec![Value::Str(Cow::Borrowed(text))],
                    },
                    _ => return Field::default(),
                }
            };
            Field { present: true, values }
        })
        .collect()
}

/// The values of a String.Array attribute: the scalar elements of its JSON array, or the one
/// JSON scalar it holds instead (SNS accepts `100` and filters on it). Text that is no JSON at
/// all gives none, so only `exists` can match it (Sluice's choice; SNS's is not recorded).
fn string_array(text: &str) -> Vec<Value<'static>> {
    let scalar = |item: serde_json::Value| match item {
        serde_json::Value::String(s) => Some(Value::Str(Cow::Owned(s))),
        serde_json::Value::Number(n) => n.as_f64().map(Value::Num),
        serde_json::Value::Bool(b) => Some(Value::Bool(b)),
        serde_json::Value::Null => Some(Value::Null),
        _ => None,
    };
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Array(items)) => items.into_iter().filter_map(scalar).collect(),
        Ok(item) => scalar(item).into_iter().collect(),
        Err(_) => Vec::new(),
    }
}

/// The fields of `paths` in a JSON body. A path `a.b` is reached by nested keys (`{"a":{"b":
/// ..}}`), by a key with a dot (`{"a.b": ..}`), or any mix, as SNS does; arrays are looked
/// through, so every element (of nested arrays too) is a value of the path.
pub(crate) fn body_fields<'a>(paths: &[String], body: &'a serde_json::Value) -> Vec<Field<'a>> {
    let mut fields = vec![Field::default(); paths.len()];
    let longest = paths.iter().map(String::len).max().unwrap_or(0);
    let mut walk = BodyWalk { paths, longest, fields: &mut fields, path: String::new() };
    walk.visit(body);
    for field in &mut fields {
        field.present = !field.values.is_empty();
    }
    fields
}

struct BodyWalk<'p, 'f, 'a> {
    paths: &'p [String],
    /// Longer paths lead to no policy key, so the walk never builds one.
    longest: usize,
    fields: &'f mut Vec<Field<'a>>,
    /// The path to the value being visited.
    path: String,
}

impl<'a> BodyWalk<'_, '_, 'a> {
    fn visit(&mut self, value: &'a serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, child) in map {
                    let separator = usize::from(!self.path.is_empty());
                    if self.path.len() + separator + key.len() > self.longest {
                        continue;
                    }
                    let len = self.path.len();
                    if separator == 1 {
                        self.path.push('.');
                    }
                    self.path.push_str(key);
                    if self.leads_to_a_key() {
                        self.visit(child);
                    }
                    self.path.truncate(len);
                }
            }
            serde_json::Value::Array(items) => {
                for item in items {
                    self.visit(item);
                }
            }
            leaf => {
                let Some(index) = self.paths.iter().position(|p| *p == self.path) else { return };
                let value = match leaf {
                    serde_json::Value::String(s) => Value::Str(Cow::Borrowed(s)),
                    serde_json::Value::Number(n) => match n.as_f64() {
                        Some(f) => Value::Num(f),
                        None => return,
                    },
                    serde_json::Value::Bool(b) => Value::Bool(*b),
                    _ => Value::Null,
                };
                if let Some(field) = self.fields.get_mut(index) {
                    field.values.push(value);
                }
            }
        }
    }

    /// Whether the current path is a policy key or the start of one (up to a dot).
    fn leads_to_a_key(&self) -> bool {
        let here = self.path.as_str();
        self.paths.iter().any(|p| p == here || (p.starts_with(here) && p.as_bytes().get(here.len()) == Some(&b'.')))
    }
}

/// Tests for the lowest layer: typed equality and numeric scaling.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::compile::Bound;

    #[test]
    fn numbers_agree_to_five_places() {
        assert!(numbers_equal(301.5, 301.50000001));
        assert!(!numbers_equal(301.5, 301.50001));
        assert!(numbers_equal(123_456_789_012.0, 123_456_789_012.0));
        assert!(!numbers_equal(123_456_789_012.0, 123_456_789_013.0));
    }

    #[test]
    fn numbers_beyond_the_magnitude_keep_their_order() {
        let above_zero = Range { lower: Some(Bound { scaled: 0, inclusive: false }), upper: None };
        assert!(in_range(&above_zero, 5e12));
        assert!(in_range(&above_zero, f64::INFINITY));
        assert!(!in_range(&above_zero, -5e12));
        assert!(!in_range(&above_zero, f64::NAN));
    }

    #[test]
    fn types_never_mix() {
        assert!(!scalar_equals(&Scalar::String("1".into()), &Value::Num(1.0)));
        assert!(!scalar_equals(&Scalar::Number(1.0), &Value::Str("1".into())));
        assert!(!scalar_equals(&Scalar::Bool(true), &Value::Str("true".into())));
        assert!(!scalar_equals(&Scalar::Null, &Value::Str("null".into())));
        assert!(scalar_equals(&Scalar::Null, &Value::Null));
    }
}
