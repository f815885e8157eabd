//! Sagas over HTTP: versions (201, then 200 for the same steps), a start's `202` and
//! `Location`, views and lists with filters, cancel and retry in the states they apply to, a
//! reply nothing waits for, and every error code. The orchestrator is not started here (its
//! runs are `sluice-services/tests/sagas.rs`), so an instance stays where the calls put it.

use axum::body::Body;
use axum::http::Request;
use serde_json::{Value, json};

use crate::support::{TestServer, case, check, json_payload};

fn steps() -> Value {
    json!({ "steps": [
        { "name": "reserve", "action": { "queue": { "queue": "inventory", "body": { "sku": "{{input.sku}}" } } },
          "compensation": { "http": { "url": "http://127.0.0.1:9/release" } }, "timeout_ms": 5000 },
        { "name": "charge", "action": { "http": { "url": "http://127.0.0.1:9/charge", "body": "{{steps.reserve.output.id}}" } },
          "retry": { "max_attempts": 5, "backoff": { "initial_ms": 100 } } }
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn definitions_are_versioned_and_instances_start_with_202_and_a_location() {
    let s = TestServer::start();
    let v1 = s.expect("PUT", "/v1/sagas/order", Some(steps()), 201).await;
    assert_eq!((v1["name"].clone(), v1["version"].clone()), (json!("order"), json!(1)));
    assert_eq!(v1["steps"][1]["retry"]["max_attempts"], 5);
    assert_eq!(v1["steps"][1]["timeout_ms"], 30000, "the default timeout");
    assert_eq!(v1["steps"][1]["action"]["http"]["method"], "POST");
    assert_eq!(s.expect("PUT", "/v1/sagas/order", Some(steps()), 200).await["version"], 1, "same steps: same version");
    let mut changed = steps();
    changed["steps"][0]["timeout_ms"] = json!(9000);
    assert_eq!(s.expect("PUT", "/v1/sagas/order", Some(changed), 201).await["version"], 2);
    assert_eq!(s.expect("GET", "/v1/sagas/order?version=1", None, 200).await["steps"][0]["timeout_ms"], 5000);
    assert_eq!(s.expect("GET", "/v1/sagas", None, 200).await["sagas"][0]["version"], 2);

    let request = Request::post("/v1/sagas/order/instances")
        .header("content-type", "application/json")
        .body(Body::from(json!({ "input": { "sku": "b-7" }, "correlation_id": "order-7" }).to_string()))
        .unwrap();
    let (status, headers, body) = s.raw(request).await;
    assert_eq!(status, 202);
    let started: Value = serde_json::from_slice(&body).unwrap();
    let id = started["id"].as_str().unwrap().to_string();
    assert_eq!(headers["location"], format!("/v1/sagas/instances/{id}").as_str());
    assert_eq!((started["status"].clone(), started["version"].clone()), (json!("running"), json!(2)));
    let got = s.expect("GET", &format!("/v1/sagas/instances/{id}"), None, 200).await;
    assert_eq!(
        (got["correlation_id"].clone(), got["steps"][0]["status"].clone()),
        (json!("order-7"), json!("pending"))
    );
    assert!(got["steps"][0]["next_attempt_at"].as_str().is_some_and(|t| t.ends_with('Z')));

    let listed = s.expect("GET", "/v1/sagas/instances?saga=order&status=running", None, 200).await;
    assert_eq!(listed["instances"][0]["id"], id.as_str());
    let none = s.expect("GET", "/v1/sagas/instances?status=completed", None, 200).await;
    assert_eq!(none["instances"], json!([]));

    // Nothing is in flight (no orchestrator here): a cancel turns back at once, with nothing to undo.
    let cancelled = s.expect("POST", &format!("/v1/sagas/instances/{id}/cancel"), None, 200).await;
    assert_eq!(
        (cancelled["status"].clone(), cancelled["cancel_requested"].clone()),
        (json!("compensated"), json!(true))
    );
    assert_eq!(cancelled["steps"][0]["status"], "skipped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_saga_error_has_its_code() {
    let s = TestServer::start();
    s.expect("PUT", "/v1/sagas/order", Some(steps()), 201).await;
    let started = s.expect("POST", "/v1/sagas/order/instances", Some(json!({ "input": {} })), 202).await;
    let id = started["id"].as_str().unwrap().to_string();
    s.expect("POST", &format!("/v1/sagas/instances/{id}/cancel"), None, 200).await;
    let later = json!({ "steps": [{ "name": "a", "action": { "http": { "url": "http://x/{{steps.b.output}}" } } }] });
    let both =
        json!({ "steps": [{ "name": "a", "action": { "http": { "url": "http://x" }, "queue": { "queue": "q" } } }] });
    check(
        &s,
        vec![
            case("PUT", "/v1/sagas/order", json_payload(json!({ "steps": [] })), 400, Some("invalid_argument"))
                .field("steps"),
            case("PUT", "/v1/sagas/order", json_payload(later), 400, Some("invalid_argument"))
                .field("steps[0].action.http.url"),
            case("PUT", "/v1/sagas/order", json_payload(both), 400, Some("invalid_argument")).field("steps[0].action"),
            case("PUT", "/v1/sagas/instances", json_payload(steps()), 405, None),
            case("PUT", "/v1/sagas/bad%20name", json_payload(steps()), 400, Some("invalid_argument")).field("name"),
            case("GET", "/v1/sagas/nope", json_payload(json!(null)), 404, Some("saga_not_found")),
            case("GET", "/v1/sagas/order?version=9", json_payload(json!(null)), 404, Some("saga_not_found")),
            case("POST", "/v1/sagas/nope/instances", json_payload(json!({})), 404, Some("saga_not_found")),
            case(
                "POST",
                "/v1/sagas/order/instances",
                json_payload(json!({ "correlation_id": "" })),
                400,
                Some("invalid_argument"),
            )
            .field("correlation_id"),
            case("GET", "/v1/sagas/instances/nope", json_payload(json!(null)), 404, Some("saga_instance_not_found")),
            case("GET", "/v1/sagas/instances?status=done", json_payload(json!(null)), 400, Some("invalid_argument"))
                .field("status"),
            case(
                "POST",
                format!("/v1/sagas/instances/{id}/cancel"),
                json_payload(json!(null)),
                409,
                Some("saga_wrong_state"),
            ),
            case(
                "POST",
                format!("/v1/sagas/instances/{id}/retry"),
                json_payload(json!(null)),
                409,
                Some("saga_wrong_state"),
            ),
            case(
                "POST",
                "/v1/replies",
                json_payload(json!({ "correlation_id": id, "step": "reserve", "ok": true })),
                404,
                Some("saga_reply_unmatched"),
            ),
            case(
                "POST",
                "/v1/replies",
                json_payload(json!({ "correlation_id": id, "step": "reserve", "ok": true, "kind": "undo" })),
                400,
                Some("invalid_argument"),
            )
            .field("kind"),
        ],
    )
    .await;
}
