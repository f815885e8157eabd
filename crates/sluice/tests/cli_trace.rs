//! `sluice trace` against the real binary: what `sluice send`, `sluice topic publish` and
//! `sluice job enqueue` wrote with `--correlation-id` and `--causation-id`, as an aligned table
//! with effects indented under their causes, as JSON, and the hint for an id nothing carried.

mod common;

use common::Server;

#[test]
fn trace_lists_what_the_commands_wrote_under_a_correlation_id() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    server.cli(&["queue", "create", "orders"]).ok();
    server.cli(&["topic", "create", "order-events"]).ok();
    let first = server
        .cli(&["send", "orders", "reserve", "--type", "Reserve", "--correlation-id", "o-1"])
        .ok()
        .trim()
        .to_owned();
    let second = server
        .cli(&["send", "orders", "charge", "--correlation-id", "o-1", "--causation-id", &first])
        .ok()
        .trim()
        .to_owned();
    server
        .cli(&["topic", "publish", "order-events", "charged", "--correlation-id", "o-1", "--causation-id", &second])
        .ok();
    let job = server
        .cli(&["job", "enqueue", "mail", "receipt", "--correlation-id", "o-1", "--causation-id", &second])
        .ok()
        .trim()
        .to_owned();
    server.cli(&["send", "orders", "unrelated"]).ok();

    let json = server.cli(&["trace", "o-1", "--json"]).json();
    let entries = json["entries"].as_array().expect("entries");
    let listed: Vec<(&str, u64)> =
        entries.iter().map(|e| (e["kind"].as_str().unwrap(), e["depth"].as_u64().unwrap())).collect();
    assert_eq!(listed, [("message", 0), ("message", 1), ("publish", 2), ("job", 2)], "{json}");
    assert_eq!(entries[0]["id"], first.as_str());
    assert_eq!(entries[3]["id"], job.as_str());

    let table = server.cli(&["trace", "o-1"]).ok().to_owned();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 5, "a header and four entries:\n{table}");
    let kind_at = lines[0].find("KIND").expect("KIND column");
    let id_at = lines[0].find("ID").expect("ID column");
    let target_at = lines[0].find("TARGET").expect("TARGET column");
    for line in &lines[1..] {
        assert!(line[kind_at..].starts_with(['m', 'p', 'j']), "columns align:\n{table}");
        let target = &line[target_at..];
        assert!(["queue:", "topic:", "job:"].iter().any(|t| target.starts_with(t)), "columns align:\n{table}");
    }
    assert!(lines[1][id_at..].starts_with(&first), "{table}");
    assert!(lines[2][id_at..].starts_with(&format!("  {second}")), "an effect sits under its cause:\n{table}");
    assert!(lines[4].contains("job:mail") && lines[4].contains("receipt"), "{table}");

    let empty = server.cli(&["trace", "o-2"]);
    assert_eq!(empty.ok(), "", "nothing on stdout for an id nothing carried");
    assert!(empty.stderr.contains("nothing carried the correlation id \"o-2\""), "{empty:?}");
    let help = common::run_cli(&["trace", "--help"], None, None);
    assert!(help.ok().contains("each after what caused it"), "{help:?}");
}
