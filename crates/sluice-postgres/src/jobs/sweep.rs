//! The jobs' part of the sweep: what time makes due, done by one node at a time (an advisory
//! lock of its own, held for one transaction, so a node that dies mid-sweep releases it).
//!
//! 1. Lapses: running jobs whose lease ran out end their attempt as core's `JobBoard::lapse`
//!    does (back to queued at once, or dead after the last attempt, or cancelled when a cancel
//!    was asked), with why as the last error; the webhooks of jobs that finished so are sent
//!    in the same transaction.
//! 2. Pruning: finished jobs past `finished_at + result_ttl_ms`, and, on retention sweeps, the
//!    oldest finished jobs of each queue beyond its budget (`JobLimits`), newest always kept;
//!    the unique keys they held are freed with them.
//!
//! As in the store's sweep, correctness does not rest on the lock: every row is taken with
//! `FOR UPDATE SKIP LOCKED` and re-checked by the statement that changes it.

use std::sync::LazyLock;

use sluice_core::jobs::JobLimits;
use sluice_store::StoreError;

use super::{job_columns, job_key, queue_key, send_callback, view_from_row};
use crate::{Counters, Inner, db_error};

/// Most jobs one statement of a sweep touches.
pub const JOB_SWEEP_BATCH_MAX: i64 = 1_000;

const LEASE: &str = "SELECT pg_try_advisory_xact_lock(hashtext('sluice_job_sweep:' || current_schema()))";

static LAPSE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "
WITH due AS (
    SELECT id FROM jobs
    WHERE status = 1 AND lease_expires_at <= sluice_now_ms()
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs j SET
    error = CASE WHEN j.timeout_ms IS NOT NULL AND j.lease_expires_at >= j.started_at + j.timeout_ms
        THEN 'attempt ' || j.attempt || ' timed out after ' || j.timeout_ms || ' ms'
        ELSE 'attempt ' || j.attempt || ': the lease lapsed (no heartbeat within ' || j.lease_ms || ' ms)' END,
    status = CASE WHEN j.cancel_requested THEN 5 WHEN j.attempt >= j.max_attempts THEN 4 ELSE 0 END,
    finished_at = CASE WHEN j.cancel_requested OR j.attempt >= j.max_attempts THEN sluice_now_ms() END,
    run_at = CASE WHEN j.cancel_requested OR j.attempt >= j.max_attempts THEN j.run_at ELSE sluice_now_ms() END,
    lease_nonce = NULL, lease_ms = NULL, lease_expires_at = NULL
FROM due
WHERE j.id = due.id AND j.status = 1 AND j.lease_expires_at <= sluice_now_ms()
RETURNING {}",
        job_columns!()
    )
});

const PRUNE_TTL: &str = "
WITH gone AS (
    DELETE FROM jobs WHERE id IN (
        SELECT id FROM jobs
        WHERE status IN (2, 4, 5) AND finished_at + result_ttl_ms <= sluice_now_ms()
        ORDER BY finished_at + result_ttl_ms
        LIMIT $1
        FOR UPDATE SKIP LOCKED)
    RETURNING id
), freed AS (
    DELETE FROM job_unique_keys k USING gone WHERE k.job_id = gone.id
)
SELECT count(*) FROM gone";

/// Per queue over budget: its finished jobs newest first, with the result bytes of those at
/// least as new; every one past the budget goes but the newest. `$1` is cast: compared with a
/// `sum` of bigints (a numeric) it would be inferred numeric, which an `i64` cannot be sent as.
const PRUNE_BUDGET: &str = "
WITH over AS (
    SELECT queue FROM jobs WHERE status IN (2, 4, 5)
    GROUP BY queue HAVING sum(result_bytes) > $1::bigint OR count(*) > $2
), ranked AS (
    SELECT j.id, row_number() OVER w AS rank, sum(j.result_bytes) OVER w AS newer_bytes
    FROM jobs j JOIN over o ON o.queue = j.queue
    WHERE j.status IN (2, 4, 5)
    WINDOW w AS (PARTITION BY j.queue ORDER BY j.finished_at DESC, j.id DESC)
), gone AS (
    DELETE FROM jobs WHERE id IN (
        SELECT id FROM ranked WHERE rank > 1 AND (rank > $2 OR newer_bytes > $1::bigint) LIMIT $3)
    RETURNING id
), freed AS (
    DELETE FROM job_unique_keys k USING gone WHERE k.job_id = gone.id
)
SELECT count(*) FROM gone";

/// What one pass did; `None` when another node held the lock.
pub struct Swept {
    pub lapsed: u64,
    pub pruned: u64,
}

impl Swept {
    /// Whether a statement hit its batch limit, so that more may be due.
    pub fn full(&self) -> bool {
        self.lapsed >= JOB_SWEEP_BATCH_MAX as u64 || self.pruned >= JOB_SWEEP_BATCH_MAX as u64
    }
}

/// One pass, with the budget checked when `with_budget`.
pub async fn pass(inner: &Inner, limits: JobLimits, with_budget: bool) -> Result<Option<Swept>, StoreError> {
    let (lapsed, pruned, mut woken) = {
        let mut client = inner.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let leased: bool = tx.query_one(LEASE, &[]).await.map_err(db_error)?.get(0);
        if !leased {
            return Ok(None);
        }
        let rows = tx.query(LAPSE.as_str(), &[&JOB_SWEEP_BATCH_MAX]).await.map_err(db_error)?;
        let mut woken = Vec::new();
        for row in &rows {
            let view = view_from_row(row, false)?;
            if view.record.status.is_terminal() {
                send_callback(&tx, &view).await?;
                woken.push(job_key(view.record.id));
            } else {
                woken.push(queue_key(&view.record.queue));
            }
        }
        let ttl: i64 = tx.query_one(PRUNE_TTL, &[&JOB_SWEEP_BATCH_MAX]).await.map_err(db_error)?.get(0);
        let budget: i64 = if with_budget {
            let bytes = i64::try_from(limits.result_bytes_per_queue_max).unwrap_or(i64::MAX);
            let count = i64::try_from(limits.finished_per_queue_max).unwrap_or(i64::MAX);
            tx.query_one(PRUNE_BUDGET, &[&bytes, &count, &JOB_SWEEP_BATCH_MAX]).await.map_err(db_error)?.get(0)
        } else {
            0
        };
        tx.commit().await.map_err(db_error)?;
        Counters::add(&inner.counters.jobs_pruned_ttl, ttl as u64);
        Counters::add(&inner.counters.jobs_pruned_budget, budget as u64);
        inner.counters.committed(rows.len() as u64 + ttl as u64 + budget as u64);
        (rows.len() as u64, ttl as u64 + budget as u64, woken)
    };
    Counters::add(&inner.counters.jobs_lapsed, lapsed);
    woken.sort_unstable();
    woken.dedup();
    inner.notify(&woken).await;
    Ok(Some(Swept { lapsed, pruned }))
}
