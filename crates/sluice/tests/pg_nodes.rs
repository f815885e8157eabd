//! Several `sluice serve --store postgres://…` processes on one database. Three nodes with
//! producers and consumers spread across them, one node killed with SIGKILL mid-run: every
//! acknowledged send must be received, and no message may be held by two consumers with
//! overlapping visibility. Three nodes sharing job workers, one killed: every job ends once,
//! and no job runs again before its earlier attempt's lease ended. Three nodes running sagas, one
//! killed: every instance finishes `completed` or `compensated`, each effect once. Two nodes sharing topics:
//! each sees the other's subscriptions.
//!
//! Runs when `SLUICE_TEST_PG_URL` is set (CI sets it) and fails loudly if PostgreSQL is
//! unreachable; without it, it says it was skipped. Each run uses a database of its own,
//! created through `psql` and dropped at the end.

mod common;
mod job_ledger;

use std::collections::{HashMap, HashSet};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Server;
use sluice_api::{CreateQueueRequest, ReceiveRequest, SendMessage, SendRequest};

const VISIBILITY_MS: u64 = 2_000;
/// Clock and scheduling slack allowed when comparing two receives of the same message.
const OVERLAP_SLACK_MS: u64 = 150;

struct Database {
    admin_url: String,
    name: String,
}

impl Database {
    fn create(admin_url: &str) -> Database {
        Database::create_named(admin_url, &format!("sluice_nodes_{}", std::process::id()))
    }

    fn create_named(admin_url: &str, name: &str) -> Database {
        let name = name.to_string();
        psql(admin_url, &format!("DROP DATABASE IF EXISTS {name}"));
        psql(admin_url, &format!("CREATE DATABASE {name}"));
        Database { admin_url: admin_url.to_string(), name }
    }

    /// The URL of this database: the admin URL with its database name replaced.
    fn url(&self) -> String {
        let base = self.admin_url.rsplit_once('/').map(|(b, _)| b).unwrap_or(&self.admin_url);
        format!("{base}/{}", self.name)
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args([&self.admin_url, "-qc", &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name)])
            .output();
    }
}

fn psql(url: &str, sql: &str) {
    let out = Command::new("psql").args([url, "-v", "ON_ERROR_STOP=1", "-qc", sql]).output().expect("run psql");
    assert!(
        out.status.success(),
        "psql {sql:?} failed (is PostgreSQL at SLUICE_TEST_PG_URL up?): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[derive(Default)]
struct Ledger {
    acked: Mutex<HashSet<String>>,
    /// Every receive of each payload: when, and whether its ack succeeded.
    receives: Mutex<HashMap<String, Vec<(Instant, bool)>>>,
}

/// The node after `node` (of three) that is not dead: where a client goes when its node fails.
fn next_live(node: usize, dead: &Mutex<HashSet<usize>>) -> usize {
    let dead = dead.lock().expect("dead").clone();
    (0..3).map(|i| (node + 1 + i) % 3).find(|i| !dead.contains(i)).unwrap_or(node)
}

fn client(url: &str) -> sluice_client::Client {
    sluice_client::Client::builder(url).attempts(1).timeout(Duration::from_secs(10)).build().expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_one_killed_lose_nothing_and_never_double_hold() {
    let Ok(admin_url) = std::env::var("SLUICE_TEST_PG_URL") else {
        println!("skipped: SLUICE_TEST_PG_URL is not set");
        return;
    };
    let db = Database::create(&admin_url);
    let dir = tempfile::tempdir().expect("temp dir");
    let store = db.url();
    let mut nodes: Vec<Option<Server>> =
        (0..3).map(|_| Some(Server::start_with(dir.path(), &["--store", &store]))).collect();
    let urls: Vec<String> = nodes.iter().map(|n| n.as_ref().expect("node").url.clone()).collect();
    client(&urls[0])
        .create_queue(&CreateQueueRequest { name: "work".into(), ..Default::default() })
        .await
        .expect("create the queue");

    let ledger = Arc::new(Ledger::default());
    let stop = Arc::new(AtomicBool::new(false));
    let dead = Arc::new(Mutex::new(HashSet::<usize>::new()));
    let mut tasks = Vec::new();
    for p in 0..3usize {
        let (urls, ledger, stop, dead) = (urls.clone(), ledger.clone(), stop.clone(), dead.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            let mut node = p;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let payload = format!("p{p}-{n}");
                let request =
                    SendRequest { messages: vec![SendMessage { body: Some(payload.clone()), ..Default::default() }] };
                match client(&urls[node]).send_messages("work", &request).await {
                    Ok(r) if r.results[0].id.is_some() => {
                        ledger.acked.lock().expect("ledger").insert(payload);
                    }
                    _ => {
                        // The node may be dead: move to the next live one.
                        node = next_live(node, &dead);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        }));
    }
    for c in 0..3usize {
        let (urls, ledger, stop, dead) = (urls.clone(), ledger.clone(), stop.clone(), dead.clone());
        tasks.push(tokio::spawn(async move {
            let mut node = c;
            while !stop.load(Ordering::Relaxed) {
                if consume(&urls[node], &ledger, 200).await.is_err() {
                    node = next_live(node, &dead);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }));
    }

    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let victim = nodes[1].take().expect("node 1");
    common::signal(victim.pid(), "KILL");
    dead.lock().expect("dead").insert(1);
    drop(victim);
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("client task");
    }

    // Drain through the survivors; messages held by the killed node's consumers come back
    // after their visibility timeout.
    let mut empty_in_a_row = 0;
    let started = Instant::now();
    while empty_in_a_row < 3 {
        assert!(started.elapsed() < Duration::from_secs(60), "the drain did not finish");
        match consume(&urls[empty_in_a_row % 2 * 2], &ledger, VISIBILITY_MS + 500).await {
            Ok(0) => empty_in_a_row += 1,
            Ok(_) => empty_in_a_row = 0,
            Err(e) => panic!("a surviving node stopped answering: {e}"),
        }
    }

    let acked = ledger.acked.lock().expect("ledger");
    let receives = ledger.receives.lock().expect("ledger");
    let lost: Vec<&String> = acked.iter().filter(|p| !receives.contains_key(*p)).collect();
    let mut overlaps = Vec::new();
    for (payload, times) in receives.iter() {
        let mut times = times.clone();
        times.sort_by_key(|(t, _)| *t);
        for pair in times.windows(2) {
            let (first, first_acked) = pair[0];
            let gap = pair[1].0.duration_since(first);
            // A second delivery is allowed only after the first hold expired (its ack failed).
            if first_acked || gap < Duration::from_millis(VISIBILITY_MS - OVERLAP_SLACK_MS) {
                overlaps.push((payload.clone(), gap));
            }
        }
    }
    println!(
        "3 nodes, 1 SIGKILLed: acknowledged sends {}, received {}, lost {}, overlapping holds {}",
        acked.len(),
        receives.len(),
        lost.len(),
        overlaps.len()
    );
    assert!(acked.len() > 50, "too little load to prove anything ({})", acked.len());
    assert!(lost.is_empty(), "acknowledged sends never received: {:?}", lost.iter().take(10).collect::<Vec<_>>());
    assert!(overlaps.is_empty(), "messages held twice at once: {:?}", &overlaps[..overlaps.len().min(10)]);
}

async fn consume(url: &str, ledger: &Ledger, wait_ms: u64) -> Result<usize, sluice_client::ClientError> {
    let c = client(url);
    let request = ReceiveRequest { max: Some(10), wait_ms: Some(wait_ms), visibility_timeout_ms: Some(VISIBILITY_MS) };
    let messages = c.receive_messages("work", &request).await?.messages;
    let received_at = Instant::now();
    let receipts: Vec<String> = messages.iter().filter_map(|m| m.receipt.clone()).collect();
    let acked = if receipts.is_empty() {
        true
    } else {
        c.ack("work", receipts).await.map(|r| r.results.iter().all(|e| e.ok)).unwrap_or(false)
    };
    let mut receives = ledger.receives.lock().expect("ledger");
    for m in &messages {
        receives.entry(m.body.clone().unwrap_or_default()).or_default().push((received_at, acked));
    }
    Ok(messages.len())
}

/// Topics on two nodes: a subscription made through one node receives what is published through
/// the other once that node's subscription cache has refreshed (at most 1 s, see
/// `sluice_server`'s `topics::limits::SUBSCRIPTION_CACHE_MS`), and an unsubscribe likewise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_share_topics_and_subscriptions() {
    let Ok(admin_url) = std::env::var("SLUICE_TEST_PG_URL") else {
        println!("skipped: SLUICE_TEST_PG_URL is not set");
        return;
    };
    let db = Database::create_named(&admin_url, &format!("sluice_topics_{}", std::process::id()));
    let dir = tempfile::tempdir().expect("temp dir");
    let store = db.url();
    let a = Server::start_with(dir.path(), &["--store", &store]);
    let b = Server::start_with(dir.path(), &["--store", &store]);
    let (a, b) = (client(&a.url), client(&b.url));
    a.create_queue(&CreateQueueRequest { name: "inbox".into(), ..Default::default() }).await.expect("queue");
    a.create_topic(&sluice_api::CreateTopicRequest { name: "events".into(), ..Default::default() })
        .await
        .expect("topic");
    let publish = |client: sluice_client::Client, body: &'static str| async move {
        let request = sluice_api::PublishRequest {
            messages: vec![sluice_api::PublishMessage { body: body.into(), ..Default::default() }],
        };
        let result = client.publish("events", &request).await.expect("publish").results.remove(0);
        assert!(result.error.is_none(), "{result:?}");
        result.deliveries.expect("deliveries")
    };
    // Node b reads the topic (and caches it) before the subscription exists.
    assert_eq!(publish(b.clone(), "before").await, 0);
    let subscribe = sluice_api::SubscribeRequest { queue: Some("inbox".into()), raw: Some(true), ..Default::default() };
    let subscription = a.subscribe("events", &subscribe).await.expect("subscribe").subscription;
    assert_eq!(publish(a.clone(), "through a").await, 1, "the subscribing node sees it at once");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(publish(b.clone(), "through b").await, 1, "the other node sees it after its cache refreshed");
    let got = a.receive("inbox", 10, 1_000).await.expect("receive");
    let bodies: HashSet<String> = got.iter().filter_map(|m| m.body.clone()).collect();
    assert_eq!(bodies, HashSet::from(["through a".to_string(), "through b".to_string()]));
    // The topic and subscription are the database's, so node b lists them too.
    assert_eq!(b.list_all_subscriptions(Some("events")).await.expect("list").len(), 1);
    b.unsubscribe("events", &subscription.id).await.expect("unsubscribe");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(publish(a.clone(), "after").await, 0);
}

/// Jobs on three nodes: producers and workers spread across them (each moving to another node
/// when its own stops answering), one node killed with SIGKILL mid-run. Every job the nodes
/// acknowledged ends `succeeded` once; a job claimed through any node is never claimed through
/// another before its lease ended (the claims and the lapses are the database's, shared).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_share_job_workers_one_killed_every_job_ends_once() {
    let Ok(admin_url) = std::env::var("SLUICE_TEST_PG_URL") else {
        println!("skipped: SLUICE_TEST_PG_URL is not set");
        return;
    };
    let db = Database::create_named(&admin_url, &format!("sluice_jobs_{}", std::process::id()));
    let dir = tempfile::tempdir().expect("temp dir");
    let store = db.url();
    let mut nodes: Vec<Option<Server>> =
        (0..3).map(|_| Some(Server::start_with(dir.path(), &["--store", &store]))).collect();
    let urls: Vec<String> = nodes.iter().map(|n| n.as_ref().expect("node").url.clone()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let dead = Arc::new(Mutex::new(HashSet::<usize>::new()));
    let enqueued = Arc::new(Mutex::new(HashMap::<String, String>::new()));
    let attempts = Arc::new(job_ledger::Attempts::default());
    let mut tasks = Vec::new();
    for p in 0..3usize {
        let (urls, stop, dead, enqueued) = (urls.clone(), stop.clone(), dead.clone(), enqueued.clone());
        tasks.push(tokio::spawn(async move {
            let (mut node, mut n) = (p, 0u64);
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let payload = format!("p{p}-{n}");
                let request = sluice_api::EnqueueJobRequest {
                    queue: "work".into(),
                    job_type: "t".into(),
                    max_attempts: Some(1_000),
                    unique_key: Some(payload.clone()),
                    ..Default::default()
                };
                // Retried with the same unique key until a node acknowledges it.
                loop {
                    match client(&urls[node]).enqueue_job(&request).await {
                        Ok(e) => {
                            enqueued.lock().expect("ledger").insert(payload, e.job.id);
                            break;
                        }
                        Err(_) => {
                            node = next_live(node, &dead);
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
            }
        }));
    }
    for w in 0..6usize {
        let (urls, stop, dead, attempts) = (urls.clone(), stop.clone(), dead.clone(), attempts.clone());
        tasks.push(tokio::spawn(async move {
            let mut node = w % 3;
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let Ok(answer) = client(&urls[node]).claim_jobs(&job_ledger::claim_request("work", 2)).await else {
                    node = next_live(node, &dead);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                let url = urls[node].clone();
                let works = answer.jobs.into_iter().map(|c| {
                    n += 1;
                    // One in five outlasts its lease and lives on heartbeats.
                    let work_ms = if n.is_multiple_of(5) { 1_300 } else { n % 50 };
                    let (attempts, url) = (attempts.clone(), url.clone());
                    async move { attempts.work(|| url.clone(), c.job, c.lease, work_ms).await }
                });
                futures::future::join_all(works).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let victim = nodes[1].take().expect("node 1");
    common::signal(victim.pid(), "KILL");
    dead.lock().expect("dead").insert(1);
    drop(victim);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("client task");
    }

    // The survivors' workers finish the backlog, the killed node's leases included.
    let survivors = [urls[0].clone(), urls[2].clone()];
    let drainers: Vec<_> = survivors
        .iter()
        .map(|url| {
            let (url, attempts) = (url.clone(), attempts.clone());
            tokio::spawn(async move {
                loop {
                    if let Ok(answer) = client(&url).claim_jobs(&job_ledger::claim_request("work", 10)).await {
                        for c in answer.jobs {
                            attempts.work(|| url.clone(), c.job, c.lease, 0).await;
                        }
                    }
                }
            })
        })
        .collect();
    let enqueued = enqueued.lock().expect("ledger").clone();
    let started = Instant::now();
    let jobs = loop {
        let mut jobs = Vec::new();
        let mut query =
            sluice_client::JobQuery { queue: Some("work".into()), limit: Some(1_000), ..Default::default() };
        loop {
            let page = client(&urls[0]).list_jobs(&query).await.expect("list");
            jobs.extend(page.jobs);
            match page.next_token {
                Some(next) => query.next_token = Some(next),
                None => break,
            }
        }
        if jobs.len() >= enqueued.len() && jobs.iter().all(|j| j.status == "succeeded") {
            break jobs;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "the backlog did not finish");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for d in drainers {
        d.abort();
    }
    let ids: HashSet<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    let lost: Vec<&String> = enqueued.values().filter(|id| !ids.contains(id.as_str())).collect();
    let verdict = attempts.check();
    println!(
        "3 nodes sharing job workers, 1 SIGKILLed: jobs {}, attempts {}, runs after a lapse {}, lost {}, doubled {}, completed twice {}, early reruns {}",
        jobs.len(),
        verdict.attempts,
        verdict.reruns,
        lost.len(),
        jobs.len() - enqueued.len(),
        verdict.completed_twice.len(),
        verdict.early.len()
    );
    assert!(enqueued.len() > 50, "too little load to prove anything ({})", enqueued.len());
    assert!(lost.is_empty(), "acknowledged jobs lost: {lost:?}");
    assert_eq!(jobs.len(), enqueued.len(), "a payload became two jobs");
    assert!(verdict.completed_twice.is_empty(), "completed twice: {:?}", verdict.completed_twice);
    assert!(verdict.early.is_empty(), "claimed again before the lease ended: {:?}", verdict.early);
}

/// Idempotency keys on two nodes: a send through one node is answered from its stored answer
/// through the other (the same ids, nothing sent again), another body under the key is a
/// mismatch there, and clients racing one key through both nodes send once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_share_idempotency_keys() {
    let Ok(admin_url) = std::env::var("SLUICE_TEST_PG_URL") else {
        println!("skipped: SLUICE_TEST_PG_URL is not set");
        return;
    };
    let db = Database::create_named(&admin_url, &format!("sluice_idem_{}", std::process::id()));
    let dir = tempfile::tempdir().expect("temp dir");
    let store = db.url();
    let a = Server::start_with(dir.path(), &["--store", &store]);
    let b = Server::start_with(dir.path(), &["--store", &store]);
    let (a, b) = (client(&a.url), client(&b.url));
    a.create_queue(&CreateQueueRequest { name: "keyed".into(), ..Default::default() }).await.expect("queue");
    let batch =
        |body: &str| SendRequest { messages: vec![SendMessage { body: Some(body.into()), ..Default::default() }] };
    let ids = |r: sluice_api::SendResponse| r.results.into_iter().map(|r| r.id.expect("an id")).collect::<Vec<_>>();

    let first = ids(a.send_messages_with_key("keyed", &batch("one"), "k-1").await.expect("send through a"));
    let replayed = ids(b.send_messages_with_key("keyed", &batch("one"), "k-1").await.expect("replay through b"));
    assert_eq!(first, replayed, "the other node answers the stored answer");
    match b.send_messages_with_key("keyed", &batch("two"), "k-1").await {
        Err(sluice_client::ClientError::Api { status: 409, code, .. }) => assert_eq!(code, "idempotency_key_mismatch"),
        other => panic!("another body under the key: {other:?}"),
    }

    let racers: Vec<_> = (0..16)
        .map(|i| {
            let c = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move { c.send_messages_with_key("keyed", &batch("raced"), "k-race").await })
        })
        .collect();
    let mut answered = Vec::new();
    for racer in racers {
        match racer.await.expect("racer") {
            Ok(answer) => answered.push(ids(answer)),
            Err(sluice_client::ClientError::Api { status: 409, code, .. }) => {
                assert_eq!(code, "idempotency_key_in_use")
            }
            Err(other) => panic!("a racer failed: {other}"),
        }
    }
    assert!(!answered.is_empty());
    assert!(answered.iter().all(|ids| *ids == answered[0]), "every answer names the one send: {answered:?}");
    let got = a.receive("keyed", 10, 1_000).await.expect("receive");
    let mut bodies: Vec<String> = got.iter().filter_map(|m| m.body.clone()).collect();
    bodies.sort();
    assert_eq!(bodies, ["one", "raced"], "each key sent once across both nodes");
}

/// What the saga participants of the three-node test saw, by order.
#[derive(Default)]
struct SagaParticipants {
    /// Idempotency keys whose effect happened (each at most once).
    applied: Mutex<HashSet<String>>,
    /// Order → the steps whose effect happened, in order.
    effects: Mutex<HashMap<u64, Vec<String>>>,
    /// Actions that arrived after the order's compensation had begun.
    late_actions: Mutex<Vec<String>>,
}

/// One idempotent participant for every step: a charge of every fourth order is declined; each
/// call takes a little while, so that some are in flight when a node dies.
async fn saga_participant(
    axum::extract::State(p): axum::extract::State<Arc<SagaParticipants>>,
    axum::extract::Path(step): axum::extract::Path<String>,
    headers: axum::http::HeaderMap,
    body: String,
) -> (axum::http::StatusCode, String) {
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let body: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let order = body["order"].as_u64().unwrap_or(u64::MAX);
    tokio::time::sleep(Duration::from_millis(order.wrapping_mul(7) % 40)).await;
    if step == "charge" && order.is_multiple_of(4) {
        return (axum::http::StatusCode::PAYMENT_REQUIRED, "card declined".into());
    }
    let mut effects = p.effects.lock().expect("effects");
    let seen = effects.entry(order).or_default();
    let compensation = matches!(step.as_str(), "release" | "refund");
    if !compensation && seen.iter().any(|s| s == "release" || s == "refund") {
        p.late_actions.lock().expect("late").push(format!("{step} of order {order} after its compensation"));
    }
    if p.applied.lock().expect("applied").insert(key) {
        seen.push(step.clone());
    }
    (axum::http::StatusCode::OK, serde_json::json!({ "id": format!("{step}-{order}") }).to_string())
}

/// Three nodes run sagas over one database, orders started through all three; one node is
/// killed with SIGKILL mid-run. The instances it was running continue on the others (an attempt
/// cut short is tried again after its deadline, with the same key): every acknowledged order
/// has exactly one instance, which ends `completed` (charged) or `compensated` (declined, its
/// reservation released exactly once), and no action reaches a participant after its order's
/// compensation began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_run_sagas_one_killed_every_instance_finishes() {
    let Ok(admin_url) = std::env::var("SLUICE_TEST_PG_URL") else {
        println!("skipped: SLUICE_TEST_PG_URL is not set");
        return;
    };
    let db = Database::create_named(&admin_url, &format!("sluice_sagas_{}", std::process::id()));
    let dir = tempfile::tempdir().expect("temp dir");
    let store = db.url();
    let mut nodes: Vec<Option<Server>> =
        (0..3).map(|_| Some(Server::start_with(dir.path(), &["--store", &store]))).collect();
    let urls: Vec<String> = nodes.iter().map(|n| n.as_ref().expect("node").url.clone()).collect();

    let participants = Arc::new(SagaParticipants::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let participant_url = format!("http://{}", listener.local_addr().expect("address"));
    let app =
        axum::Router::new().route("/{step}", axum::routing::post(saga_participant)).with_state(participants.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let call = |path: &str| serde_json::json!({ "http": { "url": format!("{participant_url}/{path}"), "body": { "order": "{{input.order}}" } } });
    let retry = serde_json::json!({ "max_attempts": 50, "backoff": { "initial_ms": 50, "max_ms": 500 } });
    let definition: sluice_api::DefineSagaRequest = serde_json::from_value(serde_json::json!({ "steps": [
        { "name": "reserve", "action": call("reserve"), "compensation": call("release"), "retry": retry, "timeout_ms": 2000 },
        { "name": "charge", "action": call("charge"), "compensation": call("refund"), "retry": retry, "timeout_ms": 2000 },
        { "name": "ship", "action": call("ship"), "retry": retry, "timeout_ms": 2000 },
    ]}))
    .expect("a definition");
    client(&urls[0]).define_saga("order", &definition).await.expect("define");

    let stop = Arc::new(AtomicBool::new(false));
    let dead = Arc::new(Mutex::new(HashSet::<usize>::new()));
    let acknowledged = Arc::new(Mutex::new(HashMap::<u64, String>::new()));
    let mut producers = Vec::new();
    for p in 0..3u64 {
        let (urls, stop, dead, acknowledged) = (urls.clone(), stop.clone(), dead.clone(), acknowledged.clone());
        producers.push(tokio::spawn(async move {
            let (mut node, mut n) = (p as usize, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let order = n * 3 + p + 1;
                n += 1;
                let request = sluice_api::StartSagaRequest {
                    input: serde_json::json!({ "order": order }),
                    correlation_id: Some(format!("order-{order}")),
                };
                // Retried under its key, through a live node, until one acknowledges it.
                let deadline = Instant::now() + Duration::from_secs(60);
                loop {
                    match client(&urls[node]).start_saga_with_key("order", &request, &format!("order-{order}")).await {
                        Ok(instance) => {
                            acknowledged.lock().expect("ledger").insert(order, instance.id);
                            break;
                        }
                        Err(e) => {
                            assert!(Instant::now() < deadline, "order {order} could not be started: {e}");
                            node = next_live(node, &dead);
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let victim = nodes[1].take().expect("node 1");
    common::signal(victim.pid(), "KILL");
    dead.lock().expect("dead").insert(1);
    drop(victim);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    stop.store(true, Ordering::Relaxed);
    for p in producers {
        p.await.expect("producer");
    }

    // The survivors finish every instance, the dead node's included.
    let acknowledged = acknowledged.lock().expect("ledger").clone();
    let started = Instant::now();
    let instances = loop {
        let mut all = Vec::new();
        let mut query =
            sluice_client::SagaInstanceQuery { saga: Some("order".into()), limit: Some(1_000), ..Default::default() };
        loop {
            let page = client(&urls[2]).list_saga_instances(&query).await.expect("list");
            all.extend(page.instances);
            match page.next_token {
                Some(t) => query.next_token = Some(t),
                None => break,
            }
        }
        let open = all.iter().filter(|i| i.status == "running" || i.status == "compensating").count();
        if open == 0 {
            break all;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "{open} instances never finished");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut by_order: HashMap<u64, Vec<&sluice_api::SagaInstance>> = HashMap::new();
    for i in &instances {
        by_order.entry(i.input["order"].as_u64().expect("an order")).or_default().push(i);
    }
    let effects = participants.effects.lock().expect("effects").clone();
    let (mut completed, mut compensated) = (0, 0);
    for (order, id) in &acknowledged {
        let found = by_order.get(order).map(Vec::as_slice).unwrap_or_default();
        assert_eq!(found.len(), 1, "order {order} has {} instances", found.len());
        assert_eq!(&found[0].id, id, "order {order}: the acknowledged instance");
        let seen: Vec<&str> = effects.get(order).map(|e| e.iter().map(String::as_str).collect()).unwrap_or_default();
        if order.is_multiple_of(4) {
            assert_eq!(found[0].status, "compensated", "order {order}: {:?}", found[0]);
            // A declined charge took no effect, unless an attempt of it was cut short by the
            // kill (the orchestrator cannot know it was declined): then its refund runs first.
            let without_refund: Vec<&str> = seen.iter().copied().filter(|s| *s != "refund").collect();
            assert_eq!(without_refund, ["reserve", "release"], "order {order}: {seen:?}");
            compensated += 1;
        } else {
            assert_eq!(found[0].status, "completed", "order {order}: {:?}", found[0]);
            assert_eq!(seen, ["reserve", "charge", "ship"], "order {order}");
            completed += 1;
        }
    }
    assert!(by_order.values().all(|v| v.len() == 1), "an order started twice");
    let late = participants.late_actions.lock().expect("late").clone();
    assert!(late.is_empty(), "actions after compensation: {late:?}");
    println!(
        "3 nodes running sagas, 1 SIGKILLed: {} orders acknowledged ({completed} completed, {compensated} compensated), {} instances",
        acknowledged.len(),
        instances.len()
    );
    assert!(acknowledged.len() >= 30, "too little load to prove anything ({})", acknowledged.len());
    for node in nodes.into_iter().flatten() {
        node.terminate();
    }
}
