//! Queue resource: create (201/200/409), get, list with pagination, update, delete, purge,
//! and the errors of each.

use serde_json::json;

use crate::support::{Payload, TestServer, case, check, json_payload};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_is_idempotent_for_identical_attributes() {
    let s = TestServer::start();
    let created = s.create_queue(json!({ "name": "orders", "visibility_timeout_ms": 5000 })).await;
    assert_eq!(created["name"], "orders");
    assert_eq!(created["visibility_timeout_ms"], 5000);
    assert_eq!(created["retention_ms"], 4 * 24 * 3600 * 1000, "omitted attributes take their defaults");
    assert_eq!(created["counts"]["visible"], 0);
    assert!(created["created_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{created}");
    check(
        &s,
        vec![
            // Same attributes: 200, not 201. Tags are not compared (as in SQS).
            case(
                "POST",
                "/v1/queues",
                json_payload(json!({ "name": "orders", "visibility_timeout_ms": 5000 })),
                200,
                None,
            ),
            case(
                "POST",
                "/v1/queues",
                json_payload(json!({ "name": "orders", "visibility_timeout_ms": 5000, "tags": { "team": "x" } })),
                200,
                None,
            ),
            case(
                "POST",
                "/v1/queues",
                json_payload(json!({ "name": "orders", "visibility_timeout_ms": 6000 })),
                409,
                Some("queue_exists"),
            ),
            case("POST", "/v1/queues", json_payload(json!({ "name": "orders" })), 409, Some("queue_exists")),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_errors() {
    let s = TestServer::start();
    s.create_queue(json!({ "name": "q" })).await;
    check(
        &s,
        vec![
            case("POST", "/v1/queues", json_payload(json!({ "name": "bad name" })), 400, Some("invalid_argument"))
                .field("name"),
            case("POST", "/v1/queues", json_payload(json!({ "name": "" })), 400, Some("invalid_argument"))
                .field("name"),
            case(
                "POST",
                "/v1/queues",
                json_payload(json!({ "name": "v", "visibility_timeout_ms": 999_999_999_999u64 })),
                400,
                Some("invalid_argument"),
            )
            .field("visibility_timeout_ms"),
            case("POST", "/v1/queues", json_payload(json!({ "name": "v.fifo" })), 400, Some("invalid_argument"))
                .field("fifo"),
            case(
                "POST",
                "/v1/queues",
                json_payload(json!({ "name": "v", "content_based_dedup": true })),
                400,
                Some("invalid_argument"),
            )
            .field("content_based_dedup"),
            case(
                "POST",
                "/v1/queues",
                json_payload(json!({ "name": "v", "dead_letter": { "queue": "missing", "max_receive_count": 3 } })),
                400,
                Some("dead_letter_queue_not_found"),
            )
            .field("dead_letter.queue"),
            case(
                "POST",
                "/v1/queues",
                json_payload(json!({ "name": "v", "dead_letter": { "queue": "q", "max_receive_count": 0 } })),
                400,
                Some("invalid_argument"),
            )
            .field("dead_letter.max_receive_count"),
            case(
                "POST",
                "/v1/queues",
                json_payload(json!({ "name": "v", "colour": "red" })),
                400,
                Some("invalid_json"),
            ),
            case("POST", "/v1/queues", json_payload(json!({ "visibility_timeout_ms": 1 })), 400, Some("invalid_json")),
            case("GET", "/v1/queues/nope", Payload::None, 404, Some("queue_not_found")),
            case("PATCH", "/v1/queues/nope", json_payload(json!({ "delay_ms": 1 })), 404, Some("queue_not_found")),
            case("DELETE", "/v1/queues/nope", Payload::None, 404, Some("queue_not_found")),
            case("POST", "/v1/queues/nope/purge", Payload::None, 404, Some("queue_not_found")),
            case("PATCH", "/v1/queues/q", json_payload(json!({ "retention_ms": 1 })), 400, Some("invalid_argument"))
                .field("retention_ms"),
            case("PATCH", "/v1/queues/q", json_payload(json!({ "fifo": true })), 400, Some("invalid_json")),
            case("GET", "/v1/queues?limit=0", Payload::None, 400, Some("invalid_argument")).field("limit"),
            case("GET", "/v1/queues?limit=1001", Payload::None, 400, Some("invalid_argument")).field("limit"),
            case("GET", "/v1/queues?limit=ten", Payload::None, 400, Some("invalid_argument")),
            case("GET", "/v1/queues?next_token=%%%", Payload::None, 400, Some("invalid_argument")),
            case("GET", "/v1/queues?next_token=not*base64", Payload::None, 400, Some("invalid_argument"))
                .field("next_token"),
            // A path parameter that is not UTF-8 is the client's mistake, never a 500.
            case("GET", "/v1/queues/%FF%FE", Payload::None, 400, Some("invalid_argument")),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_pages_through_every_queue_in_name_order() {
    let s = TestServer::start();
    let names = ["pg-a", "pg-b", "pg-c", "pg-d", "pg-e"];
    for name in names.iter().rev() {
        s.create_queue(json!({ "name": name })).await;
    }
    s.create_queue(json!({ "name": "other" })).await;

    let mut seen = Vec::new();
    let mut path = "/v1/queues?prefix=pg-&limit=2".to_string();
    let mut pages = 0;
    loop {
        let page = s.expect("GET", &path, None, 200).await;
        pages += 1;
        let queues = page["queues"].as_array().expect("queues");
        assert!(queues.len() <= 2, "{page}");
        seen.extend(queues.iter().map(|q| q["name"].as_str().expect("name").to_string()));
        match page["next_token"].as_str() {
            Some(token) => path = format!("/v1/queues?prefix=pg-&limit=2&next_token={token}"),
            None => break,
        }
        assert!(pages < 10, "pagination does not end");
    }
    assert_eq!(seen, names);
    assert_eq!(pages, 3);

    let all = s.expect("GET", "/v1/queues", None, 200).await;
    assert_eq!(all["queues"].as_array().map(Vec::len), Some(6));
    assert!(all.get("next_token").is_none(), "a single page has no token: {all}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_get_purge_delete() {
    let s = TestServer::start();
    s.create_queue(json!({ "name": "dlq" })).await;
    s.create_queue(json!({ "name": "work" })).await;

    let updated = s
        .expect(
            "PATCH",
            "/v1/queues/work",
            Some(json!({ "visibility_timeout_ms": 1234, "dead_letter": { "queue": "dlq", "max_receive_count": 2 } })),
            200,
        )
        .await;
    assert_eq!(updated["visibility_timeout_ms"], 1234);
    assert_eq!(updated["dead_letter"], json!({ "queue": "dlq", "max_receive_count": 2 }));
    assert_eq!(updated["counts"]["dlq_depth"], 0, "{updated}");

    let got = s.expect("GET", "/v1/queues/work", None, 200).await;
    assert_eq!(got["visibility_timeout_ms"], 1234);
    // `null` removes the dead-letter policy; absent fields stay.
    let cleared = s.expect("PATCH", "/v1/queues/work", Some(json!({ "dead_letter": null })), 200).await;
    assert_eq!(cleared["dead_letter"], serde_json::Value::Null);
    assert_eq!(cleared["visibility_timeout_ms"], 1234);

    s.send_texts("work", &["a", "b", "c"]).await;
    assert_eq!(s.counts("work").await["visible"], 3);
    let purged = s.expect("POST", "/v1/queues/work/purge", None, 200).await;
    assert_eq!(purged["purged"], 3);
    assert_eq!(s.counts("work").await["visible"], 0);

    let (status, body) = s.call("DELETE", "/v1/queues/work", Payload::None).await;
    assert_eq!(status.as_u16(), 204);
    assert_eq!(body, serde_json::Value::Null, "204 has no body");
    check(&s, vec![case("GET", "/v1/queues/work", Payload::None, 404, Some("queue_not_found"))]).await;
}
