//! FIFO queues on PostgreSQL beyond the conformance suite: several nodes keeping each group in
//! order, deduplication racing across nodes, dead-lettering a failing head, and the life of a
//! deduplication key (window, sweeper, purge, delete).

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_core::attributes::DedupScope;
use sluice_core::message::MessageEnvelope;
use sluice_core::{DeadLetter, EntryError, MessageId, NewMessage, QueueAttributes};
use sluice_store::prelude::*;
use sluice_store::{NackEntry, ReceiveRequest, Store};

const NODES: usize = 3;
const GROUPS: usize = 12;
const MESSAGES_PER_GROUP: usize = 40;
const CONSUMERS_PER_NODE: usize = 2;
/// Seeds the consumers' choices (how many to ask for, which deliveries fail).
const SEED: u64 = 0x5eed_f1f0;

fn fifo() -> QueueAttributes {
    QueueAttributes { fifo: true, visibility_timeout_ms: 60_000, ..Default::default() }
}

fn grouped(body: &str, group: &str, dedup: &str) -> NewMessage {
    NewMessage {
        body: body.as_bytes().to_vec(),
        envelope: MessageEnvelope { group_id: Some(group.into()), ..Default::default() },
        dedup_id: Some(dedup.into()),
        ..Default::default()
    }
}

fn recv(max: u32, wait_ms: u64) -> ReceiveRequest {
    ReceiveRequest { max, wait_ms: Some(wait_ms), visibility_timeout_ms: None }
}

fn bodies(got: &[sluice_store::ReceivedMessage]) -> Vec<String> {
    got.iter().map(|m| String::from_utf8_lossy(&m.message.content.body).into_owned()).collect()
}

async fn nodes(schema: &support::TestSchema) -> Vec<Arc<dyn Store>> {
    let mut out: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..NODES {
        out.push(Arc::new(schema.connect().await));
    }
    out
}

/// A small deterministic generator (xorshift64*), so a failing run can be replayed by seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the consumers saw, shared between them.
#[derive(Default)]
struct Ledger {
    /// Each group's messages in send order (filled in by the producers as sends are answered).
    sent: HashMap<String, Vec<MessageId>>,
    /// Per group, how many of its messages were acked (always a prefix of `sent`).
    acked: HashMap<String, usize>,
    /// Groups some receive holds messages of right now.
    held: HashSet<String>,
    /// Per group, message ids in the order they were first delivered.
    first_deliveries: HashMap<String, Vec<MessageId>>,
    seen: HashSet<MessageId>,
    violations: Vec<String>,
    acked_total: usize,
}

/// Three nodes, producers and consumers on each; consumers fail some deliveries (releasing the
/// rest of that group's run, as a FIFO consumer must). Every receive is checked against the
/// ledger: the run of each group it returns must start at the group's oldest unacked message
/// and continue in send order, and no group may be held by two receives at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_keep_every_group_in_order_and_never_hold_a_group_twice() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let nodes = nodes(&schema).await;
    nodes[0].create_queue("orders.fifo", fifo()).await.unwrap();
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let total = GROUPS * MESSAGES_PER_GROUP;

    // Producer n owns groups g with g % NODES == n and sends them interleaved, in batches of
    // up to 4 (a batch may hold several messages of one group, in order).
    let mut producers = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        let (node, ledger) = (node.clone(), ledger.clone());
        producers.push(tokio::spawn(async move {
            let mine: Vec<usize> = (0..GROUPS).filter(|g| g % NODES == n).collect();
            let order: Vec<(usize, usize)> =
                (0..MESSAGES_PER_GROUP).flat_map(|i| mine.iter().map(move |&g| (g, i))).collect();
            for chunk in order.chunks(4) {
                let batch =
                    chunk.iter().map(|(g, i)| grouped(&format!("g{g}-{i}"), &format!("g{g}"), &format!("{g}/{i}")));
                let results = node.send("orders.fifo", batch.collect()).await.unwrap();
                let mut l = ledger.lock().unwrap();
                for ((g, _), r) in chunk.iter().zip(results) {
                    let sent = r.unwrap();
                    assert!(!sent.duplicate);
                    l.sent.entry(format!("g{g}")).or_default().push(sent.id);
                }
            }
        }));
    }

    let mut consumers = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        for c in 0..CONSUMERS_PER_NODE {
            let (node, ledger) = (node.clone(), ledger.clone());
            let acker = nodes[(n + 1 + c) % NODES].clone();
            let mut rng = Rng(SEED ^ ((n * CONSUMERS_PER_NODE + c + 1) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            consumers.push(tokio::spawn(async move {
                let deadline = Instant::now() + Duration::from_secs(90);
                while Instant::now() < deadline && ledger.lock().unwrap().acked_total < total {
                    let max = 1 + rng.below(5) as u32;
                    let got = node.receive("orders.fifo", recv(max, 200)).await.unwrap();
                    if got.is_empty() {
                        continue;
                    }
                    let mut runs: BTreeMap<String, Vec<usize>> = BTreeMap::new();
                    for (i, m) in got.iter().enumerate() {
                        runs.entry(m.message.meta.group_id.clone().expect("FIFO messages have a group"))
                            .or_default()
                            .push(i);
                    }
                    {
                        let mut l = ledger.lock().unwrap();
                        for (group, run) in &runs {
                            if !l.held.insert(group.clone()) {
                                l.violations.push(format!("group {group} delivered while another receive holds it"));
                            }
                            let from = l.acked.get(group).copied().unwrap_or(0);
                            let ids: Vec<MessageId> = run.iter().map(|&i| got[i].message.meta.id).collect();
                            // Each body names its place in its group's send order (`g{g}-{i}`):
                            // the producer's ledger may not have recorded a send yet when a
                            // consumer already receives it, so the order is read from the body.
                            let places: Vec<usize> = run
                                .iter()
                                .map(|&i| {
                                    let body = String::from_utf8_lossy(&got[i].message.content.body).into_owned();
                                    body.rsplit('-').next().and_then(|n| n.parse().ok()).expect("body g{g}-{i}")
                                })
                                .collect();
                            let expected: Vec<usize> = (from..from + places.len()).collect();
                            if places != expected {
                                l.violations.push(format!(
                                    "group {group}: delivered places {places:?} ({ids:?}), expected {expected:?}"
                                ));
                            }
                            for id in ids {
                                if l.seen.insert(id) {
                                    l.first_deliveries.entry(group.clone()).or_default().push(id);
                                }
                            }
                        }
                    }
                    // Process each group's run in order; a failure gives back that message and
                    // the rest of its group's run. The ledger is updated before the database,
                    // so that it never shows a group free while the database still holds it.
                    let mut acks = Vec::new();
                    let mut nacks = Vec::new();
                    {
                        let mut l = ledger.lock().unwrap();
                        for (group, run) in &runs {
                            let failed_at = run.iter().position(|_| rng.below(10) == 0).unwrap_or(run.len());
                            for &i in &run[..failed_at] {
                                acks.push(got[i].receipt.clone());
                            }
                            for &i in &run[failed_at..] {
                                nacks.push(NackEntry { receipt: got[i].receipt.clone(), delay_ms: 0, error: None });
                            }
                            *l.acked.entry(group.clone()).or_default() += failed_at;
                            l.acked_total += failed_at;
                            l.held.remove(group);
                        }
                    }
                    // Acks first: a released message becomes receivable at once, and its group
                    // must not come back while an earlier message of it is still unacked.
                    if !acks.is_empty() {
                        for r in acker.ack("orders.fifo", acks).await.unwrap() {
                            r.expect("ack of a held message");
                        }
                    }
                    if !nacks.is_empty() {
                        for r in node.nack("orders.fifo", nacks).await.unwrap() {
                            r.expect("nack of a held message");
                        }
                    }
                }
            }));
        }
    }
    for p in producers {
        p.await.unwrap();
    }
    for c in consumers {
        c.await.unwrap();
    }

    let stats = nodes[1].get_queue("orders.fifo").await.unwrap().stats;
    assert_eq!((stats.visible, stats.in_flight, stats.delayed), (0, 0, 0));
    let l = ledger.lock().unwrap();
    assert!(l.violations.is_empty(), "seed {SEED:#x}: {:#?}", l.violations);
    assert_eq!(l.acked_total, total, "seed {SEED:#x}: every message acked once");
    for (group, sent) in &l.sent {
        assert_eq!(sent.len(), MESSAGES_PER_GROUP);
        assert_eq!(
            l.first_deliveries.get(group),
            Some(sent),
            "seed {SEED:#x}: first deliveries of {group} in send order"
        );
    }
}

/// The same dedup ids sent at once from every node, in batches whose keys come in different
/// orders: each key enqueues exactly one message and every sender hears of that one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sends_of_one_dedup_id_on_three_nodes_enqueue_it_once() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let nodes = nodes(&schema).await;
    nodes[0].create_queue("d.fifo", fifo()).await.unwrap();
    const KEYS: usize = 5;
    const SENDERS_PER_NODE: usize = 4;
    let mut tasks = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        for s in 0..SENDERS_PER_NODE {
            let node = node.clone();
            tasks.push(tokio::spawn(async move {
                let mut keys: Vec<usize> = (0..KEYS).collect();
                keys.rotate_left((n * SENDERS_PER_NODE + s) % KEYS);
                if s % 2 == 1 {
                    keys.reverse();
                }
                let batch =
                    keys.iter().map(|k| grouped(&format!("from {n}/{s}"), &format!("g{}", k % 2), &format!("k{k}")));
                let results = node.send("d.fifo", batch.collect()).await.unwrap();
                keys.into_iter().zip(results.into_iter().map(Result::unwrap)).collect::<Vec<_>>()
            }));
        }
    }
    let mut by_key: HashMap<usize, Vec<sluice_core::Sent>> = HashMap::new();
    for t in tasks {
        for (k, sent) in t.await.unwrap() {
            by_key.entry(k).or_default().push(sent);
        }
    }
    for (k, sends) in &by_key {
        assert_eq!(sends.iter().filter(|s| !s.duplicate).count(), 1, "key {k}: exactly one send enqueued");
        let first = sends[0];
        assert!(sends.iter().all(|s| (s.id, s.seq) == (first.id, first.seq)), "key {k}: one answer for all: {sends:?}");
    }
    let got = nodes[2].receive("d.fifo", recv(100, 0)).await.unwrap();
    assert_eq!(got.len(), KEYS, "one message per key");
    let ids: HashSet<MessageId> = got.iter().map(|m| m.message.meta.id).collect();
    let answered: HashSet<MessageId> = by_key.values().map(|s| s[0].id).collect();
    assert_eq!(ids, answered);
}

/// A head that keeps failing goes to the (FIFO) dead-letter queue and its group moves on: by a
/// nack, and by a receive that meets it after its hold ran out (the same receive then delivers
/// the next message of the group).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_head_is_dead_lettered_and_unblocks_its_group() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect_without_sweeper().await;
    store.create_queue("dlq.fifo", fifo()).await.unwrap();
    let attributes =
        QueueAttributes { dead_letter: Some(DeadLetter { queue: "dlq.fifo".into(), max_receive_count: 2 }), ..fifo() };
    store.create_queue("q.fifo", attributes).await.unwrap();
    let standard_dlq = QueueAttributes {
        dead_letter: Some(DeadLetter { queue: "dlq.fifo".into(), max_receive_count: 2 }),
        ..Default::default()
    };
    assert!(store.create_queue("standard", standard_dlq).await.is_err(), "a standard queue's DLQ must be standard");
    store
        .send("q.fifo", vec![grouped("a1", "a", "1"), grouped("a2", "a", "2"), grouped("a3", "a", "3")])
        .await
        .unwrap();

    // Twice received and given back by a nack: the second nack dead-letters it.
    for attempt in 1..=2 {
        let got = store.receive("q.fifo", recv(1, 0)).await.unwrap();
        assert_eq!(bodies(&got), ["a1"], "attempt {attempt}: the head, never skipped");
        let entry = NackEntry { receipt: got[0].receipt.clone(), delay_ms: 0, error: Some("boom".into()) };
        store.nack("q.fifo", vec![entry]).await.unwrap()[0].clone().unwrap();
    }
    let dead = store.receive("dlq.fifo", recv(10, 0)).await.unwrap();
    assert_eq!(bodies(&dead), ["a1"]);
    assert_eq!(dead[0].message.meta.dead_letter_source.as_deref(), Some("q.fifo"));
    assert_eq!(dead[0].message.meta.last_error.as_deref(), Some("boom"));
    // Held, a1 blocks group a in the dead-letter queue too (it is FIFO): done with it.
    store.ack("dlq.fifo", vec![dead[0].receipt.clone()]).await.unwrap()[0].clone().unwrap();

    // Twice received and left to time out: the receive that meets it a third time moves it and
    // goes on in the same group.
    for attempt in 1..=2 {
        let request = ReceiveRequest { max: 1, wait_ms: Some(2_000), visibility_timeout_ms: Some(100) };
        let got = store.receive("q.fifo", request).await.unwrap();
        assert_eq!(bodies(&got), ["a2"], "attempt {attempt}");
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    let got = store.receive("q.fifo", recv(10, 0)).await.unwrap();
    assert_eq!(bodies(&got), ["a3"], "a2 went to the dead-letter queue and the group went on");
    let dead = store.receive("dlq.fifo", recv(10, 0)).await.unwrap();
    assert_eq!(bodies(&dead), ["a2"]);
    let q = store.get_queue("q.fifo").await.unwrap().stats;
    assert_eq!((q.visible, q.in_flight, q.dead_letter_depth), (0, 1, Some(1)), "each message in one place");
}

/// The dead-letter queue's type is checked when a message moves, as in core: a FIFO queue whose
/// dead-letter queue was replaced by a standard queue of the same name keeps its failing
/// messages (delivering them again) rather than moving them into the standard queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_queue_of_the_wrong_type_is_no_target() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect_without_sweeper().await;
    store.create_queue("dlq", fifo()).await.unwrap();
    let attributes =
        QueueAttributes { dead_letter: Some(DeadLetter { queue: "dlq".into(), max_receive_count: 1 }), ..fifo() };
    store.create_queue("q.fifo", attributes).await.unwrap();
    store.delete_queue("dlq").await.unwrap();
    store.create_queue("dlq", QueueAttributes::default()).await.unwrap();
    store.send("q.fifo", vec![grouped("a1", "a", "1")]).await.unwrap();
    let got = store.receive("q.fifo", recv(1, 0)).await.unwrap();
    let entry = NackEntry { receipt: got[0].receipt.clone(), delay_ms: 0, error: None };
    store.nack("q.fifo", vec![entry]).await.unwrap()[0].clone().unwrap();
    let again = store.receive("q.fifo", recv(1, 0)).await.unwrap();
    assert_eq!(bodies(&again), ["a1"]);
    assert_eq!(again[0].message.meta.receive_count, 2);
    assert_eq!(store.get_queue("dlq").await.unwrap().stats.visible, 0, "nothing moved into the standard queue");
}

/// A key's window: duplicates inside it (content-based and per-group keys included), a fresh
/// message after it, expired keys removed by the sweeper, and purge and delete forgetting keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dedup_keys_live_for_their_window_and_no_longer() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect_without_sweeper().await;
    let client = schema.client().await;
    let keys = |sql: &'static str| {
        let client = &client;
        async move { client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    let attributes = QueueAttributes { content_based_dedup: true, dedup_scope: DedupScope::MessageGroup, ..fifo() };
    store.create_queue("c.fifo", attributes).await.unwrap();
    let by_content = |body: &str, group: &str| NewMessage { dedup_id: None, ..grouped(body, group, "") };
    let results = store
        .send("c.fifo", vec![by_content("same", "a"), by_content("same", "a"), by_content("same", "b")])
        .await
        .unwrap();
    let [a, a_again, b] = [0, 1, 2].map(|i| results[i].clone().unwrap());
    assert!(!a.duplicate && a_again.duplicate && !b.duplicate, "per-group keys: {results:?}");
    assert_eq!(a_again.id, a.id, "a repeat within one batch answers with the first");
    assert_ne!(b.id, a.id);

    let short = QueueAttributes { dedup_window_ms: 300, ..fifo() };
    store.create_queue("s.fifo", short).await.unwrap();
    let first = store.send("s.fifo", vec![grouped("x", "g", "k")]).await.unwrap()[0].clone().unwrap();
    let inside = store.send("s.fifo", vec![grouped("x", "g", "k")]).await.unwrap()[0].clone().unwrap();
    assert!(inside.duplicate && inside.id == first.id);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let after = store.send("s.fifo", vec![grouped("x", "g", "k")]).await.unwrap()[0].clone().unwrap();
    assert!(!after.duplicate && after.id != first.id, "the window ended");
    let fresh = store.send("s.fifo", vec![grouped("y", "g", "other")]).await.unwrap()[0].clone().unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(keys("SELECT count(*) FROM dedup WHERE expires_at <= sluice_now_ms()").await, 2);
    assert!(store.sweep_now().await.unwrap());
    assert_eq!(keys("SELECT count(*) FROM dedup WHERE expires_at <= sluice_now_ms()").await, 0, "swept");
    assert!(!fresh.duplicate);

    assert!(keys("SELECT count(*) FROM dedup").await > 0);
    store.purge_queue("c.fifo").await.unwrap();
    let again = store.send("c.fifo", vec![by_content("same", "a")]).await.unwrap()[0].clone().unwrap();
    assert!(!again.duplicate && again.id != a.id, "purge forgot the keys");
    store.delete_queue("c.fifo").await.unwrap();
    store.delete_queue("s.fifo").await.unwrap();
    assert_eq!(keys("SELECT count(*) FROM dedup").await, 0, "deleting a queue forgets its keys");
}

/// What a FIFO queue refuses, as core does, and the SQL door, which cannot apply FIFO rules.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_rules_are_enforced_on_every_door() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect().await;
    assert!(store.create_queue("named.fifo", QueueAttributes::default()).await.is_err(), ".fifo names are FIFO");
    store.create_queue("f.fifo", fifo()).await.unwrap();
    let delayed = NewMessage { delay_ms: Some(10), ..grouped("x", "g", "1") };
    let no_dedup = NewMessage { dedup_id: None, ..grouped("x", "g", "2") };
    let results = store.send("f.fifo", vec![delayed, no_dedup, grouped("ok", "g", "3")]).await.unwrap();
    assert!(matches!(&results[0], Err(EntryError::Invalid(v)) if v.field == "delay_ms"), "{results:?}");
    assert!(matches!(&results[1], Err(EntryError::Invalid(v)) if v.field == "dedup_id"), "{results:?}");
    assert!(results[2].is_ok());
    let client = schema.client().await;
    let err = client.execute("SELECT sluice_send('f.fifo', 'x'::bytea)", &[]).await.unwrap_err();
    assert!(err.as_db_error().is_some_and(|e| e.message().contains("FIFO")), "{err}");
    assert_eq!(store.get_queue("f.fifo").await.unwrap().stats.visible, 1);
}
