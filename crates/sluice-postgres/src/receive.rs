//! Receive and long polls.
//!
//! A receive runs one statement (`fair::RECEIVE` on standard queues, `fifo::RECEIVE` on FIFO
//! queues; their module docs say how each orders delivery): it locks visible messages with
//! `FOR UPDATE SKIP LOCKED` (so concurrent consumers, on any node, take disjoint rows without
//! waiting), moves those that used up their receives to the dead-letter queue, and hides the
//! rest for the visibility timeout with a new epoch. It runs again while it got fewer than
//! asked and there is more to try: after it dead-lettered some, as `Broker::receive` keeps
//! going, and, on a standard queue, for the next lower priority once a lane ran out. Each
//! statement answers a `pos` per row, the delivery order within that run.
//!
//! A long poll that found nothing subscribes to its queue's wake-ups (see `wake`) and sleeps
//! until the first of: a notification, the earliest `visible_at` in the queue (a delay or a hold
//! running out), or its deadline; then it looks again. There is no rescan loop: the only
//! re-checks without a wake are (a) a short back-off when a visible message exists that it could
//! not take (another consumer holds the row lock for the instant of its own receive, or the row
//! awaits the sweeper), and (b) a safety re-check every `SAFETY_RECHECK_MS`, which only matters
//! if a notification was lost despite the listener's reconnect-and-wake-all.

use std::time::{Duration, Instant};

use sluice_core::limits::{PRIORITY_MAX, RECEIVE_BYTES_MAX};
use sluice_store::{ReceiveRequest, ReceivedMessage, StoreError};

use crate::codec::{self, ms};
use crate::queues::lookup;
use crate::{Counters, Inner, db_error};

/// How often a waiting long poll looks again with no wake-up at all.
const SAFETY_RECHECK_MS: u64 = 5_000;
/// Back-off bounds when a visible message could not be taken.
const RETRY_MS_MIN: u64 = 5;
const RETRY_MS_MAX: u64 = 100;

/// For a long poll that found nothing: the database's now, whether the queue still exists, and
/// the earliest `visible_at` of its messages (held or not). An earliest time at or before now
/// means a visible message exists that the receive could not take. (`$2` is unused here; it is
/// `fifo::NEXT_VISIBLE`'s.)
const NEXT_VISIBLE: &str = "
SELECT sluice_now_ms() AS now,
       EXISTS (SELECT 1 FROM queues WHERE id = $1) AS present,
       $2::int8 IS NULL AS ready,
       least((SELECT min(visible_at) FROM messages WHERE queue_id = $1 AND NOT in_flight),
             (SELECT min(visible_at) FROM messages WHERE queue_id = $1 AND in_flight)) AS next_visible_at";

/// The statements one queue type receives with.
#[derive(Clone, Copy)]
struct Statements {
    receive: &'static str,
    next_visible: &'static str,
    /// The receive serves one priority lane per run and answers a status row (`fair::RECEIVE`).
    lanes: bool,
}

impl Statements {
    fn of(fifo: bool) -> Statements {
        if fifo {
            Statements { receive: &crate::fifo::RECEIVE, next_visible: crate::fifo::NEXT_VISIBLE, lanes: false }
        } else {
            Statements { receive: &crate::fair::RECEIVE, next_visible: NEXT_VISIBLE, lanes: true }
        }
    }
}

pub async fn receive(inner: &Inner, queue: &str, request: ReceiveRequest) -> Result<Vec<ReceivedMessage>, StoreError> {
    request.validate()?;
    let q = {
        let client = inner.client().await?;
        lookup(&client, queue).await?
    };
    let wait_ms = request.wait_ms.unwrap_or(q.attributes.receive_wait_ms);
    let statements = Statements::of(q.attributes.fifo);
    if wait_ms == 0 {
        return receive_once(inner, q.id, statements, request).await;
    }
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    let mut wake = inner.wakers.subscribe(q.id);
    let mut retry_ms = RETRY_MS_MIN;
    loop {
        let got = receive_once(inner, q.id, statements, request).await?;
        if !got.is_empty() {
            return Ok(got);
        }
        let row = {
            let client = inner.client().await?;
            let statement = client.prepare_cached(statements.next_visible).await.map_err(db_error)?;
            client.query_one(&statement, &[&(q.id as i64), &1i64]).await.map_err(db_error)?
        };
        if !row.get::<_, bool>("present") {
            // Deleted while we waited: end the poll empty, as the embedded store does.
            return Ok(Vec::new());
        }
        let now = ms(row.get("now"));
        // Something is receivable now (standard: a visible message; FIFO: a group that may
        // deliver), but another consumer held its rows for the instant of its own receive.
        let ready = row.get::<_, bool>("ready");
        let next: Option<i64> = row.get("next_visible_at");
        let next = if ready { Some(now as i64) } else { next };
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

/// One receive without waiting: the statement, repeated while it dead-letters messages, or a
/// lane runs out with lower lanes left, and fewer than asked were delivered.
async fn receive_once(
    inner: &Inner,
    queue_id: u64,
    statements: Statements,
    request: ReceiveRequest,
) -> Result<Vec<ReceivedMessage>, StoreError> {
    let client = inner.client().await?;
    let statement = client.prepare_cached(statements.receive).await.map_err(db_error)?;
    let visibility_ms = request.visibility_timeout_ms.map(|v| v as i64);
    // (run, position in that run's delivery order, message)
    let mut delivered: Vec<(u32, i64, ReceivedMessage)> = Vec::new();
    let mut dead_letter_queues = Vec::new();
    let mut bytes: u64 = 0;
    // Lanes below this priority are left (standard queues).
    let mut below = i16::from(PRIORITY_MAX) + 1;
    for run in 0.. {
        let max = i64::from(request.max) - delivered.len() as i64;
        let budget = RECEIVE_BYTES_MAX.saturating_sub(bytes) as i64;
        let queue = queue_id as i64;
        let rows = if statements.lanes {
            client.query(&statement, &[&queue, &max, &visibility_ms, &budget, &below]).await
        } else {
            client.query(&statement, &[&queue, &max, &visibility_ms, &budget]).await
        }
        .map_err(db_error)?;
        let mut dead = 0;
        let mut changed = 0;
        let mut lane: Option<(i16, bool)> = None;
        for row in &rows {
            if statements.lanes {
                lane = row.get::<_, Option<i16>>("top").map(|top| (top, row.get("more_below")));
                if row.get::<_, Option<i64>>("seq").is_none() {
                    continue;
                }
            }
            changed += 1;
            if row.get::<_, bool>("dead") {
                dead += 1;
                dead_letter_queues.push(ms(row.get("queue_id")));
                continue;
            }
            match codec::message_from_row(row) {
                Ok((seq, message)) => {
                    bytes += message.meta.size_bytes;
                    let receipt = sluice_core::Receipt { queue: queue_id, seq, epoch: message.meta.epoch }.encode();
                    delivered.push((run, row.get("pos"), ReceivedMessage { receipt, message }));
                }
                // Left in flight, so it comes back after its timeout; never delivered wrong.
                Err(e) => tracing::error!("not delivering an unreadable message of queue {queue_id}: {e}"),
            }
        }
        inner.counters.committed(changed);
        Counters::add(&inner.counters.messages_dead_lettered, dead);
        if delivered.len() >= request.max as usize {
            break;
        }
        match lane {
            _ if dead > 0 => {}
            Some((top, true)) => below = top,
            _ => break,
        }
    }
    drop(client);
    dead_letter_queues.sort_unstable();
    dead_letter_queues.dedup();
    inner.notify(&dead_letter_queues).await;
    Counters::add(&inner.counters.messages_received, delivered.len() as u64);
    delivered.sort_by_key(|(run, pos, _)| (*run, *pos));
    Ok(delivered.into_iter().map(|(_, _, m)| m).collect())
}
