//! The real server driven through `sluice-client`: every route of the queue API, long polling,
//! dead-lettering and redrive, and messages surviving a restart.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::Server;
use sluice_api::{
    Attribute, CreateQueueRequest, DeadLetter, ErrorCode, NackEntry, NackRequest, ReceiveRequest, RedriveRequest,
    SendMessage, SendRequest, UpdateQueueRequest, VisibilityEntry, VisibilityRequest,
};
use sluice_client::{Client, ClientError};

fn queue(name: &str) -> CreateQueueRequest {
    CreateQueueRequest { name: name.into(), ..Default::default() }
}

fn with_dlq(name: &str, dlq: &str, max_receive_count: u32) -> CreateQueueRequest {
    CreateQueueRequest { dead_letter: Some(DeadLetter { queue: dlq.into(), max_receive_count }), ..queue(name) }
}

fn attribute(data_type: &str, value: &str) -> Attribute {
    Attribute { data_type: data_type.into(), value: value.into() }
}

#[track_caller]
fn assert_code<T: std::fmt::Debug>(result: Result<T, ClientError>, code: ErrorCode) {
    match result {
        Err(e) => assert_eq!(e.code(), Some(code), "{e}"),
        Ok(v) => panic!("expected {code:?}, got {v:?}"),
    }
}

#[tokio::test]
async fn queues_are_created_listed_updated_purged_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let client = server.client();

    assert!(client.create_queue(&queue("orders-dlq")).await.unwrap().created);
    let tags = BTreeMap::from([("team".to_owned(), "billing".to_owned())]);
    let orders = CreateQueueRequest {
        visibility_timeout_ms: Some(60_000),
        tags: Some(tags.clone()),
        ..with_dlq("orders", "orders-dlq", 3)
    };
    let created = client.create_queue(&orders).await.unwrap();
    assert!(created.created, "a new queue answers 201");
    assert_eq!(created.queue.visibility_timeout_ms, 60_000);
    assert!(!client.create_queue(&orders).await.unwrap().created, "the same attributes again answer 200");
    let different = CreateQueueRequest { visibility_timeout_ms: Some(1_000), ..orders.clone() };
    let err = client.create_queue(&different).await.unwrap_err();
    assert_eq!((err.status(), err.code()), (Some(409), Some(ErrorCode::QueueExists)), "{err}");
    client.create_queue(&queue("other")).await.unwrap();

    let names = |queues: &[sluice_api::Queue]| queues.iter().map(|q| q.name.clone()).collect::<Vec<_>>();
    let page = client.list_queues(Some("orders"), None, None).await.unwrap();
    assert_eq!(names(&page.queues), ["orders", "orders-dlq"]);
    let first = client.list_queues(None, Some(1), None).await.unwrap();
    assert_eq!(first.queues.len(), 1);
    assert!(first.next_token.is_some(), "a full page has a next token");
    assert_eq!(names(&client.list_all_queues(None).await.unwrap()), ["orders", "orders-dlq", "other"]);

    let got = client.get_queue("orders").await.unwrap();
    assert_eq!(got.dead_letter, Some(DeadLetter { queue: "orders-dlq".into(), max_receive_count: 3 }));
    assert_eq!(got.tags, tags);
    assert_eq!(got.counts.dlq_depth, Some(0));

    let patch =
        UpdateQueueRequest { visibility_timeout_ms: Some(5_000), dead_letter: Some(None), ..Default::default() };
    let updated = client.update_queue("orders", &patch).await.unwrap();
    assert_eq!((updated.visibility_timeout_ms, updated.dead_letter), (5_000, None));
    assert_eq!(client.get_queue("orders").await.unwrap().visibility_timeout_ms, 5_000);

    for i in 0..3 {
        client.send_text("orders", format!("m{i}")).await.unwrap();
    }
    assert_eq!(client.get_queue("orders").await.unwrap().counts.visible, 3);
    assert_eq!(client.purge_queue("orders").await.unwrap().purged, 3);
    assert_eq!(client.get_queue("orders").await.unwrap().counts.visible, 0);

    client.delete_queue("orders").await.unwrap();
    let err = client.get_queue("orders").await.unwrap_err();
    assert_eq!((err.status(), err.code()), (Some(404), Some(ErrorCode::QueueNotFound)), "{err}");
    assert_code(client.delete_queue("orders").await, ErrorCode::QueueNotFound);
}

#[tokio::test]
async fn text_binary_attributes_and_priority_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let client = server.client();
    client.create_queue(&queue("mixed")).await.unwrap();

    let binary: Vec<u8> = (0..=255).collect();
    let binary_b64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn+AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmqq6ytrq+wsbKztLW2t7i5uru8vb6/wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t/g4eLj5OXm5+jp6uvs7e7v8PHy8/T19vf4+fr7/P3+/w==";
    assert_eq!(binary.len(), 256);
    let attributes = BTreeMap::from([
        ("kind".to_owned(), attribute("String", "greeting")),
        ("n".to_owned(), attribute("Number", "42")),
        ("blob".to_owned(), attribute("Binary", "AAE=")),
    ]);
    let request = SendRequest {
        messages: vec![
            SendMessage {
                body: Some("low ünïcödé\n".into()), attributes: attributes.clone(), ..Default::default()
            },
            SendMessage { body_base64: Some(binary_b64.into()), ..Default::default() },
            SendMessage {
                body: Some("urgent".into()),
                priority: Some(9),
                message_type: Some("alert".into()),
                source: Some("tests".into()),
                correlation_id: Some("c-1".into()),
                ..Default::default()
            },
            SendMessage { body: Some("bad".into()), priority: Some(10), ..Default::default() },
        ],
    };
    let sent = client.send_messages("mixed", &request).await.unwrap();
    assert_eq!(sent.results.len(), 4);
    assert!(sent.results[..3].iter().all(|r| r.id.is_some() && r.error.is_none()), "{sent:?}");
    let refused = sent.results[3].error.as_ref().expect("priority 10 is refused per entry");
    assert_eq!(refused.code, "invalid_argument");

    let first = client.receive("mixed", 1, 0).await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].body.as_deref(), Some("urgent"), "priority 9 comes first");
    assert_eq!(first[0].priority, 9);
    assert_eq!(
        (first[0].message_type.as_deref(), first[0].source.as_deref(), first[0].correlation_id.as_deref()),
        (Some("alert"), Some("tests"), Some("c-1"))
    );
    assert_eq!(first[0].id, sent.results[2].id.clone().unwrap());

    let rest = client.receive("mixed", 10, 0).await.unwrap();
    assert_eq!(rest.len(), 2);
    let text = rest.iter().find(|m| m.body.is_some()).expect("the text message");
    assert_eq!(text.body.as_deref(), Some("low ünïcödé\n"), "text comes back byte-exact");
    assert_eq!(text.attributes, attributes);
    let bytes = rest.iter().find(|m| m.body_base64.is_some()).expect("the binary message");
    assert_eq!(bytes.body_base64.as_deref(), Some(binary_b64), "bytes come back byte-exact");
    assert_eq!(bytes.body, None);
}

#[tokio::test]
async fn a_long_poll_is_woken_by_a_send() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let client = server.client();
    client.create_queue(&queue("waiting")).await.unwrap();

    let poller = tokio::spawn({
        let client = client.clone();
        async move {
            let started = Instant::now();
            let messages = client.receive("waiting", 1, 15_000).await;
            (messages, started.elapsed())
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!poller.is_finished(), "the receive waits while the queue is empty");
    client.send_text("waiting", "wake up").await.unwrap();
    let (messages, waited) = poller.await.unwrap();
    let messages = messages.unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].body.as_deref(), Some("wake up"));
    assert!(waited < Duration::from_secs(5), "woken by the send, not by the 15 s timeout: {waited:?}");

    let started = Instant::now();
    assert!(client.receive("waiting", 1, 200).await.unwrap().is_empty());
    assert!(started.elapsed() >= Duration::from_millis(150), "an empty long poll waits its wait_ms");
}

#[tokio::test]
async fn ack_visibility_release_and_peek() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let client = server.client();
    client.create_queue(&queue("work")).await.unwrap();
    client.send_text("work", "one").await.unwrap();
    client.send_text("work", "two").await.unwrap();

    let peeked = client.peek("work", Some(10)).await.unwrap().messages;
    assert_eq!(peeked.len(), 2);
    assert!(peeked.iter().all(|m| m.state.as_deref() == Some("visible") && m.receipt.is_none()), "{peeked:?}");
    assert_eq!(client.get_queue("work").await.unwrap().counts.visible, 2, "peek changes nothing");

    let request = ReceiveRequest { max: Some(1), wait_ms: Some(0), visibility_timeout_ms: Some(30_000) };
    let got = client.receive_messages("work", &request).await.unwrap().messages;
    assert_eq!(got.len(), 1);
    let receipt = got[0].receipt.clone().expect("a received message has a receipt");
    let counts = client.get_queue("work").await.unwrap().counts;
    assert_eq!((counts.visible, counts.in_flight), (1, 1));
    let in_flight: Vec<_> =
        client.peek("work", None).await.unwrap().messages.into_iter().filter(|m| m.id == got[0].id).collect();
    assert_eq!(in_flight[0].state.as_deref(), Some("in_flight"));

    // Releasing (timeout 0) makes it receivable again at once, with a new receipt.
    let release = VisibilityRequest { entries: vec![VisibilityEntry { receipt: receipt.clone(), timeout_ms: 0 }] };
    let released = client.change_visibility("work", &release).await.unwrap();
    assert!(released.results[0].ok, "{released:?}");
    let again = client.receive("work", 2, 0).await.unwrap();
    let same = again.iter().find(|m| m.id == got[0].id).expect("the released message comes back");
    assert_eq!(same.receive_count, 2);
    let new_receipt = same.receipt.clone().unwrap();
    assert_ne!(new_receipt, receipt);

    // The old receipt no longer touches the new delivery.
    let stale = client.ack("work", [receipt]).await.unwrap();
    assert!(!stale.results[0].ok);
    assert_eq!(stale.results[0].error.as_ref().map(|e| e.code.as_str()), Some("stale_receipt"));

    let receipts: Vec<String> = again.iter().filter_map(|m| m.receipt.clone()).collect();
    let acked = client.ack("work", receipts).await.unwrap();
    assert!(acked.results.iter().all(|r| r.ok), "{acked:?}");
    assert!(client.peek("work", None).await.unwrap().messages.is_empty(), "acked messages are gone");
    let counts = client.get_queue("work").await.unwrap().counts;
    assert_eq!((counts.visible, counts.in_flight, counts.delayed), (0, 0, 0));
}

#[tokio::test]
async fn a_nacked_message_is_dead_lettered_then_redriven_back() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let client = server.client();
    client.create_queue(&queue("work-dlq")).await.unwrap();
    client.create_queue(&with_dlq("work", "work-dlq", 1)).await.unwrap();
    let id = client.send_text("work", "fails").await.unwrap();

    let got = client.receive("work", 1, 0).await.unwrap();
    assert_eq!(got[0].id, id);
    let nack = NackRequest {
        entries: vec![NackEntry {
            receipt: got[0].receipt.clone().unwrap(),
            delay_ms: None,
            error: Some("boom".into()),
        }],
    };
    assert!(client.nack("work", &nack).await.unwrap().results[0].ok);

    assert!(client.receive("work", 1, 0).await.unwrap().is_empty(), "the message left the source queue");
    assert_eq!(client.get_queue("work").await.unwrap().counts.dlq_depth, Some(1));
    let dead = client.peek("work-dlq", None).await.unwrap().messages;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].id, id, "a dead-lettered message keeps its id");
    assert_eq!(dead[0].body.as_deref(), Some("fails"));
    assert_eq!(dead[0].dead_letter_source.as_deref(), Some("work"));
    assert_eq!(dead[0].last_error.as_deref(), Some("boom"));

    let task = client.start_redrive("work-dlq", &RedriveRequest::default()).await.unwrap();
    assert_eq!((task.source.as_str(), task.total), ("work-dlq", 1));
    let finished = wait_for_redrive(&client, &task.id).await;
    assert_eq!((finished.status.as_str(), finished.moved, finished.failed), ("completed", 1, 0), "{finished:?}");
    let listed = client.list_redrives("work-dlq").await.unwrap().tasks;
    assert!(listed.iter().any(|t| t.id == task.id), "{listed:?}");
    assert!(client.list_all_redrives().await.unwrap().tasks.iter().any(|t| t.id == task.id));
    assert_eq!(
        client.cancel_redrive(&task.id).await.unwrap().status,
        "completed",
        "cancelling a finished task changes nothing"
    );
    assert_code(client.get_redrive("no-such-task").await, ErrorCode::RedriveNotFound);

    let back = client.receive("work", 1, 0).await.unwrap();
    assert_eq!(back.len(), 1, "the message is back in its source");
    assert_eq!((back[0].id.as_str(), back[0].body.as_deref()), (id.as_str(), Some("fails")));
    assert!(client.peek("work-dlq", None).await.unwrap().messages.is_empty());
}

async fn wait_for_redrive(client: &Client, id: &str) -> sluice_api::RedriveTask {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let task = client.get_redrive(id).await.unwrap();
        if task.status != "running" {
            return task;
        }
        assert!(Instant::now() < deadline, "redrive still running: {task:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn messages_survive_a_restart_and_sigterm_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let client = server.client();
    client.create_queue(&queue("durable")).await.unwrap();
    let mut sent = Vec::new();
    for i in 0..5 {
        let body = format!("persisted {i}");
        client.send_text("durable", body.clone()).await.unwrap();
        sent.push(body);
    }
    // One in flight at shutdown: it must come back after the restart too (at-least-once).
    let in_flight = client.receive("durable", 1, 0).await.unwrap();
    assert_eq!(in_flight.len(), 1);

    let status = server.terminate();
    assert!(status.success(), "SIGTERM exits 0: {status:?}");

    let server = Server::start(dir.path());
    let client = server.client();
    let got = client.get_queue("durable").await.unwrap();
    assert_eq!(got.counts.visible + got.counts.in_flight, 5, "{:?}", got.counts);
    // Peek shows visible and in-flight messages alike.
    let mut bodies: Vec<String> =
        client.peek("durable", Some(10)).await.unwrap().messages.into_iter().map(|m| m.body.unwrap()).collect();
    bodies.sort();
    assert_eq!(bodies, sent, "every acknowledged send survives");
}

#[tokio::test]
async fn an_unreachable_server_is_a_connect_error_after_retries() {
    // Port 1 on loopback has no listener, so every attempt is refused before sending.
    let client = Client::builder("http://127.0.0.1:1")
        .attempts(3)
        .backoff(sluice_core::backoff::Backoff { base_ms: 10, cap_ms: 20 })
        .build()
        .unwrap();
    let err = client.send_text("q", "x").await.unwrap_err();
    assert!(err.is_connect(), "{err}");
    assert_eq!(err.code(), None);
    assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
}

#[tokio::test]
async fn stats_history_and_alert_rules_through_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &["--stats-sample-ms", "1000"]);
    let client = server.client();
    client.create_queue(&queue("jobs")).await.unwrap();
    client.send_text("jobs", "one").await.unwrap();
    client.send_text("jobs", "two").await.unwrap();
    // The sampler takes a sample every second of the server's clock: wait for two of them.
    let deadline = Instant::now() + Duration::from_secs(20);
    let history = loop {
        let history = client.queue_history("jobs").await.unwrap();
        if history.series.len() >= 2 {
            break history;
        }
        assert!(Instant::now() < deadline, "no samples of jobs: {history:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(history.sample_ms, 1000);
    assert_eq!(history.series.last().unwrap().visible, 2);
    let stats = client.stats().await.unwrap();
    assert_eq!((stats.store.status.as_str(), stats.messages_sent, stats.queues), ("ok", 2, 1));
    let rates = client.queue_rates().await.unwrap();
    assert_eq!(rates.queues.iter().map(|q| q.name.as_str()).collect::<Vec<_>>(), ["jobs"]);
    assert_code(client.queue_history("nope").await, ErrorCode::QueueNotFound);

    let rule = sluice_api::CreateAlertRuleRequest {
        name: "jobs-deep".into(),
        kind: sluice_api::AlertKind::OldestAgeAboveMs,
        target: "jobs".into(),
        threshold: 0.0,
        for_ms: 0,
        notify: None,
    };
    let created = client.create_alert_rule(&rule).await.unwrap();
    assert!(created.created && !created.rule.builtin);
    assert!(!client.create_alert_rule(&rule).await.unwrap().created);
    let conflicting = sluice_api::CreateAlertRuleRequest { threshold: 5.0, ..rule.clone() };
    assert_code(client.create_alert_rule(&conflicting).await, ErrorCode::AlertRuleExists);
    assert_eq!(client.get_alert_rule("jobs-deep").await.unwrap(), created.rule);
    assert_eq!(client.list_alert_rules().await.unwrap().rules.len(), 3, "with the two built-in rules");
    let firing = loop {
        let alerts = client.alerts(false).await.unwrap().alerts;
        if !alerts.is_empty() {
            break alerts;
        }
        assert!(Instant::now() < deadline, "jobs-deep never fired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        (firing[0].rule.as_str(), firing[0].subject.as_str(), firing[0].status.as_str()),
        ("jobs-deep", "jobs", "firing")
    );
    client.delete_alert_rule("jobs-deep").await.unwrap();
    assert_code(client.delete_alert_rule("jobs-deep").await, ErrorCode::AlertRuleNotFound);
}

#[tokio::test]
async fn schemas_are_registered_read_checked_and_enforced_through_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let client = server.client();
    let v1 = serde_json::json!({
        "type": "object",
        "properties": {"id": {"type": "string"}, "total": {"type": "integer", "minimum": 0}},
        "required": ["id", "total"],
    });
    let first = client.register_schema("order", &v1).await.unwrap();
    assert!(first.created);
    assert_eq!((first.registered.message_type.as_str(), first.registered.version), ("order", 1));
    assert!(!client.register_schema("order", &v1).await.unwrap().created, "the same schema again adds nothing");

    let mut v2 = v1.clone();
    v2["required"] = serde_json::json!(["id", "total", "note"]);
    let refused = client.register_schema("order", &v2).await.unwrap_err();
    assert_eq!(refused.code(), Some(ErrorCode::SchemaIncompatible), "{refused}");
    let check = sluice_api::CheckSchemaRequest { schema: Some(v2.clone()), ..Default::default() };
    let answer = client.check_schema("order", &check).await.unwrap();
    assert_eq!((answer.compatible, answer.reasons[0].kind.as_str()), (Some(false), "required_added"));

    let ty = client.set_schema_compatibility("order", sluice_api::Compatibility::None).await.unwrap();
    assert_eq!(ty.compatibility, sluice_api::Compatibility::None);
    assert_eq!(client.register_schema("order", &v2).await.unwrap().registered.version, 2);
    let ty = client.get_schema_type("order").await.unwrap();
    assert_eq!((ty.latest_version, ty.versions), (Some(2), Some(vec![1, 2])));
    assert_eq!(client.get_schema_version("order", Some(1)).await.unwrap().schema, v1);
    assert_eq!(client.get_schema_version("order", None).await.unwrap().version, 2);
    assert_code(client.get_schema_version("order", Some(9)).await, ErrorCode::SchemaNotFound);
    assert_code(client.get_schema_type("missing").await, ErrorCode::SchemaNotFound);
    let listed = client.list_all_schemas().await.unwrap();
    assert_eq!(listed.iter().map(|t| t.message_type.as_str()).collect::<Vec<_>>(), ["order"]);
    assert_eq!(client.list_schemas(Some(1), None).await.unwrap().types.len(), 1);

    let body =
        |text: &str, version| sluice_api::CheckSchemaRequest { body: Some(text.into()), version, ..Default::default() };
    let valid = client.check_schema("order", &body(r#"{"id": "a", "total": 1}"#, Some(1))).await.unwrap();
    assert_eq!((valid.valid, valid.version), (Some(true), Some(1)));
    let invalid = client.check_schema("order", &body(r#"{"id": "a", "total": -1}"#, Some(1))).await.unwrap();
    assert_eq!((invalid.valid, invalid.errors[0].pointer.as_str()), (Some(false), "/total"));

    // A queue that validates refuses what breaks the schema, per entry.
    let validating = CreateQueueRequest { schema_validation: Some(true), ..queue("orders") };
    client.create_queue(&validating).await.unwrap();
    let typed = |text: &str| SendMessage {
        body: Some(text.into()),
        message_type: Some("order".into()),
        version: Some("1".into()),
        ..Default::default()
    };
    let sent = client
        .send_messages("orders", &SendRequest { messages: vec![typed(r#"{"id": "a", "total": 1}"#), typed("[]")] })
        .await
        .unwrap();
    assert!(sent.results[0].id.is_some());
    let error = sent.results[1].error.as_ref().unwrap();
    assert_eq!(error.code, "schema_validation_failed");

    // A topic's validation is changed with update_topic.
    let topic =
        sluice_api::CreateTopicRequest { name: "events".into(), schema_validation: Some(true), ..Default::default() };
    assert!(client.create_topic(&topic).await.unwrap().topic.schema_validation);
    let off = sluice_api::UpdateTopicRequest { schema_validation: Some(false), ..Default::default() };
    assert!(!client.update_topic("events", &off).await.unwrap().schema_validation);
    assert!(!client.get_topic("events").await.unwrap().schema_validation);
}

#[tokio::test]
async fn streams_through_the_producer_and_both_consumers() {
    use sluice_api::{CreateGroupRequest, CreateStreamRequest, GroupMode};
    use sluice_client::streams::{From, OffsetsConsumer, Producer, SharedConsumer};

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let client = server.client();
    let stream = CreateStreamRequest { name: "events".into(), partitions: Some(2), ..Default::default() };
    assert!(client.create_stream(&stream).await.unwrap().created);
    assert!(!client.create_stream(&stream).await.unwrap().created, "the same settings again");

    // The producer: one record, a batch; every record gets a dedup id.
    let producer = Producer::new(client.clone(), "events");
    let keys = ["k0", "k1", "k2"];
    let mut appended = Vec::new();
    for i in 0..6 {
        let body = format!("e{i}");
        let place = producer.send(Some(keys[i % 3]), &body).await.unwrap();
        appended.push((place.partition.unwrap(), place.offset.unwrap(), body));
    }
    let batch: Vec<sluice_api::AppendRecord> = (6..10)
        .map(|i| sluice_api::AppendRecord { body: Some(format!("e{i}")), partition: Some(1), ..Default::default() })
        .collect();
    for (i, r) in producer.send_batch(batch).await.unwrap().into_iter().enumerate() {
        assert!(r.error.is_none() && !r.duplicate, "{r:?}");
        appended.push((1, r.offset.unwrap(), format!("e{}", i + 6)));
    }
    let read = client.read_records("events", 0, From::Start, 100, 0).await.unwrap();
    assert!(read.records.iter().all(|r| r.dedup_id.is_some()), "the producer's records carry dedup ids");
    // A key always lands on one partition.
    let partition_of = |body: &str| appended.iter().find(|(_, _, b)| b == body).unwrap().0;
    assert_eq!(partition_of("e0"), partition_of("e3"));
    assert_code(Producer::new(client.clone(), "nope").send(None, "x").await, ErrorCode::StreamNotFound);
    let small = CreateStreamRequest { name: "small".into(), record_bytes_max: Some(16), ..Default::default() };
    client.create_stream(&small).await.unwrap();
    assert_code(Producer::new(client.clone(), "small").send(None, &"x".repeat(64)).await, ErrorCode::RecordTooLarge);

    // An offsets member: a failing handler commits nothing and gets its records again.
    let group = CreateGroupRequest { name: "billing".into(), ..Default::default() };
    client.create_group("events", &group).await.unwrap();
    let mut consumer = OffsetsConsumer::new(client.clone(), "events", "billing", "m1");
    consumer.max = 4;
    consumer.wait_ms = 200;
    let failed = consumer.next_batch(|_| async { Err::<(), _>("not now") }).await.unwrap();
    assert_eq!((failed.records, failed.done), (4, 0));
    let mut handled: Vec<String> = Vec::new();
    loop {
        let seen = std::sync::Mutex::new(Vec::new());
        let round = consumer
            .next_batch(|records| {
                seen.lock().unwrap().extend(records.into_iter().map(|r| r.body.unwrap()));
                async { Ok::<(), std::io::Error>(()) }
            })
            .await
            .unwrap();
        assert_eq!(round.records, round.done, "a handled batch is committed");
        handled.extend(seen.into_inner().unwrap());
        if round.records == 0 {
            break;
        }
    }
    let mut expected: Vec<String> = appended.iter().map(|(_, _, b)| b.clone()).collect();
    expected.sort();
    handled.sort();
    assert_eq!(handled, expected, "every record handled once after the failed round");
    let billing = client.get_group("events", "billing").await.unwrap();
    assert_eq!(billing.lag, 0, "everything committed: {billing:?}");

    // A shared member: handled records are acked, a failing one is nacked with the handler's
    // error and, after its one delivery, dead-lettered with that error.
    client.create_queue(&queue("events-dlq")).await.unwrap();
    let shared = CreateGroupRequest {
        name: "workers".into(),
        mode: Some(GroupMode::Shared),
        key_ordered: Some(true),
        dead_letter_queue: Some("events-dlq".into()),
        max_deliveries: Some(1),
        ..Default::default()
    };
    client.create_group("events", &shared).await.unwrap();
    let mut worker = SharedConsumer::new(client.clone(), "events", "workers", "w1");
    worker.wait_ms = 200;
    let mut acked = 0;
    for _ in 0..20 {
        let round = worker
            .next_batch(|r| async move {
                if r.body.as_deref() == Some("e7") { Err("cannot handle e7".to_owned()) } else { Ok(()) }
            })
            .await
            .unwrap();
        acked += round.done;
        if round.records == 0 {
            break;
        }
    }
    assert_eq!(acked, appended.len() - 1);
    let workers = client.get_group("events", "workers").await.unwrap();
    assert_eq!((workers.lag, workers.in_flight), (0, Some(0)), "{workers:?}");
    let dead = client.receive("events-dlq", 10, 1_000).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].body.as_deref(), Some("e7"));
    assert_eq!(dead[0].attributes["sluice.last_error"].value, "cannot handle e7");
}
