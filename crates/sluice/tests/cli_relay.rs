//! `sluice relay ...` as a user runs it, against a real server: the README's orders example
//! on an SQLite database (an order and its `order.placed` row in one transaction, relayed
//! through a routed topic into two queues), then list, get, pause, resume and delete, with
//! their tables, JSON and errors.

mod common;

use common::Server;

#[test]
fn relay_commands_run_the_orders_example() {
    let app = tempfile::tempdir().unwrap();
    let db = app.path().join("shop.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, customer TEXT NOT NULL, total_cents INTEGER NOT NULL);
         CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, aggregatetype TEXT NOT NULL,
             aggregateid TEXT NOT NULL, type TEXT NOT NULL, payload TEXT NOT NULL);
         BEGIN;
         INSERT INTO orders (customer, total_cents) VALUES ('acme', 4200);
         INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
             VALUES ('order', '1', 'order.placed', '{\"order\": 1, \"total_cents\": 4200}');
         COMMIT;",
    )
    .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    for queue in ["billing", "shipping", "orders-dlq"] {
        server.cli(&["queue", "create", queue]).ok();
    }
    server.cli(&["topic", "create", "order-events"]).ok();
    for queue in ["billing", "shipping"] {
        server.cli(&["topic", "subscribe", "order-events", "--queue", queue, "--raw"]).ok();
    }
    let source = format!("sqlite://{}", db.display());
    let create = [
        "relay",
        "create",
        "orders",
        "--source",
        &source,
        "--table",
        "outbox",
        "--topic",
        "${routedByValue}-events",
        "--route-by",
        "aggregatetype",
        "--dlq",
        "orders-dlq",
    ];
    let created = server.cli(&create).ok().to_owned();
    assert!(
        created.starts_with("created relay orders from sqlite://") && created.contains("topic ${routedByValue}-events"),
        "{created}"
    );
    assert!(server.cli(&create).ok().contains("already exists"), "identical create succeeds");

    for queue in ["billing", "shipping"] {
        let got = server.cli(&["receive", queue, "--wait", "10s", "--ack", "--json"]).json();
        let message = &got["messages"][0];
        assert_eq!(message["body"], "{\"order\": 1, \"total_cents\": 4200}", "{got}");
        assert_eq!(message["attributes"]["outbox_id"]["value"], "1");
        assert_eq!(message["attributes"]["outbox_type"]["value"], "order.placed");
    }

    let list = server.cli(&["relay", "list"]).ok().to_owned();
    let lines: Vec<&str> = list.lines().collect();
    for column in ["NAME", "STATE", "SOURCE", "TABLE", "TARGET", "LAG", "PUBLISHED", "ERRORS", "BLOCKED"] {
        assert!(lines[0].contains(column), "{list}");
    }
    assert!(lines[1].trim_start().starts_with("orders") && lines[1].contains("active"), "{list}");
    let got = server.cli(&["relay", "get", "orders", "--json"]).json();
    assert_eq!((got["source_kind"].as_str(), got["route_by"].as_str()), (Some("sqlite"), Some("aggregatetype")));
    let table = server.cli(&["relay", "get", "orders"]).ok().to_owned();
    assert!(table.contains("dead-letter queue  orders-dlq"), "{table}");

    assert_eq!(server.cli(&["relay", "pause", "orders"]).ok(), "paused relay orders\n");
    assert_eq!(server.cli(&["relay", "get", "orders", "--json"]).json()["status"]["state"], "paused");
    assert_eq!(server.cli(&["relay", "resume", "orders"]).ok(), "resumed relay orders\n");
    let conflict =
        server.cli(&["relay", "create", "again", "--source", &source, "--table", "outbox", "--queue", "billing"]);
    let conflict = conflict.failed().to_owned();
    assert!(conflict.contains("(relay_source_in_use)") && conflict.contains("one relay per table"), "{conflict}");
    server.cli(&["relay", "delete", "orders"]).ok();
    assert!(server.cli(&["relay", "get", "orders"]).failed().contains("(relay_not_found)"));

    // The same table into a stream: keyed by the aggregate id, the row id as the dedup id.
    server.cli(&["stream", "create", "order-log", "--partitions", "2"]).ok();
    let stream = ["relay", "create", "log", "--source", &source, "--table", "outbox", "--stream", "order-log"];
    assert!(server.cli(&stream).ok().contains("to stream order-log"), "{}", server.cli(&stream).ok());
    conn.execute_batch(
        "INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', '2', 'order.placed', '{\"order\": 2}');",
    )
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let record = loop {
        let records: Vec<serde_json::Value> = (0..2)
            .flat_map(|p| {
                let out = server
                    .cli(&["stream", "read", "order-log", "--partition", &p.to_string(), "--json"])
                    .ok()
                    .to_owned();
                out.lines().map(|l| serde_json::from_str(l).unwrap()).collect::<Vec<_>>()
            })
            .collect();
        if let Some(first) = records.into_iter().next() {
            break first;
        }
        assert!(std::time::Instant::now() < deadline, "the row never reached the stream");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!((record["key"].as_str(), record["type"].as_str()), (Some("2"), Some("order.placed")), "{record}");
    assert_eq!(record["body"], "{\"order\": 2}");
    server.cli(&["relay", "delete", "log"]).ok();
    assert!(server.cli(&["relay", "list"]).stderr.contains("no relays"));
}
