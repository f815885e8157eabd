//! The stats sampler over the real embedded store on a manual clock: samples at the clock's
//! times, per-queue counts of what sends, receives and acks took through the services' store,
//! differences between samples, the bound on samples kept, and deleted queues forgotten.

use std::sync::Arc;

use sluice_clock::ManualClock;
use sluice_core::{NewMessage, QueueAttributes};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_services::stats::{STATS_HISTORY_SAMPLES_MAX, STATS_SAMPLE_MS_MIN};
use sluice_services::topics::Arns;
use sluice_services::{Services, ServicesConfig};
use sluice_store::ReceiveRequest;
use sluice_store::prelude::*;

const T0_MS: u64 = 1_767_225_600_000;

fn messages(n: usize) -> Vec<NewMessage> {
    (0..n).map(|i| NewMessage { body: format!("m{i}").into_bytes(), ..Default::default() }).collect()
}

#[tokio::test]
async fn samples_count_what_each_queue_did_between_them() {
    let clock = ManualClock::new(T0_MS);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync };
    let raw = Arc::new(EmbeddedStore::open_with_clock(config, Arc::new(clock.clone())).expect("open"));
    let arns = Arns { region: "us-east-1".into(), account: "000000000000".into() };
    let config = ServicesConfig { stats_sample_ms: 1, ..ServicesConfig::new(arns) };
    let services = Services::new(raw.clone(), Arc::new(clock.clone()), config);
    let stats = services.stats();
    assert_eq!(stats.sample_ms(), STATS_SAMPLE_MS_MIN, "the interval is clamped to its minimum");
    let store = services.store();
    store.create_queue("jobs", QueueAttributes::default()).await.unwrap();
    store.create_queue("mail", QueueAttributes::default()).await.unwrap();

    stats.sample().await.unwrap();
    store.send("jobs", messages(10)).await.unwrap();
    let request = ReceiveRequest { max: 4, wait_ms: Some(0), visibility_timeout_ms: None };
    let received = store.receive("jobs", request).await.unwrap();
    let acks = store.ack("jobs", received.iter().take(3).map(|m| m.receipt.clone()).collect()).await.unwrap();
    assert!(acks.iter().all(Result::is_ok));
    // A send straight to the backend is not the services' and is not counted per queue.
    raw.send("mail", messages(2)).await.unwrap();
    clock.advance_by(10_000);
    stats.sample().await.unwrap();

    let jobs = stats.queue("jobs").expect("jobs has a history");
    assert_eq!(jobs.len(), 2);
    let (first, second) = (jobs[0], jobs[1]);
    assert_eq!((first.at_ms, first.interval_ms, first.sent), (T0_MS, 0, 0));
    assert_eq!((second.at_ms, second.interval_ms), (T0_MS + 10_000, 10_000));
    assert_eq!((second.sent, second.received, second.acked), (10, 4, 3));
    assert_eq!((second.visible, second.in_flight, second.delayed), (6, 1, 0));
    assert_eq!(second.oldest_age_ms, Some(10_000), "the oldest message's age on the clock");
    let mail = stats.queue("mail").unwrap();
    assert_eq!((mail[1].visible, mail[1].sent), (2, 0));
    let totals = stats.totals();
    assert_eq!(totals.len(), 2);
    assert_eq!((totals[1].sent, totals[1].received, totals[1].acked), (12, 4, 3), "the store's own totals");
    assert_eq!((totals[1].depth, totals[1].queues, totals[1].interval_ms), (9, 2, 10_000));
    let latest: Vec<String> = stats.latest().into_iter().map(|(name, _)| name).collect();
    assert_eq!(latest, ["jobs", "mail"]);

    // Nothing done since: the next sample counts nothing.
    clock.advance_by(10_000);
    stats.sample().await.unwrap();
    let third = stats.queue("jobs").unwrap()[2];
    assert_eq!((third.sent, third.received, third.acked, third.visible), (0, 0, 0, 6));

    // Deleted: forgotten at the next sample.
    store.delete_queue("mail").await.unwrap();
    stats.sample().await.unwrap();
    assert_eq!(stats.queue("mail"), None);

    // The history keeps the last STATS_HISTORY_SAMPLES_MAX samples.
    for _ in 0..STATS_HISTORY_SAMPLES_MAX {
        clock.advance_by(1_000);
        stats.sample().await.unwrap();
    }
    let jobs = stats.queue("jobs").unwrap();
    assert_eq!(jobs.len(), STATS_HISTORY_SAMPLES_MAX);
    assert_eq!(jobs.last().unwrap().at_ms, clock_now(&clock));
    assert_eq!(stats.totals().len(), STATS_HISTORY_SAMPLES_MAX);
    raw.close();
}

fn clock_now(clock: &ManualClock) -> u64 {
    use sluice_clock::Clock;
    clock.now_ms()
}
