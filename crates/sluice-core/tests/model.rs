//! Model-based property test of the queue state machine on standard queues: random operation
//! sequences (creates and deletes, sends with priorities, delays and sizes, receives, acks,
//! nacks, visibility changes, moves, purges, the clock, restarts) run on the real `Broker` and
//! on a reference model simple enough to be obviously right (`common::model`, a `Vec` of
//! messages scanned linearly), and after every step the two must agree on every outcome, every
//! queue's counts and every message's state.
//!
//! Beside the comparison, the contract of DESIGN.md §3 is checked on the broker's outputs
//! directly, so that a model sharing a mistake with the broker still cannot hide a breach:
//! `common::harness` checks what holds of every queue type (no message is held by two unexpired
//! deliveries, every receipt differs from every earlier one, nothing is delivered that was not
//! sent, bodies come back byte-exact, no sequence number or queue id is handed out twice, and a
//! "shadow restart" after every step, rebuilding a broker from the effects written so far, gives
//! the live broker's state, which catches a missing or wrong effect at the step that forgot it);
//! this file adds that a message sits in exactly one queue and that nothing is delivered, or
//! comes back, after it was gone.
//!
//! Failures are reproducible: proptest prints the shrunk operation list and records the seed in
//! `tests/proptest-regressions/model.txt`, which is replayed first on every run (keep it in
//! git). `PROPTEST_RNG_SEED=<n>` fixes the seed of the random part.

mod common;

use std::collections::BTreeSet;

use common::harness::Harness;
use common::model::{MMessage, MReceipt, Model, Outcome, broker_error, entry_error, not_found};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::FileFailurePersistence;
use sluice_core::limits::RECEIVE_BYTES_MAX;
use sluice_core::{DeadLetter, MessageId, NewMessage, QueueAttributes};

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

// ----- the model of a standard queue -------------------------------------------------------

impl Model {
    fn delete(&mut self, name: &str) -> Outcome {
        let Some(q) = self.queues.remove(name) else { return not_found() };
        self.messages.retain(|m| m.queue != q.incarnation);
        Outcome::Done
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
            ..MMessage::default()
        });
        Outcome::Done
    }

    /// The next visible message of a queue: highest priority, then first sent.
    fn next_visible(&self, incarnation: u64) -> Option<usize> {
        (0..self.messages.len())
            .filter(|&i| self.messages[i].queue == incarnation && self.is_visible(&self.messages[i]))
            .min_by_key(|&i| (std::cmp::Reverse(self.messages[i].priority), self.messages[i].id))
    }

    /// Delivers the next visible messages, up to `max` and the bytes a receive may return;
    /// exhausted messages go to the dead-letter queue instead.
    fn receive(&mut self, name: &str, max: u32, vis_ms: Option<u64>) -> (Outcome, Vec<MReceipt>) {
        let Some(q) = self.queues.get(name) else { return (not_found(), Vec::new()) };
        let incarnation = q.incarnation;
        let vis_ms = vis_ms.unwrap_or(q.attributes.visibility_timeout_ms);
        let mut seen = Vec::new();
        let mut receipts = Vec::new();
        let mut bytes = 0;
        while seen.len() < max as usize {
            let Some(i) = self.next_visible(incarnation) else { break };
            if self.dead_letter_if_exhausted(i) {
                continue;
            }
            if !seen.is_empty() && bytes + self.messages[i].size > RECEIVE_BYTES_MAX {
                break;
            }
            bytes += self.messages[i].size;
            let (s, r) = self.deliver(i, vis_ms);
            seen.push(s);
            receipts.push(r);
        }
        (Outcome::Delivered(seen), receipts)
    }
}

fn body_of(id: u128, size: u64) -> Vec<u8> {
    (0..size).map(|i| (id as u8).wrapping_mul(31).wrapping_add(i as u8)).collect()
}

// ----- the run -----------------------------------------------------------------------------

/// The shared harness, and what only this suite tracks.
struct Standard {
    h: Harness,
    /// The messages in some queue after the last step.
    alive: BTreeSet<u128>,
    /// The messages acked, purged, expired or deleted with their queue.
    gone: BTreeSet<u128>,
}

impl Standard {
    fn new() -> Standard {
        Standard { h: Harness::new(&NAMES), alive: BTreeSet::new(), gone: BTreeSet::new() }
    }

    /// Applies `op` to both sides and returns (broker outcome, model outcome).
    fn apply(&mut self, op: &Op) -> (Outcome, Outcome) {
        let h = &mut self.h;
        let now = h.now;
        let name = |q: Option<usize>| q.map(|q| NAMES[q]);
        match *op {
            Op::Create { q, vis_ms, retention_ms, dead_letter } => {
                h.create(NAMES[q], attributes(vis_ms, retention_ms, dead_letter))
            }
            Op::Delete { q } => {
                let actual = h.broker.delete_queue(NAMES[q]).map_or_else(broker_error, |()| Outcome::Done);
                (actual, h.model.delete(NAMES[q]))
            }
            Op::Purge { q } => h.purge(NAMES[q]),
            Op::Send { q, priority, delay_ms, size } => {
                let id = h.next_id;
                let expected = h.model.send(NAMES[q], id, priority, delay_ms, size);
                let body = body_of(id, size);
                let actual = match h.queue(NAMES[q]) {
                    Err(o) => o,
                    Ok(qid) => {
                        let message = NewMessage { body: body.clone(), priority, delay_ms, ..NewMessage::default() };
                        match h.broker.send(qid, &message, MessageId(id), now) {
                            Ok(sent) => {
                                h.record_send(sent.seq, body, NAMES[q]);
                                Outcome::Done
                            }
                            Err(e) => entry_error(e),
                        }
                    }
                };
                (actual, expected)
            }
            Op::Receive { q, max, vis_ms } => {
                let (expected, model_receipts) = h.model.receive(NAMES[q], max, vis_ms);
                let actual = match h.queue(NAMES[q]) {
                    Err(o) => o,
                    Ok(qid) => {
                        let deliveries = h.broker.receive(qid, max, vis_ms, now);
                        for d in &deliveries {
                            let id = d.meta.id.0;
                            assert!(
                                !self.gone.contains(&id),
                                "delivered m{id}, which was acked, purged or expired before"
                            );
                        }
                        h.delivered(NAMES[q], &deliveries, &model_receipts)
                    }
                };
                (actual, expected)
            }
            Op::Ack { r, q } => h.ack(r, name(q)),
            Op::Vis { r, q, timeout_ms, lenient } => h.change_visibility(r, name(q), timeout_ms, lenient),
            Op::Nack { r, q, delay_ms, error } => h.nack(r, name(q), delay_ms, error),
            Op::Move { from, to, max } => h.move_messages(NAMES[from], name(to), max),
            Op::Advance { ms } => h.advance(ms),
            Op::Restart => h.restart(),
        }
    }

    /// The shared checks, and that every message sits in one queue and stays gone once gone.
    fn check_state(&mut self, step: usize, op: &Op) {
        let h = &mut self.h;
        h.check_state(step, op);
        let mut alive = BTreeSet::new();
        for name in NAMES {
            let Ok(id) = h.broker.queue_id(name) else { continue };
            for (seq, meta, _) in h.broker.peek(id, 10_000, h.now) {
                let id = meta.id.0;
                assert!(alive.insert(id), "m{id} is in two queues");
                assert_eq!(h.disk.bodies.get(&seq), h.enqueued.get(&id).map(|e| &e.body), "body of m{id}");
            }
        }
        for id in self.alive.difference(&alive) {
            self.gone.insert(*id);
        }
        assert!(alive.is_disjoint(&self.gone), "a message came back after it was gone");
        self.alive = alive;
        h.shadow_restart(step, op);
    }
}

fn run(ops: &[Op]) {
    let mut s = Standard::new();
    for (step, op) in ops.iter().enumerate() {
        let (actual, expected) = s.apply(op);
        assert_eq!(actual, expected, "outcome of step {step} {op:?} at now={}", s.h.now);
        s.check_state(step, op);
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
