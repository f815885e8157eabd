//! A store's health and running totals: what `/readyz` and `/metrics` read.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::StoreError;

/// How a store is doing as a whole, for health probes and metrics.
pub trait StoreStatus: Send + Sync + 'static {
    /// `Some(error)` while the store refuses every call, the error each call gets: `Poisoned`
    /// once a write or sync failed (until restart), `StorageFull` while the disk is full. `None`
    /// for a store that fails call by call rather than as a whole (PostgreSQL).
    fn refusal(&self) -> Option<StoreError>;
    /// Running totals since the process started, for metrics.
    fn counters(&self) -> StoreCounters;
    /// Calls waiting for the store's write pipeline (the embedded writer's queue), for load
    /// shedding; `None` for a store without one (PostgreSQL: its pool bounds the calls).
    fn backlog(&self) -> Option<u64> {
        None
    }
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
    /// Job attempts whose lease lapsed, and finished jobs pruned at the end of their
    /// `result_ttl_ms` or to keep their queue's budget.
    /// Depth limits (`max_depth_*`, `overflow`, `expired_to_dlq`): sends refused because their
    /// queue was full, old messages `drop_head` moved to the dead-letter queue, new ones
    /// `reject_to_dlq` sent there, and expired messages `expired_to_dlq` moved there.
    pub messages_refused_full: u64,
    pub messages_dropped_head: u64,
    pub messages_rejected_to_dlq: u64,
    pub messages_expired_to_dlq: u64,
    pub jobs_lapsed: u64,
    pub jobs_pruned_ttl: u64,
    pub jobs_pruned_budget: u64,
}

/// The running totals as a backend keeps them: atomics it adds to as calls succeed, read as
/// one [`StoreCounters`]. One definition for every backend, so a new figure is added once.
#[derive(Debug, Default)]
pub struct Counters {
    pub messages_sent: AtomicU64,
    pub messages_received: AtomicU64,
    pub messages_acked: AtomicU64,
    pub messages_dead_lettered: AtomicU64,
    pub messages_expired: AtomicU64,
    pub batches_committed: AtomicU64,
    pub records_committed: AtomicU64,
    /// Depth limits (`max_depth_*`, `overflow`, `expired_to_dlq`): sends refused because their
    /// queue was full, old messages `drop_head` moved to the dead-letter queue, new ones
    /// `reject_to_dlq` sent there, and expired messages `expired_to_dlq` moved there.
    pub messages_refused_full: AtomicU64,
    pub messages_dropped_head: AtomicU64,
    pub messages_rejected_to_dlq: AtomicU64,
    pub messages_expired_to_dlq: AtomicU64,
    pub jobs_lapsed: AtomicU64,
    pub jobs_pruned_ttl: AtomicU64,
    pub jobs_pruned_budget: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// One durable write of `records` records (nothing when it wrote none).
    pub fn committed(&self, records: u64) {
        if records > 0 {
            Self::add(&self.batches_committed, 1);
            Self::add(&self.records_committed, records);
        }
    }

    pub fn snapshot(&self) -> StoreCounters {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StoreCounters {
            messages_sent: get(&self.messages_sent),
            messages_received: get(&self.messages_received),
            messages_acked: get(&self.messages_acked),
            messages_dead_lettered: get(&self.messages_dead_lettered),
            messages_expired: get(&self.messages_expired),
            batches_committed: get(&self.batches_committed),
            records_committed: get(&self.records_committed),
            messages_refused_full: get(&self.messages_refused_full),
            messages_dropped_head: get(&self.messages_dropped_head),
            messages_rejected_to_dlq: get(&self.messages_rejected_to_dlq),
            messages_expired_to_dlq: get(&self.messages_expired_to_dlq),
            jobs_lapsed: get(&self.jobs_lapsed),
            jobs_pruned_ttl: get(&self.jobs_pruned_ttl),
            jobs_pruned_budget: get(&self.jobs_pruned_budget),
        }
    }
}
