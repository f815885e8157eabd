//! Fair scheduling across message groups on standard queues, as core's `FairIndex` does it:
//! within the highest priority, the group served least recently goes first; ungrouped messages
//! are one group; a group with nothing visible is forgotten.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sluice_core::message::MessageEnvelope;
use sluice_core::{NewMessage, QueueAttributes};
use sluice_store::prelude::*;
use sluice_store::{ReceiveRequest, Store};

fn grouped(group: Option<&str>, priority: u8) -> NewMessage {
    NewMessage {
        body: group.unwrap_or("-").as_bytes().to_vec(),
        priority,
        envelope: MessageEnvelope { group_id: group.map(str::to_string), ..Default::default() },
        ..Default::default()
    }
}

fn recv(max: u32) -> ReceiveRequest {
    ReceiveRequest { max, wait_ms: Some(0), visibility_timeout_ms: Some(60_000) }
}

/// Receives `max` and answers each message's group ("-" for none).
async fn groups_of(store: &dyn Store, max: u32) -> Vec<String> {
    let got = store.receive("q", recv(max)).await.unwrap();
    got.iter().map(|m| String::from_utf8_lossy(&m.message.content.body).into_owned()).collect()
}

async fn send(store: &dyn Store, messages: Vec<NewMessage>) {
    for r in store.send("q", messages).await.unwrap() {
        r.unwrap();
    }
}

/// One script: sends (group, priority) lists and receives of `max`, each with the groups it
/// must return, in order. The same scripts as core's `fair_tests`.
enum Step {
    Send(Vec<(Option<&'static str>, u8)>),
    Receive(u32, Vec<&'static str>),
}

async fn check(script: Vec<Step>) {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect().await;
    store.create_queue("q", QueueAttributes::default()).await.unwrap();
    for (i, step) in script.into_iter().enumerate() {
        match step {
            Step::Send(messages) => send(&store, messages.into_iter().map(|(g, p)| grouped(g, p)).collect()).await,
            Step::Receive(max, expected) => assert_eq!(groups_of(&store, max).await, expected, "step {i}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_take_turns_within_a_priority_and_priority_still_comes_first() {
    let mut sends: Vec<_> = ["a", "a", "a", "b", "b", "c"].into_iter().map(|g| (Some(g), 0)).collect();
    sends.push((None, 5));
    check(vec![Step::Send(sends), Step::Receive(7, vec!["-", "a", "b", "c", "a", "b", "a"])]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_least_recently_served_group_goes_first_across_receives() {
    let sends = ["a", "a", "a", "b", "b", "b"].into_iter().map(|g| (Some(g), 0)).collect();
    check(vec![
        Step::Send(sends),
        Step::Receive(1, vec!["a"]),
        Step::Receive(1, vec!["b"]),
        Step::Receive(1, vec!["a"]),
        // A newcomer has never been served: it goes first, then the others by last service.
        Step::Send(vec![(Some("c"), 0), (None, 0)]),
        Step::Receive(3, vec!["-", "c", "b"]),
        // One of each left; a was served before b's last turn.
        Step::Receive(10, vec!["a", "b"]),
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_group_is_served_next_despite_a_noisy_backlog() {
    let noisy = (0..1_000).map(|_| (Some("noisy"), 0)).collect();
    check(vec![
        Step::Send(noisy),
        Step::Receive(2, vec!["noisy", "noisy"]),
        Step::Send(vec![(Some("quiet"), 0)]),
        Step::Receive(3, vec!["quiet", "noisy", "noisy"]),
    ])
    .await;
}

/// Consumers on three nodes drain a noisy group's 1,000-message backlog one message at a time;
/// a quiet group's message sent meanwhile is delivered within a few receives, long before the
/// backlog is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_three_nodes_a_quiet_message_overtakes_a_noisy_backlog() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let mut nodes: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..3 {
        nodes.push(Arc::new(schema.connect().await));
    }
    nodes[0].create_queue("q", QueueAttributes::default()).await.unwrap();
    for chunk in 0..10 {
        let batch = (0..100).map(|i| NewMessage {
            body: format!("noisy {}", chunk * 100 + i).into_bytes(),
            ..grouped(Some("noisy"), 0)
        });
        send(&*nodes[0], batch.collect()).await;
    }
    let noisy_delivered = Arc::new(AtomicUsize::new(0));
    let quiet_after = Arc::new(AtomicUsize::new(usize::MAX));
    let quiet_sent = Arc::new(AtomicBool::new(false));
    let mut consumers = Vec::new();
    for node in &nodes {
        let (node, noisy_delivered, quiet_after, quiet_sent) =
            (node.clone(), noisy_delivered.clone(), quiet_after.clone(), quiet_sent.clone());
        consumers.push(tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(60);
            while quiet_after.load(Ordering::SeqCst) == usize::MAX && Instant::now() < deadline {
                let got = node.receive("q", ReceiveRequest { max: 1, ..recv(1) }).await.unwrap();
                for m in &got {
                    if m.message.meta.group_id.as_deref() == Some("quiet") {
                        assert!(quiet_sent.load(Ordering::SeqCst));
                        quiet_after.store(noisy_delivered.load(Ordering::SeqCst), Ordering::SeqCst);
                    } else {
                        noisy_delivered.fetch_add(1, Ordering::SeqCst);
                    }
                }
                let receipts = got.into_iter().map(|m| m.receipt).collect();
                node.ack("q", receipts).await.unwrap();
            }
        }));
    }
    // Let the consumers get going on the backlog first.
    while noisy_delivered.load(Ordering::SeqCst) < 20 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    quiet_sent.store(true, Ordering::SeqCst);
    send(&*nodes[1], vec![NewMessage { body: b"quiet".to_vec(), ..grouped(Some("quiet"), 0) }]).await;
    // Counted once the send is committed: receives the consumers make while the send call
    // itself is under way (slow on a loaded machine) cannot see the quiet message yet.
    let before = noisy_delivered.load(Ordering::SeqCst);
    for c in consumers {
        c.await.unwrap();
    }
    let after = quiet_after.load(Ordering::SeqCst);
    assert_ne!(after, usize::MAX, "the quiet message was delivered");
    // Three consumers may each finish one noisy receive that was under way when it was sent.
    let later = after.saturating_sub(before);
    assert!(later <= 6, "quiet delivered after {later} more noisy deliveries");
    assert!(after < 1_000, "long before the backlog drained");
}

/// A group with nothing visible is forgotten (its row goes), so its next message counts as
/// never served; a queue with a single group stamps it once, not on every receive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_groups_are_forgotten_and_a_lone_group_is_stamped_once() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = schema.connect_without_sweeper().await;
    let client = schema.client().await;
    let stamps = || async {
        let rows = client.query("SELECT group_key, last_served FROM fair_groups ORDER BY 1", &[]).await.unwrap();
        rows.iter().map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1))).collect::<Vec<_>>()
    };
    store.create_queue("q", QueueAttributes::default()).await.unwrap();
    send(&store, (0..5).map(|_| grouped(None, 0)).collect()).await;
    assert_eq!(groups_of(&store, 2).await, ["-", "-"]);
    let first = stamps().await;
    assert_eq!(first.len(), 1, "the ungrouped group is stamped");
    assert_eq!(groups_of(&store, 1).await, ["-"]);
    assert_eq!(stamps().await, first, "alone, it is not stamped again");

    send(&store, vec![grouped(Some("a"), 0), grouped(Some("a"), 0)]).await;
    assert_eq!(groups_of(&store, 2).await, ["a", "-"], "never served goes first");
    let both = stamps().await;
    assert_eq!(both.len(), 2);
    assert!(both[0].1 > first[0].1, "a choice between groups restamps: {both:?}");
    assert!(store.sweep_now().await.unwrap());
    assert_eq!(stamps().await.len(), 2, "both still have visible messages");
    assert_eq!(groups_of(&store, 10).await, ["a", "-"], "a was served before -'s last turn");
    assert!(store.sweep_now().await.unwrap());
    assert!(stamps().await.is_empty(), "nothing visible: both forgotten");
}
