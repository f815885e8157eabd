//! Records (`Store::insert_record` and friends): small durable configuration values, kept in
//! memory for reads and written to the `meta` keyspace with the writer's batches.
//!
//! On disk a record lives under `records/<kind>/<key>` in `meta` (kinds are `[a-z0-9_]`, so
//! the `/` after the kind ends it and the keys of one kind are one contiguous range); the value
//! is the caller's bytes in the usual record framing (`codec::encode`). All records are read at
//! open. Changes apply to the map at once and are staged; the writer puts the staged writes into
//! the batch it commits next, and answers the call only after that batch is durable, like every
//! other write. If the batch fails the store refuses every call until it reopens from disk, so
//! a map that ran ahead of the disk is never served.

use std::collections::BTreeMap;
use std::ops::Bound;

use fjall::{Keyspace, OwnedWriteBatch};
use sluice_store::Record;

use crate::codec;

/// The prefix of every record key in the `meta` keyspace.
pub const PREFIX: &[u8] = b"records/";

#[derive(Debug, Default)]
pub struct Records {
    /// kind → key → value.
    map: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    /// Disk key → encoded value (`None`: delete), to write with the next batch.
    pending: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

fn disk_key(kind: &str, key: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX.len() + kind.len() + 1 + key.len());
    out.extend_from_slice(PREFIX);
    out.extend_from_slice(kind.as_bytes());
    out.push(b'/');
    out.extend_from_slice(key.as_bytes());
    out
}

/// The kind and key of a disk key under [`PREFIX`].
fn split_disk_key(raw: &[u8]) -> Result<(String, String), String> {
    let rest = raw.strip_prefix(PREFIX).ok_or("a record key without the records/ prefix")?;
    let text = std::str::from_utf8(rest).map_err(|_| "a record key that is not UTF-8".to_string())?;
    let (kind, key) = text.split_once('/').ok_or("a record key without a kind")?;
    Ok((kind.to_string(), key.to_string()))
}

impl Records {
    /// Reads every record of the `meta` keyspace.
    pub fn load(meta: &Keyspace) -> Result<Records, String> {
        let mut records = Records::default();
        for item in meta.prefix(PREFIX) {
            let (k, v) = item.into_inner().map_err(|e| format!("reading records: {e}"))?;
            let (kind, key) = split_disk_key(&k)?;
            let value: Vec<u8> = codec::decode(&v).map_err(|e| format!("records/{kind}/{key}: {e}"))?;
            records.map.entry(kind).or_default().insert(key, value);
        }
        Ok(records)
    }

    pub fn count(&self) -> usize {
        self.map.values().map(BTreeMap::len).sum()
    }

    pub fn get(&self, kind: &str, key: &str) -> Option<&Vec<u8>> {
        self.map.get(kind).and_then(|m| m.get(key))
    }

    pub fn list(&self, kind: &str, prefix: &str, after: Option<&str>, limit: usize) -> Vec<Record> {
        let Some(of_kind) = self.map.get(kind) else { return Vec::new() };
        let start = match after {
            Some(after) if after >= prefix => Bound::Excluded(after),
            _ => Bound::Included(prefix),
        };
        of_kind
            .range::<str, _>((start, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit)
            .map(|(k, v)| Record { key: k.clone(), value: v.clone() })
            .collect()
    }

    pub fn put(&mut self, kind: &str, key: &str, value: Vec<u8>) {
        self.pending.insert(disk_key(kind, key), Some(codec::encode(&value)));
        self.map.entry(kind.to_string()).or_default().insert(key.to_string(), value);
    }

    /// `true` when the record existed.
    pub fn delete(&mut self, kind: &str, key: &str) -> bool {
        let Some(of_kind) = self.map.get_mut(kind) else { return false };
        if of_kind.remove(key).is_none() {
            return false;
        }
        if of_kind.is_empty() {
            self.map.remove(kind);
        }
        self.pending.insert(disk_key(kind, key), None);
        true
    }

    /// Puts the staged writes into `batch`; returns how many.
    pub fn write_pending(&mut self, batch: &mut OwnedWriteBatch, meta: &Keyspace) -> usize {
        let count = self.pending.len();
        for (k, value) in std::mem::take(&mut self.pending) {
            match value {
                Some(v) => batch.insert(meta, k, v),
                None => batch.remove(meta, k),
            }
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_keys_split_back_and_keep_kinds_apart() {
        let k = disk_key("sub", "topic/a/b");
        assert_eq!(split_disk_key(&k).unwrap(), ("sub".to_string(), "topic/a/b".to_string()));
        // A kind that is a prefix of another never shares its range: `/` follows every kind.
        assert!(!disk_key("subx", "a").starts_with(&disk_key("sub", "")));
        assert!(split_disk_key(b"high_water").is_err());
    }

    #[test]
    fn list_pages_within_a_prefix() {
        let mut r = Records::default();
        for key in ["a/1", "a/2", "b", "a"] {
            r.put("k", key, key.as_bytes().to_vec());
        }
        let keys = |v: Vec<Record>| v.into_iter().map(|r| r.key).collect::<Vec<_>>();
        assert_eq!(keys(r.list("k", "a/", None, 10)), ["a/1", "a/2"]);
        assert_eq!(keys(r.list("k", "a/", Some("a/1"), 10)), ["a/2"]);
        assert_eq!(keys(r.list("k", "a/", Some("0"), 10)), ["a/1", "a/2"], "an `after` before the prefix");
        assert_eq!(keys(r.list("k", "", Some("a/2"), 10)), ["b"]);
        assert!(r.delete("k", "b"));
        assert!(!r.delete("k", "b"));
        assert_eq!(r.count(), 3);
    }
}
