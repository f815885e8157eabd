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
//!
//! Two more scenarios (`--scenario`) measure what message groups cost and buy, each against its
//! own baseline in the same run rather than against the ceilings:
//! - `fifo` (module `fifo`): the same load on a standard queue and on FIFO queues with 1, 10
//!   and 1,000 message groups;
//! - `fairness` (module `fairness`): how long a trickle of "quiet" messages waits behind a large
//!   "noisy" backlog on a standard queue, with fair queues (two groups) and without (no groups).
//!
//! The `fanout` scenario (module `fanout`) publishes to one topic with 1, 10 and 100 queue
//! subscriptions and reports publishes and durable deliveries per second.
//!
//! The `jobs` scenario (module `jobs`) runs async jobs end to end with an empty handler (4 and
//! 16 workers) beside a PostgreSQL SKIP LOCKED jobs table and Redis in BullMQ's shape (those
//! two with the `peers` feature).
//!
//! The `schema` scenario (module `schemas`) sends the same 1 KiB JSON body into a queue without
//! and then with schema validation, and reports both send rates and their ratio.
//!
//! The `peers` scenario (module `peers`) runs the same workloads against Sluice and against
//! RabbitMQ, NATS JetStream, Redis Streams and a PostgreSQL queue table on the same machine, and
//! prints the ratios. It is the only part that needs those systems' clients (and the SVG chart's
//! plotters), so it is compiled only with the `peers` feature (on by default); a build without it
//! refuses `--scenario peers` with `PEERS_MISSING` and keeps every other scenario.

mod ceiling;
mod event_system;
mod events;
mod fairness;
mod fanout;
mod fifo;
mod idempotency;
mod job_system;
mod jobs;
mod overload;
mod peer_args;
#[cfg(feature = "peers")]
mod peers;
pub mod process;
mod progress;
mod report;
mod sagas;
mod schedule;
mod schemas;
mod soak;
mod stats;
mod stream_plan;
mod streams;
mod target;
mod workload;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use sluice_core::limits::{BATCH_ENTRIES_MAX, MESSAGE_BYTES_LIMIT, RECEIVE_MESSAGES_MAX};
use sluice_embedded::Durability;

pub use crate::peer_args::PeerArgs;
use crate::report::Report;
use crate::target::Target;

/// Most producer or consumer tasks; each holds one HTTP connection.
const TASKS_MAX: usize = 1_024;
/// Smallest body: the send timestamp takes 16 hex digits.
pub(crate) const BODY_BYTES_MIN: usize = 16;
/// Longest phase; a benchmark that runs for hours is a soak test, not this program.
const PHASE_DURATION_MAX: Duration = Duration::from_secs(60 * 60);
/// Batch sizes of the throughput scenario when `--batch` is not given.
const THROUGHPUT_BATCHES_DEFAULT: [u32; 3] = [1, 10, 100];
/// Largest noisy backlog of the fairness scenario; each message is kept in the server's memory.
const NOISY_BACKLOG_MAX: u64 = 10_000_000;
/// Why a build without the `peers` feature refuses `--scenario peers`, and how to get one that
/// does not.
const PEERS_MISSING: &str = "this sluice was built without the `peers` feature (the peer systems' clients); \
                             rebuild with `cargo build --release` (default features) to run the peers scenario";

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// One standard queue, one phase per batch size, beside the storage and HTTP ceilings.
    Throughput,
    /// A standard queue, then FIFO queues with 1, 10 and 1,000 message groups, batch 10.
    Fifo,
    /// Waits of a quiet group's messages behind a noisy group's backlog, with and without groups.
    Fairness,
    /// Sluice beside RabbitMQ, NATS JetStream, Redis Streams and PostgreSQL, in the same run
    /// (needs the `peers` feature, on in the default build).
    Peers,
    /// A long run at 70 % of the probed max rate, sampling memory and latency, every message
    /// accounted for at the end.
    Soak,
    /// One topic with 1, 10 and 100 queue subscriptions: publishes and deliveries per second.
    Fanout,
    /// Streams: appends, group consumption, end-to-end latency beside Redis Streams, NATS
    /// JetStream and RabbitMQ streams (those need the `peers` feature); replay and restart of a
    /// large stream against the disk's read rate.
    Streams,
    /// Async jobs with an empty handler, 4 and 16 workers, beside a PostgreSQL SKIP LOCKED jobs
    /// table and Redis in BullMQ's shape (those with the `peers` feature).
    Jobs,
    /// Sends of a 1 KiB JSON body without and with schema validation, and their ratio.
    Schema,
    /// The event store: appends with an expected version (1 and 10 per append, many streams
    /// and one hot stream), a catch-up read of `$all`, beside Sluice on PostgreSQL and a plain
    /// PostgreSQL events table (those with the `peers` feature).
    Events,
    /// Producers at 2x, 5x and 10x what consumers take, with a depth limit and without:
    /// accepted and refused rates, and a high-priority trickle's send latency.
    Overload,
    /// Sends without and with an `Idempotency-Key` (`--idempotency-keys`), and their ratio.
    Idempotency,
    /// Sends to a server without keys and, with an API key, to one with keys, and their ratio.
    Auth,
    /// Saga instances of three queue steps with instant participants: instances per second end
    /// to end, and the orchestrator's overhead per step (p50/p99).
    Sagas,
}

impl Scenario {
    /// As written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Throughput => "throughput",
            Scenario::Fifo => "fifo",
            Scenario::Fairness => "fairness",
            Scenario::Peers => "peers",
            Scenario::Soak => "soak",
            Scenario::Fanout => "fanout",
            Scenario::Streams => "streams",
            Scenario::Jobs => "jobs",
            Scenario::Schema => "schema",
            Scenario::Events => "events",
            Scenario::Overload => "overload",
            Scenario::Idempotency => "idempotency",
            Scenario::Auth => "auth",
            Scenario::Sagas => "sagas",
        }
    }
}

/// Measure queue throughput and latency over HTTP beside the storage and HTTP ceilings.
///
/// Producers and consumers run closed-loop: each waits for its call to be answered before the
/// next. Each body starts with its send time, so consumers measure end-to-end latency (start of
/// the send call to the end of the receive call that returned the message).
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// What to measure: `throughput` (batch sizes beside the ceilings), `fifo` (a standard queue
    /// against FIFO queues with 1, 10 and 1,000 groups), `fairness` (a quiet group's waits
    /// behind a noisy backlog, with and without message groups), `peers` (Sluice beside
    /// RabbitMQ, NATS JetStream, Redis Streams and a PostgreSQL queue; see the options below;
    /// needs the `peers` feature, on in the default build)
    /// or `soak` (30 minutes at 70 % of the max rate, sampled every 10 s; exits 1 if a message
    /// was lost or memory passed --memory-max) or `fanout` (one topic with 1, 10 and 100 queue
    /// subscriptions, batches of 10 published closed-loop, no consumers), `streams` (appends,
    /// group consumption and end-to-end latency beside Redis Streams, NATS JetStream and
    /// RabbitMQ streams; replay and restart of a large stream beside the disk's read rate),
    /// `jobs` (async jobs with an empty handler, 4 and 16 workers, beside a PostgreSQL SKIP
    /// LOCKED jobs table and Redis in BullMQ's shape; --postgres-url and --redis-url apply) or
    /// `schema` (batches of 10 JSON orders, 1 KiB by default, sent closed-loop into queues
    /// without and with schema validation; no consumers) or `idempotency` (the same, batches
    /// of 10 sent without and with an `Idempotency-Key`; also `--idempotency-keys`) or `auth`
    /// (the same, to a server without keys and with an API key to a server with keys) or `sagas`
    /// (saga instances of 3 queue steps, --producers starters in closed loop [default 16],
    /// --consumers instant participants per step queue: instances/s and the orchestrator's
    /// overhead per step).
    #[arg(long, value_enum, default_value_t = Scenario::Throughput, value_name = "NAME")]
    pub scenario: Scenario,

    /// What an `Idempotency-Key` costs: sends per second without and with one, in the same run,
    /// and their ratio (the `idempotency` scenario).
    #[arg(long)]
    pub idempotency_keys: bool,

    /// Benchmark the server at this URL instead of starting one in-process. Not read from
    /// `SLUICE_SERVER`: a variable set for everyday commands must not redirect a benchmark.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,

    /// Durability of the in-process server: `fsync` (acknowledge after the batch is synced) or
    /// `interval:MS` (sync every MS milliseconds) [default: fsync]. Ignored with `--server`;
    /// `peers` runs both (see --sluice-interval-ms).
    #[arg(long, value_parser = parse_durability, value_name = "MODE")]
    pub durability: Option<Durability>,

    /// Producer tasks, each sending batches over its own connection (fairness: tasks loading
    /// the noisy backlog; one noisy and one quiet producer run while measuring) [default: 4;
    /// `peers` uses --clients].
    #[arg(long, value_name = "N")]
    pub producers: Option<usize>,

    /// Consumer tasks, each long-polling, then acknowledging what it received in one call
    /// [default: 4; `peers` uses --clients].
    #[arg(long, value_name = "N")]
    pub consumers: Option<usize>,

    /// Size of each message body in bytes, at least 16 [default: 256; `schema`: 1024, at least
    /// the bare order's size; `peers` uses --sizes].
    #[arg(long, value_name = "BYTES")]
    pub body_bytes: Option<usize>,

    /// Batch sizes to run, one phase each: messages per send = receive max = receipts per ack
    /// [default: 1,10,100]. Throughput scenario: one phase per size; `peers`: one size, the most
    /// messages per send and per receive for every system [default: 100]; `fifo` uses batch 10,
    /// `fairness` sends noisy batches of 1,000 and receives 10 at a time.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub batch: Vec<u32>,

    /// Measured time per phase (a batch size, a queue of `fifo`, a mode of `fairness`), after the
    /// warm-up [default: 10s, or 3s with --quick]. Also bounds `fairness`'s load and drain
    /// stages (at least 5s each).
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub duration: Option<Duration>,

    /// Unmeasured time before each phase [default: 1s, or 500ms with --quick].
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub warmup: Option<Duration>,

    /// Time spent on each ceiling (fjall, empty HTTP handler) [default: 3s, or 1s with --quick].
    /// Throughput scenario only.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub ceiling_duration: Option<Duration>,

    /// Shorter run for a quick look: 3 s phases, 500 ms warm-ups, 1 s ceilings, a noisy backlog
    /// of 20,000; `peers`: 2 s phases, 256 B only, 4/4 clients only, a drain of 20,000.
    #[arg(long)]
    pub quick: bool,

    /// Also write the results to FILE as a JSON array of objects.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Directory for the temporary data directories [default: the system temp dir]. Put it on the
    /// disk you want to measure: fsync on tmpfs costs nothing.
    #[arg(long, value_name = "DIR")]
    pub tmp_dir: Option<PathBuf>,

    /// Queue to use; it is created if missing and purged before every phase. `fifo` and
    /// `fairness` use it as the prefix of their own queues (NAME-standard, NAME-fifo-10.fifo,
    /// NAME-fair-groups, ...), which they create, purge and delete.
    #[arg(long, default_value = "sluice-bench", value_name = "NAME")]
    pub queue: String,

    /// Producers wait while this many messages are sent but not yet received, so the figures
    /// describe a steady state rather than a growing backlog [default: 2 x (producers +
    /// consumers) x batch]. 0 lets producers run ahead without limit. Not for `fairness`, whose
    /// backlog is `--noisy-backlog`.
    #[arg(long, value_name = "MESSAGES")]
    pub backlog_max: Option<u64>,

    /// Fairness scenario: messages the noisy producer loads before measuring and keeps queued
    /// while measuring [default: 100000, or 20000 with --quick].
    #[arg(long, value_name = "MESSAGES")]
    pub noisy_backlog: Option<u64>,

    /// Soak scenario: the target rate in messages per second [default: 70 % of the max rate
    /// measured by a short closed-loop probe just before].
    #[arg(long, value_name = "MSGS_PER_SEC")]
    pub rate: Option<f64>,

    /// Soak scenario: how often to sample rates, latency, memory, open files and disk use
    /// [default: 10s, or 2s with --quick].
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub sample_every: Option<Duration>,

    /// Soak scenario: the resident memory (MiB) the process must stay under, or the run fails
    /// [default: 512].
    #[arg(long, value_name = "MIB")]
    pub memory_max: Option<u64>,

    /// Streams scenario: records of the stream that is replayed from the start and restarted
    /// with [default: 10000000, or 1000000 with --quick]. The append, consume and end-to-end
    /// phases take --sizes, --batch (default 1,10,100), --only (sluice, redis, nats, rabbitmq or
    /// a system name) and the peers' URLs; --drain-messages is the consume phase's preload
    /// [default: 1000000, or 50000 with --quick].
    #[arg(long, value_name = "RECORDS")]
    pub stream_records: Option<u64>,

    /// Events scenario: the size of the log read from position 0 by the catch-up phase (loaded
    /// up to this many events after the append phases) [default: 200000, or 20000 with
    /// --quick; 1000000 for the long run]. Writers are --producers [default: 16].
    #[arg(long, value_name = "EVENTS")]
    pub events_catchup: Option<u64>,

    #[command(flatten)]
    pub peers: PeerArgs,
}

fn parse_durability(s: &str) -> Result<Durability, String> {
    s.parse()
}

/// The settings of one run, checked and with defaults resolved.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub scenario: Scenario,
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
    /// Fairness scenario: the noisy group's backlog.
    pub noisy_backlog: u64,
    pub quick: bool,
    /// Peers scenario: its own settings; `None` for the other scenarios.
    #[cfg(feature = "peers")]
    pub peers: Option<peers::PeerPlan>,
    /// Soak scenario: its own settings; `None` for the other scenarios.
    pub soak: Option<soak::SoakPlan>,
    pub streams: Option<stream_plan::StreamPlan>,
    /// Jobs scenario: the PostgreSQL and Redis to run beside Sluice (`--postgres-url`,
    /// `--redis-url`).
    #[cfg_attr(not(feature = "peers"), allow(dead_code))]
    pub job_peer_urls: (String, String),
    /// Events scenario: writers per append phase, and the catch-up log's size.
    pub events_writers: usize,
    pub events_catchup: u64,
}

impl Plan {
    fn new(mut args: BenchArgs) -> anyhow::Result<Plan> {
        if args.idempotency_keys {
            if !matches!(args.scenario, Scenario::Throughput | Scenario::Idempotency) {
                bail!(
                    "--idempotency-keys is the idempotency scenario; it cannot run with --scenario {}",
                    args.scenario.name()
                );
            }
            args.scenario = Scenario::Idempotency;
        }
        // First, so that no complaint about its flags hides the reason none of them could work.
        if args.scenario == Scenario::Peers && !cfg!(feature = "peers") {
            bail!(PEERS_MISSING);
        }
        let batch_max = (BATCH_ENTRIES_MAX as u32).min(RECEIVE_MESSAGES_MAX);
        // Refused rather than ignored, so that nobody reads figures for settings that did not apply.
        let scenario = args.scenario.name();
        // The peers scenario takes one batch size and measures ceilings too.
        if !matches!(args.scenario, Scenario::Throughput | Scenario::Peers | Scenario::Streams)
            && !args.batch.is_empty()
        {
            bail!(
                "--batch applies to the throughput, peers and streams scenarios only; {scenario} uses fixed batch sizes"
            );
        }
        if args.scenario != Scenario::Streams && args.stream_records.is_some() {
            bail!("--stream-records applies to the streams scenario only");
        }
        if !matches!(args.scenario, Scenario::Throughput | Scenario::Peers) && args.ceiling_duration.is_some() {
            bail!(
                "--ceiling-duration applies to the throughput and peers scenarios only; {scenario} measures no ceilings"
            );
        }
        if args.scenario == Scenario::Fairness && args.backlog_max.is_some() {
            bail!("--backlog-max does not apply to the fairness scenario; use --noisy-backlog");
        }
        if args.scenario != Scenario::Fairness && args.noisy_backlog.is_some() {
            bail!("--noisy-backlog applies to the fairness scenario only");
        }
        if args.scenario == Scenario::Sagas {
            if args.backlog_max.is_some() {
                bail!("--backlog-max does not apply to the sagas scenario: its starters run closed loop");
            }
            if args.body_bytes.is_some() {
                bail!("--body-bytes does not apply to the sagas scenario: its step messages are the saga's own");
            }
        }
        if args.scenario == Scenario::Auth && args.server.is_some() {
            bail!("--server does not apply to the auth scenario: it starts two servers, one without keys and one with");
        }
        if matches!(args.scenario, Scenario::Fanout | Scenario::Schema | Scenario::Idempotency | Scenario::Auth) {
            if args.consumers.is_some() {
                bail!(
                    "--consumers does not apply to the {scenario} scenario: it measures the sending side, nobody consumes"
                );
            }
            if args.backlog_max.is_some() {
                bail!(
                    "--backlog-max does not apply to the {scenario} scenario: its queues keep every message until the phase ends"
                );
            }
        }
        let soak_flags: Vec<&str> = [
            ("--rate", args.rate.is_some()),
            ("--sample-every", args.sample_every.is_some()),
            ("--memory-max", args.memory_max.is_some()),
        ]
        .iter()
        .filter_map(|&(flag, given)| given.then_some(flag))
        .collect();
        if args.scenario != Scenario::Soak && !soak_flags.is_empty() {
            bail!("{} applies to the soak scenario only", soak_flags.join(", "));
        }
        let mut peer_flags = args.peers.given();
        if args.scenario == Scenario::Jobs {
            // The jobs scenario runs beside these two as well.
            peer_flags.retain(|f| !matches!(*f, "--postgres-url" | "--redis-url"));
            if args.server.is_some() {
                bail!("--server does not apply to the jobs scenario: it starts its own Sluice");
            }
        }
        if args.scenario == Scenario::Events {
            // The events scenario runs beside a PostgreSQL table and Sluice on PostgreSQL.
            peer_flags.retain(|f| *f != "--postgres-url");
            if args.server.is_some() {
                bail!("--server does not apply to the events scenario: it starts its own Sluice");
            }
        }
        if !matches!(args.scenario, Scenario::Peers | Scenario::Streams) && !peer_flags.is_empty() {
            bail!("{} applies to the peers and streams scenarios only", peer_flags.join(", "));
        }
        if matches!(args.scenario, Scenario::Peers | Scenario::Streams) {
            let sluice_only = [
                ("--server", args.server.is_some(), "peers starts its own Sluice servers"),
                ("--durability", args.durability.is_some(), "peers runs both fsync and --sluice-interval-ms"),
                ("--producers", args.producers.is_some(), "use --clients"),
                ("--consumers", args.consumers.is_some(), "use --clients"),
                ("--body-bytes", args.body_bytes.is_some(), "use --sizes"),
            ];
            if let Some((flag, _, instead)) = sluice_only.iter().find(|(_, given, _)| *given) {
                bail!("{flag} does not apply to the {scenario} scenario: {instead}");
            }
            if args.scenario == Scenario::Peers && args.batch.len() > 1 {
                bail!("--batch takes one size in the peers scenario");
            }
        }
        #[cfg(feature = "peers")]
        let peers = match args.scenario {
            Scenario::Peers => Some(
                peers::PeerPlan::new(args.peers.clone(), args.batch.first().copied(), args.quick)
                    .map_err(anyhow::Error::msg)?,
            ),
            _ => None,
        };
        let batches = match args.scenario {
            Scenario::Throughput if args.batch.is_empty() => THROUGHPUT_BATCHES_DEFAULT.to_vec(),
            Scenario::Throughput => args.batch,
            Scenario::Fifo => vec![fifo::BATCH],
            Scenario::Fairness => vec![fairness::RECEIVE_MAX],
            #[cfg(feature = "peers")]
            Scenario::Peers => vec![peers.as_ref().map_or(1, |p| p.batch as u32)],
            #[cfg(not(feature = "peers"))]
            Scenario::Peers => bail!(PEERS_MISSING),
            Scenario::Soak => vec![soak::SOAK_BATCH],
            Scenario::Fanout => vec![fanout::PUBLISH_BATCH],
            Scenario::Schema => vec![schemas::SEND_BATCH],
            Scenario::Overload => vec![1],
            Scenario::Idempotency | Scenario::Auth => vec![idempotency::SEND_BATCH],
            Scenario::Jobs | Scenario::Events | Scenario::Sagas => vec![1],
            Scenario::Streams if args.batch.is_empty() => THROUGHPUT_BATCHES_DEFAULT.to_vec(),
            Scenario::Streams => args.batch.clone(),
        };
        let streams = match args.scenario {
            Scenario::Streams => Some(
                stream_plan::StreamPlan::new(&args.peers, args.stream_records, &batches, args.quick)
                    .map_err(anyhow::Error::msg)?,
            ),
            _ => None,
        };
        let soak = match args.scenario {
            Scenario::Soak => Some(soak::SoakPlan::new(args.rate, args.sample_every, args.memory_max, args.quick)?),
            _ => None,
        };
        if let Some(bad) = batches.iter().find(|&&b| b == 0 || b > batch_max) {
            bail!("--batch {bad}: a batch holds 1 to {batch_max} messages");
        }
        // The peers scenario's ceilings use these: an empty-handler client per producer and consumer.
        let producers = args.producers.unwrap_or(match args.scenario {
            Scenario::Sagas => sagas::STARTERS_DEFAULT,
            _ => 4,
        });
        let consumers = args.consumers.unwrap_or(4);
        let body_bytes = args.body_bytes.unwrap_or(match args.scenario {
            Scenario::Schema => schemas::BODY_BYTES_DEFAULT,
            _ => 256,
        });
        for (flag, n) in [("--producers", producers), ("--consumers", consumers)] {
            if n == 0 || n > TASKS_MAX {
                bail!("{flag} {n}: use 1 to {TASKS_MAX}");
            }
        }
        let body_bytes_min = match args.scenario {
            Scenario::Soak => soak::SOAK_BODY_BYTES_MIN,
            Scenario::Schema => schemas::body_bytes_min(),
            _ => BODY_BYTES_MIN,
        };
        if body_bytes < body_bytes_min || body_bytes as u64 > MESSAGE_BYTES_LIMIT {
            bail!("--body-bytes {body_bytes}: use {body_bytes_min} to {MESSAGE_BYTES_LIMIT}");
        }
        let (duration, warmup, ceiling, noisy_backlog) = if args.quick && args.scenario == Scenario::Peers {
            // Nine systems must fit in two minutes.
            (Duration::from_secs(2), Duration::from_millis(500), Duration::from_secs(1), 20_000)
        } else if args.scenario == Scenario::Soak {
            let duration = if args.quick { soak::SOAK_DURATION_QUICK } else { soak::SOAK_DURATION_DEFAULT };
            (duration, Duration::from_millis(500), Duration::from_secs(1), 20_000)
        } else if args.quick {
            (Duration::from_secs(3), Duration::from_millis(500), Duration::from_secs(1), 20_000)
        } else {
            (Duration::from_secs(10), Duration::from_secs(1), Duration::from_secs(3), 100_000)
        };
        let noisy_backlog = args.noisy_backlog.unwrap_or(noisy_backlog);
        let job_peer_urls = (
            args.peers.postgres_url.clone().unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".into()),
            args.peers.redis_url.clone().unwrap_or_else(|| "redis://127.0.0.1:6379/".into()),
        );
        if noisy_backlog == 0 || noisy_backlog > NOISY_BACKLOG_MAX {
            bail!("--noisy-backlog {noisy_backlog}: use 1 to {NOISY_BACKLOG_MAX}");
        }
        if args.scenario != Scenario::Events && args.events_catchup.is_some() {
            bail!("--events-catchup applies to the events scenario only");
        }
        let events_catchup = args.events_catchup.unwrap_or(if args.quick { 20_000 } else { 200_000 });
        let events_writers = args.producers.unwrap_or(events::WRITERS_DEFAULT);
        let plan = Plan {
            scenario: args.scenario,
            server: args.server,
            durability: args.durability.unwrap_or(Durability::Fsync),
            producers,
            consumers,
            body_bytes,
            batches,
            duration: args.duration.unwrap_or(duration),
            warmup: args.warmup.unwrap_or(warmup),
            ceiling_duration: args.ceiling_duration.unwrap_or(ceiling),
            json: args.json,
            tmp_dir: args.tmp_dir.unwrap_or_else(std::env::temp_dir),
            queue: args.queue,
            backlog_max: args.backlog_max,
            noisy_backlog,
            quick: args.quick,
            #[cfg(feature = "peers")]
            peers,
            soak,
            streams,
            job_peer_urls,
            events_writers,
            events_catchup,
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
    match plan.scenario {
        Scenario::Throughput => throughput(&plan).await,
        Scenario::Fifo => fifo::run(&plan).await,
        Scenario::Fairness => fairness::run(&plan).await,
        #[cfg(feature = "peers")]
        Scenario::Peers => peers::run(&plan).await,
        #[cfg(not(feature = "peers"))]
        Scenario::Peers => bail!(PEERS_MISSING),
        Scenario::Fanout => fanout::run(&plan).await,
        Scenario::Schema => schemas::run(&plan).await,
        Scenario::Overload => overload::run(&plan).await,
        Scenario::Idempotency => idempotency::run(&plan, idempotency::Door::IdempotencyKey).await,
        Scenario::Auth => idempotency::run(&plan, idempotency::Door::ApiKey).await,
        Scenario::Sagas => sagas::run(&plan).await,
        Scenario::Streams => {
            let streams = plan.streams.clone().expect("the streams scenario has a streams plan");
            streams::run(&plan, &streams).await
        }
        Scenario::Jobs => jobs::run(&plan).await,
        Scenario::Events => events::run(&plan).await,
        Scenario::Soak => {
            let soak = plan.soak.clone().expect("the soak scenario has a soak plan");
            soak::run(&plan, &soak).await
        }
    }
}

/// Runs `work` against the server under test and stops an in-process server afterwards, even
/// when `work` failed, so that its data directory is synced and removed. Returns what `work`
/// returned and the server's description for the report.
pub(crate) async fn with_target<T>(
    plan: &Plan,
    work: impl AsyncFnOnce(&str) -> anyhow::Result<T>,
) -> anyhow::Result<(T, String)> {
    with_target_started(plan, async |target: &Target| work(target.url()).await).await
}

/// `with_target`, for work that needs more of the target than its URL.
pub(crate) async fn with_target_started<T>(
    plan: &Plan,
    work: impl AsyncFnOnce(&Target) -> anyhow::Result<T>,
) -> anyhow::Result<(T, String)> {
    let target = Target::start(plan).await?;
    let server = target.describe();
    let outcome = work(&target).await;
    let stopped = target.stop().await;
    let outcome = outcome?;
    stopped?;
    Ok((outcome, server))
}

/// Prints a report on stdout and writes its JSON rows to `--json` if given.
pub(crate) fn publish(plan: &Plan, text: &str, json: serde_json::Value) -> anyhow::Result<()> {
    print!("{text}");
    if let Some(path) = &plan.json {
        report::write_json(path, &json).with_context(|| format!("writing {}", path.display()))?;
        println!("results written to {}", path.display());
    }
    Ok(())
}

/// The throughput scenario: ceilings, then one phase per batch size.
async fn throughput(plan: &Plan) -> anyhow::Result<()> {
    let started = Instant::now();
    let load_average = report::load_average();

    // Ceilings first, while nothing else competes for the disk and the cores.
    let fjall = ceiling::fjall(plan).await.context("measuring the fjall ceiling")?;
    let http = ceiling::empty_http(plan).await.context("measuring the empty-handler HTTP ceiling")?;

    let (phases, server) = with_target(plan, async |url| workload::run(plan, url).await).await?;

    let report = Report {
        plan,
        server: &server,
        fjall: &fjall,
        http: &http,
        phases: &phases,
        elapsed: started.elapsed(),
        load_average,
    };
    publish(plan, &report.render(), report.json())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: BenchArgs,
    }

    /// The plan for `sluice bench ARGS`, or the error's first line.
    fn plan(args: &str) -> Result<Plan, String> {
        let cli = Cli::try_parse_from(std::iter::once("bench").chain(args.split_whitespace())).map_err(|e| {
            let text = e.to_string();
            text.lines().next().unwrap_or_default().to_owned()
        })?;
        Plan::new(cli.args).map_err(|e| e.to_string())
    }

    #[test]
    fn each_scenario_gets_its_batches_and_backlog() {
        let check = |args: &str, batches: &[u32], noisy_backlog: u64| {
            let plan = plan(args).unwrap_or_else(|e| panic!("{args}: {e}"));
            assert_eq!((plan.batches.as_slice(), plan.noisy_backlog), (batches, noisy_backlog), "{args}");
        };
        check("", &[1, 10, 100], 100_000);
        check("--batch 5,50", &[5, 50], 100_000);
        check("--scenario fifo", &[10], 100_000);
        check("--scenario fanout", &[10], 100_000);
        check("--scenario schema", &[10], 100_000);
        check("--scenario sagas", &[1], 100_000);
        let sagas = plan("--scenario sagas").expect("sagas");
        assert_eq!((sagas.producers, sagas.consumers), (sagas::STARTERS_DEFAULT, 4));
        assert_eq!(plan("--scenario schema").map(|p| p.body_bytes), Ok(schemas::BODY_BYTES_DEFAULT));
        check("--scenario fairness --quick", &[10], 20_000);
        check("--scenario fairness --noisy-backlog 500", &[10], 500);
        assert_eq!(plan("--scenario fifo").map(|p| p.scenario), Ok(Scenario::Fifo));
        let soak = plan("--scenario soak").expect("soak");
        assert_eq!((soak.duration, soak.batches.as_slice()), (soak::SOAK_DURATION_DEFAULT, &[soak::SOAK_BATCH][..]));
        let quick = plan("--scenario soak --quick --rate 500").expect("quick soak");
        let settings = quick.soak.expect("soak settings");
        assert_eq!(
            (quick.duration, settings.rate, settings.sample_every),
            (soak::SOAK_DURATION_QUICK, Some(500.0), soak::SAMPLE_EVERY_QUICK)
        );
    }

    #[test]
    fn settings_a_scenario_does_not_use_are_refused() {
        let refused = |args: &str, expected: &str| {
            let error = plan(args).err().unwrap_or_else(|| panic!("{args} was accepted"));
            assert!(error.contains(expected), "{args}: {error}");
        };
        refused("--scenario fifo --batch 10", "--batch applies to the throughput, peers and streams scenarios only");
        refused("--scenario fairness --ceiling-duration 1s", "--ceiling-duration applies");
        refused("--scenario fairness --backlog-max 10", "use --noisy-backlog");
        refused("--noisy-backlog 10", "--noisy-backlog applies to the fairness scenario only");
        refused("--scenario fairness --noisy-backlog 0", "--noisy-backlog 0: use 1 to");
        refused("--scenario lifo", "invalid value 'lifo'");
        refused("--rate 100", "--rate applies to the soak scenario only");
        refused("--scenario soak --rate 0", "--rate 0: use a rate above zero");
        refused("--scenario soak --body-bytes 20", "--body-bytes 20: use 32 to");
        refused("--scenario soak --sample-every 0s", "--sample-every: use");
        refused("--scenario fanout --consumers 2", "--consumers does not apply to the fanout scenario");
        refused("--scenario fanout --backlog-max 10", "--backlog-max does not apply to the fanout scenario");
        refused("--scenario fanout --batch 10", "--batch applies to the throughput, peers and streams scenarios only");
        refused("--scenario schema --consumers 2", "--consumers does not apply to the schema scenario");
        refused("--scenario schema --backlog-max 10", "--backlog-max does not apply to the schema scenario");
        refused("--scenario schema --body-bytes 64", "--body-bytes 64: use");
        refused("--scenario sagas --backlog-max 10", "--backlog-max does not apply to the sagas scenario");
        refused("--scenario sagas --body-bytes 64", "--body-bytes does not apply to the sagas scenario");
        refused("--scenario sagas --batch 10", "--batch applies to the throughput, peers and streams scenarios only");
    }

    #[cfg(feature = "peers")]
    #[test]
    fn the_peers_scenario_takes_a_batch_and_a_ceiling_duration() {
        // Its report's reproduce line passes both.
        let peers = plan("--scenario peers --batch 10 --ceiling-duration 1s").expect("peers takes --batch");
        assert_eq!((peers.batches, peers.ceiling_duration), (vec![10], Duration::from_secs(1)));
    }

    #[cfg(not(feature = "peers"))]
    #[test]
    fn without_its_feature_the_peers_scenario_says_how_to_rebuild() {
        // Before any complaint about its flags: none of them could work in this build.
        for args in ["--scenario peers", "--scenario peers --server http://x --only redis"] {
            assert_eq!(plan(args).err().as_deref(), Some(PEERS_MISSING), "{args}");
        }
        assert!(PEERS_MISSING.contains("cargo build --release"));
        // The other scenarios do not need it.
        assert_eq!(plan("--scenario fanout").map(|p| p.scenario), Ok(Scenario::Fanout));
    }
}
