//! Throughput under sustained churn: producers and consumers run against one queue for a
//! while (10 minutes by default) and the rate is printed every 10 s, beside the `messages`
//! table's dead rows and vacuums and the longest time no ack completed, so one can see whether
//! the store keeps the rate flat while every message is inserted, updated and deleted. A
//! benchmark, not a test: it prints figures and asserts only that the work was done.
//!
//!     SLUICE_TEST_PG_URL=postgres://postgres@127.0.0.1:5432/test \
//!         cargo run --release -p sluice-postgres --example churn -- \
//!         [--seconds 600] [--nodes 1] [--producers 4] [--consumers 4] [--vacuum-dead-rows N] [--pgbench]
//!
//! `--nodes N` opens N stores over the same schema (as N Sluice servers would be) and spreads
//! the clients over them. Producers stop sending while the backlog is over `BACKLOG_MAX`, so the
//! table stays the size of a working queue and the rate measured is the sustained
//! send-receive-ack rate. `--pgbench` first measures PostgreSQL's own TPC-B-like rate in a
//! scratch database (`pgbench -i`, then `pgbench -T 10 -c 4 -j 2`) on the same machine in the
//! same run, as a ceiling to compare with. Runs in a fresh schema that it drops at the end.
//!
//! The stores vacuum the table themselves once it has more than `--vacuum-dead-rows` dead rows
//! (`PostgresOptions::vacuum_dead_rows_max`, 10,000 by default); `--vacuum-dead-rows 0` turns
//! that off, leaving the table to the server's autovacuum, which the example reports on (the
//! project's machine runs with `autovacuum = off`, so there it shows a table nobody vacuums).
//! The "vacuums" column counts both kinds, as `pg_stat_user_tables` does: manual (the store's)
//! and automatic.

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
/// How often the acked count is sampled to find stalls.
const GAP_SAMPLE: Duration = Duration::from_millis(20);
/// Reports in the first and last minute, averaged in the summary.
const REPORTS_PER_MINUTE: usize = 6;

struct Args {
    seconds: u64,
    nodes: usize,
    producers: usize,
    consumers: usize,
    pgbench: bool,
    vacuum_dead_rows_max: u64,
}

fn parse_args() -> Args {
    let mut args = Args {
        seconds: 600,
        nodes: 1,
        producers: 4,
        consumers: 4,
        pgbench: false,
        vacuum_dead_rows_max: sluice_postgres::VACUUM_DEAD_ROWS_MAX_DEFAULT,
    };
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
            "--vacuum-dead-rows" => args.vacuum_dead_rows_max = number("--vacuum-dead-rows"),
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    args
}

fn usage(problem: &str) -> ! {
    eprintln!("{problem}");
    eprintln!(
        "usage: churn [--seconds N] [--nodes N] [--producers N] [--consumers N] [--vacuum-dead-rows N] [--pgbench]"
    );
    std::process::exit(2);
}

#[derive(Default)]
struct Totals {
    sent: AtomicU64,
    acked: AtomicU64,
    /// Longest time without an ack since the last report, in ms (see `watch_gaps`).
    gap_max_ms: AtomicU64,
}

/// The `messages` table's dead tuples and vacuums (manual, i.e. the store's, plus automatic)
/// so far.
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

/// Watches the acked count every `GAP_SAMPLE` and keeps the longest time it did not move (a
/// stall), since the reporter last took it. A 10-s average hides a 2-s stall; this does not.
async fn watch_gaps(totals: Arc<Totals>, stop: Arc<AtomicBool>) {
    let (mut last, mut since) = (totals.acked.load(Ordering::Relaxed), Instant::now());
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(GAP_SAMPLE).await;
        let acked = totals.acked.load(Ordering::Relaxed);
        if acked != last {
            (last, since) = (acked, Instant::now());
        } else {
            totals.gap_max_ms.fetch_max(since.elapsed().as_millis() as u64, Ordering::Relaxed);
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
    let vacuum = match (args.vacuum_dead_rows_max, autovacuum.as_str()) {
        (0, "on") => "the server's autovacuum only (the store's own vacuum is off)".to_owned(),
        (0, _) => format!("nobody: the store's own vacuum is off and autovacuum is {autovacuum} on this server"),
        (n, _) => format!("the store past {n} dead rows (autovacuum is {autovacuum} on this server)"),
    };
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
        let options = PostgresOptions {
            schema: Some(schema.clone()),
            pool_connections_max: per_node,
            vacuum_dead_rows_max: args.vacuum_dead_rows_max,
            ..Default::default()
        };
        nodes.push(Arc::new(PostgresStore::connect(&url, options).await.expect("connect to SLUICE_TEST_PG_URL")));
    }
    nodes[0].create_queue("churn", QueueAttributes::default()).await.expect("create queue");

    let totals = Arc::new(Totals::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    tasks.push(tokio::spawn(watch_gaps(totals.clone(), stop.clone())));
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
         vacuumed by {vacuum}",
        args.seconds, args.nodes, args.producers, args.consumers,
    );
    println!(
        "{:>6} {:>12} {:>12} {:>9} {:>11} {:>8} {:>13}",
        "t (s)", "acked msg/s", "sent msg/s", "backlog", "dead tuples", "vacuums", "no-ack max ms"
    );
    let started = Instant::now();
    let mut rates = Vec::new();
    let (mut gap_overall_ms, mut vacuums_overall) = (0, 0);
    let (mut last_sent, mut last_acked, mut last_at) = (0, 0, started);
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + REPORT_EVERY, REPORT_EVERY);
    while started.elapsed() < Duration::from_secs(args.seconds) {
        ticker.tick().await;
        let (sent, acked) = (totals.sent.load(Ordering::Relaxed), totals.acked.load(Ordering::Relaxed));
        let secs = last_at.elapsed().as_secs_f64();
        let rate = (acked - last_acked) as f64 / secs;
        let (dead, vacuums) = table_stats(&admin, &schema).await;
        let gap_ms = totals.gap_max_ms.swap(0, Ordering::Relaxed);
        println!(
            "{:>6.0} {:>12.0} {:>12.0} {:>9} {:>11} {:>8} {:>13}",
            started.elapsed().as_secs_f64(),
            rate,
            (sent - last_sent) as f64 / secs,
            sent - acked,
            dead,
            vacuums,
            gap_ms
        );
        rates.push(rate);
        gap_overall_ms = gap_overall_ms.max(gap_ms);
        vacuums_overall = vacuums;
        (last_sent, last_acked, last_at) = (sent, acked, Instant::now());
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("client task");
    }
    drop(nodes);
    admin.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.expect("drop the churn schema");

    let mean = |rates: &[f64]| rates.iter().sum::<f64>() / rates.len().max(1) as f64;
    let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let max = rates.iter().copied().fold(0.0, f64::max);
    let minute = REPORTS_PER_MINUTE.min(rates.len());
    println!(
        "acked msg/s per 10 s: mean {:.0}, first minute {:.0}, last minute {:.0}, min {min:.0}, max {max:.0}, \
         min/max {:.2}, last/first minute {:.2}",
        mean(&rates),
        mean(&rates[..minute]),
        mean(&rates[rates.len() - minute..]),
        min / max.max(1.0),
        mean(&rates[rates.len() - minute..]) / mean(&rates[..minute]).max(1.0),
    );
    println!(
        "longest time with no ack completing: {gap_overall_ms} ms (sampled every {GAP_SAMPLE:?}); \
         vacuums of messages: {vacuums_overall}"
    );
    if let Some(tps) = pgbench_tps {
        println!("pgbench TPC-B-like, same machine, same run: {tps:.0} tps (-c 4 -j 2, 10 s, scale 1)");
    }
}
