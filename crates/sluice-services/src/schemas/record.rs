//! Schemas as stored: a record of kind `schema_type` per message type (its compatibility mode
//! and latest version) and one of kind `schema_version` per version, keyed
//! `<type>/<version as ten digits>` so that a type's versions list in order. A version never
//! changes once written; registering one writes both records in one commit, the type's by
//! compare-and-swap, so two registrations racing on several nodes get different numbers.

use serde::{Deserialize, Serialize};
use sluice_core::ValidationError;

pub const TYPE_KIND: &str = "schema_type";
pub const VERSION_KIND: &str = "schema_version";
/// The records' format; a newer Sluice reads older formats.
pub const RECORD_FORMAT: u8 = 1;

/// Longest message type, in bytes: letters, digits and `.`, `_`, `-`, `:` (CloudEvents style,
/// `com.example.order.created`).
pub const SCHEMA_TYPE_LEN_MAX: usize = 256;
/// Largest schema, as JSON text.
pub const SCHEMA_BYTES_MAX: usize = 256 * 1024;
/// Most versions one type may have.
pub const SCHEMA_VERSIONS_MAX: u32 = 1_000;
/// Most types the registry holds.
pub const SCHEMA_TYPES_MAX: usize = 10_000;

/// How each new version must relate to earlier ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compatibility {
    /// A consumer on the new version reads messages written with the latest earlier one.
    #[default]
    Backward,
    BackwardTransitive,
    /// A consumer on the latest earlier version reads messages written with the new one.
    Forward,
    ForwardTransitive,
    /// Both.
    Full,
    FullTransitive,
    /// Anything goes.
    None,
}

impl Compatibility {
    pub const ALL: [Compatibility; 7] = [
        Compatibility::Backward,
        Compatibility::BackwardTransitive,
        Compatibility::Forward,
        Compatibility::ForwardTransitive,
        Compatibility::Full,
        Compatibility::FullTransitive,
        Compatibility::None,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Compatibility::Backward => "backward",
            Compatibility::BackwardTransitive => "backward_transitive",
            Compatibility::Forward => "forward",
            Compatibility::ForwardTransitive => "forward_transitive",
            Compatibility::Full => "full",
            Compatibility::FullTransitive => "full_transitive",
            Compatibility::None => "none",
        }
    }

    pub fn parse(text: &str) -> Option<Compatibility> {
        Compatibility::ALL.into_iter().find(|c| c.as_str() == text)
    }

    /// Against every earlier version, not only the latest.
    pub fn transitive(self) -> bool {
        matches!(
            self,
            Compatibility::BackwardTransitive | Compatibility::ForwardTransitive | Compatibility::FullTransitive
        )
    }

    /// Old messages must pass the new schema.
    pub fn backward(self) -> bool {
        matches!(
            self,
            Compatibility::Backward
                | Compatibility::BackwardTransitive
                | Compatibility::Full
                | Compatibility::FullTransitive
        )
    }

    /// New messages must pass the old schemas.
    pub fn forward(self) -> bool {
        matches!(
            self,
            Compatibility::Forward
                | Compatibility::ForwardTransitive
                | Compatibility::Full
                | Compatibility::FullTransitive
        )
    }
}

/// A message type's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeRecord {
    pub format: u8,
    pub name: String,
    pub compatibility: Compatibility,
    /// The newest version; 0 before the first is registered (a type configured first).
    pub latest: u32,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
}

/// One version of a type's schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionRecord {
    pub format: u8,
    pub name: String,
    pub version: u32,
    /// The schema as registered (JSON text).
    pub schema: String,
    pub created_at_ms: u64,
}

pub fn version_key(name: &str, version: u32) -> String {
    format!("{name}/{version:010}")
}

/// The prefix of every version key of a type.
pub fn versions_prefix(name: &str) -> String {
    format!("{name}/")
}

/// Checks a message type's name.
pub fn validate_type_name(name: &str) -> Result<(), ValidationError> {
    let name = sluice_core::name::without_tenant(name).map_err(|e| ValidationError::new("type", e.message))?;
    let ok = !name.is_empty()
        && name.len() <= SCHEMA_TYPE_LEN_MAX
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':'));
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            "type",
            format!("a message type is 1 to {SCHEMA_TYPE_LEN_MAX} letters, digits, '.', '_', '-' or ':'"),
        ))
    }
}

/// Reads a stored record of either kind, refusing formats this Sluice does not know.
pub fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8], format_of: impl Fn(&T) -> u8) -> Result<T, String> {
    let record: T = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    match format_of(&record) {
        RECORD_FORMAT => Ok(record),
        other => Err(format!("schema record format {other} is not known to this Sluice")),
    }
}

pub fn encode<T: Serialize>(record: &T) -> Vec<u8> {
    // Serializing a struct of strings and numbers cannot fail.
    serde_json::to_vec(record).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_modes() {
        assert!(validate_type_name("com.example.order-created:v1_x").is_ok());
        assert!(validate_type_name("").is_err());
        assert!(validate_type_name("a/b").is_err());
        assert!(validate_type_name(&"a".repeat(SCHEMA_TYPE_LEN_MAX)).is_ok());
        assert!(validate_type_name(&"a".repeat(SCHEMA_TYPE_LEN_MAX + 1)).is_err());
        for mode in Compatibility::ALL {
            assert_eq!(Compatibility::parse(mode.as_str()), Some(mode));
        }
        assert!(Compatibility::Full.backward() && Compatibility::Full.forward() && !Compatibility::Full.transitive());
        assert!(!Compatibility::None.backward() && !Compatibility::None.forward());
        assert_eq!(version_key("order", 7), "order/0000000007");
    }
}
