//! Relays through the native API: create (201/200/409), list, get, pause, resume, delete,
//! passwords masked in every answer, the figures at `/metrics`, and the errors of each. The
//! router runs without its background work here, so relays stay `starting`; publishing is
//! tested in `sluice-services` and end to end in `crates/sluice/tests`.

use serde_json::{Value, json};

use crate::support::{Payload, TestServer, case, check, json_payload};

/// An SQLite outbox in a temporary directory holding `rows` of (aggregate type, aggregate id,
/// payload), and its source URL.
pub(crate) fn outbox(rows: &[(&str, &str, &str)]) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("app.db");
    let conn = rusqlite::Connection::open(&path).expect("create");
    conn.execute_batch(
        "CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, aggregatetype TEXT, aggregateid TEXT, type TEXT, payload TEXT, published_at TEXT)",
    )
    .expect("table");
    for (aggregate_type, aggregate_id, payload) in rows {
        conn.execute(
            "INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES (?1, ?2, 'created', ?3)",
            (aggregate_type, aggregate_id, payload),
        )
        .expect("row");
    }
    (dir, format!("sqlite://{}", path.display()))
}

fn request(name: &str, source: &str) -> Value {
    json!({ "name": name, "source": source, "table": "outbox", "target": { "queue": "out" }, "poll_ms": 50 })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_lifecycle() {
    let s = TestServer::start();
    let (_dir, source) = outbox(&[]);
    let created = s.expect("POST", "/v1/relays", Some(request("orders", &source)), 201).await;
    assert_eq!(created["source_kind"], "sqlite");
    assert_eq!(created["columns"]["aggregate_id"], "aggregateid", "Debezium's columns by default");
    assert_eq!(created["columns"]["position"], "id");
    assert_eq!((created["after_publish"].clone(), created["batch_max"].clone()), (json!("delete"), json!(100)));
    assert_eq!(created["status"]["state"], "starting", "no background work in this router");
    // The same again is 200; another configuration under the name is 409.
    s.expect("POST", "/v1/relays", Some(request("orders", &source)), 200).await;
    let mut other = request("orders", &source);
    other["batch_max"] = json!(5);
    let (status, body) = s.call("POST", "/v1/relays", Payload::Json(other)).await;
    assert_eq!((status.as_u16(), body["error"]["code"].clone()), (409, json!("relay_exists")));
    // A second relay of the same table would publish every row twice.
    let (status, body) = s.call("POST", "/v1/relays", Payload::Json(request("copy", &source))).await;
    assert_eq!((status.as_u16(), body["error"]["code"].clone()), (409, json!("relay_source_in_use")));
    assert_eq!(body["error"]["details"]["relay"], "orders");

    let list = s.expect("GET", "/v1/relays", None, 200).await;
    assert_eq!(list["relays"].as_array().unwrap().len(), 1);
    let paused = s.expect("POST", "/v1/relays/orders/pause", None, 200).await;
    assert_eq!((paused["paused"].clone(), paused["status"]["state"].clone()), (json!(true), json!("paused")));
    let resumed = s.expect("POST", "/v1/relays/orders/resume", None, 200).await;
    assert_eq!(resumed["paused"], false);
    let got = s.expect("GET", "/v1/relays/orders", None, 200).await;
    assert_eq!(got["status"]["published"], 0);

    let (_, _, metrics) = s.raw(axum::http::Request::get("/metrics").body(axum::body::Body::empty()).unwrap()).await;
    let metrics = String::from_utf8(metrics).unwrap();
    assert!(metrics.contains("sluice_relay_rows_published_total{relay=\"orders\"} 0"), "{metrics}");
    assert!(metrics.contains("sluice_relay_blocked_rows{relay=\"orders\"} 0"), "{metrics}");

    s.expect("DELETE", "/v1/relays/orders", None, 204).await;
    let (status, body) = s.call("GET", "/v1/relays/orders", Payload::None).await;
    assert_eq!((status.as_u16(), body["error"]["code"].clone()), (404, json!("relay_not_found")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_never_leave_the_server() {
    let s = TestServer::start();
    // Nothing listens there: the answer names the failure without the password.
    let source = "postgres://app:hunter2secret@127.0.0.1:1/orders";
    let (status, body) = s.call("POST", "/v1/relays", Payload::Json(request("pg", source))).await;
    assert_eq!((status.as_u16(), body["error"]["code"].clone()), (400, json!("relay_source_unreachable")));
    assert!(!body.to_string().contains("hunter2secret"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_errors() {
    let s = TestServer::start();
    let (_dir, source) = outbox(&[]);
    let with = |f: &dyn Fn(&mut Value)| {
        let mut r = request("r", &source);
        f(&mut r);
        json_payload(r)
    };
    check(
        &s,
        vec![
            case("POST", "/v1/relays", with(&|r| r["name"] = json!("bad name")), 400, Some("invalid_argument"))
                .field("name"),
            case("POST", "/v1/relays", with(&|r| r["source"] = json!("redis://x")), 400, Some("invalid_argument"))
                .field("source"),
            case(
                "POST",
                "/v1/relays",
                with(&|r| r["table"] = json!("outbox; drop table x")),
                400,
                Some("invalid_argument"),
            )
            .field("table"),
            case("POST", "/v1/relays", with(&|r| r["poll_ms"] = json!(1)), 400, Some("invalid_argument"))
                .field("poll_ms"),
            case("POST", "/v1/relays", with(&|r| r["batch_max"] = json!(1001)), 400, Some("invalid_argument"))
                .field("batch_max"),
            case("POST", "/v1/relays", with(&|r| r["target"] = json!({})), 400, Some("invalid_argument"))
                .field("target"),
            case(
                "POST",
                "/v1/relays",
                with(&|r| r["route_by"] = json!("aggregatetype")),
                400,
                Some("invalid_argument"),
            )
            .field("target.queue"),
            case("POST", "/v1/relays", with(&|r| r["table"] = json!("missing")), 400, Some("relay_source_invalid")),
            case(
                "POST",
                "/v1/relays",
                with(&|r| r["columns"] = json!({ "payload": "body" })),
                400,
                Some("relay_source_invalid"),
            ),
            case(
                "POST",
                "/v1/relays",
                with(&|r| r["source"] = json!("sqlite:///nonexistent/dir/app.db")),
                400,
                Some("relay_source_unreachable"),
            ),
            case("POST", "/v1/relays", with(&|r| r["after_publish"] = json!("archive")), 400, Some("invalid_json")),
            case("GET", "/v1/relays/none", Payload::None, 404, Some("relay_not_found")),
            case("POST", "/v1/relays/none/pause", Payload::None, 404, Some("relay_not_found")),
            case("DELETE", "/v1/relays/none", Payload::None, 404, Some("relay_not_found")),
        ],
    )
    .await;
}
