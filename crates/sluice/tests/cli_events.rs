//! `sluice events ...` as a user runs it, against a real server: appends with expected
//! versions (a conflict fails with the actual version), reads forward and backward, `$all` with
//! filters, and a durable subscription that checkpoints what it printed; tables and JSON.

mod common;

use common::Server;

#[test]
fn events_commands_append_read_and_subscribe() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let placed = server
        .cli(&[
            "events",
            "append",
            "order-1",
            "OrderPlaced",
            "{\"total\": 42}",
            "--expected-version",
            "no_stream",
            "--json",
        ])
        .json();
    assert_eq!((placed["last_version"].as_u64(), placed["last_position"].as_u64()), (Some(0), Some(0)));
    let table =
        server.cli(&["events", "append", "order-1", "OrderShipped", "{}", "--expected-version", "0"]).ok().to_owned();
    assert!(table.contains("version") && table.contains('1'), "{table}");
    let refused = server
        .cli(&["events", "append", "order-1", "OrderCancelled", "{}", "--expected-version", "0"])
        .failed()
        .to_owned();
    assert!(refused.contains("order-1 is at version 1, not 0; nothing was appended"), "{refused}");
    let bad = server.cli(&["events", "append", "order-1", "X", "not json"]).failed().to_owned();
    assert!(bad.contains("is not JSON"), "{bad}");
    server.cli(&["events", "append", "user-7", "UserJoined", "{\"n\": 1}", "--correlation-id", "req-1"]).ok();

    let read = server.cli(&["events", "read", "order-1"]).ok().to_owned();
    let lines: Vec<&str> = read.lines().collect();
    assert!(lines[0].trim_start().starts_with("POSITION") && lines[0].contains("TYPE"), "{read}");
    assert!(lines[1].contains("OrderPlaced") && lines[2].contains("OrderShipped"), "{read}");
    let latest = server.cli(&["events", "read", "order-1", "--backward", "--max", "1", "--json"]).json();
    assert_eq!(latest["events"][0]["type"], "OrderShipped");
    assert_eq!(latest["last_version"], 1);
    let missing = server.cli(&["events", "read", "nope"]).failed().to_owned();
    assert!(missing.contains("event_stream_not_found"), "{missing}");

    let all = server.cli(&["events", "all", "--json"]).json();
    assert_eq!(all["events"].as_array().unwrap().len(), 3);
    let users = server.cli(&["events", "all", "--stream-prefix", "user-", "--json"]).json();
    assert_eq!(users["events"][0]["correlation_id"], "req-1");
    let typed = server.cli(&["events", "all", "--types", "OrderPlaced,UserJoined"]).ok().to_owned();
    assert!(
        typed.contains("OrderPlaced") && typed.contains("UserJoined") && !typed.contains("OrderShipped"),
        "{typed}"
    );

    let first = server.cli(&["events", "subscribe", "billing", "--max", "2", "--json"]).json();
    assert_eq!(first["events"].as_array().unwrap().len(), 2);
    let rest = server.cli(&["events", "subscribe", "billing", "--json"]).json();
    let ids: Vec<u64> = rest["events"].as_array().unwrap().iter().map(|e| e["position"].as_u64().unwrap()).collect();
    assert_eq!(ids, [2], "a subscription goes on after its checkpoint");
    let peek = server.cli(&["events", "subscribe", "audit", "--from", "1", "--no-checkpoint", "--json"]).json();
    assert_eq!(peek["events"].as_array().unwrap().len(), 2);
    let again = server.cli(&["events", "subscribe", "audit", "--from", "1", "--json"]).json();
    assert_eq!(again["events"].as_array().unwrap().len(), 2, "--no-checkpoint left the checkpoint where it was");
    let help = server.cli(&["events", "append", "--help"]).ok().to_owned();
    assert!(help.contains("--expected-version") && help.contains("Examples:"), "{help}");
}
