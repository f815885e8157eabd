//! One queue's scheduling indexes: which messages are ready (by priority, then send order),
//! which wait on a timer (delays and visibility timeouts), and how old each is (retention).
//!
//! The indexes hold sequence numbers; the metadata itself lives in the broker's message map so
//! that a message can change queues (dead-lettering, redrive) without being copied.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashSet};

use crate::TimeMs;
use crate::attributes::QueueAttributes;
use crate::message::MessageMeta;

#[derive(Debug, Clone)]
pub struct Queue {
    pub id: u64,
    pub name: String,
    pub attributes: QueueAttributes,
    pub created_at: TimeMs,
    /// When the attributes last changed (creation counts).
    pub modified_at: TimeMs,
    /// Every message in the queue, whatever its state.
    pub(crate) members: HashSet<u64>,
    /// Visible messages: highest priority first, then lowest sequence (send order).
    pub(crate) ready: BTreeSet<(Reverse<u8>, u64)>,
    /// Delayed and in-flight messages by the time they become visible.
    pub(crate) timers: BTreeSet<(TimeMs, u64)>,
    /// Every message by the time it was first sent, for retention and the oldest age.
    pub(crate) by_age: BTreeSet<(TimeMs, u64)>,
    pub(crate) in_flight: usize,
}

impl Queue {
    pub fn new(id: u64, name: String, attributes: QueueAttributes, created_at: TimeMs, modified_at: TimeMs) -> Queue {
        Queue {
            id,
            name,
            attributes,
            created_at,
            modified_at,
            members: HashSet::new(),
            ready: BTreeSet::new(),
            timers: BTreeSet::new(),
            by_age: BTreeSet::new(),
            in_flight: 0,
        }
    }

    /// Adds `seq` to the indexes that match `meta` as seen at `now_ms`.
    pub(crate) fn insert(&mut self, seq: u64, meta: &MessageMeta, now_ms: TimeMs) {
        let fresh = self.members.insert(seq);
        debug_assert!(fresh, "message {seq} inserted twice into queue {}", self.id);
        self.by_age.insert((meta.sent_at, seq));
        self.index(seq, meta, now_ms);
    }

    /// Puts `seq` into `ready` or `timers` according to `meta`; it must be in neither.
    pub(crate) fn index(&mut self, seq: u64, meta: &MessageMeta, now_ms: TimeMs) {
        // An in-flight message always waits on its timer, even one already due: only `tick`
        // ends a hold, so that the dead-letter policy is applied in one place.
        if meta.in_flight || meta.visible_at > now_ms {
            self.timers.insert((meta.visible_at, seq));
            if meta.in_flight {
                self.in_flight += 1;
            }
        } else {
            self.ready.insert((Reverse(meta.priority), seq));
        }
    }

    /// Takes `seq` out of `ready` or `timers`, as indexed for `meta`.
    pub(crate) fn unindex(&mut self, seq: u64, meta: &MessageMeta) {
        if self.ready.remove(&(Reverse(meta.priority), seq)) {
            return;
        }
        let removed = self.timers.remove(&(meta.visible_at, seq));
        assert!(removed, "message {seq} missing from the indexes of queue {}", self.id);
        if meta.in_flight {
            self.in_flight -= 1;
        }
    }

    pub(crate) fn remove(&mut self, seq: u64, meta: &MessageMeta) {
        self.unindex(seq, meta);
        self.by_age.remove(&(meta.sent_at, seq));
        self.members.remove(&seq);
    }

    /// The earliest time something in this queue changes by itself: a timer firing or the
    /// oldest message passing retention.
    pub(crate) fn next_due(&self) -> Option<TimeMs> {
        let timer = self.timers.first().map(|(t, _)| *t);
        let expiry = self.by_age.first().map(|(t, _)| t.saturating_add(self.attributes.retention_ms));
        match (timer, expiry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn visible_count(&self) -> usize {
        self.ready.len()
    }

    pub fn in_flight_count(&self) -> usize {
        self.in_flight
    }

    pub fn delayed_count(&self) -> usize {
        self.timers.len() - self.in_flight
    }

    pub fn oldest_sent_at(&self) -> Option<TimeMs> {
        self.by_age.first().map(|(t, _)| *t)
    }
}
