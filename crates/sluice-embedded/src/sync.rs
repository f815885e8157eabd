//! The second stage of the write pipeline: it makes committed batches durable and answers
//! their callers while the writer thread builds and commits the next batch.
//!
//! Why a thread of its own, and why it syncs the journal file itself: fjall's
//! `Database::persist(SyncData)` holds the journal's mutex for the whole `fdatasync`, and
//! `WriteBatch::commit` needs that same mutex to append to the journal and fill the memtables
//! (fjall 3.1, `journal/mod.rs` and `batch/mod.rs`). Called from a second thread it would only
//! move the wait into the writer's next commit. So this stage opens the active journal file
//! itself and calls `fdatasync` on its own descriptor, outside fjall's lock: Linux flushes a
//! file's dirty pages whichever descriptor wrote them, and reports a write-back error to every
//! descriptor that was open when it happened.
//!
//! Why one sync covers every batch handed over before it: the writer hands a batch over only
//! after fjall has appended it to the journal and passed it to the kernel
//! (`persist(Buffer)`). This stage then syncs the newest journal (fjall numbers journals in
//! order and only ever appends to the newest). If that is the file the batch went to, the
//! sync covers it. If a newer file exists, fjall rotated after the batch was appended, and a
//! rotation syncs the old journal in full (`Writer::rotate` starts with `persist(SyncAll)`)
//! before it creates the next one, under the lock every commit takes; a rotation whose sync
//! failed creates no newer file, so this stage syncs the old one itself and sees the error.
//!
//! Jobs are taken in order, everything waiting at once: one `fdatasync` answers every batch
//! handed over before it started (group commit again, one stage later). A writer turn that
//! wrote nothing still comes through here while earlier batches are not yet durable, since
//! its answers may show their effects. After a failed sync every later job is answered with
//! the failure: the store is poisoned and nothing is synced again.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use sluice_store::StoreError;

use crate::Shared;
use crate::journal::journal_id;

/// Sent back once the batch a command belongs to is durable (or failed). Runs on the writer
/// thread or on the sync stage's: it must only hand the result over, never block.
pub type Reply = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// Time one `fdatasync` of the journal took (a histogram, seconds).
pub const SYNC_SECONDS: &str = "sluice_store_sync_seconds";
/// Write batches one `fdatasync` made durable (a histogram).
pub const SYNC_BATCHES: &str = "sluice_store_sync_batches";

/// How the stage makes the journal file durable: [`sync_data`] in the product; tests put a
/// stand-in around it to hold a sync back or make it fail, and see what is answered meanwhile.
pub type SyncFile = Arc<dyn Fn(&File) -> std::io::Result<()> + Send + Sync>;

/// Most threads that sync stream segment files at once, beside the journal's own sync.
const LOG_SYNC_THREADS_MAX: usize = 16;

/// `fdatasync` of one file: what [`SyncFile`] is outside tests.
pub fn sync_data() -> SyncFile {
    Arc::new(|file: &File| file.sync_data())
}

enum Job {
    /// Answer `replies` once everything handed over before is durable, and this turn's own
    /// batch too if it `wrote` one.
    Answer { replies: Vec<Reply>, wrote: bool },
    /// Interval mode: sync now; nobody waits for it.
    Sync,
    /// Signal once every job before this one is done.
    Barrier(std::sync::mpsc::Sender<()>),
}

/// The handle the writer keeps. Dropping it finishes the jobs handed over and stops the thread.
pub struct Syncer {
    tx: Option<Sender<Job>>,
    /// `Answer` jobs handed over and not yet answered.
    pending: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl Syncer {
    /// Starts the stage for the journals of `data_dir`.
    pub fn start(data_dir: PathBuf, shared: Arc<Shared>, sync_file: SyncFile) -> std::io::Result<Syncer> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let pending = Arc::new(AtomicUsize::new(0));
        let journal = ActiveJournal { dir: data_dir, open: None, sync_file };
        let stage = Stage { journal, shared, pending: pending.clone() };
        let thread = std::thread::Builder::new().name("sluice-sync".into()).spawn(move || stage.run(rx))?;
        Ok(Syncer { tx: Some(tx), pending, thread: Some(thread) })
    }

    /// True when every job handed over has been answered: a turn that wrote nothing may then
    /// answer its callers itself, without a trip through this stage.
    pub fn idle(&self) -> bool {
        self.pending.load(Ordering::Acquire) == 0
    }

    /// Answers `replies` after a sync that covers this turn's batch (if it `wrote` one) and
    /// every batch handed over before.
    pub fn answer(&self, replies: Vec<Reply>, wrote: bool) {
        self.pending.fetch_add(1, Ordering::AcqRel);
        self.send(Job::Answer { replies, wrote });
    }

    /// Interval mode: asks for a sync of what is written so far, without waiting for it.
    pub fn sync(&self) {
        self.send(Job::Sync);
    }

    /// Waits until every job handed over so far is done (synced or failed, and answered).
    pub fn drain(&self) {
        let (ack, done) = std::sync::mpsc::channel();
        self.send(Job::Barrier(ack));
        let _ = done.recv();
    }

    fn send(&self, job: Job) {
        let tx = self.tx.as_ref().expect("the sync stage runs until the syncer is dropped");
        // The stage only stops when this handle drops its sender, so a send cannot fail; if
        // the thread died anyway, the job's callers see their reply channel close.
        let _ = tx.send(job);
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct Stage {
    journal: ActiveJournal,
    shared: Arc<Shared>,
    pending: Arc<AtomicUsize>,
}

impl Stage {
    fn run(mut self, rx: Receiver<Job>) {
        let mut failed: Option<StoreError> = None;
        while let Ok(first) = rx.recv() {
            let mut jobs = vec![first];
            jobs.extend(rx.try_iter());
            let wrote = jobs.iter().any(|job| matches!(job, Job::Answer { wrote: true, .. } | Job::Sync));
            let outcome = match &failed {
                Some(refusal) => Err(refusal.clone()),
                None if wrote => self.sync(&jobs),
                None => Ok(()),
            };
            if let Err(refusal) = &outcome {
                failed.get_or_insert_with(|| refusal.clone());
            }
            for job in jobs {
                match job {
                    Job::Answer { replies, .. } => {
                        for reply in replies {
                            reply(outcome.clone());
                        }
                        self.pending.fetch_sub(1, Ordering::AcqRel);
                    }
                    Job::Sync => {}
                    Job::Barrier(ack) => {
                        let _ = ack.send(());
                    }
                }
            }
        }
    }

    /// Syncs the journal once for `jobs`; on failure poisons the store and returns its refusal.
    fn sync(&mut self, jobs: &[Job]) -> Result<(), StoreError> {
        let started = Instant::now();
        if let Err(e) = self.sync_journal_and_log_files() {
            let reason = format!("syncing a batch: {e}");
            self.shared.poison(&reason);
            return Err(self.shared.refusal().unwrap_or(StoreError::Poisoned(reason)));
        }
        metrics::histogram!(SYNC_SECONDS).record(started.elapsed().as_secs_f64());
        let batches = jobs.iter().filter(|job| matches!(job, Job::Answer { wrote: true, .. })).count();
        metrics::histogram!(SYNC_BATCHES).record(batches as f64);
        Ok(())
    }
}

impl Stage {
    /// `fdatasync` of the journal and of every stream segment file the writer wrote to and
    /// handed over before this sync started, each once, all at the same time: the kernel's
    /// flushes of separate files overlap (on ext4, fsyncs that run together share one commit of
    /// the filesystem's journal), so a turn that appended to several partitions waits about one
    /// sync rather than one per file. Their order does not matter for what is acknowledged,
    /// which waits for all of them; a crash between them leaves at worst a dedup id past its
    /// partition's end (dropped when the store opens) or a record without its dedup id (an
    /// append never acknowledged, which a retry can append again).
    ///
    /// The journal is synced only if the writer appended to it since the last journal sync
    /// began (`journal_dirty`): the writer sets the flag before it hands the turn over, and this
    /// stage clears it just before syncing, so a write the flag no longer shows was covered by an
    /// earlier sync that started after it.
    fn sync_journal_and_log_files(&mut self) -> std::io::Result<()> {
        let mut files = std::mem::take(&mut *self.shared.log_files.lock().unwrap_or_else(|e| e.into_inner()));
        let journal_dirty = self.shared.journal_dirty.swap(false, Ordering::AcqRel);
        if files.is_empty() {
            return if journal_dirty { self.journal.sync() } else { Ok(()) };
        }
        files.sort_by_key(|f| Arc::as_ptr(f) as usize);
        files.dedup_by(|a, b| Arc::ptr_eq(a, b));
        let threads = files.len().min(LOG_SYNC_THREADS_MAX);
        let sync_file = self.journal.sync_file.clone();
        let journal = &mut self.journal;
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    let (files, sync_file) = (&files, sync_file.clone());
                    scope.spawn(move || files.iter().skip(t).step_by(threads).try_for_each(|f| sync_file(f)))
                })
                .collect();
            let mut outcome = if journal_dirty { journal.sync() } else { Ok(()) };
            for worker in workers {
                let synced = worker.join().unwrap_or_else(|_| Err(std::io::Error::other("a sync thread panicked")));
                outcome = outcome.and(synced);
            }
            outcome
        })
    }
}

/// The journal fjall appends to, opened by this stage for syncing only.
struct ActiveJournal {
    dir: PathBuf,
    /// The newest journal seen so far: which file it is, and a descriptor of it.
    open: Option<(FileIdentity, File)>,
    sync_file: SyncFile,
}

/// A journal's number and its inode: after a full disk the store reopens the database, and a
/// journal of the same number could then be another file; the descriptor of the old one would
/// sync nothing that matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileIdentity {
    journal: u64,
    device: u64,
    inode: u64,
}

impl ActiveJournal {
    /// `fdatasync` of the newest journal in the data directory.
    fn sync(&mut self) -> std::io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let (journal, path) = newest_journal(&self.dir)?;
        let meta = std::fs::metadata(&path)?;
        let identity = FileIdentity { journal, device: meta.dev(), inode: meta.ino() };
        match &self.open {
            Some((open, _)) if *open == identity => {}
            // Kept open from one sync to the next, so that a write-back error that happens in
            // between is reported to it.
            _ => self.open = Some((identity, File::options().read(true).write(true).open(&path)?)),
        }
        let (_, file) = self.open.as_ref().expect("opened above");
        (self.sync_file)(file)
    }
}

/// The highest-numbered `*.jnl` file directly in `dir`, where fjall 3 keeps its journals.
fn newest_journal(dir: &Path) -> std::io::Result<(u64, PathBuf)> {
    let mut newest: Option<(u64, PathBuf)> = None;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if let Some(id) = journal_id(&path)
            && newest.as_ref().is_none_or(|(n, _)| id > *n)
        {
            newest = Some((id, path));
        }
    }
    newest.ok_or_else(|| std::io::Error::other(format!("no journal (*.jnl) in {}", dir.display())))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc;
    use std::time::Duration;

    use sluice_core::{NewMessage, QueueAttributes};
    use sluice_store::{QueueStore, StoreStatus};

    use super::*;
    use crate::{Durability, EmbeddedConfig, EmbeddedStore};

    /// Long enough for anything on a loaded machine; only a failing test waits this long.
    const PATIENCE: Duration = Duration::from_secs(30);

    /// A stand-in for `fdatasync` that the test drives: while held, every sync announces that
    /// it started and then waits for the test's verdict before syncing for real.
    struct Gate {
        held: AtomicBool,
        /// Every sync call, held or not.
        calls: AtomicUsize,
        started: Mutex<mpsc::Sender<()>>,
        verdicts: Mutex<mpsc::Receiver<std::io::Result<()>>>,
    }

    struct Driver {
        gate: Arc<Gate>,
        started: mpsc::Receiver<()>,
        verdicts: mpsc::Sender<std::io::Result<()>>,
    }

    impl Driver {
        fn new() -> Driver {
            let (started_tx, started) = mpsc::channel();
            let (verdicts, verdicts_rx) = mpsc::channel();
            let gate = Arc::new(Gate {
                held: AtomicBool::new(false),
                calls: AtomicUsize::new(0),
                started: Mutex::new(started_tx),
                verdicts: Mutex::new(verdicts_rx),
            });
            Driver { gate, started, verdicts }
        }

        fn sync_file(&self) -> SyncFile {
            let gate = self.gate.clone();
            Arc::new(move |file: &File| {
                gate.calls.fetch_add(1, Ordering::SeqCst);
                if gate.held.load(Ordering::SeqCst) {
                    let _ = gate.started.lock().expect("lock").send(());
                    // A test that forgets a held sync fails it rather than hanging.
                    let verdict = gate.verdicts.lock().expect("lock").recv_timeout(PATIENCE);
                    verdict.unwrap_or_else(|_| Err(std::io::Error::other("the test gave no verdict")))?;
                }
                file.sync_data()
            })
        }

        fn hold(&self) {
            self.gate.held.store(true, Ordering::SeqCst);
        }

        /// Lets every later sync through at once, and the one held now if there is one.
        fn release(&self) {
            self.gate.held.store(false, Ordering::SeqCst);
            self.finish_sync(Ok(()));
        }

        /// Waits until a held sync has started; panics with `why` if none does.
        fn sync_started(&self, why: &str) {
            self.started.recv_timeout(PATIENCE).unwrap_or_else(|_| panic!("no sync started: {why}"));
        }

        fn finish_sync(&self, verdict: std::io::Result<()>) {
            self.verdicts.send(verdict).expect("the gate listens");
        }
    }

    fn open(dir: &Path, durability: Durability, driver: &Driver) -> Arc<EmbeddedStore> {
        let config = EmbeddedConfig { data_dir: dir.to_owned(), durability };
        Arc::new(
            EmbeddedStore::open_syncing_with(config, Arc::new(sluice_clock::SystemClock), driver.sync_file())
                .expect("open"),
        )
    }

    fn send(store: &Arc<EmbeddedStore>, body: &str) -> tokio::task::JoinHandle<Result<(), StoreError>> {
        let store = store.clone();
        let message = NewMessage { body: body.as_bytes().to_vec(), ..Default::default() };
        tokio::spawn(async move { store.send("q", vec![message]).await.map(|_| ()) })
    }

    /// An fsync store with queue `q`, whose next sync is held: the one covering the send of
    /// `a`, which is returned unanswered.
    async fn store_holding_the_sync_of_a(
        dir: &Path,
        driver: &Driver,
    ) -> (Arc<EmbeddedStore>, tokio::task::JoinHandle<Result<(), StoreError>>) {
        let store = open(dir, Durability::Fsync, driver);
        store.create_queue("q", QueueAttributes::default()).await.expect("create");
        driver.hold();
        let a = send(&store, "a");
        driver.sync_started("the send of a");
        (store, a)
    }

    /// Until the writer has run `sent` sends in all (their batches are written right after).
    async fn until_sent(store: &EmbeddedStore, sent: u64) {
        let deadline = Instant::now() + PATIENCE;
        while store.counters().messages_sent < sent {
            assert!(Instant::now() < deadline, "the writer never ran the sends");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    // Several threads: the test blocks on the gate while its spawned calls go on.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_append_is_answered_only_after_its_segment_files_are_synced() {
        use sluice_core::stream::{NewRecord, StreamConfig};
        use sluice_store::LogStore;
        let dir = tempfile::tempdir().expect("temp dir");
        let driver = Driver::new();
        let store = open(dir.path(), Durability::Fsync, &driver);
        store.create_stream("s", StreamConfig { partitions: 2, ..Default::default() }).await.expect("create");
        let record = |partition, dedup: Option<&str>| NewRecord {
            partition: Some(partition),
            body: b"r".to_vec(),
            dedup_id: dedup.map(str::to_owned),
            ..Default::default()
        };
        let append = |records: Vec<NewRecord>| {
            let store = store.clone();
            tokio::spawn(async move { store.append("s", records, None).await })
        };
        for (dedup, files) in [(None, 2), (Some("d"), 3)] {
            // One record into each partition: two segment files, and the journal too when a
            // dedup id went into fjall.
            let before = driver.gate.calls.load(Ordering::SeqCst);
            driver.hold();
            let appended = append(vec![record(0, dedup), record(1, None)]);
            for n in 0..files {
                driver.sync_started(&format!("sync {n} of the append's {files} files"));
            }
            assert!(!appended.is_finished(), "the append was answered before its files were synced");
            for _ in 0..files - 1 {
                driver.finish_sync(Ok(()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(!appended.is_finished(), "answered before the last of its files was synced");
            driver.release();
            let results = appended.await.expect("task").expect("append");
            assert!(results.iter().all(Result::is_ok), "{results:?}");
            assert_eq!(driver.gate.calls.load(Ordering::SeqCst) - before, files, "files synced for the append");
        }
    }

    // Several threads: the test blocks on the gate while its spawned calls go on.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn nothing_is_answered_before_a_sync_that_started_after_its_batch_was_written() {
        let dir = tempfile::tempdir().expect("temp dir");
        let driver = Driver::new();
        let (store, a) = store_holding_the_sync_of_a(dir.path(), &driver).await;
        // Written while a's sync is held: b, and a read that would show a.
        let b = send(&store, "b");
        until_sent(&store, 2).await;
        let read = {
            let store = store.clone();
            tokio::spawn(async move { store.get_queue("q").await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!a.is_finished(), "a was answered before its batch was synced");
        assert!(!b.is_finished(), "b was answered before its batch was synced");
        assert!(!read.is_finished(), "a read showed a before a's batch was synced");

        driver.finish_sync(Ok(()));
        a.await.expect("task").expect("a is durable");
        // b's batch was written after that sync started, so it needs a sync of its own.
        driver.sync_started("b was answered by a sync that started before its batch was written");
        assert!(!b.is_finished(), "b was answered before a sync that covers it finished");
        driver.finish_sync(Ok(()));
        b.await.expect("task").expect("b is durable");
        let view = read.await.expect("task").expect("read");
        assert!(view.stats.visible >= 1, "the read answered after a's sync shows a: {view:?}");
    }

    // Several threads: the test blocks on the gate while its spawned calls go on.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_sync_fails_its_callers_and_poisons_the_store() {
        let dir = tempfile::tempdir().expect("temp dir");
        let driver = Driver::new();
        let (store, a) = store_holding_the_sync_of_a(dir.path(), &driver).await;
        driver.finish_sync(Err(std::io::Error::other("injected write-back error")));
        let refused = a.await.expect("task").expect_err("a's sync failed, so a must not be acknowledged");
        assert!(matches!(&refused, StoreError::Poisoned(why) if why.contains("injected")), "{refused:?}");
        assert!(matches!(store.refusal(), Some(StoreError::Poisoned(_))));
        let later = send(&store, "b").await.expect("task");
        assert!(matches!(later, Err(StoreError::Poisoned(_))), "{later:?}");
        assert!(driver.started.try_recv().is_err(), "a poisoned store synced again");
    }

    // Several threads: the test blocks on the gate while its spawned calls go on.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn interval_mode_answers_without_waiting_for_the_sync() {
        let dir = tempfile::tempdir().expect("temp dir");
        let driver = Driver::new();
        let store = open(dir.path(), Durability::Interval(Duration::from_millis(1)), &driver);
        store.create_queue("q", QueueAttributes::default()).await.expect("create");

        driver.hold();
        send(&store, "a").await.expect("task").expect("sent");
        // The timer's sync of a is held now; sends go on being answered meanwhile.
        driver.sync_started("the interval sync after a");
        tokio::time::timeout(PATIENCE, send(&store, "b"))
            .await
            .expect("b was answered while the sync was held")
            .expect("task")
            .expect("sent");
        driver.release();
    }

    #[test]
    fn the_newest_journal_is_the_highest_number() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(newest_journal(dir.path()).is_err(), "no journal yet");
        for name in ["9.jnl", "10.jnl", "2.jnl", "11.txt", "x.jnl", "lock"] {
            std::fs::write(dir.path().join(name), b"").expect("write");
        }
        let (id, path) = newest_journal(dir.path()).expect("found");
        assert_eq!((id, path), (10, dir.path().join("10.jnl")));
    }
}
