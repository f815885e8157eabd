//! Throughput under sustained churn: producers and consumers run against one queue for a
//! while (10 minutes by default) and the rate is printed every 10 s, beside the `messages`
//! table's dead tuples and autovacuum runs, so one can see whether the table's autovacuum
//! settings (migration 1) keep the rate flat while every message is inserted, updated and
//! deleted. A benchmark, not a test: it prints figures and asserts only that the work was done.
//!
//!     SLUICE_TEST_PG_URL=postgres://postgres@127.0.0.1:5432/test \
//!         cargo run --release -p sluice-postgres --example churn -- \
//!         [--seconds 600] [--nodes 1] [--producers 4] [--consumers 4] [--pgbench] [--emulate-autovacuum]
//!
//! `--nodes N` opens N stores over the same schema (as N Sluice servers would be) and spreads
//! the clients over them. Producers stop sending while the backlog is over `BACKLOG_MAX`, so the
//! table stays the size of a working queue and the rate measured is the sustained
//! send-receive-ack rate. `--pgbench` first measures PostgreSQL's own TPC-B-like rate in a
//! scratch database (`pgbench -i`, then `pgbench -T 10 -c 4 -j 2`) on the same machine in the
//! same run, as a ceiling to compare with. Runs in a fresh schema that it drops at the end.
//!
//! The table's settings only act when the server runs autovacuum (`autovacuum = on`, the
//! default). On a server where it is off, the example says so, and `--emulate-autovacuum` does
//! what the settings ask of the autovacuum launcher: it polls the table's dead tuples every
//! second and runs `VACUUM` on it once they pass the table's `autovacuum_vacuum_threshold`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sluice_core::{NewMessage, QueueAttributes};
use sluice_postgres::{PostgresOptions, PostgresStore};
use sluice_store::{ReceiveRequest, Store};

const BATCH: usize = 10;
const BODY_BYTES: usize = 256;
/// Most messages sent but not yet acked; producers wait above it.
const BACKLOG_MAX: u64 = 20_000;
const REPORT_EVERY: Duration = Duration::from_secs(10);

struct Args {
    seconds: u64,
    nodes: usize,
    producers: usize,
    consumers: usize,
    pgbench: bool,
    emulate_autovacuum: bool,
}

fn parse_args() -> Args {
    let mut args =
        Args { seconds: 600, nodes: 1, producers: 4, consumers: 4, pgbench: false, emulate_autovacuum: false };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut number = |name: &str| -> u64 {
            it.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| usage(&format!("{name} takes a number")))
        };
        match flag.as_str() {
            "--seconds" => args.seconds = number("--seconds"),
            "--nodes" => args.nodes = number("--nodes").max(1) as usize,
            "--producers" => args.producers = number("--producers").max(1) as usize,
            "--consumers" => args.consumers = number("--consumers").max(1) as usize,
            "--pgbench" => args.pgbench = true,
            "--emulate-autovacuum" => args.emulate_autovacuum = true,
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    args
}

fn usage(problem: &str) -> ! {
    eprintln!("{problem}");
    eprintln!(
        "usage: churn [--seconds N] [--nodes N] [--producers N] [--consumers N] [--pgbench] [--emulate-autovacuum]"
    );
    std::process::exit(2);
}

#[derive(Default)]
struct Totals {
    sent: AtomicU64,
    acked: AtomicU64,
}

/// The `messages` table's dead tuples and vacuums (automatic or not) so far.
async fn table_stats(client: &tokio_postgres::Client, schema: &str) -> (i64, i64) {
    let row = client
        .query_one(
            "SELECT coalesce(n_dead_tup, 0), coalesce(autovacuum_count, 0) + coalesce(vacuum_count, 0)
             FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'messages'",
            &[&schema],
        )
        .await
        .expect("read pg_stat_user_tables");
    (row.get(0), row.get(1))
}

/// The `messages` table's own `autovacuum_vacuum_threshold` (migration 1 sets it).
async fn vacuum_threshold(client: &tokio_postgres::Client, schema: &str) -> i64 {
    let row = client
        .query_one(
            "SELECT coalesce((SELECT split_part(o, '=', 2)::int8 FROM unnest(c.reloptions) o
                              WHERE o LIKE 'autovacuum_vacuum_threshold=%'), 50)
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 AND c.relname = 'messages'",
            &[&schema],
        )
        .await
        .expect("read the table's reloptions");
    row.get(0)
}

/// What autovacuum would do for the `messages` table with its settings (scale factor 0): a
/// VACUUM once the dead tuples pass the threshold. Runs until `stop`.
async fn emulate_autovacuum(url: String, schema: String, stop: Arc<AtomicBool>) {
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(connection);
    let threshold = vacuum_threshold(&client, &schema).await;
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (dead, _) = table_stats(&client, &schema).await;
        if dead > threshold {
            client.batch_execute(&format!("VACUUM \"{schema}\".messages")).await.expect("vacuum");
        }
    }
}

/// PostgreSQL's TPC-B-like rate on this machine now, in a scratch database dropped afterwards.
async fn pgbench(url: &str, admin: &tokio_postgres::Client) -> Result<f64, String> {
    let db = format!("sluice_pgbench_{}", std::process::id());
    admin.batch_execute(&format!("CREATE DATABASE {db}")).await.map_err(|e| e.to_string())?;
    let mut config: url_parts::Parts = url_parts::Parts::parse(url);
    config.database = db.clone();
    let conninfo = config.to_url();
    let run = |args: &[&str]| {
        std::process::Command::new("pgbench").args(args).arg(&conninfo).output().map_err(|e| format!("pgbench: {e}"))
    };
    let result = (|| {
        let init = run(&["-i", "-q", "-s", "1"])?;
        if !init.status.success() {
            return Err(format!("pgbench -i failed: {}", String::from_utf8_lossy(&init.stderr)));
        }
        let out = run(&["-T", "10", "-c", "4", "-j", "2"])?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find_map(|l| l.strip_prefix("tps = "))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<f64>().ok())
            .ok_or_else(|| format!("no tps in pgbench's output: {text}"))
    })();
    admin.batch_execute(&format!("DROP DATABASE {db}")).await.map_err(|e| e.to_string())?;
    result
}

/// Just enough URL handling to point pgbench at another database on the same server.
mod url_parts {
    pub struct Parts {
        pub prefix: String,
        pub database: String,
        pub query: String,
    }

    impl Parts {
        /// `postgres://USER@HOST:PORT/DB?QUERY`; everything before the last `/` is kept.
        pub fn parse(url: &str) -> Parts {
            let (rest, query) = url.split_once('?').map(|(r, q)| (r, format!("?{q}"))).unwrap_or((url, String::new()));
            let (prefix, database) = rest.rsplit_once('/').unwrap_or((rest, ""));
            Parts { prefix: prefix.to_string(), database: database.to_string(), query }
        }

        pub fn to_url(&self) -> String {
            format!("{}/{}{}", self.prefix, self.database, self.query)
        }
    }
}

#[tokio::main]
async fn main() {
    let Ok(url) = std::env::var("SLUICE_TEST_PG_URL") else {
        eprintln!("set SLUICE_TEST_PG_URL (e.g. postgres://postgres@127.0.0.1:5432/test)");
        std::process::exit(2);
    };
    let args = parse_args();
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(connection);

    let autovacuum: String = admin.query_one("SHOW autovacuum", &[]).await.expect("SHOW autovacuum").get(0);
    if autovacuum != "on" && !args.emulate_autovacuum {
        println!(
            "note: autovacuum is {autovacuum} on this server, so the table's autovacuum settings do nothing here; \
             pass --emulate-autovacuum to see their effect"
        );
    }
    let pgbench_tps = if args.pgbench {
        match pgbench(&url, &admin).await {
            Ok(tps) => Some(tps),
            Err(e) => {
                eprintln!("pgbench skipped: {e}");
                None
            }
        }
    } else {
        None
    };

    let schema = format!("sluice_churn_{}", std::process::id());
    let per_node = (args.producers + args.consumers).div_ceil(args.nodes) + 2;
    let mut nodes: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..args.nodes {
        let options =
            PostgresOptions { schema: Some(schema.clone()), pool_connections_max: per_node, ..Default::default() };
        nodes.push(Arc::new(PostgresStore::connect(&url, options).await.expect("connect to SLUICE_TEST_PG_URL")));
    }
    nodes[0].create_queue("churn", QueueAttributes::default()).await.expect("create queue");

    let totals = Arc::new(Totals::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    if args.emulate_autovacuum {
        tasks.push(tokio::spawn(emulate_autovacuum(url.clone(), schema.clone(), stop.clone())));
    }
    for p in 0..args.producers {
        let (node, totals, stop) = (nodes[p % args.nodes].clone(), totals.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let backlog = totals.sent.load(Ordering::Relaxed).saturating_sub(totals.acked.load(Ordering::Relaxed));
                if backlog > BACKLOG_MAX {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                let batch = (0..BATCH).map(|_| NewMessage { body: vec![b'x'; BODY_BYTES], ..Default::default() });
                let results = node.send("churn", batch.collect()).await.expect("send");
                assert!(results.iter().all(Result::is_ok), "every send accepted");
                totals.sent.fetch_add(results.len() as u64, Ordering::Relaxed);
            }
        }));
    }
    for c in 0..args.consumers {
        let (node, totals, stop) = (nodes[c % args.nodes].clone(), totals.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let request = ReceiveRequest { max: BATCH as u32, wait_ms: Some(200), visibility_timeout_ms: Some(60_000) };
            while !stop.load(Ordering::Relaxed) {
                let got = node.receive("churn", request).await.expect("receive");
                if got.is_empty() {
                    continue;
                }
                let acked = node.ack("churn", got.into_iter().map(|m| m.receipt).collect()).await.expect("ack");
                assert!(acked.iter().all(Result::is_ok), "every ack succeeds");
                totals.acked.fetch_add(acked.len() as u64, Ordering::Relaxed);
            }
        }));
    }

    println!(
        "{} s, {} node(s), {} producers, {} consumers, batches of {BATCH} x {BODY_BYTES} B, backlog <= {BACKLOG_MAX}, \
         vacuum by {}",
        args.seconds,
        args.nodes,
        args.producers,
        args.consumers,
        if args.emulate_autovacuum { "emulated autovacuum" } else { "the server's autovacuum" }
    );
    println!(
        "{:>6} {:>12} {:>12} {:>9} {:>11} {:>11}",
        "t (s)", "acked msg/s", "sent msg/s", "backlog", "dead tuples", "vacuums"
    );
    let started = Instant::now();
    let mut rates = Vec::new();
    let (mut last_sent, mut last_acked, mut last_at) = (0, 0, started);
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + REPORT_EVERY, REPORT_EVERY);
    while started.elapsed() < Duration::from_secs(args.seconds) {
        ticker.tick().await;
        let (sent, acked) = (totals.sent.load(Ordering::Relaxed), totals.acked.load(Ordering::Relaxed));
        let secs = last_at.elapsed().as_secs_f64();
        let rate = (acked - last_acked) as f64 / secs;
        let (dead, vacuums) = table_stats(&admin, &schema).await;
        println!(
            "{:>6.0} {:>12.0} {:>12.0} {:>9} {:>11} {:>11}",
            started.elapsed().as_secs_f64(),
            rate,
            (sent - last_sent) as f64 / secs,
            sent - acked,
            dead,
            vacuums
        );
        rates.push(rate);
        (last_sent, last_acked, last_at) = (sent, acked, Instant::now());
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("client task");
    }
    drop(nodes);
    admin.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.expect("drop the churn schema");

    let mean = rates.iter().sum::<f64>() / rates.len().max(1) as f64;
    let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let max = rates.iter().copied().fold(0.0, f64::max);
    println!("acked msg/s: mean {mean:.0}, min {min:.0}, max {max:.0}, min/max {:.2}", min / max.max(1.0));
    if let Some(tps) = pgbench_tps {
        println!("pgbench TPC-B-like, same machine, same run: {tps:.0} tps (-c 4 -j 2, 10 s, scale 1)");
    }
}
