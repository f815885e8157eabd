//! The stream API over HTTP: paths, fields, statuses and error codes of DESIGN.md §4b.

use serde_json::{Value, json};

use super::support::{Payload, TestServer, case, check, json_payload};

async fn append(s: &TestServer, stream: &str, records: Value) -> Vec<Value> {
    let answer =
        s.expect("POST", &format!("/v1/streams/{stream}/records"), Some(json!({ "records": records })), 200).await;
    answer["results"].as_array().expect("results").clone()
}

#[tokio::test]
async fn streams_are_created_appended_to_read_and_deleted() {
    let s = TestServer::start();
    let created = s.expect("POST", "/v1/streams", Some(json!({ "name": "orders", "partitions": 3 })), 201).await;
    assert_eq!(created["partitions"], 3);
    assert_eq!(created["partition_details"].as_array().unwrap().len(), 3);
    s.expect("POST", "/v1/streams", Some(json!({ "name": "orders", "partitions": 3 })), 200).await;
    let results = append(
        &s,
        "orders",
        json!([
            { "key": "user-1", "body": "a" },
            { "partition": 2, "body_base64": "AAEC", "headers": { "h": "v" }, "type": "t", "correlation_id": "c" },
            { "body": "x", "dedup_id": "d1" },
            { "partition": 9, "body": "far" },
            { "body": "both", "body_base64": "AA==" },
        ]),
    )
    .await;
    // Kafka's partitioner: toPositive(murmur2("user-1")) % 3.
    let expected = sluice_core::stream::partitioner::partition_for_key(b"user-1", 3);
    assert_eq!((results[0]["partition"].as_u64(), results[0]["offset"].as_u64()), (Some(u64::from(expected)), Some(0)));
    assert!(results[0]["timestamp_ms"].as_u64().is_some());
    assert_eq!(results[3]["error"]["code"], "partition_out_of_range");
    assert_eq!(results[3]["error"]["details"]["partition"], 9);
    assert_eq!(results[4]["error"]["code"], "invalid_argument");
    let again = append(&s, "orders", json!([{ "body": "retry", "dedup_id": "d1" }])).await;
    assert_eq!((&again[0]["duplicate"], &again[0]["offset"]), (&json!(true), &results[2]["offset"]));
    let read = s.expect("GET", "/v1/streams/orders/partitions/2/records?from_offset=0&max=10", None, 200).await;
    let first =
        read["records"].as_array().unwrap().iter().find(|r| r["offset"] == results[1]["offset"]).expect("the record");
    assert_eq!(
        (&first["body_base64"], &first["headers"]["h"], &first["type"]),
        (&json!("AAEC"), &json!("v"), &json!("t"))
    );
    assert_eq!(read["first_offset"], 0);
    let view = s.expect("GET", "/v1/streams/orders", None, 200).await;
    let total: u64 =
        view["partition_details"].as_array().unwrap().iter().map(|p| p["next_offset"].as_u64().unwrap()).sum();
    assert_eq!(total, 3);
    let list = s.expect("GET", "/v1/streams?limit=1", None, 200).await;
    assert_eq!(list["streams"][0]["name"], "orders");
    s.expect("PATCH", "/v1/streams/orders", Some(json!({ "partitions": 4 })), 200).await;
    s.expect("DELETE", "/v1/streams/orders", None, 204).await;
    s.expect("GET", "/v1/streams/orders", None, 404).await;
}

#[tokio::test]
async fn bad_requests_get_their_codes_and_statuses() {
    let s = TestServer::start();
    s.expect("POST", "/v1/streams", Some(json!({ "name": "s", "record_bytes_max": 10 })), 201).await;
    let big = append(&s, "s", json!([{ "body": "x".repeat(11) }])).await;
    assert_eq!(big[0]["error"]["code"], "record_too_large");
    check(
        &s,
        vec![
            case("GET", "/v1/streams/none", Payload::None, 404, Some("stream_not_found")),
            case(
                "POST",
                "/v1/streams/none/records",
                json_payload(json!({ "records": [{ "body": "x" }] })),
                404,
                Some("stream_not_found"),
            ),
            case(
                "POST",
                "/v1/streams",
                json_payload(json!({ "name": "s", "partitions": 2 })),
                409,
                Some("stream_exists"),
            ),
            case(
                "POST",
                "/v1/streams",
                json_payload(json!({ "name": "z", "partitions": 0 })),
                400,
                Some("invalid_argument"),
            )
            .field("partitions"),
            case(
                "POST",
                "/v1/streams",
                json_payload(json!({ "name": "z", "partitions": 1025 })),
                400,
                Some("invalid_argument"),
            )
            .field("partitions"),
            case("POST", "/v1/streams/s/records", json_payload(json!({ "records": [] })), 400, Some("empty_batch")),
            case("GET", "/v1/streams/s/partitions/1/records", Payload::None, 400, Some("partition_out_of_range"))
                .field("partition"),
            case("GET", "/v1/streams/s/partitions/x/records", Payload::None, 400, Some("invalid_argument")),
            case("GET", "/v1/streams/s/partitions/0/records?max=0", Payload::None, 400, Some("invalid_argument"))
                .field("max"),
            case(
                "GET",
                "/v1/streams/s/partitions/0/records?wait_ms=99999",
                Payload::None,
                400,
                Some("invalid_argument"),
            )
            .field("wait_ms"),
            case(
                "POST",
                "/v1/streams/s/groups/none/fetch",
                json_payload(json!({ "member": "m" })),
                404,
                Some("group_not_found"),
            ),
            case(
                "PATCH",
                "/v1/streams/s",
                json_payload(json!({ "partitions": 1, "segment_bytes": 1 })),
                400,
                Some("invalid_argument"),
            ),
        ],
    )
    .await;
}

#[tokio::test]
async fn offsets_groups_fetch_commit_forward_and_seek_back() {
    let s = TestServer::start();
    s.expect("POST", "/v1/streams", Some(json!({ "name": "s", "partitions": 2 })), 201).await;
    append(
        &s,
        "s",
        json!([{ "partition": 0, "body": "a" }, { "partition": 0, "body": "b" }, { "partition": 1, "body": "c" }]),
    )
    .await;
    let g = s.expect("POST", "/v1/streams/s/groups", Some(json!({ "name": "g", "start": "earliest" })), 201).await;
    assert_eq!((&g["mode"], &g["lag"]), (&json!("offsets"), &json!(3)));
    let f = s.expect("POST", "/v1/streams/s/groups/g/fetch", Some(json!({ "member": "m1", "max": 10 })), 200).await;
    assert_eq!(f["records"].as_array().unwrap().len(), 3);
    let generation = f["generation"].as_u64().unwrap();
    let commit =
        |offsets: Value, generation: u64| json!({ "member": "m1", "generation": generation, "offsets": offsets });
    s.expect("POST", "/v1/streams/s/groups/g/commit", Some(commit(json!({ "0": 2, "1": 1 }), generation)), 204).await;
    check(
        &s,
        vec![
            case(
                "POST",
                "/v1/streams/s/groups/g/commit",
                json_payload(commit(json!({ "0": 1 }), generation)),
                409,
                Some("offset_regression"),
            ),
            case(
                "POST",
                "/v1/streams/s/groups/g/commit",
                json_payload(commit(json!({ "0": 9 }), generation)),
                416,
                Some("offset_out_of_range"),
            ),
            case(
                "POST",
                "/v1/streams/s/groups/g/commit",
                json_payload(json!({ "member": "other", "generation": generation, "offsets": { "0": 2 } })),
                409,
                Some("stale_generation"),
            ),
            case(
                "POST",
                "/v1/streams/s/groups/g/ack",
                json_payload(json!({ "receipts": ["x"] })),
                409,
                Some("wrong_group_mode"),
            ),
            case(
                "POST",
                "/v1/streams/s/groups",
                json_payload(json!({ "name": "g", "start": "latest" })),
                409,
                Some("group_exists"),
            ),
        ],
    )
    .await;
    let view = s.expect("GET", "/v1/streams/s/groups/g", None, 200).await;
    assert_eq!((&view["lag"], &view["members"][0]), (&json!(0), &json!("m1")));
    let sought =
        s.expect("POST", "/v1/streams/s/groups/g/seek", Some(json!({ "partition": 0, "offset": 0 })), 200).await;
    assert_eq!(sought["offset"], 0);
    let stale =
        s.expect("POST", "/v1/streams/s/groups/g/commit", Some(commit(json!({ "0": 2 }), generation)), 409).await;
    assert_eq!(stale["error"]["code"], "stale_generation", "a seek makes earlier generations stale");
    let stream = s.expect("GET", "/v1/streams/s", None, 200).await;
    assert_eq!(stream["groups"][0]["lag"], 2, "lag per group in the stream view");
    let metrics = s.raw(axum::http::Request::get("/metrics").body(axum::body::Body::empty()).unwrap()).await;
    let text = String::from_utf8(metrics.2).unwrap();
    assert!(text.contains(r#"sluice_stream_group_lag{stream="s",group="g",partition="0"} 2"#), "{text}");
    assert!(text.contains(r#"sluice_stream_next_offset{stream="s",partition="0"} 2"#), "{text}");
}

#[tokio::test]
async fn shared_groups_hand_out_receipts_in_key_order() {
    let s = TestServer::start();
    s.expect("POST", "/v1/streams", Some(json!({ "name": "s" })), 201).await;
    let body = json!({ "name": "w", "mode": "shared", "key_ordered": true, "ack_timeout_ms": 30000 });
    let g = s.expect("POST", "/v1/streams/s/groups", Some(body), 201).await;
    assert_eq!((&g["mode"], &g["key_ordered"], &g["in_flight"]), (&json!("shared"), &json!(true), &json!(0)));
    append(&s, "s", json!([{ "key": "k", "body": "1" }, { "key": "k", "body": "2" }, { "key": "j", "body": "3" }]))
        .await;
    let f = s.expect("POST", "/v1/streams/s/groups/w/fetch", Some(json!({ "member": "a", "max": 10 })), 200).await;
    let bodies: Vec<&str> = f["records"].as_array().unwrap().iter().map(|r| r["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["1", "3"]);
    let receipt = f["records"][0]["receipt"].as_str().unwrap().to_owned();
    assert_eq!(f["records"][0]["deliveries"], 1);
    let acked = s
        .expect("POST", "/v1/streams/s/groups/w/ack", Some(json!({ "receipts": [receipt.clone(), "junk"] })), 200)
        .await;
    assert_eq!(
        (&acked["results"][0]["ok"], &acked["results"][1]["error"]["code"]),
        (&json!(true), &json!("invalid_receipt"))
    );
    let again = s.expect("POST", "/v1/streams/s/groups/w/ack", Some(json!({ "receipts": [receipt] })), 200).await;
    assert_eq!(again["results"][0]["error"]["code"], "stale_receipt");
    let f = s.expect("POST", "/v1/streams/s/groups/w/fetch", Some(json!({ "member": "b" })), 200).await;
    assert_eq!(f["records"][0]["body"], "2");
    let r = f["records"][0]["receipt"].as_str().unwrap().to_owned();
    s.expect("POST", "/v1/streams/s/groups/w/release", Some(json!({ "receipts": [r], "error": "busy" })), 200).await;
    let openapi = s.expect("GET", "/v1/openapi.json", None, 200).await;
    for path in
        ["/v1/streams", "/v1/streams/{name}/groups/{group}/commit", "/v1/streams/{name}/partitions/{partition}/records"]
    {
        assert!(openapi["paths"][path].is_object(), "{path} is in the OpenAPI document");
    }
}
