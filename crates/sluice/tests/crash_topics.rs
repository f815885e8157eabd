//! Crash accounting for topics: concurrent publishers against the real `sluice serve`, one topic
//! fanning out to three queue subscriptions, the server killed with SIGKILL at random moments,
//! restarted on the same data directory, and finally every queue drained.
//!
//! The subscriptions: `raw` (the raw body), `envelope` (the SNS JSON envelope, whose `Message`
//! is the body) and `even` (raw, with a filter policy that matches the half of the messages
//! whose `parity` attribute is `even`). Every publish the server acknowledged must reach every
//! subscription whose filter matches it (lost = 0); nothing may arrive at a subscription whose
//! filter does not match it, nor anything never published, nor a damaged body
//! (unexpected = 0, damaged = 0). Duplicates are allowed by at-least-once delivery and counted.
//!
//! As in `crash.rs` (whose [`torture::Killer`] this test shares), after a third of the kills (at
//! random) the restart is itself killed during its start-up, before or while it replays the
//! data directory, and then started again.
//!
//! `SLUICE_CRASH_TOPIC_KILLS` sets the number of kills (default 20) and `SLUICE_CRASH_SEED`
//! replays a run's kill timings and batch sizes; the seed is printed on every run:
//!
//! ```text
//! SLUICE_CRASH_TOPIC_KILLS=500 cargo test -p sluice --release --test crash_topics -- --nocapture
//! ```

mod torture;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_api::{Attribute, CreateQueueRequest, CreateTopicRequest, PublishMessage, PublishRequest, SubscribeRequest};
use torture::{Clients, Consume, Killer, Payloads, ServerUrl, body_for, client, drain, payload_of};

const TOPIC: &str = "crash-topic";
const PRODUCERS: usize = 3;
const KILLS_DEFAULT: u32 = 20;

/// One queue subscription of the topic and what it is expected to receive.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Sub {
    Raw,
    Envelope,
    Even,
}

const SUBS: [Sub; 3] = [Sub::Raw, Sub::Envelope, Sub::Even];

impl Sub {
    fn queue(self) -> &'static str {
        match self {
            Sub::Raw => "fan-raw",
            Sub::Envelope => "fan-envelope",
            Sub::Even => "fan-even",
        }
    }

    fn request(self) -> SubscribeRequest {
        let mut request = SubscribeRequest { queue: Some(self.queue().into()), ..Default::default() };
        match self {
            Sub::Raw => request.raw = Some(true),
            Sub::Envelope => request.raw = Some(false),
            Sub::Even => {
                request.raw = Some(true);
                request.filter_policy = Some(serde_json::json!({ "parity": ["even"] }));
            }
        }
        request
    }

    /// Whether a message published with this `parity` attribute belongs in this subscription.
    fn matches(self, parity: &str) -> bool {
        self != Sub::Even || parity == "even"
    }

    /// The payload inside a received body, or `None` if it is damaged.
    fn payload(self, body: &str) -> Option<String> {
        match self {
            Sub::Raw | Sub::Even => payload_of(body),
            Sub::Envelope => {
                let envelope: serde_json::Value = serde_json::from_str(body).ok()?;
                payload_of(envelope.get("Message")?.as_str()?)
            }
        }
    }
}

/// A payload's parity: the attribute the `even` subscription filters on.
fn parity(payload: &str) -> &'static str {
    let n: u64 = payload.rsplit('-').next().and_then(|n| n.parse().ok()).expect("payload pI-N");
    if n.is_multiple_of(2) { "even" } else { "odd" }
}

/// What the clients observed, shared by every task.
#[derive(Default)]
struct Ledger {
    /// Payloads whose publish returned an id: durable in every matching subscription.
    acked: Mutex<HashSet<String>>,
    /// Payloads whose publish failed in transport or came back `publish_incomplete`: some
    /// copies may be stored.
    uncertain: Mutex<HashSet<String>>,
    /// Per subscription, how often each payload arrived.
    received: Mutex<HashMap<Sub, HashMap<String, u32>>>,
    /// Received bodies that failed their integrity check, with their subscription.
    damaged: Mutex<Vec<(Sub, String)>>,
}

async fn producer(mut payloads: Payloads, url: Arc<ServerUrl>, ledger: Arc<Ledger>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let payloads = payloads.next_batch();
        let request = PublishRequest {
            messages: payloads
                .iter()
                .map(|p| PublishMessage {
                    body: body_for(p),
                    attributes: BTreeMap::from([(
                        "parity".to_owned(),
                        Attribute { data_type: "String".into(), value: parity(p).into() },
                    )]),
                    ..Default::default()
                })
                .collect(),
        };
        match client(&url.get()).publish(TOPIC, &request).await {
            Ok(response) => {
                assert_eq!(response.results.len(), payloads.len());
                for (payload, result) in payloads.into_iter().zip(response.results) {
                    match (result.id, result.error) {
                        (Some(_), None) => ledger.acked.lock().expect("ledger").insert(payload),
                        (None, Some(error)) => {
                            assert_eq!(error.code, "publish_incomplete", "a valid publish was refused: {error:?}");
                            ledger.uncertain.lock().expect("ledger").insert(payload)
                        }
                        other => panic!("a publish result with neither or both of id and error: {other:?}"),
                    };
                }
            }
            Err(_) => {
                ledger.uncertain.lock().expect("ledger").extend(payloads);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// The consumer of one subscription's queue.
struct Subscriber {
    sub: Sub,
    ledger: Arc<Ledger>,
}

impl Consume for Subscriber {
    fn queue(&self) -> &str {
        self.sub.queue()
    }

    fn record(&self, body: String) {
        match self.sub.payload(&body) {
            Some(p) => {
                *self.ledger.received.lock().expect("ledger").entry(self.sub).or_default().entry(p).or_default() += 1;
            }
            None => self.ledger.damaged.lock().expect("ledger").push((self.sub, body)),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_fan_out_loses_no_acknowledged_publish() {
    let kills = torture::kills("SLUICE_CRASH_TOPIC_KILLS", KILLS_DEFAULT);
    let seed = torture::seed();
    println!("topic crash test: {kills} kills, seed {seed} (replay with SLUICE_CRASH_SEED={seed})");
    let mut killer = Killer::new(seed);
    let dir = tempfile::tempdir().expect("temp dir");
    let started = Instant::now();

    let mut server = killer.start(dir.path());
    let c = server.client();
    c.create_topic(&CreateTopicRequest { name: TOPIC.into(), ..Default::default() }).await.expect("create the topic");
    for sub in SUBS {
        c.create_queue(&CreateQueueRequest { name: sub.queue().into(), ..Default::default() })
            .await
            .expect("create a queue");
        c.subscribe(TOPIC, &sub.request()).await.expect("subscribe a queue");
    }

    let ledger = Arc::new(Ledger::default());
    let mut clients = Clients::new(&server.url);
    for i in 0..PRODUCERS {
        let payloads = Payloads::new('t', i, seed);
        clients.spawn(producer(payloads, clients.url.clone(), ledger.clone(), clients.stop.clone()));
    }
    for sub in SUBS {
        clients.spawn_consumer(Arc::new(Subscriber { sub, ledger: ledger.clone() }));
    }
    for _ in 0..kills {
        server = killer.kill_and_restart(server, dir.path(), &clients.url).await;
    }
    clients.stop().await;
    let drain_deadline = Instant::now() + Duration::from_secs(120);
    for sub in SUBS {
        let subscriber = Subscriber { sub, ledger: ledger.clone() };
        drain(&subscriber, &server, 2, drain_deadline).await;
    }

    let acked = ledger.acked.lock().expect("ledger");
    let uncertain = ledger.uncertain.lock().expect("ledger");
    let received = ledger.received.lock().expect("ledger");
    let damaged = ledger.damaged.lock().expect("ledger");
    let empty = HashMap::new();
    let mut lost = Vec::new();
    let mut unexpected = Vec::new();
    let (mut deliveries, mut duplicated) = (0usize, 0usize);
    for sub in SUBS {
        let got = received.get(&sub).unwrap_or(&empty);
        deliveries += got.values().map(|&n| n as usize).sum::<usize>();
        duplicated += got.values().filter(|&&n| n > 1).count();
        lost.extend(acked.iter().filter(|p| sub.matches(parity(p)) && !got.contains_key(*p)).map(|p| (sub, p.clone())));
        unexpected.extend(
            got.keys()
                .filter(|p| !sub.matches(parity(p)) || (!acked.contains(*p) && !uncertain.contains(*p)))
                .map(|p| (sub, p.clone())),
        );
    }
    println!(
        "topic crash test: {} in {:.1?}; acknowledged publishes {}, uncertain publishes {}, deliveries {deliveries}, lost {}, unexpected {}, damaged {}, duplicated {duplicated}",
        killer.summary(),
        started.elapsed(),
        acked.len(),
        uncertain.len(),
        lost.len(),
        unexpected.len(),
        damaged.len(),
    );
    assert!(acked.len() > 100, "too little load to prove anything ({} acknowledged publishes)", acked.len());
    assert!(killer.startup_kills > 0 || kills < 10, "no restart was killed during start-up (seed {seed})");
    assert!(
        lost.is_empty(),
        "lost acknowledged publishes (seed {seed}): {:?}",
        lost.iter().take(20).collect::<Vec<_>>()
    );
    assert!(
        unexpected.is_empty(),
        "received what was never published or does not match the filter (seed {seed}): {:?}",
        unexpected.iter().take(20).collect::<Vec<_>>()
    );
    assert!(damaged.is_empty(), "received damaged bodies (seed {seed}): {damaged:?}");
}
