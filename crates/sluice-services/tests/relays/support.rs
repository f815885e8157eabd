//! What the relay tests share: services over a fresh embedded store, the outbox table the
//! tests write through each database's own client ([`Outbox`]), draining a queue, and the
//! checks every scenario ends with (every row delivered, order per aggregate).

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use sluice_clock::{Clock, SystemClock};
use sluice_core::QueueAttributes;
use sluice_core::message::AttributeData;
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_services::relays::{AfterPublish, Columns, OUTBOX_ID, RelaySpec, Target};
use sluice_services::topics::Arns;
use sluice_services::{Running, Services, ServicesConfig};
use sluice_store::{ReceiveRequest, Store};

pub struct Node {
    pub services: Arc<Services>,
    pub running: Option<Running>,
}

impl Node {
    pub fn start(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Node {
        let arns = Arns { region: "us-east-1".into(), account: "000000000000".into() };
        let services = Services::new(store, clock, ServicesConfig::new(arns));
        let running = Some(services.start());
        Node { services, running }
    }

    pub async fn stop(&mut self) {
        self.services.stop();
        if let Some(running) = self.running.take() {
            running.join().await;
        }
    }
}

pub struct Fixture {
    _dir: tempfile::TempDir,
    pub store: Arc<dyn Store>,
    pub node: Node,
}

impl Fixture {
    pub async fn new() -> Fixture {
        Fixture::with_clock(Arc::new(SystemClock)).await
    }

    pub async fn with_clock(clock: Arc<dyn Clock>) -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync };
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open_with_clock(config, clock.clone()).expect("open"));
        store.create_queue("out", QueueAttributes::default()).await.expect("queue");
        let node = Node::start(store.clone(), clock);
        Fixture { _dir: dir, store, node }
    }

    pub fn services(&self) -> &Arc<Services> {
        &self.node.services
    }
}

/// A relay of `table` at `url` into the queue `out`, polling every 20 ms.
pub fn spec(name: &str, url: &str, table: &str) -> RelaySpec {
    RelaySpec {
        name: name.into(),
        source: url.into(),
        table: table.into(),
        columns: Columns::default(),
        target: Target::Queue("out".into()),
        route_by: None,
        after_publish: AfterPublish::Delete,
        poll_ms: 20,
        batch_max: 50,
        dead_letter_queue: None,
    }
}

/// One delivered message: its outbox id, aggregate and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Got {
    pub id: String,
    pub aggregate: String,
    pub body: String,
}

fn attribute(message: &sluice_store::StoredMessage, name: &str) -> String {
    match message.content.attributes.get(name).map(|a| &a.value) {
        Some(AttributeData::Text(t)) => t.clone(),
        _ => String::new(),
    }
}

/// Receives and acks everything in `queue` until `count` messages came (panics after a long
/// while, with what did come).
pub async fn drain(store: &Arc<dyn Store>, queue: &str, count: usize) -> Vec<Got> {
    let mut got = Vec::new();
    for _ in 0..3_000 {
        if got.len() >= count {
            break;
        }
        let request = ReceiveRequest { max: 100, wait_ms: Some(20), visibility_timeout_ms: None };
        let received = store.receive(queue, request).await.expect("receive");
        let receipts: Vec<String> = received.iter().map(|r| r.receipt.clone()).collect();
        for r in &received {
            got.push(Got {
                id: attribute(&r.message, OUTBOX_ID),
                aggregate: attribute(&r.message, "aggregate_id"),
                body: String::from_utf8_lossy(&r.message.content.body).into_owned(),
            });
        }
        if !receipts.is_empty() {
            store.ack(queue, receipts).await.expect("ack");
        }
    }
    assert!(got.len() >= count, "only {} of {count} messages came: {got:?}", got.len());
    got
}

/// Waits (real time, bounded) until `f` holds.
pub async fn eventually<F: std::future::Future<Output = bool>>(what: &str, mut f: impl FnMut() -> F) {
    for _ in 0..1_500 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

/// Every row written (id → aggregate, in each aggregate's write order) came at least once,
/// nothing else came, duplicates are copies, and each aggregate's first deliveries are in
/// write order. Returns how many duplicates came.
pub fn check_delivery(written: &[(String, String, String)], got: &[Got]) -> usize {
    let expected: HashMap<&str, (&str, &str)> =
        written.iter().map(|(id, aggregate, body)| (id.as_str(), (aggregate.as_str(), body.as_str()))).collect();
    let mut first: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for g in got {
        let Some((aggregate, body)) = expected.get(g.id.as_str()) else { panic!("an unexpected message: {g:?}") };
        assert_eq!((g.aggregate.as_str(), g.body.as_str()), (*aggregate, *body), "a copy differs from its row");
        let n = seen.entry(g.id.as_str()).or_default();
        *n += 1;
        if *n == 1 {
            first.entry(aggregate).or_default().push(g.id.as_str());
        }
    }
    let missing: Vec<&str> = written.iter().map(|(id, _, _)| id.as_str()).filter(|id| !seen.contains_key(id)).collect();
    assert!(missing.is_empty(), "rows never delivered: {missing:?}");
    let mut order: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (id, aggregate, _) in written {
        order.entry(aggregate.as_str()).or_default().push(id.as_str());
    }
    assert_eq!(first, order, "first deliveries per aggregate are in write order");
    got.len() - written.len()
}
