//! Conformance of depth limits (`max_depth_messages`, `max_depth_bytes`, `overflow`): each
//! policy at the limit, the answers and counts, a commit into a full queue, and an overload run
//! (producers far ahead of one consumer) after which nothing acknowledged is missing.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sluice_core::overflow::{Depth, Overflow, REASON_DROP_HEAD, REASON_REJECT_TO_DLQ};
use sluice_core::{DeadLetter, EntryError, QueueAttributes, QueueAttributesPatch};

use super::{Backend, queue, recv, text};
use crate::{Conflict, Store, Write};

fn bounded(max_messages: Option<u64>, max_bytes: Option<u64>, overflow: Overflow, fifo: bool) -> QueueAttributes {
    QueueAttributes {
        max_depth_messages: max_messages,
        max_depth_bytes: max_bytes,
        message_bytes_max: 1_000,
        overflow,
        fifo,
        dead_letter: Some(DeadLetter { queue: if fifo { "dlq.fifo" } else { "dlq" }.into(), max_receive_count: 5 }),
        ..Default::default()
    }
}

fn fifo_text(body: &str) -> sluice_core::NewMessage {
    let mut m = text(body);
    m.envelope.group_id = Some("g".into());
    m.dedup_id = Some(body.to_string());
    m
}

/// Bodies in `queue`, oldest first, with their last errors.
async fn contents(s: &dyn Store, queue: &str) -> Vec<(String, Option<String>)> {
    let peeked = s.peek(queue, 1_000).await.unwrap();
    peeked
        .into_iter()
        .map(|p| (String::from_utf8_lossy(&p.message.content.body).into_owned(), p.message.meta.last_error))
        .collect()
}

fn names(contents: &[(String, Option<String>)]) -> Vec<&str> {
    contents.iter().map(|(b, _)| b.as_str()).collect()
}

pub async fn depth_limits_follow_each_overflow_policy(b: &dyn Backend) {
    let s = b.open().await;
    for fifo in [false, true] {
        let (dlq, msg): (&str, fn(&str) -> sluice_core::NewMessage) =
            if fifo { ("dlq.fifo", fifo_text) } else { ("dlq", text) };
        queue(&*s, dlq, QueueAttributes { fifo, ..Default::default() }).await;
        let suffix = if fifo { ".fifo" } else { "" };
        let (reject, drop, to_dlq) = (format!("reject{suffix}"), format!("drop{suffix}"), format!("todlq{suffix}"));
        queue(&*s, &reject, bounded(Some(2), None, Overflow::Reject, fifo)).await;
        queue(&*s, &drop, bounded(Some(2), None, Overflow::DropHead, fifo)).await;
        queue(&*s, &to_dlq, bounded(Some(2), None, Overflow::RejectToDlq, fifo)).await;
        let which = if fifo { "fifo" } else { "standard" };

        // reject: the third is refused with the depth and the limit; nothing moves.
        let sent = s.send(&reject, vec![msg("r1"), msg("r2"), msg("r3")]).await.unwrap();
        assert_eq!(sent[0].as_ref().unwrap().depth.map(|d| d.depth), Some(Depth { messages: 1, bytes: 2 }), "{which}");
        assert_eq!(sent[1].as_ref().unwrap().depth.map(|d| d.depth), Some(Depth { messages: 2, bytes: 4 }), "{which}");
        assert_eq!(
            sent[2],
            Err(EntryError::QueueFull {
                depth: Depth { messages: 2, bytes: 4 },
                max_messages: Some(2),
                max_bytes: None
            }),
            "{which}"
        );
        assert_eq!(names(&contents(&*s, &reject).await), ["r1", "r2"], "{which}");

        // drop_head: the oldest goes to the DLQ with the reason.
        let sent = s.send(&drop, vec![msg("d1"), msg("d2"), msg("d3")]).await.unwrap();
        assert_eq!(sent[2].as_ref().unwrap().dropped, 1, "{which}");
        assert_eq!(names(&contents(&*s, &drop).await), ["d2", "d3"], "{which}");

        // reject_to_dlq: the new one goes to the DLQ with the reason, acknowledged.
        let sent = s.send(&to_dlq, vec![msg("t1"), msg("t2"), msg("t3")]).await.unwrap();
        assert!(sent[2].as_ref().unwrap().dead_lettered, "{which}");
        assert_eq!(names(&contents(&*s, &to_dlq).await), ["t1", "t2"], "{which}");

        let in_dlq = contents(&*s, dlq).await;
        assert_eq!(
            in_dlq,
            [("d1".to_string(), Some(REASON_DROP_HEAD.to_string())), ("t3".into(), Some(REASON_REJECT_TO_DLQ.into()))],
            "{which}"
        );
        let received = s.receive(dlq, recv(10, 0, None)).await.unwrap();
        let sources: Vec<_> = received.iter().map(|m| m.message.meta.dead_letter_source.clone().unwrap()).collect();
        assert_eq!(sources, [drop.clone(), to_dlq.clone()], "{which}");

        let counts = |q: &str| {
            let s = s.clone();
            let q = q.to_string();
            async move { s.get_queue(&q).await.unwrap().stats.refusals }
        };
        assert_eq!(counts(&reject).await.queue_full, 1, "{which}");
        assert_eq!(counts(&drop).await.drop_head, 1, "{which}");
        assert_eq!(counts(&to_dlq).await.rejected_to_dlq, 1, "{which}");
        assert_eq!(s.get_queue(&reject).await.unwrap().stats.depth_bytes, 4, "{which}");
    }
    b.close(s).await;
}

pub async fn depth_limits_count_bytes_and_follow_updates(b: &dyn Backend) {
    let s = b.open().await;
    queue(&*s, "dlq", QueueAttributes::default()).await;
    queue(&*s, "q", bounded(None, Some(1_000), Overflow::Reject, false)).await;
    let results = s.send("q", vec![text(&"a".repeat(600)), text(&"b".repeat(401))]).await.unwrap();
    assert!(results[0].is_ok());
    assert!(matches!(results[1], Err(EntryError::QueueFull { depth: Depth { messages: 1, bytes: 600 }, .. })));
    // Raising the limit makes room; removing it ends the answers' depth.
    let patch = QueueAttributesPatch { max_depth_bytes: Some(Some(2_000)), ..Default::default() };
    s.update_queue("q", patch).await.unwrap();
    assert!(s.send("q", vec![text(&"b".repeat(401))]).await.unwrap()[0].is_ok());
    let patch = QueueAttributesPatch { max_depth_bytes: Some(None), ..Default::default() };
    s.update_queue("q", patch).await.unwrap();
    assert_eq!(s.send("q", vec![text("c")]).await.unwrap()[0].as_ref().unwrap().depth, None);
    // A policy that moves messages needs a dead-letter queue: refused, never silent.
    let patch = QueueAttributesPatch {
        dead_letter: Some(None),
        overflow: Some(Overflow::DropHead),
        max_depth_messages: Some(Some(1)),
        ..Default::default()
    };
    assert!(s.update_queue("q", patch).await.is_err());
    b.close(s).await;
}

pub async fn a_commit_into_a_full_queue_is_refused_whole(b: &dyn Backend) {
    let s = b.open().await;
    queue(&*s, "dlq", QueueAttributes::default()).await;
    queue(&*s, "q", bounded(Some(2), None, Overflow::Reject, false)).await;
    let writes = vec![Write::Send { queue: "q".into(), messages: vec![text("a"), text("b"), text("c")] }];
    let refused = s.commit_all(writes).await.unwrap().expect_err("the third does not fit");
    assert!(matches!(refused.conflict, Conflict::MessageRefused { message: 2, error: EntryError::QueueFull { .. } }));
    assert!(contents(&*s, "q").await.is_empty(), "a refused commit changes nothing");
    let writes = vec![Write::Send { queue: "q".into(), messages: vec![text("a"), text("b")] }];
    s.commit_all(writes).await.unwrap().expect("two fit");
    assert_eq!(names(&contents(&*s, "q").await), ["a", "b"]);
    b.close(s).await;
}

/// Producers send far faster than one consumer takes, into a queue of each policy: every
/// send acknowledged is in the consumer's hands or in the DLQ at the end (nothing acknowledged
/// is lost), every other send was answered as a refusal and counted, and the depth the answers
/// report never passes the limit. Sized by `SLUICE_OVERLOAD_MESSAGES` (default 600).
pub async fn overload_loses_nothing_acknowledged(b: &dyn Backend) {
    let total: usize = std::env::var("SLUICE_OVERLOAD_MESSAGES").ok().and_then(|v| v.parse().ok()).unwrap_or(600);
    const LIMIT: u64 = 20;
    const PRODUCERS: usize = 6;
    let s = b.open().await;
    queue(&*s, "dlq", QueueAttributes::default()).await;
    for overflow in Overflow::ALL {
        let name = format!("q-{}", overflow.as_str());
        queue(&*s, &name, bounded(Some(LIMIT), None, overflow, false)).await;
        let stop = Arc::new(AtomicBool::new(false));
        let consumer = {
            let (s, name, stop) = (s.clone(), name.clone(), stop.clone());
            tokio::spawn(async move {
                let mut received = BTreeSet::new();
                loop {
                    let got = s.receive(&name, recv(1, 0, None)).await.unwrap();
                    if got.is_empty() {
                        if stop.load(Ordering::SeqCst) {
                            return received;
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                        continue;
                    }
                    for m in &got {
                        received.insert(String::from_utf8_lossy(&m.message.content.body).into_owned());
                    }
                    let receipts = got.into_iter().map(|m| m.receipt).collect();
                    s.ack(&name, receipts).await.unwrap();
                }
            })
        };
        let mut producers = Vec::new();
        for p in 0..PRODUCERS {
            let (s, name) = (s.clone(), name.clone());
            producers.push(tokio::spawn(async move {
                let (mut acked, mut refused, mut to_dlq) = (Vec::new(), 0u64, 0u64);
                for chunk in (0..total / PRODUCERS).collect::<Vec<_>>().chunks(10) {
                    let bodies: Vec<String> = chunk.iter().map(|i| format!("{p}-{i}")).collect();
                    let results = s.send(&name, bodies.iter().map(|b| text(b)).collect()).await.unwrap();
                    for (body, result) in bodies.into_iter().zip(results) {
                        match result {
                            Ok(sent) => {
                                let depth = sent.depth.expect("a bounded queue reports its depth");
                                assert_eq!(depth.limits.max_messages, Some(LIMIT));
                                assert!(depth.depth.messages <= LIMIT, "depth {} past the limit", depth.depth.messages);
                                if sent.dead_lettered {
                                    to_dlq += 1;
                                }
                                acked.push(body);
                            }
                            Err(EntryError::QueueFull { depth, .. }) => {
                                assert!(depth.messages <= LIMIT);
                                refused += 1;
                            }
                            Err(other) => panic!("unexpected refusal {other:?}"),
                        }
                    }
                }
                (acked, refused, to_dlq)
            }));
        }
        let (mut acked, mut refused, mut to_dlq) = (BTreeSet::new(), 0, 0);
        for p in producers {
            let (a, r, d) = p.await.unwrap();
            acked.extend(a);
            refused += r;
            to_dlq += d;
        }
        stop.store(true, Ordering::SeqCst);
        let received = consumer.await.unwrap();
        let moved: BTreeSet<String> = s
            .peek("dlq", 1_000)
            .await
            .unwrap()
            .into_iter()
            .filter(|p| p.message.meta.dead_letter_source.as_deref() == Some(name.as_str()))
            .map(|p| String::from_utf8_lossy(&p.message.content.body).into_owned())
            .collect();
        let found: BTreeSet<String> = received.union(&moved).cloned().collect();
        assert_eq!(acked, found, "{name}: acknowledged = received + dead-lettered");
        assert!(received.is_disjoint(&moved), "{name}: a message in two places");
        let stats = s.get_queue(&name).await.unwrap().stats;
        assert_eq!(stats.refusals.queue_full, refused, "{name}: every refusal counted");
        assert_eq!(stats.refusals.rejected_to_dlq, to_dlq, "{name}");
        assert_eq!(stats.refusals.drop_head + to_dlq, moved.len() as u64, "{name}: every move counted");
        assert_eq!(acked.len() as u64 + refused, (total / PRODUCERS * PRODUCERS) as u64, "{name}: every send answered");
        match overflow {
            Overflow::Reject => assert!(refused > 0 && moved.is_empty(), "{name}: the run did overload the queue"),
            Overflow::DropHead => assert!(stats.refusals.drop_head > 0, "{name}: the run did overload the queue"),
            Overflow::RejectToDlq => assert!(to_dlq > 0 && refused == 0, "{name}: the run did overload the queue"),
        }
        // Empty the DLQ for the next policy.
        s.purge_queue("dlq").await.unwrap();
    }
    b.close(s).await;
}
