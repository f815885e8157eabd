//! The outbox relay's figures: for each source database, the database's own insert rate
//! (one-row transactions, as an application writes outbox rows), the rows per second the
//! relay moves from a full table into a queue of the embedded store (fsync mode), and the
//! commit-to-delivery latency (p50, p99) of rows written at a steady rate (500 rows/s, or half
//! the database's insert rate if that is lower, so that the writers keep their pace) while a
//! consumer long-polls the queue. All in one run, on one machine.
//!
//! ```text
//! SLUICE_TEST_PG_URL=postgres://postgres@127.0.0.1:5432/test \
//! SLUICE_TEST_MYSQL_URL=mysql://root@127.0.0.1:3306/test \
//!     cargo run --release -p sluice-services --example relay_bench
//! ```
//!
//! `RELAY_BENCH_ROWS` (default 20000) sets the rows of the throughput run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use sluice_clock::SystemClock;
use sluice_core::QueueAttributes;
use sluice_core::message::AttributeData;
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_services::relays::{AfterPublish, Columns, RelaySpec, Target};
use sluice_services::topics::Arns;
use sluice_services::{Services, ServicesConfig};
use sluice_store::{ReceiveRequest, Store};

/// Writers of the insert-rate and latency runs (SQLite takes one writer at a time).
const WRITERS: usize = 4;
/// Rows per second of the latency run, for this many seconds.
const LATENCY_RATE: u64 = 500;
const LATENCY_SECONDS: u64 = 5;

enum Db {
    Sqlite(String),
    Postgres(String, String),
    Mysql(String, String),
}

impl Db {
    fn name(&self) -> &'static str {
        match self {
            Db::Sqlite(_) => "SQLite",
            Db::Postgres(..) => "PostgreSQL",
            Db::Mysql(..) => "MariaDB",
        }
    }

    fn source(&self) -> (String, String) {
        match self {
            Db::Sqlite(path) => (format!("sqlite://{path}"), "outbox".into()),
            Db::Postgres(url, schema) => (url.clone(), format!("{schema}.outbox")),
            Db::Mysql(url, table) => (url.clone(), table.clone()),
        }
    }

    async fn create(&self) {
        match self {
            Db::Sqlite(path) => {
                let c = rusqlite::Connection::open(path).expect("sqlite");
                c.execute_batch("PRAGMA journal_mode = WAL; DROP TABLE IF EXISTS outbox; CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, aggregatetype TEXT, aggregateid TEXT, type TEXT, payload TEXT)").expect("table");
            }
            Db::Postgres(url, schema) => {
                let c = pg(url).await;
                c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}; CREATE TABLE {schema}.outbox (id bigserial PRIMARY KEY, aggregatetype text, aggregateid text, type text, payload text)")).await.expect("table");
            }
            Db::Mysql(url, table) => {
                let mut c = my(url).await;
                c.query_drop(format!("DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id BIGINT AUTO_INCREMENT PRIMARY KEY, aggregatetype VARCHAR(64), aggregateid VARCHAR(64), type VARCHAR(64), payload TEXT) ENGINE=InnoDB")).await.expect("table");
            }
        }
    }

    /// A writer: inserts `rows` one-row transactions, calling `done(id)` after each commit.
    async fn write(&self, writer: usize, rows: u64, pace: Option<Duration>, done: &(dyn Fn(String) + Sync)) {
        let insert = |n: u64| (format!("agg-{writer}-{}", n % 16), format!("{{\"writer\":{writer},\"n\":{n}}}"));
        let started = Instant::now();
        let wait = |n: u64| async move {
            if let Some(p) = pace {
                let due = started + p * n as u32;
                tokio::time::sleep_until(due.into()).await;
            }
        };
        match self {
            Db::Sqlite(path) => {
                let c = rusqlite::Connection::open(path).expect("sqlite");
                c.busy_timeout(Duration::from_secs(30)).expect("busy");
                for n in 0..rows {
                    wait(n).await;
                    let (a, p) = insert(n);
                    c.execute("INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', ?1, 'order.placed', ?2)", [a, p]).expect("insert");
                    done(c.last_insert_rowid().to_string());
                }
            }
            Db::Postgres(url, schema) => {
                let c = pg(url).await;
                let statement = c.prepare(&format!("INSERT INTO {schema}.outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', $1, 'order.placed', $2) RETURNING id")).await.expect("prepare");
                for n in 0..rows {
                    wait(n).await;
                    let (a, p) = insert(n);
                    let row = c.query_one(&statement, &[&a, &p]).await.expect("insert");
                    done(row.get::<_, i64>(0).to_string());
                }
            }
            Db::Mysql(url, table) => {
                let mut c = my(url).await;
                let sql = format!(
                    "INSERT INTO {table} (aggregatetype, aggregateid, type, payload) VALUES ('order', ?, 'order.placed', ?)"
                );
                for n in 0..rows {
                    wait(n).await;
                    c.exec_drop(&sql, insert(n)).await.expect("insert");
                    done(c.last_insert_id().expect("id").to_string());
                }
            }
        }
    }

    async fn drop_table(&self) {
        match self {
            Db::Sqlite(_) => {}
            Db::Postgres(url, schema) => {
                pg(url).await.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.expect("drop")
            }
            Db::Mysql(url, table) => my(url).await.query_drop(format!("DROP TABLE {table}")).await.expect("drop"),
        }
    }

    fn writers(&self) -> usize {
        if matches!(self, Db::Sqlite(_)) { 1 } else { WRITERS }
    }
}

async fn pg(url: &str) -> tokio_postgres::Client {
    let (c, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("PostgreSQL");
    tokio::spawn(conn);
    c
}

async fn my(url: &str) -> mysql_async::Conn {
    let opts = mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(url).expect("url")).prefer_socket(false);
    mysql_async::Conn::new(opts).await.expect("MySQL")
}

fn services(store: Arc<dyn Store>) -> Arc<Services> {
    let arns = Arns { region: "us-east-1".into(), account: "000000000000".into() };
    Services::new(store, Arc::new(SystemClock), ServicesConfig::new(arns))
}

fn spec(name: &str, db: &Db) -> RelaySpec {
    let (source, table) = db.source();
    RelaySpec {
        name: name.into(),
        source,
        table,
        columns: Columns::default(),
        target: Target::Queue(name.into()),
        route_by: None,
        after_publish: AfterPublish::Delete,
        poll_ms: 10,
        batch_max: 1000,
        dead_letter_queue: None,
    }
}

/// Receives and acks until `count` messages came; each one's receive time by outbox id.
async fn consume(store: &Arc<dyn Store>, queue: &str, count: usize) -> HashMap<String, Instant> {
    let mut seen = HashMap::new();
    while seen.len() < count {
        let request = ReceiveRequest { max: 1000, wait_ms: Some(1000), visibility_timeout_ms: None };
        let got = store.receive(queue, request).await.expect("receive");
        let now = Instant::now();
        let receipts = got.iter().map(|m| m.receipt.clone()).collect::<Vec<_>>();
        for m in &got {
            if let Some(AttributeData::Text(id)) = m.message.content.attributes.get("outbox_id").map(|a| &a.value) {
                seen.entry(id.clone()).or_insert(now);
            }
        }
        if !receipts.is_empty() {
            store.ack(queue, receipts).await.expect("ack");
        }
    }
    seen
}

async fn bench(db: Db, store: &Arc<dyn Store>, services: &Arc<Services>, rows: u64) {
    // 1. The database's own insert rate: one-row transactions from its writers.
    db.create().await;
    let writers = db.writers();
    let per_writer = rows / writers as u64;
    let started = Instant::now();
    let noop = |_: String| {};
    futures::future::join_all((0..writers).map(|w| db.write(w, per_writer, None, &noop))).await;
    let insert_rate = (per_writer * writers as u64) as f64 / started.elapsed().as_secs_f64();

    // 2. The relay on that full table: rows per second into a queue.
    let name = format!("bench-{}", db.name().to_lowercase());
    store.create_queue(&name, QueueAttributes::default()).await.expect("queue");
    let started = Instant::now();
    services.create_relay(spec(&name, &db)).await.expect("relay");
    consume(store, &name, (per_writer * writers as u64) as usize).await;
    let relay_rate = (per_writer * writers as u64) as f64 / started.elapsed().as_secs_f64();

    // 3. Commit to delivery, at a steady rate.
    let committed: Mutex<HashMap<String, Instant>> = Mutex::new(HashMap::new());
    let rate = LATENCY_RATE.min((insert_rate / 2.0) as u64).max(writers as u64);
    let rows_each = rate * LATENCY_SECONDS / writers as u64;
    let pace = Duration::from_micros(1_000_000 * writers as u64 / rate);
    let record = |id: String| {
        committed.lock().unwrap().insert(id, Instant::now());
    };
    let writing = futures::future::join_all((0..writers).map(|w| db.write(w, rows_each, Some(pace), &record)));
    let (_, received) = tokio::join!(writing, consume(store, &name, (rows_each * writers as u64) as usize));
    let committed = committed.into_inner().unwrap();
    let mut latencies: Vec<f64> = committed
        .iter()
        .filter_map(|(id, at)| received.get(id).map(|r| r.saturating_duration_since(*at).as_secs_f64() * 1000.0))
        .collect();
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    println!(
        "| {} | {writers} | {:.0} | {:.0} | {:.2} | {rate} | {:.1} | {:.1} |",
        db.name(),
        insert_rate,
        relay_rate,
        relay_rate / insert_rate,
        pct(0.50),
        pct(0.99)
    );
    services.delete_relay(&name).await.expect("delete");
    db.drop_table().await;
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rows: u64 = std::env::var("RELAY_BENCH_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = EmbeddedConfig { data_dir: dir.path().join("data"), durability: Durability::Fsync };
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(config).expect("store"));
    let services = services(store.clone());
    let _running = services.start();
    println!(
        "{rows} rows per throughput run; latency for {LATENCY_SECONDS} s; relay poll_ms 10, batch_max 1000, into a queue (embedded store, fsync)"
    );
    println!();
    println!(
        "| Source | Writers | DB inserts/s (1-row transactions) | Relayed rows/s | Relay / insert | Latency run rows/s | Commit→delivery p50 ms | p99 ms |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut dbs = vec![Db::Sqlite(dir.path().join("app.db").to_string_lossy().into_owned())];
    if let Ok(url) = std::env::var("SLUICE_TEST_PG_URL") {
        dbs.push(Db::Postgres(url, format!("relay_bench_{}", std::process::id())));
    }
    if let Ok(url) = std::env::var("SLUICE_TEST_MYSQL_URL") {
        dbs.push(Db::Mysql(url, format!("relay_bench_{}", std::process::id())));
    }
    for db in dbs {
        bench(db, &store, &services, rows).await;
    }
}
