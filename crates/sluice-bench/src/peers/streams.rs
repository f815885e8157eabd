//! The comparison half of the streams scenario: appends, group consumption and end-to-end
//! latency on Sluice's streams beside Redis Streams, NATS JetStream and RabbitMQ streams, through
//! the peers scenario's drivers and load generator (`load`), one system at a time.
//!
//! Per system: append throughput at every size and batch with 4 producers and no consumer
//! (closed loop, each producer waiting for its confirmation); consume throughput of 4 consumers
//! in one group draining a preloaded stream; end-to-end latency at a fixed rate with 4
//! producers and 4 consumers. RabbitMQ 3.10's streams have no consumer groups (each consumer
//! reads the whole stream), so its consumption is measured with one consumer.

use std::fmt::Write as _;
use std::time::Instant;

use comfy_table::{CellAlignment, Table, presets};
use serde_json::{Value, json};
use sluice_api::GroupMode;
use sluice_embedded::Durability as StoreDurability;

use super::driver::{Connected, Peer};
use super::load::{self, Measured, Pace, Shape, Timing};
use super::system::Durability;
use super::{QueueNames, nats, on_fresh_queue, rabbitmq, redis, stream_sluice};
use crate::Plan;
use crate::report::thousands;
use crate::stats::ms;
use crate::stream_plan::StreamPlan;

/// Producers of the append phases, and producers and consumers of the others.
const CLIENTS: usize = 4;
/// Batch of the consume and end-to-end phases.
const CONSUME_BATCH: usize = 100;
const E2E_BATCH: usize = 10;
/// What Sluice at `fsync` should reach against the best peer that syncs every write.
const FSYNC_TARGET_RATIO: f64 = 2.0;

/// One system at one setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum StreamSystem {
    SluiceFsync,
    SluiceShared,
    SluiceInterval,
    RedisAlways,
    RedisDefault,
    NatsAlways,
    NatsDefault,
    RabbitStream,
}

impl StreamSystem {
    pub const ALL: [StreamSystem; 8] = [
        StreamSystem::SluiceFsync,
        StreamSystem::SluiceShared,
        StreamSystem::SluiceInterval,
        StreamSystem::RedisAlways,
        StreamSystem::RedisDefault,
        StreamSystem::NatsAlways,
        StreamSystem::NatsDefault,
        StreamSystem::RabbitStream,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StreamSystem::SluiceFsync => "sluice-fsync",
            StreamSystem::SluiceShared => "sluice-fsync-shared",
            StreamSystem::SluiceInterval => "sluice-interval",
            StreamSystem::RedisAlways => "redis-always",
            StreamSystem::RedisDefault => "redis-default",
            StreamSystem::NatsAlways => "nats-always",
            StreamSystem::NatsDefault => "nats-default",
            StreamSystem::RabbitStream => "rabbitmq-stream",
        }
    }

    fn family(self) -> &'static str {
        self.name().split('-').next().unwrap_or_default()
    }

    fn is_sluice(self) -> bool {
        self.family() == "sluice"
    }

    /// Whether its consumers share a stream in a group (RabbitMQ 3.10's stream queues do not).
    fn groups(self) -> bool {
        self != StreamSystem::RabbitStream
    }
}

/// The systems `--only` names (names or families), in report order; all when empty.
pub(crate) fn select(only: &[String]) -> Result<Vec<StreamSystem>, String> {
    if only.is_empty() {
        return Ok(StreamSystem::ALL.to_vec());
    }
    let mut chosen = Vec::new();
    for item in only {
        let found: Vec<StreamSystem> =
            StreamSystem::ALL.into_iter().filter(|s| s.name() == item || s.family() == item).collect();
        if found.is_empty() {
            let names: Vec<&str> = StreamSystem::ALL.iter().map(|s| s.name()).collect();
            return Err(format!("--only {item}: not a system of the streams scenario; use {}", names.join(", ")));
        }
        chosen.extend(found);
    }
    chosen.sort();
    chosen.dedup();
    Ok(chosen)
}

/// The results of one system.
pub(crate) struct Measurements {
    system: StreamSystem,
    version: String,
    settings: String,
    durability: Durability,
    /// (body bytes, batch, appended).
    appends: Vec<(usize, usize, Measured)>,
    consume: Option<(usize, Measured)>,
    e2e: Option<(usize, Measured)>,
    failure: Option<String>,
}

async fn connect(sp: &StreamPlan, tmp: &std::path::Path, system: StreamSystem) -> anyhow::Result<Connected> {
    let partitions = CLIENTS as u32;
    match system {
        StreamSystem::SluiceFsync => {
            stream_sluice::connect(tmp, StoreDurability::Fsync, GroupMode::Offsets, partitions).await
        }
        StreamSystem::SluiceShared => {
            stream_sluice::connect(tmp, StoreDurability::Fsync, GroupMode::Shared, partitions).await
        }
        StreamSystem::SluiceInterval => {
            let every = std::time::Duration::from_millis(sp.sluice_interval_ms);
            stream_sluice::connect(tmp, StoreDurability::Interval(every), GroupMode::Offsets, partitions).await
        }
        StreamSystem::RedisAlways => redis::connect_always(tmp).await,
        StreamSystem::RedisDefault => redis::connect_default(&sp.redis_url).await,
        StreamSystem::NatsAlways => nats::connect_log(&sp.nats_url, tmp, true).await,
        StreamSystem::NatsDefault => nats::connect_log(&sp.nats_url, tmp, false).await,
        StreamSystem::RabbitStream => rabbitmq::connect(&sp.rabbitmq_url, rabbitmq::QueueType::Stream).await,
    }
}

/// Measures every selected system, one at a time.
pub(crate) async fn run(plan: &Plan, sp: &StreamPlan) -> anyhow::Result<Vec<Measurements>> {
    let systems = select(&sp.only).map_err(anyhow::Error::msg)?;
    let names = QueueNames::new(&plan.queue);
    let epoch = Instant::now();
    let mut out = Vec::new();
    for system in systems {
        let measured = tokio::select! {
            m = measure(plan, sp, system, &names, epoch) => m,
            _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted; the system being measured was stopped"),
        };
        out.push(measured);
    }
    Ok(out)
}

async fn measure(
    plan: &Plan,
    sp: &StreamPlan,
    system: StreamSystem,
    names: &QueueNames,
    epoch: Instant,
) -> Measurements {
    let mut m = Measurements {
        system,
        version: "-".into(),
        settings: "-".into(),
        durability: Durability::Memory,
        appends: Vec::new(),
        consume: None,
        e2e: None,
        failure: None,
    };
    let connected = match connect(sp, &plan.tmp_dir, system).await {
        Ok(c) => c,
        Err(e) => {
            m.failure = Some(format!("skipped: {e:#}"));
            return m;
        }
    };
    (m.version, m.settings, m.durability) = (connected.version, connected.settings, connected.durability);
    let peer = connected.peer;
    let outcome = phases(plan, sp, system, peer.as_ref(), connected.batch_max, names, epoch, &mut m).await;
    let stopped = peer.stop().await;
    m.failure = match (outcome, stopped) {
        (Err(e), _) => Some(format!("failed part-way: {e:#}")),
        (Ok(()), Err(e)) => Some(format!("measured, but stopping it failed: {e:#}")),
        (Ok(()), Ok(())) => None,
    };
    m
}

#[allow(clippy::too_many_arguments)]
async fn phases(
    plan: &Plan,
    sp: &StreamPlan,
    system: StreamSystem,
    peer: &dyn Peer,
    batch_max: usize,
    names: &QueueNames,
    epoch: Instant,
    m: &mut Measurements,
) -> anyhow::Result<()> {
    let timing = Timing { warmup: plan.warmup, duration: plan.duration };
    let name = system.name();
    for &body_bytes in &sp.sizes {
        for &batch in &sp.batches {
            let shape = Shape { body_bytes, producers: CLIENTS, consumers: 0, batch: batch.min(batch_max) };
            let label = format!("{name} append {body_bytes} B batch {batch}");
            let pace = Pace::ClosedLoop { backlog_max: None };
            let measured = on_fresh_queue(peer, names, async |queue| {
                load::rate_phase(peer, queue, shape, timing, pace, epoch, &label).await
            })
            .await?;
            m.appends.push((body_bytes, batch, measured));
        }
    }
    let body_bytes = sp.sizes[0];
    let consumers = if system.groups() { CLIENTS } else { 1 };
    if sp.consume_records > 0 {
        let shape = Shape { body_bytes, producers: CLIENTS, consumers, batch: CONSUME_BATCH.min(batch_max) };
        let label = format!("{name} consume {body_bytes} B");
        let messages = sp.consume_records;
        let stage_max = std::time::Duration::from_secs(300);
        let measured = on_fresh_queue(peer, names, async |queue| {
            load::drain_phase(peer, queue, shape, messages, stage_max, epoch, &label).await
        })
        .await?;
        m.consume = Some((consumers, measured));
    }
    let shape = Shape { body_bytes, producers: CLIENTS, consumers, batch: E2E_BATCH.min(batch_max) };
    let label = format!("{name} end-to-end at {} records/s", thousands(sp.e2e_rate));
    let measured = on_fresh_queue(peer, names, async |queue| {
        load::rate_phase(peer, queue, shape, timing, Pace::Fixed(sp.e2e_rate), epoch, &label).await
    })
    .await?;
    m.e2e = Some((consumers, measured));
    Ok(())
}

fn append_rate(m: &Measurements, body_bytes: usize, batch: usize) -> Option<f64> {
    m.appends.iter().find(|(s, b, _)| *s == body_bytes && *b == batch).map(|(_, _, x)| x.sent.rate(x.window))
}

/// The tables and the ratios Sluice is judged by.
pub(crate) fn render(w: &mut String, sp: &StreamPlan, all: &[Measurements]) {
    let _ = writeln!(w, "\nsystems");
    for m in all {
        let state = m.failure.as_deref().map(|f| format!(" ({f})")).unwrap_or_default();
        let _ = writeln!(w, "  {:<20} {} [{}]{state}", m.system.name(), m.version, m.durability.label());
        let _ = writeln!(w, "  {:<20} {}", "", m.settings);
    }
    let mut header = vec!["system".to_owned(), "durability".to_owned()];
    for &s in &sp.sizes {
        for &b in &sp.batches {
            header.push(format!("{s} B x{b}"));
        }
    }
    let mut t = Table::new();
    t.load_preset(presets::ASCII_MARKDOWN).set_header(header);
    for m in all {
        let mut row = vec![m.system.name().to_owned(), m.durability.label().to_owned()];
        for &s in &sp.sizes {
            for &b in &sp.batches {
                let cell = m.appends.iter().find(|(x, y, _)| *x == s && *y == b).map_or("-".to_owned(), |(_, _, x)| {
                    format!("{} ({} ms)", thousands(x.sent.rate(x.window)), x.sent.latency.p50_p99())
                });
                row.push(cell);
            }
        }
        t.add_row(row);
    }
    align(&mut t, 2);
    let _ = writeln!(
        w,
        "\nappend: records/s confirmed, {CLIENTS} producers closed-loop, no consumer (call p50 / p99 in ms)\n{t}"
    );
    let mut t = Table::new();
    t.load_preset(presets::ASCII_MARKDOWN).set_header(vec![
        "system",
        "consumers",
        "records/s",
        "records",
        "loaded in",
        "e2e at rate",
        "e2e p50 / p99 / max ms",
    ]);
    for m in all {
        let (consumers, rate, records, loaded) = match &m.consume {
            Some((c, x)) => (
                c.to_string(),
                thousands(x.rate()),
                x.received.count.to_string(),
                x.loaded.map_or("-".into(), |(n, d)| format!("{n} in {:.1} s", d.as_secs_f64())),
            ),
            None => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        let (achieved, e2e) = match &m.e2e {
            Some((_, x)) => (
                thousands(x.rate()),
                format!("{} / {}", x.received.latency.p50_p99(), x.received.latency.max_ms().map_or("-".into(), ms)),
            ),
            None => ("-".into(), "-".into()),
        };
        t.add_row(vec![m.system.name().to_owned(), consumers, rate, records, loaded, achieved, e2e]);
    }
    align(&mut t, 1);
    let _ = writeln!(
        w,
        "\nconsume: a preloaded stream drained by the consumers of one group (batch {CONSUME_BATCH}); end-to-end: \
         {} records/s in all from {CLIENTS} producers (batch up to {E2E_BATCH}) to the same consumers, latency from \
         each record's due time to the end of the fetch that returned it\n{t}",
        thousands(sp.e2e_rate)
    );
    let _ = writeln!(
        w,
        "\nratios (append, Sluice at fsync / the best peer that syncs every write; goal {FSYNC_TARGET_RATIO}x)"
    );
    for line in ratio_lines(sp, all) {
        let _ = writeln!(w, "  {line}");
    }
}

fn align(t: &mut Table, from: usize) {
    for i in from..t.column_count() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

fn ratio_lines(sp: &StreamPlan, all: &[Measurements]) -> Vec<String> {
    let Some(sluice) = all.iter().find(|m| m.system == StreamSystem::SluiceFsync) else {
        return vec!["sluice-fsync was not measured".into()];
    };
    let mut lines = Vec::new();
    for &s in &sp.sizes {
        for &b in &sp.batches {
            let best = all
                .iter()
                .filter(|m| !m.system.is_sluice() && m.durability == Durability::PerWrite)
                .filter_map(|m| append_rate(m, s, b).map(|r| (r, m.system.name())))
                .max_by(|a, b| a.0.total_cmp(&b.0));
            let line = match (append_rate(sluice, s, b), best) {
                (Some(ours), Some((theirs, peer))) if theirs > 0.0 => {
                    let ratio = ours / theirs;
                    let verdict = if ratio >= FSYNC_TARGET_RATIO { "meets" } else { "misses" };
                    format!(
                        "{s} B batch {b}: {ratio:.2}x {peer} ({} against {}), {verdict} the goal",
                        thousands(ours),
                        thousands(theirs)
                    )
                }
                _ => format!("{s} B batch {b}: no per-write peer measured"),
            };
            lines.push(line);
        }
    }
    lines
}

pub(crate) fn json(all: &[Measurements]) -> Vec<Value> {
    let mut rows = Vec::new();
    for m in all {
        let base = json!({"system": m.system.name(), "version": m.version, "durability": m.durability.label(), "failure": m.failure});
        for (s, b, x) in &m.appends {
            let mut row = base.clone();
            row["workload"] = json!("append");
            row["body_bytes"] = json!(s);
            row["batch"] = json!(b);
            row["records_per_s"] = json!(x.sent.rate(x.window));
            row["call_p50_ms"] = json!(x.sent.latency.quantile_ms(0.5));
            row["call_p99_ms"] = json!(x.sent.latency.quantile_ms(0.99));
            row["errors"] = json!(x.sent.errors);
            rows.push(row);
        }
        if let Some((c, x)) = &m.consume {
            let mut row = base.clone();
            row["workload"] = json!("consume");
            row["consumers"] = json!(c);
            row["records_per_s"] = json!(x.rate());
            row["complete"] = json!(x.complete);
            rows.push(row);
        }
        if let Some((c, x)) = &m.e2e {
            let mut row = base.clone();
            row["workload"] = json!("end_to_end");
            row["consumers"] = json!(c);
            row["records_per_s"] = json!(x.rate());
            row["e2e_p50_ms"] = json!(x.received.latency.quantile_ms(0.5));
            row["e2e_p99_ms"] = json!(x.received.latency.quantile_ms(0.99));
            rows.push(row);
        }
    }
    rows
}
