//! Model-based property test of the queue state machine: random operation sequences run on the
//! real `Broker` and on a reference model simple enough to be obviously right (a `Vec` of
//! messages, scanned linearly), and after every step the two must agree on every outcome,
//! every queue's counts and every message's state.
//!
//! Beside the comparison, the contract of DESIGN.md §3 is checked on the broker's outputs
//! directly, so that a model sharing a mistake with the broker still cannot hide a breach:
//! no message is held by two unexpired deliveries, every receipt differs from every earlier one,
//! a message sits in exactly one queue, nothing is delivered that was not sent (or after it was
//! gone), bodies come back byte-exact, and no sequence number or queue id is handed out twice.
//! A "shadow restart" after every step (rebuilding a broker from the effects written so far)
//! must give the same state as the live broker, which catches a missing or wrong effect at the
//! step that forgot it.
//!
//! Failures are reproducible: proptest prints the shrunk operation list and records the seed in
//! `tests/proptest-regressions/model.txt`, which is replayed first on every run (keep it in
//! git). `PROPTEST_RNG_SEED=<n>` fixes the seed of the random part.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use common::Disk;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::FileFailurePersistence;
use sluice_core::limits::RECEIVE_BYTES_MAX;
use sluice_core::{
    Broker, BrokerError, DeadLetter, EntryError, MessageId, MessageState, NewMessage, QueueAttributes, QueueId,
    Receipt, TimeMs,
};

const NAMES: [&str; 3] = ["a", "b", "c"];
/// Small, so that some sends are refused as too large.
const MESSAGE_BYTES_MAX: u64 = 100;

// ----- operations --------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    Create {
        q: usize,
        vis_ms: u64,
        retention_ms: u64,
        dead_letter: Option<(usize, u32)>,
    },
    Delete {
        q: usize,
    },
    Send {
        q: usize,
        priority: u8,
        delay_ms: Option<u64>,
        size: u64,
    },
    Receive {
        q: usize,
        max: u32,
        vis_ms: Option<u64>,
    },
    /// `q: None` uses the queue the receipt came from; `Some` may be any queue (foreign receipts).
    Ack {
        r: Index,
        q: Option<usize>,
    },
    /// `lenient`: the SQS form, which also re-hides a message whose hold ended unreceived.
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
    Move {
        from: usize,
        to: Option<usize>,
        max: u64,
    },
    Purge {
        q: usize,
    },
    Advance {
        ms: u64,
    },
    Restart,
}

fn vis_ms() -> impl Strategy<Value = u64> {
    prop_oneof![1 => Just(0u64), 4 => Just(1_000u64), 2 => Just(3_000u64)]
}

fn max_receive_count() -> impl Strategy<Value = u32> {
    prop_oneof![2 => Just(1u32), 1 => 2..=3u32]
}

fn retention_ms() -> impl Strategy<Value = u64> {
    prop_oneof![Just(60_000u64), Just(600_000u64)]
}

/// Any create, including ones that must fail (a dead-letter queue that is missing or is the
/// queue itself, different attributes for an existing name).
fn create_op() -> impl Strategy<Value = Op> {
    (0..NAMES.len(), vis_ms(), retention_ms(), proptest::option::weighted(0.6, (0..NAMES.len(), max_receive_count())))
        .prop_map(|(q, vis_ms, retention_ms, dead_letter)| Op::Create { q, vis_ms, retention_ms, dead_letter })
}

/// Creates that succeed, so that most of a sequence works on queues: `c` first, then `b`
/// (maybe dead-lettering to `c`), then `a` (maybe dead-lettering to `b` or `c`).
fn setup() -> impl Strategy<Value = Vec<Op>> {
    (
        (vis_ms(), retention_ms()),
        (vis_ms(), retention_ms(), proptest::option::weighted(0.7, (Just(2usize), max_receive_count()))),
        (vis_ms(), retention_ms(), proptest::option::weighted(0.8, (1..=2usize, max_receive_count()))),
    )
        .prop_map(|((v2, r2), (v1, r1, d1), (v0, r0, d0))| {
            vec![
                Op::Create { q: 2, vis_ms: v2, retention_ms: r2, dead_letter: None },
                Op::Create { q: 1, vis_ms: v1, retention_ms: r1, dead_letter: d1 },
                Op::Create { q: 0, vis_ms: v0, retention_ms: r0, dead_letter: d0 },
            ]
        })
}

fn op() -> impl Strategy<Value = Op> {
    let q = || 0..NAMES.len();
    let other_q = || proptest::option::weighted(0.15, 0..NAMES.len());
    prop_oneof![
        2 => create_op(),
        1 => q().prop_map(|q| Op::Delete { q }),
        8 => (
            q(),
            prop_oneof![3 => Just(0u8), 2 => 1..=2u8, 1 => 3..=9u8],
            prop_oneof![3 => Just(None), 1 => Just(Some(0u64)), 2 => (1..3_000u64).prop_map(Some)],
            prop_oneof![12 => 1..=MESSAGE_BYTES_MAX, 1 => (MESSAGE_BYTES_MAX + 1)..=(MESSAGE_BYTES_MAX + 20)],
        )
            .prop_map(|(q, priority, delay_ms, size)| Op::Send { q, priority, delay_ms, size }),
        8 => (
            q(),
            1..=4u32,
            prop_oneof![3 => Just(None), 1 => Just(Some(0u64)), 3 => (1..4_000u64).prop_map(Some)],
        )
            .prop_map(|(q, max, vis_ms)| Op::Receive { q, max, vis_ms }),
        4 => (any::<Index>(), other_q()).prop_map(|(r, q)| Op::Ack { r, q }),
        3 => (any::<Index>(), other_q(), prop_oneof![1 => Just(0u64), 3 => 1..4_000u64], proptest::bool::weighted(0.3))
            .prop_map(|(r, q, timeout_ms, lenient)| Op::Vis { r, q, timeout_ms, lenient }),
        3 => (any::<Index>(), other_q(), prop_oneof![1 => Just(0u64), 1 => 1..3_000u64], any::<bool>())
            .prop_map(|(r, q, delay_ms, error)| Op::Nack { r, q, delay_ms, error }),
        3 => (q(), proptest::option::weighted(0.4, q()), 1..=4u64).prop_map(|(from, to, max)| Op::Move { from, to, max }),
        1 => q().prop_map(|q| Op::Purge { q }),
        7 => prop_oneof![10 => 0..2_500u64, 1 => 20_000..70_000u64].prop_map(|ms| Op::Advance { ms }),
        2 => Just(Op::Restart),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    (setup(), proptest::collection::vec(op(), 1..100)).prop_map(|(mut ops, rest)| {
        ops.extend(rest);
        ops
    })
}

fn attributes(vis_ms: u64, retention_ms: u64, dead_letter: Option<(usize, u32)>) -> QueueAttributes {
    QueueAttributes {
        visibility_timeout_ms: vis_ms,
        retention_ms,
        message_bytes_max: MESSAGE_BYTES_MAX,
        dead_letter: dead_letter.map(|(q, n)| DeadLetter { queue: NAMES[q].to_string(), max_receive_count: n }),
        ..QueueAttributes::default()
    }
}

// ----- outcomes, as both sides report them --------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Created {
        new: bool,
    },
    Done,
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
    priority: u8,
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
    priority: u8,
    sent_at: TimeMs,
    receive_count: u32,
    first_received_at: Option<TimeMs>,
    dead_letter_source: Option<String>,
    last_error: Option<String>,
}

/// A queue's counts and contents.
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
        BrokerError::QueueNotFound(_) => "QueueNotFound".into(),
        BrokerError::QueueExists(_) => "QueueExists".into(),
        BrokerError::DeadLetterQueueNotFound(_) => "DeadLetterQueueNotFound".into(),
        other => format!("{other:?}"),
    })
}

fn entry_error(e: EntryError) -> Outcome {
    Outcome::Err(match e {
        EntryError::Invalid(v) => format!("Invalid({})", v.field),
        EntryError::MessageTooLarge { .. } => "MessageTooLarge".into(),
        other => format!("{other:?}"),
    })
}

fn not_found() -> Outcome {
    Outcome::Err("QueueNotFound".into())
}

// ----- the reference model -----------------------------------------------------------------

#[derive(Debug, Clone)]
struct MQueue {
    /// Never reused, unlike names: a queue deleted and created again is another incarnation.
    incarnation: u64,
    attributes: QueueAttributes,
}

#[derive(Debug, Clone)]
struct MMessage {
    id: u128,
    queue: u64,
    priority: u8,
    size: u64,
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
    /// The delivery whose receipt may still act on the message: the latest receive, until the
    /// message is received again or moved to another queue (or back).
    delivery: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MReceipt {
    queue: u64,
    id: u128,
    delivery: u64,
}

#[derive(Debug, Default)]
struct Model {
    now: TimeMs,
    queues: BTreeMap<String, MQueue>,
    messages: Vec<MMessage>,
    incarnations: u64,
    deliveries: u64,
}

impl Model {
    fn name_of(&self, incarnation: u64) -> &str {
        self.queues.iter().find(|(_, q)| q.incarnation == incarnation).map(|(n, _)| n.as_str()).expect("live queue")
    }

    fn queue_of(&self, incarnation: u64) -> &MQueue {
        self.queues.values().find(|q| q.incarnation == incarnation).expect("live queue")
    }

    fn is_visible(&self, m: &MMessage) -> bool {
        !m.in_flight && m.visible_at <= self.now
    }

    /// The dead-letter queue and limit of queue `incarnation`, if its policy names a live queue.
    fn dead_letter_target(&self, incarnation: u64) -> Option<(u64, u32)> {
        let dl = self.queue_of(incarnation).attributes.dead_letter.as_ref()?;
        let target = self.queues.get(&dl.queue)?.incarnation;
        (target != incarnation).then_some((target, dl.max_receive_count))
    }

    fn dead_letter(&mut self, i: usize, target: u64) {
        let source = self.name_of(self.messages[i].queue).to_string();
        let now = self.now;
        let m = &mut self.messages[i];
        m.queue = target;
        m.dead_letter_source = Some(source);
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
        m.sent_at + self.queue_of(m.queue).attributes.retention_ms <= self.now
    }

    /// The timers: retention first, then ended holds (dead-lettering exhausted messages, which
    /// may then be past the dead-letter queue's retention).
    fn tick(&mut self) {
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

    fn create(&mut self, name: &str, attributes: QueueAttributes) -> Outcome {
        if let Some(q) = self.queues.get(name) {
            return if q.attributes == attributes {
                Outcome::Created { new: false }
            } else {
                Outcome::Err("QueueExists".into())
            };
        }
        if let Some(dl) = &attributes.dead_letter {
            if dl.queue == name {
                return Outcome::Err("Invalid(dead_letter.queue)".into());
            }
            if !self.queues.contains_key(&dl.queue) {
                return Outcome::Err("DeadLetterQueueNotFound".into());
            }
        }
        self.incarnations += 1;
        self.queues.insert(name.to_string(), MQueue { incarnation: self.incarnations, attributes });
        Outcome::Created { new: true }
    }

    fn delete(&mut self, name: &str) -> Outcome {
        let Some(q) = self.queues.remove(name) else { return not_found() };
        self.messages.retain(|m| m.queue != q.incarnation);
        Outcome::Done
    }

    fn purge(&mut self, name: &str) -> Outcome {
        let Some(q) = self.queues.get(name) else { return not_found() };
        let before = self.messages.len();
        let incarnation = q.incarnation;
        self.messages.retain(|m| m.queue != incarnation);
        Outcome::Purged((before - self.messages.len()) as u64)
    }

    fn send(&mut self, name: &str, id: u128, priority: u8, delay_ms: Option<u64>, size: u64) -> Outcome {
        let Some(q) = self.queues.get(name) else { return not_found() };
        if size > q.attributes.message_bytes_max {
            return Outcome::Err("MessageTooLarge".into());
        }
        self.messages.push(MMessage {
            id,
            queue: q.incarnation,
            priority,
            size,
            sent_at: self.now,
            visible_at: self.now + delay_ms.unwrap_or(q.attributes.delay_ms),
            in_flight: false,
            receive_count: 0,
            first_received_at: None,
            dead_letter_source: None,
            last_error: None,
            delivery: None,
        });
        Outcome::Done
    }

    /// The next visible message of a queue: highest priority, then first sent.
    fn next_visible(&self, incarnation: u64) -> Option<usize> {
        (0..self.messages.len())
            .filter(|&i| self.messages[i].queue == incarnation && self.is_visible(&self.messages[i]))
            .min_by_key(|&i| (std::cmp::Reverse(self.messages[i].priority), self.messages[i].id))
    }

    fn receive(&mut self, name: &str, max: u32, vis_ms: Option<u64>) -> (Outcome, Vec<MReceipt>) {
        let Some(q) = self.queues.get(name) else { return (not_found(), Vec::new()) };
        let incarnation = q.incarnation;
        let vis_ms = vis_ms.unwrap_or(q.attributes.visibility_timeout_ms);
        let mut seen = Vec::new();
        let mut receipts = Vec::new();
        let mut bytes = 0;
        while seen.len() < max as usize {
            let Some(i) = self.next_visible(incarnation) else { break };
            if let Some((target, limit)) = self.dead_letter_target(incarnation)
                && self.messages[i].receive_count >= limit
            {
                self.dead_letter(i, target);
                continue;
            }
            if !seen.is_empty() && bytes + self.messages[i].size > RECEIVE_BYTES_MAX {
                break;
            }
            bytes += self.messages[i].size;
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
                priority: m.priority,
                receive_count: m.receive_count,
                visible_until: m.visible_at,
                first_received_at: m.first_received_at,
                dead_letter_source: m.dead_letter_source.clone(),
                last_error: m.last_error.clone(),
            });
            receipts.push(MReceipt { queue: incarnation, id: m.id, delivery: self.deliveries });
        }
        (Outcome::Delivered(seen), receipts)
    }

    /// The message a receipt may act on through queue `name`, or why not.
    fn holder(&self, name: &str, r: &MReceipt) -> Result<usize, Outcome> {
        let q = self.queues.get(name).ok_or_else(not_found)?;
        if r.queue != q.incarnation {
            return Err(Outcome::Err("ForeignReceipt".into()));
        }
        self.messages
            .iter()
            .position(|m| m.id == r.id && m.queue == r.queue && m.delivery == Some(r.delivery))
            .ok_or(Outcome::Err("StaleReceipt".into()))
    }

    fn in_flight_holder(&self, name: &str, r: &MReceipt) -> Result<usize, Outcome> {
        let i = self.holder(name, r)?;
        let m = &self.messages[i];
        if m.in_flight && m.visible_at > self.now { Ok(i) } else { Err(Outcome::Err("NotInFlight".into())) }
    }

    fn ack(&mut self, name: &str, r: &MReceipt) -> Outcome {
        match self.holder(name, r) {
            Ok(i) => {
                self.messages.remove(i);
                Outcome::Done
            }
            Err(o) => o,
        }
    }

    fn change_visibility(&mut self, name: &str, r: &MReceipt, timeout_ms: u64, lenient: bool) -> Outcome {
        if lenient {
            match (self.holder(name, r), self.in_flight_holder(name, r)) {
                (Err(o), _) => return o,
                (Ok(_), Ok(_)) => {}
                // The newest delivery's hold ended and nobody received the message since.
                (Ok(_), Err(_)) if timeout_ms == 0 => return Outcome::Done,
                (Ok(i), Err(_)) => {
                    self.messages[i].in_flight = true;
                    self.messages[i].visible_at = self.now + timeout_ms;
                    return Outcome::Done;
                }
            }
        }
        match self.in_flight_holder(name, r) {
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

    fn nack(&mut self, name: &str, r: &MReceipt, delay_ms: u64, error: Option<String>) -> Outcome {
        match self.in_flight_holder(name, r) {
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

    fn move_messages(&mut self, from: &str, to: Option<&str>, max: u64) -> Outcome {
        let Some(from_q) = self.queues.get(from) else { return not_found() };
        let from_inc = from_q.incarnation;
        let to_inc = match to {
            Some(t) => match self.queues.get(t) {
                Some(q) => Some(q.incarnation),
                None => return not_found(),
            },
            None => None,
        };
        let mut candidates: Vec<usize> = (0..self.messages.len())
            .filter(|&i| self.messages[i].queue == from_inc && self.is_visible(&self.messages[i]))
            .collect();
        candidates.sort_by_key(|&i| (std::cmp::Reverse(self.messages[i].priority), self.messages[i].id));
        let (mut plan, mut failed) = (Vec::new(), 0);
        for i in candidates {
            if plan.len() as u64 >= max {
                break;
            }
            let source =
                self.messages[i].dead_letter_source.as_ref().and_then(|s| self.queues.get(s)).map(|q| q.incarnation);
            match to_inc.or(source) {
                Some(t) if t != from_inc => plan.push((i, t)),
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
        let remaining_visible =
            self.messages.iter().filter(|m| m.queue == from_inc && self.is_visible(m)).count() as u64;
        Outcome::Moved { moved, failed, remaining_visible }
    }

    fn state(&self, name: &str) -> QueueState {
        let q = &self.queues[name];
        let mine: Vec<&MMessage> = self.messages.iter().filter(|m| m.queue == q.incarnation).collect();
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
                priority: m.priority,
                sent_at: m.sent_at,
                receive_count: m.receive_count,
                first_received_at: m.first_received_at,
                dead_letter_source: m.dead_letter_source.clone(),
                last_error: m.last_error.clone(),
            })
            .collect();
        rows.sort_by_key(|r| (r.sent_at, r.id));
        let dead_letter_depth = q
            .attributes
            .dead_letter
            .as_ref()
            .and_then(|dl| self.queues.get(&dl.queue))
            .map(|d| self.messages.iter().filter(|m| m.queue == d.incarnation).count() as u64);
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
            priority: m.priority,
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

fn body_of(id: u128, size: u64) -> Vec<u8> {
    (0..size).map(|i| (id as u8).wrapping_mul(31).wrapping_add(i as u8)).collect()
}

/// One delivery's hold on a message, from the consumer's side.
struct Hold {
    id: u128,
    until: TimeMs,
}

/// Runs the broker, its disk and the model side by side.
struct Harness {
    broker: Broker,
    disk: Disk,
    model: Model,
    now: TimeMs,
    /// Every receipt handed out: the broker's, the model's, and the queue it came from.
    receipts: Vec<(Receipt, MReceipt, &'static str)>,
    /// Holds by receipt, parallel to `receipts`.
    holds: Vec<Hold>,
    next_id: u128,
    bodies: HashMap<u128, Vec<u8>>,
    seqs: HashSet<u64>,
    /// Broker queue id → model incarnation, to see an id handed out twice.
    queue_ids: HashMap<QueueId, u64>,
    alive: BTreeSet<u128>,
    gone: BTreeSet<u128>,
}

impl Harness {
    fn new() -> Harness {
        Harness {
            broker: Broker::new(),
            disk: Disk::default(),
            model: Model::default(),
            now: 0,
            receipts: Vec::new(),
            holds: Vec::new(),
            next_id: 1,
            bodies: HashMap::new(),
            seqs: HashSet::new(),
            queue_ids: HashMap::new(),
            alive: BTreeSet::new(),
            gone: BTreeSet::new(),
        }
    }

    fn queue(&self, name: &str) -> Result<QueueId, Outcome> {
        self.broker.queue_id(name).map_err(broker_error)
    }

    fn receipt_queue(&self, r: Index, q: Option<usize>) -> Option<(usize, &'static str)> {
        if self.receipts.is_empty() {
            return None;
        }
        let i = r.index(self.receipts.len());
        Some((i, q.map_or(self.receipts[i].2, |q| NAMES[q])))
    }

    /// Applies `op` to both sides and returns (broker outcome, model outcome).
    fn apply(&mut self, op: &Op) -> (Outcome, Outcome) {
        let now = self.now;
        match *op {
            Op::Create { q, vis_ms, retention_ms, dead_letter } => {
                let attrs = attributes(vis_ms, retention_ms, dead_letter);
                let expected = self.model.create(NAMES[q], attrs.clone());
                let actual = match self.broker.create_queue(NAMES[q], attrs, now) {
                    Ok((id, new)) => {
                        let incarnation = self.model.queues.get(NAMES[q]).map(|m| m.incarnation);
                        if let (Some(incarnation), true) = (incarnation, new) {
                            let earlier = self.queue_ids.insert(id, incarnation);
                            assert!(earlier.is_none(), "queue id {id} handed out twice");
                        }
                        Outcome::Created { new }
                    }
                    Err(e) => broker_error(e),
                };
                (actual, expected)
            }
            Op::Delete { q } => {
                let actual = self.broker.delete_queue(NAMES[q]).map_or_else(broker_error, |()| Outcome::Done);
                (actual, self.model.delete(NAMES[q]))
            }
            Op::Purge { q } => {
                let actual = self.broker.purge_queue(NAMES[q]).map_or_else(broker_error, Outcome::Purged);
                (actual, self.model.purge(NAMES[q]))
            }
            Op::Send { q, priority, delay_ms, size } => {
                let id = self.next_id;
                let expected = self.model.send(NAMES[q], id, priority, delay_ms, size);
                let body = body_of(id, size);
                let actual = match self.queue(NAMES[q]) {
                    Err(o) => o,
                    Ok(qid) => {
                        let message = NewMessage { body: body.clone(), priority, delay_ms, ..NewMessage::default() };
                        match self.broker.send(qid, &message, MessageId(id), now) {
                            Ok(sent) => {
                                let seq = sent.seq;
                                assert!(self.seqs.insert(seq), "sequence number {seq} handed out twice");
                                self.disk.put_body(seq, &body);
                                self.bodies.insert(id, body);
                                Outcome::Done
                            }
                            Err(e) => entry_error(e),
                        }
                    }
                };
                if actual == Outcome::Done {
                    self.next_id += 1;
                }
                (actual, expected)
            }
            Op::Receive { q, max, vis_ms } => {
                let (expected, model_receipts) = self.model.receive(NAMES[q], max, vis_ms);
                let actual = match self.queue(NAMES[q]) {
                    Err(o) => o,
                    Ok(qid) => {
                        let deliveries = self.broker.receive(qid, max, vis_ms, now);
                        let mut seen = Vec::new();
                        for (k, d) in deliveries.iter().enumerate() {
                            self.check_delivery(d.seq, d.meta.id.0, &d.receipt, d.meta.visible_at);
                            seen.push(Seen {
                                id: d.meta.id.0,
                                priority: d.meta.priority,
                                receive_count: d.meta.receive_count,
                                visible_until: d.meta.visible_at,
                                first_received_at: d.meta.first_received_at,
                                dead_letter_source: d.meta.dead_letter_source.clone(),
                                last_error: d.meta.last_error.clone(),
                            });
                            if let Some(mr) = model_receipts.get(k) {
                                self.receipts.push((d.receipt, *mr, NAMES[q]));
                                self.holds.push(Hold { id: d.meta.id.0, until: d.meta.visible_at });
                            }
                        }
                        Outcome::Delivered(seen)
                    }
                };
                (actual, expected)
            }
            Op::Ack { r, q } => {
                let Some((i, name)) = self.receipt_queue(r, q) else { return (Outcome::Skipped, Outcome::Skipped) };
                let (receipt, mr, _) = self.receipts[i];
                let expected = self.model.ack(name, &mr);
                let actual = match self.queue(name) {
                    Err(o) => o,
                    Ok(qid) => self.broker.ack(qid, &receipt, now).map_or_else(entry_error, |()| Outcome::Done),
                };
                if actual == Outcome::Done {
                    let id = self.holds[i].id;
                    self.holds.iter_mut().filter(|h| h.id == id).for_each(|h| h.until = now);
                }
                (actual, expected)
            }
            Op::Vis { r, q, timeout_ms, lenient } => {
                let Some((i, name)) = self.receipt_queue(r, q) else { return (Outcome::Skipped, Outcome::Skipped) };
                let (receipt, mr, _) = self.receipts[i];
                let expected = self.model.change_visibility(name, &mr, timeout_ms, lenient);
                let actual = match self.queue(name) {
                    Err(o) => o,
                    Ok(qid) if lenient => self
                        .broker
                        .change_visibility_lenient(qid, &receipt, timeout_ms, now)
                        .map_or_else(entry_error, |()| Outcome::Done),
                    Ok(qid) => self
                        .broker
                        .change_visibility(qid, &receipt, timeout_ms, now)
                        .map_or_else(entry_error, |()| Outcome::Done),
                };
                if actual == Outcome::Done {
                    self.holds[i].until = now + timeout_ms;
                }
                (actual, expected)
            }
            Op::Nack { r, q, delay_ms, error } => {
                let Some((i, name)) = self.receipt_queue(r, q) else { return (Outcome::Skipped, Outcome::Skipped) };
                let (receipt, mr, _) = self.receipts[i];
                let error = error.then(|| format!("error-{i}"));
                let expected = self.model.nack(name, &mr, delay_ms, error.clone());
                let actual = match self.queue(name) {
                    Err(o) => o,
                    Ok(qid) => self
                        .broker
                        .nack(qid, &receipt, delay_ms, error, now)
                        .map_or_else(entry_error, |()| Outcome::Done),
                };
                if actual == Outcome::Done {
                    self.holds[i].until = now;
                }
                (actual, expected)
            }
            Op::Move { from, to, max } => {
                let to = to.map(|t| NAMES[t]);
                let expected = self.model.move_messages(NAMES[from], to, max);
                let actual = match self.broker.move_messages(NAMES[from], to, max, now) {
                    Ok(o) => {
                        Outcome::Moved { moved: o.moved, failed: o.failed, remaining_visible: o.remaining_visible }
                    }
                    Err(e) => broker_error(e),
                };
                (actual, expected)
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

    /// What must hold of any delivery, whatever the model says.
    fn check_delivery(&self, seq: u64, id: u128, receipt: &Receipt, until: TimeMs) {
        assert!(self.bodies.contains_key(&id), "delivered m{id}, which was never sent");
        assert!(!self.gone.contains(&id), "delivered m{id}, which was acked, purged or expired before");
        assert_eq!(self.disk.bodies.get(&seq), self.bodies.get(&id), "body of m{id} (seq {seq})");
        assert_eq!(receipt.seq, seq, "receipt names the delivered message");
        if let Some(k) = self.receipts.iter().position(|(r, _, _)| r == receipt) {
            panic!("delivery of m{id} got receipt {receipt:?}, already given to delivery {k}");
        }
        for h in &self.holds {
            assert!(
                !(h.id == id && h.until > self.now),
                "m{id} delivered (held until {until}) while an earlier delivery holds it until {}",
                h.until
            );
        }
    }

    /// Compares the whole state with the model and checks the contract on it.
    fn check_state(&mut self, step: usize, op: &Op) {
        let now = self.now;
        self.broker.check_invariants(now);
        let effects = self.broker.take_effects();
        self.disk.apply(effects);

        let broker_names: Vec<String> =
            NAMES.iter().filter(|n| self.broker.queue_id(n).is_ok()).map(|n| n.to_string()).collect();
        let model_names: Vec<String> = self.model.queues.keys().cloned().collect();
        assert_eq!(broker_names, model_names, "queues after step {step} {op:?}");

        let mut alive = BTreeSet::new();
        let mut count = 0;
        for name in &model_names {
            let id = self.broker.queue_id(name).expect("listed");
            let actual = broker_state(&self.broker, id, now);
            let expected = self.model.state(name);
            assert_eq!(actual, expected, "queue {name} after step {step} {op:?}");
            for (seq, meta, _) in self.broker.peek(id, 10_000, now) {
                assert!(alive.insert(meta.id.0), "m{} is in two queues", meta.id.0);
                assert_eq!(self.disk.bodies.get(&seq), self.bodies.get(&meta.id.0), "body of m{}", meta.id.0);
                count += 1;
            }
        }
        assert_eq!(count, self.broker.message_count(), "messages outside every queue");
        for id in self.alive.difference(&alive) {
            self.gone.insert(*id);
        }
        assert!(alive.is_disjoint(&self.gone), "a message came back after it was gone");
        self.alive = alive;

        for (k, h) in self.holds.iter().enumerate() {
            let others = self.holds.iter().filter(|o| o.id == h.id && o.until > now).count();
            assert!(others <= 1, "m{} held by {others} unexpired deliveries (one is receipt {k})", h.id);
        }

        self.shadow_restart(step, op);
    }

    /// A broker rebuilt from the disk right now must be in the state the live broker reaches
    /// once its due timers have run.
    fn shadow_restart(&self, step: usize, op: &Op) {
        let mut live = self.broker.clone();
        live.tick(self.now);
        let restored = self.disk.clone().restore(self.now);
        for name in NAMES {
            let (a, b) = (live.queue_id(name).ok(), restored.queue_id(name).ok());
            assert_eq!(a, b, "queue {name} after a restart at step {step} {op:?}");
            let Some(id) = a else { continue };
            assert_eq!(
                live.queue_view(id, self.now),
                restored.queue_view(id, self.now),
                "queue {name} after a restart at step {step} {op:?}"
            );
            assert_eq!(
                live.peek(id, 10_000, self.now),
                restored.peek(id, 10_000, self.now),
                "messages of {name} after a restart at step {step} {op:?}"
            );
        }
    }
}

fn run(ops: &[Op]) {
    let mut h = Harness::new();
    for (step, op) in ops.iter().enumerate() {
        let (actual, expected) = h.apply(op);
        assert_eq!(actual, expected, "outcome of step {step} {op:?} at now={}", h.now);
        h.check_state(step, op);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1024,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("tests/proptest-regressions/model.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn broker_matches_model(ops in ops()) {
        run(&ops);
    }
}
