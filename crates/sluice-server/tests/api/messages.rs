//! Messages: send/receive/ack/visibility/nack round trips, per-entry errors, batch and body
//! limits, and peek.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use sluice_core::limits::REQUEST_BYTES_MAX;

use crate::support::{Payload, TestServer, case, check, json_payload};

fn entry_codes(answer: &Value) -> Vec<Value> {
    answer["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| if r["ok"] == true { json!("ok") } else { r["error"]["code"].clone() })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_and_binary_bodies_round_trip_with_attributes() {
    let s = TestServer::start();
    s.create_queue(json!({ "name": "rt" })).await;
    let bytes = [0u8, 159, 146, 150, 255, b'\n'];
    let answer = s
        .expect(
            "POST",
            "/v1/queues/rt/messages",
            Some(json!({ "messages": [
                {
                    "body": "héllo ✓",
                    "attributes": {
                        "s": { "type": "String", "value": "v" },
                        "n": { "type": "Number.int", "value": "-12.5e3" },
                        "b": { "type": "Binary", "value": STANDARD.encode([1u8, 2, 255]) },
                    },
                    "priority": 3,
                    "type": "order.created",
                    "version": "2",
                    "source": "/shop",
                    "correlation_id": "c-1",
                    "group_id": "g",
                },
                { "body_base64": STANDARD.encode(bytes) },
            ]})),
            200,
        )
        .await;
    let ids: Vec<&str> = answer["results"].as_array().unwrap().iter().map(|r| r["id"].as_str().expect("id")).collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);

    let received = s.receive("rt", json!({ "max": 10, "visibility_timeout_ms": 60000 })).await;
    assert_eq!(received.len(), 2, "{received:?}");
    let text = received.iter().find(|m| m["id"] == ids[0]).expect("text message");
    let binary = received.iter().find(|m| m["id"] == ids[1]).expect("binary message");

    assert_eq!(text["body"], "héllo ✓");
    assert!(text.get("body_base64").is_none());
    assert_eq!(text["attributes"]["s"], json!({ "type": "String", "value": "v" }));
    assert_eq!(text["attributes"]["n"], json!({ "type": "Number.int", "value": "-12.5e3" }));
    assert_eq!(text["attributes"]["b"], json!({ "type": "Binary", "value": STANDARD.encode([1u8, 2, 255]) }));
    assert_eq!(text["priority"], 3);
    assert_eq!(text["type"], "order.created");
    assert_eq!(text["version"], "2");
    assert_eq!(text["source"], "/shop");
    assert_eq!(text["correlation_id"], "c-1");
    assert_eq!(text["group_id"], "g");
    assert_eq!(text["receive_count"], 1);
    assert!(text["receipt"].as_str().is_some_and(|r| !r.is_empty()));
    let sent_ms = text["sent_at_ms"].as_u64().expect("sent_at_ms");
    let first_ms = text["first_received_at_ms"].as_u64().expect("first_received_at_ms");
    assert!(first_ms >= sent_ms);
    assert!(text["first_received_at"].as_str().is_some());
    assert!(text["visible_at_ms"].as_u64().expect("visible_at_ms") >= first_ms + 59_000, "{text}");
    // Priority 3 beats priority 0: the text message comes first.
    assert_eq!(received[0]["id"], ids[0]);

    assert!(binary.get("body").is_none());
    assert_eq!(STANDARD.decode(binary["body_base64"].as_str().unwrap()).unwrap(), bytes);

    // Ack both; the queue is empty afterwards.
    let receipts: Vec<&Value> = received.iter().map(|m| &m["receipt"]).collect();
    let acked = s.expect("POST", "/v1/queues/rt/ack", Some(json!({ "receipts": receipts })), 200).await;
    assert_eq!(entry_codes(&acked), vec![json!("ok"), json!("ok")]);
    let counts = s.counts("rt").await;
    assert_eq!((counts["visible"].as_u64(), counts["in_flight"].as_u64()), (Some(0), Some(0)), "{counts}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_are_checked_per_entry() {
    let s = TestServer::start();
    s.create_queue(json!({ "name": "a" })).await;
    s.create_queue(json!({ "name": "b" })).await;
    s.send_texts("a", &["1", "2", "3"]).await;
    s.send_texts("b", &["x"]).await;
    let from_a = s.receive("a", json!({ "max": 3, "visibility_timeout_ms": 60000 })).await;
    assert_eq!(from_a.len(), 3);
    let from_b = s.receive("b", json!({})).await;
    assert_eq!(from_b.len(), 1, "an empty body means max 1");
    let r = |i: usize| from_a[i]["receipt"].clone();

    // Ack the first; acking it again is stale. The batch goes on past bad entries.
    let acked = s.expect("POST", "/v1/queues/a/ack", Some(json!({ "receipts": [r(0)] })), 200).await;
    assert_eq!(entry_codes(&acked), vec![json!("ok")]);
    let acked = s
        .expect(
            "POST",
            "/v1/queues/a/ack",
            Some(json!({ "receipts": [r(0), "garbage", from_b[0]["receipt"], r(1)] })),
            200,
        )
        .await;
    assert_eq!(
        entry_codes(&acked),
        vec![json!("stale_receipt"), json!("invalid_receipt"), json!("foreign_receipt"), json!("ok")]
    );

    // Release message 2 with a zero timeout; the same receipt is then no longer in flight.
    let released = s
        .expect(
            "POST",
            "/v1/queues/a/visibility",
            Some(json!({ "entries": [{ "receipt": r(2), "timeout_ms": 0 }] })),
            200,
        )
        .await;
    assert_eq!(entry_codes(&released), vec![json!("ok")]);
    assert_eq!(s.counts("a").await["in_flight"], 0);
    let again = s
        .expect(
            "POST",
            "/v1/queues/a/visibility",
            Some(json!({ "entries": [{ "receipt": r(2), "timeout_ms": 1000 }] })),
            200,
        )
        .await;
    assert_eq!(entry_codes(&again), vec![json!("not_in_flight")]);
    let nacked = s
        .expect("POST", "/v1/queues/a/nack", Some(json!({ "entries": [{ "receipt": r(2) }, { "receipt": "x" }] })), 200)
        .await;
    assert_eq!(entry_codes(&nacked), vec![json!("not_in_flight"), json!("invalid_receipt")]);

    // Received again: a fresh receipt works, the old one is stale.
    let second = s.receive("a", json!({ "visibility_timeout_ms": 60000 })).await;
    assert_eq!(second[0]["receive_count"], 2);
    let extend = s
        .expect(
            "POST",
            "/v1/queues/a/visibility",
            Some(json!({ "entries": [{ "receipt": second[0]["receipt"], "timeout_ms": 120000 }, { "receipt": r(2), "timeout_ms": 1 }] })),
            200,
        )
        .await;
    assert_eq!(entry_codes(&extend), vec![json!("ok"), json!("stale_receipt")]);
    let bad_timeout = s
        .expect(
            "POST",
            "/v1/queues/a/visibility",
            Some(json!({ "entries": [{ "receipt": second[0]["receipt"], "timeout_ms": u64::MAX }] })),
            200,
        )
        .await;
    assert_eq!(entry_codes(&bad_timeout), vec![json!("invalid_argument")]);
    assert_eq!(bad_timeout["results"][0]["error"]["details"]["field"], "entries[0].timeout_ms");

    // Nack with a delay: the message is delayed, not visible.
    let nacked = s
        .expect(
            "POST",
            "/v1/queues/a/nack",
            Some(json!({ "entries": [{ "receipt": second[0]["receipt"], "delay_ms": 60000, "error": "db down" }] })),
            200,
        )
        .await;
    assert_eq!(entry_codes(&nacked), vec![json!("ok")]);
    let peeked = s.expect("GET", "/v1/queues/a/messages", None, 200).await;
    let m = peeked["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == second[0]["id"])
        .expect("nacked message")
        .clone();
    assert_eq!(m["state"], "delayed");
    assert_eq!(m["last_error"], "db down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_answers_per_entry() {
    let s = TestServer::start();
    s.create_queue(json!({ "name": "small", "message_bytes_max": 10 })).await;
    let answer = s
        .expect(
            "POST",
            "/v1/queues/small/messages",
            Some(json!({ "messages": [
                { "body": "ok" },
                { "body": "much too long for ten" },
                { "body": "p", "priority": 10 },
                {},
                { "body": "a", "body_base64": "YQ==" },
                { "body_base64": "%%%" },
                { "body": "t", "deliver_at": "next tuesday" },
                { "body": "t", "attributes": { "x": { "type": "Blob", "value": "1" } } },
                { "body": "t", "attributes": { "x": { "type": "Number", "value": "one" } } },
                { "body": "t", "dedup_id": "d" },
                { "body": "ok2" },
            ]})),
            200,
        )
        .await;
    let results = answer["results"].as_array().expect("results");
    let got: Vec<(Value, Value)> = results
        .iter()
        .map(|r| match r.get("id") {
            Some(_) => (json!("id"), Value::Null),
            None => (r["error"]["code"].clone(), r["error"]["details"]["field"].clone()),
        })
        .collect();
    let want = vec![
        (json!("id"), Value::Null),
        (json!("message_too_large"), Value::Null),
        (json!("invalid_argument"), json!("messages[2].priority")),
        (json!("invalid_argument"), json!("messages[3].body")),
        (json!("invalid_argument"), json!("messages[4].body")),
        (json!("invalid_argument"), json!("messages[5].body_base64")),
        (json!("invalid_argument"), json!("messages[6].deliver_at")),
        (json!("invalid_argument"), json!("messages[7].attributes.x.type")),
        (json!("invalid_argument"), json!("messages[8].attributes.x.value")),
        (json!("invalid_argument"), json!("messages[9].dedup_id")),
        (json!("id"), Value::Null),
    ];
    assert_eq!(got, want, "{answer}");
    assert_eq!(results[1]["error"]["details"]["max_bytes"], 10);
    // Only the two good entries were enqueued.
    assert_eq!(s.counts("small").await["visible"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_and_body_limits() {
    let s = TestServer::start();
    s.create_queue(json!({ "name": "q" })).await;
    let many: Vec<Value> = (0..1001).map(|i| json!({ "body": i.to_string() })).collect();
    let many_receipts: Vec<String> = (0..1001).map(|i| i.to_string()).collect();
    let thousand: Vec<Value> = (0..1000).map(|i| json!({ "body": i.to_string() })).collect();
    check(
        &s,
        vec![
            case(
                "POST",
                "/v1/queues/q/messages",
                json_payload(json!({ "messages": many })),
                400,
                Some("batch_too_large"),
            ),
            case("POST", "/v1/queues/q/messages", json_payload(json!({ "messages": [] })), 400, Some("empty_batch")),
            case("POST", "/v1/queues/q/messages", json_payload(json!({ "messages": thousand })), 200, None),
            case(
                "POST",
                "/v1/queues/q/ack",
                json_payload(json!({ "receipts": many_receipts })),
                400,
                Some("batch_too_large"),
            ),
            case("POST", "/v1/queues/q/ack", json_payload(json!({ "receipts": [] })), 400, Some("empty_batch")),
            case("POST", "/v1/queues/q/visibility", json_payload(json!({ "entries": [] })), 400, Some("empty_batch")),
            case("POST", "/v1/queues/q/nack", json_payload(json!({ "entries": [] })), 400, Some("empty_batch")),
            case(
                "POST",
                "/v1/queues/nope/messages",
                json_payload(json!({ "messages": [{ "body": "x" }] })),
                404,
                Some("queue_not_found"),
            ),
            // Every entry invalid still checks the queue.
            case(
                "POST",
                "/v1/queues/nope/messages",
                json_payload(json!({ "messages": [{}] })),
                404,
                Some("queue_not_found"),
            ),
            case("POST", "/v1/queues/nope/receive", Payload::None, 404, Some("queue_not_found")),
            case(
                "POST",
                "/v1/queues/nope/ack",
                json_payload(json!({ "receipts": ["x"] })),
                404,
                Some("queue_not_found"),
            ),
            case("GET", "/v1/queues/nope/messages", Payload::None, 404, Some("queue_not_found")),
            case("POST", "/v1/queues/q/receive", json_payload(json!({ "max": 0 })), 400, Some("invalid_argument"))
                .field("max"),
            case("POST", "/v1/queues/q/receive", json_payload(json!({ "max": 1001 })), 400, Some("invalid_argument"))
                .field("max"),
            case(
                "POST",
                "/v1/queues/q/receive",
                json_payload(json!({ "wait_ms": 20001 })),
                400,
                Some("invalid_argument"),
            )
            .field("wait_ms"),
            case(
                "POST",
                "/v1/queues/q/receive",
                json_payload(json!({ "max": 1, "extra": 1 })),
                400,
                Some("invalid_json"),
            ),
            case(
                "POST",
                "/v1/queues/q/receive",
                Payload::Raw(None, b"{}".to_vec()),
                415,
                Some("unsupported_media_type"),
            ),
            // Every receive field is optional, so an empty body is fine whatever its type.
            case("POST", "/v1/queues/q/receive", Payload::Raw(Some("application/json"), vec![]), 200, None),
            case("POST", "/v1/queues/q/receive", Payload::Raw(Some("text/plain"), vec![]), 200, None),
            case(
                "POST",
                "/v1/queues/q/receive",
                Payload::Raw(Some("application/cloudevents+json; charset=utf-8"), b"{}".to_vec()),
                200,
                None,
            ),
            case(
                "POST",
                "/v1/queues/q/receive",
                Payload::Raw(Some("text/plain"), b"{}".to_vec()),
                415,
                Some("unsupported_media_type"),
            ),
            case(
                "POST",
                "/v1/queues/q/receive",
                Payload::Raw(Some("application/json"), b"{\"max\":".to_vec()),
                400,
                Some("invalid_json"),
            ),
            case("GET", "/v1/queues/q/messages?limit=0", Payload::None, 400, Some("invalid_argument")).field("limit"),
            case("GET", "/v1/queues/q/messages?limit=1001", Payload::None, 400, Some("invalid_argument"))
                .field("limit"),
        ],
    )
    .await;
    // The three successful receives above hold one message each.
    let counts = s.counts("q").await;
    assert_eq!(
        (counts["visible"].as_u64(), counts["in_flight"].as_u64()),
        (Some(997), Some(3)),
        "only the valid batch was sent: {counts}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_are_refused_with_413() {
    let s = TestServer::start();
    s.create_queue(json!({ "name": "q" })).await;
    // Declared length over the limit: refused before reading a byte. The body sent is small
    // and valid, so only the header check can produce this 413.
    let request = axum::http::Request::builder()
        .method("POST")
        .uri("/v1/queues/q/messages")
        .header("content-type", "application/json")
        .header("content-length", REQUEST_BYTES_MAX + 1)
        .body(axum::body::Body::from(r#"{"messages":[{"body":"x"}]}"#))
        .unwrap();
    let (status, _, body) = s.raw(request).await;
    assert_eq!(status.as_u16(), 413);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"]["code"], "payload_too_large");
    // No declared length: cut off while streaming.
    let too_big = vec![b' '; REQUEST_BYTES_MAX + 1];
    check(
        &s,
        vec![case(
            "POST",
            "/v1/queues/q/messages",
            Payload::Raw(Some("application/json"), too_big),
            413,
            Some("payload_too_large"),
        )],
    )
    .await;
    assert_eq!(s.counts("q").await["visible"], 0, "nothing was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peek_reports_each_state_without_receiving() {
    let s = TestServer::start();
    s.create_queue(json!({ "name": "pk" })).await;
    let in_an_hour = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
    let deliver_at = in_an_hour.format(&time::format_description::well_known::Rfc3339).unwrap();
    let answer = s
        .expect(
            "POST",
            "/v1/queues/pk/messages",
            Some(json!({ "messages": [
                { "body": "first" },
                { "body": "delayed", "delay_ms": 60000 },
                { "body": "scheduled", "deliver_at": deliver_at },
                { "body": "last" },
            ]})),
            200,
        )
        .await;
    assert!(answer["results"].as_array().unwrap().iter().all(|r| r["id"].is_string()), "{answer}");
    let got = s.receive("pk", json!({ "visibility_timeout_ms": 60000 })).await;
    assert_eq!(got[0]["body"], "first");

    let peeked = s.expect("GET", "/v1/queues/pk/messages", None, 200).await;
    let messages = peeked["messages"].as_array().expect("messages");
    let states: Vec<(&str, &str)> =
        messages.iter().map(|m| (m["body"].as_str().unwrap(), m["state"].as_str().unwrap())).collect();
    assert_eq!(
        states,
        vec![("first", "in_flight"), ("delayed", "delayed"), ("scheduled", "delayed"), ("last", "visible")]
    );
    assert!(messages.iter().all(|m| m.get("receipt").is_none()), "peek hands out no receipts");
    assert!(messages[3].get("visible_at_ms").is_none());
    let scheduled_at = messages[2]["visible_at_ms"].as_u64().expect("visible_at_ms");
    let wanted = u64::try_from(in_an_hour.unix_timestamp_nanos() / 1_000_000).unwrap();
    assert!(scheduled_at.abs_diff(wanted) <= 1, "{scheduled_at} vs {wanted}");

    let two = s.expect("GET", "/v1/queues/pk/messages?limit=2", None, 200).await;
    assert_eq!(two["messages"].as_array().map(Vec::len), Some(2));
    // Peeking changed nothing.
    let counts = s.counts("pk").await;
    assert_eq!(
        (counts["visible"].as_u64(), counts["in_flight"].as_u64(), counts["delayed"].as_u64()),
        (Some(1), Some(1), Some(2)),
        "{counts}"
    );
}
