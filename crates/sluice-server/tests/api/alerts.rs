//! `/v1/alerts`: rules created, listed, read and deleted, the built-in rule, the error codes,
//! and the (empty) list of firing alerts of a server nobody evaluated yet. Evaluation itself is
//! tested on a manual clock in `sluice-services/tests/alerts.rs`.

use serde_json::json;

use crate::support::{Payload, TestServer, case, check, json_payload};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_are_created_listed_and_deleted() {
    let s = TestServer::start();
    let rules = s.expect("GET", "/v1/alerts/rules", None, 200).await;
    assert_eq!(rules["rules"].as_array().unwrap().len(), 2, "{rules}");
    assert_eq!(rules["rules"][0]["name"], "dlq-not-empty");
    assert_eq!(rules["rules"][0]["builtin"], true);
    assert_eq!(rules["rules"][0]["kind"], "dlq_depth_above");
    assert_eq!(rules["rules"][1]["name"], "saga-failed");
    assert_eq!(rules["rules"][1]["builtin"], true);
    assert_eq!(rules["rules"][1]["kind"], "saga_failed");

    let rule = json!({
        "name": "orders-late", "kind": "oldest_age_above_ms", "target": "orders-*", "threshold": 60000,
        "for_ms": 30000, "notify": { "webhook": "https://hooks.example/alerts" }
    });
    let created = s.expect("POST", "/v1/alerts/rules", Some(rule.clone()), 201).await;
    assert_eq!(created["target"], "orders-*");
    assert_eq!(created["for_ms"], 30000);
    assert_eq!(created["notify"]["webhook"], "https://hooks.example/alerts");
    assert_eq!(created["signing_secret"].as_str().map(str::len), Some(64), "{created}");
    assert!(created["created_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{created}");
    let again = s.expect("POST", "/v1/alerts/rules", Some(rule.clone()), 200).await;
    assert_eq!(again["signing_secret"], created["signing_secret"], "the same rule, not a new secret");
    assert_eq!(s.expect("GET", "/v1/alerts/rules/orders-late", None, 200).await, created);
    // Its notifications wait in a queue of their own.
    s.expect("GET", "/v1/queues/sluice-alert-orders-late.fifo", None, 200).await;
    let names: Vec<String> = s.expect("GET", "/v1/alerts/rules", None, 200).await["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["dlq-not-empty", "orders-late", "saga-failed"]);

    s.expect("DELETE", "/v1/alerts/rules/orders-late", None, 204).await;
    s.expect("DELETE", "/v1/alerts/rules/dlq-not-empty", None, 204).await;
    s.expect("DELETE", "/v1/alerts/rules/saga-failed", None, 204).await;
    assert_eq!(s.expect("GET", "/v1/alerts/rules", None, 200).await, json!({ "rules": [] }));
    let alerts = s.expect("GET", "/v1/alerts?pending=true", None, 200).await;
    assert_eq!(alerts, json!({ "alerts": [] }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_rules_get_stable_codes() {
    let s = TestServer::start();
    let rule = |patch: serde_json::Value| {
        let mut base = json!({ "name": "r", "kind": "lag_above", "target": "orders/*", "threshold": 10 });
        for (k, v) in patch.as_object().unwrap() {
            base[k] = v.clone();
        }
        json_payload(base)
    };
    s.expect(
        "POST",
        "/v1/alerts/rules",
        Some(json!({ "name": "r", "kind": "lag_above", "target": "x", "threshold": 1 })),
        201,
    )
    .await;
    check(
        &s,
        vec![
            case("POST", "/v1/alerts/rules", rule(json!({ "threshold": 2 })), 409, Some("alert_rule_exists")),
            case("POST", "/v1/alerts/rules", rule(json!({ "name": "bad name" })), 400, Some("invalid_argument"))
                .field("name"),
            case("POST", "/v1/alerts/rules", rule(json!({ "name": "t", "target": "" })), 400, Some("invalid_argument"))
                .field("target"),
            case(
                "POST",
                "/v1/alerts/rules",
                rule(json!({ "name": "t", "threshold": -1 })),
                400,
                Some("invalid_argument"),
            )
            .field("threshold"),
            case(
                "POST",
                "/v1/alerts/rules",
                rule(json!({ "name": "t", "kind": "lag_growing" })),
                400,
                Some("invalid_argument"),
            )
            .field("for_ms"),
            case(
                "POST",
                "/v1/alerts/rules",
                rule(json!({ "name": "t", "notify": { "webhook": "ftp://x" } })),
                400,
                Some("invalid_argument"),
            )
            .field("notify.webhook"),
            case(
                "POST",
                "/v1/alerts/rules",
                rule(json!({ "name": "t", "kind": "cpu_above" })),
                400,
                Some("invalid_json"),
            ),
            case("POST", "/v1/alerts/rules", rule(json!({ "name": "t", "colour": "red" })), 400, Some("invalid_json")),
            case("GET", "/v1/alerts/rules/nope", Payload::None, 404, Some("alert_rule_not_found")),
            case("DELETE", "/v1/alerts/rules/nope", Payload::None, 404, Some("alert_rule_not_found")),
            case("PUT", "/v1/alerts/rules/r", Payload::None, 405, Some("method_not_allowed")),
        ],
    )
    .await;
}
