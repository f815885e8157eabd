//! The sweeper: time-driven work that no caller triggers, done by one node at a time.
//!
//! Every `sweep_interval_ms` each store tries `pg_try_advisory_xact_lock` on a key derived from
//! its schema. The node that gets it (the lease lasts one transaction, so a node that dies
//! mid-sweep releases it at once) does, in two transactions that each take the lease:
//! 1. ends holds whose visibility timeout passed: a message that used up its receives moves to
//!    the dead-letter queue (new epoch, visible at once), any other just stops being in flight
//!    (it was already receivable, as "visible" means `visible_at <= now`). This transaction
//!    holds nothing else and commits at once;
//! 2. then, in a second transaction: deletes messages past their queue's retention, and forgets
//!    when message groups with nothing visible were last served (both every
//!    `RETENTION_EVERY_SWEEPS` sweeps); deletes FIFO deduplication keys whose window ended;
//!    deletes messages and deduplication keys left under a deleted queue's id by a send that
//!    raced the delete;
//! 3. then the jobs' part (`jobs/sweep.rs`, under a lock of its own): lapsed leases, finished
//!    jobs past their TTL, and on retention sweeps each job queue's budget.
//!
//! Ending holds commits on its own because the rows it updates are messages other calls want:
//! they stay visible throughout, and a redrive step that meets one locked skips it and has to
//! look again (`messages::MOVE`). In one transaction with the rest, they stayed locked through
//! the retention scan, the dedup and orphan deletes and the commit; now for one statement. The
//! second transaction locks only message rows that are going away (past retention, or orphans
//! of deleted queues), dedup keys past their window and idle groups' stamps. Another node may
//! take the lease between the two; it then does the second part itself, which is all the
//! lease is for.
//!
//! The lease only saves work: correctness never depends on it, because every statement takes
//! its rows with `FOR UPDATE SKIP LOCKED` and re-checks them, so two sweepers (or a sweeper and
//! a receive) can never both act on one message. Receives do not wait for the sweeper either:
//! they take expired holds themselves and dead-letter exhausted messages they meet.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use sluice_store::StoreError;

use crate::codec::ms;
use crate::fragments;
use crate::{Counters, Inner, db_error};

/// Most rows one statement of a sweep touches; a full batch makes the sweeper go again at once.
const SWEEP_BATCH_MAX: i64 = 1_000;
/// Retention (a scan over every queue) runs on every this-many sweeps.
const RETENTION_EVERY_SWEEPS: u64 = 8;
/// How long a deleted queue's id is watched for orphans before it is forgotten: far longer
/// than any send statement that looked the queue up before the delete can take.
const DELETED_QUEUE_GRACE_MS: i64 = 10 * 60 * 1000;

const LEASE: &str = "SELECT pg_try_advisory_xact_lock(hashtext('sluice_sweep:' || current_schema()))";

/// Ends up to `$1` expired holds, oldest first, as core's `tick` does: a message that used up
/// its receives moves to the dead-letter queue; any other only stops being in flight.
static END_HOLDS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "
WITH due AS (
    SELECT m.seq, q.name, q.dlq_id, {dead} AS dead
    FROM messages m
    JOIN ({queues}) q ON q.id = m.queue_id
    WHERE m.in_flight AND m.visible_at <= sluice_now_ms()
    ORDER BY m.visible_at
    LIMIT $1
    FOR UPDATE OF m SKIP LOCKED
)
UPDATE messages m SET
    {set}
FROM due
WHERE m.seq = due.seq
RETURNING m.queue_id, due.dead",
        queues = fragments::QUEUES,
        dead = fragments::dead("m.receive_count"),
        set = fragments::dead_letter_or("due.dead", "due", &[("in_flight", "false")]),
    )
});

const RETENTION: &str = "
DELETE FROM messages
WHERE seq IN (
    SELECT e.seq
    FROM queues q
    CROSS JOIN LATERAL (
        SELECT m.seq FROM messages m
        WHERE m.queue_id = q.id AND m.sent_at <= sluice_now_ms() - q.retention_ms
        ORDER BY m.sent_at
        LIMIT $1
        FOR UPDATE SKIP LOCKED
    ) e
    WHERE NOT (coalesce((q.attributes->>'expired_to_dlq')::boolean, false) AND EXISTS (
        SELECT 1 FROM queues d WHERE d.name = q.dead_letter_queue AND d.id <> q.id AND d.fifo = q.fifo))
    LIMIT $1
)";

/// Retention for queues with `expired_to_dlq` whose dead-letter queue exists (core's
/// `tick_queue`): expired messages move there, naming their source and why (`$2`), with their
/// retention started again (`sent_at`), and the source's count grows in the same statement.
const RETENTION_TO_DLQ: &str = "
WITH due AS (
    SELECT e.seq, q.id AS queue_id, q.name, d.id AS dlq_id
    FROM queues q
    JOIN queues d ON d.name = q.dead_letter_queue AND d.id <> q.id AND d.fifo = q.fifo
    CROSS JOIN LATERAL (
        SELECT m.seq FROM messages m
        WHERE m.queue_id = q.id AND m.sent_at <= sluice_now_ms() - q.retention_ms
        ORDER BY m.sent_at
        LIMIT $1
        FOR UPDATE SKIP LOCKED
    ) e
    WHERE coalesce((q.attributes->>'expired_to_dlq')::boolean, false)
    LIMIT $1
), moved AS (
    UPDATE messages m SET queue_id = due.dlq_id, dead_letter_source = due.name, epoch = m.epoch + 1,
        in_flight = false, visible_at = sluice_now_ms(), sent_at = sluice_now_ms(), last_error = $2
    FROM due
    WHERE m.seq = due.seq
    RETURNING due.queue_id
), counted AS (
    UPDATE queues q SET expired_to_dlq = q.expired_to_dlq + c.n
    FROM (SELECT queue_id, count(*) AS n FROM moved GROUP BY queue_id) c
    WHERE q.id = c.queue_id
    RETURNING c.n
)
SELECT coalesce(sum(n), 0)::int8 FROM counted";

/// Keys past their window. A send that meets one takes it over itself (`fifo::CLAIM_KEYS`), so
/// this only bounds the table; keys a send holds are skipped.
const DEDUP_EXPIRED: &str = "
DELETE FROM dedup
WHERE (queue_id, key) IN (
    SELECT queue_id, key FROM dedup
    WHERE expires_at <= sluice_now_ms()
    ORDER BY expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)";

const ORPHANS: &str = "
DELETE FROM messages
WHERE seq IN (
    SELECT o.seq
    FROM deleted_queues d
    CROSS JOIN LATERAL (SELECT m.seq FROM messages m WHERE m.queue_id = d.id LIMIT $1) o
    LIMIT $1
)";

const DEDUP_ORPHANS: &str = "
DELETE FROM dedup
WHERE (queue_id, key) IN (
    SELECT o.queue_id, o.key
    FROM deleted_queues d
    CROSS JOIN LATERAL (SELECT k.queue_id, k.key FROM dedup k WHERE k.queue_id = d.id LIMIT $1) o
    LIMIT $1
)";

const FORGET_DELETED: &str = "
DELETE FROM deleted_queues d
WHERE d.deleted_at < sluice_now_ms() - $1
  AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.queue_id = d.id)
  AND NOT EXISTS (SELECT 1 FROM dedup k WHERE k.queue_id = d.id)";

/// The background loop; runs until the store is dropped (which aborts it).
pub async fn run(inner: Arc<Inner>, interval: Duration) {
    let mut sweeps: u64 = 0;
    loop {
        tokio::time::sleep(interval).await;
        let with_retention = sweeps.is_multiple_of(RETENTION_EVERY_SWEEPS);
        sweeps += 1;
        // A full batch means more is due: go again without sleeping, a bounded number of times
        // so that one sweep cannot starve the rest of the runtime.
        for _ in 0..16 {
            match sweep_pass(&inner, with_retention).await {
                Ok(SweepPass { more: true, .. }) => continue,
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!("sweep failed (retrying next interval): {e}");
                    break;
                }
            }
        }
    }
}

struct SweepPass {
    leased: bool,
    more: bool,
}

/// One sweep, if this node gets the lease; returns whether it did.
pub async fn sweep_once(inner: &Inner, with_retention: bool) -> Result<bool, StoreError> {
    Ok(sweep_pass(inner, with_retention).await?.leased)
}

async fn sweep_pass(inner: &Inner, with_retention: bool) -> Result<SweepPass, StoreError> {
    let Some(ended) = end_holds(inner).await? else {
        return Ok(SweepPass { leased: false, more: false });
    };
    let tidied = tidy(inner, with_retention).await?;
    // Jobs: lapsed leases, pruning (and every retention sweep, the budgets), under a lock of
    // their own.
    let jobs = crate::jobs::sweep::pass(inner, inner.job_limits, with_retention).await?;
    let full = |n: u64| n >= SWEEP_BATCH_MAX as u64;
    let more = full(ended) || tidied.is_some_and(|t| t.full()) || jobs.is_some_and(|j| j.full());
    Ok(SweepPass { leased: true, more })
}

/// Step 1 of a sweep in a transaction of its own: ends expired holds, then wakes long polls on
/// the dead-letter queues that got messages. Returns how many holds ended, or `None` when
/// another node holds the lease.
async fn end_holds(inner: &Inner) -> Result<Option<u64>, StoreError> {
    let ended = {
        let mut client = inner.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let leased: bool = tx.query_one(LEASE, &[]).await.map_err(db_error)?.get(0);
        if !leased {
            return Ok(None);
        }
        let ended = tx.query(END_HOLDS.as_str(), &[&SWEEP_BATCH_MAX]).await.map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        ended
        // The connection goes back to the pool before `notify` takes one.
    };
    let mut dead_letter_queues: Vec<u64> =
        ended.iter().filter(|r| r.get::<_, bool>("dead")).map(|r| ms(r.get("queue_id"))).collect();
    Counters::add(&inner.counters.messages_dead_lettered, dead_letter_queues.len() as u64);
    inner.counters.committed(ended.len() as u64);
    dead_letter_queues.sort_unstable();
    dead_letter_queues.dedup();
    inner.notify(&dead_letter_queues).await;
    Ok(Some(ended.len() as u64))
}

/// What step 2 of a sweep removed.
struct Tidied {
    expired: u64,
    forgotten: u64,
    dedup_expired: u64,
    orphans: u64,
}

impl Tidied {
    /// Whether a statement hit its batch limit, so that more may be due.
    fn full(&self) -> bool {
        [self.expired, self.forgotten, self.dedup_expired, self.orphans].iter().any(|&n| n >= SWEEP_BATCH_MAX as u64)
    }
}

/// Step 2 of a sweep: retention, idle group stamps, expired and orphaned dedup keys, orphaned
/// messages. `None` when another node took the lease since step 1.
async fn tidy(inner: &Inner, with_retention: bool) -> Result<Option<Tidied>, StoreError> {
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(db_error)?;
    let leased: bool = tx.query_one(LEASE, &[]).await.map_err(db_error)?.get(0);
    if !leased {
        return Ok(None);
    }
    let (expired, forgotten, to_dlq) = if with_retention {
        let reason = sluice_core::overflow::REASON_EXPIRED;
        let to_dlq: i64 = tx.query_one(RETENTION_TO_DLQ, &[&SWEEP_BATCH_MAX, &reason]).await.map_err(db_error)?.get(0);
        (
            tx.execute(RETENTION, &[&SWEEP_BATCH_MAX]).await.map_err(db_error)?,
            tx.execute(crate::fair::FORGET_IDLE_GROUPS, &[&SWEEP_BATCH_MAX]).await.map_err(db_error)?,
            to_dlq as u64,
        )
    } else {
        (0, 0, 0)
    };
    let dedup_expired = tx.execute(DEDUP_EXPIRED, &[&SWEEP_BATCH_MAX]).await.map_err(db_error)?;
    let orphans = tx.execute(ORPHANS, &[&SWEEP_BATCH_MAX]).await.map_err(db_error)?
        + tx.execute(DEDUP_ORPHANS, &[&SWEEP_BATCH_MAX]).await.map_err(db_error)?;
    tx.execute(FORGET_DELETED, &[&DELETED_QUEUE_GRACE_MS]).await.map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    Counters::add(&inner.counters.messages_expired, expired);
    Counters::add(&inner.counters.messages_expired_to_dlq, to_dlq);
    Counters::add(&inner.counters.messages_dead_lettered, to_dlq);
    inner.counters.committed(expired + to_dlq + forgotten + dedup_expired + orphans);
    Ok(Some(Tidied { expired, forgotten, dedup_expired, orphans }))
}
