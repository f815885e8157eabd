//! Jobs on PostgreSQL beyond the conformance suite: the sweeper's part, driven by hand with
//! `sweep_now` (lapses, and each queue's budget of finished jobs pruning the oldest), and two
//! stores over one schema (two nodes) claiming from one queue without ever sharing a job.

mod support;

use std::collections::HashSet;

use sluice_core::jobs::{ClaimSpec, JobLimits, JobStatus, NewJob};
use sluice_postgres::{PostgresOptions, PostgresStore};
use sluice_store::prelude::*;

fn job(n: u32) -> NewJob {
    NewJob { queue: "q".into(), job_type: "t".into(), payload: format!("{n}").into_bytes(), ..NewJob::default() }
}

fn spec(max: u32) -> ClaimSpec {
    ClaimSpec { queues: vec!["q".into()], types: vec![], max, lease_ms: 60_000 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_lapses_leases_and_keeps_each_queues_budget() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let limits = JobLimits { result_bytes_per_queue_max: 25, finished_per_queue_max: 3 };
    let options = PostgresOptions { sweep_interval_ms: 3_600_000, job_limits: limits, ..schema.options() };
    let store = PostgresStore::connect(&url, options).await.expect("connect");
    let client = schema.client().await;

    // Five jobs of 10 result bytes each, finished one after the other.
    let mut ids = Vec::new();
    for n in 0..5 {
        let id = store.enqueue_job(job(n)).await.unwrap().view.record.id;
        let c = store.claim_jobs(spec(1), 0).await.unwrap();
        store.complete_job(id, &c[0].lease, vec![b'1'; 10]).await.unwrap();
        client
            .execute(
                "UPDATE jobs SET finished_at = finished_at - 10 + $1 WHERE id = $2",
                &[&i64::from(n), &uuid::Uuid::from_u128(id.0)],
            )
            .await
            .unwrap();
        ids.push(id);
    }
    let running = store.enqueue_job(NewJob { max_attempts: Some(1), ..job(9) }).await.unwrap().view.record.id;
    let held = store.claim_jobs(spec(1), 0).await.unwrap();
    client.execute("UPDATE jobs SET lease_expires_at = sluice_now_ms() - 1 WHERE status = 1", &[]).await.unwrap();
    assert!(store.heartbeat_job(running, &held[0].lease, None, None).await.is_err(), "a lease past its end is refused");

    assert!(store.sweep_now().await.unwrap(), "this node held the lease");
    // The budget: 25 bytes keep the newest two.
    for (n, id) in ids.iter().enumerate() {
        assert_eq!(store.get_job(*id, 0).await.is_ok(), n >= 3, "job {n}");
    }
    let view = store.get_job(running, 0).await.unwrap();
    assert_eq!(view.record.status, JobStatus::Dead, "its only attempt lapsed");
    assert!(view.error.unwrap().contains("the lease lapsed"));
    let counters = store.counters();
    assert_eq!((counters.jobs_pruned_budget, counters.jobs_lapsed), (3, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_claiming_one_queue_never_share_a_job() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let (a, b) = (schema.connect().await, schema.connect().await);
    for n in 0..200 {
        a.enqueue_job(job(n)).await.unwrap();
    }
    let claim = |store: PostgresStore| {
        tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let got = store.claim_jobs(spec(7), 0).await.unwrap();
                if got.is_empty() {
                    return mine;
                }
                mine.extend(got.into_iter().map(|c| c.view.record.id));
            }
        })
    };
    let (a, b) = (claim(a), claim(b));
    let (from_a, from_b) = (a.await.unwrap(), b.await.unwrap());
    let all: HashSet<_> = from_a.iter().chain(&from_b).collect();
    assert_eq!(all.len(), 200, "every job claimed once");
    assert_eq!(from_a.len() + from_b.len(), 200, "no job claimed twice");
}
