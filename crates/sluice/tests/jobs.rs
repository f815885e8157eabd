//! Jobs against the real binary: the `sluice job` commands (output, JSON, exit codes), and the
//! Rust client's `Worker` (handlers by type, concurrency, heartbeats that keep a long job's
//! lease, progress, retries by failing, cancellation seen by the handler, shutdown returning
//! the jobs in flight) with `enqueue_job` + `wait_job` on the caller's side.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::Server;
use serde_json::{Value, json};
use sluice_api::EnqueueJobRequest;
use sluice_client::{Client, JobContext, JobFailure, Worker, is_finished};

fn job(queue: &str, job_type: &str, payload: Value) -> EnqueueJobRequest {
    EnqueueJobRequest { queue: queue.into(), job_type: job_type.into(), payload, ..Default::default() }
}

/// A worker that completes every `echo` job of `queue` with its payload, until `stop`.
fn echo_worker(client: Client, queue: &str) -> (tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let worker = Worker::builder(client)
        .queue(queue)
        .handler("echo", |ctx: JobContext| async move { Ok(ctx.job().payload.clone().unwrap_or(Value::Null)) })
        .poll_wait(Duration::from_millis(200))
        .build();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        worker
            .run(async {
                let _ = stopped.await;
            })
            .await;
    });
    (stop, handle)
}

#[test]
fn job_commands_enqueue_show_list_cancel_and_wait() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let enqueue = ["job", "enqueue", "reports", "monthly", "--payload", r#"{"month": "2024-05"}"#, "--tag", "t:1"];
    let id = server.cli(&enqueue).ok().trim().to_owned();
    assert_eq!(id.len(), 36, "the job id: {id}");
    let got = server.cli(&["job", "get", &id, "--json"]).json();
    assert_eq!((got["status"].clone(), got["payload"].clone()), (json!("queued"), json!({ "month": "2024-05" })));
    let table = server.cli(&["job", "get", &id]).ok().to_owned();
    let row =
        |key: &str| table.lines().find_map(|l| l.trim_start().strip_prefix(key).map(str::trim)).unwrap_or_default();
    assert_eq!((row("status"), row("attempts"), row("type")), ("queued", "0 of 3", "monthly"), "{table}");

    let listed = server.cli(&["job", "list"]).ok().to_owned();
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 2, "{listed}");
    for column in ["ID", "QUEUE", "TYPE", "STATUS", "ATTEMPTS", "PRIORITY", "CREATED AT", "ERROR"] {
        assert!(lines[0].contains(column), "{listed}");
    }
    assert_eq!(
        lines[1].split_whitespace().take(6).collect::<Vec<_>>(),
        [id.as_str(), "reports", "monthly", "queued", "0/3", "0"]
    );
    let none = server.cli(&["job", "list", "--status", "dead"]);
    assert_eq!(none.ok(), "", "an empty list prints nothing on stdout");
    assert_eq!(server.cli(&["job", "list", "--tag", "t:1", "--json"]).json()["jobs"][0]["id"], id.as_str());

    let unique = ["job", "enqueue", "reports", "monthly", "--unique-key", "2024-05"];
    let first = server.cli(&unique).ok().trim().to_owned();
    assert_eq!(server.cli(&unique).ok().trim(), first, "the unique key's holder");

    assert_eq!(server.cli(&["job", "cancel", &id, "--json"]).json()["status"], "cancelled");
    let waited = server.cli(&["job", "wait", &id]).failed().to_owned();
    assert!(waited.contains("ended cancelled"), "{waited}");
    let refused = server.cli(&["job", "enqueue", "no spaces", "t"]).failed().to_owned();
    assert!(refused.contains("(invalid_argument)"), "{refused}");
    let missing = server.cli(&["job", "get", "0192f1c3-0000-7000-8000-000000000000"]).failed().to_owned();
    assert!(missing.contains("(job_not_found)") && missing.contains("sluice job list"), "{missing}");

    // `--wait` waits for a worker to finish it and prints the result.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (stop, handle) = runtime.block_on(async { echo_worker(server.client(), "echo") });
    let done = server
        .cli(&["job", "enqueue", "echo", "echo", "--payload", "[1,2]", "--wait", "--timeout", "30s", "--json"])
        .json();
    assert_eq!((done["status"].clone(), done["result"].clone()), (json!("succeeded"), json!([1, 2])));
    let _ = stop.send(());
    runtime.block_on(handle).unwrap();

    // One call counts every queue's jobs by status.
    let stats = server.cli(&["job", "stats", "--json"]).json();
    let counts = |queue: &str| {
        let q = stats["queues"].as_array().unwrap().iter().find(|q| q["queue"] == queue).cloned().unwrap_or_default();
        [&q["queued"], &q["running"], &q["succeeded"], &q["cancelled"], &q["total"]].map(|v| v.as_u64().unwrap_or(99))
    };
    assert_eq!((counts("reports"), counts("echo")), ([1, 0, 0, 1, 2], [0, 0, 1, 0, 1]), "{stats}");
    let table = server.cli(&["job", "stats"]).ok().to_owned();
    let row = table.lines().find(|l| l.trim_start().starts_with("reports")).unwrap_or_default();
    assert_eq!(
        row.split_whitespace().take(8).collect::<Vec<_>>(),
        ["reports", "1", "0", "0", "0", "0", "1", "2"],
        "{table}"
    );
    let secret = server.cli(&["job", "callback-secret"]).ok().trim().to_owned();
    assert_eq!(secret.len(), 64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_runs_handlers_with_heartbeats_progress_retries_and_cancels() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let client = server.client();
    let flaky_calls = Arc::new(AtomicU32::new(0));
    let calls = flaky_calls.clone();
    let worker = Worker::builder(client.clone())
        .queue("w")
        .handler("echo", |ctx: JobContext| async move { Ok(ctx.job().payload.clone().unwrap_or(Value::Null)) })
        .handler("flaky", move |_ctx: JobContext| {
            let calls = calls.clone();
            async move {
                if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    Err(JobFailure::retry("first try fails"))
                } else {
                    Ok(json!("second"))
                }
            }
        })
        // Runs past three leases: only heartbeats keep it.
        .handler("slow", |ctx: JobContext| async move {
            for step in 1..=4 {
                tokio::time::sleep(Duration::from_millis(400)).await;
                ctx.set_progress(json!({ "step": step }));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            Ok(json!("slow done"))
        })
        .handler("stoppable", |ctx: JobContext| async move {
            ctx.cancelled().await;
            Err(JobFailure::retry("stopped on request"))
        })
        .concurrency(4)
        .lease(Duration::from_millis(600))
        .poll_wait(Duration::from_millis(200))
        .shutdown_grace(Duration::from_millis(300))
        .build();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        worker
            .run(async {
                let _ = stopped.await;
            })
            .await
    });

    let enqueue = async |r: EnqueueJobRequest| client.enqueue_job(&r).await.unwrap().job.id;
    let echo = enqueue(job("w", "echo", json!({ "n": 1 }))).await;
    let flaky = enqueue(EnqueueJobRequest {
        backoff: Some(sluice_api::JobBackoff { initial_ms: Some(1), max_ms: Some(1), ..Default::default() }),
        ..job("w", "flaky", Value::Null)
    })
    .await;
    let slow = enqueue(job("w", "slow", Value::Null)).await;
    let stoppable = enqueue(job("w", "stoppable", Value::Null)).await;
    loop {
        if client.get_job(&stoppable, None).await.unwrap().status == "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(client.cancel_job(&stoppable).await.unwrap().cancel_requested);

    let wait = async |id: &str| client.wait_job(id, Duration::from_secs(30)).await.unwrap();
    let e = wait(&echo).await;
    assert_eq!((e.status.as_str(), e.result.clone()), ("succeeded", Some(json!({ "n": 1 }))));
    let f = wait(&flaky).await;
    assert_eq!((f.status.as_str(), f.attempts, f.result.clone()), ("succeeded", 2, Some(json!("second"))));
    let s = wait(&slow).await;
    assert_eq!((s.status.as_str(), s.attempts), ("succeeded", 1), "heartbeats kept the lease: {s:?}");
    assert_eq!(s.progress, Some(json!({ "step": 4 })));
    let c = wait(&stoppable).await;
    assert_eq!(c.status, "cancelled", "{c:?}");

    // Shutdown returns a job still running after the grace.
    let hang = enqueue(job("w", "stoppable", Value::Null)).await;
    loop {
        if client.get_job(&hang, None).await.unwrap().status == "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop.send(());
    let report = running.await.unwrap();
    assert_eq!((report.completed, report.failed, report.returned, report.lost), (3, 2, 1, 0), "{report:?}");
    let returned = client.get_job(&hang, None).await.unwrap();
    assert!(!is_finished(&returned), "returned to its queue for another attempt: {returned:?}");
    assert_eq!(returned.error.as_deref(), Some("worker shut down before the job finished"));
}
