//! Crash accounting: concurrent clients against the real `sluice serve`, the server killed with
//! SIGKILL at random moments, restarted on the same data directory, and finally drained. Every
//! send the server acknowledged must be received (lost = 0); nothing may be received that was
//! never sent or that arrives with a damaged body (unexpected = 0, damaged = 0). Duplicates are
//! allowed by at-least-once delivery (an ack lost in a crash) and only counted.
//!
//! - `sigkill_under_load_loses_nothing_acknowledged`: a standard queue, producers and
//!   consumers.
//! - `sigkill_keeps_fifo_order_per_group`: a FIFO queue; each producer owns a group and
//!   resends with the same dedup id until acknowledged; first deliveries come in send order.
//! - `sigkill_during_redrive_keeps_every_message_in_one_place`: messages cycle between a queue
//!   and its dead-letter queue (a redrive at a high rate one way, nacks past the receive limit
//!   the other); at the end every message is in exactly one of the two, once.
//!
//! After a third of the kills (at random), the restart is itself killed a random few
//! milliseconds after spawn, before or while it replays the data directory, and then started
//! again: recovery must survive being interrupted.
//!
//! `SLUICE_CRASH_KILLS` sets the number of kills of the standard-queue test (default 50; the
//! FIFO test does a quarter, the redrive test a third; soak runs use 1000), and
//! `SLUICE_CRASH_SEED` replays a run's kill timings; the seed is printed on every run:
//!
//! ```text
//! SLUICE_CRASH_KILLS=1000 cargo test -p sluice --release --test crash -- --nocapture
//! ```

mod torture;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_api::{
    CreateQueueRequest, DeadLetter, NackEntry, NackRequest, ReceiveRequest, RedriveRequest, SendMessage, SendRequest,
};
use torture::{Clients, Consume, Killer, Payloads, ServerUrl, body_for, client, drain, payload_of};

const QUEUE: &str = "crash";
const PRODUCERS: usize = 4;
const CONSUMERS: usize = 2;
const KILLS_DEFAULT: u32 = 50;

fn kills() -> u32 {
    torture::kills("SLUICE_CRASH_KILLS", KILLS_DEFAULT)
}
/// What the clients observed, shared by every task.
#[derive(Default)]
struct Ledger {
    /// Payloads whose send returned an id: the server promised to keep them.
    acked_sends: Mutex<HashSet<String>>,
    /// Payloads whose send failed in transport: they may or may not be stored.
    uncertain_sends: Mutex<HashSet<String>>,
    /// How often each payload was received.
    received: Mutex<HashMap<String, u32>>,
    /// Received bodies that failed their integrity check.
    damaged: Mutex<Vec<String>>,
}

async fn producer(mut payloads: Payloads, url: Arc<ServerUrl>, ledger: Arc<Ledger>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let payloads = payloads.next_batch();
        let request = SendRequest {
            messages: payloads.iter().map(|p| SendMessage { body: Some(body_for(p)), ..Default::default() }).collect(),
        };
        match client(&url.get()).send_messages(QUEUE, &request).await {
            Ok(response) => {
                let mut acked = ledger.acked_sends.lock().expect("ledger");
                for (payload, result) in payloads.into_iter().zip(response.results) {
                    assert!(result.error.is_none(), "a valid send was refused: {:?}", result.error);
                    assert!(result.id.is_some());
                    acked.insert(payload);
                }
            }
            Err(_) => {
                ledger.uncertain_sends.lock().expect("ledger").extend(payloads);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

impl Consume for Ledger {
    fn queue(&self) -> &str {
        QUEUE
    }

    fn record(&self, body: String) {
        match payload_of(&body) {
            Some(p) => *self.received.lock().expect("ledger").entry(p).or_default() += 1,
            None => self.damaged.lock().expect("ledger").push(body),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_load_loses_nothing_acknowledged() {
    let kills = kills();
    let seed = torture::seed();
    println!("crash test: {kills} kills, seed {seed} (replay with SLUICE_CRASH_SEED={seed})");
    let mut killer = Killer::new(seed);
    let dir = tempfile::tempdir().expect("temp dir");
    let started = Instant::now();

    let mut server = killer.start(dir.path());
    server
        .client()
        .create_queue(&CreateQueueRequest { name: QUEUE.into(), ..Default::default() })
        .await
        .expect("create the queue");

    let ledger = Arc::new(Ledger::default());
    let mut clients = Clients::new(&server.url);
    for i in 0..PRODUCERS {
        let payloads = Payloads::new('p', i, seed);
        clients.spawn(producer(payloads, clients.url.clone(), ledger.clone(), clients.stop.clone()));
    }
    for _ in 0..CONSUMERS {
        clients.spawn_consumer(ledger.clone());
    }
    for _ in 0..kills {
        server = killer.kill_and_restart(server, dir.path(), &clients.url).await;
    }
    clients.stop().await;
    drain(ledger.as_ref(), &server, 3, Instant::now() + Duration::from_secs(120)).await;

    let acked = ledger.acked_sends.lock().expect("ledger");
    let uncertain = ledger.uncertain_sends.lock().expect("ledger");
    let received = ledger.received.lock().expect("ledger");
    let damaged = ledger.damaged.lock().expect("ledger");
    let lost: Vec<&String> = acked.iter().filter(|p| !received.contains_key(*p)).collect();
    let unexpected: Vec<&String> = received.keys().filter(|p| !acked.contains(*p) && !uncertain.contains(*p)).collect();
    let duplicated = received.values().filter(|&&n| n > 1).count();
    println!(
        "crash test: {} in {:.1?}; acknowledged sends {}, uncertain sends {}, received {}, lost {}, unexpected {}, damaged {}, duplicated {}",
        killer.summary(),
        started.elapsed(),
        acked.len(),
        uncertain.len(),
        received.len(),
        lost.len(),
        unexpected.len(),
        damaged.len(),
        duplicated
    );
    assert!(acked.len() > 100, "too little load to prove anything ({} acknowledged sends)", acked.len());
    assert!(killer.startup_kills > 0 || kills < 10, "no restart was killed during start-up (seed {seed})");
    assert!(lost.is_empty(), "lost acknowledged sends (seed {seed}): {:?}", lost.iter().take(20).collect::<Vec<_>>());
    assert!(unexpected.is_empty(), "received what was never sent (seed {seed}): {unexpected:?}");
    assert!(damaged.is_empty(), "received damaged bodies (seed {seed}): {damaged:?}");
}

const FIFO_QUEUE: &str = "crash.fifo";
const GROUPS: usize = 3;

/// What the FIFO run observed: per group, the numbers acknowledged at send and the numbers in
/// the order of their first delivery.
#[derive(Default)]
struct FifoLedger {
    acked: Mutex<HashMap<usize, u64>>,
    first_deliveries: Mutex<HashMap<usize, Vec<u64>>>,
    seen: Mutex<HashSet<(usize, u64)>>,
    redeliveries: AtomicU64,
}

async fn fifo_producer(group: usize, url: Arc<ServerUrl>, ledger: Arc<FifoLedger>, stop: Arc<AtomicBool>) {
    let mut n = 1u64;
    while !stop.load(Ordering::Relaxed) {
        let message = SendMessage {
            body: Some(format!("{group}:{n}")),
            group_id: Some(format!("g{group}")),
            dedup_id: Some(format!("{group}-{n}")),
            ..Default::default()
        };
        match client(&url.get()).send_messages(FIFO_QUEUE, &SendRequest { messages: vec![message] }).await {
            Ok(response) => {
                assert!(response.results[0].error.is_none(), "a valid send was refused: {:?}", response.results[0]);
                ledger.acked.lock().expect("ledger").insert(group, n);
                n += 1;
            }
            // Unknown outcome: resend the same message; its dedup id makes a second copy a no-op.
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

impl Consume for FifoLedger {
    fn queue(&self) -> &str {
        FIFO_QUEUE
    }

    fn record(&self, body: String) {
        let (group, n) = body.split_once(':').expect("group:number body");
        let (group, n): (usize, u64) = (group.parse().expect("group"), n.parse().expect("number"));
        if self.seen.lock().expect("ledger").insert((group, n)) {
            self.first_deliveries.lock().expect("ledger").entry(group).or_default().push(n);
        } else {
            self.redeliveries.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_keeps_fifo_order_per_group() {
    let kills = kills().div_ceil(4);
    let seed = torture::seed();
    println!("fifo crash test: {kills} kills, seed {seed} (replay with SLUICE_CRASH_SEED={seed})");
    let mut killer = Killer::new(seed);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = killer.start(dir.path());
    let create = CreateQueueRequest { name: FIFO_QUEUE.into(), fifo: Some(true), ..Default::default() };
    server.client().create_queue(&create).await.expect("create the FIFO queue");

    let ledger = Arc::new(FifoLedger::default());
    let mut clients = Clients::new(&server.url);
    for g in 0..GROUPS {
        clients.spawn(fifo_producer(g, clients.url.clone(), ledger.clone(), clients.stop.clone()));
    }
    clients.spawn_consumer(ledger.clone());
    for _ in 0..kills {
        server = killer.kill_and_restart(server, dir.path(), &clients.url).await;
    }
    clients.stop().await;
    drain(ledger.as_ref(), &server, 3, Instant::now() + Duration::from_secs(120)).await;
    let acked = ledger.acked.lock().expect("ledger");
    let firsts = ledger.first_deliveries.lock().expect("ledger");
    let mut total = 0;
    for g in 0..GROUPS {
        let last = acked.get(&g).copied().unwrap_or(0);
        let delivered = firsts.get(&g).cloned().unwrap_or_default();
        total += last;
        // Every acknowledged number, in order, each first delivered once; a trailing number
        // whose send was in doubt at the end may also have been stored.
        let expected: Vec<u64> = (1..=last).collect();
        assert!(
            delivered.len() as u64 <= last + 1 && delivered.get(..last as usize) == Some(&expected[..]),
            "group {g} (seed {seed}): first deliveries {:?} are not 1..={last} in order",
            &delivered[..delivered.len().min(50)]
        );
    }
    println!(
        "fifo crash test: {}; {GROUPS} groups, acknowledged sends {total}, lost 0, out of order 0, redeliveries {}",
        killer.summary(),
        ledger.redeliveries.load(Ordering::Relaxed)
    );
    assert!(total > 30, "too little load to prove anything ({total} acknowledged sends)");
}

const SOURCE: &str = "redrive-src";
const DLQ: &str = "redrive-dlq";
const REDRIVE_MESSAGES: usize = 1_000;
/// Fast enough that every step moves hundreds of messages in one batch, slow enough that a
/// redrive takes several steps.
const REDRIVE_RATE: u32 = 3_000;
/// The last redrive moves 100 messages a step, so the last kill finds it half done.
const FINAL_REDRIVE_RATE: u32 = 1_000;
const CYCLE_VISIBILITY_MS: u64 = 500;

/// Receives from the source and nacks: with a receive limit of 1, each nack moves the message
/// to the dead-letter queue, from which the redrive moves it back.
async fn dead_letterer(url: Arc<ServerUrl>, stop: Arc<AtomicBool>, nacked: Arc<AtomicU64>) {
    while !stop.load(Ordering::Relaxed) {
        let c = client(&url.get());
        let request =
            ReceiveRequest { max: Some(50), wait_ms: Some(100), visibility_timeout_ms: Some(CYCLE_VISIBILITY_MS) };
        let Ok(list) = c.receive_messages(SOURCE, &request).await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let entries: Vec<NackEntry> = list
            .messages
            .into_iter()
            .filter_map(|m| m.receipt)
            .map(|receipt| NackEntry { receipt, delay_ms: None, error: Some("crash test".into()) })
            .collect();
        let count = entries.len() as u64;
        if count > 0 && c.nack(SOURCE, &NackRequest { entries }).await.is_ok() {
            nacked.fetch_add(count, Ordering::Relaxed);
        }
    }
}

/// Starts a redrive of the dead-letter queue back to its source; a restart ends the previous one.
async fn redrive(url: &str, max_per_second: u32) -> bool {
    let request = RedriveRequest { to: None, max_per_second: Some(max_per_second) };
    client(url).start_redrive(DLQ, &request).await.is_ok()
}

/// Receives every visible message of `queue` (with a long visibility timeout, no ack) and
/// counts each payload; damaged bodies are returned as they are.
async fn census(url: &str, queue: &str, counts: &mut HashMap<String, u32>, damaged: &mut Vec<String>) {
    let c = client(url);
    loop {
        let request = ReceiveRequest { max: Some(100), wait_ms: Some(0), visibility_timeout_ms: Some(600_000) };
        let messages = c.receive_messages(queue, &request).await.expect("census receive").messages;
        if messages.is_empty() {
            return;
        }
        for m in messages {
            let body = m.body.unwrap_or_default();
            match payload_of(&body) {
                Some(p) => *counts.entry(p).or_default() += 1,
                None => damaged.push(body),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_redrive_keeps_every_message_in_one_place() {
    let kills = kills().div_ceil(3);
    let seed = torture::seed();
    println!("redrive crash test: {kills} kills, seed {seed} (replay with SLUICE_CRASH_SEED={seed})");
    let mut killer = Killer::new(seed);
    let dir = tempfile::tempdir().expect("temp dir");
    let started = Instant::now();
    let mut server = killer.start(dir.path());
    let c = server.client();
    c.create_queue(&CreateQueueRequest { name: DLQ.into(), ..Default::default() }).await.expect("create the DLQ");
    let dead_letter = DeadLetter { queue: DLQ.into(), max_receive_count: 1 };
    let create = CreateQueueRequest { name: SOURCE.into(), dead_letter: Some(dead_letter), ..Default::default() };
    c.create_queue(&create).await.expect("create the source queue");
    let payloads: Vec<String> = (0..REDRIVE_MESSAGES).map(|i| format!("r{i}")).collect();
    for chunk in payloads.chunks(100) {
        let messages = chunk.iter().map(|p| SendMessage { body: Some(body_for(p)), ..Default::default() }).collect();
        let response = c.send_messages(SOURCE, &SendRequest { messages }).await.expect("send (no crash yet)");
        assert!(response.results.iter().all(|r| r.id.is_some()), "{response:?}");
    }

    let mut clients = Clients::new(&server.url);
    let nacked = Arc::new(AtomicU64::new(0));
    clients.spawn(dead_letterer(clients.url.clone(), clients.stop.clone(), nacked.clone()));
    // Let the first messages reach the dead-letter queue before the first redrive.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut redrives = u32::from(redrive(&server.url, REDRIVE_RATE).await);
    for _ in 1..kills {
        server = killer.kill_and_restart(server, dir.path(), &clients.url).await;
        // Redrive tasks live in memory: start one again after every restart.
        redrives += u32::from(redrive(&server.url, REDRIVE_RATE).await);
    }
    // The last kill lands in the middle of a redrive with nothing moving the other way, so
    // that the census below finds the messages split between the two queues.
    clients.stop().await;
    redrives += u32::from(redrive(&server.url, FINAL_REDRIVE_RATE).await);
    server = killer.kill_and_restart(server, dir.path(), &clients.url).await;
    // Wait for the last holds to end: an expired hold on the source dead-letters the message.
    let c = server.client();
    let settle_started = Instant::now();
    loop {
        let (src, dlq) = (c.get_queue(SOURCE).await.expect("source"), c.get_queue(DLQ).await.expect("dlq"));
        if src.counts.in_flight + src.counts.delayed + dlq.counts.in_flight + dlq.counts.delayed == 0 {
            break;
        }
        assert!(settle_started.elapsed() < Duration::from_secs(30), "holds did not end: {src:?} {dlq:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let (mut in_source, mut in_dlq, mut damaged) = (HashMap::new(), HashMap::new(), Vec::new());
    census(&server.url, SOURCE, &mut in_source, &mut damaged).await;
    census(&server.url, DLQ, &mut in_dlq, &mut damaged).await;
    let expected: HashSet<&String> = payloads.iter().collect();
    let lost: Vec<&&String> =
        expected.iter().filter(|p| !in_source.contains_key(**p) && !in_dlq.contains_key(**p)).collect();
    let in_both: Vec<&String> = in_source.keys().filter(|p| in_dlq.contains_key(*p)).collect();
    let duplicated: Vec<(&String, &u32)> = in_source.iter().chain(in_dlq.iter()).filter(|(_, n)| **n > 1).collect();
    let unexpected: Vec<&String> = in_source.keys().chain(in_dlq.keys()).filter(|p| !expected.contains(p)).collect();
    println!(
        "redrive crash test: {} in {:.1?}; {} redrives started, {} nacks into the DLQ; messages {}, in source {}, in DLQ {}, lost {}, in both {}, duplicated {}, unexpected {}, damaged {}",
        killer.summary(),
        started.elapsed(),
        redrives,
        nacked.load(Ordering::Relaxed),
        payloads.len(),
        in_source.len(),
        in_dlq.len(),
        lost.len(),
        in_both.len(),
        duplicated.len(),
        unexpected.len(),
        damaged.len()
    );
    assert!(
        redrives > 1 && nacked.load(Ordering::Relaxed) > REDRIVE_MESSAGES as u64,
        "too little movement to prove anything"
    );
    assert!(lost.is_empty(), "lost (seed {seed}): {:?}", lost.iter().take(20).collect::<Vec<_>>());
    assert!(in_both.is_empty(), "in both queues (seed {seed}): {in_both:?}");
    assert!(duplicated.is_empty(), "held twice (seed {seed}): {duplicated:?}");
    assert!(unexpected.is_empty(), "never sent (seed {seed}): {unexpected:?}");
    assert!(damaged.is_empty(), "damaged bodies (seed {seed}): {damaged:?}");
}
