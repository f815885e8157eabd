//! `sluice key` and authentication against the real binary: a network address refused without
//! a way to authenticate (and let in with `--insecure-no-auth`), the bootstrap admin key from a
//! file, keys made, used within their scopes, listed as an aligned table, and revoked.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{Server, run_until_exit, sluice_bin};

const ADMIN: &str = "admin-key-for-the-cli-test-0123456789";

#[test]
fn serve_refuses_a_network_address_without_authentication_unless_told_it_is_insecure() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let refused = run_until_exit(&["serve", "--addr", "0.0.0.0:0", "--data-dir", data]);
    let stderr = refused.failed();
    assert!(stderr.contains("refusing to listen on 0.0.0.0:") && stderr.contains("without authentication"), "{stderr}");
    assert!(stderr.contains("--admin-key-file") && stderr.contains("--insecure-no-auth"), "says what to do: {stderr}");

    let short = dir.path().join("short");
    std::fs::write(&short, "tooshort\n").unwrap();
    let refused = run_until_exit(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--data-dir",
        data,
        "--admin-key-file",
        short.to_str().unwrap(),
    ]);
    assert!(refused.failed().contains("at least 24"), "{refused:?}");

    let mut child = Command::new(sluice_bin())
        .args(["serve", "--addr", "0.0.0.0:0", "--data-dir", data, "--insecure-no-auth"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(line.starts_with("sluice listening on http://0.0.0.0:"), "{line:?}");
}

#[test]
fn keys_are_made_with_the_admin_key_used_within_their_scopes_and_revoked() {
    let dir = tempfile::tempdir().unwrap();
    let admin_file = dir.path().join("admin-key");
    std::fs::write(&admin_file, format!("  {ADMIN}\n")).unwrap();
    let server = Server::start_with(&dir.path().join("data"), &["--admin-key-file", admin_file.to_str().unwrap()]);

    let refused = server.cli(&["queue", "list"]);
    let stderr = refused.failed();
    assert!(stderr.contains("needs an API key") && stderr.contains("--api-key"), "{stderr}");

    let made = server.cli(&[
        "key",
        "create",
        "--name",
        "ci",
        "--tenant",
        "acme",
        "--scopes",
        "queues:orders-*:send,receive,manage",
        "--api-key",
        ADMIN,
    ]);
    let token = made.ok().trim().to_owned();
    assert!(token.starts_with("slk_"), "the token alone on stdout: {made:?}");
    assert!(made.stderr.contains("shown only now"), "{made:?}");

    // The key's tenant is its namespace: the default tenant's orders-1 is no queue of acme's.
    server.cli(&["queue", "create", "orders-1", "--api-key", ADMIN]).ok();
    assert!(server.cli(&["send", "orders-1", "hello", "--api-key", &token]).failed().contains("not"));
    server.cli(&["queue", "create", "orders-1", "--api-key", &token]).ok();
    server.cli(&["send", "orders-1", "hello", "--api-key", &token]).ok();
    let forbidden = server.cli(&["queue", "create", "billing", "--api-key", &token]);
    let stderr = forbidden.failed();
    assert!(stderr.contains("lacks the scope queues:billing:manage"), "{stderr}");

    let listed = server.cli(&["key", "list", "--api-key", ADMIN]).ok().to_owned();
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 2, "a header and one key:\n{listed}");
    let tenant_at = lines[0].find("TENANT").expect("TENANT column");
    let scopes_at = lines[0].find("SCOPES").expect("SCOPES column");
    assert!(lines[1][tenant_at..].starts_with("acme"), "columns align:\n{listed}");
    assert!(lines[1][scopes_at..].starts_with("queues:orders-*:send,receive,manage"), "columns align:\n{listed}");
    assert!(!listed.contains(&token));
    let id = lines[1].split_whitespace().next().unwrap().to_owned();
    assert!(token.contains(&id), "the id is inside the token");

    let revoked = server.cli(&["key", "revoke", &id, "--api-key", ADMIN]);
    assert!(revoked.ok().contains("revoked"), "{revoked:?}");
    let refused = server.cli(&["send", "orders-1", "again", "--api-key", &token]);
    assert!(refused.failed().contains("revoked"), "{refused:?}");
    let json = server.cli(&["key", "get", &id, "--json", "--api-key", ADMIN]).json();
    assert!(json["revoked_at"].is_string(), "{json}");
}

#[test]
fn tenant_quotas_are_set_in_parts_shown_and_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let admin_file = dir.path().join("admin-key");
    std::fs::write(&admin_file, format!("{ADMIN}\n")).unwrap();
    let server = Server::start_with(&dir.path().join("data"), &["--admin-key-file", admin_file.to_str().unwrap()]);
    let acme = server
        .cli(&["key", "create", "--name", "app", "--tenant", "acme", "--scopes", "queues:*:*", "--api-key", ADMIN])
        .ok()
        .trim()
        .to_owned();

    server.cli(&["tenant", "set", "acme", "--max-resources", "1", "--rate-limit", "100/200", "--api-key", ADMIN]).ok();
    // A second set changes only what it names.
    let shown =
        server.cli(&["tenant", "set", "acme", "--max-stored-bytes", "1000", "--api-key", ADMIN]).ok().to_owned();
    assert!(shown.contains("0 of 1") && shown.contains("0 of 1000") && shown.contains("100/s, burst 200"), "{shown}");

    server.cli(&["queue", "create", "first", "--api-key", &acme]).ok();
    let refused = server.cli(&["queue", "create", "second", "--api-key", &acme]);
    let stderr = refused.failed();
    assert!(stderr.contains("max_resources") && stderr.contains("sluice tenant set"), "says what to do: {stderr}");

    let listed = server.cli(&["tenant", "list", "--api-key", ADMIN]).ok().to_owned();
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 2, "a header and one tenant:\n{listed}");
    let rate_at = lines[0].find("RATE LIMIT").expect("RATE LIMIT column");
    assert!(
        lines[1].trim_start().starts_with("acme") && lines[1][rate_at..].starts_with("100/s"),
        "columns align:\n{listed}"
    );

    server.cli(&["tenant", "set", "acme", "--max-resources", "none", "--api-key", ADMIN]).ok();
    server.cli(&["queue", "create", "second", "--api-key", &acme]).ok();
    server.cli(&["tenant", "delete", "acme", "--api-key", ADMIN]).ok();
    let json = server.cli(&["tenant", "get", "acme", "--json", "--api-key", ADMIN]).json();
    assert_eq!(json["quotas"], serde_json::json!({}), "{json}");
    assert_eq!(json["usage"]["resources"], 2, "{json}");
}
