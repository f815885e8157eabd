//! The `sagas` scenario: saga instances end to end through the orchestrator, with three queue
//! steps and instant participants.
//!
//! `--producers` starters each start an instance (`POST /v1/sagas/{name}/instances`) and wait
//! until it completed before starting the next (closed loop). `--consumers` participants per
//! step queue long-poll their queue and answer every step message at once with
//! `POST /v1/replies`, then acknowledge it. An instance is complete when the reply to its third
//! step is applied (`applied: 1`: the orchestrator swapped the instance to `completed` in that
//! call), so no polling of instances is needed.
//!
//! Figures over the measured window: instances completed per second, the end-to-end time of an
//! instance (start call to its last reply applied), and the orchestrator's overhead per step:
//! from the moment the orchestrator was handed the previous event (the start call for the first
//! step, the previous step's reply call for the others) to the moment the participant received
//! the step's message. That is what the orchestrator adds per step (its durable writes: the
//! reply applied, the attempt recorded, the message sent) plus the participant's long-poll
//! wake-up, and without the participant's own time.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use comfy_table::{CellAlignment, Table, presets};
use serde_json::{Value, json};
use sluice_api::{
    CreateQueueRequest, DefineSagaRequest, SagaCall, SagaQueueCall, SagaReply, SagaRetry, SagaStep, StartSagaRequest,
};
use sluice_client::Client;
use tokio::sync::oneshot;

use crate::Plan;
use crate::report::{self, thousands};
use crate::stats::{Latency, Tally};
use crate::workload;

/// Queue steps per instance.
pub(crate) const STEPS: usize = 3;
/// How long one instance may take before its starter counts an error and moves on.
const INSTANCE_WAIT: Duration = Duration::from_secs(30);
/// A participant's long poll.
const RECEIVE_WAIT_MS: u64 = 500;
/// Instances in flight per starter default, when `--producers` is not given.
pub(crate) const STARTERS_DEFAULT: usize = 16;

fn step_queue(plan: &Plan, step: usize) -> String {
    format!("{}-saga-s{step}", plan.queue)
}

fn saga_name(plan: &Plan) -> String {
    format!("{}-saga", plan.queue)
}

/// What starters and participants share.
struct Shared {
    client: Client,
    saga: String,
    measure_from: Instant,
    end: Instant,
    stop: AtomicBool,
    /// By correlation id: when the orchestrator was last handed the instance.
    handed: Mutex<HashMap<String, Instant>>,
    /// By correlation id: the starter waiting for the instance to complete.
    waiting: Mutex<HashMap<String, oneshot::Sender<()>>>,
    /// The orchestrator's overhead per step, within the window.
    overhead: Mutex<Latency>,
    replies: AtomicU64,
    reply_errors: AtomicU64,
    first_reply_error: Mutex<Option<String>>,
}

impl Shared {
    fn measuring(&self, at: Instant) -> bool {
        at >= self.measure_from && at <= self.end
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The run's figures.
#[derive(Debug)]
struct Outcome {
    completed: Tally,
    overhead: Latency,
    replies: u64,
    reply_errors: u64,
    first_reply_error: Option<String>,
}

pub(crate) async fn run(plan: &Plan) -> anyhow::Result<()> {
    let started = Instant::now();
    let load_average = report::load_average();
    let (outcome, server) = crate::with_target(plan, async |url| measure(plan, url).await).await?;
    let text = render(plan, &server, &outcome, started.elapsed(), load_average.as_deref());
    crate::publish(plan, &text, json(plan, &server, &outcome))
}

fn definition(plan: &Plan) -> DefineSagaRequest {
    let steps = (1..=STEPS)
        .map(|i| SagaStep {
            name: format!("s{i}"),
            action: SagaCall {
                http: None,
                queue: Some(SagaQueueCall {
                    queue: step_queue(plan, i),
                    body: json!({ "n": "{{input.n}}" }),
                    reply_timeout_ms: None,
                    reply_queue: None,
                }),
            },
            compensation: None,
            retry: Some(SagaRetry { max_attempts: Some(1), backoff: None }),
            timeout_ms: Some(INSTANCE_WAIT.as_millis() as u64),
        })
        .collect();
    DefineSagaRequest { steps }
}

async fn measure(plan: &Plan, url: &str) -> anyhow::Result<Outcome> {
    let client = workload::client(url)?;
    for i in 1..=STEPS {
        let request = CreateQueueRequest { name: step_queue(plan, i), ..Default::default() };
        client.create_queue(&request).await.with_context(|| format!("creating queue {}", request.name))?;
        client.purge_queue(&request.name).await?;
    }
    let saga = saga_name(plan);
    client.define_saga(&saga, &definition(plan)).await.with_context(|| format!("defining saga {saga}"))?;
    let start = Instant::now();
    let shared = Arc::new(Shared {
        client: client.clone(),
        saga,
        measure_from: start + plan.warmup,
        end: start + plan.warmup + plan.duration,
        stop: AtomicBool::new(false),
        handed: Mutex::default(),
        waiting: Mutex::default(),
        overhead: Mutex::new(Latency::new()),
        replies: AtomicU64::new(0),
        reply_errors: AtomicU64::new(0),
        first_reply_error: Mutex::default(),
    });
    let mut participants = Vec::new();
    for step in 1..=STEPS {
        for _ in 0..plan.consumers {
            let (shared, queue) = (shared.clone(), step_queue(plan, step));
            participants.push(tokio::spawn(async move { participant(&shared, &queue, step).await }));
        }
    }
    // Each run's correlation ids are its own, so a rerun against the same server matches
    // nothing of the last one's.
    let run = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut starters = Vec::new();
    for p in 0..plan.producers {
        let (shared, prefix) = (shared.clone(), format!("{run:x}-{p}"));
        starters.push(tokio::spawn(async move { starter(&shared, &prefix).await }));
    }
    let bar = crate::progress::phase("saga instances", plan.warmup + plan.duration);
    while Instant::now() < shared.end {
        tokio::time::sleep(Duration::from_millis(100)).await;
        bar.set_position(u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX));
    }
    let mut completed = Tally::new();
    for task in starters {
        completed.merge(&task.await.context("a starter panicked")?);
    }
    shared.stop.store(true, Ordering::Relaxed);
    for task in participants {
        task.await.context("a participant panicked")?;
    }
    bar.finish_and_clear();
    for i in 1..=STEPS {
        // Best effort: the figures are taken; a queue left behind is only clutter.
        let _ = client.delete_queue(&step_queue(plan, i)).await;
    }
    if completed.count == 0 {
        bail!("no saga instance completed in the window: {:?}", completed.first_error);
    }
    let overhead = lock(&shared.overhead).clone();
    Ok(Outcome {
        completed,
        overhead,
        replies: shared.replies.load(Ordering::Relaxed),
        reply_errors: shared.reply_errors.load(Ordering::Relaxed),
        first_reply_error: lock(&shared.first_reply_error).clone(),
    })
}

/// Starts instances one after another until the window ends; counts those that completed in it.
async fn starter(shared: &Shared, prefix: &str) -> Tally {
    let mut tally = Tally::new();
    let mut n = 0u64;
    while Instant::now() < shared.end {
        n += 1;
        let correlation_id = format!("{prefix}-{n}");
        let (done, completed) = oneshot::channel();
        lock(&shared.waiting).insert(correlation_id.clone(), done);
        let began = Instant::now();
        lock(&shared.handed).insert(correlation_id.clone(), began);
        let request = StartSagaRequest { input: json!({ "n": n }), correlation_id: Some(correlation_id.clone()) };
        if let Err(e) = shared.client.start_saga(&shared.saga, &request).await {
            lock(&shared.waiting).remove(&correlation_id);
            tally.error(1, || format!("start: {e}"));
            continue;
        }
        match tokio::time::timeout(INSTANCE_WAIT, completed).await {
            Ok(Ok(())) => {
                let finished = Instant::now();
                if shared.measuring(began) && shared.measuring(finished) {
                    tally.count += 1;
                    tally.latency.record(finished - began);
                }
            }
            _ => {
                lock(&shared.waiting).remove(&correlation_id);
                tally.error(1, || format!("instance {correlation_id} did not complete within {INSTANCE_WAIT:?}"));
            }
        }
    }
    tally
}

fn attribute(message: &sluice_api::Message, name: &str) -> Option<String> {
    message.attributes.get(name).map(|a| a.value.clone())
}

/// Answers every message of `queue` (step `step`) at once until told to stop.
async fn participant(shared: &Shared, queue: &str, step: usize) {
    while !shared.stop.load(Ordering::Relaxed) {
        let messages = match shared.client.receive(queue, 10, RECEIVE_WAIT_MS).await {
            Ok(messages) => messages,
            Err(_) => continue,
        };
        let mut receipts = Vec::new();
        for message in messages {
            let received = Instant::now();
            let Some(correlation_id) = attribute(&message, "X-Correlation-Id") else { continue };
            if let Some(handed) = lock(&shared.handed).remove(&correlation_id)
                && shared.measuring(handed)
                && shared.measuring(received)
            {
                lock(&shared.overhead).record(received - handed);
            }
            if step < STEPS {
                // Before the reply: the next step's message may arrive before this call returns.
                lock(&shared.handed).insert(correlation_id.clone(), Instant::now());
            }
            let reply = SagaReply {
                correlation_id: correlation_id.clone(),
                step: format!("s{step}"),
                ok: true,
                output: json!({ "step": step }),
                attempt: attribute(&message, "sluice.saga.attempt").and_then(|a| a.parse().ok()),
                ..Default::default()
            };
            match shared.client.reply_saga_step(&reply).await {
                Ok(answer) if answer.applied == 1 => {
                    shared.replies.fetch_add(1, Ordering::Relaxed);
                    if step == STEPS
                        && let Some(done) = lock(&shared.waiting).remove(&correlation_id)
                    {
                        let _ = done.send(());
                    }
                }
                answer => {
                    shared.reply_errors.fetch_add(1, Ordering::Relaxed);
                    let mut first = lock(&shared.first_reply_error);
                    if first.is_none() {
                        *first = Some(format!("{answer:?}"));
                    }
                }
            }
            receipts.extend(message.receipt);
        }
        if !receipts.is_empty() {
            let _ = shared.client.ack(queue, receipts).await;
        }
    }
}

fn render(plan: &Plan, server: &str, o: &Outcome, elapsed: Duration, load_average: Option<&str>) -> String {
    let mut out = String::new();
    let w = &mut out;
    report::header(w, plan, server, elapsed, load_average);
    let _ = writeln!(
        w,
        "workload   saga instances of {STEPS} queue steps, no compensations; {} starters, closed loop (start, then wait\n           \
         for the last reply to be applied); {} participants per step queue, answering at once with POST /v1/replies;\n           \
         HTTP/1.1 (sluice-client); {} warm-up, then {} measured",
        plan.producers,
        plan.consumers,
        humantime::format_duration(plan.warmup),
        humantime::format_duration(plan.duration),
    );
    let _ = writeln!(w, "reproduce  {}", command_line(plan));
    let _ = writeln!(w);
    let mut table = Table::new();
    table.load_preset(presets::ASCII_MARKDOWN).set_header([
        "instances/s",
        "steps/s",
        "instance p50 / p99 ms",
        "overhead per step p50 / p99 ms",
        "completed",
        "errors",
    ]);
    let rate = o.completed.rate(plan.duration);
    table.add_row([
        thousands(rate),
        thousands(rate * STEPS as f64),
        o.completed.latency.p50_p99(),
        o.overhead.p50_p99(),
        o.completed.count.to_string(),
        (o.completed.errors + o.reply_errors).to_string(),
    ]);
    for column in table.column_iter_mut() {
        column.set_cell_alignment(CellAlignment::Right);
    }
    let _ = writeln!(w, "{table}");
    let _ = writeln!(
        w,
        "instance = start call to the last step's reply applied (the instance completed in that write);\n\
         overhead per step = the orchestrator handed the previous event (start, or the previous reply) to the participant\n\
         receiving the step's message: the reply applied, the attempt recorded, the message sent, the long poll woken."
    );
    if let Some(first) = &o.completed.first_error {
        let _ = writeln!(w, "{} starter errors, first: {first}", o.completed.errors);
    }
    if let Some(first) = &o.first_reply_error {
        let _ = writeln!(w, "{} replies not applied, first: {first}", o.reply_errors);
    }
    out
}

/// The command that repeats this run.
fn command_line(plan: &Plan) -> String {
    let target = match &plan.server {
        Some(url) => format!("--server {url}"),
        None => format!("--durability {}", plan.durability_label()),
    };
    format!(
        "sluice bench --scenario sagas {target} --producers {} --consumers {} --duration {} --warmup {}",
        plan.producers,
        plan.consumers,
        humantime::format_duration(plan.duration),
        humantime::format_duration(plan.warmup),
    )
}

fn json(plan: &Plan, server: &str, o: &Outcome) -> Value {
    let rate = o.completed.rate(plan.duration);
    Value::Array(vec![report::json_row(
        plan,
        json!({
            "system": "sluice",
            "durability": plan.durability_label(),
            "workload": "saga-3-queue-steps",
            "server": server,
            "starters": plan.producers,
            "participants_per_step": plan.consumers,
            "duration_s": plan.duration.as_secs_f64(),
            "instances_per_sec": rate,
            "steps_per_sec": rate * STEPS as f64,
            "instance_p50_ms": o.completed.latency.quantile_ms(0.5),
            "instance_p99_ms": o.completed.latency.quantile_ms(0.99),
            "step_overhead_p50_ms": o.overhead.quantile_ms(0.5),
            "step_overhead_p99_ms": o.overhead.quantile_ms(0.99),
            "completed": o.completed.count,
            "replies_applied": o.replies,
            "errors": o.completed.errors + o.reply_errors,
        }),
    )])
}
