//! Idempotency keys across SIGKILL: producers send batches (and, in the second test, publish
//! to a topic and enqueue jobs), each under a key of its own, to the real `sluice serve` while
//! it is killed and restarted. A send whose answer did not arrive is
//! retried with its key (and the same batch) once the server is back, as a client that lost
//! the answer would; answered sends are retried too, a sample of them. At the end every key's
//! batch must be in the queue exactly once, and every retry of an answered key must answer the
//! first answer's ids: the effect and the stored answer committed together, so a kill between
//! them can neither lose the answer nor let the retry send again. A keyed publish commits its
//! copies with its answer the same way; a keyed job enqueue gives its job a unique key named
//! after the request, so that a retry after a kill between the enqueue and its stored answer
//! finds that job: every publish is in its subscriber's queue once, every job enqueued once.
//!
//! `SLUICE_CRASH_IDEMPOTENCY_KILLS` sets the number of kills (default 6);
//! `SLUICE_CRASH_SEED` replays a run's timings and batch sizes; the seed is printed:
//!
//! ```text
//! SLUICE_CRASH_IDEMPOTENCY_KILLS=200 cargo test -p sluice --release --test crash_idempotency -- --nocapture
//! ```

mod torture;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_api::{
    CreateQueueRequest, CreateTopicRequest, EnqueueJobRequest, PublishMessage, PublishRequest, SendMessage,
    SendRequest, SubscribeRequest,
};
use sluice_client::JobQuery;
use torture::{Clients, Consume, Killer, Payloads, client, drain, kills, seed};

const QUEUE: &str = "keyed";
const PRODUCERS: usize = 4;
const TOPIC: &str = "keyed-topic";
/// The queue subscribed (raw) to `TOPIC`.
const PUBLISHED: &str = "published";
const JOB_QUEUE: &str = "keyed-jobs";

/// What the producers sent: each key's batch, and the ids of its answer if one arrived.
#[derive(Default)]
struct Ledger {
    /// The queue its consumer drains.
    queue: &'static str,
    batches: Mutex<HashMap<String, Vec<String>>>,
    answered: Mutex<HashMap<String, Vec<String>>>,
    unanswered: Mutex<Vec<String>>,
    received: Mutex<HashMap<String, u32>>,
}

impl Ledger {
    /// One keyed call while the server is killed and restarted: its batch, and its answer's ids
    /// or that the answer was lost.
    async fn call(&self, key: String, batch: Vec<String>, answer: impl Future<Output = Option<Vec<String>>>) {
        self.batches.lock().expect("ledger").insert(key.clone(), batch);
        match answer.await {
            Some(ids) => {
                self.answered.lock().expect("ledger").insert(key, ids);
            }
            None => {
                self.unanswered.lock().expect("ledger").push(key);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    /// Once the server stays up: every key whose answer was lost is retried with its batch (it
    /// replays or runs once), and a sample of answered keys again, which must answer the very
    /// same ids. Returns every key's batch and how many answers were lost.
    async fn retry<F, Fut>(&self, call: F) -> (HashMap<String, Vec<String>>, usize)
    where
        F: Fn(String, Vec<String>) -> Fut,
        Fut: Future<Output = Vec<String>>,
    {
        let batches = self.batches.lock().expect("ledger").clone();
        let unanswered = self.unanswered.lock().expect("ledger").clone();
        for key in &unanswered {
            let ids = call(key.clone(), batches[key].clone()).await;
            self.answered.lock().expect("ledger").insert(key.clone(), ids);
        }
        let answered = self.answered.lock().expect("ledger").clone();
        for (key, first) in answered.iter().step_by(7) {
            let again = call(key.clone(), batches[key].clone()).await;
            assert_eq!(&again, first, "{key}: a retry answers the first answer");
        }
        (batches, unanswered.len())
    }
}

impl Consume for Ledger {
    fn queue(&self) -> &str {
        self.queue
    }

    fn record(&self, body: String) {
        *self.received.lock().expect("ledger").entry(body).or_default() += 1;
    }
}

fn request(batch: &[String]) -> SendRequest {
    SendRequest {
        messages: batch.iter().map(|b| SendMessage { body: Some(b.clone()), ..Default::default() }).collect(),
    }
}

fn ids(answer: &sluice_api::SendResponse) -> Vec<String> {
    answer.results.iter().map(|r| r.id.clone().unwrap_or_else(|| panic!("an entry failed: {r:?}"))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_between_effect_and_answer_never_sends_twice() {
    let seed = seed();
    let kill_count = kills("SLUICE_CRASH_IDEMPOTENCY_KILLS", 6);
    println!("seed {seed}, {kill_count} kills (SLUICE_CRASH_SEED={seed} replays this run)");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut killer = Killer::new(seed);
    let mut server = killer.start(dir.path());
    client(&server.url)
        .create_queue(&CreateQueueRequest { name: QUEUE.into(), ..Default::default() })
        .await
        .expect("create the queue");

    let ledger = Arc::new(Ledger { queue: QUEUE, ..Ledger::default() });
    let mut clients = Clients::new(&server.url);
    for p in 0..PRODUCERS {
        let (ledger, url, stop) = (ledger.clone(), clients.url.clone(), clients.stop.clone());
        clients.spawn(async move {
            let mut payloads = Payloads::new('k', p, seed);
            while !stop.load(Ordering::Relaxed) {
                let batch = payloads.next_batch();
                let key = format!("key-{}", batch[0]);
                let answer = client(&url.get()).send_messages_with_key(QUEUE, &request(&batch), &key).await;
                ledger.call(key, batch, async { answer.ok().map(|a| ids(&a)) }).await;
            }
        });
    }
    for _ in 0..kill_count {
        server = killer.kill_and_restart(server, dir.path(), &clients.url).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    clients.stop().await;
    println!("{}", killer.summary());

    let c = client(&server.url);
    let (batches, unanswered) = ledger
        .retry(|key, batch| {
            let c = &c;
            async move { ids(&c.send_messages_with_key(QUEUE, &request(&batch), &key).await.expect("retry")) }
        })
        .await;

    drain(ledger.as_ref(), &server, 2, Instant::now() + Duration::from_secs(120)).await;
    let received = ledger.received.lock().expect("ledger").clone();
    check_once("sent", &batches, &received, unanswered, kill_count);
    server.kill();
}

/// Every payload of every key arrived exactly once.
fn check_once(
    what: &str,
    batches: &HashMap<String, Vec<String>>,
    received: &HashMap<String, u32>,
    unanswered: usize,
    kill_count: u32,
) {
    let mut missing = Vec::new();
    let mut doubled = Vec::new();
    for (key, batch) in batches {
        for body in batch {
            match received.get(body).copied().unwrap_or(0) {
                1 => {}
                0 => missing.push(format!("{key}: {body}")),
                n => doubled.push(format!("{key}: {body} ×{n}")),
            }
        }
    }
    println!(
        "{what}: {} keys, {unanswered} answers lost and retried, {} received",
        batches.len(),
        received.values().sum::<u32>()
    );
    assert!(missing.is_empty(), "{what} under a key and lost: {missing:?}");
    assert!(doubled.is_empty(), "{what} twice under one key: {doubled:?}");
    assert!(unanswered > 0 || kill_count == 0, "the kills cut nothing {what} short: the test proved nothing");
}

fn publication(batch: &[String]) -> PublishRequest {
    PublishRequest {
        messages: batch.iter().map(|b| PublishMessage { body: b.clone(), ..Default::default() }).collect(),
    }
}

fn published_ids(answer: &sluice_api::PublishResponse) -> Vec<String> {
    answer.results.iter().map(|r| r.id.clone().unwrap_or_else(|| panic!("an entry failed: {r:?}"))).collect()
}

/// One job per key, tagged with its payload's name (job lists carry tags, not payloads).
fn job(name: &str) -> EnqueueJobRequest {
    EnqueueJobRequest {
        queue: JOB_QUEUE.into(),
        job_type: "report".into(),
        payload: serde_json::json!({ "name": name }),
        tags: vec![name.to_string()],
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_between_a_publish_or_an_enqueue_and_its_answer_never_repeats_it() {
    let seed = seed();
    let kill_count = kills("SLUICE_CRASH_IDEMPOTENCY_KILLS", 6);
    println!("seed {seed}, {kill_count} kills (SLUICE_CRASH_SEED={seed} replays this run)");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut killer = Killer::new(seed);
    let mut server = killer.start(dir.path());
    let c = client(&server.url);
    c.create_queue(&CreateQueueRequest { name: PUBLISHED.into(), ..Default::default() }).await.expect("queue");
    c.create_topic(&CreateTopicRequest { name: TOPIC.into(), ..Default::default() }).await.expect("topic");
    let subscription = SubscribeRequest { queue: Some(PUBLISHED.into()), raw: Some(true), ..Default::default() };
    c.subscribe(TOPIC, &subscription).await.expect("subscribe");

    let publishes = Arc::new(Ledger { queue: PUBLISHED, ..Ledger::default() });
    let jobs = Arc::new(Ledger { queue: JOB_QUEUE, ..Ledger::default() });
    let mut clients = Clients::new(&server.url);
    for p in 0..PRODUCERS / 2 {
        let (ledger, url, stop) = (publishes.clone(), clients.url.clone(), clients.stop.clone());
        clients.spawn(async move {
            let mut payloads = Payloads::new('p', p, seed);
            while !stop.load(Ordering::Relaxed) {
                let batch = payloads.next_batch();
                let key = format!("key-{}", batch[0]);
                let answer = client(&url.get()).publish_with_key(TOPIC, &publication(&batch), &key).await;
                ledger.call(key, batch, async { answer.ok().map(|a| published_ids(&a)) }).await;
            }
        });
        let (ledger, url, stop) = (jobs.clone(), clients.url.clone(), clients.stop.clone());
        clients.spawn(async move {
            let mut payloads = Payloads::new('j', p, seed);
            while !stop.load(Ordering::Relaxed) {
                for name in payloads.next_batch() {
                    let key = format!("key-{name}");
                    let answer = client(&url.get()).enqueue_job_with_key(&job(&name), &key).await;
                    ledger.call(key, vec![name], async { answer.ok().map(|a| vec![a.job.id]) }).await;
                }
            }
        });
    }
    for _ in 0..kill_count {
        server = killer.kill_and_restart(server, dir.path(), &clients.url).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    clients.stop().await;
    println!("{}", killer.summary());

    let c = client(&server.url);
    let (batches, unanswered) = publishes
        .retry(|key, batch| {
            let c = &c;
            async move { published_ids(&c.publish_with_key(TOPIC, &publication(&batch), &key).await.expect("retry")) }
        })
        .await;
    drain(publishes.as_ref(), &server, 2, Instant::now() + Duration::from_secs(120)).await;
    let received = publishes.received.lock().expect("ledger").clone();
    check_once("published", &batches, &received, unanswered, kill_count);

    let (job_batches, job_unanswered) = jobs
        .retry(|key, batch| {
            let c = &c;
            async move { vec![c.enqueue_job_with_key(&job(&batch[0]), &key).await.expect("retry").job.id] }
        })
        .await;
    let mut query = JobQuery { queue: Some(JOB_QUEUE.into()), limit: Some(1000), ..Default::default() };
    loop {
        let page = c.list_jobs(&query).await.expect("list jobs");
        for j in page.jobs {
            for tag in j.tags {
                jobs.record(tag);
            }
        }
        match page.next_token {
            Some(token) => query.next_token = Some(token),
            None => break,
        }
    }
    let enqueued = jobs.received.lock().expect("ledger").clone();
    check_once("enqueued", &job_batches, &enqueued, job_unanswered, kill_count);
    server.kill();
}
