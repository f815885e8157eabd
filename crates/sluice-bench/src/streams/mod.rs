//! The `streams` scenario: Sluice's streams measured against the goals, beside Redis
//! Streams, NATS JetStream and RabbitMQ streams in the same run.
//!
//! - `local`: what needs only Sluice and the disk: the disk's cold sequential read rate, a
//!   stream of `--stream-records` records loaded, the restart with it, and its replay from the
//!   start (through the store, and over HTTP), each against its goal;
//! - `peers::streams` (the `peers` feature, which holds every peer driver): append throughput
//!   at every size and batch, group consumption, end-to-end latency, and the ratios to the
//!   peers that sync every write. A build without the feature runs `local` only and says so.

mod local;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Plan;
use crate::report::thousands;
use crate::stream_plan::StreamPlan;

/// The goals.
const RESTART_GOAL: Duration = Duration::from_secs(2);
const REPLAY_GOAL_FRACTION: f64 = 0.5;

pub(crate) async fn run(plan: &Plan, sp: &StreamPlan) -> anyhow::Result<()> {
    let started = Instant::now();
    let load_average = crate::report::load_average();
    #[cfg(feature = "peers")]
    let compared = crate::peers::streams::run(plan, sp).await?;
    let local = local::run(&plan.tmp_dir, sp.records, sp.sizes[0]).await?;

    let mut w = String::new();
    let _ = writeln!(
        w,
        "sluice bench {}, scenario streams ({} s in all)\nmachine    {} cores, {} {}, load average {} at start; \
         the load generator, Sluice and each peer share the cores; one system at a time",
        env!("CARGO_PKG_VERSION"),
        started.elapsed().as_secs(),
        crate::report::cores(),
        std::env::consts::OS,
        std::env::consts::ARCH,
        load_average.as_deref().unwrap_or("unknown"),
    );
    let _ = writeln!(
        w,
        "phases     {} warm-up, {} measured; temporary data in {}",
        humantime::format_duration(plan.warmup),
        humantime::format_duration(plan.duration),
        plan.tmp_dir.display()
    );
    render_local(&mut w, &local);
    let mut rows = local_json(&local);
    #[cfg(feature = "peers")]
    {
        crate::peers::streams::render(&mut w, sp, &compared);
        rows.extend(crate::peers::streams::json(&compared));
    }
    #[cfg(not(feature = "peers"))]
    let _ = writeln!(
        w,
        "\nappend, consume and end-to-end phases: not run; they share the peers' drivers and load generator, \
         which this build leaves out (rebuild with default features)"
    );
    let rows: Vec<Value> = rows.into_iter().map(|r| crate::report::json_row(plan, r)).collect();
    crate::publish(plan, &w, Value::Array(rows))
}

fn mb(bytes_per_s: f64) -> String {
    format!("{:.0} MB/s", bytes_per_s / 1e6)
}

fn render_local(w: &mut String, l: &local::Local) {
    let disk = l.disk_read_bytes_per_s;
    let _ =
        writeln!(w, "disk       cold sequential read {} (a 1 GiB file, evicted from the page cache first)", mb(disk));
    let _ = writeln!(
        w,
        "stream     {} records of {} B in one partition: {:.1} GB in {} segments, loaded in {:.1} s through the \
         store's API ({} records/s, interval mode)",
        thousands(l.records as f64),
        l.body_bytes,
        l.stream_bytes as f64 / 1e9,
        l.segments,
        l.load.as_secs_f64(),
        thousands(l.records as f64 / l.load.as_secs_f64()),
    );
    let verdict = |ok: bool| if ok { "meets" } else { "misses" };
    let _ = writeln!(
        w,
        "restart    {} ms to open the store on it, cold ({} the goal of {} s)",
        l.restart.as_millis(),
        verdict(l.restart <= RESTART_GOAL),
        RESTART_GOAL.as_secs()
    );
    for (how, took) in [("through the store", l.replay_store), ("over HTTP (JSON)", l.replay_http)] {
        let rate = l.rate(took);
        let _ = writeln!(
            w,
            "replay     {how}: {:.1} s, {} records/s, {} of segment files = {:.0} % of the disk's rate ({} the goal of {:.0} %)",
            took.as_secs_f64(),
            thousands(l.records as f64 / took.as_secs_f64()),
            mb(rate),
            rate / disk * 100.0,
            verdict(rate >= disk * REPLAY_GOAL_FRACTION),
            REPLAY_GOAL_FRACTION * 100.0
        );
    }
}

fn local_json(l: &local::Local) -> Vec<Value> {
    vec![json!({
        "system": "sluice-fsync",
        "workload": "replay",
        "records": l.records,
        "body_bytes": l.body_bytes,
        "stream_bytes": l.stream_bytes,
        "disk_read_bytes_per_s": l.disk_read_bytes_per_s,
        "restart_ms": l.restart.as_millis() as u64,
        "replay_store_s": l.replay_store.as_secs_f64(),
        "replay_http_s": l.replay_http.as_secs_f64(),
        "load_s": l.load.as_secs_f64(),
    })]
}
