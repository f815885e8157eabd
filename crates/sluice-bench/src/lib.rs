//! `sluice bench`: a load generator that prints figures, not a timed test (DESIGN.md §5).
//!
//! One run measures, on the same machine and in the same process:
//! 1. the storage ceiling: fjall's own batched durable write rate (`ceiling::fjall`);
//! 2. the HTTP ceiling: an empty axum handler hit by as many client tasks as the workload uses
//!    (`ceiling::empty_http`);
//! 3. Sluice itself: producers and consumers over the native HTTP API against one queue, once per
//!    batch size (`workload`), on an in-process server or on `--server URL`.
//!
//! Results are reported as ratios to the storage ceiling so that runs on different machines can
//! be compared. Every phase stops by itself after its duration; nothing here waits unboundedly.

mod ceiling;
mod progress;
mod report;
mod stats;
mod target;
mod workload;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use sluice_core::limits::{BATCH_ENTRIES_MAX, MESSAGE_BYTES_LIMIT, RECEIVE_MESSAGES_MAX};
use sluice_embedded::Durability;

use crate::report::Report;
use crate::target::Target;

/// Most producer or consumer tasks; each holds one HTTP connection.
const TASKS_MAX: usize = 1_024;
/// Smallest body: the send timestamp takes 16 hex digits.
const BODY_BYTES_MIN: usize = 16;
/// Longest phase; a benchmark that runs for hours is a soak test, not this program.
const PHASE_DURATION_MAX: Duration = Duration::from_secs(60 * 60);

/// Measure queue throughput and latency over HTTP beside the storage and HTTP ceilings.
///
/// Producers and consumers run closed-loop: each waits for its call to be answered before the
/// next. Each body starts with its send time, so consumers measure end-to-end latency (start of
/// the send call to the end of the receive call that returned the message).
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Benchmark the server at this URL instead of starting one in-process. Not read from
    /// `SLUICE_SERVER`: a variable set for everyday commands must not redirect a benchmark.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,

    /// Durability of the in-process server: `fsync` (acknowledge after the batch is synced) or
    /// `interval:MS` (sync every MS milliseconds). Ignored with `--server`.
    #[arg(long, default_value = "fsync", value_parser = parse_durability, value_name = "MODE")]
    pub durability: Durability,

    /// Producer tasks, each sending batches over its own connection.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub producers: usize,

    /// Consumer tasks, each long-polling, then acknowledging what it received in one call.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub consumers: usize,

    /// Size of each message body in bytes (at least 16).
    #[arg(long, default_value_t = 256, value_name = "BYTES")]
    pub body_bytes: usize,

    /// Batch sizes to run, one phase each: messages per send = receive max = receipts per ack.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100", value_name = "LIST")]
    pub batch: Vec<u32>,

    /// Measured time per batch size, after the warm-up [default: 10s, or 3s with --quick].
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub duration: Option<Duration>,

    /// Unmeasured time before each phase [default: 1s, or 500ms with --quick].
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub warmup: Option<Duration>,

    /// Time spent on each ceiling (fjall, empty HTTP handler) [default: 3s, or 1s with --quick].
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub ceiling_duration: Option<Duration>,

    /// Shorter run for a quick look: 3 s phases, 500 ms warm-ups, 1 s ceilings.
    #[arg(long)]
    pub quick: bool,

    /// Also write the results to FILE as a JSON array of objects.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Directory for the temporary data directories [default: the system temp dir]. Put it on the
    /// disk you want to measure: fsync on tmpfs costs nothing.
    #[arg(long, value_name = "DIR")]
    pub tmp_dir: Option<PathBuf>,

    /// Queue to use; it is created if missing and purged before every phase.
    #[arg(long, default_value = "sluice-bench", value_name = "NAME")]
    pub queue: String,

    /// Producers wait while this many messages are sent but not yet received, so the figures
    /// describe a steady state rather than a growing backlog [default: 2 x (producers +
    /// consumers) x batch]. 0 lets producers run ahead without limit.
    #[arg(long, value_name = "MESSAGES")]
    pub backlog_max: Option<u64>,
}

fn parse_durability(s: &str) -> Result<Durability, String> {
    s.parse()
}

/// The settings of one run, checked and with defaults resolved.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub server: Option<String>,
    pub durability: Durability,
    pub producers: usize,
    pub consumers: usize,
    pub body_bytes: usize,
    pub batches: Vec<u32>,
    pub duration: Duration,
    pub warmup: Duration,
    pub ceiling_duration: Duration,
    pub json: Option<PathBuf>,
    pub tmp_dir: PathBuf,
    pub queue: String,
    /// `None`: the default, which depends on the batch size; `Some(0)`: no limit.
    pub backlog_max: Option<u64>,
}

impl Plan {
    fn new(args: BenchArgs) -> anyhow::Result<Plan> {
        let batch_max = (BATCH_ENTRIES_MAX as u32).min(RECEIVE_MESSAGES_MAX);
        if args.batch.is_empty() {
            bail!("--batch needs at least one size, e.g. --batch 1,10,100");
        }
        if let Some(bad) = args.batch.iter().find(|&&b| b == 0 || b > batch_max) {
            bail!("--batch {bad}: a batch holds 1 to {batch_max} messages");
        }
        for (flag, n) in [("--producers", args.producers), ("--consumers", args.consumers)] {
            if n == 0 || n > TASKS_MAX {
                bail!("{flag} {n}: use 1 to {TASKS_MAX}");
            }
        }
        if args.body_bytes < BODY_BYTES_MIN || args.body_bytes as u64 > MESSAGE_BYTES_LIMIT {
            bail!("--body-bytes {}: use {BODY_BYTES_MIN} to {MESSAGE_BYTES_LIMIT}", args.body_bytes);
        }
        let (duration, warmup, ceiling) = if args.quick {
            (Duration::from_secs(3), Duration::from_millis(500), Duration::from_secs(1))
        } else {
            (Duration::from_secs(10), Duration::from_secs(1), Duration::from_secs(3))
        };
        let plan = Plan {
            server: args.server,
            durability: args.durability,
            producers: args.producers,
            consumers: args.consumers,
            body_bytes: args.body_bytes,
            batches: args.batch,
            duration: args.duration.unwrap_or(duration),
            warmup: args.warmup.unwrap_or(warmup),
            ceiling_duration: args.ceiling_duration.unwrap_or(ceiling),
            json: args.json,
            tmp_dir: args.tmp_dir.unwrap_or_else(std::env::temp_dir),
            queue: args.queue,
            backlog_max: args.backlog_max,
        };
        for (flag, d) in
            [("--duration", plan.duration), ("--warmup", plan.warmup), ("--ceiling-duration", plan.ceiling_duration)]
        {
            if d > PHASE_DURATION_MAX {
                bail!(
                    "{flag} {}: at most {}",
                    humantime::format_duration(d),
                    humantime::format_duration(PHASE_DURATION_MAX)
                );
            }
        }
        if plan.duration.is_zero() || plan.ceiling_duration.is_zero() {
            bail!("--duration and --ceiling-duration must be longer than zero");
        }
        Ok(plan)
    }

    /// Most messages sent but not yet received in a phase with this batch size; `None` for no
    /// limit. The default leaves every consumer two full batches waiting for it and every
    /// producer room for two sends in flight, so nobody idles for want of credit.
    pub fn backlog_max(&self, batch: u32) -> Option<u64> {
        match self.backlog_max {
            Some(0) => None,
            Some(n) => Some(n),
            None => Some(2 * (self.producers + self.consumers) as u64 * u64::from(batch)),
        }
    }

    /// How `durability` is written on the command line.
    pub fn durability_label(&self) -> String {
        if self.server.is_some() {
            return "as configured on the server".into();
        }
        match self.durability {
            Durability::Fsync => "fsync".into(),
            Durability::Interval(every) => format!("interval:{}", every.as_millis()),
        }
    }
}

/// Runs the whole benchmark and prints the report on stdout (progress goes to stderr).
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let plan = Plan::new(args)?;
    let started = Instant::now();
    let load_average = report::load_average();

    // Ceilings first, while nothing else competes for the disk and the cores.
    let fjall = ceiling::fjall(&plan).await.context("measuring the fjall ceiling")?;
    let http = ceiling::empty_http(&plan).await.context("measuring the empty-handler HTTP ceiling")?;

    let target = Target::start(&plan).await?;
    let server = target.describe();
    let phases = workload::run(&plan, target.url()).await;
    // Stop the server even when a phase failed, so its data directory is synced and removed.
    let stopped = target.stop().await;
    let phases = phases?;
    stopped?;

    let report = Report {
        plan: &plan,
        server: &server,
        fjall: &fjall,
        http: &http,
        phases: &phases,
        elapsed: started.elapsed(),
        load_average,
    };
    print!("{}", report.render());
    if let Some(path) = &plan.json {
        report.write_json(path).with_context(|| format!("writing {}", path.display()))?;
        println!("results written to {}", path.display());
    }
    Ok(())
}
