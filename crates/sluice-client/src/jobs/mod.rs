//! Async jobs: the `/v1/jobs` calls, the [`Client::enqueue_job`] + [`Client::wait_job`]
//! helpers a caller needs for request-reply, and the [`Worker`] runner (`worker.rs`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), sluice_client::ClientError> {
//! use std::time::Duration;
//! use sluice_client::sluice_api::EnqueueJobRequest;
//!
//! let client = sluice_client::Client::new("http://127.0.0.1:9324")?;
//! let request = EnqueueJobRequest {
//!     queue: "reports".into(),
//!     job_type: "monthly".into(),
//!     payload: serde_json::json!({ "month": "2024-05" }),
//!     ..Default::default()
//! };
//! let job = client.enqueue_job(&request).await?.job;
//! let done = client.wait_job(&job.id, Duration::from_secs(60)).await?;
//! println!("{}: {:?}", done.status, done.result);
//! # Ok(()) }
//! ```

mod worker;

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use sluice_api::{
    CallbackSecret, ClaimJobsRequest, ClaimJobsResponse, CompleteJobRequest, EnqueueJobRequest, FailJobRequest,
    HeartbeatRequest, HeartbeatResponse, Job, JobList, JobStatsList,
};
use sluice_core::limits::RECEIVE_WAIT_MS_MAX;

pub use worker::{Handled, JobContext, JobFailure, Worker, WorkerBuilder, WorkerReport};

use crate::{Client, Result, decode};

/// The statuses a job ends in.
pub const TERMINAL_STATUSES: [&str; 3] = ["succeeded", "dead", "cancelled"];

/// Whether a job's status is final.
pub fn is_finished(job: &Job) -> bool {
    TERMINAL_STATUSES.contains(&job.status.as_str())
}

/// What [`Client::enqueue_job`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct EnqueuedJob {
    /// The job as it is now (`queued` when new).
    pub job: Job,
    /// False when its unique key was held: `job` is the existing job, nothing was enqueued.
    pub created: bool,
}

/// Filters of [`Client::list_jobs`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobQuery {
    /// Only jobs of this queue.
    pub queue: Option<String>,
    /// Only jobs with this status.
    pub status: Option<String>,
    /// Only jobs of this type.
    pub job_type: Option<String>,
    /// Only jobs with this tag.
    pub tag: Option<String>,
    /// Most jobs per page (1 to 1000).
    pub limit: Option<u32>,
    /// The previous page's `next_token`.
    pub next_token: Option<String>,
}

impl Client {
    /// `POST /v1/jobs`: enqueues a job (`202`), or returns the job holding its unique key
    /// (`200`, `created: false`).
    pub async fn enqueue_job(&self, request: &EnqueueJobRequest) -> Result<EnqueuedJob> {
        let (status, job) = self.json_with_status(Method::POST, &["v1", "jobs"], &[], Some(request)).await?;
        Ok(EnqueuedJob { job, created: status == StatusCode::ACCEPTED })
    }

    /// [`Client::enqueue_job`] under the caller's own `Idempotency-Key`: an enqueue repeated
    /// after the caller's own restart answers the first one's job instead of enqueueing
    /// another, for the key's TTL (even after a crash of the server between the enqueue and
    /// its stored answer: the server gives such a job a unique key named after the request).
    pub async fn enqueue_job_with_key(&self, request: &EnqueueJobRequest, key: &str) -> Result<EnqueuedJob> {
        let (status, job) = self.json_with_key(&["v1", "jobs"], request, key).await?;
        Ok(EnqueuedJob { job, created: status == StatusCode::ACCEPTED })
    }

    /// `GET /v1/jobs/{id}`; with `wait_ms`, waits up to that long (at most 20 s) for the job to
    /// finish. The request's own timeout is extended by the wait.
    pub async fn get_job(&self, id: &str, wait_ms: Option<u64>) -> Result<Job> {
        let wait = wait_ms.unwrap_or(0).min(RECEIVE_WAIT_MS_MAX);
        let wait_text = wait.to_string();
        let query: Vec<(&str, &str)> = if wait > 0 { vec![("wait_ms", wait_text.as_str())] } else { Vec::new() };
        let timeout = self.timeout + Duration::from_millis(wait);
        let call = self.call(Method::GET, &["v1", "jobs", id], &query, None::<&()>, timeout)?;
        let (status, body) = self.execute(call).await?;
        decode(status, &body)
    }

    /// Waits for the job to finish, long-polling in steps of up to 20 s, for at most
    /// `timeout`; returns the job as it is then (check [`is_finished`]: it may still run).
    pub async fn wait_job(&self, id: &str, timeout: Duration) -> Result<Job> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let wait_ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX).min(RECEIVE_WAIT_MS_MAX);
            let job = self.get_job(id, Some(wait_ms)).await?;
            if is_finished(&job) || Instant::now() >= deadline {
                return Ok(job);
            }
        }
    }

    /// Enqueues a job and waits up to `timeout` for it to finish: a synchronous call over an
    /// asynchronous job. Returns the job as it is then.
    pub async fn enqueue_and_wait(&self, request: &EnqueueJobRequest, timeout: Duration) -> Result<Job> {
        let job = self.enqueue_job(request).await?.job;
        self.wait_job(&job.id, timeout).await
    }

    /// `GET /v1/jobs`: a page of jobs in creation order (without payloads and results).
    pub async fn list_jobs(&self, query: &JobQuery) -> Result<JobList> {
        let limit = query.limit.map(|l| l.to_string());
        let pairs: Vec<(&str, &str)> = [
            ("queue", query.queue.as_deref()),
            ("status", query.status.as_deref()),
            ("type", query.job_type.as_deref()),
            ("tag", query.tag.as_deref()),
            ("limit", limit.as_deref()),
            ("next_token", query.next_token.as_deref()),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();
        self.json(Method::GET, &["v1", "jobs"], &pairs, None::<&()>).await
    }

    /// `POST /v1/jobs/{id}/cancel`.
    pub async fn cancel_job(&self, id: &str) -> Result<Job> {
        self.json(Method::POST, &["v1", "jobs", id, "cancel"], &[], None::<&()>).await
    }

    /// `POST /v1/jobs/claim`: long-polls up to `wait_ms` for claimable jobs.
    pub async fn claim_jobs(&self, request: &ClaimJobsRequest) -> Result<ClaimJobsResponse> {
        let wait_ms = request.wait_ms.unwrap_or(0).min(RECEIVE_WAIT_MS_MAX);
        let timeout = self.timeout + Duration::from_millis(wait_ms);
        let call = self.call(Method::POST, &["v1", "jobs", "claim"], &[], Some(request), timeout)?.without_key();
        let (status, body) = self.execute(call).await?;
        decode(status, &body)
    }

    /// `POST /v1/jobs/{id}/heartbeat`: extends the lease, reports progress, learns of a cancel.
    pub async fn heartbeat_job(&self, id: &str, request: &HeartbeatRequest) -> Result<HeartbeatResponse> {
        self.json(Method::POST, &["v1", "jobs", id, "heartbeat"], &[], Some(request)).await
    }

    /// `POST /v1/jobs/{id}/complete`.
    pub async fn complete_job(&self, id: &str, request: &CompleteJobRequest) -> Result<Job> {
        self.json(Method::POST, &["v1", "jobs", id, "complete"], &[], Some(request)).await
    }

    /// `POST /v1/jobs/{id}/fail`.
    pub async fn fail_job(&self, id: &str, request: &FailJobRequest) -> Result<Job> {
        self.json(Method::POST, &["v1", "jobs", id, "fail"], &[], Some(request)).await
    }

    /// `GET /v1/jobs/stats`: every job queue's jobs counted by status, in one call.
    pub async fn job_stats(&self) -> Result<JobStatsList> {
        self.json(Method::GET, &["v1", "jobs", "stats"], &[], None::<&()>).await
    }

    /// `GET /v1/jobs/callback-secret`: what completion webhooks are signed with.
    pub async fn job_callback_secret(&self) -> Result<String> {
        let answer: CallbackSecret =
            self.json(Method::GET, &["v1", "jobs", "callback-secret"], &[], None::<&()>).await?;
        Ok(answer.secret)
    }
}
