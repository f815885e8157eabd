//! The CLI commands run as a user would run them, against a real server: their output, their
//! JSON and their exit codes.

mod common;

use common::{Server, run_cli};
use serde_json::{Value, json};
use sluice_api::{NackEntry, NackRequest};

fn names(list: &Value) -> Vec<&str> {
    list["queues"].as_array().unwrap().iter().map(|q| q["name"].as_str().unwrap()).collect()
}

#[test]
fn queue_commands_manage_queues() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());

    assert_eq!(server.cli(&["queue", "create", "jobs-dlq"]).ok(), "created queue jobs-dlq\n");
    let create = [
        "queue",
        "create",
        "jobs",
        "--visibility-timeout",
        "1m",
        "--retention",
        "2d",
        "--receive-wait",
        "5s",
        "--message-bytes-max",
        "2048",
        "--dlq",
        "jobs-dlq",
        "--max-receive-count",
        "3",
        "--tag",
        "team=core",
    ];
    assert_eq!(server.cli(&create).ok(), "created queue jobs\n");
    assert!(server.cli(&create).ok().contains("already exists"), "identical create succeeds");
    let conflict = server.cli(&["queue", "create", "jobs"]).failed().to_owned();
    assert!(conflict.contains("(queue_exists)") && conflict.contains("sluice queue get"), "{conflict}");
    let half_policy = server.cli(&["queue", "create", "x", "--dlq", "jobs-dlq"]).failed().to_owned();
    assert!(half_policy.contains("--max-receive-count"), "{half_policy}");

    let got = server.cli(&["queue", "get", "jobs", "--json"]).json();
    assert_eq!(got["visibility_timeout_ms"], 60_000);
    assert_eq!(got["retention_ms"], 2 * 24 * 3600 * 1000);
    assert_eq!(got["receive_wait_ms"], 5_000);
    assert_eq!(got["message_bytes_max"], 2048);
    assert_eq!(got["dead_letter"]["queue"], "jobs-dlq");
    assert_eq!(got["dead_letter"]["max_receive_count"], 3);
    assert_eq!(got["tags"]["team"], "core");
    let table = server.cli(&["queue", "get", "jobs"]).ok().to_owned();
    assert!(table.contains("visibility timeout  1m"), "{table}");
    assert!(table.contains("jobs-dlq after 3 receives"), "{table}");

    assert_eq!(names(&server.cli(&["queue", "list", "--json"]).json()), ["jobs", "jobs-dlq"]);
    assert_eq!(names(&server.cli(&["queue", "list", "--prefix", "jobs-", "--json"]).json()), ["jobs-dlq"]);
    let listed = server.cli(&["queue", "list"]).ok().to_owned();
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 3, "{listed}");
    for column in ["NAME", "VISIBLE", "IN FLIGHT", "DELAYED", "OLDEST AGE", "DLQ DEPTH", "MAX DEPTH", "REFUSED"] {
        assert!(lines[0].contains(column), "{listed}");
    }
    assert_eq!(lines[1].split_whitespace().collect::<Vec<_>>(), ["jobs", "0", "0", "0", "-", "0", "-", "0"]);
    assert_eq!(lines[2].split_whitespace().collect::<Vec<_>>(), ["jobs-dlq", "0", "0", "0", "-", "-", "-", "0"]);

    // Changing only the count keeps the dead-letter queue.
    let updated = server.cli(&["queue", "update", "jobs", "--max-receive-count", "7", "--json"]).json();
    assert_eq!(updated["dead_letter"]["queue"], "jobs-dlq");
    assert_eq!(updated["dead_letter"]["max_receive_count"], 7);
    let updated = server.cli(&["queue", "update", "jobs", "--visibility-timeout", "5m", "--no-dlq", "--json"]).json();
    assert_eq!(updated["visibility_timeout_ms"], 300_000);
    assert_eq!(updated["dead_letter"], Value::Null);
    assert!(server.cli(&["queue", "update", "jobs"]).failed().contains("nothing to change"));

    server.cli(&["send", "jobs", "a"]).ok();
    server.cli(&["send", "jobs", "b"]).ok();
    assert_eq!(server.cli(&["queue", "purge", "jobs"]).ok(), "purged 2 messages from jobs\n");
    assert_eq!(server.cli(&["queue", "get", "jobs", "--json"]).json()["counts"]["visible"], 0);

    assert_eq!(server.cli(&["queue", "delete", "jobs"]).ok(), "deleted queue jobs\n");
    let gone = server.cli(&["queue", "get", "jobs"]).failed().to_owned();
    assert!(gone.starts_with("error: ") && gone.contains("(queue_not_found)"), "{gone}");
    assert!(gone.contains("hint: list queues with `sluice queue list`"), "{gone}");
}

#[test]
fn send_receive_ack_and_peek() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    server.cli(&["queue", "create", "inbox"]).ok();

    let one =
        server.cli(&["send", "inbox", "hello", "--priority", "5", "--attr", "kind=String:greeting", "--type", "greet"]);
    let ids: Vec<&str> = one.ok().lines().collect();
    assert_eq!(ids.len(), 1, "one id per message: {one:?}");
    assert!(ids[0].len() >= 16 && !ids[0].contains(' '), "{ids:?}");
    let lines = server.cli_with_stdin(&["send", "inbox", "--stdin", "--lines"], b"a\n\nb\r\nc\n");
    assert_eq!(lines.ok().lines().count(), 3, "blank lines are skipped: {lines:?}");
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), [0u8, 159, 146, 150, 255]).unwrap();
    server.cli(&["send", "inbox", "--file", file.path().to_str().unwrap()]).ok();
    assert!(server.cli(&["send", "inbox"]).failed().contains("--stdin"), "no body is explained");

    let peeked = server.cli(&["peek", "inbox", "--json"]).json();
    assert_eq!(peeked["messages"].as_array().unwrap().len(), 5);
    let table = server.cli(&["peek", "inbox"]).ok().to_owned();
    assert!(table.contains("STATE") && table.contains("hello") && table.contains("<5 bytes binary>"), "{table}");

    let received = server.cli(&["receive", "inbox", "--max", "10", "--ack", "--json"]).json();
    let messages = received["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 5);
    assert_eq!(messages[0]["body"], "hello", "priority 5 first");
    assert_eq!(messages[0]["id"], ids[0]);
    assert_eq!(messages[0]["attributes"]["kind"]["value"], "greeting");
    assert_eq!(messages[0]["type"], "greet");
    let bodies: Vec<&str> = messages[1..].iter().filter_map(|m| m["body"].as_str()).collect();
    assert_eq!(bodies, ["a", "b", "c"]);
    assert_eq!(messages[4]["body_base64"], "AJ+Slv8=", "a non-UTF-8 file is sent as bytes");
    let counts = server.cli(&["queue", "get", "inbox", "--json"]).json()["counts"].clone();
    assert_eq!((counts["visible"].as_u64(), counts["in_flight"].as_u64()), (Some(0), Some(0)), "--ack acked: {counts}");

    // Receive without acking, then ack by receipt.
    server.cli(&["send", "inbox", "later"]).ok();
    let table = server.cli(&["receive", "inbox"]).ok().to_owned();
    assert!(table.contains("RECEIPT") && table.contains("later"), "{table}");
    let receipt = table.lines().nth(1).unwrap().split_whitespace().last().unwrap().to_owned();
    assert_eq!(server.cli(&["ack", "inbox", &receipt]).ok(), "acked 1 messages\n");
    let stale = server.cli(&["ack", "inbox", &receipt]).failed().to_owned();
    assert!(stale.contains("(stale_receipt)") && stale.contains("1 of 1 receipts were not acked"), "{stale}");
    assert!(server.cli(&["receive", "inbox", "--wait", "100ms"]).stderr.contains("no messages"));
}

#[test]
fn send_with_an_idempotency_key_sends_once_however_often_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    server.cli(&["queue", "create", "orders"]).ok();
    let first = server.cli(&["send", "orders", "charge 42", "--idempotency-key", "order-42"]).ok().to_owned();
    let again = server.cli(&["send", "orders", "charge 42", "--idempotency-key", "order-42"]).ok().to_owned();
    assert_eq!(first, again, "the rerun prints the first run's id");
    let lines = ["send", "orders", "--stdin", "--lines", "--idempotency-key", "import-7"];
    let batch = server.cli_with_stdin(&lines, b"a\nb\n").ok().to_owned();
    assert_eq!(server.cli_with_stdin(&lines, b"a\nb\n").ok(), batch);
    let counts = server.cli(&["queue", "get", "orders", "--json"]).json()["counts"].clone();
    assert_eq!(counts["visible"].as_u64(), Some(3), "one message and one batch of two: {counts}");
    let other = server.cli(&["send", "orders", "charge 43", "--idempotency-key", "order-42"]).failed().to_owned();
    assert!(other.contains("idempotency_key_mismatch"), "{other}");
    let bad = server.cli(&["send", "orders", "x", "--idempotency-key", "with space"]).failed().to_owned();
    assert!(bad.contains("idempotency_key_invalid"), "{bad}");
}

#[test]
fn per_entry_errors_are_reported_and_fail_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    server.cli(&["queue", "create", "small", "--message-bytes-max", "1024"]).ok();
    let long = "x".repeat(2000);
    let input = format!("fits\n{long}\nfits too\n");
    let out = server.cli_with_stdin(&["send", "small", "--stdin", "--lines"], input.as_bytes());
    let stderr = out.failed();
    assert!(stderr.contains("error: line 2: ") && stderr.contains("(message_too_large)"), "{stderr}");
    assert!(stderr.contains("1 of 3 messages were not sent"), "{stderr}");
    assert_eq!(out.stdout.lines().count(), 2, "the others were sent and their ids printed: {out:?}");
    assert_eq!(server.cli(&["queue", "get", "small", "--json"]).json()["counts"]["visible"], 2);
}

#[test]
fn errors_name_the_code_and_what_to_do_next() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let missing = server.cli(&["send", "nowhere", "hi"]);
    let stderr = missing.failed();
    assert!(stderr.starts_with("error: ") && stderr.contains("(queue_not_found)"), "{stderr}");
    assert!(stderr.contains("sluice queue list"), "{stderr}");
    assert!(server.cli(&["receive", "nowhere"]).failed().contains("(queue_not_found)"));
    assert!(server.cli(&["dlq", "status", "nope"]).failed().contains("(redrive_not_found)"));

    let refused = run_cli(&["queue", "list"], Some("http://127.0.0.1:1"), None);
    let stderr = refused.failed();
    assert!(stderr.contains("cannot connect") && stderr.contains("start it with `sluice serve`"), "{stderr}");
    let bad_url = run_cli(&["queue", "list"], Some("localhost:9324"), None);
    assert!(bad_url.failed().contains("http://127.0.0.1:9324"), "{bad_url:?}");
}

#[tokio::test]
async fn dlq_redrive_status_and_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    server.cli(&["queue", "create", "work-dlq"]).ok();
    server.cli(&["queue", "create", "work", "--dlq", "work-dlq", "--max-receive-count", "1"]).ok();
    server.cli(&["send", "work", "poison"]).ok();
    // The CLI has no nack: fail the message through the client.
    let client = server.client();
    let got = client.receive("work", 1, 0).await.unwrap();
    let nack = NackRequest {
        entries: vec![NackEntry {
            receipt: got[0].receipt.clone().unwrap(),
            delay_ms: None,
            error: Some("boom".into()),
        }],
    };
    assert!(client.nack("work", &nack).await.unwrap().results[0].ok);
    let dead = server.cli(&["peek", "work-dlq"]).ok().to_owned();
    assert!(dead.contains("FROM") && dead.contains("boom"), "dead-letter columns appear: {dead}");

    let task = server.cli(&["dlq", "redrive", "work-dlq", "--rate", "100", "--json"]).json();
    assert_eq!(task["status"], "completed");
    assert_eq!((task["moved"].as_u64(), task["total"].as_u64()), (Some(1), Some(1)));
    let id = task["id"].as_str().unwrap();
    assert_eq!(server.cli(&["peek", "work", "--json"]).json()["messages"][0]["body"], "poison");

    let all = server.cli(&["dlq", "status", "--json"]).json();
    assert_eq!(all["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(server.cli(&["dlq", "status", "--queue", "work-dlq", "--json"]).json()["tasks"][0]["id"], id);
    let one = server.cli(&["dlq", "status", id]).ok().to_owned();
    assert!(one.contains("completed") && one.contains("1 of 1"), "{one}");
    assert_eq!(server.cli(&["dlq", "cancel", id, "--json"]).json()["id"], id);
    let plain = server.cli(&["dlq", "redrive", "work-dlq"]).ok().to_owned();
    assert_eq!(plain, "moved 0 messages from work-dlq to their source queues\n");

    // --no-wait returns the started task at once.
    let started = server.cli(&["dlq", "redrive", "work-dlq", "--no-wait", "--json"]).json();
    assert_eq!(started["source"], "work-dlq");
}

#[test]
fn every_command_explains_itself_with_an_example() {
    let commands: &[&[&str]] = &[
        &[],
        &["serve"],
        &["queue"],
        &["queue", "create"],
        &["queue", "list"],
        &["queue", "get"],
        &["queue", "update"],
        &["queue", "delete"],
        &["queue", "purge"],
        &["send"],
        &["receive"],
        &["ack"],
        &["peek"],
        &["dlq"],
        &["dlq", "redrive"],
        &["dlq", "status"],
        &["dlq", "cancel"],
        &["alert"],
        &["alert", "create"],
        &["alert", "list"],
        &["alert", "get"],
        &["alert", "delete"],
        &["alert", "firing"],
        &["topic", "update"],
        &["schema"],
        &["schema", "register"],
        &["schema", "list"],
        &["schema", "get"],
        &["schema", "check"],
        &["schema", "config"],
    ];
    for command in commands {
        let mut args = command.to_vec();
        args.push("--help");
        let help = run_cli(&args, None, None);
        let stdout = help.ok();
        assert!(stdout.contains("Example"), "`sluice {}` has an example:\n{stdout}", args.join(" "));
        assert!(stdout.lines().next().is_some_and(|l| !l.trim().is_empty()), "a summary line: {stdout}");
    }
}

#[tokio::test]
async fn queue_list_follows_next_token_across_pages() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let client = server.client();
    // More than the server's default page of 100.
    let mut expected: Vec<String> = (0..105).map(|i| format!("q{i:03}")).collect();
    for name in &expected {
        client
            .create_queue(&sluice_api::CreateQueueRequest { name: name.clone(), ..Default::default() })
            .await
            .unwrap();
    }
    expected.sort();
    let first_page = client.list_queues(None, None, None).await.unwrap();
    assert!(first_page.next_token.is_some() && first_page.queues.len() < 105, "the server pages");
    assert_eq!(client.list_all_queues(None).await.unwrap().len(), 105);

    let listed = server.cli(&["queue", "list", "--json"]).json();
    assert_eq!(names(&listed), expected);
    assert!(listed.get("next_token").is_none(), "all pages were followed: {listed}");
    assert_eq!(server.cli(&["queue", "list"]).ok().lines().count(), 106, "a header and one row per queue");
}

#[test]
fn topic_commands_fan_out_into_queues() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    server.cli(&["queue", "create", "billing"]).ok();
    server.cli(&["queue", "create", "audit"]).ok();
    assert!(server.cli(&["topic", "create", "orders", "--tag", "team=core"]).ok().starts_with("created topic orders"));
    assert!(server.cli(&["topic", "create", "orders"]).ok().contains("already exists"));
    let fifo = server.cli(&["topic", "create", "steps.fifo", "--content-based-dedup", "--json"]).json();
    assert_eq!(fifo["fifo"], true);

    let subscribed = server.cli(&["topic", "subscribe", "orders", "--queue", "billing", "--raw"]).ok().to_owned();
    assert!(subscribed.starts_with("subscribed arn:aws:sqs:"), "{subscribed}");
    let filtered =
        ["topic", "subscribe", "orders", "--queue", "audit", "--filter-policy", r#"{"kind": ["created"]}"#, "--json"];
    let audit = server.cli(&filtered).json();
    assert_eq!(audit["filter_policy"]["kind"][0], "created");
    let bad = server.cli(&["topic", "subscribe", "orders", "--queue", "x", "--filter-policy", "{"]).failed().to_owned();
    assert!(bad.contains("--filter-policy is not JSON"), "{bad}");

    let published =
        server.cli(&["topic", "publish", "orders", "hello", "--attr", "kind=String:created"]).ok().to_owned();
    assert!(published.trim_end().ends_with("to 2 subscriptions"), "{published}");
    server.cli(&["topic", "publish", "orders", "bye"]).ok();
    let received = server.cli(&["receive", "billing", "--max", "10", "--json"]).json();
    assert_eq!(received["messages"].as_array().unwrap().len(), 2);
    assert_eq!(received["messages"][0]["body"], "hello");
    let audit_got = server.cli(&["receive", "audit", "--max", "10", "--json"]).json();
    let envelope: Value = serde_json::from_str(audit_got["messages"][0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        (envelope["Message"].clone(), audit_got["messages"].as_array().unwrap().len()),
        (Value::from("hello"), 1)
    );

    let table = server.cli(&["topic", "subscriptions", "orders"]).ok().to_owned();
    assert_eq!(table.lines().count(), 3, "{table}");
    assert!(table.contains("confirmed") && table.contains(r#"{"kind":["created"]}"#), "{table}");
    let listed = server.cli(&["topic", "list", "--json"]).json();
    assert_eq!(listed["topics"].as_array().unwrap().len(), 2);
    let got = server.cli(&["topic", "get", "orders"]).ok().to_owned();
    assert!(got.contains("team=core"), "{got}");
    let limited = server.cli(&["topic", "update", "orders", "--rate-limit", "1/1"]).ok().to_owned();
    assert!(
        limited.lines().any(|l| l.trim_start().starts_with("rate limit") && l.ends_with("1/s, burst 1")),
        "{limited}"
    );
    server.cli(&["topic", "publish", "orders", "within the limit"]).ok();
    let refused = server.cli(&["topic", "publish", "orders", "past it"]).failed().to_owned();
    assert!(refused.contains("rate_limited"), "{refused}");
    let unlimited = server.cli(&["topic", "update", "orders", "--rate-limit", "none", "--json"]).json();
    assert!(unlimited.get("rate_limit").is_none(), "{unlimited}");
    server.cli(&["receive", "billing", "--max", "10"]).ok();

    let missing = server.cli(&["topic", "publish", "nope", "x"]).failed().to_owned();
    assert!(missing.contains("(topic_not_found)") && missing.contains("sluice topic list"), "{missing}");
    let no_group = server.cli(&["topic", "publish", "steps.fifo", "x"]).failed().to_owned();
    assert!(no_group.contains("group_id"), "{no_group}");
    assert!(server.cli(&["topic", "publish", "steps.fifo", "x", "--group", "g"]).ok().contains("(sequence "));

    let id = audit["id"].as_str().unwrap();
    assert_eq!(
        server.cli(&["topic", "unsubscribe", "orders", id]).ok(),
        format!("removed subscription {id} of orders\n")
    );
    assert!(server.cli(&["topic", "unsubscribe", "orders", id]).failed().contains("subscription_not_found"));
    assert!(server.cli(&["topic", "delete", "orders"]).ok().starts_with("deleted topic orders"));
    assert!(server.cli(&["topic", "delete", "orders"]).failed().contains("topic_not_found"));
}

#[test]
fn schema_commands_register_check_and_enforce() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let v1 = dir.path().join("order.v1.json");
    std::fs::write(
        &v1,
        r#"{"type": "object", "properties": {"id": {"type": "string"}, "total": {"type": "integer", "minimum": 0}}, "required": ["id", "total"]}"#,
    )
    .unwrap();
    let v2 = dir.path().join("order.v2.json");
    std::fs::write(
        &v2,
        r#"{"type": "object", "properties": {"id": {"type": "string"}, "total": {"type": "integer", "minimum": 0}, "note": {"type": "string"}}, "required": ["id", "total", "note"]}"#,
    )
    .unwrap();
    let (v1, v2) = (v1.to_str().unwrap(), v2.to_str().unwrap());

    let no_schemas = server.cli(&["schema", "list"]);
    assert!(no_schemas.ok().is_empty() && no_schemas.stderr.contains("sluice schema register"), "{no_schemas:?}");
    assert_eq!(server.cli(&["schema", "register", "order", "--file", v1]).ok(), "registered order version 1\n");
    assert!(server.cli(&["schema", "register", "order", "--file", v1]).ok().contains("already this schema"));
    assert_eq!(server.cli(&["schema", "register", "order", "--file", v1, "--json"]).json()["version"], 1);

    // A new required property breaks backward compatibility: the check says why and fails,
    // and so does the registration, with the reasons and what to do.
    let checked = server.cli(&["schema", "check", "order", "--file", v2]);
    let stderr = checked.failed();
    assert!(checked.stdout.contains("required_added") && checked.stdout.contains("/required"), "{checked:?}");
    assert!(stderr.contains("not compatible") && stderr.contains("--compatibility none"), "{stderr}");
    let refused = server.cli(&["schema", "register", "order", "--file", v2]).failed().to_owned();
    assert!(refused.contains("(schema_incompatible)"), "{refused}");
    assert!(refused.contains("version 1 (backward): required_added at /required"), "{refused}");
    assert!(refused.contains("hint: "), "{refused}");
    let not_json = dir.path().join("broken.json");
    std::fs::write(&not_json, "{").unwrap();
    assert!(
        server
            .cli(&["schema", "register", "order", "--file", not_json.to_str().unwrap()])
            .failed()
            .contains("is not JSON")
    );

    let configured = server.cli(&["schema", "config", "order", "--compatibility", "none"]).ok().to_owned();
    assert_eq!(configured, "order: new versions are checked as none\n");
    assert!(
        server.cli(&["schema", "config", "order", "--compatibility", "sideways"]).code == Some(2),
        "clap refuses it"
    );
    assert_eq!(server.cli(&["schema", "register", "order", "--file", v2]).ok(), "registered order version 2\n");
    let listed = server.cli(&["schema", "list"]).ok().to_owned();
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["TYPE", "LATEST", "COMPATIBILITY", "UPDATED", "AT"]);
    assert_eq!(lines[1].split_whitespace().take(3).collect::<Vec<_>>(), ["order", "2", "none"]);
    let ty = server.cli(&["schema", "get", "order", "--json"]).json();
    assert_eq!((ty["versions"].clone(), ty["compatibility"].clone()), (serde_json::json!([1, 2]), Value::from("none")));
    assert!(server.cli(&["schema", "get", "order"]).ok().contains("versions        1, 2"));
    let first = server.cli(&["schema", "get", "order", "--version", "1", "--json"]).json();
    assert_eq!(first["schema"]["required"], serde_json::json!(["id", "total"]));
    let latest = server.cli(&["schema", "get", "order", "--version", "latest"]).ok().to_owned();
    assert!(latest.contains("version     2") && latest.contains("\"note\""), "{latest}");
    assert!(server.cli(&["schema", "get", "nope"]).failed().contains("(schema_not_found)"));

    let valid = server.cli(&["schema", "check", "order", "--body", r#"{"id": "o-1", "total": 5}"#, "--version", "1"]);
    assert_eq!(valid.ok(), "valid: the body passes order version 1\n");
    let invalid = server.cli(&["schema", "check", "order", "--body", r#"{"id": "o-1", "total": -5}"#, "--json"]);
    assert_eq!(invalid.code, Some(1));
    let answer: Value = serde_json::from_str(&invalid.stdout).unwrap();
    assert_eq!((answer["valid"].clone(), answer["version"].clone()), (Value::from(false), Value::from(2)));
    assert!(invalid.stderr.contains("breaks order version 2"), "{invalid:?}");

    // Enforced at the door of a queue and a topic with validation on.
    server.cli(&["queue", "create", "orders", "--schema-validation", "true"]).ok();
    assert!(
        server.cli(&["send", "orders", r#"{"id": "o-1", "total": 1}"#, "--type", "order", "--version", "1"]).code
            == Some(0)
    );
    let bad_send =
        server.cli(&["send", "orders", r#"{"id": "o-2", "total": -1}"#, "--type", "order", "--version", "1"]);
    let stderr = bad_send.failed();
    assert!(stderr.contains("(schema_validation_failed)") && stderr.contains("/total"), "{stderr}");
    assert!(server.cli(&["send", "orders", "untyped"]).failed().contains("(schema_validation_failed)"));
    server.cli(&["queue", "create", "copies"]).ok();
    let topic = server.cli(&["topic", "create", "events", "--schema-validation", "true", "--json"]).json();
    assert_eq!(topic["schema_validation"], true);
    server.cli(&["topic", "subscribe", "events", "--queue", "copies", "--raw"]).ok();
    let bad_publish =
        server.cli(&["topic", "publish", "events", r#"{"id": "o-3"}"#, "--type", "order", "--version", "1"]);
    assert!(bad_publish.failed().contains("(schema_validation_failed)"), "{bad_publish:?}");
    let turned_off = server.cli(&["topic", "update", "events", "--schema-validation", "false"]).ok().to_owned();
    assert!(turned_off.contains("schema validation     false"), "{turned_off}");
    assert!(server.cli(&["topic", "publish", "events", "anything"]).ok().contains("to 1 subscriptions"));
    assert!(server.cli(&["topic", "update", "events"]).failed().contains("nothing to change"));
}

#[test]
fn schedule_commands_fire_ticks_into_a_queue() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    server.cli(&["queue", "create", "ticks"]).ok();
    let created = server
        .cli(&["schedule", "create", "pulse", "--every", "300ms", "--queue", "ticks", "--body", "tick"])
        .ok()
        .to_owned();
    assert!(created.starts_with("created schedule pulse; next tick 20"), "{created}");
    let conflict = server.cli(&["schedule", "create", "pulse", "--every", "1s", "--queue", "ticks", "--body", "tick"]);
    let conflict = conflict.failed().to_owned();
    assert!(conflict.contains("(schedule_exists)") && conflict.contains("sluice schedule get"), "{conflict}");
    let bad = server.cli(&["schedule", "create", "bad", "--cron", "61 * * * *", "--queue", "ticks", "--body", "x"]);
    assert!(bad.failed().contains("cron"), "a bad cron expression is refused");

    // Real time: wait for a few ticks to fire.
    let mut fired = 0;
    for _ in 0..100 {
        fired = server.cli(&["schedule", "get", "pulse", "--json"]).json()["fired"].as_u64().unwrap();
        if fired >= 3 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(fired >= 3, "ticks fired: {fired}");
    let received = server.cli(&["receive", "ticks", "--max", "10", "--json"]).json();
    let messages = received["messages"].as_array().unwrap();
    assert!(messages.len() >= 3, "{received}");
    assert!(messages.iter().all(|m| m["body"] == "tick" && m["attributes"]["scheduled_at"]["value"].is_string()));
    assert_eq!(messages[0]["attributes"]["sluice.schedule"]["value"], "pulse");

    let listed = server.cli(&["schedule", "list"]).ok().to_owned();
    assert!(listed.contains("pulse") && listed.contains("every 300ms") && listed.contains("queue ticks"), "{listed}");
    assert!(listed.contains("NEXT FIRE") && listed.contains("active"), "{listed}");
    let paused = server.cli(&["schedule", "pause", "pulse"]).ok().to_owned();
    assert!(paused.contains("paused"), "{paused}");
    let shown = server.cli(&["schedule", "get", "pulse"]).ok().to_owned();
    assert!(shown.contains("recurrence") && shown.contains("every 300ms"), "{shown}");
    assert!(server.cli(&["schedule", "resume", "pulse", "--json"]).json()["status"] == "active");
    assert_eq!(server.cli(&["schedule", "delete", "pulse"]).ok(), "deleted schedule pulse\n");
    // Into a job queue: each tick enqueues one job with the body as its payload.
    let job = [
        "schedule",
        "create",
        "builds",
        "--every",
        "300ms",
        "--job-queue",
        "ci",
        "--job-type",
        "build",
        "--body",
        "{\"ref\":\"main\"}",
    ];
    server.cli(&job).ok();
    assert!(server.cli(&["schedule", "list"]).ok().contains("job ci (build)"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let jobs = server.cli(&["job", "list", "--queue", "ci", "--json"]).json();
        let jobs = jobs["jobs"].as_array().cloned().unwrap_or_default();
        if jobs.len() >= 2 {
            assert!(jobs.iter().all(|j| j["type"] == "build"), "{jobs:?}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the schedule never enqueued two jobs");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    server.cli(&["schedule", "delete", "builds"]).ok();
    assert!(server.cli(&["schedule", "get", "pulse"]).failed().contains("(schedule_not_found)"));
    assert_eq!(server.cli(&["schedule", "list"]).ok(), "", "nothing on stdout; the hint goes to stderr");
}

#[test]
fn alert_commands_manage_rules_and_show_what_fires() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    server.cli(&["queue", "create", "jobs-dlq"]).ok();
    server.cli(&["queue", "create", "jobs", "--dlq", "jobs-dlq", "--max-receive-count", "1"]).ok();

    let create = [
        "alert",
        "create",
        "jobs-late",
        "--kind",
        "oldest-age-above-ms",
        "--target",
        "jobs*",
        "--threshold",
        "60000",
        "--for",
        "30s",
    ];
    let shown = server.cli(&create).ok().to_string();
    assert!(shown.contains("jobs-late") && shown.contains("oldest_age_above_ms") && shown.contains("30s"), "{shown}");
    assert!(server.cli(&create).ok().contains("jobs-late"), "the same again succeeds");
    let other = server.cli(&["alert", "create", "jobs-late", "--kind", "lag-above", "--threshold", "1"]);
    assert!(other.failed().contains("alert_rule_exists"), "{}", other.failed());
    let json = server.cli(&["alert", "get", "jobs-late", "--json"]).json();
    assert_eq!((json["target"].as_str(), json["for_ms"].as_u64()), (Some("jobs*"), Some(30_000)));

    let list = server.cli(&["alert", "list"]).ok().to_string();
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 4, "{list}");
    assert!(lines[0].trim_start().starts_with("NAME"), "{list}");
    assert!(lines[1].trim_start().starts_with("dlq-not-empty (built in)"), "{list}");
    assert!(lines[3].trim_start().starts_with("saga-failed (built in)"), "{list}");
    // Aligned: every column starts where its header does.
    let at = lines[0].find("KIND").unwrap();
    assert!(lines.iter().skip(1).all(|l| l[at..].starts_with(char::is_alphabetic)), "{list}");

    // The built-in rule fires for a dead-letter queue holding a message (evaluated every 5 s).
    server.cli(&["send", "jobs-dlq", "dead"]).ok();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let firing = loop {
        let firing = server.cli(&["alert", "firing", "--json"]).json();
        if !firing["alerts"].as_array().unwrap().is_empty() {
            break firing;
        }
        assert!(std::time::Instant::now() < deadline, "the built-in alert never fired");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(
        (firing["alerts"][0]["rule"].as_str(), firing["alerts"][0]["subject"].as_str()),
        (Some("dlq-not-empty"), Some("jobs-dlq"))
    );
    let table = server.cli(&["alert", "firing"]).ok().to_string();
    assert!(table.trim_start().starts_with("STATUS") && table.contains("firing  dlq-not-empty  jobs-dlq"), "{table}");

    assert_eq!(server.cli(&["alert", "delete", "dlq-not-empty"]).ok(), "deleted alert rule dlq-not-empty\n");
    assert_eq!(server.cli(&["alert", "firing", "--json"]).json()["alerts"], serde_json::json!([]));
    let gone = server.cli(&["alert", "get", "nope"]);
    assert!(gone.failed().contains("sluice alert list"), "the hint names the next command: {}", gone.failed());
}

/// The JSON records `sluice stream read --json` printed, one per line.
fn json_lines(stdout: &str) -> Vec<Value> {
    stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

#[test]
fn stream_commands_append_read_follow_and_manage_groups() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let created = server.cli(&["stream", "create", "orders", "--partitions", "2", "--retention", "1d"]).ok().to_owned();
    assert_eq!(created, "stream orders created (2 partitions)\n");
    assert!(
        server
            .cli(&["stream", "create", "orders", "--partitions", "2", "--retention", "1d"])
            .ok()
            .contains("already exists")
    );
    let conflict = server.cli(&["stream", "create", "orders", "--partitions", "3"]).failed().to_owned();
    assert!(conflict.contains("(stream_exists)") && conflict.contains("sluice stream get"), "{conflict}");

    // Appends: explicit partitions, a key, headers and type, a batch from stdin, a retried dedup id.
    let one = server
        .cli(&[
            "stream",
            "append",
            "orders",
            "first",
            "--partition",
            "0",
            "--header",
            "source=web",
            "--type",
            "order.created",
            "--json",
        ])
        .json();
    assert_eq!((one[0]["partition"].clone(), one[0]["offset"].clone()), (json!(0), json!(0)));
    let batch = server
        .cli_with_stdin(
            &["stream", "append", "orders", "--stdin", "--lines", "--partition", "1", "--json"],
            b"a\nb\nc\n",
        )
        .json();
    let offsets: Vec<u64> = batch.as_array().unwrap().iter().map(|r| r["offset"].as_u64().unwrap()).collect();
    assert_eq!(offsets, [0, 1, 2]);
    let table =
        server.cli(&["stream", "append", "orders", "again", "--partition", "0", "--dedup-id", "d-1"]).ok().to_owned();
    assert!(table.contains("PARTITION") && table.contains("appended"), "{table}");
    let retried =
        server.cli(&["stream", "append", "orders", "again", "--partition", "0", "--dedup-id", "d-1"]).ok().to_owned();
    assert!(retried.contains("duplicate (the original's place)"), "{retried}");
    let refused = server.cli(&["stream", "append", "orders", "x", "--partition", "9"]);
    assert!(refused.failed().contains("1 of 1 records were refused"), "{refused:?}");

    // Reads: from the start, from an offset, as text and JSON; tail.
    let read = json_lines(server.cli(&["stream", "read", "orders", "--partition", "1", "--json"]).ok());
    assert_eq!(read.iter().map(|r| r["body"].as_str().unwrap()).collect::<Vec<_>>(), ["a", "b", "c"]);
    let first = &json_lines(server.cli(&["stream", "read", "orders", "--json"]).ok())[0];
    assert_eq!((first["body"].clone(), first["headers"]["source"].clone()), (json!("first"), json!("web")));
    assert_eq!(first["type"], "order.created");
    let from = json_lines(
        server
            .cli(&["stream", "read", "orders", "--partition", "1", "--from-offset", "1", "--max", "1", "--json"])
            .ok(),
    );
    assert_eq!(
        from.iter().map(|r| r["body"].as_str().unwrap()).collect::<Vec<_>>(),
        ["b", "c"],
        "--max is per request; read goes on to the end"
    );
    let text = server.cli(&["stream", "read", "orders", "--partition", "1"]).ok().to_owned();
    let line: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
    assert_eq!((line[0], line[1], line.last().copied()), ("1", "0", Some("a")), "{text}");
    let tail = json_lines(server.cli(&["stream", "tail", "orders", "--partition", "1", "-n", "2", "--json"]).ok());
    assert_eq!(tail.iter().map(|r| r["offset"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2]);
    let out_of_range = server.cli(&["stream", "read", "nope"]).failed().to_owned();
    assert!(
        out_of_range.contains("(stream_not_found)") && out_of_range.contains("sluice stream list"),
        "{out_of_range}"
    );

    // --follow prints records appended after it started, as they arrive.
    let mut follow = std::process::Command::new(common::sluice_bin())
        .args([
            "stream",
            "read",
            "orders",
            "--partition",
            "1",
            "--from-offset",
            "3",
            "--follow",
            "--json",
            "--server",
            &server.url,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("sluice stream read --follow");
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    let stdout = follow.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    server.cli(&["stream", "append", "orders", "late", "--partition", "1"]).ok();
    let line = lines_rx.recv_timeout(std::time::Duration::from_secs(30)).expect("--follow printed the new record");
    let late: Value = serde_json::from_str(&line).unwrap();
    assert_eq!((late["offset"].clone(), late["body"].clone()), (json!(3), json!("late")));
    follow.kill().unwrap();
    follow.wait().unwrap();

    // Groups: create (offsets and shared), list, get, seek.
    let group = server.cli(&["stream", "group", "create", "orders", "billing", "--json"]).json();
    assert_eq!((group["mode"].clone(), group["lag"].clone()), (json!("offsets"), json!(6)));
    server.cli(&["queue", "create", "orders-dlq"]).ok();
    let shared = [
        "stream",
        "group",
        "create",
        "orders",
        "workers",
        "--mode",
        "shared",
        "--key-ordered",
        "--dlq",
        "orders-dlq",
        "--max-deliveries",
        "3",
        "--ack-timeout",
        "5s",
    ];
    assert!(server.cli(&shared).ok().contains("group workers of stream orders created"));
    let missing_dlq = server.cli(&["stream", "group", "create", "orders", "w2", "--mode", "shared", "--dlq", "nope"]);
    assert!(missing_dlq.failed().contains("nope"), "{missing_dlq:?}");
    let groups = server.cli(&["stream", "group", "list", "orders"]).ok().to_owned();
    assert!(groups.contains("billing") && groups.contains("workers") && groups.contains("shared"), "{groups}");
    let seek = server
        .cli(&["stream", "group", "seek", "orders", "billing", "--partition", "1", "--offset", "2"])
        .ok()
        .to_owned();
    assert_eq!(seek, "group billing now reads partition 1 from offset 2\n");
    let got = server.cli(&["stream", "group", "get", "orders", "billing", "--json"]).json();
    assert_eq!(got["partitions"][1]["committed_offset"], 2);
    assert_eq!(got["partitions"][1]["lag"], 2);
    let shown = server.cli(&["stream", "group", "get", "orders", "billing"]).ok().to_owned();
    assert!(shown.contains("COMMITTED") && shown.contains("LAG"), "{shown}");

    // A key goes where Kafka's default partitioner puts it.
    let keyed = server.cli(&["stream", "append", "orders", "k", "--key", "customer-7", "--json"]).json();
    let kp = sluice_core::stream::partitioner::partition_for_key(b"customer-7", 2);
    assert_eq!(keyed[0]["partition"], kp);

    // The stream with its partitions and groups; the list; delete.
    let view = server.cli(&["stream", "get", "orders", "--json"]).json();
    assert_eq!(view["partition_details"][1]["next_offset"], 4 + u64::from(kp == 1));
    assert_eq!(view["groups"].as_array().unwrap().len(), 2);
    let shown = server.cli(&["stream", "get", "orders"]).ok().to_owned();
    assert!(shown.contains("FIRST OFFSET") && shown.contains("billing"), "{shown}");
    let listed = server.cli(&["stream", "list"]).ok().to_owned();
    let row: Vec<&str> = listed.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["orders", "2", "7"], "{listed}");
    server.cli(&["stream", "update", "orders", "--rate-limit", "1/1"]).ok();
    let shown = server.cli(&["stream", "get", "orders"]).ok().to_owned();
    assert!(shown.lines().any(|l| l.trim_start().starts_with("rate limit") && l.ends_with("1/s, burst 1")), "{shown}");
    server.cli(&["stream", "append", "orders", "within the limit"]).ok();
    assert!(server.cli(&["stream", "append", "orders", "past it"]).failed().contains("rate_limited"));
    assert!(
        server
            .cli(&["stream", "update", "orders", "--rate-limit", "none", "--json"])
            .json()
            .get("rate_limit")
            .is_none()
    );
    // A depth bound at what the stream keeps: the next append is refused, the view says why.
    let kept = server.cli(&["stream", "get", "orders", "--json"]).json()["depth_messages"].as_u64().unwrap();
    server.cli(&["stream", "update", "orders", "--max-depth-messages", &kept.to_string()]).ok();
    let shown = server.cli(&["stream", "get", "orders"]).ok().to_owned();
    let bound = format!("{kept} records");
    assert!(shown.lines().any(|l| l.trim_start().starts_with("depth") && l.contains(&bound)), "{shown}");
    assert!(shown.lines().any(|l| l.trim_start().starts_with("max depth messages")), "{shown}");
    let refused = server.cli(&["stream", "append", "orders", "one too many"]).failed().to_owned();
    assert!(refused.contains("queue_full"), "{refused}");
    let unbounded = server.cli(&["stream", "update", "orders", "--max-depth-messages", "none", "--json"]).json();
    assert!(unbounded.get("max_depth_messages").is_none(), "{unbounded}");
    server.cli(&["stream", "append", "orders", "room again"]).ok();
    assert_eq!(server.cli(&["stream", "delete", "orders"]).ok(), "deleted stream orders\n");
    assert!(server.cli(&["stream", "get", "orders"]).failed().contains("(stream_not_found)"));
    assert_eq!(server.cli(&["stream", "list"]).ok(), "", "nothing on stdout; the hint goes to stderr");
}

#[test]
fn queue_commands_set_and_show_backpressure() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    server.cli(&["queue", "create", "ev-dlq"]).ok();
    let create = [
        "queue",
        "create",
        "ev",
        "--max-depth-messages",
        "2",
        "--overflow",
        "drop-head",
        "--dlq",
        "ev-dlq",
        "--max-receive-count",
        "5",
        "--expired-to-dlq",
        "true",
        "--rate-limit",
        "100/200",
    ];
    assert_eq!(server.cli(&create).ok(), "created queue ev\n");
    let got = server.cli(&["queue", "get", "ev", "--json"]).json();
    assert_eq!(
        (got["max_depth_messages"].as_u64(), got["overflow"].as_str(), got["expired_to_dlq"].as_bool()),
        (Some(2), Some("drop_head"), Some(true))
    );
    assert_eq!(got["rate_limit"], serde_json::json!({"per_second": 100, "burst": 200}));
    // A policy that moves messages needs a dead-letter queue: refused with the field named.
    let refused = server.cli(&["queue", "create", "x", "--max-depth-messages", "1", "--overflow", "reject-to-dlq"]);
    assert!(refused.failed().contains("overflow"), "{refused:?}");

    for body in ["a", "b", "c"] {
        server.cli(&["send", "ev", body]).ok();
    }
    let table = server.cli(&["queue", "get", "ev"]).ok().to_owned();
    assert!(table.contains("overflow") && table.contains("drop-head"), "{table}");
    assert!(table.contains("dropped to dlq      1"), "{table}");
    assert!(table.contains("rate limit") && table.contains("100/s, burst 200"), "{table}");
    let listed = server.cli(&["queue", "list"]).ok().to_owned();
    let ev: Vec<&str> = listed.lines().nth(1).expect("a row").split_whitespace().collect();
    // Name, visible, in flight, delayed, (oldest age), dlq depth, max depth, refused.
    assert_eq!([&ev[..4], &ev[5..]].concat(), ["ev", "2", "0", "0", "1", "2", "1"], "{listed}");

    // `none` removes a bound; then the queue takes everything.
    let updated =
        server.cli(&["queue", "update", "ev", "--max-depth-messages", "none", "--rate-limit", "none", "--json"]).json();
    assert!(updated.get("max_depth_messages").is_none() && updated.get("rate_limit").is_none(), "{updated}");
}
