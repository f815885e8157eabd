//! The embedded store's job timers on a manual clock: delays, backoffs, leases (and their
//! timeout cap) and result TTLs end exactly when the clock says, across a restart; a long-poll
//! claim is woken by the clock's move; a queue's budget of finished jobs prunes the oldest.

use std::sync::Arc;

use sluice_clock::ManualClock;
use sluice_core::jobs::{ClaimSpec, Jitter, JobBackoff, JobError, JobId, JobLimits, JobStatus, NewJob};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_store::prelude::*;
use sluice_store::{StoreError, StoreStatus};

const T0_MS: u64 = 1_700_000_000_000;

fn open(dir: &tempfile::TempDir, clock: &ManualClock) -> Arc<EmbeddedStore> {
    let config = EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync };
    Arc::new(EmbeddedStore::open_with_clock(config, Arc::new(clock.clone())).expect("open"))
}

fn job(n: u32) -> NewJob {
    NewJob { queue: "q".into(), job_type: "t".into(), payload: format!("{n}").into_bytes(), ..NewJob::default() }
}

fn spec(lease_ms: u64) -> ClaimSpec {
    ClaimSpec { queues: vec!["q".into()], types: vec![], max: 10, lease_ms }
}

async fn status(store: &EmbeddedStore, id: JobId) -> JobStatus {
    store.get_job(id, 0).await.expect("job").record.status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delays_leases_backoffs_and_ttls_follow_the_manual_clock() {
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = ManualClock::new(T0_MS);
    let store = open(&dir, &clock);
    let backoff = JobBackoff { initial_ms: 1_000, max_ms: 1_000, multiplier: 2.0, jitter: Jitter::None };
    let delayed =
        NewJob { delay_ms: Some(5_000), timeout_ms: Some(3_000), backoff, result_ttl_ms: Some(10_000), ..job(1) };
    let id = store.enqueue_job(delayed).await.unwrap().view.record.id;
    assert!(store.claim_jobs(spec(2_000), 0).await.unwrap().is_empty());
    clock.advance_to(T0_MS + 4_999);
    assert!(store.claim_jobs(spec(2_000), 0).await.unwrap().is_empty(), "one millisecond before the delay ends");
    clock.advance_to(T0_MS + 5_000);
    let first = store.claim_jobs(spec(2_000), 0).await.unwrap();
    assert_eq!(first[0].view.record.lease.unwrap().expires_at, T0_MS + 7_000);

    // A heartbeat extends the lease, but never past the timeout (start + 3,000 ms).
    clock.advance_to(T0_MS + 6_500);
    let beat = store.heartbeat_job(id, &first[0].lease, None, None).await.unwrap();
    assert_eq!(beat.lease_expires_at, T0_MS + 8_000);
    clock.advance_to(T0_MS + 7_999);
    assert_eq!(status(&store, id).await, JobStatus::Running);

    // A restart keeps the lease; the timeout then ends the attempt exactly on time.
    tokio::task::spawn_blocking(move || drop(store)).await.expect("close");
    let store = open(&dir, &clock);
    assert_eq!(status(&store, id).await, JobStatus::Running, "the lease survived the restart");
    clock.advance_to(T0_MS + 8_000);
    let view = store.get_job(id, 0).await.unwrap();
    assert_eq!((view.record.status, view.record.run_at), (JobStatus::Queued, T0_MS + 8_000));
    assert!(view.error.unwrap().contains("timed out after 3000 ms"));
    let stale = store.complete_job(id, &first[0].lease, b"1".to_vec()).await;
    assert!(matches!(stale, Err(StoreError::Job(JobError::StaleLease { .. }))), "{stale:?}");

    // A failure waits exactly its backoff (no jitter: the bound).
    let second = store.claim_jobs(spec(2_000), 0).await.unwrap();
    assert_eq!(second[0].view.record.attempt, 2);
    store.fail_job(id, &second[0].lease, "boom".into(), true).await.unwrap();
    clock.advance_to(T0_MS + 8_999);
    assert!(store.claim_jobs(spec(2_000), 0).await.unwrap().is_empty(), "within its backoff");
    // A parked claim is woken by the clock's move.
    let waiter = {
        let store = store.clone();
        tokio::spawn(async move { store.claim_jobs(spec(2_000), 10_000).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    clock.advance_to(T0_MS + 9_000);
    let third = waiter.await.expect("task").expect("claim");
    assert_eq!(third[0].view.record.attempt, 3);
    store.complete_job(id, &third[0].lease, b"\"done\"".to_vec()).await.unwrap();

    // Kept for its result TTL after it finished, then pruned and counted.
    clock.advance_to(T0_MS + 18_999);
    assert_eq!(status(&store, id).await, JobStatus::Succeeded);
    clock.advance_to(T0_MS + 19_000);
    assert!(matches!(store.get_job(id, 0).await, Err(StoreError::Job(JobError::NotFound(_)))));
    assert_eq!(store.counters().jobs_pruned_ttl, 1);
    assert_eq!(store.counters().jobs_lapsed, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_keeps_its_budget_of_finished_jobs_by_pruning_the_oldest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = ManualClock::new(T0_MS);
    let store = open(&dir, &clock);
    store.set_job_limits(JobLimits { result_bytes_per_queue_max: 25, finished_per_queue_max: 3 }).await.unwrap();
    let mut ids = Vec::new();
    for n in 0..5 {
        let id = store.enqueue_job(job(n)).await.unwrap().view.record.id;
        let c = store.claim_jobs(spec(30_000), 0).await.unwrap();
        clock.advance_to(T0_MS + 1 + u64::from(n));
        store.complete_job(id, &c[0].lease, vec![b'1'; 10]).await.unwrap();
        ids.push(id);
    }
    // 10 bytes each within 25: two are kept, the newest.
    for (n, id) in ids.iter().enumerate() {
        let kept = store.get_job(*id, 0).await.is_ok();
        assert_eq!(kept, n >= 3, "job {n}");
    }
    let stats = store.job_stats().await.unwrap();
    assert_eq!((stats[0].counts[JobStatus::Succeeded.index()], stats[0].result_bytes), (2, 20));
    assert_eq!(store.counters().jobs_pruned_budget, 3);
}
