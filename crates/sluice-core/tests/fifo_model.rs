//! Model-based property test of FIFO queues: random sends across a few message groups (with
//! dedup ids and bodies drawn from small pools, so that duplicates happen), receives, acks,
//! nacks, visibility changes, redrives, purges, clock advances past visibility timeouts and
//! dedup windows, and restarts from the effects "disk", run on the real `Broker` and on a
//! reference model simple enough to be obviously right (a `Vec` of messages in send order,
//! scanned linearly). After every step the two must agree on every outcome, every count and
//! every message's state.
//!
//! Beside the comparison, the FIFO contract of DESIGN.md §3 items 4–6 is checked on the
//! broker's outputs directly, so that a model sharing a mistake with the broker cannot hide it:
//! - a receive delivers, per group, a prefix of the group's messages in send order, and only
//!   from a group none of whose messages is held by an earlier, unexpired delivery;
//! - a receive that returns fewer messages than asked leaves no group able to deliver;
//! - a duplicate send creates nothing and answers with the id and sequence number of the
//!   message it matched; a new send gets a sequence number above every earlier one;
//! - nothing is delivered that was never sent, bodies come back byte-exact;
//! - `check_invariants` holds, and a broker rebuilt from the disk right now (a "shadow
//!   restart") has the same state and, probed with a receive, delivers the same messages.
//!
//! Failures are reproducible: proptest prints the shrunk operation list and records the seed in
//! `tests/proptest-regressions/fifo_model.txt`, which is replayed first on every run (keep it
//! in git). `PROPTEST_RNG_SEED=<n>` fixes the seed of the random part.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use common::Disk;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::FileFailurePersistence;
use sluice_core::attributes::DedupScope;
use sluice_core::{
    Broker, BrokerError, DeadLetter, EntryError, MessageId, MessageState, NewMessage, QueueAttributes,
    QueueAttributesPatch, QueueId, Receipt, TimeMs,
};

/// The FIFO queue under test and its (FIFO) dead-letter queue, by index.
const NAMES: [&str; 2] = ["q.fifo", "dlq.fifo"];
const SOURCE: usize = 0;
const DLQ: usize = 1;
const GROUPS: [&str; 3] = ["g0", "g1", "g2"];
/// Small pools, so that sends repeat dedup ids and bodies.
const DEDUP_IDS: usize = 4;
const BODIES: usize = 3;

// ----- operations --------------------------------------------------------------------------

/// How a send breaks the FIFO rules, if it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bad {
    Priority,
    Delay,
    DeliverAt,
}

#[derive(Debug, Clone)]
enum Op {
    Send {
        q: usize,
        /// `None`: no group id, which a FIFO queue refuses.
        group: Option<usize>,
        /// `None`: no dedup id, so content-based dedup (or a refusal).
        dedup: Option<usize>,
        body: usize,
        bad: Option<Bad>,
    },
    Receive {
        q: usize,
        max: u32,
        vis_ms: Option<u64>,
    },
    /// `q: None` uses the queue the receipt came from; `Some` may be the other (foreign).
    Ack {
        r: Index,
        q: Option<usize>,
    },
    Vis {
        r: Index,
        q: Option<usize>,
        timeout_ms: u64,
        lenient: bool,
    },
    Nack {
        r: Index,
        q: Option<usize>,
        delay_ms: u64,
        error: bool,
    },
    /// Redrive from the dead-letter queue back to where each message came from.
    Move {
        max: u64,
    },
    Purge {
        q: usize,
    },
    /// Changes the source queue's dedup settings, default delay or dead-letter policy
    /// (`Some(None)` removes it). A lowered limit makes receives dead-letter visible messages.
    Set {
        content_based_dedup: Option<bool>,
        window_ms: Option<u64>,
        delay_ms: Option<u64>,
        max_receive_count: Option<Option<u32>>,
    },
    Advance {
        ms: u64,
    },
    Restart,
}

fn vis_ms() -> impl Strategy<Value = u64> {
    prop_oneof![1 => Just(0u64), 4 => Just(1_000u64), 2 => Just(3_000u64)]
}

fn window_ms() -> impl Strategy<Value = u64> {
    prop_oneof![Just(1_000u64), Just(5_000u64), Just(300_000u64)]
}

fn retention_ms() -> impl Strategy<Value = u64> {
    prop_oneof![1 => Just(60_000u64), 3 => Just(4 * 24 * 60 * 60 * 1000u64)]
}

/// The two queues: the dead-letter queue first (plain), then the source with random FIFO
/// settings and, usually, a dead-letter policy.
fn setup() -> impl Strategy<Value = [QueueAttributes; 2]> {
    (
        (vis_ms(), prop_oneof![3 => Just(0u64), 1 => Just(500u64)], retention_ms()),
        (window_ms(), any::<bool>(), any::<bool>()),
        proptest::option::weighted(0.75, prop_oneof![2 => Just(1u32), 1 => 2..=3u32]),
        (vis_ms(), retention_ms()),
    )
        .prop_map(
            |((vis, delay, retention), (window, content, by_group), max_receive_count, (dvis, dretention))| {
                let source = QueueAttributes {
                    fifo: true,
                    visibility_timeout_ms: vis,
                    delay_ms: delay,
                    retention_ms: retention,
                    dedup_window_ms: window,
                    content_based_dedup: content,
                    dedup_scope: if by_group { DedupScope::MessageGroup } else { DedupScope::Queue },
                    dead_letter: max_receive_count
                        .map(|n| DeadLetter { queue: NAMES[DLQ].to_string(), max_receive_count: n }),
                    ..QueueAttributes::default()
                };
                let dlq = QueueAttributes {
                    fifo: true,
                    visibility_timeout_ms: dvis,
                    retention_ms: dretention,
                    ..QueueAttributes::default()
                };
                [source, dlq]
            },
        )
}

fn op() -> impl Strategy<Value = Op> {
    let q = || prop_oneof![5 => Just(SOURCE), 1 => Just(DLQ)];
    let other_q = || proptest::option::weighted(0.1, 0..NAMES.len());
    prop_oneof![
        12 => (
            q(),
            proptest::option::weighted(0.97, 0..GROUPS.len()),
            proptest::option::weighted(0.8, 0..DEDUP_IDS),
            0..BODIES,
            proptest::option::weighted(
                0.04,
                prop_oneof![Just(Bad::Priority), Just(Bad::Delay), Just(Bad::DeliverAt)]
            ),
        )
            .prop_map(|(q, group, dedup, body, bad)| Op::Send { q, group, dedup, body, bad }),
        9 => (
            q(),
            1..=5u32,
            prop_oneof![
                3 => Just(None),
                1 => Just(Some(0u64)),
                2 => proptest::sample::select(vec![250u64, 1_000, 2_000]).prop_map(Some),
                2 => (1..4_000u64).prop_map(Some),
            ],
        )
            .prop_map(|(q, max, vis_ms)| Op::Receive { q, max, vis_ms }),
        4 => (any::<Index>(), other_q()).prop_map(|(r, q)| Op::Ack { r, q }),
        3 => (any::<Index>(), other_q(), prop_oneof![1 => Just(0u64), 3 => 1..4_000u64], proptest::bool::weighted(0.3))
            .prop_map(|(r, q, timeout_ms, lenient)| Op::Vis { r, q, timeout_ms, lenient }),
        3 => (any::<Index>(), other_q(), prop_oneof![1 => Just(0u64), 1 => 1..3_000u64], any::<bool>())
            .prop_map(|(r, q, delay_ms, error)| Op::Nack { r, q, delay_ms, error }),
        2 => (1..=4u64).prop_map(|max| Op::Move { max }),
        1 => q().prop_map(|q| Op::Purge { q }),
        2 => (
            proptest::option::weighted(0.3, any::<bool>()),
            proptest::option::weighted(0.3, window_ms()),
            proptest::option::weighted(0.3, prop_oneof![Just(0u64), Just(750u64)]),
            proptest::option::weighted(0.4, proptest::option::weighted(0.8, 1..=3u32)),
        )
            .prop_map(|(content_based_dedup, window_ms, delay_ms, max_receive_count)| Op::Set {
                content_based_dedup,
                window_ms,
                delay_ms,
                max_receive_count
            }),
        // Mostly round steps, so that the clock lands exactly on the ends of dedup windows and
        // visibility timeouts (both round too), where an off-by-one would show.
        8 => prop_oneof![
            8 => proptest::sample::select(vec![0u64, 250, 500, 1_000, 2_000, 3_000, 5_000]),
            4 => 0..2_500u64,
            2 => 2_500..12_000u64,
            1 => 20_000..70_000u64,
            1 => proptest::sample::select(vec![299_000u64, 300_000, 301_000]),
        ]
        .prop_map(|ms| Op::Advance { ms }),
        2 => Just(Op::Restart),
    ]
}

fn ops() -> impl Strategy<Value = ([QueueAttributes; 2], Vec<Op>)> {
    (setup(), proptest::collection::vec(op(), 1..120))
}

fn body_of(b: usize) -> Vec<u8> {
    format!("body-{b}").into_bytes()
}

// ----- outcomes, as both sides report them --------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Done,
    Sent {
        id: u128,
        duplicate: bool,
    },
    Purged(u64),
    Delivered(Vec<Seen>),
    Moved {
        moved: u64,
        failed: u64,
        remaining_visible: u64,
    },
    Err(String),
    /// No receipt to use yet.
    Skipped,
}

/// What a consumer learns about a delivered message.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    id: u128,
    group: String,
    receive_count: u32,
    visible_until: TimeMs,
    first_received_at: Option<TimeMs>,
    dead_letter_source: Option<String>,
    last_error: Option<String>,
}

/// One message as peek shows it, in the fields both sides can state.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    id: u128,
    state: MessageState,
    group: String,
    sent_at: TimeMs,
    receive_count: u32,
    first_received_at: Option<TimeMs>,
    dead_letter_source: Option<String>,
    last_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct QueueState {
    visible: u64,
    in_flight: u64,
    delayed: u64,
    oldest_age_ms: Option<u64>,
    dead_letter_depth: Option<u64>,
    rows: Vec<Row>,
}

fn broker_error(e: BrokerError) -> Outcome {
    Outcome::Err(match e {
        BrokerError::Invalid(v) => format!("Invalid({})", v.field),
        other => format!("{other:?}"),
    })
}

fn entry_error(e: EntryError) -> Outcome {
    Outcome::Err(match e {
        EntryError::Invalid(v) => format!("Invalid({})", v.field),
        other => format!("{other:?}"),
    })
}

fn invalid(field: &str) -> Outcome {
    Outcome::Err(format!("Invalid({field})"))
}

// ----- the reference model -----------------------------------------------------------------

#[derive(Debug, Clone)]
struct MQueue {
    attributes: QueueAttributes,
    /// Dedup keys still remembered: (group when scoped by group, dedup id or body) → the
    /// message first sent under it, and when the window ends.
    dedup: BTreeMap<(Option<String>, String), (u128, TimeMs)>,
}

#[derive(Debug, Clone)]
struct MMessage {
    id: u128,
    queue: usize,
    group: String,
    sent_at: TimeMs,
    /// When in flight, the end of the hold; otherwise when it becomes (or became) visible.
    visible_at: TimeMs,
    /// Held by a consumer. Stays true after the hold ends until the timers run, as a receive
    /// at the same instant must not hand it out again.
    in_flight: bool,
    receive_count: u32,
    first_received_at: Option<TimeMs>,
    dead_letter_source: Option<String>,
    last_error: Option<String>,
    /// The delivery whose receipt may still act on the message.
    delivery: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MReceipt {
    queue: usize,
    id: u128,
    delivery: u64,
}

#[derive(Debug, Clone)]
struct Model {
    now: TimeMs,
    queues: Vec<MQueue>,
    /// Every message of both queues in send order (ids are handed out in send order, and a
    /// message keeps its place when it changes queues).
    messages: Vec<MMessage>,
    deliveries: u64,
}

impl Model {
    fn new(attributes: &[QueueAttributes; 2]) -> Model {
        Model {
            now: 0,
            queues: attributes.iter().map(|a| MQueue { attributes: a.clone(), dedup: BTreeMap::new() }).collect(),
            messages: Vec::new(),
            deliveries: 0,
        }
    }

    fn is_visible(&self, m: &MMessage) -> bool {
        !m.in_flight && m.visible_at <= self.now
    }

    fn dead_letter_target(&self, q: usize) -> Option<(usize, u32)> {
        let dl = self.queues[q].attributes.dead_letter.as_ref()?;
        Some((NAMES.iter().position(|n| *n == dl.queue).expect("known queue"), dl.max_receive_count))
    }

    fn dead_letter(&mut self, i: usize, target: usize) {
        let now = self.now;
        let m = &mut self.messages[i];
        m.dead_letter_source = Some(NAMES[m.queue].to_string());
        m.queue = target;
        m.in_flight = false;
        m.visible_at = now;
        m.delivery = None;
    }

    /// Ends a hold: visible at `at`, or off to the dead-letter queue if out of receives.
    fn make_available(&mut self, i: usize, at: TimeMs) {
        self.messages[i].in_flight = false;
        self.messages[i].visible_at = at;
        if let Some((target, max)) = self.dead_letter_target(self.messages[i].queue)
            && self.messages[i].receive_count >= max
        {
            self.dead_letter(i, target);
        }
    }

    fn expired(&self, m: &MMessage) -> bool {
        m.sent_at + self.queues[m.queue].attributes.retention_ms <= self.now
    }

    /// The timers: retention, dedup windows, then ended holds (dead-lettering exhausted
    /// messages, which may then be past the dead-letter queue's retention).
    fn tick(&mut self) {
        let now = self.now;
        for q in &mut self.queues {
            q.dedup.retain(|_, (_, expires_at)| *expires_at > now);
        }
        let mut i = 0;
        while i < self.messages.len() {
            if self.expired(&self.messages[i]) {
                self.messages.remove(i);
                continue;
            }
            let (in_flight, visible_at) = (self.messages[i].in_flight, self.messages[i].visible_at);
            if in_flight && visible_at <= self.now {
                self.make_available(i, visible_at);
                if self.expired(&self.messages[i]) {
                    self.messages.remove(i);
                    continue;
                }
            }
            i += 1;
        }
    }

    fn send(
        &mut self,
        q: usize,
        id: u128,
        group: Option<usize>,
        dedup: Option<usize>,
        body: usize,
        bad: Option<Bad>,
    ) -> Outcome {
        let attributes = &self.queues[q].attributes;
        let Some(group) = group.map(|g| GROUPS[g].to_string()) else { return invalid("group_id") };
        match bad {
            Some(Bad::Delay | Bad::DeliverAt) => return invalid("delay_ms"),
            Some(Bad::Priority) => return invalid("priority"),
            None => {}
        }
        let dedup_id = match dedup {
            Some(d) => format!("id-{d}"),
            None if attributes.content_based_dedup => format!("body-{body}"),
            None => return invalid("dedup_id"),
        };
        let key = ((attributes.dedup_scope == DedupScope::MessageGroup).then(|| group.clone()), dedup_id);
        if let Some(&(original, expires_at)) = self.queues[q].dedup.get(&key)
            && expires_at > self.now
        {
            return Outcome::Sent { id: original, duplicate: true };
        }
        let (window_ms, delay_ms) = (attributes.dedup_window_ms, attributes.delay_ms);
        self.queues[q].dedup.insert(key, (id, self.now + window_ms));
        let visible_at = self.now + delay_ms;
        self.messages.push(MMessage {
            id,
            queue: q,
            group,
            sent_at: self.now,
            visible_at,
            in_flight: false,
            receive_count: 0,
            first_received_at: None,
            dead_letter_source: None,
            last_error: None,
            delivery: None,
        });
        Outcome::Sent { id, duplicate: false }
    }

    /// The head of the oldest-headed group of queue `q` that may deliver: none of its messages
    /// in flight, and its oldest message visible.
    fn eligible_head(&self, q: usize) -> Option<usize> {
        let busy: BTreeSet<&str> =
            self.messages.iter().filter(|m| m.queue == q && m.in_flight).map(|m| m.group.as_str()).collect();
        let mut seen = BTreeSet::new();
        for (i, m) in self.messages.iter().enumerate() {
            if m.queue != q || !seen.insert(m.group.as_str()) {
                continue;
            }
            if !busy.contains(m.group.as_str()) && self.is_visible(m) {
                return Some(i);
            }
        }
        None
    }

    /// Delivers as many consecutive visible messages of one group as it can, then goes on
    /// with the next group that may deliver; exhausted messages go to the dead-letter queue.
    fn receive(&mut self, q: usize, max: u32, vis_ms: Option<u64>) -> (Outcome, Vec<MReceipt>) {
        let vis_ms = vis_ms.unwrap_or(self.queues[q].attributes.visibility_timeout_ms);
        let mut seen = Vec::new();
        let mut receipts = Vec::new();
        let mut continuing: Option<(String, u128)> = None;
        while seen.len() < max as usize {
            let next_in_group = continuing.as_ref().and_then(|(group, last)| {
                self.messages
                    .iter()
                    .position(|m| m.queue == q && m.group == *group && m.id > *last)
                    .filter(|&i| self.is_visible(&self.messages[i]))
            });
            let Some(i) = next_in_group.or_else(|| self.eligible_head(q)) else { break };
            continuing = Some((self.messages[i].group.clone(), self.messages[i].id));
            if let Some((target, limit)) = self.dead_letter_target(q)
                && self.messages[i].receive_count >= limit
            {
                self.dead_letter(i, target);
                continue;
            }
            self.deliveries += 1;
            let now = self.now;
            let m = &mut self.messages[i];
            m.in_flight = true;
            m.visible_at = now + vis_ms;
            m.receive_count += 1;
            m.first_received_at.get_or_insert(now);
            m.delivery = Some(self.deliveries);
            seen.push(Seen {
                id: m.id,
                group: m.group.clone(),
                receive_count: m.receive_count,
                visible_until: m.visible_at,
                first_received_at: m.first_received_at,
                dead_letter_source: m.dead_letter_source.clone(),
                last_error: m.last_error.clone(),
            });
            receipts.push(MReceipt { queue: q, id: m.id, delivery: self.deliveries });
        }
        (Outcome::Delivered(seen), receipts)
    }

    fn holder(&self, q: usize, r: &MReceipt) -> Result<usize, Outcome> {
        if r.queue != q {
            return Err(Outcome::Err("ForeignReceipt".into()));
        }
        self.messages
            .iter()
            .position(|m| m.id == r.id && m.queue == r.queue && m.delivery == Some(r.delivery))
            .ok_or(Outcome::Err("StaleReceipt".into()))
    }

    fn in_flight_holder(&self, q: usize, r: &MReceipt) -> Result<usize, Outcome> {
        let i = self.holder(q, r)?;
        let m = &self.messages[i];
        if m.in_flight && m.visible_at > self.now { Ok(i) } else { Err(Outcome::Err("NotInFlight".into())) }
    }

    /// FIFO: only the current hold may ack (an expired receipt must not delete a message out
    /// of its group's turn).
    fn ack(&mut self, q: usize, r: &MReceipt) -> Outcome {
        match self.in_flight_holder(q, r) {
            Ok(i) => {
                self.messages.remove(i);
                Outcome::Done
            }
            Err(o) => o,
        }
    }

    /// FIFO queues have no lenient form (the SQS one): once a hold ended, the group may have
    /// gone to another consumer, so an expired receipt must not hide the message again. SQS
    /// answers "receipt handle has expired" there too.
    fn change_visibility(&mut self, q: usize, r: &MReceipt, timeout_ms: u64) -> Outcome {
        match self.in_flight_holder(q, r) {
            Ok(i) if timeout_ms == 0 => {
                self.make_available(i, self.now);
                Outcome::Done
            }
            Ok(i) => {
                self.messages[i].visible_at = self.now + timeout_ms;
                Outcome::Done
            }
            Err(o) => o,
        }
    }

    fn nack(&mut self, q: usize, r: &MReceipt, delay_ms: u64, error: Option<String>) -> Outcome {
        match self.in_flight_holder(q, r) {
            Ok(i) => {
                if error.is_some() {
                    self.messages[i].last_error = error;
                }
                self.make_available(i, self.now + delay_ms);
                Outcome::Done
            }
            Err(o) => o,
        }
    }

    /// Redrive from the dead-letter queue: visible messages in send order, each back to the
    /// queue it came from (messages sent to the dead-letter queue directly cannot move).
    fn move_messages(&mut self, max: u64) -> Outcome {
        let (mut plan, mut failed) = (Vec::new(), 0);
        for i in 0..self.messages.len() {
            let m = &self.messages[i];
            if m.queue != DLQ || !self.is_visible(m) {
                continue;
            }
            if plan.len() as u64 >= max {
                break;
            }
            match m.dead_letter_source.as_deref().and_then(|s| NAMES.iter().position(|n| *n == s)) {
                Some(t) if t != DLQ => plan.push((i, t)),
                _ => failed += 1,
            }
        }
        let moved = plan.len() as u64;
        for (i, target) in plan {
            let now = self.now;
            let m = &mut self.messages[i];
            m.queue = target;
            m.receive_count = 0;
            m.in_flight = false;
            m.visible_at = now;
            m.dead_letter_source = None;
            m.delivery = None;
        }
        let remaining_visible = self.messages.iter().filter(|m| m.queue == DLQ && self.is_visible(m)).count() as u64;
        Outcome::Moved { moved, failed, remaining_visible }
    }

    fn purge(&mut self, q: usize) -> Outcome {
        let before = self.messages.len();
        self.messages.retain(|m| m.queue != q);
        self.queues[q].dedup.clear();
        Outcome::Purged((before - self.messages.len()) as u64)
    }

    fn state(&self, q: usize) -> QueueState {
        let mine: Vec<&MMessage> = self.messages.iter().filter(|m| m.queue == q).collect();
        let mut rows: Vec<Row> = mine
            .iter()
            .map(|m| Row {
                id: m.id,
                state: if m.visible_at <= self.now {
                    MessageState::Visible
                } else if m.in_flight {
                    MessageState::InFlight
                } else {
                    MessageState::Delayed
                },
                group: m.group.clone(),
                sent_at: m.sent_at,
                receive_count: m.receive_count,
                first_received_at: m.first_received_at,
                dead_letter_source: m.dead_letter_source.clone(),
                last_error: m.last_error.clone(),
            })
            .collect();
        rows.sort_by_key(|r| (r.sent_at, r.id));
        let dead_letter_depth = self
            .dead_letter_target(q)
            .map(|(target, _)| self.messages.iter().filter(|m| m.queue == target).count() as u64);
        QueueState {
            visible: mine.iter().filter(|m| self.is_visible(m)).count() as u64,
            in_flight: mine.iter().filter(|m| m.in_flight).count() as u64,
            delayed: mine.iter().filter(|m| !m.in_flight && m.visible_at > self.now).count() as u64,
            oldest_age_ms: mine.iter().map(|m| self.now - m.sent_at).max(),
            dead_letter_depth,
            rows,
        }
    }
}

// ----- the broker side ---------------------------------------------------------------------

fn broker_state(broker: &Broker, id: QueueId, now: TimeMs) -> QueueState {
    let s = broker.queue_view(id, now).expect("live queue").stats;
    let rows = broker
        .peek(id, 10_000, now)
        .into_iter()
        .map(|(_, m, state)| Row {
            id: m.id.0,
            state,
            group: m.group_id.unwrap_or_default(),
            sent_at: m.sent_at,
            receive_count: m.receive_count,
            first_received_at: m.first_received_at,
            dead_letter_source: m.dead_letter_source,
            last_error: m.last_error,
        })
        .collect();
    QueueState {
        visible: s.visible,
        in_flight: s.in_flight,
        delayed: s.delayed,
        oldest_age_ms: s.oldest_age_ms,
        dead_letter_depth: s.dead_letter_depth,
        rows,
    }
}

/// A message of a queue as the FIFO checks need it, from a peek.
#[derive(Debug, Clone)]
struct Member {
    seq: u64,
    id: u128,
    group: String,
    in_flight: bool,
    visible: bool,
}

/// The messages of queue `id` by group, each group in sequence-number order.
fn groups(broker: &Broker, id: QueueId, now: TimeMs) -> BTreeMap<String, Vec<Member>> {
    let mut out: BTreeMap<String, Vec<Member>> = BTreeMap::new();
    for (seq, meta, state) in broker.peek(id, 10_000, now) {
        out.entry(meta.group_id.clone().unwrap_or_default()).or_default().push(Member {
            seq,
            id: meta.id.0,
            group: meta.group_id.clone().unwrap_or_default(),
            in_flight: meta.in_flight,
            visible: !meta.in_flight && state == MessageState::Visible,
        });
    }
    for members in out.values_mut() {
        members.sort_by_key(|m| m.seq);
    }
    out
}

/// One delivery's hold on a message, from the consumer's side.
struct Hold {
    id: u128,
    until: TimeMs,
    /// The receive that made the delivery.
    batch: u64,
}

/// Runs the broker, its disk and the model side by side.
struct Harness {
    broker: Broker,
    disk: Disk,
    model: Model,
    now: TimeMs,
    ids: [QueueId; 2],
    /// Every receipt handed out: the broker's, the model's, and the queue it came from.
    receipts: Vec<(Receipt, MReceipt, usize)>,
    /// Holds by receipt, parallel to `receipts`.
    holds: Vec<Hold>,
    next_id: u128,
    /// Receives so far, to tell one receive's deliveries from another's.
    batches: u64,
    /// Every message enqueued: its body, sequence number and queue.
    sent: HashMap<u128, (Vec<u8>, u64, usize)>,
    seq_max: u64,
}

impl Harness {
    fn new(attributes: &[QueueAttributes; 2]) -> Harness {
        let mut broker = Broker::new();
        let mut disk = Disk::default();
        // The dead-letter queue first: the source's policy names it.
        let (dlq, new) = broker.create_queue(NAMES[DLQ], attributes[DLQ].clone(), 0).expect("create dlq");
        assert!(new);
        let (source, new) = broker.create_queue(NAMES[SOURCE], attributes[SOURCE].clone(), 0).expect("create source");
        assert!(new);
        disk.apply(broker.take_effects());
        Harness {
            broker,
            disk,
            model: Model::new(attributes),
            now: 0,
            ids: [source, dlq],
            receipts: Vec::new(),
            holds: Vec::new(),
            next_id: 1,
            batches: 0,
            sent: HashMap::new(),
            seq_max: 0,
        }
    }

    fn receipt_queue(&self, r: Index, q: Option<usize>) -> Option<(usize, usize)> {
        if self.receipts.is_empty() {
            return None;
        }
        let i = r.index(self.receipts.len());
        Some((i, q.unwrap_or(self.receipts[i].2)))
    }

    fn queue_len(&self, q: usize) -> u64 {
        let s = self.broker.queue_view(self.ids[q], self.now).expect("live queue").stats;
        s.visible + s.in_flight + s.delayed
    }

    /// Applies `op` to both sides and returns (broker outcome, model outcome).
    fn apply(&mut self, op: &Op) -> (Outcome, Outcome) {
        let now = self.now;
        match *op {
            Op::Send { q, group, dedup, body, bad } => {
                let id = self.next_id;
                let expected = self.model.send(q, id, group, dedup, body, bad);
                let mut message = NewMessage {
                    body: body_of(body),
                    dedup_id: dedup.map(|d| format!("id-{d}")),
                    ..NewMessage::default()
                };
                message.envelope.group_id = group.map(|g| GROUPS[g].to_string());
                match bad {
                    Some(Bad::Priority) => message.priority = 3,
                    Some(Bad::Delay) => message.delay_ms = Some(100),
                    Some(Bad::DeliverAt) => message.deliver_at_ms = Some(now + 100),
                    None => {}
                }
                let (len_before, count_before) = (self.queue_len(q), self.broker.message_count());
                let actual = match self.broker.send(self.ids[q], &message, MessageId(id), now) {
                    Ok(sent) if sent.duplicate => {
                        // A duplicate enqueues nothing and names the message it matched.
                        assert_eq!(self.queue_len(q), len_before, "a duplicate send enqueued something");
                        assert_eq!(self.broker.message_count(), count_before, "a duplicate send created a message");
                        let original = self.sent.get(&sent.id.0);
                        assert!(original.is_some(), "a duplicate answered with m{}, never enqueued", sent.id.0);
                        let (_, seq, queue) = original.expect("checked");
                        assert_eq!((*seq, *queue), (sent.seq, q), "the duplicate's answer for m{}", sent.id.0);
                        Outcome::Sent { id: sent.id.0, duplicate: true }
                    }
                    Ok(sent) => {
                        assert_eq!(sent.id.0, id, "a new message keeps the id it was sent with");
                        assert!(sent.seq > self.seq_max, "m{id} got seq {} after seq {}", sent.seq, self.seq_max);
                        self.seq_max = sent.seq;
                        assert_eq!(self.queue_len(q), len_before + 1, "a new send enqueued one message");
                        self.disk.put_body(sent.seq, &message.body);
                        self.sent.insert(id, (message.body.clone(), sent.seq, q));
                        self.next_id += 1;
                        Outcome::Sent { id, duplicate: false }
                    }
                    Err(e) => entry_error(e),
                };
                (actual, expected)
            }
            Op::Receive { q, max, vis_ms } => {
                let (expected, model_receipts) = self.model.receive(q, max, vis_ms);
                let id = self.ids[q];
                let before = groups(&self.broker, id, now);
                let deliveries = self.broker.receive(id, max, vis_ms, now);
                self.batches += 1;
                let after = groups(&self.broker, id, now);
                self.check_receive(q, max, &before, &after, &deliveries);
                let mut seen = Vec::new();
                for (k, d) in deliveries.iter().enumerate() {
                    seen.push(Seen {
                        id: d.meta.id.0,
                        group: d.meta.group_id.clone().unwrap_or_default(),
                        receive_count: d.meta.receive_count,
                        visible_until: d.meta.visible_at,
                        first_received_at: d.meta.first_received_at,
                        dead_letter_source: d.meta.dead_letter_source.clone(),
                        last_error: d.meta.last_error.clone(),
                    });
                    if let Some(mr) = model_receipts.get(k) {
                        self.receipts.push((d.receipt, *mr, q));
                        self.holds.push(Hold { id: d.meta.id.0, until: d.meta.visible_at, batch: self.batches });
                    }
                }
                (Outcome::Delivered(seen), expected)
            }
            Op::Ack { r, q } => {
                let Some((i, q)) = self.receipt_queue(r, q) else { return (Outcome::Skipped, Outcome::Skipped) };
                let (receipt, mr, _) = self.receipts[i];
                let expected = self.model.ack(q, &mr);
                let actual = self.broker.ack(self.ids[q], &receipt, now).map_or_else(entry_error, |()| Outcome::Done);
                if actual == Outcome::Done {
                    let id = self.holds[i].id;
                    self.holds.iter_mut().filter(|h| h.id == id).for_each(|h| h.until = h.until.min(now));
                }
                (actual, expected)
            }
            Op::Vis { r, q, timeout_ms, lenient } => {
                let Some((i, q)) = self.receipt_queue(r, q) else { return (Outcome::Skipped, Outcome::Skipped) };
                let (receipt, mr, _) = self.receipts[i];
                let expected = self.model.change_visibility(q, &mr, timeout_ms);
                let actual = if lenient {
                    self.broker.change_visibility_lenient(self.ids[q], &receipt, timeout_ms, now)
                } else {
                    self.broker.change_visibility(self.ids[q], &receipt, timeout_ms, now)
                }
                .map_or_else(entry_error, |()| Outcome::Done);
                if actual == Outcome::Done {
                    self.holds[i].until = now + timeout_ms;
                }
                (actual, expected)
            }
            Op::Nack { r, q, delay_ms, error } => {
                let Some((i, q)) = self.receipt_queue(r, q) else { return (Outcome::Skipped, Outcome::Skipped) };
                let (receipt, mr, _) = self.receipts[i];
                let error = error.then(|| format!("error-{i}"));
                let expected = self.model.nack(q, &mr, delay_ms, error.clone());
                let actual = self
                    .broker
                    .nack(self.ids[q], &receipt, delay_ms, error, now)
                    .map_or_else(entry_error, |()| Outcome::Done);
                if actual == Outcome::Done {
                    self.holds[i].until = now;
                }
                (actual, expected)
            }
            Op::Move { max } => {
                let expected = self.model.move_messages(max);
                let actual = match self.broker.move_messages(NAMES[DLQ], None, max, now) {
                    Ok(o) => {
                        Outcome::Moved { moved: o.moved, failed: o.failed, remaining_visible: o.remaining_visible }
                    }
                    Err(e) => broker_error(e),
                };
                (actual, expected)
            }
            Op::Purge { q } => {
                let expected = self.model.purge(q);
                let actual = self.broker.purge_queue(NAMES[q]).map_or_else(broker_error, Outcome::Purged);
                (actual, expected)
            }
            Op::Set { content_based_dedup, window_ms, delay_ms, max_receive_count } => {
                let dead_letter = max_receive_count
                    .map(|policy| policy.map(|n| DeadLetter { queue: NAMES[DLQ].to_string(), max_receive_count: n }));
                let patch = QueueAttributesPatch {
                    content_based_dedup,
                    dedup_window_ms: window_ms,
                    delay_ms,
                    dead_letter,
                    ..QueueAttributesPatch::default()
                };
                let actual =
                    self.broker.update_queue(NAMES[SOURCE], &patch, now).map_or_else(broker_error, |_| Outcome::Done);
                let attributes = &mut self.model.queues[SOURCE].attributes;
                *attributes = attributes.apply(&patch);
                (actual, Outcome::Done)
            }
            Op::Advance { ms } => {
                self.now += ms;
                self.model.now = self.now;
                self.broker.tick(self.now);
                self.model.tick();
                (Outcome::Done, Outcome::Done)
            }
            Op::Restart => {
                self.broker = self.disk.restore(self.now);
                self.model.tick();
                (Outcome::Done, Outcome::Done)
            }
        }
    }

    /// The FIFO contract of one receive, from the broker's outputs and the consumer's holds
    /// alone: per group, a prefix of its messages in send order, from a group nobody holds.
    fn check_receive(
        &self,
        q: usize,
        max: u32,
        before: &BTreeMap<String, Vec<Member>>,
        after: &BTreeMap<String, Vec<Member>>,
        deliveries: &[sluice_core::broker::Delivery],
    ) {
        let now = self.now;
        let remaining: BTreeSet<u128> = after.values().flatten().map(|m| m.id).collect();
        let delivered: BTreeSet<u128> = deliveries.iter().map(|d| d.meta.id.0).collect();
        let mut by_group: BTreeMap<String, Vec<u128>> = BTreeMap::new();
        for d in deliveries {
            let id = d.meta.id.0;
            let (body, seq, _) = self.sent.get(&id).unwrap_or_else(|| panic!("delivered m{id}, which was never sent"));
            assert_eq!(d.seq, *seq, "m{id} delivered under another sequence number");
            assert_eq!(d.receipt.seq, d.seq, "receipt names the delivered message");
            assert_eq!(self.disk.bodies.get(seq), Some(body), "body of m{id}");
            if let Some(k) = self.receipts.iter().position(|(r, _, _)| *r == d.receipt) {
                panic!("delivery of m{id} got receipt {:?}, already given to delivery {k}", d.receipt);
            }
            by_group.entry(d.meta.group_id.clone().unwrap_or_default()).or_default().push(id);
        }
        for (group, got) in &by_group {
            let members = before.get(group).map(Vec::as_slice).unwrap_or_default();
            // Messages this receive moved to the dead-letter queue are skipped, not delivered.
            let order: Vec<u128> =
                members.iter().map(|m| m.id).filter(|id| remaining.contains(id) || delivered.contains(id)).collect();
            assert!(
                order.starts_with(got),
                "{} group {group}: delivered {got:?}, but its messages in send order are {order:?}",
                NAMES[q]
            );
            for m in members {
                for h in &self.holds {
                    assert!(
                        !(h.id == m.id && h.until > now),
                        "{} group {group}: delivered {got:?} while m{} is held until {}",
                        NAMES[q],
                        m.id,
                        h.until
                    );
                }
            }
        }
        // Other groups are not held up: a short receive leaves no group able to deliver.
        if deliveries.len() < max as usize {
            for (group, members) in after {
                let busy = members.iter().any(|m| m.in_flight);
                assert!(
                    busy || !members[0].visible,
                    "{} group {group} could deliver m{} but the receive stopped at {} of {max}",
                    NAMES[q],
                    members[0].id,
                    deliveries.len()
                );
                debug_assert_eq!(members[0].group, *group);
            }
        }
    }

    /// Compares the whole state with the model and checks the contract on it.
    fn check_state(&mut self, step: usize, op: &Op) {
        let now = self.now;
        self.broker.check_invariants(now);
        let effects = self.broker.take_effects();
        self.disk.apply(effects);
        let mut count = 0;
        for (q, name) in NAMES.iter().enumerate() {
            let actual = broker_state(&self.broker, self.ids[q], now);
            let expected = self.model.state(q);
            assert_eq!(actual, expected, "queue {name} after step {step} {op:?}");
            count += actual.rows.len();
        }
        assert_eq!(count, self.broker.message_count(), "messages outside every queue");
        for (k, h) in self.holds.iter().enumerate() {
            let others = self.holds.iter().filter(|o| o.id == h.id && o.until > now).count();
            assert!(others <= 1, "m{} held by {others} unexpired deliveries (one is receipt {k})", h.id);
        }
        // At most one receive's deliveries of a group are held at any time.
        for (q, name) in NAMES.iter().enumerate() {
            for (group, members) in groups(&self.broker, self.ids[q], now) {
                let ids: BTreeSet<u128> = members.iter().map(|m| m.id).collect();
                let batches: BTreeSet<u64> =
                    self.holds.iter().filter(|h| h.until > now && ids.contains(&h.id)).map(|h| h.batch).collect();
                assert!(
                    batches.len() <= 1,
                    "{name} group {group} is held by the deliveries of receives {batches:?} after step {step} {op:?}"
                );
            }
        }
        self.shadow_restart(step, op);
    }

    /// A broker rebuilt from the disk right now must be in the state the live broker reaches
    /// once its due timers have run, and a receive on either (and on the model) must deliver
    /// the same messages: that probes the group indexes, which the counts do not show.
    fn shadow_restart(&self, step: usize, op: &Op) {
        let now = self.now;
        let mut live = self.broker.clone();
        live.tick(now);
        let mut restored = self.disk.clone().restore(now);
        for (q, name) in NAMES.iter().enumerate() {
            let id = self.ids[q];
            assert_eq!(
                live.queue_view(id, now),
                restored.queue_view(id, now),
                "queue {name} after a restart at step {step} {op:?}"
            );
            assert_eq!(
                live.peek(id, 10_000, now),
                restored.peek(id, 10_000, now),
                "messages of {name} after a restart at step {step} {op:?}"
            );
        }
        let mut model = self.model.clone();
        model.tick();
        for (q, name) in NAMES.iter().enumerate() {
            let id = self.ids[q];
            let ids = |ds: Vec<sluice_core::broker::Delivery>| ds.iter().map(|d| d.meta.id.0).collect::<Vec<_>>();
            let a = ids(live.receive(id, 1_000, Some(1), now));
            let b = ids(restored.receive(id, 1_000, Some(1), now));
            let Outcome::Delivered(m) = model.receive(q, 1_000, Some(1)).0 else { unreachable!() };
            let m: Vec<u128> = m.iter().map(|s| s.id).collect();
            assert_eq!(a, m, "a receive of everything from {name} after step {step} {op:?}");
            assert_eq!(b, m, "a receive of everything from {name} after a restart at step {step} {op:?}");
        }
    }
}

fn run(attributes: &[QueueAttributes; 2], ops: &[Op]) {
    let mut h = Harness::new(attributes);
    for (step, op) in ops.iter().enumerate() {
        let (actual, expected) = h.apply(op);
        assert_eq!(actual, expected, "outcome of step {step} {op:?} at now={}", h.now);
        h.check_state(step, op);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("tests/proptest-regressions/fifo_model.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn fifo_broker_matches_model((attributes, ops) in ops()) {
        run(&attributes, &ops);
    }
}
