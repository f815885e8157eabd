//! The trace over an embedded store on a manual clock: recording, causal reads, retention.

use std::sync::Arc;

use sluice_clock::ManualClock;
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_store::Store;

use super::*;

const START_MS: u64 = 1_700_000_000_000;
const RETENTION_MS: u64 = 60_000;

fn traces() -> (Arc<Traces>, Arc<ManualClock>, Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        EmbeddedStore::open(EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync })
            .unwrap(),
    );
    let clock = Arc::new(ManualClock::new(START_MS));
    (Arc::new(Traces::new(store.clone(), clock.clone(), RETENTION_MS)), clock, store, dir)
}

fn listed(trace: &Trace) -> Vec<(&str, TraceKind, usize)> {
    trace.entries.iter().map(|(e, depth)| (e.id.as_str(), e.kind, *depth)).collect()
}

#[tokio::test]
async fn a_correlation_lists_what_carried_it_in_causal_order_and_nothing_else() {
    let (traces, clock, _store, _dir) = traces();
    traces.record(vec![TraceEntry::new(TraceKind::Saga, "s1", "order-7", "saga:order")]).await;
    clock.advance_by(5);
    // Recorded in one call, the step's message before the step that caused it.
    traces
        .record(vec![
            TraceEntry::new(TraceKind::Message, "m1", "order-7", "queue:stock").caused_by(Some("s1/reserve/action/1")),
            TraceEntry::new(TraceKind::SagaStep, "s1/reserve/action/1", "order-7", "saga:order").caused_by(Some("s1")),
            TraceEntry::new(TraceKind::Message, "other", "order-8", "queue:stock"),
        ])
        .await;
    clock.advance_by(5);
    traces
        .record(vec![TraceEntry::new(TraceKind::Event, "e1", "order-7", "events:order-7").caused_by(Some("m1"))])
        .await;

    let trace = traces.read("order-7").await.unwrap();
    assert_eq!(
        listed(&trace),
        vec![
            ("s1", TraceKind::Saga, 0),
            ("s1/reserve/action/1", TraceKind::SagaStep, 1),
            ("m1", TraceKind::Message, 2),
            ("e1", TraceKind::Event, 3),
        ]
    );
    assert!(!trace.truncated);
    let (event, _) = &trace.entries[3];
    assert_eq!(event.at_ms, START_MS + 10);
    assert_eq!(event.target, "events:order-7");
    assert!(traces.read("order").await.unwrap().entries.is_empty(), "a prefix of an id is another id");
    assert_eq!(listed(&traces.read("order-8").await.unwrap()), vec![("other", TraceKind::Message, 0)]);
}

#[tokio::test]
async fn entries_past_the_retention_are_not_read_and_the_sweep_deletes_them() {
    let (traces, clock, store, _dir) = traces();
    traces.record(vec![TraceEntry::new(TraceKind::Job, "old", "c", "job:q")]).await;
    clock.advance_by(RETENTION_MS / 2);
    traces.record(vec![TraceEntry::new(TraceKind::Job, "new", "c", "job:q")]).await;
    assert_eq!(traces.sweep_once().await.unwrap(), 0, "nothing is old enough yet");

    clock.advance_by(RETENTION_MS / 2);
    // `old` is exactly as old as the retention: gone from reads before the sweep runs.
    assert_eq!(listed(&traces.read("c").await.unwrap()), vec![("new", TraceKind::Job, 0)]);
    assert_eq!(store.list_records(TRACE_KIND, "", None, 10).await.unwrap().len(), 2);
    assert_eq!(traces.sweep_once().await.unwrap(), 1);
    let left = store.list_records(TRACE_KIND, "", None, 10).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(TraceEntry::decode(&left[0].value).unwrap().id, "new");

    clock.advance_by(RETENTION_MS);
    assert_eq!(traces.sweep_once().await.unwrap(), 1);
    assert!(traces.read("c").await.unwrap().entries.is_empty());
}

#[tokio::test]
async fn a_trace_survives_a_restart_and_a_huge_one_is_cut_to_its_oldest() {
    let dir = tempfile::tempdir().unwrap();
    let config = || EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync };
    let clock = Arc::new(ManualClock::new(START_MS));
    {
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(config()).unwrap());
        let traces = Traces::new(store, clock.clone(), TRACE_RETENTION_MS_DEFAULT);
        for chunk in 0..11 {
            let entries = (0..1_000)
                .map(|i| TraceEntry::new(TraceKind::Message, format!("m{}", chunk * 1_000 + i), "big", "queue:q"))
                .collect();
            traces.record(entries).await;
            clock.advance_by(1);
        }
    }
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(config()).unwrap());
    let traces = Traces::new(store, clock, TRACE_RETENTION_MS_DEFAULT);
    let trace = traces.read("big").await.unwrap();
    assert!(trace.truncated);
    assert_eq!(trace.entries.len(), TRACE_ENTRIES_READ_MAX);
    assert!(trace.entries.iter().all(|(e, _)| e.at_ms < START_MS + 10), "the oldest ten thousand");
}
