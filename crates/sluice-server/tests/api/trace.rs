//! The causal trace over HTTP: a chain across the event store, a queue, a topic, a stream and
//! a job queue, each naming the one before as its cause, comes back in causal order with its
//! depths; a keyed send is traced once however often it is retried; what carried no
//! correlation id is not traced; bad ids are refused with their field.

use serde_json::{Value, json};

use crate::support::{Payload, TestServer, case, check, json_payload};

/// The entries' `(kind, id, depth)`.
fn listed(trace: &Value) -> Vec<(String, String, u64)> {
    trace["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            (e["kind"].as_str().unwrap().to_owned(), e["id"].as_str().unwrap().to_owned(), e["depth"].as_u64().unwrap())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_across_every_kind_comes_back_in_causal_order() {
    let s = TestServer::start();
    s.create_queue(json!({ "name": "orders" })).await;
    s.expect("POST", "/v1/topics", Some(json!({ "name": "order-events" })), 201).await;
    s.expect("POST", "/v1/streams", Some(json!({ "name": "audit", "partitions": 1 })), 201).await;

    // Each write names the one before it as its cause, under one correlation id.
    let event = json!({ "events": [{ "id": "e-1", "type": "OrderPlaced", "data": {}, "correlation_id": "c-1" }] });
    s.expect("POST", "/v1/events/streams/order-1", Some(event), 200).await;
    let message = json!({ "body": "reserve", "type": "Reserve", "correlation_id": "c-1", "causation_id": "e-1" });
    let sent = s
        .expect(
            "POST",
            "/v1/queues/orders/messages",
            Some(json!({ "messages": [message, { "body": "untraced" }] })),
            200,
        )
        .await;
    let message_id = sent["results"][0]["id"].as_str().unwrap().to_owned();
    let publish = json!({ "body": "reserved", "correlation_id": "c-1", "causation_id": message_id });
    let published =
        s.expect("POST", "/v1/topics/order-events/publish", Some(json!({ "messages": [publish] })), 200).await;
    let publish_id = published["results"][0]["id"].as_str().unwrap().to_owned();
    let record = json!({ "body": "audit", "type": "Audited", "correlation_id": "c-1", "causation_id": publish_id });
    let appended = s.expect("POST", "/v1/streams/audit/records", Some(json!({ "records": [record] })), 200).await;
    assert_eq!(appended["results"][0]["offset"], 0);
    let job =
        json!({ "queue": "mail", "type": "confirm", "payload": {}, "correlation_id": "c-1", "causation_id": "0/0" });
    let enqueued = s.expect("POST", "/v1/jobs", Some(job), 202).await;
    let job_id = enqueued["id"].as_str().unwrap().to_owned();

    let trace = s.expect("GET", "/v1/trace/c-1", None, 200).await;
    assert_eq!(trace["correlation_id"], "c-1");
    assert_eq!(trace["truncated"], false);
    assert_eq!(
        listed(&trace),
        vec![
            ("event".into(), "e-1".into(), 0),
            ("message".into(), message_id.clone(), 1),
            ("publish".into(), publish_id.clone(), 2),
            ("record".into(), "0/0".into(), 3),
            ("job".into(), job_id, 4),
        ],
        "{trace}"
    );
    let entries = &trace["entries"];
    let targets: Vec<&str> = entries.as_array().unwrap().iter().map(|e| e["target"].as_str().unwrap()).collect();
    assert_eq!(targets, ["events:order-1", "queue:orders", "topic:order-events", "stream:audit", "job:mail"]);
    assert_eq!(entries[0]["detail"], "OrderPlaced");
    assert_eq!(entries[1]["detail"], "Reserve");
    assert_eq!(entries[3]["detail"], "Audited");
    assert_eq!(entries[4]["detail"], "confirm");
    assert_eq!(entries[1]["causation_id"], "e-1");
    assert!(entries[0]["at"].as_str().unwrap().ends_with('Z'), "{trace}");

    // The links ride with what was written: a message's causation id comes back on receive,
    // a publish's and a record's as their attribute and header.
    let received = s.receive("orders", json!({ "max": 10 })).await;
    let traced = received.iter().find(|m| m["id"] == message_id.as_str()).expect("the traced message");
    assert_eq!((traced["correlation_id"].clone(), traced["causation_id"].clone()), (json!("c-1"), json!("e-1")));
    let read = s.expect("GET", "/v1/streams/audit/partitions/0/records?from_offset=0", None, 200).await;
    assert_eq!(read["records"][0]["headers"]["sluice.causation_id"], publish_id.as_str(), "{read}");

    assert_eq!(s.expect("GET", "/v1/trace/c-2", None, 200).await["entries"], json!([]), "an id nothing carried");
    assert_eq!(s.expect("GET", "/v1/trace/c", None, 200).await["entries"], json!([]), "a prefix is another id");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_send_is_traced_once_however_often_it_is_retried() {
    let s = TestServer::start();
    s.create_queue(json!({ "name": "q" })).await;
    let body = json!({ "messages": [{ "body": "once", "correlation_id": "k-1" }] });
    let mut ids = Vec::new();
    for _ in 0..3 {
        let request = axum::http::Request::post("/v1/queues/q/messages")
            .header("content-type", "application/json")
            .header("idempotency-key", "send-once")
            .body(axum::body::Body::from(body.to_string()))
            .unwrap();
        let (status, _, answer) = s.raw(request).await;
        assert_eq!(status, 200);
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        ids.push(answer["results"][0]["id"].as_str().unwrap().to_owned());
    }
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    let trace = s.expect("GET", "/v1/trace/k-1", None, 200).await;
    assert_eq!(listed(&trace), vec![("message".into(), ids[0].clone(), 0)], "{trace}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_ids_are_refused_with_their_field() {
    let s = TestServer::start();
    s.create_queue(json!({ "name": "q" })).await;
    s.expect("POST", "/v1/streams", Some(json!({ "name": "st", "partitions": 1 })), 201).await;
    let long = "x".repeat(257);
    let job = |field: &str| {
        let mut job = json!({ "queue": "mail", "type": "t", "payload": {}, "correlation_id": "c" });
        job[field] = json!(long);
        job
    };
    check(
        &s,
        vec![
            case("GET", format!("/v1/trace/{long}"), Payload::None, 400, Some("invalid_argument"))
                .field("correlation_id"),
            case("POST", "/v1/jobs", json_payload(job("correlation_id")), 400, Some("invalid_argument"))
                .field("correlation_id"),
            case("POST", "/v1/jobs", json_payload(job("causation_id")), 400, Some("invalid_argument"))
                .field("causation_id"),
        ],
    )
    .await;
    // A stream record whose causation id disagrees with its header is refused in its place.
    let record = json!({ "body": "b", "causation_id": "a", "headers": { "sluice.causation_id": "b" } });
    let answer = s.expect("POST", "/v1/streams/st/records", Some(json!({ "records": [record] })), 200).await;
    assert_eq!(answer["results"][0]["error"]["code"], "invalid_argument", "{answer}");
    assert!(s.expect("GET", "/v1/trace/c", None, 200).await["entries"].as_array().unwrap().is_empty());
}
