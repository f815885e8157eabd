//! The printed report (machine facts, ceilings, one table row per batch size) and the same
//! results as JSON, one flat object per measured system so peers' results can sit beside them.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use comfy_table::{CellAlignment, Table, presets};
use serde_json::{Value, json};

use crate::ceiling::{Ceiling, FJALL_BATCH_RECORDS, FJALL_RECORD_BYTES};
use crate::workload::{PhaseResult, RECEIVE_WAIT_MS};
use crate::{Plan, Scenario};

pub(crate) struct Report<'a> {
    pub plan: &'a Plan,
    pub server: &'a str,
    pub fjall: &'a Ceiling,
    pub http: &'a Ceiling,
    pub phases: &'a [PhaseResult],
    pub elapsed: Duration,
    pub load_average: Option<String>,
}

impl Report<'_> {
    pub fn render(&self) -> String {
        let plan = self.plan;
        let mut out = String::new();
        let w = &mut out;
        header(w, plan, self.server, self.elapsed, self.load_average.as_deref());
        let _ = writeln!(
            w,
            "workload   queue {}: {} producers, {} consumers, closed loop over HTTP/1.1 (sluice-client); {}-byte text bodies;\n           \
             batch = messages per send = receive max = receipts per ack; long poll {RECEIVE_WAIT_MS} ms;\n           \
             {};\n           \
             {} warm-up, then {} measured per batch size",
            plan.queue,
            plan.producers,
            plan.consumers,
            plan.body_bytes,
            backlog_rule(plan),
            humantime::format_duration(plan.warmup),
            humantime::format_duration(plan.duration),
        );
        let _ = writeln!(
            w,
            "ceiling    fjall: {} records/s (1 writer, batches of {FJALL_BATCH_RECORDS} x {FJALL_RECORD_BYTES} B, SyncData each; commit p50 / p99 {} ms)",
            thousands(self.fjall.rate),
            self.fjall.latency.p50_p99(),
        );
        let _ = writeln!(
            w,
            "ceiling    empty HTTP handler (axum): {} requests/s with {} client tasks (p50 / p99 {} ms{})",
            thousands(self.http.rate),
            self.http.concurrency,
            self.http.latency.p50_p99(),
            if self.http.errors > 0 { format!(", {} errors", self.http.errors) } else { String::new() },
        );
        let _ = writeln!(w, "reproduce  {}", self.command_line());
        let _ = writeln!(w);
        let _ = writeln!(w, "{}", self.table());
        let _ = writeln!(
            w,
            "sent = acknowledged sends; received = delivered end to end; send latency = one send call's round trip;\n\
             e2e latency = start of the send call to the end of the receive call; e2e / ceiling = received msg/s over fjall records/s"
        );
        for phase in self.phases {
            for (what, tally) in [("send", &phase.sent), ("receive", &phase.received), ("ack", &phase.ack)] {
                if let Some(first) = &tally.first_error {
                    let _ = writeln!(w, "batch {}: {} {what} errors, first: {first}", phase.batch, tally.errors);
                }
            }
        }
        out
    }

    fn table(&self) -> Table {
        let mut table = Table::new();
        table.load_preset(presets::ASCII_MARKDOWN).set_header([
            "batch",
            "sent msg/s",
            "received msg/s",
            "send p50 / p99 ms",
            "e2e p50 / p99 ms",
            "e2e / ceiling",
            "backlog at end",
            "errors",
        ]);
        for phase in self.phases {
            let received = phase.received.rate(phase.window);
            table.add_row([
                phase.batch.to_string(),
                thousands(phase.sent.rate(phase.window)),
                thousands(received),
                phase.sent.latency.p50_p99(),
                phase.received.latency.p50_p99(),
                format!("{:.3}", received / self.fjall.rate),
                phase.backlog.map_or_else(|| "?".into(), |b| b.to_string()),
                (phase.sent.errors + phase.received.errors + phase.ack.errors).to_string(),
            ]);
        }
        for column in table.column_iter_mut().skip(1) {
            column.set_cell_alignment(CellAlignment::Right);
        }
        table
    }

    /// The command that repeats this run.
    fn command_line(&self) -> String {
        let plan = self.plan;
        let batches: Vec<String> = plan.batches.iter().map(u32::to_string).collect();
        let mut target = match &plan.server {
            Some(url) => format!("--server {url}"),
            None => format!("--durability {}", plan.durability_label()),
        };
        if let Some(n) = plan.backlog_max {
            target.push_str(&format!(" --backlog-max {n}"));
        }
        format!(
            "sluice bench {target} --producers {} --consumers {} --body-bytes {} --batch {} --duration {} --warmup {} --ceiling-duration {}",
            plan.producers,
            plan.consumers,
            plan.body_bytes,
            batches.join(","),
            humantime::format_duration(plan.duration),
            humantime::format_duration(plan.warmup),
            humantime::format_duration(plan.ceiling_duration),
        )
    }

    pub fn json(&self) -> Value {
        let plan = self.plan;
        let common = |row: Value| json_row(plan, row);
        let mut rows = vec![
            common(json!({
                "system": "fjall",
                "durability": "SyncData",
                "workload": "batch-write",
                "batch": FJALL_BATCH_RECORDS,
                "body_bytes": FJALL_RECORD_BYTES,
                "duration_s": plan.ceiling_duration.as_secs_f64(),
                "msgs_per_sec": self.fjall.rate,
                "p50_ms": self.fjall.latency.quantile_ms(0.5),
                "p99_ms": self.fjall.latency.quantile_ms(0.99),
            })),
            common(json!({
                "system": "axum-empty-handler",
                "durability": "none",
                "workload": "empty-request",
                "clients": self.http.concurrency,
                "duration_s": plan.ceiling_duration.as_secs_f64(),
                "msgs_per_sec": self.http.rate,
                "p50_ms": self.http.latency.quantile_ms(0.5),
                "p99_ms": self.http.latency.quantile_ms(0.99),
                "errors": self.http.errors,
            })),
        ];
        for phase in self.phases {
            let received = phase.received.rate(phase.window);
            rows.push(common(json!({
                "system": "sluice",
                "durability": plan.durability_label(),
                "workload": "queue-send-receive-ack",
                "server": self.server,
                "batch": phase.batch,
                "producers": plan.producers,
                "consumers": plan.consumers,
                "body_bytes": plan.body_bytes,
                "backlog_max": plan.backlog_max(phase.batch),
                "duration_s": phase.window.as_secs_f64(),
                "msgs_per_sec": received,
                "p50_ms": phase.received.latency.quantile_ms(0.5),
                "p99_ms": phase.received.latency.quantile_ms(0.99),
                "sent_msgs_per_sec": phase.sent.rate(phase.window),
                "send_p50_ms": phase.sent.latency.quantile_ms(0.5),
                "send_p99_ms": phase.sent.latency.quantile_ms(0.99),
                "ratio_to_storage_ceiling": received / self.fjall.rate,
                "backlog_at_end": phase.backlog,
                "send_errors": phase.sent.errors,
                "receive_errors": phase.received.errors,
                "ack_errors": phase.ack.errors,
            })));
        }
        Value::Array(rows)
    }
}

/// The lines every scenario's report starts with: what ran, on what machine, against what.
pub(crate) fn header(w: &mut String, plan: &Plan, server: &str, elapsed: Duration, load_average: Option<&str>) {
    let scenario = match plan.scenario {
        Scenario::Throughput => String::new(),
        other => format!(", scenario {}", other.name()),
    };
    let _ = writeln!(w, "sluice bench {}{scenario} ({} s in all)", env!("CARGO_PKG_VERSION"), elapsed.as_secs());
    let _ = writeln!(
        w,
        "machine    {} cores (available_parallelism), {} {}, load average {} at start; load generator and server share the cores",
        cores(),
        std::env::consts::OS,
        std::env::consts::ARCH,
        load_average.unwrap_or("unknown"),
    );
    let _ = writeln!(w, "server     {server}");
    let _ = writeln!(w, "durability {}", plan.durability_label());
}

/// Adds the fields every JSON row carries to `row`, one flat object.
pub(crate) fn json_row(plan: &Plan, mut row: Value) -> Value {
    row["scenario"] = json!(plan.scenario.name());
    row["cores"] = json!(cores());
    row["sluice_version"] = json!(env!("CARGO_PKG_VERSION"));
    row
}

pub(crate) fn write_json(path: &Path, rows: &Value) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(rows)?;
    text.push('\n');
    std::fs::write(path, text)?;
    Ok(())
}

/// How producers are held back, in words.
pub(crate) fn backlog_rule(plan: &Plan) -> String {
    let limit = match (plan.backlog_max, plan.batches.as_slice()) {
        (Some(0), _) => return "producers never wait for consumers (--backlog-max 0)".to_owned(),
        (Some(n), _) => n.to_string(),
        (None, [batch]) => plan.backlog_max(*batch).map_or(0, |n| n).to_string(),
        (None, _) => "2 x (producers + consumers) x batch".to_owned(),
    };
    format!("producers wait while more than {limit} messages are sent and not yet received")
}

/// The 1-minute load average before the run (Linux), so a reader can see a busy machine.
pub(crate) fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next().map(str::to_owned)
}

pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// A rate rounded to a whole number with thousands separators: 612345.6 -> "612,346".
pub(crate) fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_get_thousands_separators() {
        assert_eq!(thousands(0.4), "0");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1_000.0), "1,000");
        assert_eq!(thousands(612_345.6), "612,346");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
    }
}
