//! [`Worker`]: runs job handlers by type with a bounded concurrency, keeping each job's lease
//! alive while its handler runs.
//!
//! The loop claims as many jobs as it has free slots (long-polling, so an idle worker costs one
//! open request), and runs each in a task of its own: the handler gets a [`JobContext`] (the
//! job, its payload, `set_progress`, and the cancellation it may watch); beside it a heartbeat
//! every third of the lease extends the lease, sends the latest progress and learns whether
//! the job was cancelled. A handler's `Ok(result)` completes the job; an `Err` fails it, which
//! the server retries after its backoff until `max_attempts` (a [`JobFailure::permanent`] is
//! not retried). A heartbeat answered `stale_lease` or `job_not_found` means the attempt is
//! over (the lease lapsed, perhaps while the server was unreachable): the handler is told to
//! stop through its cancellation, and nothing is completed for it.
//!
//! Shutdown ([`Worker::run`]'s future): no more claims; jobs in flight get `shutdown_grace` to
//! finish; then each one still running is returned to its queue by failing it
//! (`worker shut down before the job finished`, retried after its backoff: it counts as an
//! attempt), and its handler is dropped.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use sluice_api::{ClaimJobsRequest, CompleteJobRequest, ErrorCode, FailJobRequest, HeartbeatRequest, Job};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::{Client, ClientError};

/// The longest error text a failure sends (the server's limit is 4 KiB).
const FAILURE_TEXT_BYTES_MAX: usize = 4_000;
/// Attempts of a completion or failure that could not reach the server.
const FINISH_ATTEMPTS_MAX: u32 = 5;

/// Why a handler did not finish its job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFailure {
    /// What went wrong (cut to 4,000 bytes when sent).
    pub message: String,
    /// Whether the server may try again (after the job's backoff, up to `max_attempts`).
    pub retry: bool,
}

impl JobFailure {
    /// A failure the server retries.
    pub fn retry(message: impl Into<String>) -> JobFailure {
        JobFailure { message: message.into(), retry: true }
    }

    /// A failure that ends the job as `dead` at once (bad input, say).
    pub fn permanent(message: impl Into<String>) -> JobFailure {
        JobFailure { message: message.into(), retry: false }
    }
}

impl<E: std::fmt::Display> From<E> for JobFailure {
    fn from(e: E) -> JobFailure {
        JobFailure::retry(e.to_string())
    }
}

/// What a handler returns: the job's result (any JSON), or why it failed.
pub type Handled = Result<serde_json::Value, JobFailure>;

type HandlerFn = Arc<dyn Fn(JobContext) -> Pin<Box<dyn Future<Output = Handled> + Send>> + Send + Sync>;

/// What a handler gets: its job, a way to report progress, and whether to stop.
pub struct JobContext {
    job: Job,
    progress: Arc<Mutex<Option<serde_json::Value>>>,
    stop: watch::Receiver<bool>,
}

impl JobContext {
    /// The job as claimed (status `running`, with its attempt number and payload).
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// The payload as `T`.
    pub fn payload<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_value(self.job.payload.clone().unwrap_or(serde_json::Value::Null))
    }

    /// Reports progress (a number, or any JSON); sent with the next heartbeat.
    pub fn set_progress(&self, progress: impl Serialize) {
        if let Ok(value) = serde_json::to_value(progress) {
            *self.progress.lock().unwrap_or_else(|e| e.into_inner()) = Some(value);
        }
    }

    /// Whether the handler should stop: the job was cancelled, its lease was lost, or the
    /// worker is shutting down and the grace period is over.
    pub fn is_cancelled(&self) -> bool {
        *self.stop.borrow()
    }

    /// Resolves once [`JobContext::is_cancelled`] turns true.
    pub async fn cancelled(&self) {
        raised(&mut self.stop.clone()).await;
    }
}

/// How a [`Worker`] run went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Jobs completed.
    pub completed: u64,
    /// Jobs failed by their handler (retried or not by the server).
    pub failed: u64,
    /// Attempts whose lease was lost before the handler finished (not completed).
    pub lost: u64,
    /// Jobs returned to their queue at shutdown.
    pub returned: u64,
}

#[derive(Default)]
struct Tally {
    completed: AtomicU64,
    failed: AtomicU64,
    lost: AtomicU64,
    returned: AtomicU64,
}

/// Settings of a [`Worker`]; start with [`Worker::builder`].
pub struct WorkerBuilder {
    client: Client,
    queues: Vec<String>,
    handlers: HashMap<String, HandlerFn>,
    concurrency: usize,
    lease: Duration,
    poll_wait: Duration,
    shutdown_grace: Duration,
}

impl WorkerBuilder {
    /// Takes jobs from this queue too (at least one; up to 16).
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queues.push(queue.into());
        self
    }

    /// Runs jobs of `job_type` with `handler`; only types with a handler are claimed.
    pub fn handler<F, Fut>(mut self, job_type: impl Into<String>, handler: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Handled> + Send + 'static,
    {
        let handler: HandlerFn = Arc::new(move |ctx| Box::pin(handler(ctx)));
        self.handlers.insert(job_type.into(), handler);
        self
    }

    /// Jobs run at once at most (default 4).
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// The lease each claim asks for (default 30 s); heartbeats extend it every third of it.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How long one claim waits for a job (default 5 s, at most 20 s).
    pub fn poll_wait(mut self, wait: Duration) -> Self {
        self.poll_wait = wait;
        self
    }

    /// How long jobs in flight may run on after shutdown begins (default 30 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// The worker, ready to [`Worker::run`].
    pub fn build(self) -> Worker {
        Worker { inner: Arc::new(self), tally: Arc::default() }
    }
}

/// Runs job handlers; see the module documentation.
pub struct Worker {
    inner: Arc<WorkerBuilder>,
    tally: Arc<Tally>,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Worker {
    /// A worker over `client`, with no queue and no handler yet.
    pub fn builder(client: Client) -> WorkerBuilder {
        WorkerBuilder {
            client,
            queues: Vec::new(),
            handlers: HashMap::new(),
            concurrency: 4,
            lease: Duration::from_secs(30),
            poll_wait: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(30),
        }
    }

    /// Claims and runs jobs until `shutdown` completes, then winds down (see the module
    /// documentation) and reports.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) -> WorkerReport {
        let (stopping, stopped) = watch::channel(false);
        let slots = Arc::new(Semaphore::new(self.inner.concurrency));
        let mut running = JoinSet::new();
        let mut backoff = Duration::from_millis(50);
        tokio::pin!(shutdown);
        loop {
            while running.try_join_next().is_some() {}
            let permit = tokio::select! {
                () = &mut shutdown => break,
                permit = slots.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            };
            let mut permits = vec![permit];
            while let Ok(p) = slots.clone().try_acquire_owned() {
                permits.push(p);
            }
            let request = ClaimJobsRequest {
                queues: self.inner.queues.clone(),
                types: self.inner.handlers.keys().cloned().collect(),
                max: Some(u32::try_from(permits.len()).unwrap_or(1).min(100)),
                wait_ms: Some(millis(self.inner.poll_wait).min(20_000)),
                lease_ms: Some(millis(self.inner.lease)),
            };
            let claimed = tokio::select! {
                () = &mut shutdown => break,
                claimed = self.inner.client.claim_jobs(&request) => claimed,
            };
            let jobs = match claimed {
                Ok(answer) => {
                    backoff = Duration::from_millis(50);
                    answer.jobs
                }
                Err(_) => {
                    // The server is unreachable or refused: wait a little and claim again.
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
            };
            for (claimed, permit) in jobs.into_iter().zip(permits) {
                let (inner, tally, stopped) = (self.inner.clone(), self.tally.clone(), stopped.clone());
                running.spawn(async move {
                    run_job(&inner, &tally, claimed.job, claimed.lease, stopped).await;
                    drop(permit);
                });
            }
        }
        // Shutdown: no more claims; give the jobs in flight their grace, then return them.
        let grace = tokio::time::sleep(self.inner.shutdown_grace);
        tokio::pin!(grace);
        loop {
            tokio::select! {
                joined = running.join_next() => if joined.is_none() { break },
                () = &mut grace => {
                    let _ = stopping.send(true);
                    while running.join_next().await.is_some() {}
                    break;
                }
            }
        }
        WorkerReport {
            completed: self.tally.completed.load(Ordering::Relaxed),
            failed: self.tally.failed.load(Ordering::Relaxed),
            lost: self.tally.lost.load(Ordering::Relaxed),
            returned: self.tally.returned.load(Ordering::Relaxed),
        }
    }
}

/// How a job's attempt ended on this side.
enum End {
    Handled(Handled),
    /// The lease was lost: the attempt is over on the server.
    Lost,
    /// The worker is shutting down and the grace is over.
    Returned,
}

async fn run_job(inner: &WorkerBuilder, tally: &Tally, job: Job, lease: String, mut shutdown: watch::Receiver<bool>) {
    let Some(handler) = inner.handlers.get(&job.job_type).cloned() else { return };
    let id = job.id.clone();
    let progress: Arc<Mutex<Option<serde_json::Value>>> = Arc::default();
    let (stop_tx, stop_rx) = watch::channel(false);
    let ctx = JobContext { job, progress: progress.clone(), stop: stop_rx };
    let handling = handler(ctx);
    tokio::pin!(handling);
    let every = (inner.lease / 3).max(Duration::from_millis(30));
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let mut sent: Option<serde_json::Value> = None;
    let end = loop {
        tokio::select! {
            result = &mut handling => break End::Handled(result),
            _ = ticks.tick() => {
                let latest = progress.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let changed = latest != sent;
                let request = HeartbeatRequest { lease: lease.clone(), progress: latest.clone().filter(|_| changed), lease_ms: None };
                match inner.client.heartbeat_job(&id, &request).await {
                    Ok(answer) => {
                        sent = latest;
                        if answer.cancel_requested {
                            let _ = stop_tx.send(true);
                        }
                    }
                    Err(e) if lease_is_over(&e) => {
                        let _ = stop_tx.send(true);
                        break End::Lost;
                    }
                    // Unreachable for now: the next heartbeat tries again.
                    Err(_) => {}
                }
            }
            () = raised(&mut shutdown) => {
                let _ = stop_tx.send(true);
                break End::Returned;
            }
        }
    };
    match end {
        End::Handled(Ok(result)) => {
            let request = CompleteJobRequest { lease, result };
            if finish(|| inner.client.complete_job(&id, &request)).await {
                tally.completed.fetch_add(1, Ordering::Relaxed);
            } else {
                tally.lost.fetch_add(1, Ordering::Relaxed);
            }
        }
        End::Handled(Err(failure)) => {
            let request = FailJobRequest { lease, error: Some(cut(failure.message)), retry: Some(failure.retry) };
            if finish(|| inner.client.fail_job(&id, &request)).await {
                tally.failed.fetch_add(1, Ordering::Relaxed);
            } else {
                tally.lost.fetch_add(1, Ordering::Relaxed);
            }
        }
        End::Lost => {
            tally.lost.fetch_add(1, Ordering::Relaxed);
        }
        End::Returned => {
            let error = "worker shut down before the job finished".to_string();
            let request = FailJobRequest { lease, error: Some(error), retry: Some(true) };
            if finish(|| inner.client.fail_job(&id, &request)).await {
                tally.returned.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Resolves once the flag is set (or its sender is gone).
async fn raised(flag: &mut watch::Receiver<bool>) {
    let _ = flag.wait_for(|set| *set).await.map(|_| ());
}

/// Whether an error says the attempt is over on the server.
fn lease_is_over(e: &ClientError) -> bool {
    matches!(e.code(), Some(ErrorCode::StaleLease | ErrorCode::JobNotFound))
}

/// Sends a completion or failure, again after transport errors (the answer of a call that
/// reached the server may have been lost: then the next one meets `stale_lease`, and the
/// first one's outcome stands). True when the server took it.
async fn finish<F, Fut>(send: F) -> bool
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Job, ClientError>>,
{
    let mut delay = Duration::from_millis(100);
    for attempt in 1..=FINISH_ATTEMPTS_MAX {
        match send().await {
            Ok(_) => return true,
            // Refused (not 503, which is worth another try): final.
            Err(e) if e.status().is_some_and(|s| s != 503) => return attempt > 1 && lease_is_over(&e),
            Err(_) => {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
        }
    }
    false
}

fn cut(mut text: String) -> String {
    if text.len() > FAILURE_TEXT_BYTES_MAX {
        let mut end = FAILURE_TEXT_BYTES_MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}
