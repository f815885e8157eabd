//! The `peers` scenario: Sluice beside RabbitMQ, NATS JetStream, Redis Streams and a PostgreSQL
//! queue table, on the same machine in one run, each through its maintained Rust client and at
//! stated durability, with the results as ratios (DESIGN.md §5). Sluice runs on its embedded store
//! (over the native API, and over the SQS API through aws-sdk-sqs) and on PostgreSQL (one server,
//! and three sharing the database); when a system on PostgreSQL is measured, so is the database's
//! own limit, with pgbench (`pgbench`).
//!
//! Every system implements `driver::Peer` in a file of its own; `load` drives any of them with
//! the same workloads (max rate, fixed rate at half the max, backlog drain); `report` prints the
//! table and the ratios, writes the JSON rows, and `chart` draws the SVG.
//!
//! Each phase gets a fresh queue (stream, table) that is deleted afterwards, failed or not, and
//! each system is stopped before the next one starts, so no two systems compete for the cores.
//! A system that cannot be reached or set up is reported as skipped, with the reason, and the
//! run goes on with the others.
//!
//! Compiled only with the `peers` feature, which brings in those systems' clients and plotters;
//! the flags live in `peer_args` so that every build parses them.

mod chart;
mod driver;
pub(crate) mod events;
pub(crate) mod jobs;
mod load;
mod nats;
mod pgbench;
mod postgres;
mod rabbitmq;
mod redis;
mod report;
mod sluice;
mod sluice_pg;
mod sluice_sqs;
mod spawned;
mod stream_sluice;
pub(crate) mod streams;
mod system;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use sluice_embedded::Durability as StoreDurability;

use crate::Plan;
use crate::peer_args::PeerArgs;
use driver::Connected;
use load::{Measured, Pace, Shape, Timing};
pub(crate) use system::System;

/// Fixed-rate phases run at this fraction of the max rate measured just before them.
const FIXED_RATE_FRACTION: f64 = 0.5;
/// Most messages of the drain workload; each is kept by the system under test.
const DRAIN_MESSAGES_MAX: u64 = 10_000_000;
/// Largest message size.
const BODY_BYTES_MAX: usize = 1 << 20;
/// Most producers (and as many consumers) per workload.
const CLIENTS_MAX: usize = 256;
/// Batch when `--batch` is not given: messages per send and most messages per receive.
const BATCH_DEFAULT: usize = 100;
/// Clients of the drain workload when the list has this count; otherwise its first count.
const DRAIN_CLIENTS_PREFERRED: usize = 4;

/// The peers scenario's settings, checked and with defaults resolved.
#[derive(Debug, Clone)]
pub(crate) struct PeerPlan {
    pub systems: Vec<System>,
    pub sizes: Vec<usize>,
    pub clients: Vec<usize>,
    pub batch: usize,
    pub drain_messages: u64,
    /// Most time each drain stage (load, consume) may take.
    pub drain_stage_max: Duration,
    pub svg: Option<PathBuf>,
    pub sluice_interval_ms: u64,
    pub rabbitmq_url: String,
    pub nats_url: String,
    pub redis_url: String,
    pub postgres_url: String,
}

impl PeerPlan {
    pub(crate) fn new(args: PeerArgs, batch: Option<u32>, quick: bool) -> Result<PeerPlan, String> {
        let systems = system::select(&args.only)?;
        let sizes = match (args.sizes.is_empty(), quick) {
            (false, _) => args.sizes,
            (true, true) => vec![256],
            (true, false) => vec![256, 4_096],
        };
        if let Some(bad) = sizes.iter().find(|&&s| !(crate::BODY_BYTES_MIN..=BODY_BYTES_MAX).contains(&s)) {
            return Err(format!("--sizes {bad}: use {} to {BODY_BYTES_MAX}", crate::BODY_BYTES_MIN));
        }
        let clients = match (args.clients.is_empty(), quick) {
            (false, _) => args.clients,
            (true, true) => vec![4],
            (true, false) => vec![1, 4, 16],
        };
        if let Some(bad) = clients.iter().find(|&&c| c == 0 || c > CLIENTS_MAX) {
            return Err(format!("--clients {bad}: use 1 to {CLIENTS_MAX}"));
        }
        let batch = batch.map_or(BATCH_DEFAULT, |b| b as usize);
        let drain_messages = args.drain_messages.unwrap_or(if quick { 20_000 } else { 1_000_000 });
        if drain_messages > DRAIN_MESSAGES_MAX {
            return Err(format!("--drain-messages {drain_messages}: at most {DRAIN_MESSAGES_MAX}"));
        }
        let sluice_interval_ms = args.sluice_interval_ms.unwrap_or(10);
        format!("interval:{sluice_interval_ms}")
            .parse::<StoreDurability>()
            .map_err(|e| format!("--sluice-interval-ms: {e}"))?;
        Ok(PeerPlan {
            systems,
            sizes,
            clients,
            batch,
            drain_messages,
            drain_stage_max: if quick { Duration::from_secs(30) } else { Duration::from_secs(300) },
            svg: args.svg,
            sluice_interval_ms,
            rabbitmq_url: args.rabbitmq_url.unwrap_or_else(|| "amqp://guest:guest@127.0.0.1:5672/%2f".into()),
            nats_url: args.nats_url.unwrap_or_else(|| "nats://127.0.0.1:4222".into()),
            redis_url: args.redis_url.unwrap_or_else(|| "redis://127.0.0.1:6379/".into()),
            postgres_url: args.postgres_url.unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".into()),
        })
    }

    /// Producers (and consumers) of the drain workload.
    pub fn drain_clients(&self) -> usize {
        if self.clients.contains(&DRAIN_CLIENTS_PREFERRED) { DRAIN_CLIENTS_PREFERRED } else { self.clients[0] }
    }
}

/// Which workload a row measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Mode {
    MaxRate,
    /// At this many messages per second in all.
    FixedRate(f64),
    /// Of this many messages.
    Drain(u64),
}

/// One system × workload result.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub system: System,
    pub body_bytes: usize,
    pub clients: usize,
    pub batch: usize,
    pub mode: Mode,
    pub measured: Measured,
}

/// What the report says about one system: how it was set up, or why it was not measured.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    pub system: System,
    pub version: String,
    pub settings: String,
    pub durability: system::Durability,
    pub durability_setting: String,
    pub batch: usize,
    /// Set when the system could not be measured, or stopped being measured part-way.
    pub failure: Option<String>,
}

pub(crate) async fn run(plan: &Plan) -> anyhow::Result<()> {
    let peers = plan.peers.as_ref().context("the peers scenario has its settings")?;
    let started = Instant::now();
    let load_average = crate::report::load_average();
    let fjall = crate::ceiling::fjall(plan).await.context("measuring the fjall ceiling")?;
    let http = crate::ceiling::empty_http(plan).await.context("measuring the empty-handler HTTP ceiling")?;
    let pgbench = if peers.systems.iter().any(|s| s.uses_postgres()) {
        let bar = crate::progress::phase("ceiling: pgbench", pgbench::PGBENCH_DURATION);
        let measured = pgbench::measure(&peers.postgres_url).await.map_err(|e| format!("{e:#}"));
        bar.finish_and_clear();
        Some(measured)
    } else {
        None
    };

    let epoch = Instant::now();
    let names = QueueNames::new(&plan.queue);
    let mut rows = Vec::new();
    let mut facts = Vec::new();
    for &system in &peers.systems {
        // An interrupted run still stops the system (killing any server it started) before exiting.
        let measured = tokio::select! {
            measured = measure(plan, peers, system, epoch, &names, &mut rows) => measured,
            _ = tokio::signal::ctrl_c() => bail!("interrupted; the system being measured was stopped"),
        };
        facts.push(measured);
    }

    let report = report::Report {
        plan,
        peers,
        fjall: &fjall,
        http: &http,
        pgbench: pgbench.as_ref(),
        facts: &facts,
        rows: &rows,
        elapsed: started.elapsed(),
        load_average,
    };
    crate::publish(plan, &report.render(), report.json())?;
    if let Some(path) = &peers.svg {
        chart::draw(path, &rows, &facts).with_context(|| format!("writing {}", path.display()))?;
        println!("chart written to {}", path.display());
    }
    Ok(())
}

/// Generates the queue (stream, table) names of a run: valid for every system, unique to the run.
struct QueueNames {
    prefix: String,
    next: std::sync::atomic::AtomicU64,
}

impl QueueNames {
    fn new(prefix: &str) -> QueueNames {
        QueueNames { prefix: format!("{}_{}", identifier(prefix), crate::workload::run_nonce()), next: 0.into() }
    }

    fn next(&self) -> String {
        format!("{}_{}", self.prefix, self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

/// `name` as a lower-case identifier every system accepts: letters, digits and underscores,
/// starting with a letter.
fn identifier(name: &str) -> String {
    let mut out: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).take(24).collect();
    if !out.starts_with(|c: char| c.is_ascii_lowercase()) {
        out.insert(0, 'q');
    }
    out
}

async fn connect(plan: &Plan, peers: &PeerPlan, system: System) -> anyhow::Result<Connected> {
    match system {
        System::SluiceFsync => sluice::connect(&plan.tmp_dir, StoreDurability::Fsync).await,
        System::SluiceInterval => {
            let every = Duration::from_millis(peers.sluice_interval_ms);
            sluice::connect(&plan.tmp_dir, StoreDurability::Interval(every)).await
        }
        System::SluiceSqs => sluice_sqs::connect(&plan.tmp_dir).await,
        System::SluicePg | System::SluicePg3Nodes => {
            sluice_pg::connect(&peers.postgres_url, system.pg_nodes().unwrap_or(1)).await
        }
        System::RabbitClassic => rabbitmq::connect(&peers.rabbitmq_url, rabbitmq::QueueType::Classic).await,
        System::RabbitQuorum => rabbitmq::connect(&peers.rabbitmq_url, rabbitmq::QueueType::Quorum).await,
        System::NatsDefault => nats::connect_default(&peers.nats_url).await,
        System::NatsAlways => nats::connect_always(&plan.tmp_dir).await,
        System::RedisDefault => redis::connect_default(&peers.redis_url).await,
        System::RedisAlways => redis::connect_always(&plan.tmp_dir).await,
        System::Postgres => postgres::connect(&peers.postgres_url).await,
    }
}

/// Connects to `system`, runs every workload on it, and stops it; results go to `rows`.
async fn measure(
    plan: &Plan,
    peers: &PeerPlan,
    system: System,
    epoch: Instant,
    names: &QueueNames,
    rows: &mut Vec<Row>,
) -> Facts {
    let connected = match connect(plan, peers, system).await {
        Ok(connected) => connected,
        Err(e) => {
            return Facts {
                system,
                version: "-".into(),
                settings: "-".into(),
                durability: system.durability(),
                durability_setting: "-".into(),
                batch: 0,
                failure: Some(format!("skipped: {e:#}")),
            };
        }
    };
    let batch = peers.batch.min(connected.batch_max);
    let mut facts = Facts {
        system,
        version: connected.version,
        settings: connected.settings,
        durability: connected.durability,
        durability_setting: connected.durability_setting,
        batch,
        failure: None,
    };
    let peer = connected.peer;
    let outcome = workloads(plan, peers, system, peer.as_ref(), batch, epoch, names, rows).await;
    let stopped = peer.stop().await;
    facts.failure = match (outcome, stopped) {
        (Err(e), _) => Some(format!("failed part-way: {e:#}")),
        (Ok(()), Err(e)) => Some(format!("measured, but stopping it failed: {e:#}")),
        (Ok(()), Ok(())) => None,
    };
    facts
}

#[allow(clippy::too_many_arguments)]
async fn workloads(
    plan: &Plan,
    peers: &PeerPlan,
    system: System,
    peer: &dyn driver::Peer,
    batch: usize,
    epoch: Instant,
    names: &QueueNames,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let timing = Timing { warmup: plan.warmup, duration: plan.duration };
    for &body_bytes in &peers.sizes {
        for &clients in &peers.clients {
            let shape = Shape { body_bytes, producers: clients, consumers: clients, batch };
            let label = format!("{} {body_bytes} B {clients}/{clients}", system.name());
            let backlog_max = match plan.backlog_max {
                Some(0) => None,
                Some(n) => Some(n),
                None => Some(2 * (2 * clients * batch) as u64),
            };
            let max = on_fresh_queue(peer, names, async |queue| {
                let pace = Pace::ClosedLoop { backlog_max };
                load::rate_phase(peer, queue, shape, timing, pace, epoch, &format!("{label} max")).await
            })
            .await?;
            let rate = max.rate() * FIXED_RATE_FRACTION;
            rows.push(Row { system, body_bytes, clients, batch, mode: Mode::MaxRate, measured: max });
            if rate <= 0.0 {
                continue;
            }
            let fixed = on_fresh_queue(peer, names, async |queue| {
                load::rate_phase(peer, queue, shape, timing, Pace::Fixed(rate), epoch, &format!("{label} fixed")).await
            })
            .await?;
            rows.push(Row { system, body_bytes, clients, batch, mode: Mode::FixedRate(rate), measured: fixed });
        }
    }
    if peers.drain_messages > 0 {
        let (body_bytes, clients) = (peers.sizes[0], peers.drain_clients());
        let shape = Shape { body_bytes, producers: clients, consumers: clients, batch };
        let label = format!("{} {body_bytes} B {clients}/{clients}", system.name());
        let messages = peers.drain_messages;
        let drained = on_fresh_queue(peer, names, async |queue| {
            load::drain_phase(peer, queue, shape, messages, peers.drain_stage_max, epoch, &label).await
        })
        .await?;
        rows.push(Row { system, body_bytes, clients, batch, mode: Mode::Drain(messages), measured: drained });
    }
    Ok(())
}

/// Runs `work` on a new queue and deletes the queue afterwards, even when `work` failed.
async fn on_fresh_queue<T>(
    peer: &dyn driver::Peer,
    names: &QueueNames,
    work: impl AsyncFnOnce(&str) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let queue = names.next();
    peer.create(&queue).await.with_context(|| format!("creating {queue}"))?;
    let outcome = work(&queue).await;
    let deleted = peer.delete(&queue).await.with_context(|| format!("deleting {queue}"));
    let outcome = outcome?;
    deleted?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_suit_every_system() {
        assert_eq!(identifier("sluice-bench"), "sluice_bench");
        assert_eq!(identifier("9Lives.q"), "q9lives_q");
        let names = QueueNames::new("sluice-bench");
        let (a, b) = (names.next(), names.next());
        assert_ne!(a, b);
        for name in [a, b] {
            assert!(name.len() <= 63 && name.starts_with("sluice_bench_"), "{name}");
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'), "{name}");
        }
    }

    #[test]
    fn defaults_follow_quick() {
        let full = PeerPlan::new(PeerArgs::default(), None, false).expect("defaults are valid");
        assert_eq!(
            (full.sizes.as_slice(), full.clients.as_slice(), full.drain_messages),
            (&[256, 4096][..], &[1, 4, 16][..], 1_000_000)
        );
        assert_eq!((full.batch, full.drain_clients(), full.systems.len()), (100, 4, 12));
        let quick = PeerPlan::new(PeerArgs::default(), Some(10), true).expect("defaults are valid");
        assert_eq!(
            (quick.sizes.as_slice(), quick.clients.as_slice(), quick.drain_messages, quick.batch),
            (&[256][..], &[4][..], 20_000, 10)
        );
        let args = PeerArgs { clients: vec![2, 8], ..Default::default() };
        assert_eq!(PeerPlan::new(args, None, false).map(|p| p.drain_clients()), Ok(2));
    }

    #[test]
    fn bad_settings_are_refused() {
        let refused = |args: PeerArgs, expected: &str| {
            let error = PeerPlan::new(args, None, false).err().unwrap_or_default();
            assert!(error.contains(expected), "{error}");
        };
        refused(PeerArgs { sizes: vec![8], ..Default::default() }, "--sizes 8: use 16 to");
        refused(PeerArgs { clients: vec![0], ..Default::default() }, "--clients 0: use 1 to");
        refused(PeerArgs { only: vec!["kafka".into()], ..Default::default() }, "--only kafka");
        refused(PeerArgs { sluice_interval_ms: Some(0), ..Default::default() }, "--sluice-interval-ms");
    }
}
