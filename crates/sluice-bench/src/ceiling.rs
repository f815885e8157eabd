//! The two ceilings Sluice's figures are compared with (DESIGN.md §5): what the storage engine
//! alone can make durable, and what an HTTP handler that does nothing can answer.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::http::StatusCode;
use fjall::{Database, KeyspaceCreateOptions, PersistMode};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::time::sleep_until;

use crate::Plan;
use crate::stats::{Latency, Tally};

/// Records per durable batch, as in DESIGN.md §2's figures.
pub(crate) const FJALL_BATCH_RECORDS: u64 = 256;
/// Value bytes per record.
pub(crate) const FJALL_RECORD_BYTES: usize = 256;
/// How long the empty-handler server may take to shut down after its clients stop.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);
/// Pause after a failed request before the next.
pub(crate) const ERROR_PAUSE: Duration = Duration::from_millis(20);

/// One ceiling's result.
#[derive(Debug, Clone)]
pub(crate) struct Ceiling {
    /// Records (fjall) or requests (HTTP) per second.
    pub rate: f64,
    /// Per batch commit (fjall) or per request (HTTP).
    pub latency: Latency,
    /// Concurrent writers (1 for fjall) or client tasks (HTTP).
    pub concurrency: usize,
    pub errors: u64,
}

/// One writer commits batches of 256 records of 256 bytes (u64 big-endian keys), each synced
/// with `SyncData` like the embedded store's group commit in `fsync` mode, for the ceiling
/// duration, in a fresh directory.
pub(crate) async fn fjall(plan: &Plan) -> anyhow::Result<Ceiling> {
    let dir = tempfile::Builder::new()
        .prefix("sluice-bench-fjall-")
        .tempdir_in(&plan.tmp_dir)
        .with_context(|| format!("creating a temporary directory in {}", plan.tmp_dir.display()))?;
    let duration = plan.ceiling_duration;
    let bar = crate::progress::phase("ceiling: fjall", duration);
    let progress = bar.clone();
    let measured = tokio::task::spawn_blocking(move || -> anyhow::Result<(u64, Duration, Latency)> {
        // The same settings as the embedded store: the journal is synced only when asked.
        let db = Database::builder(dir.path()).manual_journal_persist(true).open()?;
        let keyspace = db.keyspace("ceiling", KeyspaceCreateOptions::default)?;
        let value = pseudo_random_bytes(FJALL_RECORD_BYTES);
        let mut latency = Latency::new();
        let mut key = 0u64;
        let started = Instant::now();
        let end = started + duration;
        while Instant::now() < end {
            let batch_started = Instant::now();
            let mut batch = db.batch();
            for _ in 0..FJALL_BATCH_RECORDS {
                batch.insert(&keyspace, key.to_be_bytes(), value.as_slice());
                key += 1;
            }
            batch.durability(Some(PersistMode::SyncData)).commit()?;
            latency.record(batch_started.elapsed());
            progress.set_position(started.elapsed().as_millis() as u64);
            progress.set_message(format!("{key} records"));
        }
        let elapsed = started.elapsed();
        drop(keyspace);
        drop(db);
        dir.close()?;
        Ok((key, elapsed, latency))
    })
    .await
    .context("the fjall writer thread panicked")?;
    bar.finish_and_clear();
    let (records, elapsed, latency) = measured?;
    Ok(Ceiling { rate: records as f64 / elapsed.as_secs_f64(), latency, concurrency: 1, errors: 0 })
}

/// An axum route that answers `200` with no body, hit by as many closed-loop client tasks as
/// the workload has producers and consumers.
pub(crate) async fn empty_http(plan: &Plan) -> anyhow::Result<Ceiling> {
    let app = axum::Router::new().route("/", axum::routing::post(|| async { StatusCode::OK }));
    let listener = TcpListener::bind("127.0.0.1:0").await.context("binding 127.0.0.1:0")?;
    let addr: SocketAddr = listener.local_addr()?;
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });

    let clients = plan.producers + plan.consumers;
    let http = reqwest::Client::builder().build()?;
    let url = format!("http://{addr}/");
    let started = Instant::now();
    let end = started + plan.ceiling_duration;
    let count = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..clients)
        .map(|_| tokio::spawn(empty_client(http.clone(), url.clone(), end.into(), count.clone())))
        .collect();

    let bar = crate::progress::phase("ceiling: empty HTTP", plan.ceiling_duration);
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(100)).await;
        bar.set_position(started.elapsed().as_millis() as u64);
        bar.set_message(format!("{} requests", count.load(Ordering::Relaxed)));
    }
    let mut tally = Tally::new();
    for task in tasks {
        tally.merge(&task.await.context("an HTTP client task panicked")?);
    }
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    drop(http);
    let _ = stop.send(());
    match tokio::time::timeout(SHUTDOWN_WAIT, server).await {
        Ok(joined) => joined.context("the empty-handler server panicked")??,
        Err(_) => anyhow::bail!("the empty-handler server did not stop within {SHUTDOWN_WAIT:?}"),
    }
    if tally.count == 0 {
        anyhow::bail!("no request to the empty handler succeeded: {}", tally.first_error.unwrap_or_default());
    }
    Ok(Ceiling { rate: tally.rate(elapsed), latency: tally.latency, concurrency: clients, errors: tally.errors })
}

async fn empty_client(http: reqwest::Client, url: String, end: tokio::time::Instant, live: Arc<AtomicU64>) -> Tally {
    let mut tally = Tally::new();
    loop {
        let started = Instant::now();
        let call = async {
            let response = http.post(&url).send().await?.error_for_status()?;
            response.bytes().await
        };
        let outcome = tokio::select! {
            outcome = call => outcome,
            _ = sleep_until(end) => break,
        };
        match outcome {
            Ok(_) => {
                tally.count += 1;
                tally.latency.record(started.elapsed());
                live.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                tally.error(1, || e.to_string());
                // Do not spin on a server that fails at once; the next select still ends on time.
                tokio::time::sleep(ERROR_PAUSE).await;
            }
        }
    }
    tally
}

/// Incompressible-looking bytes (xorshift64), so that no layer gets a free ride on zeros.
fn pseudo_random_bytes(len: usize) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect()
}
