//! The broker's message operations: send (with FIFO dedup), receive, ack, visibility changes,
//! nack, peek, redrive moves, and the dead-lettering they share.

use super::*;
use crate::overflow::{
    DepthLimits, DepthReport, Placement, REASON_DROP_HEAD, REASON_EXPIRED, REASON_REJECT_TO_DLQ, place,
};

/// What the earlier sends of one atomic commit do to a queue's depth, for
/// [`Broker::placement`]: the messages they add and how many of the oldest they drop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PendingDepth {
    pub added: Depth,
    pub dropped: usize,
    pub dropped_bytes: u64,
}

/// Why a message moves to its queue's dead-letter queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DeadLetterCause {
    /// It used up its receives (`dead_letter.max_receive_count`): its last error stays.
    Receives,
    /// `drop_head` made room with it.
    DropHead,
    /// Its retention ran out and the queue has `expired_to_dlq`; its retention starts again in
    /// the dead-letter queue, where it would otherwise expire at once.
    Expired,
}

impl Broker {
    /// Whether queue `id` would accept `message` now, without changing anything: what
    /// [`Broker::send`] decides before it enqueues. An atomic commit checks every send with it
    /// before applying any, so that its sends cannot fail halfway.
    pub fn admit(&self, id: QueueId, message: &NewMessage, now_ms: TimeMs) -> Result<Admission, EntryError> {
        message.validate()?;
        let queue = self.queues.get(&id).expect("caller resolved the queue");
        let dedup_key = if queue.is_fifo() {
            let key = fifo_send_rules(&queue.attributes, message)?;
            if let Some(entry) = queue.dedup.get(&key)
                && entry.expires_at > now_ms
            {
                return Ok(Admission::Duplicate(Sent { duplicate: true, ..Sent::new(entry.seq, entry.id) }));
            }
            Some(key)
        } else {
            if message.dedup_id.is_some() {
                return Err(
                    ValidationError::new("dedup_id", "only FIFO queues deduplicate; this queue is standard").into()
                );
            }
            None
        };
        let size_bytes = message.size_bytes();
        if size_bytes > queue.attributes.message_bytes_max {
            return Err(EntryError::MessageTooLarge { size_bytes, max_bytes: queue.attributes.message_bytes_max });
        }
        let retention_ms = queue.attributes.retention_ms;
        let visible_at = match (message.delay_ms, message.deliver_at_ms) {
            (_, Some(at)) => at.max(now_ms),
            (Some(delay), None) => now_ms.saturating_add(delay),
            (None, None) => now_ms.saturating_add(queue.attributes.delay_ms),
        };
        if visible_at - now_ms >= retention_ms {
            let field = if message.deliver_at_ms.is_some() { "deliver_at" } else { "delay_ms" };
            return Err(ValidationError::new(
                field,
                format!("the message would become visible after this queue's retention ({retention_ms} ms) ends"),
            )
            .into());
        }
        Ok(Admission::New { dedup_key, visible_at, size_bytes })
    }

    /// Accepts one message into queue `id`. The caller writes the body under the returned
    /// sequence number in the same batch as the effects. A queue at its depth limit follows its
    /// `overflow` policy (see [`Broker::placement`]): the answer says whether the message went
    /// to the dead-letter queue instead, or how many old messages went there to make room.
    ///
    /// A queue with a `rate_limit` takes a token for every entry sent, before anything else is
    /// checked (as PostgreSQL takes one per entry of a call); without one the entry is refused
    /// as `RateLimited`.
    pub fn send(
        &mut self,
        id: QueueId,
        message: &NewMessage,
        message_id: MessageId,
        now_ms: TimeMs,
    ) -> Result<Sent, EntryError> {
        self.send_as(id, message, message_id, now_ms, true)
    }

    /// [`Broker::send`] without the rate limit, for an atomic commit (schedules' ticks, relays,
    /// job callbacks): its sends were checked with [`Broker::admit`] and
    /// [`Broker::placement`] and must not fail halfway, and the rate limit bounds producers.
    pub fn send_unlimited(
        &mut self,
        id: QueueId,
        message: &NewMessage,
        message_id: MessageId,
        now_ms: TimeMs,
    ) -> Result<Sent, EntryError> {
        self.send_as(id, message, message_id, now_ms, false)
    }

    fn send_as(
        &mut self,
        id: QueueId,
        message: &NewMessage,
        message_id: MessageId,
        now_ms: TimeMs,
        limited: bool,
    ) -> Result<Sent, EntryError> {
        if limited && let Some(limit) = self.queues[&id].attributes.rate_limit {
            let queue = self.queues.get_mut(&id).expect("queue exists");
            let (bucket, taken) = crate::rate::take(limit, queue.bucket, 1, now_ms);
            queue.bucket = Some(bucket);
            if taken.granted == 0 {
                self.count_refusal(id, |r| &mut r.rate_limited, 1);
                return Err(EntryError::RateLimited { retry_after_ms: taken.retry_after_ms.unwrap_or(1) });
            }
        }
        let (dedup_key, visible_at, size_bytes) = match self.admit(id, message, now_ms)? {
            Admission::Duplicate(sent) => return Ok(sent),
            Admission::New { dedup_key, visible_at, size_bytes } => (dedup_key, visible_at, size_bytes),
        };
        let placement = self.placement(id, size_bytes, &mut PendingDepth::default());
        let dead_letter = self.dead_letter_target(id).map(|(dlq, _)| dlq);
        let mut sent = Sent::new(0, message_id);
        match (placement, dead_letter) {
            (Placement::Queue { drop }, _) if drop > 0 => {
                let dlq = dead_letter.expect("drop_head places only with a dead-letter queue");
                let victims: Vec<u64> = self.droppable(id).take(drop).collect();
                for seq in victims {
                    self.move_to_dead_letter(seq, dlq, now_ms, DeadLetterCause::DropHead);
                }
                self.count_refusal(id, |r| &mut r.drop_head, drop as u64);
                sent.dropped = drop as u32;
            }
            (Placement::Queue { .. }, _) => {}
            (Placement::DeadLetter, Some(_)) => {
                self.count_refusal(id, |r| &mut r.rejected_to_dlq, 1);
                sent.dead_lettered = true;
            }
            (Placement::DeadLetter, None) | (Placement::Refused, _) => {
                self.count_refusal(id, |r| &mut r.queue_full, 1);
                let queue = &self.queues[&id];
                return Err(EntryError::QueueFull {
                    depth: Depth { messages: queue.len() as u64, bytes: queue.bytes },
                    max_messages: queue.attributes.max_depth_messages,
                    max_bytes: queue.attributes.max_depth_bytes,
                });
            }
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.next_seq > self.seq_reserved {
            self.seq_reserved = seq + SEQ_RESERVE_BLOCK;
            self.put_high_water();
        }
        let mut meta = MessageMeta {
            queue: id,
            id: message_id,
            priority: message.priority,
            sent_at: now_ms,
            visible_at,
            in_flight: false,
            receive_count: 0,
            epoch: 0,
            first_received_at: None,
            size_bytes,
            group_id: message.envelope.group_id.clone(),
            dead_letter_source: None,
            last_error: None,
        };
        if sent.dead_lettered {
            // Straight into the dead-letter queue, visible there at once, naming where it was
            // sent and why it is not there.
            meta.queue = dead_letter.expect("checked above");
            meta.visible_at = now_ms;
            meta.dead_letter_source = Some(self.queues[&id].name.clone());
            meta.last_error = Some(REASON_REJECT_TO_DLQ.to_string());
            self.counters.dead_lettered += 1;
        }
        self.insert_message(seq, meta, now_ms);
        if let Some(key) = dedup_key {
            // Remembered by the queue sent to even when the message went to its dead-letter
            // queue, so that a producer's retry is answered as a duplicate, not sent again.
            let expires_at = now_ms.saturating_add(self.queues[&id].attributes.dedup_window_ms);
            self.remember_dedup(id, key.clone(), DedupEntry { id: message_id, seq, expires_at });
            self.effects.push(Effect::PutDedup { queue: id, key, id: message_id, seq, expires_at });
            self.reschedule(id);
        }
        let queue = &self.queues[&id];
        if queue.attributes.has_depth_limit() {
            let depth = Depth { messages: queue.len() as u64, bytes: queue.bytes };
            sent.depth = Some(DepthReport { depth, limits: DepthLimits::of(&queue.attributes) });
        }
        sent.seq = seq;
        Ok(sent)
    }

    /// Where a new message of `size_bytes` would go in queue `id` under its depth limits
    /// (`overflow::place`), after what `pending` says earlier sends of the same atomic commit
    /// do to the queue; `pending` is updated as if this one were sent. Changes nothing.
    pub fn placement(&self, id: QueueId, size_bytes: u64, pending: &mut PendingDepth) -> Placement {
        let queue = &self.queues[&id];
        let limits = DepthLimits::of(&queue.attributes);
        if !limits.is_bounded() {
            return Placement::Queue { drop: 0 };
        }
        let depth = Depth {
            messages: (queue.len() - pending.dropped) as u64 + pending.added.messages,
            bytes: queue.bytes - pending.dropped_bytes + pending.added.bytes,
        };
        let sizes = self.droppable(id).skip(pending.dropped).map(|seq| self.messages[&seq].size_bytes);
        let placement = place(&limits, depth, size_bytes, sizes, self.dead_letter_target(id).is_some());
        if let Placement::Queue { drop } = placement {
            let dropped_bytes: u64 =
                self.droppable(id).skip(pending.dropped).take(drop).map(|seq| self.messages[&seq].size_bytes).sum();
            pending.dropped += drop;
            pending.dropped_bytes += dropped_bytes;
            pending.added.messages += 1;
            pending.added.bytes += size_bytes;
        }
        placement
    }

    /// The messages of queue `id` that `drop_head` may move, oldest first: those not in flight,
    /// whose consumers hold no receipt.
    fn droppable(&self, id: QueueId) -> impl Iterator<Item = u64> + '_ {
        self.queues[&id].by_age.iter().map(|&(_, seq)| seq).filter(|seq| !self.messages[seq].in_flight)
    }

    pub(super) fn count_refusal(&mut self, id: QueueId, pick: fn(&mut RefusalCounts) -> &mut u64, n: u64) {
        *pick(&mut self.counters.refusals) += n;
        if let Some(queue) = self.queues.get_mut(&id) {
            *pick(&mut queue.refusals) += n;
        }
    }

    pub(super) fn remember_dedup(&mut self, id: QueueId, key: String, entry: DedupEntry) {
        let queue = self.queues.get_mut(&id).expect("queue exists");
        queue.dedup_expiry.insert((entry.expires_at, key.clone()));
        if let Some(old) = queue.dedup.insert(key.clone(), entry) {
            queue.dedup_expiry.remove(&(old.expires_at, key));
        }
    }

    /// Loads a deduplication record read from disk. Returns false (keep nothing) when its queue
    /// is gone or its window has ended; the caller should then delete the record.
    pub fn restore_dedup(&mut self, id: QueueId, key: String, entry: DedupEntry, now_ms: TimeMs) -> bool {
        if entry.expires_at <= now_ms || !self.queues.get(&id).is_some_and(Queue::is_fifo) {
            return false;
        }
        self.remember_dedup(id, key, entry);
        true
    }

    /// Forgets every deduplication key of queue `id` (purge and delete clear them, as SQS).
    pub(super) fn forget_dedup(&mut self, id: QueueId) {
        let queue = self.queues.get_mut(&id).expect("queue exists");
        queue.dedup_expiry.clear();
        for key in std::mem::take(&mut queue.dedup).into_keys() {
            self.effects.push(Effect::DeleteDedup { queue: id, key });
        }
    }

    pub(super) fn insert_message(&mut self, seq: u64, meta: MessageMeta, now_ms: TimeMs) {
        let id = meta.queue;
        let queue = self.queues.get_mut(&id).expect("queue exists");
        queue.insert(seq, &meta, now_ms);
        if meta.visible_at <= now_ms {
            self.woken.insert(id);
        }
        self.effects.push(Effect::PutMessage { seq, meta: meta.clone() });
        self.messages.insert(seq, meta);
        self.reschedule(id);
    }

    pub(super) fn delete_message(&mut self, id: QueueId, seq: u64) {
        let meta = self.messages.remove(&seq).expect("message exists");
        let queue = self.queues.get_mut(&id).expect("queue exists");
        queue.remove(seq, &meta);
        // On a FIFO queue, removing a group's held message can make the group deliver again:
        // long polls must hear of it as they do of a send.
        if queue.is_fifo() && queue.has_eligible_group() {
            self.woken.insert(id);
        }
        self.effects.push(Effect::DeleteMessage { seq });
    }

    /// Delivers up to `max` visible messages, highest priority first, then in send order, and
    /// hides each for `visibility_ms` (the queue's default when `None`). Messages that already
    /// reached the dead-letter policy's receive count move to the dead-letter queue instead.
    pub fn receive(&mut self, id: QueueId, max: u32, visibility_ms: Option<u64>, now_ms: TimeMs) -> Vec<Delivery> {
        let queue = &self.queues[&id];
        let visibility_ms = visibility_ms.unwrap_or(queue.attributes.visibility_timeout_ms);
        let dead_letter = self.dead_letter_target(id);
        let mut out = Vec::new();
        let mut bytes = 0u64;
        // FIFO: the group and sequence of the message taken last, to continue in that group.
        let mut continuing: Option<(String, u64)> = None;
        while out.len() < max as usize {
            let queue = self.queues.get_mut(&id).expect("queue exists");
            let cursor = continuing.as_ref().map(|(g, s)| (g.as_str(), *s));
            let Some(seq) = queue.next_ready(cursor) else { break };
            let meta = &self.messages[&seq];
            if queue.is_fifo() {
                continuing = Some((meta.group_id.clone().unwrap_or_default(), seq));
            }
            if let Some((dlq, exhausted_at)) = dead_letter
                && DeadLetter::is_exhausted(meta.receive_count, exhausted_at)
            {
                self.move_to_dead_letter(seq, dlq, now_ms, DeadLetterCause::Receives);
                continue;
            }
            if !out.is_empty() && bytes + meta.size_bytes > RECEIVE_BYTES_MAX {
                break;
            }
            bytes += meta.size_bytes;
            let meta = self.messages.get_mut(&seq).expect("message exists");
            queue.served(meta);
            queue.unindex(seq, meta);
            meta.in_flight = true;
            meta.visible_at = now_ms.saturating_add(visibility_ms);
            meta.receive_count += 1;
            meta.epoch += 1;
            meta.first_received_at.get_or_insert(now_ms);
            // In flight always goes through the timers, even with a zero timeout, so that this
            // receive cannot hand out the same message twice.
            queue.index(seq, meta, now_ms);
            let receipt = Receipt { queue: id, seq, epoch: meta.epoch };
            self.effects.push(Effect::PutMessage { seq, meta: meta.clone() });
            out.push(Delivery { seq, meta: meta.clone(), receipt });
        }
        self.reschedule(id);
        out
    }

    /// The dead-letter queue of queue `id` and the receive count at which its messages go there
    /// (`DeadLetter::exhausted_receive_count`), if its policy names a queue that exists.
    pub(super) fn dead_letter_target(&self, id: QueueId) -> Option<(QueueId, u32)> {
        let dl = self.queues[&id].attributes.dead_letter.as_ref()?;
        let dlq = *self.names.get(&dl.queue)?;
        // A dead-letter queue deleted and recreated as the other type is no target.
        let same_type = self.queues[&dlq].is_fifo() == self.queues[&id].is_fifo();
        (dlq != id && same_type).then_some((dlq, dl.exhausted_receive_count()))
    }

    pub(super) fn move_to_dead_letter(&mut self, seq: u64, dlq: QueueId, now_ms: TimeMs, cause: DeadLetterCause) {
        let mut meta = self.messages.remove(&seq).expect("message exists");
        let source = meta.queue;
        let source_queue = self.queues.get_mut(&source).expect("queue exists");
        source_queue.remove(seq, &meta);
        if source_queue.is_fifo() && source_queue.has_eligible_group() {
            self.woken.insert(source);
        }
        meta.dead_letter_source = Some(source_queue.name.clone());
        self.counters.dead_lettered += 1;
        meta.queue = dlq;
        // A receipt from before the move must never act on the message again, even if a
        // redrive brings it back to this queue.
        meta.epoch += 1;
        meta.in_flight = false;
        meta.visible_at = now_ms;
        match cause {
            DeadLetterCause::Receives => {}
            DeadLetterCause::DropHead => meta.last_error = Some(REASON_DROP_HEAD.to_string()),
            DeadLetterCause::Expired => {
                meta.last_error = Some(REASON_EXPIRED.to_string());
                meta.sent_at = now_ms;
            }
        }
        self.reschedule(source);
        self.insert_message(seq, meta, now_ms);
    }

    /// Checks that `receipt` names the current delivery of a message in queue `id`.
    pub(super) fn check_receipt(&self, id: QueueId, receipt: &Receipt) -> Result<&MessageMeta, EntryError> {
        if receipt.queue != id {
            return Err(EntryError::ForeignReceipt);
        }
        match self.messages.get(&receipt.seq) {
            Some(meta) if meta.queue == id && meta.epoch == receipt.epoch => Ok(meta),
            _ => Err(EntryError::StaleReceipt),
        }
    }

    pub(super) fn check_in_flight(
        &self,
        id: QueueId,
        receipt: &Receipt,
        now_ms: TimeMs,
    ) -> Result<&MessageMeta, EntryError> {
        let meta = self.check_receipt(id, receipt)?;
        if !(meta.in_flight && meta.visible_at > now_ms) {
            return Err(EntryError::NotInFlight);
        }
        Ok(meta)
    }

    /// Deletes the message the receipt delivered. Valid as long as no later receive of the same
    /// message happened, even after its visibility timeout passed (as in SQS).
    /// On a FIFO queue the hold must still be current: once it ended, the group may have moved
    /// on to another consumer, and an expired receipt deleting a message out of turn would
    /// break the group's order (SQS refuses it as an expired handle too).
    pub fn ack(&mut self, id: QueueId, receipt: &Receipt, now_ms: TimeMs) -> Result<(), EntryError> {
        if self.queues.get(&id).is_some_and(Queue::is_fifo) {
            self.check_in_flight(id, receipt, now_ms)?;
        }
        self.check_receipt(id, receipt)?;
        self.delete_message(id, receipt.seq);
        self.reschedule(id);
        Ok(())
    }

    /// Sets the remaining visibility timeout of an in-flight message, counted from now.
    /// Zero releases it at once.
    pub fn change_visibility(
        &mut self,
        id: QueueId,
        receipt: &Receipt,
        timeout_ms: u64,
        now_ms: TimeMs,
    ) -> Result<(), EntryError> {
        if timeout_ms > VISIBILITY_TIMEOUT_MS_MAX {
            return Err(
                ValidationError::new("timeout_ms", format!("must be at most {VISIBILITY_TIMEOUT_MS_MAX}")).into()
            );
        }
        self.check_in_flight(id, receipt, now_ms)?;
        if timeout_ms == 0 {
            self.make_available(id, receipt.seq, now_ms, now_ms);
        } else {
            let seq = receipt.seq;
            let meta = self.messages.get_mut(&seq).expect("message exists");
            let queue = self.queues.get_mut(&id).expect("queue exists");
            queue.unindex(seq, meta);
            meta.visible_at = now_ms.saturating_add(timeout_ms);
            queue.index(seq, meta, now_ms);
            self.effects.push(Effect::PutMessage { seq, meta: meta.clone() });
        }
        self.reschedule(id);
        Ok(())
    }

    /// As [`Broker::change_visibility`], but a message whose visibility timeout passed and that
    /// nobody received since is hidden again instead of refused: SQS answers success there.
    /// The receipt's delivery is still the newest, so no other consumer can hold the message.
    ///
    /// A stale receipt changes nothing here either, but its error says whether the message is
    /// still in the queue (`StaleReceipt`: received again since) or not (`MessageGone`), since
    /// SQS answers the first with success and the second with an error.
    pub fn change_visibility_lenient(
        &mut self,
        id: QueueId,
        receipt: &Receipt,
        timeout_ms: u64,
        now_ms: TimeMs,
    ) -> Result<(), EntryError> {
        let meta = match self.check_receipt(id, receipt) {
            Ok(meta) => meta,
            Err(EntryError::StaleReceipt) if self.messages.get(&receipt.seq).is_none_or(|m| m.queue != id) => {
                return Err(EntryError::MessageGone);
            }
            Err(e) => return Err(e),
        };
        // FIFO queues have no lenient form: once a hold ended, the message's group may have
        // gone to another consumer, and an expired receipt must not take a place in it again
        // (SQS answers "receipt handle has expired" there).
        if (meta.in_flight && meta.visible_at > now_ms) || self.queues[&id].is_fifo() {
            return self.change_visibility(id, receipt, timeout_ms, now_ms);
        }
        if timeout_ms > VISIBILITY_TIMEOUT_MS_MAX {
            return Err(
                ValidationError::new("timeout_ms", format!("must be at most {VISIBILITY_TIMEOUT_MS_MAX}")).into()
            );
        }
        if timeout_ms == 0 {
            return Ok(());
        }
        let seq = receipt.seq;
        let meta = self.messages.get_mut(&seq).expect("message exists");
        let queue = self.queues.get_mut(&id).expect("queue exists");
        queue.unindex(seq, meta);
        meta.in_flight = true;
        meta.visible_at = now_ms.saturating_add(timeout_ms);
        queue.index(seq, meta, now_ms);
        self.effects.push(Effect::PutMessage { seq, meta: meta.clone() });
        self.reschedule(id);
        Ok(())
    }

    /// Gives an in-flight message back: visible again after `delay_ms`, with `error` recorded
    /// as its last error. A message that reached its receive limit moves to the dead-letter
    /// queue at once.
    pub fn nack(
        &mut self,
        id: QueueId,
        receipt: &Receipt,
        delay_ms: u64,
        error: Option<String>,
        now_ms: TimeMs,
    ) -> Result<(), EntryError> {
        if delay_ms > DELAY_MS_MAX {
            return Err(ValidationError::new("delay_ms", format!("must be at most {DELAY_MS_MAX}")).into());
        }
        if let Some(e) = &error
            && e.len() > ERROR_REASON_LEN_MAX
        {
            return Err(ValidationError::new("error", format!("must be at most {ERROR_REASON_LEN_MAX} bytes")).into());
        }
        self.check_in_flight(id, receipt, now_ms)?;
        if error.is_some() {
            self.messages.get_mut(&receipt.seq).expect("message exists").last_error = error;
        }
        self.make_available(id, receipt.seq, now_ms.saturating_add(delay_ms), now_ms);
        self.reschedule(id);
        Ok(())
    }

    /// Ends an in-flight message's hold: it becomes visible at `visible_at`, or moves to the
    /// dead-letter queue if it has used up its receives.
    pub(super) fn make_available(&mut self, id: QueueId, seq: u64, visible_at: TimeMs, now_ms: TimeMs) {
        let meta = self.messages.get_mut(&seq).expect("message exists");
        let queue = self.queues.get_mut(&id).expect("queue exists");
        queue.unindex(seq, meta);
        meta.in_flight = false;
        meta.visible_at = visible_at;
        if let Some((dlq, exhausted_at)) = self.dead_letter_target(id)
            && DeadLetter::is_exhausted(self.messages[&seq].receive_count, exhausted_at)
        {
            // `move_to_dead_letter` expects the message indexed in its queue.
            let meta = &self.messages[&seq];
            self.queues.get_mut(&id).expect("queue exists").index(seq, meta, now_ms);
            self.move_to_dead_letter(seq, dlq, now_ms, DeadLetterCause::Receives);
            return;
        }
        let meta = &self.messages[&seq];
        self.queues.get_mut(&id).expect("queue exists").index(seq, meta, now_ms);
        if visible_at <= now_ms {
            self.woken.insert(id);
        }
        self.effects.push(Effect::PutMessage { seq, meta: meta.clone() });
    }

    /// Messages of queue `id` in send order, with their state, without receiving them.
    pub fn peek(&self, id: QueueId, limit: usize, now_ms: TimeMs) -> Vec<(u64, MessageMeta, MessageState)> {
        self.queues[&id]
            .by_age
            .iter()
            .take(limit)
            .map(|(_, seq)| {
                let meta = self.messages[seq].clone();
                let state = meta.state(now_ms);
                (*seq, meta, state)
            })
            .collect()
    }

    /// Moves up to `max` visible messages of queue `from` (normally a dead-letter queue) to
    /// queue `to`, or each to the queue it was dead-lettered from. Moved messages start again
    /// with a receive count of zero; their id, body, attributes and last error stay.
    pub fn move_messages(
        &mut self,
        from: &str,
        to: Option<&str>,
        max: u64,
        now_ms: TimeMs,
    ) -> Result<MoveOutcome, BrokerError> {
        let from_id = self.queue_id(from)?;
        let to_id = to.map(|t| self.queue_id(t)).transpose()?;
        if let Some(t) = to_id
            && self.queues[&t].is_fifo() != self.queues[&from_id].is_fifo()
        {
            return Err(ValidationError::new(
                "to",
                "messages move only between queues of the same type (FIFO to FIFO, standard to standard)",
            )
            .into());
        }
        let mut outcome = MoveOutcome::default();
        let mut plan = Vec::new();
        for &(_, seq) in &self.queues[&from_id].ready {
            if plan.len() as u64 >= max {
                break;
            }
            let meta = &self.messages[&seq];
            let target = to_id.or_else(|| meta.dead_letter_source.as_deref().and_then(|s| self.names.get(s).copied()));
            match target {
                Some(t) if t != from_id => plan.push((seq, t)),
                _ => outcome.failed += 1,
            }
        }
        for (seq, target) in plan {
            let mut meta = self.messages.remove(&seq).expect("message exists");
            self.queues.get_mut(&from_id).expect("queue exists").remove(seq, &meta);
            meta.queue = target;
            meta.receive_count = 0;
            // Receipts from before the move must not act on the moved message.
            meta.epoch += 1;
            meta.in_flight = false;
            meta.visible_at = now_ms;
            meta.dead_letter_source = None;
            self.insert_message(seq, meta, now_ms);
            outcome.moved += 1;
        }
        self.reschedule(from_id);
        outcome.remaining_visible = self.queues[&from_id].visible_count() as u64;
        Ok(outcome)
    }
}

#[cfg(test)]
mod fair_tests {
    use super::*;
    use crate::message::MessageEnvelope;

    fn grouped(group: Option<&str>, priority: u8) -> NewMessage {
        NewMessage {
            body: b"x".to_vec(),
            priority,
            envelope: MessageEnvelope { group_id: group.map(str::to_string), ..Default::default() },
            ..Default::default()
        }
    }

    fn groups_of(broker: &Broker, deliveries: &[Delivery]) -> Vec<String> {
        deliveries
            .iter()
            .map(|d| broker.message(d.seq).and_then(|m| m.group_id.clone()).unwrap_or_else(|| "-".into()))
            .collect()
    }

    #[test]
    fn a_quiet_group_is_served_next_despite_a_noisy_backlog() {
        let mut b = Broker::new();
        let (q, _) = b.create_queue("q", QueueAttributes::default(), 0).unwrap();
        for i in 0..1_000 {
            b.send(q, &grouped(Some("noisy"), 0), MessageId(i), 0).unwrap();
        }
        let first = b.receive(q, 2, None, 1);
        assert_eq!(groups_of(&b, &first), ["noisy", "noisy"]);
        b.send(q, &grouped(Some("quiet"), 0), MessageId(5_000), 2).unwrap();
        let next = b.receive(q, 3, None, 3);
        assert_eq!(groups_of(&b, &next), ["quiet", "noisy", "noisy"]);
        b.check_invariants(3);
    }

    #[test]
    fn groups_take_turns_within_a_priority_and_priority_still_comes_first() {
        let mut b = Broker::new();
        let (q, _) = b.create_queue("q", QueueAttributes::default(), 0).unwrap();
        let mut id = 0;
        for group in ["a", "a", "a", "b", "b", "c"] {
            id += 1;
            b.send(q, &grouped(Some(group), 0), MessageId(id), 0).unwrap();
        }
        b.send(q, &grouped(None, 5), MessageId(100), 0).unwrap();
        let got = b.receive(q, 7, None, 1);
        assert_eq!(groups_of(&b, &got), ["-", "a", "b", "c", "a", "b", "a"]);
        b.check_invariants(1);
    }

    #[test]
    fn without_groups_order_is_priority_then_send_order() {
        let mut b = Broker::new();
        let (q, _) = b.create_queue("q", QueueAttributes::default(), 0).unwrap();
        for (i, p) in [0u8, 3, 0, 3].into_iter().enumerate() {
            b.send(q, &grouped(None, p), MessageId(i as u128), 0).unwrap();
        }
        let got: Vec<u128> = b.receive(q, 4, None, 1).iter().map(|d| d.meta.id.0).collect();
        assert_eq!(got, [1, 3, 0, 2]);
    }
}
