//! Schemas through the native API: register (201, 200 for the same schema, 409 with reasons),
//! read types and versions back, set a mode, check a schema or a body, and the check at the
//! door of queues and topics with `schema_validation` (per-entry `schema_validation_failed`
//! with the JSON pointer). The compatibility rules themselves are tested in
//! `sluice-services` on a table of schema pairs.

use serde_json::{Value, json};

use crate::support::{Payload, TestServer, case, check, json_payload};

fn order() -> Value {
    json!({
        "type": "object",
        "properties": {"id": {"type": "string"}, "total": {"type": "integer", "minimum": 0}},
        "required": ["id", "total"],
        "additionalProperties": false,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_lifecycle() {
    let s = TestServer::start();
    let first = s.expect("POST", "/v1/schemas/order.created/versions", Some(json!({"schema": order()})), 201).await;
    assert_eq!(first, json!({"type": "order.created", "version": 1}));
    let again = s.expect("POST", "/v1/schemas/order.created/versions", Some(json!({"schema": order()})), 200).await;
    assert_eq!(again["version"], 1);
    let mut v2 = order();
    v2["properties"]["note"] = json!({"type": "string"});
    assert_eq!(
        s.expect("POST", "/v1/schemas/order.created/versions", Some(json!({"schema": v2})), 201).await["version"],
        2
    );

    // A new required property breaks backward compatibility: 409 with the reasons.
    let mut v3 = v2.clone();
    v3["required"] = json!(["id", "total", "note"]);
    let refused =
        s.expect("POST", "/v1/schemas/order.created/versions", Some(json!({"schema": v3.clone()})), 409).await;
    assert_eq!(refused["error"]["code"], "schema_incompatible");
    let reasons = &refused["error"]["details"]["reasons"];
    assert_eq!(refused["error"]["details"]["compatibility"], "backward");
    assert_eq!(
        (reasons[0]["version"].clone(), reasons[0]["direction"].clone(), reasons[0]["kind"].clone()),
        (json!(2), json!("backward"), json!("required_added"))
    );
    assert_eq!(reasons[0]["path"], "/required");
    let checked = s.expect("POST", "/v1/schemas/order.created/check", Some(json!({"schema": v3.clone()})), 200).await;
    assert_eq!(checked["compatible"], false);
    assert_eq!(checked["reasons"][0]["kind"], "required_added");

    let ty = s.expect("GET", "/v1/schemas/order.created", None, 200).await;
    assert_eq!((ty["latest_version"].clone(), ty["versions"].clone()), (json!(2), json!([1, 2])));
    assert_eq!(ty["compatibility"], "backward");
    let configured =
        s.expect("PUT", "/v1/schemas/order.created/config", Some(json!({"compatibility": "none"})), 200).await;
    assert_eq!(configured["compatibility"], "none");
    assert_eq!(
        s.expect("POST", "/v1/schemas/order.created/versions", Some(json!({"schema": v3})), 201).await["version"],
        3
    );

    let latest = s.expect("GET", "/v1/schemas/order.created/versions/latest", None, 200).await;
    assert_eq!(latest["version"], 3);
    assert_eq!(latest["schema"]["required"], json!(["id", "total", "note"]));
    let one = s.expect("GET", "/v1/schemas/order.created/versions/1", None, 200).await;
    assert_eq!(one["schema"], order());

    s.expect("PUT", "/v1/schemas/audit/config", Some(json!({"compatibility": "full_transitive"})), 200).await;
    let page = s.expect("GET", "/v1/schemas?limit=1", None, 200).await;
    assert_eq!(page["types"][0]["type"], "audit");
    assert!(page["types"][0].get("latest_version").is_none(), "configured, no version yet");
    let token = page["next_token"].as_str().unwrap();
    let rest = s.expect("GET", &format!("/v1/schemas?limit=1&next_token={token}"), None, 200).await;
    assert_eq!(rest["types"][0]["type"], "order.created");
    assert!(rest.get("next_token").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_checked_before_sending() {
    let s = TestServer::start();
    s.expect("POST", "/v1/schemas/order/versions", Some(json!({"schema": order()})), 201).await;
    let ok =
        s.expect("POST", "/v1/schemas/order/check", Some(json!({"body": r#"{"id": "a", "total": 1}"#})), 200).await;
    assert_eq!((ok["valid"].clone(), ok["version"].clone()), (json!(true), json!(1)));
    let bad = s
        .expect(
            "POST",
            "/v1/schemas/order/check",
            Some(json!({"body": r#"{"id": "a", "total": -1, "x": 1}"#, "version": 1})),
            200,
        )
        .await;
    assert_eq!(bad["valid"], false);
    let pointers: Vec<&str> =
        bad["errors"].as_array().unwrap().iter().map(|e| e["pointer"].as_str().unwrap()).collect();
    assert!(pointers.contains(&"/total"), "{bad}");
    let not_json = s.expect("POST", "/v1/schemas/order/check", Some(json!({"body": "nope"})), 200).await;
    assert_eq!(not_json["valid"], false);
    assert!(not_json["errors"][0]["message"].as_str().unwrap().contains("not JSON"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_errors() {
    let s = TestServer::start();
    s.expect("POST", "/v1/schemas/order/versions", Some(json!({"schema": order()})), 201).await;
    let p = |v: Value| json_payload(v);
    check(
        &s,
        vec![
            case("GET", "/v1/schemas/missing", Payload::None, 404, Some("schema_not_found")),
            case("GET", "/v1/schemas/order/versions/9", Payload::None, 404, Some("schema_not_found")),
            case("GET", "/v1/schemas/missing/versions/latest", Payload::None, 404, Some("schema_not_found")),
            case("GET", "/v1/schemas/order/versions/first", Payload::None, 400, Some("invalid_argument"))
                .field("version"),
            case(
                "POST",
                "/v1/schemas/order/versions",
                p(json!({"schema": {"type": "nope"}})),
                400,
                Some("schema_invalid"),
            ),
            case(
                "POST",
                "/v1/schemas/order/versions",
                p(json!({"schema": {"$ref": "https://example.com/x.json"}})),
                400,
                Some("schema_invalid"),
            ),
            case("POST", "/v1/schemas/bad%2Fname/versions", p(json!({"schema": {}})), 400, Some("invalid_argument"))
                .field("type"),
            case("POST", "/v1/schemas/order/versions", p(json!({})), 400, Some("invalid_json")),
            case("PUT", "/v1/schemas/order/config", p(json!({"compatibility": "sideways"})), 400, Some("invalid_json")),
            case("POST", "/v1/schemas/order/check", p(json!({})), 400, Some("invalid_argument")).field("schema"),
            case(
                "POST",
                "/v1/schemas/order/check",
                p(json!({"schema": {}, "body": "{}"})),
                400,
                Some("invalid_argument"),
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_with_schema_validation_refuse_what_breaks_the_schema() {
    let s = TestServer::start();
    s.expect("POST", "/v1/schemas/order/versions", Some(json!({"schema": order()})), 201).await;
    let created = s.create_queue(json!({"name": "orders", "schema_validation": true})).await;
    assert_eq!(created["schema_validation"], true);
    s.create_queue(json!({"name": "loose"})).await;

    let messages = json!({"messages": [
        {"body": r#"{"id": "o-1", "total": 5}"#, "type": "order", "version": 1},
        {"body": r#"{"id": "o-2", "total": -5}"#, "type": "order"},
        {"body": r#"{"id": "o-3", "total": 5}"#},
        {"body": r#"{"id": "o-4", "total": 5}"#, "type": "order", "version": "2"},
        {"body": r#"{"id": "o-5", "total": 6}"#, "type": "order"},
    ]});
    let sent = s.expect("POST", "/v1/queues/orders/messages", Some(messages.clone()), 200).await;
    let results = sent["results"].as_array().unwrap();
    assert!(results[0]["id"].is_string() && results[4]["id"].is_string(), "{sent}");
    for i in [1, 2, 3] {
        assert_eq!(results[i]["error"]["code"], "schema_validation_failed", "entry {i}: {sent}");
    }
    let details = &results[1]["error"]["details"];
    assert_eq!(
        (details["pointer"].clone(), details["type"].clone(), details["version"].clone()),
        (json!("/total"), json!("order"), json!(1))
    );
    assert_eq!(results[2]["error"]["details"]["pointer"], "");
    assert_eq!(s.counts("orders").await["visible"], 2, "only the valid messages were stored");
    // The same messages into a queue without validation: all taken.
    let loose = s.expect("POST", "/v1/queues/loose/messages", Some(messages), 200).await;
    assert!(loose["results"].as_array().unwrap().iter().all(|r| r["id"].is_string()));

    // Turned off, the check stops at once on this node.
    let patched = s.expect("PATCH", "/v1/queues/orders", Some(json!({"schema_validation": false})), 200).await;
    assert_eq!(patched["schema_validation"], false);
    let free =
        s.expect("POST", "/v1/queues/orders/messages", Some(json!({"messages": [{"body": "anything"}]})), 200).await;
    assert!(free["results"][0]["id"].is_string(), "{free}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_with_schema_validation_refuse_what_breaks_the_schema() {
    let s = TestServer::start();
    s.expect("POST", "/v1/schemas/order/versions", Some(json!({"schema": order()})), 201).await;
    s.create_queue(json!({"name": "copies"})).await;
    let topic = s.expect("POST", "/v1/topics", Some(json!({"name": "orders", "schema_validation": true})), 201).await;
    assert_eq!(
        (topic["schema_validation"].clone(), topic["attributes"]["SchemaValidation"].clone()),
        (json!(true), json!("true"))
    );
    s.expect("POST", "/v1/topics/orders/subscriptions", Some(json!({"queue": "copies", "raw": true})), 201).await;
    let published = s
        .expect(
            "POST",
            "/v1/topics/orders/publish",
            Some(json!({"messages": [
                {"body": r#"{"id": "o-1", "total": 1}"#, "type": "order"},
                {"body": r#"{"id": "o-2"}"#, "type": "order", "version": "1"},
                {"body": r#"{"id": "o-3", "total": 1}"#, "type": "order", "attributes": {"sluice.type": {"type": "String", "value": "other"}}},
            ]})),
            200,
        )
        .await;
    let results = published["results"].as_array().unwrap();
    assert_eq!(results[0]["deliveries"], 1, "{published}");
    assert_eq!(results[1]["error"]["code"], "schema_validation_failed");
    assert_eq!(results[1]["error"]["details"]["pointer"], "");
    assert!(results[1]["error"]["message"].as_str().unwrap().contains("total"), "{published}");
    assert_eq!(results[2]["error"]["code"], "invalid_argument", "type and a differing sluice.type attribute");
    let copies = s.receive("copies", json!({"max": 10})).await;
    assert_eq!(copies.len(), 1);
    assert_eq!(copies[0]["attributes"]["sluice.type"]["value"], "order", "the type travels to subscribers");

    // PATCH turns it off (at once on this node); a bad setting changes nothing.
    let bad = s
        .expect(
            "PATCH",
            "/v1/topics/orders",
            Some(json!({"schema_validation": false, "content_based_dedup": true})),
            400,
        )
        .await;
    assert_eq!(bad["error"]["details"]["field"], "content_based_dedup", "{bad}");
    assert_eq!(s.expect("GET", "/v1/topics/orders", None, 200).await["schema_validation"], true, "nothing changed");
    let patched = s
        .expect("PATCH", "/v1/topics/orders", Some(json!({"schema_validation": false, "display_name": "Orders"})), 200)
        .await;
    assert_eq!(
        (patched["schema_validation"].clone(), patched["display_name"].clone()),
        (json!(false), json!("Orders"))
    );
    assert_eq!(patched["subscriptions"]["confirmed"], 1);
    let free =
        s.expect("POST", "/v1/topics/orders/publish", Some(json!({"messages": [{"body": "not json"}]})), 200).await;
    assert_eq!(free["results"][0]["deliveries"], 1, "{free}");
    assert_eq!(s.expect("PATCH", "/v1/topics/orders", Some(json!({})), 200).await["display_name"], "Orders");
    s.expect("PATCH", "/v1/topics/nope", Some(json!({"schema_validation": true})), 404).await;
    s.expect("PATCH", "/v1/topics/orders", Some(json!({"fifo": true})), 400).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_with_schema_validation_refuse_per_entry() {
    let s = TestServer::start();
    s.expect("POST", "/v1/schemas/order/versions", Some(json!({"schema": order()})), 201).await;
    let created =
        s.expect("POST", "/v1/streams", Some(json!({"name": "orders", "schema_validation": true})), 201).await;
    assert_eq!(created["schema_validation"], true);
    // The same settings again: 200; another validation setting: 409, as for any setting.
    s.expect("POST", "/v1/streams", Some(json!({"name": "orders", "schema_validation": true})), 200).await;
    let other = s.expect("POST", "/v1/streams", Some(json!({"name": "orders"})), 409).await;
    assert_eq!(other["error"]["code"], "stream_exists");

    let appended = s
        .expect(
            "POST",
            "/v1/streams/orders/records",
            Some(json!({"records": [
                {"body": r#"{"id": "o-1", "total": 1}"#, "type": "order", "version": 1},
                {"body": r#"{"id": "o-2", "total": -1}"#, "type": "order"},
                {"body": r#"{"id": "o-3", "total": 1}"#},
                {"body": r#"{"id": "o-4", "total": 1}"#, "headers": {"sluice.type": "order", "sluice.version": "1"}},
                {"body": r#"{"id": "o-5", "total": 1}"#, "type": "order", "version": 1, "headers": {"sluice.version": "2"}},
            ]})),
            200,
        )
        .await;
    let results = appended["results"].as_array().unwrap();
    assert_eq!((results[0]["offset"].clone(), results[3]["offset"].clone()), (json!(0), json!(1)), "{appended}");
    assert_eq!(results[1]["error"]["code"], "schema_validation_failed");
    assert_eq!(results[1]["error"]["details"]["pointer"], "/total");
    assert_eq!(results[2]["error"]["code"], "schema_validation_failed", "no type: refused");
    assert_eq!(results[4]["error"]["code"], "invalid_argument", "version and a differing header");
    let read = s.expect("GET", "/v1/streams/orders/partitions/0/records", None, 200).await;
    let records = read["records"].as_array().unwrap();
    assert_eq!(records.len(), 2, "only the valid records were appended");
    assert_eq!(records[0]["headers"]["sluice.version"], "1", "the version travels as a header");

    let patched = s.expect("PATCH", "/v1/streams/orders", Some(json!({"schema_validation": false})), 200).await;
    assert_eq!(patched["schema_validation"], false);
    let free =
        s.expect("POST", "/v1/streams/orders/records", Some(json!({"records": [{"body": "anything"}]})), 200).await;
    assert_eq!(free["results"][0]["offset"], 2, "{free}");
    assert_eq!(s.expect("GET", "/v1/streams/orders", None, 200).await["schema_validation"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_on_a_validating_queue_are_checked_at_enqueue() {
    let s = TestServer::start();
    s.expect("POST", "/v1/schemas/report/versions", Some(json!({"schema": order()})), 201).await;
    let job = |queue: &str, payload: Value| json!({"queue": queue, "type": "report", "payload": payload});
    // No Sluice queue of this name: job queues have no settings, nothing is checked.
    s.expect("POST", "/v1/jobs", Some(job("reports", json!({"anything": true}))), 202).await;

    s.create_queue(json!({"name": "reports", "schema_validation": true})).await;
    let refused = s.expect("POST", "/v1/jobs", Some(job("reports", json!({"id": "r-1", "total": "many"}))), 400).await;
    assert_eq!(refused["error"]["code"], "schema_validation_failed");
    assert_eq!(refused["error"]["details"]["pointer"], "/total");
    assert_eq!(refused["error"]["details"]["type"], "report");
    let untyped = json!({"queue": "reports", "type": "unregistered", "payload": {}});
    assert_eq!(s.expect("POST", "/v1/jobs", Some(untyped), 400).await["error"]["code"], "schema_validation_failed");
    let accepted = s.expect("POST", "/v1/jobs", Some(job("reports", json!({"id": "r-1", "total": 3}))), 202).await;
    assert_eq!(accepted["status"], "queued");
    let listed = s.expect("GET", "/v1/jobs?queue=reports", None, 200).await;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 2, "the refused jobs were not enqueued");
}
