//! The storage boundary: the traits every backend implements, one per concern, and the
//! conformance suite (`conformance`, one module per trait) every backend must pass.
//!
//! A store is the whole engine behind the services and the HTTP surface: it applies the rules
//! (`sluice_core::Broker` for the embedded backend, SQL for PostgreSQL), makes the result
//! durable, and only then answers. Nothing above it knows about disks or databases.
//!
//! - [`QueueStore`] (`queue.rs`): queues and messages.
//! - [`RecordStore`] (`records.rs`): small durable configuration values by kind and key
//!   (topics, subscriptions, and the configuration of every later feature), written through the
//!   same durable path, so that features above the store need no storage layer of their own.
//! - [`StoreStatus`] (`status.rs`): whether the store refuses calls, and its running totals,
//!   kept in one [`Counters`] type by every backend.
//! - [`CommitStore`] (`commit.rs`): several sends and record writes, with compare-and-swap
//!   conditions, applied atomically in one durable batch or transaction, or not at all.
//! - [`LogStore`] (`log.rs`): streams, append-only partitioned logs with gapless offsets, and
//!   their consumer groups; the event store reuses it (appends with an expectation).
//! - [`JobStore`] (`jobs.rs`): async jobs, each call one atomic state transition.
//! - [`EventStore`] (`events.rs`): the event store's streams (expected-version appends) and the
//!   one global order of their events (`$all`), gapless in commit order.
//! - [`RateStore`] (`rate.rs`): token buckets of rate limits, shared by every node.
//!
//! [`Store`] is all of them together, what a backend is and what `serve` hands the services.
//! A part that needs one concern only takes that trait (`Arc<dyn RecordStore>`), so that its
//! tests can stand in for that concern alone; a wrapper that changes one concern implements
//! that trait and is combined with the wrapped store's other concerns by [`StoreParts`].

mod commit;
pub mod conformance;
mod events;
mod jobs;
mod log;
mod parts;
mod queue;
mod rate;
mod records;
mod status;

use sluice_core::jobs::JobError;
use sluice_core::{BrokerError, ValidationError};

pub use commit::{
    COMMIT_MESSAGES_MAX, COMMIT_WRITES_MAX, CommitStore, Committed, Conflict, OUTCOME_PREFIX_BYTES_MAX,
    OUTCOMES_BYTES_MAX, Refused, StoredAppended, StoredDepth, StoredOutcome, StoredSent, Write, WriteOutcome,
    split_outcomes, validate_commit, with_outcomes,
};
pub use events::{
    AllEvents, AllRead, AppendedEvents, Direction, EventError, EventStore, StoredEvent, StreamEvents, StreamRead,
    validate_append_events,
};
pub use jobs::{
    ClaimedJob, EnqueuedJob, HeartbeatAnswer, JOB_CALLBACK_DLQ, JOB_CALLBACK_FORMAT, JOB_CALLBACK_QUEUE,
    JOB_LIST_SCAN_MAX, JobCallback, JobListRequest, JobPage, JobStore, JobView, job_callback_queue_attributes,
    parse_lease, validate_wait_ms,
};
pub use log::{
    AppendResults, Appended, Expectation, FetchRequest, Fetched, FetchedRecord, GroupConfig, GroupMode,
    GroupPartitionView, GroupView, LogError, LogStore, PartitionView, ReadBatch, ReadFrom, ReadRequest, ReceiptResults,
    SeekTo, StreamView, SweepReport, validate_append,
};
pub use parts::StoreParts;
pub use queue::{
    EntryResults, NackEntry, PeekedMessage, QueueStore, ReceiveRequest, ReceivedMessage, StoredMessage, VisibilityRule,
};
pub use rate::{RATE_KEY_LEN_MAX, RateStore, validate_rate_key};
pub use records::{
    RECORD_KEY_LEN_MAX, RECORD_KIND_LEN_MAX, RECORD_LIST_LIMIT_MAX, RECORD_VALUE_BYTES_MAX, Record, RecordStore,
    validate_record_key, validate_record_list, validate_record_value,
};
pub use status::{Counters, StoreCounters, StoreStatus};

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
    /// A job call was refused (unknown job, stale lease, a finished job, a bad field); the
    /// store is unchanged.
    #[error(transparent)]
    Job(#[from] JobError),
}

impl From<ValidationError> for StoreError {
    fn from(e: ValidationError) -> Self {
        StoreError::Broker(BrokerError::Invalid(e))
    }
}

/// A whole backend: every concern's trait. Implemented for every type that implements them
/// all, so a backend implements the concerns and is a `Store` by that.
pub trait Store:
    QueueStore + RecordStore + CommitStore + LogStore + JobStore + EventStore + RateStore + StoreStatus
{
}

impl<T: QueueStore + RecordStore + CommitStore + LogStore + JobStore + EventStore + RateStore + StoreStatus + ?Sized>
    Store for T
{
}

/// The store traits, for `use sluice_store::prelude::*`: calling a concern's method on a
/// `dyn Store` needs that concern's trait in scope.
pub mod prelude {
    pub use crate::{
        CommitStore, EventStore, JobStore, LogStore, QueueStore, RateStore, RecordStore, Store, StoreStatus,
    };
}
