//! `ReceiveRequestAttemptId` on FIFO queues: the answer of a receive, kept so that a retry
//! with the same attempt id within five minutes gets the same messages and receipt handles
//! (for instance after a network error lost the first answer).
//!
//! Kept in memory only: a restart forgets every answer, and a retry after it receives
//! afresh (the messages the lost answer held then come back when their visibility timeout
//! ends, as they would without an attempt id). The memory is bounded by
//! [`RECEIVE_ATTEMPTS_MAX`] answers and [`RECEIVE_ATTEMPT_BYTES_MAX`] message bytes; past
//! either bound the oldest answers are forgotten first, with the same consequence.

use std::collections::{HashMap, VecDeque};

use sluice_store::ReceivedMessage;

use super::{RECEIVE_ATTEMPT_BYTES_MAX, RECEIVE_ATTEMPT_WINDOW_MS, RECEIVE_ATTEMPTS_MAX};

/// A remembered answer.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub messages: Vec<ReceivedMessage>,
    /// The visibility timeout the receive gave, which a retry gives again.
    pub visibility_ms: u64,
}

#[derive(Debug)]
struct Entry {
    attempt: Attempt,
    stored_at_ms: u64,
    bytes: u64,
    /// Which insertion this is, so that a stale place in `order` is told from the live one.
    serial: u64,
}

/// `(queue name, attempt id)`.
type Key = (String, String);

#[derive(Debug, Default)]
pub struct Attempts {
    entries: HashMap<Key, Entry>,
    /// Insertions, oldest first.
    order: VecDeque<(u64, Key)>,
    bytes: u64,
    next_serial: u64,
}

/// What an answer costs to keep: its message bytes plus a little for the rest.
fn cost(messages: &[ReceivedMessage]) -> u64 {
    messages
        .iter()
        .map(|m| {
            let c = &m.message.content;
            let attributes: usize =
                c.attributes.iter().chain(&c.system_attributes).map(|(k, v)| k.len() + value_len(v)).sum();
            (c.body.len() + attributes + m.receipt.len() + 256) as u64
        })
        .sum()
}

fn value_len(v: &sluice_core::AttributeValue) -> usize {
    v.data_type.len()
        + match &v.value {
            sluice_core::message::AttributeData::Text(t) => t.len(),
            sluice_core::message::AttributeData::Bytes(b) => b.len(),
        }
}

impl Attempts {
    /// The answer remembered for `id` on `queue`, if it is younger than the window.
    pub fn recall(&mut self, queue: &str, id: &str, now_ms: u64) -> Option<Attempt> {
        self.prune(now_ms);
        let entry = self.entries.get(&(queue.to_string(), id.to_string()))?;
        (now_ms.saturating_sub(entry.stored_at_ms) < RECEIVE_ATTEMPT_WINDOW_MS).then(|| entry.attempt.clone())
    }

    /// Remembers a receive's answer (an empty answer is not worth keeping: a retry simply
    /// receives again).
    pub fn remember(&mut self, queue: &str, id: &str, attempt: Attempt, now_ms: u64) {
        if attempt.messages.is_empty() {
            return;
        }
        let bytes = cost(&attempt.messages);
        if bytes > RECEIVE_ATTEMPT_BYTES_MAX {
            return;
        }
        let key = (queue.to_string(), id.to_string());
        self.forget(&key);
        let serial = self.next_serial;
        self.next_serial += 1;
        self.bytes += bytes;
        self.order.push_back((serial, key.clone()));
        self.entries.insert(key, Entry { attempt, stored_at_ms: now_ms, bytes, serial });
        self.prune(now_ms);
    }

    /// Forgets the answer for `id` on `queue` (a retry found it no longer valid).
    pub fn discard(&mut self, queue: &str, id: &str) {
        self.forget(&(queue.to_string(), id.to_string()));
    }

    fn forget(&mut self, key: &Key) {
        if let Some(old) = self.entries.remove(key) {
            self.bytes -= old.bytes;
        }
    }

    /// Drops answers past the window, then the oldest while over a bound.
    fn prune(&mut self, now_ms: u64) {
        while let Some((serial, key)) = self.order.front() {
            let live = self.entries.get(key).filter(|e| e.serial == *serial);
            let drop = match live {
                None => true,
                Some(e) => {
                    now_ms.saturating_sub(e.stored_at_ms) >= RECEIVE_ATTEMPT_WINDOW_MS
                        || self.entries.len() > RECEIVE_ATTEMPTS_MAX
                        || self.bytes > RECEIVE_ATTEMPT_BYTES_MAX
                }
            };
            if !drop {
                break;
            }
            let (serial, key) = self.order.pop_front().expect("front exists");
            if self.entries.get(&key).is_some_and(|e| e.serial == serial) {
                self.forget(&key);
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::message::{MessageContent, MessageEnvelope};
    use sluice_core::{MessageId, MessageMeta};
    use sluice_store::StoredMessage;

    fn message(seq: u64, body_bytes: usize) -> ReceivedMessage {
        ReceivedMessage {
            receipt: format!("r{seq}"),
            message: StoredMessage {
                seq,
                meta: MessageMeta {
                    queue: 1,
                    id: MessageId(u128::from(seq)),
                    priority: 0,
                    sent_at: 0,
                    visible_at: 0,
                    in_flight: true,
                    receive_count: 1,
                    epoch: 1,
                    first_received_at: None,
                    size_bytes: body_bytes as u64,
                    group_id: Some("g".into()),
                    dead_letter_source: None,
                    last_error: None,
                },
                content: MessageContent {
                    body: vec![b'x'; body_bytes],
                    body_binary: false,
                    attributes: Default::default(),
                    system_attributes: Default::default(),
                    envelope: MessageEnvelope::default(),
                },
            },
        }
    }

    fn attempt(seqs: &[u64], body_bytes: usize) -> Attempt {
        Attempt { messages: seqs.iter().map(|s| message(*s, body_bytes)).collect(), visibility_ms: 30_000 }
    }

    #[test]
    fn an_answer_is_recalled_within_the_window_only() {
        let mut a = Attempts::default();
        a.remember("q.fifo", "try-1", attempt(&[1, 2], 10), 1_000);
        let got = a.recall("q.fifo", "try-1", 1_000 + RECEIVE_ATTEMPT_WINDOW_MS - 1).expect("remembered");
        assert_eq!(got.messages.iter().map(|m| m.receipt.as_str()).collect::<Vec<_>>(), ["r1", "r2"]);
        assert_eq!(got.visibility_ms, 30_000);
        assert!(a.recall("other.fifo", "try-1", 1_000).is_none(), "attempt ids are per queue");
        assert!(a.recall("q.fifo", "try-2", 1_000).is_none());
        assert!(a.recall("q.fifo", "try-1", 1_000 + RECEIVE_ATTEMPT_WINDOW_MS).is_none());
        assert_eq!(a.len(), 0, "expired answers are dropped");
        a.remember("q.fifo", "empty", attempt(&[], 10), 1_000);
        assert_eq!(a.len(), 0, "empty answers are not kept");
    }

    #[test]
    fn bounded_by_count_and_bytes_oldest_first() {
        let mut a = Attempts::default();
        for i in 0..=RECEIVE_ATTEMPTS_MAX as u64 {
            a.remember("q.fifo", &format!("t{i}"), attempt(&[i], 1), 5);
        }
        assert_eq!(a.len(), RECEIVE_ATTEMPTS_MAX);
        assert!(a.recall("q.fifo", "t0", 5).is_none(), "the oldest went first");
        assert!(a.recall("q.fifo", &format!("t{RECEIVE_ATTEMPTS_MAX}"), 5).is_some());

        let mut a = Attempts::default();
        let big = (RECEIVE_ATTEMPT_BYTES_MAX / 3) as usize;
        for i in 0..3 {
            a.remember("q.fifo", &format!("b{i}"), attempt(&[i], big), 5);
        }
        assert!(a.recall("q.fifo", "b0", 5).is_none(), "over the byte bound the oldest is forgotten");
        assert!(a.recall("q.fifo", "b1", 5).is_some() && a.recall("q.fifo", "b2", 5).is_some());
        a.discard("q.fifo", "b1");
        assert!(a.recall("q.fifo", "b1", 5).is_none());
        assert!(a.bytes <= RECEIVE_ATTEMPT_BYTES_MAX);
    }

    #[test]
    fn remembering_again_replaces_the_answer() {
        let mut a = Attempts::default();
        a.remember("q.fifo", "t", attempt(&[1], 10), 0);
        a.remember("q.fifo", "t", attempt(&[2], 10), 1);
        let got = a.recall("q.fifo", "t", 2).unwrap();
        assert_eq!(got.messages[0].receipt, "r2");
        assert_eq!(a.len(), 1);
        assert_eq!(a.bytes, cost(&got.messages));
    }
}
