//! `sluice serve` as an operator meets it: graceful stops on SIGINT and SIGTERM that keep
//! every acknowledged write, and clear refusals when it cannot start.

mod common;

use common::{Server, run_until_exit, signal};

#[tokio::test]
async fn sigint_stops_gracefully_and_interval_mode_keeps_the_last_batch() {
    let dir = tempfile::tempdir().unwrap();
    // A long interval: only the sync at close can put these writes on disk before exit.
    let server = Server::start_with(dir.path(), &["--durability", "interval:60000"]);
    let client = server.client();
    client.create_queue(&sluice_api::CreateQueueRequest { name: "q".into(), ..Default::default() }).await.unwrap();
    let id = client.send_text("q", "last words").await.unwrap();

    let mut server = server;
    signal(server.pid(), "INT");
    let status = server.wait_exit();
    assert!(status.success(), "SIGINT exits 0: {status:?}\n{}", server.log());
    let log = server.log();
    assert!(log.contains("SIGINT received") && log.contains("stopped"), "{log}");
    drop(server);

    let server = Server::start(dir.path());
    let peeked = server.client().peek("q", None).await.unwrap().messages;
    assert_eq!(peeked.len(), 1, "the write acknowledged before the stop survives");
    assert_eq!((peeked[0].id.as_str(), peeked[0].body.as_deref()), (id.as_str(), Some("last words")));
}

#[test]
fn a_taken_address_is_refused_with_advice() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let addr = server.url.trim_start_matches("http://").to_owned();
    let other = tempfile::tempdir().unwrap();
    let out = run_until_exit(&["serve", "--addr", &addr, "--data-dir", other.path().to_str().unwrap()]);
    let stderr = out.failed();
    assert!(stderr.contains(&format!("address {addr} is already in use")), "{stderr}");
    assert!(stderr.contains("hint:") && stderr.contains("--addr"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing is announced: {out:?}");
}

#[test]
fn an_unusable_data_dir_is_refused_with_advice() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let out = run_until_exit(&["serve", "--addr", "127.0.0.1:0", "--data-dir", file.path().to_str().unwrap()]);
    let stderr = out.failed();
    assert!(stderr.contains("error: ") && stderr.contains("--data-dir"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing is announced: {out:?}");
}

#[test]
fn bad_settings_are_refused_before_starting() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_str().unwrap();
    let out = run_until_exit(&["serve", "--addr", "127.0.0.1:0", "--data-dir", data_dir, "--durability", "sometimes"]);
    assert_eq!(out.code, Some(2), "a usage error: {out:?}");
    assert!(out.stderr.contains("fsync or interval:MS"), "{}", out.stderr);
    let out = run_until_exit(&["serve", "--addr", "127.0.0.1:0", "--data-dir", data_dir, "--log-level", "info,==="]);
    assert!(out.failed().contains("--log-level"), "{out:?}");
}
