//! Schema validation at the relay's targets: a row bound for a queue, topic or stream with
//! `schema_validation` is checked against the schema of its `type` column, and a row that
//! breaks it is refused like any other refusal: its aggregate waits for the grace period,
//! then the row goes to the dead-letter queue with the reason, and the rest is published.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use sluice_clock::ManualClock;
use sluice_core::QueueAttributes;
use sluice_core::message::AttributeData;
use sluice_core::stream::StreamConfig;
use sluice_services::relays::{OUTBOX_ID, RELAY_ERROR, RelaySpec, Target};
use sluice_services::topics::{Endpoint, Origin};
use sluice_store::{ReadFrom, ReadRequest, ReceiveRequest};

use crate::failures::tick;
use crate::outbox::{Outbox, insert_one};
use crate::sqlite_db::Sqlite;
use crate::support::{Fixture, drain, eventually, spec};

/// The three kinds of target, each with validation on.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Queue,
    Topic,
    Stream,
}

/// Creates the validating target `checked` (a topic also gets a raw queue subscription,
/// `copies`) and answers what the relay publishes to.
async fn target(f: &Fixture, kind: Kind) -> Target {
    match kind {
        Kind::Queue => {
            let attributes = QueueAttributes { schema_validation: true, ..QueueAttributes::default() };
            f.store.create_queue("checked", attributes).await.expect("queue");
            Target::Queue("checked".into())
        }
        Kind::Stream => {
            let config = StreamConfig { schema_validation: true, ..StreamConfig::default() };
            f.store.create_stream("checked", config).await.expect("stream");
            Target::Stream("checked".into())
        }
        Kind::Topic => {
            let topics = f.services().topics();
            let attributes = BTreeMap::from([("SchemaValidation".to_string(), "true".to_string())]);
            topics.create_topic("checked", false, attributes, BTreeMap::new()).await.expect("topic");
            f.store.create_queue("copies", QueueAttributes::default()).await.expect("queue");
            let raw = BTreeMap::from([("RawMessageDelivery".to_string(), "true".to_string())]);
            let origin = Origin { base_url: "http://localhost".into(), sender: "test".into() };
            topics.subscribe("checked", Endpoint::Queue("copies".into()), &raw, &origin).await.expect("subscribe");
            Target::Topic("checked".into())
        }
    }
}

/// The outbox ids of what reached the target.
async fn delivered(f: &Fixture, kind: Kind, count: usize) -> Vec<String> {
    match kind {
        Kind::Queue => drain(&f.store, "checked", count).await.into_iter().map(|g| g.id).collect(),
        Kind::Topic => drain(&f.store, "copies", count).await.into_iter().map(|g| g.id).collect(),
        Kind::Stream => {
            let request = ReadRequest { partition: 0, from: ReadFrom::Offset(0), max: 100, wait_ms: 0 };
            let records = f.store.read("checked", request).await.expect("read").records;
            records.iter().map(|r| r.headers.get(OUTBOX_ID).cloned().unwrap_or_default()).collect()
        }
    }
}

pub async fn schema_refusals_are_dead_lettered(kind: Kind) {
    let db = Sqlite::new();
    let clock = ManualClock::new(1_700_000_000_000);
    let f = Fixture::with_clock(Arc::new(clock.clone())).await;
    // The rows' type column is `order.placed` (see sqlite_db.rs).
    let schema = json!({"type": "object", "required": ["order"], "properties": {"order": {"type": "integer"}}});
    f.services().schemas().register("order.placed", &schema).await.expect("register");
    f.store.create_queue("dlq", QueueAttributes::default()).await.expect("dlq");
    let spec = RelaySpec {
        target: target(&f, kind).await,
        dead_letter_queue: Some("dlq".into()),
        ..spec("r", &db.url(), &db.table())
    };
    let good = insert_one(&db, "a", r#"{"order": 1}"#).await;
    let bad = insert_one(&db, "a", r#"{"order": "one"}"#).await;
    let after = insert_one(&db, "a", r#"{"order": 3}"#).await;
    let other = insert_one(&db, "b", r#"{"order": 2}"#).await;
    f.services().create_relay(spec).await.expect("create the relay");
    let ticking = tick(&clock);
    eventually("three rows published and one dead-lettered", || async {
        let s = f.services().relay("r").await.expect("relay").state;
        s.published == 3 && s.dead_lettered == 1
    })
    .await;
    ticking.abort();

    let mut got = delivered(&f, kind, 3).await;
    got.sort();
    let mut expected = vec![good, after, other];
    expected.sort();
    assert_eq!(got, expected, "{kind:?}: every row but the refused one reached the target");
    let request = ReceiveRequest { max: 10, wait_ms: Some(0), visibility_timeout_ms: None };
    let dead = f.store.receive("dlq", request).await.expect("dlq");
    assert_eq!(dead.len(), 1, "{kind:?}");
    let text = |name: &str| match dead[0].message.content.attributes.get(name).map(|a| &a.value) {
        Some(AttributeData::Text(t)) => t.clone(),
        _ => String::new(),
    };
    assert_eq!(text(OUTBOX_ID), bad);
    let reason = text(RELAY_ERROR);
    assert!(reason.contains("order.placed") && reason.contains("/order"), "{kind:?}: {reason}");
}
