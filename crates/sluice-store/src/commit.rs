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

use crate::records::{RECORD_VALUE_BYTES_MAX, validate_record_key, validate_record_value};
use crate::{Appended, StoreError};

/// The most bytes the outcomes of one commit take in [`with_outcomes`]'s layout: at most
/// `COMMIT_MESSAGES_MAX` sends and appends of at most 320 bytes each (an id, a sequence
/// number, a bounded queue's depth after it, or a place, in JSON), and a few bytes per write.
pub const OUTCOMES_BYTES_MAX: usize = COMMIT_MESSAGES_MAX * 320 + COMMIT_WRITES_MAX * 16;
/// The most bytes of its own a `Write::RecordOutcomes` value holds.
pub const OUTCOME_PREFIX_BYTES_MAX: usize = RECORD_VALUE_BYTES_MAX - OUTCOMES_BYTES_MAX - 4;

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
    /// Writes a record whose value is `value` followed by the outcomes of every earlier write
    /// of this commit, as [`with_outcomes`] lays them out (read back with [`split_outcomes`]):
    /// the message ids, sequence numbers and stream offsets the store chose, which the writer of
    /// the commit cannot know beforehand. With `expected`, only over a record that holds it now
    /// (refused with [`Conflict::RecordChanged`] otherwise, as `ReplaceRecord`); without, it
    /// creates or replaces. This is how an idempotency key's answer commits with its effect.
    /// `value` is at most [`OUTCOME_PREFIX_BYTES_MAX`], which leaves room for the outcomes of
    /// a commit's largest sends and appends inside `RECORD_VALUE_BYTES_MAX`. A later write of
    /// the same commit that compares this record sees `value` alone.
    RecordOutcomes { kind: String, key: String, expected: Option<Vec<u8>>, value: Vec<u8> },
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
            Write::RecordOutcomes { kind, key, value, .. } => {
                validate_record_key(kind, key)?;
                if value.len() > OUTCOME_PREFIX_BYTES_MAX {
                    return Err(ValidationError::new(
                        "value",
                        format!(
                            "a record written with outcomes holds at most {OUTCOME_PREFIX_BYTES_MAX} bytes of its own"
                        ),
                    ));
                }
            }
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

/// One write's outcome as [`with_outcomes`] stores it: ids as strings, so that any reader can
/// render them without this crate's types.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoredOutcome {
    Sent(Vec<StoredSent>),
    Recorded,
    Appended(Vec<StoredAppended>),
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredSent {
    pub id: String,
    pub seq: u64,
    pub duplicate: bool,
    /// The queue's `reject_to_dlq` sent it to the dead-letter queue.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dead_lettered: bool,
    /// The queue's depth after it, for a queue with a depth limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<StoredDepth>,
}

/// A bounded queue's depth after a send, with its limits (core's `DepthReport`), under the
/// names the native API answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredDepth {
    pub messages: u64,
    pub bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth_messages: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredAppended {
    pub partition: u32,
    pub offset: u64,
    pub timestamp_ms: u64,
    pub duplicate: bool,
}

impl From<&WriteOutcome> for StoredOutcome {
    fn from(o: &WriteOutcome) -> Self {
        match o {
            WriteOutcome::Sent(sent) => StoredOutcome::Sent(
                sent.iter()
                    .map(|s| StoredSent {
                        id: s.id.to_string(),
                        seq: s.seq,
                        duplicate: s.duplicate,
                        dead_lettered: s.dead_lettered,
                        depth: s.depth.map(|d| StoredDepth {
                            messages: d.depth.messages,
                            bytes: d.depth.bytes,
                            max_depth_messages: d.limits.max_messages,
                            max_depth_bytes: d.limits.max_bytes,
                        }),
                    })
                    .collect(),
            ),
            WriteOutcome::Recorded => StoredOutcome::Recorded,
            WriteOutcome::Appended(places) => StoredOutcome::Appended(
                places
                    .iter()
                    .map(|a| StoredAppended {
                        partition: a.partition,
                        offset: a.offset,
                        timestamp_ms: a.timestamp_ms,
                        duplicate: a.duplicate,
                    })
                    .collect(),
            ),
        }
    }
}

/// The value a `Write::RecordOutcomes` stores: the length of `value` (4 bytes, big-endian),
/// `value`, then the JSON array of `outcomes`. Every backend writes it with this function, so
/// that the layout is one contract.
pub fn with_outcomes(value: &[u8], outcomes: &[WriteOutcome]) -> Vec<u8> {
    let stored: Vec<StoredOutcome> = outcomes.iter().map(StoredOutcome::from).collect();
    let json = serde_json::to_vec(&stored).expect("outcomes serialize");
    let mut out = Vec::with_capacity(4 + value.len() + json.len());
    out.extend_from_slice(&(value.len() as u32).to_be_bytes());
    out.extend_from_slice(value);
    out.extend_from_slice(&json);
    out
}

/// Reads back what [`with_outcomes`] wrote: the value and the outcomes; `None` if `stored` is
/// not in that layout.
pub fn split_outcomes(stored: &[u8]) -> Option<(&[u8], Vec<StoredOutcome>)> {
    let len = u32::from_be_bytes(stored.get(..4)?.try_into().ok()?) as usize;
    let value = stored.get(4..4 + len)?;
    let outcomes = serde_json::from_slice(stored.get(4 + len..)?).ok()?;
    Some((value, outcomes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::{MessageId, Sent};

    #[test]
    fn outcomes_round_trip_after_the_value() {
        let outcomes = vec![
            WriteOutcome::Sent(vec![Sent::new(7, MessageId(1))]),
            WriteOutcome::Recorded,
            WriteOutcome::Appended(vec![Appended { partition: 2, offset: 9, timestamp_ms: 5, duplicate: true }]),
        ];
        let stored = with_outcomes(b"prefix", &outcomes);
        let (value, read) = split_outcomes(&stored).expect("the layout");
        assert_eq!(value, b"prefix");
        assert_eq!(read.len(), 3);
        assert_eq!(
            read[0],
            StoredOutcome::Sent(vec![StoredSent {
                id: MessageId(1).to_string(),
                seq: 7,
                duplicate: false,
                dead_lettered: false,
                depth: None
            }])
        );
        assert_eq!(read[1], StoredOutcome::Recorded);
        assert_eq!(
            read[2],
            StoredOutcome::Appended(vec![StoredAppended { partition: 2, offset: 9, timestamp_ms: 5, duplicate: true }])
        );
        assert!(split_outcomes(b"\0\0\0\x09short").is_none());
        // Outcomes stored before sends recorded dead-lettering and depth still read.
        let older: StoredSent = serde_json::from_str(r#"{"id":"x","seq":1,"duplicate":false}"#).unwrap();
        assert_eq!((older.dead_lettered, older.depth), (false, None));
    }

    #[test]
    fn the_largest_outcomes_fit_their_budget() {
        use sluice_core::overflow::{Depth, DepthLimits, DepthReport};
        let depth = DepthReport {
            depth: Depth { messages: u64::MAX, bytes: u64::MAX },
            limits: DepthLimits { max_messages: Some(u64::MAX), max_bytes: Some(u64::MAX), ..Default::default() },
        };
        let sent = (0..COMMIT_MESSAGES_MAX as u64)
            .map(|i| Sent {
                duplicate: true,
                dead_lettered: true,
                depth: Some(depth),
                ..Sent::new(u64::MAX - i, MessageId(u128::MAX - i as u128))
            })
            .collect();
        let stored = with_outcomes(&[], &[WriteOutcome::Sent(sent)]);
        assert!(stored.len() <= OUTCOMES_BYTES_MAX + 4, "{} bytes", stored.len());
    }
}
