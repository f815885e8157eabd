//! The writer thread: it owns the broker state and the database, and is the only code that
//! writes.
//!
//! Callers send commands over a channel. Each turn of the loop takes everything waiting (up to
//! a bound), applies it to the in-memory broker, collects the resulting effects into one fjall
//! batch and commits it to the journal. In `fsync` mode the turn's callers are then handed to
//! the sync stage (`sync.rs`), which answers them after an `fdatasync` that covers the batch,
//! while this thread goes on with the next turn: the next batch is built and written during
//! the current sync, and one sync covers every batch written before it started. Latency is
//! about one sync; throughput grows with the number of concurrent callers. Reads go through
//! the same loop and the same stage, so nobody ever observes state that is not yet durable.
//!
//! The loop sleeps until the next command, the broker's next timer (delay or visibility
//! expiry, retention), the next long-poll deadline, or the next interval sync, whichever is
//! first: long polls are answered the moment a message becomes visible, never by rescanning.
//! The broker's timers follow the store's [`Clock`]: on the system clock the loop sleeps until
//! the next one; on a manual clock it sleeps until the clock is moved (`Command::Tick`).
//! Long-poll deadlines are real time, whatever the clock: they are how long a caller is kept
//! waiting, not something the broker decides.
//!
//! A failed write poisons the store (every call is refused) because what is on disk is no
//! longer known. One failure is told apart: a write refused because the disk is full (no
//! sync failed, so nothing acknowledged is in doubt). Then the writer drops the database and,
//! every `STORAGE_FULL_RETRY_MS`, reopens it exactly as a restart would (journal check,
//! replay, indexes rebuilt from disk) and tries a synced write of `STORAGE_FULL_PROBE_BYTES`;
//! once that succeeds it serves again. A failed sync is never retried: it stays poisoned
//! until the process restarts.

use std::collections::{BTreeSet, HashMap, VecDeque};

use crate::failure::{Failure, incompressible};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use fjall::{Database, PersistMode};
use sluice_clock::Clock;
use sluice_core::broker::{Delivery, QueueId};
use sluice_core::message::MessageContent;
use sluice_core::{Broker, Effect, TimeMs};
use sluice_store::{Counters, ReceiveRequest, ReceivedMessage, StoreError, StoredMessage};
use tokio::sync::oneshot;

use crate::codec::{self, QueueRecord};
use crate::records::Records;
use crate::recover::Keyspaces;
pub use crate::sync::Reply;
use crate::sync::Syncer;
use crate::{Durability, EmbeddedConfig, Recovered, Shared};

/// Calls answered by one write batch (a histogram): how much each group commit carries.
pub const BATCH_CALLS: &str = "sluice_store_batch_calls";

/// Most commands taken into one batch, and the body bytes after which a batch is cut.
const BATCH_COMMANDS_MAX: usize = 4_096;
const BATCH_BYTES_MAX: usize = 64 * 1024 * 1024;
/// While the disk is full, how often the writer tries to reopen the database.
pub const STORAGE_FULL_RETRY_MS: u64 = 1_000;
/// The synced write that must succeed before a store that ran out of disk serves again, so
/// that it does not resume with only a few bytes free.
pub const STORAGE_FULL_PROBE_BYTES: usize = 1024 * 1024;
/// Key of that probe in the `meta` keyspace; removed again right after.
const STORAGE_PROBE_KEY: &[u8] = b"storage_probe";

/// A unit of work run on the writer thread with the engine and the current time.
pub type Job = Box<dyn FnOnce(&mut Engine, TimeMs) -> Reply + Send>;

pub enum Command {
    Run(Job),
    Receive {
        queue: String,
        request: ReceiveRequest,
        reply: oneshot::Sender<Result<Vec<ReceivedMessage>, StoreError>>,
    },
    Close(std::sync::mpsc::Sender<()>),
    /// The clock moved (a manual clock): run the broker's timers now.
    Tick,
}

struct Waiter {
    id: u64,
    request: ReceiveRequest,
    deadline: Instant,
    reply: oneshot::Sender<Result<Vec<ReceivedMessage>, StoreError>>,
}

/// The open database and its keyspaces.
struct Disk {
    db: Database,
    ks: Keyspaces,
}

pub struct Engine {
    pub broker: Broker,
    /// Durable configuration records (`records.rs`), written with the broker's effects.
    pub records: Records,
    /// Streams (`log/`): staged by jobs, written after each batch (`commit`).
    pub logs: crate::log::Logs,
    /// The job board, its pending writes and its long polls (`jobs/`), written with the
    /// broker's effects.
    pub jobs: crate::jobs::JobState,
    /// The event store's log and indexes (`events/`): staged by jobs, written after the
    /// streams' records in each batch.
    pub events: crate::events::EventLog,
    /// `None` only while a store that ran out of disk waits to reopen.
    disk: Option<Disk>,
    data_dir: PathBuf,
    durability: Durability,
    shared: Arc<Shared>,
    /// Set while poisoned by a full disk: when to try reopening.
    reopen_at: Option<Instant>,
    /// Bodies of messages sent in the batch being built, readable before the commit.
    pending_bodies: HashMap<u64, Arc<MessageContent>>,
    /// Encoded bodies to write with this batch (`None`: delete).
    pending_body_writes: HashMap<u64, Option<Vec<u8>>>,
    pending_bytes: usize,
    /// Buffers of `commit`, kept from one batch to the next with their allocations: the
    /// broker's effects, and the message records of the batch by sequence number.
    effects: Vec<Effect>,
    metas: HashMap<u64, Option<Vec<u8>>>,
    waiters: HashMap<QueueId, VecDeque<Waiter>>,
    waiter_deadlines: BTreeSet<(Instant, u64)>,
    next_waiter_id: u64,
    /// Interval mode: since when something written is not yet synced.
    unsynced_since: Option<Instant>,
    /// The sync stage: `fdatasync`s and answers in `fsync` mode, syncs on the timer in
    /// `interval` mode.
    syncer: Syncer,
    clock: Arc<dyn Clock>,
}

impl Engine {
    pub fn new(
        recovered: Recovered,
        logs: crate::log::Logs,
        events: crate::events::EventLog,
        config: EmbeddedConfig,
        shared: Arc<Shared>,
        syncer: Syncer,
        clock: Arc<dyn Clock>,
    ) -> Engine {
        let Recovered { db, ks, broker, records, jobs, .. } = recovered;
        Engine {
            broker,
            records,
            logs,
            jobs,
            events,
            disk: Some(Disk { db, ks }),
            data_dir: config.data_dir,
            durability: config.durability,
            shared,
            reopen_at: None,
            pending_bodies: HashMap::new(),
            pending_body_writes: HashMap::new(),
            pending_bytes: 0,
            effects: Vec::new(),
            metas: HashMap::new(),
            waiters: HashMap::new(),
            waiter_deadlines: BTreeSet::new(),
            next_waiter_id: 0,
            unsynced_since: None,
            syncer,
            clock,
        }
    }

    /// Stages the body of a newly sent message for this batch.
    pub fn stage_body(&mut self, seq: u64, content: MessageContent) {
        let encoded = codec::encode(&content);
        self.pending_bytes += encoded.len();
        self.pending_body_writes.insert(seq, Some(encoded));
        self.pending_bodies.insert(seq, Arc::new(content));
    }

    /// The body of message `seq`, from this batch or from disk.
    pub fn body(&self, seq: u64) -> Result<Arc<MessageContent>, String> {
        if let Some(content) = self.pending_bodies.get(&seq) {
            return Ok(content.clone());
        }
        let value = self
            .disk()
            .ks
            .bodies
            .get(codec::key(seq))
            .map_err(|e| format!("reading the body of message {seq}: {e}"))?
            .ok_or_else(|| format!("the body of message {seq} is missing"))?;
        codec::decode(&value).map(Arc::new).map_err(|e| format!("the body of message {seq}: {e}"))
    }

    /// Sends the webhooks of the jobs that finished in this batch into the callback queue, so
    /// that they are written with the change that finished them.
    fn send_job_callbacks(&mut self, now: TimeMs) {
        for callback in self.jobs.take_callbacks() {
            match crate::jobs::callback_message(&mut self.broker, &callback, now) {
                Ok((seq, content)) => {
                    self.stage_body(seq, content);
                    Counters::add(&self.shared.counters.messages_sent, 1);
                }
                Err(e) => tracing::error!(job = %callback.job_id, "job webhook not sent: {e}"),
            }
        }
    }

    /// Attaches bodies to deliveries. A delivery whose body cannot be read is left out and
    /// logged: it stays in flight and comes back after its timeout, never with a wrong body.
    pub fn load(&self, deliveries: Vec<Delivery>) -> Vec<ReceivedMessage> {
        let mut out = Vec::with_capacity(deliveries.len());
        for d in deliveries {
            match self.body(d.seq) {
                Ok(content) => out.push(ReceivedMessage {
                    receipt: d.receipt.encode(),
                    message: StoredMessage { seq: d.seq, meta: d.meta, content: (*content).clone() },
                }),
                Err(e) => tracing::error!("not delivering message {}: {e}", d.meta.id),
            }
        }
        out
    }

    fn receive(
        &mut self,
        queue: &str,
        request: ReceiveRequest,
        now: TimeMs,
        reply: oneshot::Sender<Result<Vec<ReceivedMessage>, StoreError>>,
    ) -> Option<Reply> {
        let outcome = (|| {
            request.validate()?;
            let id = self.broker.queue_id(queue)?;
            Ok::<_, StoreError>(id)
        })();
        let id = match outcome {
            Ok(id) => id,
            Err(e) => {
                let _ = reply.send(Err(e));
                return None;
            }
        };
        let deliveries = self.broker.receive(id, request.max, request.visibility_timeout_ms, now);
        let wait_ms = request
            .wait_ms
            .unwrap_or_else(|| self.broker.queue_view(id, now).map(|v| v.attributes.receive_wait_ms).unwrap_or(0));
        if deliveries.is_empty() && wait_ms > 0 {
            let waiter_id = self.next_waiter_id;
            self.next_waiter_id += 1;
            let deadline = Instant::now() + Duration::from_millis(wait_ms);
            self.waiter_deadlines.insert((deadline, waiter_id));
            self.waiters.entry(id).or_default().push_back(Waiter { id: waiter_id, request, deadline, reply });
            return None;
        }
        Counters::add(&self.shared.counters.messages_received, deliveries.len() as u64);
        let messages = self.load(deliveries);
        Some(Box::new(move |commit| {
            let _ = reply.send(commit.map(|()| messages));
        }))
    }

    /// Hands newly visible messages to parked long polls, oldest waiter first.
    fn serve_waiters(&mut self, now: TimeMs, replies: &mut Vec<Reply>) {
        for id in self.broker.take_woken() {
            while let Some(queue) = self.waiters.get_mut(&id) {
                let Some(waiter) = queue.pop_front() else {
                    self.waiters.remove(&id);
                    break;
                };
                self.waiter_deadlines.remove(&(waiter.deadline, waiter.id));
                if waiter.reply.is_closed() {
                    continue;
                }
                if self.broker.queue_name(id).is_none() {
                    let _ = waiter.reply.send(Ok(Vec::new()));
                    continue;
                }
                let deliveries = self.broker.receive(id, waiter.request.max, waiter.request.visibility_timeout_ms, now);
                if deliveries.is_empty() {
                    // Someone else took what was visible; keep waiting.
                    self.waiter_deadlines.insert((waiter.deadline, waiter.id));
                    self.waiters.get_mut(&id).expect("queue of waiters").push_front(waiter);
                    break;
                }
                Counters::add(&self.shared.counters.messages_received, deliveries.len() as u64);
                let messages = self.load(deliveries);
                let reply = waiter.reply;
                replies.push(Box::new(move |commit| {
                    let _ = reply.send(commit.map(|()| messages));
                }));
            }
        }
    }

    /// Answers long polls whose wait is over with an empty list.
    fn expire_waiters(&mut self, now: Instant) {
        while let Some(&(deadline, waiter_id)) = self.waiter_deadlines.first() {
            if deadline > now {
                break;
            }
            self.waiter_deadlines.pop_first();
            for queue in self.waiters.values_mut() {
                if let Some(pos) = queue.iter().position(|w| w.id == waiter_id) {
                    let waiter = queue.remove(pos).expect("position is valid");
                    let _ = waiter.reply.send(Ok(Vec::new()));
                    break;
                }
            }
        }
        self.waiters.retain(|_, q| !q.is_empty());
    }

    /// Ends every long poll on queue `id` (it was deleted) with an empty answer.
    pub fn drop_waiters(&mut self, id: QueueId) {
        for waiter in self.waiters.remove(&id).unwrap_or_default() {
            self.waiter_deadlines.remove(&(waiter.deadline, waiter.id));
            let _ = waiter.reply.send(Ok(Vec::new()));
        }
    }

    fn disk(&self) -> &Disk {
        self.disk.as_ref().expect("the database is open whenever a command runs")
    }

    /// Writes the broker's effects and the staged bodies as one atomic batch to the journal and
    /// hands it to the kernel, unsynced (the sync stage syncs it). A full disk is refused here,
    /// at write, which tells it apart from a failed sync.
    fn commit(&mut self, now: TimeMs) -> Result<usize, Failure> {
        let mut effects = std::mem::take(&mut self.effects);
        self.broker.swap_effects(&mut effects);
        let disk = self.disk.as_ref().expect("the database is open whenever a command runs");
        // The same key written twice in one batch would share a sequence number; keep the last.
        let metas = &mut self.metas;
        let mut queues: HashMap<QueueId, Option<Vec<u8>>> = HashMap::new();
        let mut high_water = None;
        let mut dedup: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
        for effect in effects.drain(..) {
            match effect {
                Effect::PutQueue { id, name, attributes, created_at, modified_at } => {
                    queues.insert(
                        id,
                        Some(codec::encode_queue(&QueueRecord { name, attributes, created_at, modified_at })),
                    );
                }
                Effect::DeleteQueue { id } => {
                    queues.insert(id, None);
                }
                Effect::PutMessage { seq, meta } => {
                    metas.insert(seq, Some(codec::encode(&meta)));
                }
                Effect::PutHighWater { next_seq, next_queue_id } => {
                    high_water = Some(codec::encode(&codec::HighWater { next_seq, next_queue_id }));
                }
                Effect::PutDedup { queue, key, id, seq, expires_at } => {
                    let record = codec::DedupRecord { id, seq, expires_at };
                    dedup.insert(codec::dedup_key(queue, &key), Some(codec::encode(&record)));
                }
                Effect::DeleteDedup { queue, key } => {
                    dedup.insert(codec::dedup_key(queue, &key), None);
                }
                Effect::DeleteMessage { seq } => {
                    metas.insert(seq, None);
                    self.pending_body_writes.insert(seq, None);
                }
            }
        }
        self.effects = effects;
        // Sized once: grown push by push, the item list of a large batch is copied into ever
        // larger allocations, each on fresh pages (page faults were ~3 % of the server's CPU).
        let items = metas.len() + queues.len() + dedup.len() + self.pending_body_writes.len() + 1;
        let mut batch = fjall::OwnedWriteBatch::with_capacity(disk.db.clone(), items);
        let records = metas.len()
            + queues.len()
            + dedup.len()
            + self.pending_body_writes.len()
            + usize::from(high_water.is_some())
            + self.records.write_pending(&mut batch, &disk.ks.meta)
            + self.jobs.write_pending(&mut batch);
        for (k, value) in dedup {
            match value {
                Some(v) => batch.insert(&disk.ks.dedup, k, v),
                None => batch.remove(&disk.ks.dedup, k),
            }
        }
        if let Some(v) = high_water {
            batch.insert(&disk.ks.meta, codec::HIGH_WATER_KEY, v);
        }
        for (id, value) in queues {
            match value {
                Some(v) => batch.insert(&disk.ks.queues, codec::key(id), v),
                None => batch.remove(&disk.ks.queues, codec::key(id)),
            }
        }
        for (seq, value) in metas.drain() {
            match value {
                Some(v) => batch.insert(&disk.ks.messages, codec::key(seq), v),
                None => batch.remove(&disk.ks.messages, codec::key(seq)),
            }
        }
        for (seq, value) in self.pending_body_writes.drain() {
            match value {
                Some(v) => batch.insert(&disk.ks.bodies, codec::key(seq), v),
                None => batch.remove(&disk.ks.bodies, codec::key(seq)),
            }
        }
        self.pending_bodies.clear();
        self.pending_bytes = 0;
        if records > 0 {
            batch.durability(None).commit().map_err(|e| Failure::of_write("writing a batch", e))?;
            // Into the kernel's hands before the sync stage is told: its `fdatasync` covers only
            // what was written to the file when it starts.
            disk.db.persist(PersistMode::Buffer).map_err(|e| Failure::of_write("writing a batch", e))?;
            // Before the turn is handed over, so that the sync that answers it syncs the journal.
            self.shared.journal_dirty.store(true, Ordering::Release);
        }
        // Stream records after the batch, so that a dedup id is never on disk before the
        // batch that holds it was written; their files go to the sync stage with this turn.
        let mut files = Vec::new();
        let logged = self.logs.flush(now, &mut files).map_err(|e| Failure::of_io("writing stream records", e))?;
        let logged = logged + self.events.flush(now, &mut files).map_err(|e| Failure::of_io("writing events", e))?;
        self.shared.log_files.lock().unwrap_or_else(|e| e.into_inner()).extend(files);
        let records = records + logged as usize;
        if records == 0 {
            return Ok(0);
        }
        if matches!(self.durability, Durability::Interval(_)) && self.unsynced_since.is_none() {
            self.unsynced_since = Some(Instant::now());
        }
        Ok(records)
    }

    /// Answers a turn's callers once that is safe. `fsync` mode: after a sync that covers this
    /// turn's batch (if it `wrote` one) and every earlier one, so through the sync stage unless
    /// it wrote nothing and nothing earlier is still waiting. `interval` mode: now, asking for
    /// a sync (without waiting for it) when the interval is up.
    fn acknowledge(&mut self, replies: Vec<Reply>, wrote: bool) {
        match self.durability {
            Durability::Fsync if wrote || !self.syncer.idle() => self.syncer.answer(replies, wrote),
            Durability::Fsync => answer(replies, &Ok(())),
            Durability::Interval(interval) => {
                answer(replies, &Ok(()));
                if self.unsynced_since.is_some_and(|since| since.elapsed() >= interval) {
                    self.unsynced_since = None;
                    self.syncer.sync();
                }
            }
        }
    }

    /// When the loop must wake by itself at the latest.
    fn next_wake(&self) -> Option<Duration> {
        let real_now = Instant::now();
        if self.poisoned().is_some() {
            return self.reopen_at.map(|at| at.saturating_duration_since(real_now));
        }
        // `None` from the clock: a manual clock, whose moves wake the loop (`Command::Tick`).
        let due = self.broker.next_due().into_iter().chain(self.jobs.board.next_due()).min();
        let timer = due.and_then(|at| self.clock.real_wait(at));
        let polls =
            self.waiter_deadlines.first().map(|(at, _)| *at).into_iter().chain(self.jobs.waiters.next_deadline());
        let poll = polls.min().map(|at| at.saturating_duration_since(real_now));
        let timer = timer.into_iter().chain(poll).min();
        let sync = match (self.durability, self.unsynced_since) {
            (Durability::Interval(interval), Some(since)) => Some(interval.saturating_sub(since.elapsed())),
            _ => None,
        };
        timer.into_iter().chain(sync).min()
    }

    fn poison(&self, reason: &str) {
        self.shared.poison(reason);
    }

    /// Poisons the store after a failed batch. On a full disk, schedules the first reopen
    /// (the broker in memory is ahead of the disk now, so it is rebuilt, never reused).
    fn fail(&mut self, failure: Failure) -> StoreError {
        let reason = match failure {
            Failure::Fatal(reason) => {
                self.poison(&reason);
                reason
            }
            Failure::Full(cause) => {
                let reason = format!(
                    "the disk holding the data directory is full ({cause}); no acknowledged write is lost, but every call is refused until space is freed (the store retries every {STORAGE_FULL_RETRY_MS} ms)"
                );
                tracing::error!("{reason}");
                let mut refusal = self.shared.refusal.lock().unwrap_or_else(|e| e.into_inner());
                // A store already poisoned stays so: only a full disk alone is waited out.
                if refusal.is_none() {
                    *refusal = Some(StoreError::StorageFull(reason.clone()));
                    self.reopen_at = Some(Instant::now() + Duration::from_millis(STORAGE_FULL_RETRY_MS));
                }
                drop(refusal);
                reason
            }
        };
        let refusal = self.poisoned().unwrap_or(StoreError::Poisoned(reason));
        self.fail_waiters(&refusal);
        refusal
    }

    /// Answers every parked long poll with the poisoned error.
    fn fail_waiters(&mut self, refusal: &StoreError) {
        self.jobs.fail_waiters(refusal);
        self.waiter_deadlines.clear();
        for (_, queue) in self.waiters.drain() {
            for waiter in queue {
                let _ = waiter.reply.send(Err(refusal.clone()));
            }
        }
    }

    /// After a full disk, when due: reopens the database as a restart would and proves with
    /// a synced probe write that there is room again; then serves again.
    fn reopen_if_due(&mut self) {
        let Some(at) = self.reopen_at else { return };
        if Instant::now() < at {
            return;
        }
        self.reopen_at = Some(Instant::now() + Duration::from_millis(STORAGE_FULL_RETRY_MS));
        // Batches written before the one that failed are synced and answered first.
        self.syncer.drain();
        // The broker is ahead of the disk by the batch that failed: drop both, and the
        // database's files with them, before replaying.
        self.disk = None;
        self.pending_bodies.clear();
        self.pending_body_writes.clear();
        self.pending_bytes = 0;
        self.jobs.clear_pending();
        self.jobs.release_disk();
        self.unsynced_since = None;
        let recovered = match crate::recover::recover(&self.data_dir, self.clock.now_ms()) {
            Ok(recovered) => recovered,
            Err(crate::OpenError::Storage { reason, .. }) => {
                tracing::debug!("the disk is still full: {reason}");
                return;
            }
            Err(e) => {
                // Damage found while replaying is not something waiting can cure.
                self.reopen_at = None;
                let reason = format!("reopening after the disk was full: {e}");
                self.shared
                    .refusal
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .replace(StoreError::Poisoned(reason.clone()));
                tracing::error!("storage poisoned, refusing all further writes until restart: {reason}");
                return;
            }
        };
        let probe = |db: &Database, ks: &Keyspaces| -> Result<(), fjall::Error> {
            let mut batch = db.batch();
            batch.insert(&ks.meta, STORAGE_PROBE_KEY, incompressible(STORAGE_FULL_PROBE_BYTES));
            batch.durability(None).commit()?;
            db.persist(PersistMode::SyncData)?;
            let mut batch = db.batch();
            batch.remove(&ks.meta, STORAGE_PROBE_KEY);
            batch.durability(None).commit()?;
            db.persist(PersistMode::SyncData)
        };
        if let Err(e) = probe(&recovered.db, &recovered.ks) {
            tracing::debug!("the disk is still full: a probe write of {STORAGE_FULL_PROBE_BYTES} bytes failed: {e}");
            return;
        }
        let mut recovered = recovered;
        let logs = match crate::open_logs(&self.data_dir, &mut recovered, self.clock.now_ms()) {
            Ok(logs) => logs,
            Err(e) => {
                self.reopen_at = None;
                let reason = format!("reopening the streams after the disk was full: {e}");
                self.shared
                    .refusal
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .replace(StoreError::Poisoned(reason.clone()));
                tracing::error!("storage poisoned, refusing all further writes until restart: {reason}");
                return;
            }
        };
        let events =
            match crate::events::EventLog::open(&self.data_dir, &recovered.records, self.events.durable().clone()) {
                Ok(events) => events,
                Err(d) => {
                    self.reopen_at = None;
                    let reason =
                        format!("reopening the event log after the disk was full: {}: {}", d.file.display(), d.reason);
                    self.shared
                        .refusal
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .replace(StoreError::Poisoned(reason.clone()));
                    tracing::error!("storage poisoned, refusing all further writes until restart: {reason}");
                    return;
                }
            };
        let Recovered { db, ks, broker, records, jobs, recovery } = recovered;
        self.events = events;
        self.broker = broker;
        self.records = records;
        self.logs = logs;
        self.jobs.reopened(jobs);
        self.disk = Some(Disk { db, ks });
        self.reopen_at = None;
        *self.shared.refusal.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.publish_counters();
        tracing::warn!(
            queues = recovery.queues,
            messages = recovery.messages,
            "the disk has room again: the store was reopened from disk and serves again"
        );
    }

    /// The error every call gets while the store refuses them.
    fn poisoned(&self) -> Option<StoreError> {
        self.shared.refusal()
    }

    fn publish_counters(&self) {
        let c = self.broker.counters();
        self.shared.counters.messages_dead_lettered.store(c.dead_lettered, Ordering::Relaxed);
        let counters = &self.shared.counters;
        counters.messages_refused_full.store(c.refusals.queue_full, Ordering::Relaxed);
        counters.messages_dropped_head.store(c.refusals.drop_head, Ordering::Relaxed);
        counters.messages_rejected_to_dlq.store(c.refusals.rejected_to_dlq, Ordering::Relaxed);
        counters.messages_expired_to_dlq.store(c.refusals.expired_to_dlq, Ordering::Relaxed);
        self.shared.counters.messages_expired.store(c.expired, Ordering::Relaxed);
        let j = self.jobs.board.counters();
        self.shared.counters.jobs_lapsed.store(j.lapsed, Ordering::Relaxed);
        self.shared.counters.jobs_pruned_ttl.store(j.pruned_ttl, Ordering::Relaxed);
        self.shared.counters.jobs_pruned_budget.store(j.pruned_budget, Ordering::Relaxed);
    }
}

/// The writer loop. Returns when a `Close` arrives or every sender is gone.
pub fn run(mut engine: Engine, rx: Receiver<Command>) {
    let mut close_ack: Option<std::sync::mpsc::Sender<()>> = None;
    let mut first: Option<Command> = None;
    loop {
        if first.is_none() {
            let received = match engine.next_wake() {
                Some(wait) => rx.recv_timeout(wait),
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            match received {
                Ok(cmd) => first = Some(cmd),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        engine.reopen_if_due();
        if let Some(refusal) = engine.poisoned() {
            // Nothing runs against a store whose disk state is unknown, timers included. The
            // sync stage may have poisoned it since the last turn: end parked long polls too.
            engine.fail_waiters(&refusal);
            let mut next = first.take();
            while let Some(cmd) = next {
                refuse(cmd, &refusal, &mut close_ack);
                next = if close_ack.is_some() { None } else { rx.try_recv().ok() };
            }
            if close_ack.is_some() {
                break;
            }
            continue;
        }
        let now = engine.clock.now_ms();
        engine.broker.tick(now);
        engine.jobs.tick(now);
        let mut replies: Vec<Reply> = Vec::new();
        let mut taken = 0;
        let mut next = first.take();
        while let Some(cmd) = next {
            taken += 1;
            match cmd {
                Command::Run(job) => replies.push(job(&mut engine, now)),
                Command::Receive { queue, request, reply } => {
                    if let Some(r) = engine.receive(&queue, request, now, reply) {
                        replies.push(r);
                    }
                }
                Command::Close(ack) => {
                    close_ack = Some(ack);
                    break;
                }
                // The timers ran with `tick` above.
                Command::Tick => {}
            }
            if taken >= BATCH_COMMANDS_MAX
                || engine.pending_bytes + engine.logs.staged_bytes() + engine.events.staged_bytes() >= BATCH_BYTES_MAX
            {
                break;
            }
            next = rx.try_recv().ok();
        }
        engine.serve_waiters(now, &mut replies);
        engine.expire_waiters(Instant::now());
        crate::jobs::serve(&mut engine.jobs, now, &mut replies);
        engine.send_job_callbacks(now);
        match engine.commit(now) {
            Ok(records) => {
                if records > 0 {
                    engine.shared.counters.committed(records as u64);
                    metrics::histogram!(BATCH_CALLS).record(replies.len() as f64);
                }
                engine.publish_counters();
                engine.acknowledge(replies, records > 0);
            }
            Err(failure) => {
                let refusal = engine.fail(failure);
                engine.publish_counters();
                answer(replies, &Err(refusal));
            }
        }
        if close_ack.is_some() {
            break;
        }
    }
    // Answer parked long polls and anything still queued, wait for the sync stage to answer
    // what it holds, then sync everything and report the close.
    let ids: Vec<QueueId> = engine.waiters.keys().copied().collect();
    for id in ids {
        engine.drop_waiters(id);
    }
    engine.jobs.waiters.end_all();
    engine.syncer.drain();
    if let Some(disk) = &engine.disk
        && let Err(e) = disk.db.persist(PersistMode::SyncAll)
    {
        engine.poison(&format!("final sync: {e}"));
    }
    if engine.disk.is_some()
        && let Err(e) = engine.logs.sync_all().and_then(|()| engine.events.sync())
    {
        engine.poison(&format!("final sync of the streams: {e}"));
    }
    while let Ok(cmd) = rx.try_recv() {
        refuse_closed(cmd);
    }
    if let Some(ack) = close_ack {
        let _ = ack.send(());
    }
}

fn answer(replies: Vec<Reply>, outcome: &Result<(), StoreError>) {
    for reply in replies {
        reply(outcome.clone());
    }
}

fn refuse(cmd: Command, refusal: &StoreError, close_ack: &mut Option<std::sync::mpsc::Sender<()>>) {
    match cmd {
        Command::Run(job) => {
            // The job must not run against a store whose disk state is unknown; its reply is
            // built by running it on nothing, so answer through a dummy engine is impossible.
            // Instead the Store methods check the poison flag before queueing; a job that
            // raced past that check is dropped here and its caller sees the channel close.
            drop(job);
            tracing::debug!("dropped a command while refusing calls: {refusal}");
        }
        Command::Receive { reply, .. } => {
            let _ = reply.send(Err(refusal.clone()));
        }
        Command::Close(ack) => *close_ack = Some(ack),
        Command::Tick => {}
    }
}

fn refuse_closed(cmd: Command) {
    match cmd {
        Command::Run(job) => drop(job),
        Command::Receive { reply, .. } => {
            let _ = reply.send(Err(StoreError::ShuttingDown));
        }
        Command::Close(ack) => {
            let _ = ack.send(());
        }
        Command::Tick => {}
    }
}
