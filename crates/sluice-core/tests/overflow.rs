//! Depth limits on the broker: each `overflow` policy at the limit, what the answers and the
//! counts say, `expired_to_dlq`, an atomic commit's planning, and that every move survives a
//! restart from the effects (nothing the broker accepted is lost, nothing is in two places).

mod common;

use common::Disk;
use sluice_core::broker::PendingDepth;
use sluice_core::overflow::{Depth, Overflow, Placement, REASON_DROP_HEAD, REASON_EXPIRED, REASON_REJECT_TO_DLQ};
use sluice_core::{Broker, DeadLetter, EntryError, MessageId, NewMessage, QueueAttributes, QueueId};

const RETENTION_MS: u64 = 60_000;

fn bounded(max_messages: Option<u64>, max_bytes: Option<u64>, overflow: Overflow) -> QueueAttributes {
    QueueAttributes {
        max_depth_messages: max_messages,
        max_depth_bytes: max_bytes,
        message_bytes_max: 100,
        overflow,
        dead_letter: Some(DeadLetter { queue: "dlq".into(), max_receive_count: 5 }),
        retention_ms: RETENTION_MS,
        ..Default::default()
    }
}

fn setup(attributes: QueueAttributes) -> (Broker, Disk, QueueId, QueueId) {
    let mut broker = Broker::new();
    let (dlq, _) = broker.create_queue("dlq", QueueAttributes::default(), 0).unwrap();
    let (q, _) = broker.create_queue("q", attributes, 0).unwrap();
    let mut disk = Disk::default();
    disk.apply(broker.take_effects());
    (broker, disk, q, dlq)
}

fn message(body: &str) -> NewMessage {
    NewMessage { body: body.as_bytes().to_vec(), ..Default::default() }
}

/// The ids in queue `id`, oldest first.
fn ids(broker: &Broker, id: QueueId, now: u64) -> Vec<u128> {
    broker.peek(id, 1_000, now).into_iter().map(|(_, meta, _)| meta.id.0).collect()
}

#[test]
fn reject_refuses_at_the_limit_and_counts_it() {
    let (mut b, _, q, _) = setup(bounded(Some(2), None, Overflow::Reject));
    let first = b.send(q, &message("a"), MessageId(1), 1).unwrap();
    assert_eq!(first.depth.map(|d| d.depth), Some(Depth { messages: 1, bytes: 1 }));
    b.send(q, &message("b"), MessageId(2), 1).unwrap();
    let refused = b.send(q, &message("c"), MessageId(3), 1).unwrap_err();
    assert_eq!(
        refused,
        EntryError::QueueFull { depth: Depth { messages: 2, bytes: 2 }, max_messages: Some(2), max_bytes: None }
    );
    assert_eq!(ids(&b, q, 1), [1, 2]);
    let view = b.queue_view(q, 1).unwrap();
    assert_eq!(view.stats.refusals.queue_full, 1);
    assert_eq!(b.counters().refusals.queue_full, 1);
    // A receive does not make room (in flight still counts); an ack does.
    let got = b.receive(q, 1, None, 2);
    assert!(b.send(q, &message("c"), MessageId(3), 2).is_err());
    b.ack(q, &got[0].receipt, 3).unwrap();
    b.send(q, &message("c"), MessageId(3), 3).unwrap();
    assert_eq!(ids(&b, q, 3), [2, 3]);
    b.check_invariants(3);
}

#[test]
fn the_byte_limit_counts_bodies() {
    let (mut b, _, q, _) = setup(bounded(None, Some(100), Overflow::Reject));
    b.send(q, &message(&"x".repeat(60)), MessageId(1), 1).unwrap();
    let err = b.send(q, &message(&"y".repeat(41)), MessageId(2), 1).unwrap_err();
    assert!(matches!(err, EntryError::QueueFull { depth: Depth { messages: 1, bytes: 60 }, .. }), "{err:?}");
    let sent = b.send(q, &message(&"y".repeat(40)), MessageId(3), 1).unwrap();
    assert_eq!(sent.depth.map(|d| d.depth), Some(Depth { messages: 2, bytes: 100 }));
    assert_eq!(sent.depth.unwrap().limits.max_bytes, Some(100));
}

#[test]
fn drop_head_moves_the_oldest_not_in_flight_to_the_dlq_with_the_reason() {
    let (mut b, mut disk, q, dlq) = setup(bounded(Some(3), None, Overflow::DropHead));
    for i in 1..=3 {
        b.send(q, &message("m"), MessageId(i), 1).unwrap();
    }
    // The oldest is held by a consumer: drop_head passes over it.
    let held = b.receive(q, 1, None, 2);
    assert_eq!(held[0].meta.id, MessageId(1));
    let sent = b.send(q, &message("m"), MessageId(4), 3).unwrap();
    assert_eq!((sent.dropped, sent.dead_lettered), (1, false));
    assert_eq!(ids(&b, q, 3), [1, 3, 4]);
    let moved = b.peek(dlq, 10, 3);
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].1.id, MessageId(2));
    assert_eq!(moved[0].1.dead_letter_source.as_deref(), Some("q"));
    assert_eq!(moved[0].1.last_error.as_deref(), Some(REASON_DROP_HEAD));
    assert_eq!(b.queue_view(q, 3).unwrap().stats.refusals.drop_head, 1);
    // The receipt of the held message still works.
    b.ack(q, &held[0].receipt, 4).unwrap();
    b.check_invariants(4);
    disk.apply(b.take_effects());
    let restored = disk.restore(5);
    assert_eq!(ids(&restored, q, 5), [3, 4]);
    assert_eq!(ids(&restored, dlq, 5), [2]);
    restored.check_invariants(5);
}

#[test]
fn drop_head_refuses_when_everything_is_in_flight() {
    let (mut b, _, q, dlq) = setup(bounded(Some(2), None, Overflow::DropHead));
    b.send(q, &message("a"), MessageId(1), 1).unwrap();
    b.send(q, &message("b"), MessageId(2), 1).unwrap();
    b.receive(q, 2, None, 2);
    assert!(matches!(b.send(q, &message("c"), MessageId(3), 3), Err(EntryError::QueueFull { .. })));
    assert!(ids(&b, dlq, 3).is_empty());
}

#[test]
fn reject_to_dlq_sends_the_new_message_to_the_dlq() {
    let (mut b, mut disk, q, dlq) = setup(bounded(Some(1), None, Overflow::RejectToDlq));
    b.send(q, &message("a"), MessageId(1), 1).unwrap();
    let sent = b.send(q, &message("b"), MessageId(2), 1).unwrap();
    assert!(sent.dead_lettered);
    assert_eq!(ids(&b, q, 1), [1]);
    let there = b.peek(dlq, 10, 1);
    assert_eq!(there[0].1.id, MessageId(2));
    assert_eq!(there[0].1.last_error.as_deref(), Some(REASON_REJECT_TO_DLQ));
    assert_eq!(b.queue_view(q, 1).unwrap().stats.refusals.rejected_to_dlq, 1);
    disk.apply(b.take_effects());
    let restored = disk.restore(2);
    assert_eq!(ids(&restored, dlq, 2), [2]);
}

#[test]
fn a_deleted_dlq_turns_every_policy_into_reject() {
    for overflow in [Overflow::DropHead, Overflow::RejectToDlq] {
        let (mut b, _, q, _) = setup(bounded(Some(1), None, overflow));
        b.send(q, &message("a"), MessageId(1), 1).unwrap();
        b.delete_queue("dlq").unwrap();
        assert!(matches!(b.send(q, &message("b"), MessageId(2), 1), Err(EntryError::QueueFull { .. })));
        assert_eq!(ids(&b, q, 1), [1], "{overflow:?}: nothing was dropped");
    }
}

#[test]
fn expired_to_dlq_moves_expired_messages_and_restarts_their_retention() {
    let attributes = QueueAttributes { expired_to_dlq: true, ..bounded(None, None, Overflow::Reject) };
    let (mut b, mut disk, q, dlq) = setup(attributes);
    b.send(q, &message("a"), MessageId(1), 1_000).unwrap();
    b.tick(1_000 + RETENTION_MS);
    assert!(ids(&b, q, 1_000 + RETENTION_MS).is_empty());
    let moved = b.peek(dlq, 10, 1_000 + RETENTION_MS);
    assert_eq!(moved[0].1.last_error.as_deref(), Some(REASON_EXPIRED));
    assert_eq!(moved[0].1.sent_at, 1_000 + RETENTION_MS);
    assert_eq!(b.queue_view(q, 0).unwrap().stats.refusals.expired_to_dlq, 1);
    assert_eq!(b.counters().expired, 0, "moved, not deleted");
    disk.apply(b.take_effects());
    let restored = disk.restore(1_000 + RETENTION_MS + 1);
    assert_eq!(ids(&restored, dlq, 0), [1]);
}

#[test]
fn without_expired_to_dlq_expired_messages_are_deleted() {
    let (mut b, _, q, dlq) = setup(bounded(None, None, Overflow::Reject));
    b.send(q, &message("a"), MessageId(1), 0).unwrap();
    b.tick(RETENTION_MS);
    assert!(ids(&b, q, RETENTION_MS).is_empty());
    assert!(ids(&b, dlq, RETENTION_MS).is_empty());
    assert_eq!(b.counters().expired, 1);
}

#[test]
fn a_commit_plans_its_sends_against_each_other() {
    let (mut b, _, q, _) = setup(bounded(Some(3), None, Overflow::Reject));
    b.send(q, &message("a"), MessageId(1), 1).unwrap();
    let mut pending = PendingDepth::default();
    assert_eq!(b.placement(q, 1, &mut pending), Placement::Queue { drop: 0 });
    assert_eq!(b.placement(q, 1, &mut pending), Placement::Queue { drop: 0 });
    assert_eq!(b.placement(q, 1, &mut pending), Placement::Refused, "the third would be the fourth message");

    let (b, _, q, _) = {
        let (mut b, d, q, dlq) = setup(bounded(Some(2), None, Overflow::DropHead));
        b.send(q, &message("a"), MessageId(1), 1).unwrap();
        b.send(q, &message("b"), MessageId(2), 1).unwrap();
        (b, d, q, dlq)
    };
    let mut pending = PendingDepth::default();
    assert_eq!(b.placement(q, 1, &mut pending), Placement::Queue { drop: 1 });
    assert_eq!(b.placement(q, 1, &mut pending), Placement::Queue { drop: 1 });
    // Both old messages are planned out; the third new one would drop one of the commit's own.
    assert_eq!(b.placement(q, 1, &mut pending), Placement::Refused);
}

#[test]
fn an_unbounded_queue_reports_no_depth() {
    let (mut b, _, q, _) = setup(bounded(None, None, Overflow::Reject));
    let sent = b.send(q, &message("a"), MessageId(1), 1).unwrap();
    assert_eq!(sent.depth, None);
    assert_eq!(b.queue_view(q, 1).unwrap().stats.depth_bytes, 1);
}

#[test]
fn a_queue_rate_limit_refuses_past_its_bucket_and_refills_on_the_clock() {
    let limit = sluice_core::rate::RateLimit { per_second: 2, burst: 2 };
    let attributes = QueueAttributes { rate_limit: Some(limit), ..Default::default() };
    let mut b = Broker::new();
    let (q, _) = b.create_queue("q", attributes, 0).unwrap();
    let outcomes: Vec<Result<(), EntryError>> = [(0, 1), (0, 2), (0, 3), (499, 4), (500, 5), (500, 6)]
        .into_iter()
        .map(|(now, id)| b.send(q, &message("m"), MessageId(id), now).map(|_| ()))
        .collect();
    assert_eq!(
        outcomes,
        [
            Ok(()),
            Ok(()),
            Err(EntryError::RateLimited { retry_after_ms: 500 }),
            Err(EntryError::RateLimited { retry_after_ms: 1 }),
            Ok(()),
            Err(EntryError::RateLimited { retry_after_ms: 500 }),
        ]
    );
    assert_eq!(b.queue_view(q, 500).unwrap().stats.refusals.rate_limited, 3);
    // An atomic commit's sends are not rate limited.
    b.send_unlimited(q, &message("m"), MessageId(7), 500).unwrap();
    assert_eq!(ids(&b, q, 500), [1, 2, 5, 7]);
}
