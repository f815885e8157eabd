//! Records: the rules every backend applies to durable configuration records (names, sizes),
//! so that a kind, key or value one backend accepts is accepted by all of them.

use async_trait::async_trait;
use sluice_core::ValidationError;

use crate::StoreError;

/// Longest record kind, in bytes (`[a-z0-9_]`).
pub const RECORD_KIND_LEN_MAX: usize = 64;
/// Longest record key, in bytes of UTF-8. A subscription's key is its topic's name (up to 256
/// bytes) and an id, so this leaves room for composite keys.
pub const RECORD_KEY_LEN_MAX: usize = 1_024;
/// Largest record value. A subscription holds a filter policy of up to 256 KiB and a delivery
/// policy of up to 64 KiB, with room to spare.
pub const RECORD_VALUE_BYTES_MAX: usize = 1024 * 1024;
/// Most records one list call returns.
pub const RECORD_LIST_LIMIT_MAX: usize = 1_000;

/// One record as a list returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub key: String,
    pub value: Vec<u8>,
}

/// Checks a record's kind and key.
pub fn validate_record_key(kind: &str, key: &str) -> Result<(), ValidationError> {
    validate_kind(kind)?;
    if key.is_empty() || key.len() > RECORD_KEY_LEN_MAX {
        return Err(ValidationError::new("key", format!("a record key is 1 to {RECORD_KEY_LEN_MAX} bytes")));
    }
    if key.contains('\0') {
        return Err(ValidationError::new("key", "a record key must not contain NUL"));
    }
    Ok(())
}

/// Checks a record kind.
fn validate_kind(kind: &str) -> Result<(), ValidationError> {
    let ok = !kind.is_empty()
        && kind.len() <= RECORD_KIND_LEN_MAX
        && kind.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new("kind", format!("a record kind is 1 to {RECORD_KIND_LEN_MAX} of [a-z0-9_]")))
    }
}

pub fn validate_record_value(value: &[u8]) -> Result<(), ValidationError> {
    if value.len() > RECORD_VALUE_BYTES_MAX {
        return Err(ValidationError::new("value", format!("a record value is at most {RECORD_VALUE_BYTES_MAX} bytes")));
    }
    Ok(())
}

/// Checks a list call's arguments.
pub fn validate_record_list(kind: &str, prefix: &str, limit: usize) -> Result<(), ValidationError> {
    validate_kind(kind)?;
    if prefix.len() > RECORD_KEY_LEN_MAX || prefix.contains('\0') {
        return Err(ValidationError::new(
            "prefix",
            format!("a key prefix is at most {RECORD_KEY_LEN_MAX} bytes, without NUL"),
        ));
    }
    if limit > RECORD_LIST_LIMIT_MAX {
        return Err(ValidationError::new("limit", format!("at most {RECORD_LIST_LIMIT_MAX} records per list")));
    }
    Ok(())
}

/// Durable configuration records: values of a `kind` (`[a-z0-9_]`, at most
/// `RECORD_KIND_LEN_MAX` bytes) by `key` (1 to `RECORD_KEY_LEN_MAX` bytes of UTF-8 without
/// NUL), each at most `RECORD_VALUE_BYTES_MAX` bytes. Keys compare byte-wise in every backend.
/// Writes are durable before they answer, like every other write; reads see every write that
/// answered, on every node of a shared backend. A bad kind, key or value is
/// `BrokerError::Invalid` and changes nothing.
#[async_trait]
pub trait RecordStore: Send + Sync + 'static {
    /// Creates the record unless one exists under that key; `true` when it was created, `false`
    /// (and the record left as it was) when it existed.
    async fn insert_record(&self, kind: &str, key: &str, value: Vec<u8>) -> Result<bool, StoreError>;
    /// Creates or replaces the record.
    async fn put_record(&self, kind: &str, key: &str, value: Vec<u8>) -> Result<(), StoreError>;
    /// Replaces the record only if it holds `expected` now (compare-and-swap, for
    /// read-modify-write without lost updates between nodes); `false` when it holds something
    /// else or does not exist, and then nothing changed.
    async fn replace_record(
        &self,
        kind: &str,
        key: &str,
        expected: Vec<u8>,
        value: Vec<u8>,
    ) -> Result<bool, StoreError>;
    async fn get_record(&self, kind: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Records of `kind` whose keys start with `prefix`, after the key `after`, in key order,
    /// at most `limit` (up to `RECORD_LIST_LIMIT_MAX`).
    async fn list_records(
        &self,
        kind: &str,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError>;
    /// Deletes the record; `true` when it existed.
    async fn delete_record(&self, kind: &str, key: &str) -> Result<bool, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_keys_and_values() {
        assert!(validate_record_key("topic", "orders").is_ok());
        assert!(validate_record_key("Topic", "orders").is_err());
        assert!(validate_record_key("", "orders").is_err());
        assert!(validate_record_key("topic", "").is_err());
        assert!(validate_record_key("topic", "a\0b").is_err());
        assert!(validate_record_key("topic", &"k".repeat(RECORD_KEY_LEN_MAX)).is_ok());
        assert!(validate_record_key("topic", &"k".repeat(RECORD_KEY_LEN_MAX + 1)).is_err());
        assert!(validate_record_value(&vec![0; RECORD_VALUE_BYTES_MAX]).is_ok());
        assert!(validate_record_value(&vec![0; RECORD_VALUE_BYTES_MAX + 1]).is_err());
        assert!(validate_record_list("topic", "", RECORD_LIST_LIMIT_MAX).is_ok());
        assert!(validate_record_list("topic", "", RECORD_LIST_LIMIT_MAX + 1).is_err());
    }
}
