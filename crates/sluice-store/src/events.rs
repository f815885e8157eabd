//! The event store: per-aggregate streams of events appended with an expected version, and one
//! global order of every event (`$all`, by position).
//!
//! The rules are `sluice_core::events`'; a backend makes them durable. What every backend
//! promises (checked by `conformance/events.rs`):
//! - An append is all or nothing and answers only once durable. Its events get consecutive
//!   versions in their stream (from 0) and consecutive positions in `$all`.
//! - Positions are given in commit order with no gap a reader could pass and later see filled:
//!   a read of `$all` from position `p` answers the events from `p` on with no hole, and every
//!   later read sees the same events at the same positions. A position is never reused.
//! - A wrong expected version refuses the append whole (`WrongExpectedVersion` with the stream's
//!   actual last version) and changes nothing; a retry of an appended append (same event ids at
//!   the position its expectation names) answers the original versions and positions.
//! - A long poll of `$all` at its end answers as soon as an event is appended, on any node.
//!
//! Subscriptions and snapshots are the services' (records over `RecordStore`), because they
//! only need durable values written with compare-and-swap, which every backend has already.

use async_trait::async_trait;
use sluice_core::events::{AppendError, EventFilter, ExpectedVersion, NewEvent};
use sluice_core::{TimeMs, ValidationError};

use crate::StoreError;

/// An event as stored and read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredEvent {
    pub stream_id: String,
    pub version: u64,
    pub position: u64,
    pub id: String,
    pub r#type: String,
    /// JSON text.
    pub data: String,
    pub metadata: Option<String>,
    pub correlation_id: Option<String>,
    pub causation_id: Option<String>,
    pub time_ms: TimeMs,
}

/// What an append answers: its events' versions and positions (inclusive), and whether it was a
/// retry answered from the original (nothing appended).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendedEvents {
    pub first_version: u64,
    pub last_version: u64,
    pub first_position: u64,
    pub last_position: u64,
    pub duplicate: bool,
}

impl AppendedEvents {
    /// The answer for `count` (at least one) consecutive events from `first_version` at
    /// `first_position`.
    pub fn span(first_version: u64, first_position: u64, count: u64, duplicate: bool) -> AppendedEvents {
        AppendedEvents {
            first_version,
            last_version: first_version + count - 1,
            first_position,
            last_position: first_position + count - 1,
            duplicate,
        }
    }
}

/// Which way a stream is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Direction {
    Forward,
    Backward,
}

/// A read of one stream: from `from_version` (inclusive; `None` is the first visible event
/// forward, the last one backward), at most `max` events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamRead {
    pub from_version: Option<u64>,
    pub direction: Direction,
    pub max: u32,
}

/// A stream's events and its state at the time of the read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEvents {
    pub events: Vec<StoredEvent>,
    /// The stream's last visible version.
    pub last_version: u64,
    /// The first version readers see (above 0 after a soft delete and a new start).
    pub first_version: u64,
}

/// A read of `$all`: from `from_position` (inclusive), at most `max` events passing `filter`,
/// passing over at most `EVENT_SCAN_MAX` events, long-polling up to `wait_ms` at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllRead {
    pub from_position: u64,
    pub max: u32,
    pub filter: EventFilter,
    pub wait_ms: u64,
}

impl AllRead {
    pub fn validate(&self) -> Result<(), ValidationError> {
        use sluice_core::events::limits::{EVENT_READ_MAX, EVENT_WAIT_MS_MAX};
        if self.max == 0 || self.max > EVENT_READ_MAX {
            return Err(ValidationError::new("max", format!("must be 1 to {EVENT_READ_MAX}")));
        }
        if self.wait_ms > EVENT_WAIT_MS_MAX {
            return Err(ValidationError::new("wait_ms", format!("must be at most {EVENT_WAIT_MS_MAX}")));
        }
        self.filter.validate()
    }
}

/// What a read of `$all` answers: the events, where the next read goes on from (past every
/// event looked at, matching or not), and how many events the log holds (`head`: the next
/// position to be given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllEvents {
    pub events: Vec<StoredEvent>,
    pub next_position: u64,
    pub head: u64,
}

/// Every error of an event store call; a call that returns one changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error(transparent)]
    Append(#[from] AppendError),
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("this store keeps no events")]
    Unsupported,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl StreamRead {
    pub fn validate(&self) -> Result<(), ValidationError> {
        use sluice_core::events::limits::EVENT_READ_MAX;
        if self.max == 0 || self.max > EVENT_READ_MAX {
            return Err(ValidationError::new("max", format!("must be 1 to {EVENT_READ_MAX}")));
        }
        Ok(())
    }
}

/// The event store's operations. Every method's default refuses with `Unsupported`, for the
/// test doubles and fuzzing stores that keep no events; every backend implements them all.
#[async_trait]
pub trait EventStore: Send + Sync + 'static {
    /// Appends `events` (checked by `validate_events` first) to `stream_id` if `expected`
    /// holds, atomically; see the module's promises.
    async fn append_events(
        &self,
        stream_id: &str,
        expected: ExpectedVersion,
        events: Vec<NewEvent>,
    ) -> Result<AppendedEvents, EventError> {
        let _ = (stream_id, expected, events);
        Err(EventError::Unsupported)
    }
    /// Reads one stream; a stream that does not exist (or is deleted) is `StreamNotFound`.
    /// A read from past either end answers no events.
    async fn read_stream(&self, stream_id: &str, read: StreamRead) -> Result<StreamEvents, EventError> {
        let _ = (stream_id, read);
        Err(EventError::Unsupported)
    }
    /// Reads `$all` in position order (only what is durable), long-polling at the end.
    async fn read_all(&self, read: AllRead) -> Result<AllEvents, EventError> {
        let _ = read;
        Err(EventError::Unsupported)
    }
    /// Soft-deletes a stream (`hard`: for good). Its events keep their positions in `$all`.
    async fn delete_event_stream(&self, stream_id: &str, hard: bool) -> Result<(), EventError> {
        let _ = (stream_id, hard);
        Err(EventError::Unsupported)
    }
    /// The stream's last visible version, `None` when it does not exist for readers.
    async fn event_stream_version(&self, stream_id: &str) -> Result<Option<u64>, EventError> {
        let _ = stream_id;
        Err(EventError::Unsupported)
    }
}

/// Checks an append before anything else: the stream id and the events.
pub fn validate_append_events(stream_id: &str, events: &[NewEvent]) -> Result<(), ValidationError> {
    sluice_core::events::validate_stream_id(stream_id)?;
    sluice_core::events::validate_events(events)
}
