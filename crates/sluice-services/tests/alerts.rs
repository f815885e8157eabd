//! Alert evaluation on a manual clock, over the real embedded store and, with
//! `SLUICE_TEST_PG_URL`, over PostgreSQL with two services standing for two nodes: firing after
//! `for_ms`, resolving, no notification for a condition shorter than `for_ms`, the built-in rule,
//! state across a restart, and one notification per change however many nodes evaluate.
//!
//! Evaluations are called by hand (`Alerts::evaluate`) at chosen clock times, and notifications
//! are read from the rule's notification queue, where the push worker (not started here) would
//! take them from; so every assertion is about an exact sequence, never about waiting.

use std::sync::Arc;

use serde_json::Value;
use sluice_clock::ManualClock;
use sluice_core::{DeadLetter, NewMessage, QueueAttributes};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_services::alerts::{
    AlertError, BUILTIN_DLQ_RULE, BUILTIN_RULES, BUILTIN_SAGA_RULE, Kind, RuleSpec, Status, queue_name,
};
use sluice_services::topics::Arns;
use sluice_services::{Services, ServicesConfig};
use sluice_store::prelude::*;

const T0_MS: u64 = 1_767_225_600_000;
const HOOK: &str = "http://127.0.0.1:9/alerts";

fn services(store: Arc<dyn Store>, clock: &ManualClock) -> Arc<Services> {
    let arns = Arns { region: "us-east-1".into(), account: "000000000000".into() };
    Services::new(store, Arc::new(clock.clone()), ServicesConfig::new(arns))
}

/// Turns the built-in rules off, for tests of rules of their own.
async fn without_builtin(services: &Services) {
    for name in BUILTIN_RULES {
        services.alerts().delete_rule(name).await.expect("turn the built-in rule off");
    }
}

struct Embedded {
    store: Arc<EmbeddedStore>,
    _dir: tempfile::TempDir,
}

fn embedded(clock: &ManualClock) -> Embedded {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync };
    let store = Arc::new(EmbeddedStore::open_with_clock(config, Arc::new(clock.clone())).expect("open"));
    Embedded { store, _dir: dir }
}

fn rule(name: &str, kind: Kind, target: &str, threshold: f64, for_ms: u64) -> RuleSpec {
    RuleSpec { name: name.into(), kind, target: target.into(), threshold, for_ms, webhook: Some(HOOK.into()) }
}

/// A queue `jobs` whose dead-letter queue is `jobs-dlq`.
async fn queues(store: &dyn Store) {
    store.create_queue("jobs-dlq", QueueAttributes::default()).await.expect("dlq");
    let dead_letter = Some(DeadLetter { queue: "jobs-dlq".into(), max_receive_count: 3 });
    store.create_queue("jobs", QueueAttributes { dead_letter, ..QueueAttributes::default() }).await.expect("jobs");
}

async fn send(store: &dyn Store, queue: &str, n: usize) {
    let messages = (0..n).map(|i| NewMessage { body: format!("m{i}").into_bytes(), ..Default::default() }).collect();
    for result in store.send(queue, messages).await.expect("send") {
        result.expect("sent");
    }
}

/// `(status, subject, sequence)` of every notification waiting in a rule's queue, in order.
async fn notifications(store: &dyn Store, rule: &str) -> Vec<(String, String, u64)> {
    let peeked = store.peek(&queue_name(rule), 1_000).await.expect("peek the alert queue");
    peeked
        .iter()
        .map(|p| {
            let delivery: Value = serde_json::from_slice(&p.message.content.body).expect("a push delivery");
            let body: Value = serde_json::from_str(delivery["body"].as_str().expect("a body")).expect("JSON");
            let text = |k: &str| body[k].as_str().expect(k).to_string();
            (text("status"), text("subject"), body["sequence"].as_u64().expect("sequence"))
        })
        .collect()
}

fn n(status: &str, subject: &str, sequence: u64) -> (String, String, u64) {
    (status.to_string(), subject.to_string(), sequence)
}

/// Evaluates at `at_ms` and returns (fired, resolved).
async fn evaluate_at(services: &Services, clock: &ManualClock, at_ms: u64) -> (u64, u64) {
    clock.advance_to(at_ms);
    let outcome = services.alerts().evaluate().await.expect("evaluate");
    assert!(outcome.evaluated, "a single node holds the lease");
    (outcome.fired, outcome.resolved)
}

#[tokio::test]
async fn an_alert_fires_after_for_ms_and_resolves_with_one_notification_each() {
    let clock = ManualClock::new(T0_MS);
    let db = embedded(&clock);
    let store: Arc<dyn Store> = db.store.clone();
    let services = services(store.clone(), &clock);
    queues(store.as_ref()).await;
    without_builtin(&services).await;
    let (view, created) =
        services.alerts().create_rule(rule("dlq-big", Kind::DlqDepthAbove, "*-dlq", 2.0, 10_000)).await.unwrap();
    assert!(created && view.record.signing_secret.as_ref().is_some_and(|s| s.len() == 64));

    send(store.as_ref(), "jobs-dlq", 3).await;
    assert_eq!(evaluate_at(&services, &clock, T0_MS).await, (0, 0), "pending, for_ms not over");
    let pending = services.alerts().alerts(true).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!((pending[0].0.status, pending[0].0.since_ms), (Status::Pending, T0_MS));
    assert!(services.alerts().alerts(false).await.unwrap().is_empty(), "not firing yet");
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 5_000).await, (0, 0));
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 10_000).await, (1, 0), "fires once for_ms is over");
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 15_000).await, (0, 0), "fires once");
    let firing = services.alerts().alerts(false).await.unwrap();
    assert_eq!(firing.len(), 1);
    let (state, rule) = &firing[0];
    assert_eq!((state.status, state.since_ms, state.value), (Status::Firing, T0_MS + 10_000, 3.0));
    assert_eq!((rule.name.as_str(), state.subject.as_str()), ("dlq-big", "jobs-dlq"));

    store.purge_queue("jobs-dlq").await.unwrap();
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 20_000).await, (0, 1));
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 25_000).await, (0, 0));
    assert!(services.alerts().alerts(true).await.unwrap().is_empty());
    assert_eq!(
        notifications(store.as_ref(), "dlq-big").await,
        [n("firing", "jobs-dlq", 1), n("resolved", "jobs-dlq", 2)]
    );
}

#[tokio::test]
async fn a_condition_shorter_than_for_ms_never_notifies() {
    let clock = ManualClock::new(T0_MS);
    let db = embedded(&clock);
    let store: Arc<dyn Store> = db.store.clone();
    let services = services(store.clone(), &clock);
    queues(store.as_ref()).await;
    without_builtin(&services).await;
    services.alerts().create_rule(rule("dlq-any", Kind::DlqDepthAbove, "jobs-dlq", 0.0, 15_000)).await.unwrap();
    // Messages for 10 s out of every 15: never the 15 s in a row the rule asks for.
    for cycle in 0..6u64 {
        let start = T0_MS + cycle * 15_000;
        send(store.as_ref(), "jobs-dlq", 1).await;
        evaluate_at(&services, &clock, start).await;
        evaluate_at(&services, &clock, start + 5_000).await;
        store.purge_queue("jobs-dlq").await.unwrap();
        assert_eq!(evaluate_at(&services, &clock, start + 10_000).await, (0, 0), "cycle {cycle}");
    }
    assert_eq!(notifications(store.as_ref(), "dlq-any").await, []);
}

#[tokio::test]
async fn oldest_age_follows_the_clock() {
    let clock = ManualClock::new(T0_MS);
    let db = embedded(&clock);
    let store: Arc<dyn Store> = db.store.clone();
    let services = services(store.clone(), &clock);
    queues(store.as_ref()).await;
    without_builtin(&services).await;
    services.alerts().create_rule(rule("jobs-late", Kind::OldestAgeAboveMs, "jobs", 60_000.0, 0)).await.unwrap();
    send(store.as_ref(), "jobs", 1).await;
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 60_000).await, (0, 0), "exactly the SLO is not above it");
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 60_001).await, (1, 0));
    let firing = services.alerts().alerts(false).await.unwrap();
    assert_eq!(firing[0].0.value, 60_001.0);
    assert_eq!(notifications(store.as_ref(), "jobs-late").await, [n("firing", "jobs", 1)]);
}

#[tokio::test]
async fn the_builtin_rule_watches_every_dlq_until_turned_off() {
    let clock = ManualClock::new(T0_MS);
    let db = embedded(&clock);
    let store: Arc<dyn Store> = db.store.clone();
    let services = services(store.clone(), &clock);
    queues(store.as_ref()).await;
    let rules = services.alerts().list_rules().await.unwrap();
    let names: Vec<(&str, bool)> = rules.iter().map(|r| (r.record.name.as_str(), r.builtin)).collect();
    assert_eq!(names, [(BUILTIN_DLQ_RULE, true), (BUILTIN_SAGA_RULE, true)]);
    assert_eq!(rules[1].record.kind, Kind::SagaFailed);

    send(store.as_ref(), "jobs", 2).await;
    assert_eq!(evaluate_at(&services, &clock, T0_MS).await, (0, 0), "jobs is no dead-letter queue");
    send(store.as_ref(), "jobs-dlq", 1).await;
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 5_000).await, (1, 0), "any DLQ with a message");
    assert_eq!(services.alerts().alerts(false).await.unwrap()[0].0.subject, "jobs-dlq");

    // Replaced under its name (here: to wait a minute), then turned off.
    let spec = RuleSpec { webhook: None, ..rule(BUILTIN_DLQ_RULE, Kind::DlqDepthAbove, "*", 0.0, 60_000) };
    let (view, created) = services.alerts().create_rule(spec.clone()).await.unwrap();
    assert!(created && view.builtin && view.record.for_ms == 60_000);
    let again = services.alerts().create_rule(RuleSpec { for_ms: 1, ..spec.clone() }).await;
    assert!(matches!(again, Err(AlertError::RuleExists(_))), "{again:?}");
    services.alerts().delete_rule(BUILTIN_DLQ_RULE).await.unwrap();
    let left: Vec<String> = services.alerts().list_rules().await.unwrap().into_iter().map(|r| r.record.name).collect();
    assert_eq!(left, [BUILTIN_SAGA_RULE], "the other built-in rule stays");
    assert!(matches!(services.alerts().get_rule(BUILTIN_DLQ_RULE).await, Err(AlertError::RuleNotFound(_))));
    assert!(services.alerts().alerts(true).await.unwrap().is_empty(), "its alerts go with it");
    evaluate_at(&services, &clock, T0_MS + 10_000).await;
    assert!(services.alerts().alerts(true).await.unwrap().is_empty(), "off stays off");
    // Posting it again turns it back on.
    services.alerts().create_rule(RuleSpec { for_ms: 0, ..spec }).await.unwrap();
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 15_000).await, (1, 0));
}

#[tokio::test]
async fn rules_are_limited_and_their_names_unique() {
    let clock = ManualClock::new(T0_MS);
    let db = embedded(&clock);
    let services = services(db.store.clone(), &clock);
    let alerts = services.alerts();
    let spec = rule("a", Kind::LagAbove, "orders/*", 100.0, 0);
    assert!(alerts.create_rule(spec.clone()).await.unwrap().1);
    assert!(!alerts.create_rule(spec.clone()).await.unwrap().1, "the same again is no change");
    let different = alerts.create_rule(RuleSpec { threshold: 5.0, ..spec.clone() }).await;
    assert!(matches!(different, Err(AlertError::RuleExists(_))), "{different:?}");
    let invalid = alerts.create_rule(RuleSpec { target: String::new(), ..spec.clone() }).await;
    assert!(matches!(invalid, Err(AlertError::Invalid(ref v)) if v.field == "target"), "{invalid:?}");
    for i in 1..sluice_services::alerts::ALERT_RULES_MAX {
        let spec = RuleSpec { name: format!("r{i}"), webhook: None, ..spec.clone() };
        alerts.create_rule(spec).await.unwrap();
    }
    let over = alerts.create_rule(RuleSpec { name: "one-more".into(), ..spec.clone() }).await;
    assert!(matches!(over, Err(AlertError::TooManyRules)), "{over:?}");
    alerts.delete_rule("a").await.unwrap();
    assert!(matches!(alerts.delete_rule("a").await, Err(AlertError::RuleNotFound(_))));
    assert!(db.store.get_queue(&queue_name("a")).await.is_err(), "its notification queue is gone");
}

#[tokio::test]
async fn alert_state_survives_a_restart() {
    let clock = ManualClock::new(T0_MS);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = || EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync };
    {
        let store = Arc::new(EmbeddedStore::open_with_clock(config(), Arc::new(clock.clone())).expect("open"));
        let services = services(store.clone(), &clock);
        queues(store.as_ref()).await;
        without_builtin(&services).await;
        services.alerts().create_rule(rule("dlq", Kind::DlqDepthAbove, "*", 0.0, 0)).await.unwrap();
        send(store.as_ref(), "jobs-dlq", 1).await;
        assert_eq!(evaluate_at(&services, &clock, T0_MS).await, (1, 0));
        drop(services);
        store.close();
    }
    let store = Arc::new(EmbeddedStore::open_with_clock(config(), Arc::new(clock.clone())).expect("reopen"));
    let services = services(store.clone(), &clock);
    let firing = services.alerts().alerts(false).await.unwrap();
    assert_eq!((firing.len(), firing[0].0.since_ms), (1, T0_MS), "still firing, since before the restart");
    // A new process holds a new node id: it waits for the old lease to expire.
    clock.advance_to(T0_MS + 5_000);
    assert!(!services.alerts().evaluate().await.unwrap().evaluated, "the old node's lease holds");
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 15_000).await, (0, 0), "no second firing");
    store.purge_queue("jobs-dlq").await.unwrap();
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 20_000).await, (0, 1));
    assert_eq!(notifications(store.as_ref(), "dlq").await, [n("firing", "jobs-dlq", 1), n("resolved", "jobs-dlq", 2)]);
    store.close();
}

/// Two nodes over one store: only the lease holder evaluates; when it stops, the other takes
/// over where it left, and every change is notified exactly once.
async fn two_nodes(store_a: Arc<dyn Store>, store_b: Arc<dyn Store>, clock: &ManualClock) {
    let a = services(store_a.clone(), clock);
    let b = services(store_b.clone(), clock);
    queues(store_a.as_ref()).await;
    without_builtin(&a).await;
    a.alerts().create_rule(rule("dlq", Kind::DlqDepthAbove, "*", 0.0, 5_000)).await.unwrap();
    send(store_a.as_ref(), "jobs-dlq", 1).await;
    let mut evaluated = Vec::new();
    for step in 0..4u64 {
        clock.advance_to(T0_MS + step * 5_000);
        // Both evaluate at each tick, in either order.
        let (first, second) = if step % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let x = first.alerts().evaluate().await.unwrap();
        let y = second.alerts().evaluate().await.unwrap();
        evaluated.push((x.evaluated, y.evaluated));
        assert_ne!(x.evaluated, y.evaluated, "exactly one node evaluates at step {step}");
    }
    assert_eq!(notifications(store_a.as_ref(), "dlq").await, [n("firing", "jobs-dlq", 1)]);
    // The holder stops and lets the lease go: the other evaluates at its next tick.
    let holder_is_a = evaluated[0] == (true, false);
    let (holder, other) = if holder_is_a { (&a, &b) } else { (&b, &a) };
    holder.alerts().release().await;
    store_a.purge_queue("jobs-dlq").await.unwrap();
    clock.advance_to(T0_MS + 20_000);
    let outcome = other.alerts().evaluate().await.unwrap();
    assert!(outcome.evaluated && outcome.resolved == 1, "{outcome:?}");
    assert!(!holder.alerts().evaluate().await.unwrap().evaluated, "the lease moved");
    assert_eq!(
        notifications(store_b.as_ref(), "dlq").await,
        [n("firing", "jobs-dlq", 1), n("resolved", "jobs-dlq", 2)]
    );
}

#[tokio::test]
async fn one_node_evaluates_and_notifies_once_on_a_shared_store() {
    let clock = ManualClock::new(T0_MS);
    let db = embedded(&clock);
    two_nodes(db.store.clone(), db.store.clone(), &clock).await;
}

#[tokio::test]
async fn one_node_evaluates_and_notifies_once_on_postgresql() {
    let Some(url) = std::env::var("SLUICE_TEST_PG_URL").ok().filter(|u| !u.is_empty()) else {
        eprintln!("SLUICE_TEST_PG_URL is not set: skipped (set it to run against PostgreSQL)");
        return;
    };
    let schema = format!("sluice_test_{}", uuid::Uuid::now_v7().simple());
    let options = || sluice_postgres::PostgresOptions {
        schema: Some(schema.clone()),
        pool_connections_max: 4,
        ..Default::default()
    };
    let connect = || async {
        let store = sluice_postgres::PostgresStore::connect(&url, options())
            .await
            .unwrap_or_else(|e| panic!("SLUICE_TEST_PG_URL={url} is set but unusable: {e}"));
        Arc::new(store) as Arc<dyn Store>
    };
    let (a, b) = (connect().await, connect().await);
    // The lease's expiry is on the services' clock (not the database's), shared by both here.
    two_nodes(a, b, &ManualClock::new(T0_MS)).await;
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(connection);
    client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE")).await.expect("drop the schema");
}

#[tokio::test]
async fn subscription_backlog_is_lag_and_its_growth_is_measured_over_for_ms() {
    use sluice_services::topics::{Endpoint, Origin};
    let clock = ManualClock::new(T0_MS);
    let db = embedded(&clock);
    let store: Arc<dyn Store> = db.store.clone();
    let services = services(store.clone(), &clock);
    without_builtin(&services).await;
    store.create_queue("billing", QueueAttributes::default()).await.unwrap();
    let topics = services.topics();
    let none = std::collections::BTreeMap::new();
    topics.create_topic("orders", false, none.clone(), none.clone()).await.unwrap();
    let origin = Origin { base_url: "http://127.0.0.1".into(), sender: "test".into() };
    let (sub, _) = topics.subscribe("orders", Endpoint::Queue("billing".into()), &none, &origin).await.unwrap();
    let subject = format!("orders/{}", sub.id);
    services.alerts().create_rule(rule("backlog", Kind::LagAbove, "orders/*", 3.0, 0)).await.unwrap();
    services.alerts().create_rule(rule("growing", Kind::LagGrowing, "orders/*", 1.0, 10_000)).await.unwrap();

    send(store.as_ref(), "billing", 2).await;
    assert_eq!(evaluate_at(&services, &clock, T0_MS).await, (0, 0), "lag 2: below 3, growth not measured yet");
    send(store.as_ref(), "billing", 2).await;
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 5_000).await, (1, 0), "lag 4 is above 3");
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 10_000).await, (1, 0), "grew by 2 over 10 s");
    let firing = services.alerts().alerts(false).await.unwrap();
    let found: Vec<(&str, &str, f64)> =
        firing.iter().map(|(s, _)| (s.rule.as_str(), s.subject.as_str(), s.value)).collect();
    assert_eq!(found, [("backlog", subject.as_str(), 4.0), ("growing", subject.as_str(), 2.0)]);
    // Flat over the last 10 s: no longer growing, still above.
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 15_000).await, (0, 1), "no growth since T0 + 5 s");
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 20_000).await, (0, 0));
    store.purge_queue("billing").await.unwrap();
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 25_000).await, (0, 1), "the backlog is gone");
    assert_eq!(notifications(store.as_ref(), "growing").await, [n("firing", &subject, 1), n("resolved", &subject, 2)]);
}

/// `rejected_rate_above`: refusals per second of a queue's limits, between evaluations, on the
/// manual clock: pending once the rate passes the threshold, firing after `for_ms`, resolved
/// when refusals stop.
#[tokio::test]
async fn a_refusal_rate_above_the_threshold_fires_and_resolves() {
    let clock = ManualClock::new(T0_MS);
    let db = embedded(&clock);
    let store: Arc<dyn Store> = db.store.clone();
    let services = services(store.clone(), &clock);
    without_builtin(&services).await;
    let bounded = QueueAttributes { max_depth_messages: Some(5), ..QueueAttributes::default() };
    store.create_queue("bounded", bounded).await.unwrap();
    services.alerts().create_rule(rule("refusing", Kind::RejectedRateAbove, "bounded", 0.5, 5_000)).await.unwrap();
    let offer = |n: usize| {
        let store = store.clone();
        async move {
            let messages = (0..n).map(|i| NewMessage { body: format!("m{i}").into_bytes(), ..Default::default() });
            let results = store.send("bounded", messages.collect()).await.unwrap();
            results.iter().filter(|r| r.is_err()).count()
        }
    };
    assert_eq!(evaluate_at(&services, &clock, T0_MS).await, (0, 0), "a first total has no rate");
    assert_eq!(offer(10).await, 5);
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 5_000).await, (0, 0), "1/s: pending");
    assert_eq!(offer(10).await, 10);
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 10_000).await, (1, 0), "2/s for for_ms: firing");
    let firing = services.alerts().alerts(false).await.unwrap();
    assert_eq!((firing[0].0.subject.as_str(), firing[0].0.value), ("bounded", 2.0));
    assert_eq!(evaluate_at(&services, &clock, T0_MS + 15_000).await, (0, 1), "no refusals: resolved");
    assert_eq!(
        notifications(store.as_ref(), "refusing").await,
        [n("firing", "bounded", 1), n("resolved", "bounded", 2)]
    );
}
