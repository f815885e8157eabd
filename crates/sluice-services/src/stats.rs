//! The short history behind the dashboard: a sampler that, every `sample_ms` on the services'
//! clock, reads the store's running totals and every queue's live counts, and keeps the last
//! `STATS_HISTORY_SAMPLES_MAX` samples in memory (an hour at the default 10 s), for the whole
//! server and for each of the first `STATS_QUEUES_MAX` queues by name.
//!
//! Rates need per-queue figures the store does not keep, so the services' store is wrapped in
//! [`CountingQueues`], which counts the messages each queue's sends, receives and acks took on
//! this node. Every call the server and the services make goes through it.
//!
//! What the history is not: it lives in memory, so a restart starts it again; and it is this
//! node's: on PostgreSQL each node counts the sends, receives and acks it served (the store's
//! totals are per node too), while depths and ages are the database's and the same on every
//! node.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use async_trait::async_trait;
use sluice_clock::Clock;
use sluice_core::broker::{MoveOutcome, QueueView};
use sluice_core::limits::LIST_QUEUES_LIMIT_MAX;
use sluice_core::{NewMessage, QueueAttributes, QueueAttributesPatch, Sent};
use sluice_store::{
    EntryResults, NackEntry, PeekedMessage, QueueStore, ReceiveRequest, ReceivedMessage, Store, StoreError,
    VisibilityRule,
};

/// How often a sample is taken unless configured (`serve --stats-sample-ms`).
pub const STATS_SAMPLE_MS_DEFAULT: u64 = 10_000;
/// The shortest sampling interval allowed.
pub const STATS_SAMPLE_MS_MIN: u64 = 1_000;
/// The longest sampling interval allowed.
pub const STATS_SAMPLE_MS_MAX: u64 = 600_000;
/// Samples kept per series (server-wide and per queue); the oldest is dropped first.
pub const STATS_HISTORY_SAMPLES_MAX: usize = 360;
/// Queues with a history (and counted rates), the first ones by name. Beyond it a queue still
/// shows its live counts everywhere, without history or rates. At 360 samples of 80 bytes
/// this bounds the history at about 30 MB.
pub const STATS_QUEUES_MAX: usize = 1_000;

/// Messages the sends, receives and acks of one queue took on this node, since it started.
#[derive(Debug, Default)]
struct QueueCounts {
    sent: AtomicU64,
    received: AtomicU64,
    acked: AtomicU64,
}

/// Per-queue message counts, for at most `STATS_QUEUES_MAX` queues.
#[derive(Debug, Default)]
pub struct CallCounts {
    /// Read-locked on every counted call, write-locked only to add or forget a queue.
    map: RwLock<HashMap<String, Arc<QueueCounts>>>,
}

/// One queue's counts at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CountSnapshot {
    pub sent: u64,
    pub received: u64,
    pub acked: u64,
}

impl CallCounts {
    fn entry(&self, queue: &str) -> Option<Arc<QueueCounts>> {
        if let Some(counts) = self.map.read().unwrap_or_else(PoisonError::into_inner).get(queue) {
            return Some(counts.clone());
        }
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= STATS_QUEUES_MAX && !map.contains_key(queue) {
            return None;
        }
        Some(map.entry(queue.to_string()).or_default().clone())
    }

    fn add(&self, queue: &str, n: u64, pick: impl Fn(&QueueCounts) -> &AtomicU64) {
        if n > 0
            && let Some(counts) = self.entry(queue)
        {
            pick(&counts).fetch_add(n, Ordering::Relaxed);
        }
    }

    fn forget(&self, queue: &str) {
        self.map.write().unwrap_or_else(PoisonError::into_inner).remove(queue);
    }

    /// Keeps only the queues in `names` (the others were deleted, or fell past the limit).
    fn retain(&self, names: &HashSet<&str>) {
        self.map.write().unwrap_or_else(PoisonError::into_inner).retain(|name, _| names.contains(name.as_str()));
    }

    pub fn snapshot(&self, queue: &str) -> CountSnapshot {
        let map = self.map.read().unwrap_or_else(PoisonError::into_inner);
        map.get(queue).map_or_else(CountSnapshot::default, |c| CountSnapshot {
            sent: c.sent.load(Ordering::Relaxed),
            received: c.received.load(Ordering::Relaxed),
            acked: c.acked.load(Ordering::Relaxed),
        })
    }
}

/// A queue store that counts, per queue, the messages that sends, receives and acks took.
pub struct CountingQueues {
    inner: Arc<dyn QueueStore>,
    counts: Arc<CallCounts>,
}

impl CountingQueues {
    pub fn new(inner: Arc<dyn QueueStore>, counts: Arc<CallCounts>) -> CountingQueues {
        CountingQueues { inner, counts }
    }
}

fn ok_count<T>(results: &EntryResults<T>) -> u64 {
    results.iter().filter(|r| r.is_ok()).count() as u64
}

#[async_trait]
impl QueueStore for CountingQueues {
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
        self.inner.delete_queue(name).await?;
        self.counts.forget(name);
        Ok(())
    }

    async fn purge_queue(&self, name: &str) -> Result<u64, StoreError> {
        self.inner.purge_queue(name).await
    }

    async fn send(&self, queue: &str, messages: Vec<NewMessage>) -> Result<EntryResults<Sent>, StoreError> {
        let results = self.inner.send(queue, messages).await?;
        let enqueued = results.iter().filter(|r| r.as_ref().is_ok_and(|sent| !sent.duplicate)).count() as u64;
        self.counts.add(queue, enqueued, |c| &c.sent);
        Ok(results)
    }

    async fn receive(&self, queue: &str, request: ReceiveRequest) -> Result<Vec<ReceivedMessage>, StoreError> {
        let received = self.inner.receive(queue, request).await?;
        self.counts.add(queue, received.len() as u64, |c| &c.received);
        Ok(received)
    }

    async fn ack(&self, queue: &str, receipts: Vec<String>) -> Result<EntryResults<()>, StoreError> {
        let results = self.inner.ack(queue, receipts).await?;
        self.counts.add(queue, ok_count(&results), |c| &c.acked);
        Ok(results)
    }

    async fn change_visibility(
        &self,
        queue: &str,
        entries: Vec<(String, u64)>,
        rule: VisibilityRule,
    ) -> Result<EntryResults<()>, StoreError> {
        self.inner.change_visibility(queue, entries, rule).await
    }

    async fn nack(&self, queue: &str, entries: Vec<NackEntry>) -> Result<EntryResults<()>, StoreError> {
        self.inner.nack(queue, entries).await
    }

    async fn peek(&self, queue: &str, limit: usize) -> Result<Vec<PeekedMessage>, StoreError> {
        self.inner.peek(queue, limit).await
    }

    async fn move_messages(&self, from: &str, to: Option<&str>, max: u64) -> Result<MoveOutcome, StoreError> {
        self.inner.move_messages(from, to, max).await
    }
}

/// The server as a whole at one sample. Counts are what happened since the previous sample,
/// over `interval_ms` (0 on the first sample, which has nothing before it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TotalsSample {
    pub at_ms: u64,
    pub interval_ms: u64,
    pub sent: u64,
    pub received: u64,
    pub acked: u64,
    pub dead_lettered: u64,
    pub expired: u64,
    /// Messages in every sampled queue (visible, in flight and delayed).
    pub depth: u64,
    /// Queues on the server (all of them, sampled or not, up to the queue limit).
    pub queues: u64,
}

/// One queue at one sample: its live counts then, and what its sends, receives and acks took
/// since the previous sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueSample {
    pub at_ms: u64,
    pub interval_ms: u64,
    pub visible: u64,
    pub in_flight: u64,
    pub delayed: u64,
    pub oldest_age_ms: Option<u64>,
    pub dlq_depth: Option<u64>,
    pub sent: u64,
    pub received: u64,
    pub acked: u64,
}

#[derive(Default)]
struct History {
    totals: VecDeque<TotalsSample>,
    queues: BTreeMap<String, VecDeque<QueueSample>>,
    /// The counts of the previous sample, to take differences from.
    previous_totals: Option<sluice_store::StoreCounters>,
    previous_queues: HashMap<String, CountSnapshot>,
    previous_at_ms: Option<u64>,
}

fn push<T>(series: &mut VecDeque<T>, sample: T) {
    if series.len() >= STATS_HISTORY_SAMPLES_MAX {
        series.pop_front();
    }
    series.push_back(sample);
}

/// The sampler and the history it keeps.
pub struct Stats {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    counts: Arc<CallCounts>,
    sample_ms: u64,
    history: Mutex<History>,
}

impl Stats {
    /// `sample_ms` is clamped to `STATS_SAMPLE_MS_MIN..=STATS_SAMPLE_MS_MAX`.
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, counts: Arc<CallCounts>, sample_ms: u64) -> Stats {
        let sample_ms = sample_ms.clamp(STATS_SAMPLE_MS_MIN, STATS_SAMPLE_MS_MAX);
        Stats { store, clock, counts, sample_ms, history: Mutex::new(History::default()) }
    }

    pub fn sample_ms(&self) -> u64 {
        self.sample_ms
    }

    fn history(&self) -> std::sync::MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes one sample now (the sampler calls it every `sample_ms`; tests call it directly).
    pub async fn sample(&self) -> Result<(), StoreError> {
        let counters = self.store.counters();
        let mut views: Vec<QueueView> = Vec::new();
        let mut queues_total = 0u64;
        let page = LIST_QUEUES_LIMIT_MAX as usize;
        let mut after: Option<String> = None;
        loop {
            let batch = self.store.list_queues("", after.as_deref(), page).await?;
            let last = batch.len() < page;
            queues_total += batch.len() as u64;
            after = batch.last().map(|q| q.name.clone());
            let room = STATS_QUEUES_MAX.saturating_sub(views.len());
            views.extend(batch.into_iter().take(room));
            if last {
                break;
            }
        }
        let now = self.clock.now_ms();
        let names: HashSet<&str> = views.iter().map(|q| q.name.as_str()).collect();
        self.counts.retain(&names);
        let mut history = self.history();
        let interval_ms = history.previous_at_ms.map_or(0, |at| now.saturating_sub(at));
        let before = history.previous_totals.unwrap_or(counters);
        let depth = views.iter().map(|q| q.stats.visible + q.stats.in_flight + q.stats.delayed).sum();
        let totals = TotalsSample {
            at_ms: now,
            interval_ms,
            sent: counters.messages_sent.saturating_sub(before.messages_sent),
            received: counters.messages_received.saturating_sub(before.messages_received),
            acked: counters.messages_acked.saturating_sub(before.messages_acked),
            dead_lettered: counters.messages_dead_lettered.saturating_sub(before.messages_dead_lettered),
            expired: counters.messages_expired.saturating_sub(before.messages_expired),
            depth,
            queues: queues_total,
        };
        push(&mut history.totals, totals);
        let mut previous_queues = HashMap::with_capacity(views.len());
        for view in &views {
            let counts = self.counts.snapshot(&view.name);
            let before = history.previous_queues.get(&view.name).copied().unwrap_or(counts);
            let s = view.stats;
            let sample = QueueSample {
                at_ms: now,
                interval_ms: if history.previous_queues.contains_key(&view.name) { interval_ms } else { 0 },
                visible: s.visible,
                in_flight: s.in_flight,
                delayed: s.delayed,
                oldest_age_ms: s.oldest_age_ms,
                dlq_depth: s.dead_letter_depth,
                sent: counts.sent.saturating_sub(before.sent),
                received: counts.received.saturating_sub(before.received),
                acked: counts.acked.saturating_sub(before.acked),
            };
            push(history.queues.entry(view.name.clone()).or_default(), sample);
            previous_queues.insert(view.name.clone(), counts);
        }
        history.queues.retain(|name, _| names.contains(name.as_str()));
        history.previous_queues = previous_queues;
        history.previous_totals = Some(counters);
        history.previous_at_ms = Some(now);
        Ok(())
    }

    /// The server-wide series, oldest first.
    pub fn totals(&self) -> Vec<TotalsSample> {
        self.history().totals.iter().copied().collect()
    }

    /// One queue's series, oldest first; `None` when the queue has no history (not sampled
    /// yet, deleted, or past `STATS_QUEUES_MAX`).
    pub fn queue(&self, name: &str) -> Option<Vec<QueueSample>> {
        self.history().queues.get(name).map(|series| series.iter().copied().collect())
    }

    /// Every sampled queue's latest sample, by name.
    pub fn latest(&self) -> Vec<(String, QueueSample)> {
        let history = self.history();
        history.queues.iter().filter_map(|(name, series)| Some((name.clone(), *series.back()?))).collect()
    }

    /// Samples every `sample_ms` until aborted; the first sample at once.
    ///
    /// The cadence is real time, a polling cadence (see `sluice-clock`): what a sample says
    /// (its time, the ages in it) is the clock's, but a manual clock nobody moves must not stop
    /// the sampling, nor may the sampler's sleeps show among the deadlines a test waits for.
    pub fn spawn(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let stats = self.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(std::time::Duration::from_millis(stats.sample_ms));
            // After a stall (a slow store, a suspended machine) the next sample is one interval
            // later, not a burst of the missed ones.
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                if let Err(e) = stats.sample().await {
                    tracing::debug!("stats sample skipped: {e}");
                }
            }
        })
    }
}
