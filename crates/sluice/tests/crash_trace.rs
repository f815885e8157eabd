//! The causal trace across SIGKILL: producers send messages to a queue and append records to a
//! stream, each under its producer's correlation id and naming the write before it as its
//! cause, while the real `sluice serve` is killed and restarted. A trace entry is durable
//! before its write is answered, so at the end every answered message and record must be in
//! its producer's trace, once, and after its cause when its cause is there too.
//!
//! `SLUICE_CRASH_TRACE_KILLS` sets the number of kills (default 5); `SLUICE_CRASH_SEED`
//! replays a run's timings and batch sizes; the seed is printed:
//!
//! ```text
//! SLUICE_CRASH_TRACE_KILLS=200 cargo test -p sluice --release --test crash_trace -- --nocapture
//! ```

mod torture;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_api::{AppendRecord, CreateQueueRequest, CreateStreamRequest, SendMessage, SendRequest};
use torture::{Clients, Killer, Payloads, client, kills, seed};

const QUEUE: &str = "traced";
const STREAM: &str = "traced-log";
const PRODUCERS: usize = 4;

/// The ids each producer's answered writes were given, by correlation id.
#[derive(Default)]
struct Answered(Mutex<HashMap<String, Vec<String>>>);

impl Answered {
    fn add(&self, correlation_id: &str, ids: impl IntoIterator<Item = String>) {
        self.0.lock().expect("ledger").entry(correlation_id.to_owned()).or_default().extend(ids);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_never_loses_an_answered_writes_trace_entry() {
    let seed = seed();
    let kill_count = kills("SLUICE_CRASH_TRACE_KILLS", 5);
    println!("seed {seed}, {kill_count} kills (SLUICE_CRASH_SEED={seed} replays this run)");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut killer = Killer::new(seed);
    let mut server = killer.start(dir.path());
    let c = client(&server.url);
    c.create_queue(&CreateQueueRequest { name: QUEUE.into(), ..Default::default() }).await.expect("create the queue");
    c.create_stream(&CreateStreamRequest { name: STREAM.into(), partitions: Some(2), ..Default::default() })
        .await
        .expect("create the stream");

    let answered = Arc::new(Answered::default());
    let unanswered = Arc::new(Mutex::new(0usize));
    let mut clients = Clients::new(&server.url);
    for p in 0..PRODUCERS {
        let (answered, unanswered, url, stop) =
            (answered.clone(), unanswered.clone(), clients.url.clone(), clients.stop.clone());
        clients.spawn(async move {
            let correlation_id = format!("producer-{p}");
            let mut payloads = Payloads::new('t', p, seed);
            let mut cause: Option<String> = None;
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let batch = payloads.next_batch();
                let ids = if n.is_multiple_of(2) {
                    let messages = batch
                        .iter()
                        .map(|b| SendMessage {
                            body: Some(b.clone()),
                            correlation_id: Some(correlation_id.clone()),
                            causation_id: cause.clone(),
                            ..Default::default()
                        })
                        .collect();
                    let answer = client(&url.get()).send_messages(QUEUE, &SendRequest { messages }).await;
                    answer.ok().map(|a| a.results.into_iter().filter_map(|r| r.id).collect::<Vec<_>>())
                } else {
                    let records = batch
                        .iter()
                        .map(|b| AppendRecord {
                            body: Some(b.clone()),
                            correlation_id: Some(correlation_id.clone()),
                            causation_id: cause.clone(),
                            ..Default::default()
                        })
                        .collect();
                    let answer = client(&url.get()).append(STREAM, records).await;
                    answer.ok().map(|results| {
                        results
                            .into_iter()
                            .filter_map(|r| Some(format!("{}/{}", r.partition?, r.offset?)))
                            .collect::<Vec<_>>()
                    })
                };
                match ids {
                    Some(ids) => {
                        cause = ids.last().cloned();
                        answered.add(&correlation_id, ids);
                    }
                    None => {
                        *unanswered.lock().expect("count") += 1;
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

    let c = client(&server.url);
    let answered = answered.0.lock().expect("ledger").clone();
    let mut entries_total = 0;
    for (correlation_id, ids) in &answered {
        let trace = c.trace(correlation_id).await.expect("trace");
        assert!(!trace.truncated);
        entries_total += trace.entries.len();
        let listed: Vec<&str> = trace.entries.iter().map(|e| e.id.as_str()).collect();
        let unique: HashSet<&str> = listed.iter().copied().collect();
        assert_eq!(unique.len(), listed.len(), "{correlation_id}: an entry listed twice");
        let missing: Vec<&String> = ids.iter().filter(|id| !unique.contains(id.as_str())).collect();
        assert!(missing.is_empty(), "{correlation_id}: answered writes missing from the trace: {missing:?}");
        // Causal order: an entry comes after its cause, one level deeper.
        let mut seen: HashMap<&str, u32> = HashMap::new();
        for e in &trace.entries {
            if let Some(cause) = e.causation_id.as_deref().filter(|c| unique.contains(c)) {
                let depth = seen.get(cause).unwrap_or_else(|| panic!("{}: listed before its cause {cause}", e.id));
                assert_eq!(e.depth, depth + 1, "{}", e.id);
            }
            seen.insert(&e.id, e.depth);
        }
    }
    let answered_total: usize = answered.values().map(Vec::len).sum();
    let lost = *unanswered.lock().expect("count");
    println!("{answered_total} answered writes, {entries_total} trace entries, {lost} answers lost to kills");
    assert!(answered_total > 0, "nothing was answered: the test proved nothing");
    assert!(lost > 0 || kill_count == 0, "the kills cut nothing short: the test proved nothing");
    server.kill();
}
