//! Depth limits (`max_depth_messages`, `max_depth_bytes`, `overflow`) on PostgreSQL, exact
//! across nodes: a send into a bounded queue locks the queue's row (`FOR UPDATE`) in the
//! transaction that inserts its messages, reads the depth under that lock and decides each
//! message with core's rule (`overflow::place`), so two nodes' sends into one queue are
//! serialised and neither can take the queue past its limit. Queues without a limit never take
//! the lock: their sends stay one statement.
//!
//! What the lock does not order is only ever a decrease (acks, receives' dead-letter moves out,
//! retention), so a depth read under it is an upper bound of the depth at commit. Moves *into*
//! a queue (dead-lettering, redrive, `drop_head` and `reject_to_dlq` themselves) are not bounded
//! by the target's limits, as on the embedded store: refusing them would mean dropping.
//!
//! Reading the depth counts the queue's rows (`count(*)` over the `(queue_id, ...)` index), so
//! a bounded send costs time in proportion to the depth, which the limit bounds.

use sluice_core::overflow::{
    Depth, DepthLimits, DepthReport, Overflow, Placement, REASON_DROP_HEAD, REASON_REJECT_TO_DLQ, RefusalCounts, place,
};
use sluice_core::{EntryError, QueueAttributes};
use sluice_store::StoreError;

use crate::{Counters, Inner, db_error};

/// Locks queue `$1`'s row for the transaction and finds its dead-letter target as
/// `Broker::dead_letter_target` does (`fragments::QUEUES`' `dlq_id`).
const LOCK: &str = "
SELECT d.id AS dlq_id, s.name FROM queues s
LEFT JOIN queues d ON d.name = s.dead_letter_queue AND d.id <> s.id AND d.fifo = s.fifo
WHERE s.id = $1
FOR UPDATE OF s";

const DEPTH: &str = "SELECT count(*) AS messages, coalesce(sum(size_bytes), 0)::int8 AS bytes
    FROM messages WHERE queue_id = $1";

/// The messages `drop_head` may move, oldest first: those not in flight. Rows another
/// transaction holds (a receive delivering them) are skipped, as the receive will hold them.
const DROPPABLE: &str = "SELECT seq, size_bytes FROM messages
    WHERE queue_id = $1 AND NOT in_flight
    ORDER BY sent_at, seq
    LIMIT $2
    FOR UPDATE SKIP LOCKED";

/// Moves rows `$1` to the dead-letter queue `$2`, naming their source `$3` and why (`$4`), as
/// `Broker::move_to_dead_letter` does: a new epoch, out of flight, visible at once.
const MOVE: &str = "UPDATE messages m SET queue_id = $2, dead_letter_source = $3, epoch = m.epoch + 1,
        in_flight = false, visible_at = sluice_now_ms(), last_error = $4
    WHERE m.seq = ANY($1)";

const COUNT: &str = "UPDATE queues SET refused_full = refused_full + $2, dropped_head = dropped_head + $3,
        rejected_to_dlq = rejected_to_dlq + $4
    WHERE id = $1";

/// How many of the oldest messages a bounded send reads as candidates for `drop_head` beyond
/// one per message sent: a message that would need more drops than that (many small messages
/// under a byte limit) is refused as if nothing were left to drop.
pub const DROP_HEAD_SCAN_EXTRA: i64 = 1_000;

/// Where each message of a send into a bounded queue goes, decided under the queue's lock.
pub struct Plan {
    /// Per message, in order: core's placement, or the refusal to answer.
    pub entries: Vec<Result<Placed, EntryError>>,
    /// Rows `drop_head` moves out.
    drop: Vec<i64>,
    /// Messages of this send (by position) that later ones of the same send pushed out: they
    /// are inserted, acknowledged, and moved to the dead-letter queue with the others.
    pub dropped_entries: std::collections::BTreeSet<usize>,
    dlq: Option<i64>,
    name: String,
    counts: RefusalCounts,
}

/// A message the plan takes: whether it goes to the dead-letter queue, how many old messages
/// it drops, and the queue's depth after it.
#[derive(Debug, Clone, Copy)]
pub struct Placed {
    pub dead_letter: bool,
    pub dropped: u32,
    pub depth: DepthReport,
}

/// Locks queue `queue_id` and plans a send of messages of `sizes` bytes into it.
pub async fn plan(
    tx: &deadpool_postgres::Transaction<'_>,
    (queue, queue_id): (&str, i64),
    attributes: &QueueAttributes,
    sizes: &[u64],
) -> Result<Plan, StoreError> {
    let lock = tx.query_opt(LOCK, &[&queue_id]).await.map_err(db_error)?;
    let Some(lock) = lock else {
        return Err(sluice_core::BrokerError::QueueNotFound(queue.to_string()).into());
    };
    let dlq: Option<i64> = lock.get("dlq_id");
    let name: String = lock.get("name");
    let row = tx.query_one(DEPTH, &[&queue_id]).await.map_err(db_error)?;
    let mut depth = Depth { messages: row.get::<_, i64>("messages") as u64, bytes: row.get::<_, i64>("bytes") as u64 };
    let limits = DepthLimits::of(attributes);
    let total: u64 = sizes.iter().sum();
    let all_fit = limits.max_messages.is_none_or(|max| depth.messages + sizes.len() as u64 <= max)
        && limits.max_bytes.is_none_or(|max| depth.bytes + total <= max);
    let droppable: Vec<(i64, u64)> = if limits.overflow == Overflow::DropHead && dlq.is_some() && !all_fit {
        let scan = sizes.len() as i64 + DROP_HEAD_SCAN_EXTRA;
        let rows = tx.query(DROPPABLE, &[&queue_id, &scan]).await.map_err(db_error)?;
        rows.iter().map(|r| (r.get::<_, i64>("seq"), r.get::<_, i64>("size_bytes") as u64)).collect()
    } else {
        Vec::new()
    };
    // Candidates for `drop_head`, oldest first: the rows there before, then this send's own
    // messages as they are placed (a send of several messages drops its earlier ones when it
    // must, as the same messages sent one by one would).
    let mut candidates: Vec<(Candidate, u64)> =
        droppable.into_iter().map(|(seq, size)| (Candidate::Row(seq), size)).collect();
    let drop_head = limits.overflow == Overflow::DropHead && dlq.is_some();
    let mut cursor = 0;
    let mut counts = RefusalCounts::default();
    let mut entries = Vec::with_capacity(sizes.len());
    for (index, &size) in sizes.iter().enumerate() {
        let left = candidates[cursor..].iter().map(|c| c.1);
        entries.push(match place(&limits, depth, size, left, dlq.is_some()) {
            Placement::Queue { drop } => {
                for &(_, dropped_size) in &candidates[cursor..cursor + drop] {
                    depth.messages -= 1;
                    depth.bytes -= dropped_size;
                }
                cursor += drop;
                counts.drop_head += drop as u64;
                depth.messages += 1;
                depth.bytes += size;
                if drop_head {
                    candidates.push((Candidate::Entry(index), size));
                }
                Ok(Placed { dead_letter: false, dropped: drop as u32, depth: DepthReport { depth, limits } })
            }
            Placement::DeadLetter => {
                counts.rejected_to_dlq += 1;
                Ok(Placed { dead_letter: true, dropped: 0, depth: DepthReport { depth, limits } })
            }
            Placement::Refused => {
                counts.queue_full += 1;
                Err(EntryError::QueueFull {
                    depth,
                    max_messages: attributes.max_depth_messages,
                    max_bytes: attributes.max_depth_bytes,
                })
            }
        });
    }
    let mut drop = Vec::new();
    let mut dropped_entries = std::collections::BTreeSet::new();
    for (candidate, _) in &candidates[..cursor] {
        match *candidate {
            Candidate::Row(seq) => drop.push(seq),
            Candidate::Entry(index) => {
                dropped_entries.insert(index);
            }
        }
    }
    Ok(Plan { entries, drop, dropped_entries, dlq, name, counts })
}

/// A message `drop_head` may move: a row already in the queue, or a message of this send.
#[derive(Debug, Clone, Copy)]
enum Candidate {
    Row(i64),
    Entry(usize),
}

impl Plan {
    /// The plan's moves, after its messages were inserted into the queue (`dead_lettered`: the
    /// rows of the messages it sends to the dead-letter queue instead; `dropped_new`: the rows
    /// of its `dropped_entries`), and its counts. Returns the dead-letter queue when something
    /// moved there, to wake its long polls.
    pub async fn apply(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        queue_id: i64,
        dead_lettered: &[i64],
        dropped_new: &[i64],
    ) -> Result<Option<u64>, StoreError> {
        if let Some(dlq) = self.dlq {
            let dropped: Vec<i64> = self.drop.iter().chain(dropped_new).copied().collect();
            for (rows, reason) in [(&dropped[..], REASON_DROP_HEAD), (dead_lettered, REASON_REJECT_TO_DLQ)] {
                if !rows.is_empty() {
                    tx.execute(MOVE, &[&rows, &dlq, &self.name, &reason]).await.map_err(db_error)?;
                }
            }
        }
        let c = self.counts;
        if c != RefusalCounts::default() {
            let n = |v: u64| v as i64;
            tx.execute(COUNT, &[&queue_id, &n(c.queue_full), &n(c.drop_head), &n(c.rejected_to_dlq)])
                .await
                .map_err(db_error)?;
        }
        let moved = !self.drop.is_empty() || !dropped_new.is_empty() || !dead_lettered.is_empty();
        Ok(self.dlq.filter(|_| moved).map(|d| d as u64))
    }

    /// Adds the plan's counts to the store's running totals, once its transaction committed.
    pub fn count(&self, inner: &Inner) {
        let c = self.counts;
        Counters::add(&inner.counters.messages_refused_full, c.queue_full);
        Counters::add(&inner.counters.messages_dropped_head, c.drop_head);
        Counters::add(&inner.counters.messages_rejected_to_dlq, c.rejected_to_dlq);
        Counters::add(&inner.counters.messages_dead_lettered, c.drop_head + c.rejected_to_dlq);
    }
}

/// A standard queue's send when the queue has a depth limit: the checks of `batch::admit`,
/// then in one transaction the lock, the plan, the insert of every message the plan takes, the
/// moves and the counts; each entry answered as `Broker::send` would.
pub async fn send(
    inner: &Inner,
    mut client: deadpool_postgres::Object,
    (name, q): (&str, &crate::queues::QueueRow),
    messages: Vec<sluice_core::NewMessage>,
) -> Result<sluice_store::EntryResults<sluice_core::Sent>, StoreError> {
    use sluice_core::{MessageId, Sent};
    let now = crate::batch::now_ms();
    let mut answers: Vec<Result<Sent, EntryError>> = Vec::with_capacity(messages.len());
    let mut admitted = Vec::new();
    for m in messages {
        match crate::batch::admit(&m, &q.attributes, now) {
            Ok(()) => {
                answers.push(Ok(Sent::new(0, MessageId(0))));
                admitted.push((answers.len() - 1, m));
            }
            Err(e) => answers.push(Err(e)),
        }
    }
    if admitted.is_empty() {
        return Ok(answers);
    }
    let queue_id = q.id as i64;
    let tx = client.transaction().await.map_err(db_error)?;
    let sizes: Vec<u64> = admitted.iter().map(|(_, m)| m.size_bytes()).collect();
    let plan = plan(&tx, (name, queue_id), &q.attributes, &sizes).await?;
    let mut batch = crate::batch::Batch::default();
    let mut taken = Vec::new();
    // Each taken message's position in the plan (what `dropped_entries` names).
    let mut positions = Vec::new();
    for (position, ((i, m), placed)) in admitted.into_iter().zip(&plan.entries).enumerate() {
        match placed {
            Ok(placed) => {
                let id = crate::batch::new_message_id();
                batch.push(id, m, &q.attributes);
                taken.push((i, id, *placed));
                positions.push(position);
            }
            Err(e) => answers[i] = Err(e.clone()),
        }
    }
    let mut dead_lettered = Vec::new();
    let mut dropped_new = Vec::new();
    let mut inserted = 0;
    if !taken.is_empty() {
        let rows = crate::batch::insert_in(&tx, (name, queue_id), &batch).await?;
        inserted = rows.len() as u64;
        for (position, (i, id, placed)) in taken.into_iter().enumerate() {
            let seq = rows[&id];
            if placed.dead_letter {
                dead_lettered.push(seq);
            }
            if plan.dropped_entries.contains(&positions[position]) {
                dropped_new.push(seq);
            }
            answers[i] = Ok(Sent {
                dead_lettered: placed.dead_letter,
                dropped: placed.dropped,
                depth: Some(placed.depth),
                ..Sent::new(crate::codec::ms(seq), MessageId(id.as_u128()))
            });
        }
    }
    let dlq = plan.apply(&tx, queue_id, &dead_lettered, &dropped_new).await?;
    tx.commit().await.map_err(db_error)?;
    drop(client);
    plan.count(inner);
    Counters::add(&inner.counters.messages_sent, inserted);
    inner.counters.committed(inserted);
    let woken: Vec<u64> = [Some(q.id).filter(|_| inserted > 0), dlq].into_iter().flatten().collect();
    inner.notify(&woken).await;
    Ok(answers)
}
