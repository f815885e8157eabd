//! Reply queues: participants answer queue steps with messages to the step's `reply_queue`,
//! which the orchestrator consumes. The test is the participant: it takes each step's message,
//! checks what it names, and answers through the reply queue (with the message's attributes
//! copied, or with every field in the body); a duplicate and a message that is no reply are
//! acknowledged and change nothing. Over the embedded store, and over PostgreSQL with
//! `SLUICE_TEST_PG_URL`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sluice_clock::ManualClock;
use sluice_core::message::{AttributeData, AttributeValue};
use sluice_core::saga::{RetryPolicy, SagaInstance, SagaStatus, StepCall, StepDef, StepStatus};
use sluice_core::{MessageEnvelope, NewMessage, QueueAttributes};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_services::sagas::{ATTR_ATTEMPT, ATTR_CORRELATION_ID, ATTR_KIND, ATTR_REPLY_QUEUE, ATTR_STEP};
use sluice_services::topics::Arns;
use sluice_services::{Services, ServicesConfig};
use sluice_store::prelude::*;
use sluice_store::{ReceiveRequest, ReceivedMessage};

#[path = "common/pg.rs"]
mod pg;

const T0_MS: u64 = 1_767_225_600_000;
const REPLIES: &str = "saga-replies";

fn queue_call(queue: &str, body: Value) -> StepCall {
    StepCall::Queue { queue: queue.into(), body, reply_timeout_ms: None, reply_queue: Some(REPLIES.into()) }
}

fn steps() -> Vec<StepDef> {
    let step = |name: &str, action, compensation| StepDef {
        name: name.into(),
        action,
        compensation,
        retry: RetryPolicy { max_attempts: 1, ..RetryPolicy::default() },
        // The manual clock never reaches it: only answers move these instances.
        timeout_ms: 60_000,
    };
    vec![
        step(
            "reserve",
            queue_call("inventory", json!({ "sku": "{{input.sku}}" })),
            Some(queue_call("inventory", json!({ "release": "{{steps.reserve.output.hold}}" }))),
        ),
        step("ship", queue_call("warehouse", json!({})), None),
    ]
}

fn text(message: &ReceivedMessage, name: &str) -> String {
    match &message.message.content.attributes[name].value {
        AttributeData::Text(t) => t.clone(),
        AttributeData::Bytes(_) => panic!("{name} is text"),
    }
}

/// The next message of `queue` (long polls in real time), acknowledged.
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

/// Sends `body` to the reply queue with the attributes of `to` copied (when given).
async fn answer(store: &Arc<dyn Store>, to: Option<&ReceivedMessage>, body: &[u8]) {
    let attributes: BTreeMap<String, AttributeValue> = match to {
        Some(m) => [ATTR_CORRELATION_ID, ATTR_STEP, ATTR_KIND, ATTR_ATTEMPT]
            .iter()
            .map(|name| (name.to_string(), m.message.content.attributes[*name].clone()))
            .collect(),
        None => BTreeMap::new(),
    };
    let message =
        NewMessage { body: body.to_vec(), attributes, envelope: MessageEnvelope::default(), ..Default::default() };
    assert!(store.send(REPLIES, vec![message]).await.unwrap()[0].is_ok());
}

async fn until(services: &Services, id: &str, done: impl Fn(&SagaInstance) -> bool) -> SagaInstance {
    for _ in 0..2_000 {
        let instance = services.sagas().get(id).await.unwrap();
        if done(&instance) {
            return instance;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("instance {id} never got there: {:#?}", services.sagas().get(id).await.unwrap());
}

/// Waits until the reply queue holds nothing, visible, in flight or delayed.
async fn drained(store: &Arc<dyn Store>) {
    for _ in 0..2_000 {
        let s = store.get_queue(REPLIES).await.unwrap().stats;
        if s.visible + s.in_flight + s.delayed == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the reply queue was never drained: {:?}", store.get_queue(REPLIES).await.unwrap().stats);
}

async fn scenario(store: Arc<dyn Store>, clock: &ManualClock) {
    for queue in ["inventory", "warehouse"] {
        store.create_queue(queue, QueueAttributes::default()).await.unwrap();
    }
    let arns = Arns { region: "us-east-1".into(), account: "000000000000".into() };
    let services = Services::new(store.clone(), Arc::new(clock.clone()), ServicesConfig::new(arns));
    let orchestrator = services.sagas().spawn();
    let sagas = services.sagas();
    sagas.define("order", steps()).await.unwrap();

    // Answers through the reply queue, the attributes copied from each step's message; the
    // reply queue is created only after the definition named it.
    let a = sagas.start("order", json!({ "sku": "b-7" }), Some("order-a".into())).await.unwrap();
    let reserve = take(&store, "inventory").await;
    assert_eq!(text(&reserve, ATTR_REPLY_QUEUE), REPLIES, "the message names where to answer");
    assert_eq!((text(&reserve, ATTR_STEP), text(&reserve, ATTR_KIND)), ("reserve".into(), "action".into()));
    store.create_queue(REPLIES, QueueAttributes::default()).await.unwrap();
    answer(&store, Some(&reserve), br#"{"ok": true, "output": {"hold": "h-1"}}"#).await;
    let ship = take(&store, "warehouse").await;
    answer(&store, Some(&ship), br#"{"ok": true, "output": {"tracking": "T-1"}}"#).await;
    let done = until(&services, &a.id, |i| i.status.is_settled()).await;
    assert_eq!(done.status, SagaStatus::Completed, "{done:#?}");
    assert_eq!(done.steps[0].output, Some(json!({ "hold": "h-1" })));
    assert_eq!(done.steps[1].output, Some(json!({ "tracking": "T-1" })));

    // A duplicate answer, and a message that is no answer: acknowledged, nothing changed.
    answer(&store, Some(&ship), br#"{"ok": false, "error": "late"}"#).await;
    answer(&store, None, b"not json").await;
    drained(&store).await;
    assert_eq!(sagas.get(&a.id).await.unwrap(), done, "a late or malformed reply changes nothing");

    // Every field in the body, no attributes: a failure for good compensates the reservation,
    // whose compensation is answered through the reply queue too.
    let b = sagas.start("order", json!({ "sku": "b-8" }), Some("order-b".into())).await.unwrap();
    let reserve = take(&store, "inventory").await;
    answer(&store, Some(&reserve), br#"{"ok": true, "output": {"hold": "h-2"}}"#).await;
    take(&store, "warehouse").await;
    let refusal =
        json!({ "correlation_id": "order-b", "step": "ship", "ok": false, "error": "no stock", "retry": false });
    answer(&store, None, refusal.to_string().as_bytes()).await;
    let release = take(&store, "inventory").await;
    assert_eq!(text(&release, ATTR_KIND), "compensation");
    assert_eq!(serde_json::from_slice::<Value>(&release.message.content.body).unwrap(), json!({ "release": "h-2" }));
    answer(&store, Some(&release), br#"{"ok": true}"#).await;
    let undone = until(&services, &b.id, |i| i.status.is_settled()).await;
    assert_eq!(undone.status, SagaStatus::Compensated, "{undone:#?}");
    let statuses: Vec<StepStatus> = undone.steps.iter().map(|s| s.status).collect();
    assert_eq!(statuses, [StepStatus::Compensated, StepStatus::Failed]);
    assert!(undone.steps[1].error.as_deref().unwrap_or_default().contains("no stock"), "{undone:#?}");
    drained(&store).await;
    orchestrator.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn participants_answer_through_the_reply_queue_on_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0_MS);
    let config = EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync };
    let store = EmbeddedStore::open_with_clock(config, Arc::new(clock.clone())).expect("open");
    scenario(Arc::new(store), &clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn participants_answer_through_the_reply_queue_on_postgresql() {
    let Some((store, schema)) = pg::store().await else { return };
    scenario(store, &ManualClock::new(T0_MS)).await;
    schema.drop_schema().await;
}
