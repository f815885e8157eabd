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
//!
//! Queue records are the exception since format 2 ([`QUEUE_RECORD_VERSION`]): JSON, so that a
//! new queue attribute (with a default) needs no new format. Format 1 queue records (postcard,
//! the attributes as they were then, [`v1`]) are still read, and rewritten as format 2 the next
//! time the queue changes.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sluice_core::{QueueAttributes, TimeMs};

pub const RECORD_VERSION: u8 = 1;
/// The format of queue records written now.
pub const QUEUE_RECORD_VERSION: u8 = 2;

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

/// A queue record as it is stored now: format 2, JSON.
pub fn encode_queue(record: &QueueRecord) -> Vec<u8> {
    let mut out = vec![QUEUE_RECORD_VERSION];
    out.extend(serde_json::to_vec(record).expect("a queue record encodes"));
    out
}

/// A queue record of format 2 (JSON; attributes added since take their defaults) or 1.
pub fn decode_queue(value: &[u8]) -> Result<QueueRecord, String> {
    match value.split_first() {
        Some((&QUEUE_RECORD_VERSION, rest)) => {
            serde_json::from_slice(rest).map_err(|e| format!("undecodable queue record: {e}"))
        }
        Some((&RECORD_VERSION, _)) => decode::<v1::QueueRecord>(value).map(QueueRecord::from),
        Some((v, _)) => Err(format!("queue record format {v}, this version reads 1 and {QUEUE_RECORD_VERSION}")),
        None => Err("empty record".into()),
    }
}

/// Format 1 of queue records, frozen as it was written: postcard follows the fields' order and
/// types, so these types must never change.
pub mod v1 {
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use sluice_core::{DeadLetter, QueueAttributes, TimeMs};

    #[derive(Debug, Deserialize)]
    pub struct QueueRecord {
        pub name: String,
        pub attributes: QueueAttributesV1,
        pub created_at: TimeMs,
        pub modified_at: TimeMs,
    }

    #[derive(Debug, Deserialize)]
    pub struct QueueAttributesV1 {
        pub visibility_timeout_ms: u64,
        pub delay_ms: u64,
        pub retention_ms: u64,
        pub message_bytes_max: u64,
        pub receive_wait_ms: u64,
        pub dead_letter: Option<DeadLetterV1>,
        pub fifo: bool,
        pub content_based_dedup: bool,
        pub dedup_window_ms: u64,
        pub dedup_scope: DedupScopeV1,
        pub tags: BTreeMap<String, String>,
        pub sqs_attributes: BTreeMap<String, String>,
    }

    #[derive(Debug, Deserialize)]
    pub struct DeadLetterV1 {
        pub queue: String,
        pub max_receive_count: u32,
    }

    #[derive(Debug, Deserialize)]
    pub enum DedupScopeV1 {
        Queue,
        MessageGroup,
    }

    impl From<QueueRecord> for super::QueueRecord {
        fn from(r: QueueRecord) -> super::QueueRecord {
            let a = r.attributes;
            let attributes = QueueAttributes {
                visibility_timeout_ms: a.visibility_timeout_ms,
                delay_ms: a.delay_ms,
                retention_ms: a.retention_ms,
                message_bytes_max: a.message_bytes_max,
                receive_wait_ms: a.receive_wait_ms,
                dead_letter: a
                    .dead_letter
                    .map(|d| DeadLetter { queue: d.queue, max_receive_count: d.max_receive_count }),
                fifo: a.fifo,
                content_based_dedup: a.content_based_dedup,
                dedup_window_ms: a.dedup_window_ms,
                dedup_scope: match a.dedup_scope {
                    DedupScopeV1::Queue => sluice_core::attributes::DedupScope::Queue,
                    DedupScopeV1::MessageGroup => sluice_core::attributes::DedupScope::MessageGroup,
                },
                tags: a.tags,
                sqs_attributes: a.sqs_attributes,
                ..QueueAttributes::default()
            };
            super::QueueRecord { name: r.name, attributes, created_at: r.created_at, modified_at: r.modified_at }
        }
    }
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

    /// The format is a contract: these bytes were written by format 1 (postcard, before queue
    /// records became JSON) and must always decode, with every attribute added since at its
    /// default.
    #[test]
    fn format_1_fixture() {
        let bytes: [u8; 37] = [
            1, 1, 113, 176, 234, 1, 0, 128, 224, 229, 164, 1, 128, 128, 64, 0, 0, 0, 0, 224, 167, 18, 0, 0, 0, 128,
            208, 149, 255, 188, 49, 129, 208, 149, 255, 188, 49,
        ];
        let record = QueueRecord {
            name: "q".into(),
            attributes: QueueAttributes::default(),
            created_at: 1_700_000_000_000,
            modified_at: 1_700_000_000_001,
        };
        assert_eq!(decode_queue(&bytes).unwrap(), record);
        let fifo_with_dead_letter = {
            let mut b = bytes.to_vec();
            // fifo = true (the byte after dead_letter's `None`) and content_based_dedup = true.
            b[17] = 1;
            b[18] = 1;
            b
        };
        let decoded = decode_queue(&fifo_with_dead_letter).unwrap();
        assert!(decoded.attributes.fifo && decoded.attributes.content_based_dedup);
        assert!(!decoded.attributes.schema_validation);
    }

    /// Format 2: JSON, read back whole; a field it lacks (written before the field existed)
    /// takes its default; another format byte is refused.
    #[test]
    fn format_2_queue_records() {
        let record = QueueRecord {
            name: "q".into(),
            attributes: QueueAttributes { schema_validation: true, fifo: true, ..QueueAttributes::default() },
            created_at: 7,
            modified_at: 8,
        };
        let bytes = encode_queue(&record);
        assert_eq!(bytes[0], QUEUE_RECORD_VERSION);
        assert_eq!(decode_queue(&bytes).unwrap(), record);
        let text = String::from_utf8(bytes[1..].to_vec()).unwrap().replace(",\"schema_validation\":true", "");
        let mut older = vec![QUEUE_RECORD_VERSION];
        older.extend(text.as_bytes());
        assert!(!decode_queue(&older).unwrap().attributes.schema_validation);
        assert!(decode_queue(&[3, b'{', b'}']).unwrap_err().contains("format 3"));
        assert!(decode_queue(&[]).is_err());
    }

    /// The format is a contract: these bytes were written by format 2 and must always decode.
    #[test]
    fn format_2_fixture() {
        let json = br#"{"name":"jobs","attributes":{"visibility_timeout_ms":30000,"delay_ms":0,"retention_ms":345600000,"message_bytes_max":262144,"receive_wait_ms":0,"dead_letter":{"queue":"dlq","max_receive_count":3},"fifo":false,"content_based_dedup":false,"dedup_window_ms":300000,"dedup_scope":"Queue","tags":{"team":"a"},"sqs_attributes":{"Policy":"{}"},"schema_validation":true},"created_at":1700000000000,"modified_at":1700000000001}"#;
        let mut bytes = vec![2];
        bytes.extend(json);
        let record = decode_queue(&bytes).unwrap();
        let expected = QueueRecord {
            name: "jobs".into(),
            attributes: QueueAttributes {
                message_bytes_max: 262_144,
                dead_letter: Some(sluice_core::DeadLetter { queue: "dlq".into(), max_receive_count: 3 }),
                tags: [("team".to_string(), "a".to_string())].into(),
                sqs_attributes: [("Policy".to_string(), "{}".to_string())].into(),
                schema_validation: true,
                ..QueueAttributes::default()
            },
            created_at: 1_700_000_000_000,
            modified_at: 1_700_000_000_001,
        };
        assert_eq!(record, expected);
        assert_eq!(encode_queue(&expected), bytes, "format 2 writes what it wrote when the fixture was taken");
    }
}
