//! The storage boundary: the [`Store`] trait every backend implements, and the conformance
//! suite (`conformance`) every backend must pass.
//!
//! A store is the whole engine behind the HTTP surface: it applies the broker's rules
//! (`sluice_core::Broker` for the embedded backend, SQL for PostgreSQL later), makes the result
//! durable, and only then answers. The server above it knows nothing about disks.
//!
//! Beside queues and messages a store keeps *records* (`records`): small durable configuration
//! values by kind and key (topics, subscriptions), written through the same durable path, so
//! that features above the store keep their configuration without a storage layer of their own.

pub mod conformance;
mod records;

use async_trait::async_trait;
use sluice_core::broker::{MoveOutcome, QueueView};
use sluice_core::limits::{RECEIVE_MESSAGES_MAX, RECEIVE_WAIT_MS_MAX, VISIBILITY_TIMEOUT_MS_MAX};
use sluice_core::message::MessageContent;
use sluice_core::{
    BrokerError, EntryError, MessageMeta, MessageState, NewMessage, QueueAttributes, QueueAttributesPatch, Sent,
    ValidationError,
};

pub use records::{
    RECORD_KEY_LEN_MAX, RECORD_KIND_LEN_MAX, RECORD_LIST_LIMIT_MAX, RECORD_VALUE_BYTES_MAX, Record,
    validate_record_key, validate_record_list, validate_record_value,
};

/// Errors that fail a whole store call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The request broke a rule (unknown queue, bad attribute, …); the store is unchanged.
    #[error(transparent)]
    Broker(#[from] BrokerError),
    /// A write or sync failed earlier; the store refuses every write until restarted, because
    /// what is on disk can no longer be known.
    #[error("storage is poisoned after a failed write or sync ({0}); restart the server")]
    Poisoned(String),
    /// The disk holding the data is full: the write was refused and nothing of it was
    /// acknowledged. Unlike `Poisoned`, the store resumes by itself once space is freed.
    #[error("the disk holding the data is full ({0}); writes resume once space is freed")]
    StorageFull(String),
    /// The database behind the store (PostgreSQL) could not be reached or failed this call:
    /// connection refused or lost, a failover, a serialization failure or deadlock, no pooled
    /// connection in time. Unlike `Poisoned`, nothing is sticky: the next call asks the database
    /// again, so a retry succeeds once it is back, without a restart. The call changed nothing,
    /// except where no client of a database can rule it out: a connection lost while its COMMIT
    /// was in flight (the change may or may not have been made), and a redrive step
    /// (`move_messages`) that moved some messages, each whole, before it failed.
    #[error("the database is unavailable or failed this call ({0}); retry")]
    Unavailable(String),
    /// The store is shutting down.
    #[error("storage is shutting down")]
    ShuttingDown,
}

impl From<ValidationError> for StoreError {
    fn from(e: ValidationError) -> Self {
        StoreError::Broker(BrokerError::Invalid(e))
    }
}

/// A receive call's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiveRequest {
    /// At most this many messages (1 to `RECEIVE_MESSAGES_MAX`).
    pub max: u32,
    /// Long-poll wait when nothing is visible; the queue's `receive_wait_ms` when `None`.
    pub wait_ms: Option<u64>,
    /// Visibility timeout for these deliveries; the queue's when `None`.
    pub visibility_timeout_ms: Option<u64>,
}

impl ReceiveRequest {
    pub fn validate(&self) -> Result<(), ValidationError> {
        if self.max == 0 || self.max > RECEIVE_MESSAGES_MAX {
            return Err(ValidationError::new("max", format!("must be 1 to {RECEIVE_MESSAGES_MAX}")));
        }
        if let Some(w) = self.wait_ms
            && w > RECEIVE_WAIT_MS_MAX
        {
            return Err(ValidationError::new("wait_ms", format!("must be at most {RECEIVE_WAIT_MS_MAX}")));
        }
        if let Some(v) = self.visibility_timeout_ms
            && v > VISIBILITY_TIMEOUT_MS_MAX
        {
            return Err(ValidationError::new(
                "visibility_timeout_ms",
                format!("must be at most {VISIBILITY_TIMEOUT_MS_MAX}"),
            ));
        }
        Ok(())
    }
}

/// A message with everything stored about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    /// The message's sequence number: unique, increasing in send order; FIFO queues show it as
    /// the message's sequence number.
    pub seq: u64,
    pub meta: MessageMeta,
    pub content: MessageContent,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    pub receipt: String,
    pub message: StoredMessage,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeekedMessage {
    pub state: MessageState,
    pub message: StoredMessage,
}

/// One entry of a nack call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NackEntry {
    pub receipt: String,
    pub delay_ms: u64,
    pub error: Option<String>,
}

pub type EntryResults<T> = Vec<Result<T, EntryError>>;

/// The operations of a queue engine. Every mutating call returns only after its effect is
/// durable (in the default durability mode); a call that returns an error changed nothing.
/// Batch calls answer per entry, in the order given; a bad entry never fails the others.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Creates a queue; `true` when it is new. The same name with the same attributes (tags
    /// aside) returns the existing queue; different attributes are `BrokerError::QueueExists`.
    async fn create_queue(&self, name: &str, attributes: QueueAttributes) -> Result<(QueueView, bool), StoreError>;
    async fn get_queue(&self, name: &str) -> Result<QueueView, StoreError>;
    /// Queues whose names start with `prefix`, after `after` in name order, at most `limit`.
    async fn list_queues(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Vec<QueueView>, StoreError>;
    async fn update_queue(&self, name: &str, patch: QueueAttributesPatch) -> Result<QueueView, StoreError>;
    /// Deletes the queue and every message in it.
    async fn delete_queue(&self, name: &str) -> Result<(), StoreError>;
    /// Deletes every message in the queue, in flight or not; returns how many.
    async fn purge_queue(&self, name: &str) -> Result<u64, StoreError>;
    /// Accepts messages; each entry gets the new message's id and sequence number (for a FIFO
    /// duplicate inside the dedup window: the original's, with `duplicate` set and nothing
    /// enqueued) or why it was refused.
    async fn send(&self, queue: &str, messages: Vec<NewMessage>) -> Result<EntryResults<Sent>, StoreError>;
    /// Delivers up to `request.max` messages, waiting up to the long-poll time for the first
    /// one; an empty vector when none came in time.
    async fn receive(&self, queue: &str, request: ReceiveRequest) -> Result<Vec<ReceivedMessage>, StoreError>;
    async fn ack(&self, queue: &str, receipts: Vec<String>) -> Result<EntryResults<()>, StoreError>;
    /// Sets each in-flight message's remaining visibility (`0` releases it).
    async fn change_visibility(&self, queue: &str, entries: Vec<(String, u64)>)
    -> Result<EntryResults<()>, StoreError>;
    /// As `change_visibility`, with SQS's rule (`Broker::change_visibility_lenient`): a message
    /// whose visibility timeout passed and that nobody received since is hidden again instead
    /// of refused with `NotInFlight`.
    async fn change_visibility_lenient(
        &self,
        queue: &str,
        entries: Vec<(String, u64)>,
    ) -> Result<EntryResults<()>, StoreError>;
    async fn nack(&self, queue: &str, entries: Vec<NackEntry>) -> Result<EntryResults<()>, StoreError>;
    /// Up to `limit` messages in send order, without receiving them.
    async fn peek(&self, queue: &str, limit: usize) -> Result<Vec<PeekedMessage>, StoreError>;
    /// One redrive step: moves up to `max` visible messages of `from` to `to`, or each back to
    /// the queue it was dead-lettered from when `to` is `None`.
    async fn move_messages(&self, from: &str, to: Option<&str>, max: u64) -> Result<MoveOutcome, StoreError>;

    // Records: durable configuration values of a `kind` (`[a-z0-9_]`, at most
    // `RECORD_KIND_LEN_MAX` bytes) by `key` (1 to `RECORD_KEY_LEN_MAX` bytes of UTF-8 without
    // NUL), each at most `RECORD_VALUE_BYTES_MAX` bytes. Keys compare byte-wise in every
    // backend. Writes are durable before they answer, like every other write; reads see every
    // write that answered, on every node of a shared backend. A bad kind, key or value is
    // `BrokerError::Invalid` and changes nothing.

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

    /// `Some(error)` while the store refuses every call, the error each call gets: `Poisoned`
    /// once a write or sync failed (until restart), `StorageFull` while the disk is full. `None`
    /// for a store that fails call by call rather than as a whole (PostgreSQL).
    fn refusal(&self) -> Option<StoreError>;
    /// Running totals since the process started, for metrics.
    fn counters(&self) -> StoreCounters;
}

/// Running totals of what a store did since it opened (not persisted across restarts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreCounters {
    pub messages_sent: u64,
    pub messages_received: u64,
    pub messages_acked: u64,
    pub messages_dead_lettered: u64,
    pub messages_expired: u64,
    /// Write batches made durable, and the records in them (group-commit efficiency).
    pub batches_committed: u64,
    pub records_committed: u64,
}
