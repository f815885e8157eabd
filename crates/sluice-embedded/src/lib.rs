//! Sluice's default backend: fjall on disk, the core broker's indexes in memory, and one
//! writer thread that group-commits every change.
//!
//! At open the store reads every queue and message-metadata record (bodies stay on disk) and
//! rebuilds the broker's indexes; then the writer thread (`engine`) owns both. Every `Store`
//! call becomes a command on the writer's channel and is answered only after the batch that
//! holds its effects is durable.

mod codec;
mod engine;
mod journal;
pub mod record_format;
mod records;
mod sync;
mod tables;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use crossbeam_channel::Sender;
use fjall::{Database, Keyspace, KeyspaceCreateOptions};
use sluice_core::broker::{MoveOutcome, QueueView};
use sluice_core::message::MessageContent;
use sluice_core::receipt::Receipt;
use sluice_core::{
    Broker, EntryError, MessageId, MessageMeta, NewMessage, QueueAttributes, QueueAttributesPatch, Sent, TimeMs,
};
use sluice_store::{
    EntryResults, NackEntry, PeekedMessage, ReceiveRequest, ReceivedMessage, Record, Store, StoreCounters, StoreError,
    StoredMessage, validate_record_key, validate_record_list, validate_record_value,
};
use tokio::sync::oneshot;

use crate::codec::QueueRecord;
use crate::engine::{Command, Engine, Keyspaces, Reply};

/// When a write is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// After the batch holding it is synced to disk (default).
    Fsync,
    /// Before the sync; the journal is synced every interval, so a power loss (not a process
    /// crash) can lose up to that much acknowledged work.
    Interval(Duration),
}

impl std::str::FromStr for Durability {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "fsync" {
            return Ok(Durability::Fsync);
        }
        if let Some(ms) = s.strip_prefix("interval:") {
            let ms: u64 = ms.parse().map_err(|_| format!("{ms:?} is not a number of milliseconds"))?;
            if ms == 0 || ms > 60_000 {
                return Err("the interval is 1 to 60000 ms".into());
            }
            return Ok(Durability::Interval(Duration::from_millis(ms)));
        }
        Err(format!("{s:?} is not a durability mode; use fsync or interval:MS (e.g. interval:10)"))
    }
}

#[derive(Debug, Clone)]
pub struct EmbeddedConfig {
    pub data_dir: PathBuf,
    pub durability: Durability,
}

/// Why the store could not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot open the data directory {path}: {reason}")]
    Storage { path: PathBuf, reason: String },
    #[error(
        "the data directory {path} holds a record this version cannot read ({reason}); it was written by another version or is damaged"
    )]
    Corrupt { path: PathBuf, reason: String },
    /// A file of the data directory fails its checksums or its structure. Starting anyway
    /// could serve a store with acknowledged writes silently missing, so the store refuses.
    #[error(
        "{file} is damaged: {reason}. Sluice refuses to start rather than run with acknowledged data silently missing; restore the data directory from a backup"
    )]
    Damaged { file: PathBuf, reason: String },
}

impl OpenError {
    /// What the operator can do about it, for the binary's `hint:` line.
    pub fn hint(&self) -> String {
        match self {
            OpenError::Storage { path, .. } => format!(
                "check that {} is a directory this user can write, on a disk with free space, and that no other `sluice serve` uses it, or choose another with --data-dir",
                path.display()
            ),
            OpenError::Corrupt { path, .. } => {
                format!(
                    "check that {} was written by this version of Sluice, or choose another with --data-dir",
                    path.display()
                )
            }
            OpenError::Damaged { file, .. } => format!(
                "the file was changed after it was written (a disk or filesystem fault, or another program); restore the data directory from a backup, or keep {} for inspection and start on an empty --data-dir (docs/reliability.md lists what each kind of damage means)",
                file.display()
            ),
        }
    }
}

#[derive(Default)]
struct Counters {
    sent: AtomicU64,
    received: AtomicU64,
    acked: AtomicU64,
    dead_lettered: AtomicU64,
    expired: AtomicU64,
    batches: AtomicU64,
    records: AtomicU64,
}

/// State the writer thread and the handles share.
#[derive(Default)]
struct Shared {
    /// Set while every call is refused: `Poisoned` until restart, or `StorageFull` until the
    /// writer finds room on the disk again.
    refusal: Mutex<Option<StoreError>>,
    counters: Counters,
}

impl Shared {
    /// Refuses every later call until restart (a refusal already set stays).
    fn poison(&self, reason: &str) {
        tracing::error!("storage poisoned, refusing all further writes until restart: {reason}");
        let mut refusal = self.refusal.lock().unwrap_or_else(|e| e.into_inner());
        refusal.get_or_insert_with(|| StoreError::Poisoned(reason.to_string()));
    }

    /// The error every call gets while the store refuses them.
    fn refusal(&self) -> Option<StoreError> {
        self.refusal.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// What recovery found, for the start-up log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovery {
    pub queues: usize,
    pub messages: usize,
    pub elapsed: Duration,
}

/// The embedded store. Share it in an `Arc`; `close` before dropping to sync the last batch.
pub struct EmbeddedStore {
    tx: Sender<Command>,
    shared: Arc<Shared>,
    writer: Mutex<Option<JoinHandle<()>>>,
    recovery: Recovery,
}

impl EmbeddedStore {
    /// Opens (or creates) the data directory, replays it into memory and starts the writer.
    pub fn open(config: EmbeddedConfig) -> Result<EmbeddedStore, OpenError> {
        Self::open_syncing_with(config, sync::sync_data())
    }

    /// `open`, with the journal made durable by `sync_file` (tests hold syncs back with it).
    fn open_syncing_with(config: EmbeddedConfig, sync_file: sync::SyncFile) -> Result<EmbeddedStore, OpenError> {
        let recovered = recover(&config.data_dir)?;
        let recovery = recovered.recovery;
        let shared = Arc::new(Shared::default());
        let path = config.data_dir.clone();
        let syncer = sync::Syncer::start(config.data_dir.clone(), shared.clone(), sync_file)
            .map_err(|e| OpenError::Storage { path: path.clone(), reason: format!("starting the sync thread: {e}") })?;
        let engine = Engine::new(recovered, config, shared.clone(), syncer);
        let (tx, rx) = crossbeam_channel::unbounded();
        let writer =
            std::thread::Builder::new().name("sluice-writer".into()).spawn(move || engine::run(engine, rx)).map_err(
                |e| OpenError::Storage { path: path.clone(), reason: format!("starting the writer thread: {e}") },
            )?;
        Ok(EmbeddedStore { tx, shared, writer: Mutex::new(Some(writer)), recovery })
    }

    /// What the last open recovered.
    pub fn recovery(&self) -> Recovery {
        self.recovery
    }

    /// Stops the writer after the work already queued and syncs; later calls get
    /// `ShuttingDown`. Blocks the calling thread (briefly: one batch and one sync) until the
    /// writer has exited, so from async code call it at shutdown or in `spawn_blocking`.
    /// Safe to call twice.
    pub fn close(&self) {
        let (ack, done) = std::sync::mpsc::channel();
        if self.tx.send(Command::Close(ack)).is_ok() {
            let _ = done.recv();
        }
        if let Some(handle) = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = handle.join();
        }
    }

    fn closed_error(&self) -> StoreError {
        self.refusal().unwrap_or(StoreError::ShuttingDown)
    }

    /// Runs `f` on the writer thread and answers once its batch is durable.
    async fn call<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Engine, TimeMs) -> Result<T, StoreError> + Send + 'static,
    {
        if let Some(refusal) = self.refusal() {
            return Err(refusal);
        }
        let (tx, rx) = oneshot::channel();
        let job = Box::new(move |engine: &mut Engine, now: TimeMs| -> Reply {
            let result = f(engine, now);
            Box::new(move |commit: Result<(), StoreError>| {
                let _ = tx.send(commit.and(result));
            })
        });
        self.tx.send(Command::Run(job)).map_err(|_| self.closed_error())?;
        rx.await.map_err(|_| self.closed_error())?
    }
}

impl Drop for EmbeddedStore {
    fn drop(&mut self) {
        if self.writer.get_mut().map(|w| w.is_some()).unwrap_or(false) {
            let (ack, _done) = std::sync::mpsc::channel();
            let _ = self.tx.send(Command::Close(ack));
            if let Some(handle) = self.writer.get_mut().ok().and_then(Option::take) {
                let _ = handle.join();
            }
        }
    }
}

/// What [`recover`] rebuilt from a data directory.
pub(crate) struct Recovered {
    pub db: Database,
    pub ks: Keyspaces,
    pub broker: Broker,
    pub records: records::Records,
    pub recovery: Recovery,
}

/// Opens (or creates) the database in `path` and rebuilds the broker from it: the journals
/// are checked first (see `journal`), then every queue, message-metadata and dedup record is
/// read. Used at open, and again by the writer to resume after the disk was full.
pub(crate) fn recover(path: &Path) -> Result<Recovered, OpenError> {
    let started = Instant::now();
    let storage = |e: fjall::Error| fjall_error(path, path, "opening the database", e);
    let corrupt = |reason: String| OpenError::Corrupt { path: path.to_owned(), reason };
    std::fs::create_dir_all(path).map_err(|e| OpenError::Storage { path: path.to_owned(), reason: e.to_string() })?;
    let audit = journal::audit(path).map_err(|d| OpenError::Damaged { file: d.file, reason: d.reason })?;
    tracing::debug!(journals = audit.journals, batches = audit.batches, elapsed = ?started.elapsed(), "journals checked");
    if let Some((file, offset)) = &audit.torn_tail {
        tracing::warn!(
            "discarding the last batch of {} from byte {offset}: it was cut short by a crash while being written, so it was never acknowledged",
            file.display()
        );
    }
    let db = Database::builder(path).manual_journal_persist(true).open().map_err(storage)?;
    let keyspace = |name: &str| db.keyspace(name, KeyspaceCreateOptions::default).map_err(storage);
    let ks = Keyspaces {
        meta: keyspace("meta")?,
        dedup: keyspace("dedup")?,
        queues: keyspace("queues")?,
        messages: keyspace("messages")?,
        bodies: keyspace("bodies")?,
    };
    // Damage in a table's index, filter or metadata would hide intact bodies: refuse.
    if let Some((file, reason)) = tables::check_structure(path) {
        return Err(OpenError::Damaged { file, reason });
    }
    // A read error below is a keyspace that cannot be read: name it and its directory.
    let unreadable = |keyspace: &Keyspace, e: fjall::Error| {
        fjall_error(path, keyspace.path(), &format!("reading keyspace `{}`", keyspace.name()), e)
    };
    let meta = &ks.meta;
    match meta.get(codec::FORMAT_KEY).map_err(|e| unreadable(meta, e))? {
        Some(v) if &*v == codec::FORMAT_VALUE => {}
        Some(v) => return Err(corrupt(format!("format marker {:?}", String::from_utf8_lossy(&v)))),
        None => {
            meta.insert(codec::FORMAT_KEY, codec::FORMAT_VALUE).map_err(storage)?;
            db.persist(fjall::PersistMode::SyncAll).map_err(storage)?;
        }
    }

    let now = engine::now_ms();
    let mut broker = Broker::new();
    if let Some(v) = meta.get(codec::HIGH_WATER_KEY).map_err(|e| unreadable(meta, e))? {
        let hw: codec::HighWater = codec::decode(&v).map_err(|e| corrupt(format!("meta/high_water: {e}")))?;
        broker.restore_high_water(hw.next_seq, hw.next_queue_id);
    }
    let mut queues = 0;
    for item in ks.queues.iter() {
        let (k, v) = item.into_inner().map_err(|e| unreadable(&ks.queues, e))?;
        let id = codec::decode_key(&k).map_err(|e| corrupt(format!("queues: {e}")))?;
        let record: QueueRecord = codec::decode(&v).map_err(|e| corrupt(format!("queues/{id}: {e}")))?;
        broker.restore_queue(id, record.name, record.attributes, record.created_at, record.modified_at);
        queues += 1;
    }
    let mut messages = 0;
    let mut orphans = Vec::new();
    for item in ks.messages.iter() {
        let (k, v) = item.into_inner().map_err(|e| unreadable(&ks.messages, e))?;
        let seq = codec::decode_key(&k).map_err(|e| corrupt(format!("messages: {e}")))?;
        let meta: MessageMeta = codec::decode(&v).map_err(|e| corrupt(format!("messages/{seq}: {e}")))?;
        if broker.restore_message(seq, meta, now) {
            messages += 1;
        } else {
            orphans.push(seq);
        }
    }
    let mut stale_dedup = Vec::new();
    for item in ks.dedup.iter() {
        let (k, v) = item.into_inner().map_err(|e| unreadable(&ks.dedup, e))?;
        let (queue, key) = codec::decode_dedup_key(&k).map_err(|e| corrupt(format!("dedup: {e}")))?;
        let r: codec::DedupRecord = codec::decode(&v).map_err(|e| corrupt(format!("dedup/{queue}: {e}")))?;
        let entry = sluice_core::queue::DedupEntry { id: r.id, seq: r.seq, expires_at: r.expires_at };
        if !broker.restore_dedup(queue, key, entry, now) {
            stale_dedup.push(k);
        }
    }
    broker.finish_restore();
    let records = records::Records::load(meta).map_err(corrupt)?;
    if !stale_dedup.is_empty() {
        let mut batch = db.batch();
        for k in stale_dedup {
            batch.remove(&ks.dedup, k);
        }
        batch.durability(Some(fjall::PersistMode::SyncData)).commit().map_err(storage)?;
    }
    if !orphans.is_empty() {
        // Only possible if a queue record vanished; never keep messages no queue owns.
        tracing::warn!("removing {} messages whose queue no longer exists", orphans.len());
        let mut batch = db.batch();
        for seq in orphans {
            batch.remove(&ks.messages, codec::key(seq));
            batch.remove(&ks.bodies, codec::key(seq));
        }
        batch.durability(Some(fjall::PersistMode::SyncData)).commit().map_err(storage)?;
    }
    let recovery = Recovery { queues, messages, elapsed: started.elapsed() };
    tracing::debug!(queues, messages, records = records.count(), elapsed = ?recovery.elapsed, "recovered");
    Ok(Recovered { db, ks, broker, records, recovery })
}

/// Sorts a fjall error met while opening. Damage (a checksum, a tag or a trailer that does
/// not match, but also a damaged length or position that sends a read past the end of its
/// file or to an invalid offset) names the file or directory it was found in; anything else
/// is an I/O problem. fjall does not say which file failed, so every error that could come
/// from damage is followed by a search for a damaged file.
fn fjall_error(data_dir: &Path, place: &Path, doing: &str, e: fjall::Error) -> OpenError {
    use std::io::ErrorKind::{FileTooLarge, PermissionDenied, QuotaExceeded, ReadOnlyFilesystem, StorageFull};
    let io = match &e {
        fjall::Error::Io(io) | fjall::Error::Storage(fjall::LsmError::Io(io)) => Some(io.kind()),
        _ => None,
    };
    let environment = matches!(&e, fjall::Error::Locked | fjall::Error::Poisoned | fjall::Error::KeyspaceDeleted)
        || io.is_some_and(|kind| {
            matches!(kind, StorageFull | QuotaExceeded | FileTooLarge | PermissionDenied | ReadOnlyFilesystem)
        });
    if environment {
        return OpenError::Storage { path: data_dir.to_owned(), reason: format!("{doing}: {e}") };
    }
    if let Some((file, found)) = tables::locate_damage(data_dir) {
        return OpenError::Damaged { file, reason: format!("{found} ({doing} failed: {e})") };
    }
    match io {
        Some(_) => OpenError::Storage { path: data_dir.to_owned(), reason: format!("{doing}: {e}") },
        None => OpenError::Damaged { file: place.to_owned(), reason: format!("{doing} failed: {e}") },
    }
}

fn message_id() -> MessageId {
    MessageId(uuid::Uuid::now_v7().as_u128())
}

fn parse_receipt(text: &str) -> Result<Receipt, EntryError> {
    Receipt::decode(text).map_err(|e| EntryError::InvalidReceipt(e.0.to_string()))
}

#[async_trait]
impl Store for EmbeddedStore {
    async fn create_queue(&self, name: &str, attributes: QueueAttributes) -> Result<(QueueView, bool), StoreError> {
        let name = name.to_string();
        self.call(move |e, now| {
            let (id, created) = e.broker.create_queue(&name, attributes, now)?;
            Ok((e.broker.queue_view(id, now).expect("queue exists"), created))
        })
        .await
    }

    async fn get_queue(&self, name: &str) -> Result<QueueView, StoreError> {
        let name = name.to_string();
        self.call(move |e, now| {
            let id = e.broker.queue_id(&name)?;
            Ok(e.broker.queue_view(id, now).expect("queue exists"))
        })
        .await
    }

    async fn list_queues(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Vec<QueueView>, StoreError> {
        let prefix = prefix.to_string();
        let after = after.map(str::to_string);
        self.call(move |e, now| Ok(e.broker.list_queues(&prefix, after.as_deref(), limit, now))).await
    }

    async fn update_queue(&self, name: &str, patch: QueueAttributesPatch) -> Result<QueueView, StoreError> {
        let name = name.to_string();
        self.call(move |e, now| {
            let id = e.broker.update_queue(&name, &patch, now)?;
            Ok(e.broker.queue_view(id, now).expect("queue exists"))
        })
        .await
    }

    async fn delete_queue(&self, name: &str) -> Result<(), StoreError> {
        let name = name.to_string();
        self.call(move |e, _now| {
            let id = e.broker.queue_id(&name)?;
            e.broker.delete_queue(&name)?;
            e.drop_waiters(id);
            Ok(())
        })
        .await
    }

    async fn purge_queue(&self, name: &str) -> Result<u64, StoreError> {
        let name = name.to_string();
        self.call(move |e, _now| Ok(e.broker.purge_queue(&name)?)).await
    }

    async fn send(&self, queue: &str, messages: Vec<NewMessage>) -> Result<EntryResults<Sent>, StoreError> {
        let queue = queue.to_string();
        let shared = self.shared.clone();
        self.call(move |e, now| {
            let id = e.broker.queue_id(&queue)?;
            let mut results = Vec::with_capacity(messages.len());
            for message in messages {
                let message_id = message_id();
                match e.broker.send(id, &message, message_id, now) {
                    // A FIFO duplicate: answered with the original id, nothing enqueued.
                    Ok(sent) if sent.duplicate => results.push(Ok(sent)),
                    Ok(sent) => {
                        let NewMessage { body, body_binary, attributes, system_attributes, envelope, .. } = message;
                        e.stage_body(
                            sent.seq,
                            MessageContent { body, body_binary, attributes, system_attributes, envelope },
                        );
                        results.push(Ok(sent));
                    }
                    Err(err) => results.push(Err(err)),
                }
            }
            let sent = results.iter().filter(|r| r.is_ok()).count() as u64;
            shared.counters.sent.fetch_add(sent, Ordering::Relaxed);
            Ok(results)
        })
        .await
    }

    async fn receive(&self, queue: &str, request: ReceiveRequest) -> Result<Vec<ReceivedMessage>, StoreError> {
        if let Some(refusal) = self.refusal() {
            return Err(refusal);
        }
        let (reply, rx) = oneshot::channel();
        self.tx.send(Command::Receive { queue: queue.to_string(), request, reply }).map_err(|_| self.closed_error())?;
        rx.await.map_err(|_| self.closed_error())?
    }

    async fn ack(&self, queue: &str, receipts: Vec<String>) -> Result<EntryResults<()>, StoreError> {
        let queue = queue.to_string();
        let shared = self.shared.clone();
        self.call(move |e, now| {
            let id = e.broker.queue_id(&queue)?;
            let results: EntryResults<()> =
                receipts.iter().map(|r| parse_receipt(r).and_then(|r| e.broker.ack(id, &r, now))).collect();
            let acked = results.iter().filter(|r| r.is_ok()).count() as u64;
            shared.counters.acked.fetch_add(acked, Ordering::Relaxed);
            Ok(results)
        })
        .await
    }

    async fn change_visibility(
        &self,
        queue: &str,
        entries: Vec<(String, u64)>,
    ) -> Result<EntryResults<()>, StoreError> {
        let queue = queue.to_string();
        self.call(move |e, now| {
            let id = e.broker.queue_id(&queue)?;
            Ok(entries
                .iter()
                .map(|(r, timeout_ms)| {
                    parse_receipt(r).and_then(|r| e.broker.change_visibility(id, &r, *timeout_ms, now))
                })
                .collect())
        })
        .await
    }

    async fn change_visibility_lenient(
        &self,
        queue: &str,
        entries: Vec<(String, u64)>,
    ) -> Result<EntryResults<()>, StoreError> {
        let queue = queue.to_string();
        self.call(move |e, now| {
            let id = e.broker.queue_id(&queue)?;
            Ok(entries
                .iter()
                .map(|(r, timeout_ms)| {
                    parse_receipt(r).and_then(|r| e.broker.change_visibility_lenient(id, &r, *timeout_ms, now))
                })
                .collect())
        })
        .await
    }

    async fn nack(&self, queue: &str, entries: Vec<NackEntry>) -> Result<EntryResults<()>, StoreError> {
        let queue = queue.to_string();
        self.call(move |e, now| {
            let id = e.broker.queue_id(&queue)?;
            Ok(entries
                .into_iter()
                .map(|entry| {
                    parse_receipt(&entry.receipt).and_then(|r| e.broker.nack(id, &r, entry.delay_ms, entry.error, now))
                })
                .collect())
        })
        .await
    }

    async fn peek(&self, queue: &str, limit: usize) -> Result<Vec<PeekedMessage>, StoreError> {
        let queue = queue.to_string();
        self.call(move |e, now| {
            let id = e.broker.queue_id(&queue)?;
            let mut out = Vec::new();
            for (seq, meta, state) in e.broker.peek(id, limit, now) {
                match e.body(seq) {
                    Ok(content) => out.push(PeekedMessage {
                        state,
                        message: StoredMessage { seq, meta, content: (*content).clone() },
                    }),
                    Err(err) => tracing::error!("peek skips message {}: {err}", meta.id),
                }
            }
            Ok(out)
        })
        .await
    }

    async fn move_messages(&self, from: &str, to: Option<&str>, max: u64) -> Result<MoveOutcome, StoreError> {
        let from = from.to_string();
        let to = to.map(str::to_string);
        self.call(move |e, now| Ok(e.broker.move_messages(&from, to.as_deref(), max, now)?)).await
    }

    async fn insert_record(&self, kind: &str, key: &str, value: Vec<u8>) -> Result<bool, StoreError> {
        validate_record_key(kind, key)?;
        validate_record_value(&value)?;
        let (kind, key) = (kind.to_string(), key.to_string());
        self.call(move |e, _now| {
            if e.records.get(&kind, &key).is_some() {
                return Ok(false);
            }
            e.records.put(&kind, &key, value);
            Ok(true)
        })
        .await
    }

    async fn put_record(&self, kind: &str, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        validate_record_key(kind, key)?;
        validate_record_value(&value)?;
        let (kind, key) = (kind.to_string(), key.to_string());
        self.call(move |e, _now| {
            e.records.put(&kind, &key, value);
            Ok(())
        })
        .await
    }

    async fn replace_record(
        &self,
        kind: &str,
        key: &str,
        expected: Vec<u8>,
        value: Vec<u8>,
    ) -> Result<bool, StoreError> {
        validate_record_key(kind, key)?;
        validate_record_value(&value)?;
        let (kind, key) = (kind.to_string(), key.to_string());
        self.call(move |e, _now| {
            if e.records.get(&kind, &key) != Some(&expected) {
                return Ok(false);
            }
            e.records.put(&kind, &key, value);
            Ok(true)
        })
        .await
    }

    async fn get_record(&self, kind: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        validate_record_key(kind, key)?;
        let (kind, key) = (kind.to_string(), key.to_string());
        self.call(move |e, _now| Ok(e.records.get(&kind, &key).cloned())).await
    }

    async fn list_records(
        &self,
        kind: &str,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        validate_record_list(kind, prefix, limit)?;
        let (kind, prefix, after) = (kind.to_string(), prefix.to_string(), after.map(str::to_string));
        self.call(move |e, _now| Ok(e.records.list(&kind, &prefix, after.as_deref(), limit))).await
    }

    async fn delete_record(&self, kind: &str, key: &str) -> Result<bool, StoreError> {
        validate_record_key(kind, key)?;
        let (kind, key) = (kind.to_string(), key.to_string());
        self.call(move |e, _now| Ok(e.records.delete(&kind, &key))).await
    }

    fn refusal(&self) -> Option<StoreError> {
        self.shared.refusal()
    }

    fn counters(&self) -> StoreCounters {
        let c = &self.shared.counters;
        StoreCounters {
            messages_sent: c.sent.load(Ordering::Relaxed),
            messages_received: c.received.load(Ordering::Relaxed),
            messages_acked: c.acked.load(Ordering::Relaxed),
            messages_dead_lettered: c.dead_lettered.load(Ordering::Relaxed),
            messages_expired: c.expired.load(Ordering::Relaxed),
            batches_committed: c.batches.load(Ordering::Relaxed),
            records_committed: c.records.load(Ordering::Relaxed),
        }
    }
}
