//! The on-disk records and their encoding.
//!
//! Three keyspaces, each keyed by a big-endian `u64` so that keys sort numerically:
//! - `queues`: queue id → [`QueueRecord`]
//! - `messages`: sequence number → `MessageMeta` (small; rewritten on every receive)
//! - `bodies`: sequence number → `MessageContent` (written once at send)
//!
//! Every value starts with a format byte ([`RECORD_VERSION`]) followed by the postcard
//! encoding of the record. A reader that meets another format byte refuses to start rather
//! than guess. The journal beneath (fjall) checksums every batch.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sluice_core::{QueueAttributes, TimeMs};

pub const RECORD_VERSION: u8 = 1;

/// Marker stored under [`FORMAT_KEY`] in the `meta` keyspace of every data directory.
pub const FORMAT_KEY: &[u8] = b"format";
pub const FORMAT_VALUE: &[u8] = b"sluice-embedded/1";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueRecord {
    pub name: String,
    pub attributes: QueueAttributes,
    pub created_at: TimeMs,
    pub modified_at: TimeMs,
}

/// Key of the high-water marks in the `meta` keyspace: the next sequence number and queue id
/// that may be handed out. Ids below them are never reused, because receipts are built from
/// them.
pub const HIGH_WATER_KEY: &[u8] = b"high_water";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HighWater {
    pub next_seq: u64,
    pub next_queue_id: u64,
}

/// A FIFO deduplication record, keyed by queue id (big-endian) followed by the key's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DedupRecord {
    pub id: sluice_core::MessageId,
    pub seq: u64,
    pub expires_at: TimeMs,
}

pub fn dedup_key(queue: u64, key: &str) -> Vec<u8> {
    let mut out = queue.to_be_bytes().to_vec();
    out.extend_from_slice(key.as_bytes());
    out
}

pub fn decode_dedup_key(raw: &[u8]) -> Result<(u64, String), String> {
    if raw.len() < 8 {
        return Err(format!("dedup key of {} bytes, expected at least 8", raw.len()));
    }
    let (queue, key) = raw.split_at(8);
    let key = String::from_utf8(key.to_vec()).map_err(|_| "dedup key is not UTF-8".to_string())?;
    Ok((decode_key(queue)?, key))
}

pub fn key(n: u64) -> [u8; 8] {
    n.to_be_bytes()
}

pub fn decode_key(key: &[u8]) -> Result<u64, String> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| format!("key of {} bytes, expected 8", key.len()))?;
    Ok(u64::from_be_bytes(bytes))
}

pub fn encode<T: Serialize>(record: &T) -> Vec<u8> {
    let mut out = vec![RECORD_VERSION];
    // Encoding plain structs into a Vec cannot fail.
    out.extend(postcard::to_stdvec(record).expect("postcard encodes plain structs"));
    out
}

pub fn decode<T: DeserializeOwned>(value: &[u8]) -> Result<T, String> {
    match value.split_first() {
        Some((&RECORD_VERSION, rest)) => postcard::from_bytes(rest).map_err(|e| format!("undecodable record: {e}")),
        Some((v, _)) => Err(format!("record format {v}, this version reads {RECORD_VERSION}")),
        None => Err("empty record".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::message::MessageContent;
    use sluice_core::{MessageId, MessageMeta};

    #[test]
    fn round_trips_and_refuses_other_formats() {
        let meta = MessageMeta {
            queue: 3,
            id: MessageId(u128::MAX - 1),
            priority: 9,
            sent_at: 1,
            visible_at: 2,
            in_flight: true,
            receive_count: 4,
            epoch: 5,
            first_received_at: Some(6),
            size_bytes: 7,
            group_id: Some("g".into()),
            dead_letter_source: None,
            last_error: Some("boom".into()),
        };
        let bytes = encode(&meta);
        assert_eq!(decode::<MessageMeta>(&bytes).unwrap(), meta);
        let mut other = bytes.clone();
        other[0] = 2;
        assert!(decode::<MessageMeta>(&other).unwrap_err().contains("format 2"));
        assert!(decode::<MessageMeta>(&bytes[..bytes.len() - 3]).is_err());
        assert!(decode::<MessageContent>(&[]).is_err());
    }

    /// The format is a contract: this fixture was written by format 1 and must always decode.
    #[test]
    fn format_1_fixture() {
        let record = QueueRecord {
            name: "q".into(),
            attributes: QueueAttributes::default(),
            created_at: 1_700_000_000_000,
            modified_at: 1_700_000_000_001,
        };
        let bytes = encode(&record);
        expect_test::expect![[r#"
            [
                1,
                1,
                113,
                176,
                234,
                1,
                0,
                128,
                224,
                229,
                164,
                1,
                128,
                128,
                64,
                0,
                0,
                0,
                0,
                224,
                167,
                18,
                0,
                0,
                0,
                128,
                208,
                149,
                255,
                188,
                49,
                129,
                208,
                149,
                255,
                188,
                49,
            ]
        "#]]
        .assert_debug_eq(&bytes);
        assert_eq!(decode::<QueueRecord>(&bytes).unwrap(), record);
    }
}
