//! Prints send and receive+ack rates of the PostgreSQL store beside the embedded store's, at
//! matched durability (both acknowledge after their commit is on disk), through the `Store`
//! trait with no HTTP in between. A benchmark, not a test: it prints figures and asserts
//! nothing but that every message came back.
//!
//!     SLUICE_TEST_PG_URL=postgres://postgres@127.0.0.1:5432/test \
//!         cargo run --release -p sluice-postgres --example throughput [MESSAGES] [CLIENTS]
//!
//! Runs in a fresh schema that it drops at the end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_core::{NewMessage, QueueAttributes};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_postgres::{PostgresOptions, PostgresStore};
use sluice_store::{ReceiveRequest, Store};

const BATCH: usize = 10;
const BODY_BYTES: usize = 256;

struct Rates {
    send_per_s: f64,
    drain_per_s: f64,
}

async fn run(store: Arc<dyn Store>, messages: usize, clients: usize) -> Rates {
    store.create_queue("bench", QueueAttributes::default()).await.expect("create queue");
    let per_client = messages / clients;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut left = per_client;
            while left > 0 {
                let n = left.min(BATCH);
                let batch = (0..n).map(|_| NewMessage { body: vec![b'x'; BODY_BYTES], ..Default::default() }).collect();
                for r in store.send("bench", batch).await.expect("send") {
                    r.expect("accepted");
                }
                left -= n;
            }
        }));
    }
    for t in tasks {
        t.await.expect("producer");
    }
    let send_s = started.elapsed().as_secs_f64();
    let total = per_client * clients;

    let started = Instant::now();
    let received = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (store, received) = (store.clone(), received.clone());
        tasks.push(tokio::spawn(async move {
            let request = ReceiveRequest { max: BATCH as u32, wait_ms: Some(100), visibility_timeout_ms: Some(60_000) };
            let deadline = Instant::now() + Duration::from_secs(300);
            while received.load(std::sync::atomic::Ordering::Relaxed) < total && Instant::now() < deadline {
                let got = store.receive("bench", request).await.expect("receive");
                if got.is_empty() {
                    continue;
                }
                received.fetch_add(got.len(), std::sync::atomic::Ordering::Relaxed);
                let acked = store.ack("bench", got.into_iter().map(|m| m.receipt).collect()).await.expect("ack");
                assert!(acked.iter().all(Result::is_ok), "every ack succeeds");
            }
        }));
    }
    for t in tasks {
        t.await.expect("consumer");
    }
    let drain_s = started.elapsed().as_secs_f64();
    assert_eq!(received.load(std::sync::atomic::Ordering::Relaxed), total, "every message came back");
    Rates { send_per_s: total as f64 / send_s, drain_per_s: total as f64 / drain_s }
}

#[tokio::main]
async fn main() {
    let Ok(url) = std::env::var("SLUICE_TEST_PG_URL") else {
        eprintln!("set SLUICE_TEST_PG_URL (e.g. postgres://postgres@127.0.0.1:5432/test)");
        std::process::exit(2);
    };
    let mut args = std::env::args().skip(1);
    let messages: usize = args.next().map(|a| a.parse().expect("MESSAGES is a number")).unwrap_or(20_000);
    let clients: usize = args.next().map(|a| a.parse().expect("CLIENTS is a number")).unwrap_or(8);

    let dir = tempfile::tempdir().expect("temp dir");
    let embedded: Arc<dyn Store> = Arc::new(
        EmbeddedStore::open(EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync })
            .expect("open the embedded store"),
    );
    let e = run(embedded.clone(), messages, clients).await;
    tokio::task::spawn_blocking(move || drop(embedded)).await.expect("close");

    let schema = format!("sluice_bench_{}", std::process::id());
    let options =
        PostgresOptions { schema: Some(schema.clone()), pool_connections_max: clients + 2, ..Default::default() };
    let postgres: Arc<dyn Store> =
        Arc::new(PostgresStore::connect(&url, options).await.expect("connect to SLUICE_TEST_PG_URL"));
    let p = run(postgres.clone(), messages, clients).await;
    drop(postgres);
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(connection);
    client.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.expect("drop the bench schema");

    println!("{messages} messages of {BODY_BYTES} B, {clients} clients, batches of {BATCH}, durable acknowledgements");
    println!("{:<10} {:>12} {:>18}", "store", "send msg/s", "receive+ack msg/s");
    println!("{:<10} {:>12.0} {:>18.0}", "embedded", e.send_per_s, e.drain_per_s);
    println!("{:<10} {:>12.0} {:>18.0}", "postgres", p.send_per_s, p.drain_per_s);
    println!("{:<10} {:>12.2} {:>18.2}", "pg/emb", p.send_per_s / e.send_per_s, p.drain_per_s / e.drain_per_s);
}
