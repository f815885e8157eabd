//! The causal trace of a saga run by the orchestrator over real stores, on a manual clock: the
//! start, each step attempt and each step's message are listed in causal order by the saga's
//! correlation id, a second node over the same store reads the same trace, and entries past the
//! retention are no longer read and are swept. Over the embedded store, and over PostgreSQL
//! with `SLUICE_TEST_PG_URL`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use sluice_clock::ManualClock;
use sluice_core::message::AttributeData;
use sluice_core::saga::{RetryPolicy, SagaStatus, StepCall, StepDef};
use sluice_core::{MessageEnvelope, NewMessage, QueueAttributes};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_services::sagas::{ATTR_ATTEMPT, ATTR_CORRELATION_ID, ATTR_KIND, ATTR_STEP};
use sluice_services::topics::Arns;
use sluice_services::trace::TraceKind;
use sluice_services::{Services, ServicesConfig};
use sluice_store::prelude::*;
use sluice_store::{ReceiveRequest, ReceivedMessage};

#[path = "common/pg.rs"]
mod pg;

const T0_MS: u64 = 1_767_225_600_000;
const HOUR_MS: u64 = 60 * 60 * 1000;
const REPLIES: &str = "trace-replies";

fn services(store: &Arc<dyn Store>, clock: &ManualClock) -> Arc<Services> {
    let arns = Arns { region: "us-east-1".into(), account: "000000000000".into() };
    let config = ServicesConfig { trace_retention_ms: HOUR_MS, ..ServicesConfig::new(arns) };
    Services::new(store.clone(), Arc::new(clock.clone()), config)
}

async fn take(store: &Arc<dyn Store>, queue: &str) -> ReceivedMessage {
    for _ in 0..60 {
        let request = ReceiveRequest { max: 1, wait_ms: Some(500), visibility_timeout_ms: None };
        if let Some(m) = store.receive(queue, request).await.unwrap().pop() {
            store.ack(queue, vec![m.receipt.clone()]).await.unwrap();
            return m;
        }
    }
    panic!("no message came to {queue}");
}

async fn scenario(store: Arc<dyn Store>, clock: ManualClock) {
    for queue in ["inventory", REPLIES] {
        store.create_queue(queue, QueueAttributes::default()).await.unwrap();
    }
    let node_a = services(&store, &clock);
    let node_b = services(&store, &clock);
    let orchestrator = node_a.sagas().spawn();
    let step = StepDef {
        name: "reserve".into(),
        action: StepCall::Queue {
            queue: "inventory".into(),
            body: json!({ "sku": "{{input.sku}}" }),
            reply_timeout_ms: None,
            reply_queue: Some(REPLIES.into()),
        },
        compensation: None,
        retry: RetryPolicy { max_attempts: 1, ..RetryPolicy::default() },
        timeout_ms: 60_000,
    };
    node_a.sagas().define("order", vec![step]).await.unwrap();
    let instance = node_a.sagas().start("order", json!({ "sku": "b-7" }), Some("order-t".into())).await.unwrap();
    let message = take(&store, "inventory").await;
    assert_eq!(message.message.content.envelope.correlation_id.as_deref(), Some("order-t"));
    // The participant answers through the reply queue, its attributes copied.
    let attributes = [ATTR_CORRELATION_ID, ATTR_STEP, ATTR_KIND, ATTR_ATTEMPT]
        .iter()
        .map(|name| (name.to_string(), message.message.content.attributes[*name].clone()))
        .collect();
    let reply = NewMessage {
        body: br#"{"ok": true}"#.to_vec(),
        attributes,
        envelope: MessageEnvelope::default(),
        ..Default::default()
    };
    assert!(store.send(REPLIES, vec![reply]).await.unwrap()[0].is_ok());
    for _ in 0..1_000 {
        if node_a.sagas().get(&instance.id).await.unwrap().status.is_settled() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(node_a.sagas().get(&instance.id).await.unwrap().status, SagaStatus::Completed);
    orchestrator.abort();

    // Read on the other node: the saga, its step's attempt, the step's message, each below
    // its cause.
    let trace = node_b.traces().read("order-t").await.unwrap();
    let listed: Vec<(TraceKind, &str, usize)> =
        trace.entries.iter().map(|(e, depth)| (e.kind, e.id.as_str(), *depth)).collect();
    let attempt = format!("{}/reserve/action/1", instance.id);
    let message_id = message.message.meta.id.to_string();
    assert_eq!(
        listed,
        vec![
            (TraceKind::Saga, instance.id.as_str(), 0),
            (TraceKind::SagaStep, attempt.as_str(), 1),
            (TraceKind::Message, message_id.as_str(), 2),
        ],
        "{trace:#?}"
    );
    let (step_entry, _) = &trace.entries[1];
    assert_eq!(step_entry.target, "saga:order");
    assert_eq!(step_entry.detail.as_deref(), Some("reserve action attempt 1"));
    let (message_entry, _) = &trace.entries[2];
    assert_eq!(message_entry.target, "queue:inventory");
    assert!(trace.entries.iter().all(|(e, _)| e.at_ms == T0_MS), "recorded on the services' clock");
    let AttributeData::Text(kind) = &message.message.content.attributes[ATTR_KIND].value else { panic!("text") };
    assert_eq!(kind, "action");

    // Past the retention: not read, then swept by either node.
    clock.advance_by(HOUR_MS);
    assert!(node_b.traces().read("order-t").await.unwrap().entries.is_empty());
    assert_eq!(node_b.traces().sweep_once().await.unwrap(), 3);
    assert_eq!(node_a.traces().sweep_once().await.unwrap(), 0, "deleting again deletes nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sagas_trace_on_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0_MS);
    let config = EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync };
    let store = EmbeddedStore::open_with_clock(config, Arc::new(clock.clone())).expect("open");
    scenario(Arc::new(store), clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sagas_trace_on_postgresql() {
    let Some((store, schema)) = pg::store().await else { return };
    scenario(store, ManualClock::new(T0_MS)).await;
    schema.drop_schema().await;
}
