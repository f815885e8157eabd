//! Sagas against the real binary: `sluice saga define|show|start|get|list|cancel` (tables,
//! JSON, exit codes), with the server's own orchestrator sending a queue step's message and a
//! participant answering it through the Rust client's `reply_saga_step`.

mod common;

use std::time::Duration;

use common::Server;
use serde_json::{Value, json};
use sluice_api::SagaReply;

const DEFINITION: &str = r#"{"steps": [
  {"name": "approve", "action": {"queue": {"queue": "approvals", "body": {"order": "{{input.order}}"}}},
   "compensation": {"queue": {"queue": "approvals", "body": {"undo": "{{input.order}}"}}}, "timeout_ms": 600000}
]}"#;

/// Polls `sluice saga get` until the instance's status is `want`.
fn wait_status(server: &Server, id: &str, want: &str) -> Value {
    for _ in 0..300 {
        let got = server.cli(&["saga", "get", id, "--json"]).json();
        if got["status"] == want {
            return got;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("instance {id} never became {want}: {}", server.cli(&["saga", "get", id, "--json"]).json());
}

#[test]
fn saga_commands_define_start_follow_and_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    server.cli(&["queue", "create", "approvals"]).ok();
    let defined =
        server.cli_with_stdin(&["saga", "define", "order", "--file", "-"], DEFINITION.as_bytes()).ok().to_owned();
    assert_eq!(defined.trim(), "saga order defined at version 1 (1 steps)");
    let again =
        server.cli_with_stdin(&["saga", "define", "order", "--file", "-"], DEFINITION.as_bytes()).ok().to_owned();
    assert!(again.contains("unchanged, still at version 1"), "{again}");
    assert_eq!(server.cli(&["saga", "show", "order"]).json()["steps"][0]["name"], "approve");

    let id = server
        .cli(&["saga", "start", "order", "--input", r#"{"order": 7}"#, "--correlation-id", "o-7"])
        .ok()
        .trim()
        .to_owned();
    assert_eq!(id.len(), 36, "the instance id: {id}");
    // The orchestrator sends the step's message; the participant answers it.
    let got = {
        let mut got = Value::Null;
        for _ in 0..300 {
            got = server.cli(&["saga", "get", &id, "--json"]).json();
            if got["steps"][0]["status"] == "running" {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        got
    };
    assert_eq!(got["steps"][0]["status"], "running", "{got}");
    let received = server.cli(&["receive", "approvals", "--json"]).json();
    assert_eq!(received["messages"][0]["body"], r#"{"order":7}"#, "{received}");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let reply = SagaReply {
        correlation_id: "o-7".into(),
        step: "approve".into(),
        ok: true,
        output: json!({ "by": "ops" }),
        ..Default::default()
    };
    let answered = runtime.block_on(server.client().reply_saga_step(&reply)).unwrap();
    assert_eq!(answered.applied, 1);
    let done = wait_status(&server, &id, "completed");
    assert_eq!(done["steps"][0]["output"], json!({ "by": "ops" }));
    let table = server.cli(&["saga", "get", &id]).ok().to_owned();
    let row =
        |key: &str| table.lines().find_map(|l| l.trim_start().strip_prefix(key).map(str::trim)).unwrap_or_default();
    assert_eq!((row("status"), row("saga"), row("correlation id")), ("completed", "order v1", "o-7"), "{table}");
    assert!(table.lines().any(|l| l.split_whitespace().take(3).eq(["approve", "succeeded", "1"])), "{table}");

    // A second instance is cancelled while its step is in flight: with no answer, it waits for
    // the step's deadline, so it is still running, with the cancel requested.
    let second = server.cli(&["saga", "start", "order", "--input", r#"{"order": 8}"#]).ok().trim().to_owned();
    let cancelled = server.cli(&["saga", "cancel", &second, "--json"]).json();
    assert_eq!(cancelled["cancel_requested"], true, "{cancelled}");
    let listed = server.cli(&["saga", "list", "--saga", "order"]).ok().to_owned();
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 3, "{listed}");
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start().starts_with(second.as_str()) && l.contains("running") && l.contains("approve")),
        "{listed}"
    );
    for column in ["ID", "SAGA", "VERSION", "STATUS", "STEP", "STARTED AT", "ERROR"] {
        assert!(lines[0].contains(column), "{listed}");
    }
    assert_eq!(
        server.cli(&["saga", "list", "--status", "completed", "--json"]).json()["instances"][0]["id"],
        id.as_str()
    );
    let refused = server.cli(&["saga", "cancel", &id]).failed().to_owned();
    assert!(refused.contains("(saga_wrong_state)") && refused.contains("sluice saga get"), "{refused}");
    // A body naming what the input lacks cannot be sent: the step fails at once, nothing to undo.
    let empty = server.cli(&["saga", "start", "order"]).ok().trim().to_owned();
    let failed = wait_status(&server, &empty, "compensated");
    assert!(failed["error"].as_str().unwrap_or_default().contains("names nothing"), "{failed}");
    let missing = server.cli(&["saga", "start", "nope"]).failed().to_owned();
    assert!(missing.contains("(saga_not_found)") && missing.contains("sluice saga define"), "{missing}");
}
