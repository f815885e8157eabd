//! Message calls other than receive: send, ack, visibility changes, nack, peek and redrive moves.
//!
//! A receipt is core's `Receipt` (queue id, sequence number, delivery epoch) and is checked as
//! `Broker` checks it: another queue's receipt is `ForeignReceipt`; a receipt whose row is gone,
//! moved or received again since (any other epoch) is `StaleReceipt`; a current receipt of a
//! message whose hold already ended is `NotInFlight` for calls that need a hold. Batch entries of
//! one call run in one transaction, in order, so a receipt given twice behaves as it does when
//! the embedded store applies the entries one after another.

use std::collections::{BTreeSet, HashMap};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use deadpool_postgres::GenericClient;
use futures::future::try_join_all;
use sluice_core::broker::{MoveOutcome, Sent};
use sluice_core::limits::{DELAY_MS_MAX, ERROR_REASON_LEN_MAX, VISIBILITY_TIMEOUT_MS_MAX};
use sluice_core::{EntryError, MessageId, NewMessage, Receipt, ValidationError};
use sluice_store::{EntryResults, NackEntry, PeekedMessage, StoreError};
use tokio_postgres::types::ToSql;

use crate::batch::{Batch, INSERT, admit, insert_in, insert_params, new_message_id, now_ms};
use crate::codec::{self, message_columns, ms};
use crate::fragments;
use crate::queues::{QueueRow, lookup};
use crate::{Inner, db_error};

/// Wakes long polls on the listed queues, on every node (see `wake`).
pub const NOTIFY: &str = "SELECT pg_notify($1, q::text) FROM unnest($2::int8[]) AS q";

/// Deletes the messages whose receipts are current; returns which (seq, epoch) pairs matched.
const ACK: &str = "
DELETE FROM messages m
USING unnest($2::int8[], $3::int8[]) AS r(seq, epoch)
WHERE m.seq = r.seq AND m.epoch = r.epoch AND m.queue_id = $1
RETURNING m.seq, r.epoch";

/// The answer of `EXTEND`, `END_HOLD` and `REHIDE` (read into `HoldOutcome`), from their `cur`
/// (the row the receipt names) and `done` (the row changed).
macro_rules! hold_outcome {
    () => {
        "SELECT EXISTS (SELECT 1 FROM cur) AS matched,
       EXISTS (SELECT 1 FROM messages x WHERE x.seq = $2 AND x.queue_id = $1) AS present,
       coalesce((SELECT held FROM cur), false) AS held,
       (SELECT queue_id FROM done) AS queue_id,
       coalesce((SELECT dead FROM done), false) AS dead"
    };
}

/// Sets a held message's remaining visibility (`$4` ms from now). Answers whether the receipt
/// is current, whether the message was held, and the queue to wake.
const EXTEND: &str = concat!(
    "
WITH cur AS (
    SELECT m.seq, (m.in_flight AND m.visible_at > sluice_now_ms()) AS held
    FROM messages m
    WHERE m.seq = $2 AND m.queue_id = $1 AND m.epoch = $3
    FOR UPDATE
), done AS (
    UPDATE messages m SET visible_at = sluice_now_ms() + $4
    FROM cur
    WHERE m.seq = cur.seq AND cur.held
    RETURNING m.queue_id, false AS dead
)
",
    hold_outcome!()
);

/// Ends a hold (core's `make_available`): the message becomes visible `$4` ms from now with
/// `$5` as its last error when one is given, or, if it used up its receives and the queue's
/// dead-letter queue exists, moves there at once with a new epoch. Same answer as `EXTEND`.
static END_HOLD: LazyLock<String> = LazyLock::new(|| {
    format!(
        "
WITH q AS (
    {queues}
    WHERE s.id = $1
), cur AS (
    SELECT m.seq, (m.in_flight AND m.visible_at > sluice_now_ms()) AS held, {dead} AS dead
    FROM messages m CROSS JOIN q
    WHERE m.seq = $2 AND m.queue_id = $1 AND m.epoch = $3
    FOR UPDATE OF m
), done AS (
    UPDATE messages m SET
    last_error = coalesce($5, m.last_error),
    {set}
    FROM cur CROSS JOIN q
    WHERE m.seq = cur.seq AND cur.held
    RETURNING m.queue_id, cur.dead
)
{outcome}",
        queues = fragments::QUEUES,
        dead = fragments::dead("m.receive_count"),
        set = fragments::dead_letter_or(
            "cur.dead",
            "q",
            &[("in_flight", "false"), ("visible_at", "sluice_now_ms() + $4")]
        ),
        outcome = hold_outcome!(),
    )
});

/// SQS's lenient visibility change with a timeout (`Broker::change_visibility_lenient`): the
/// message is hidden for `$4` ms from now whether its hold is still on or already ran out, as
/// long as the receipt is current (nobody received it since). A hold that ran out on a message
/// with no receives left is ended the way the sweeper would (dead-lettered) and answers `dead`.
static REHIDE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "
WITH q AS (
    {queues}
    WHERE s.id = $1
), cur AS (
    SELECT m.seq, (m.in_flight AND m.visible_at > sluice_now_ms()) AS held,
           (m.in_flight AND m.visible_at <= sluice_now_ms() AND {dead}) AS dead
    FROM messages m CROSS JOIN q
    WHERE m.seq = $2 AND m.queue_id = $1 AND m.epoch = $3
    FOR UPDATE OF m
), done AS (
    UPDATE messages m SET
    {set}
    FROM cur CROSS JOIN q
    WHERE m.seq = cur.seq
    RETURNING m.queue_id, cur.dead
)
{outcome}",
        queues = fragments::QUEUES,
        dead = fragments::dead("m.receive_count"),
        set = fragments::dead_letter_or(
            "cur.dead",
            "q",
            &[("in_flight", "true"), ("visible_at", "sluice_now_ms() + $4")]
        ),
        outcome = hold_outcome!(),
    )
});

const PEEK: &str = concat!(
    "SELECT ",
    message_columns!(),
    ", sluice_now_ms() AS now FROM messages m WHERE m.queue_id = $1 ORDER BY m.sent_at, m.seq LIMIT $2"
);

/// One attempt of a redrive step: up to `$2` visible messages of queue `$1`, in delivery order,
/// each to `$3` or (when `$3` is null) back to the queue it was dead-lettered from, if that
/// exists. Moved messages start over: receive count 0, a new epoch, visible at once, no
/// dead-letter source. Answers a row per moved message (`locked` false) and, when it moved
/// fewer than `$2` although movable messages it skipped remain, one more row with `locked`
/// true and nulls.
///
/// Rows are taken with `SKIP LOCKED`, so the step never waits for (and never deadlocks with)
/// a receive, a batch of hold changes or the sweeper. But a skipped row is not an absent one:
/// the sweeper ending an expired hold (for one statement, see `sweep`), or a receive that
/// locked more rows than it takes, holds a row that is still visible, and a step that reported
/// it as nothing to move would end a redrive early. The `locked` row says so instead. It compares `cand` with every movable row
/// of the statement's snapshot (which still shows the moved rows in `$1`; `cand` is
/// materialized once, so both see the same rows), and is only asked when `cand` is short of
/// `$2`, when that scan is bounded by the rows moved and skipped.
const MOVE: &str = "
WITH cand AS MATERIALIZED (
    SELECT m.seq, coalesce($3::int8, src.id) AS target
    FROM messages m
    LEFT JOIN queues src ON src.name = m.dead_letter_source AND src.id <> $1
    WHERE m.queue_id = $1 AND m.visible_at <= sluice_now_ms() AND coalesce($3::int8, src.id) IS NOT NULL
    ORDER BY m.priority DESC, m.seq
    LIMIT $2
    FOR UPDATE OF m SKIP LOCKED
), moved AS (
    UPDATE messages m SET
        queue_id = cand.target, receive_count = 0, epoch = m.epoch + 1, in_flight = false,
        visible_at = sluice_now_ms(), dead_letter_source = NULL
    FROM cand
    WHERE m.seq = cand.seq
    RETURNING m.queue_id, m.priority, m.seq
)
SELECT queue_id, priority, seq, false AS locked FROM moved
UNION ALL
SELECT NULL, NULL, NULL, true
WHERE (SELECT count(*) FROM cand) < $2 AND EXISTS (
    SELECT 1
    FROM messages m
    LEFT JOIN queues src ON src.name = m.dead_letter_source AND src.id <> $1
    WHERE m.queue_id = $1 AND m.visible_at <= sluice_now_ms() AND coalesce($3::int8, src.id) IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM cand c WHERE c.seq = m.seq))";

/// How long a redrive step keeps looking again for movable rows that other transactions hold
/// (see `MOVE`); past it the step fails (`Unavailable`) rather than report that nothing is left.
///
/// Still needed since the sweeper ends expired holds in a transaction of its own (`sweep`):
/// that cut how long it keeps such a row locked from a whole sweep to one statement and its
/// commit, not to nothing, and a receive that locks more rows than it takes holds some for its
/// statement too. Measured with the sweeper running every millisecond, 400 steps each over a
/// message whose hold had just ended: 166 steps met the row locked before the change, 57 after,
/// and without this wait each of them would have ended its redrive with the message left
/// behind; with it, none did. In 50 runs of the PostgreSQL conformance suite after the change,
/// `dead_letter_and_redrive` met the row locked twice and passed only by looking again.
///
/// Holders keep a row for one statement, so a step finds it free again within milliseconds;
/// the limit is far above that, and short enough that cancelling a redrive, which takes effect
/// between steps, still does within seconds.
const MOVE_LOCKED_WAIT_MS_MAX: u64 = 2_000;
/// Pause bounds between attempts of a step that met held rows: the first is short, because a
/// receive holds its rows for one statement.
const MOVE_RETRY_MS_MIN: u64 = 5;
const MOVE_RETRY_MS_MAX: u64 = 100;

/// After a move: visible messages of `$1` that could not move (no `to`, and no source queue to
/// go back to) ahead of the last one moved (`$2`, `$3`; all of them when null), and the visible
/// messages left.
const MOVE_REPORT: &str = "
SELECT
    (SELECT count(*) FROM messages m
       LEFT JOIN queues src ON src.name = m.dead_letter_source AND src.id <> $1
     WHERE m.queue_id = $1 AND m.visible_at <= sluice_now_ms() AND src.id IS NULL AND $4
       AND ($2::int2 IS NULL OR m.priority > $2 OR (m.priority = $2 AND m.seq < $3))) AS failed,
    (SELECT count(*) FROM messages m WHERE m.queue_id = $1 AND m.visible_at <= sluice_now_ms()) AS visible";

pub async fn send(inner: &Inner, queue: &str, messages: Vec<NewMessage>) -> Result<EntryResults<Sent>, StoreError> {
    let client = inner.client().await?;
    let q = lookup(&client, queue).await?;
    if q.attributes.rate_limit.is_some() {
        return send_limited(inner, client, (queue, &q), messages).await;
    }
    send_to(inner, client, (queue, &q), messages).await
}

/// A send into a queue with a `rate_limit`: the entries past the tokens granted are refused
/// in place, the others sent as any send.
async fn send_limited(
    inner: &Inner,
    client: deadpool_postgres::Object,
    (name, q): (&str, &crate::queues::QueueRow),
    messages: Vec<sluice_core::NewMessage>,
) -> Result<sluice_store::EntryResults<sluice_core::Sent>, StoreError> {
    let limited = crate::rate::limit_sends(inner, q, messages.len()).await?;
    let mut answers: Vec<Option<Result<sluice_core::Sent, sluice_core::EntryError>>> =
        Vec::with_capacity(messages.len());
    let mut granted = Vec::new();
    for (m, refusal) in messages.into_iter().zip(limited) {
        match refusal {
            Some(e) => answers.push(Some(Err(e))),
            None => {
                answers.push(None);
                granted.push(m);
            }
        }
    }
    let mut sent =
        if granted.is_empty() { Vec::new() } else { send_to(inner, client, (name, q), granted).await? }.into_iter();
    Ok(answers.into_iter().map(|a| a.unwrap_or_else(|| sent.next().expect("one answer per message sent"))).collect())
}

/// A send to queue `q` once its rate limit (if any) let the messages through.
pub async fn send_to(
    inner: &Inner,
    client: deadpool_postgres::Object,
    (queue, q): (&str, &QueueRow),
    messages: Vec<NewMessage>,
) -> Result<EntryResults<Sent>, StoreError> {
    if q.attributes.fifo {
        return crate::fifo::send(inner, client, (queue, q), messages).await;
    }
    if q.attributes.has_depth_limit() {
        return crate::depth::send(inner, client, (queue, q), messages).await;
    }
    let now = now_ms();
    let mut admitted = Vec::with_capacity(messages.len());
    let mut batch = Batch::default();
    for m in messages {
        match admit(&m, &q.attributes, now) {
            Ok(()) => {
                let id = new_message_id();
                admitted.push(Ok(id));
                batch.push(id, m, &q.attributes);
            }
            Err(e) => admitted.push(Err(e)),
        }
    }
    let seqs =
        if batch.ids.is_empty() { HashMap::new() } else { insert(inner, &client, (queue, q.id), &batch).await? };
    Ok(admitted.into_iter().map(|r| r.map(|id| Sent::new(ms(seqs[&id]), MessageId(id.as_u128())))).collect())
}

/// A standard queue's send inside the caller's transaction (an atomic commit): every message's
/// answer, or the first message the queue refuses (then nothing was written). The caller
/// commits, counts and wakes the queue's long polls.
pub async fn send_in(
    tx: &deadpool_postgres::Transaction<'_>,
    (name, q): (&str, &QueueRow),
    messages: Vec<NewMessage>,
) -> Result<Result<(Vec<Sent>, u64), (usize, EntryError)>, StoreError> {
    if q.attributes.fifo {
        return crate::fifo::send_in(tx, (name, q), messages).await;
    }
    let now = now_ms();
    let mut batch = Batch::default();
    let mut sizes = Vec::with_capacity(messages.len());
    for (i, m) in messages.into_iter().enumerate() {
        if let Err(e) = admit(&m, &q.attributes, now) {
            return Ok(Err((i, e)));
        }
        sizes.push(m.size_bytes());
        batch.push(new_message_id(), m, &q.attributes);
    }
    if batch.ids.is_empty() {
        return Ok(Ok((Vec::new(), 0)));
    }
    // A bounded queue: planned under its lock; a refused message refuses the whole commit.
    let plan = if q.attributes.has_depth_limit() {
        let plan = crate::depth::plan(tx, (name, q.id as i64), &q.attributes, &sizes).await?;
        if let Some(i) = plan.entries.iter().position(Result::is_err) {
            let e = plan.entries[i].clone().expect_err("found as an error");
            return Ok(Err((i, e)));
        }
        Some(plan)
    } else {
        None
    };
    let seqs = insert_in(tx, (name, q.id as i64), &batch).await?;
    let (mut dead_lettered, mut dropped_new) = (Vec::new(), Vec::new());
    let mut sent = Vec::with_capacity(batch.ids.len());
    for (i, id) in batch.ids.iter().enumerate() {
        let mut s = Sent::new(ms(seqs[id]), MessageId(id.as_u128()));
        if let Some(plan) = &plan
            && let Ok(placed) = &plan.entries[i]
        {
            if placed.dead_letter {
                dead_lettered.push(seqs[id]);
            }
            if plan.dropped_entries.contains(&i) {
                dropped_new.push(seqs[id]);
            }
            s.dead_lettered = placed.dead_letter;
            s.dropped = placed.dropped;
            s.depth = Some(placed.depth);
        }
        sent.push(s);
    }
    if let Some(plan) = &plan {
        plan.apply(tx, q.id as i64, &dead_lettered, &dropped_new).await?;
    }
    Ok(Ok((sent, seqs.len() as u64)))
}

/// Inserts the batch and wakes the queue's long polls; answers each new message's sequence
/// number by id.
async fn insert(
    inner: &Inner,
    client: &deadpool_postgres::Client,
    (name, queue): (&str, u64),
    batch: &Batch,
) -> Result<HashMap<uuid::Uuid, i64>, StoreError> {
    let queue_id = queue as i64;
    let insert = client.prepare_cached(INSERT).await.map_err(db_error)?;
    let notify = client.prepare_cached(NOTIFY).await.map_err(db_error)?;
    let woken = vec![queue_id];
    let insert_params = insert_params(&queue_id, batch);
    let notify_params: [&(dyn ToSql + Sync); 2] = [&inner.channel, &woken];
    // Pipelined on one connection: the NOTIFY runs (and commits) only after the INSERT has
    // committed, so a woken waiter always finds the new rows. Sent as its own transaction,
    // it holds PostgreSQL's global notify lock only briefly, not across the INSERT's WAL flush.
    let (rows, _) = tokio::try_join!(client.query(&insert, &insert_params), client.execute(&notify, &notify_params))
        .map_err(db_error)?;
    if rows.is_empty() {
        // The queue was deleted between the look-up and the insert.
        return Err(sluice_core::BrokerError::QueueNotFound(name.to_string()).into());
    }
    inner.wakers.wake(queue);
    crate::Counters::add(&inner.counters.messages_sent, rows.len() as u64);
    inner.counters.committed(rows.len() as u64);
    Ok(rows.iter().map(|r| (r.get("id"), r.get("seq"))).collect())
}

fn decode_receipt(text: &str) -> Result<Receipt, EntryError> {
    Receipt::decode(text).map_err(|e| EntryError::InvalidReceipt(e.0.to_string()))
}

/// The receipt's (seq, epoch) for SQL, or `ForeignReceipt` when it names another queue.
fn check_receipt(receipt: &Receipt, queue: u64) -> Result<(i64, i64), EntryError> {
    if receipt.queue != queue {
        return Err(EntryError::ForeignReceipt);
    }
    // A sequence number beyond i64 was never handed out: the receipt names nothing current.
    let seq = i64::try_from(receipt.seq).map_err(|_| EntryError::StaleReceipt)?;
    Ok((seq, i64::from(receipt.epoch)))
}

fn parse_receipt(text: &str, queue: u64) -> Result<(i64, i64), EntryError> {
    check_receipt(&decode_receipt(text)?, queue)
}

pub async fn ack(inner: &Inner, queue: &str, receipts: Vec<String>) -> Result<EntryResults<()>, StoreError> {
    let client = inner.client().await?;
    let q = lookup(&client, queue).await?;
    let parsed: Vec<Result<(i64, i64), EntryError>> = receipts.iter().map(|r| parse_receipt(r, q.id)).collect();
    let pairs: BTreeSet<(i64, i64)> = parsed.iter().filter_map(|p| p.as_ref().ok().copied()).collect();
    let mut deleted = BTreeSet::new();
    if !pairs.is_empty() {
        let (seqs, epochs): (Vec<i64>, Vec<i64>) = pairs.into_iter().unzip();
        let statement = client.prepare_cached(ACK).await.map_err(db_error)?;
        let rows = client.query(&statement, &[&(q.id as i64), &seqs, &epochs]).await.map_err(db_error)?;
        deleted = rows.iter().map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1))).collect();
    }
    let acked = deleted.len() as u64;
    // The first entry naming a deleted message gets the success; any repeat finds it gone.
    let results = parsed
        .into_iter()
        .map(|p| p.and_then(|pair| if deleted.remove(&pair) { Ok(()) } else { Err(EntryError::StaleReceipt) }))
        .collect();
    crate::Counters::add(&inner.counters.messages_acked, acked);
    inner.counters.committed(acked);
    if q.attributes.fifo && acked > 0 {
        // An ack can end the hold that blocked a group: waiters look again.
        drop(client);
        inner.notify(&[q.id]).await;
    }
    Ok(results)
}

/// What an `EXTEND`, `END_HOLD` or `REHIDE` statement found for one entry.
struct HoldOutcome {
    /// The receipt names the message's current delivery in this queue.
    matched: bool,
    /// The message is in this queue, whatever delivery the receipt names.
    present: bool,
    /// The message was held (in flight, timeout not passed) when the statement looked.
    held: bool,
    /// The queue the message is in after the change, if it changed.
    queue: Option<i64>,
    /// The message moved to the dead-letter queue.
    dead: bool,
}

/// Which statement an entry of a visibility or nack call runs, and how its outcome reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum HoldKind {
    /// New remaining visibility for a held message (`EXTEND`).
    Extend,
    /// End the hold: visible after a delay, or dead-lettered (`END_HOLD`); release and nack.
    End,
    /// SQS's lenient change with a timeout: hide again even if the hold ran out (`REHIDE`).
    Rehide,
    /// SQS's lenient release: as `End`, and a hold that already ran out is left as it is.
    EndLenient,
}

impl HoldKind {
    fn sql(self) -> &'static str {
        match self {
            HoldKind::Extend => EXTEND,
            HoldKind::End | HoldKind::EndLenient => END_HOLD.as_str(),
            HoldKind::Rehide => REHIDE.as_str(),
        }
    }

    /// The entry's result, as `Broker::change_visibility[_lenient]` and `Broker::nack` answer.
    fn result(self, o: &HoldOutcome) -> Result<(), EntryError> {
        if !o.matched {
            // SQS's rule tells a message received again since from one that left the queue.
            let lenient = matches!(self, HoldKind::Rehide | HoldKind::EndLenient);
            return Err(if lenient && !o.present { EntryError::MessageGone } else { EntryError::StaleReceipt });
        }
        match self {
            HoldKind::Extend | HoldKind::End if !o.held => Err(EntryError::NotInFlight),
            // The hold had run out with no receives left: the message went to the dead-letter
            // queue (as the broker's tick would have done first), so the receipt is stale.
            HoldKind::Rehide if o.dead => Err(EntryError::StaleReceipt),
            _ => Ok(()),
        }
    }
}

/// One entry ready for SQL.
struct HoldChange {
    kind: HoldKind,
    seq: i64,
    epoch: i64,
    /// The new timeout (extend, rehide) or the delay before visible (end).
    ms: i64,
    error: Option<String>,
}

/// Runs the checked entries of a visibility or nack call in one transaction, in order
/// (pipelined), and wakes the queues whose timers or visible sets changed.
async fn change_holds(
    inner: &Inner,
    queue_id: u64,
    checked: Vec<Result<HoldChange, EntryError>>,
) -> Result<EntryResults<()>, StoreError> {
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(db_error)?;
    let id = queue_id as i64;
    let mut statements = std::collections::HashMap::new();
    for c in checked.iter().flatten() {
        if let std::collections::hash_map::Entry::Vacant(v) = statements.entry(c.kind) {
            v.insert(tx.prepare_cached(c.kind.sql()).await.map_err(db_error)?);
        }
    }
    let (tx_ref, statements) = (&tx, &statements);
    let runs = checked.iter().flatten().map(|c| async move {
        let statement = &statements[&c.kind];
        let row = if c.kind.sql() == END_HOLD.as_str() {
            tx_ref.query_one(statement, &[&id, &c.seq, &c.epoch, &c.ms, &c.error]).await?
        } else {
            tx_ref.query_one(statement, &[&id, &c.seq, &c.epoch, &c.ms]).await?
        };
        Ok::<_, tokio_postgres::Error>(HoldOutcome {
            matched: row.get("matched"),
            present: row.get("present"),
            held: row.get("held"),
            queue: row.get("queue_id"),
            dead: row.get("dead"),
        })
    });
    let outcomes = try_join_all(runs).await.map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    let changed = outcomes.iter().filter(|o| o.queue.is_some()).count() as u64;
    let dead = outcomes.iter().filter(|o| o.dead).count() as u64;
    crate::Counters::add(&inner.counters.messages_dead_lettered, dead);
    inner.counters.committed(changed);
    let woken: BTreeSet<u64> = outcomes.iter().filter_map(|o| o.queue).map(ms).collect();
    inner.notify(&woken.into_iter().collect::<Vec<_>>()).await;
    let mut outcomes = outcomes.iter();
    Ok(checked
        .into_iter()
        .map(|c| c.and_then(|c| c.kind.result(outcomes.next().expect("one outcome per checked entry"))))
        .collect())
}

/// Sets held messages' remaining visibility; `lenient` is SQS's rule (see `HoldKind::Rehide`).
pub async fn change_visibility(
    inner: &Inner,
    queue: &str,
    entries: Vec<(String, u64)>,
    lenient: bool,
) -> Result<EntryResults<()>, StoreError> {
    let q = {
        let client = inner.client().await?;
        lookup(&client, queue).await?
    };
    let checked = entries
        .into_iter()
        .map(|(receipt, timeout_ms)| {
            // Core checks the timeout before the receipt's queue and epoch.
            let receipt = decode_receipt(&receipt)?;
            if timeout_ms > VISIBILITY_TIMEOUT_MS_MAX {
                return Err(timeout_error());
            }
            let (seq, epoch) = check_receipt(&receipt, q.id)?;
            let kind = match (lenient, timeout_ms) {
                (false, 0) => HoldKind::End,
                (false, _) => HoldKind::Extend,
                (true, 0) => HoldKind::EndLenient,
                (true, _) => HoldKind::Rehide,
            };
            Ok(HoldChange { kind, seq, epoch, ms: timeout_ms as i64, error: None })
        })
        .collect();
    change_holds(inner, q.id, checked).await
}

fn timeout_error() -> EntryError {
    ValidationError::new("timeout_ms", format!("must be at most {VISIBILITY_TIMEOUT_MS_MAX}")).into()
}

pub async fn nack(inner: &Inner, queue: &str, entries: Vec<NackEntry>) -> Result<EntryResults<()>, StoreError> {
    let q = {
        let client = inner.client().await?;
        lookup(&client, queue).await?
    };
    let checked = entries
        .into_iter()
        .map(|entry| {
            // Core checks the arguments before the receipt's queue and epoch.
            let receipt = decode_receipt(&entry.receipt)?;
            if entry.delay_ms > DELAY_MS_MAX {
                return Err(ValidationError::new("delay_ms", format!("must be at most {DELAY_MS_MAX}")).into());
            }
            if entry.error.as_ref().is_some_and(|e| e.len() > ERROR_REASON_LEN_MAX) {
                return Err(
                    ValidationError::new("error", format!("must be at most {ERROR_REASON_LEN_MAX} bytes")).into()
                );
            }
            let (seq, epoch) = check_receipt(&receipt, q.id)?;
            Ok(HoldChange { kind: HoldKind::End, seq, epoch, ms: entry.delay_ms as i64, error: entry.error })
        })
        .collect();
    change_holds(inner, q.id, checked).await
}

pub async fn peek(inner: &Inner, queue: &str, limit: usize) -> Result<Vec<PeekedMessage>, StoreError> {
    let client = inner.client().await?;
    let q = lookup(&client, queue).await?;
    let statement = client.prepare_cached(PEEK).await.map_err(db_error)?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = client.query(&statement, &[&(q.id as i64), &limit]).await.map_err(db_error)?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let now = ms(row.get("now"));
        match codec::message_from_row(row) {
            Ok((_, message)) => out.push(PeekedMessage { state: message.meta.state(now), message }),
            Err(e) => tracing::error!("peek skips an unreadable message of queue {queue:?}: {e}"),
        }
    }
    Ok(out)
}

/// One redrive step. It moves in attempts of one statement each (each message moves
/// atomically), and attempts again while rows it could move were held by other transactions
/// and it has moved fewer than `max`: a step that answers fewer than `max` moved has seen every
/// movable visible message, which is how the redrive task knows it is done.
pub async fn move_messages(inner: &Inner, from: &str, to: Option<&str>, max: u64) -> Result<MoveOutcome, StoreError> {
    let (source, target) = {
        let client = inner.client().await?;
        let source = lookup(&client, from).await?;
        let target = match to {
            Some(t) => Some(lookup(&client, t).await?.id),
            None => None,
        };
        (source, target)
    };
    let from_id = source.id as i64;
    let mut moved_rows = Vec::new();
    // Moving a queue into itself moves nothing: every visible message counts as failed.
    let movable = target != Some(source.id);
    if movable && max > 0 {
        let target = target.map(|t| t as i64);
        let deadline = Instant::now() + Duration::from_millis(MOVE_LOCKED_WAIT_MS_MAX);
        let mut retry_ms = MOVE_RETRY_MS_MIN;
        loop {
            let budget = i64::try_from(max - moved_rows.len() as u64).unwrap_or(i64::MAX);
            let rows = {
                let client = inner.client().await?;
                let statement = client.prepare_cached(MOVE).await.map_err(db_error)?;
                client.query(&statement, &[&from_id, &budget, &target]).await.map_err(db_error)?
            };
            let (locked, rows): (Vec<_>, Vec<_>) = rows.into_iter().partition(|r| r.get::<_, bool>("locked"));
            let moved: Vec<(u64, i16, i64)> =
                rows.iter().map(|r| (ms(r.get("queue_id")), r.get("priority"), r.get("seq"))).collect();
            inner.counters.committed(moved.len() as u64);
            let woken: BTreeSet<u64> = moved.iter().map(|m| m.0).collect();
            inner.notify(&woken.into_iter().collect::<Vec<_>>()).await;
            moved_rows.extend(moved);
            if locked.is_empty() || moved_rows.len() as u64 >= max {
                break;
            }
            if Instant::now() >= deadline {
                tracing::warn!(queue = from, moved = moved_rows.len(), "redrive step gave up on held rows");
                // Not `Poisoned`: nothing is wrong with what is stored, the rows are only busy.
                return Err(StoreError::Unavailable(format!(
                    "messages of queue {from:?} stayed locked by other transactions for {MOVE_LOCKED_WAIT_MS_MAX} ms; \
                     this step moved {} and stopped before the rest (start the redrive again)",
                    moved_rows.len()
                )));
            }
            tokio::time::sleep(Duration::from_millis(retry_ms)).await;
            retry_ms = (retry_ms * 2).min(MOVE_RETRY_MS_MAX);
        }
    }
    let moved = moved_rows.len() as u64;
    // The last moved in delivery order bounds the messages that were passed over as unmovable;
    // a step that moved fewer than `max` saw them all.
    let last =
        if moved == max { moved_rows.iter().map(|&(_, p, s)| (p, s)).max_by_key(|&(p, s)| (-p, s)) } else { None };
    // Only a move back to the sources can fail for single messages; one with a target either
    // moves every message it reaches or (into itself) none.
    let can_fail = target.is_none() || !movable;
    let (last_priority, last_seq) = (last.map(|l| l.0), last.map(|l| l.1));
    let client = inner.client().await?;
    let report = if movable {
        client.query_one(MOVE_REPORT, &[&from_id, &last_priority, &last_seq, &can_fail]).await.map_err(db_error)?
    } else {
        client
            .query_one(
                "SELECT count(*) AS failed, count(*) AS visible FROM messages m
                 WHERE m.queue_id = $1 AND m.visible_at <= sluice_now_ms()",
                &[&from_id],
            )
            .await
            .map_err(db_error)?
    };
    Ok(MoveOutcome { moved, failed: ms(report.get("failed")), remaining_visible: ms(report.get("visible")) })
}

#[cfg(test)]
mod tests {
    use sluice_core::QueueAttributes;

    use super::*;

    #[test]
    fn admit_applies_the_brokers_send_checks() {
        let queue = QueueAttributes { message_bytes_max: 10, ..Default::default() };
        let now = 1_000_000;
        let text = |body: &str| NewMessage { body: body.as_bytes().to_vec(), ..Default::default() };
        assert_eq!(admit(&text("ok"), &queue, now), Ok(()));
        assert_eq!(
            admit(&text("eleven byte"), &queue, now),
            Err(EntryError::MessageTooLarge { size_bytes: 11, max_bytes: 10 })
        );
        let late = NewMessage { delay_ms: Some(queue.retention_ms), ..text("x") };
        assert!(matches!(admit(&late, &queue, now), Err(EntryError::Invalid(v)) if v.field == "delay_ms"));
        let at = NewMessage { deliver_at_ms: Some(now + queue.retention_ms), ..text("x") };
        assert!(matches!(admit(&at, &queue, now), Err(EntryError::Invalid(v)) if v.field == "deliver_at"));
        let past = NewMessage { deliver_at_ms: Some(now - 5), ..text("x") };
        assert_eq!(admit(&past, &queue, now), Ok(()));
        let bad = NewMessage { priority: 10, ..text("x") };
        assert!(matches!(admit(&bad, &queue, now), Err(EntryError::Invalid(v)) if v.field == "priority"));
    }

    #[test]
    fn receipts_are_checked_as_the_broker_checks_them() {
        let r = Receipt { queue: 7, seq: 3, epoch: 2 }.encode();
        assert_eq!(parse_receipt(&r, 7), Ok((3, 2)));
        assert_eq!(parse_receipt(&r, 8), Err(EntryError::ForeignReceipt));
        assert!(matches!(parse_receipt("garbage", 7), Err(EntryError::InvalidReceipt(_))));
        let huge = Receipt { queue: 7, seq: u64::MAX, epoch: 1 }.encode();
        assert_eq!(parse_receipt(&huge, 7), Err(EntryError::StaleReceipt));
    }
}
