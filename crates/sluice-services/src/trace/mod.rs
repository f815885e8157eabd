//! The causal trace: every message, publish, push, stream record, event, job, saga and saga
//! step that carried a correlation id, listed by that id in causal order
//! (`GET /v1/trace/{correlation_id}`).
//!
//! Each write point records its entries after its own write is durable and before it answers,
//! in one commit of records (one extra durable write per traced request, none for a request
//! without a correlation id). So an answered write is always in its trace; a crash between the
//! write and its entries leaves an unanswered write without them, which its retry records. A
//! trace is an index for people, not a second copy of the data: a failed trace write is
//! logged and counted (`sluice_trace_dropped_total`) and never fails the write it describes.
//!
//! Entries are kept for the retention (`--trace-retention`, 7 days by default) and then
//! deleted by a sweep that every node runs every [`TRACE_SWEEP_MS`] on the services' clock;
//! deleting is idempotent, so nodes that sweep at once only repeat each other's work.

mod links;
mod model;

use std::sync::Arc;

use sluice_clock::Clock;
use sluice_store::{Store, StoreError, Write};
use tokio::task::JoinHandle;

pub use model::{
    TRACE_ENTRIES_READ_MAX, TRACE_FORMAT, TRACE_ID_LEN_MAX, TRACE_KIND, TRACE_RETENTION_MS_DEFAULT, TRACE_SWEEP_MS,
    TraceEntry, TraceKind, causal_order, correlation_prefix,
};

pub use links::{
    ATTRIBUTE_CAUSATION_ID, ATTRIBUTE_CORRELATION_ID, CommitLinks, Links, causation_attribute, causation_id, entries,
    message_links, publication_links, record_id, record_links,
};

use model::{TRACE_SWEEP_PAGE_MAX, key_at_ms};
use sluice_store::{COMMIT_WRITES_MAX, RECORD_LIST_LIMIT_MAX};

/// One correlation's entries in causal order, each with its depth below its first cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    pub correlation_id: String,
    pub entries: Vec<(TraceEntry, usize)>,
    /// More than [`TRACE_ENTRIES_READ_MAX`] entries: the oldest are listed.
    pub truncated: bool,
}

/// Records and reads traces over the store, on the services' clock.
pub struct Traces {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    retention_ms: u64,
}

impl Traces {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, retention_ms: u64) -> Traces {
        Traces { store, clock, retention_ms }
    }

    pub fn retention_ms(&self) -> u64 {
        self.retention_ms
    }

    /// Records the messages of a send to `queue` that carried a correlation id: each one's
    /// links beside its id (`None` for one the queue refused).
    pub async fn record_messages(&self, queue: &str, sent: impl IntoIterator<Item = (Option<Links>, Option<String>)>) {
        self.record(entries(TraceKind::Message, &format!("queue:{queue}"), sent)).await
    }

    /// Records `entries` (their times set to now) in one commit. Never fails the caller: a
    /// store error is logged and counted, since the write the entries describe is done.
    pub async fn record(&self, mut entries: Vec<TraceEntry>) {
        // A commit holds at most COMMIT_WRITES_MAX writes; a request records fewer entries
        // than that, but a caller with more is not refused.
        for chunk in entries.chunks_mut(COMMIT_WRITES_MAX) {
            let writes = self.writes(chunk);
            let count = chunk.len() as u64;
            match self.store.commit_all(writes).await {
                Ok(Ok(_)) => committed(chunk),
                Ok(Err(refused)) => {
                    tracing::warn!("the trace of {count} entries was refused by the store: {refused:?}");
                    metrics::counter!("sluice_trace_dropped_total").increment(count);
                }
                Err(e) => {
                    tracing::warn!("the trace of {count} entries could not be written: {e}");
                    metrics::counter!("sluice_trace_dropped_total").increment(count);
                }
            }
        }
    }

    /// The writes that record `entries`, their times set to now, for a caller that commits them
    /// with its own writes (a saga's start); call [`committed`] once they are.
    pub fn writes(&self, entries: &mut [TraceEntry]) -> Vec<Write> {
        let now = self.clock.now_ms();
        entries
            .iter_mut()
            .map(|e| {
                e.at_ms = now;
                Write::PutRecord {
                    kind: TRACE_KIND.to_string(),
                    key: e.key(&uuid::Uuid::now_v7().to_string()),
                    value: e.encode(),
                }
            })
            .collect()
    }

    /// The entries of `correlation_id` in causal order (the oldest
    /// [`TRACE_ENTRIES_READ_MAX`] of them), without the expired ones a sweep has not deleted
    /// yet. An id nothing carried has an empty trace.
    pub async fn read(&self, correlation_id: &str) -> Result<Trace, StoreError> {
        let prefix = correlation_prefix(correlation_id);
        let oldest_kept = self.clock.now_ms().saturating_sub(self.retention_ms);
        let mut entries = Vec::new();
        let mut after: Option<String> = None;
        let mut truncated = false;
        loop {
            let page = self.store.list_records(TRACE_KIND, &prefix, after.as_deref(), RECORD_LIST_LIMIT_MAX).await?;
            let last = page.len() < RECORD_LIST_LIMIT_MAX;
            after = page.last().map(|r| r.key.clone());
            for record in page {
                if entries.len() == TRACE_ENTRIES_READ_MAX {
                    truncated = true;
                    break;
                }
                if let Some(e) = TraceEntry::decode(&record.value)
                    && e.at_ms > oldest_kept
                {
                    entries.push(e);
                }
            }
            if last || truncated {
                break;
            }
        }
        Ok(Trace { correlation_id: correlation_id.to_string(), entries: causal_order(entries), truncated })
    }

    /// Starts the sweep; the first runs at once.
    pub fn spawn(self: &Arc<Self>) -> JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(e) = this.sweep_once().await {
                    tracing::warn!("the trace sweep failed (it runs again in {TRACE_SWEEP_MS} ms): {e}");
                }
                // A cadence, not a timer: what expired is decided by the clock at each sweep
                // (and at every read), like the idempotency sweep's.
                tokio::time::sleep(std::time::Duration::from_millis(TRACE_SWEEP_MS)).await;
            }
        })
    }

    /// One sweep: deletes every entry older than the retention; answers how many it deleted.
    pub async fn sweep_once(&self) -> Result<u64, StoreError> {
        let oldest_kept = self.clock.now_ms().saturating_sub(self.retention_ms);
        let mut deleted = 0;
        let mut after: Option<String> = None;
        loop {
            let page = self.store.list_records(TRACE_KIND, "", after.as_deref(), TRACE_SWEEP_PAGE_MAX).await?;
            let last = page.len() < TRACE_SWEEP_PAGE_MAX;
            after = page.last().map(|r| r.key.clone());
            for record in page {
                // A key this version cannot read is kept: a newer version wrote it.
                if key_at_ms(&record.key).is_some_and(|at| at <= oldest_kept)
                    && self.store.delete_record(TRACE_KIND, &record.key).await?
                {
                    deleted += 1;
                }
            }
            if last {
                break;
            }
        }
        if deleted > 0 {
            metrics::counter!("sluice_trace_entries_expired_total").increment(deleted);
        }
        Ok(deleted)
    }
}

/// Counts entries that were committed (`sluice_trace_entries_total{kind}`).
pub fn committed(entries: &[TraceEntry]) {
    for e in entries {
        metrics::counter!("sluice_trace_entries_total", "kind" => e.kind.as_str()).increment(1);
    }
}

#[cfg(test)]
mod tests;
