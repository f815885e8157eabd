//! The broker's clock-driven work: `tick` applies everything due (ended delays and visibility
//! timeouts, dead-lettering, retention), `reschedule` keeps each queue's next due time, and
//! the checks tests make of the whole state.

use super::*;

impl Broker {
    /// Applies everything due at `now_ms`: delays and visibility timeouts that ended (with
    /// dead-lettering where the policy says so) and messages past retention.
    pub fn tick(&mut self, now_ms: TimeMs) {
        while let Some(&(due, id)) = self.due.first() {
            if due > now_ms {
                break;
            }
            self.due.pop_first();
            self.scheduled.remove(&id);
            self.tick_queue(id, now_ms);
            self.reschedule(id);
        }
    }

    pub(super) fn tick_queue(&mut self, id: QueueId, now_ms: TimeMs) {
        let retention_ms = self.queues[&id].attributes.retention_ms;
        // With `expired_to_dlq`, and a dead-letter queue that exists now, expired messages move
        // there; otherwise they are deleted, as without it.
        let expire_to =
            if self.queues[&id].attributes.expired_to_dlq { self.dead_letter_target(id).map(|(d, _)| d) } else { None };
        while let Some(&(sent_at, seq)) = self.queues[&id].by_age.first() {
            if sent_at.saturating_add(retention_ms) > now_ms {
                break;
            }
            match expire_to {
                Some(dlq) => {
                    self.move_to_dead_letter(seq, dlq, now_ms, messages::DeadLetterCause::Expired);
                    self.count_refusal(id, |r| &mut r.expired_to_dlq, 1);
                }
                None => {
                    self.counters.expired += 1;
                    self.delete_message(id, seq);
                }
            }
        }
        let queue = self.queues.get_mut(&id).expect("queue exists");
        while let Some((expires_at, key)) = queue.dedup_expiry.first().cloned() {
            if expires_at > now_ms {
                break;
            }
            queue.dedup_expiry.pop_first();
            queue.dedup.remove(&key);
            self.effects.push(Effect::DeleteDedup { queue: id, key });
        }
        let dead_letter = self.dead_letter_target(id);
        loop {
            let queue = self.queues.get_mut(&id).expect("queue exists");
            let Some(&(visible_at, seq)) = queue.timers.first() else { break };
            if visible_at > now_ms {
                break;
            }
            let meta = self.messages.get_mut(&seq).expect("message exists");
            let was_in_flight = meta.in_flight;
            queue.unindex(seq, meta);
            meta.in_flight = false;
            queue.index(seq, meta, now_ms);
            self.woken.insert(id);
            if let Some((dlq, exhausted_at)) = dead_letter
                && was_in_flight
                && DeadLetter::is_exhausted(meta.receive_count, exhausted_at)
            {
                self.move_to_dead_letter(seq, dlq, now_ms, messages::DeadLetterCause::Receives);
            } else if was_in_flight {
                // Persisted, so that a restart finds the hold ended here, under this moment's
                // dead-letter policy, instead of ending it again under the policy it then finds.
                self.effects.push(Effect::PutMessage { seq, meta: meta.clone() });
            }
        }
    }

    pub(super) fn reschedule(&mut self, id: QueueId) {
        if let Some(t) = self.scheduled.remove(&id) {
            self.due.remove(&(t, id));
        }
        if let Some(t) = self.queues.get(&id).and_then(Queue::next_due) {
            self.due.insert((t, id));
            self.scheduled.insert(id, t);
        }
    }

    // ----- inspection (tests, invariants) -------------------------------------------------

    pub fn message(&self, seq: u64) -> Option<&MessageMeta> {
        self.messages.get(&seq)
    }

    pub fn message_count(&self) -> usize {
        self.messages.len()
    }

    /// Checks the internal indexes against the message map; panics with a description on the
    /// first inconsistency. Cheap enough for tests, too slow for every operation.
    pub fn check_invariants(&self, now_ms: TimeMs) {
        let mut seen = 0;
        for (id, queue) in &self.queues {
            assert_eq!(self.names.get(&queue.name), Some(id), "name index of queue {id}");
            assert_eq!(queue.ready.len() + queue.timers.len(), queue.members.len(), "indexes of queue {id}");
            assert_eq!(queue.by_age.len(), queue.members.len(), "age index of queue {id}");
            let mut in_flight = 0;
            for seq in &queue.members {
                let meta = &self.messages[seq];
                assert_eq!(meta.queue, *id, "message {seq} sits in the wrong queue");
                if meta.in_flight {
                    assert!(queue.timers.contains(&(meta.visible_at, *seq)), "in-flight message {seq} without a timer");
                    in_flight += 1;
                } else if meta.visible_at > now_ms {
                    assert!(queue.timers.contains(&(meta.visible_at, *seq)), "delayed message {seq} without a timer");
                }
            }
            assert_eq!(queue.in_flight, in_flight, "in-flight count of queue {id}");
            queue.check_fair();
            assert_eq!(self.scheduled.get(id).copied(), queue.next_due(), "schedule of queue {id}");
            seen += queue.members.len();
        }
        assert_eq!(seen, self.messages.len(), "messages outside every queue");
    }
}
