//! Crash accounting for streams: producers append to a 3-partition stream, an `offsets` group
//! and a key-ordered `shared` group consume it, while the real `sluice serve` is killed with
//! SIGKILL at random moments (sometimes again during its start-up) and restarted on the same
//! data directory. Then every partition is read from the start and every observation is
//! accounted for:
//!
//! - **lost**: an acknowledged append missing at its partition and offset (must be 0);
//! - **wrong**: a record at an acknowledged place with other bytes, a damaged body, or a
//!   record no producer sent (must be 0);
//! - **reused**: one place acknowledged for two payloads, or an offset seen twice with
//!   different records (must be 0); offsets read from the start are gapless, in order;
//! - **went back**: an `offsets` fetch returning a record below an offset whose commit was
//!   acknowledged (committed offsets never go back; the test never seeks), or a final
//!   committed offset below one (must be 0);
//! - **key overlap**: a `shared` fetch handing out two records of one key at once, a record of
//!   a key that another consumer holds and has not yet acked, or a key's records first handed
//!   out against their offset order (must be 0).
//!
//! `SLUICE_CRASH_STREAM_KILLS` sets the number of kills (default 20) and `SLUICE_CRASH_SEED`
//! replays a run's kill timings and batch sizes; the seed is printed on every run:
//!
//! ```text
//! SLUICE_CRASH_STREAM_KILLS=500 cargo test -p sluice --release --test crash_streams -- --nocapture
//! ```

mod torture;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_api::{AppendRecord, CreateGroupRequest, CreateStreamRequest, GroupMode, StreamRecord};
use sluice_client::streams::{From, Settle};
use torture::{Clients, Killer, Payloads, ServerUrl, body_for, client, payload_of};

const STREAM: &str = "crash-stream";
const PARTITIONS: u32 = 3;
const PRODUCERS: usize = 3;
const KILLS_DEFAULT: u32 = 20;
/// Keys per producer: few, so that shared-mode key order is exercised.
const KEYS: u64 = 4;
const ACK_TIMEOUT_MS: u64 = 1_000;

#[derive(Default)]
struct Ledger {
    /// (partition, offset) → payload, for every acknowledged append.
    acked: Mutex<HashMap<(u32, u64), String>>,
    uncertain: Mutex<HashSet<String>>,
    reused: Mutex<Vec<String>>,
    /// The highest offset whose commit was acknowledged, per partition.
    committed: Mutex<BTreeMap<u32, u64>>,
    went_back: Mutex<Vec<String>>,
    /// Shared mode: keys held now (received, ack not yet sent), by which consumer.
    held: Mutex<HashMap<String, usize>>,
    /// Shared mode: per key, the highest offset first handed out so far.
    first_out: Mutex<HashMap<(u32, String), u64>>,
    delivered_once: Mutex<HashSet<(u32, u64)>>,
    key_overlap: Mutex<Vec<String>>,
    damaged: Mutex<Vec<String>>,
    offsets_read: Mutex<HashSet<(u32, u64)>>,
}

fn key_of(payload: &str) -> String {
    let n: u64 = payload.rsplit('-').next().and_then(|n| n.parse().ok()).expect("payload xI-N");
    let producer = payload.split('-').next().expect("payload");
    format!("{producer}-k{}", n % KEYS)
}

async fn producer(mut payloads: Payloads, url: Arc<ServerUrl>, ledger: Arc<Ledger>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let batch = payloads.next_batch();
        let records = batch
            .iter()
            .map(|p| AppendRecord { key: Some(key_of(p)), body: Some(body_for(p)), ..Default::default() })
            .collect();
        match client(&url.get()).append(STREAM, records).await {
            Ok(results) => {
                assert_eq!(results.len(), batch.len());
                let mut acked = ledger.acked.lock().expect("ledger");
                for (payload, r) in batch.into_iter().zip(results) {
                    assert!(r.error.is_none(), "a valid append was refused: {:?}", r.error);
                    let place = (r.partition.expect("partition"), r.offset.expect("offset"));
                    if let Some(other) = acked.insert(place, payload.clone())
                        && other != payload
                    {
                        ledger.reused.lock().expect("ledger").push(format!("{place:?}: {other} then {payload}"));
                    }
                }
            }
            Err(_) => {
                ledger.uncertain.lock().expect("ledger").extend(batch);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Checks a record's body; its payload.
fn payload(ledger: &Ledger, r: &StreamRecord) -> Option<String> {
    let p = r.body.as_deref().and_then(payload_of);
    if p.is_none() {
        ledger.damaged.lock().expect("ledger").push(format!("{}/{}", r.partition, r.offset));
    }
    p
}

async fn offsets_member(member: String, url: Arc<ServerUrl>, ledger: Arc<Ledger>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let c = client(&url.get());
        let Ok(f) = c.fetch(STREAM, "audit", &member, 50, 200).await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let mut next: BTreeMap<u32, u64> = BTreeMap::new();
        {
            let committed = ledger.committed.lock().expect("ledger");
            for r in &f.records {
                payload(&ledger, r);
                if committed.get(&r.partition).is_some_and(|&c| r.offset < c) {
                    ledger
                        .went_back
                        .lock()
                        .expect("ledger")
                        .push(format!("fetched {}/{} below its commit", r.partition, r.offset));
                }
                if let Some(prev) = next.get(&r.partition)
                    && *prev != r.offset
                {
                    ledger
                        .reused
                        .lock()
                        .expect("ledger")
                        .push(format!("a fetch skipped or reordered {}/{}", r.partition, r.offset));
                }
                next.insert(r.partition, r.offset + 1);
                ledger.offsets_read.lock().expect("ledger").insert((r.partition, r.offset));
            }
        }
        if next.is_empty() {
            continue;
        }
        if c.commit(STREAM, "audit", &member, f.generation.unwrap_or(0), &next).await.is_ok() {
            let mut committed = ledger.committed.lock().expect("ledger");
            for (p, o) in next {
                let e = committed.entry(p).or_insert(0);
                *e = (*e).max(o);
            }
        }
    }
}

async fn shared_member(index: usize, url: Arc<ServerUrl>, ledger: Arc<Ledger>, stop: Arc<AtomicBool>) {
    let member = format!("w{index}");
    while !stop.load(Ordering::Relaxed) {
        let c = client(&url.get());
        let Ok(f) = c.fetch(STREAM, "workers", &member, 10, 200).await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let mut receipts = Vec::new();
        let mut keys = Vec::new();
        for r in &f.records {
            let Some(p) = payload(&ledger, r) else { continue };
            let key = key_of(&p);
            if let Some(other) = ledger.held.lock().expect("ledger").insert(key.clone(), index) {
                ledger
                    .key_overlap
                    .lock()
                    .expect("ledger")
                    .push(format!("{key} handed to w{index} while w{other} held it"));
            }
            if ledger.delivered_once.lock().expect("ledger").insert((r.partition, r.offset)) {
                let prev = ledger.first_out.lock().expect("ledger").insert((r.partition, key.clone()), r.offset);
                if prev.is_some_and(|p| p > r.offset) {
                    ledger
                        .key_overlap
                        .lock()
                        .expect("ledger")
                        .push(format!("{key}: offset {} first handed out after {prev:?}", r.offset));
                }
            }
            keys.push(key);
            receipts.extend(r.receipt.clone());
        }
        // The keys are released in the ledger before the ack is sent: the server may hand out
        // their next records only once the ack is durable, so nothing is claimed early.
        {
            let mut held = ledger.held.lock().expect("ledger");
            for k in &keys {
                held.remove(k);
            }
        }
        if !receipts.is_empty() {
            let _ = c.settle(STREAM, "workers", Settle::Ack, receipts, None).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_appends_and_commits_keeps_every_acknowledged_record_in_place() {
    let kills = torture::kills("SLUICE_CRASH_STREAM_KILLS", KILLS_DEFAULT);
    let seed = torture::seed();
    println!("stream crash test: {kills} kills, seed {seed} (replay with SLUICE_CRASH_SEED={seed})");
    let mut killer = Killer::new(seed);
    let dir = tempfile::tempdir().expect("temp dir");
    let started = Instant::now();
    let mut server = killer.start(dir.path());
    let c = server.client();
    // Small segments, so that rolls (and their index files) happen under the kills too.
    let stream = CreateStreamRequest {
        name: STREAM.into(),
        partitions: Some(PARTITIONS),
        segment_bytes: Some(64 * 1024),
        ..Default::default()
    };
    c.create_stream(&stream).await.expect("create the stream");
    let audit = CreateGroupRequest { name: "audit".into(), session_timeout_ms: Some(1_000), ..Default::default() };
    c.create_group(STREAM, &audit).await.expect("create the offsets group");
    let workers = CreateGroupRequest {
        name: "workers".into(),
        mode: Some(GroupMode::Shared),
        key_ordered: Some(true),
        ack_timeout_ms: Some(ACK_TIMEOUT_MS),
        max_deliveries: Some(1_000),
        ..Default::default()
    };
    c.create_group(STREAM, &workers).await.expect("create the shared group");

    let ledger = Arc::new(Ledger::default());
    let mut clients = Clients::new(&server.url);
    for i in 0..PRODUCERS {
        clients.spawn(producer(Payloads::new('s', i, seed), clients.url.clone(), ledger.clone(), clients.stop.clone()));
    }
    for m in ["a1", "a2"] {
        clients.spawn(offsets_member(m.to_owned(), clients.url.clone(), ledger.clone(), clients.stop.clone()));
    }
    for i in 0..2 {
        clients.spawn(shared_member(i, clients.url.clone(), ledger.clone(), clients.stop.clone()));
    }
    for _ in 0..kills {
        server = killer.kill_and_restart(server, dir.path(), &clients.url).await;
    }
    clients.stop().await;

    // Every partition from the start: every acknowledged record at its place, byte-exact.
    let c = server.client();
    let acked = ledger.acked.lock().expect("ledger").clone();
    let uncertain = ledger.uncertain.lock().expect("ledger").clone();
    let sent: HashSet<&String> = acked.values().collect();
    let mut found: HashMap<(u32, u64), String> = HashMap::new();
    let mut unexpected = Vec::new();
    for p in 0..PARTITIONS {
        let mut from = 0;
        loop {
            let batch = c.read_records(STREAM, p, From::Offset(from), 1_000, 0).await.expect("read");
            for r in &batch.records {
                assert_eq!(r.offset, from, "offsets are gapless and in order in partition {p}");
                from += 1;
                match payload(&ledger, r) {
                    Some(pl) if sent.contains(&pl) || uncertain.contains(&pl) => {
                        found.insert((p, r.offset), pl);
                    }
                    Some(pl) => unexpected.push(pl),
                    None => {}
                }
            }
            if batch.records.is_empty() {
                break;
            }
        }
    }
    let lost: Vec<_> = acked.iter().filter(|(place, pl)| found.get(place) != Some(pl)).collect();
    let view = c.get_group(STREAM, "audit").await.expect("the group");
    for (p, &o) in ledger.committed.lock().expect("ledger").iter() {
        let now = view.partitions[*p as usize].committed_offset;
        if now < o {
            ledger
                .went_back
                .lock()
                .expect("ledger")
                .push(format!("partition {p} committed {now} after an acknowledged commit of {o}"));
        }
    }
    let (reused, went_back, overlap, damaged) = (
        ledger.reused.lock().expect("ledger").clone(),
        ledger.went_back.lock().expect("ledger").clone(),
        ledger.key_overlap.lock().expect("ledger").clone(),
        ledger.damaged.lock().expect("ledger").clone(),
    );
    println!(
        "stream crash test: {} in {:.1?}; acknowledged appends {}, uncertain {}, lost {}, wrong {}, reused {}, went back {}, key overlap {}, fetched by the offsets group {}, commits acknowledged on {} partitions, handed out by the shared group {}",
        killer.summary(),
        started.elapsed(),
        acked.len(),
        uncertain.len(),
        lost.len(),
        unexpected.len() + damaged.len(),
        reused.len(),
        went_back.len(),
        overlap.len(),
        ledger.offsets_read.lock().expect("ledger").len(),
        ledger.committed.lock().expect("ledger").len(),
        ledger.delivered_once.lock().expect("ledger").len(),
    );
    assert!(acked.len() > 100, "too little load to prove anything ({} acknowledged appends)", acked.len());
    assert!(lost.is_empty(), "lost acknowledged appends (seed {seed}): {:?}", lost.iter().take(10).collect::<Vec<_>>());
    assert!(unexpected.is_empty() && damaged.is_empty(), "wrong records (seed {seed}): {unexpected:?} {damaged:?}");
    assert!(reused.is_empty(), "offsets reused or reordered (seed {seed}): {reused:?}");
    assert!(went_back.is_empty(), "committed offsets went back (seed {seed}): {went_back:?}");
    assert!(overlap.is_empty(), "a key had two records out at once (seed {seed}): {overlap:?}");
}
