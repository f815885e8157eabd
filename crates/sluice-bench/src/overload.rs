//! The `overload` scenario: producers at 2×, 5× and 10× what the consumers take, with limits
//! and without, in the same run: accepted throughput, refusals, and the send latency of a
//! high-priority trickle beside the low-priority flood.
//!
//! Each phase has a fresh pair of queues: `bulk`, flooded open loop with priority-0 messages
//! (a batch every 10 ms, each send on a task of its own so a slow answer does not slow the
//! offer), and `urgent`, which gets one priority-9 message every 20 ms. Consumers take from
//! `bulk` at a fixed rate (`CONSUME_RATE`, paced), so that "N× overload" means the offer is N
//! times what is taken. In the `limited` mode `bulk` has `max_depth_messages` (`DEPTH_LIMIT`,
//! overflow reject): the flood is refused past it (`queue_full`, 429) and its depth stays
//! bounded; in the `unlimited` mode everything is accepted and the backlog grows. The report
//! gives, per phase, the accepted and refused rates, the bulk depth at the end, and the urgent
//! sends' p50/p99 latency, and the limited-to-unlimited ratios.
//!
//! First load shedding (`shedding`, in-process servers only): a server of its own whose memory
//! watermark is the process's resident memory plus `SHED_HEADROOM_BYTES`, `bulk` without a
//! limit, flooded at `SHED_FACTOR`× until the backlog it holds passes the watermark, so that the
//! rest of the phase runs with the server held there: the priority-0 flood is refused (503
//! `shedding`, `Retry-After`) while the priority-9 trickle is still taken. The report gives
//! when shedding began and the urgent sends' latency while it lasted.

use std::fmt::Write as _;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use comfy_table::{CellAlignment, Table, presets};
use serde_json::json;
use sluice_api::{CreateQueueRequest, ReceiveRequest, SendMessage, SendRequest};
use sluice_client::Client;
use tokio::sync::Mutex;
use tokio::task::JoinSet;

use crate::Plan;
use crate::report::thousands;
use crate::stats::{Tally, ms};
use crate::target::InProcess;
use crate::workload;

/// Messages a second the consumers take from `bulk`, together.
const CONSUME_RATE: u64 = 2_000;
/// Overload factors: the flood offers this many times `CONSUME_RATE`.
const FACTORS: [u64; 3] = [2, 5, 10];
/// `bulk`'s `max_depth_messages` in the limited mode: two seconds of consumption.
const DEPTH_LIMIT: u64 = 2 * CONSUME_RATE;
/// How often the flood sends a batch, and the urgent trickle a message.
const FLOOD_EVERY: Duration = Duration::from_millis(10);
const URGENT_EVERY: Duration = Duration::from_millis(20);
/// The shedding phase's memory watermark above the resident memory at its start: a few seconds
/// of the 10× flood's backlog.
const SHED_HEADROOM_BYTES: u64 = 32 << 20;
/// Messages sent to a scratch queue before the shedding phase's resident memory is read.
const WARM_MESSAGES: u64 = 20_000;
/// The shedding phase's overload factor.
const SHED_FACTOR: u64 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Unlimited,
    Limited,
    /// No depth limit, on a server with a memory watermark.
    Shedding,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Unlimited => "unlimited",
            Mode::Limited => "limited",
            Mode::Shedding => "shedding",
        }
    }
}

struct PhaseResult {
    factor: u64,
    mode: Mode,
    window: Duration,
    offered: u64,
    accepted: Tally,
    refused: u64,
    refused_with_retry_after: u64,
    consumed: u64,
    urgent: Tally,
    /// The urgent sends made after the first shed refusal.
    urgent_while_shedding: Tally,
    /// When the first write was shed, from the phase's start.
    shed_after: Option<Duration>,
    bulk_depth_end: Option<u64>,
}

pub(crate) async fn run(plan: &Plan) -> anyhow::Result<()> {
    let started = Instant::now();
    // Shedding first, while this process's memory holds nothing freed by earlier phases that
    // the flood's backlog could reuse without the resident figure growing.
    let shed = match plan.server {
        None => Some(shedding(plan).await.context("the shedding phase")?),
        Some(_) => None,
    };
    let (mut results, server) = crate::with_target(plan, async |url| phases(plan, url).await).await?;
    results.extend(shed);
    let text = render(plan, &server, &results, started.elapsed());
    let rows: Vec<_> = results
        .iter()
        .map(|r| {
            json!({
                "factor": r.factor,
                "mode": r.mode.name(),
                "offered_per_s": r.offered as f64 / r.window.as_secs_f64(),
                "accepted_per_s": r.accepted.rate(r.window),
                "refused_per_s": r.refused as f64 / r.window.as_secs_f64(),
                "consumed_per_s": r.consumed as f64 / r.window.as_secs_f64(),
                "bulk_depth_end": r.bulk_depth_end,
                "urgent_p50_ms": r.urgent.latency.quantile_ms(0.5),
                "urgent_p99_ms": r.urgent.latency.quantile_ms(0.99),
                "urgent_refused": r.urgent.errors,
                "shed_after_s": r.shed_after.map(|d| d.as_secs_f64()),
                "urgent_while_shedding_p99_ms": r.urgent_while_shedding.latency.quantile_ms(0.99),
            })
        })
        .collect();
    crate::publish(plan, &text, json!({ "scenario": "overload", "phases": rows }))
}

async fn phases(plan: &Plan, url: &str) -> anyhow::Result<Vec<PhaseResult>> {
    let client = workload::client(url)?;
    let mut results = Vec::new();
    for factor in FACTORS {
        for mode in [Mode::Unlimited, Mode::Limited] {
            let bulk = format!("{}-overload-{factor}x-{}-bulk", plan.queue, mode.name());
            let urgent = format!("{}-overload-{factor}x-{}-urgent", plan.queue, mode.name());
            create(&client, &bulk, (mode == Mode::Limited).then_some(DEPTH_LIMIT)).await?;
            create(&client, &urgent, None).await?;
            let result = phase(plan, &client, factor, mode, &bulk, &urgent).await;
            let _ = client.delete_queue(&bulk).await;
            let _ = client.delete_queue(&urgent).await;
            results.push(result?);
        }
    }
    Ok(results)
}

/// The shedding phase, on a server of its own (see the module docs).
async fn shedding(plan: &Plan) -> anyhow::Result<PhaseResult> {
    // The resident memory with a warm server at rest (one started, sent `WARM_MESSAGES` and
    // emptied for the reading, then stopped), so that the headroom is the flood's backlog and
    // not what a server takes to start and to write at all (caches, buffers, connections).
    let warm = InProcess::start(&plan.tmp_dir, plan.durability).await?;
    let warmed = warm_up(plan, warm.url()).await;
    let resident = sluice_services::shedding::resident_bytes();
    warm.stop().await?;
    warmed?;
    let resident = resident.context("reading this process's resident memory (/proc/self/statm, Linux only)")?;
    let shed = sluice_server::ShedConfig {
        memory_bytes_max: Some(resident + SHED_HEADROOM_BYTES),
        ..sluice_server::ShedConfig::default()
    };
    let config = sluice_server::ServerConfig { shed, ..sluice_server::ServerConfig::default() };
    let target = InProcess::start_with(&plan.tmp_dir, plan.durability, config).await?;
    let client = workload::client(target.url())?;
    let (bulk, urgent) = (format!("{}-shedding-bulk", plan.queue), format!("{}-shedding-urgent", plan.queue));
    let result = async {
        create(&client, &bulk, None).await?;
        create(&client, &urgent, None).await?;
        phase(plan, &client, SHED_FACTOR, Mode::Shedding, &bulk, &urgent).await
    }
    .await;
    target.stop().await?;
    result
}

/// Makes the queue `name`, with `max_depth_messages` (overflow reject) when given.
async fn create(client: &Client, name: &str, max_depth_messages: Option<u64>) -> anyhow::Result<()> {
    let request = CreateQueueRequest { name: name.to_owned(), max_depth_messages, ..Default::default() };
    client.create_queue(&request).await.with_context(|| format!("creating {name}"))?;
    Ok(())
}

/// Counts one urgent send's outcome in `tally`: taken with its latency, or refused.
fn count_send<E: std::fmt::Display>(tally: &mut Tally, outcome: &Result<sluice_api::SendResponse, E>, took: Duration) {
    match outcome {
        Ok(r) if r.results[0].id.is_some() => {
            tally.count += 1;
            tally.latency.record(took);
        }
        Ok(r) => tally.error(1, || format!("{:?}", r.results[0].error)),
        Err(e) => tally.error(1, || e.to_string()),
    }
}

/// Sends `WARM_MESSAGES` to a scratch queue of the server at `url`, then deletes it.
async fn warm_up(plan: &Plan, url: &str) -> anyhow::Result<()> {
    let client = workload::client(url)?;
    let queue = format!("{}-shedding-warm-up", plan.queue);
    client.create_queue(&CreateQueueRequest { name: queue.clone(), ..Default::default() }).await?;
    let padding = workload::body_padding(plan.body_bytes);
    for _ in 0..WARM_MESSAGES / 100 {
        let messages = (0..100).map(|_| SendMessage { body: Some(format!("w{padding}")), ..Default::default() });
        client.send_messages(&queue, &SendRequest { messages: messages.collect() }).await?;
    }
    client.delete_queue(&queue).await?;
    Ok(())
}

async fn phase(
    plan: &Plan,
    client: &Client,
    factor: u64,
    mode: Mode,
    bulk: &str,
    urgent: &str,
) -> anyhow::Result<PhaseResult> {
    let window = plan.duration;
    let end = Instant::now() + window;
    let padding = workload::body_padding(plan.body_bytes);
    let per_batch = (factor * CONSUME_RATE * FLOOD_EVERY.as_millis() as u64 / 1_000).max(1);
    let bar = crate::progress::phase(&format!("{factor}x overload, {}", mode.name()), window);

    // Consumers: paced to CONSUME_RATE together.
    let consumers = plan.consumers.max(1) as u64;
    let mut consuming = JoinSet::new();
    for _ in 0..consumers {
        let (client, bulk) = (client.clone(), bulk.to_owned());
        let every = Duration::from_secs_f64(10.0 * consumers as f64 / CONSUME_RATE as f64);
        consuming.spawn(async move {
            let mut taken = 0u64;
            let mut tick = tokio::time::interval(every);
            while Instant::now() < end {
                tick.tick().await;
                let request = ReceiveRequest { max: Some(10), wait_ms: Some(0), visibility_timeout_ms: Some(60_000) };
                let Ok(list) = client.receive_messages(&bulk, &request).await else { continue };
                let receipts: Vec<String> = list.messages.into_iter().filter_map(|m| m.receipt).collect();
                taken += receipts.len() as u64;
                if !receipts.is_empty() {
                    let _ = client.ack(&bulk, receipts).await;
                }
            }
            taken
        });
    }

    // The flood: open loop, a batch every FLOOD_EVERY, each on a task of its own.
    let accepted = Arc::new(Mutex::new((Tally::new(), 0u64, 0u64)));
    let started = Instant::now();
    let shed_from: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
    let mut flood = JoinSet::new();
    let mut offered = 0u64;
    let mut tick = tokio::time::interval(FLOOD_EVERY);
    let urgent_task = {
        let (client, urgent, padding, shed_from) =
            (client.clone(), urgent.to_owned(), padding.clone(), shed_from.clone());
        tokio::spawn(async move {
            let (mut tally, mut while_shedding) = (Tally::new(), Tally::new());
            let mut tick = tokio::time::interval(URGENT_EVERY);
            while Instant::now() < end {
                tick.tick().await;
                let message =
                    SendMessage { body: Some(format!("u{padding}")), priority: Some(9), ..Default::default() };
                let sent = Instant::now();
                let shedding = shed_from.get().is_some();
                let outcome = client.send_messages(&urgent, &SendRequest { messages: vec![message] }).await;
                let took = sent.elapsed();
                count_send(&mut tally, &outcome, took);
                if shedding {
                    count_send(&mut while_shedding, &outcome, took);
                }
            }
            (tally, while_shedding)
        })
    };
    while Instant::now() < end {
        tick.tick().await;
        bar.set_position((window - end.saturating_duration_since(Instant::now())).as_millis() as u64);
        offered += per_batch;
        let (client, bulk, padding, accepted) = (client.clone(), bulk.to_owned(), padding.clone(), accepted.clone());
        let shed_from = shed_from.clone();
        flood.spawn(async move {
            let messages = (0..per_batch)
                .map(|_| SendMessage { body: Some(format!("b{padding}")), ..Default::default() })
                .collect();
            let sent = Instant::now();
            let outcome = client.send_messages(&bulk, &SendRequest { messages }).await;
            let mut a = accepted.lock().await;
            match outcome {
                Ok(r) => {
                    let ok = r.results.iter().filter(|e| e.id.is_some()).count() as u64;
                    a.0.count += ok;
                    a.0.latency.record(sent.elapsed());
                    a.1 += per_batch - ok;
                    // Shed entries are refused in place, each with its retry_after_ms.
                    let shed = r.results.iter().filter(|e| e.error.as_ref().is_some_and(|b| b.code == "shedding"));
                    let shed = shed.count() as u64;
                    if shed > 0 {
                        shed_from.get_or_init(Instant::now);
                    }
                    a.2 += shed;
                }
                Err(e) => {
                    // A whole-call refusal (429 queue_full, 503 shedding) carries Retry-After;
                    // count both.
                    if e.to_string().contains("queue_full") || e.to_string().contains("shedding") {
                        a.2 += per_batch;
                    }
                    if e.to_string().contains("shedding") {
                        shed_from.get_or_init(Instant::now);
                    }
                    a.1 += per_batch;
                }
            }
        });
    }
    while flood.join_next().await.is_some() {}
    let (urgent, urgent_while_shedding) = urgent_task.await.context("the urgent producer panicked")?;
    let mut consumed = 0;
    while let Some(taken) = consuming.join_next().await {
        consumed += taken.context("a consumer panicked")?;
    }
    bar.finish_and_clear();
    let bulk_depth_end =
        client.get_queue(bulk).await.ok().map(|q| q.counts.visible + q.counts.in_flight + q.counts.delayed);
    let (accepted, refused, refused_with_retry_after) = {
        let a = accepted.lock().await;
        (a.0.clone(), a.1, a.2)
    };
    Ok(PhaseResult {
        factor,
        mode,
        window,
        offered,
        accepted,
        refused,
        refused_with_retry_after,
        consumed,
        urgent,
        urgent_while_shedding,
        shed_after: shed_from.get().map(|at| at.saturating_duration_since(started)),
        bulk_depth_end,
    })
}

fn render(plan: &Plan, server: &str, results: &[PhaseResult], elapsed: Duration) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "overload: {server}; consumers take {CONSUME_RATE} msg/s from `bulk` ({} tasks); flood at 2x/5x/10x in batches every {} ms, {} B bodies; urgent: one priority-9 send every {} ms; limited: bulk max_depth_messages {DEPTH_LIMIT} (reject); {} per phase; {} in all",
        plan.consumers,
        FLOOD_EVERY.as_millis(),
        plan.body_bytes,
        URGENT_EVERY.as_millis(),
        humantime::format_duration(plan.duration),
        humantime::format_duration(Duration::from_secs(elapsed.as_secs())),
    );
    let mut table = Table::new();
    table.load_preset(presets::ASCII_MARKDOWN);
    table.set_header([
        "overload",
        "mode",
        "offered/s",
        "accepted/s",
        "refused/s",
        "consumed/s",
        "bulk depth at end",
        "urgent p50 / p99 ms",
        "urgent refused",
    ]);
    for r in results {
        let per_s = |n: u64| thousands(n as f64 / r.window.as_secs_f64());
        table.add_row([
            format!("{}x", r.factor),
            r.mode.name().to_string(),
            per_s(r.offered),
            thousands(r.accepted.rate(r.window)),
            format!("{} ({} with Retry-After)", per_s(r.refused), per_s(r.refused_with_retry_after)),
            per_s(r.consumed),
            r.bulk_depth_end.map_or("-".into(), |d| thousands(d as f64)),
            r.urgent.latency.p50_p99(),
            r.urgent.errors.to_string(),
        ]);
    }
    for column in 2..=8 {
        if let Some(c) = table.column_mut(column) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let _ = writeln!(out, "{table}");
    for factor in FACTORS {
        let find = |mode| results.iter().find(|r| r.factor == factor && r.mode == mode);
        if let (Some(u), Some(l)) = (find(Mode::Unlimited), find(Mode::Limited)) {
            let p99 = |r: &PhaseResult| r.urgent.latency.quantile_ms(0.99);
            let ratio = match (p99(l), p99(u)) {
                (Some(l), Some(u)) if u > 0.0 => format!("{:.2}x", l / u),
                _ => "-".into(),
            };
            let _ = writeln!(
                out,
                "{factor}x: limited/unlimited urgent p99 {ratio} ({} vs {} ms); bulk depth {} vs {}",
                p99(l).map_or("-".into(), ms),
                p99(u).map_or("-".into(), ms),
                l.bulk_depth_end.map_or("-".into(), |d| thousands(d as f64)),
                u.bulk_depth_end.map_or("-".into(), |d| thousands(d as f64)),
            );
        }
    }
    for r in results.iter().filter(|r| r.mode == Mode::Shedding) {
        let _ = writeln!(
            out,
            "shedding ({}x, no depth limit, memory watermark at this process's resident memory + {} MiB): first write shed after {}; urgent sends while shedding: {} taken, {} refused, p50 / p99 {} ms",
            r.factor,
            SHED_HEADROOM_BYTES >> 20,
            r.shed_after.map_or("- (never reached the watermark)".into(), |d| format!("{:.1} s", d.as_secs_f64())),
            r.urgent_while_shedding.count,
            r.urgent_while_shedding.errors,
            r.urgent_while_shedding.latency.p50_p99(),
        );
    }
    out
}
