//! Model-based property test of FIFO queues: random sends across a few message groups (with
//! dedup ids and bodies drawn from small pools, so that duplicates happen), receives, acks,
//! nacks, visibility changes, redrives, purges, clock advances past visibility timeouts and
//! dedup windows, and restarts from the effects "disk", run on the real `Broker` and on a
//! reference model simple enough to be obviously right (`common::model`, a `Vec` of messages in
//! send order, scanned linearly). After every step the two must agree on every outcome, every
//! count and every message's state.
//!
//! Beside the comparison, the FIFO contract of DESIGN.md §3 items 4–6 is checked on the
//! broker's outputs directly, so that a model sharing a mistake with the broker cannot hide it:
//! - a receive delivers, per group, a prefix of the group's messages in send order, and only
//!   from a group none of whose messages is held by an earlier, unexpired delivery;
//! - a receive that returns fewer messages than asked leaves no group able to deliver;
//! - a duplicate send creates nothing and answers with the id and sequence number of the
//!   message it matched; a new send gets a sequence number above every earlier one;
//! - nothing is delivered that was never sent, bodies come back byte-exact (`common::harness`
//!   checks that, with the rest of what holds of every queue type);
//! - `check_invariants` holds, and a broker rebuilt from the disk right now (a "shadow
//!   restart") has the same state and, probed with a receive, delivers the same messages.
//!
//! Failures are reproducible: proptest prints the shrunk operation list and records the seed in
//! `tests/proptest-regressions/fifo_model.txt`, which is replayed first on every run (keep it
//! in git). `PROPTEST_RNG_SEED=<n>` fixes the seed of the random part.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::harness::Harness;
use common::model::{MMessage, MReceipt, Model, Outcome, broker_error, entry_error, not_found};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::FileFailurePersistence;
use sluice_core::attributes::DedupScope;
use sluice_core::broker::Delivery;
use sluice_core::{
    Broker, DeadLetter, MessageId, MessageState, NewMessage, QueueAttributes, QueueAttributesPatch, QueueId, TimeMs,
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

fn invalid(field: &str) -> Outcome {
    Outcome::Err(format!("Invalid({field})"))
}

// ----- the model of a FIFO queue -----------------------------------------------------------

impl Model {
    fn send(
        &mut self,
        name: &str,
        id: u128,
        group: Option<usize>,
        dedup: Option<usize>,
        body: usize,
        bad: Option<Bad>,
    ) -> Outcome {
        let Some(q) = self.queues.get_mut(name) else { return not_found() };
        let Some(group) = group.map(|g| GROUPS[g].to_string()) else { return invalid("group_id") };
        match bad {
            Some(Bad::Delay | Bad::DeliverAt) => return invalid("delay_ms"),
            Some(Bad::Priority) => return invalid("priority"),
            None => {}
        }
        let dedup_id = match dedup {
            Some(d) => format!("id-{d}"),
            None if q.attributes.content_based_dedup => format!("body-{body}"),
            None => return invalid("dedup_id"),
        };
        let key = ((q.attributes.dedup_scope == DedupScope::MessageGroup).then(|| group.clone()), dedup_id);
        if let Some(&(original, expires_at)) = q.dedup.get(&key)
            && expires_at > self.now
        {
            return Outcome::Sent { id: original, duplicate: true };
        }
        q.dedup.insert(key, (id, self.now + q.attributes.dedup_window_ms));
        let (queue, visible_at) = (q.incarnation, self.now + q.attributes.delay_ms);
        self.messages.push(MMessage { id, queue, group, sent_at: self.now, visible_at, ..MMessage::default() });
        Outcome::Sent { id, duplicate: false }
    }

    /// The head of the oldest-headed group of queue `incarnation` that may deliver: none of its
    /// messages in flight, and its oldest message visible.
    fn eligible_head(&self, incarnation: u64) -> Option<usize> {
        let busy: BTreeSet<&str> =
            self.messages.iter().filter(|m| m.queue == incarnation && m.in_flight).map(|m| m.group.as_str()).collect();
        let mut seen = BTreeSet::new();
        for (i, m) in self.messages.iter().enumerate() {
            if m.queue != incarnation || !seen.insert(m.group.as_str()) {
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
    fn receive(&mut self, name: &str, max: u32, vis_ms: Option<u64>) -> (Outcome, Vec<MReceipt>) {
        let q = &self.queues[name];
        let (incarnation, vis_ms) = (q.incarnation, vis_ms.unwrap_or(q.attributes.visibility_timeout_ms));
        let mut seen = Vec::new();
        let mut receipts = Vec::new();
        let mut continuing: Option<(String, u128)> = None;
        while seen.len() < max as usize {
            let next_in_group = continuing.as_ref().and_then(|(group, last)| {
                self.messages
                    .iter()
                    .position(|m| m.queue == incarnation && m.group == *group && m.id > *last)
                    .filter(|&i| self.is_visible(&self.messages[i]))
            });
            let Some(i) = next_in_group.or_else(|| self.eligible_head(incarnation)) else { break };
            continuing = Some((self.messages[i].group.clone(), self.messages[i].id));
            if self.dead_letter_if_exhausted(i) {
                continue;
            }
            let (s, r) = self.deliver(i, vis_ms);
            seen.push(s);
            receipts.push(r);
        }
        (Outcome::Delivered(seen), receipts)
    }
}

// ----- the broker side ---------------------------------------------------------------------

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

// ----- the run -----------------------------------------------------------------------------

/// The shared harness, and what only this suite tracks.
struct Fifo {
    h: Harness,
    /// The highest sequence number handed out so far.
    seq_max: u64,
}

impl Fifo {
    fn new(attributes: &[QueueAttributes; 2]) -> Fifo {
        let mut h = Harness::new(&NAMES);
        // The dead-letter queue first: the source's policy names it.
        for q in [DLQ, SOURCE] {
            let created = h.create(NAMES[q], attributes[q].clone());
            assert_eq!(
                created,
                (Outcome::Created { new: true }, Outcome::Created { new: true }),
                "create {}",
                NAMES[q]
            );
        }
        let effects = h.broker.take_effects();
        h.disk.apply(effects);
        Fifo { h, seq_max: 0 }
    }

    fn id(&self, q: usize) -> QueueId {
        self.h.broker.queue_id(NAMES[q]).expect("live queue")
    }

    fn queue_len(&self, q: usize) -> u64 {
        let s = self.h.broker.queue_view(self.id(q), self.h.now).expect("live queue").stats;
        s.visible + s.in_flight + s.delayed
    }

    /// Applies `op` to both sides and returns (broker outcome, model outcome).
    fn apply(&mut self, op: &Op) -> (Outcome, Outcome) {
        let now = self.h.now;
        let name = |q: Option<usize>| q.map(|q| NAMES[q]);
        match *op {
            Op::Send { q, group, dedup, body, bad } => {
                let id = self.h.next_id;
                let expected = self.h.model.send(NAMES[q], id, group, dedup, body, bad);
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
                let (len_before, count_before) = (self.queue_len(q), self.h.broker.message_count());
                let actual = match self.h.broker.send(self.id(q), &message, MessageId(id), now) {
                    Ok(sent) if sent.duplicate => {
                        // A duplicate enqueues nothing and names the message it matched.
                        assert_eq!(self.queue_len(q), len_before, "a duplicate send enqueued something");
                        assert_eq!(self.h.broker.message_count(), count_before, "a duplicate send created a message");
                        let original = self.h.enqueued.get(&sent.id.0);
                        assert!(original.is_some(), "a duplicate answered with m{}, never enqueued", sent.id.0);
                        let original = original.expect("checked");
                        assert_eq!(
                            (original.seq, original.queue),
                            (sent.seq, NAMES[q]),
                            "the duplicate's answer for m{}",
                            sent.id.0
                        );
                        Outcome::Sent { id: sent.id.0, duplicate: true }
                    }
                    Ok(sent) => {
                        assert_eq!(sent.id.0, id, "a new message keeps the id it was sent with");
                        assert!(sent.seq > self.seq_max, "m{id} got seq {} after seq {}", sent.seq, self.seq_max);
                        self.seq_max = sent.seq;
                        assert_eq!(self.queue_len(q), len_before + 1, "a new send enqueued one message");
                        self.h.record_send(sent.seq, message.body, NAMES[q]);
                        Outcome::Sent { id, duplicate: false }
                    }
                    Err(e) => entry_error(e),
                };
                (actual, expected)
            }
            Op::Receive { q, max, vis_ms } => {
                let (expected, model_receipts) = self.h.model.receive(NAMES[q], max, vis_ms);
                let id = self.id(q);
                let before = groups(&self.h.broker, id, now);
                let deliveries = self.h.broker.receive(id, max, vis_ms, now);
                let after = groups(&self.h.broker, id, now);
                self.check_receive(q, max, &before, &after, &deliveries);
                (self.h.delivered(NAMES[q], &deliveries, &model_receipts), expected)
            }
            Op::Ack { r, q } => self.h.ack(r, name(q)),
            Op::Vis { r, q, timeout_ms, lenient } => self.h.change_visibility(r, name(q), timeout_ms, lenient),
            Op::Nack { r, q, delay_ms, error } => self.h.nack(r, name(q), delay_ms, error),
            Op::Move { max } => self.h.move_messages(NAMES[DLQ], None, max),
            Op::Purge { q } => self.h.purge(NAMES[q]),
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
                    self.h.broker.update_queue(NAMES[SOURCE], &patch, now).map_or_else(broker_error, |_| Outcome::Done);
                let attributes = &mut self.h.model.queues.get_mut(NAMES[SOURCE]).expect("live queue").attributes;
                *attributes = attributes.apply(&patch);
                (actual, Outcome::Done)
            }
            Op::Advance { ms } => self.h.advance(ms),
            Op::Restart => self.h.restart(),
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
        deliveries: &[Delivery],
    ) {
        let now = self.h.now;
        let remaining: BTreeSet<u128> = after.values().flatten().map(|m| m.id).collect();
        let delivered: BTreeSet<u128> = deliveries.iter().map(|d| d.meta.id.0).collect();
        let mut by_group: BTreeMap<String, Vec<u128>> = BTreeMap::new();
        for d in deliveries {
            let id = d.meta.id.0;
            // The harness checks that it was sent at all, with the body and the receipt.
            if let Some(sent) = self.h.enqueued.get(&id) {
                assert_eq!(d.seq, sent.seq, "m{id} delivered under another sequence number");
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
                for h in &self.h.holds {
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

    /// The shared checks, that at most one receive's deliveries of a group are held at any
    /// time, and that a receive after a shadow restart delivers what the live broker and the
    /// model deliver: that probes the group indexes, which the counts do not show.
    fn check_state(&mut self, step: usize, op: &Op) {
        self.h.check_state(step, op);
        let now = self.h.now;
        for (q, name) in NAMES.iter().enumerate() {
            for (group, members) in groups(&self.h.broker, self.id(q), now) {
                let ids: BTreeSet<u128> = members.iter().map(|m| m.id).collect();
                let batches: BTreeSet<u64> =
                    self.h.holds.iter().filter(|h| h.until > now && ids.contains(&h.id)).map(|h| h.batch).collect();
                assert!(
                    batches.len() <= 1,
                    "{name} group {group} is held by the deliveries of receives {batches:?} after step {step} {op:?}"
                );
            }
        }
        let (mut live, mut restored) = self.h.shadow_restart(step, op);
        let mut model = self.h.model.clone();
        model.tick();
        for (q, name) in NAMES.iter().enumerate() {
            let id = self.id(q);
            let ids = |ds: Vec<Delivery>| ds.iter().map(|d| d.meta.id.0).collect::<Vec<_>>();
            let a = ids(live.receive(id, 1_000, Some(1), now));
            let b = ids(restored.receive(id, 1_000, Some(1), now));
            let Outcome::Delivered(m) = model.receive(name, 1_000, Some(1)).0 else { unreachable!() };
            let m: Vec<u128> = m.iter().map(|s| s.id).collect();
            assert_eq!(a, m, "a receive of everything from {name} after step {step} {op:?}");
            assert_eq!(b, m, "a receive of everything from {name} after a restart at step {step} {op:?}");
        }
    }
}

fn run(attributes: &[QueueAttributes; 2], ops: &[Op]) {
    let mut f = Fifo::new(attributes);
    for (step, op) in ops.iter().enumerate() {
        let (actual, expected) = f.apply(op);
        assert_eq!(actual, expected, "outcome of step {step} {op:?} at now={}", f.h.now);
        f.check_state(step, op);
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
