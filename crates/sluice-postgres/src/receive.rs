//! Receive and long polls.
//!
//! One receive is one statement (`RECEIVE`): it locks up to `max` visible messages in delivery
//! order with `FOR UPDATE SKIP LOCKED` (so concurrent consumers, on any node, take disjoint
//! rows without waiting), moves those that used up their receives to the dead-letter queue, and
//! hides the rest for the visibility timeout with a new epoch. When it dead-lettered some and
//! delivered fewer than asked, it runs again for the rest, as `Broker::receive` keeps going.
//!
//! A long poll that found nothing subscribes to its queue's wake-ups (see `wake`) and sleeps
//! until the first of: a notification, the earliest `visible_at` in the queue (a delay or a hold
//! running out), or its deadline; then it looks again. There is no rescan loop: the only
//! re-checks without a wake are (a) a short back-off when a visible message exists that it could
//! not take (another consumer holds the row lock for the instant of its own receive, or the row
//! awaits the sweeper), and (b) a safety re-check every `SAFETY_RECHECK_MS`, which only matters
//! if a notification was lost despite the listener's reconnect-and-wake-all.

use std::time::{Duration, Instant};

use sluice_core::limits::RECEIVE_BYTES_MAX;
use sluice_store::{ReceiveRequest, ReceivedMessage, StoreError};

use crate::codec::{self, message_columns, ms};
use crate::queues::lookup;
use crate::{Counters, Inner, db_error};

/// How often a waiting long poll looks again with no wake-up at all.
const SAFETY_RECHECK_MS: u64 = 5_000;
/// Back-off bounds when a visible message could not be taken.
const RETRY_MS_MIN: u64 = 5;
const RETRY_MS_MAX: u64 = 100;

/// Receives up to `$2` messages of queue `$1`, hidden for `$3` ms (the queue's timeout when
/// null); `$4` is the receive's byte budget. Candidates are visible messages not past retention:
/// those not held (`messages_ready`) and holds that ran out but were not yet ended by the
/// sweeper (`messages_in_flight`); each set is locked separately (a locking clause cannot sit
/// under UNION), merged in delivery order, and cut to `$2`. A candidate that reached the
/// dead-letter policy's receive count moves to the dead-letter queue (epoch + 1) instead of being
/// delivered. The byte budget counts delivered bodies only and always lets the first through.
const RECEIVE: &str = concat!(
    "
WITH q AS (
    SELECT s.id, s.name, s.visibility_timeout_ms, s.retention_ms, s.max_receive_count, d.id AS dlq_id
    FROM queues s
    LEFT JOIN queues d ON d.name = s.dead_letter_queue AND d.id <> s.id
    WHERE s.id = $1
), ready AS (
    SELECT m.seq, m.priority, m.receive_count, m.size_bytes
    FROM messages m
    WHERE m.queue_id = $1 AND NOT m.in_flight AND m.visible_at <= sluice_now_ms()
      AND m.sent_at > sluice_now_ms() - (SELECT retention_ms FROM q)
    ORDER BY m.priority DESC, m.seq
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), expired AS (
    SELECT m.seq, m.priority, m.receive_count, m.size_bytes
    FROM messages m
    WHERE m.queue_id = $1 AND m.in_flight AND m.visible_at <= sluice_now_ms()
      AND m.sent_at > sluice_now_ms() - (SELECT retention_ms FROM q)
    ORDER BY m.priority DESC, m.seq
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), cand AS (
    SELECT c.seq, c.priority, c.size_bytes,
           (q.dlq_id IS NOT NULL AND c.receive_count >= q.max_receive_count) AS dead
    FROM (SELECT * FROM ready UNION ALL SELECT * FROM expired) c CROSS JOIN q
    ORDER BY c.priority DESC, c.seq
    LIMIT $2
), picked AS (
    SELECT seq, dead,
           sum(CASE WHEN dead THEN 0 ELSE size_bytes END) OVER w AS bytes,
           count(*) FILTER (WHERE NOT dead) OVER w AS live
    FROM cand
    WINDOW w AS (ORDER BY priority DESC, seq)
)
UPDATE messages m SET
    queue_id = CASE WHEN p.dead THEN q.dlq_id ELSE m.queue_id END,
    in_flight = NOT p.dead,
    visible_at = CASE WHEN p.dead THEN sluice_now_ms()
                      ELSE sluice_now_ms() + coalesce($3, q.visibility_timeout_ms) END,
    receive_count = CASE WHEN p.dead THEN m.receive_count ELSE m.receive_count + 1 END,
    epoch = m.epoch + 1,
    first_received_at = CASE WHEN p.dead THEN m.first_received_at
                             ELSE coalesce(m.first_received_at, sluice_now_ms()) END,
    dead_letter_source = CASE WHEN p.dead THEN q.name ELSE m.dead_letter_source END
FROM picked p CROSS JOIN q
WHERE m.seq = p.seq AND (p.dead OR p.live = 1 OR p.bytes <= $4::int8)
RETURNING p.dead, ",
    message_columns!()
);

/// For a long poll that found nothing: the database's now, whether the queue still exists, and
/// the earliest `visible_at` of its messages (held or not). An earliest time at or before now
/// means a visible message exists that the receive could not take.
const NEXT_VISIBLE: &str = "
SELECT sluice_now_ms() AS now,
       EXISTS (SELECT 1 FROM queues WHERE id = $1) AS present,
       least((SELECT min(visible_at) FROM messages WHERE queue_id = $1 AND NOT in_flight),
             (SELECT min(visible_at) FROM messages WHERE queue_id = $1 AND in_flight)) AS next_visible_at";

pub async fn receive(inner: &Inner, queue: &str, request: ReceiveRequest) -> Result<Vec<ReceivedMessage>, StoreError> {
    request.validate()?;
    let q = {
        let client = inner.client().await?;
        lookup(&client, queue).await?
    };
    let wait_ms = request.wait_ms.unwrap_or(q.attributes.receive_wait_ms);
    if wait_ms == 0 {
        return receive_once(inner, q.id, request).await;
    }
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    let mut wake = inner.wakers.subscribe(q.id);
    let mut retry_ms = RETRY_MS_MIN;
    loop {
        let got = receive_once(inner, q.id, request).await?;
        if !got.is_empty() {
            return Ok(got);
        }
        let row = {
            let client = inner.client().await?;
            let statement = client.prepare_cached(NEXT_VISIBLE).await.map_err(db_error)?;
            client.query_one(&statement, &[&(q.id as i64)]).await.map_err(db_error)?
        };
        if !row.get::<_, bool>("present") {
            // Deleted while we waited: end the poll empty, as the embedded store does.
            return Ok(Vec::new());
        }
        let now = ms(row.get("now"));
        let next: Option<i64> = row.get("next_visible_at");
        let sleep_ms = match next.map(ms) {
            Some(t) if t <= now => {
                let d = retry_ms;
                retry_ms = (retry_ms * 2).min(RETRY_MS_MAX);
                d
            }
            // One millisecond late, so that the message is due when we look.
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
        tokio::select! {
            () = wake.changed() => retry_ms = RETRY_MS_MIN,
            () = tokio::time::sleep(Duration::from_millis(sleep_ms)) => {}
            () = tokio::time::sleep(left) => return Ok(Vec::new()),
        }
    }
}

/// One `RECEIVE` pass, repeated while it dead-letters messages and delivers fewer than asked.
async fn receive_once(
    inner: &Inner,
    queue_id: u64,
    request: ReceiveRequest,
) -> Result<Vec<ReceivedMessage>, StoreError> {
    let client = inner.client().await?;
    let statement = client.prepare_cached(RECEIVE).await.map_err(db_error)?;
    let visibility_ms = request.visibility_timeout_ms.map(|v| v as i64);
    let mut delivered: Vec<(i16, u64, ReceivedMessage)> = Vec::new();
    let mut dead_letter_queues = Vec::new();
    loop {
        let max = i64::from(request.max) - delivered.len() as i64;
        let rows = client
            .query(&statement, &[&(queue_id as i64), &max, &visibility_ms, &(RECEIVE_BYTES_MAX as i64)])
            .await
            .map_err(db_error)?;
        let mut dead = 0;
        for row in &rows {
            if row.get::<_, bool>("dead") {
                dead += 1;
                dead_letter_queues.push(ms(row.get("queue_id")));
                continue;
            }
            match codec::message_from_row(row) {
                Ok((seq, message)) => {
                    let receipt = sluice_core::Receipt { queue: queue_id, seq, epoch: message.meta.epoch }.encode();
                    delivered.push((row.get("priority"), seq, ReceivedMessage { receipt, message }));
                }
                // Left in flight, so it comes back after its timeout; never delivered wrong.
                Err(e) => tracing::error!("not delivering an unreadable message of queue {queue_id}: {e}"),
            }
        }
        inner.counters.committed(rows.len() as u64);
        Counters::add(&inner.counters.dead_lettered, dead);
        if dead == 0 || delivered.len() >= request.max as usize {
            break;
        }
    }
    drop(client);
    dead_letter_queues.sort_unstable();
    dead_letter_queues.dedup();
    inner.notify(&dead_letter_queues).await;
    Counters::add(&inner.counters.received, delivered.len() as u64);
    delivered.sort_by_key(|(priority, seq, _)| (std::cmp::Reverse(*priority), *seq));
    Ok(delivered.into_iter().map(|(_, _, m)| m).collect())
}
