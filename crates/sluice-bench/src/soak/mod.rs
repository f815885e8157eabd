//! The soak scenario: a long run at a fixed share of the maximum rate, sampled at fixed
//! intervals, with every message accounted for at the end.
//!
//! 1. Probe: a short closed-loop phase (as in the throughput scenario, batch `SOAK_BATCH`)
//!    measures the maximum sustainable rate, unless `--rate` gives the target.
//! 2. Soak: producers send on a schedule at `SOAK_RATE_FRACTION` of that rate (each message is
//!    stamped with the time it was due, so a stall shows in the latency instead of lowering the
//!    rate); consumers long-poll and ack. Every `--sample-every` a row is printed: rates, send
//!    and end-to-end latency over the interval, the queue's backlog, the process's resident
//!    memory and open files, and the data directory's size.
//! 3. Drain: producers stop, consumers keep receiving until every acknowledged send was
//!    received (or `DRAIN_MAX` passes), then the ledger is checked: an acknowledged send never
//!    received is *lost*, a received message never sent is *unexpected*.
//!
//! The verdict fails the run (exit 1) when anything was lost or unexpected, when resident
//! memory passed `--memory-max`, or when the achieved rate fell short of the target by more
//! than `RATE_SHORTFALL_MAX`. With an in-process server the memory is the whole process's
//! (server and load generator; the generator's own state is a few bit sets and histograms);
//! with `--server` it is not sampled.

mod output;

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::process::Process;
use anyhow::{Context, bail};
use comfy_table::{CellAlignment, Table, presets::NOTHING};
use serde_json::{Value, json};
use sluice_api::{CreateQueueRequest, ReceiveRequest, SendMessage, SendRequest};
use sluice_client::Client;

use crate::report::{self, thousands};
use crate::schedule::Schedule;
use crate::stats::{Latency, ms};
use crate::target::Target;
use crate::workload::{self, PhaseSpec};
use crate::{Plan, with_target_started};
use output::{MIB, dir_bytes, live, open_files, render, resident_mib, table_header, table_row};

/// The share of the probed maximum rate the soak runs at.
pub(crate) const SOAK_RATE_FRACTION: f64 = 0.7;
/// Most messages per send (producers send what is due, up to this), and the probe's batch.
pub(crate) const SOAK_BATCH: u32 = 10;
/// Most messages per receive (and so per ack) of the soak's consumers. Larger than a send:
/// on a schedule, producers send few messages per call, and consumers that took as few would
/// pay twice the calls per message (receive, then ack) and fall behind a rate the probe
/// sustained, turning a soak into an overload test. A worker pool with prefetch does the same.
pub(crate) const SOAK_RECEIVE_MAX: u32 = 100;
/// The probe's measured time when the soak is not `--quick`.
const PROBE_DURATION: Duration = Duration::from_secs(10);
const PROBE_DURATION_QUICK: Duration = Duration::from_secs(3);
/// Sampling interval when `--sample-every` is not given.
pub(crate) const SAMPLE_EVERY_DEFAULT: Duration = Duration::from_secs(10);
pub(crate) const SAMPLE_EVERY_QUICK: Duration = Duration::from_secs(2);
/// Shortest sampling interval.
const SAMPLE_EVERY_MIN: Duration = Duration::from_millis(500);
/// Default soak length, and with `--quick`.
pub(crate) const SOAK_DURATION_DEFAULT: Duration = Duration::from_secs(30 * 60);
pub(crate) const SOAK_DURATION_QUICK: Duration = Duration::from_secs(20);
/// Resident memory the run must stay under when `--memory-max` is not given, in MiB.
pub(crate) const MEMORY_MAX_MIB_DEFAULT: u64 = 512;
/// The run fails when it achieves less than this share of the target rate below it.
const RATE_SHORTFALL_MAX: f64 = 0.10;
/// How long consumers may take to receive the last acknowledged sends after producers stop;
/// longer than the visibility timeout, so a message whose ack failed comes back in time.
const DRAIN_MAX: Duration = Duration::from_secs(90);
/// How often the drain checks the ledger for acknowledged sends not yet received.
const DRAIN_POLL: Duration = Duration::from_millis(250);
/// Visibility timeout of each receive.
const VISIBILITY_TIMEOUT_MS: u64 = 30_000;
/// Hex digits of the due time, then of the message number, at the start of every body.
const STAMP_DIGITS: usize = 16;
/// Smallest body: the due time and the message number.
pub(crate) const SOAK_BODY_BYTES_MIN: usize = 2 * STAMP_DIGITS;

/// One bit per message number, set at most once each; grows in whole words as numbers come.
struct Bits(Mutex<Vec<u64>>);

impl Bits {
    fn new() -> Bits {
        Bits(Mutex::new(Vec::new()))
    }

    /// Sets bit `n`; false if it was set already.
    fn set(&self, n: u64) -> bool {
        let mut words = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let word = (n / 64) as usize;
        if word >= words.len() {
            words.resize(word + 1, 0);
        }
        let mask = 1u64 << (n % 64);
        let fresh = words[word] & mask == 0;
        words[word] |= mask;
        fresh
    }

    fn snapshot(&self) -> Vec<u64> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// What producers, consumers and the sampler share.
struct Soak {
    client: Client,
    queue: String,
    epoch: Instant,
    end: Instant,
    padding: String,
    /// Sends answered with an id; sends whose outcome is unknown (refused, failed, timed out).
    acked: Bits,
    uncertain: Bits,
    received: Bits,
    acked_count: AtomicU64,
    duplicates: AtomicU64,
    /// Received bodies that carry no readable stamp and number.
    malformed: AtomicU64,
    errors: AtomicU64,
    last_error: Mutex<Option<String>>,
    /// Since the last sample: messages sent and received, send-call and end-to-end latency.
    window: Mutex<Window>,
}

struct Window {
    sent: u64,
    received: u64,
    send_latency: Latency,
    e2e_latency: Latency,
}

impl Window {
    fn new() -> Window {
        Window { sent: 0, received: 0, send_latency: Latency::new(), e2e_latency: Latency::new() }
    }
}

impl Soak {
    fn error(&self, what: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(what);
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }
}

/// One row of the sample table.
#[derive(Debug, Clone)]
struct Sample {
    elapsed: Duration,
    sent_per_s: f64,
    received_per_s: f64,
    send_p50_ms: Option<f64>,
    send_p99_ms: Option<f64>,
    send_max_ms: Option<f64>,
    e2e_p50_ms: Option<f64>,
    e2e_p99_ms: Option<f64>,
    e2e_max_ms: Option<f64>,
    backlog: Option<u64>,
    rss_mib: Option<f64>,
    open_files: Option<u64>,
    data_mib: Option<f64>,
    errors: u64,
}

impl Sample {
    fn json(&self) -> Value {
        json!({
            "elapsed_s": self.elapsed.as_secs_f64(),
            "sent_per_sec": self.sent_per_s,
            "received_per_sec": self.received_per_s,
            "send_p50_ms": self.send_p50_ms, "send_p99_ms": self.send_p99_ms, "send_max_ms": self.send_max_ms,
            "e2e_p50_ms": self.e2e_p50_ms, "e2e_p99_ms": self.e2e_p99_ms, "e2e_max_ms": self.e2e_max_ms,
            "backlog": self.backlog,
            "rss_mib": self.rss_mib,
            "open_files": self.open_files,
            "data_mib": self.data_mib,
            "errors": self.errors,
        })
    }
}

/// Runs the soak scenario and prints its report.
pub(crate) async fn run(plan: &Plan, soak: &SoakPlan) -> anyhow::Result<()> {
    let started = Instant::now();
    let load_average = report::load_average();
    let (outcome, server) =
        with_target_started(plan, async |target: &Target| soak_on(plan, soak, target).await).await?;
    let text = render(plan, soak, &server, &outcome, started.elapsed(), load_average.as_deref());
    crate::publish(plan, &text, outcome.json(plan, soak))?;
    outcome.verdict(soak)
}

/// The soak scenario's own settings, resolved.
#[derive(Debug, Clone)]
pub(crate) struct SoakPlan {
    /// `None`: probe the maximum and run at `SOAK_RATE_FRACTION` of it.
    pub rate: Option<f64>,
    pub sample_every: Duration,
    pub memory_max_mib: u64,
}

impl SoakPlan {
    pub fn new(
        rate: Option<f64>,
        sample_every: Option<Duration>,
        memory_max_mib: Option<u64>,
        quick: bool,
    ) -> anyhow::Result<SoakPlan> {
        if let Some(rate) = rate
            && !(rate.is_finite() && rate > 0.0)
        {
            bail!("--rate {rate}: use a rate above zero, in messages per second");
        }
        let sample_every = sample_every.unwrap_or(if quick { SAMPLE_EVERY_QUICK } else { SAMPLE_EVERY_DEFAULT });
        if sample_every < SAMPLE_EVERY_MIN {
            bail!(
                "--sample-every: use {} or more (each sample asks the server for the queue's depth)",
                humantime::format_duration(SAMPLE_EVERY_MIN)
            );
        }
        Ok(SoakPlan { rate, sample_every, memory_max_mib: memory_max_mib.unwrap_or(MEMORY_MAX_MIB_DEFAULT) })
    }
}

struct Outcome {
    probed_max: Option<f64>,
    target_rate: f64,
    samples: Vec<Sample>,
    window: Duration,
    acked: u64,
    uncertain: u64,
    received: u64,
    lost: u64,
    unexpected: u64,
    duplicates: u64,
    malformed: u64,
    errors: u64,
    last_error: Option<String>,
    drain: Duration,
    drained: bool,
    send_latency: Latency,
    e2e_latency: Latency,
}

impl Outcome {
    fn achieved_rate(&self) -> f64 {
        self.acked as f64 / self.window.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    fn rss_max(&self) -> Option<f64> {
        self.samples.iter().filter_map(|s| s.rss_mib).reduce(f64::max)
    }

    /// Failures of the run, in words; empty when it passed.
    fn failures(&self, soak: &SoakPlan) -> Vec<String> {
        let mut failures = Vec::new();
        if self.lost > 0 {
            failures.push(format!("{} acknowledged sends were never received", self.lost));
        }
        if self.unexpected > 0 || self.malformed > 0 {
            failures.push(format!(
                "{} received messages were never sent, {} carried no readable stamp",
                self.unexpected, self.malformed
            ));
        }
        if let Some(rss) = self.rss_max().filter(|&rss| rss > soak.memory_max_mib as f64) {
            failures
                .push(format!("resident memory reached {rss:.0} MiB, over the bound of {} MiB", soak.memory_max_mib));
        }
        let shortfall = 1.0 - self.achieved_rate() / self.target_rate;
        if shortfall > RATE_SHORTFALL_MAX {
            failures.push(format!(
                "achieved {} msg/s, {:.0} % under the target of {} msg/s",
                thousands(self.achieved_rate()),
                shortfall * 100.0,
                thousands(self.target_rate)
            ));
        }
        failures
    }

    fn verdict(&self, soak: &SoakPlan) -> anyhow::Result<()> {
        let failures = self.failures(soak);
        if failures.is_empty() {
            return Ok(());
        }
        bail!("the soak failed: {}", failures.join("; "))
    }

    fn json(&self, plan: &Plan, soak: &SoakPlan) -> Value {
        let summary = json!({
            "system": "sluice",
            "durability": plan.durability_label(),
            "workload": format!("soak-{}B-{}p{}c", plan.body_bytes, plan.producers, plan.consumers),
            "probed_max_msgs_per_sec": self.probed_max,
            "target_msgs_per_sec": self.target_rate,
            "msgs_per_sec": self.achieved_rate(),
            "duration_s": self.window.as_secs_f64(),
            "p50_ms": self.e2e_latency.quantile_ms(0.5),
            "p99_ms": self.e2e_latency.quantile_ms(0.99),
            "p999_ms": self.e2e_latency.quantile_ms(0.999),
            "send_p99_ms": self.send_latency.quantile_ms(0.99),
            "rss_max_mib": self.rss_max(),
            "memory_max_mib": soak.memory_max_mib,
            "acked": self.acked, "uncertain": self.uncertain, "received": self.received,
            "lost": self.lost, "unexpected": self.unexpected, "duplicated": self.duplicates,
            "errors": self.errors,
            "passed": self.failures(soak).is_empty(),
            "samples": self.samples.iter().map(Sample::json).collect::<Vec<_>>(),
        });
        json!([report::json_row(plan, summary)])
    }
}

async fn soak_on(plan: &Plan, soak_plan: &SoakPlan, target: &Target) -> anyhow::Result<Outcome> {
    let client = workload::client(target.url())?;
    client
        .create_queue(&CreateQueueRequest { name: plan.queue.clone(), ..Default::default() })
        .await
        .with_context(|| format!("creating queue {}", plan.queue))?;

    let probed_max = match soak_plan.rate {
        Some(_) => None,
        None => {
            let probe =
                Plan { duration: if plan.quick { PROBE_DURATION_QUICK } else { PROBE_DURATION }, ..plan.clone() };
            let spec = PhaseSpec {
                label: "probing the max rate".into(),
                queue: plan.queue.clone(),
                batch: SOAK_BATCH,
                groups: None,
            };
            let phase = workload::phase(&probe, &client, Instant::now(), &spec).await?;
            Some(phase.received.rate(phase.window))
        }
    };
    let target_rate = soak_plan.rate.or(probed_max.map(|max| max * SOAK_RATE_FRACTION)).unwrap_or(0.0);
    if target_rate < 1.0 {
        bail!("the target rate is {target_rate:.1} msg/s; the probe found no throughput to soak at");
    }
    client.purge_queue(&plan.queue).await.context("purging the queue after the probe")?;

    let epoch = Instant::now();
    let state = Arc::new(Soak {
        client: client.clone(),
        queue: plan.queue.clone(),
        epoch,
        end: epoch + plan.duration,
        padding: ".".repeat(plan.body_bytes.saturating_sub(SOAK_BODY_BYTES_MIN)),
        acked: Bits::new(),
        uncertain: Bits::new(),
        received: Bits::new(),
        acked_count: AtomicU64::new(0),
        duplicates: AtomicU64::new(0),
        malformed: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        last_error: Mutex::new(None),
        window: Mutex::new(Window::new()),
    });
    let producers: Vec<_> = (0..plan.producers)
        .map(|i| {
            let schedule = Schedule::new(epoch, target_rate, i, plan.producers);
            tokio::spawn(produce(state.clone(), schedule, i as u64, plan.producers as u64))
        })
        .collect();
    let stop_consumers = Arc::new(tokio::sync::Notify::new());
    let consumers: Vec<_> =
        (0..plan.consumers).map(|_| tokio::spawn(consume(state.clone(), stop_consumers.clone()))).collect();

    let samples = sample(plan, soak_plan, &state, target).await;
    let mut send_latency = Latency::new();
    for task in producers {
        send_latency.merge(&task.await.context("a producer task panicked")?);
    }

    // Drain: until every acknowledged send was received, or the time runs out.
    let drain_started = Instant::now();
    let bar = crate::progress::phase("draining", DRAIN_MAX);
    let drained = loop {
        // A consumer may receive a message before its producer has read the send's answer, so
        // only the whole ledger says whether an acknowledged send is still missing.
        let (missing, _, _) = account(&state.acked, &state.uncertain, &state.received);
        bar.set_position(drain_started.elapsed().as_millis() as u64);
        bar.set_message(format!("{missing} acknowledged sends not received yet"));
        if missing == 0 {
            break true;
        }
        if drain_started.elapsed() >= DRAIN_MAX {
            break false;
        }
        tokio::time::sleep(DRAIN_POLL).await;
    };
    bar.finish_and_clear();
    let drain = drain_started.elapsed();
    stop_consumers.notify_waiters();
    let mut e2e_latency = Latency::new();
    for task in consumers {
        e2e_latency.merge(&task.await.context("a consumer task panicked")?);
    }

    let (lost, unexpected, received) = account(&state.acked, &state.uncertain, &state.received);
    let outcome = Outcome {
        probed_max,
        target_rate,
        samples,
        window: plan.duration,
        acked: state.acked_count.load(Ordering::Acquire),
        uncertain: count_bits(&state.uncertain.snapshot()),
        received,
        lost,
        unexpected,
        duplicates: state.duplicates.load(Ordering::Acquire),
        malformed: state.malformed.load(Ordering::Acquire),
        errors: state.errors.load(Ordering::Acquire),
        last_error: state.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        drain,
        drained,
        send_latency,
        e2e_latency,
    };
    // Leaves an external server's queue as it was found. Best effort: the report must not be
    // lost because a backlog left by a failed run takes long to purge.
    if !target.is_in_process()
        && let Err(e) = client.purge_queue(&plan.queue).await
    {
        eprintln!("warning: purging {} after the soak failed: {e}", plan.queue);
    }
    Ok(outcome)
}

/// Lost (acknowledged, never received), unexpected (received, never sent, not even by a send
/// whose outcome is unknown) and distinct received messages.
fn account(acked: &Bits, uncertain: &Bits, received: &Bits) -> (u64, u64, u64) {
    let (acked, uncertain, received) = (acked.snapshot(), uncertain.snapshot(), received.snapshot());
    let word = |words: &[u64], i: usize| words.get(i).copied().unwrap_or(0);
    let words = acked.len().max(uncertain.len()).max(received.len());
    let (mut lost, mut unexpected) = (0u64, 0u64);
    for i in 0..words {
        let (a, u, r) = (word(&acked, i), word(&uncertain, i), word(&received, i));
        lost += u64::from((a & !r).count_ones());
        unexpected += u64::from((r & !a & !u).count_ones());
    }
    (lost, unexpected, count_bits(&received))
}

fn count_bits(words: &[u64]) -> u64 {
    words.iter().map(|w| u64::from(w.count_ones())).sum()
}

/// Sends what is due, up to a batch per call, until the soak ends. Producer `index` of
/// `producers` numbers its `k`-th message `k * producers + index`.
async fn produce(state: Arc<Soak>, schedule: Schedule, index: u64, producers: u64) -> Latency {
    let mut latency = Latency::new();
    let mut next = 0u64;
    let end = tokio::time::Instant::from_std(state.end);
    loop {
        let now = Instant::now();
        if now >= state.end {
            break;
        }
        let due = schedule.due_count(now).saturating_sub(next);
        if due == 0 {
            tokio::select! {
                _ = tokio::time::sleep_until(tokio::time::Instant::from_std(schedule.due_at(next))) => {}
                _ = tokio::time::sleep_until(end) => break,
            }
            continue;
        }
        let count = due.min(u64::from(SOAK_BATCH));
        let numbers: Vec<u64> = (next..next + count).map(|k| k * producers + index).collect();
        let messages = (next..next + count)
            .zip(&numbers)
            .map(|(k, n)| {
                let body = format!("{:016x}{n:016x}{}", state.nanos(schedule.due_at(k)), state.padding);
                SendMessage { body: Some(body), ..Default::default() }
            })
            .collect();
        next += count;
        let started = Instant::now();
        let outcome = state.client.send_messages(&state.queue, &SendRequest { messages }).await;
        let done = Instant::now();
        latency.record(done - started);
        match outcome {
            Ok(response) => {
                let mut ok = 0;
                for (n, result) in numbers.iter().zip(&response.results) {
                    if result.id.is_some() {
                        state.acked.set(*n);
                        ok += 1;
                    } else {
                        state.uncertain.set(*n);
                        state.error(format!("send entry refused: {:?}", result.error));
                    }
                }
                state.acked_count.fetch_add(ok, Ordering::AcqRel);
                let mut window = state.window.lock().unwrap_or_else(|e| e.into_inner());
                window.sent += ok;
                window.send_latency.record(done - started);
            }
            Err(e) => {
                for n in &numbers {
                    state.uncertain.set(*n);
                }
                state.error(format!("send: {e}"));
                tokio::time::sleep(crate::ceiling::ERROR_PAUSE).await;
            }
        }
    }
    latency
}

/// Receives and acks until told to stop; returns the end-to-end latency of first deliveries
/// (from each message's due time to the end of the receive that returned it).
async fn consume(state: Arc<Soak>, stop: Arc<tokio::sync::Notify>) -> Latency {
    let mut latency = Latency::new();
    let request = ReceiveRequest {
        max: Some(SOAK_RECEIVE_MAX),
        wait_ms: Some(workload::RECEIVE_WAIT_MS),
        visibility_timeout_ms: Some(VISIBILITY_TIMEOUT_MS),
    };
    let stopped = stop.notified();
    tokio::pin!(stopped);
    loop {
        let outcome = tokio::select! {
            outcome = state.client.receive_messages(&state.queue, &request) => outcome,
            _ = &mut stopped => break,
        };
        let messages = match outcome {
            Ok(list) => list.messages,
            Err(e) => {
                state.error(format!("receive: {e}"));
                tokio::time::sleep(crate::ceiling::ERROR_PAUSE).await;
                continue;
            }
        };
        let done = Instant::now();
        let now_nanos = state.nanos(done);
        let mut receipts = Vec::with_capacity(messages.len());
        let mut first = 0;
        {
            let mut window = state.window.lock().unwrap_or_else(|e| e.into_inner());
            for message in messages {
                receipts.extend(message.receipt);
                let Some((due, n)) = message.body.as_deref().and_then(stamp_of) else {
                    state.malformed.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                if !state.received.set(n) {
                    state.duplicates.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                first += 1;
                let e2e = Duration::from_nanos(now_nanos.saturating_sub(due));
                window.e2e_latency.record(e2e);
                latency.record(e2e);
            }
            window.received += first;
        }
        if !receipts.is_empty()
            && let Err(e) = state.client.ack(&state.queue, receipts).await
        {
            state.error(format!("ack: {e}"));
        }
    }
    latency
}

/// The due time and message number at the start of a soak body.
fn stamp_of(body: &str) -> Option<(u64, u64)> {
    let due = u64::from_str_radix(body.get(..STAMP_DIGITS)?, 16).ok()?;
    let n = u64::from_str_radix(body.get(STAMP_DIGITS..2 * STAMP_DIGITS)?, 16).ok()?;
    Some((due, n))
}

/// Prints a row every `sample_every` until the soak ends; returns the rows.
async fn sample(plan: &Plan, soak: &SoakPlan, state: &Soak, target: &Target) -> Vec<Sample> {
    let mut samples = Vec::new();
    let bar = crate::progress::phase("soaking", plan.duration);
    live(&bar, table_header());
    let mut last = state.epoch;
    let mut errors_before = 0;
    while last < state.end {
        let next = (last + soak.sample_every).min(state.end);
        while Instant::now() < next {
            tokio::time::sleep(Duration::from_millis(200).min(next.saturating_duration_since(Instant::now()))).await;
            bar.set_position(state.epoch.elapsed().as_millis() as u64);
        }
        let now = Instant::now();
        let interval = now.duration_since(last).as_secs_f64().max(f64::MIN_POSITIVE);
        let window = std::mem::replace(&mut *state.window.lock().unwrap_or_else(|e| e.into_inner()), Window::new());
        let backlog = state
            .client
            .get_queue(&state.queue)
            .await
            .ok()
            .map(|q| q.counts.visible + q.counts.in_flight + q.counts.delayed);
        let errors = state.errors.load(Ordering::Acquire);
        let sample = Sample {
            elapsed: now.duration_since(state.epoch),
            sent_per_s: window.sent as f64 / interval,
            received_per_s: window.received as f64 / interval,
            send_p50_ms: window.send_latency.quantile_ms(0.5),
            send_p99_ms: window.send_latency.quantile_ms(0.99),
            send_max_ms: window.send_latency.max_ms(),
            e2e_p50_ms: window.e2e_latency.quantile_ms(0.5),
            e2e_p99_ms: window.e2e_latency.quantile_ms(0.99),
            e2e_max_ms: window.e2e_latency.max_ms(),
            backlog,
            rss_mib: target.is_in_process().then(resident_mib).flatten(),
            open_files: target.is_in_process().then(open_files).flatten(),
            data_mib: target.data_dir().map(|dir| dir_bytes(dir) as f64 / MIB),
            errors: errors - errors_before,
        };
        errors_before = errors;
        live(&bar, table_row(&sample));
        bar.set_message(format!(
            "{} msg/s, RSS {}",
            thousands(sample.received_per_s),
            sample.rss_mib.map_or("-".into(), |m| format!("{m:.0} MiB"))
        ));
        samples.push(sample);
        last = now;
    }
    bar.finish_and_clear();
    samples
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_tell_first_from_repeated_sets() {
        let bits = Bits::new();
        assert!(bits.set(130));
        assert!(!bits.set(130));
        assert!(bits.set(129));
        assert_eq!(count_bits(&bits.snapshot()), 2);
        assert_eq!(bits.snapshot().len(), 3, "grown to the word holding bit 130");
    }

    #[test]
    fn stamps_round_trip_through_a_body() {
        let body = format!("{:016x}{:016x}{}", 123_456_789u64, 42u64, "...");
        assert_eq!(stamp_of(&body), Some((123_456_789, 42)));
        assert_eq!(stamp_of("short"), None);
        assert_eq!(stamp_of(&"z".repeat(40)), None);
    }

    #[test]
    fn the_ledger_counts_lost_and_unexpected_messages() {
        let (acked, uncertain, received) = (Bits::new(), Bits::new(), Bits::new());
        for n in [1, 2, 3, 200] {
            acked.set(n);
        }
        uncertain.set(4);
        for n in [1, 3, 4, 5, 200] {
            received.set(n);
        }
        // 2 was lost; 5 was never sent; 4 may have been (its send's outcome is unknown).
        assert_eq!(account(&acked, &uncertain, &received), (1, 1, 5));
    }
}
