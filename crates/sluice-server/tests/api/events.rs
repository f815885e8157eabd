//! The event store API over HTTP: paths, fields, statuses and error codes of DESIGN.md §4b.

use serde_json::{Value, json};

use super::support::TestServer;

fn event(id: &str, t: &str, n: u64) -> Value {
    json!({ "id": id, "type": t, "data": { "n": n }, "metadata": { "by": "test" }, "correlation_id": "c1" })
}

async fn append(s: &TestServer, stream: &str, expected: Value, events: Value, status: u16) -> Value {
    let body = json!({ "expected_version": expected, "events": events });
    s.expect("POST", &format!("/v1/events/streams/{stream}"), Some(body), status).await
}

#[tokio::test]
async fn appends_check_expected_versions_and_dedup_by_event_id() {
    let s = TestServer::start();
    let first =
        append(&s, "order-1", json!("no_stream"), json!([event("a", "Placed", 1), event("b", "Paid", 2)]), 200).await;
    assert_eq!(first, json!({ "first_version": 0, "last_version": 1, "first_position": 0, "last_position": 1 }));
    let conflict = append(&s, "order-1", json!(0), json!([event("c", "Shipped", 3)]), 409).await;
    assert_eq!(conflict["error"]["code"], "wrong_expected_version");
    assert_eq!(conflict["error"]["details"]["actual_version"], 1);
    let none = append(&s, "order-2", json!("exists"), json!([event("x", "T", 0)]), 409).await;
    assert_eq!(none["error"]["details"]["actual_version"], Value::Null);
    // A re-sent append answers the original.
    let again =
        append(&s, "order-1", json!("no_stream"), json!([event("a", "Placed", 1), event("b", "Paid", 2)]), 200).await;
    assert_eq!(again, first);
    let clash = append(&s, "order-1", json!("any"), json!([event("b", "Paid", 2), event("z", "T", 0)]), 409).await;
    assert_eq!(clash["error"]["code"], "event_id_conflict");
    let next = append(&s, "order-1", json!(1), json!([event("c", "Shipped", 3)]), 200).await;
    assert_eq!((next["first_version"].as_u64(), next["first_position"].as_u64()), (Some(2), Some(2)));
    let no_id = append(&s, "order-1", json!("any"), json!([{ "type": "Note", "data": "hello" }]), 200).await;
    assert_eq!(no_id["first_version"], 3);
    // Bad input: clear codes.
    assert_eq!(append(&s, "order-1", json!("any"), json!([]), 400).await["error"]["code"], "empty_batch");
    let bad = append(&s, "$all", json!("any"), json!([event("q", "T", 0)]), 400).await;
    assert_eq!(
        (&bad["error"]["code"], &bad["error"]["details"]["field"]),
        (&json!("invalid_argument"), &json!("stream_id"))
    );
    let bad = append(&s, "o", json!("maybe"), json!([event("q", "T", 0)]), 400).await;
    assert_eq!(bad["error"]["code"], "invalid_json");
    let bad = append(&s, "o", json!("any"), json!([event("q", "has space", 0)]), 400).await;
    assert_eq!(bad["error"]["details"]["field"], "events[0].type");
    let many: Vec<Value> = (0..1001).map(|i| event(&format!("m{i}"), "T", i)).collect();
    assert_eq!(append(&s, "o", json!("any"), json!(many), 400).await["error"]["code"], "batch_too_large");
}

#[tokio::test]
async fn streams_read_both_ways_and_all_reads_filter_and_page() {
    let s = TestServer::start();
    for i in 0..4u64 {
        let t = if i % 2 == 0 { "Even" } else { "Odd" };
        append(&s, "order-1", json!("any"), json!([event(&format!("o{i}"), t, i)]), 200).await;
        append(&s, "user-1", json!("any"), json!([event(&format!("u{i}"), "User", i)]), 200).await;
    }
    let read = s.expect("GET", "/v1/events/streams/order-1?from_version=1&max=2", None, 200).await;
    assert_eq!((read["first_version"].as_u64(), read["last_version"].as_u64()), (Some(0), Some(3)));
    let events = read["events"].as_array().unwrap();
    assert_eq!(events.iter().map(|e| e["version"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2]);
    let e = &events[0];
    assert_eq!(
        (&e["id"], &e["type"], &e["data"], &e["metadata"]),
        (&json!("o1"), &json!("Odd"), &json!({"n": 1}), &json!({"by": "test"}))
    );
    assert_eq!((&e["stream_id"], &e["position"], &e["correlation_id"]), (&json!("order-1"), &json!(2), &json!("c1")));
    assert!(e["time"].as_str().unwrap().ends_with('Z') && e["time_ms"].as_u64().is_some());
    let back = s.expect("GET", "/v1/events/streams/order-1?direction=backward&max=2", None, 200).await;
    assert_eq!(
        back["events"].as_array().unwrap().iter().map(|e| e["version"].as_u64().unwrap()).collect::<Vec<_>>(),
        [3, 2]
    );
    let missing = s.expect("GET", "/v1/events/streams/nope", None, 404).await;
    assert_eq!(missing["error"]["code"], "event_stream_not_found");

    let all = s.expect("GET", "/v1/events/all?from_position=2&max=3", None, 200).await;
    let positions: Vec<u64> =
        all["events"].as_array().unwrap().iter().map(|e| e["position"].as_u64().unwrap()).collect();
    assert_eq!(positions, [2, 3, 4]);
    assert_eq!((all["next_position"].as_u64(), all["head_position"].as_u64()), (Some(5), Some(8)));
    let odd = s.expect("GET", "/v1/events/all?types=Odd,Nothing", None, 200).await;
    assert_eq!(odd["events"].as_array().unwrap().len(), 2);
    let users = s.expect("GET", "/v1/events/all?stream_prefix=user-&max=10", None, 200).await;
    assert!(users["events"].as_array().unwrap().iter().all(|e| e["stream_id"] == "user-1"));
    assert_eq!(users["events"].as_array().unwrap().len(), 4);
    let corr = s.expect("GET", "/v1/events/all?correlation_id=c1", None, 200).await;
    assert_eq!(corr["events"].as_array().unwrap().len(), 8);
    let bad = s.expect("GET", "/v1/events/all?max=0", None, 400).await;
    assert_eq!(bad["error"]["details"]["field"], "max");
    let bad = s.expect("GET", "/v1/events/all?wait_ms=999999", None, 400).await;
    assert_eq!(bad["error"]["details"]["field"], "wait_ms");
}

#[tokio::test]
async fn subscriptions_fetch_after_forward_only_checkpoints() {
    let s = TestServer::start();
    for i in 0..3u64 {
        append(&s, "order-1", json!("any"), json!([event(&format!("o{i}"), "Placed", i)]), 200).await;
    }
    let sub = json!({ "name": "billing", "from": "start", "types": ["Placed"] });
    let created = s.expect("POST", "/v1/events/subscriptions", Some(sub.clone()), 201).await;
    assert_eq!((&created["checkpoint"], &created["next_position"]), (&Value::Null, &json!(0)));
    s.expect("POST", "/v1/events/subscriptions", Some(sub), 200).await;
    let other = json!({ "name": "billing", "from": "start", "types": ["Other"] });
    let exists = s.expect("POST", "/v1/events/subscriptions", Some(other), 409).await;
    assert_eq!(exists["error"]["code"], "event_subscription_exists");
    let tail = s.expect("POST", "/v1/events/subscriptions", Some(json!({ "name": "tail", "from": "end" })), 201).await;
    assert_eq!(tail["start_position"], 3);
    let at = s
        .expect("POST", "/v1/events/subscriptions", Some(json!({ "name": "at", "from": { "position": 2 } })), 201)
        .await;
    assert_eq!(at["next_position"], 2);

    let fetched = s.expect("POST", "/v1/events/subscriptions/billing/fetch", Some(json!({ "max": 2 })), 200).await;
    assert_eq!(fetched["events"].as_array().unwrap().len(), 2);
    let cp = s.expect("POST", "/v1/events/subscriptions/billing/checkpoint", Some(json!({ "position": 1 })), 200).await;
    assert_eq!((&cp["checkpoint"], &cp["next_position"]), (&json!(1), &json!(2)));
    s.expect("POST", "/v1/events/subscriptions/billing/checkpoint", Some(json!({ "position": 1 })), 200).await;
    let back =
        s.expect("POST", "/v1/events/subscriptions/billing/checkpoint", Some(json!({ "position": 0 })), 409).await;
    assert_eq!(
        (&back["error"]["code"], &back["error"]["details"]["checkpoint"]),
        (&json!("checkpoint_regression"), &json!(1))
    );
    let past =
        s.expect("POST", "/v1/events/subscriptions/billing/checkpoint", Some(json!({ "position": 99 })), 400).await;
    assert_eq!(past["error"]["code"], "invalid_argument");
    let rest = s.expect("POST", "/v1/events/subscriptions/billing/fetch", None, 200).await;
    assert_eq!(rest["events"].as_array().unwrap().iter().map(|e| e["id"].clone()).collect::<Vec<_>>(), [json!("o2")]);
    let empty = s.expect("POST", "/v1/events/subscriptions/tail/fetch", Some(json!({ "wait_ms": 50 })), 200).await;
    assert!(empty["events"].as_array().unwrap().is_empty());
    let list = s.expect("GET", "/v1/events/subscriptions", None, 200).await;
    assert_eq!(list["subscriptions"].as_array().unwrap().len(), 3);
    s.expect("DELETE", "/v1/events/subscriptions/at", None, 204).await;
    let gone = s.expect("GET", "/v1/events/subscriptions/at", None, 404).await;
    assert_eq!(gone["error"]["code"], "event_subscription_not_found");
    let (_, _, body) = s.raw(axum::http::Request::get("/metrics").body(axum::body::Body::empty()).unwrap()).await;
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains("sluice_events_head_position 3"), "{text}");
    assert!(text.contains("sluice_event_subscription_lag{subscription=\"billing\"} 1"), "{text}");
    assert!(text.contains("sluice_event_subscription_lag{subscription=\"tail\"} 0"), "{text}");
}

#[tokio::test]
async fn snapshots_return_the_events_after_them_and_deletes_hide_streams() {
    let s = TestServer::start();
    let events: Vec<Value> = (0..5u64).map(|i| event(&format!("e{i}"), "Added", i)).collect();
    append(&s, "cart-1", json!("no_stream"), json!(events), 200).await;
    let missing = s.expect("GET", "/v1/events/streams/cart-1/snapshot", None, 404).await;
    assert_eq!(missing["error"]["code"], "snapshot_not_found");
    let put = json!({ "version": 2, "data": { "items": 3 } });
    s.expect("PUT", "/v1/events/streams/cart-1/snapshot", Some(put), 200).await;
    let got = s.expect("GET", "/v1/events/streams/cart-1/snapshot", None, 200).await;
    assert_eq!((&got["snapshot"]["version"], &got["snapshot"]["data"]), (&json!(2), &json!({ "items": 3 })));
    let after: Vec<u64> = got["events"].as_array().unwrap().iter().map(|e| e["version"].as_u64().unwrap()).collect();
    assert_eq!((after, &got["last_version"]), (vec![3, 4], &json!(4)));
    let bad =
        s.expect("PUT", "/v1/events/streams/cart-1/snapshot", Some(json!({ "version": 9, "data": {} })), 400).await;
    assert_eq!(bad["error"]["details"]["field"], "version");
    s.expect("PUT", "/v1/events/streams/nope/snapshot", Some(json!({ "version": 0, "data": {} })), 404).await;

    s.expect("DELETE", "/v1/events/streams/cart-1", None, 204).await;
    s.expect("GET", "/v1/events/streams/cart-1", None, 404).await;
    s.expect("DELETE", "/v1/events/streams/cart-1", None, 404).await;
    let restarted = append(&s, "cart-1", json!("no_stream"), json!([event("n0", "Added", 0)]), 200).await;
    assert_eq!(restarted["first_version"], 5);
    s.expect("GET", "/v1/events/streams/cart-1/snapshot", None, 404).await;
    s.expect("DELETE", "/v1/events/streams/cart-1?hard=true", None, 204).await;
    let gone = append(&s, "cart-1", json!("any"), json!([event("n1", "Added", 1)]), 410).await;
    assert_eq!(gone["error"]["code"], "event_stream_deleted");
    let all = s.expect("GET", "/v1/events/all", None, 200).await;
    assert_eq!(all["events"].as_array().unwrap().len(), 6, "$all keeps every event");
}

#[tokio::test]
async fn all_long_polls_until_an_append() {
    let s = TestServer::start();
    let app = s.clone_app();
    let waiter = tokio::spawn(async move {
        use tower::ServiceExt;
        let request = axum::http::Request::builder()
            .uri("/v1/events/all?wait_ms=10000")
            .body(axum::body::Body::empty())
            .expect("request");
        let response = app.oneshot(request).await.expect("answer");
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body");
        serde_json::from_slice::<Value>(&body).expect("json")
    });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let started = std::time::Instant::now();
    append(&s, "a", json!("any"), json!([event("1", "T", 1)]), 200).await;
    let got = waiter.await.expect("waiter");
    assert_eq!(got["events"].as_array().unwrap().len(), 1);
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "woken by the append");
}
