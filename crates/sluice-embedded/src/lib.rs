//! Sluice's default backend: fjall on disk, the core broker's indexes in memory, and one
//! writer thread that group-commits every change.
//!
//! At open the store reads every queue and message-metadata record (bodies stay on disk) and
//! rebuilds the broker's indexes; then the writer thread (`engine`) owns both. Every `Store`
//! call becomes a command on the writer's channel and is answered only after the batch that
//! holds its effects is durable.

//!
//! Time is the [`Clock`] the store is opened with ([`EmbeddedStore::open_with_clock`]; the
//! system clock by default): every timer the broker keeps (delays, visibility, retention, dedup
//! windows) follows it, so tests can run them on a manual clock. Long-poll waits stay on real
//! time (see `sluice_clock`).
//!
//! Modules: `engine` (the writer loop), `sync` (the sync stage), `recover` (open), `codec`
//! (the on-disk records), `journal` and `tables` (damage checks), `records` (records in
//! memory), `log` (streams: the log engine of segment files, see its module doc), `jobs` (the
//! job board on the writer thread, its keyspaces and long polls), and one module per store
//! trait: `queue_store`, `record_store`, `log_store`, `job_store`.

mod codec;
mod commit_store;
mod engine;
mod event_store;
mod events;
mod failure;
mod job_store;
mod jobs;
mod journal;
mod log;
mod log_store;
mod queue_store;
mod rate_store;
pub mod record_format;
mod record_store;
mod records;
mod recover;
mod sync;
mod tables;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Sender;
use sluice_clock::{Clock, SystemClock};
use sluice_core::TimeMs;
use sluice_store::{Counters, StoreCounters, StoreError, StoreStatus};
use tokio::sync::oneshot;

use crate::engine::{Command, Engine, Reply};
pub(crate) use crate::recover::{Recovered, recover};

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

/// State the writer thread and the handles share.
#[derive(Default)]
struct Shared {
    /// Set while every call is refused: `Poisoned` until restart, or `StorageFull` until the
    /// writer finds room on the disk again.
    refusal: Mutex<Option<StoreError>>,
    counters: Counters,
    /// Stream segment files written since the last sync, for the sync stage (`log`).
    log_files: Mutex<Vec<Arc<std::fs::File>>>,
    /// Set by the writer after it appended a batch to fjall's journal, cleared by the sync stage
    /// right before it syncs the journal: a turn that only appended stream records (nothing in
    /// fjall) needs no journal sync.
    journal_dirty: std::sync::atomic::AtomicBool,
    /// Long polls on streams, woken after durable appends (`log::wake`).
    stream_wakers: log::wake::Wakers,
    /// The event log's durable head (`events`): reads of events stop below it.
    events_durable: Arc<events::Durable>,
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
    pub jobs: usize,
    pub elapsed: Duration,
}

/// The embedded store. Share it in an `Arc`; `close` before dropping to sync the last batch.
pub struct EmbeddedStore {
    tx: Sender<Command>,
    shared: Arc<Shared>,
    writer: Mutex<Option<JoinHandle<()>>>,
    recovery: Recovery,
    /// Rate limits' buckets (`rate_store.rs`), on the store's clock.
    rates: rate_store::Buckets,
}

impl EmbeddedStore {
    /// Opens (or creates) the data directory, replays it into memory and starts the writer.
    pub fn open(config: EmbeddedConfig) -> Result<EmbeddedStore, OpenError> {
        Self::open_with_clock(config, Arc::new(SystemClock))
    }

    /// `open`, with every timer of the broker on `clock`.
    pub fn open_with_clock(config: EmbeddedConfig, clock: Arc<dyn Clock>) -> Result<EmbeddedStore, OpenError> {
        Self::open_syncing_with(config, clock, sync::sync_data())
    }

    /// `open_with_clock`, with the journal made durable by `sync_file` (tests hold syncs back
    /// with it).
    fn open_syncing_with(
        config: EmbeddedConfig,
        clock: Arc<dyn Clock>,
        sync_file: sync::SyncFile,
    ) -> Result<EmbeddedStore, OpenError> {
        let mut recovered = recover(&config.data_dir, clock.now_ms())?;
        let logs = open_logs(&config.data_dir, &mut recovered, clock.now_ms())?;
        let recovery = recovered.recovery;
        let shared = Arc::new(Shared::default());
        let events = events::EventLog::open(&config.data_dir, &recovered.records, shared.events_durable.clone())
            .map_err(|d| OpenError::Damaged { file: d.file, reason: d.reason })?;
        let path = config.data_dir.clone();
        let syncer = sync::Syncer::start(config.data_dir.clone(), shared.clone(), sync_file)
            .map_err(|e| OpenError::Storage { path: path.clone(), reason: format!("starting the sync thread: {e}") })?;
        let (tx, rx) = crossbeam_channel::unbounded();
        // A manual clock's moves wake the writer, whose timers follow it; the system clock's
        // time flows by itself and the writer sleeps until its next timer.
        let wake = tx.clone();
        clock.on_advance(Box::new(move || {
            let _ = wake.send(Command::Tick);
        }));
        let rates = rate_store::Buckets::new(clock.clone());
        let engine = Engine::new(recovered, logs, events, config, shared.clone(), syncer, clock);
        let writer =
            std::thread::Builder::new().name("sluice-writer".into()).spawn(move || engine::run(engine, rx)).map_err(
                |e| OpenError::Storage { path: path.clone(), reason: format!("starting the writer thread: {e}") },
            )?;
        Ok(EmbeddedStore { tx, shared, writer: Mutex::new(Some(writer)), recovery, rates })
    }

    /// What the last open recovered.
    pub fn recovery(&self) -> Recovery {
        self.recovery
    }

    /// Sets the per-queue budget of finished jobs (by default `JobLimits::default()`).
    pub async fn set_job_limits(&self, limits: sluice_core::jobs::JobLimits) -> Result<(), StoreError> {
        self.call(move |e, _now| {
            e.jobs.board.set_limits(limits);
            Ok(())
        })
        .await
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

    pub(crate) fn closed_error(&self) -> StoreError {
        self.refusal().unwrap_or(StoreError::ShuttingDown)
    }

    /// Runs `f` on the writer thread and answers once its batch is durable.
    pub(crate) async fn call<T, F>(&self, f: F) -> Result<T, StoreError>
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

/// Opens the streams of a data directory (`log`) after the database recovered; damage refuses
/// to start, naming the file.
pub(crate) fn open_logs(
    data_dir: &std::path::Path,
    recovered: &mut Recovered,
    now: TimeMs,
) -> Result<log::Logs, OpenError> {
    let (logs, warnings) = log::Logs::open(data_dir, &mut recovered.records, now)
        .map_err(|d| OpenError::Damaged { file: d.file, reason: d.reason })?;
    for w in warnings {
        tracing::warn!("{}", w.0);
    }
    Ok(logs)
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

impl StoreStatus for EmbeddedStore {
    fn refusal(&self) -> Option<StoreError> {
        self.shared.refusal()
    }

    fn counters(&self) -> StoreCounters {
        self.shared.counters.snapshot()
    }

    /// Calls waiting in the writer's channel: what load shedding watches.
    fn backlog(&self) -> Option<u64> {
        Some(self.tx.len() as u64)
    }
}
