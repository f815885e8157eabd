//! Streams: partitioned, append-only, replayable logs, and the consumer groups that read them.
//!
//! Everything here is data and pure functions, time an argument, as in the rest of the crate:
//! - this module: a stream's configuration and a record's validation and size;
//! - `partitioner`: which partition a record goes to (Kafka's murmur2 for keys, round robin);
//! - `group`: `offsets` mode, partitions assigned to live members with generations, commits
//!   only forward, seeks;
//! - `shared`: `shared` mode, any member takes any record with a receipt, acks, releases, ack
//!   timeouts, delivery counts and dead-lettering, and with `key_ordered` no record handed out
//!   while an earlier record of its key is unacknowledged;
//! - `limits`: every limit of streams.
//!
//! Both storage backends apply these rules: the embedded store in its writer thread, the
//! PostgreSQL store on state it reads and writes back under a row lock.

pub mod group;
pub mod limits;
pub mod partitioner;
pub mod shared;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::TimeMs;
use crate::overflow::Overflow;
use crate::rate::RateLimit;
use crate::validation::ValidationError;
use limits::*;

/// A stream's settings. `retention_bytes` is per partition, as in Kafka.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamConfig {
    pub partitions: u32,
    pub retention_ms: u64,
    pub retention_bytes: Option<u64>,
    pub record_bytes_max: u64,
    pub segment_bytes: u64,
    /// Refuse an append whose record breaks the JSON Schema registered for its `type` and
    /// version (checked at the door, by the services; the log does not act on it).
    #[serde(default)]
    pub schema_validation: bool,
    /// A token bucket on appends (checked at the door, by the server, like schemas): each
    /// record takes one token, shared by every node of the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// At most this many records kept in the whole stream (every partition); an append past it
    /// follows `overflow`. Retention makes room again. `None`: no bound but retention's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth_messages: Option<u64>,
    /// At most this many bytes kept in the whole stream, as the stream's view counts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth_bytes: Option<u64>,
    /// What an append past a depth limit does: only `reject` on a stream (see [`Self::validate`]).
    #[serde(default, skip_serializing_if = "Overflow::is_reject")]
    pub overflow: Overflow,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            partitions: 1,
            retention_ms: STREAM_RETENTION_MS_DEFAULT,
            retention_bytes: None,
            record_bytes_max: RECORD_BYTES_MAX_DEFAULT,
            segment_bytes: SEGMENT_BYTES_DEFAULT,
            schema_validation: false,
            rate_limit: None,
            max_depth_messages: None,
            max_depth_bytes: None,
            overflow: Overflow::Reject,
        }
    }
}

/// A change to a stream's settings; `None` leaves a setting as it is. Partitions can only grow
/// (keys then map to other partitions, as in Kafka).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamConfigPatch {
    pub partitions: Option<u32>,
    pub retention_ms: Option<u64>,
    /// `Some(None)` removes the size limit.
    pub retention_bytes: Option<Option<u64>>,
    pub record_bytes_max: Option<u64>,
    pub segment_bytes: Option<u64>,
    pub schema_validation: Option<bool>,
    /// `Some(None)` removes the rate limit.
    pub rate_limit: Option<Option<RateLimit>>,
    /// `Some(None)` removes the bound.
    pub max_depth_messages: Option<Option<u64>>,
    /// `Some(None)` removes the bound.
    pub max_depth_bytes: Option<Option<u64>>,
    pub overflow: Option<Overflow>,
}

fn range(field: &str, value: u64, min: u64, max: u64) -> Result<(), ValidationError> {
    if value < min || value > max {
        return Err(ValidationError::new(field, format!("must be {min} to {max}")));
    }
    Ok(())
}

impl StreamConfig {
    pub fn validate(&self) -> Result<(), ValidationError> {
        range("partitions", u64::from(self.partitions), 1, u64::from(STREAM_PARTITIONS_MAX))?;
        range("retention_ms", self.retention_ms, STREAM_RETENTION_MS_MIN, STREAM_RETENTION_MS_MAX)?;
        if let Some(bytes) = self.retention_bytes {
            range("retention_bytes", bytes, STREAM_RETENTION_BYTES_MIN, u64::MAX)?;
        }
        range("record_bytes_max", self.record_bytes_max, 1, RECORD_BYTES_LIMIT)?;
        range("segment_bytes", self.segment_bytes, SEGMENT_BYTES_MIN, SEGMENT_BYTES_MAX)?;
        if let Some(limit) = &self.rate_limit {
            limit.validate("rate_limit")?;
        }
        if let Some(max) = self.max_depth_messages {
            range("max_depth_messages", max, 1, u64::MAX)?;
        }
        if let Some(max) = self.max_depth_bytes {
            // At least one record of the largest size fits, framing included.
            range("max_depth_bytes", max, self.record_bytes_max + STREAM_DEPTH_BYTES_SLACK, u64::MAX)?;
        }
        if self.overflow != Overflow::Reject {
            return Err(ValidationError::new(
                "overflow",
                format!(
                    "a stream only rejects appends past its depth limit (\"reject\"), it cannot {} one: \
                     its records are removed by retention (retention_ms, retention_bytes), whole segments at a time",
                    if self.overflow == Overflow::DropHead {
                        "move its oldest records to a dead-letter queue"
                    } else {
                        "send the new record to a dead-letter queue"
                    },
                ),
            ));
        }
        Ok(())
    }

    /// Whether a record that adds `messages` records and `bytes` bytes to a stream holding
    /// `depth` fits its depth limits.
    pub fn fits(&self, depth: crate::overflow::Depth, bytes: u64) -> bool {
        self.max_depth_messages.is_none_or(|max| depth.messages < max)
            && self.max_depth_bytes.is_none_or(|max| depth.bytes.saturating_add(bytes) <= max)
    }

    /// Whether the stream has a depth limit (appends then count what it holds).
    pub fn bounded(&self) -> bool {
        self.max_depth_messages.is_some() || self.max_depth_bytes.is_some()
    }

    /// The settings after `patch`, checked.
    pub fn apply(&self, patch: &StreamConfigPatch) -> Result<StreamConfig, ValidationError> {
        let next = StreamConfig {
            partitions: patch.partitions.unwrap_or(self.partitions),
            retention_ms: patch.retention_ms.unwrap_or(self.retention_ms),
            retention_bytes: patch.retention_bytes.unwrap_or(self.retention_bytes),
            record_bytes_max: patch.record_bytes_max.unwrap_or(self.record_bytes_max),
            segment_bytes: patch.segment_bytes.unwrap_or(self.segment_bytes),
            schema_validation: patch.schema_validation.unwrap_or(self.schema_validation),
            rate_limit: patch.rate_limit.unwrap_or(self.rate_limit),
            max_depth_messages: patch.max_depth_messages.unwrap_or(self.max_depth_messages),
            max_depth_bytes: patch.max_depth_bytes.unwrap_or(self.max_depth_bytes),
            overflow: patch.overflow.unwrap_or(self.overflow),
        };
        if next.partitions < self.partitions {
            return Err(ValidationError::new(
                "partitions",
                format!("partitions can only grow (the stream has {})", self.partitions),
            ));
        }
        next.validate()?;
        Ok(next)
    }
}

/// Stream and group names: 1 to 80 ASCII letters, digits, `-`, `_` and `.`.
pub fn validate_name(field: &str, name: &str) -> Result<(), ValidationError> {
    if name.is_empty() || name.len() > STREAM_NAME_LEN_MAX {
        return Err(ValidationError::new(field, format!("names are 1 to {STREAM_NAME_LEN_MAX} characters long")));
    }
    if let Some(bad) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))) {
        return Err(ValidationError::new(
            field,
            format!("names may hold only ASCII letters, digits, '-', '_' and '.' (found {bad:?})"),
        ));
    }
    Ok(())
}

/// A stream's stored name: a name, after its tenant if it has one (`acme~clicks`, see
/// `crate::name`).
pub fn validate_stream_name(name: &str) -> Result<(), ValidationError> {
    validate_name("name", crate::name::without_tenant(name)?)
}

/// Member ids: 1 to 255 visible ASCII characters.
pub fn validate_member(member: &str) -> Result<(), ValidationError> {
    if member.is_empty() || member.len() > MEMBER_ID_LEN_MAX || !member.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ValidationError::new(
            "member",
            format!("a member id is 1 to {MEMBER_ID_LEN_MAX} visible ASCII characters"),
        ));
    }
    Ok(())
}

/// A record as a producer appends it. Offsets and timestamps are the store's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewRecord {
    pub key: Option<Vec<u8>>,
    /// Where it goes; Kafka's partitioner of the key, or round robin, when `None`.
    pub partition: Option<u32>,
    pub body: Vec<u8>,
    /// True when the producer sent base64 (`body_base64`); reads return it the same way.
    pub body_binary: bool,
    pub headers: BTreeMap<String, String>,
    pub r#type: Option<String>,
    pub correlation_id: Option<String>,
    /// A retried append with the same id within `STREAM_DEDUP_WINDOW_MS` gets the original
    /// partition and offset back and appends nothing.
    pub dedup_id: Option<String>,
}

/// Why one record of an append was refused; the others are appended all the same.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("the record is {size_bytes} bytes, over the stream's record_bytes_max of {max_bytes}")]
    TooLarge { size_bytes: u64, max_bytes: u64 },
    #[error("partition {partition} does not exist: the stream has partitions 0 to {}", .partitions - 1)]
    NoSuchPartition { partition: u32, partitions: u32 },
    #[error("the stream remembers {STREAM_DEDUP_ENTRIES_MAX} dedup ids at once; retry once older ones expire")]
    DedupFull,
    /// The stream holds its `max_depth_messages` or `max_depth_bytes`: retry once retention
    /// removed old records, or raise the limit.
    #[error("the stream is full ({} records, {} bytes kept; at most {} records, {} bytes): retry later, or raise the limit", .depth.messages, .depth.bytes, limit_text(.max_messages), limit_text(.max_bytes))]
    StreamFull { depth: crate::overflow::Depth, max_messages: Option<u64>, max_bytes: Option<u64> },
}

fn limit_text(limit: &Option<u64>) -> String {
    limit.map_or_else(|| "any".to_owned(), |v| v.to_string())
}

fn field(name: &str, value: &Option<String>) -> Result<(), ValidationError> {
    match value {
        Some(v) if v.is_empty() || v.len() > RECORD_FIELD_LEN_MAX => {
            Err(ValidationError::new(name, format!("must be 1 to {RECORD_FIELD_LEN_MAX} bytes")))
        }
        _ => Ok(()),
    }
}

impl NewRecord {
    /// Key, body, headers and envelope fields: the figure compared with `record_bytes_max`.
    pub fn size_bytes(&self) -> u64 {
        let headers: usize = self.headers.iter().map(|(k, v)| k.len() + v.len()).sum();
        let fields = [&self.r#type, &self.correlation_id, &self.dedup_id];
        let fields: usize = fields.iter().map(|f| f.as_ref().map_or(0, String::len)).sum();
        (self.key.as_ref().map_or(0, Vec::len) + self.body.len() + headers + fields) as u64
    }

    /// Checks the record against the stream's settings; `partitions` bounds an explicit partition.
    pub fn validate(&self, config: &StreamConfig) -> Result<(), RecordError> {
        if let Some(key) = &self.key
            && key.len() > RECORD_KEY_BYTES_MAX
        {
            return Err(ValidationError::new("key", format!("a key is at most {RECORD_KEY_BYTES_MAX} bytes")).into());
        }
        if let Some(p) = self.partition
            && p >= config.partitions
        {
            return Err(RecordError::NoSuchPartition { partition: p, partitions: config.partitions });
        }
        if self.headers.len() > RECORD_HEADERS_MAX {
            return Err(ValidationError::new("headers", format!("at most {RECORD_HEADERS_MAX} headers")).into());
        }
        if let Some(name) = self.headers.keys().find(|k| k.is_empty() || k.len() > RECORD_HEADER_NAME_LEN_MAX) {
            return Err(ValidationError::new(
                "headers",
                format!("header names are 1 to {RECORD_HEADER_NAME_LEN_MAX} bytes (found {} bytes)", name.len()),
            )
            .into());
        }
        field("type", &self.r#type)?;
        field("correlation_id", &self.correlation_id)?;
        field("dedup_id", &self.dedup_id)?;
        let size_bytes = self.size_bytes();
        if size_bytes > config.record_bytes_max {
            return Err(RecordError::TooLarge { size_bytes, max_bytes: config.record_bytes_max });
        }
        Ok(())
    }
}

/// A stored record, as reads return it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub partition: u32,
    pub offset: u64,
    pub timestamp_ms: TimeMs,
    pub key: Option<Vec<u8>>,
    pub body: Vec<u8>,
    pub body_binary: bool,
    pub headers: BTreeMap<String, String>,
    pub r#type: Option<String>,
    pub correlation_id: Option<String>,
    pub dedup_id: Option<String>,
}

/// The key's identity for key ordering: a 64-bit hash, so that the state a shared group keeps
/// stays small whatever the keys. Two keys that collide are ordered as one (never the reverse).
pub fn key_hash(key: &[u8]) -> u64 {
    // FNV-1a: stable across versions and processes, unlike the standard library's hasher.
    key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// Where a new group starts reading, per partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StartAt {
    Earliest,
    Latest,
    Offset(u64),
    Time(TimeMs),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_and_patches() {
        assert!(StreamConfig::default().validate().is_ok());
        let bad = |c: StreamConfig, field: &str| assert_eq!(c.validate().unwrap_err().field, field);
        bad(StreamConfig { partitions: 0, ..Default::default() }, "partitions");
        bad(StreamConfig { partitions: 1_025, ..Default::default() }, "partitions");
        bad(StreamConfig { segment_bytes: 1, ..Default::default() }, "segment_bytes");
        bad(StreamConfig { record_bytes_max: RECORD_BYTES_LIMIT + 1, ..Default::default() }, "record_bytes_max");
        let c = StreamConfig { partitions: 4, ..Default::default() };
        assert_eq!(c.apply(&StreamConfigPatch { partitions: Some(8), ..Default::default() }).unwrap().partitions, 8);
        assert!(c.apply(&StreamConfigPatch { partitions: Some(2), ..Default::default() }).is_err());
        let patch = StreamConfigPatch { retention_bytes: Some(Some(1 << 20)), ..Default::default() };
        assert_eq!(c.apply(&patch).unwrap().retention_bytes, Some(1 << 20));
    }

    #[test]
    fn records_are_checked_and_sized() {
        let config = StreamConfig { partitions: 2, record_bytes_max: 10, ..Default::default() };
        let r = NewRecord { key: Some(b"k".to_vec()), body: b"12345".to_vec(), ..Default::default() };
        assert_eq!(r.size_bytes(), 6);
        assert!(r.validate(&config).is_ok());
        let big = NewRecord { body: vec![0; 11], ..Default::default() };
        assert_eq!(big.validate(&config), Err(RecordError::TooLarge { size_bytes: 11, max_bytes: 10 }));
        let far = NewRecord { partition: Some(2), ..Default::default() };
        assert_eq!(far.validate(&config), Err(RecordError::NoSuchPartition { partition: 2, partitions: 2 }));
        assert!(validate_name("name", "orders.v2-eu_1").is_ok());
        assert!(validate_name("name", "a b").is_err());
        assert!(validate_member("worker-1").is_ok());
        assert!(validate_member("a b").is_err());
    }

    #[test]
    fn depth_limits_bound_what_a_stream_keeps() {
        use crate::overflow::Depth;
        let bad = |c: StreamConfig, field: &str| assert_eq!(c.validate().unwrap_err().field, field);
        bad(StreamConfig { max_depth_messages: Some(0), ..Default::default() }, "max_depth_messages");
        let small = StreamConfig { record_bytes_max: 100, ..Default::default() };
        bad(StreamConfig { max_depth_bytes: Some(100), ..small.clone() }, "max_depth_bytes");
        bad(StreamConfig { overflow: Overflow::DropHead, ..Default::default() }, "overflow");
        bad(StreamConfig { overflow: Overflow::RejectToDlq, ..Default::default() }, "overflow");
        let c = StreamConfig { max_depth_messages: Some(2), max_depth_bytes: Some(5_000), ..small };
        assert!(c.validate().is_ok() && c.bounded() && !StreamConfig::default().bounded());
        assert!(c.fits(Depth { messages: 1, bytes: 4_000 }, 1_000));
        assert!(!c.fits(Depth { messages: 2, bytes: 0 }, 1), "the record count is full");
        assert!(!c.fits(Depth { messages: 0, bytes: 4_001 }, 1_000), "the bytes are full");
        let patch = StreamConfigPatch { max_depth_messages: Some(None), ..Default::default() };
        assert_eq!(c.apply(&patch).unwrap().max_depth_messages, None);
        let patch = StreamConfigPatch { overflow: Some(Overflow::DropHead), ..Default::default() };
        assert_eq!(c.apply(&patch).unwrap_err().field, "overflow");
    }
}
