//! The queue state machine for every queue on a server, with time as an argument.
//!
//! The broker owns the scheduling metadata of every message (bodies live in the store) and
//! answers each operation with a result plus a list of [`Effect`]s: the records a store must
//! write, in one atomic batch, for the new state to survive a crash. A store applies the effects
//! and only then answers the caller; it never decides anything itself. Because the metadata of
//! a message is one record keyed by its sequence number, moving a message to another queue
//! (dead-lettering, redrive) is a single rewrite and therefore atomic.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::TimeMs;
use crate::attributes::{DeadLetter, DedupScope, QueueAttributes, QueueAttributesPatch};
use crate::limits::*;
use crate::message::{MessageId, MessageMeta, MessageState, NewMessage};
use crate::name::validate_queue_name;
use crate::queue::{DedupEntry, Queue};
use crate::receipt::Receipt;
use crate::validation::ValidationError;

pub type QueueId = u64;

/// A record a store must persist (or remove) for the broker's new state to be durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    PutQueue {
        id: QueueId,
        name: String,
        attributes: QueueAttributes,
        created_at: TimeMs,
        modified_at: TimeMs,
    },
    DeleteQueue {
        id: QueueId,
    },
    /// Write the metadata of message `seq` (new, or changed). A new message's body is written
    /// by the store alongside, from the send that created it.
    PutMessage {
        seq: u64,
        meta: MessageMeta,
    },
    /// Remember a FIFO deduplication key of queue `queue` until `expires_at`.
    PutDedup {
        queue: QueueId,
        key: String,
        id: MessageId,
        seq: u64,
        expires_at: TimeMs,
    },
    /// Forget a deduplication key (its window ended, or the queue was purged or deleted).
    DeleteDedup {
        queue: QueueId,
        key: String,
    },
    /// Remove message `seq`: its metadata and its body.
    DeleteMessage {
        seq: u64,
    },
    /// Raise the high-water marks (one record, overwritten): no sequence number below
    /// `next_seq` and no queue id below `next_queue_id` may be handed out again, even after
    /// every record that used them is gone, because receipts are built from them.
    PutHighWater {
        next_seq: u64,
        next_queue_id: QueueId,
    },
}

/// Sequence numbers are reserved this many at a time, so that the high-water mark is written
/// once per block rather than with every send. A restart skips the rest of the block.
const SEQ_RESERVE_BLOCK: u64 = 1 << 16;

/// Errors that refuse a whole request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrokerError {
    #[error("queue {0:?} does not exist")]
    QueueNotFound(String),
    #[error("queue {0:?} already exists with different attributes")]
    QueueExists(String),
    #[error("dead-letter queue {0:?} does not exist; create it first")]
    DeadLetterQueueNotFound(String),
    #[error("this server already holds {QUEUES_MAX} queues")]
    TooManyQueues,
    #[error(transparent)]
    Invalid(#[from] ValidationError),
}

/// Errors that refuse one entry of a batch; the other entries go ahead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("message is {size_bytes} bytes; this queue takes at most {max_bytes}")]
    MessageTooLarge { size_bytes: u64, max_bytes: u64 },
    #[error("receipt is malformed: {0}")]
    InvalidReceipt(String),
    #[error("receipt belongs to another queue (or to an earlier queue of the same name)")]
    ForeignReceipt,
    #[error("receipt is stale: the message was acked, moved or received again since")]
    StaleReceipt,
    #[error("message is not in flight: its visibility timeout has passed or it was released")]
    NotInFlight,
}

/// A queue's live counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueStats {
    pub visible: u64,
    pub in_flight: u64,
    pub delayed: u64,
    pub oldest_age_ms: Option<u64>,
    /// Messages in this queue's dead-letter queue, when it has one that exists.
    pub dead_letter_depth: Option<u64>,
}

/// A queue as callers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueView {
    pub id: QueueId,
    pub name: String,
    pub attributes: QueueAttributes,
    pub created_at: TimeMs,
    pub modified_at: TimeMs,
    pub stats: QueueStats,
}

/// One message handed to a consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub seq: u64,
    pub meta: MessageMeta,
    pub receipt: Receipt,
}

/// What a send did: the message it enqueued, or (a FIFO duplicate inside the dedup window)
/// the earlier message it matched, in which case nothing was enqueued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub seq: u64,
    pub id: MessageId,
    pub duplicate: bool,
}

/// What a redrive step did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MoveOutcome {
    pub moved: u64,
    /// Messages left behind because their destination does not exist.
    pub failed: u64,
    /// Visible messages still in the source after this step (failures included).
    pub remaining_visible: u64,
}

#[derive(Debug, Clone)]
pub struct Broker {
    queues: HashMap<QueueId, Queue>,
    names: BTreeMap<String, QueueId>,
    messages: HashMap<u64, MessageMeta>,
    /// Each queue's next due time (see `Queue::next_due`), for `tick` and `next_due`.
    due: BTreeSet<(TimeMs, QueueId)>,
    scheduled: HashMap<QueueId, TimeMs>,
    next_seq: u64,
    /// Sequence numbers below this are reserved by the last `PutHighWater`.
    seq_reserved: u64,
    next_queue_id: QueueId,
    effects: Vec<Effect>,
    woken: BTreeSet<QueueId>,
    counters: BrokerCounters,
}

impl Default for Broker {
    fn default() -> Self {
        Broker::new()
    }
}

/// Totals of events the broker decided on by itself, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BrokerCounters {
    pub dead_lettered: u64,
    pub expired: u64,
}

impl Broker {
    /// An empty broker. Sequence numbers and queue ids start at 1 (0 never names anything).
    pub fn new() -> Broker {
        Broker {
            queues: HashMap::new(),
            names: BTreeMap::new(),
            messages: HashMap::new(),
            due: BTreeSet::new(),
            scheduled: HashMap::new(),
            next_seq: 1,
            seq_reserved: 1,
            next_queue_id: 1,
            effects: Vec::new(),
            woken: BTreeSet::new(),
            counters: BrokerCounters::default(),
        }
    }

    // ----- restore -------------------------------------------------------------------------

    /// Loads the high-water marks read from disk (absent on a new store). Call before
    /// anything is sent or created.
    pub fn restore_high_water(&mut self, next_seq: u64, next_queue_id: QueueId) {
        self.next_seq = self.next_seq.max(next_seq);
        self.seq_reserved = self.seq_reserved.max(next_seq);
        self.next_queue_id = self.next_queue_id.max(next_queue_id);
    }

    fn put_high_water(&mut self) {
        let next_seq = self.seq_reserved.max(self.next_seq);
        self.effects.push(Effect::PutHighWater { next_seq, next_queue_id: self.next_queue_id });
    }

    /// Loads a queue record read from disk. Call for every queue before any message.
    pub fn restore_queue(
        &mut self,
        id: QueueId,
        name: String,
        attributes: QueueAttributes,
        created_at: TimeMs,
        modified_at: TimeMs,
    ) {
        self.next_queue_id = self.next_queue_id.max(id + 1);
        self.names.insert(name.clone(), id);
        self.queues.insert(id, Queue::new(id, name, attributes, created_at, modified_at));
    }

    /// Loads a message record read from disk. Returns false (and keeps nothing) when its queue
    /// is unknown; the caller should then delete the record.
    pub fn restore_message(&mut self, seq: u64, meta: MessageMeta, now_ms: TimeMs) -> bool {
        self.next_seq = self.next_seq.max(seq + 1);
        let Some(queue) = self.queues.get_mut(&meta.queue) else {
            return false;
        };
        // A hold that ended while the server was down stays in flight with its timer due, so
        // that the first tick ends it exactly as it would have live (dead-lettering included).
        queue.insert(seq, &meta, now_ms);
        self.messages.insert(seq, meta);
        true
    }

    /// Schedules timers after a restore.
    pub fn finish_restore(&mut self) {
        let ids: Vec<QueueId> = self.queues.keys().copied().collect();
        for id in ids {
            self.reschedule(id);
            if self.queues[&id].visible_count() > 0 {
                self.woken.insert(id);
            }
        }
    }

    // ----- outputs -------------------------------------------------------------------------

    /// The records to persist since the last call, in order.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    /// [`take_effects`](Self::take_effects) into a vector the caller keeps: `buffer`, which
    /// must be empty, receives the effects and leaves its allocation here for the next ones,
    /// so that a store persisting batch after batch does not grow a new vector for each.
    pub fn swap_effects(&mut self, buffer: &mut Vec<Effect>) {
        assert!(buffer.is_empty(), "swap_effects: the buffer still holds effects not yet persisted");
        std::mem::swap(&mut self.effects, buffer);
    }

    /// Queues that gained visible messages since the last call (to wake long polls).
    pub fn take_woken(&mut self) -> BTreeSet<QueueId> {
        std::mem::take(&mut self.woken)
    }

    pub fn counters(&self) -> BrokerCounters {
        self.counters
    }

    /// When `tick` next has work to do.
    pub fn next_due(&self) -> Option<TimeMs> {
        self.due.first().map(|(t, _)| *t)
    }

    // ----- queues --------------------------------------------------------------------------

    pub fn queue_id(&self, name: &str) -> Result<QueueId, BrokerError> {
        self.names.get(name).copied().ok_or_else(|| BrokerError::QueueNotFound(name.to_string()))
    }

    pub fn queue_name(&self, id: QueueId) -> Option<&str> {
        self.queues.get(&id).map(|q| q.name.as_str())
    }

    /// Creates a queue; returns its id and whether it was new. The same name with the same
    /// attributes (tags aside) is not an error; with different attributes it is.
    pub fn create_queue(
        &mut self,
        name: &str,
        attributes: QueueAttributes,
        now_ms: TimeMs,
    ) -> Result<(QueueId, bool), BrokerError> {
        validate_queue_name(name)?;
        attributes.validate()?;
        if name.ends_with(FIFO_SUFFIX) && !attributes.fifo {
            return Err(
                ValidationError::new("fifo", "names ending in .fifo belong to FIFO queues; set fifo: true").into()
            );
        }
        if let Some(&id) = self.names.get(name) {
            return if self.queues[&id].attributes.same_config(&attributes) {
                Ok((id, false))
            } else {
                Err(BrokerError::QueueExists(name.to_string()))
            };
        }
        self.check_dead_letter(name, &attributes)?;
        if self.queues.len() >= QUEUES_MAX {
            return Err(BrokerError::TooManyQueues);
        }
        let id = self.next_queue_id;
        self.next_queue_id += 1;
        self.put_high_water();
        self.effects.push(Effect::PutQueue {
            id,
            name: name.to_string(),
            attributes: attributes.clone(),
            created_at: now_ms,
            modified_at: now_ms,
        });
        self.restore_queue(id, name.to_string(), attributes, now_ms, now_ms);
        Ok((id, true))
    }

    fn check_dead_letter(&self, name: &str, attributes: &QueueAttributes) -> Result<(), BrokerError> {
        if let Some(dl) = &attributes.dead_letter {
            if dl.queue == name {
                return Err(
                    ValidationError::new("dead_letter.queue", "a queue cannot be its own dead-letter queue").into()
                );
            }
            let Some(dlq) = self.names.get(&dl.queue) else {
                return Err(BrokerError::DeadLetterQueueNotFound(dl.queue.clone()));
            };
            if self.queues[dlq].is_fifo() != attributes.fifo {
                let message = if attributes.fifo {
                    "a FIFO queue's dead-letter queue must be a FIFO queue"
                } else {
                    "a standard queue's dead-letter queue must be a standard queue"
                };
                return Err(ValidationError::new("dead_letter.queue", message).into());
            }
        }
        Ok(())
    }

    pub fn update_queue(
        &mut self,
        name: &str,
        patch: &QueueAttributesPatch,
        now_ms: TimeMs,
    ) -> Result<QueueId, BrokerError> {
        let id = self.queue_id(name)?;
        let queue = &self.queues[&id];
        let next = queue.attributes.apply(patch);
        next.validate()?;
        self.check_dead_letter(name, &next)?;
        self.effects.push(Effect::PutQueue {
            id,
            name: name.to_string(),
            attributes: next.clone(),
            created_at: queue.created_at,
            modified_at: now_ms,
        });
        let queue = self.queues.get_mut(&id).expect("queue exists");
        queue.attributes = next;
        queue.modified_at = now_ms;
        self.reschedule(id);
        Ok(id)
    }

    /// Removes every message of the queue; returns how many.
    pub fn purge_queue(&mut self, name: &str) -> Result<u64, BrokerError> {
        let id = self.queue_id(name)?;
        let seqs: Vec<u64> = self.queues[&id].members.iter().copied().collect();
        for &seq in &seqs {
            self.delete_message(id, seq);
        }
        self.forget_dedup(id);
        self.reschedule(id);
        Ok(seqs.len() as u64)
    }

    pub fn delete_queue(&mut self, name: &str) -> Result<(), BrokerError> {
        self.purge_queue(name)?;
        let id = self.names.remove(name).expect("queue exists");
        self.queues.remove(&id);
        if let Some(t) = self.scheduled.remove(&id) {
            self.due.remove(&(t, id));
        }
        self.woken.remove(&id);
        self.effects.push(Effect::DeleteQueue { id });
        Ok(())
    }

    pub fn queue_view(&self, id: QueueId, now_ms: TimeMs) -> Option<QueueView> {
        let q = self.queues.get(&id)?;
        let dead_letter_depth = q
            .attributes
            .dead_letter
            .as_ref()
            .and_then(|dl| self.names.get(&dl.queue))
            .map(|dlq| self.queues[dlq].len() as u64);
        Some(QueueView {
            id,
            name: q.name.clone(),
            attributes: q.attributes.clone(),
            created_at: q.created_at,
            modified_at: q.modified_at,
            stats: QueueStats {
                visible: q.visible_count() as u64,
                in_flight: q.in_flight_count() as u64,
                delayed: q.delayed_count() as u64,
                oldest_age_ms: q.oldest_sent_at().map(|t| now_ms.saturating_sub(t)),
                dead_letter_depth,
            },
        })
    }

    /// Queues whose names start with `prefix` and sort after `after`, in name order.
    pub fn list_queues(&self, prefix: &str, after: Option<&str>, limit: usize, now_ms: TimeMs) -> Vec<QueueView> {
        let start = match after {
            Some(a) if a >= prefix => std::ops::Bound::Excluded(a.to_string()),
            _ => std::ops::Bound::Included(prefix.to_string()),
        };
        self.names
            .range((start, std::ops::Bound::Unbounded))
            .take_while(|(name, _)| name.starts_with(prefix))
            .take(limit)
            .filter_map(|(_, id)| self.queue_view(*id, now_ms))
            .collect()
    }

    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }

    // ----- messages ------------------------------------------------------------------------

    /// Accepts one message into queue `id`. The caller writes the body under the returned
    /// sequence number in the same batch as the effects.
    pub fn send(
        &mut self,
        id: QueueId,
        message: &NewMessage,
        message_id: MessageId,
        now_ms: TimeMs,
    ) -> Result<Sent, EntryError> {
        message.validate()?;
        let queue = self.queues.get(&id).expect("caller resolved the queue");
        let dedup_key = if queue.is_fifo() {
            let key = fifo_send_rules(&queue.attributes, message)?;
            if let Some(entry) = queue.dedup.get(&key)
                && entry.expires_at > now_ms
            {
                return Ok(Sent { seq: entry.seq, id: entry.id, duplicate: true });
            }
            Some(key)
        } else {
            if message.dedup_id.is_some() {
                return Err(
                    ValidationError::new("dedup_id", "only FIFO queues deduplicate; this queue is standard").into()
                );
            }
            None
        };
        let size_bytes = message.size_bytes();
        if size_bytes > queue.attributes.message_bytes_max {
            return Err(EntryError::MessageTooLarge { size_bytes, max_bytes: queue.attributes.message_bytes_max });
        }
        let retention_ms = queue.attributes.retention_ms;
        let visible_at = match (message.delay_ms, message.deliver_at_ms) {
            (_, Some(at)) => at.max(now_ms),
            (Some(delay), None) => now_ms.saturating_add(delay),
            (None, None) => now_ms.saturating_add(queue.attributes.delay_ms),
        };
        if visible_at - now_ms >= retention_ms {
            let field = if message.deliver_at_ms.is_some() { "deliver_at" } else { "delay_ms" };
            return Err(ValidationError::new(
                field,
                format!("the message would become visible after this queue's retention ({retention_ms} ms) ends"),
            )
            .into());
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.next_seq > self.seq_reserved {
            self.seq_reserved = seq + SEQ_RESERVE_BLOCK;
            self.put_high_water();
        }
        let meta = MessageMeta {
            queue: id,
            id: message_id,
            priority: message.priority,
            sent_at: now_ms,
            visible_at,
            in_flight: false,
            receive_count: 0,
            epoch: 0,
            first_received_at: None,
            size_bytes,
            group_id: message.envelope.group_id.clone(),
            dead_letter_source: None,
            last_error: None,
        };
        self.insert_message(seq, meta, now_ms);
        if let Some(key) = dedup_key {
            let expires_at = now_ms.saturating_add(self.queues[&id].attributes.dedup_window_ms);
            self.remember_dedup(id, key.clone(), DedupEntry { id: message_id, seq, expires_at });
            self.effects.push(Effect::PutDedup { queue: id, key, id: message_id, seq, expires_at });
            self.reschedule(id);
        }
        Ok(Sent { seq, id: message_id, duplicate: false })
    }

    fn remember_dedup(&mut self, id: QueueId, key: String, entry: DedupEntry) {
        let queue = self.queues.get_mut(&id).expect("queue exists");
        queue.dedup_expiry.insert((entry.expires_at, key.clone()));
        if let Some(old) = queue.dedup.insert(key.clone(), entry) {
            queue.dedup_expiry.remove(&(old.expires_at, key));
        }
    }

    /// Loads a deduplication record read from disk. Returns false (keep nothing) when its queue
    /// is gone or its window has ended; the caller should then delete the record.
    pub fn restore_dedup(&mut self, id: QueueId, key: String, entry: DedupEntry, now_ms: TimeMs) -> bool {
        if entry.expires_at <= now_ms || !self.queues.get(&id).is_some_and(Queue::is_fifo) {
            return false;
        }
        self.remember_dedup(id, key, entry);
        true
    }

    /// Forgets every deduplication key of queue `id` (purge and delete clear them, as SQS).
    fn forget_dedup(&mut self, id: QueueId) {
        let queue = self.queues.get_mut(&id).expect("queue exists");
        queue.dedup_expiry.clear();
        for key in std::mem::take(&mut queue.dedup).into_keys() {
            self.effects.push(Effect::DeleteDedup { queue: id, key });
        }
    }

    fn insert_message(&mut self, seq: u64, meta: MessageMeta, now_ms: TimeMs) {
        let id = meta.queue;
        let queue = self.queues.get_mut(&id).expect("queue exists");
        queue.insert(seq, &meta, now_ms);
        if meta.visible_at <= now_ms {
            self.woken.insert(id);
        }
        self.effects.push(Effect::PutMessage { seq, meta: meta.clone() });
        self.messages.insert(seq, meta);
        self.reschedule(id);
    }

    fn delete_message(&mut self, id: QueueId, seq: u64) {
        let meta = self.messages.remove(&seq).expect("message exists");
        let queue = self.queues.get_mut(&id).expect("queue exists");
        queue.remove(seq, &meta);
        // On a FIFO queue, removing a group's held message can make the group deliver again:
        // long polls must hear of it as they do of a send.
        if queue.is_fifo() && queue.has_eligible_group() {
            self.woken.insert(id);
        }
        self.effects.push(Effect::DeleteMessage { seq });
    }

    /// Delivers up to `max` visible messages, highest priority first, then in send order, and
    /// hides each for `visibility_ms` (the queue's default when `None`). Messages that already
    /// reached the dead-letter policy's receive count move to the dead-letter queue instead.
    pub fn receive(&mut self, id: QueueId, max: u32, visibility_ms: Option<u64>, now_ms: TimeMs) -> Vec<Delivery> {
        let queue = &self.queues[&id];
        let visibility_ms = visibility_ms.unwrap_or(queue.attributes.visibility_timeout_ms);
        let dead_letter = self.dead_letter_target(id);
        let mut out = Vec::new();
        let mut bytes = 0u64;
        // FIFO: the group and sequence of the message taken last, to continue in that group.
        let mut continuing: Option<(String, u64)> = None;
        while out.len() < max as usize {
            let queue = self.queues.get_mut(&id).expect("queue exists");
            let cursor = continuing.as_ref().map(|(g, s)| (g.as_str(), *s));
            let Some(seq) = queue.next_ready(cursor) else { break };
            let meta = &self.messages[&seq];
            if queue.is_fifo() {
                continuing = Some((meta.group_id.clone().unwrap_or_default(), seq));
            }
            if let Some((dlq, exhausted_at)) = dead_letter
                && DeadLetter::is_exhausted(meta.receive_count, exhausted_at)
            {
                self.move_to_dead_letter(seq, dlq, now_ms);
                continue;
            }
            if !out.is_empty() && bytes + meta.size_bytes > RECEIVE_BYTES_MAX {
                break;
            }
            bytes += meta.size_bytes;
            let meta = self.messages.get_mut(&seq).expect("message exists");
            queue.served(meta);
            queue.unindex(seq, meta);
            meta.in_flight = true;
            meta.visible_at = now_ms.saturating_add(visibility_ms);
            meta.receive_count += 1;
            meta.epoch += 1;
            meta.first_received_at.get_or_insert(now_ms);
            // In flight always goes through the timers, even with a zero timeout, so that this
            // receive cannot hand out the same message twice.
            queue.index(seq, meta, now_ms);
            let receipt = Receipt { queue: id, seq, epoch: meta.epoch };
            self.effects.push(Effect::PutMessage { seq, meta: meta.clone() });
            out.push(Delivery { seq, meta: meta.clone(), receipt });
        }
        self.reschedule(id);
        out
    }

    /// The dead-letter queue of queue `id` and the receive count at which its messages go there
    /// (`DeadLetter::exhausted_receive_count`), if its policy names a queue that exists.
    fn dead_letter_target(&self, id: QueueId) -> Option<(QueueId, u32)> {
        let dl = self.queues[&id].attributes.dead_letter.as_ref()?;
        let dlq = *self.names.get(&dl.queue)?;
        // A dead-letter queue deleted and recreated as the other type is no target.
        let same_type = self.queues[&dlq].is_fifo() == self.queues[&id].is_fifo();
        (dlq != id && same_type).then_some((dlq, dl.exhausted_receive_count()))
    }

    fn move_to_dead_letter(&mut self, seq: u64, dlq: QueueId, now_ms: TimeMs) {
        let mut meta = self.messages.remove(&seq).expect("message exists");
        let source = meta.queue;
        let source_queue = self.queues.get_mut(&source).expect("queue exists");
        source_queue.remove(seq, &meta);
        if source_queue.is_fifo() && source_queue.has_eligible_group() {
            self.woken.insert(source);
        }
        meta.dead_letter_source = Some(source_queue.name.clone());
        self.counters.dead_lettered += 1;
        meta.queue = dlq;
        // A receipt from before the move must never act on the message again, even if a
        // redrive brings it back to this queue.
        meta.epoch += 1;
        meta.in_flight = false;
        meta.visible_at = now_ms;
        self.reschedule(source);
        self.insert_message(seq, meta, now_ms);
    }

    /// Checks that `receipt` names the current delivery of a message in queue `id`.
    fn check_receipt(&self, id: QueueId, receipt: &Receipt) -> Result<&MessageMeta, EntryError> {
        if receipt.queue != id {
            return Err(EntryError::ForeignReceipt);
        }
        match self.messages.get(&receipt.seq) {
            Some(meta) if meta.queue == id && meta.epoch == receipt.epoch => Ok(meta),
            _ => Err(EntryError::StaleReceipt),
        }
    }

    fn check_in_flight(&self, id: QueueId, receipt: &Receipt, now_ms: TimeMs) -> Result<&MessageMeta, EntryError> {
        let meta = self.check_receipt(id, receipt)?;
        if !(meta.in_flight && meta.visible_at > now_ms) {
            return Err(EntryError::NotInFlight);
        }
        Ok(meta)
    }

    /// Deletes the message the receipt delivered. Valid as long as no later receive of the same
    /// message happened, even after its visibility timeout passed (as in SQS).
    /// On a FIFO queue the hold must still be current: once it ended, the group may have moved
    /// on to another consumer, and an expired receipt deleting a message out of turn would
    /// break the group's order (SQS refuses it as an expired handle too).
    pub fn ack(&mut self, id: QueueId, receipt: &Receipt, now_ms: TimeMs) -> Result<(), EntryError> {
        if self.queues.get(&id).is_some_and(Queue::is_fifo) {
            self.check_in_flight(id, receipt, now_ms)?;
        }
        self.check_receipt(id, receipt)?;
        self.delete_message(id, receipt.seq);
        self.reschedule(id);
        Ok(())
    }

    /// Sets the remaining visibility timeout of an in-flight message, counted from now.
    /// Zero releases it at once.
    pub fn change_visibility(
        &mut self,
        id: QueueId,
        receipt: &Receipt,
        timeout_ms: u64,
        now_ms: TimeMs,
    ) -> Result<(), EntryError> {
        if timeout_ms > VISIBILITY_TIMEOUT_MS_MAX {
            return Err(
                ValidationError::new("timeout_ms", format!("must be at most {VISIBILITY_TIMEOUT_MS_MAX}")).into()
            );
        }
        self.check_in_flight(id, receipt, now_ms)?;
        if timeout_ms == 0 {
            self.make_available(id, receipt.seq, now_ms, now_ms);
        } else {
            let seq = receipt.seq;
            let meta = self.messages.get_mut(&seq).expect("message exists");
            let queue = self.queues.get_mut(&id).expect("queue exists");
            queue.unindex(seq, meta);
            meta.visible_at = now_ms.saturating_add(timeout_ms);
            queue.index(seq, meta, now_ms);
            self.effects.push(Effect::PutMessage { seq, meta: meta.clone() });
        }
        self.reschedule(id);
        Ok(())
    }

    /// As [`Broker::change_visibility`], but a message whose visibility timeout passed and that
    /// nobody received since is hidden again instead of refused: SQS answers success there.
    /// The receipt's delivery is still the newest, so no other consumer can hold the message.
    pub fn change_visibility_lenient(
        &mut self,
        id: QueueId,
        receipt: &Receipt,
        timeout_ms: u64,
        now_ms: TimeMs,
    ) -> Result<(), EntryError> {
        let meta = self.check_receipt(id, receipt)?;
        // FIFO queues have no lenient form: once a hold ended, the message's group may have
        // gone to another consumer, and an expired receipt must not take a place in it again
        // (SQS answers "receipt handle has expired" there).
        if (meta.in_flight && meta.visible_at > now_ms) || self.queues[&id].is_fifo() {
            return self.change_visibility(id, receipt, timeout_ms, now_ms);
        }
        if timeout_ms > VISIBILITY_TIMEOUT_MS_MAX {
            return Err(
                ValidationError::new("timeout_ms", format!("must be at most {VISIBILITY_TIMEOUT_MS_MAX}")).into()
            );
        }
        if timeout_ms == 0 {
            return Ok(());
        }
        let seq = receipt.seq;
        let meta = self.messages.get_mut(&seq).expect("message exists");
        let queue = self.queues.get_mut(&id).expect("queue exists");
        queue.unindex(seq, meta);
        meta.in_flight = true;
        meta.visible_at = now_ms.saturating_add(timeout_ms);
        queue.index(seq, meta, now_ms);
        self.effects.push(Effect::PutMessage { seq, meta: meta.clone() });
        self.reschedule(id);
        Ok(())
    }

    /// Gives an in-flight message back: visible again after `delay_ms`, with `error` recorded
    /// as its last error. A message that reached its receive limit moves to the dead-letter
    /// queue at once.
    pub fn nack(
        &mut self,
        id: QueueId,
        receipt: &Receipt,
        delay_ms: u64,
        error: Option<String>,
        now_ms: TimeMs,
    ) -> Result<(), EntryError> {
        if delay_ms > DELAY_MS_MAX {
            return Err(ValidationError::new("delay_ms", format!("must be at most {DELAY_MS_MAX}")).into());
        }
        if let Some(e) = &error
            && e.len() > ERROR_REASON_LEN_MAX
        {
            return Err(ValidationError::new("error", format!("must be at most {ERROR_REASON_LEN_MAX} bytes")).into());
        }
        self.check_in_flight(id, receipt, now_ms)?;
        if error.is_some() {
            self.messages.get_mut(&receipt.seq).expect("message exists").last_error = error;
        }
        self.make_available(id, receipt.seq, now_ms.saturating_add(delay_ms), now_ms);
        self.reschedule(id);
        Ok(())
    }

    /// Ends an in-flight message's hold: it becomes visible at `visible_at`, or moves to the
    /// dead-letter queue if it has used up its receives.
    fn make_available(&mut self, id: QueueId, seq: u64, visible_at: TimeMs, now_ms: TimeMs) {
        let meta = self.messages.get_mut(&seq).expect("message exists");
        let queue = self.queues.get_mut(&id).expect("queue exists");
        queue.unindex(seq, meta);
        meta.in_flight = false;
        meta.visible_at = visible_at;
        if let Some((dlq, exhausted_at)) = self.dead_letter_target(id)
            && DeadLetter::is_exhausted(self.messages[&seq].receive_count, exhausted_at)
        {
            // `move_to_dead_letter` expects the message indexed in its queue.
            let meta = &self.messages[&seq];
            self.queues.get_mut(&id).expect("queue exists").index(seq, meta, now_ms);
            self.move_to_dead_letter(seq, dlq, now_ms);
            return;
        }
        let meta = &self.messages[&seq];
        self.queues.get_mut(&id).expect("queue exists").index(seq, meta, now_ms);
        if visible_at <= now_ms {
            self.woken.insert(id);
        }
        self.effects.push(Effect::PutMessage { seq, meta: meta.clone() });
    }

    /// Messages of queue `id` in send order, with their state, without receiving them.
    pub fn peek(&self, id: QueueId, limit: usize, now_ms: TimeMs) -> Vec<(u64, MessageMeta, MessageState)> {
        self.queues[&id]
            .by_age
            .iter()
            .take(limit)
            .map(|(_, seq)| {
                let meta = self.messages[seq].clone();
                let state = meta.state(now_ms);
                (*seq, meta, state)
            })
            .collect()
    }

    /// Moves up to `max` visible messages of queue `from` (normally a dead-letter queue) to
    /// queue `to`, or each to the queue it was dead-lettered from. Moved messages start again
    /// with a receive count of zero; their id, body, attributes and last error stay.
    pub fn move_messages(
        &mut self,
        from: &str,
        to: Option<&str>,
        max: u64,
        now_ms: TimeMs,
    ) -> Result<MoveOutcome, BrokerError> {
        let from_id = self.queue_id(from)?;
        let to_id = to.map(|t| self.queue_id(t)).transpose()?;
        if let Some(t) = to_id
            && self.queues[&t].is_fifo() != self.queues[&from_id].is_fifo()
        {
            return Err(ValidationError::new(
                "to",
                "messages move only between queues of the same type (FIFO to FIFO, standard to standard)",
            )
            .into());
        }
        let mut outcome = MoveOutcome::default();
        let mut plan = Vec::new();
        for &(_, seq) in &self.queues[&from_id].ready {
            if plan.len() as u64 >= max {
                break;
            }
            let meta = &self.messages[&seq];
            let target = to_id.or_else(|| meta.dead_letter_source.as_deref().and_then(|s| self.names.get(s).copied()));
            match target {
                Some(t) if t != from_id => plan.push((seq, t)),
                _ => outcome.failed += 1,
            }
        }
        for (seq, target) in plan {
            let mut meta = self.messages.remove(&seq).expect("message exists");
            self.queues.get_mut(&from_id).expect("queue exists").remove(seq, &meta);
            meta.queue = target;
            meta.receive_count = 0;
            // Receipts from before the move must not act on the moved message.
            meta.epoch += 1;
            meta.in_flight = false;
            meta.visible_at = now_ms;
            meta.dead_letter_source = None;
            self.insert_message(seq, meta, now_ms);
            outcome.moved += 1;
        }
        self.reschedule(from_id);
        outcome.remaining_visible = self.queues[&from_id].visible_count() as u64;
        Ok(outcome)
    }

    // ----- time ----------------------------------------------------------------------------

    /// Applies everything due at `now_ms`: delays and visibility timeouts that ended (with
    /// dead-lettering where the policy says so) and messages past retention.
    pub fn tick(&mut self, now_ms: TimeMs) {
        while let Some(&(due, id)) = self.due.first() {
            if due > now_ms {
                break;
            }
            self.due.pop_first();
            self.scheduled.remove(&id);
            self.tick_queue(id, now_ms);
            self.reschedule(id);
        }
    }

    fn tick_queue(&mut self, id: QueueId, now_ms: TimeMs) {
        let retention_ms = self.queues[&id].attributes.retention_ms;
        while let Some(&(sent_at, seq)) = self.queues[&id].by_age.first() {
            if sent_at.saturating_add(retention_ms) > now_ms {
                break;
            }
            self.counters.expired += 1;
            self.delete_message(id, seq);
        }
        let queue = self.queues.get_mut(&id).expect("queue exists");
        while let Some((expires_at, key)) = queue.dedup_expiry.first().cloned() {
            if expires_at > now_ms {
                break;
            }
            queue.dedup_expiry.pop_first();
            queue.dedup.remove(&key);
            self.effects.push(Effect::DeleteDedup { queue: id, key });
        }
        let dead_letter = self.dead_letter_target(id);
        loop {
            let queue = self.queues.get_mut(&id).expect("queue exists");
            let Some(&(visible_at, seq)) = queue.timers.first() else { break };
            if visible_at > now_ms {
                break;
            }
            let meta = self.messages.get_mut(&seq).expect("message exists");
            let was_in_flight = meta.in_flight;
            queue.unindex(seq, meta);
            meta.in_flight = false;
            queue.index(seq, meta, now_ms);
            self.woken.insert(id);
            if let Some((dlq, exhausted_at)) = dead_letter
                && was_in_flight
                && DeadLetter::is_exhausted(meta.receive_count, exhausted_at)
            {
                self.move_to_dead_letter(seq, dlq, now_ms);
            } else if was_in_flight {
                // Persisted, so that a restart finds the hold ended here, under this moment's
                // dead-letter policy, instead of ending it again under the policy it then finds.
                self.effects.push(Effect::PutMessage { seq, meta: meta.clone() });
            }
        }
    }

    fn reschedule(&mut self, id: QueueId) {
        if let Some(t) = self.scheduled.remove(&id) {
            self.due.remove(&(t, id));
        }
        if let Some(t) = self.queues.get(&id).and_then(Queue::next_due) {
            self.due.insert((t, id));
            self.scheduled.insert(id, t);
        }
    }

    // ----- inspection (tests, invariants) -------------------------------------------------

    pub fn message(&self, seq: u64) -> Option<&MessageMeta> {
        self.messages.get(&seq)
    }

    pub fn message_count(&self) -> usize {
        self.messages.len()
    }

    /// Checks the internal indexes against the message map; panics with a description on the
    /// first inconsistency. Cheap enough for tests, too slow for every operation.
    pub fn check_invariants(&self, now_ms: TimeMs) {
        let mut seen = 0;
        for (id, queue) in &self.queues {
            assert_eq!(self.names.get(&queue.name), Some(id), "name index of queue {id}");
            assert_eq!(queue.ready.len() + queue.timers.len(), queue.members.len(), "indexes of queue {id}");
            assert_eq!(queue.by_age.len(), queue.members.len(), "age index of queue {id}");
            let mut in_flight = 0;
            for seq in &queue.members {
                let meta = &self.messages[seq];
                assert_eq!(meta.queue, *id, "message {seq} sits in the wrong queue");
                if meta.in_flight {
                    assert!(queue.timers.contains(&(meta.visible_at, *seq)), "in-flight message {seq} without a timer");
                    in_flight += 1;
                } else if meta.visible_at > now_ms {
                    assert!(queue.timers.contains(&(meta.visible_at, *seq)), "delayed message {seq} without a timer");
                }
            }
            assert_eq!(queue.in_flight, in_flight, "in-flight count of queue {id}");
            queue.check_fair();
            assert_eq!(self.scheduled.get(id).copied(), queue.next_due(), "schedule of queue {id}");
            seen += queue.members.len();
        }
        assert_eq!(seen, self.messages.len(), "messages outside every queue");
    }
}

/// Checks what a FIFO queue demands of a send and returns its deduplication key (the dedup id,
/// or the body's SHA-256 with content-based dedup; prefixed by the group under
/// `DedupScope::MessageGroup`). Public so that backends that cannot run `Broker` over shared
/// state (PostgreSQL) apply the same rules.
pub fn fifo_send_rules(attributes: &QueueAttributes, message: &NewMessage) -> Result<String, ValidationError> {
    let Some(group) = &message.envelope.group_id else {
        return Err(ValidationError::new("group_id", "FIFO queues need a group_id on every message"));
    };
    if message.delay_ms.is_some() || message.deliver_at_ms.is_some() {
        return Err(ValidationError::new(
            "delay_ms",
            "FIFO queues take only the queue's delay; set delay_ms on the queue instead",
        ));
    }
    if message.priority != 0 {
        return Err(ValidationError::new("priority", "FIFO queues deliver in send order; priorities do not apply"));
    }
    let id = match &message.dedup_id {
        Some(id) => id.clone(),
        None if attributes.content_based_dedup => content_dedup_id(&message.body),
        None => {
            return Err(ValidationError::new(
                "dedup_id",
                "give a dedup_id, or enable content_based_dedup on the queue",
            ));
        }
    };
    Ok(match attributes.dedup_scope {
        DedupScope::Queue => id,
        // The group's length first, so that no (group, id) pair can spell another's key.
        DedupScope::MessageGroup => format!("{}:{group}{id}", group.len()),
    })
}

/// The dedup id of a FIFO message sent without one to a queue with content-based dedup: the
/// lowercase hex SHA-256 of its body (as SQS).
pub fn content_dedup_id(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod fair_tests {
    use super::*;
    use crate::message::MessageEnvelope;

    fn grouped(group: Option<&str>, priority: u8) -> NewMessage {
        NewMessage {
            body: b"x".to_vec(),
            priority,
            envelope: MessageEnvelope { group_id: group.map(str::to_string), ..Default::default() },
            ..Default::default()
        }
    }

    fn groups_of(broker: &Broker, deliveries: &[Delivery]) -> Vec<String> {
        deliveries
            .iter()
            .map(|d| broker.message(d.seq).and_then(|m| m.group_id.clone()).unwrap_or_else(|| "-".into()))
            .collect()
    }

    #[test]
    fn a_quiet_group_is_served_next_despite_a_noisy_backlog() {
        let mut b = Broker::new();
        let (q, _) = b.create_queue("q", QueueAttributes::default(), 0).unwrap();
        for i in 0..1_000 {
            b.send(q, &grouped(Some("noisy"), 0), MessageId(i), 0).unwrap();
        }
        let first = b.receive(q, 2, None, 1);
        assert_eq!(groups_of(&b, &first), ["noisy", "noisy"]);
        b.send(q, &grouped(Some("quiet"), 0), MessageId(5_000), 2).unwrap();
        let next = b.receive(q, 3, None, 3);
        assert_eq!(groups_of(&b, &next), ["quiet", "noisy", "noisy"]);
        b.check_invariants(3);
    }

    #[test]
    fn groups_take_turns_within_a_priority_and_priority_still_comes_first() {
        let mut b = Broker::new();
        let (q, _) = b.create_queue("q", QueueAttributes::default(), 0).unwrap();
        let mut id = 0;
        for group in ["a", "a", "a", "b", "b", "c"] {
            id += 1;
            b.send(q, &grouped(Some(group), 0), MessageId(id), 0).unwrap();
        }
        b.send(q, &grouped(None, 5), MessageId(100), 0).unwrap();
        let got = b.receive(q, 7, None, 1);
        assert_eq!(groups_of(&b, &got), ["-", "a", "b", "c", "a", "b", "a"]);
        b.check_invariants(1);
    }

    #[test]
    fn without_groups_order_is_priority_then_send_order() {
        let mut b = Broker::new();
        let (q, _) = b.create_queue("q", QueueAttributes::default(), 0).unwrap();
        for (i, p) in [0u8, 3, 0, 3].into_iter().enumerate() {
            b.send(q, &grouped(None, p), MessageId(i as u128), 0).unwrap();
        }
        let got: Vec<u128> = b.receive(q, 4, None, 1).iter().map(|d| d.meta.id.0).collect();
        assert_eq!(got, [1, 3, 0, 2]);
    }
}

#[cfg(test)]
mod dedup_tests {
    #[test]
    fn content_dedup_id_is_the_hex_sha256_of_the_body() {
        // FIPS 180-2 test vector.
        assert_eq!(super::content_dedup_id(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
