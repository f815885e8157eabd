//! FIFO queues: deduplicated sends and group-ordered receives, over rows that several nodes
//! share.
//!
//! The rules are core's: `fifo_send_rules` (a group on every message, no per-message delay or
//! priority, the dedup key), the dedup window, and the scheduling of `Queue::next_ready` (a group
//! delivers only while none of its messages is in flight and its oldest message is visible;
//! groups go oldest head first; a receive takes as much of one group as is visible before the
//! next group).
//!
//! **Send.** Deduplication keys live in the `dedup` table. A send reads the keys it carries (a
//! retry of a known key costs no write), decides each entry in order as `Broker::send` does,
//! then, in one transaction, claims the new keys with `INSERT … ON CONFLICT DO UPDATE … WHERE
//! expired` and inserts only the messages whose claims it won. Two nodes sending one key at once
//! meet on the key's primary-key entry: the second waits for the first to commit, then finds the
//! key taken and answers with the first's id and sequence number, enqueueing nothing. Keys are
//! claimed in key order, so two batches never wait for each other in a cycle. Before it takes
//! sequence numbers, a send takes a transaction-scoped advisory lock per message group (in group
//! order), so that sends to one group commit in sequence-number order and a receive can never
//! see a group's later message before an earlier one. That lock only orders sends; nothing
//! else takes it.
//!
//! **Receive** (`RECEIVE`, one statement) uses no group lock of its own: the lock on a group's
//! oldest message row is the group's lock. It plans from its snapshot (eligible groups by head,
//! each group's visible run from its head), locks the planned rows with `FOR UPDATE SKIP
//! LOCKED`, and keeps, per group, only the run up to the first row it could not lock or whose
//! row changed since the snapshot (another epoch, or no longer visible). So a receive delivers a
//! message only together with every older message of its group, all locked by itself; two
//! receives (on any nodes) that plan the same group both need its head row, and only one gets
//! it; a receive that planned from a snapshot older than another's delivery finds the head's
//! epoch changed and takes nothing of that group. A failing head is never skipped: it is
//! delivered again, or moved to the dead-letter queue (which unblocks the group, and the same
//! receive goes on with the next message, as core does).
//!
//! Row locks were chosen over advisory locks or a group-state table: they need no table to keep
//! in step with every state change, they are released by the same commit that makes the
//! delivery visible, and they are what PostgreSQL-compatible distributed databases support.
//!
//! Cost: finding the groups is a loose index scan over `messages_group`, one probe per group
//! that holds messages, so a receive costs O(groups · log messages); a group's backlog is never
//! read beyond what the receive may take.

use std::collections::{BTreeSet, HashMap};
use std::sync::LazyLock;

use deadpool_postgres::GenericClient;
use futures::future::try_join;
use sluice_core::broker::{Sent, fifo_send_rules};
use sluice_core::{EntryError, MessageId, NewMessage};
use sluice_store::{EntryResults, StoreError};
use tokio_postgres::types::ToSql;

use crate::batch::{Batch, check_size_and_delay, new_message_id, now_ms};
use crate::codec::ms;
use crate::fragments;
use crate::queues::QueueRow;
use crate::{Counters, Inner, db_error};

/// The eligible groups of queue `$1` (at most `$2`), oldest head first: each group's oldest
/// message not past retention (a loose scan over `messages_group`), kept when it is visible and
/// no message of its group is held. Needs the `q` CTE with `oldest_kept` (the `sent_at` a message
/// must exceed to be within retention).
macro_rules! eligible_groups {
    () => {
        "heads AS (
    (SELECT m.group_id, m.seq FROM messages m
     WHERE m.queue_id = $1 AND m.group_id IS NOT NULL AND m.sent_at > (SELECT oldest_kept FROM q)
     ORDER BY m.group_id, m.seq LIMIT 1)
    UNION ALL
    SELECT n.group_id, n.seq
    FROM heads h CROSS JOIN LATERAL (
        SELECT m.group_id, m.seq FROM messages m
        WHERE m.queue_id = $1 AND m.group_id > h.group_id AND m.sent_at > (SELECT oldest_kept FROM q)
        ORDER BY m.group_id, m.seq LIMIT 1
    ) n
), eligible AS (
    SELECT h.group_id, h.seq AS head
    FROM heads h JOIN messages m ON m.seq = h.seq
    WHERE m.visible_at <= sluice_now_ms()
      AND NOT EXISTS (SELECT 1 FROM messages x
                      WHERE x.queue_id = $1 AND x.group_id = h.group_id AND x.in_flight
                        AND x.visible_at > sluice_now_ms())
    ORDER BY h.seq
    LIMIT $2
)"
    };
}

/// Receives up to `$2` messages of FIFO queue `$1`, hidden for `$3` ms (the queue's timeout when
/// null), within the byte budget `$4` (see the module docs for how groups are kept in order).
/// `pos` is the delivery order. Heads that reached the dead-letter policy's receive count move to
/// the dead-letter queue, and the run goes on behind them; they do not count towards `$2`.
pub static RECEIVE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "
WITH RECURSIVE q AS (
    {queues}
    WHERE s.id = $1
), {eligible}, run AS (
    -- Each eligible group's first messages from its head on, in send order, ranked.
    SELECT e.head, g.seq, g.epoch, g.size_bytes, g.receive_count, g.visible,
           row_number() OVER (PARTITION BY e.head ORDER BY g.seq) AS rank
    FROM eligible e CROSS JOIN LATERAL (
        SELECT m.seq, m.epoch, m.size_bytes, m.receive_count, m.visible_at <= sluice_now_ms() AS visible
        FROM messages m
        WHERE m.queue_id = $1 AND m.group_id = e.group_id AND m.seq >= e.head
          AND m.sent_at > (SELECT oldest_kept FROM q)
        ORDER BY m.seq
        LIMIT $2
    ) g
), cand AS (
    -- The visible run of each group: up to its first message that is not visible.
    SELECT r.*, {dead} AS dead
    FROM (SELECT run.*, bool_and(visible) OVER (PARTITION BY head ORDER BY rank) AS unbroken FROM run) r
    CROSS JOIN q
    WHERE r.unbroken
), counted AS (
    SELECT c.*,
           {running}
    FROM cand c
    WINDOW w AS (ORDER BY head, seq)
), planned AS MATERIALIZED (
    -- Whole groups in head order, cut at `$2` delivered messages and the byte budget (which
    -- always lets the first through).
    SELECT * FROM counted p WHERE {taken}
), locked AS MATERIALIZED (
    -- Re-checked on the newest row version: a row received, moved or re-hidden since the
    -- snapshot drops out, and so does one another transaction holds.
    SELECT m.seq FROM messages m JOIN planned p ON p.seq = m.seq
    WHERE m.queue_id = $1 AND m.epoch = p.epoch AND m.visible_at <= sluice_now_ms()
    FOR UPDATE OF m SKIP LOCKED
), kept AS (
    -- A row is kept only if it and every row before it in its group's run are locked.
    SELECT p.*, count(l.seq) OVER (PARTITION BY p.head ORDER BY p.rank) AS locked_through
    FROM planned p LEFT JOIN locked l ON l.seq = p.seq
)
{deliver}",
        queues = fragments::QUEUES,
        eligible = eligible_groups!(),
        dead = fragments::dead("r.receive_count"),
        running = fragments::RUNNING_COUNTS,
        taken = fragments::TAKEN,
        deliver = fragments::receive_update("kept", "p.locked_through = p.rank", ""),
    )
});

/// For a FIFO long poll that found nothing: the database's now, whether the queue exists,
/// whether some group could deliver now (then another consumer holds its rows for an instant),
/// and otherwise the earliest time a group may become eligible: a hold or a delay running out.
/// `$2` is 1 (the eligible-groups fragment's limit).
pub const NEXT_VISIBLE: &str = concat!(
    "
WITH RECURSIVE q AS (
    SELECT sluice_now_ms() - s.retention_ms AS oldest_kept FROM queues s WHERE s.id = $1
), ",
    eligible_groups!(),
    "
SELECT sluice_now_ms() AS now,
       EXISTS (SELECT 1 FROM queues WHERE id = $1) AS present,
       EXISTS (SELECT 1 FROM eligible) AS ready,
       least((SELECT min(visible_at) FROM messages
              WHERE queue_id = $1 AND in_flight AND visible_at > sluice_now_ms()),
             (SELECT min(visible_at) FROM messages
              WHERE queue_id = $1 AND NOT in_flight AND visible_at > sluice_now_ms())) AS next_visible_at"
);

/// Unexpired dedup entries of queue `$1` among the keys `$2`.
const KNOWN_KEYS: &str = "
SELECT key, message_id, seq FROM dedup
WHERE queue_id = $1 AND key = ANY($2::text[]) AND expires_at > sluice_now_ms()";

/// Orders sends per message group (see the module docs). `$2` is sorted, so every send takes its
/// locks in the same order.
const LOCK_GROUPS: &str = "
SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || '/' || $1::int8::text || '/' || g, 0))
FROM unnest($2::text[]) AS g";

/// `$1` fresh sequence numbers, taken after the group locks so that they follow commit order.
const NEXT_SEQS: &str = "SELECT nextval(pg_get_serial_sequence('messages', 'seq')) FROM generate_series(1, $1::int4)";

/// Claims keys `$2` (sorted) for messages `$3` with sequence numbers `$4` until `$5` ms from
/// now; a key still inside its window is left alone (but locked until commit). Returns the keys
/// won.
const CLAIM_KEYS: &str = "
INSERT INTO dedup (queue_id, key, message_id, seq, expires_at)
SELECT $1, r.key, r.id, r.seq, sluice_now_ms() + $5
FROM unnest($2::text[], $3::uuid[], $4::int8[]) AS r(key, id, seq)
ORDER BY r.key
ON CONFLICT (queue_id, key) DO UPDATE
    SET message_id = excluded.message_id, seq = excluded.seq, expires_at = excluded.expires_at
    WHERE dedup.expires_at <= sluice_now_ms()
RETURNING key";

/// Inserts a batch with the sequence numbers it was given; nothing when the queue is gone.
const INSERT: &str = "
INSERT INTO messages (seq, queue_id, id, priority, sent_at, visible_at, size_bytes, group_id, body, body_binary,
                      attributes, system_attributes, envelope)
SELECT r.seq, $1, r.id, 0, sluice_now_ms(), sluice_now_ms() + r.delay_ms, r.size_bytes, r.group_id, r.body,
       r.body_binary, r.attributes, r.system_attributes, r.envelope
FROM unnest($2::int8[], $3::uuid[], $4::int8[], $5::int8[], $6::text[], $7::bytea[], $8::bool[],
            $9::jsonb[], $10::jsonb[], $11::jsonb[])
     AS r(seq, id, delay_ms, size_bytes, group_id, body, body_binary, attributes, system_attributes, envelope)
WHERE EXISTS (SELECT 1 FROM queues WHERE id = $1)
ORDER BY r.seq
RETURNING seq";

/// How one entry of a FIFO send is answered.
enum Plan {
    Refused(EntryError),
    /// A key inside its window: answered with the message that set it.
    Known(Sent),
    /// A repeat of an earlier entry of this batch.
    SameAs(usize),
    /// A new message, if its key is still free when claimed.
    New {
        key: String,
        id: uuid::Uuid,
    },
}

pub async fn send(
    inner: &Inner,
    mut client: deadpool_postgres::Object,
    (name, q): (&str, &QueueRow),
    messages: Vec<NewMessage>,
) -> Result<EntryResults<Sent>, StoreError> {
    let mut plans = plan(&client, q, &messages).await?;
    if plans.iter().any(|p| matches!(p, Plan::New { .. })) {
        let tx = client.transaction().await.map_err(db_error)?;
        let inserted = claim_and_insert(&tx, (name, q.id as i64), &q.attributes, &mut plans, messages).await?;
        tx.commit().await.map_err(db_error)?;
        drop(client);
        Counters::add(&inner.counters.messages_sent, inserted);
        inner.counters.committed(inserted * 2);
        if inserted > 0 {
            inner.notify(&[q.id]).await;
        }
    }
    Ok(answers(&plans))
}

/// A FIFO send inside the caller's transaction (an atomic commit): every entry's answer, or
/// the first entry the queue refuses (then nothing was written). The caller commits, counts and
/// wakes the queue's long polls.
pub async fn send_in(
    tx: &deadpool_postgres::Transaction<'_>,
    (name, q): (&str, &QueueRow),
    messages: Vec<NewMessage>,
) -> Result<Result<(Vec<Sent>, u64), (usize, EntryError)>, StoreError> {
    let mut plans = plan(tx, q, &messages).await?;
    if let Some((i, Plan::Refused(e))) = plans.iter().enumerate().find(|(_, p)| matches!(p, Plan::Refused(_))) {
        return Ok(Err((i, e.clone())));
    }
    let inserted = if plans.iter().any(|p| matches!(p, Plan::New { .. })) {
        claim_and_insert(tx, (name, q.id as i64), &q.attributes, &mut plans, messages).await?
    } else {
        0
    };
    // A bounded queue's plan may have refused entries (the queue is full): the commit is
    // refused, and the caller's transaction rolls back the claims and inserts made.
    if let Some((i, Plan::Refused(e))) = plans.iter().enumerate().find(|(_, p)| matches!(p, Plan::Refused(_))) {
        return Ok(Err((i, e.clone())));
    }
    let sent = answers(&plans).into_iter().map(|r| r.expect("no entry was refused")).collect();
    Ok(Ok((sent, inserted)))
}

/// Each entry in order, as `Broker::send` decides it: rules, then a known key, then size and
/// delay (a duplicate is answered even if it would not fit).
async fn plan(client: &impl GenericClient, q: &QueueRow, messages: &[NewMessage]) -> Result<Vec<Plan>, StoreError> {
    let keys: Vec<Result<String, EntryError>> = messages
        .iter()
        .map(|m| {
            m.validate()?;
            Ok(fifo_send_rules(&q.attributes, m)?)
        })
        .collect();
    let wanted: Vec<&str> = keys.iter().flatten().map(String::as_str).collect::<BTreeSet<_>>().into_iter().collect();
    let queue_id = q.id as i64;
    let known = if wanted.is_empty() { HashMap::new() } else { read_keys(client, queue_id, &wanted).await? };
    let now = now_ms();
    let mut claimed: HashMap<&str, usize> = HashMap::new();
    let mut plans = Vec::with_capacity(messages.len());
    for (i, (m, key)) in messages.iter().zip(&keys).enumerate() {
        let plan = match key {
            Err(e) => Plan::Refused(e.clone()),
            Ok(key) => match (known.get(key.as_str()), claimed.get(key.as_str())) {
                (Some(sent), _) => Plan::Known(*sent),
                (None, Some(&first)) => Plan::SameAs(first),
                (None, None) => match check_size_and_delay(m, &q.attributes, now) {
                    Err(e) => Plan::Refused(e),
                    Ok(()) => {
                        claimed.insert(key, i);
                        Plan::New { key: key.clone(), id: new_message_id() }
                    }
                },
            },
        };
        plans.push(plan);
    }
    Ok(plans)
}

/// Every entry's answer once no plan is `New` any more.
fn answers(plans: &[Plan]) -> EntryResults<Sent> {
    let resolve = |i: usize| -> Result<Sent, EntryError> {
        match &plans[i] {
            Plan::Refused(e) => Err(e.clone()),
            Plan::Known(sent) => Ok(*sent),
            Plan::SameAs(_) => unreachable!("an entry is the same as an earlier New or Known one"),
            Plan::New { .. } => unreachable!("every new entry is resolved after its claim"),
        }
    };
    (0..plans.len())
        .map(|i| match plans[i] {
            Plan::SameAs(first) => resolve(first).map(|s| Sent { duplicate: true, ..s }),
            _ => resolve(i),
        })
        .collect()
}

async fn read_keys(
    client: &impl GenericClient,
    queue_id: i64,
    keys: &[&str],
) -> Result<HashMap<String, Sent>, StoreError> {
    let statement = client.prepare_cached(KNOWN_KEYS).await.map_err(db_error)?;
    let rows = client.query(&statement, &[&queue_id, &keys]).await.map_err(db_error)?;
    Ok(rows
        .iter()
        .map(|r| {
            let id: uuid::Uuid = r.get("message_id");
            let sent = Sent { duplicate: true, ..Sent::new(ms(r.get("seq")), MessageId(id.as_u128())) };
            (r.get::<_, String>("key"), sent)
        })
        .collect())
}

/// Claims the keys of the `New` plans and inserts the messages whose claims it won, in the
/// caller's transaction; turns every `New` into `Known` (sent here, `duplicate: false`, or lost
/// to a concurrent send). Returns how many messages it inserted.
async fn claim_and_insert(
    tx: &deadpool_postgres::Transaction<'_>,
    (name, queue_id): (&str, i64),
    attributes: &sluice_core::QueueAttributes,
    plans: &mut [Plan],
    messages: Vec<NewMessage>,
) -> Result<u64, StoreError> {
    let mut new: Vec<usize> = (0..plans.len()).filter(|&i| matches!(plans[i], Plan::New { .. })).collect();
    // A bounded queue: each new message placed under the queue's lock before any key is
    // claimed, so that a refused message claims none.
    let depth = if attributes.has_depth_limit() {
        let sizes: Vec<u64> = new.iter().map(|&i| messages[i].size_bytes()).collect();
        let depth = crate::depth::plan(tx, (name, queue_id), attributes, &sizes).await?;
        let mut placed = HashMap::new();
        for (j, (&i, entry)) in new.iter().zip(&depth.entries).enumerate() {
            match entry {
                // With whether a later message of this send pushes it out again.
                Ok(p) => {
                    placed.insert(i, (*p, depth.dropped_entries.contains(&j)));
                }
                Err(e) => plans[i] = Plan::Refused(e.clone()),
            }
        }
        new.retain(|i| placed.contains_key(i));
        Some((depth, placed))
    } else {
        None
    };
    if new.is_empty() {
        if let Some((depth, _)) = &depth {
            depth.apply(tx, queue_id, &[], &[]).await?;
        }
        return Ok(0);
    }
    let groups: Vec<&str> = new
        .iter()
        .filter_map(|&i| messages[i].envelope.group_id.as_deref())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let lock = tx.prepare_cached(LOCK_GROUPS).await.map_err(db_error)?;
    let next = tx.prepare_cached(NEXT_SEQS).await.map_err(db_error)?;
    let count = new.len() as i32;
    // Pipelined: the locks are granted before the sequence numbers are taken.
    let (_, seq_rows) =
        try_join(tx.execute(&lock, &[&queue_id, &groups]), tx.query(&next, &[&count])).await.map_err(db_error)?;
    let mut seqs: Vec<i64> = seq_rows.iter().map(|r| r.get(0)).collect();
    seqs.sort_unstable();

    let mut by_key: Vec<(&str, uuid::Uuid, i64)> = new
        .iter()
        .zip(&seqs)
        .map(|(&i, &seq)| match &plans[i] {
            Plan::New { key, id } => (key.as_str(), *id, seq),
            _ => unreachable!("filtered to new entries"),
        })
        .collect();
    by_key.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let claim_keys: Vec<&str> = by_key.iter().map(|c| c.0).collect();
    let claim_ids: Vec<uuid::Uuid> = by_key.iter().map(|c| c.1).collect();
    let claim_seqs: Vec<i64> = by_key.iter().map(|c| c.2).collect();
    let window_ms = attributes.dedup_window_ms as i64;
    let claim = tx.prepare_cached(CLAIM_KEYS).await.map_err(db_error)?;
    let won: BTreeSet<String> = tx
        .query(&claim, &[&queue_id, &claim_keys, &claim_ids, &claim_seqs, &window_ms])
        .await
        .map_err(db_error)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let lost: Vec<&str> = claim_keys.iter().copied().filter(|k| !won.contains(*k)).collect();
    // Committed by the sends that won them, and locked by our claim: this read sees them.
    let taken = if lost.is_empty() { HashMap::new() } else { read_keys(tx, queue_id, &lost).await? };

    let mut batch = Batch::default();
    let mut batch_seqs = Vec::new();
    let mut sent = Vec::new();
    let (mut dead_lettered, mut dropped_new) = (Vec::new(), Vec::new());
    let mut messages: Vec<Option<NewMessage>> = messages.into_iter().map(Some).collect();
    for (&i, &seq) in new.iter().zip(&seqs) {
        let Plan::New { key, id } = &plans[i] else { unreachable!("filtered to new entries") };
        if won.contains(key) {
            let m = messages[i].take().expect("each entry is inserted once");
            batch.push(*id, m, attributes);
            batch_seqs.push(seq);
            let mut s = Sent::new(ms(seq), MessageId(id.as_u128()));
            if let Some((placed, pushed_out)) = depth.as_ref().and_then(|(_, placed)| placed.get(&i)) {
                if placed.dead_letter {
                    dead_lettered.push(seq);
                }
                if *pushed_out {
                    dropped_new.push(seq);
                }
                s.dead_lettered = placed.dead_letter;
                s.dropped = placed.dropped;
                s.depth = Some(placed.depth);
            }
            sent.push((i, s));
        } else {
            let earlier = taken.get(key.as_str()).copied().ok_or_else(|| {
                db_error(crate::codec::DecodeError(format!("dedup key {key:?} was taken, then vanished")))
            })?;
            sent.push((i, earlier));
        }
    }
    let inserted = if batch_seqs.is_empty() {
        0
    } else {
        let insert = tx.prepare_cached(INSERT).await.map_err(db_error)?;
        let params: [&(dyn ToSql + Sync); 11] = [
            &queue_id,
            &batch_seqs,
            &batch.ids,
            &batch.delays_ms,
            &batch.sizes_bytes,
            &batch.group_ids,
            &batch.bodies,
            &batch.binary,
            &batch.attributes,
            &batch.system_attributes,
            &batch.envelopes,
        ];
        let rows = tx.query(&insert, &params).await.map_err(db_error)?;
        if rows.len() != batch_seqs.len() {
            // The queue was deleted between the look-up and the insert; the claims roll back.
            return Err(sluice_core::BrokerError::QueueNotFound(name.to_string()).into());
        }
        rows.len() as u64
    };
    if let Some((depth, _)) = &depth {
        depth.apply(tx, queue_id, &dead_lettered, &dropped_new).await?;
    }
    for (i, s) in sent {
        plans[i] = Plan::Known(s);
    }
    Ok(inserted)
}
