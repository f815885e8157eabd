//! Several Sluice nodes over one database: three stores on one schema, as three servers would
//! be, with producers and consumers spread across them.

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_core::{DeadLetter, MessageId, NewMessage, QueueAttributes};
use sluice_store::{ReceiveRequest, Store};

const NODES: usize = 3;
const PRODUCERS_PER_NODE: usize = 1;
const CONSUMERS_PER_NODE: usize = 2;
const MESSAGES_PER_PRODUCER: usize = 300;
const SEND_BATCH: usize = 10;

async fn nodes(schema: &support::TestSchema) -> Vec<Arc<dyn Store>> {
    let mut out: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..NODES {
        out.push(Arc::new(schema.connect().await));
    }
    out
}

fn text(body: &str) -> NewMessage {
    NewMessage { body: body.as_bytes().to_vec(), ..Default::default() }
}

/// What the consumers saw, shared between them.
#[derive(Default)]
struct Ledger {
    /// Messages some consumer holds right now (received, not yet acked).
    held: HashSet<MessageId>,
    /// Every delivery, by message.
    deliveries: HashMap<MessageId, u32>,
    /// Receives that handed out a message another consumer still held.
    double_holds: Vec<MessageId>,
    acked: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_and_consumers_on_three_nodes_share_one_queue_without_double_delivery() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let nodes = nodes(&schema).await;
    nodes[0].create_queue("work", QueueAttributes::default()).await.unwrap();
    let total = NODES * PRODUCERS_PER_NODE * MESSAGES_PER_PRODUCER;

    let mut producers = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        for p in 0..PRODUCERS_PER_NODE {
            let node = node.clone();
            producers.push(tokio::spawn(async move {
                let mut ids = Vec::new();
                for chunk in (0..MESSAGES_PER_PRODUCER).collect::<Vec<_>>().chunks(SEND_BATCH) {
                    let batch = chunk.iter().map(|i| text(&format!("n{n}-p{p}-{i}"))).collect();
                    for r in node.send("work", batch).await.unwrap() {
                        ids.push(r.unwrap().id);
                    }
                }
                ids
            }));
        }
    }

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut consumers = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        for c in 0..CONSUMERS_PER_NODE {
            let (node, ledger) = (node.clone(), ledger.clone());
            // Each consumer acks through another node than the one it received from: receipts
            // are database-wide.
            let acker = nodes[(n + 1 + c) % NODES].clone();
            consumers.push(tokio::spawn(async move {
                let deadline = Instant::now() + Duration::from_secs(60);
                while Instant::now() < deadline {
                    if ledger.lock().unwrap().acked >= total {
                        return;
                    }
                    let request = ReceiveRequest { max: 10, wait_ms: Some(200), visibility_timeout_ms: Some(60_000) };
                    let got = node.receive("work", request).await.unwrap();
                    {
                        let mut l = ledger.lock().unwrap();
                        for m in &got {
                            let id = m.message.meta.id;
                            if !l.held.insert(id) {
                                l.double_holds.push(id);
                            }
                            *l.deliveries.entry(id).or_default() += 1;
                        }
                    }
                    let receipts = got.iter().map(|m| m.receipt.clone()).collect();
                    let results = acker.ack("work", receipts).await.unwrap();
                    let mut l = ledger.lock().unwrap();
                    for (m, r) in got.iter().zip(results) {
                        r.unwrap_or_else(|e| panic!("ack of {} failed: {e}", m.message.meta.id));
                        l.held.remove(&m.message.meta.id);
                        l.acked += 1;
                    }
                }
            }));
        }
    }

    let mut sent = HashSet::new();
    for p in producers {
        sent.extend(p.await.unwrap());
    }
    for c in consumers {
        c.await.unwrap();
    }
    {
        let l = ledger.lock().unwrap();
        assert_eq!(sent.len(), total, "every send was acknowledged with a distinct id");
        assert!(l.double_holds.is_empty(), "messages held by two consumers at once: {:?}", l.double_holds);
        let received: HashSet<MessageId> = l.deliveries.keys().copied().collect();
        assert_eq!(received, sent, "every acknowledged send was received, and nothing else");
        let redelivered: Vec<_> = l.deliveries.iter().filter(|(_, n)| **n > 1).collect();
        assert!(redelivered.is_empty(), "no hold expired, so nothing may come twice: {redelivered:?}");
        assert_eq!(l.acked, total);
    }
    for node in &nodes {
        let stats = node.get_queue("work").await.unwrap().stats;
        assert_eq!((stats.visible, stats.in_flight, stats.delayed), (0, 0, 0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_on_one_node_wakes_a_long_poll_on_another() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let nodes = nodes(&schema).await;
    nodes[0].create_queue("q", QueueAttributes::default()).await.unwrap();
    let poller = {
        let node = nodes[1].clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let request = ReceiveRequest { max: 1, wait_ms: Some(15_000), visibility_timeout_ms: None };
            (node.receive("q", request).await.unwrap(), started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    nodes[2].send("q", vec![text("across")]).await.unwrap()[0].clone().unwrap();
    let (got, waited) = poller.await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].message.content.body, b"across");
    // The safety re-check is 5 s and the wait 15 s: only the NOTIFY explains a faster answer.
    assert!(waited < Duration::from_secs(3), "woken through NOTIFY from the other node ({waited:?})");
}

/// A hold that runs out on a message with no receives left is dead-lettered by one node's
/// sweeper, exactly once, and wakes a long poll on the dead-letter queue on another node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_hold_is_dead_lettered_once_by_the_sweepers() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let nodes = nodes(&schema).await;
    nodes[0].create_queue("dlq", QueueAttributes::default()).await.unwrap();
    let attributes = QueueAttributes {
        dead_letter: Some(DeadLetter { queue: "dlq".into(), max_receive_count: 1 }),
        ..Default::default()
    };
    nodes[0].create_queue("q", attributes).await.unwrap();
    nodes[0].send("q", vec![text("a"), text("b")]).await.unwrap();
    let request = ReceiveRequest { max: 10, wait_ms: Some(0), visibility_timeout_ms: Some(300) };
    let held = nodes[0].receive("q", request).await.unwrap();
    assert_eq!(held.len(), 2);

    let poller = {
        let node = nodes[2].clone();
        tokio::spawn(async move {
            let mut got = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(10);
            while got.len() < 2 && Instant::now() < deadline {
                let request = ReceiveRequest { max: 10, wait_ms: Some(10_000), visibility_timeout_ms: Some(60_000) };
                got.extend(node.receive("dlq", request).await.unwrap());
            }
            got
        })
    };
    let dead = poller.await.unwrap();
    let mut bodies: Vec<_> = dead.iter().map(|m| m.message.content.body.clone()).collect();
    bodies.sort();
    assert_eq!(bodies, [b"a".to_vec(), b"b".to_vec()]);
    for m in &dead {
        assert_eq!(m.message.meta.dead_letter_source.as_deref(), Some("q"));
        assert_eq!(m.message.meta.receive_count, 2, "one receive in q, one in the dead-letter queue");
    }
    let q = nodes[1].get_queue("q").await.unwrap();
    assert_eq!((q.stats.visible, q.stats.in_flight, q.stats.delayed), (0, 0, 0), "each message in one place");
    assert_eq!(q.stats.dead_letter_depth, Some(2));
    let results = nodes[1].ack("q", held.iter().map(|m| m.receipt.clone()).collect()).await.unwrap();
    assert!(results.iter().all(|r| r.is_err()), "receipts from before the move are stale: {results:?}");
    let counted: u64 = nodes.iter().map(|n| n.counters().messages_dead_lettered).sum();
    assert_eq!(counted, 2, "dead-lettered exactly once across the nodes");
}
