//! Async jobs as the API and the other services use them: the store's job calls
//! (`sluice_store::JobStore`), with the figures `/metrics` shows recorded on the way
//! (attempts, queue wait, durations), the signing secret of completion webhooks, and the
//! callback worker (`callbacks.rs`) that POSTs them.
//!
//! Every rule of the job state machine is the store's (`sluice_core::jobs` on the embedded
//! backend, SQL on PostgreSQL); result pruning by TTL and budget is the store's too, counted in
//! its `StoreCounters`. This module only adds what outlives a request and is not a job's
//! state: the webhooks' delivery, and the one secret every node signs them with.

pub mod callbacks;

use std::sync::{Arc, OnceLock};

use sha2::{Digest, Sha256};
use sluice_clock::Clock;
use sluice_core::delivery::DeliveryPolicy;
use sluice_core::jobs::{ClaimSpec, JobId, NewJob, QueueJobStats};
use sluice_store::{ClaimedJob, EnqueuedJob, HeartbeatAnswer, JobListRequest, JobPage, JobView, Store, StoreError};

/// The record that holds the secret completion webhooks are signed with, shared by every node:
/// kind and key.
pub const CALLBACK_SECRET_KIND: &str = "job_settings";
pub const CALLBACK_SECRET_KEY: &str = "callback_secret";

/// Metric names.
pub const ATTEMPTS_METRIC: &str = "sluice_job_attempts_total";
pub const QUEUE_WAIT_METRIC: &str = "sluice_job_queue_wait_seconds";
pub const DURATION_METRIC: &str = "sluice_job_duration_seconds";
pub const ENQUEUED_METRIC: &str = "sluice_jobs_enqueued_total";

/// How jobs' webhooks are delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobsConfig {
    /// The secret webhooks are signed with; when `None`, one is made at first use and kept in
    /// the record `job_settings/callback_secret`, so that every node signs with the same.
    pub callback_secret: Option<String>,
    /// Retries of a webhook that failed, and their spacing.
    pub callback_policy: DeliveryPolicy,
}

impl Default for JobsConfig {
    fn default() -> Self {
        JobsConfig { callback_secret: None, callback_policy: callbacks::default_policy() }
    }
}

/// Renders a job's final view as the body of its webhook: the server's JSON of
/// `GET /v1/jobs/{id}`, handed in by whoever serves that API (the services know no wire
/// format); a bare `{id, queue, type, status}` without one.
pub type ViewRenderer = Arc<dyn Fn(&JobView) -> Vec<u8> + Send + Sync>;

/// The jobs service. One per server; share it in an `Arc`.
pub struct Jobs {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: JobsConfig,
    secret: tokio::sync::OnceCell<String>,
    renderer: OnceLock<ViewRenderer>,
}

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

impl Jobs {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, config: JobsConfig) -> Jobs {
        Jobs { store, clock, config, secret: tokio::sync::OnceCell::new(), renderer: OnceLock::new() }
    }

    pub fn config(&self) -> &JobsConfig {
        &self.config
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Sets how webhooks render a job (once; later calls are ignored).
    pub fn set_renderer(&self, renderer: ViewRenderer) {
        let _ = self.renderer.set(renderer);
    }

    /// A webhook's body for `view`.
    pub fn render(&self, view: &JobView) -> Vec<u8> {
        match self.renderer.get() {
            Some(render) => render(view),
            None => serde_json::to_vec(&serde_json::json!({
                "id": view.record.id.to_string(),
                "queue": view.record.queue,
                "type": view.record.job_type,
                "status": view.record.status.as_str(),
            }))
            .unwrap_or_default(),
        }
    }

    pub async fn enqueue(&self, job: NewJob) -> Result<EnqueuedJob, StoreError> {
        let queue = job.queue.clone();
        let enqueued = self.store.enqueue_job(job).await?;
        if enqueued.created {
            metrics::counter!(ENQUEUED_METRIC, labels(&queue).as_slice()).increment(1);
        }
        Ok(enqueued)
    }

    pub async fn get(&self, id: JobId, wait_ms: u64) -> Result<JobView, StoreError> {
        self.store.get_job(id, wait_ms).await
    }

    pub async fn list(&self, request: JobListRequest) -> Result<JobPage, StoreError> {
        self.store.list_jobs(request).await
    }

    pub async fn cancel(&self, id: JobId) -> Result<JobView, StoreError> {
        self.store.cancel_job(id).await
    }

    /// Claims jobs, counting each as an attempt and recording how long it waited to start.
    pub async fn claim(&self, spec: ClaimSpec, wait_ms: u64) -> Result<Vec<ClaimedJob>, StoreError> {
        let claimed = self.store.claim_jobs(spec, wait_ms).await?;
        for c in &claimed {
            let r = &c.view.record;
            metrics::counter!(ATTEMPTS_METRIC, labels(&r.queue).as_slice()).increment(1);
            let waited = r.started_at.unwrap_or(r.run_at).saturating_sub(r.run_at);
            metrics::histogram!(QUEUE_WAIT_METRIC, labels(&r.queue).as_slice()).record(seconds(waited));
        }
        Ok(claimed)
    }

    pub async fn heartbeat(
        &self,
        id: JobId,
        lease: &str,
        progress: Option<Vec<u8>>,
        lease_ms: Option<u64>,
    ) -> Result<HeartbeatAnswer, StoreError> {
        self.store.heartbeat_job(id, lease, progress, lease_ms).await
    }

    pub async fn complete(&self, id: JobId, lease: &str, result: Vec<u8>) -> Result<JobView, StoreError> {
        let view = self.store.complete_job(id, lease, result).await?;
        record_duration(&view, "succeeded", self.clock.now_ms());
        Ok(view)
    }

    pub async fn fail(&self, id: JobId, lease: &str, error: String, retry: bool) -> Result<JobView, StoreError> {
        let view = self.store.fail_job(id, lease, error, retry).await?;
        record_duration(&view, "failed", self.clock.now_ms());
        Ok(view)
    }

    pub async fn stats(&self) -> Result<Vec<QueueJobStats>, StoreError> {
        self.store.job_stats().await
    }

    /// The secret webhooks are signed with: the configured one, or the one every node shares
    /// through the store (made by whichever node needs it first).
    pub async fn callback_secret(&self) -> Result<String, StoreError> {
        if let Some(secret) = &self.config.callback_secret {
            return Ok(secret.clone());
        }
        self.secret
            .get_or_try_init(|| async {
                // 64 hex digits from the random bits of two UUIDv7s (74 each).
                let mut hasher = Sha256::new();
                hasher.update(uuid::Uuid::now_v7().as_bytes());
                hasher.update(uuid::Uuid::now_v7().as_bytes());
                let fresh: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
                self.store.insert_record(CALLBACK_SECRET_KIND, CALLBACK_SECRET_KEY, fresh.into_bytes()).await?;
                let stored = self.store.get_record(CALLBACK_SECRET_KIND, CALLBACK_SECRET_KEY).await?;
                Ok(stored.map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default())
            })
            .await
            .cloned()
    }
}

/// A job queue's metric labels: its name within its tenant, and the tenant.
fn labels(queue: &str) -> Vec<(&'static str, String)> {
    sluice_core::name::resource_labels("queue", queue)
}

/// How long the attempt that just ended (at `now`, unless the job says when it finished) ran.
fn record_duration(view: &JobView, outcome: &'static str, now: u64) {
    let r = &view.record;
    if let Some(started) = r.started_at {
        let ms = r.finished_at.unwrap_or(now).saturating_sub(started);
        let mut labels = labels(&r.queue);
        labels.push(("outcome", outcome.to_string()));
        metrics::histogram!(DURATION_METRIC, labels.as_slice()).record(seconds(ms));
    }
}
