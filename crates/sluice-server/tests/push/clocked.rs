//! `ClockedStore`: the real store, with the delay of every nack run on a [`ManualClock`].
//!
//! The push worker hands the store one timer: a retry is `nack(receipt, delay_ms)`, and the
//! store makes the delivery visible again `delay_ms` later on its own clock. Here a nack with
//! a delay holds the delivery instead (its visibility is stretched far beyond any test, so the
//! real store keeps it in flight) and nacks it with no delay when the manual clock reaches the
//! due time. Everything else goes to the real store unchanged, so visibility, receive counts,
//! long-poll wake-ups, acks and dead-letter sends are the real ones. The wrapper is a queue
//! store only; [`ClockedStore::into_store`] adds the real store's records and status.
//!
//! Every nack is logged with the manual time it is due at, which tells a test that the worker
//! has finished with a delivery and that the clock may be moved.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use sluice_core::broker::{MoveOutcome, QueueView, Sent};
use sluice_core::{NewMessage, QueueAttributes, QueueAttributesPatch};
use sluice_server::{Clock, ManualClock};
use sluice_store::{
    EntryResults, NackEntry, PeekedMessage, QueueStore, ReceiveRequest, ReceivedMessage, Store, StoreError, StoreParts,
    VisibilityRule,
};

/// How long a held delivery stays in flight in the real store: far longer than any test, far
/// shorter than the visibility maximum.
const HOLD_VISIBILITY_MS: u64 = 60 * 60 * 1000;

pub struct ClockedStore {
    inner: Arc<dyn Store>,
    clock: ManualClock,
    /// The manual time each nack is due at, in the order the nacks came.
    nacks: Arc<Mutex<Vec<u64>>>,
}

impl ClockedStore {
    pub fn new(inner: Arc<dyn Store>, clock: ManualClock) -> ClockedStore {
        ClockedStore { inner, clock, nacks: Arc::default() }
    }

    /// A handle on the nack log that outlives handing the store to the server.
    pub fn nacks(&self) -> Arc<Mutex<Vec<u64>>> {
        self.nacks.clone()
    }

    /// The whole store: its queues through this wrapper, records and status the real ones.
    pub fn into_store(self) -> Arc<dyn Store> {
        let inner = self.inner.clone();
        Arc::new(StoreParts {
            queues: Arc::new(self),
            records: inner.clone(),
            commits: inner.clone(),
            logs: inner.clone(),
            jobs: inner.clone(),
            events: inner.clone(),
            rates: inner.clone(),
            status: inner,
        })
    }
}

#[async_trait]
impl QueueStore for ClockedStore {
    async fn nack(&self, queue: &str, entries: Vec<NackEntry>) -> Result<EntryResults<()>, StoreError> {
        let mut results = Vec::with_capacity(entries.len());
        for entry in entries {
            let due_ms = self.clock.now_ms() + entry.delay_ms;
            let result = if entry.delay_ms == 0 {
                self.inner.nack(queue, vec![entry]).await?
            } else {
                let hold = vec![(entry.receipt.clone(), HOLD_VISIBILITY_MS)];
                let held = self.inner.change_visibility(queue, hold, VisibilityRule::Native).await?;
                if held.iter().all(Result::is_ok) {
                    // Counted as a sleeper before the nack answers, so the test sees it at once.
                    let due = self.clock.sleep_until(due_ms);
                    let inner = self.inner.clone();
                    let queue = queue.to_string();
                    tokio::spawn(async move {
                        due.await;
                        // A store closed by the end of the test refuses it; nothing to do then.
                        let _ = inner.nack(&queue, vec![NackEntry { delay_ms: 0, ..entry }]).await;
                    });
                }
                held
            };
            self.nacks.lock().unwrap().push(due_ms);
            results.extend(result);
        }
        Ok(results)
    }
    async fn create_queue(&self, name: &str, attributes: QueueAttributes) -> Result<(QueueView, bool), StoreError> {
        self.inner.create_queue(name, attributes).await
    }
    async fn get_queue(&self, name: &str) -> Result<QueueView, StoreError> {
        self.inner.get_queue(name).await
    }
    async fn list_queues(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Vec<QueueView>, StoreError> {
        self.inner.list_queues(prefix, after, limit).await
    }
    async fn update_queue(&self, name: &str, patch: QueueAttributesPatch) -> Result<QueueView, StoreError> {
        self.inner.update_queue(name, patch).await
    }
    async fn delete_queue(&self, name: &str) -> Result<(), StoreError> {
        self.inner.delete_queue(name).await
    }
    async fn purge_queue(&self, name: &str) -> Result<u64, StoreError> {
        self.inner.purge_queue(name).await
    }
    async fn send(&self, queue: &str, messages: Vec<NewMessage>) -> Result<EntryResults<Sent>, StoreError> {
        self.inner.send(queue, messages).await
    }
    async fn receive(&self, queue: &str, request: ReceiveRequest) -> Result<Vec<ReceivedMessage>, StoreError> {
        self.inner.receive(queue, request).await
    }
    async fn ack(&self, queue: &str, receipts: Vec<String>) -> Result<EntryResults<()>, StoreError> {
        self.inner.ack(queue, receipts).await
    }
    async fn change_visibility(
        &self,
        queue: &str,
        entries: Vec<(String, u64)>,
        rule: VisibilityRule,
    ) -> Result<EntryResults<()>, StoreError> {
        self.inner.change_visibility(queue, entries, rule).await
    }
    async fn peek(&self, queue: &str, limit: usize) -> Result<Vec<PeekedMessage>, StoreError> {
        self.inner.peek(queue, limit).await
    }
    async fn move_messages(&self, from: &str, to: Option<&str>, max: u64) -> Result<MoveOutcome, StoreError> {
        self.inner.move_messages(from, to, max).await
    }
}
