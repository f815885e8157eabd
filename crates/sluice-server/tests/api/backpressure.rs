//! Backpressure through the native API: depth limits answer `queue_full` (429 with
//! `Retry-After` when every entry is refused, per entry otherwise) and carry the depth in send
//! answers and headers; `drop_head` and `reject_to_dlq` move messages with their reason; a
//! policy that would drop without a dead-letter queue is refused; rate limits answer
//! `rate_limited`; load shedding refuses low priorities first (503 `shedding`) while high ones
//! are taken, and `/readyz` and `/metrics` say so; every refusal is counted. Topics and streams
//! have rate limits of their own; a queue's limits its job queue's enqueues.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_server::{ServerConfig, ShedConfig, SystemClock};
use sluice_services::shedding::Figures;
use sluice_store::Store;
use tower::ServiceExt;

use crate::support::TestServer;

/// `sluice_rejected_total{resource, reason="rate_limited"}` as `/metrics` shows it now.
async fn rate_limited(s: &TestServer, resource: &str) -> Option<f64> {
    rejected(s, resource, "rate_limited").await
}

/// `sluice_rejected_total{resource, reason}` as `/metrics` shows it now.
async fn rejected(s: &TestServer, resource: &str, reason: &str) -> Option<f64> {
    let (_, _, metrics) = s.raw(Request::get("/metrics").body(Body::empty()).unwrap()).await;
    let series = format!(r#"sluice_rejected_total{{resource="{resource}",reason="{reason}"}} "#);
    String::from_utf8(metrics).unwrap().lines().find_map(|l| l.strip_prefix(series.as_str())?.parse().ok())
}

fn send_body(bodies: &[(&str, u8)]) -> Value {
    json!({ "messages": bodies.iter().map(|(b, p)| json!({"body": b, "priority": p})).collect::<Vec<_>>() })
}

async fn post(app: &axum::Router, path: &str, body: Value) -> (StatusCode, axum::http::HeaderMap, Value) {
    let request = Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .expect("request");
    let response = app.clone().oneshot(request).await.expect("the router never fails");
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body");
    (status, headers, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn get_text(app: &axum::Router, path: &str) -> (StatusCode, String) {
    let response = app.clone().oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_refuses_with_retry_after_and_reports_its_depth() {
    let s = TestServer::start();
    s.create_queue(json!({"name": "q", "max_depth_messages": 3})).await;
    let app = s.clone_app();
    let (status, headers, answer) = post(&app, "/v1/queues/q/messages", send_body(&[("a", 0), ("b", 0)])).await;
    assert_eq!(status, 200);
    assert_eq!(answer["depth"], json!({"messages": 2, "bytes": 2, "max_depth_messages": 3}));
    assert_eq!(headers["sluice-queue-depth"], "2");
    assert_eq!(headers["sluice-queue-depth-max"], "3");
    // One fits, one does not: 200 with a per-entry refusal and Retry-After.
    let (status, headers, answer) = post(&app, "/v1/queues/q/messages", send_body(&[("c", 0), ("d", 0)])).await;
    assert_eq!(status, 200);
    assert!(answer["results"][0]["id"].is_string());
    assert_eq!(answer["results"][1]["error"]["code"], "queue_full");
    assert_eq!(answer["results"][1]["error"]["details"]["max_depth_messages"], 3);
    assert_eq!(headers["retry-after"], "1");
    // Nothing fits: the whole call is 429 queue_full with Retry-After.
    let (status, headers, answer) = post(&app, "/v1/queues/q/messages", send_body(&[("e", 0)])).await;
    assert_eq!(status, 429);
    assert_eq!(answer["error"]["code"], "queue_full");
    assert_eq!(answer["error"]["details"]["depth_messages"], 3);
    assert_eq!(headers["retry-after"], "1");
    let counts = s.counts("q").await;
    assert_eq!(counts["refusals"]["queue_full"], 2);
    assert_eq!(counts["depth_bytes"], 3);
    let (_, metrics) = get_text(&app, "/metrics").await;
    let line = metrics
        .lines()
        .find(|l| l.starts_with("sluice_rejected_total") && l.contains("queue:q") && l.contains("\"queue_full\""))
        .unwrap_or_else(|| panic!("no refusal series in:\n{metrics}"));
    assert!(line.ends_with(" 2"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflow_policies_move_messages_with_their_reason_and_need_a_dlq() {
    let s = TestServer::start();
    s.create_queue(json!({"name": "dlq"})).await;
    let refused = s
        .expect(
            "POST",
            "/v1/queues",
            Some(json!({"name": "nodlq", "max_depth_messages": 1, "overflow": "drop_head"})),
            400,
        )
        .await;
    assert_eq!(
        (refused["error"]["code"].as_str(), refused["error"]["details"]["field"].as_str()),
        (Some("invalid_argument"), Some("overflow"))
    );
    let dead_letter = json!({"queue": "dlq", "max_receive_count": 5});
    s.create_queue(
        json!({"name": "drop", "max_depth_messages": 1, "overflow": "drop_head", "dead_letter": dead_letter}),
    )
    .await;
    s.create_queue(
        json!({"name": "todlq", "max_depth_messages": 1, "overflow": "reject_to_dlq", "dead_letter": dead_letter}),
    )
    .await;
    s.send_texts("drop", &["old", "new"]).await;
    let app = s.clone_app();
    s.send_texts("todlq", &["kept"]).await;
    let (_, _, answer) = post(&app, "/v1/queues/todlq/messages", send_body(&[("sideways", 0)])).await;
    assert_eq!(answer["results"][0]["dead_lettered"], true);
    let moved = s.receive("dlq", json!({"max": 10})).await;
    let got: Vec<(String, String, String)> = moved
        .iter()
        .map(|m| {
            let text = |k: &str| m[k].as_str().unwrap_or_default().to_string();
            (text("body"), text("dead_letter_source"), text("last_error"))
        })
        .collect();
    assert_eq!(got.len(), 2, "{moved:?}");
    assert_eq!((got[0].0.as_str(), got[0].1.as_str()), ("old", "drop"));
    assert!(got[0].2.starts_with("drop_head"), "{}", got[0].2);
    assert_eq!((got[1].0.as_str(), got[1].1.as_str()), ("sideways", "todlq"));
    assert!(got[1].2.starts_with("reject_to_dlq"), "{}", got[1].2);
    let queue = s.expect("GET", "/v1/queues/drop", None, 200).await;
    assert_eq!(
        (queue["overflow"].as_str(), queue["counts"]["refusals"]["drop_head"].as_u64()),
        (Some("drop_head"), Some(1))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_refuses_past_its_bucket() {
    let s = TestServer::start();
    s.create_queue(json!({"name": "q", "rate_limit": {"per_second": 1, "burst": 2}})).await;
    let app = s.clone_app();
    let (status, _, answer) = post(&app, "/v1/queues/q/messages", send_body(&[("a", 0), ("b", 0), ("c", 0)])).await;
    assert_eq!(status, 200);
    assert_eq!(answer["results"][2]["error"]["code"], "rate_limited");
    let (status, headers, answer) = post(&app, "/v1/queues/q/messages", send_body(&[("d", 0)])).await;
    assert_eq!((status.as_u16(), answer["error"]["code"].as_str()), (429, Some("rate_limited")));
    assert!(headers.contains_key("retry-after"));
    assert_eq!(s.counts("q").await["refusals"]["rate_limited"], 2);
    let queue = s.expect("GET", "/v1/queues/q", None, 200).await;
    assert_eq!(queue["rate_limit"], json!({"per_second": 1, "burst": 2}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topics_rate_limit_refuses_past_its_bucket() {
    let s = TestServer::start();
    let limit = json!({"per_second": 1, "burst": 2});
    let created = s.expect("POST", "/v1/topics", Some(json!({"name": "t", "rate_limit": limit})), 201).await;
    assert_eq!(created["rate_limit"], limit);
    assert_eq!(created["attributes"]["RateLimit"], r#"{"per_second":1,"burst":2}"#);
    let app = s.clone_app();
    let publish =
        |bodies: &[&str]| json!({ "messages": bodies.iter().map(|b| json!({"body": b})).collect::<Vec<_>>() });
    let (status, headers, answer) = post(&app, "/v1/topics/t/publish", publish(&["a", "b", "c"])).await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer["results"][1]["id"].is_string(), "{answer}");
    assert_eq!(answer["results"][2]["error"]["code"], "rate_limited", "{answer}");
    assert!(answer["results"][2]["error"]["details"]["retry_after_ms"].as_u64().unwrap() <= 1000);
    assert!(headers.contains_key("retry-after"), "a partly refused publish says when to retry");
    let (status, headers, answer) = post(&app, "/v1/topics/t/publish", publish(&["d"])).await;
    assert_eq!((status.as_u16(), answer["error"]["code"].as_str()), (429, Some("rate_limited")), "{answer}");
    assert!(headers.contains_key("retry-after"));
    assert_eq!(rate_limited(&s, "topic:t").await, Some(2.0));

    // A bad limit is refused with its field; `null` removes the limit.
    let bad = json!({"rate_limit": {"per_second": 0, "burst": 1}});
    let answer = s.expect("PATCH", "/v1/topics/t", Some(bad), 400).await;
    assert_eq!(answer["error"]["details"]["field"], "rate_limit.per_second", "{answer}");
    let patched = s.expect("PATCH", "/v1/topics/t", Some(json!({"rate_limit": null})), 200).await;
    assert!(patched.get("rate_limit").is_none(), "{patched}");
    let (status, _, answer) = post(&app, "/v1/topics/t/publish", publish(&["e", "f", "g"])).await;
    assert_eq!(status, 200);
    assert!(answer["results"].as_array().unwrap().iter().all(|r| r["id"].is_string()), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streams_rate_limit_refuses_past_its_bucket() {
    let s = TestServer::start();
    let limit = json!({"per_second": 1, "burst": 2});
    let created = s.expect("POST", "/v1/streams", Some(json!({"name": "st", "rate_limit": limit})), 201).await;
    assert_eq!(created["rate_limit"], limit);
    let app = s.clone_app();
    let append = |bodies: &[&str]| json!({ "records": bodies.iter().map(|b| json!({"body": b})).collect::<Vec<_>>() });
    let (status, headers, answer) = post(&app, "/v1/streams/st/records", append(&["a", "b", "c"])).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!((answer["results"][0]["offset"].clone(), answer["results"][1]["offset"].clone()), (json!(0), json!(1)));
    assert_eq!(answer["results"][2]["error"]["code"], "rate_limited", "{answer}");
    assert!(headers.contains_key("retry-after"), "a partly refused append says when to retry");
    let (status, headers, answer) = post(&app, "/v1/streams/st/records", append(&["d"])).await;
    assert_eq!((status.as_u16(), answer["error"]["code"].as_str()), (429, Some("rate_limited")), "{answer}");
    assert!(headers.contains_key("retry-after"));
    let read = s.expect("GET", "/v1/streams/st/partitions/0/records?from_offset=0", None, 200).await;
    assert_eq!(read["records"].as_array().unwrap().len(), 2, "a refused record is not appended: {read}");
    assert_eq!(rate_limited(&s, "stream:st").await, Some(2.0));

    let bad = json!({"rate_limit": {"per_second": 1, "burst": 0}});
    let answer = s.expect("PATCH", "/v1/streams/st", Some(bad), 400).await;
    assert_eq!(answer["error"]["details"]["field"], "rate_limit.burst", "{answer}");
    let patched = s.expect("PATCH", "/v1/streams/st", Some(json!({"rate_limit": null})), 200).await;
    assert!(patched.get("rate_limit").is_none(), "{patched}");
    let (status, _, answer) = post(&app, "/v1/streams/st/records", append(&["e", "f", "g"])).await;
    assert_eq!(status, 200);
    assert!(answer["results"].as_array().unwrap().iter().all(|r| r["offset"].is_u64()), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_stream_refuses_appends_with_retry_after_until_its_bound_is_raised() {
    let s = TestServer::start();
    let created = s
        .expect("POST", "/v1/streams", Some(json!({"name": "st", "partitions": 2, "max_depth_messages": 3})), 201)
        .await;
    assert_eq!((created["max_depth_messages"].clone(), created["overflow"].clone()), (json!(3), json!("reject")));
    let app = s.clone_app();
    let append = |bodies: &[&str]| json!({ "records": bodies.iter().map(|b| json!({"body": b})).collect::<Vec<_>>() });
    let (status, headers, answer) = post(&app, "/v1/streams/st/records", append(&["a", "b", "c", "d"])).await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer["results"].as_array().unwrap()[..3].iter().all(|r| r["offset"].is_u64()), "{answer}");
    let refused = &answer["results"][3]["error"];
    assert_eq!(refused["code"], "queue_full", "{answer}");
    assert_eq!(
        (refused["details"]["depth_messages"].clone(), refused["details"]["max_depth_messages"].clone()),
        (json!(3), json!(3))
    );
    assert_eq!(
        headers.get("retry-after").map(|v| v.to_str().unwrap()),
        Some("1"),
        "a partly refused append says when to retry"
    );
    let (status, headers, answer) = post(&app, "/v1/streams/st/records", append(&["e", "f"])).await;
    assert_eq!((status.as_u16(), answer["error"]["code"].as_str()), (429, Some("queue_full")), "{answer}");
    assert!(headers.contains_key("retry-after"));
    // The same under an idempotency key (the append commits with its answer): refused, and
    // not stored, so a retry once there is room appends.
    let keyed = |bodies: &[&str]| {
        Request::post("/v1/streams/st/records")
            .header("content-type", "application/json")
            .header("idempotency-key", "append-1")
            .body(Body::from(append(bodies).to_string()))
            .unwrap()
    };
    let (status, headers, _) = s.raw(keyed(&["g"])).await;
    assert_eq!(status, 429);
    assert!(headers.contains_key("retry-after"));
    assert_eq!(rejected(&s, "stream:st", "queue_full").await, Some(4.0));
    let view = s.expect("GET", "/v1/streams/st", None, 200).await;
    assert_eq!(view["depth_messages"], 3, "{view}");
    // A stream has no dead-letter queue of its own: only `reject`.
    for overflow in ["drop_head", "reject_to_dlq"] {
        let answer = s.expect("PATCH", "/v1/streams/st", Some(json!({"overflow": overflow})), 400).await;
        assert_eq!(answer["error"]["details"]["field"], "overflow", "{answer}");
    }
    let answer = s.expect("PATCH", "/v1/streams/st", Some(json!({"max_depth_bytes": 10})), 400).await;
    assert_eq!(answer["error"]["details"]["field"], "max_depth_bytes", "{answer}");
    let patched = s.expect("PATCH", "/v1/streams/st", Some(json!({"max_depth_messages": null})), 200).await;
    assert!(patched.get("max_depth_messages").is_none(), "{patched}");
    let (status, _, answer) = post(&app, "/v1/streams/st/records", append(&["e", "f"])).await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer["results"].as_array().unwrap().iter().all(|r| r["offset"].is_u64()), "{answer}");
    let (status, headers, answer) = s.raw(keyed(&["g"])).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    assert!(!headers.contains_key("idempotency-replayed"), "the refused attempt was not stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queues_rate_limit_limits_the_enqueues_of_its_job_queue_in_a_bucket_of_their_own() {
    let s = TestServer::start();
    s.create_queue(json!({"name": "mail", "rate_limit": {"per_second": 1, "burst": 2}})).await;
    let app = s.clone_app();
    let job = json!({"queue": "mail", "type": "send", "payload": {}});
    for _ in 0..2 {
        let (status, _, answer) = post(&app, "/v1/jobs", job.clone()).await;
        assert_eq!(status, 202, "{answer}");
    }
    let (status, headers, answer) = post(&app, "/v1/jobs", job.clone()).await;
    assert_eq!((status.as_u16(), answer["error"]["code"].as_str()), (429, Some("rate_limited")), "{answer}");
    assert!(headers.contains_key("retry-after"));
    assert!(answer["error"]["details"]["retry_after_ms"].as_u64().unwrap() <= 1000, "{answer}");
    let listed = s.expect("GET", "/v1/jobs?queue=mail", None, 200).await;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 2, "the refused job was not enqueued");
    // The queue's own sends take from the queue's bucket, not the job queue's.
    let (status, _, answer) = post(&app, "/v1/queues/mail/messages", send_body(&[("a", 0), ("b", 0)])).await;
    assert_eq!(status, 200);
    assert!(answer["results"].as_array().unwrap().iter().all(|r| r["id"].is_string()), "{answer}");
    assert_eq!(rate_limited(&s, "job_queue:mail").await, Some(1.0));
    // Without the limit, enqueues go ahead at once.
    s.expect("PATCH", "/v1/queues/mail", Some(json!({"rate_limit": null})), 200).await;
    let (status, _, _) = post(&app, "/v1/jobs", job).await;
    assert_eq!(status, 202);
}

/// A server held at its backlog watermark by hand (the sampler is not running in these
/// tests): the low band is refused with Retry-After, the high band taken; past the hard
/// watermark the normal band is refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shedding_refuses_low_priorities_first_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        EmbeddedStore::open(EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync })
            .unwrap(),
    );
    let shed = ShedConfig { backlog_max: Some(100), ..ShedConfig::default() };
    let config = ServerConfig { shed, ..ServerConfig::default() };
    let services = sluice_server::services(
        store.clone() as Arc<dyn Store>,
        Arc::new(SystemClock),
        &config,
        sluice_server::PushConfig::default(),
    );
    let app = sluice_server::router(services.clone(), config);
    post(&app, "/v1/queues", json!({"name": "q"})).await;
    let at = |backlog| Figures { backlog: Some(backlog), ..Figures::default() };

    services.shedder().observe(at(100));
    let (status, headers, answer) = post(&app, "/v1/queues/q/messages", send_body(&[("low", 0)])).await;
    assert_eq!((status.as_u16(), answer["error"]["code"].as_str()), (503, Some("shedding")));
    assert_eq!(answer["error"]["details"]["reason"], "backlog");
    assert_eq!(headers["retry-after"], "1");
    let (status, _, answer) =
        post(&app, "/v1/queues/q/messages", send_body(&[("low", 2), ("normal", 5), ("high", 9)])).await;
    assert_eq!(status, 200);
    assert_eq!(answer["results"][0]["error"]["code"], "shedding");
    assert!(answer["results"][1]["id"].is_string() && answer["results"][2]["id"].is_string(), "{answer}");
    let (status, ready) = get_text(&app, "/readyz").await;
    assert_eq!(status, 200);
    let ready: Value = serde_json::from_str(&ready).unwrap();
    assert_eq!((ready["status"].as_str(), ready["shedding"]["reason"].as_str()), (Some("shedding"), Some("backlog")));

    services.shedder().observe(at(125));
    let (_, _, answer) = post(&app, "/v1/queues/q/messages", send_body(&[("normal", 6), ("high", 7)])).await;
    assert_eq!(answer["results"][0]["error"]["code"], "shedding");
    assert!(answer["results"][1]["id"].is_string(), "{answer}");
    let (_, metrics) = get_text(&app, "/metrics").await;
    assert!(
        metrics.lines().any(|l| l.starts_with("sluice_shedding") && l.contains("backlog") && l.ends_with(" 1")),
        "{metrics}"
    );
    let shed_line = metrics
        .lines()
        .find(|l| l.starts_with("sluice_rejected_total") && l.contains("\"shedding\""))
        .unwrap_or_else(|| panic!("no shedding refusals in:\n{metrics}"));
    assert!(shed_line.ends_with(" 3"), "{shed_line}");

    services.shedder().observe(at(0));
    let (status, _, _) = post(&app, "/v1/queues/q/messages", send_body(&[("low", 0)])).await;
    assert_eq!(status, 200);
    let (_, ready) = get_text(&app, "/readyz").await;
    assert!(ready.contains("\"ready\""), "{ready}");
    store.close();
}
