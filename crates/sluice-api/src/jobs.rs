//! Wire types of async jobs (`/v1/jobs...`): enqueue (`202 Accepted` + `Location`), the job's
//! view, lists, and the worker calls (claim, heartbeat, complete, fail).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// How a job's retries are spaced: the delay before retry `k` (0 for the first) is drawn up to
/// `min(max_ms, initial_ms · multiplier^k)`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobBackoff {
    /// Bound of the first retry's delay (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_ms: Option<u64>,
    /// No delay is longer (default 300000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ms: Option<u64>,
    /// Growth per retry, 1 to 10 (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiplier: Option<f64>,
    /// `full` (default: uniform between 0 and the bound) or `none` (the bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
}

/// `POST /v1/jobs`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnqueueJobRequest {
    /// The job queue: 1 to 80 ASCII letters, digits, `-` and `_` (no need to create it).
    pub queue: String,
    /// What kind of job it is (workers claim by type): 1 to 128 ASCII letters, digits, `-_.:/`.
    #[serde(rename = "type")]
    pub job_type: String,
    /// Any JSON value, at most 1 MiB.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    /// 0 to 9, higher first (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    /// Claimable this long after the enqueue (or give `run_at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Claimable from this time (RFC 3339), within a year.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_at: Option<String>,
    /// The longest one attempt may run, heartbeats or not; then it ends as a lapse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Attempts in all, 1 to 1000 (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<JobBackoff>,
    /// The same key on the same queue within `unique_for_ms` returns the existing job (200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unique_key: Option<String>,
    /// How long a unique key holds from the enqueue (default 24 h, at most 30 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unique_for_ms: Option<u64>,
    /// Receives a signed POST of the job's final view when it finishes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
    /// How long the finished job and its result are kept (default 24 h, at most 30 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_ttl_ms: Option<u64>,
    /// Up to 10 tags of 1 to 64 ASCII letters, digits and `-_.:=/`, to list jobs by.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The business operation the job belongs to (at most 256 bytes): the enqueue is listed
    /// in `GET /v1/trace/{correlation_id}`. Kept in the trace, not in the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// What caused the job (a message, event or saga step id), the trace's link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causation_id: Option<String>,
}

/// A job: `GET /v1/jobs/{id}`, and the answer of every call that changes one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Job {
    pub id: String,
    pub queue: String,
    #[serde(rename = "type")]
    pub job_type: String,
    /// `queued`, `running`, `succeeded`, `failed` (will retry), `dead` or `cancelled`.
    pub status: String,
    pub priority: u8,
    /// Attempts started so far.
    pub attempts: u32,
    pub max_attempts: u32,
    /// Absent from lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub payload: Option<serde_json::Value>,
    /// Once succeeded; absent from lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub result: Option<serde_json::Value>,
    /// The latest progress a heartbeat reported: a number or any JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub progress: Option<serde_json::Value>,
    /// The last failure: the worker's error, or why a lease lapsed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A cancel reached the job while it ran; its worker learns it from its next heartbeat.
    pub cancel_requested: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unique_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    pub result_ttl_ms: u64,
    pub backoff: JobBackoff,
    pub created_at: String,
    pub created_at_ms: u64,
    /// Waiting: when it becomes claimable. Otherwise when it last did.
    pub run_at: String,
    pub run_at_ms: u64,
    /// The current (or last) attempt's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at_ms: Option<u64>,
    /// While running: when the attempt lapses unless a heartbeat extends it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at_ms: Option<u64>,
    /// Once finished: when the job and its result are pruned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
}

/// `GET /v1/jobs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobList {
    pub jobs: Vec<Job>,
    /// Pass as `next_token` to get the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
}

/// `POST /v1/jobs/claim`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimJobsRequest {
    /// 1 to 16 job queues to take jobs from.
    pub queues: Vec<String>,
    /// Only jobs of these types (up to 16); any type when absent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<String>,
    /// Most jobs to claim, 1 to 100 (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
    /// Long poll: wait up to this long (at most 20000, default 0) for a claimable job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
    /// The lease, 100 to 43200000 (default 30000); each heartbeat extends it by as much.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
}

/// A claimed job and its lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClaimedJob {
    /// Pass it to heartbeat, complete and fail; it names this attempt only.
    pub lease: String,
    #[serde(flatten)]
    pub job: Job,
}

/// Answer of `POST /v1/jobs/claim` (empty after `wait_ms`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClaimJobsResponse {
    pub jobs: Vec<ClaimedJob>,
}

/// `POST /v1/jobs/{id}/heartbeat`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    pub lease: String,
    /// A number or any JSON, at most 64 KiB; kept until the next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub progress: Option<serde_json::Value>,
    /// Extend by this instead of the claim's `lease_ms` (and from now on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
}

/// Answer of a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HeartbeatResponse {
    /// The job was cancelled: stop, and fail it (it ends `cancelled`, not retried).
    pub cancel_requested: bool,
    pub lease_expires_at: String,
    pub lease_expires_at_ms: u64,
}

/// `POST /v1/jobs/{id}/complete`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteJobRequest {
    pub lease: String,
    /// Any JSON, at most 1 MiB (`null` when absent).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub result: serde_json::Value,
}

/// `POST /v1/jobs/{id}/fail`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailJobRequest {
    pub lease: String,
    /// What went wrong, at most 4 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `false`: do not retry, the job is `dead` at once (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<bool>,
}

/// `GET /v1/jobs/callback-secret`: the secret completion webhooks are signed with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CallbackSecret {
    /// Verify `x-sluice-signature: sha256=<hex HMAC-SHA256(secret, "<x-sluice-timestamp>.<body>")>`.
    pub secret: String,
}

/// One job queue's jobs counted by status, in `GET /v1/jobs/stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobQueueStats {
    pub queue: String,
    pub queued: u64,
    pub running: u64,
    pub succeeded: u64,
    /// Failed attempts waiting for their retry.
    pub failed: u64,
    pub dead: u64,
    pub cancelled: u64,
    /// Every job the queue holds, whatever its status.
    pub total: u64,
    /// The bytes of the kept results, counted against the queue's result budget.
    pub result_bytes: u64,
}

/// `GET /v1/jobs/stats`: every job queue that holds jobs, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobStatsList {
    pub queues: Vec<JobQueueStats>,
}
