//! The job calls, each one statement or one transaction (see the module documentation of
//! `jobs`), and their long polls.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use sluice_core::jobs::{ClaimSpec, JobError, JobId, JobStatus, NewJob, QueueJobStats};
use sluice_store::{
    ClaimedJob, EnqueuedJob, HeartbeatAnswer, JobListRequest, JobPage, JobView, StoreError, parse_lease,
    validate_wait_ms,
};

use super::{job_columns, job_key, queue_key, send_callback, view_from_row};
use crate::codec::ms;
use crate::{Inner, db_error};

/// How often a waiting long poll looks again with no wake-up at all (as `receive.rs`).
const SAFETY_RECHECK_MS: u64 = 5_000;
/// Back-off bounds when a claimable job could not be taken (another claim held its row).
const RETRY_MS_MIN: u64 = 5;
const RETRY_MS_MAX: u64 = 100;

const TAKE_UNIQUE: &str = "
INSERT INTO job_unique_keys AS k (queue, key, job_id, until)
VALUES ($1, $2, $3, sluice_now_ms() + $4)
ON CONFLICT (queue, key) DO UPDATE SET job_id = EXCLUDED.job_id, until = EXCLUDED.until
    WHERE k.until <= sluice_now_ms()
RETURNING k.job_id";

const UNIQUE_HOLDER: &str = "SELECT job_id FROM job_unique_keys WHERE queue = $1 AND key = $2";

static INSERT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "
INSERT INTO jobs AS j (id, queue, job_type, status, priority, max_attempts, backoff_initial_ms, backoff_max_ms,
    backoff_multiplier, backoff_jitter, timeout_ms, result_ttl_ms, created_at, run_at, unique_key, unique_until,
    callback_url, tags, payload)
SELECT $1::uuid, $2::text, $3::text, 0, $4::int2, $5::int4, $6::int8, $7::int8, $8::float8, $9::bool, $10::int8,
    $11::int8, t.now,
    CASE WHEN $12::int8 IS NOT NULL THEN greatest($12::int8, t.now) ELSE t.now + coalesce($13::int8, 0) END,
    $14::text, CASE WHEN $14::text IS NULL THEN NULL ELSE t.now + $15::int8 END, $16::text, $17::text[], $18::bytea
FROM (SELECT sluice_now_ms() AS now) t
RETURNING {}",
        job_columns!()
    )
});

static GET: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {}, j.payload, j.result FROM jobs j WHERE j.id = $1", job_columns!()));

static SUMMARY: LazyLock<String> = LazyLock::new(|| format!("SELECT {} FROM jobs j WHERE j.id = $1", job_columns!()));

static LIST: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {} FROM jobs j
         WHERE ($1::text IS NULL OR j.queue = $1) AND ($2::int2 IS NULL OR j.status = $2)
           AND ($3::text IS NULL OR j.job_type = $3) AND ($4::text IS NULL OR $4 = ANY(j.tags))
           AND ($5::uuid IS NULL OR j.id > $5)
         ORDER BY j.id LIMIT $6",
        job_columns!()
    )
});

/// Claimable rows in claim order, locked without waiting for other claims, and started.
static CLAIM: LazyLock<String> = LazyLock::new(|| {
    format!(
        "
WITH picked AS (
    SELECT id FROM jobs
    WHERE queue = ANY($1) AND status IN (0, 3) AND run_at <= sluice_now_ms()
      AND (cardinality($2::text[]) = 0 OR job_type = ANY($2))
    ORDER BY priority DESC, run_at, id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs j SET status = 1, attempt = j.attempt + 1, started_at = sluice_now_ms(),
    lease_nonce = floor(random() * 9.2e18)::int8, lease_ms = $4,
    lease_expires_at = sluice_now_ms() + CASE WHEN j.timeout_ms IS NULL THEN $4 ELSE least($4, j.timeout_ms) END
FROM picked WHERE j.id = picked.id
RETURNING {}, j.payload, j.result",
        job_columns!()
    )
});

/// The earliest a job of these queues (and types) becomes claimable, for a waiting claim.
const NEXT_CLAIMABLE: &str = "
SELECT sluice_now_ms() AS now, min(run_at) AS next FROM jobs
WHERE queue = ANY($1) AND status IN (0, 3) AND (cardinality($2::text[]) = 0 OR job_type = ANY($2))";

/// The current attempt's lease, not run out.
const LEASE_MATCHES: &str =
    "j.id = $1 AND j.status = 1 AND j.attempt = $2 AND j.lease_nonce = $3 AND j.lease_expires_at > sluice_now_ms()";

static HEARTBEAT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE jobs j SET lease_ms = coalesce($4::int8, j.lease_ms),
             lease_expires_at = CASE WHEN j.timeout_ms IS NULL THEN sluice_now_ms() + coalesce($4::int8, j.lease_ms)
                 ELSE least(sluice_now_ms() + coalesce($4::int8, j.lease_ms), j.started_at + j.timeout_ms) END,
             progress = coalesce($5::bytea, j.progress)
         WHERE {LEASE_MATCHES}
         RETURNING j.cancel_requested, j.lease_expires_at"
    )
});

static COMPLETE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE jobs j SET status = 2, result = $4::bytea, result_bytes = octet_length($4::bytea), finished_at = sluice_now_ms(),
             lease_nonce = NULL, lease_ms = NULL, lease_expires_at = NULL
         WHERE {LEASE_MATCHES}
         RETURNING {}",
        job_columns!()
    )
});

/// Whether a failure ends the job (core's `JobBoard::fail`): a cancel was asked, no retry, or
/// the last attempt.
const FAIL_ENDS: &str = "(j.cancel_requested OR NOT $5::bool OR j.attempt >= j.max_attempts)";

/// The delay before the next attempt (core's `JobBackoff::delay_ms`): capped exponential
/// growth, then full jitter or none. The exponent is bounded so that `power` cannot overflow;
/// the cap is reached long before.
pub const BACKOFF_DELAY: &str = "(CASE WHEN j.backoff_jitter
    THEN floor(random() * (floor(least(j.backoff_max_ms::float8, j.backoff_initial_ms * power(j.backoff_multiplier, least(j.attempt - 1, 300)))) + 1))
    ELSE floor(least(j.backoff_max_ms::float8, j.backoff_initial_ms * power(j.backoff_multiplier, least(j.attempt - 1, 300)))) END)::int8";

static FAIL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE jobs j SET error = $4::text,
             status = CASE WHEN j.cancel_requested THEN 5 WHEN {FAIL_ENDS} THEN 4 ELSE 3 END,
             finished_at = CASE WHEN {FAIL_ENDS} THEN sluice_now_ms() END,
             run_at = CASE WHEN {FAIL_ENDS} THEN j.run_at ELSE sluice_now_ms() + {BACKOFF_DELAY} END,
             lease_nonce = NULL, lease_ms = NULL, lease_expires_at = NULL
         WHERE {LEASE_MATCHES}
         RETURNING {}",
        job_columns!()
    )
});

static CANCEL_WAITING: LazyLock<String> = LazyLock::new(|| {
    format!("UPDATE jobs j SET status = 5, finished_at = sluice_now_ms() WHERE j.id = $1 RETURNING {}", job_columns!())
});

static CANCEL_RUNNING: LazyLock<String> =
    LazyLock::new(|| format!("UPDATE jobs j SET cancel_requested = true WHERE j.id = $1 RETURNING {}", job_columns!()));

const STATS: &str = "
SELECT queue, status, count(*) AS n, coalesce(sum(result_bytes), 0)::int8 AS bytes,
       coalesce(sum(octet_length(payload)), 0)::int8 AS payload_bytes
FROM jobs GROUP BY queue, status";

fn uuid(id: JobId) -> uuid::Uuid {
    uuid::Uuid::from_u128(id.0)
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub async fn enqueue(inner: &Inner, job: NewJob) -> Result<EnqueuedJob, StoreError> {
    // The bound on `run_at` (a year) is checked on this node's clock; every time the job keeps
    // is the database's.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    job.validate(now).map_err(JobError::from)?;
    let id = uuid::Uuid::now_v7();
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(db_error)?;
    if let Some(key) = &job.unique_key {
        let taken =
            tx.query_opt(TAKE_UNIQUE, &[&job.queue, key, &id, &i64_of(job.unique_for_ms())]).await.map_err(db_error)?;
        if taken.is_none() {
            let holder: uuid::Uuid = tx.query_one(UNIQUE_HOLDER, &[&job.queue, key]).await.map_err(db_error)?.get(0);
            let row = tx.query_opt(SUMMARY.as_str(), &[&holder]).await.map_err(db_error)?;
            tx.commit().await.map_err(db_error)?;
            let row = row.ok_or(JobError::NotFound(JobId(holder.as_u128())))?;
            return Ok(EnqueuedJob { view: view_from_row(&row, false)?, created: false });
        }
    }
    let b = job.backoff;
    let row = tx
        .query_one(
            INSERT.as_str(),
            &[
                &id,
                &job.queue,
                &job.job_type,
                &i16::from(job.priority),
                &(job.max_attempts() as i32),
                &i64_of(b.initial_ms),
                &i64_of(b.max_ms),
                &b.multiplier,
                &(b.jitter == sluice_core::jobs::Jitter::Full),
                &job.timeout_ms.map(i64_of),
                &i64_of(job.result_ttl_ms()),
                &job.run_at.map(i64_of),
                &job.delay_ms.map(i64_of),
                &job.unique_key,
                &i64_of(job.unique_for_ms()),
                &job.callback_url,
                &job.tags,
                &job.payload,
            ],
        )
        .await
        .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    let view = view_from_row(&row, false)?;
    inner.notify(&[queue_key(&view.record.queue)]).await;
    inner.counters.committed(1);
    Ok(EnqueuedJob { view, created: true })
}

async fn read(inner: &Inner, id: JobId) -> Result<JobView, StoreError> {
    let client = inner.client().await?;
    let statement = client.prepare_cached(GET.as_str()).await.map_err(db_error)?;
    let row = client.query_opt(&statement, &[&uuid(id)]).await.map_err(db_error)?;
    view_from_row(&row.ok_or(JobError::NotFound(id))?, true)
}

pub async fn get(inner: &Inner, id: JobId, wait_ms: u64) -> Result<JobView, StoreError> {
    validate_wait_ms(wait_ms)?;
    if wait_ms == 0 {
        return read(inner, id).await;
    }
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    let mut wake = inner.wakers.subscribe(job_key(id));
    loop {
        let view = read(inner, id).await?;
        let left = deadline.saturating_duration_since(Instant::now());
        if view.record.status.is_terminal() || left.is_zero() {
            return Ok(view);
        }
        tokio::select! {
            () = wake.changed() => {}
            () = tokio::time::sleep(Duration::from_millis(SAFETY_RECHECK_MS)) => {}
            () = tokio::time::sleep(left) => {}
        }
    }
}

pub async fn list(inner: &Inner, request: JobListRequest) -> Result<JobPage, StoreError> {
    let client = inner.client().await?;
    let statement = client.prepare_cached(LIST.as_str()).await.map_err(db_error)?;
    let f = &request.filter;
    let rows = client
        .query(
            &statement,
            &[
                &f.queue,
                &f.status.map(JobStatus::code),
                &f.job_type,
                &request.tag,
                &request.after.map(uuid),
                &i64_of(request.limit as u64),
            ],
        )
        .await
        .map_err(db_error)?;
    let jobs = rows.iter().map(|row| view_from_row(row, false)).collect::<Result<_, _>>()?;
    Ok(JobPage { jobs, resume_after: None })
}

pub async fn cancel(inner: &Inner, id: JobId) -> Result<JobView, StoreError> {
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(db_error)?;
    let found = tx
        .query_opt("SELECT status, cancel_requested FROM jobs WHERE id = $1 FOR UPDATE", &[&uuid(id)])
        .await
        .map_err(db_error)?
        .ok_or(JobError::NotFound(id))?;
    let status = JobStatus::from_code(found.get(0)).unwrap_or(JobStatus::Queued);
    let cancel_requested: bool = found.get(1);
    let (statement, finished) = match status {
        JobStatus::Queued | JobStatus::Failed => (CANCEL_WAITING.as_str(), true),
        JobStatus::Running if !cancel_requested => (CANCEL_RUNNING.as_str(), false),
        JobStatus::Running | JobStatus::Cancelled => (SUMMARY.as_str(), false),
        status @ (JobStatus::Succeeded | JobStatus::Dead) => return Err(JobError::Finished { id, status }.into()),
    };
    let row = tx.query_one(statement, &[&uuid(id)]).await.map_err(db_error)?;
    let view = view_from_row(&row, false)?;
    if finished {
        send_callback(&tx, &view).await?;
    }
    tx.commit().await.map_err(db_error)?;
    if finished {
        inner.notify(&[job_key(id)]).await;
        inner.counters.committed(1);
    }
    Ok(view)
}

async fn claim_once(inner: &Inner, spec: &ClaimSpec) -> Result<Vec<ClaimedJob>, StoreError> {
    let client = inner.client().await?;
    let statement = client.prepare_cached(CLAIM.as_str()).await.map_err(db_error)?;
    let rows = client
        .query(&statement, &[&spec.queues, &spec.types, &i64::from(spec.max), &i64_of(spec.lease_ms)])
        .await
        .map_err(db_error)?;
    let mut claimed: Vec<ClaimedJob> = Vec::with_capacity(rows.len());
    for row in &rows {
        let view = view_from_row(row, true)?;
        let lease = view.record.lease_token().map(|t| t.encode()).unwrap_or_default();
        claimed.push(ClaimedJob { view, lease });
    }
    // The statement returns rows in no particular order: claim order again.
    claimed.sort_by_key(|c| (std::cmp::Reverse(c.view.record.priority), c.view.record.run_at, c.view.record.id));
    inner.counters.committed(claimed.len() as u64);
    Ok(claimed)
}

pub async fn claim(inner: &Inner, spec: ClaimSpec, wait_ms: u64) -> Result<Vec<ClaimedJob>, StoreError> {
    validate_wait_ms(wait_ms)?;
    spec.validate().map_err(JobError::from)?;
    if wait_ms == 0 {
        return claim_once(inner, &spec).await;
    }
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    // Subscribed before looking, so that an enqueue committed after the look is never missed.
    let mut wakes: Vec<_> = spec.queues.iter().map(|q| inner.wakers.subscribe(queue_key(q))).collect();
    let mut retry_ms = RETRY_MS_MIN;
    loop {
        let got = claim_once(inner, &spec).await?;
        if !got.is_empty() {
            return Ok(got);
        }
        let row = {
            let client = inner.client().await?;
            let statement = client.prepare_cached(NEXT_CLAIMABLE).await.map_err(db_error)?;
            client.query_one(&statement, &[&spec.queues, &spec.types]).await.map_err(db_error)?
        };
        let now = ms(row.get("now"));
        let sleep_ms = match row.get::<_, Option<i64>>("next").map(ms) {
            // Claimable now, but another claim held its row for the instant of its own.
            Some(t) if t <= now => {
                let d = retry_ms;
                retry_ms = (retry_ms * 2).min(RETRY_MS_MAX);
                d
            }
            Some(t) => {
                retry_ms = RETRY_MS_MIN;
                t - now + 1
            }
            None => SAFETY_RECHECK_MS,
        }
        .min(SAFETY_RECHECK_MS);
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(Vec::new());
        }
        let woken = futures::future::select_all(wakes.iter_mut().map(|w| Box::pin(w.changed())));
        tokio::select! {
            _ = woken => retry_ms = RETRY_MS_MIN,
            () = tokio::time::sleep(Duration::from_millis(sleep_ms)) => {}
            () = tokio::time::sleep(left) => return Ok(Vec::new()),
        }
    }
}

/// Why a call with `lease` matched no row: the job is gone, or the lease is stale.
async fn refusal(client: &impl deadpool_postgres::GenericClient, id: JobId) -> StoreError {
    match client.query_opt("SELECT status FROM jobs WHERE id = $1", &[&uuid(id)]).await {
        Ok(Some(row)) => {
            let status = JobStatus::from_code(row.get(0)).unwrap_or(JobStatus::Queued);
            JobError::StaleLease { id, status }.into()
        }
        Ok(None) => JobError::NotFound(id).into(),
        Err(e) => db_error(e),
    }
}

pub async fn heartbeat(
    inner: &Inner,
    id: JobId,
    lease: &str,
    progress: Option<Vec<u8>>,
    lease_ms: Option<u64>,
) -> Result<HeartbeatAnswer, StoreError> {
    let token = parse_lease(lease)?;
    if let Some(ms) = lease_ms {
        sluice_core::jobs::validate_lease_ms(ms, "lease_ms").map_err(JobError::from)?;
    }
    if progress.as_ref().is_some_and(|p| p.len() > sluice_core::jobs::limits::JOB_PROGRESS_BYTES_MAX) {
        let max = sluice_core::jobs::limits::JOB_PROGRESS_BYTES_MAX;
        return Err(JobError::from(sluice_core::ValidationError::new(
            "progress",
            format!("at most {max} bytes of JSON"),
        ))
        .into());
    }
    let client = inner.client().await?;
    let statement = client.prepare_cached(HEARTBEAT.as_str()).await.map_err(db_error)?;
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
        [&uuid(id), &(token.attempt as i32), &(token.nonce as i64), &lease_ms.map(i64_of), &progress];
    let Some(row) = client.query_opt(&statement, &params).await.map_err(db_error)? else {
        return Err(refusal(&client, id).await);
    };
    inner.counters.committed(1);
    Ok(HeartbeatAnswer { cancel_requested: row.get(0), lease_expires_at: ms(row.get(1)) })
}

/// Completes or fails: one UPDATE where the lease matches, and the webhook when it finished
/// the job, in one transaction.
async fn finish_attempt(
    inner: &Inner,
    id: JobId,
    statement: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<JobView, StoreError> {
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(db_error)?;
    let prepared = tx.prepare_cached(statement).await.map_err(db_error)?;
    let Some(row) = tx.query_opt(&prepared, params).await.map_err(db_error)? else {
        let refused = refusal(&tx, id).await;
        return Err(refused);
    };
    let view = view_from_row(&row, false)?;
    let finished = view.record.status.is_terminal();
    if finished {
        send_callback(&tx, &view).await?;
    }
    tx.commit().await.map_err(db_error)?;
    inner.counters.committed(1);
    if finished {
        inner.notify(&[job_key(id)]).await;
    } else {
        inner.notify(&[queue_key(&view.record.queue)]).await;
    }
    Ok(view)
}

pub async fn complete(inner: &Inner, id: JobId, lease: &str, result: Vec<u8>) -> Result<JobView, StoreError> {
    let token = parse_lease(lease)?;
    let max = sluice_core::jobs::limits::JOB_RESULT_BYTES_MAX;
    if result.len() > max {
        return Err(JobError::from(sluice_core::ValidationError::new(
            "result",
            format!("at most {max} bytes of JSON"),
        ))
        .into());
    }
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
        [&uuid(id), &(token.attempt as i32), &(token.nonce as i64), &result];
    finish_attempt(inner, id, COMPLETE.as_str(), &params).await
}

pub async fn fail(inner: &Inner, id: JobId, lease: &str, error: String, retry: bool) -> Result<JobView, StoreError> {
    let token = parse_lease(lease)?;
    let max = sluice_core::jobs::limits::JOB_ERROR_BYTES_MAX;
    if error.len() > max {
        return Err(JobError::from(sluice_core::ValidationError::new("error", format!("at most {max} bytes"))).into());
    }
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
        [&uuid(id), &(token.attempt as i32), &(token.nonce as i64), &error, &retry];
    finish_attempt(inner, id, FAIL.as_str(), &params).await
}

pub async fn stats(inner: &Inner) -> Result<Vec<QueueJobStats>, StoreError> {
    let client = inner.client().await?;
    let rows = client.query(STATS, &[]).await.map_err(db_error)?;
    let mut by_queue: std::collections::BTreeMap<String, QueueJobStats> = std::collections::BTreeMap::new();
    for row in rows {
        let queue: String = row.get("queue");
        let Some(status) = JobStatus::from_code(row.get("status")) else { continue };
        let empty = QueueJobStats { queue: queue.clone(), counts: [0; 6], result_bytes: 0, payload_bytes: 0 };
        let s = by_queue.entry(queue).or_insert(empty);
        s.counts[status.index()] = ms(row.get("n"));
        s.payload_bytes += ms(row.get("payload_bytes"));
        if status.is_terminal() {
            s.result_bytes += ms(row.get("bytes"));
        }
    }
    Ok(by_queue.into_values().collect())
}
