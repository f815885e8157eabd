//! What the streams scenario measures on Sluice alone, on the machine's disk: the disk's cold
//! sequential read rate, then a stream of `records` records loaded through the store, the
//! store's restart with it, and its replay from offset 0, through the store and over HTTP.
//!
//! "Cold" means not in the page cache: before each cold measurement every file of the data
//! directory (or the probe file) is dropped from the cache with `posix_fadvise(DONTNEED)`, which
//! touches only those files, so other work on the machine keeps its cache.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use sluice_core::stream::limits::{APPEND_RECORDS_MAX, READ_RECORDS_MAX};
use sluice_core::stream::{NewRecord, StreamConfig};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_store::{LogStore, ReadFrom, ReadRequest, Store};

/// Bytes of the file whose cold sequential read gives the disk's rate.
const DISK_PROBE_BYTES: u64 = 1 << 30;
/// Size of each write and read of the probe.
const DISK_CHUNK_BYTES: usize = 8 << 20;
/// Concurrent appenders that load the replay stream.
const LOADERS: usize = 4;
/// The interval mode the stream is loaded in: loading is not measured.
const LOAD_SYNC_MS: u64 = 100;
const STREAM: &str = "replay";

/// The Sluice-only figures.
#[derive(Debug, Clone)]
pub(crate) struct Local {
    pub records: u64,
    pub body_bytes: usize,
    /// The disk's cold sequential read rate, bytes per second, and the probe's size.
    pub disk_read_bytes_per_s: f64,
    /// Loading: how long, and the stream's bytes on disk afterwards.
    pub load: Duration,
    pub stream_bytes: u64,
    pub segments: usize,
    /// Opening the store on the stream, cold.
    pub restart: Duration,
    /// Replay of every record from offset 0, cold: through the store's API, and over HTTP.
    pub replay_store: Duration,
    pub replay_http: Duration,
}

impl Local {
    pub fn rate(&self, took: Duration) -> f64 {
        self.stream_bytes as f64 / took.as_secs_f64()
    }
}

pub(crate) async fn run(tmp_dir: &Path, records: u64, body_bytes: usize) -> anyhow::Result<Local> {
    let bar = crate::progress::phase("streams: the disk's sequential read rate", Duration::from_secs(20));
    let disk = tokio::task::spawn_blocking({
        let dir = tmp_dir.to_owned();
        move || disk_read_rate(&dir)
    })
    .await
    .context("the disk probe panicked")??;
    bar.finish_and_clear();

    let dir = tempfile::Builder::new()
        .prefix("sluice-bench-replay-")
        .tempdir_in(tmp_dir)
        .with_context(|| format!("creating a temporary directory in {}", tmp_dir.display()))?;
    let config = |durability| EmbeddedConfig { data_dir: dir.path().to_owned(), durability };
    let store = open(config(Durability::Interval(Duration::from_millis(LOAD_SYNC_MS)))).await?;
    let bar = crate::progress::phase(&format!("streams: loading {records} records"), Duration::from_secs(120));
    let began = Instant::now();
    store.create_stream(STREAM, StreamConfig::default()).await?;
    load(&store, records, body_bytes).await?;
    let load_took = began.elapsed();
    bar.finish_and_clear();
    close(store).await?;
    let (stream_bytes, segments) = log_files(dir.path())?;

    evict(dir.path())?;
    let began = Instant::now();
    let store = open(config(Durability::Fsync)).await?;
    let restart = began.elapsed();

    evict(dir.path())?;
    let bar = crate::progress::phase("streams: replay through the store", Duration::from_secs(60));
    let began = Instant::now();
    let read = replay_store(&store).await?;
    let replay_store_took = began.elapsed();
    bar.finish_and_clear();
    if read != records {
        bail!("the store replayed {read} records of {records}");
    }

    evict(dir.path())?;
    let bar = crate::progress::phase("streams: replay over HTTP", Duration::from_secs(120));
    let (replay_http, read) = replay_http(store.clone()).await?;
    bar.finish_and_clear();
    if read != records {
        bail!("HTTP replayed {read} records of {records}");
    }
    close(store).await?;
    dir.close().context("removing the replay's data directory")?;
    Ok(Local {
        records,
        body_bytes,
        disk_read_bytes_per_s: disk,
        load: load_took,
        stream_bytes,
        segments,
        restart,
        replay_store: replay_store_took,
        replay_http,
    })
}

async fn open(config: EmbeddedConfig) -> anyhow::Result<Arc<EmbeddedStore>> {
    let store = tokio::task::spawn_blocking(move || EmbeddedStore::open(config))
        .await
        .context("opening the store panicked")?
        .context("opening the embedded store")?;
    Ok(Arc::new(store))
}

async fn close(store: Arc<EmbeddedStore>) -> anyhow::Result<()> {
    tokio::task::spawn_blocking(move || store.close()).await.context("closing the store panicked")
}

/// Appends `records` records of `body_bytes` in batches of the most an append takes, from
/// `LOADERS` tasks at once.
async fn load(store: &Arc<EmbeddedStore>, records: u64, body_bytes: usize) -> anyhow::Result<()> {
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let body = vec![b'.'; body_bytes];
    let tasks: Vec<_> = (0..LOADERS)
        .map(|_| {
            let (store, next, body) = (store.clone(), next.clone(), body.clone());
            tokio::spawn(async move {
                loop {
                    let first = next.fetch_add(APPEND_RECORDS_MAX as u64, std::sync::atomic::Ordering::Relaxed);
                    if first >= records {
                        return Ok::<(), anyhow::Error>(());
                    }
                    let count = (records - first).min(APPEND_RECORDS_MAX as u64) as usize;
                    let batch = vec![NewRecord { body: body.clone(), ..Default::default() }; count];
                    for r in store.append(STREAM, batch, None).await? {
                        r.map_err(|e| anyhow::anyhow!("an append was refused: {e}"))?;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.context("a loader panicked")??;
    }
    Ok(())
}

async fn replay_store(store: &Arc<EmbeddedStore>) -> anyhow::Result<u64> {
    let mut from = 0;
    loop {
        let request = ReadRequest { partition: 0, from: ReadFrom::Offset(from), max: READ_RECORDS_MAX, wait_ms: 0 };
        let batch = store.read(STREAM, request).await?;
        match batch.records.last() {
            Some(last) => from = last.offset + 1,
            None => return Ok(from),
        }
    }
}

/// Serves `store` on a loopback port and reads the stream from offset 0 through the client.
async fn replay_http(store: Arc<EmbeddedStore>) -> anyhow::Result<(Duration, u64)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.context("binding 127.0.0.1:0")?;
    let url = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shared: Arc<dyn Store> = store;
    let server = tokio::spawn(sluice_server::run(listener, shared, async {
        let _ = stopped.await;
    }));
    let client = crate::workload::client(&url)?;
    let began = Instant::now();
    let mut from = 0;
    let outcome: anyhow::Result<u64> = async {
        loop {
            let from_offset = sluice_client::streams::From::Offset(from);
            let batch = client.read_records(STREAM, 0, from_offset, READ_RECORDS_MAX, 0).await?;
            match batch.records.last() {
                Some(last) => from = last.offset + 1,
                None => return Ok(from),
            }
        }
    }
    .await;
    let took = began.elapsed();
    let _ = stop.send(());
    server.await.context("the server task panicked")?.context("the server failed")?;
    Ok((took, outcome?))
}

/// The bytes of every segment file under `dir`, and how many there are.
fn log_files(dir: &Path) -> anyhow::Result<(u64, usize)> {
    let (mut bytes, mut count) = (0, 0);
    for path in files(dir)? {
        if path.extension().is_some_and(|e| e == "log") {
            bytes += std::fs::metadata(&path)?.len();
            count += 1;
        }
    }
    Ok((bytes, count))
}

fn files(dir: &Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            out.extend(files(&entry.path())?);
        } else {
            out.push(entry.path());
        }
    }
    Ok(out)
}

/// Drops every file under `dir` from the page cache (written back first).
fn evict(dir: &Path) -> anyhow::Result<()> {
    for path in files(dir)? {
        evict_file(&path)?;
    }
    Ok(())
}

fn evict_file(path: &Path) -> anyhow::Result<()> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    file.sync_all()?;
    rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed)
        .with_context(|| format!("evicting {} from the page cache", path.display()))?;
    Ok(())
}

/// Writes a `DISK_PROBE_BYTES` file into `dir`, syncs it, drops it from the page cache and
/// reads it back sequentially: the disk's cold sequential read rate in bytes per second.
fn disk_read_rate(dir: &Path) -> anyhow::Result<f64> {
    let probe = tempfile::NamedTempFile::new_in(dir).context("creating the disk probe")?;
    let mut chunk = vec![0u8; DISK_CHUNK_BYTES];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for b in &mut chunk {
        // xorshift: bytes no filesystem compresses or deduplicates away.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        *b = (state >> 32) as u8;
    }
    let mut file = probe.reopen()?;
    let mut written = 0;
    while written < DISK_PROBE_BYTES {
        chunk[0] = chunk[0].wrapping_add(1);
        file.write_all(&chunk)?;
        written += DISK_CHUNK_BYTES as u64;
    }
    evict_file(probe.path())?;
    let mut file = probe.reopen()?;
    let began = Instant::now();
    let mut read = 0u64;
    loop {
        let n = file.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        read += n as u64;
    }
    let took = began.elapsed();
    probe.close().context("removing the disk probe")?;
    Ok(read as f64 / took.as_secs_f64())
}
