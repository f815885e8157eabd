//! Crash accounting for depth limits: producers far ahead of one consumer into a queue of 50
//! messages at most with `overflow: drop_head`, the real `sluice serve` killed with SIGKILL at
//! random moments and restarted on the same data directory, then the queue and its dead-letter
//! queue drained. Every send the server acknowledged must be received from one of the two
//! (lost = 0); nothing arrives that was never sent (unexpected = 0); the queue never holds
//! more than its limit (checked at every answer's depth, and after each restart); every
//! refusal was an answered `queue_full` (the only refusal `drop_head` makes, when everything
//! is in flight).
//!
//! `SLUICE_CRASH_BACKPRESSURE_KILLS` sets the number of kills (default 10) and
//! `SLUICE_CRASH_SEED` replays a run's kill timings; the seed is printed on every run:
//!
//! ```text
//! SLUICE_CRASH_BACKPRESSURE_KILLS=300 cargo test -p sluice --release --test crash_backpressure -- --nocapture
//! ```

mod torture;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_api::{CreateQueueRequest, DeadLetter, Overflow, SendMessage, SendRequest};
use torture::{Clients, Consume, Killer, Payloads, ServerUrl, body_for, client, drain, payload_of};

const QUEUE: &str = "bounded";
const DLQ: &str = "bounded-dlq";
const LIMIT: u64 = 50;
const PRODUCERS: usize = 4;

#[derive(Default)]
struct Ledger {
    acked: Mutex<HashSet<String>>,
    uncertain: Mutex<HashSet<String>>,
    received: Mutex<HashMap<String, u32>>,
    damaged: Mutex<Vec<String>>,
    refused: AtomicU64,
    deepest: AtomicU64,
}

/// One queue's consumer over the shared ledger.
struct Reader {
    queue: &'static str,
    ledger: Arc<Ledger>,
}

impl Consume for Reader {
    fn queue(&self) -> &str {
        self.queue
    }

    fn record(&self, body: String) {
        match payload_of(&body) {
            Some(p) => *self.ledger.received.lock().expect("ledger").entry(p).or_default() += 1,
            None => self.ledger.damaged.lock().expect("ledger").push(body),
        }
    }
}

async fn producer(mut payloads: Payloads, url: Arc<ServerUrl>, ledger: Arc<Ledger>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let payloads = payloads.next_batch();
        let request = SendRequest {
            messages: payloads.iter().map(|p| SendMessage { body: Some(body_for(p)), ..Default::default() }).collect(),
        };
        match client(&url.get()).send_messages(QUEUE, &request).await {
            Ok(response) => {
                if let Some(depth) = response.depth {
                    ledger.deepest.fetch_max(depth.messages, Ordering::Relaxed);
                }
                let mut acked = ledger.acked.lock().expect("ledger");
                for (payload, result) in payloads.into_iter().zip(response.results) {
                    match (result.id, result.error) {
                        (Some(_), None) => {
                            acked.insert(payload);
                        }
                        (None, Some(e)) => {
                            assert_eq!(
                                e.code, "queue_full",
                                "drop_head refuses only a queue whose messages are all held"
                            );
                            ledger.refused.fetch_add(1, Ordering::Relaxed);
                        }
                        other => panic!("an entry with neither an id nor an error: {other:?}"),
                    }
                }
            }
            Err(e) if e.to_string().contains("queue_full") => {
                ledger.refused.fetch_add(payloads.len() as u64, Ordering::Relaxed);
            }
            Err(_) => {
                ledger.uncertain.lock().expect("ledger").extend(payloads);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_with_drop_head_loses_nothing_acknowledged_and_keeps_the_limit() {
    let kills = torture::kills("SLUICE_CRASH_BACKPRESSURE_KILLS", 10);
    let seed = torture::seed();
    println!("backpressure crash test: {kills} kills, seed {seed} (replay with SLUICE_CRASH_SEED={seed})");
    let mut killer = Killer::new(seed);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = killer.start(dir.path());
    let c = server.client();
    c.create_queue(&CreateQueueRequest { name: DLQ.into(), ..Default::default() }).await.expect("the DLQ");
    let bounded = CreateQueueRequest {
        name: QUEUE.into(),
        max_depth_messages: Some(LIMIT),
        overflow: Some(Overflow::DropHead),
        dead_letter: Some(DeadLetter { queue: DLQ.into(), max_receive_count: 1_000 }),
        ..Default::default()
    };
    c.create_queue(&bounded).await.expect("the bounded queue");

    let ledger = Arc::new(Ledger::default());
    let mut clients = Clients::new(&server.url);
    for i in 0..PRODUCERS {
        clients.spawn(producer(Payloads::new('b', i, seed), clients.url.clone(), ledger.clone(), clients.stop.clone()));
    }
    clients.spawn_consumer(Arc::new(Reader { queue: QUEUE, ledger: ledger.clone() }));
    for _ in 0..kills {
        server = killer.kill_and_restart(server, dir.path(), &clients.url).await;
        let depth = server.client().get_queue(QUEUE).await.expect("the queue after a restart");
        let held = depth.counts.visible + depth.counts.in_flight + depth.counts.delayed;
        assert!(held <= LIMIT, "{held} messages in a queue of {LIMIT} after a restart (seed {seed})");
    }
    clients.stop().await;
    let deadline = Instant::now() + Duration::from_secs(120);
    drain(&Reader { queue: QUEUE, ledger: ledger.clone() }, &server, 3, deadline).await;
    drain(&Reader { queue: DLQ, ledger: ledger.clone() }, &server, 3, deadline).await;

    let refusals = server.client().get_queue(QUEUE).await.expect("the queue").counts.refusals;
    let acked = ledger.acked.lock().expect("ledger");
    let uncertain = ledger.uncertain.lock().expect("ledger");
    let received = ledger.received.lock().expect("ledger");
    let lost: Vec<&String> = acked.iter().filter(|p| !received.contains_key(*p)).collect();
    let unexpected: Vec<&String> = received.keys().filter(|p| !acked.contains(*p) && !uncertain.contains(*p)).collect();
    println!(
        "backpressure crash test: {}; acknowledged {}, uncertain {}, received {}, refused {}, dropped to the DLQ (since the last start) {}, deepest {}",
        killer.summary(),
        acked.len(),
        uncertain.len(),
        received.len(),
        ledger.refused.load(Ordering::Relaxed),
        refusals.drop_head,
        ledger.deepest.load(Ordering::Relaxed),
    );
    assert!(acked.len() as u64 > 2 * LIMIT, "too little load to overflow the queue ({} acknowledged)", acked.len());
    assert!(ledger.deepest.load(Ordering::Relaxed) <= LIMIT, "an answer reported a depth past the limit");
    assert!(lost.is_empty(), "lost acknowledged sends (seed {seed}): {:?}", lost.iter().take(20).collect::<Vec<_>>());
    assert!(unexpected.is_empty(), "received what was never sent (seed {seed}): {unexpected:?}");
    assert!(ledger.damaged.lock().expect("ledger").is_empty(), "damaged bodies (seed {seed})");
}
