//! Crash accounting for the outbox relay: an application keeps writing outbox rows (eight
//! aggregates, each written in order) while the real `sluice serve` relays them into a queue
//! and is killed with SIGKILL at random moments, many times, then restarted on the same data
//! directory (the restarted server takes its relay's lease back at once: it is the same node). Polls are small (5 rows, every 10 ms), so kills land between a batch's publish
//! and its delete again and again: those rows are published twice, which the duplicates count
//! shows.
//!
//! The accounting, once the table is empty and the queue drained: every row arrived at least
//! once (lost = 0); nothing arrived that was never written; every copy of a row carries the
//! row's id (`outbox_id`) and its payload; and each aggregate's first deliveries are in the
//! order its rows were written.
//!
//! SQLite runs always; PostgreSQL with `SLUICE_TEST_PG_URL`, MySQL/MariaDB with
//! `SLUICE_TEST_MYSQL_URL`. `SLUICE_CRASH_RELAY_KILLS` sets the kills per database (default
//! 20) and `SLUICE_CRASH_SEED` replays a run's timings:
//!
//! ```text
//! SLUICE_CRASH_RELAY_KILLS=300 cargo test -p sluice --release --test crash_relay -- --nocapture
//! ```

mod torture;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use sluice_api::{CreateQueueRequest, CreateRelayRequest, ReceiveRequest, RelayTarget};
use torture::{Killer, ServerUrl, client};

const AGGREGATES: u64 = 8;
const KILLS_DEFAULT: u32 = 20;

/// The application's database, as the test writes it.
enum Db {
    Sqlite { path: String, conn: Mutex<rusqlite::Connection> },
    Postgres { url: String, schema: String, client: tokio_postgres::Client },
    Mysql { url: String, table: String, pool: mysql_async::Pool },
}

impl Db {
    fn sqlite(dir: &std::path::Path) -> Db {
        let path = dir.join("app.db").to_string_lossy().into_owned();
        let conn = rusqlite::Connection::open(&path).expect("create");
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, aggregatetype TEXT, aggregateid TEXT, type TEXT, payload TEXT);",
        )
        .expect("table");
        let conn = rusqlite::Connection::open(&path).expect("open");
        // WAL without a sync per commit: the application's durability is not under test here.
        conn.execute_batch("PRAGMA synchronous = NORMAL").expect("pragma");
        conn.busy_timeout(Duration::from_secs(30)).expect("busy timeout");
        Db::Sqlite { path, conn: Mutex::new(conn) }
    }

    async fn postgres(url: &str) -> Db {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("SLUICE_TEST_PG_URL={url} is set but unreachable: {e}"));
        tokio::spawn(connection);
        let schema = format!("crash_relay_{}", std::process::id());
        client
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema};
                 CREATE TABLE {schema}.outbox (id bigserial PRIMARY KEY, aggregatetype text, aggregateid text, type text, payload jsonb);"
            ))
            .await
            .expect("table");
        Db::Postgres { url: url.into(), schema, client }
    }

    async fn mysql(url: &str) -> Db {
        let pool = mysql_async::Pool::new(mysql_async::Opts::from_url(url).expect("a MySQL URL"));
        let table = format!("crash_relay_{}", std::process::id());
        let mut conn =
            pool.get_conn().await.unwrap_or_else(|e| panic!("SLUICE_TEST_MYSQL_URL={url} is set but unreachable: {e}"));
        conn.query_drop(format!(
            "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id BIGINT AUTO_INCREMENT PRIMARY KEY, aggregatetype VARCHAR(64),
             aggregateid VARCHAR(64), type VARCHAR(64), payload TEXT) ENGINE=InnoDB"
        ))
        .await
        .expect("table");
        Db::Mysql { url: url.into(), table, pool }
    }

    fn source(&self) -> (String, String) {
        match self {
            Db::Sqlite { path, .. } => (format!("sqlite://{path}"), "outbox".into()),
            Db::Postgres { url, schema, .. } => (url.clone(), format!("{schema}.outbox")),
            Db::Mysql { url, table, .. } => (url.clone(), table.clone()),
        }
    }

    /// Writes one row; its id.
    async fn insert(&self, aggregate: &str, payload: &str) -> String {
        match self {
            Db::Sqlite { conn, .. } => {
                let conn = conn.lock().unwrap();
                conn.execute(
                    "INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', ?1, 'order.placed', ?2)",
                    [aggregate, payload],
                )
                .expect("insert");
                conn.last_insert_rowid().to_string()
            }
            Db::Postgres { schema, client, .. } => {
                let json = serde_json::json!({ "p": payload });
                let row = client
                    .query_one(
                        &format!("INSERT INTO {schema}.outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', $1, 'order.placed', $2::text::jsonb) RETURNING id"),
                        &[&aggregate, &json.to_string()],
                    )
                    .await
                    .expect("insert");
                row.get::<_, i64>(0).to_string()
            }
            Db::Mysql { table, pool, .. } => {
                let mut conn = pool.get_conn().await.expect("connection");
                conn.exec_drop(
                    format!("INSERT INTO {table} (aggregatetype, aggregateid, type, payload) VALUES ('order', ?, 'order.placed', ?)"),
                    (aggregate, payload),
                )
                .await
                .expect("insert");
                conn.last_insert_id().expect("id").to_string()
            }
        }
    }

    /// The payload as the message body carries it.
    fn body(&self, payload: &str) -> String {
        match self {
            // jsonb's text form.
            Db::Postgres { .. } => format!("{{\"p\": \"{payload}\"}}"),
            _ => payload.to_string(),
        }
    }

    async fn remaining(&self) -> u64 {
        match self {
            Db::Sqlite { conn, .. } => {
                let conn = conn.lock().unwrap();
                conn.query_row("SELECT count(*) FROM outbox", [], |r| r.get::<_, i64>(0)).expect("count") as u64
            }
            Db::Postgres { schema, client, .. } => client
                .query_one(&format!("SELECT count(*) FROM {schema}.outbox"), &[])
                .await
                .expect("count")
                .get::<_, i64>(0) as u64,
            Db::Mysql { table, pool, .. } => {
                let mut conn = pool.get_conn().await.expect("connection");
                conn.query_first::<u64, _>(format!("SELECT count(*) FROM {table}")).await.expect("count").unwrap_or(0)
            }
        }
    }

    async fn drop_table(&self) {
        match self {
            Db::Sqlite { .. } => {}
            Db::Postgres { schema, client, .. } => {
                client.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.expect("drop")
            }
            Db::Mysql { table, pool, url } => {
                let mut conn = pool.get_conn().await.unwrap_or_else(|e| panic!("{url}: {e}"));
                conn.query_drop(format!("DROP TABLE {table}")).await.expect("drop");
            }
        }
    }
}

/// What arrived: (outbox id, aggregate, body) in receive order.
type Ledger = Mutex<Vec<(String, String, String)>>;

async fn consume(url: &ServerUrl, ledger: &Ledger, wait_ms: u64) -> Result<usize, ()> {
    let c = client(&url.get());
    let request =
        ReceiveRequest { max: Some(10), wait_ms: Some(wait_ms), visibility_timeout_ms: Some(torture::VISIBILITY_MS) };
    let messages = c.receive_messages("out", &request).await.map_err(|_| ())?.messages;
    let n = messages.len();
    let mut receipts = Vec::new();
    for m in messages {
        let attribute = |name: &str| m.attributes.get(name).map(|a| a.value.clone()).unwrap_or_default();
        ledger.lock().unwrap().push((
            attribute("outbox_id"),
            attribute("aggregate_id"),
            m.body.clone().unwrap_or_default(),
        ));
        receipts.extend(m.receipt);
    }
    if !receipts.is_empty() {
        let _ = c.ack("out", receipts).await;
    }
    Ok(n)
}

async fn crash(db: Db, label: &str) {
    let seed = torture::seed();
    let kills = torture::kills("SLUICE_CRASH_RELAY_KILLS", KILLS_DEFAULT);
    println!("crash_relay {label}: seed {seed} (SLUICE_CRASH_SEED={seed} replays it), {kills} kills");
    let dir = tempfile::tempdir().expect("data dir");
    let mut killer = Killer::new(seed);
    let mut server = killer.start(dir.path());
    let c = server.client();
    c.create_queue(&CreateQueueRequest { name: "out".into(), ..Default::default() }).await.expect("queue");
    let (source, table) = db.source();
    let request = CreateRelayRequest {
        name: "crash".into(),
        source,
        table,
        target: RelayTarget { queue: Some("out".into()), ..Default::default() },
        poll_ms: Some(10),
        batch_max: Some(5),
        ..Default::default()
    };
    c.create_relay(&request).await.unwrap_or_else(|e| panic!("create the relay: {e}; log:\n{}", server.log()));

    let db = Arc::new(db);
    let url = Arc::new(ServerUrl::new(&server.url));
    // Read once the kills are over, by one consumer: what the relay sent, in the order it
    // sent it (a consumer during the kills would see messages whose receive answer a kill cut
    // off come back after their visibility timeout, behind later ones: a queue's doing, not
    // the relay's).
    let ledger: Arc<Ledger> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let written: Arc<Mutex<Vec<(String, String, String)>>> = Arc::default();
    let rows = Arc::new(AtomicU64::new(0));
    let producer = tokio::spawn({
        let (db, stop, written, rows) = (db.clone(), stop.clone(), written.clone(), rows.clone());
        async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let aggregate = format!("agg-{}", n % AGGREGATES);
                let payload = format!("{aggregate}:{}", n / AGGREGATES);
                let id = db.insert(&aggregate, &payload).await;
                written.lock().unwrap().push((id, aggregate, db.body(&payload)));
                n += 1;
                rows.store(n, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    });
    for _ in 0..kills {
        server = killer.kill_and_restart(server, dir.path(), &url).await;
    }
    stop.store(true, Ordering::Relaxed);
    producer.await.expect("producer");

    // The relay empties the table, then the queue is drained.
    let deadline = Instant::now() + Duration::from_secs(120);
    while db.remaining().await > 0 {
        assert!(Instant::now() < deadline, "the relay did not empty the table; log:\n{}", server.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut empty = 0;
    while empty < 3 {
        assert!(Instant::now() < deadline, "the drain did not finish");
        match consume(&url, &ledger, torture::VISIBILITY_MS + 500).await {
            Ok(0) => empty += 1,
            Ok(_) => empty = 0,
            Err(()) => panic!("the server stopped answering; log:\n{}", server.log()),
        }
    }

    let written = written.lock().unwrap().clone();
    let ledger = ledger.lock().unwrap().clone();
    let expected: HashMap<&str, (&str, &str)> =
        written.iter().map(|(i, a, b)| (i.as_str(), (a.as_str(), b.as_str()))).collect();
    let mut copies: HashMap<&str, usize> = HashMap::new();
    let mut first: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut unexpected = 0;
    for (id, aggregate, body) in &ledger {
        match expected.get(id.as_str()) {
            Some(&(a, b)) => {
                assert_eq!((aggregate.as_str(), body.as_str()), (a, b), "a copy of row {id} differs from the row")
            }
            None => {
                unexpected += 1;
                continue;
            }
        }
        let n = copies.entry(id.as_str()).or_default();
        *n += 1;
        if *n == 1 {
            first.entry(aggregate.as_str()).or_default().push(id.as_str());
        }
    }
    let lost = written.iter().filter(|(id, _, _)| !copies.contains_key(id.as_str())).count();
    let duplicates = ledger.len() - copies.len() - unexpected;
    let mut order: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (id, aggregate, _) in &written {
        order.entry(aggregate.as_str()).or_default().push(id.as_str());
    }
    println!(
        "crash_relay {label}: {}; {} rows written, {} delivered, lost {lost}, unexpected {unexpected}, duplicates {duplicates}",
        killer.summary(),
        written.len(),
        ledger.len()
    );
    assert_eq!((lost, unexpected), (0, 0), "seed {seed}");
    assert_eq!(first, order, "first deliveries per aggregate in write order (seed {seed})");
    assert!(written.len() > 100, "the producer wrote {} rows", written.len());
    // Counted at most every half second, so a kill may take back the last few counts.
    let relay = server.client().get_relay("crash").await.expect("relay");
    assert!(relay.status.published > 0 && relay.status.published <= ledger.len() as u64, "{:?}", relay.status);
    server.terminate();
    db.drop_table().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_relay_survives_sigkill_between_publish_and_delete() {
    let dir = tempfile::tempdir().expect("app dir");
    crash(Db::sqlite(dir.path()), "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_relay_survives_sigkill_between_publish_and_delete() {
    let Some(url) = std::env::var("SLUICE_TEST_PG_URL").ok().filter(|u| !u.is_empty()) else {
        eprintln!("SLUICE_TEST_PG_URL is not set: skipped");
        return;
    };
    crash(Db::postgres(&url).await, "postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_relay_survives_sigkill_between_publish_and_delete() {
    let Some(url) = std::env::var("SLUICE_TEST_MYSQL_URL").ok().filter(|u| !u.is_empty()) else {
        eprintln!("SLUICE_TEST_MYSQL_URL is not set: skipped");
        return;
    };
    crash(Db::mysql(&url).await, "mysql").await;
}
