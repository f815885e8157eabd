//! The `jobs` scenario: async jobs end to end with an empty handler. Producers enqueue one job
//! per call, closed-loop; N workers (4, then 16) each claim one job, complete it at once, and
//! claim the next. Measured: jobs enqueued and completed per second, and enqueue-to-start
//! latency (from just before the enqueue call to the worker holding the job, both on this
//! process's clock, carried in the payload).
//!
//! Beside Sluice (in-process, embedded store) the same load runs in the same run against the
//! job systems users run today, when the build has the `peers` feature (`peers/jobs.rs`): a
//! plain PostgreSQL jobs table claimed with `FOR UPDATE SKIP LOCKED` (the shape of River and
//! graphile-worker) and Redis in BullMQ's shape (a wait list, an active list, a hash per job,
//! a completed sorted set; Lua scripts for each step), once as configured and once with
//! `appendfsync always`. Ratios compare systems at matched durability: an acknowledged
//! enqueue and completion are on disk (Sluice `fsync`, PostgreSQL `synchronous_commit on`,
//! Redis `appendfsync always`).
//!
//! Producers hold a credit per job waiting to start (`BACKLOG_PER_WORKER` per worker), so the
//! figures describe a steady state with a short queue, not a backlog that grows for the whole
//! phase (which would make latency a measure of the phase's length).

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use async_trait::async_trait;
use comfy_table::{CellAlignment, Table, presets};
use serde_json::{Value, json};
use sluice_api::{ClaimJobsRequest, CompleteJobRequest, EnqueueJobRequest};
use sluice_client::Client;
use tokio::sync::Semaphore;

use crate::Plan;
use crate::job_system::{Claimed, JobHandle, JobSystem};
use crate::report::{self, thousands};
use crate::stats::Latency;
use crate::target::InProcess;
use crate::workload;

/// Workers per phase, one phase each.
pub(crate) const WORKER_COUNTS: [usize; 2] = [4, 16];
/// Jobs allowed to wait for a worker, per worker.
const BACKLOG_PER_WORKER: usize = 4;
/// How long a claim waits for a job before asking again.
const CLAIM_WAIT_MS: u64 = 500;

/// Sluice, in-process on the embedded store, over its native jobs API.
struct SluiceJobs {
    server: InProcess,
    label: String,
}

struct SluiceHandle {
    client: Client,
    queue: String,
}

#[async_trait]
impl JobSystem for SluiceJobs {
    fn name(&self) -> String {
        "sluice".into()
    }

    fn durability(&self) -> String {
        self.label.clone()
    }

    fn per_write_durable(&self) -> bool {
        self.label == "fsync"
    }

    async fn prepare(&self, _queue: &str) -> anyhow::Result<()> {
        // Job queues need no creation; each phase's name is new.
        Ok(())
    }

    async fn handle(&self, queue: &str) -> anyhow::Result<Box<dyn JobHandle>> {
        Ok(Box::new(SluiceHandle { client: workload::client(self.server.url())?, queue: queue.to_owned() }))
    }

    async fn stop(self: Box<Self>) -> anyhow::Result<()> {
        self.server.stop().await
    }
}

#[async_trait]
impl JobHandle for SluiceHandle {
    async fn enqueue(&mut self, enqueued_us: u64) -> anyhow::Result<()> {
        let request = EnqueueJobRequest {
            queue: self.queue.clone(),
            job_type: "bench".into(),
            payload: json!(enqueued_us),
            ..Default::default()
        };
        self.client.enqueue_job(&request).await?;
        Ok(())
    }

    async fn claim(&mut self) -> anyhow::Result<Option<Claimed>> {
        let request = ClaimJobsRequest {
            queues: vec![self.queue.clone()],
            max: Some(1),
            wait_ms: Some(CLAIM_WAIT_MS),
            lease_ms: Some(30_000),
            ..Default::default()
        };
        let answer = self.client.claim_jobs(&request).await?;
        Ok(answer.jobs.into_iter().next().map(|c| Claimed {
            enqueued_us: c.job.payload.as_ref().and_then(Value::as_u64).unwrap_or(0),
            id: c.job.id,
            lease: c.lease,
        }))
    }

    async fn complete(&mut self, job: &Claimed) -> anyhow::Result<()> {
        let request = CompleteJobRequest { lease: job.lease.clone(), result: Value::Null };
        self.client.complete_job(&job.id, &request).await?;
        Ok(())
    }
}

/// One system × worker count.
struct Row {
    system: String,
    durability: String,
    per_write_durable: bool,
    workers: usize,
    enqueued: u64,
    completed: u64,
    window: Duration,
    latency: Latency,
    errors: u64,
    first_error: Option<String>,
}

impl Row {
    fn rate(&self, n: u64) -> f64 {
        n as f64 / self.window.as_secs_f64()
    }
}

pub(crate) async fn run(plan: &Plan) -> anyhow::Result<()> {
    let started = Instant::now();
    let load_average = report::load_average();
    let mut systems: Vec<Box<dyn JobSystem>> = Vec::new();
    let server = InProcess::start(&plan.tmp_dir, plan.durability).await?;
    systems.push(Box::new(SluiceJobs { server, label: plan.durability_label() }));
    let mut notes = Vec::new();
    #[cfg(feature = "peers")]
    {
        let (peers, skipped) = crate::peers::jobs::systems(plan).await;
        systems.extend(peers);
        notes.extend(skipped);
    }
    #[cfg(not(feature = "peers"))]
    notes.push("peers (PostgreSQL, Redis) skipped: this build has no `peers` feature".to_string());
    let mut rows = Vec::new();
    for system in systems {
        for (i, &workers) in WORKER_COUNTS.iter().enumerate() {
            let queue = format!("{}_jobs_{}_{i}", plan.queue.replace('-', "_"), system.name().replace('-', "_"));
            eprintln!("jobs: {} with {workers} workers", system.name());
            let row = phase(plan, system.as_ref(), &queue, workers).await.with_context(|| system.name())?;
            rows.push(row);
        }
        system.stop().await?;
    }
    let text = render(plan, &rows, &notes, started.elapsed(), load_average.as_deref());
    crate::publish(plan, &text, json_rows(&rows))
}

async fn phase(plan: &Plan, system: &dyn JobSystem, queue: &str, workers: usize) -> anyhow::Result<Row> {
    system.prepare(queue).await?;
    let epoch = Instant::now();
    let measure_from = epoch + plan.warmup;
    let end = measure_from + plan.duration;
    let credit = Arc::new(Semaphore::new(workers * BACKLOG_PER_WORKER));
    let (enqueued, completed, errors) =
        (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let first_error: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    let note = {
        let (errors, first_error) = (errors.clone(), first_error.clone());
        move |e: anyhow::Error| {
            errors.fetch_add(1, Ordering::Relaxed);
            first_error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(|| format!("{e:#}"));
        }
    };
    let in_window = move |t: Instant| t >= measure_from && t < end;
    let mut tasks = Vec::new();
    for _ in 0..plan.producers {
        let mut handle = system.handle(queue).await?;
        let (credit, enqueued, note) = (credit.clone(), enqueued.clone(), note.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < end {
                let Ok(Ok(permit)) = tokio::time::timeout(Duration::from_millis(100), credit.acquire()).await else {
                    continue;
                };
                permit.forget();
                let sent_us = epoch.elapsed().as_micros() as u64;
                match handle.enqueue(sent_us).await {
                    Ok(()) if in_window(Instant::now()) => drop(enqueued.fetch_add(1, Ordering::Relaxed)),
                    Ok(()) => {}
                    Err(e) => {
                        credit.add_permits(1);
                        note(e);
                    }
                }
            }
            Latency::new()
        }));
    }
    for _ in 0..workers {
        let mut handle = system.handle(queue).await?;
        let (credit, completed, note) = (credit.clone(), completed.clone(), note.clone());
        tasks.push(tokio::spawn(async move {
            let mut latency = Latency::new();
            while Instant::now() < end {
                let job = match handle.claim().await {
                    Ok(Some(job)) => job,
                    Ok(None) => continue,
                    Err(e) => {
                        note(e);
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let now = Instant::now();
                credit.add_permits(1);
                if in_window(now) {
                    let waited_us =
                        (now - epoch).as_micros() as u64 - job.enqueued_us.min((now - epoch).as_micros() as u64);
                    latency.record(Duration::from_micros(waited_us));
                }
                match handle.complete(&job).await {
                    Ok(()) if in_window(Instant::now()) => drop(completed.fetch_add(1, Ordering::Relaxed)),
                    Ok(()) => {}
                    Err(e) => note(e),
                }
            }
            latency
        }));
    }
    let mut latency = Latency::new();
    for task in tasks {
        latency.merge(&task.await.context("a bench task panicked")?);
    }
    let first_error = first_error.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(Row {
        system: system.name(),
        durability: system.durability(),
        per_write_durable: system.per_write_durable(),
        workers,
        enqueued: enqueued.load(Ordering::Relaxed),
        completed: completed.load(Ordering::Relaxed),
        window: plan.duration,
        latency,
        errors: errors.load(Ordering::Relaxed),
        first_error,
    })
}

fn render(plan: &Plan, rows: &[Row], notes: &[String], elapsed: Duration, load_average: Option<&str>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "sluice bench --scenario jobs: {} producers enqueueing one job per call, workers claiming one job and completing it with an empty handler; {} s measured after {} ms of warm-up per phase",
        plan.producers,
        plan.duration.as_secs_f64(),
        plan.warmup.as_millis()
    );
    if let Some(load) = load_average {
        let _ = writeln!(out, "load average before the run: {load}");
    }
    let mut table = Table::new();
    table.load_preset(presets::NOTHING).set_header([
        "SYSTEM",
        "DURABILITY",
        "WORKERS",
        "ENQUEUED/S",
        "COMPLETED/S",
        "START P50",
        "START P99",
        "VS BEST PEER",
        "ERRORS",
    ]);
    for i in [2, 3, 4, 5, 6, 7, 8] {
        if let Some(c) = table.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    for row in rows {
        // The best peer at the same worker count and matched durability.
        let best_peer = rows
            .iter()
            .filter(|r| {
                r.system != "sluice" && r.workers == row.workers && r.per_write_durable == row.per_write_durable
            })
            .map(|r| r.rate(r.completed))
            .fold(0.0, f64::max);
        let versus = if row.system == "sluice" && best_peer > 0.0 {
            format!("{:.2}x", row.rate(row.completed) / best_peer)
        } else {
            "-".into()
        };
        table.add_row(vec![
            row.system.clone(),
            row.durability.clone(),
            row.workers.to_string(),
            thousands(row.rate(row.enqueued)),
            thousands(row.rate(row.completed)),
            row.latency.quantile_ms(0.5).map_or("-".into(), crate::stats::ms),
            row.latency.quantile_ms(0.99).map_or("-".into(), crate::stats::ms),
            versus,
            row.errors.to_string(),
        ]);
    }
    for line in table.to_string().lines() {
        let _ = writeln!(out, "{}", line.trim_end());
    }
    for row in rows.iter().filter(|r| r.errors > 0) {
        let _ = writeln!(
            out,
            "{} with {} workers, first error: {}",
            row.system,
            row.workers,
            row.first_error.as_deref().unwrap_or("-")
        );
    }
    for note in notes {
        let _ = writeln!(out, "{note}");
    }
    let _ = writeln!(
        out,
        "VS BEST PEER: completed/s over the best peer's at the same workers and matched durability (per-write durable or not)"
    );
    let _ = writeln!(out, "ran for {:.1?}", elapsed);
    out
}

fn json_rows(rows: &[Row]) -> Value {
    Value::Array(
        rows.iter()
            .map(|r| {
                json!({
                    "scenario": "jobs",
                    "system": r.system,
                    "durability": r.durability,
                    "workers": r.workers,
                    "enqueued_per_s": r.rate(r.enqueued),
                    "completed_per_s": r.rate(r.completed),
                    "start_p50_ms": r.latency.quantile_ms(0.5),
                    "start_p99_ms": r.latency.quantile_ms(0.99),
                    "errors": r.errors,
                })
            })
            .collect(),
    )
}
