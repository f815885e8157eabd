//! Compiling a policy's JSON into the tree that matching walks, checking SNS's grammar and
//! limits on the way.
//!
//! The grammar follows AWS's event-ruler compiler, whose error messages SNS returns: objects
//! nest keys (`{"a": {"b": [..]}}` is the key `a.b`), arrays hold the values a key may match
//! (any one of them), and `"$or": [{..}, {..}]` makes alternatives. Errors are reported for the
//! first mistake in document order, as SNS reads the policy; the limits (nesting in the
//! attributes scope, keys, combinations) are checked once the whole policy has compiled.

use std::net::IpAddr;

use super::FilterScope;
use super::error::FilterPolicyError;
use super::json::{Json, Number};
use crate::limits::{
    FILTER_POLICY_COMBINATIONS_MAX, FILTER_POLICY_KEYS_MAX, FILTER_POLICY_NUMBER_DECIMALS_MAX,
    FILTER_POLICY_NUMBER_MAGNITUDE_MAX,
};

/// Numbers are compared as integers of this many units per 1: to
/// [`FILTER_POLICY_NUMBER_DECIMALS_MAX`] decimal places, as SNS compares them.
pub(crate) const NUMBER_SCALE: f64 = 10u32.pow(FILTER_POLICY_NUMBER_DECIMALS_MAX) as f64;

/// Names that make an object a match expression, so an `$or` array containing an object with
/// one of them as a key is not an OR relationship (SNS's rule) but an ordinary key named `$or`.
const RESERVED_KEYS: [&str; 8] =
    ["anything-but", "cidr", "equals-ignore-case", "exists", "numeric", "prefix", "suffix", "wildcard"];

/// Keys ANDed together, and sets of alternatives (`$or`), each of which must have one
/// alternative that matches.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Group {
    pub leaves: Vec<Leaf>,
    pub ors: Vec<Vec<Group>>,
}

/// One key and the conditions on it, any one of which may match.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Leaf {
    /// Index into the policy's list of distinct key paths.
    pub path: usize,
    /// Object nesting level of the key (1 at the top), which AWS multiplies into complexity.
    pub depth: u64,
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar {
    String(String),
    Number(f64),
    Bool(bool),
    Null,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Condition {
    Equals(Scalar),
    Prefix(String),
    Suffix(String),
    /// The pattern, already lowercased.
    EqualsIgnoreCase(String),
    AnythingBut(Exclusion),
    Numeric(Range),
    Exists(bool),
    Cidr(Cidr),
}

/// What `anything-but` excludes; every other present value matches.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Exclusion {
    /// All strings or all numbers.
    Values(Vec<Scalar>),
    Prefix(String),
    Suffix(String),
    /// Lowercased strings.
    EqualsIgnoreCase(Vec<String>),
}

/// A numeric interval; bounds are scaled by [`NUMBER_SCALE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Range {
    pub lower: Option<Bound>,
    pub upper: Option<Bound>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bound {
    pub scaled: i64,
    pub inclusive: bool,
}

/// An IPv4 or IPv6 network: the address with host bits cleared, and the prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cidr {
    pub network: IpAddr,
    pub prefix_len: u8,
}

/// The compiled policy: its groups, and its distinct key paths (`a.b` for nested keys).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Compiled {
    pub root: Group,
    pub paths: Vec<String>,
    pub combinations: u64,
}

fn invalid(reason: impl Into<String>) -> FilterPolicyError {
    FilterPolicyError::invalid(reason)
}

pub(crate) fn compile(json: &Json, scope: FilterScope) -> Result<Compiled, FilterPolicyError> {
    let Json::Object(entries) = json else { return Err(invalid("Filter is not an object")) };
    let mut compiler = Compiler { paths: Vec::new(), nested: false };
    let mut root = Group::default();
    // `{}` is no filter at all: it matches every message. (Nested empty objects are refused.)
    if !entries.is_empty() {
        compiler.object(entries, "", 1, &mut root)?;
    }
    if compiler.nested && scope == FilterScope::MessageAttributes {
        return Err(FilterPolicyError::NestedInAttributesScope);
    }
    if compiler.paths.len() > FILTER_POLICY_KEYS_MAX {
        return Err(FilterPolicyError::TooManyKeys { keys: compiler.paths.len() });
    }
    let combinations = if entries.is_empty() { 0 } else { combinations(&root) };
    if combinations > FILTER_POLICY_COMBINATIONS_MAX {
        return Err(FilterPolicyError::TooComplex { combinations });
    }
    Ok(Compiled { root, paths: compiler.paths, combinations })
}

/// AWS's complexity: the product over keys of (values × nesting depth), where a set of `$or`
/// alternatives contributes the sum of its alternatives' products. Saturates instead of
/// overflowing, so a huge policy is simply "too complex".
fn combinations(group: &Group) -> u64 {
    let leaves = group
        .leaves
        .iter()
        .map(|leaf| (leaf.conditions.len() as u64).saturating_mul(leaf.depth))
        .fold(1u64, u64::saturating_mul);
    group.ors.iter().fold(leaves, |product, alternatives| {
        let sum = alternatives.iter().map(combinations).fold(0u64, u64::saturating_add);
        product.saturating_mul(sum)
    })
}

struct Compiler {
    paths: Vec<String>,
    /// Whether an object was nested under a key (not allowed in the attributes scope).
    nested: bool,
}

impl Compiler {
    fn path_id(&mut self, path: String) -> usize {
        match self.paths.iter().position(|p| *p == path) {
            Some(id) => id,
            None => {
                self.paths.push(path);
                self.paths.len() - 1
            }
        }
    }

    /// Adds the keys of one object (found under `prefix`, at nesting `depth`) to `group`.
    fn object(
        &mut self,
        entries: &[(String, Json)],
        prefix: &str,
        depth: u64,
        group: &mut Group,
    ) -> Result<(), FilterPolicyError> {
        if entries.is_empty() {
            return Err(invalid("Empty objects are not allowed"));
        }
        for (key, value) in entries {
            if key == "$or"
                && let Some(branches) = or_relationship(value)
            {
                let mut alternatives = Vec::with_capacity(branches.len());
                for branch in branches {
                    let mut alternative = Group::default();
                    self.object(branch, prefix, depth, &mut alternative)?;
                    alternatives.push(alternative);
                }
                group.ors.push(alternatives);
                continue;
            }
            let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
            match value {
                Json::Object(inner) => {
                    self.nested = true;
                    self.object(inner, &path, depth + 1, group)?;
                }
                Json::Array(items) => {
                    let conditions = items.iter().map(condition).collect::<Result<Vec<_>, _>>()?;
                    if conditions.is_empty() {
                        return Err(invalid("Empty arrays are not allowed"));
                    }
                    let path = self.path_id(path);
                    // A key given twice in one object: the later one wins, as in AWS's compiler.
                    group.leaves.retain(|leaf| leaf.path != path);
                    group.leaves.push(Leaf { path, depth, conditions });
                }
                _ => return Err(invalid(format!("\"{key}\" must be an object or an array"))),
            }
        }
        Ok(())
    }
}

/// The alternatives of `"$or": [...]`, if SNS would read it as an OR relationship: an array of
/// at least two objects, none of which uses a match-expression name as a key. Otherwise `$or`
/// is an ordinary key.
fn or_relationship(value: &Json) -> Option<Vec<&[(String, Json)]>> {
    let Json::Array(items) = value else { return None };
    if items.len() < 2 {
        return None;
    }
    items
        .iter()
        .map(|item| match item {
            Json::Object(entries) if !entries.iter().any(|(k, _)| RESERVED_KEYS.contains(&k.as_str())) => {
                Some(entries.as_slice())
            }
            _ => None,
        })
        .collect()
}

/// One element of a key's value array.
fn condition(item: &Json) -> Result<Condition, FilterPolicyError> {
    match item {
        Json::String(s) => Ok(Condition::Equals(Scalar::String(s.clone()))),
        Json::Number(n) => Ok(Condition::Equals(Scalar::Number(checked_number(n)?))),
        Json::Bool(b) => Ok(Condition::Equals(Scalar::Bool(*b))),
        Json::Null => Ok(Condition::Equals(Scalar::Null)),
        Json::Array(_) => Err(invalid("Match value must be String, number, true, false, or null")),
        Json::Object(entries) => match_expression(entries),
    }
}

fn match_expression(entries: &[(String, Json)]) -> Result<Condition, FilterPolicyError> {
    let Some((name, value)) = entries.first() else { return Err(invalid("Match expression name not found")) };
    let condition = match name.as_str() {
        "prefix" => Condition::Prefix(string_pattern(name, value)?),
        "suffix" => Condition::Suffix(string_pattern(name, value)?),
        "equals-ignore-case" => Condition::EqualsIgnoreCase(lowercase(&string_pattern(name, value)?)),
        "anything-but" => Condition::AnythingBut(anything_but(value)?),
        "numeric" => Condition::Numeric(numeric(value)?),
        "exists" => match value {
            Json::Bool(b) => Condition::Exists(*b),
            _ => return Err(invalid("exists match pattern must be either true or false.")),
        },
        // AWS names the prefix operator when a cidr pattern is not a string.
        "cidr" => Condition::Cidr(cidr(&string_pattern("prefix", value)?)?),
        _ => return Err(invalid(format!("Unrecognized match type {name}"))),
    };
    if entries.len() > 1 {
        return Err(invalid("Only one key allowed in match expression"));
    }
    Ok(condition)
}

fn string_pattern(operator: &str, value: &Json) -> Result<String, FilterPolicyError> {
    match value {
        Json::String(s) => Ok(s.clone()),
        _ => Err(invalid(format!("{operator} match pattern must be a string"))),
    }
}

/// Lowercase by characters, the form `equals-ignore-case` compares in.
pub(crate) fn lowercase(s: &str) -> String {
    s.chars().flat_map(char::to_lowercase).collect()
}

fn anything_but(value: &Json) -> Result<Exclusion, FilterPolicyError> {
    match value {
        Json::Object(inner) => {
            let Some((operator, pattern)) = inner.first() else {
                return Err(invalid("Anything-But expression name not found"));
            };
            let exclusion = match operator.as_str() {
                "prefix" | "suffix" => {
                    let text = string_pattern(operator, pattern)?;
                    if text.is_empty() {
                        return Err(invalid("Null prefix/suffix not allowed"));
                    }
                    if operator == "prefix" { Exclusion::Prefix(text) } else { Exclusion::Suffix(text) }
                }
                "equals-ignore-case" => {
                    let unsupported = || {
                        invalid(
                            "Inside anything-but/equals-ignore-case list, number|start|null|boolean is not supported.",
                        )
                    };
                    let texts = match pattern {
                        Json::String(s) => vec![lowercase(s)],
                        Json::Array(items) => items
                            .iter()
                            .map(|item| match item {
                                Json::String(s) => Ok(lowercase(s)),
                                _ => Err(unsupported()),
                            })
                            .collect::<Result<_, _>>()?,
                        _ => return Err(unsupported()),
                    };
                    Exclusion::EqualsIgnoreCase(texts)
                }
                _ => return Err(invalid(format!("Unsupported anything-but pattern: {operator}"))),
            };
            if inner.len() > 1 {
                return Err(invalid("Only one key allowed in match expression"));
            }
            Ok(exclusion)
        }
        Json::Array(items) => {
            let mut values = Vec::with_capacity(items.len());
            for item in items {
                values.push(match item {
                    Json::String(s) => Scalar::String(s.clone()),
                    Json::Number(n) => Scalar::Number(checked_number(n)?),
                    _ => return Err(invalid("Inside anything but list, start|null|boolean is not supported.")),
                });
            }
            let strings = values.iter().filter(|v| matches!(v, Scalar::String(_))).count();
            if values.is_empty() || (strings != 0 && strings != values.len()) {
                return Err(invalid(
                    "Inside anything but list, either all values are number or string, mixed type is not supported",
                ));
            }
            Ok(Exclusion::Values(values))
        }
        Json::String(s) => Ok(Exclusion::Values(vec![Scalar::String(s.clone())])),
        Json::Number(n) => Ok(Exclusion::Values(vec![Scalar::Number(checked_number(n)?)])),
        _ => Err(invalid("Value of anything-but must be an array or single string/number value.")),
    }
}

/// A number a policy may hold, to match exactly or to compare with: within SNS's magnitude
/// (SNS refuses `{"store": [1000000001]}` too). Further decimal places than SNS's five are not
/// refused but rounded away, as AWS's engine rounds them.
fn checked_number(n: &Number) -> Result<f64, FilterPolicyError> {
    if n.value.abs() > FILTER_POLICY_NUMBER_MAGNITUDE_MAX {
        return Err(invalid("Value must be between -1.0E9 and 1.0E9, inclusive"));
    }
    Ok(n.value)
}

/// A checked number in the integer form comparisons use.
pub(crate) fn scaled(value: f64) -> i64 {
    (value * NUMBER_SCALE).round() as i64
}

/// `{"numeric": ["=", 5]}`, `[">", 0]`, `["<=", 9]`, `[">", 0, "<=", 100]`: the same walk and
/// the same messages as AWS, token by token.
fn numeric(value: &Json) -> Result<Range, FilterPolicyError> {
    let Json::Array(items) = value else { return Err(invalid("Value of numeric must be an array.")) };
    let mut tokens = items.iter();
    let operator = match tokens.next() {
        Some(Json::String(op)) => op.as_str(),
        Some(other) => return Err(invalid(format!("Invalid member in numeric match: {}", other.token_text()))),
        None => return Err(invalid("Invalid member in numeric match: ]")),
    };
    let mut operand = |name: &str| match tokens.next() {
        Some(Json::Number(n)) => checked_number(n).map(scaled),
        _ => Err(invalid(format!("Value of {name} must be numeric"))),
    };
    let too_many = || invalid("Too many elements in numeric expression");
    match operator {
        "=" => {
            let v = operand("equals")?;
            if tokens.next().is_some() {
                return Err(too_many());
            }
            let bound = Some(Bound { scaled: v, inclusive: true });
            Ok(Range { lower: bound, upper: bound })
        }
        ">" | ">=" => {
            let bottom = Bound { scaled: operand(operator)?, inclusive: operator == ">=" };
            let Some(next) = tokens.next() else { return Ok(Range { lower: Some(bottom), upper: None }) };
            let Json::String(top_operator) = next else {
                return Err(invalid(format!("Bad value in numeric range: {}", next.token_text())));
            };
            if top_operator != "<" && top_operator != "<=" {
                return Err(invalid(format!("Bad numeric range operator: {top_operator}")));
            }
            let top = match tokens.next() {
                Some(Json::Number(n)) => scaled(checked_number(n)?),
                _ => return Err(invalid(format!("Value of {top_operator} must be numeric"))),
            };
            if tokens.next().is_some() {
                return Err(invalid("Too many terms in numeric range expression"));
            }
            if bottom.scaled >= top {
                return Err(invalid("Bottom must be less than top"));
            }
            Ok(Range { lower: Some(bottom), upper: Some(Bound { scaled: top, inclusive: top_operator == "<=" }) })
        }
        "<" | "<=" => {
            let top = Bound { scaled: operand(operator)?, inclusive: operator == "<=" };
            if tokens.next().is_some() {
                return Err(too_many());
            }
            Ok(Range { lower: None, upper: Some(top) })
        }
        _ => Err(invalid(format!("Unrecognized numeric range operator: {operator}"))),
    }
}

/// `10.0.0.0/24`, `2001:db8::/32`. Host bits in the address are ignored.
fn cidr(text: &str) -> Result<Cidr, FilterPolicyError> {
    let Some((address, mask)) = text.split_once('/').filter(|(_, mask)| !mask.contains('/')) else {
        return Err(invalid("Malformed CIDR, one '/' required"));
    };
    let mask: i32 = mask.parse().map_err(|_| invalid("Malformed CIDR, mask bits must be an integer"))?;
    if mask < 0 {
        return Err(invalid("Malformed CIDR, mask bits must not be negative"));
    }
    let address: IpAddr = address.parse().map_err(|_| invalid(format!("Nonstandard IP address: {address}")))?;
    let bits = if address.is_ipv4() { 32 } else { 128 };
    if mask > bits {
        let family = if address.is_ipv4() { "IPv4" } else { "IPv6" };
        return Err(invalid(format!("{family} mask bits must be at most {bits}")));
    }
    let prefix_len = mask as u8;
    Ok(Cidr { network: Cidr::masked(address, prefix_len), prefix_len })
}

impl Cidr {
    /// `address` with every bit past `prefix_len` cleared.
    pub(crate) fn masked(address: IpAddr, prefix_len: u8) -> IpAddr {
        match address {
            IpAddr::V4(v4) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(prefix_len)).unwrap_or(0);
                IpAddr::V4((u32::from(v4) & mask).into())
            }
            IpAddr::V6(v6) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(prefix_len)).unwrap_or(0);
                IpAddr::V6((u128::from(v6) & mask).into())
            }
        }
    }
}
