//! Atomic commits across concerns: several writes (message sends and record changes, with
//! compare-and-swap conditions) applied all together in one durable batch or transaction, or not
//! at all.
//!
//! This is what a feature needs when its own state and its effect must never part: a schedule
//! records that a tick fired in the same write that sends the tick's message (so a restart can
//! neither double nor lose it, and of two nodes racing for the tick exactly one wins the
//! condition), an idempotency key's stored answer commits with the effect it answers for.
//! A schedule whose target is a stream appends the tick's record in that same commit.

use async_trait::async_trait;
use sluice_core::stream::{NewRecord, RecordError};
use sluice_core::{EntryError, NewMessage, Sent, ValidationError};

use crate::records::{validate_record_key, validate_record_value};
use crate::{Appended, StoreError};

/// Most writes in one commit, and most messages all its sends and records all its appends carry
/// together.
pub const COMMIT_WRITES_MAX: usize = 1_000;
pub const COMMIT_MESSAGES_MAX: usize = 1_000;

/// One write of a commit. Writes apply in order: a later one sees what earlier ones did
/// (a record inserted by one write can be replaced by the next).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Sends messages into a queue, with `QueueStore::send`'s rules (a FIFO duplicate inside its
    /// window is answered with the original and enqueues nothing).
    Send { queue: String, messages: Vec<NewMessage> },
    /// Creates or replaces a record.
    PutRecord { kind: String, key: String, value: Vec<u8> },
    /// Creates a record; the commit is refused with [`Conflict::RecordExists`] if it exists.
    InsertRecord { kind: String, key: String, value: Vec<u8> },
    /// Replaces a record that holds `expected` now; refused with [`Conflict::RecordChanged`]
    /// if it holds anything else or does not exist.
    ReplaceRecord { kind: String, key: String, expected: Vec<u8>, value: Vec<u8> },
    /// Deletes a record if it exists.
    DeleteRecord { kind: String, key: String },
    /// Appends records to a stream, with `LogStore::append`'s rules (placement by partition,
    /// key or round robin; a `dedup_id` seen within the window is answered with the original's
    /// place and appends nothing). Every record must be one the stream takes, or the commit is
    /// refused: [`Conflict::StreamNotFound`], [`Conflict::RecordRefused`].
    Append { stream: String, records: Vec<NewRecord> },
}

/// What one write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Each message's id and sequence number (for a FIFO duplicate: the original's).
    Sent(Vec<Sent>),
    /// A record write.
    Recorded,
    /// Each appended record's place (for a dedup duplicate: the original's, `duplicate` set).
    Appended(Vec<Appended>),
}

/// Why a commit was refused. Nothing of it was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The index of the write that could not be applied.
    pub write: usize,
    pub conflict: Conflict,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Conflict {
    #[error("the record exists")]
    RecordExists,
    #[error("the record does not hold the expected value")]
    RecordChanged,
    /// The queue refuses this message (too large, a delay past retention, FIFO rules, …).
    #[error("message {message} is refused: {error}")]
    MessageRefused { message: usize, error: EntryError },
    #[error("no stream named {0:?}")]
    StreamNotFound(String),
    /// The stream refuses this record (too large, a partition it does not have, dedup ids full).
    #[error("record {record} is refused: {error}")]
    RecordRefused { record: usize, error: RecordError },
}

/// The answer of a commit that reached the store: every write's outcome, or the refusal.
pub type Committed = Result<Vec<WriteOutcome>, Refused>;

/// Stores that apply several writes atomically. A call that returns an error changed nothing;
/// an unknown queue is `BrokerError::QueueNotFound` and a bad record kind, key or value is
/// `BrokerError::Invalid`, as for the single calls.
#[async_trait]
pub trait CommitStore: Send + Sync + 'static {
    /// Applies `writes` all together, durably (in the default durability mode) before it
    /// answers, or refuses them all. On every node of a shared backend, either every write is
    /// seen or none.
    async fn commit_all(&self, writes: Vec<Write>) -> Result<Committed, StoreError>;
}

/// Checks a commit's size and its records' kinds, keys and values, before a backend looks at
/// anything else.
pub fn validate_commit(writes: &[Write]) -> Result<(), ValidationError> {
    if writes.is_empty() || writes.len() > COMMIT_WRITES_MAX {
        return Err(ValidationError::new("writes", format!("a commit holds 1 to {COMMIT_WRITES_MAX} writes")));
    }
    let mut messages = 0usize;
    for write in writes {
        match write {
            Write::Send { messages: m, .. } => messages += m.len(),
            Write::PutRecord { kind, key, value }
            | Write::InsertRecord { kind, key, value }
            | Write::ReplaceRecord { kind, key, value, .. } => {
                validate_record_key(kind, key)?;
                validate_record_value(value)?;
            }
            Write::DeleteRecord { kind, key } => validate_record_key(kind, key)?,
            Write::Append { records, .. } => {
                crate::validate_append(records)?;
                messages += records.len();
            }
        }
    }
    if messages > COMMIT_MESSAGES_MAX {
        return Err(ValidationError::new(
            "messages",
            format!("a commit sends and appends at most {COMMIT_MESSAGES_MAX} messages and records in all"),
        ));
    }
    Ok(())
}
