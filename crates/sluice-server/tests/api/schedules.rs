//! Schedules through the native API: create (201/200/409), get with its next ticks, list and
//! page, pause and resume, delete, the errors of each, and their place in the OpenAPI document.
//! The firing itself is tested in `sluice-services/tests/schedules.rs` on a manual clock.

use serde_json::json;

use crate::support::{Payload, TestServer, case, check, json_payload};

fn every_minute(name: &str) -> serde_json::Value {
    json!({
        "name": name,
        "every_ms": 60_000,
        "start_at": "2030-01-01T00:00:00Z",
        "target": { "queue": "jobs" },
        "message": { "body": "tick", "attributes": { "kind": { "type": "String", "value": "report" } }, "priority": 4 },
        "catch_up": "latest",
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedule_lifecycle() {
    let s = TestServer::start();
    let created = s.expect("POST", "/v1/schedules", Some(every_minute("nightly")), 201).await;
    assert_eq!(created["status"], "active");
    assert_eq!(created["next_fire_at"], "2030-01-01T00:00:00Z");
    assert_eq!(created["upcoming"][1], "2030-01-01T00:01:00Z");
    assert_eq!(created["upcoming"].as_array().unwrap().len(), 5);
    assert_eq!((created["fired"].clone(), created["catch_up"].clone()), (json!(0), json!("latest")));
    assert_eq!(created["message"]["priority"], 4);
    assert_eq!(created["message"]["attributes"]["kind"]["value"], "report");
    assert_eq!(s.expect("POST", "/v1/schedules", Some(every_minute("nightly")), 200).await["name"], "nightly");
    let cron = json!({
        "name": "paris-9am",
        "cron": "0 9 * * MON-FRI",
        "timezone": "Europe/Paris",
        "start_at": "2030-01-01T00:00:00Z",
        "target": { "queue": "jobs" },
        "message": { "body": "good morning" },
    });
    let paris = s.expect("POST", "/v1/schedules", Some(cron), 201).await;
    // 2030-01-01 is a Tuesday; 09:00 in Paris is 08:00 UTC in winter.
    assert_eq!(paris["next_fire_at"], "2030-01-01T08:00:00Z");
    assert_eq!((paris["timezone"].clone(), paris["catch_up"].clone()), (json!("Europe/Paris"), json!("none")));

    let page = s.expect("GET", "/v1/schedules?limit=1", None, 200).await;
    assert_eq!(page["schedules"][0]["name"], "nightly");
    let token = page["next_token"].as_str().unwrap();
    let rest = s.expect("GET", &format!("/v1/schedules?limit=1&next_token={token}"), None, 200).await;
    assert_eq!(rest["schedules"][0]["name"], "paris-9am");
    assert!(rest.get("next_token").is_none());
    assert_eq!(s.expect("GET", "/v1/schedules?prefix=par", None, 200).await["schedules"].as_array().unwrap().len(), 1);

    let paused = s.expect("POST", "/v1/schedules/nightly/pause", None, 200).await;
    assert_eq!(paused["status"], "paused");
    assert!(paused.get("next_fire_at").is_none() && paused["upcoming"].as_array().unwrap().is_empty());
    let resumed = s.expect("POST", "/v1/schedules/nightly/resume", None, 200).await;
    assert_eq!(
        (resumed["status"].clone(), resumed["next_fire_at"].clone()),
        (json!("active"), json!("2030-01-01T00:00:00Z"))
    );
    // A stream target is shown as given (it may be created after the schedule).
    let mut into_stream = every_minute("audit-tick");
    into_stream["target"] = json!({ "stream": "audit" });
    let audit = s.expect("POST", "/v1/schedules", Some(into_stream), 201).await;
    assert_eq!(audit["target"], json!({ "stream": "audit" }));
    s.expect("DELETE", "/v1/schedules/audit-tick", None, 204).await;
    // A job target: the body is the job's JSON payload.
    let mut into_job = every_minute("nightly-report");
    into_job["target"] = json!({ "job": { "queue": "reports", "type": "build-report", "max_attempts": 3 } });
    into_job["message"] = json!({ "body": "{\"period\":\"day\"}" });
    let report = s.expect("POST", "/v1/schedules", Some(into_job.clone()), 201).await;
    assert_eq!(report["target"], json!({ "job": { "queue": "reports", "type": "build-report", "max_attempts": 3 } }));
    into_job["message"] = json!({ "body": "not json" });
    into_job["name"] = json!("other-report");
    let refused = s.expect("POST", "/v1/schedules", Some(into_job), 400).await;
    assert_eq!(
        (refused["error"]["code"].as_str(), refused["error"]["details"]["field"].as_str()),
        (Some("invalid_argument"), Some("message.body"))
    );
    s.expect("DELETE", "/v1/schedules/nightly-report", None, 204).await;
    s.expect("DELETE", "/v1/schedules/nightly", None, 204).await;
    s.expect("GET", "/v1/schedules/nightly", None, 404).await;

    let doc = s.expect("GET", "/v1/openapi.json", None, 200).await;
    for path in ["/v1/schedules", "/v1/schedules/{name}", "/v1/schedules/{name}/pause", "/v1/schedules/{name}/resume"] {
        assert!(doc["paths"][path].is_object(), "{path} is in the OpenAPI document");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedule_errors() {
    let s = TestServer::start();
    s.expect("POST", "/v1/schedules", Some(every_minute("taken")), 201).await;
    let with = |change: serde_json::Value| {
        let mut body = every_minute("s");
        for (k, v) in change.as_object().unwrap() {
            body[k] = v.clone();
        }
        json_payload(body)
    };
    let other = {
        let mut b = every_minute("taken");
        b["every_ms"] = json!(120_000);
        b
    };
    check(
        &s,
        vec![
            case("POST", "/v1/schedules", json_payload(other), 409, Some("schedule_exists")),
            case("POST", "/v1/schedules", with(json!({ "name": "no spaces" })), 400, Some("invalid_argument"))
                .field("name"),
            case(
                "POST",
                "/v1/schedules",
                with(json!({ "cron": "* * *", "every_ms": null })),
                400,
                Some("invalid_argument"),
            )
            .field("cron"),
            case(
                "POST",
                "/v1/schedules",
                with(json!({ "cron": "0 9 * * *", "every_ms": null, "timezone": "Atlantis/Capital" })),
                400,
                Some("invalid_argument"),
            )
            .field("timezone"),
            case("POST", "/v1/schedules", with(json!({ "cron": "0 9 * * *" })), 400, Some("invalid_argument"))
                .field("cron"),
            case("POST", "/v1/schedules", with(json!({ "every_ms": 5 })), 400, Some("invalid_argument"))
                .field("every_ms"),
            case(
                "POST",
                "/v1/schedules",
                with(json!({ "end_at": "2029-01-01T00:00:00Z" })),
                400,
                Some("invalid_argument"),
            )
            .field("end_at"),
            case("POST", "/v1/schedules", with(json!({ "start_at": "yesterday" })), 400, Some("invalid_argument"))
                .field("start_at"),
            case("POST", "/v1/schedules", with(json!({ "target": {} })), 400, Some("invalid_argument")).field("target"),
            case(
                "POST",
                "/v1/schedules",
                with(json!({ "target": { "queue": "a", "topic": "b" } })),
                400,
                Some("invalid_argument"),
            )
            .field("target"),
            case(
                "POST",
                "/v1/schedules",
                with(json!({ "target": { "stream": "no spaces" } })),
                400,
                Some("invalid_argument"),
            )
            .field("target.stream"),
            case(
                "POST",
                "/v1/schedules",
                with(json!({ "target": { "topic": "missing" } })),
                404,
                Some("topic_not_found"),
            ),
            case(
                "POST",
                "/v1/schedules",
                with(json!({ "message": { "body": "x", "delay_ms": 10 } })),
                400,
                Some("invalid_argument"),
            )
            .field("message.delay_ms"),
            case("POST", "/v1/schedules", with(json!({ "message": {} })), 400, Some("invalid_argument"))
                .field("message.body"),
            case(
                "POST",
                "/v1/schedules",
                with(json!({ "message": { "body": "x", "priority": 10 } })),
                400,
                Some("invalid_argument"),
            )
            .field("message.priority"),
            case("POST", "/v1/schedules", with(json!({ "catch_up": "sometimes" })), 400, Some("invalid_json")),
            case("GET", "/v1/schedules/nope", Payload::None, 404, Some("schedule_not_found")),
            case("DELETE", "/v1/schedules/nope", Payload::None, 404, Some("schedule_not_found")),
            case("POST", "/v1/schedules/nope/pause", Payload::None, 404, Some("schedule_not_found")),
            case("GET", "/v1/schedules?limit=0", Payload::None, 400, Some("invalid_argument")),
        ],
    )
    .await;
}
