//! Jobs over HTTP: `202 Accepted` with `Location`, unique keys answering `200` with the
//! existing job, the worker calls (claim with a lease, heartbeat with progress, complete,
//! fail with retries, cancel), lists with filters and pages, long polls, and every error code.

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use serde_json::{Value, json};

use crate::support::{Payload, TestServer, case, check, json_payload};

async fn enqueue(s: &TestServer, body: Value) -> Value {
    s.expect("POST", "/v1/jobs", Some(body), 202).await
}

async fn claim(s: &TestServer, body: Value) -> Vec<Value> {
    s.expect("POST", "/v1/jobs/claim", Some(body), 200).await["jobs"].as_array().expect("jobs").clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_answers_202_with_a_location_and_unique_keys_answer_200() {
    let s = TestServer::start();
    let request = Request::post("/v1/jobs")
        .header("content-type", "application/json")
        .body(Body::from(json!({ "queue": "reports", "type": "pdf", "payload": { "report": 7 } }).to_string()))
        .unwrap();
    let (status, headers, body) = s.raw(request).await;
    assert_eq!(status, 202);
    let job: Value = serde_json::from_slice(&body).unwrap();
    let id = job["id"].as_str().expect("id");
    assert_eq!(job["status"], "queued");
    assert_eq!(headers["location"], format!("/v1/jobs/{id}").as_str());

    let got = s.expect("GET", &format!("/v1/jobs/{id}"), None, 200).await;
    assert_eq!(
        (got["queue"].clone(), got["type"].clone(), got["payload"].clone()),
        (json!("reports"), json!("pdf"), json!({ "report": 7 }))
    );
    assert_eq!((got["attempts"].clone(), got["max_attempts"].clone()), (json!(0), json!(3)));
    assert!(got["created_at"].as_str().is_some_and(|t| t.ends_with('Z')) && got["created_at_ms"].is_u64());

    let unique = json!({ "queue": "reports", "type": "pdf", "unique_key": "r-7", "tags": ["tenant:acme"] });
    let first = enqueue(&s, unique.clone()).await;
    let again = s.expect("POST", "/v1/jobs", Some(unique), 200).await;
    assert_eq!(again["id"], first["id"], "the existing job, nothing enqueued");
    assert_eq!(again["unique_key"], "r-7");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_claims_heartbeats_and_completes_and_old_leases_are_refused() {
    let s = TestServer::start();
    let job = enqueue(&s, json!({ "queue": "q", "type": "resize", "payload": [1, 2] })).await;
    let id = job["id"].as_str().unwrap().to_string();
    let claimed = claim(&s, json!({ "queues": ["q"], "lease_ms": 60000 })).await;
    assert_eq!(claimed.len(), 1);
    let lease = claimed[0]["lease"].as_str().expect("lease").to_string();
    assert_eq!((claimed[0]["status"].clone(), claimed[0]["attempts"].clone()), (json!("running"), json!(1)));
    assert_eq!(claimed[0]["payload"], json!([1, 2]));
    assert!(claimed[0]["lease_expires_at_ms"].is_u64());

    let beat = s
        .expect("POST", &format!("/v1/jobs/{id}/heartbeat"), Some(json!({ "lease": lease, "progress": 0.5 })), 200)
        .await;
    assert_eq!(beat["cancel_requested"], false);
    assert_eq!(s.expect("GET", &format!("/v1/jobs/{id}"), None, 200).await["progress"], 0.5);
    let done = s
        .expect(
            "POST",
            &format!("/v1/jobs/{id}/complete"),
            Some(json!({ "lease": lease, "result": { "w": 640 } })),
            200,
        )
        .await;
    assert_eq!(done["status"], "succeeded");
    let got = s.expect("GET", &format!("/v1/jobs/{id}?wait_ms=1000"), None, 200).await;
    assert_eq!((got["status"].clone(), got["result"].clone()), (json!("succeeded"), json!({ "w": 640 })));
    assert!(got["finished_at_ms"].is_u64() && got["expires_at_ms"].is_u64());

    check(
        &s,
        vec![
            case(
                "POST",
                format!("/v1/jobs/{id}/complete"),
                json_payload(json!({ "lease": lease })),
                409,
                Some("stale_lease"),
            ),
            case(
                "POST",
                format!("/v1/jobs/{id}/heartbeat"),
                json_payload(json!({ "lease": lease })),
                409,
                Some("stale_lease"),
            ),
            case(
                "POST",
                format!("/v1/jobs/{id}/fail"),
                json_payload(json!({ "lease": lease })),
                409,
                Some("stale_lease"),
            ),
            case("POST", format!("/v1/jobs/{id}/cancel"), Payload::None, 409, Some("job_finished")),
            case(
                "POST",
                format!("/v1/jobs/{id}/complete"),
                json_payload(json!({ "lease": "x" })),
                400,
                Some("invalid_argument"),
            )
            .field("lease"),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_retry_after_their_backoff_until_dead_and_cancels_stop_jobs() {
    let s = TestServer::start();
    let backoff = json!({ "initial_ms": 1, "max_ms": 1, "jitter": "none" });
    let job = enqueue(&s, json!({ "queue": "q", "type": "t", "max_attempts": 2, "backoff": backoff })).await;
    let id = job["id"].as_str().unwrap().to_string();
    let first = claim(&s, json!({ "queues": ["q"] })).await;
    let failed = s
        .expect(
            "POST",
            &format!("/v1/jobs/{id}/fail"),
            Some(json!({ "lease": first[0]["lease"], "error": "boom" })),
            200,
        )
        .await;
    assert_eq!((failed["status"].clone(), failed["error"].clone()), (json!("failed"), json!("boom")));
    let second = claim(&s, json!({ "queues": ["q"], "wait_ms": 5000 })).await;
    assert_eq!(second[0]["attempts"], 2, "retried after its millisecond of backoff");
    let dead =
        s.expect("POST", &format!("/v1/jobs/{id}/fail"), Some(json!({ "lease": second[0]["lease"] })), 200).await;
    assert_eq!(dead["status"], "dead");
    let listed = s.expect("GET", "/v1/jobs?queue=q&status=dead", None, 200).await;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 1, "the queue's dead jobs: {listed}");

    let waiting = enqueue(&s, json!({ "queue": "q", "type": "t" })).await;
    let cancelled = s.expect("POST", &format!("/v1/jobs/{}/cancel", waiting["id"].as_str().unwrap()), None, 200).await;
    assert_eq!(cancelled["status"], "cancelled");
    let running = enqueue(&s, json!({ "queue": "q", "type": "t" })).await;
    let rid = running["id"].as_str().unwrap().to_string();
    let c = claim(&s, json!({ "queues": ["q"] })).await;
    let asked = s.expect("POST", &format!("/v1/jobs/{rid}/cancel"), None, 200).await;
    assert_eq!((asked["status"].clone(), asked["cancel_requested"].clone()), (json!("running"), json!(true)));
    let beat =
        s.expect("POST", &format!("/v1/jobs/{rid}/heartbeat"), Some(json!({ "lease": c[0]["lease"] })), 200).await;
    assert_eq!(beat["cancel_requested"], true, "the worker learns it from its heartbeat");
    let stopped = s.expect("POST", &format!("/v1/jobs/{rid}/fail"), Some(json!({ "lease": c[0]["lease"] })), 200).await;
    assert_eq!(stopped["status"], "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_filter_and_page_and_a_long_poll_wakes_on_enqueue() {
    let s = TestServer::start();
    for n in 0..5 {
        let queue = if n % 2 == 0 { "even" } else { "odd" };
        enqueue(&s, json!({ "queue": queue, "type": format!("t{}", n % 3), "tags": [format!("n:{n}")] })).await;
    }
    let page = s.expect("GET", "/v1/jobs?limit=2", None, 200).await;
    assert_eq!(page["jobs"].as_array().unwrap().len(), 2);
    assert!(page["jobs"][0].get("payload").is_none(), "lists leave payloads out");
    let token = page["next_token"].as_str().expect("a next page").to_string();
    let rest = s.expect("GET", &format!("/v1/jobs?limit=10&next_token={token}"), None, 200).await;
    assert_eq!(rest["jobs"].as_array().unwrap().len(), 3);
    assert!(rest.get("next_token").is_none());
    assert_eq!(s.expect("GET", "/v1/jobs?queue=even", None, 200).await["jobs"].as_array().unwrap().len(), 3);
    assert_eq!(s.expect("GET", "/v1/jobs?type=t1", None, 200).await["jobs"].as_array().unwrap().len(), 2);
    assert_eq!(s.expect("GET", "/v1/jobs?tag=n:3", None, 200).await["jobs"][0]["tags"], json!(["n:3"]));
    assert_eq!(
        s.expect("GET", "/v1/jobs?status=queued&queue=odd", None, 200).await["jobs"].as_array().unwrap().len(),
        2
    );

    let waiter = {
        let request = json!({ "queues": ["later"], "wait_ms": 10000 }).to_string();
        let app = s.clone_app();
        tokio::spawn(async move {
            let request = Request::post("/v1/jobs/claim")
                .header("content-type", "application/json")
                .body(Body::from(request))
                .unwrap();
            let response = tower::ServiceExt::oneshot(app, request).await.unwrap();
            let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
            serde_json::from_slice::<Value>(&body).unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    enqueue(&s, json!({ "queue": "later", "type": "t", "payload": "woken" })).await;
    let woken = waiter.await.unwrap();
    assert_eq!(woken["jobs"][0]["payload"], "woken");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_has_its_code_and_field() {
    let s = TestServer::start();
    let missing = "0192f1c3-0000-7000-8000-000000000000";
    let job = |extra: Value| {
        let mut body = json!({ "queue": "q", "type": "t" });
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        json_payload(body)
    };
    check(
        &s,
        vec![
            case("GET", format!("/v1/jobs/{missing}"), Payload::None, 404, Some("job_not_found")),
            case("GET", "/v1/jobs/not-a-uuid", Payload::None, 404, Some("job_not_found")),
            case("POST", format!("/v1/jobs/{missing}/cancel"), Payload::None, 404, Some("job_not_found")),
            case(
                "POST",
                format!("/v1/jobs/{missing}/complete"),
                json_payload(json!({ "lease": "00000001000000000000000a" })),
                404,
                Some("job_not_found"),
            ),
            case("POST", "/v1/jobs", job(json!({ "queue": "a b" })), 400, Some("invalid_argument")).field("queue"),
            case("POST", "/v1/jobs", job(json!({ "priority": 10 })), 400, Some("invalid_argument")).field("priority"),
            case("POST", "/v1/jobs", job(json!({ "max_attempts": 0 })), 400, Some("invalid_argument"))
                .field("max_attempts"),
            case("POST", "/v1/jobs", job(json!({ "run_at": "yesterday" })), 400, Some("invalid_argument"))
                .field("run_at"),
            case("POST", "/v1/jobs", job(json!({ "backoff": { "multiplier": 0.5 } })), 400, Some("invalid_argument"))
                .field("backoff.multiplier"),
            case("POST", "/v1/jobs", job(json!({ "backoff": { "jitter": "half" } })), 400, Some("invalid_argument"))
                .field("backoff.jitter"),
            case(
                "POST",
                "/v1/jobs",
                job(json!({ "callback_url": "http://169.254.169.254/x" })),
                400,
                Some("invalid_argument"),
            )
            .field("callback_url"),
            case("POST", "/v1/jobs", job(json!({ "tags": ["a b"] })), 400, Some("invalid_argument")).field("tags[0]"),
            case("POST", "/v1/jobs", job(json!({ "unknown": 1 })), 400, Some("invalid_json")),
            case("POST", "/v1/jobs/claim", json_payload(json!({ "queues": [] })), 400, Some("invalid_argument"))
                .field("queues"),
            case(
                "POST",
                "/v1/jobs/claim",
                json_payload(json!({ "queues": ["q"], "max": 101 })),
                400,
                Some("invalid_argument"),
            )
            .field("max"),
            case(
                "POST",
                "/v1/jobs/claim",
                json_payload(json!({ "queues": ["q"], "wait_ms": 20001 })),
                400,
                Some("invalid_argument"),
            )
            .field("wait_ms"),
            case("GET", "/v1/jobs?status=pending", Payload::None, 400, Some("invalid_argument")).field("status"),
            case("GET", "/v1/jobs?next_token=***", Payload::None, 400, Some("invalid_argument")).field("next_token"),
            case("GET", "/v1/jobs?limit=1001", Payload::None, 400, Some("invalid_argument")).field("limit"),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_jobs_by_queue_and_status() {
    let s = TestServer::start();
    enqueue(&s, json!({ "queue": "m", "type": "t" })).await;
    let id = enqueue(&s, json!({ "queue": "m", "type": "t" })).await["id"].as_str().unwrap().to_string();
    let c = claim(&s, json!({ "queues": ["m"], "max": 1 })).await;
    let claimed = c[0]["id"].as_str().unwrap().to_string();
    s.expect(
        "POST",
        &format!("/v1/jobs/{claimed}/complete"),
        Some(json!({ "lease": c[0]["lease"], "result": "12345" })),
        200,
    )
    .await;
    let (_, _, body) = s.raw(Request::get("/metrics").body(Body::empty()).unwrap()).await;
    let text = String::from_utf8(body).unwrap();
    let line = |prefix: &str| {
        text.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix} in:\n{text}")).to_string()
    };
    assert!(line(r#"sluice_jobs{queue="m",status="queued"}"#).ends_with(" 1"));
    assert!(line(r#"sluice_jobs{queue="m",status="succeeded"}"#).ends_with(" 1"));
    assert!(line(r#"sluice_job_result_bytes{queue="m"}"#).ends_with(" 7"), "the result's JSON text");
    assert!(text.contains("sluice_jobs_pruned_total"), "{text}");
    assert!(!id.is_empty());
}
