//! The log store: streams, partitioned append-only logs with gapless offsets per partition,
//! and the consumer groups that read them (`offsets` and `shared` modes).
//!
//! The rules are `sluice_core::stream`'s; a backend makes them durable. What every backend
//! promises (checked by `conformance/log.rs`):
//! - An append answers only once its records are durable (in the default durability mode); each
//!   record gets the next offset of its partition, so offsets are gapless, never reused and in
//!   append order, across restarts. A record's timestamp never goes back within its partition.
//! - A read sees only durable records, in offset order; below a partition's first kept offset
//!   it is `OffsetOutOfRange` with that offset. A long poll at the end answers as soon as a
//!   record is appended.
//! - Retention removes whole old data (segments, or chunks of rows) by age and by size; the
//!   offsets of what remains never change.
//! - Groups, their committed offsets, and shared-mode holds are durable; a restart keeps them
//!   (members get a fresh session, `offsets`-mode positions go back to the committed offsets).
//!
//! For the event store (a later feature) an append may carry an [`Expectation`]: the whole
//! append goes to one partition only if that partition's next offset is the expected one,
//! otherwise nothing is appended. A partition's offset is then a global position.

use std::collections::BTreeMap;

use async_trait::async_trait;
use sluice_core::stream::group::CommitError;
use sluice_core::stream::shared::ReceiptError;
use sluice_core::stream::{NewRecord, Record, RecordError, StartAt, StreamConfig, StreamConfigPatch};
use sluice_core::{TimeMs, ValidationError};

use crate::StoreError;

/// A stream as views and lists show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamView {
    pub name: String,
    pub config: StreamConfig,
    pub created_at: TimeMs,
    pub partitions: Vec<PartitionView>,
    pub groups: Vec<GroupView>,
}

/// One partition: the first offset still kept, the next offset an append gets, bytes kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionView {
    pub first_offset: u64,
    pub next_offset: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum GroupMode {
    Offsets,
    Shared,
}

/// A group's settings. `session_timeout_ms` is for `offsets` mode; the rest for `shared`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GroupConfig {
    pub mode: GroupMode,
    pub start: StartAt,
    pub session_timeout_ms: u64,
    pub ack_timeout_ms: u64,
    pub max_deliveries: u32,
    pub dead_letter_queue: Option<String>,
    pub key_ordered: bool,
}

impl Default for GroupConfig {
    fn default() -> Self {
        use sluice_core::stream::limits::*;
        GroupConfig {
            mode: GroupMode::Offsets,
            start: StartAt::Earliest,
            session_timeout_ms: SESSION_TIMEOUT_MS_DEFAULT,
            ack_timeout_ms: ACK_TIMEOUT_MS_DEFAULT,
            max_deliveries: MAX_DELIVERIES_DEFAULT,
            dead_letter_queue: None,
            key_ordered: false,
        }
    }
}

impl GroupConfig {
    pub fn validate(&self) -> Result<(), ValidationError> {
        use sluice_core::stream::limits::*;
        let range = |field: &str, v: u64, lo: u64, hi: u64| {
            if v < lo || v > hi { Err(ValidationError::new(field, format!("must be {lo} to {hi}"))) } else { Ok(()) }
        };
        range("session_timeout_ms", self.session_timeout_ms, SESSION_TIMEOUT_MS_MIN, SESSION_TIMEOUT_MS_MAX)?;
        range("ack_timeout_ms", self.ack_timeout_ms, ACK_TIMEOUT_MS_MIN, ACK_TIMEOUT_MS_MAX)?;
        range("max_deliveries", u64::from(self.max_deliveries), 1, u64::from(MAX_DELIVERIES_MAX))?;
        if let Some(q) = &self.dead_letter_queue {
            sluice_core::name::validate_queue_name(q)
                .map_err(|e| ValidationError::new("dead_letter_queue", e.message))?;
        }
        if self.mode == GroupMode::Offsets && (self.dead_letter_queue.is_some() || self.key_ordered) {
            return Err(ValidationError::new(
                if self.key_ordered { "key_ordered" } else { "dead_letter_queue" },
                "applies to shared groups only; offsets groups keep order per partition",
            ));
        }
        Ok(())
    }

    /// The same group, as far as creating it again is concerned.
    pub fn same(&self, other: &GroupConfig) -> bool {
        self == other
    }
}

/// A group as views show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView {
    pub name: String,
    pub config: GroupConfig,
    pub created_at: TimeMs,
    /// `offsets` mode: the group's generation and its live members.
    pub generation: u64,
    pub members: Vec<String>,
    pub partitions: Vec<GroupPartitionView>,
    /// `shared` mode: records held by members now.
    pub in_flight: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPartitionView {
    /// `offsets`: the committed offset; `shared`: the lowest offset not yet done.
    pub committed: u64,
    /// Records from `committed` to the partition's end.
    pub lag: u64,
    pub owner: Option<String>,
}

/// An appended record's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub partition: u32,
    pub offset: u64,
    pub timestamp_ms: TimeMs,
    /// A retry within the dedup window: the original's place, nothing appended.
    pub duplicate: bool,
}

/// The condition of an append for optimistic concurrency (the event store's hook).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expectation {
    pub partition: u32,
    pub next_offset: u64,
}

/// Where a read starts: an offset (inclusive), or the first record at or after a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFrom {
    Offset(u64),
    Time(TimeMs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequest {
    pub partition: u32,
    pub from: ReadFrom,
    /// At most this many records (1 to `READ_RECORDS_MAX`), and at most `READ_BYTES_MAX` of
    /// bodies (at least one record if one is there).
    pub max: u32,
    /// Long poll at the end of the partition, at most `READ_WAIT_MS_MAX`.
    pub wait_ms: u64,
}

impl ReadRequest {
    pub fn validate(&self) -> Result<(), ValidationError> {
        use sluice_core::stream::limits::*;
        if self.max == 0 || self.max > READ_RECORDS_MAX {
            return Err(ValidationError::new("max", format!("must be 1 to {READ_RECORDS_MAX}")));
        }
        if self.wait_ms > READ_WAIT_MS_MAX {
            return Err(ValidationError::new("wait_ms", format!("must be at most {READ_WAIT_MS_MAX}")));
        }
        Ok(())
    }
}

/// What a read returns, with the partition's bounds at the time of the read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadBatch {
    pub records: Vec<Record>,
    pub first_offset: u64,
    pub next_offset: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    pub member: String,
    pub max: u32,
    pub wait_ms: u64,
}

/// One record of a fetch: `shared` mode adds its receipt and how often it was handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedRecord {
    pub record: Record,
    pub receipt: Option<String>,
    pub deliveries: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// `offsets` mode: the group's generation, to commit with, and the member's partitions.
    pub generation: Option<u64>,
    pub partitions: Vec<u32>,
    pub records: Vec<FetchedRecord>,
}

/// Where a seek goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeekTo {
    Offset(u64),
    Time(TimeMs),
}

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Records removed by retention.
    pub records_removed: u64,
    /// Shared-mode records moved to a dead-letter queue, or dropped without one.
    pub dead_lettered: u64,
    pub dropped: u64,
}

/// Every error of a log store call; a call that returns one changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    #[error("no stream named {0:?}")]
    StreamNotFound(String),
    #[error("stream {0:?} exists with different settings")]
    StreamExists(String),
    #[error("stream {stream:?} has no group named {group:?}")]
    GroupNotFound { stream: String, group: String },
    #[error("group {group:?} of stream {stream:?} exists with different settings")]
    GroupExists { stream: String, group: String },
    #[error("partition {partition} does not exist: the stream has partitions 0 to {}", .partitions.saturating_sub(1))]
    NoSuchPartition { partition: u32, partitions: u32 },
    #[error("offset {offset} of partition {partition} is below its first kept offset {first_offset}")]
    OffsetOutOfRange { partition: u32, offset: u64, first_offset: u64, next_offset: u64 },
    #[error(transparent)]
    Commit(#[from] CommitError),
    #[error("group {group:?} is a {mode} group; this call is for the other mode")]
    WrongMode { group: String, mode: &'static str },
    #[error("the dead-letter queue {0:?} does not exist; create it first")]
    DeadLetterQueueNotFound(String),
    #[error("partition {partition} is at offset {actual}, not the expected {expected}; nothing was appended")]
    ExpectationFailed { partition: u32, expected: u64, actual: u64 },
    #[error("{0}")]
    LimitExceeded(String),
    #[error("this store keeps no streams")]
    Unsupported,
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Per-entry outcomes of an append (in the order given).
pub type AppendResults = Vec<Result<Appended, RecordError>>;
/// Per-receipt outcomes of ack, release and nack.
pub type ReceiptResults = Vec<Result<(), ReceiptError>>;

/// The operations of a log engine. Every method's default refuses with `Unsupported`, for the
/// test doubles and fuzzing stores that keep no streams; every backend implements them all, and
/// the conformance suite (`conformance/log.rs`) checks that it does.
#[async_trait]
pub trait LogStore: Send + Sync + 'static {
    /// Creates a stream; `true` when new. The same settings again answer the existing stream;
    /// different ones are `StreamExists`.
    async fn create_stream(&self, name: &str, config: StreamConfig) -> Result<(StreamView, bool), LogError> {
        let _ = (name, config);
        Err(LogError::Unsupported)
    }
    async fn get_stream(&self, name: &str) -> Result<StreamView, LogError> {
        let _ = name;
        Err(LogError::Unsupported)
    }
    /// Streams whose names start with `prefix`, after `after` in name order, at most `limit`.
    async fn list_streams(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Vec<StreamView>, LogError> {
        let _ = (prefix, after, limit);
        Err(LogError::Unsupported)
    }
    async fn update_stream(&self, name: &str, patch: StreamConfigPatch) -> Result<StreamView, LogError> {
        let _ = (name, patch);
        Err(LogError::Unsupported)
    }
    /// Deletes the stream, its records and its groups.
    async fn delete_stream(&self, name: &str) -> Result<(), LogError> {
        let _ = name;
        Err(LogError::Unsupported)
    }
    /// Appends up to `APPEND_RECORDS_MAX` records; each entry answers its place or why it was
    /// refused. With an `expect`ation, every record goes to its partition and the whole append
    /// is refused (`ExpectationFailed`) unless the partition's next offset is the expected one.
    async fn append(
        &self,
        stream: &str,
        records: Vec<NewRecord>,
        expect: Option<Expectation>,
    ) -> Result<AppendResults, LogError> {
        let _ = (stream, records, expect);
        Err(LogError::Unsupported)
    }
    /// Reads one partition without a group, long-polling at its end.
    async fn read(&self, stream: &str, request: ReadRequest) -> Result<ReadBatch, LogError> {
        let _ = (stream, request);
        Err(LogError::Unsupported)
    }
    /// Creates a group; `true` when new; the same settings again answer it, different ones are
    /// `GroupExists`.
    async fn create_group(&self, stream: &str, name: &str, config: GroupConfig) -> Result<(GroupView, bool), LogError> {
        let _ = (stream, name, config);
        Err(LogError::Unsupported)
    }
    async fn get_group(&self, stream: &str, group: &str) -> Result<GroupView, LogError> {
        let _ = (stream, group);
        Err(LogError::Unsupported)
    }
    async fn delete_group(&self, stream: &str, group: &str) -> Result<(), LogError> {
        let _ = (stream, group);
        Err(LogError::Unsupported)
    }
    /// A member's fetch: `offsets` mode joins the member, reads its partitions from their
    /// positions; `shared` mode hands out records with receipts (key order kept if asked).
    /// Long-polls up to `wait_ms` when there is nothing to hand out.
    async fn fetch(&self, stream: &str, group: &str, request: FetchRequest) -> Result<Fetched, LogError> {
        let _ = (stream, group, request);
        Err(LogError::Unsupported)
    }
    /// `offsets` mode: commits the next offsets to read, all or nothing (see `group.rs`).
    async fn commit(
        &self,
        stream: &str,
        group: &str,
        member: &str,
        generation: u64,
        offsets: BTreeMap<u32, u64>,
    ) -> Result<(), LogError> {
        let _ = (stream, group, member, generation, offsets);
        Err(LogError::Unsupported)
    }
    /// Resets one partition of a group to an offset (kept within the partition) or the first
    /// record at or after a time; answers the offset it was set to.
    async fn seek(&self, stream: &str, group: &str, partition: u32, to: SeekTo) -> Result<u64, LogError> {
        let _ = (stream, group, partition, to);
        Err(LogError::Unsupported)
    }
    /// `shared` mode: ends deliveries (`ack`), gives records back (`release`: not a failure;
    /// `nack`: a failure, dead-lettered after `max_deliveries`).
    async fn ack_shared(&self, stream: &str, group: &str, receipts: Vec<String>) -> Result<ReceiptResults, LogError> {
        let _ = (stream, group, receipts);
        Err(LogError::Unsupported)
    }
    async fn release_shared(
        &self,
        stream: &str,
        group: &str,
        receipts: Vec<String>,
        error: Option<String>,
    ) -> Result<ReceiptResults, LogError> {
        let _ = (stream, group, receipts, error);
        Err(LogError::Unsupported)
    }
    async fn nack_shared(
        &self,
        stream: &str,
        group: &str,
        receipts: Vec<String>,
        error: Option<String>,
    ) -> Result<ReceiptResults, LogError> {
        let _ = (stream, group, receipts, error);
        Err(LogError::Unsupported)
    }
    /// Applies retention and ends shared-mode holds whose ack timeout passed (dead-lettering
    /// exhausted records). The services call it periodically.
    async fn sweep_streams(&self) -> Result<SweepReport, LogError> {
        Err(LogError::Unsupported)
    }
}

/// Checks an append's size before anything else.
pub fn validate_append(records: &[NewRecord]) -> Result<(), ValidationError> {
    use sluice_core::stream::limits::APPEND_RECORDS_MAX;
    if records.is_empty() || records.len() > APPEND_RECORDS_MAX {
        return Err(ValidationError::new("records", format!("an append holds 1 to {APPEND_RECORDS_MAX} records")));
    }
    Ok(())
}
