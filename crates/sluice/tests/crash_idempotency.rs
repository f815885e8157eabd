//! Idempotency keys across SIGKILL: producers send batches, each under a key of its own, to the
//! real `sluice serve` while it is killed and restarted. A send whose answer did not arrive is
//! retried with its key (and the same batch) once the server is back, as a client that lost
//! the answer would; answered sends are retried too, a sample of them. At the end every key's
//! batch must be in the queue exactly once, and every retry of an answered key must answer the
//! first answer's ids: the effect and the stored answer committed together, so a kill between
//! them can neither lose the answer nor let the retry send again.
//!
//! `SLUICE_CRASH_IDEMPOTENCY_KILLS` sets the number of kills (default 6);
//! `SLUICE_CRASH_SEED` replays a run's timings and batch sizes; the seed is printed:
//!
//! ```text
//! SLUICE_CRASH_IDEMPOTENCY_KILLS=200 cargo test -p sluice --release --test crash_idempotency -- --nocapture
//! ```

mod torture;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_api::{CreateQueueRequest, SendMessage, SendRequest};
use torture::{Clients, Consume, Killer, Payloads, client, drain, kills, seed};

const QUEUE: &str = "keyed";
const PRODUCERS: usize = 4;

/// What the producers sent: each key's batch, and the ids of its answer if one arrived.
#[derive(Default)]
struct Ledger {
    batches: Mutex<HashMap<String, Vec<String>>>,
    answered: Mutex<HashMap<String, Vec<String>>>,
    unanswered: Mutex<Vec<String>>,
    received: Mutex<HashMap<String, u32>>,
}

impl Consume for Ledger {
    fn queue(&self) -> &str {
        QUEUE
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

    let ledger = Arc::new(Ledger::default());
    let mut clients = Clients::new(&server.url);
    for p in 0..PRODUCERS {
        let (ledger, url, stop) = (ledger.clone(), clients.url.clone(), clients.stop.clone());
        clients.spawn(async move {
            let mut payloads = Payloads::new('k', p, seed);
            while !stop.load(Ordering::Relaxed) {
                let batch = payloads.next_batch();
                let key = format!("key-{}", batch[0]);
                ledger.batches.lock().expect("ledger").insert(key.clone(), batch.clone());
                match client(&url.get()).send_messages_with_key(QUEUE, &request(&batch), &key).await {
                    Ok(answer) => {
                        ledger.answered.lock().expect("ledger").insert(key, ids(&answer));
                    }
                    Err(_) => {
                        ledger.unanswered.lock().expect("ledger").push(key);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
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

    // Every key whose answer was lost, retried with its batch: it replays or sends once.
    let c = client(&server.url);
    let batches = ledger.batches.lock().expect("ledger").clone();
    let unanswered = ledger.unanswered.lock().expect("ledger").clone();
    for key in &unanswered {
        let answer =
            c.send_messages_with_key(QUEUE, &request(&batches[key]), key).await.expect("the retry is answered");
        ledger.answered.lock().expect("ledger").insert(key.clone(), ids(&answer));
    }
    // Answered keys again: the very same ids.
    let answered = ledger.answered.lock().expect("ledger").clone();
    for (key, first) in answered.iter().step_by(7) {
        let again = c.send_messages_with_key(QUEUE, &request(&batches[key]), key).await.expect("replay");
        assert_eq!(&ids(&again), first, "{key}: a retry answers the first answer");
    }

    drain(ledger.as_ref(), &server, 2, Instant::now() + Duration::from_secs(120)).await;
    let received = ledger.received.lock().expect("ledger").clone();
    let mut missing = Vec::new();
    let mut doubled = Vec::new();
    for (key, batch) in &batches {
        for body in batch {
            match received.get(body).copied().unwrap_or(0) {
                1 => {}
                0 => missing.push(format!("{key}: {body}")),
                n => doubled.push(format!("{key}: {body} ×{n}")),
            }
        }
    }
    println!(
        "{} keys, {} answers lost and retried, {} messages received",
        batches.len(),
        unanswered.len(),
        received.values().sum::<u32>()
    );
    assert!(missing.is_empty(), "sent under a key and lost: {missing:?}");
    assert!(doubled.is_empty(), "sent twice under one key: {doubled:?}");
    assert!(!unanswered.is_empty() || kill_count == 0, "the kills cut no send short: the test proved nothing");
    server.kill();
}
