//! The side-by-side runner of both model tests: the real `Broker`, the `Disk` its effects are
//! written to, and the reference `Model`, driven by the operations both suites share (creates,
//! receipts, moves, purges, the clock, restarts), with the contract checks that hold of every
//! queue type. Each suite wraps a `Harness`, applies its own operations (sends, receives and
//! whatever else only it has) through the broker and the model, and adds its own checks.
//!
//! The checks here look at the broker's outputs directly, so that a model sharing a mistake
//! with the broker still cannot hide a breach: nothing is delivered that was not sent, bodies
//! come back byte-exact, every receipt differs from every earlier one, no message is held by two
//! unexpired deliveries, no sequence number or queue id is handed out twice, and a broker
//! rebuilt from the disk after every step (a "shadow restart") is in the live broker's state.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Debug;

use proptest::sample::Index;
use sluice_core::broker::Delivery;
use sluice_core::{Broker, QueueAttributes, QueueId, Receipt, TimeMs};

use super::Disk;
use super::model::{MReceipt, Model, Outcome, QueueState, Row, Seen, broker_error, entry_error};

/// One delivery's hold on a message, from the consumer's side.
pub struct Hold {
    pub id: u128,
    pub until: TimeMs,
    /// The receive that made the delivery.
    pub batch: u64,
}

/// A message the broker enqueued.
pub struct Enqueued {
    pub body: Vec<u8>,
    pub seq: u64,
    pub queue: &'static str,
}

/// Runs the broker, its disk and the model side by side.
pub struct Harness {
    /// Every queue name the suite uses, whether or not it exists at the moment.
    pub names: &'static [&'static str],
    pub broker: Broker,
    pub disk: Disk,
    pub model: Model,
    pub now: TimeMs,
    /// Every receipt handed out: the broker's, the model's, and the queue it came from.
    pub receipts: Vec<(Receipt, MReceipt, &'static str)>,
    /// Holds by receipt, parallel to `receipts`.
    pub holds: Vec<Hold>,
    /// The id of the next message sent.
    pub next_id: u128,
    /// Receives so far, to tell one receive's deliveries from another's.
    pub batches: u64,
    /// Every message enqueued, by id.
    pub enqueued: HashMap<u128, Enqueued>,
    seqs: HashSet<u64>,
    /// Broker queue id → model incarnation, to see an id handed out twice.
    queue_ids: HashMap<QueueId, u64>,
}

impl Harness {
    pub fn new(names: &'static [&'static str]) -> Harness {
        Harness {
            names,
            broker: Broker::new(),
            disk: Disk::default(),
            model: Model::default(),
            now: 0,
            receipts: Vec::new(),
            holds: Vec::new(),
            next_id: 1,
            batches: 0,
            enqueued: HashMap::new(),
            seqs: HashSet::new(),
            queue_ids: HashMap::new(),
        }
    }

    pub fn queue(&self, name: &str) -> Result<QueueId, Outcome> {
        self.broker.queue_id(name).map_err(broker_error)
    }

    /// Creates queue `name` on both sides; returns (broker outcome, model outcome), as every
    /// operation does.
    pub fn create(&mut self, name: &str, attributes: QueueAttributes) -> (Outcome, Outcome) {
        let expected = self.model.create(name, attributes.clone());
        let actual = match self.broker.create_queue(name, attributes, self.now) {
            Ok((id, new)) => {
                let incarnation = self.model.queues.get(name).map(|m| m.incarnation);
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

    /// Records a message the broker enqueued under the next id: its body goes to the disk, as
    /// the caller of `send` writes it.
    pub fn record_send(&mut self, seq: u64, body: Vec<u8>, queue: &'static str) {
        assert!(self.seqs.insert(seq), "sequence number {seq} handed out twice");
        self.disk.put_body(seq, &body);
        self.enqueued.insert(self.next_id, Enqueued { body, seq, queue });
        self.next_id += 1;
    }

    /// Checks and records the broker's deliveries of one receive from `queue`, with the model's
    /// receipts for the same receive, and says what the consumer saw.
    pub fn delivered(&mut self, queue: &'static str, deliveries: &[Delivery], model_receipts: &[MReceipt]) -> Outcome {
        self.batches += 1;
        let mut seen = Vec::new();
        for (k, d) in deliveries.iter().enumerate() {
            self.check_delivery(d);
            seen.push(Seen {
                id: d.meta.id.0,
                priority: d.meta.priority,
                group: d.meta.group_id.clone().unwrap_or_default(),
                receive_count: d.meta.receive_count,
                visible_until: d.meta.visible_at,
                first_received_at: d.meta.first_received_at,
                dead_letter_source: d.meta.dead_letter_source.clone(),
                last_error: d.meta.last_error.clone(),
            });
            if let Some(mr) = model_receipts.get(k) {
                self.receipts.push((d.receipt, *mr, queue));
                self.holds.push(Hold { id: d.meta.id.0, until: d.meta.visible_at, batch: self.batches });
            }
        }
        Outcome::Delivered(seen)
    }

    /// What must hold of any delivery, whatever the model says.
    fn check_delivery(&self, d: &Delivery) {
        let (id, seq, receipt) = (d.meta.id.0, d.seq, &d.receipt);
        let sent = self.enqueued.get(&id).map(|e| &e.body);
        assert!(sent.is_some(), "delivered m{id}, which was never sent");
        assert_eq!(self.disk.bodies.get(&seq), sent, "body of m{id} (seq {seq})");
        assert_eq!(receipt.seq, seq, "receipt names the delivered message");
        if let Some(k) = self.receipts.iter().position(|(r, _, _)| r == receipt) {
            panic!("delivery of m{id} got receipt {receipt:?}, already given to delivery {k}");
        }
        for h in &self.holds {
            assert!(
                !(h.id == id && h.until > self.now),
                "m{id} delivered (held until {}) while an earlier delivery holds it until {}",
                d.meta.visible_at,
                h.until
            );
        }
    }

    /// The receipt `r` picks, and the queue to use it through: `q`, or else the queue it came
    /// from. `None` before any receipt was handed out.
    fn receipt(&self, r: Index, q: Option<&'static str>) -> Option<(usize, &'static str)> {
        if self.receipts.is_empty() {
            return None;
        }
        let i = r.index(self.receipts.len());
        Some((i, q.unwrap_or(self.receipts[i].2)))
    }

    pub fn ack(&mut self, r: Index, q: Option<&'static str>) -> (Outcome, Outcome) {
        let Some((i, name)) = self.receipt(r, q) else { return (Outcome::Skipped, Outcome::Skipped) };
        let (receipt, mr, _) = self.receipts[i];
        let expected = self.model.ack(name, &mr);
        let actual = match self.queue(name) {
            Err(o) => o,
            Ok(qid) => self.broker.ack(qid, &receipt, self.now).map_or_else(entry_error, |()| Outcome::Done),
        };
        if actual == Outcome::Done {
            let (id, now) = (self.holds[i].id, self.now);
            self.holds.iter_mut().filter(|h| h.id == id).for_each(|h| h.until = h.until.min(now));
        }
        (actual, expected)
    }

    pub fn change_visibility(
        &mut self,
        r: Index,
        q: Option<&'static str>,
        timeout_ms: u64,
        lenient: bool,
    ) -> (Outcome, Outcome) {
        let Some((i, name)) = self.receipt(r, q) else { return (Outcome::Skipped, Outcome::Skipped) };
        let (receipt, mr, _) = self.receipts[i];
        let expected = self.model.change_visibility(name, &mr, timeout_ms, lenient);
        let now = self.now;
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

    /// `error`: the nack carries an error text, named after the receipt.
    pub fn nack(&mut self, r: Index, q: Option<&'static str>, delay_ms: u64, error: bool) -> (Outcome, Outcome) {
        let Some((i, name)) = self.receipt(r, q) else { return (Outcome::Skipped, Outcome::Skipped) };
        let (receipt, mr, _) = self.receipts[i];
        let error = error.then(|| format!("error-{i}"));
        let expected = self.model.nack(name, &mr, delay_ms, error.clone());
        let actual = match self.queue(name) {
            Err(o) => o,
            Ok(qid) => {
                self.broker.nack(qid, &receipt, delay_ms, error, self.now).map_or_else(entry_error, |()| Outcome::Done)
            }
        };
        if actual == Outcome::Done {
            self.holds[i].until = self.now;
        }
        (actual, expected)
    }

    pub fn move_messages(&mut self, from: &str, to: Option<&str>, max: u64) -> (Outcome, Outcome) {
        let expected = self.model.move_messages(from, to, max);
        let actual = match self.broker.move_messages(from, to, max, self.now) {
            Ok(o) => Outcome::Moved { moved: o.moved, failed: o.failed, remaining_visible: o.remaining_visible },
            Err(e) => broker_error(e),
        };
        (actual, expected)
    }

    pub fn purge(&mut self, name: &str) -> (Outcome, Outcome) {
        let expected = self.model.purge(name);
        let actual = self.broker.purge_queue(name).map_or_else(broker_error, Outcome::Purged);
        (actual, expected)
    }

    /// Moves the clock on and runs the timers on both sides.
    pub fn advance(&mut self, ms: u64) -> (Outcome, Outcome) {
        self.now += ms;
        self.model.now = self.now;
        self.broker.tick(self.now);
        self.model.tick();
        (Outcome::Done, Outcome::Done)
    }

    /// Replaces the broker by one restored from the disk.
    pub fn restart(&mut self) -> (Outcome, Outcome) {
        self.broker = self.disk.restore(self.now);
        self.model.tick();
        (Outcome::Done, Outcome::Done)
    }

    /// Writes the step's effects to the disk, then compares every queue with the model and
    /// checks the contract on the whole state.
    pub fn check_state(&mut self, step: usize, op: &impl Debug) {
        let now = self.now;
        self.broker.check_invariants(now);
        let effects = self.broker.take_effects();
        self.disk.apply(effects);

        let broker_names: BTreeSet<String> =
            self.names.iter().filter(|n| self.broker.queue_id(n).is_ok()).map(|n| n.to_string()).collect();
        let model_names: BTreeSet<String> = self.model.queues.keys().cloned().collect();
        assert_eq!(broker_names, model_names, "queues after step {step} {op:?}");

        let mut count = 0;
        for name in &model_names {
            let id = self.broker.queue_id(name).expect("listed");
            let actual = broker_state(&self.broker, id, now);
            let expected = self.model.state(name);
            assert_eq!(actual, expected, "queue {name} after step {step} {op:?}");
            count += actual.rows.len();
        }
        assert_eq!(count, self.broker.message_count(), "messages outside every queue");

        for (k, h) in self.holds.iter().enumerate() {
            let others = self.holds.iter().filter(|o| o.id == h.id && o.until > now).count();
            assert!(others <= 1, "m{} held by {others} unexpired deliveries (one is receipt {k})", h.id);
        }
    }

    /// A broker rebuilt from the disk right now must be in the state the live broker reaches
    /// once its due timers have run. Returns both, for a suite to probe further.
    pub fn shadow_restart(&self, step: usize, op: &impl Debug) -> (Broker, Broker) {
        let mut live = self.broker.clone();
        live.tick(self.now);
        let restored = self.disk.clone().restore(self.now);
        for name in self.names {
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
        (live, restored)
    }
}

/// A queue's state as the broker reports it, in the model's terms.
pub fn broker_state(broker: &Broker, id: QueueId, now: TimeMs) -> QueueState {
    let s = broker.queue_view(id, now).expect("live queue").stats;
    let rows = broker
        .peek(id, 10_000, now)
        .into_iter()
        .map(|(_, m, state)| Row {
            id: m.id.0,
            state,
            priority: m.priority,
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
