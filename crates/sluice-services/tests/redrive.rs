//! Redrive steps follow the services' clock: at 10 messages a second (one per 100 ms step) a
//! manual clock that stands still moves nothing after the first step, and each 100 ms it moves
//! forward moves one more message.

use std::sync::Arc;
use std::time::Duration;

use sluice_clock::ManualClock;
use sluice_core::{DeadLetter, NewMessage, QueueAttributes};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_services::redrive::Status;
use sluice_services::topics::Arns;
use sluice_services::topics::worker::PushConfig;
use sluice_services::{Services, ServicesConfig};
use sluice_store::{ReceiveRequest, Store};

const T0_MS: u64 = 1_700_000_000_000;

/// Waits (real time) until `f` holds; the redrive task runs on its own.
async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..400 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_steps_wait_for_the_clock() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync };
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(config).expect("open"));
    store.create_queue("dlq", QueueAttributes::default()).await.expect("dlq");
    let dead_letter = Some(DeadLetter { queue: "dlq".into(), max_receive_count: 1 });
    store.create_queue("src", QueueAttributes { dead_letter, ..QueueAttributes::default() }).await.expect("src");
    let messages = (0..5).map(|i| NewMessage { body: vec![b'0' + i], ..Default::default() }).collect();
    store.send("dlq", messages).await.expect("send");

    let clock = ManualClock::new(T0_MS);
    let arns = Arns { region: "us-east-1".into(), account: "000000000000".into() };
    let services = Services::new(
        store.clone(),
        Arc::new(clock.clone()),
        ServicesConfig { arns, push: PushConfig::default(), jobs: Default::default() },
    );
    let task = services.redrives().start("dlq", Some("src".into()), Some(10)).await.expect("start");
    assert_eq!(task.started_at_ms, T0_MS, "the task's times are the clock's");
    let moved = || services.redrives().get(task.id).expect("task").moved;

    eventually("the first step", || moved() == 1).await;
    // The task sleeps until 100 ms later on the manual clock; real time moves nothing.
    eventually("the task to wait for the clock", || clock.next_deadline_ms() == Some(T0_MS + 100)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(moved(), 1, "no step while the clock stands still");
    for step in 2..=5 {
        clock.advance_by(100);
        eventually("the next step", || moved() == step).await;
    }
    clock.advance_by(100);
    eventually("the task to finish", || services.redrives().get(task.id).expect("task").status == Status::Completed)
        .await;
    let done = services.redrives().get(task.id).expect("task");
    assert_eq!(done.finished_at_ms, Some(T0_MS + 500));
    let request = ReceiveRequest { max: 10, wait_ms: Some(0), visibility_timeout_ms: None };
    assert_eq!(store.receive("src", request).await.expect("receive").len(), 5);
    services.stop();
}
