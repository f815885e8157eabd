//! One queue's scheduling indexes: which messages are ready (by priority, then send order),
//! which wait on a timer (delays and visibility timeouts), and how old each is (retention).
//!
//! The indexes hold sequence numbers; the metadata itself lives in the broker's message map so
//! that a message can change queues (dead-lettering, redrive) without being copied.
//!
//! A standard queue schedules fairly across message groups (fair queues): within the highest
//! priority that has visible messages, the group served least recently goes first, and a group
//! with nothing visible is forgotten, so a quiet group's next message is served next however
//! long a noisy group's backlog is. Messages without a group form one group of their own; a
//! queue without groups therefore delivers by priority, then send order.
//!
//! A FIFO queue also keeps its message groups: a group may deliver only while none of its
//! messages is in flight and its oldest message is visible, and then from that oldest message
//! on, so order within a group is send order and a failing head blocks only its own group.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet};

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
    /// FIFO queues only: message groups and which of them may deliver now.
    pub(crate) fifo: FifoIndex,
    /// Standard queues only: fair scheduling across message groups.
    pub(crate) fair: FairIndex,
    /// FIFO queues only: deduplication keys still inside their window.
    pub(crate) dedup: HashMap<String, DedupEntry>,
    pub(crate) dedup_expiry: BTreeSet<(TimeMs, String)>,
    /// The bytes of every member (`MessageMeta::size_bytes`), for `max_depth_bytes`.
    pub(crate) bytes: u64,
    /// What the queue's limits refused or moved since the broker was built (not persisted).
    pub(crate) refusals: crate::overflow::RefusalCounts,
    /// The `rate_limit` bucket (in memory: a restart starts it full).
    pub(crate) bucket: Option<crate::rate::Bucket>,
}

/// A send remembered for deduplication: a later send with the same key inside the window is
/// answered with this message's id and enqueues nothing, even after the message was deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DedupEntry {
    pub id: crate::MessageId,
    pub seq: u64,
    pub expires_at: TimeMs,
}

/// Fair scheduling of a standard queue's visible messages (see the module docs).
#[derive(Debug, Clone, Default)]
pub(crate) struct FairIndex {
    /// Per priority, highest first: each group's visible messages, and the groups in the order
    /// they should be served.
    lanes: std::collections::BTreeMap<Reverse<u8>, Lane>,
    /// When each group with visible messages was last served (0: not since it had a backlog).
    last_served: HashMap<String, u64>,
    clock: u64,
}

#[derive(Debug, Clone, Default)]
struct Lane {
    groups: HashMap<String, BTreeSet<u64>>,
    order: BTreeSet<(u64, String)>,
}

impl FairIndex {
    fn insert(&mut self, priority: u8, group: &str, seq: u64) {
        let served = *self.last_served.entry(group.to_string()).or_insert(0);
        let lane = self.lanes.entry(Reverse(priority)).or_default();
        let seqs = lane.groups.entry(group.to_string()).or_default();
        if seqs.is_empty() {
            lane.order.insert((served, group.to_string()));
        }
        seqs.insert(seq);
    }

    fn remove(&mut self, priority: u8, group: &str, seq: u64) {
        let Some(lane) = self.lanes.get_mut(&Reverse(priority)) else { return };
        let Some(seqs) = lane.groups.get_mut(group) else { return };
        seqs.remove(&seq);
        if seqs.is_empty() {
            lane.groups.remove(group);
            let served = self.last_served.get(group).copied().unwrap_or(0);
            lane.order.remove(&(served, group.to_string()));
            if lane.groups.is_empty() {
                self.lanes.remove(&Reverse(priority));
            }
            if !self.lanes.values().any(|l| l.groups.contains_key(group)) {
                self.last_served.remove(group);
            }
        }
    }

    fn next(&self) -> Option<u64> {
        let lane = self.lanes.values().next()?;
        let (_, group) = lane.order.first()?;
        lane.groups[group].first().copied()
    }

    /// Records that `group` was just served, moving it behind every other group.
    fn served(&mut self, group: &str) {
        let Some(old) = self.last_served.get(group).copied() else { return };
        self.clock += 1;
        let now = self.clock;
        self.last_served.insert(group.to_string(), now);
        for lane in self.lanes.values_mut() {
            if lane.order.remove(&(old, group.to_string())) {
                lane.order.insert((now, group.to_string()));
            }
        }
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct FifoIndex {
    groups: HashMap<String, FifoGroup>,
    /// Groups that may deliver now, by the sequence number of their oldest message.
    eligible: BTreeSet<(u64, String)>,
}

#[derive(Debug, Clone, Default)]
struct FifoGroup {
    /// Every message of the group, whatever its state, in send order.
    members: BTreeSet<u64>,
    in_flight: usize,
    /// The key under which the group sits in `eligible`, if it does.
    eligible_at: Option<u64>,
}

/// The group a message of a FIFO queue belongs to (messages without one share the empty group).
fn group_of(meta: &MessageMeta) -> &str {
    meta.group_id.as_deref().unwrap_or("")
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
            fifo: FifoIndex::default(),
            fair: FairIndex::default(),
            dedup: HashMap::new(),
            dedup_expiry: BTreeSet::new(),
            bytes: 0,
            refusals: Default::default(),
            bucket: None,
        }
    }

    pub fn is_fifo(&self) -> bool {
        self.attributes.fifo
    }

    /// The ready-set key of a message: priority first on standard queues; FIFO queues order by
    /// sequence alone.
    fn ready_key(&self, seq: u64, meta: &MessageMeta) -> (Reverse<u8>, u64) {
        (Reverse(if self.is_fifo() { 0 } else { meta.priority }), seq)
    }

    /// Re-decides whether `group` may deliver: no message in flight and its oldest visible.
    fn refresh_group(&mut self, group: &str) {
        let Some(g) = self.fifo.groups.get_mut(group) else { return };
        if let Some(head) = g.eligible_at.take() {
            self.fifo.eligible.remove(&(head, group.to_string()));
        }
        if g.members.is_empty() {
            self.fifo.groups.remove(group);
            return;
        }
        let head = *g.members.first().expect("non-empty group");
        if g.in_flight == 0 && self.ready.contains(&(Reverse(0), head)) {
            g.eligible_at = Some(head);
            self.fifo.eligible.insert((head, group.to_string()));
        }
    }

    /// The next message a receive should take. On a FIFO queue, `continuing` is the group and
    /// sequence of the message this receive took last: the group's next message comes next if
    /// it is visible, so that one receive returns as many messages of one group as it can.
    pub(crate) fn next_ready(&self, continuing: Option<(&str, u64)>) -> Option<u64> {
        if !self.is_fifo() {
            return self.fair.next();
        }
        if let Some((group, last)) = continuing
            && let Some(g) = self.fifo.groups.get(group)
            && let Some(&next) = g.members.range(last + 1..).next()
            && self.ready.contains(&(Reverse(0), next))
        {
            return Some(next);
        }
        self.fifo.eligible.first().map(|(head, _)| *head)
    }

    /// Adds `seq` to the indexes that match `meta` as seen at `now_ms`.
    pub(crate) fn insert(&mut self, seq: u64, meta: &MessageMeta, now_ms: TimeMs) {
        let fresh = self.members.insert(seq);
        debug_assert!(fresh, "message {seq} inserted twice into queue {}", self.id);
        self.bytes += meta.size_bytes;
        self.by_age.insert((meta.sent_at, seq));
        if self.is_fifo() {
            self.fifo.groups.entry(group_of(meta).to_string()).or_default().members.insert(seq);
        }
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
            self.ready.insert(self.ready_key(seq, meta));
            if !self.is_fifo() {
                self.fair.insert(meta.priority, group_of(meta), seq);
            }
        }
        if self.is_fifo() {
            if meta.in_flight {
                self.fifo.groups.get_mut(group_of(meta)).expect("group of a member").in_flight += 1;
            }
            self.refresh_group(group_of(meta));
        }
    }

    /// Takes `seq` out of `ready` or `timers`, as indexed for `meta`.
    pub(crate) fn unindex(&mut self, seq: u64, meta: &MessageMeta) {
        if self.ready.remove(&self.ready_key(seq, meta)) {
            if !self.is_fifo() {
                self.fair.remove(meta.priority, group_of(meta), seq);
            }
        } else {
            let removed = self.timers.remove(&(meta.visible_at, seq));
            assert!(removed, "message {seq} missing from the indexes of queue {}", self.id);
            if meta.in_flight {
                self.in_flight -= 1;
                if self.is_fifo() {
                    self.fifo.groups.get_mut(group_of(meta)).expect("group of a member").in_flight -= 1;
                }
            }
        }
        if self.is_fifo() {
            self.refresh_group(group_of(meta));
        }
    }

    pub(crate) fn remove(&mut self, seq: u64, meta: &MessageMeta) {
        self.unindex(seq, meta);
        self.by_age.remove(&(meta.sent_at, seq));
        if self.members.remove(&seq) {
            self.bytes -= meta.size_bytes;
        }
        if self.is_fifo() {
            if let Some(g) = self.fifo.groups.get_mut(group_of(meta)) {
                g.members.remove(&seq);
            }
            self.refresh_group(group_of(meta));
        }
    }

    /// The earliest time something in this queue changes by itself: a timer firing or the
    /// oldest message passing retention.
    pub(crate) fn next_due(&self) -> Option<TimeMs> {
        let timer = self.timers.first().map(|(t, _)| *t);
        let expiry = self.by_age.first().map(|(t, _)| t.saturating_add(self.attributes.retention_ms));
        let dedup = self.dedup_expiry.first().map(|(t, _)| *t);
        [timer, expiry, dedup].into_iter().flatten().min()
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

    /// Checks the fair index against the ready set (tests and invariant checks).
    pub(crate) fn check_fair(&self) {
        if self.is_fifo() {
            return;
        }
        let indexed: usize = self.fair.lanes.values().flat_map(|l| l.groups.values()).map(BTreeSet::len).sum();
        assert_eq!(indexed, self.ready.len(), "fair index of queue {} disagrees with the ready set", self.id);
        for lane in self.fair.lanes.values() {
            assert_eq!(lane.order.len(), lane.groups.len(), "fair order of queue {}", self.id);
        }
    }

    /// Standard queues: records that a receive just served `meta`'s group.
    pub(crate) fn served(&mut self, meta: &MessageMeta) {
        if !self.is_fifo() {
            self.fair.served(group_of(meta));
        }
    }

    /// FIFO queues: whether some group may deliver now.
    pub(crate) fn has_eligible_group(&self) -> bool {
        !self.fifo.eligible.is_empty()
    }

    /// FIFO queues: how many message groups hold messages.
    pub fn group_count(&self) -> usize {
        self.fifo.groups.len()
    }

    pub fn oldest_sent_at(&self) -> Option<TimeMs> {
        self.by_age.first().map(|(t, _)| *t)
    }
}
