//! Keeping the churning tables healthy without an operator: the store vacuums them itself.
//!
//! Every message is inserted, updated by each receive and deleted by its ack, so `messages`
//! (and, more slowly, `dedup` and `fair_groups`) leaves a dead row version behind for nearly
//! every write. Until a vacuum marks their space reusable, receives step over them in the heap
//! and in every index, and the rate decays (a plain SKIP LOCKED queue on the project's machine
//! fell from about 140k to 18k msgs/s under default autovacuum, then stalled during a vacuum).
//! Migrations 1, 3 and 4 ask autovacuum to act after a fixed number of dead rows, but those
//! settings do nothing where autovacuum is off, and even where it is on the launcher looks at a
//! database only once per `autovacuum_naptime` (a minute by default), long enough for a busy
//! queue to pile up a million dead rows.
//!
//! So every `vacuum_check_interval_ms` one node reads the tables' dead rows from
//! `pg_stat_user_tables` and runs `VACUUM` on each table past `vacuum_dead_rows_max`. Which
//! node: whichever takes the session advisory lock `sluice_vacuum:<schema>`, held only for the
//! check and its vacuums. It is a key of its own, not the sweep lease, so sweeps go on while a
//! vacuum runs; and a task of its own beside the sweeper, so a long vacuum delays no sweep.
//!
//! `VACUUM` cannot run in a transaction block, so it runs on a pooled connection outside one.
//! It is `SKIP_LOCKED`: a table that autovacuum (or an operator) is already vacuuming is left to
//! it rather than waited for. The tables' `vacuum_truncate = off` keeps it from taking the
//! ACCESS EXCLUSIVE lock that truncation needs, which would stall every receive. Where the
//! database has no `VACUUM` (some PostgreSQL-compatible databases), the failure is logged and
//! retried after `FAILURE_PAUSE`; nothing else depends on it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{Inner, describe};

/// The tables whose rows churn: every one gets inserts and deletes (or updates) in proportion
/// to the messages sent.
pub const CHURNING_TABLES: [&str; 4] = ["messages", "dedup", "fair_groups", "jobs"];

/// Vacuums run by a store, in the `metrics` registry (rendered by `/metrics` in `sluice serve`),
/// labelled by table.
pub const VACUUMS_METRIC: &str = "sluice_postgres_vacuums_total";

/// Pause after a failed check before the next, so that a database without `VACUUM` or
/// `pg_stat_user_tables` is not asked again every interval.
const FAILURE_PAUSE: Duration = Duration::from_secs(60);

const LOCK: &str = "SELECT pg_try_advisory_lock(hashtext('sluice_vacuum:' || current_schema()))";
const UNLOCK: &str = "SELECT pg_advisory_unlock(hashtext('sluice_vacuum:' || current_schema()))";
/// Each churning table's dead rows, and whether this role may vacuum it (its owner, a member of
/// the owning role, or a superuser): for anyone else PostgreSQL skips the table with a warning
/// the client never sees, so the store checks first.
const DEAD_ROWS: &str = "
SELECT s.relname::text, s.n_dead_tup, pg_has_role(c.relowner, 'USAGE')
FROM pg_stat_user_tables s
JOIN pg_class c ON c.oid = s.relid
WHERE s.schemaname = current_schema() AND s.relname = ANY($1)";

/// The background loop; runs until the store is dropped (which aborts it). `dead_rows_max` is
/// more than 0 (0 means the task is not started).
pub async fn run(inner: Arc<Inner>, dead_rows_max: u64, interval: Duration) {
    metrics::describe_counter!(VACUUMS_METRIC, "VACUUMs Sluice ran on its churning PostgreSQL tables, by table.");
    loop {
        tokio::time::sleep(interval).await;
        if let Err(e) = check_once(&inner, dead_rows_max).await {
            tracing::warn!("vacuuming Sluice's tables failed (next try in {FAILURE_PAUSE:?}): {e}");
            tokio::time::sleep(FAILURE_PAUSE).await;
        }
    }
}

/// One check: takes the lock, vacuums what is due, releases the lock. Returns the tables
/// vacuumed (none when another node holds the lock).
async fn check_once(inner: &Inner, dead_rows_max: u64) -> Result<Vec<&'static str>, String> {
    let client = inner.pool.get().await.map_err(|e| e.to_string())?;
    let locked: bool = client.query_one(LOCK, &[]).await.map_err(|e| describe(&e))?.get(0);
    if !locked {
        return Ok(Vec::new());
    }
    let outcome = vacuum_due(&client, dead_rows_max).await;
    let unlocked = client.query_one(UNLOCK, &[]).await.map(|row| row.get::<_, bool>(0));
    if !matches!(unlocked, Ok(true)) {
        // A session lock outlives a failed statement; closing the session is what surely ends it,
        // so this connection must not go back to the pool.
        drop(deadpool_postgres::Object::take(client));
    }
    outcome
}

async fn vacuum_due(client: &tokio_postgres::Client, dead_rows_max: u64) -> Result<Vec<&'static str>, String> {
    let tables: Vec<&str> = CHURNING_TABLES.to_vec();
    let rows = client.query(DEAD_ROWS, &[&tables]).await.map_err(|e| describe(&e))?;
    let dead: Vec<(String, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let permitted = |table: &str| rows.iter().any(|r| r.get::<_, &str>(0) == table && r.get::<_, bool>(2));
    let (due, refused): (Vec<&'static str>, Vec<&'static str>) =
        due(&dead, dead_rows_max).into_iter().partition(|table| permitted(table));
    let mut vacuumed = Vec::new();
    for table in due {
        let started = Instant::now();
        // The table name is one of `CHURNING_TABLES`, never input; it resolves through the
        // connection's search_path like every other statement of the store.
        client.batch_execute(&format!("VACUUM (SKIP_LOCKED) {table}")).await.map_err(|e| describe(&e))?;
        let dead_rows = dead.iter().find(|(t, _)| t == table).map_or(0, |(_, n)| *n);
        tracing::debug!(table, dead_rows, elapsed_ms = started.elapsed().as_millis() as u64, "vacuumed");
        metrics::counter!(VACUUMS_METRIC, "table" => table).increment(1);
        vacuumed.push(table);
    }
    if !refused.is_empty() {
        return Err(format!(
            "this role does not own {} and so cannot vacuum it; connect as the role that ran the migrations, or \
             leave vacuuming to autovacuum with --pg-vacuum-dead-rows 0",
            refused.join(", ")
        ));
    }
    Ok(vacuumed)
}

/// The churning tables among `dead` (table, dead rows) with more than `dead_rows_max` dead rows.
fn due(dead: &[(String, i64)], dead_rows_max: u64) -> Vec<&'static str> {
    CHURNING_TABLES
        .into_iter()
        .filter(|table| dead.iter().any(|(t, n)| t == table && u64::try_from(*n).unwrap_or(0) > dead_rows_max))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(dead: &[(&str, i64)], dead_rows_max: u64, expected: &[&str]) {
        let dead: Vec<(String, i64)> = dead.iter().map(|(t, n)| (t.to_string(), *n)).collect();
        assert_eq!(due(&dead, dead_rows_max), expected, "{dead:?} over {dead_rows_max}");
    }

    #[test]
    fn tables_past_the_limit_are_due() {
        check(&[], 10_000, &[]);
        check(&[("messages", 10_000), ("dedup", 0)], 10_000, &[]);
        check(&[("messages", 10_001), ("dedup", 0)], 10_000, &["messages"]);
        check(
            &[("fair_groups", 20_000), ("messages", 50_000), ("dedup", 10_001)],
            10_000,
            &["messages", "dedup", "fair_groups"],
        );
        // Only Sluice's own tables, whatever else the schema holds.
        check(&[("pgbench_accounts", 1_000_000)], 10_000, &[]);
        check(&[("messages", -1)], 0, &[]);
    }
}
