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
use crate::attributes::{DeadLetter, QueueAttributes, QueueAttributesPatch};
use crate::limits::*;
use crate::message::{MessageId, MessageMeta, MessageState, NewMessage};
use crate::name::validate_queue_name;
use crate::overflow::{Depth, DepthReport, RefusalCounts};
use crate::queue::{DedupEntry, Queue};
use crate::receipt::Receipt;
use crate::validation::ValidationError;

mod fifo;
mod messages;
mod timers;

pub use fifo::{content_dedup_id, fifo_send_rules};
pub use messages::PendingDepth;

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
    /// A stale receipt whose message is no longer in the queue (deleted, moved to another
    /// queue, or past its retention), where the message was not just received again. Only
    /// [`Broker::change_visibility_lenient`] (the store's SQS rule) tells the two apart, because
    /// only SQS answers them differently; every other call reports both as `StaleReceipt`.
    #[error("receipt is stale: its message is no longer in the queue")]
    MessageGone,
    #[error("message is not in flight: its visibility timeout has passed or it was released")]
    NotInFlight,
    /// The queue is at its `max_depth_messages` or `max_depth_bytes` and its `overflow` policy
    /// refuses (see `overflow::place`); `depth` is the queue's as the refusal found it.
    #[error("queue is full: {} messages, {} bytes (limits: {} messages, {} bytes)",
        depth.messages, depth.bytes, show_limit(*max_messages), show_limit(*max_bytes))]
    QueueFull { depth: Depth, max_messages: Option<u64>, max_bytes: Option<u64> },
    /// The queue's `rate_limit` bucket had no token for this message; the next one comes in
    /// `retry_after_ms`.
    #[error("the queue's rate limit is reached; retry in {retry_after_ms} ms")]
    RateLimited { retry_after_ms: u64 },
}

fn show_limit(limit: Option<u64>) -> String {
    limit.map_or_else(|| "none".to_string(), |n| n.to_string())
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
    /// Bytes of every message in the queue, as `max_depth_bytes` counts them.
    pub depth_bytes: u64,
    /// What the queue's depth limits refused or moved (see `RefusalCounts`).
    pub refusals: RefusalCounts,
}

impl QueueStats {
    /// Every message in the queue, whatever its state: what `max_depth_messages` bounds.
    pub fn depth_messages(&self) -> u64 {
        self.visible + self.in_flight + self.delayed
    }
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
    /// The queue was full and its `overflow` is `reject_to_dlq`: the message went to the
    /// dead-letter queue (durably, under this id) instead.
    pub dead_lettered: bool,
    /// How many of the queue's oldest messages `drop_head` moved to the dead-letter queue to
    /// make room for this one.
    pub dropped: u32,
    /// The queue's depth after this send, when the queue has a depth limit (so that producers
    /// can slow down before they are refused).
    pub depth: Option<DepthReport>,
}

impl Sent {
    /// A message enqueued as asked (no limit applied to it).
    pub fn new(seq: u64, id: MessageId) -> Sent {
        Sent { seq, id, duplicate: false, dead_lettered: false, dropped: 0, depth: None }
    }
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

/// What a send would do (see [`Broker::admit`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// A FIFO duplicate inside its dedup window: answered with the original, nothing enqueued.
    Duplicate(Sent),
    /// A new message, visible at `visible_at`, deduplicated by `dedup_key` on a FIFO queue.
    New { dedup_key: Option<String>, visible_at: TimeMs, size_bytes: u64 },
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
    /// Depth limits over every queue (see `RefusalCounts`).
    pub refusals: RefusalCounts,
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
                depth_bytes: q.bytes,
                refusals: q.refusals,
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
}
