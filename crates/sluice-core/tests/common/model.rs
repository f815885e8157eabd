//! The reference model that both model tests (`model.rs`, standard queues; `fifo_model.rs`,
//! FIFO queues) run beside the real `Broker`: queues by name, and every message of every queue
//! in one `Vec` in send order, scanned linearly, so that it is simple enough to be obviously
//! right. This file holds what both queue types share (timers, holds and receipts, dead-letter
//! and redrive moves, counts) and the outcomes both sides report; each suite adds its own sends
//! and receives (priorities or message groups) in an `impl Model` block of its own.

use std::collections::BTreeMap;

use sluice_core::{BrokerError, EntryError, MessageState, QueueAttributes, TimeMs};

// ----- outcomes, as both sides report them --------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Created {
        new: bool,
    },
    Done,
    /// A FIFO send: the message enqueued or, for a duplicate, the one it matched.
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

/// What a consumer learns about a delivered message. `priority` is 0 on FIFO queues and
/// `group` empty on standard ones, on both sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub id: u128,
    pub priority: u8,
    pub group: String,
    pub receive_count: u32,
    pub visible_until: TimeMs,
    pub first_received_at: Option<TimeMs>,
    pub dead_letter_source: Option<String>,
    pub last_error: Option<String>,
}

/// One message as peek shows it, in the fields both sides can state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub id: u128,
    pub state: MessageState,
    pub priority: u8,
    pub group: String,
    pub sent_at: TimeMs,
    pub receive_count: u32,
    pub first_received_at: Option<TimeMs>,
    pub dead_letter_source: Option<String>,
    pub last_error: Option<String>,
}

/// A queue's counts and contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueState {
    pub visible: u64,
    pub in_flight: u64,
    pub delayed: u64,
    pub oldest_age_ms: Option<u64>,
    pub dead_letter_depth: Option<u64>,
    pub rows: Vec<Row>,
}

pub fn broker_error(e: BrokerError) -> Outcome {
    Outcome::Err(match e {
        BrokerError::Invalid(v) => format!("Invalid({})", v.field),
        BrokerError::QueueNotFound(_) => "QueueNotFound".into(),
        BrokerError::QueueExists(_) => "QueueExists".into(),
        BrokerError::DeadLetterQueueNotFound(_) => "DeadLetterQueueNotFound".into(),
        other => format!("{other:?}"),
    })
}

pub fn entry_error(e: EntryError) -> Outcome {
    Outcome::Err(match e {
        EntryError::Invalid(v) => format!("Invalid({})", v.field),
        EntryError::MessageTooLarge { .. } => "MessageTooLarge".into(),
        other => format!("{other:?}"),
    })
}

pub fn not_found() -> Outcome {
    Outcome::Err("QueueNotFound".into())
}

// ----- the model -----------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct MQueue {
    /// Never reused, unlike names: a queue deleted and created again is another incarnation.
    pub incarnation: u64,
    pub attributes: QueueAttributes,
    /// FIFO dedup keys still remembered: (group when scoped by group, dedup id or body) → the
    /// message first sent under it, and when the window ends. Always empty on standard queues.
    pub dedup: BTreeMap<(Option<String>, String), (u128, TimeMs)>,
}

#[derive(Debug, Clone, Default)]
pub struct MMessage {
    pub id: u128,
    /// The incarnation of the queue it is in.
    pub queue: u64,
    pub priority: u8,
    /// Body bytes, which only the standard suite's receive limits.
    pub size: u64,
    /// The message group; empty on standard queues.
    pub group: String,
    pub sent_at: TimeMs,
    /// When in flight, the end of the hold; otherwise when it becomes (or became) visible.
    pub visible_at: TimeMs,
    /// Held by a consumer. Stays true after the hold ends until the timers run, as a receive
    /// at the same instant must not hand it out again.
    pub in_flight: bool,
    pub receive_count: u32,
    pub first_received_at: Option<TimeMs>,
    pub dead_letter_source: Option<String>,
    pub last_error: Option<String>,
    /// The delivery whose receipt may still act on the message: the latest receive, until the
    /// message is received again or moved to another queue (or back).
    pub delivery: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MReceipt {
    pub queue: u64,
    pub id: u128,
    pub delivery: u64,
}

#[derive(Debug, Clone, Default)]
pub struct Model {
    pub now: TimeMs,
    pub queues: BTreeMap<String, MQueue>,
    /// Every message of every queue in send order (ids are handed out in send order, and a
    /// message keeps its place when it changes queues).
    pub messages: Vec<MMessage>,
    pub incarnations: u64,
    pub deliveries: u64,
}

impl Model {
    pub fn name_of(&self, incarnation: u64) -> &str {
        self.queues.iter().find(|(_, q)| q.incarnation == incarnation).map(|(n, _)| n.as_str()).expect("live queue")
    }

    pub fn queue_of(&self, incarnation: u64) -> &MQueue {
        self.queues.values().find(|q| q.incarnation == incarnation).expect("live queue")
    }

    pub fn is_visible(&self, m: &MMessage) -> bool {
        !m.in_flight && m.visible_at <= self.now
    }

    /// The dead-letter queue and limit of queue `incarnation`, if its policy names a live queue.
    pub fn dead_letter_target(&self, incarnation: u64) -> Option<(u64, u32)> {
        let dl = self.queue_of(incarnation).attributes.dead_letter.as_ref()?;
        let target = self.queues.get(&dl.queue)?.incarnation;
        (target != incarnation).then_some((target, dl.max_receive_count))
    }

    /// Moves message `i` to its queue's dead-letter queue if it has used up its receives, as
    /// a receive that reaches it or the end of its hold does; says whether it moved.
    pub fn dead_letter_if_exhausted(&mut self, i: usize) -> bool {
        let Some((target, max)) = self.dead_letter_target(self.messages[i].queue) else { return false };
        if self.messages[i].receive_count < max {
            return false;
        }
        let source = self.name_of(self.messages[i].queue).to_string();
        let now = self.now;
        let m = &mut self.messages[i];
        m.queue = target;
        m.dead_letter_source = Some(source);
        m.in_flight = false;
        m.visible_at = now;
        m.delivery = None;
        true
    }

    /// Ends a hold: visible at `at`, or off to the dead-letter queue if out of receives.
    pub fn make_available(&mut self, i: usize, at: TimeMs) {
        self.messages[i].in_flight = false;
        self.messages[i].visible_at = at;
        self.dead_letter_if_exhausted(i);
    }

    fn expired(&self, m: &MMessage) -> bool {
        m.sent_at + self.queue_of(m.queue).attributes.retention_ms <= self.now
    }

    /// The timers: retention, dedup windows, then ended holds (dead-lettering exhausted
    /// messages, which may then be past the dead-letter queue's retention).
    pub fn tick(&mut self) {
        let now = self.now;
        for q in self.queues.values_mut() {
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

    /// Any create, including ones that must fail (a dead-letter queue that is missing or is the
    /// queue itself, different attributes for an existing name).
    pub fn create(&mut self, name: &str, attributes: QueueAttributes) -> Outcome {
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
        let queue = MQueue { incarnation: self.incarnations, attributes, dedup: BTreeMap::new() };
        self.queues.insert(name.to_string(), queue);
        Outcome::Created { new: true }
    }

    /// Purging drops a queue's messages and forgets its dedup keys.
    pub fn purge(&mut self, name: &str) -> Outcome {
        let Some(q) = self.queues.get_mut(name) else { return not_found() };
        q.dedup.clear();
        let incarnation = q.incarnation;
        let before = self.messages.len();
        self.messages.retain(|m| m.queue != incarnation);
        Outcome::Purged((before - self.messages.len()) as u64)
    }

    /// Hands message `i` to a consumer for `vis_ms`: what the consumer sees and its receipt.
    pub fn deliver(&mut self, i: usize, vis_ms: u64) -> (Seen, MReceipt) {
        self.deliveries += 1;
        let now = self.now;
        let m = &mut self.messages[i];
        m.in_flight = true;
        m.visible_at = now + vis_ms;
        m.receive_count += 1;
        m.first_received_at.get_or_insert(now);
        m.delivery = Some(self.deliveries);
        let seen = Seen {
            id: m.id,
            priority: m.priority,
            group: m.group.clone(),
            receive_count: m.receive_count,
            visible_until: m.visible_at,
            first_received_at: m.first_received_at,
            dead_letter_source: m.dead_letter_source.clone(),
            last_error: m.last_error.clone(),
        };
        (seen, MReceipt { queue: m.queue, id: m.id, delivery: self.deliveries })
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

    fn is_fifo(&self, name: &str) -> bool {
        self.queues.get(name).is_some_and(|q| q.attributes.fifo)
    }

    /// The latest delivery may ack, even after its hold ended; on a FIFO queue only the current
    /// hold may (an expired receipt must not delete a message out of its group's turn).
    pub fn ack(&mut self, name: &str, r: &MReceipt) -> Outcome {
        let holder = if self.is_fifo(name) { self.in_flight_holder(name, r) } else { self.holder(name, r) };
        match holder {
            Ok(i) => {
                self.messages.remove(i);
                Outcome::Done
            }
            Err(o) => o,
        }
    }

    /// `lenient`: the SQS form, which also re-hides a message whose hold ended unreceived.
    /// FIFO queues have no lenient form: once a hold ended, the group may have gone to another
    /// consumer, so an expired receipt must not hide the message again. SQS answers "receipt
    /// handle has expired" there too.
    ///
    /// The lenient form also tells a stale receipt whose message left the queue (deleted,
    /// dead-lettered, expired: `MessageGone`) from one whose message was received again since
    /// (`StaleReceipt`), because SQS answers the two differently.
    pub fn change_visibility(&mut self, name: &str, r: &MReceipt, timeout_ms: u64, lenient: bool) -> Outcome {
        if lenient
            && let Err(Outcome::Err(e)) = self.holder(name, r)
            && e == "StaleReceipt"
            && !self.messages.iter().any(|m| m.id == r.id && m.queue == r.queue)
        {
            return Outcome::Err("MessageGone".into());
        }
        if lenient && !self.is_fifo(name) {
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

    pub fn nack(&mut self, name: &str, r: &MReceipt, delay_ms: u64, error: Option<String>) -> Outcome {
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

    /// Moves up to `max` visible messages of `from` (highest priority, then first sent) to `to`
    /// or, without `to` (a redrive), each back to the queue it was dead-lettered from; a
    /// message with nowhere else to go counts as failed.
    pub fn move_messages(&mut self, from: &str, to: Option<&str>, max: u64) -> Outcome {
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

    pub fn state(&self, name: &str) -> QueueState {
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
                group: m.group.clone(),
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
