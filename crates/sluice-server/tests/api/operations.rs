//! Operations and protocol edges: metrics, OpenAPI, health probes, unknown routes and
//! methods, malformed bodies.

use serde_json::json;

use crate::support::{Payload, TestServer, case, check, json_payload};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_queue_gauges_counters_and_latency() {
    let s = TestServer::start();
    s.create_queue(json!({ "name": "m-dlq" })).await;
    s.create_queue(json!({ "name": "m-work", "dead_letter": { "queue": "m-dlq", "max_receive_count": 5 } })).await;
    s.send_texts("m-work", &["a", "b"]).await;
    s.receive("m-work", json!({ "visibility_timeout_ms": 60000 })).await;

    let (status, headers, body) =
        s.raw(axum::http::Request::get("/metrics").body(axum::body::Body::empty()).unwrap()).await;
    assert_eq!(status.as_u16(), 200);
    assert!(headers["content-type"].to_str().unwrap().starts_with("text/plain"));
    let text = String::from_utf8(body).unwrap();
    for line in [
        "sluice_queue_visible{queue=\"m-work\"} 1",
        "sluice_queue_in_flight{queue=\"m-work\"} 1",
        "sluice_queue_delayed{queue=\"m-work\"} 0",
        "sluice_queue_dlq_depth{queue=\"m-work\"} 0",
        "sluice_queue_visible{queue=\"m-dlq\"} 0",
        "sluice_messages_sent_total 2",
        "sluice_messages_received_total 1",
        "sluice_messages_acked_total 0",
        "sluice_messages_dead_lettered_total 0",
        "sluice_messages_expired_total 0",
        "# TYPE sluice_store_batches_total counter",
        "# TYPE sluice_store_records_total counter",
        "# TYPE sluice_queue_oldest_age_seconds gauge",
        "# TYPE sluice_http_request_duration_seconds histogram",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    assert!(
        text.lines().any(|l| l.starts_with("sluice_http_request_duration_seconds_bucket")
            && l.contains("route=\"/v1/queues/{name}/messages\"")
            && l.contains("method=\"POST\"")
            && l.contains("status=\"200\"")),
        "no latency bucket for the send route:\n{text}"
    );
    assert!(!text.contains("sluice_queue_dlq_depth{queue=\"m-dlq\"}"), "a queue without a policy has no DLQ depth");

    // A deleted queue's gauges are gone at the next scrape.
    s.expect("DELETE", "/v1/queues/m-work", None, 204).await;
    let (_, _, body) = s.raw(axum::http::Request::get("/metrics").body(axum::body::Body::empty()).unwrap()).await;
    let text = String::from_utf8(body).unwrap();
    assert!(!text.contains("queue=\"m-work\""), "stale gauges:\n{text}");
    assert!(text.contains("sluice_queue_visible{queue=\"m-dlq\"} 0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_lists_every_route() {
    let s = TestServer::start();
    let doc = s.expect("GET", "/v1/openapi.json", None, 200).await;
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")), "{doc}");
    let paths = doc["paths"].as_object().expect("paths");
    let want = [
        ("/v1/queues", &["get", "post"][..]),
        ("/v1/queues/{name}", &["get", "patch", "delete"]),
        ("/v1/queues/{name}/purge", &["post"]),
        ("/v1/queues/{name}/messages", &["get", "post"]),
        ("/v1/queues/{name}/receive", &["post"]),
        ("/v1/queues/{name}/ack", &["post"]),
        ("/v1/queues/{name}/visibility", &["post"]),
        ("/v1/queues/{name}/nack", &["post"]),
        ("/v1/queues/{name}/redrive", &["get", "post"]),
        ("/v1/redrives", &["get"]),
        ("/v1/redrives/{id}", &["get", "delete"]),
        ("/v1/topics", &["get", "post"]),
        ("/v1/topics/{name}", &["get", "patch", "delete"]),
        ("/v1/topics/{name}/subscriptions", &["get", "post"]),
        ("/v1/topics/{name}/subscriptions/{id}", &["get", "delete"]),
        ("/v1/topics/{name}/publish", &["post"]),
        ("/v1/subscriptions", &["get"]),
        ("/v1/relays", &["get", "post"]),
        ("/v1/relays/{name}", &["get", "delete"]),
        ("/v1/relays/{name}/pause", &["post"]),
        ("/v1/relays/{name}/resume", &["post"]),
        ("/v1/sagas", &["get"]),
        ("/v1/sagas/{name}", &["get", "put"]),
        ("/v1/sagas/{name}/instances", &["post"]),
        ("/v1/sagas/instances", &["get"]),
        ("/v1/sagas/instances/{id}", &["get"]),
        ("/v1/sagas/instances/{id}/cancel", &["post"]),
        ("/v1/sagas/instances/{id}/retry", &["post"]),
        ("/v1/replies", &["post"]),
        ("/v1/jobs", &["get", "post"]),
        ("/v1/jobs/claim", &["post"]),
        ("/v1/jobs/callback-secret", &["get"]),
        ("/v1/jobs/stats", &["get"]),
        ("/v1/jobs/{id}", &["get"]),
        ("/v1/jobs/{id}/cancel", &["post"]),
        ("/v1/jobs/{id}/heartbeat", &["post"]),
        ("/v1/jobs/{id}/complete", &["post"]),
        ("/v1/jobs/{id}/fail", &["post"]),
        ("/metrics", &["get"]),
        ("/healthz", &["get"]),
        ("/readyz", &["get"]),
        ("/v1/openapi.json", &["get"]),
        ("/v1/stats", &["get"]),
        ("/v1/stats/queues", &["get"]),
        ("/v1/stats/queues/{name}", &["get"]),
        ("/v1/alerts", &["get"]),
        ("/v1/alerts/rules", &["get", "post"]),
        ("/v1/alerts/rules/{name}", &["get", "delete"]),
        ("/v1/trace/{correlation_id}", &["get"]),
        ("/ui", &["get"]),
        ("/v1/schedules", &["get", "post"]),
        ("/v1/schedules/{name}", &["get", "delete"]),
        ("/v1/schedules/{name}/pause", &["post"]),
        ("/v1/schedules/{name}/resume", &["post"]),
        ("/v1/streams", &["get", "post"]),
        ("/v1/streams/{name}", &["get", "patch", "delete"]),
        ("/v1/streams/{name}/records", &["post"]),
        ("/v1/streams/{name}/partitions/{partition}/records", &["get"]),
        ("/v1/streams/{name}/groups", &["get", "post"]),
        ("/v1/streams/{name}/groups/{group}", &["get", "delete"]),
        ("/v1/streams/{name}/groups/{group}/fetch", &["post"]),
        ("/v1/streams/{name}/groups/{group}/commit", &["post"]),
        ("/v1/streams/{name}/groups/{group}/seek", &["post"]),
        ("/v1/streams/{name}/groups/{group}/ack", &["post"]),
        ("/v1/streams/{name}/groups/{group}/release", &["post"]),
        ("/v1/streams/{name}/groups/{group}/nack", &["post"]),
        ("/v1/schemas", &["get"]),
        ("/v1/schemas/{type}", &["get"]),
        ("/v1/schemas/{type}/versions", &["post"]),
        ("/v1/schemas/{type}/versions/{version}", &["get"]),
        ("/v1/schemas/{type}/config", &["put"]),
        ("/v1/schemas/{type}/check", &["post"]),
        ("/v1/events/streams/{stream_id}", &["get", "post", "delete"]),
        ("/v1/events/streams/{stream_id}/snapshot", &["get", "put"]),
        ("/v1/events/all", &["get"]),
        ("/v1/events/subscriptions", &["get", "post"]),
        ("/v1/events/subscriptions/{name}", &["get", "delete"]),
        ("/v1/events/subscriptions/{name}/fetch", &["post"]),
        ("/v1/events/subscriptions/{name}/checkpoint", &["post"]),
        ("/v1/keys", &["get", "post"]),
        ("/v1/keys/{id}", &["get", "delete"]),
        ("/v1/tenants", &["get"]),
        ("/v1/tenants/{name}", &["get", "put", "delete"]),
    ];
    for (path, methods) in want {
        let item = paths.get(path).unwrap_or_else(|| panic!("{path} missing from the OpenAPI document"));
        for m in methods {
            assert!(item.get(*m).is_some(), "{m} {path} missing");
        }
    }
    assert_eq!(paths.len(), want.len(), "unexpected paths: {:?}", paths.keys().collect::<Vec<_>>());
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    for name in [
        "SendRequest",
        "Message",
        "Queue",
        "ErrorResponse",
        "RedriveTask",
        "BatchResponse",
        "Topic",
        "Relay",
        "CreateRelayRequest",
        "CreateKeyRequest",
        "CreatedKey",
        "ApiKey",
        "Subscription",
        "PublishRequest",
        "PublishResponse",
        "Stats",
        "QueueHistory",
        "AlertRule",
        "CreateAlertRuleRequest",
        "AlertList",
        "EnqueueJobRequest",
        "Job",
        "ClaimJobsRequest",
        "ClaimJobsResponse",
        "UpdateTopicRequest",
        "RegisterSchemaRequest",
        "RegisteredSchema",
        "SchemaType",
        "SchemaTypeList",
        "SchemaVersion",
        "SchemaConfig",
        "Compatibility",
        "CheckSchemaRequest",
        "CheckSchemaResponse",
        "IncompatibilityReason",
        "SchemaFailure",
    ] {
        assert!(schemas.contains_key(name), "schema {name} missing");
    }
    for (schema, field) in [
        ("Queue", "schema_validation"),
        ("CreateQueueRequest", "schema_validation"),
        ("UpdateQueueRequest", "schema_validation"),
        ("Topic", "schema_validation"),
        ("CreateTopicRequest", "schema_validation"),
        ("SendMessage", "version"),
        ("PublishMessage", "type"),
        ("PublishMessage", "version"),
        ("Stream", "schema_validation"),
        ("CreateStreamRequest", "schema_validation"),
        ("UpdateStreamRequest", "schema_validation"),
        ("AppendRecord", "version"),
        ("UpdateTopicRequest", "schema_validation"),
    ] {
        assert!(schemas[schema]["properties"].get(field).is_some(), "{schema}.{field} missing from the document");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_and_protocol_errors() {
    let s = TestServer::start();
    assert_eq!(s.expect("GET", "/healthz", None, 200).await["status"], "ok");
    assert_eq!(s.expect("GET", "/readyz", None, 200).await["status"], "ready");
    s.create_queue(json!({ "name": "q" })).await;
    check(
        &s,
        vec![
            case("GET", "/nope", Payload::None, 404, Some("not_found")),
            case("GET", "/v1/queues/q/unknown", Payload::None, 404, Some("not_found")),
            case("DELETE", "/v1/queues", Payload::None, 405, Some("method_not_allowed")),
            case("PUT", "/v1/queues/q", Payload::None, 405, Some("method_not_allowed")),
            case("GET", "/v1/queues/q/ack", Payload::None, 405, Some("method_not_allowed")),
            case(
                "POST",
                "/v1/queues",
                Payload::Raw(Some("application/json"), b"{\"name\":".to_vec()),
                400,
                Some("invalid_json"),
            ),
            case(
                "POST",
                "/v1/queues",
                Payload::Raw(Some("application/json"), b"[1,2]".to_vec()),
                400,
                Some("invalid_json"),
            ),
            case(
                "POST",
                "/v1/queues",
                Payload::Raw(Some("application/json"), b"{\"name\":\"\xff\xfe\"}".to_vec()),
                400,
                Some("invalid_json"),
            ),
            case(
                "POST",
                "/v1/queues",
                Payload::Raw(Some("text/plain"), b"{\"name\":\"x\"}".to_vec()),
                415,
                Some("unsupported_media_type"),
            ),
            case("POST", "/v1/queues", Payload::Raw(None, b"".to_vec()), 415, Some("unsupported_media_type")),
            case(
                "POST",
                "/v1/queues/q/messages",
                json_payload(json!({ "messages": [{ "body": "x", "colour": "red" }] })),
                400,
                Some("invalid_json"),
            ),
            case(
                "POST",
                "/v1/queues/q/messages",
                json_payload(json!({ "messages": [{ "body": "x", "priority": 300 }] })),
                400,
                Some("invalid_json"),
            ),
            case("POST", "/v1/queues/q/ack", json_payload(json!({ "receipts": "abc" })), 400, Some("invalid_json")),
        ],
    )
    .await;
    // 405 names the methods the route does take.
    let request = axum::http::Request::delete("/v1/queues").body(axum::body::Body::empty()).unwrap();
    let (_, headers, _) = s.raw(request).await;
    let allow = headers.get("allow").expect("Allow header").to_str().unwrap().to_string();
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
}
