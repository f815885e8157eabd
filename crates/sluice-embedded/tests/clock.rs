//! The embedded store's timers on a manual clock: delays, visibility timeouts and retention end
//! exactly when the clock says, a long poll parked on a delayed message is woken by the clock's
//! move, and a long poll's own wait stays real time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_clock::{Clock, ManualClock};
use sluice_core::{NewMessage, QueueAttributes};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_store::ReceiveRequest;
use sluice_store::prelude::*;

const T0_MS: u64 = 1_700_000_000_000;

fn open(dir: &tempfile::TempDir, clock: &ManualClock) -> Arc<EmbeddedStore> {
    let config = EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync };
    Arc::new(EmbeddedStore::open_with_clock(config, Arc::new(clock.clone())).expect("open"))
}

fn text(body: &str) -> NewMessage {
    NewMessage { body: body.as_bytes().to_vec(), ..Default::default() }
}

fn now(max: u32, visibility_timeout_ms: u64) -> ReceiveRequest {
    ReceiveRequest { max, wait_ms: Some(0), visibility_timeout_ms: Some(visibility_timeout_ms) }
}

async fn bodies(store: &EmbeddedStore, request: ReceiveRequest) -> Vec<String> {
    let received = store.receive("q", request).await.expect("receive");
    received.iter().map(|m| String::from_utf8_lossy(&m.message.content.body).into_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delays_visibility_and_retention_follow_the_manual_clock() {
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = ManualClock::new(T0_MS);
    let store = open(&dir, &clock);
    let attributes = QueueAttributes { retention_ms: 60_000, ..QueueAttributes::default() };
    store.create_queue("q", attributes).await.expect("create");
    store.send("q", vec![NewMessage { delay_ms: Some(10_000), ..text("delayed") }]).await.expect("send");
    store.send("q", vec![text("now")]).await.expect("send");

    assert_eq!(bodies(&store, now(10, 5_000)).await, ["now"]);
    // Real time passes, manual time does not: nothing is due.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(bodies(&store, now(10, 5_000)).await, Vec::<String>::new());
    clock.advance_to(T0_MS + 4_999);
    assert_eq!(bodies(&store, now(10, 5_000)).await, Vec::<String>::new(), "neither timer is due yet");
    clock.advance_to(T0_MS + 5_000);
    assert_eq!(bodies(&store, now(10, 5_000)).await, ["now"], "its visibility timeout ended at 5,000 ms");
    clock.advance_to(T0_MS + 9_999);
    assert_eq!(bodies(&store, now(10, 60_000)).await, Vec::<String>::new(), "one millisecond before the delay ends");
    clock.advance_to(T0_MS + 10_000);
    assert_eq!(bodies(&store, now(10, 60_000)).await, ["delayed", "now"]);

    // Retention counts from the send on the same clock: at 60,000 ms both are gone, held or not.
    assert_eq!(store.get_queue("q").await.expect("queue").stats.in_flight, 2);
    clock.advance_to(T0_MS + 59_999);
    assert_eq!(store.get_queue("q").await.expect("queue").stats.in_flight, 2);
    clock.advance_to(T0_MS + 60_000);
    let stats = store.get_queue("q").await.expect("queue").stats;
    assert_eq!((stats.visible, stats.in_flight, stats.delayed), (0, 0, 0), "retention ended: {stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_is_woken_by_the_clock_and_its_wait_is_real_time() {
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = ManualClock::new(T0_MS);
    let store = open(&dir, &clock);
    store.create_queue("q", QueueAttributes::default()).await.expect("create");
    store.send("q", vec![NewMessage { delay_ms: Some(30_000), ..text("later") }]).await.expect("send");

    // A wait of 300 ms ends after 300 ms of real time although the manual clock stands still.
    let started = Instant::now();
    let request = ReceiveRequest { max: 1, wait_ms: Some(300), visibility_timeout_ms: None };
    assert!(store.receive("q", request).await.expect("receive").is_empty());
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300), "the wait ended early: {waited:?}");

    // A long poll parked for 20 s is answered as soon as the clock reaches the delay's end.
    let poller = {
        let store = store.clone();
        tokio::spawn(async move {
            let request = ReceiveRequest { max: 1, wait_ms: Some(20_000), visibility_timeout_ms: None };
            let started = Instant::now();
            let got = store.receive("q", request).await.expect("receive");
            (got.len(), started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    clock.advance_to(T0_MS + 29_999);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!poller.is_finished(), "nothing was due at 29,999 ms");
    clock.advance_to(T0_MS + 30_000);
    let (got, waited) = poller.await.expect("poller");
    assert_eq!(got, 1);
    assert!(waited < Duration::from_secs(10), "woken by the clock, not by the end of its wait ({waited:?})");
    assert_eq!(clock.now_ms(), T0_MS + 30_000);
}
