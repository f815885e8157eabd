//! The `schema` scenario: what checking messages against a JSON Schema at the door costs. The
//! same closed-loop sends of the same JSON body (1 KiB by default, an order with a customer and
//! five items) go into queues without and with schema validation, in the same run, in the
//! order off, on, on, off (so that a store growing or compacting over the run weighs on both
//! alike); the report gives each phase, both modes' rates over their two phases and the ratio. Every message names its type in both
//! phases, so the only difference is the check itself (the queue's cached setting, the type's
//! cached latest version and compiled validator, parsing the body and validating it).
//!
//! Nobody consumes, as in the fanout scenario: at the end of a phase the queue's depth is
//! compared with what was acknowledged. Before measuring, one invalid message is sent to the
//! validating queue and must be refused, so that the figures cannot describe a check that did
//! not run. The check alone (parse and validate, no HTTP, no store) is also timed on one core.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use comfy_table::{CellAlignment, Table, presets};
use serde_json::{Value, json};
use sluice_api::{Compatibility, CreateQueueRequest, SendMessage, SendRequest};
use sluice_client::Client;

use crate::Plan;
use crate::report::{self, thousands};
use crate::stats::Tally;
use crate::workload;

/// Messages per send call.
pub(crate) const SEND_BATCH: u32 = 10;
/// The body size the issue asks about, when `--body-bytes` is not given.
pub(crate) const BODY_BYTES_DEFAULT: usize = 1_024;
/// How long the check alone is timed.
const CHECK_ALONE_DURATION: Duration = Duration::from_secs(1);

/// The schema registered: a closed order object, types, a pattern, an enum, bounds and an
/// array of closed item objects, the keywords real schemas use most.
fn schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": "^o-[0-9]+$"},
            "customer": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "email": {"type": "string", "minLength": 3},
                    "country": {"type": "string", "minLength": 2, "maxLength": 2},
                },
                "required": ["id", "email", "country"],
            },
            "items": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string"},
                        "qty": {"type": "integer", "minimum": 1},
                        "price": {"type": "number", "exclusiveMinimum": 0},
                    },
                    "required": ["sku", "qty", "price"],
                    "additionalProperties": false,
                },
            },
            "currency": {"enum": ["EUR", "USD", "GBP"]},
            "total": {"type": "number", "minimum": 0},
            "note": {"type": "string"},
        },
        "required": ["id", "customer", "items", "currency", "total"],
        "additionalProperties": false,
    })
}

/// An order that passes [`schema`], padded through its `note` to `body_bytes` (or as short as
/// it can be, when `body_bytes` is below [`body_bytes_min`]).
pub(crate) fn order_body(body_bytes: usize) -> String {
    let items: Vec<Value> =
        (1..=5).map(|i| json!({"sku": format!("SKU-{i:04}"), "qty": i, "price": 9.5 * f64::from(i)})).collect();
    let mut order = json!({
        "id": "o-1234567",
        "customer": {"id": "c-42", "email": "buyer@example.com", "country": "FR"},
        "items": items,
        "currency": "EUR",
        "total": 142.5,
        "note": "",
    });
    let bare = order.to_string().len();
    order["note"] = Value::String("x".repeat(body_bytes.saturating_sub(bare)));
    order.to_string()
}

/// The shortest body the scenario sends: the order with an empty note.
pub(crate) fn body_bytes_min() -> usize {
    order_body(0).len()
}

/// One phase: a queue without (`validated: false`) or with schema validation.
#[derive(Debug, Clone)]
struct Row {
    validated: bool,
    /// Which of the mode's two phases (1 or 2).
    round: usize,
    /// Messages acknowledged inside the measured window, with the latency of each send call.
    sent: Tally,
    /// Send calls completed inside the window.
    calls: u64,
    window: Duration,
    /// Messages acknowledged over the whole phase, warm-up included.
    acked_total: u64,
    /// Messages in the queue at its end.
    stored: u64,
}

impl Row {
    fn rate(&self) -> f64 {
        self.sent.rate(self.window)
    }
}

/// The phases in the order they run: off, on, on, off.
const PHASES: [bool; 4] = [false, true, true, false];

/// The check without HTTP or the store: bodies parsed and validated per second on one core.
#[derive(Debug, Clone, Copy)]
struct CheckAlone {
    per_second: f64,
}

pub(crate) async fn run(plan: &Plan) -> anyhow::Result<()> {
    let started = Instant::now();
    let load_average = report::load_average();
    let body = order_body(plan.body_bytes);
    // First, while nothing else competes for the cores.
    let alone = {
        let body = body.clone();
        tokio::task::spawn_blocking(move || check_alone(&body)).await.context("the check-alone timing panicked")??
    };
    let (rows, server) = crate::with_target(plan, async |url| phases(plan, url, &body).await).await?;
    let text = render(plan, &server, &rows, alone, started.elapsed(), load_average.as_deref());
    crate::publish(plan, &text, json(plan, &server, &rows, alone))
}

/// Times parsing and validating `body` with the server's own validator code.
fn check_alone(body: &str) -> anyhow::Result<CheckAlone> {
    let validator = sluice_services::schemas::validate::compile(&schema()).map_err(anyhow::Error::msg)?;
    let start = Instant::now();
    let mut checked = 0u64;
    while start.elapsed() < CHECK_ALONE_DURATION {
        for _ in 0..100 {
            let instance: Value = serde_json::from_str(body)?;
            let failures = sluice_services::schemas::validate::failures(&validator, &instance);
            if let Some(first) = failures.first() {
                bail!("the benchmark's body fails its own schema at {}: {}", first.pointer, first.message);
            }
            checked += 1;
        }
    }
    Ok(CheckAlone { per_second: checked as f64 / start.elapsed().as_secs_f64() })
}

fn type_name(plan: &Plan) -> String {
    format!("{}.order", plan.queue)
}

fn queue_name(plan: &Plan, validated: bool, round: usize) -> String {
    format!("{}-schema-{}-{round}", plan.queue, if validated { "on" } else { "off" })
}

async fn phases(plan: &Plan, url: &str, body: &str) -> anyhow::Result<Vec<Row>> {
    let client = workload::client(url)?;
    let ty = type_name(plan);
    // The benchmark's own type: no mode, so that a rerun against a server that has an older
    // version of this schema registers it again instead of failing.
    client
        .set_schema_compatibility(&ty, Compatibility::None)
        .await
        .with_context(|| format!("configuring type {ty} on {url}"))?;
    client.register_schema(&ty, &schema()).await.with_context(|| format!("registering the schema of {ty}"))?;
    let mut rows: Vec<Row> = Vec::new();
    for validated in PHASES {
        let round = rows.iter().filter(|r| r.validated == validated).count() + 1;
        let queue = queue_name(plan, validated, round);
        let request =
            CreateQueueRequest { name: queue.clone(), schema_validation: Some(validated), ..Default::default() };
        let result = async {
            client.create_queue(&request).await.with_context(|| format!("creating queue {queue}"))?;
            if validated {
                refused_when_invalid(&client, &queue, &ty).await?;
            }
            phase(plan, &client, &queue, &ty, body, validated).await.map(|row| Row { round, ..row })
        }
        .await;
        // Deleted even after a failed phase, so that an external server is left as it was found.
        let deleted = client.delete_queue(&queue).await;
        let row = result?;
        deleted.with_context(|| format!("deleting queue {queue}"))?;
        rows.push(row);
    }
    Ok(rows)
}

/// One invalid order must be refused by the validating queue, or the figures mean nothing.
async fn refused_when_invalid(client: &Client, queue: &str, ty: &str) -> anyhow::Result<()> {
    let invalid = SendMessage {
        body: Some(r#"{"id": "not-an-order"}"#.into()),
        message_type: Some(ty.to_owned()),
        ..Default::default()
    };
    let answer = client.send_messages(queue, &SendRequest { messages: vec![invalid] }).await?;
    match answer.results.first().and_then(|r| r.error.as_ref()) {
        Some(e) if e.code == "schema_validation_failed" => Ok(()),
        Some(e) => bail!("an invalid order was refused with {} instead of schema_validation_failed", e.code),
        None => bail!("queue {queue} took an invalid order: its schema validation is not on"),
    }
}

/// Runs the producers for the warm-up and the measured window, then reads the queue's depth.
async fn phase(
    plan: &Plan,
    client: &Client,
    queue: &str,
    ty: &str,
    body: &str,
    validated: bool,
) -> anyhow::Result<Row> {
    let start = Instant::now();
    let measure_from = start + plan.warmup;
    let end = measure_from + plan.duration;
    let acked_total = Arc::new(AtomicU64::new(0));
    let request = Arc::new(SendRequest {
        messages: (0..SEND_BATCH)
            .map(|_| SendMessage {
                body: Some(body.to_owned()),
                message_type: Some(ty.to_owned()),
                ..Default::default()
            })
            .collect(),
    });
    let mut tasks = Vec::new();
    for _ in 0..plan.producers {
        let (client, queue, request, acked_total) =
            (client.clone(), queue.to_owned(), request.clone(), acked_total.clone());
        tasks.push(tokio::spawn(
            async move { producer(&client, &queue, &request, measure_from, end, &acked_total).await },
        ));
    }
    let label = if validated { "with validation" } else { "without validation" };
    let bar = crate::progress::phase(label, plan.warmup + plan.duration);
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(100)).await;
        bar.set_position(u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX));
        bar.set_message(format!("{} sent", thousands(acked_total.load(Ordering::Relaxed) as f64)));
    }
    let mut sent = Tally::new();
    let mut calls = 0;
    for task in tasks {
        let (tally, task_calls) = task.await.context("a producer task panicked")?;
        sent.merge(&tally);
        calls += task_calls;
    }
    bar.finish_and_clear();
    let counts = client.get_queue(queue).await.with_context(|| format!("reading queue {queue}"))?.counts;
    Ok(Row {
        validated,
        round: 1,
        sent,
        calls,
        window: plan.duration,
        acked_total: acked_total.load(Ordering::Relaxed),
        stored: counts.visible + counts.in_flight + counts.delayed,
    })
}

/// Sends batches until `end`; counts what completes after `measure_from`. Returns the tally
/// (messages) and the number of send calls measured.
async fn producer(
    client: &Client,
    queue: &str,
    request: &SendRequest,
    measure_from: Instant,
    end: Instant,
    acked_total: &AtomicU64,
) -> (Tally, u64) {
    crate::stats::closed_loop(SEND_BATCH, measure_from, end, acked_total, || async {
        let response = client.send_messages(queue, request).await.map_err(|e| e.to_string())?;
        Ok(crate::stats::batch_answer(response.results.iter().map(|r| (r.id.is_some(), r.error.as_ref()))))
    })
    .await
}

/// A mode's messages per second over all its phases; `None` when it has none.
fn mode_rate(rows: &[Row], validated: bool) -> Option<f64> {
    let of_mode = || rows.iter().filter(move |r| r.validated == validated);
    let window: f64 = of_mode().map(|r| r.window.as_secs_f64()).sum();
    (window > 0.0).then(|| of_mode().map(|r| r.sent.count as f64).sum::<f64>() / window)
}

/// With validation over without, by messages per second; `None` without a baseline.
fn ratio(rows: &[Row]) -> Option<f64> {
    match (mode_rate(rows, true), mode_rate(rows, false)) {
        (Some(with), Some(without)) if without > 0.0 => Some(with / without),
        _ => None,
    }
}

fn render(
    plan: &Plan,
    server: &str,
    rows: &[Row],
    alone: CheckAlone,
    elapsed: Duration,
    load_average: Option<&str>,
) -> String {
    let mut out = String::new();
    let w = &mut out;
    report::header(w, plan, server, elapsed, load_average);
    let _ = writeln!(
        w,
        "workload   a queue per phase, schema validation off, on, on, off; the same {}-byte JSON order in every message,\n           \
         typed in every phase (latest version); {} producers, closed loop over HTTP/1.1 (sluice-client), {SEND_BATCH} messages\n           \
         per send; no consumers (the queue's depth is checked at the end); {} warm-up, then {} measured per phase",
        plan.body_bytes,
        plan.producers,
        humantime::format_duration(plan.warmup),
        humantime::format_duration(plan.duration),
    );
    let _ = writeln!(w, "reproduce  {}", command_line(plan));
    let _ = writeln!(w);
    let _ = writeln!(w, "{}", table(rows));
    let rate_text = |validated| mode_rate(rows, validated).map_or_else(|| "-".into(), thousands);
    let ratio_text = ratio(rows).map_or_else(|| "-".into(), |x| format!("{x:.2}"));
    let _ = writeln!(
        w,
        "without validation {} msg/s, with validation {} msg/s (each over its two phases): with / without = {ratio_text}",
        rate_text(false),
        rate_text(true),
    );
    let _ = writeln!(
        w,
        "the check alone (parse + validate this body, one core, no HTTP or store): {} msg/s, {:.1} us per message",
        thousands(alone.per_second),
        1e6 / alone.per_second.max(f64::MIN_POSITIVE),
    );
    let _ = writeln!(
        w,
        "sent = messages whose send was acknowledged (durable); latency = one send call of {SEND_BATCH} messages;\n\
         stored / acked = messages in the queue at the end over those acknowledged (warm-up included)."
    );
    for row in rows {
        if let Some(first) = &row.sent.first_error {
            let queue = queue_name(plan, row.validated, row.round);
            let _ = writeln!(w, "{queue}: {} send errors, first: {first}", row.sent.errors);
        }
    }
    out
}

fn table(rows: &[Row]) -> Table {
    let mut table = Table::new();
    table.load_preset(presets::ASCII_MARKDOWN).set_header([
        "phase",
        "schema validation",
        "sends/s",
        "sent msg/s",
        "send p50 / p99 ms",
        "stored / acked",
        "errors",
    ]);
    for (i, row) in rows.iter().enumerate() {
        table.add_row([
            (i + 1).to_string(),
            if row.validated { "on" } else { "off" }.to_owned(),
            thousands(row.calls as f64 / row.window.as_secs_f64()),
            thousands(row.rate()),
            row.sent.latency.p50_p99(),
            format!("{} / {}", row.stored, row.acked_total),
            row.sent.errors.to_string(),
        ]);
    }
    for column in table.column_iter_mut().skip(2) {
        column.set_cell_alignment(CellAlignment::Right);
    }
    table
}

/// The command that repeats this run.
fn command_line(plan: &Plan) -> String {
    let target = match &plan.server {
        Some(url) => format!("--server {url}"),
        None => format!("--durability {}", plan.durability_label()),
    };
    format!(
        "sluice bench --scenario schema {target} --producers {} --body-bytes {} --duration {} --warmup {}",
        plan.producers,
        plan.body_bytes,
        humantime::format_duration(plan.duration),
        humantime::format_duration(plan.warmup),
    )
}

fn json(plan: &Plan, server: &str, rows: &[Row], alone: CheckAlone) -> Value {
    let ratio = ratio(rows);
    let rows_all = rows;
    let rows = rows.iter().map(|row| {
        report::json_row(
            plan,
            json!({
                "system": "sluice",
                "durability": plan.durability_label(),
                "workload": "queue-send-json",
                "server": server,
                "schema_validation": row.validated,
                "round": row.round,
                "batch": SEND_BATCH,
                "producers": plan.producers,
                "body_bytes": plan.body_bytes,
                "duration_s": row.window.as_secs_f64(),
                "sends_per_sec": row.calls as f64 / row.window.as_secs_f64(),
                "msgs_per_sec": row.rate(),
                "p50_ms": row.sent.latency.quantile_ms(0.5),
                "p99_ms": row.sent.latency.quantile_ms(0.99),
                "mode_msgs_per_sec": mode_rate(rows_all, row.validated),
                "ratio_with_to_without": ratio,
                "check_alone_msgs_per_sec": alone.per_second,
                "stored_at_end": row.stored,
                "acked_total": row.acked_total,
                "send_errors": row.sent.errors,
            }),
        )
    });
    Value::Array(rows.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_the_size_asked_and_passes_the_schema() {
        let validator = sluice_services::schemas::validate::compile(&schema()).unwrap();
        for size in [BODY_BYTES_DEFAULT, body_bytes_min(), 4_096] {
            let body = order_body(size);
            assert_eq!(body.len(), size);
            let instance: Value = serde_json::from_str(&body).unwrap();
            assert!(sluice_services::schemas::validate::failures(&validator, &instance).is_empty(), "{body}");
        }
        assert_eq!(order_body(10).len(), body_bytes_min(), "never shorter than the bare order");
        let bad = json!({"id": "o-1", "customer": {}, "items": [], "currency": "EUR", "total": 1});
        assert!(!sluice_services::schemas::validate::failures(&validator, &bad).is_empty());
    }

    #[test]
    fn the_ratio_is_with_over_without() {
        let row = |validated, count| {
            let mut sent = Tally::new();
            sent.count = count;
            Row { validated, round: 1, sent, calls: 0, window: Duration::from_secs(1), acked_total: 0, stored: 0 }
        };
        assert_eq!(ratio(&[row(false, 1_000), row(true, 800)]), Some(0.8));
        // Each mode over its phases: (1,000 + 600) / 2 s over (1,200 + 800) / 2 s.
        let abba = [row(false, 1_200), row(true, 1_000), row(true, 600), row(false, 800)];
        assert_eq!(
            (mode_rate(&abba, false), mode_rate(&abba, true), ratio(&abba)),
            (Some(1_000.0), Some(800.0), Some(0.8))
        );
        assert_eq!(ratio(&[row(true, 800)]), None);
        assert_eq!(PHASES.iter().filter(|&&on| on).count(), 2, "two phases per mode");
    }
}
