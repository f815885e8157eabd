//! What goes wrong around a relay: its source database going away and coming back, a row its
//! target refuses, and the node running it dying.

use std::sync::Arc;
use std::time::Duration;

use sluice_clock::{Clock, ManualClock};
use sluice_core::QueueAttributes;
use sluice_core::message::AttributeData;
use sluice_services::relays::{RELAY_ERROR, RelaySpec, Target};
use sluice_store::ReceiveRequest;

use crate::outbox::{Outbox, insert_one};
use crate::proxy::Proxy;
use crate::support::{Fixture, Node, check_delivery, drain, eventually, spec};

/// The source goes away under a running relay and comes back: the relay reports the error,
/// waits, and resumes by itself (the same runner, no restart) without losing a row.
pub async fn source_goes_away<O: Outbox>(outbox: &O, database: &str, via_proxy: impl Fn(u16) -> String) {
    let proxy = Proxy::start(database.to_string()).await;
    let f = Fixture::new().await;
    f.services().create_relay(spec("r", &via_proxy(proxy.port), &outbox.table())).await.expect("create the relay");
    let mut written = Vec::new();
    for i in 0..10 {
        let body = format!("before-{i}");
        written.push((insert_one(outbox, "a", &body).await, "a".to_string(), body));
    }
    let mut got = drain(&f.store, "out", 10).await;
    let owner = f.services().relay("r").await.expect("relay").state.lease.expect("a lease").owner;
    // A row is published before it is marked: were the source to go away between the two, the
    // row would rightly be published again when it comes back (at least once). Let the first
    // rows finish, so that every copy counted below is one this outage caused.
    eventually("the first rows finished", || async { outbox.unpublished().await == 0 }).await;

    proxy.down();
    for i in 0..10 {
        let body = format!("during-{i}");
        written.push((insert_one(outbox, "a", &body).await, "a".to_string(), body));
    }
    eventually("the relay to report the lost source", || async {
        let state = f.services().relay("r").await.expect("relay").state;
        state.errors > 0 && state.last_error.as_deref().is_some_and(|e| e.contains("unreachable"))
    })
    .await;
    proxy.up();
    got.extend(drain(&f.store, "out", 10).await);
    assert_eq!(check_delivery(&written, &got), 0);
    let view = f.services().relay("r").await.expect("relay");
    assert_eq!(view.state.lease.expect("a lease").owner, owner, "the same runner resumed");
    eventually("every row finished", || async { outbox.unpublished().await == 0 }).await;
}

/// Moves a manual clock forward 20 ms every 2 ms of real time, so that relays polling on it
/// run, and leases and grace periods pass ten times faster than real time.
pub fn tick(clock: &ManualClock) -> tokio::task::JoinHandle<()> {
    let clock = clock.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(2)).await;
            clock.advance_by(20);
        }
    })
}

/// A row too large for the target queue holds back only its aggregate's later rows, counted
/// as blocked with the reason shown, until its grace period passes; then it goes to the
/// dead-letter queue with the reason and its aggregate goes on.
pub async fn refused_row_is_dead_lettered<O: Outbox>(outbox: &O) {
    let clock = ManualClock::new(1_700_000_000_000);
    let f = Fixture::with_clock(Arc::new(clock.clone())).await;
    let small = QueueAttributes { message_bytes_max: 1024, ..QueueAttributes::default() };
    f.store.create_queue("small", small).await.expect("queue");
    f.store.create_queue("dlq", QueueAttributes::default()).await.expect("dlq");
    let big = "x".repeat(2048);
    let a1 = insert_one(outbox, "a", &big).await;
    let a2 = insert_one(outbox, "a", "a2").await;
    let b1 = insert_one(outbox, "b", "b1").await;
    let spec = RelaySpec {
        target: Target::Queue("small".into()),
        dead_letter_queue: Some("dlq".into()),
        ..spec("r", &outbox.url(), &outbox.table())
    };
    f.services().create_relay(spec).await.expect("create the relay");
    // Nothing moves the clock yet: the relay polls once, at its start.
    let got = drain(&f.store, "small", 1).await;
    assert_eq!(got.iter().map(|g| g.id.as_str()).collect::<Vec<_>>(), [b1.as_str()], "only the other aggregate");
    eventually("the blocked rows to show", || async {
        let s = f.services().relay("r").await.expect("relay").state;
        s.blocked_rows == 2 && s.last_error.as_deref().is_some_and(|e| e.contains("message_bytes_max"))
    })
    .await;
    let ticking = tick(&clock);
    let got = drain(&f.store, "small", 1).await;
    assert_eq!(got[0].id, a2, "the aggregate goes on once its refused row is dead-lettered");
    let request = ReceiveRequest { max: 10, wait_ms: Some(0), visibility_timeout_ms: None };
    let dead = f.store.receive("dlq", request).await.expect("dlq");
    assert_eq!(dead.len(), 1);
    let attributes = &dead[0].message.content.attributes;
    let text = |name: &str| match attributes.get(name).map(|a| &a.value) {
        Some(AttributeData::Text(t)) => t.clone(),
        _ => String::new(),
    };
    assert_eq!(text("outbox_id"), a1);
    assert!(text(RELAY_ERROR).contains("message_bytes_max"), "{}", text(RELAY_ERROR));
    assert_eq!(dead[0].message.content.body.len(), 2048, "the payload itself");
    eventually("the state to count it", || async {
        let s = f.services().relay("r").await.expect("relay").state;
        s.dead_lettered == 1 && s.published == 2 && s.blocked_rows == 0
    })
    .await;
    ticking.abort();
}

/// Whether `node` holds the relay `r` now.
async fn holds(f: &Fixture, node: &str) -> bool {
    let view = f.services().relay("r").await.expect("relay");
    view.active_node(f.services().clock().now_ms()).as_deref() == Some(node)
}

/// Two nodes over one store: one relays, the other waits; when the relaying node dies (its
/// runtime is dropped, so it lets go of nothing), the other takes the relay over once the
/// lease runs out, and every row arrives.
pub async fn lease_is_taken_over<O: Outbox>(outbox: &O) {
    let clock = ManualClock::new(1_700_000_000_000);
    let mut f = Fixture::with_clock(Arc::new(clock.clone())).await;
    let ticking = tick(&clock);
    // The second node runs on a runtime of its own, so that it can die at once.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let (store, shared): (_, Arc<dyn Clock>) = (f.store.clone(), Arc::new(clock.clone()));
    let other = {
        let _inside = runtime.enter();
        Node::start(store, shared)
    };
    let second = other.services.relays().node().to_string();
    let mut written = Vec::new();
    f.services().create_relay(spec("r", &outbox.url(), &outbox.table())).await.expect("create the relay");
    for i in 0..20 {
        let body = format!("first-{i}");
        written.push((insert_one(outbox, "a", &body).await, "a".to_string(), body));
    }
    let mut got = drain(&f.store, "out", 20).await;
    // Make the second node the one relaying: stop the first gracefully if it took the relay,
    // which lets go of the lease at once, then start it again as the standby.
    let first = f.services().relays().node().to_string();
    if holds(&f, &first).await {
        f.node.stop().await;
        eventually("the second node to take over", || holds(&f, &second)).await;
        f.node = Node::start(f.store.clone(), Arc::new(clock.clone()));
    }
    assert!(holds(&f, &second).await, "the second node relays");
    // The second node dies: nothing lets go of its lease.
    runtime.shutdown_background();
    drop(other);
    for i in 0..20 {
        let body = format!("after-{i}");
        written.push((insert_one(outbox, "a", &body).await, "a".to_string(), body));
    }
    let first = f.services().relays().node().to_string();
    eventually("the first node to take over", || holds(&f, &first)).await;
    got.extend(drain(&f.store, "out", 20).await);
    check_delivery(&written, &got);
    ticking.abort();
}
