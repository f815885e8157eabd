//! The saga orchestrator end to end over the real embedded store on a manual clock, with
//! participants that are real HTTP services on port 0 (and a queue step answered through
//! `Sagas::reply`): the happy path with templates and the headers participants deduplicate by,
//! a step that fails for good and the reverse compensation it starts, retries after 503 on the
//! clock's backoff, a cancel, an attempt in flight across a restart, and the alert a failed
//! compensation raises (also over PostgreSQL when `SLUICE_TEST_PG_URL` is set).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};
use sluice_clock::ManualClock;
use sluice_core::QueueAttributes;
use sluice_core::message::AttributeData;
use sluice_core::name::Namespace;
use sluice_core::saga::{Outcome, RetryPolicy, SagaInstance, SagaStatus, StepCall, StepDef, StepStatus};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_services::topics::Arns;
use sluice_services::{Services, ServicesConfig};
use sluice_store::ReceiveRequest;
use sluice_store::prelude::*;

#[path = "common/pg.rs"]
mod pg;

const T0_MS: u64 = 1_767_225_600_000;

/// What a participant was asked: `(path, idempotency key, correlation id, body)`.
type Calls = Arc<Mutex<Vec<(String, String, String, Value)>>>;

/// A participant: every path answers 200 with `{"id": "<path>-1"}`, except those scripted to
/// answer other statuses first (`path → statuses, in order`).
#[derive(Clone, Default)]
struct Participant {
    calls: Calls,
    script: Arc<Mutex<HashMap<String, Vec<u16>>>>,
}

async fn handle(
    State(p): State<Participant>,
    Path(path): Path<String>,
    headers: HeaderMap,
    body: String,
) -> (StatusCode, String) {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    p.calls.lock().unwrap().push((path.clone(), header("idempotency-key"), header("x-correlation-id"), body));
    let scripted = p.script.lock().unwrap().get_mut(&path).and_then(|s| (!s.is_empty()).then(|| s.remove(0)));
    match scripted {
        Some(status) => (StatusCode::from_u16(status).unwrap(), format!("scripted {status}")),
        None => (StatusCode::OK, json!({ "id": format!("{path}-1") }).to_string()),
    }
}

impl Participant {
    async fn start() -> (Participant, String) {
        let p = Participant::default();
        let app = axum::Router::new().route("/{path}", post(handle)).with_state(p.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (p, url)
    }

    fn paths(&self) -> Vec<String> {
        self.calls.lock().unwrap().iter().map(|c| c.0.clone()).collect()
    }
}

fn http(url: &str, path: &str, body: Value) -> StepCall {
    StepCall::Http { url: format!("{url}/{path}"), method: "POST".into(), body: Some(body) }
}

fn step(name: &str, action: StepCall, compensation: Option<StepCall>) -> StepDef {
    let retry = RetryPolicy {
        max_attempts: 3,
        backoff: sluice_core::jobs::JobBackoff { initial_ms: 1_000, max_ms: 10_000, ..Default::default() },
    };
    StepDef { name: name.into(), action, compensation, retry, timeout_ms: 5_000 }
}

/// reserve → charge → ship, each with an undo.
fn order_steps(url: &str) -> Vec<StepDef> {
    vec![
        step(
            "reserve",
            http(url, "reserve", json!({ "sku": "{{input.sku}}" })),
            Some(http(url, "release", json!("{{steps.reserve.output.id}}"))),
        ),
        step(
            "charge",
            http(url, "charge", json!({ "amount": "{{input.amount}}", "hold": "{{steps.reserve.output.id}}" })),
            Some(http(url, "refund", json!({}))),
        ),
        step("ship", http(url, "ship", json!({})), None),
    ]
}

struct Node {
    services: Arc<Services>,
    orchestrator: tokio::task::JoinHandle<()>,
}

impl Drop for Node {
    fn drop(&mut self) {
        self.orchestrator.abort();
    }
}

fn node(store: Arc<dyn Store>, clock: &ManualClock) -> Node {
    let arns = Arns { region: "us-east-1".into(), account: "000000000000".into() };
    let services = Services::new(store, Arc::new(clock.clone()), ServicesConfig::new(arns));
    let orchestrator = services.sagas().spawn();
    Node { services, orchestrator }
}

fn open(dir: &std::path::Path, clock: &ManualClock) -> Arc<EmbeddedStore> {
    let config = EmbeddedConfig { data_dir: dir.to_path_buf(), durability: Durability::Fsync };
    Arc::new(EmbeddedStore::open_with_clock(config, Arc::new(clock.clone())).expect("open"))
}

/// Waits (in real time, for the orchestrator's tasks) until `done` holds for the instance.
async fn until(node: &Node, id: &str, done: impl Fn(&SagaInstance) -> bool) -> SagaInstance {
    for _ in 0..1_000 {
        let instance = node.services.sagas().get(id).await.unwrap();
        if done(&instance) {
            return instance;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("instance {id} never got there: {:#?}", node.services.sagas().get(id).await.unwrap());
}

fn settled(i: &SagaInstance) -> bool {
    i.status.is_settled()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_run_in_order_with_templates_and_the_headers_participants_deduplicate_by() {
    let (participant, url) = Participant::start().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0_MS);
    let node = node(open(dir.path(), &clock), &clock);
    let sagas = node.services.sagas();
    let (definition, created) = sagas.define("order", order_steps(&url)).await.unwrap();
    assert_eq!((definition.version, created), (1, true));
    assert_eq!(
        sagas.define("order", order_steps(&url)).await.unwrap().0.version,
        1,
        "the same steps again: no new version"
    );
    let started = sagas.start("order", json!({ "sku": "b-7", "amount": 42 }), Some("order-7".into())).await.unwrap();
    let done = until(&node, &started.id, settled).await;
    assert_eq!(done.status, SagaStatus::Completed, "{done:#?}");
    assert_eq!(participant.paths(), ["reserve", "charge", "ship"]);
    let calls = participant.calls.lock().unwrap().clone();
    assert_eq!(calls[0].3, json!({ "sku": "b-7" }));
    assert_eq!(calls[1].3, json!({ "amount": 42, "hold": "reserve-1" }), "typed input and an earlier output");
    assert_eq!(
        (calls[1].1.as_str(), calls[1].2.as_str()),
        (format!("{}/charge/action", started.id).as_str(), "order-7")
    );
    assert_eq!(done.steps[2].output, Some(json!({ "id": "ship-1" })));
    assert_eq!(done.version, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_fails_for_good_compensates_what_completed_in_reverse() {
    let (participant, url) = Participant::start().await;
    participant.script.lock().unwrap().insert("charge".into(), vec![402]);
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0_MS);
    let node = node(open(dir.path(), &clock), &clock);
    let sagas = node.services.sagas();
    sagas.define("order", order_steps(&url)).await.unwrap();
    let started = sagas.start("order", json!({ "sku": "b-7", "amount": 42 }), None).await.unwrap();
    let done = until(&node, &started.id, settled).await;
    assert_eq!(done.status, SagaStatus::Compensated, "{done:#?}");
    // The declined charge took no effect: only the reservation is undone, with its own key.
    assert_eq!(participant.paths(), ["reserve", "charge", "release"]);
    let release = participant.calls.lock().unwrap()[2].clone();
    assert_eq!((release.1, release.3), (format!("{}/reserve/compensation", started.id), json!("reserve-1")));
    let statuses: Vec<StepStatus> = done.steps.iter().map(|s| s.status).collect();
    assert_eq!(statuses, [StepStatus::Compensated, StepStatus::Failed, StepStatus::Skipped]);
    assert!(done.error.as_deref().unwrap().contains("402"), "{:?}", done.error);
    assert_eq!(done.correlation_id, started.id, "the correlation id defaults to the instance's id");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_is_retried_after_the_backoff_on_the_clock() {
    let (participant, url) = Participant::start().await;
    participant.script.lock().unwrap().insert("reserve".into(), vec![503]);
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0_MS);
    let node = node(open(dir.path(), &clock), &clock);
    let sagas = node.services.sagas();
    sagas.define("order", order_steps(&url)).await.unwrap();
    let started = sagas.start("order", json!({ "sku": "b-7", "amount": 1 }), None).await.unwrap();
    let waiting = until(&node, &started.id, |i| i.steps[0].attempts == 1 && i.steps[0].in_flight.is_none()).await;
    let retry_at = waiting.steps[0].next_at_ms.expect("a retry is planned");
    assert!((T0_MS..=T0_MS + 1_000).contains(&retry_at), "within the first backoff bound: {retry_at}");
    assert_eq!(participant.paths(), ["reserve"], "nothing more before the clock moves");
    clock.advance_to(retry_at);
    let done = until(&node, &started.id, settled).await;
    assert_eq!((done.status, done.steps[0].attempts), (SagaStatus::Completed, 2));
    let keys: Vec<String> = participant.calls.lock().unwrap().iter().take(2).map(|c| c.1.clone()).collect();
    assert_eq!(keys[0], keys[1], "every attempt of one call carries the same key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_step_waits_for_its_reply_and_survives_a_restart_in_flight() {
    let (participant, url) = Participant::start().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0_MS);
    let store = open(dir.path(), &clock);
    store.create_queue("warehouse", QueueAttributes::default()).await.unwrap();
    let steps = vec![
        step("reserve", http(&url, "reserve", json!({})), Some(http(&url, "release", json!({})))),
        step(
            "ship",
            StepCall::Queue {
                queue: "warehouse".into(),
                body: json!({ "sku": "{{input.sku}}" }),
                reply_timeout_ms: Some(60_000),
                reply_queue: None,
            },
            None,
        ),
    ];
    let first = node(store.clone(), &clock);
    first.services.sagas().define("ship", steps).await.unwrap();
    let started = first.services.sagas().start("ship", json!({ "sku": "b-7" }), Some("o-9".into())).await.unwrap();
    until(&first, &started.id, |i| i.steps[1].in_flight.is_some()).await;
    // The attempt is recorded in flight before its message is sent (so that a crash between
    // the two sends it again): the message follows within moments.
    let request = ReceiveRequest { max: 1, wait_ms: Some(5_000), visibility_timeout_ms: None };
    let message = store.receive("warehouse", request).await.unwrap();
    assert_eq!(message.len(), 1);
    let content = &message[0].message.content;
    assert_eq!(serde_json::from_slice::<Value>(&content.body).unwrap(), json!({ "sku": "b-7" }));
    let attribute = |name: &str| match &content.attributes[name].value {
        AttributeData::Text(t) => t.clone(),
        AttributeData::Bytes(_) => panic!("{name} is text"),
    };
    assert_eq!(attribute("Idempotency-Key"), format!("{}/ship/action", started.id));
    assert_eq!((attribute("sluice.saga.step"), attribute("sluice.saga.attempt")), ("ship".into(), "1".into()));

    // The node stops with the attempt in flight; a new one takes over from the stored instance.
    drop(first);
    let second = node(store.clone(), &clock);
    clock.advance_by(60_000);
    let lapsed = until(&second, &started.id, |i| i.steps[1].next_at_ms.is_some()).await;
    assert_eq!(lapsed.steps[1].history[0].outcome.as_deref(), Some("timed_out"));
    assert!(lapsed.steps[1].maybe_applied);
    clock.advance_to(lapsed.steps[1].next_at_ms.unwrap());
    let retried = until(&second, &started.id, |i| i.steps[1].attempts == 2).await;
    assert_eq!(retried.status, SagaStatus::Running, "no answer within its deadline: tried again");
    let sagas = second.services.sagas();
    assert_eq!(
        sagas
            .reply(&Namespace::default(), "o-9", "ship", None, Some(2), Outcome::Succeeded(json!({ "tracking": "T1" })))
            .await,
        Ok(1)
    );
    let done = until(&second, &started.id, settled).await;
    assert_eq!((done.status, done.steps[1].output.clone()), (SagaStatus::Completed, Some(json!({ "tracking": "T1" }))));
    assert!(
        sagas
            .reply(&Namespace::default(), "o-9", "ship", None, Some(2), Outcome::Succeeded(json!(null)))
            .await
            .is_err(),
        "nothing waits any more"
    );
    assert_eq!(participant.paths(), ["reserve"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_compensates_what_completed() {
    let (participant, url) = Participant::start().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0_MS);
    let store = open(dir.path(), &clock);
    store.create_queue("approvals", QueueAttributes::default()).await.unwrap();
    let steps = vec![
        step("reserve", http(&url, "reserve", json!({})), Some(http(&url, "release", json!({})))),
        step(
            "approve",
            StepCall::Queue { queue: "approvals".into(), body: json!({}), reply_timeout_ms: None, reply_queue: None },
            None,
        ),
    ];
    let node = node(store, &clock);
    let sagas = node.services.sagas();
    sagas.define("approval", steps).await.unwrap();
    let started = sagas.start("approval", json!({}), None).await.unwrap();
    until(&node, &started.id, |i| i.steps[1].in_flight.is_some()).await;
    sagas.cancel(&started.id).await.unwrap();
    // The approval in flight may still come: the instance waits for it or its deadline.
    clock.advance_by(5_000);
    let done = until(&node, &started.id, settled).await;
    assert_eq!(done.status, SagaStatus::Compensated, "{done:#?}");
    assert_eq!(participant.paths(), ["reserve", "release"]);
    assert!(sagas.cancel(&started.id).await.is_err(), "a settled instance cannot be cancelled");
    let listed = sagas
        .instances(&Namespace::default(), Some("approval"), Some(SagaStatus::Compensated), None, 10)
        .await
        .unwrap();
    let ids: Vec<&str> = listed.instances.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, [started.id.as_str()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compensation_that_fails_leaves_the_instance_failed_with_an_alert_until_retried() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0_MS);
    compensation_failure_alerts(open(dir.path(), &clock), clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compensation_that_fails_alerts_until_retried_on_postgresql() {
    let Some((store, schema)) = pg::store().await else { return };
    compensation_failure_alerts(store, ManualClock::new(T0_MS)).await;
    schema.drop_schema().await;
}

/// A failed compensation raises the built-in `saga-failed` alert, which names the instance and
/// resolves once a retried compensation goes through.
async fn compensation_failure_alerts(store: Arc<dyn Store>, clock: ManualClock) {
    use sluice_services::alerts::{BUILTIN_SAGA_RULE, Status};
    let (participant, url) = Participant::start().await;
    // The charge is declined and the release refused for good (a 4xx is not retried).
    participant.script.lock().unwrap().insert("charge".into(), vec![402]);
    participant.script.lock().unwrap().insert("release".into(), vec![400]);
    let node = node(store, &clock);
    let (sagas, alerts) = (node.services.sagas(), node.services.alerts());
    sagas.define("order", order_steps(&url)).await.unwrap();
    let started = sagas.start("order", json!({ "sku": "b-7", "amount": 42 }), None).await.unwrap();
    let failed = until(&node, &started.id, settled).await;
    assert_eq!(failed.status, SagaStatus::Failed, "{failed:#?}");
    assert_eq!(failed.steps[0].status, StepStatus::CompensationFailed);

    let outcome = alerts.evaluate().await.unwrap();
    assert_eq!((outcome.fired, outcome.firing), (1, 1), "{outcome:?}");
    let firing = alerts.alerts(false).await.unwrap();
    assert_eq!(firing.len(), 1);
    let (state, rule) = &firing[0];
    assert_eq!((rule.name.as_str(), state.status), (BUILTIN_SAGA_RULE, Status::Firing));
    assert_eq!(state.subject, format!("order/{}", started.id), "the alert names the instance");

    // A person fixes the participant and retries: the release goes through, the alert resolves.
    let retried = sagas.retry_compensation(&started.id).await.unwrap();
    assert_eq!(retried.status, SagaStatus::Compensating);
    let done = until(&node, &started.id, settled).await;
    assert_eq!(done.status, SagaStatus::Compensated, "{done:#?}");
    assert_eq!(participant.paths(), ["reserve", "charge", "release", "release"]);
    clock.advance_by(5_000);
    let outcome = alerts.evaluate().await.unwrap();
    assert_eq!((outcome.resolved, outcome.firing), (1, 0), "{outcome:?}");
    assert!(alerts.alerts(true).await.unwrap().is_empty());
}
