//! Dead-letter flow and redrive: a message past its receive limit lands in the DLQ with its
//! source and last error, and a redrive moves it back with visible progress; cancel stops it.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Payload, TestServer, case, check, json_payload};

/// Polls a redrive task until it leaves `running`, or fails after a few seconds.
async fn wait_finished(s: &TestServer, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let task = s.expect("GET", &format!("/v1/redrives/{id}"), None, 200).await;
        if task["status"] != "running" {
            return task;
        }
        assert!(Instant::now() < deadline, "redrive still running: {task}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_lettered_messages_keep_their_story_and_redrive_back() {
    let s = TestServer::start();
    s.create_queue(json!({ "name": "work-dlq" })).await;
    s.create_queue(json!({ "name": "work", "dead_letter": { "queue": "work-dlq", "max_receive_count": 1 } })).await;
    let ids = s.send_texts("work", &["a", "b", "c"]).await;

    let got = s.receive("work", json!({ "max": 10, "visibility_timeout_ms": 60000 })).await;
    assert_eq!(got.len(), 3);
    let entries: Vec<Value> =
        got.iter().map(|m| json!({ "receipt": m["receipt"], "error": "payment service timed out" })).collect();
    let nacked = s.expect("POST", "/v1/queues/work/nack", Some(json!({ "entries": entries })), 200).await;
    assert!(nacked["results"].as_array().unwrap().iter().all(|r| r["ok"] == true), "{nacked}");

    // One receive used up the policy: every message is in the DLQ, none in the source.
    assert_eq!(s.counts("work").await["visible"], 0);
    assert_eq!(s.counts("work").await["dlq_depth"], 3);
    let dead = s.receive("work-dlq", json!({ "max": 10, "visibility_timeout_ms": 60000 })).await;
    assert_eq!(dead.len(), 3);
    for m in &dead {
        assert!(ids.contains(&m["id"].as_str().unwrap().to_string()), "the id is kept: {m}");
        assert_eq!(m["dead_letter_source"], "work");
        assert_eq!(m["last_error"], "payment service timed out");
    }
    // Give them back to the DLQ at once so that a redrive can see them.
    let entries: Vec<Value> = dead.iter().map(|m| json!({ "receipt": m["receipt"], "timeout_ms": 0 })).collect();
    s.expect("POST", "/v1/queues/work-dlq/visibility", Some(json!({ "entries": entries })), 200).await;
    assert_eq!(s.counts("work-dlq").await["visible"], 3);

    let task = s.expect("POST", "/v1/queues/work-dlq/redrive", Some(json!({ "max_per_second": 1000 })), 202).await;
    assert_eq!(task["source"], "work-dlq");
    assert_eq!(task["total"], 3);
    assert_eq!(task["max_per_second"], 1000);
    let id = task["id"].as_str().expect("id").to_string();
    let done = wait_finished(&s, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["moved"], 3);
    assert_eq!(done["failed"], 0);
    assert!(done["finished_at"].is_string());

    assert_eq!(s.counts("work-dlq").await["visible"], 0);
    let back = s.expect("GET", "/v1/queues/work/messages", None, 200).await;
    let back = back["messages"].as_array().unwrap();
    assert_eq!(back.len(), 3);
    for m in back {
        assert_eq!(m["state"], "visible");
        assert!(m.get("dead_letter_source").is_none(), "{m}");
        assert_eq!(m["receive_count"], 0, "a redriven message starts its receive count again");
    }

    let listed = s.expect("GET", "/v1/queues/work-dlq/redrive", None, 200).await;
    assert_eq!(listed["tasks"].as_array().map(Vec::len), Some(1));
    assert_eq!(listed["tasks"][0]["id"], id.as_str());
    let none = s.expect("GET", "/v1/queues/work/redrive", None, 200).await;
    assert_eq!(none["tasks"], json!([]));
    let all = s.expect("GET", "/v1/redrives", None, 200).await;
    assert_eq!(all["tasks"].as_array().map(Vec::len), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_redrive_is_exclusive_and_cancellable() {
    let s = TestServer::start();
    s.create_queue(json!({ "name": "src" })).await;
    s.create_queue(json!({ "name": "dst" })).await;
    s.send_texts("src", &["1", "2", "3", "4", "5"]).await;

    let task = s.expect("POST", "/v1/queues/src/redrive", Some(json!({ "to": "dst", "max_per_second": 1 })), 202).await;
    let id = task["id"].as_str().unwrap().to_string();
    assert_eq!(task["status"], "running");
    assert_eq!(task["to"], "dst");
    check(
        &s,
        vec![
            case("POST", "/v1/queues/src/redrive", json_payload(json!({ "to": "dst" })), 409, Some("redrive_running")),
            case(
                "POST",
                "/v1/queues/src/redrive",
                json_payload(json!({ "max_per_second": 0 })),
                400,
                Some("invalid_argument"),
            )
            .field("max_per_second"),
            case(
                "POST",
                "/v1/queues/src/redrive",
                json_payload(json!({ "max_per_second": 100001 })),
                400,
                Some("invalid_argument"),
            )
            .field("max_per_second"),
            case("POST", "/v1/queues/src/redrive", json_payload(json!({ "to": "nope" })), 404, Some("queue_not_found")),
            case("POST", "/v1/queues/dst/redrive", json_payload(json!({ "to": "dst" })), 400, Some("invalid_argument"))
                .field("to"),
            case("POST", "/v1/queues/nope/redrive", Payload::None, 404, Some("queue_not_found")),
            case("GET", "/v1/redrives/999", Payload::None, 404, Some("redrive_not_found")),
            case("GET", "/v1/redrives/not-an-id", Payload::None, 404, Some("redrive_not_found")),
            case("DELETE", "/v1/redrives/999", Payload::None, 404, Some("redrive_not_found")),
        ],
    )
    .await;

    // The first step moves one message at once; the next would come a second later.
    let deadline = Instant::now() + Duration::from_secs(5);
    while s.expect("GET", &format!("/v1/redrives/{id}"), None, 200).await["moved"] == 0 {
        assert!(Instant::now() < deadline, "the first step never ran");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let cancelled = s.expect("DELETE", &format!("/v1/redrives/{id}"), None, 200).await;
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["moved"], 1);
    assert!(cancelled["finished_at"].is_string());
    // Past the time of the next step: after cancel no step runs, and nothing is lost or
    // duplicated by stopping in the middle.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = s.expect("GET", &format!("/v1/redrives/{id}"), None, 200).await;
    assert_eq!(after["status"], "cancelled");
    let moved = after["moved"].as_u64().unwrap();
    assert_eq!(moved, 1, "a step ran after cancel: {after}");
    let in_src = s.counts("src").await["visible"].as_u64().unwrap();
    let in_dst = s.counts("dst").await["visible"].as_u64().unwrap();
    assert_eq!(in_dst, moved);
    assert_eq!(in_src + in_dst, 5);

    // With the first one over, a new redrive of the same queue may start.
    let second =
        s.expect("POST", "/v1/queues/src/redrive", Some(json!({ "to": "dst", "max_per_second": 100000 })), 202).await;
    let done = wait_finished(&s, second["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["moved"].as_u64(), Some(in_src));
    assert_eq!(s.counts("dst").await["visible"], 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_without_a_destination_are_counted_as_failed() {
    let s = TestServer::start();
    s.create_queue(json!({ "name": "plain" })).await;
    s.send_texts("plain", &["never dead-lettered"]).await;
    // No `to`, and the message has no dead-letter source: it cannot move.
    let task = s.expect("POST", "/v1/queues/plain/redrive", None, 202).await;
    let done = wait_finished(&s, task["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["moved"], 0);
    assert_eq!(done["failed"], 1);
    assert_eq!(s.counts("plain").await["visible"], 1);
}
