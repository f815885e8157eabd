//! SNS subscription filter policies: which published messages a subscription receives.
//!
//! A policy is JSON. Each key names a message attribute (scope `MessageAttributes`, the
//! default) or a property of the JSON body (scope `MessageBody`, where objects nest keys), and
//! maps to an array of conditions, any one of which may match; every key must match (AND), and
//! `"$or": [{..}, {..}]` gives alternatives across keys. Conditions:
//!
//! | Condition | Matches a value that |
//! |---|---|
//! | `"text"`, `5`, `true`, `null` | equals it, by type (numbers to five decimal places) |
//! | `{"prefix": "p"}`, `{"suffix": "s"}` | is a string starting / ending so |
//! | `{"equals-ignore-case": "t"}` | is a string equal to it ignoring case |
//! | `{"anything-but": v}` with `v` a string, number, array of either, `{"prefix": ..}`, `{"suffix": ..}` or `{"equals-ignore-case": ..}` | is present and not excluded |
//! | `{"numeric": ["=", 5]}`, `[">", 0]`, `[">=", 0, "<", 10]`, … | is a number in the interval |
//! | `{"cidr": "10.0.0.0/24"}` | is a string holding an IPv4/IPv6 address in the network |
//! | `{"exists": true}` / `{"exists": false}` | the key is present / absent |
//!
//! A key with several values (a String.Array attribute, an array in the body) matches when any
//! of its values does. An absent key matches only `{"exists": false}`.
//!
//! ```
//! use std::collections::BTreeMap;
//! use sluice_core::filter::{FilterPolicy, FilterScope, MessageView};
//! use sluice_core::message::{AttributeData, AttributeValue};
//!
//! let policy = FilterPolicy::parse(
//!     r#"{"store": ["example_corp"], "price_usd": [{"numeric": [">=", 100]}]}"#,
//!     FilterScope::MessageAttributes,
//! )?;
//! let mut attributes = BTreeMap::new();
//! let text = |t: &str, v: &str| AttributeValue { data_type: t.into(), value: AttributeData::Text(v.into()) };
//! attributes.insert("store".to_string(), text("String", "example_corp"));
//! attributes.insert("price_usd".to_string(), text("Number", "210.75"));
//! assert!(policy.matches(&MessageView::new(&attributes, "any body")));
//! # Ok::<(), sluice_core::filter::FilterPolicyError>(())
//! ```
//!
//! Where Sluice departs from SNS, or SNS's behaviour is not recorded, Sluice chooses to accept
//! what AWS documents and to refuse what AWS's engine refuses:
//! - Keys are counted as distinct leaf paths (`{"a": {"b": [..], "c": [..]}}` has two), across
//!   `$or` alternatives too (a key named in several alternatives counts once).
//! - `{}` is no filter: it matches every message.
//! - In the body scope, keys of different array elements are not correlated: `{"r": {"a":
//!   ["x"], "b": ["y"]}}` matches `{"r": [{"a": "x"}, {"b": "y"}]}`.
//! - `cidr` accepts `/32` and `/128`, and ignores host bits (`10.0.0.7/24` is `10.0.0.0/24`).
//! - Numbers compare to five decimal places (SNS's documented accuracy): further places are
//!   rounded, not refused. Every number in a policy (exact, `numeric`, `anything-but`) must lie
//!   within ±1e9, SNS's documented range, which SNS enforces; a message's numbers beyond it
//!   compare exactly.
//! - A `String.Array` attribute whose value is not a JSON array (SNS takes `100`) has that one
//!   JSON value as its value; text that is no JSON at all has none, so only `exists` matches it.

mod compile;
mod error;
mod eval;
mod json;

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use error::{FilterPolicyError, SnsCall};

use crate::limits::FILTER_POLICY_BYTES_MAX;
use crate::message::AttributeValue;

/// What a policy's keys name: message attributes, or properties of the JSON body.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FilterScope {
    #[default]
    MessageAttributes,
    MessageBody,
}

impl FilterScope {
    /// The name SNS uses for the `FilterPolicyScope` attribute.
    pub const fn as_str(self) -> &'static str {
        match self {
            FilterScope::MessageAttributes => "MessageAttributes",
            FilterScope::MessageBody => "MessageBody",
        }
    }
}

impl fmt::Display for FilterScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `FilterPolicyScope` value that is neither scope. `Display` gives the reason SNS puts
/// after `Invalid parameter: FilterPolicyScope: ` (recorded from AWS).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid value [{0}]. Please use either MessageBody or MessageAttributes")]
pub struct FilterScopeError(pub String);

impl FromStr for FilterScope {
    type Err = FilterScopeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "MessageAttributes" => Ok(FilterScope::MessageAttributes),
            "MessageBody" => Ok(FilterScope::MessageBody),
            other => Err(FilterScopeError(other.to_string())),
        }
    }
}

/// A validated filter policy, ready to test messages against.
#[derive(Debug, Clone, PartialEq)]
pub struct FilterPolicy {
    scope: FilterScope,
    compiled: compile::Compiled,
}

impl FilterPolicy {
    /// Parses and validates `text` as SNS does when a subscription's `FilterPolicy` is set.
    ///
    /// The empty string is not a policy here (it is a JSON error); at the API, setting
    /// `FilterPolicy` to `""` removes the policy, which the caller handles.
    pub fn parse(text: &str, scope: FilterScope) -> Result<FilterPolicy, FilterPolicyError> {
        if text.len() > FILTER_POLICY_BYTES_MAX {
            return Err(FilterPolicyError::TooLarge { bytes: text.len() });
        }
        let json: json::Json =
            serde_json::from_str(text).map_err(|e| FilterPolicyError::Json { detail: e.to_string() })?;
        let compiled = compile::compile(&json, scope)?;
        Ok(FilterPolicy { scope, compiled })
    }

    pub fn scope(&self) -> FilterScope {
        self.scope
    }

    /// The distinct keys the policy names (nested keys as `a.b`), in order of first use.
    pub fn keys(&self) -> &[String] {
        &self.compiled.paths
    }

    /// The policy's complexity as SNS computes it (at most
    /// [`crate::limits::FILTER_POLICY_COMBINATIONS_MAX`]).
    pub fn combinations(&self) -> u64 {
        self.compiled.combinations
    }

    /// Whether the subscription should receive `message`. Never panics; the time taken is
    /// linear in the policy's size times the message's.
    pub fn matches(&self, message: &MessageView<'_>) -> bool {
        let paths = &self.compiled.paths;
        if paths.is_empty() {
            return true;
        }
        let fields = match self.scope {
            FilterScope::MessageAttributes => eval::attribute_fields(paths, message.attributes),
            FilterScope::MessageBody => match message.body_json() {
                Some(body) => eval::body_fields(paths, body),
                // The body scope needs a JSON object; anything else matches no policy.
                None => return false,
            },
        };
        eval::group_matches(&self.compiled.root, &fields)
    }
}

/// A published message as filter policies see it: its attributes (as the core stores them)
/// and its body. Build one per message and test every subscription against it: a JSON body is
/// parsed at most once, by the first body-scoped policy that needs it.
pub struct MessageView<'a> {
    attributes: &'a BTreeMap<String, AttributeValue>,
    body: &'a str,
    body_json: OnceCell<Option<serde_json::Value>>,
}

impl<'a> MessageView<'a> {
    pub fn new(attributes: &'a BTreeMap<String, AttributeValue>, body: &'a str) -> Self {
        MessageView { attributes, body, body_json: OnceCell::new() }
    }

    pub fn attributes(&self) -> &'a BTreeMap<String, AttributeValue> {
        self.attributes
    }

    pub fn body(&self) -> &'a str {
        self.body
    }

    /// The body, if it is a JSON object.
    fn body_json(&self) -> Option<&serde_json::Value> {
        self.body_json
            .get_or_init(|| serde_json::from_str::<serde_json::Value>(self.body).ok().filter(|v| v.is_object()))
            .as_ref()
    }
}

impl fmt::Debug for MessageView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageView").field("attributes", &self.attributes).field("body", &self.body).finish()
    }
}

#[cfg(test)]
mod tests;
