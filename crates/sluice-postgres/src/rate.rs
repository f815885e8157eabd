//! Rate limits' token buckets in the `rate_buckets` table (migration 8), shared by every node.
//!
//! A take is one statement: core's `rate::take` restated in SQL over the same integers
//! (thousandths of a token, milliseconds of the database's clock), evaluated under the bucket
//! row's lock by `INSERT ... ON CONFLICT DO UPDATE`. Takes from any number of nodes are
//! therefore serialised on the row and grant exactly what one bucket would: never more than
//! `burst` plus `per_second` for every second of the database's clock. The one inexactness is
//! the clock's: a node's take is stamped when the statement runs, not when the request came in.

use sluice_core::rate::{REFILL_MS_MAX, RateLimit, Taken};
use sluice_store::{StoreError, validate_rate_key};

use crate::{Inner, db_error};

/// `$1` key, `$2` capacity (burst × 1000), `$3` per second, `$4` tokens asked. `have` is the
/// bucket refilled to now, capped at the capacity; the take grants `least($4, have / 1000)`
/// whole tokens. A new bucket starts full. Every expression of the update reads the row as it
/// was, so `granted` and `tokens_milli` come from the same `have`.
const TAKE: &str = "
INSERT INTO rate_buckets AS r (key, tokens_milli, updated_at, granted)
VALUES ($1::text, $2::int8 - least($4::int8, $2::int8 / 1000) * 1000, sluice_now_ms(), least($4::int8, $2::int8 / 1000))
ON CONFLICT (key) DO UPDATE SET
    granted = least($4::int8, least($2::int8,
        r.tokens_milli + least(greatest(sluice_now_ms() - r.updated_at, 0), $5::int8) * $3::int8) / 1000),
    tokens_milli = least($2::int8,
            r.tokens_milli + least(greatest(sluice_now_ms() - r.updated_at, 0), $5::int8) * $3::int8)
        - least($4::int8, least($2::int8,
            r.tokens_milli + least(greatest(sluice_now_ms() - r.updated_at, 0), $5::int8) * $3::int8) / 1000) * 1000,
    updated_at = greatest(r.updated_at, sluice_now_ms())
RETURNING granted, tokens_milli";

pub async fn take_tokens(inner: &Inner, key: &str, limit: RateLimit, asked: u64) -> Result<Taken, StoreError> {
    validate_rate_key(key)?;
    limit.validate("rate_limit")?;
    let client = inner.client().await?;
    let statement = client.prepare_cached(TAKE).await.map_err(db_error)?;
    let capacity = limit.capacity_milli() as i64;
    let per_second = limit.per_second as i64;
    let asked = asked.min(i64::MAX as u64) as i64;
    let refill_max = REFILL_MS_MAX as i64;
    let row =
        client.query_one(&statement, &[&key, &capacity, &per_second, &asked, &refill_max]).await.map_err(db_error)?;
    let granted = row.get::<_, i64>("granted") as u64;
    let tokens_milli = row.get::<_, i64>("tokens_milli") as u64;
    let retry_after_ms =
        (granted < asked as u64).then(|| (1000 - tokens_milli % 1000).div_ceil(limit.per_second).max(1));
    Ok(Taken { granted, retry_after_ms })
}

/// A send's rate limit on PostgreSQL: when queue `q` has a `rate_limit`, takes a token for
/// every entry (as core's `Broker::send` does) and returns the entries after the first
/// `granted` as `RateLimited` refusals, counted on the queue's row. `None` for the entries to
/// send, in place.
pub async fn limit_sends(
    inner: &Inner,
    q: &crate::queues::QueueRow,
    count: usize,
) -> Result<Vec<Option<sluice_core::EntryError>>, StoreError> {
    let Some(limit) = q.attributes.rate_limit else {
        return Ok(vec![None; count]);
    };
    let taken = take_tokens(inner, &format!("queue:{}", q.id), limit, count as u64).await?;
    let granted = taken.granted as usize;
    if granted < count {
        let refused = (count - granted) as i64;
        let client = inner.client().await?;
        client
            .execute("UPDATE queues SET rate_limited = rate_limited + $2 WHERE id = $1", &[&(q.id as i64), &refused])
            .await
            .map_err(db_error)?;
    }
    let retry_after_ms = taken.retry_after_ms.unwrap_or(1);
    Ok((0..count).map(|i| (i >= granted).then_some(sluice_core::EntryError::RateLimited { retry_after_ms })).collect())
}
