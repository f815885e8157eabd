//! The `fifo` scenario: what strict order per message group costs. The same closed-loop load
//! (producers, consumers, body size, duration and backlog limit of the throughput scenario, batch
//! 10) runs against a standard queue, then against FIFO queues with 1, 10 and 1,000 message
//! groups; each FIFO row is reported as a ratio to the standard queue's rate in the same run.
//!
//! Each phase has a queue of its own, created before and deleted after it, so that no phase sees
//! another's dedup ids or groups.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::Context;
use comfy_table::{CellAlignment, Table, presets};
use serde_json::{Value, json};
use sluice_api::CreateQueueRequest;

use crate::Plan;
use crate::report::{self, thousands};
use crate::workload::{self, PhaseResult, PhaseSpec, RECEIVE_WAIT_MS};

/// Messages per send = receive max = receipts per ack: SQS's receive maximum, and the batch the
/// issue asks for.
pub(crate) const BATCH: u32 = 10;
/// FIFO queues measured, by number of message groups.
const GROUP_COUNTS: [u32; 3] = [1, 10, 1_000];

/// One row: a standard queue (`groups: None`) or a FIFO queue with `groups` groups.
#[derive(Debug, Clone)]
struct Row {
    groups: Option<u32>,
    queue: String,
    result: PhaseResult,
}

/// The phases in the order they run: the standard queue first, as the baseline.
fn specs(queue_prefix: &str) -> Vec<PhaseSpec> {
    let standard = PhaseSpec {
        label: "standard queue".into(),
        queue: format!("{queue_prefix}-standard"),
        batch: BATCH,
        groups: None,
    };
    let fifo = GROUP_COUNTS.iter().map(|&groups| PhaseSpec {
        label: format!("FIFO, {groups} groups"),
        queue: format!("{queue_prefix}-fifo-{groups}.fifo"),
        batch: BATCH,
        groups: Some(groups),
    });
    std::iter::once(standard).chain(fifo).collect()
}

pub(crate) async fn run(plan: &Plan) -> anyhow::Result<()> {
    let started = Instant::now();
    let load_average = report::load_average();
    let (rows, server) = crate::with_target(plan, async |url| phases(plan, url).await).await?;
    let text = render(plan, &server, &rows, started.elapsed(), load_average.as_deref());
    crate::publish(plan, &text, json(plan, &server, &rows))
}

async fn phases(plan: &Plan, url: &str) -> anyhow::Result<Vec<Row>> {
    let client = workload::client(url)?;
    let epoch = Instant::now();
    let mut rows = Vec::new();
    for spec in specs(&plan.queue) {
        let request =
            CreateQueueRequest { name: spec.queue.clone(), fifo: spec.groups.map(|_| true), ..Default::default() };
        client.create_queue(&request).await.with_context(|| format!("creating queue {} on {url}", spec.queue))?;
        let result = workload::phase(plan, &client, epoch, &spec).await;
        // Deleted even after a failed phase, so that an external server is left as it was found.
        let deleted = client.delete_queue(&spec.queue).await;
        let result = result?;
        deleted.with_context(|| format!("deleting queue {}", spec.queue))?;
        rows.push(Row { groups: spec.groups, queue: spec.queue, result });
    }
    Ok(rows)
}

/// `received` over the standard queue's received rate; `None` without a standard rate.
fn ratio(received: f64, standard: f64) -> Option<f64> {
    (standard > 0.0).then(|| received / standard)
}

fn standard_rate(rows: &[Row]) -> f64 {
    rows.iter().find(|r| r.groups.is_none()).map_or(0.0, |r| r.result.received.rate(r.result.window))
}

fn render(plan: &Plan, server: &str, rows: &[Row], elapsed: Duration, load_average: Option<&str>) -> String {
    let mut out = String::new();
    let w = &mut out;
    report::header(w, plan, server, elapsed, load_average);
    let _ = writeln!(
        w,
        "workload   per queue: {} producers, {} consumers, closed loop over HTTP/1.1 (sluice-client); {}-byte text bodies;\n           \
         batch {BATCH} = messages per send = receive max = receipts per ack; long poll {RECEIVE_WAIT_MS} ms;\n           \
         FIFO: message k of a phase goes to group k mod groups, each with a unique dedup_id;\n           \
         {};\n           \
         {} warm-up, then {} measured per queue",
        plan.producers,
        plan.consumers,
        plan.body_bytes,
        report::backlog_rule(plan),
        humantime::format_duration(plan.warmup),
        humantime::format_duration(plan.duration),
    );
    let _ = writeln!(w, "reproduce  {}", command_line(plan));
    let _ = writeln!(w);
    let _ = writeln!(w, "{}", table(rows));
    let _ = writeln!(
        w,
        "sent = acknowledged sends; received = delivered end to end; e2e latency = start of the send call to the end of\n\
         the receive call; vs standard = received msg/s over the standard queue's in this run.\n\
         FIFO with 1 group is serial by design: a receive takes up to {BATCH} consecutive messages of the group, and the\n\
         group delivers nothing more until they are all acked, so at most one batch is in flight whatever the number of\n\
         consumers; its rate is one receive + ack round trip per {BATCH} messages, and its e2e latency is the backlog\n\
         limit divided by that rate. With 10 or 1,000 groups one receive can take messages of several groups and\n\
         consumers work in parallel; what remains is FIFO bookkeeping (group index, a dedup record written per message)."
    );
    for row in rows {
        let r = &row.result;
        for (what, tally) in [("send", &r.sent), ("receive", &r.received), ("ack", &r.ack)] {
            if let Some(first) = &tally.first_error {
                let _ = writeln!(w, "{}: {} {what} errors, first: {first}", row.queue, tally.errors);
            }
        }
    }
    out
}

fn table(rows: &[Row]) -> Table {
    let standard = standard_rate(rows);
    let mut table = Table::new();
    table.load_preset(presets::ASCII_MARKDOWN).set_header([
        "queue",
        "groups",
        "sent msg/s",
        "received msg/s",
        "e2e p50 / p99 ms",
        "vs standard",
        "backlog at end",
        "errors",
    ]);
    for row in rows {
        let r = &row.result;
        let received = r.received.rate(r.window);
        table.add_row([
            if row.groups.is_some() { "FIFO" } else { "standard" }.to_owned(),
            row.groups.map_or_else(|| "-".into(), |g| thousands(f64::from(g))),
            thousands(r.sent.rate(r.window)),
            thousands(received),
            r.received.latency.p50_p99(),
            ratio(received, standard).map_or_else(|| "-".into(), |x| format!("{x:.2}")),
            r.backlog.map_or_else(|| "?".into(), |b| b.to_string()),
            (r.sent.errors + r.received.errors + r.ack.errors).to_string(),
        ]);
    }
    for column in table.column_iter_mut().skip(1) {
        column.set_cell_alignment(CellAlignment::Right);
    }
    table
}

/// The command that repeats this run.
fn command_line(plan: &Plan) -> String {
    let mut target = match &plan.server {
        Some(url) => format!("--server {url}"),
        None => format!("--durability {}", plan.durability_label()),
    };
    if let Some(n) = plan.backlog_max {
        target.push_str(&format!(" --backlog-max {n}"));
    }
    format!(
        "sluice bench --scenario fifo {target} --producers {} --consumers {} --body-bytes {} --duration {} --warmup {}",
        plan.producers,
        plan.consumers,
        plan.body_bytes,
        humantime::format_duration(plan.duration),
        humantime::format_duration(plan.warmup),
    )
}

fn json(plan: &Plan, server: &str, rows: &[Row]) -> Value {
    let standard = standard_rate(rows);
    let rows = rows.iter().map(|row| {
        let r = &row.result;
        let received = r.received.rate(r.window);
        report::json_row(
            plan,
            json!({
                "system": "sluice",
                "durability": plan.durability_label(),
                "workload": if row.groups.is_some() { "fifo-send-receive-ack" } else { "queue-send-receive-ack" },
                "server": server,
                "queue": row.queue,
                "fifo": row.groups.is_some(),
                "groups": row.groups,
                "batch": BATCH,
                "producers": plan.producers,
                "consumers": plan.consumers,
                "body_bytes": plan.body_bytes,
                "backlog_max": plan.backlog_max(BATCH),
                "duration_s": r.window.as_secs_f64(),
                "msgs_per_sec": received,
                "p50_ms": r.received.latency.quantile_ms(0.5),
                "p99_ms": r.received.latency.quantile_ms(0.99),
                "sent_msgs_per_sec": r.sent.rate(r.window),
                "send_p50_ms": r.sent.latency.quantile_ms(0.5),
                "send_p99_ms": r.sent.latency.quantile_ms(0.99),
                "ratio_to_standard": ratio(received, standard),
                "backlog_at_end": r.backlog,
                "send_errors": r.sent.errors,
                "receive_errors": r.received.errors,
                "ack_errors": r.ack.errors,
            }),
        )
    });
    Value::Array(rows.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_queue_runs_first_and_fifo_queues_are_named_fifo() {
        let specs = specs("b");
        let names: Vec<_> = specs.iter().map(|s| (s.queue.as_str(), s.groups)).collect();
        assert_eq!(
            names,
            [
                ("b-standard", None),
                ("b-fifo-1.fifo", Some(1)),
                ("b-fifo-10.fifo", Some(10)),
                ("b-fifo-1000.fifo", Some(1_000))
            ]
        );
        assert!(specs.iter().all(|s| s.batch == BATCH));
    }

    #[test]
    fn rates_are_compared_with_the_standard_queue() {
        assert_eq!(ratio(500.0, 2_000.0), Some(0.25));
        assert_eq!(ratio(500.0, 0.0), None);
    }
}
