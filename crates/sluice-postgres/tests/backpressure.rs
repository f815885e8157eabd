//! Backpressure on PostgreSQL with three stores over one schema standing for three nodes: a
//! depth limit is exact across nodes (the check and the insert are one transaction under the
//! queue row's lock), a rate limit is one bucket for all of them (one statement under the
//! bucket row's lock), and `expired_to_dlq` moves expired messages in the sweep.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use sluice_core::overflow::{Overflow, REASON_EXPIRED};
use sluice_core::rate::RateLimit;
use sluice_core::{DeadLetter, EntryError, NewMessage, QueueAttributes};
use sluice_postgres::PostgresStore;
use sluice_store::prelude::*;

fn text(body: &str) -> NewMessage {
    NewMessage { body: body.as_bytes().to_vec(), ..Default::default() }
}

async fn nodes(schema: &support::TestSchema) -> Vec<Arc<PostgresStore>> {
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(Arc::new(schema.connect().await));
    }
    nodes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_depth_limit_holds_exactly_across_three_nodes() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let nodes = nodes(&schema).await;
    const LIMIT: u64 = 25;
    nodes[0].create_queue("dlq", QueueAttributes::default()).await.unwrap();
    for overflow in Overflow::ALL {
        let name = format!("q-{}", overflow.as_str());
        let attributes = QueueAttributes {
            max_depth_messages: Some(LIMIT),
            overflow,
            dead_letter: Some(DeadLetter { queue: "dlq".into(), max_receive_count: 5 }),
            ..Default::default()
        };
        nodes[0].create_queue(&name, attributes).await.unwrap();
        // Every node sends 40 messages in batches of 5, all at once: 120 offered, 25 fit.
        let mut tasks = Vec::new();
        for (n, node) in nodes.iter().enumerate() {
            let (node, name) = (node.clone(), name.clone());
            tasks.push(tokio::spawn(async move {
                let (mut acked, mut refused, mut to_dlq) = (Vec::new(), 0u64, 0u64);
                for batch in 0..8 {
                    let bodies: Vec<String> = (0..5).map(|i| format!("{n}-{batch}-{i}")).collect();
                    let results = node.send(&name, bodies.iter().map(|b| text(b)).collect()).await.unwrap();
                    for (body, result) in bodies.into_iter().zip(results) {
                        match result {
                            Ok(sent) => {
                                let depth = sent.depth.expect("a bounded queue reports its depth").depth;
                                assert!(depth.messages <= LIMIT, "{name}: depth {} past {LIMIT}", depth.messages);
                                to_dlq += u64::from(sent.dead_lettered);
                                acked.push(body);
                            }
                            Err(EntryError::QueueFull { .. }) => refused += 1,
                            Err(other) => panic!("{other:?}"),
                        }
                    }
                }
                (acked, refused, to_dlq)
            }));
        }
        let (mut acked, mut refused, mut to_dlq) = (BTreeSet::new(), 0, 0);
        for task in tasks {
            let (a, r, d) = task.await.unwrap();
            acked.extend(a);
            refused += r;
            to_dlq += d;
        }
        let body = |p: &sluice_store::PeekedMessage| String::from_utf8_lossy(&p.message.content.body).into_owned();
        let in_queue: BTreeSet<String> = nodes[1].peek(&name, 1_000).await.unwrap().iter().map(body).collect();
        let in_dlq: BTreeSet<String> = nodes[2]
            .peek("dlq", 1_000)
            .await
            .unwrap()
            .iter()
            .filter(|p| p.message.meta.dead_letter_source.as_deref() == Some(name.as_str()))
            .map(body)
            .collect();
        assert_eq!(in_queue.len() as u64, LIMIT, "{name}: exactly full, never past");
        assert_eq!(acked, in_queue.union(&in_dlq).cloned().collect(), "{name}: acknowledged = queue + DLQ");
        let refusals = nodes[2].get_queue(&name).await.unwrap().stats.refusals;
        assert_eq!(refusals.queue_full, refused, "{name}: every refusal counted, on every node");
        assert_eq!(refusals.rejected_to_dlq, to_dlq, "{name}");
        assert_eq!(refusals.drop_head + to_dlq, in_dlq.len() as u64, "{name}");
        match overflow {
            Overflow::Reject => assert_eq!((refused, in_dlq.len()), (120 - LIMIT, 0)),
            Overflow::DropHead => assert_eq!((refused, refusals.drop_head), (0, 120 - LIMIT)),
            Overflow::RejectToDlq => assert_eq!((refused, to_dlq), (0, 120 - LIMIT)),
        }
        nodes[0].purge_queue("dlq").await.unwrap();
    }
}

/// Three nodes take from one bucket: together they get the burst plus at most one token per
/// second the test ran, however the takes interleave.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rate_limit_is_one_bucket_for_three_nodes() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let nodes = nodes(&schema).await;
    let limit = RateLimit { per_second: 1, burst: 30 };
    let started = Instant::now();
    let mut tasks = Vec::new();
    for node in &nodes {
        let node = node.clone();
        tasks.push(tokio::spawn(async move {
            let mut granted = 0;
            for _ in 0..40 {
                granted += node.take_tokens("queue:shared", limit, 1).await.unwrap().granted;
            }
            granted
        }));
    }
    let mut granted = 0;
    for task in tasks {
        granted += task.await.unwrap();
    }
    let elapsed = started.elapsed().as_secs();
    assert!((30..=30 + elapsed + 1).contains(&granted), "granted {granted} in {elapsed} s");

    // A queue's rate limit through sends, from every node.
    let attributes = QueueAttributes { rate_limit: Some(RateLimit { per_second: 1, burst: 6 }), ..Default::default() };
    nodes[0].create_queue("limited", attributes).await.unwrap();
    let started = Instant::now();
    let mut sent = 0;
    for node in &nodes {
        let results = node.send("limited", (0..4).map(|i| text(&i.to_string())).collect()).await.unwrap();
        sent += results.iter().filter(|r| r.is_ok()).count() as u64;
        assert!(results.iter().all(|r| matches!(r, Ok(_) | Err(EntryError::RateLimited { .. }))));
    }
    let elapsed = started.elapsed().as_secs();
    assert!((6..=6 + elapsed + 1).contains(&sent), "sent {sent} in {elapsed} s");
    let view = nodes[1].get_queue("limited").await.unwrap();
    assert_eq!(view.stats.refusals.rate_limited, 12 - sent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_messages_move_to_the_dlq_when_the_queue_says_so() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect_without_sweeper().await;
    let client = schema.client().await;
    store.create_queue("dlq", QueueAttributes::default()).await.unwrap();
    let dead_letter = Some(DeadLetter { queue: "dlq".into(), max_receive_count: 5 });
    let moving = QueueAttributes { expired_to_dlq: true, dead_letter: dead_letter.clone(), ..Default::default() };
    store.create_queue("moving", moving).await.unwrap();
    store.create_queue("deleting", QueueAttributes { dead_letter, ..Default::default() }).await.unwrap();
    store.send("moving", vec![text("m")]).await.unwrap();
    store.send("deleting", vec![text("d")]).await.unwrap();
    client
        .execute(
            "UPDATE messages m SET sent_at = m.sent_at - q.retention_ms - 1000 FROM queues q WHERE q.id = m.queue_id",
            &[],
        )
        .await
        .unwrap();
    assert!(store.sweep_now().await.unwrap());
    assert!(store.peek("moving", 10).await.unwrap().is_empty());
    assert!(store.peek("deleting", 10).await.unwrap().is_empty());
    let moved = store.peek("dlq", 10).await.unwrap();
    assert_eq!(moved.len(), 1, "only the queue with expired_to_dlq moved its message");
    assert_eq!(moved[0].message.content.body, b"m");
    assert_eq!(moved[0].message.meta.last_error.as_deref(), Some(REASON_EXPIRED));
    assert_eq!(moved[0].message.meta.dead_letter_source.as_deref(), Some("moving"));
    assert_eq!(store.get_queue("moving").await.unwrap().stats.refusals.expired_to_dlq, 1);
    // Its retention started again in the DLQ: the next sweep keeps it.
    assert!(store.sweep_now().await.unwrap());
    assert_eq!(store.peek("dlq", 10).await.unwrap().len(), 1);
}
