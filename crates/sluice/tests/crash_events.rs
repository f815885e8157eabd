//! Crash accounting for the event store: writers append batches of events with exact expected
//! versions to streams of their own, while readers tail `$all`, and the real `sluice serve` is
//! killed with SIGKILL at random moments (sometimes again during its start-up) and restarted
//! on the same data directory. A writer whose append got no answer re-sends the same events
//! (same ids, same expected version) until it gets one: the event-id dedup must answer the
//! original if the first attempt landed. Then `$all` and every stream are read from the start:
//!
//! - **lost**: an acknowledged event missing at its stream, version and position (must be 0);
//! - **wrong**: an event at an acknowledged place with other data, or one no writer sent (0);
//! - **doubled**: an event id appended twice (a retry that was not recognised) (must be 0);
//! - **gaps**: positions not gapless from 0 in `$all`, versions not gapless in a stream, or a
//!   tailing reader that saw a position skipped or a position later holding another event (0).
//!
//! `SLUICE_CRASH_EVENT_KILLS` sets the number of kills (default 12) and `SLUICE_CRASH_SEED`
//! replays a run; the seed is printed on every run:
//!
//! ```text
//! SLUICE_CRASH_EVENT_KILLS=300 cargo test -p sluice --release --test crash_events -- --nocapture
//! ```

mod torture;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_api::events::{AppendEventsRequest, ExpectedName, ExpectedVersionWire, NewEventWire};
use sluice_client::events::AllQuery;
use torture::{Clients, Killer, Payloads, ServerUrl, client};

const WRITERS: usize = 4;
const STREAMS_PER_WRITER: usize = 3;
const KILLS_DEFAULT: u32 = 12;

/// Where an acknowledged event is, and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    stream: String,
    version: u64,
    position: u64,
}

#[derive(Default)]
struct Ledger {
    /// Event id → its acknowledged place.
    acked: Mutex<HashMap<String, Place>>,
    /// What tailing readers saw: position → event id (the first time each saw it).
    tailed: Mutex<BTreeMap<u64, String>>,
    gaps: Mutex<Vec<String>>,
    retries: Mutex<u64>,
}

fn data_of(id: &str) -> serde_json::Value {
    serde_json::json!({ "id": id, "check": id.len() * 7 })
}

async fn writer(index: usize, mut payloads: Payloads, url: Arc<ServerUrl>, ledger: Arc<Ledger>, stop: Arc<AtomicBool>) {
    let mut known: Vec<Option<u64>> = vec![None; STREAMS_PER_WRITER];
    let mut turn = 0;
    while !stop.load(Ordering::Relaxed) {
        turn += 1;
        let s = turn % STREAMS_PER_WRITER;
        let stream = format!("w{index}-s{s}");
        let ids = payloads.next_batch();
        let expected =
            known[s].map_or(ExpectedVersionWire::Named(ExpectedName::NoStream), ExpectedVersionWire::Version);
        let events = ids
            .iter()
            .map(|id| NewEventWire {
                id: Some(id.clone()),
                r#type: format!("T{}", id.len() % 3),
                data: data_of(id),
                metadata: None,
                correlation_id: None,
                causation_id: None,
            })
            .collect();
        let request = AppendEventsRequest { expected_version: expected, events };
        // The same append until it is answered; it must never be applied twice. Stopping
        // leaves a last unanswered append uncertain, which the accounting allows for.
        loop {
            match client(&url.get()).append_events(&stream, &request).await {
                Ok(done) => {
                    assert_eq!(done.last_version - done.first_version + 1, ids.len() as u64);
                    assert_eq!(done.last_position - done.first_position + 1, ids.len() as u64);
                    assert_eq!(Some(done.first_version), known[s].map_or(Some(0), |k| k.checked_add(1)));
                    known[s] = Some(done.last_version);
                    let mut acked = ledger.acked.lock().expect("ledger");
                    for (i, id) in ids.iter().enumerate() {
                        let place = Place {
                            stream: stream.clone(),
                            version: done.first_version + i as u64,
                            position: done.first_position + i as u64,
                        };
                        acked.insert(id.clone(), place);
                    }
                    break;
                }
                Err(e) => {
                    assert!(
                        sluice_client::events::actual_version(&e).is_none(),
                        "a re-sent append was refused as a version conflict (its retry went unrecognised): {e}"
                    );
                    *ledger.retries.lock().expect("ledger") += 1;
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
}

async fn tail(url: Arc<ServerUrl>, ledger: Arc<Ledger>, stop: Arc<AtomicBool>) {
    let mut at = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let q = AllQuery { from_position: Some(at), max: Some(200), wait_ms: Some(200), ..Default::default() };
        let Ok(got) = client(&url.get()).read_all_events(&q).await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let mut tailed = ledger.tailed.lock().expect("ledger");
        for e in got.events {
            if e.position != at {
                ledger.gaps.lock().expect("ledger").push(format!("a reader at {at} was given {}", e.position));
            }
            at = e.position + 1;
            if let Some(before) = tailed.insert(e.position, e.id.clone())
                && before != e.id
            {
                ledger
                    .gaps
                    .lock()
                    .expect("ledger")
                    .push(format!("position {} held {before}, then {}", e.position, e.id));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_appends_keeps_every_acknowledged_event_at_its_version_and_position() {
    let kills = torture::kills("SLUICE_CRASH_EVENT_KILLS", KILLS_DEFAULT);
    let seed = torture::seed();
    println!("event crash test: {kills} kills, seed {seed} (replay with SLUICE_CRASH_SEED={seed})");
    let mut killer = Killer::new(seed);
    let dir = tempfile::tempdir().expect("temp dir");
    let started = Instant::now();
    let mut server = killer.start(dir.path());
    let ledger = Arc::new(Ledger::default());
    let mut clients = Clients::new(&server.url);
    for i in 0..WRITERS {
        let task = writer(i, Payloads::new('e', i, seed), clients.url.clone(), ledger.clone(), clients.stop.clone());
        clients.spawn(task);
    }
    for _ in 0..2 {
        clients.spawn(tail(clients.url.clone(), ledger.clone(), clients.stop.clone()));
    }
    for _ in 0..kills {
        server = killer.kill_and_restart(server, dir.path(), &clients.url).await;
    }
    clients.stop().await;

    let c = server.client();
    let mut all = Vec::new();
    loop {
        let q = AllQuery { from_position: Some(all.len() as u64), max: Some(1_000), ..Default::default() };
        let got = c.read_all_events(&q).await.expect("read $all");
        if got.events.is_empty() {
            break;
        }
        all.extend(got.events);
    }
    let acked = ledger.acked.lock().expect("ledger").clone();
    let mut gaps = ledger.gaps.lock().expect("ledger").clone();
    let (mut wrong, mut doubled) = (Vec::new(), Vec::new());
    let mut found: HashMap<String, Place> = HashMap::new();
    let mut versions: HashMap<String, u64> = HashMap::new();
    for (i, e) in all.iter().enumerate() {
        if e.position != i as u64 {
            gaps.push(format!("$all holds position {} at index {i}", e.position));
        }
        let next = versions.entry(e.stream_id.clone()).or_insert(0);
        if e.version != *next {
            gaps.push(format!("{} has version {} where {} was due", e.stream_id, e.version, next));
        }
        *next = e.version + 1;
        if e.data != data_of(&e.id) || !e.id.starts_with('e') {
            wrong.push(e.id.clone());
        }
        let place = Place { stream: e.stream_id.clone(), version: e.version, position: e.position };
        if found.insert(e.id.clone(), place).is_some() {
            doubled.push(e.id.clone());
        }
    }
    for (position, id) in ledger.tailed.lock().expect("ledger").iter() {
        if all.get(*position as usize).map(|e| &e.id) != Some(id) {
            gaps.push(format!("a reader saw {id} at {position}, which now holds something else"));
        }
    }
    let lost: Vec<_> = acked.iter().filter(|(id, place)| found.get(*id) != Some(place)).collect();
    for (stream, next) in &versions {
        let read = c.read_events(stream, None, false, Some(1_000)).await.expect("read a stream");
        let got: Vec<u64> = read.events.iter().map(|e| e.version).collect();
        if got != (0..*next).collect::<Vec<_>>() {
            gaps.push(format!("{stream} reads versions {got:?}"));
        }
    }
    println!(
        "event crash test: {} in {:.1?}; events {}, acknowledged {}, retried appends {}, lost {}, wrong {}, doubled {}, gaps {}, tailed {}",
        killer.summary(),
        started.elapsed(),
        all.len(),
        acked.len(),
        ledger.retries.lock().expect("ledger"),
        lost.len(),
        wrong.len(),
        doubled.len(),
        gaps.len(),
        ledger.tailed.lock().expect("ledger").len(),
    );
    assert!(acked.len() > 100, "too little load to prove anything ({} acknowledged events)", acked.len());
    assert!(lost.is_empty(), "lost acknowledged events (seed {seed}): {:?}", lost.iter().take(10).collect::<Vec<_>>());
    assert!(wrong.is_empty(), "wrong events (seed {seed}): {wrong:?}");
    assert!(doubled.is_empty(), "events appended twice (seed {seed}): {doubled:?}");
    assert!(gaps.is_empty(), "gaps or reordering (seed {seed}): {:?}", gaps.iter().take(10).collect::<Vec<_>>());
}
