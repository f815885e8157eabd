//! The layer's own rules: which keys are taken, which answers are stored, how keys are scoped,
//! the bounds, claims left by a process that died, a slow request waited for, and many clients
//! racing one key.

use std::sync::Arc;

use serde_json::{Value, json};
use sluice_server::ServerConfig;
use sluice_server::idempotency_settings::IdempotencyConfig;
use sluice_services::idempotency::{Claim, Scope, fingerprint};

use crate::support::{Node, TTL_MS, config, manual_clock};

fn send_body(body: &str) -> Value {
    json!({ "messages": [{ "body": body }] })
}

async fn node_with_queue(config: ServerConfig) -> (tempfile::TempDir, Arc<sluice_server::ManualClock>, Node) {
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = manual_clock();
    let node = Node::open(&dir, &clock, config);
    node.expect("POST", "/v1/queues", Some(json!({ "name": "q" })), 201).await;
    (dir, clock, node)
}

async fn visible(node: &Node) -> Value {
    node.expect("GET", "/v1/queues/q", None, 200).await["counts"]["visible"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_keys_are_refused_before_anything_runs() {
    let (_dir, _clock, node) = node_with_queue(config()).await;
    let long = "k".repeat(256);
    for key in ["", "with space", long.as_str(), "tab\there"] {
        let answer = node.call("POST", "/v1/queues/q/messages", Some(key), Some(&send_body("x"))).await;
        assert_eq!((answer.status, answer.code()), (400, json!("idempotency_key_invalid")), "{key:?}");
    }
    let max = "k".repeat(255);
    assert_eq!(node.call("POST", "/v1/queues/q/messages", Some(&max), Some(&send_body("x"))).await.status, 200);
    assert_eq!(visible(&node).await, 1, "only the valid key's send ran");
    node.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_answers_are_not_stored_so_a_retry_runs() {
    let (_dir, _clock, node) = node_with_queue(config()).await;
    let empty = json!({ "messages": [] });
    let refused = node.call("POST", "/v1/queues/q/messages", Some("k"), Some(&empty)).await;
    assert_eq!(refused.status, 400);
    // The claim was given back: the same key with the corrected body runs, and is no mismatch.
    let fixed = node.call("POST", "/v1/queues/q/messages", Some("k"), Some(&send_body("x"))).await;
    assert_eq!((fixed.status, fixed.replayed()), (200, false));
    assert_eq!(visible(&node).await, 1);
    // A 404 is an answer like any other: stored and replayed.
    let missing = node.call("POST", "/v1/queues/none/messages", Some("n"), Some(&send_body("x"))).await;
    assert_eq!(missing.status, 404);
    let again = node.call("POST", "/v1/queues/none/messages", Some("n"), Some(&send_body("x"))).await;
    assert_eq!((again.status, again.replayed(), again.body == missing.body), (404, true, true));
    node.close().await;
}

/// A keyed send into a bounded queue answers as a plain send does (`dead_lettered`, `depth`
/// and its headers), its replay keeps the body, and a send refused whole because the queue is
/// full is not stored, so its retry sends once there is room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_send_into_a_bounded_queue_answers_as_a_plain_send() {
    let (_dir, _clock, node) = node_with_queue(config()).await;
    let bounded = json!({
        "name": "bounded", "max_depth_messages": 2, "overflow": "reject_to_dlq",
        "dead_letter": {"queue": "q", "max_receive_count": 3}
    });
    node.expect("POST", "/v1/queues", Some(bounded), 201).await;
    let three = json!({ "messages": [{ "body": "a" }, { "body": "b" }, { "body": "c" }] });
    let keyed = node.call("POST", "/v1/queues/bounded/messages", Some("three"), Some(&three)).await;
    let plain = node.call("POST", "/v1/queues/bounded/messages", None, Some(&three)).await;
    assert_eq!((keyed.status, plain.status), (200, 200));
    let (k, p) = (keyed.json(), plain.json());
    assert_eq!(k["results"][2]["dead_lettered"], true, "{k}");
    assert!(k["results"][0].get("dead_lettered").is_none(), "{k}");
    assert_eq!(k["depth"], json!({"messages": 2, "bytes": 2, "max_depth_messages": 2}), "{k}");
    assert_eq!(keyed.headers.get("sluice-queue-depth").map(|v| v.to_str().unwrap()), Some("2"));
    assert_eq!(keyed.headers.get("sluice-queue-depth-max").map(|v| v.to_str().unwrap()), Some("2"));
    // The plain send after it found the queue full: every message to the DLQ; both answers
    // carry the same fields.
    let fields =
        |v: &Value| v["results"].as_array().unwrap().iter().map(|r| r["dead_lettered"].clone()).collect::<Vec<_>>();
    assert_eq!(fields(&p), [json!(true), json!(true), json!(true)], "{p}");
    assert_eq!(p["depth"], k["depth"], "{p}");
    let replay = node.call("POST", "/v1/queues/bounded/messages", Some("three"), Some(&three)).await;
    assert!(replay.replayed());
    assert_eq!(replay.json(), k, "the replay is the first answer, depth and dead-lettering included");

    let full = json!({"name": "full", "max_depth_messages": 1});
    node.expect("POST", "/v1/queues", Some(full), 201).await;
    node.expect("POST", "/v1/queues/full/messages", Some(send_body("first")), 200).await;
    let refused = node.call("POST", "/v1/queues/full/messages", Some("later"), Some(&send_body("second"))).await;
    assert_eq!((refused.status, refused.code()), (429, json!("queue_full")));
    assert!(refused.headers.contains_key("retry-after"));
    node.expect("POST", "/v1/queues/full/purge", None, 200).await;
    let retried = node.call("POST", "/v1/queues/full/messages", Some("later"), Some(&send_body("second"))).await;
    assert_eq!((retried.status, retried.replayed()), (200, false), "the refusal was not stored");
    node.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_scoped_by_method_and_path_and_reads_ignore_them() {
    let (_dir, _clock, node) = node_with_queue(config()).await;
    node.expect("POST", "/v1/queues", Some(json!({ "name": "r" })), 201).await;
    let a = node.call("POST", "/v1/queues/q/messages", Some("same"), Some(&send_body("x"))).await;
    let b = node.call("POST", "/v1/queues/r/messages", Some("same"), Some(&send_body("x"))).await;
    assert!(!a.replayed() && !b.replayed(), "one key on two paths is two keys");
    assert_ne!(a.body, b.body);
    let read = node.call("GET", "/v1/queues/q", Some("same"), None).await;
    assert_eq!((read.status, read.replayed()), (200, false));
    // JSON bodies compare by content, not by spelling; an empty body is another body.
    let headers = [("idempotency-key", "spelled")];
    let path = "/v1/queues/q/messages";
    let compact =
        node.send_bytes("POST", path, &headers, Some(br#"{"messages":[{"priority":1,"body":"x"}]}"#.to_vec())).await;
    let spaced = br#"{ "messages" : [ { "body" : "x", "priority" : 1 } ] }"#.to_vec();
    let spaced = node.send_bytes("POST", path, &headers, Some(spaced)).await;
    assert_eq!((compact.replayed(), spaced.replayed(), spaced.body == compact.body), (false, true, true));
    let empty = node.send_bytes("POST", path, &headers, None).await;
    assert_eq!(empty.code(), "idempotency_key_mismatch");
    node.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bounds_refuse_new_keys_until_old_ones_expire() {
    let idempotency = IdempotencyConfig { ttl_ms: TTL_MS, entries_count_max: 2, ..IdempotencyConfig::default() };
    let (_dir, clock, node) = node_with_queue(ServerConfig { idempotency, ..config() }).await;
    for key in ["a", "b"] {
        assert_eq!(node.call("POST", "/v1/queues/q/messages", Some(key), Some(&send_body(key))).await.status, 200);
    }
    let full = node.call("POST", "/v1/queues/q/messages", Some("c"), Some(&send_body("c"))).await;
    assert_eq!((full.status, full.code()), (429, json!("idempotency_keys_full")));
    assert_eq!(full.json()["error"]["details"]["bound"], "entries");
    assert!(full.headers.get("retry-after").is_some());
    assert_eq!(visible(&node).await, 2, "the refused request did not run");
    // Kept answers are never evicted to make room: they still replay.
    let kept = node.call("POST", "/v1/queues/q/messages", Some("a"), Some(&send_body("a"))).await;
    assert!(kept.replayed());
    clock.advance_by(TTL_MS);
    let report = node.services.idempotency().sweep_once().await.expect("sweep");
    assert_eq!((report.expired_deleted, report.entries), (2, 0));
    let room = node.call("POST", "/v1/queues/q/messages", Some("c"), Some(&send_body("c"))).await;
    assert_eq!(room.status, 200);
    node.close().await;

    let idempotency = IdempotencyConfig { ttl_ms: TTL_MS, entries_bytes_max: 1, ..IdempotencyConfig::default() };
    let (_dir, _clock, node) = node_with_queue(ServerConfig { idempotency, ..config() }).await;
    assert_eq!(node.call("POST", "/v1/queues/q/messages", Some("a"), Some(&send_body("a"))).await.status, 200);
    let full = node.call("POST", "/v1/queues/q/messages", Some("b"), Some(&send_body("b"))).await;
    assert_eq!((full.status, full.json()["error"]["details"]["bound"].clone()), (429, json!("bytes")));
    node.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_claims_its_key_in_its_own_commit_and_an_expired_entry_is_taken_over() {
    let (_dir, clock, node) = node_with_queue(config()).await;
    let first = node.call("POST", "/v1/queues/q/messages", Some("k"), Some(&send_body("x"))).await;
    assert_eq!((first.status, first.replayed()), (200, false));
    // The send wrote no claim of its own before its commit: the entry is the committed answer.
    let scope = Scope {
        principal: "anonymous".into(),
        method: "POST".into(),
        path: "/v1/queues/q/messages".into(),
        key: "k".into(),
    };
    let (entry, answer) = node.services.idempotency().get(&scope).await.expect("get").expect("an entry");
    assert_eq!(entry.fingerprint, fingerprint(send_body("x").to_string().as_bytes()));
    assert_eq!(answer.expect("committed with the send").body, first.body);
    // The entry expires but is not swept yet: the send's commit finds it and is refused whole,
    // the layer takes the expired entry over and runs the send again, once.
    clock.advance_by(TTL_MS);
    let again = node.call("POST", "/v1/queues/q/messages", Some("k"), Some(&send_body("x"))).await;
    assert_eq!((again.status, again.replayed()), (200, false), "an expired key runs again");
    assert_ne!(again.body, first.body, "a new message");
    assert_eq!(visible(&node).await, 2);
    let replayed = node.call("POST", "/v1/queues/q/messages", Some("k"), Some(&send_body("x"))).await;
    assert!(replayed.replayed());
    assert_eq!(replayed.body, again.body);
    let other = node.call("POST", "/v1/queues/q/messages", Some("k"), Some(&send_body("y"))).await;
    assert_eq!((other.status, other.code()), (409, json!("idempotency_key_mismatch")));
    assert_eq!(visible(&node).await, 2, "neither the replay nor the mismatch sent anything");
    node.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_left_by_a_dead_process_is_taken_over() {
    // Embedded: the store has one process at a time, so a claim of an earlier run is dead.
    let (dir, clock, node) = node_with_queue(config()).await;
    let scope = Scope {
        principal: "anonymous".into(),
        method: "POST".into(),
        path: "/v1/queues/q/messages".into(),
        key: "k".into(),
    };
    let body = send_body("x").to_string();
    let Claim::Execute(_left) = node.services.idempotency().claim(&scope, &fingerprint(body.as_bytes())).await.unwrap()
    else {
        panic!("claimed")
    };
    assert_eq!(node.call("POST", "/v1/queues/q/messages", Some("k"), Some(&send_body("x"))).await.status, 409);
    node.close().await;
    let node = Node::open(&dir, &clock, config());
    let retried = node.call("POST", "/v1/queues/q/messages", Some("k"), Some(&send_body("x"))).await;
    assert_eq!((retried.status, retried.replayed()), (200, false), "the retry runs once");
    assert_eq!(visible(&node).await, 1);
    node.close().await;

    // Shared store: another process's claim is alive until `claim_abandoned_ms` has passed.
    let shared = IdempotencyConfig { ttl_ms: 10 * TTL_MS, claim_abandoned_ms: TTL_MS, ..IdempotencyConfig::default() };
    let shared = ServerConfig { idempotency: shared, ..config() };
    let node = Node::open(&dir, &clock, shared.clone());
    let Claim::Execute(_left) = node
        .services
        .idempotency()
        .claim(&Scope { key: "k2".into(), ..scope.clone() }, &fingerprint(b"{}"))
        .await
        .unwrap()
    else {
        panic!("claimed")
    };
    node.close().await;
    let node = Node::open(&dir, &clock, shared);
    let busy = node.call("POST", "/v1/queues/q/messages", Some("k2"), Some(&json!({}))).await;
    assert_eq!(busy.code(), "idempotency_key_in_use");
    clock.advance_by(TTL_MS);
    let taken = node.call("POST", "/v1/queues/q/messages", Some("k2"), Some(&json!({}))).await;
    assert_ne!(taken.code(), "idempotency_key_in_use", "abandoned after claim_abandoned_ms");
    node.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_request_is_in_use_and_waited_for() {
    let (_dir, _clock, node) = node_with_queue(config()).await;
    let poll = json!({ "max": 1, "wait_ms": 20000 });
    let first = {
        let node = node.clone();
        let poll = poll.clone();
        tokio::spawn(async move { node.call("POST", "/v1/queues/q/receive", Some("r"), Some(&poll)).await })
    };
    let scope = Scope {
        principal: "anonymous".into(),
        method: "POST".into(),
        path: "/v1/queues/q/receive".into(),
        key: "r".into(),
    };
    // The long poll has claimed the key once its entry is in progress.
    loop {
        if let Some((entry, None)) = node.services.idempotency().get(&scope).await.expect("get") {
            assert_eq!(entry.path, "/v1/queues/q/receive");
            break;
        }
        tokio::task::yield_now().await;
    }
    let busy = node.call("POST", "/v1/queues/q/receive", Some("r"), Some(&poll)).await;
    assert_eq!((busy.status, busy.code()), (409, json!("idempotency_key_in_use")));
    let waiting = {
        let node = node.clone();
        let poll = poll.clone();
        tokio::spawn(async move {
            let headers = [("idempotency-key", "r"), ("prefer", "wait=30")];
            node.send("POST", "/v1/queues/q/receive", &headers, Some(&poll)).await
        })
    };
    node.expect("POST", "/v1/queues/q/messages", Some(send_body("wake")), 200).await;
    let first = first.await.expect("first");
    let waited = waiting.await.expect("waiter");
    assert_eq!(first.status, 200);
    assert_eq!(first.json()["messages"][0]["body"], "wake");
    assert!(waited.replayed());
    assert_eq!(waited.body, first.body, "the same receipt, not a second receive");
    node.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_clients_racing_one_key_execute_once() {
    let (_dir, _clock, node) = node_with_queue(config()).await;
    let racers: Vec<_> = (0..32)
        .map(|_| {
            let node = node.clone();
            tokio::spawn(async move {
                node.call("POST", "/v1/queues/q/messages", Some("race"), Some(&send_body("once"))).await
            })
        })
        .collect();
    let mut answers = Vec::new();
    for racer in racers {
        answers.push(racer.await.expect("racer"));
    }
    let executed: Vec<_> = answers.iter().filter(|a| a.status == 200 && !a.replayed()).collect();
    assert_eq!(executed.len(), 1, "exactly one execution");
    for a in &answers {
        let same = a.status == 200 && a.body == executed[0].body;
        assert!(same || a.code() == "idempotency_key_in_use", "{} {}", a.status, String::from_utf8_lossy(&a.body));
    }
    assert_eq!(visible(&node).await, 1);
    node.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_outcomes_and_kept_entries() {
    let (_dir, _clock, node) = node_with_queue(config()).await;
    for _ in 0..2 {
        node.call("POST", "/v1/queues/q/messages", Some("m"), Some(&send_body("x"))).await;
    }
    node.call("POST", "/v1/queues/q/messages", Some("m"), Some(&send_body("y"))).await;
    let answer = node.call("GET", "/metrics", None, None).await;
    let text = String::from_utf8(answer.body).expect("text");
    assert!(text.contains("sluice_idempotency_entries 1"), "{text}");
    for outcome in ["executed", "replayed", "mismatch"] {
        let line = format!("sluice_idempotency_requests_total{{outcome=\"{outcome}\"}}");
        assert!(text.contains(&line), "{line} missing");
    }
    assert!(text.lines().any(|l| l.starts_with("sluice_idempotency_bytes ") && !l.ends_with(" 0")), "{text}");
    node.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_names_the_header_on_every_mutating_operation() {
    let (_dir, _clock, node) = node_with_queue(config()).await;
    let doc = node.expect("GET", "/v1/openapi.json", None, 200).await;
    let mut mutating = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            let names: Vec<&str> = op["parameters"]
                .as_array()
                .map(|ps| ps.iter().filter_map(|p| p["name"].as_str()).collect())
                .unwrap_or_default();
            let keyed = names.contains(&"Idempotency-Key");
            if ["post", "put", "patch", "delete"].contains(&method.as_str()) && path.starts_with("/v1/") {
                mutating += 1;
                assert!(keyed && names.contains(&"Prefer"), "{method} {path}: {names:?}");
                let conflict = op["responses"]["409"]["description"].as_str().unwrap_or_default();
                assert!(conflict.contains("idempotency_key_in_use"), "{method} {path}: {conflict}");
                assert!(op["responses"]["429"].is_object(), "{method} {path}");
            } else {
                assert!(!keyed, "{method} {path} is not mutating");
            }
        }
    }
    assert!(mutating >= 38, "{mutating} mutating operations");
    node.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enqueue_or_append_run_again_after_its_process_died_answers_the_first_effect() {
    // A job enqueue and an event append commit apart from their stored answer: a process that
    // dies between the two leaves the effect and an in-progress claim. Here the first attempt
    // is played by hand (its claim, then its effect under the names the route gives), and the
    // node closed before any answer is stored; the retry takes the claim over and must find
    // that effect instead of making a second one.
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = manual_clock();
    let node = Node::open(&dir, &clock, config());
    let scope =
        |path: &str| Scope { principal: "anonymous".into(), method: "POST".into(), path: path.into(), key: "k".into() };
    let job = json!({ "queue": "jq", "type": "pdf", "payload": { "report": 1 } });
    let events = json!({ "events": [{ "type": "Placed", "data": {} }, { "type": "Paid", "data": {} }] });
    let claim = |path: &'static str, body: Value| {
        let node = node.clone();
        async move {
            let bytes = body.to_string();
            match node.services.idempotency().claim(&scope(path), &fingerprint(bytes.as_bytes())).await.unwrap() {
                Claim::Execute(ticket) => ticket,
                other => panic!("{path}: a fresh key is claimed, not {other:?}"),
            }
        }
    };
    let ticket = claim("/v1/jobs", job.clone()).await;
    let first = node
        .services
        .jobs()
        .enqueue(sluice_core::jobs::NewJob {
            queue: "jq".into(),
            job_type: "pdf".into(),
            payload: br#"{"report":1}"#.to_vec(),
            unique_key: Some(ticket.job_unique_key()),
            unique_for_ms: Some(ticket.kept_for_ms()),
            ..Default::default()
        })
        .await
        .expect("first attempt's enqueue");
    let ticket = claim("/v1/events/streams/order-1", events.clone()).await;
    let placed = |n: usize, t: &str| sluice_core::events::NewEvent {
        id: ticket.effect_id(n).to_string(),
        r#type: t.into(),
        data: "{}".into(),
        metadata: None,
        correlation_id: None,
        causation_id: None,
    };
    node.services
        .store()
        .append_events(
            "order-1",
            sluice_core::events::ExpectedVersion::Any,
            vec![placed(0, "Placed"), placed(1, "Paid")],
        )
        .await
        .expect("first attempt's append");
    node.close().await;

    let node = Node::open(&dir, &clock, config());
    let retried = node.call("POST", "/v1/jobs", Some("k"), Some(&job)).await;
    assert_eq!((retried.status, retried.replayed()), (200, false), "{}", String::from_utf8_lossy(&retried.body));
    assert_eq!(retried.json()["id"], first.view.record.id.to_string(), "the retry answers the first attempt's job");
    let listed = node.expect("GET", "/v1/jobs?queue=jq", None, 200).await;
    assert_eq!(listed["jobs"].as_array().map(Vec::len), Some(1), "one job: {listed}");
    let replay = node.call("POST", "/v1/jobs", Some("k"), Some(&job)).await;
    assert!(replay.replayed() && replay.body == retried.body, "the retry's answer is stored");

    let appended = node.call("POST", "/v1/events/streams/order-1", Some("k"), Some(&events)).await;
    assert_eq!((appended.status, appended.replayed()), (200, false), "{}", String::from_utf8_lossy(&appended.body));
    assert_eq!(
        (appended.json()["first_version"].clone(), appended.json()["last_version"].clone()),
        (json!(0), json!(1))
    );
    let stream = node.expect("GET", "/v1/events/streams/order-1", None, 200).await;
    assert_eq!(stream["last_version"], 1, "nothing appended twice: {stream}");

    // A key used again after its TTL is a new request: it makes a new effect.
    clock.advance_by(TTL_MS);
    let later = node.call("POST", "/v1/jobs", Some("k"), Some(&job)).await;
    assert_eq!(later.status, 202, "{}", String::from_utf8_lossy(&later.body));
    node.close().await;
}
