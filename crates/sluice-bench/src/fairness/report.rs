//! The fairness scenario's printed report (one table row per mode, then what fairness bought)
//! and its JSON rows.

use std::fmt::Write as _;
use std::time::Duration;

use comfy_table::{CellAlignment, Table, presets};
use serde_json::{Value, json};

use super::{Mode, ModeResult, NOISY_BATCH, QUIET_EVERY, RECEIVE_MAX, stage_bound};
use crate::Plan;
use crate::report::{self, thousands};
use crate::stats::{Latency, ms};

pub(crate) fn render(
    plan: &Plan,
    server: &str,
    results: &[ModeResult],
    elapsed: Duration,
    load_average: Option<&str>,
) -> String {
    let mut out = String::new();
    let w = &mut out;
    report::header(w, plan, server, elapsed, load_average);
    let _ = writeln!(
        w,
        "workload   a fresh standard queue per row; {}-byte text bodies over HTTP/1.1 (sluice-client);\n           \
         load: {} tasks send a noisy backlog of {} messages in sends of {} (at most {});\n           \
         measure: {} consumers receive {RECEIVE_MAX} at a time and ack; one noisy producer tops the backlog up with sends of\n           \
         {}; after a {} warm-up, one quiet producer sends one message every {} ms for {}, open loop;\n           \
         drain: producers stop, consumers go on until every quiet message is received (at most {})",
        plan.body_bytes,
        plan.producers,
        thousands(plan.noisy_backlog as f64),
        thousands(NOISY_BATCH as f64),
        humantime::format_duration(stage_bound(plan.duration)),
        plan.consumers,
        thousands(NOISY_BATCH as f64),
        humantime::format_duration(plan.warmup),
        QUIET_EVERY.as_millis(),
        humantime::format_duration(plan.duration),
        humantime::format_duration(stage_bound(plan.duration)),
    );
    let _ = writeln!(w, "reproduce  {}", command_line(plan));
    let _ = writeln!(w);
    let _ = writeln!(w, "{}", table(results));
    let _ = writeln!(
        w,
        "quiet wait = start of a quiet message's send call to the end of the receive call that returned it; a quiet message\n\
         still waiting when the drain stopped counts with its wait so far (a lower bound). noisy msg/s = noisy messages\n\
         received during the measured window; noisy e2e = their send-call start to receive.\n\
         groups: noisy messages in group \"noisy\", quiet ones in group \"quiet\"; the fair index serves the least recently\n\
         served group first, so each quiet message is next in line. ungrouped: every message is in the one ungrouped\n\
         group, delivered in send order, so a quiet message waits for the whole backlog ahead of it."
    );
    if let Some(line) = comparison(results) {
        let _ = writeln!(w, "{line}");
    }
    for result in results {
        if result.loaded < plan.noisy_backlog {
            let _ = writeln!(
                w,
                "{}: loaded only {} of {} noisy messages within the load bound",
                result.mode.name(),
                result.loaded,
                plan.noisy_backlog
            );
        }
        for (what, tally) in [
            ("load", &result.load),
            ("noisy send", &result.noisy_topped_up),
            ("quiet send", &result.quiet_sent),
            ("receive", &result.receive),
            ("ack", &result.ack),
        ] {
            if let Some(first) = &tally.first_error {
                let _ = writeln!(w, "{}: {} {what} errors, first: {first}", result.mode.name(), tally.errors);
            }
        }
    }
    out
}

fn table(results: &[ModeResult]) -> Table {
    let mut table = Table::new();
    table.load_preset(presets::ASCII_MARKDOWN).set_header([
        "mode",
        "quiet sent",
        "quiet wait p50 / p99 / max ms",
        "quiet still waiting",
        "noisy msg/s",
        "noisy e2e p50 ms",
        "backlog at start",
        "load s",
        "drain s",
        "errors",
    ]);
    for r in results {
        table.add_row([
            r.mode.name().to_owned(),
            r.quiet_sent.count.to_string(),
            p50_p99_max(&r.quiet_wait),
            r.quiet_still_waiting.to_string(),
            thousands(r.noisy_received.rate(r.window)),
            r.noisy_received.latency.quantile_ms(0.5).map_or_else(|| "-".into(), ms),
            r.backlog_at_start.map_or_else(|| "?".into(), |b| thousands(b as f64)),
            format!("{:.1}", r.load_time.as_secs_f64()),
            format!("{:.1}", r.drain_time.as_secs_f64()),
            r.errors().to_string(),
        ]);
    }
    for column in table.column_iter_mut().skip(1) {
        column.set_cell_alignment(CellAlignment::Right);
    }
    table
}

/// "p50 / p99 / max" in milliseconds, or a dash without samples.
fn p50_p99_max(latency: &Latency) -> String {
    match (latency.quantile_ms(0.5), latency.quantile_ms(0.99), latency.max_ms()) {
        (Some(p50), Some(p99), Some(max)) => format!("{} / {} / {}", ms(p50), ms(p99), ms(max)),
        _ => "-".into(),
    }
}

/// One sentence comparing the two modes' quiet p50 waits and noisy rates.
fn comparison(results: &[ModeResult]) -> Option<String> {
    let find = |mode| results.iter().find(|r| r.mode == mode);
    let (fair, baseline) = (find(Mode::Groups)?, find(Mode::Ungrouped)?);
    let fair_p50 = fair.quiet_wait.quantile_ms(0.5)?;
    let baseline_p50 = baseline.quiet_wait.quantile_ms(0.5)?;
    Some(format!(
        "fairness bought: quiet p50 wait {} ms with groups against {} ms without ({:.0}x shorter); noisy throughput {} msg/s against {} msg/s ({:.2}x)",
        ms(fair_p50),
        ms(baseline_p50),
        baseline_p50 / fair_p50.max(0.001),
        thousands(fair.noisy_received.rate(fair.window)),
        thousands(baseline.noisy_received.rate(baseline.window)),
        fair.noisy_received.rate(fair.window) / baseline.noisy_received.rate(baseline.window).max(1e-9),
    ))
}

/// The command that repeats this run.
fn command_line(plan: &Plan) -> String {
    let target = match &plan.server {
        Some(url) => format!("--server {url}"),
        None => format!("--durability {}", plan.durability_label()),
    };
    format!(
        "sluice bench --scenario fairness {target} --producers {} --consumers {} --body-bytes {} --noisy-backlog {} --duration {} --warmup {}",
        plan.producers,
        plan.consumers,
        plan.body_bytes,
        plan.noisy_backlog,
        humantime::format_duration(plan.duration),
        humantime::format_duration(plan.warmup),
    )
}

pub(crate) fn json(plan: &Plan, server: &str, results: &[ModeResult]) -> Value {
    let rows = results.iter().map(|r| {
        report::json_row(
            plan,
            json!({
                "system": "sluice",
                "durability": plan.durability_label(),
                "workload": "quiet-behind-noisy-backlog",
                "server": server,
                "queue": r.queue,
                "mode": r.mode.name(),
                "fair_groups": r.mode == Mode::Groups,
                "consumers": plan.consumers,
                "receive_max": RECEIVE_MAX,
                "body_bytes": plan.body_bytes,
                "duration_s": r.window.as_secs_f64(),
                // The headline pair: the noisy group's rate, and the quiet messages' waits.
                "msgs_per_sec": r.noisy_received.rate(r.window),
                "p50_ms": r.quiet_wait.quantile_ms(0.5),
                "p99_ms": r.quiet_wait.quantile_ms(0.99),
                "msgs_per_sec_is": "noisy messages received per second",
                "latency_is": "quiet message wait, send call start to receive end",
                "quiet_wait_max_ms": r.quiet_wait.max_ms(),
                "quiet_interval_ms": QUIET_EVERY.as_millis() as u64,
                "quiet_sent": r.quiet_sent.count,
                "quiet_received": r.quiet_received(),
                "quiet_still_waiting": r.quiet_still_waiting,
                "quiet_send_p50_ms": r.quiet_sent.latency.quantile_ms(0.5),
                "noisy_backlog": plan.noisy_backlog,
                "noisy_loaded": r.loaded,
                "noisy_load_s": r.load_time.as_secs_f64(),
                "backlog_at_start": r.backlog_at_start,
                "noisy_batch": NOISY_BATCH,
                "noisy_topped_up": r.noisy_topped_up.count,
                "noisy_e2e_p50_ms": r.noisy_received.latency.quantile_ms(0.5),
                "noisy_e2e_p99_ms": r.noisy_received.latency.quantile_ms(0.99),
                "drain_s": r.drain_time.as_secs_f64(),
                "errors": r.errors(),
            }),
        )
    });
    Value::Array(rows.collect())
}
