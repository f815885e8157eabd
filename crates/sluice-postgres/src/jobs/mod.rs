//! Jobs on PostgreSQL: core's job state machine (`sluice_core::jobs`) restated in SQL over
//! the `jobs` table (migration 7), so that every node serves the same jobs.
//!
//! Each call is one statement or one short transaction (`calls.rs`): an enqueue takes its
//! unique key with `INSERT … ON CONFLICT` (taken over only once the holder's window ended) and
//! inserts the job; a claim picks claimable rows with `FOR UPDATE SKIP LOCKED` in claim order
//! (priority, then the longest claimable, across the queues named) and starts their next
//! attempt under a lease in the same statement, so workers on any nodes never get one job
//! twice; a heartbeat, completion or failure updates the row only where its lease matches the
//! current attempt and has not run out (`lease_expires_at > now`), so a stale lease changes
//! nothing. A transition that finishes a job with a callback URL sends its webhook in the same
//! transaction (`sluice_job_callback`, creating the callback queue if it is missing).
//!
//! Time-driven changes are the sweeper's (`sweep.rs`, under its own advisory lock, run from the
//! store's sweeper every `sweep_interval_ms`): lapsed leases (back to queued, or dead, or
//! cancelled), finished jobs past their `result_ttl_ms`, and, every few sweeps, each queue's
//! budget of result bytes and finished jobs. Where this differs from the embedded store: a
//! lease that ran out is refused at once but its job is claimable again only at the next sweep
//! (within `sweep_interval_ms`); pruning happens within a sweep of being due; the per-queue
//! budget is kept within a few sweeps rather than at each completion, so a queue may briefly
//! hold more.
//!
//! Long polls (`calls::claim`, `calls::get`) use `wake.rs`: job queues and jobs have wake-up
//! keys of their own beside the queue ids ([`queue_key`], [`job_key`]).

mod calls;
pub mod sweep;

use async_trait::async_trait;
use sluice_core::jobs::{
    ClaimSpec, Jitter, JobBackoff, JobDetails, JobId, JobRecord, JobStatus, Lease, NewJob, QueueJobStats, UniqueHold,
    unique_key_hash,
};
use sluice_store::{
    ClaimedJob, EnqueuedJob, HeartbeatAnswer, JOB_CALLBACK_QUEUE, JobCallback, JobListRequest, JobPage, JobStore,
    JobView, StoreError, job_callback_queue_attributes,
};
use tokio_postgres::Row;

use crate::codec::{self, DecodeError, ms};
use crate::{PostgresStore, db_error};

/// Wake-up keys (see `wake.rs`): queue ids are small, so keys with bit 62 (a job queue, by a
/// hash of its name) or bit 61 (a job, by its id's low bits) set never meet one, and stay
/// positive as `bigint`s for NOTIFY.
pub fn queue_key(queue: &str) -> u64 {
    let hash = queue.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    (1 << 62) | (hash & ((1 << 61) - 1))
}

pub fn job_key(id: JobId) -> u64 {
    (1 << 61) | (id.0 as u64 & ((1 << 61) - 1))
}

/// The columns of a job row every statement returns (the table named `j`); `payload` and
/// `result` are added where the answer shows them.
macro_rules! job_columns {
    () => {
        "j.id, j.queue, j.job_type, j.status, j.priority, j.attempt, j.max_attempts, j.backoff_initial_ms, \
         j.backoff_max_ms, j.backoff_multiplier, j.backoff_jitter, j.timeout_ms, j.result_ttl_ms, j.created_at, \
         j.run_at, j.started_at, j.finished_at, j.lease_nonce, j.lease_ms, j.lease_expires_at, j.cancel_requested, \
         j.unique_key, j.unique_until, j.callback_url, j.tags, j.result_bytes, octet_length(j.payload) AS payload_bytes, \
         j.progress, j.error"
    };
}
pub(crate) use job_columns;

fn opt_ms(v: Option<i64>) -> Option<u64> {
    v.map(ms)
}

/// A job row (see `job_columns!`, with `payload` and `result` when `full`) as a view.
fn view_from_row(row: &Row, full: bool) -> Result<JobView, StoreError> {
    let read = || -> Result<JobView, DecodeError> {
        let id: uuid::Uuid = row.try_get("id")?;
        let queue: String = row.try_get("queue")?;
        let status: i16 = row.try_get("status")?;
        let status = JobStatus::from_code(status).ok_or_else(|| DecodeError(format!("job status {status}")))?;
        let unique_key: Option<String> = row.try_get("unique_key")?;
        let unique_until: Option<i64> = row.try_get("unique_until")?;
        let callback_url: Option<String> = row.try_get("callback_url")?;
        let lease_nonce: Option<i64> = row.try_get("lease_nonce")?;
        let lease = match (lease_nonce, opt_ms(row.try_get("lease_ms")?), opt_ms(row.try_get("lease_expires_at")?)) {
            (Some(nonce), Some(lease_ms), Some(expires_at)) => {
                Some(Lease { nonce: nonce as u64, lease_ms, expires_at })
            }
            _ => None,
        };
        let priority: i16 = row.try_get("priority")?;
        let attempt: i32 = row.try_get("attempt")?;
        let max_attempts: i32 = row.try_get("max_attempts")?;
        let jitter: bool = row.try_get("backoff_jitter")?;
        let record = JobRecord {
            id: JobId(id.as_u128()),
            unique: match (&unique_key, unique_until) {
                (Some(key), Some(until)) => {
                    Some(UniqueHold { key_hash: unique_key_hash(&queue, key), until: ms(until) })
                }
                _ => None,
            },
            queue,
            job_type: row.try_get("job_type")?,
            status,
            priority: u8::try_from(priority).unwrap_or(0),
            attempt: u32::try_from(attempt).unwrap_or(0),
            max_attempts: u32::try_from(max_attempts).unwrap_or(1),
            backoff: JobBackoff {
                initial_ms: ms(row.try_get("backoff_initial_ms")?),
                max_ms: ms(row.try_get("backoff_max_ms")?),
                multiplier: row.try_get("backoff_multiplier")?,
                jitter: if jitter { Jitter::Full } else { Jitter::None },
            },
            timeout_ms: opt_ms(row.try_get("timeout_ms")?),
            result_ttl_ms: ms(row.try_get("result_ttl_ms")?),
            created_at: ms(row.try_get("created_at")?),
            run_at: ms(row.try_get("run_at")?),
            started_at: opt_ms(row.try_get("started_at")?),
            finished_at: opt_ms(row.try_get("finished_at")?),
            lease,
            cancel_requested: row.try_get("cancel_requested")?,
            has_callback: callback_url.is_some(),
            payload_bytes: row.try_get::<_, Option<i32>>("payload_bytes")?.map_or(0, |n| n as u64),
            result_bytes: ms(row.try_get("result_bytes")?),
        };
        Ok(JobView {
            record,
            details: JobDetails { callback_url, tags: row.try_get("tags")?, unique_key },
            payload: if full { row.try_get("payload")? } else { None },
            result: if full { row.try_get("result")? } else { None },
            progress: row.try_get("progress")?,
            error: row.try_get("error")?,
        })
    };
    read().map_err(db_error)
}

/// Sends the webhook of a job that just finished, in the caller's transaction (a job without a
/// callback URL sends none).
async fn send_callback(tx: &impl deadpool_postgres::GenericClient, view: &JobView) -> Result<(), StoreError> {
    let Some(url) = &view.details.callback_url else { return Ok(()) };
    let body = JobCallback::new(&view.record, url).to_body();
    let a = job_callback_queue_attributes();
    tx.execute(
        "SELECT sluice_job_callback($1, $2, $3, $4, $5, $6, $7)",
        &[
            &body,
            &JOB_CALLBACK_QUEUE,
            &codec::queue_attributes_to_json(&a),
            &(a.visibility_timeout_ms as i64),
            &(a.delay_ms as i64),
            &(a.retention_ms as i64),
            &(a.message_bytes_max as i64),
        ],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}

#[async_trait]
impl JobStore for PostgresStore {
    async fn enqueue_job(&self, job: NewJob) -> Result<EnqueuedJob, StoreError> {
        calls::enqueue(&self.inner, job).await
    }

    async fn get_job(&self, id: JobId, wait_ms: u64) -> Result<JobView, StoreError> {
        calls::get(&self.inner, id, wait_ms).await
    }

    async fn list_jobs(&self, request: JobListRequest) -> Result<JobPage, StoreError> {
        calls::list(&self.inner, request).await
    }

    async fn cancel_job(&self, id: JobId) -> Result<JobView, StoreError> {
        calls::cancel(&self.inner, id).await
    }

    async fn claim_jobs(&self, spec: ClaimSpec, wait_ms: u64) -> Result<Vec<ClaimedJob>, StoreError> {
        calls::claim(&self.inner, spec, wait_ms).await
    }

    async fn heartbeat_job(
        &self,
        id: JobId,
        lease: &str,
        progress: Option<Vec<u8>>,
        lease_ms: Option<u64>,
    ) -> Result<HeartbeatAnswer, StoreError> {
        calls::heartbeat(&self.inner, id, lease, progress, lease_ms).await
    }

    async fn complete_job(&self, id: JobId, lease: &str, result: Vec<u8>) -> Result<JobView, StoreError> {
        calls::complete(&self.inner, id, lease, result).await
    }

    async fn fail_job(&self, id: JobId, lease: &str, error: String, retry: bool) -> Result<JobView, StoreError> {
        calls::fail(&self.inner, id, lease, error, retry).await
    }

    async fn job_stats(&self) -> Result<Vec<QueueJobStats>, StoreError> {
        calls::stats(&self.inner).await
    }
}
