//! Crash accounting for jobs: producers enqueue jobs (each under a unique key, so that an
//! enqueue whose answer was lost is retried without a second job), workers claim, heartbeat
//! and complete them, and both sides die at random: the server with SIGKILL (restarted on the
//! same data directory, a third of the restarts killed again during start-up, as in
//! `crash.rs`), and workers by being dropped mid-job (their tasks aborted, with no completion,
//! failure or heartbeat sent after: what a killed worker process leaves behind). A fifth of
//! the jobs have a `callback_url` on a local receiver.
//!
//! At the end, with nothing killed any more, the workers finish the backlog, and:
//! - every job the server acknowledged ends `succeeded`, exactly one per payload (none lost,
//!   none doubled), and no job was completed twice;
//! - a job ran again only after the lease of its earlier attempt lapsed: every attempt started
//!   (server time) no earlier than the last lease end the server acknowledged to the earlier
//!   attempt (by its claim or a heartbeat), and no attempt followed an acknowledged completion;
//! - every webhook was delivered at least once (duplicates are allowed and counted).
//!
//! `SLUICE_CRASH_JOB_KILLS` sets the number of server kills (default 16; workers die about
//! three times as often) and `SLUICE_CRASH_SEED` replays a run's timings; the seed is printed:
//!
//! ```text
//! SLUICE_CRASH_JOB_KILLS=500 cargo test -p sluice --release --test crash_jobs -- --nocapture
//! ```

mod job_ledger;
mod torture;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use job_ledger::{Attempts, claim_request};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sluice_api::{EnqueueJobRequest, Job};
use sluice_client::JobQuery;
use torture::{Killer, ServerUrl, client};

const QUEUE: &str = "crash-jobs";
const PRODUCERS: usize = 3;
const WORKERS: usize = 4;
const KILLS_DEFAULT: u32 = 16;

#[derive(Default)]
struct Ledger {
    /// Payload → the job id the server acknowledged for it.
    enqueued: Mutex<HashMap<String, String>>,
    /// Jobs with a callback URL.
    with_callback: Mutex<HashSet<String>>,
    attempts: Attempts,
    /// Webhooks received, by job id.
    webhooks: Mutex<HashMap<String, u32>>,
}

async fn producer(index: usize, url: Arc<ServerUrl>, ledger: Arc<Ledger>, stop: Arc<AtomicBool>, hooks: String) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let payload = format!("p{index}-{n}");
        let with_callback = n.is_multiple_of(5);
        let request = EnqueueJobRequest {
            queue: QUEUE.into(),
            job_type: "work".into(),
            payload: serde_json::json!(payload),
            max_attempts: Some(1_000),
            unique_key: Some(payload.clone()),
            callback_url: with_callback.then(|| format!("{hooks}/hook")),
            ..Default::default()
        };
        // An enqueue whose answer was lost is sent again: the unique key makes it one job.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            match client(&url.get()).enqueue_job(&request).await {
                Ok(enqueued) => {
                    ledger.enqueued.lock().unwrap().insert(payload.clone(), enqueued.job.id.clone());
                    if with_callback {
                        ledger.with_callback.lock().unwrap().insert(enqueued.job.id);
                    }
                    break;
                }
                Err(_) => {
                    assert!(Instant::now() < deadline, "the enqueue of {payload} never went through");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
}

/// A worker: claims up to 3 jobs at a time and works them together.
async fn worker(url: Arc<ServerUrl>, ledger: Arc<Ledger>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    loop {
        let Ok(answer) = client(&url.get()).claim_jobs(&claim_request(QUEUE, 3)).await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let works = answer.jobs.into_iter().map(|c| {
            // Most jobs are quick; one in six outlasts its lease and lives on heartbeats.
            let work_ms = if rng.gen_ratio(1, 6) { rng.gen_range(1_000..1_500) } else { rng.gen_range(0..150) };
            let url = url.clone();
            let ledger = ledger.clone();
            async move { ledger.attempts.work(|| url.get(), c.job, c.lease, work_ms).await }
        });
        futures::future::join_all(works).await;
    }
}

async fn hook(State(ledger): State<Arc<Ledger>>, headers: HeaderMap) -> &'static str {
    if let Some(id) = headers.get("x-sluice-job-id").and_then(|v| v.to_str().ok()) {
        *ledger.webhooks.lock().unwrap().entry(id.to_string()).or_default() += 1;
    }
    "ok"
}

/// Every job of the queue, across pages.
async fn all_jobs(url: &str) -> Vec<Job> {
    let mut jobs = Vec::new();
    let mut query = JobQuery { queue: Some(QUEUE.into()), limit: Some(1_000), ..Default::default() };
    loop {
        let page = client(url).list_jobs(&query).await.expect("list jobs");
        jobs.extend(page.jobs);
        match page.next_token {
            Some(next) => query.next_token = Some(next),
            None => return jobs,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_server_and_workers_ends_every_job_once() {
    let kills = torture::kills("SLUICE_CRASH_JOB_KILLS", KILLS_DEFAULT);
    let seed = torture::seed();
    println!("job crash test: {kills} server kills, seed {seed} (replay with SLUICE_CRASH_SEED={seed})");
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6a6f6273);
    let mut killer = Killer::new(seed);
    let dir = tempfile::tempdir().expect("temp dir");
    let started = Instant::now();
    let ledger = Arc::new(Ledger::default());

    let receiver = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hooks = format!("http://{}", receiver.local_addr().unwrap());
    let app = Router::new().route("/hook", axum::routing::post(hook)).with_state(ledger.clone());
    tokio::spawn(async move { axum::serve(receiver, app).await });

    let mut server = killer.start(dir.path());
    let url = Arc::new(ServerUrl::new(&server.url));
    let stop = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|i| tokio::spawn(producer(i, url.clone(), ledger.clone(), stop.clone(), hooks.clone())))
        .collect();
    let mut workers: Vec<_> =
        (0..WORKERS).map(|i| tokio::spawn(worker(url.clone(), ledger.clone(), seed ^ i as u64))).collect();

    let mut worker_kills = 0u32;
    let mut next_worker = WORKERS as u64;
    for _ in 0..kills {
        // Between server kills, a few worker deaths.
        for _ in 0..rng.gen_range(1..=5) {
            tokio::time::sleep(Duration::from_millis(rng.gen_range(20..120))).await;
            let victim = rng.gen_range(0..workers.len());
            workers[victim].abort();
            worker_kills += 1;
            next_worker += 1;
            workers[victim] = tokio::spawn(worker(url.clone(), ledger.clone(), seed ^ next_worker));
        }
        server = killer.kill_and_restart(server, dir.path(), &url).await;
    }
    stop.store(true, Ordering::Relaxed);
    for p in producers {
        p.await.expect("producer");
    }

    // No more kills: the workers finish the backlog (lapsed leases included).
    let enqueued = ledger.enqueued.lock().unwrap().clone();
    let deadline = Instant::now() + Duration::from_secs(180);
    let jobs = loop {
        let jobs = all_jobs(&server.url).await;
        let open = jobs.iter().filter(|j| j.status != "succeeded").count();
        if open == 0 && jobs.len() >= enqueued.len() {
            break jobs;
        }
        assert!(Instant::now() < deadline, "{open} jobs did not finish (seed {seed}); log:\n{}", server.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let callbacks = ledger.with_callback.lock().unwrap().clone();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let missing = callbacks.iter().filter(|id| !ledger.webhooks.lock().unwrap().contains_key(*id)).count();
        if missing == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{missing} webhooks never arrived (seed {seed})");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for w in &workers {
        w.abort();
    }

    let by_id: HashMap<&str, &Job> = jobs.iter().map(|j| (j.id.as_str(), j)).collect();
    let lost: Vec<&String> =
        enqueued.iter().filter(|(_, id)| !by_id.contains_key(id.as_str())).map(|(p, _)| p).collect();
    // Each job's unique key is its payload (lists leave payloads out).
    let payloads: HashSet<&str> = jobs.iter().filter_map(|j| j.unique_key.as_deref()).collect();
    let doubled = jobs.len() - payloads.len();
    let verdict = ledger.attempts.check();
    let deliveries: u32 = ledger.webhooks.lock().unwrap().values().sum();
    println!(
        "job crash test: {}, {worker_kills} worker kills in {:.1?}; jobs {}, attempts {}, runs after a lapse {}, lost leases {}, uncertain completions {}, lost {}, doubled {doubled}, completed twice {}, early reruns {}; webhooks {} for {} jobs (duplicates {})",
        killer.summary(),
        started.elapsed(),
        jobs.len(),
        verdict.attempts,
        verdict.reruns,
        ledger.attempts.lost_leases.load(Ordering::Relaxed),
        ledger.attempts.uncertain_completions.load(Ordering::Relaxed),
        lost.len(),
        verdict.completed_twice.len(),
        verdict.early.len(),
        deliveries,
        callbacks.len(),
        deliveries as usize - callbacks.len().min(deliveries as usize),
    );
    assert!(enqueued.len() > 100, "too little load to prove anything ({} jobs)", enqueued.len());
    assert!(lost.is_empty(), "acknowledged jobs lost (seed {seed}): {lost:?}");
    assert_eq!(doubled, 0, "a payload became two jobs (seed {seed})");
    assert_eq!(jobs.len(), enqueued.len(), "jobs the producers never had acknowledged (seed {seed})");
    assert!(verdict.completed_twice.is_empty(), "completed twice (seed {seed}): {:?}", verdict.completed_twice);
    assert!(verdict.early.is_empty(), "ran again before the lease lapsed (seed {seed}): {:?}", verdict.early);
    assert!(verdict.reruns > 0 || kills < 4, "no job ever ran twice: nothing was proved about lapses (seed {seed})");
}
