//! The job store: async jobs (`sluice_core::jobs`), each call one atomic, durable state
//! transition. An enqueue, a claim (of many jobs), a heartbeat, a completion, a failure, a
//! cancel, and every change time makes (a lease that lapses, a backoff or delay that ends, a
//! finished job pruned) is one write: there is no moment at which a crash could leave a job
//! half moved, claimed but without its lease, or finished without its completion webhook.
//!
//! Jobs are not built on queue messages plus records, which would take two writes per
//! transition (and a crash between them would lose or double a job). They are a concern of
//! their own, with their own conformance module (`conformance/jobs.rs`).
//!
//! The one write a transition makes also holds its webhook: when a job with a `callback_url`
//! finishes, its [`JobCallback`] is sent to the queue [`JOB_CALLBACK_QUEUE`] in the same
//! write, which the services' callback worker drains (at least once, retried, breaker per
//! endpoint, dead-lettered to [`JOB_CALLBACK_DLQ`]). A store creates that queue when it
//! opens and again whenever it finds it missing.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sluice_core::TimeMs;
use sluice_core::jobs::{
    ClaimSpec, JobDetails, JobError, JobFilter, JobId, JobRecord, LeaseToken, NewJob, QueueJobStats,
};
use sluice_core::limits::RECEIVE_WAIT_MS_MAX;
use sluice_core::{QueueAttributes, ValidationError};

use crate::StoreError;

/// The queue completion webhooks wait in, and its dead-letter queue.
pub const JOB_CALLBACK_QUEUE: &str = "sluice-job-callbacks";
pub const JOB_CALLBACK_DLQ: &str = "sluice-job-callbacks-dlq";
/// The format of [`JobCallback`] messages this version writes and reads.
pub const JOB_CALLBACK_FORMAT: u8 = 1;
/// Most jobs one list call looks at, whatever it matches: a page whose filters match little
/// ends there with a token to go on, so that no call holds a store for long.
pub const JOB_LIST_SCAN_MAX: usize = 50_000;

/// The attributes the callback queue is created with: kept two weeks, like push deliveries,
/// so that a long outage of an endpoint (or an open breaker) loses nothing.
pub fn job_callback_queue_attributes() -> QueueAttributes {
    QueueAttributes { retention_ms: 14 * 24 * 60 * 60 * 1000, ..QueueAttributes::default() }
}

/// One completion webhook to make: the body of a message in [`JOB_CALLBACK_QUEUE`]. The
/// callback worker reads the job's final view when it POSTs; `status` is what it finished as,
/// for a job pruned before its webhook went out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobCallback {
    pub format: u8,
    pub job_id: String,
    pub queue: String,
    pub job_type: String,
    pub status: String,
    pub url: String,
}

impl JobCallback {
    pub fn new(record: &JobRecord, url: &str) -> JobCallback {
        JobCallback {
            format: JOB_CALLBACK_FORMAT,
            job_id: record.id.to_string(),
            queue: record.queue.clone(),
            job_type: record.job_type.clone(),
            status: record.status.as_str().to_string(),
            url: url.to_string(),
        }
    }

    pub fn to_body(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn from_body(body: &[u8]) -> Result<JobCallback, String> {
        let callback: JobCallback = serde_json::from_slice(body).map_err(|e| format!("not a job callback: {e}"))?;
        if callback.format != JOB_CALLBACK_FORMAT {
            return Err(format!("job callback format {}, this version reads {JOB_CALLBACK_FORMAT}", callback.format));
        }
        Ok(callback)
    }
}

/// A job as a store shows it: its state, its details, and those of its values the call asked
/// for (a list leaves out the payload and the result).
#[derive(Debug, Clone, PartialEq)]
pub struct JobView {
    pub record: JobRecord,
    pub details: JobDetails,
    /// JSON text.
    pub payload: Option<Vec<u8>>,
    /// JSON text, once succeeded.
    pub result: Option<Vec<u8>>,
    /// JSON text, the latest a heartbeat reported.
    pub progress: Option<Vec<u8>>,
    /// The last failure (a worker's error or a lapse).
    pub error: Option<String>,
}

/// What an enqueue answers: the job, and whether it is new (false: its unique key was held by
/// this job, which was returned instead).
#[derive(Debug, Clone, PartialEq)]
pub struct EnqueuedJob {
    pub view: JobView,
    pub created: bool,
}

/// A claimed job, its payload included, and the lease its worker must show.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedJob {
    pub view: JobView,
    pub lease: String,
}

/// What a heartbeat answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub cancel_requested: bool,
    pub lease_expires_at: TimeMs,
}

/// A list call: jobs matching every filter given, in id order (creation order), after `after`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobListRequest {
    pub filter: JobFilter,
    pub tag: Option<String>,
    pub after: Option<JobId>,
    pub limit: usize,
}

/// A list answer. `resume_after` is set when the call stopped at [`JOB_LIST_SCAN_MAX`] before
/// `limit` jobs matched: the next page starts after it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobPage {
    pub jobs: Vec<JobView>,
    pub resume_after: Option<JobId>,
}

/// Reads a lease as a worker sent it.
pub fn parse_lease(text: &str) -> Result<LeaseToken, StoreError> {
    LeaseToken::decode(text).ok_or_else(|| {
        StoreError::Job(JobError::Invalid(ValidationError::new("lease", "not a lease this server issued")))
    })
}

/// Checks a long poll's wait.
pub fn validate_wait_ms(wait_ms: u64) -> Result<(), StoreError> {
    if wait_ms > RECEIVE_WAIT_MS_MAX {
        return Err(StoreError::Job(JobError::Invalid(ValidationError::new(
            "wait_ms",
            format!("must be at most {RECEIVE_WAIT_MS_MAX}"),
        ))));
    }
    Ok(())
}

/// The operations of a job engine. Every call that changes a job is one atomic durable write
/// before it answers (in the default durability mode); a call that returns an error changed
/// nothing. Job-level refusals are `StoreError::Job`: `NotFound`, `StaleLease` (the lease's
/// attempt is over: it never touches a newer attempt), `Finished`, `Invalid`.
#[async_trait]
pub trait JobStore: Send + Sync + 'static {
    /// Enqueues a job (checked with [`NewJob::validate`]); with a unique key held within its
    /// window, returns the holder with `created: false` and enqueues nothing.
    async fn enqueue_job(&self, job: NewJob) -> Result<EnqueuedJob, StoreError>;
    /// The job with every value. With `wait_ms > 0`, waits up to that long for the job to
    /// finish (answering at once if it has).
    async fn get_job(&self, id: JobId, wait_ms: u64) -> Result<JobView, StoreError>;
    /// A page of jobs (without payloads and results).
    async fn list_jobs(&self, request: JobListRequest) -> Result<JobPage, StoreError>;
    /// Cancels a waiting job at once, or asks a running one's worker to stop; answers the job
    /// as it is after.
    async fn cancel_job(&self, id: JobId) -> Result<JobView, StoreError>;
    /// Claims up to `spec.max` claimable jobs, waiting up to `wait_ms` for the first; an empty
    /// vector when none came in time.
    async fn claim_jobs(&self, spec: ClaimSpec, wait_ms: u64) -> Result<Vec<ClaimedJob>, StoreError>;
    /// Extends the current attempt's lease and keeps `progress` (JSON text).
    async fn heartbeat_job(
        &self,
        id: JobId,
        lease: &str,
        progress: Option<Vec<u8>>,
        lease_ms: Option<u64>,
    ) -> Result<HeartbeatAnswer, StoreError>;
    /// Ends the current attempt with a result (JSON text); answers the job after (without its
    /// payload and result).
    async fn complete_job(&self, id: JobId, lease: &str, result: Vec<u8>) -> Result<JobView, StoreError>;
    /// Ends the current attempt with an error; retried after its backoff unless `retry` is
    /// false or it was the last attempt. Answers the job after.
    async fn fail_job(&self, id: JobId, lease: &str, error: String, retry: bool) -> Result<JobView, StoreError>;
    /// Every queue's jobs by status and finished result bytes.
    async fn job_stats(&self) -> Result<Vec<QueueJobStats>, StoreError>;
}
