//! The streams' sweep on PostgreSQL, run by whichever node takes the advisory lock first:
//! retention (rows older than `retention_ms`, then the oldest rows while a partition keeps more
//! than `retention_bytes`), deleted in chunks of `RETENTION_CHUNK_ROWS`, each in a short
//! transaction of its own that also moves the partition's `first_offset` and `bytes`, so no
//! lock is held long and appends go on meanwhile; shared-mode holds past their ack timeout;
//! expired dedup ids; and the rows of deleted streams.

use sluice_store::{LogError, SweepReport};

use super::{config_of, groups, now_ms, store_error};
use crate::Inner;

/// Rows one retention step deletes at most.
const RETENTION_CHUNK_ROWS: i64 = 5_000;
/// Steps one sweep takes per partition at most; the next sweep goes on.
const RETENTION_STEPS_MAX: usize = 20;

pub async fn sweep(inner: &Inner) -> Result<SweepReport, LogError> {
    let mut report = SweepReport::default();
    let client = inner.client().await?;
    // A session lock held for this sweep: another node's sweep skips this round.
    let leased: bool = client
        .query_one("SELECT pg_try_advisory_lock(hashtext('sluice_stream_sweep:' || current_schema()))", &[])
        .await
        .map_err(store_error)?
        .get(0);
    if !leased {
        return Ok(report);
    }
    let outcome = sweep_leased(inner, &mut report).await;
    let unlocked =
        client.execute("SELECT pg_advisory_unlock(hashtext('sluice_stream_sweep:' || current_schema()))", &[]).await;
    outcome?;
    unlocked.map_err(store_error)?;
    Ok(report)
}

async fn sweep_leased(inner: &Inner, report: &mut SweepReport) -> Result<(), LogError> {
    let streams = {
        let client = inner.client().await?;
        client.query("SELECT id, name, config FROM streams ORDER BY id", &[]).await.map_err(store_error)?
    };
    for row in streams {
        let (id, name): (i64, String) = (row.get(0), row.get(1));
        let config = config_of(row.get(2))?;
        for p in 0..config.partitions as i32 {
            report.records_removed += retention(inner, id, p, config.retention_ms, config.retention_bytes).await?;
        }
        report.dead_lettered += groups::expire_all(inner, &name, id).await?;
    }
    let client = inner.client().await?;
    client
        .execute(
            "DELETE FROM stream_dedup WHERE ctid IN (SELECT ctid FROM stream_dedup WHERE expires_at <= sluice_now_ms() LIMIT 10000)",
            &[],
        )
        .await
        .map_err(store_error)?;
    client
        .execute(
            "DELETE FROM stream_records WHERE ctid IN (SELECT ctid FROM stream_records r
                 WHERE NOT EXISTS (SELECT 1 FROM streams s WHERE s.id = r.stream_id) LIMIT $1)",
            &[&RETENTION_CHUNK_ROWS],
        )
        .await
        .map_err(store_error)?;
    Ok(())
}

/// Removes a partition's records past retention, chunk by chunk; returns how many.
async fn retention(
    inner: &Inner,
    stream_id: i64,
    partition: i32,
    retention_ms: u64,
    retention_bytes: Option<u64>,
) -> Result<u64, LogError> {
    let mut removed = 0u64;
    for _ in 0..RETENTION_STEPS_MAX {
        let client = inner.client().await?;
        let row = client
            .query_one("SELECT first_offset, next_offset, bytes FROM stream_partitions WHERE stream_id = $1 AND partition = $2", &[&stream_id, &partition])
            .await
            .map_err(store_error)?;
        let (first, next, bytes): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
        if first >= next {
            return Ok(removed);
        }
        let now = now_ms(&client).await? as i64;
        // By age: the first record young enough to keep.
        let young = client
            .query_opt(
                "SELECT \"offset\" FROM stream_records WHERE stream_id = $1 AND partition = $2 AND timestamp_ms >= $3
                 ORDER BY timestamp_ms, \"offset\" LIMIT 1",
                &[&stream_id, &partition, &(now - retention_ms as i64)],
            )
            .await
            .map_err(store_error)?;
        let mut cut = young.map_or(next, |r| r.get::<_, i64>(0));
        // By size: drop the oldest rows while the rest still holds more than the limit.
        if let Some(limit) = retention_bytes
            && bytes > limit as i64
            && cut < next
        {
            let over = bytes - limit as i64;
            let row = client
                .query_opt(
                    "SELECT \"offset\" FROM (SELECT \"offset\", sum(size_bytes) OVER (ORDER BY \"offset\") AS upto
                         FROM stream_records WHERE stream_id = $1 AND partition = $2 AND \"offset\" >= $3
                         ORDER BY \"offset\" LIMIT $4) AS t
                     WHERE upto >= $5 ORDER BY \"offset\" LIMIT 1",
                    &[&stream_id, &partition, &first, &(RETENTION_CHUNK_ROWS * RETENTION_STEPS_MAX as i64), &over],
                )
                .await
                .map_err(store_error)?;
            cut = cut.max(row.map_or(first + RETENTION_CHUNK_ROWS, |r| r.get::<_, i64>(0) + 1).min(next));
        }
        if cut <= first {
            return Ok(removed);
        }
        let end = cut.min(first + RETENTION_CHUNK_ROWS);
        let mut client = client;
        let tx = client.transaction().await.map_err(store_error)?;
        let gone = tx
            .query_one(
                "WITH d AS (DELETE FROM stream_records WHERE stream_id = $1 AND partition = $2 AND \"offset\" >= $3 AND \"offset\" < $4
                            RETURNING size_bytes)
                 SELECT count(*), coalesce(sum(size_bytes), 0)::bigint FROM d",
                &[&stream_id, &partition, &first, &end],
            )
            .await
            .map_err(store_error)?;
        let (rows, freed): (i64, i64) = (gone.get(0), gone.get(1));
        tx.execute(
            "UPDATE stream_partitions SET first_offset = GREATEST(first_offset, $3), bytes = GREATEST(bytes - $4, 0)
             WHERE stream_id = $1 AND partition = $2",
            &[&stream_id, &partition, &end, &freed],
        )
        .await
        .map_err(store_error)?;
        tx.commit().await.map_err(store_error)?;
        removed += rows as u64;
        if end == cut {
            return Ok(removed);
        }
    }
    Ok(removed)
}
