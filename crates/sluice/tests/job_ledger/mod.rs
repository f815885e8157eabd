//! What the job crash tests (`crash_jobs.rs`, `pg_nodes.rs`) share: a worker that records every
//! attempt it makes as the server acknowledged it (start, lease end after each heartbeat,
//! completion), and the one check of those records: no job completed twice, and no attempt
//! started before the lease of the attempt before it had ended, nor after an acknowledged
//! completion.

#![allow(dead_code)] // Each test crate uses a different part of this module.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sluice_api::{ClaimJobsRequest, CompleteJobRequest, ErrorCode, HeartbeatRequest, Job};
use sluice_client::ClientError;

/// How often a worker heartbeats a job whose lease is `LEASE_MS`.
pub const LEASE_MS: u64 = 1_000;
pub const HEARTBEAT_MS: u64 = 300;

/// One attempt as its worker saw it.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub attempt: u32,
    pub started_at_ms: u64,
    /// The latest lease end the server acknowledged (claim, then heartbeats).
    pub lease_until_ms: u64,
    /// Its completion was acknowledged.
    pub completed: bool,
}

/// Every attempt of every job, by job id, and how attempts ended without a completion.
#[derive(Default)]
pub struct Attempts {
    pub by_job: Mutex<HashMap<String, Vec<Attempt>>>,
    pub uncertain_completions: AtomicU64,
    pub lost_leases: AtomicU64,
}

/// What [`Attempts::check`] found.
#[derive(Debug, Default)]
pub struct Verdict {
    pub attempts: usize,
    /// Attempts after the first of their job (runs after a lapse).
    pub reruns: usize,
    pub completed_twice: Vec<String>,
    /// Attempts that started before the earlier attempt's lease ended, or after its
    /// acknowledged completion.
    pub early: Vec<String>,
}

fn over(e: &ClientError) -> bool {
    matches!(e.code(), Some(ErrorCode::StaleLease | ErrorCode::JobNotFound))
}

/// A claim of up to `max` jobs of `queue`, with the tests' lease.
pub fn claim_request(queue: &str, max: u32) -> ClaimJobsRequest {
    ClaimJobsRequest {
        queues: vec![queue.into()],
        max: Some(max),
        wait_ms: Some(200),
        lease_ms: Some(LEASE_MS),
        ..Default::default()
    }
}

impl Attempts {
    fn update(&self, id: &str, attempt: u32, f: impl FnOnce(&mut Attempt)) {
        let mut all = self.by_job.lock().unwrap();
        if let Some(a) = all.get_mut(id).and_then(|v| v.iter_mut().find(|a| a.attempt == attempt)) {
            f(a);
        }
    }

    /// Works one claimed job for `work_ms` against the server `url()` names at each call,
    /// heartbeating every `HEARTBEAT_MS`, then completes it; records all of it.
    pub async fn work(&self, url: impl Fn() -> String, job: Job, lease: String, work_ms: u64) {
        let (id, attempt) = (job.id.clone(), job.attempts);
        self.by_job.lock().unwrap().entry(id.clone()).or_default().push(Attempt {
            attempt,
            started_at_ms: job.started_at_ms.expect("a claimed job has started"),
            lease_until_ms: job.lease_expires_at_ms.expect("a claimed job has a lease"),
            completed: false,
        });
        let client = |u: String| {
            sluice_client::Client::builder(&u).attempts(1).timeout(Duration::from_secs(10)).build().expect("client")
        };
        let started = Instant::now();
        let work = Duration::from_millis(work_ms);
        loop {
            let left = work.saturating_sub(started.elapsed());
            if left.is_zero() {
                break;
            }
            tokio::time::sleep(left.min(Duration::from_millis(HEARTBEAT_MS))).await;
            if started.elapsed() >= work {
                break;
            }
            let beat = HeartbeatRequest { lease: lease.clone(), progress: None, lease_ms: None };
            match client(url()).heartbeat_job(&id, &beat).await {
                Ok(answer) => {
                    self.update(&id, attempt, |a| a.lease_until_ms = a.lease_until_ms.max(answer.lease_expires_at_ms))
                }
                Err(e) if over(&e) => {
                    self.lost_leases.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Err(_) => {}
            }
        }
        let done = CompleteJobRequest { lease, result: serde_json::json!({ "by": attempt }) };
        match client(url()).complete_job(&id, &done).await {
            Ok(_) => self.update(&id, attempt, |a| a.completed = true),
            Err(e) if over(&e) => {
                self.lost_leases.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                self.uncertain_completions.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The check (see the module documentation).
    pub fn check(&self) -> Verdict {
        let all = self.by_job.lock().unwrap();
        let mut verdict = Verdict { attempts: all.values().map(Vec::len).sum(), ..Verdict::default() };
        for (id, list) in all.iter() {
            let mut list = list.clone();
            list.sort_by_key(|a| a.attempt);
            if list.iter().filter(|a| a.completed).count() > 1 {
                verdict.completed_twice.push(id.clone());
            }
            for pair in list.windows(2) {
                verdict.reruns += 1;
                let (before, after) = (&pair[0], &pair[1]);
                if before.completed || after.started_at_ms < before.lease_until_ms {
                    verdict
                        .early
                        .push(format!("{id}: attempt {} at {} after {before:?}", after.attempt, after.started_at_ms));
                }
            }
        }
        verdict
    }
}
