//! The printed report of the peers scenario (machine, ceilings, every system's version and
//! settings, one table row per system and workload, the ratios Sluice is judged by) and the
//! same results as JSON, one flat object per system × workload.

use std::fmt::Write as _;
use std::time::Duration;

use comfy_table::{CellAlignment, Table, presets};
use serde_json::{Value, json};

use super::pgbench::{PGBENCH_CLIENTS, PGBENCH_DURATION, PGBENCH_THREADS, Pgbench};
use super::system::{Durability, System};
use super::{FIXED_RATE_FRACTION, Facts, Mode, PeerPlan, Row};
use crate::Plan;
use crate::ceiling::{Ceiling, FJALL_BATCH_RECORDS, FJALL_RECORD_BYTES};
use crate::report::thousands;
use crate::stats::{Latency, ms};

/// What Sluice in `fsync` mode should reach against the best per-write durable peer.
const FSYNC_TARGET_RATIO: f64 = 2.0;

pub(crate) struct Report<'a> {
    pub plan: &'a Plan,
    pub peers: &'a PeerPlan,
    pub fjall: &'a Ceiling,
    pub http: &'a Ceiling,
    /// PostgreSQL's own limit, when a system on PostgreSQL was measured: the result, or why not.
    pub pgbench: Option<&'a Result<Pgbench, String>>,
    pub facts: &'a [Facts],
    pub rows: &'a [Row],
    pub elapsed: Duration,
    pub load_average: Option<String>,
}

impl Report<'_> {
    pub fn render(&self) -> String {
        let (plan, peers) = (self.plan, self.peers);
        let mut out = String::new();
        let w = &mut out;
        let _ = writeln!(
            w,
            "sluice bench {}, scenario peers ({} s in all)",
            env!("CARGO_PKG_VERSION"),
            self.elapsed.as_secs()
        );
        let _ = writeln!(
            w,
            "machine    {} cores (available_parallelism), {} {}, load average {} at start; {}; every system runs on \
             this machine and shares the cores with the load generator; one system at a time",
            crate::report::cores(),
            std::env::consts::OS,
            std::env::consts::ARCH,
            self.load_average.as_deref().unwrap_or("unknown"),
            memory().unwrap_or_else(|| "memory unknown".into()),
        );
        let _ = writeln!(
            w,
            "ceiling    fjall: {} records/s (1 writer, batches of {FJALL_BATCH_RECORDS} x {FJALL_RECORD_BYTES} B, SyncData each; commit p50 / p99 {} ms)",
            thousands(self.fjall.rate),
            self.fjall.latency.p50_p99(),
        );
        let _ = writeln!(
            w,
            "ceiling    empty HTTP handler (axum): {} requests/s with {} client tasks (p50 / p99 {} ms)",
            thousands(self.http.rate),
            self.http.concurrency,
            self.http.latency.p50_p99(),
        );
        match self.pgbench {
            Some(Ok(p)) => {
                let _ = writeln!(
                    w,
                    "ceiling    PostgreSQL (pgbench's TPC-B-like script: 3 UPDATEs, 1 SELECT, 1 INSERT, one commit per \
                     transaction): {} transactions/s; `{}` in a scratch database; {}; {}",
                    thousands(p.tps),
                    Pgbench::command(),
                    p.durability_setting,
                    p.version,
                );
            }
            Some(Err(e)) => {
                let _ = writeln!(w, "ceiling    PostgreSQL (pgbench): not measured: {e}");
            }
            None => {}
        }
        let _ = writeln!(
            w,
            "workloads  sizes {} B; clients {} (N producers and N consumers, each its own client: one connection, or one pool for sluice-sqs);",
            list(&peers.sizes),
            list(&peers.clients)
        );
        let _ = writeln!(
            w,
            "           batch {} messages per send and at most per receive (less where a system allows less: see each system);\n           \
             max rate: producers closed-loop, waiting while more than {} messages are sent and not yet received;\n           \
             fixed rate: {:.0} % of the max rate measured just before, same system and shape, latency from each message's due time;\n           \
             drain: {} messages loaded with no consumer, then consumed, at {} B with {}/{} clients (each stage at most {});\n           \
             {} warm-up, then {} measured per rate phase; e2e latency = the message's stamp to the end of the receive that returned it",
            peers.batch,
            match plan.backlog_max {
                Some(0) => "(no limit)".to_owned(),
                Some(n) => n.to_string(),
                None => "2 x (producers + consumers) x batch".to_owned(),
            },
            FIXED_RATE_FRACTION * 100.0,
            thousands(peers.drain_messages as f64),
            peers.sizes[0],
            peers.drain_clients(),
            peers.drain_clients(),
            humantime::format_duration(peers.drain_stage_max),
            humantime::format_duration(plan.warmup),
            humantime::format_duration(plan.duration),
        );
        let _ = writeln!(w, "systems");
        for f in self.facts {
            let _ = writeln!(w, "  {:<17}{}", f.system.name(), f.version);
            if f.batch > 0 {
                let _ =
                    writeln!(w, "  {:<17}{} ({}); batch {}", "", f.durability_setting, f.durability.label(), f.batch);
                let _ = writeln!(w, "  {:<17}{}", "", f.settings);
            }
            if let Some(failure) = &f.failure {
                let _ = writeln!(w, "  {:<17}{failure}", "");
            }
        }
        let _ = writeln!(w, "reproduce  {}", self.command_line());
        let _ = writeln!(w);
        let _ = writeln!(w, "{}", self.rate_table());
        let _ = writeln!(
            w,
            "max msg/s = messages received per second at max rate; vs sluice-fsync = that over sluice-fsync's in the same shape;\n\
             fixed-rate latencies are coordinated-omission free (from each message's due time)."
        );
        if self.rows.iter().any(|r| matches!(r.mode, Mode::Drain(_))) {
            let _ = writeln!(w);
            let _ = writeln!(w, "{}", self.drain_table());
        }
        if let Some(table) = self.postgres_table() {
            let _ = writeln!(w);
            let _ = writeln!(w, "On PostgreSQL, max rate, beside the plain SKIP LOCKED table and pgbench:");
            let _ = writeln!(w, "{table}");
            let _ = writeln!(
                w,
                "vs postgres = that over the plain SKIP LOCKED table's msg/s in the same shape; vs pgbench = msg/s over \
                 pgbench's transactions/s ({PGBENCH_CLIENTS} clients, {PGBENCH_THREADS} threads, {} s), a ratio of \
                 different units: each batch of messages costs a queue three commits (send, receive, ack).",
                PGBENCH_DURATION.as_secs()
            );
        }
        for row in self.rows {
            for (what, tally) in [("send", &row.measured.sent), ("receive", &row.measured.received)] {
                if let Some(first) = &tally.first_error {
                    let _ = writeln!(
                        w,
                        "{} {}: {} {what} errors, first: {first}",
                        row.system.name(),
                        workload(row),
                        tally.errors
                    );
                }
            }
        }
        let _ = writeln!(w);
        let _ = writeln!(w, "ratios");
        let tps = match self.pgbench {
            Some(Ok(p)) => Some(p.tps),
            _ => None,
        };
        for line in ratio_lines(self.rows, self.facts).into_iter().chain(postgres_ratio_lines(self.rows, tps)) {
            let _ = writeln!(w, "  {line}");
        }
        out
    }

    fn rate_table(&self) -> Table {
        let mut table = Table::new();
        table.load_preset(presets::ASCII_MARKDOWN).set_header([
            "size B",
            "clients",
            "system",
            "durability",
            "max msg/s",
            "vs sluice-fsync",
            "max e2e p50 / p99 ms",
            "fixed msg/s (target)",
            "fixed e2e p50 / p99 / p99.9 ms",
            "errors",
        ]);
        // Rows come system by system; the table goes shape by shape, so that rivals sit together.
        let mut maxima: Vec<&Row> = self.rows.iter().filter(|r| r.mode == Mode::MaxRate).collect();
        maxima.sort_by_key(|r| (r.body_bytes, r.clients, r.system));
        for max in maxima {
            let fixed = self.rows.iter().find(|r| {
                r.system == max.system
                    && r.body_bytes == max.body_bytes
                    && r.clients == max.clients
                    && matches!(r.mode, Mode::FixedRate(_))
            });
            let baseline = rate_of(self.rows, System::SluiceFsync, max.body_bytes, max.clients);
            let (fixed_rate, fixed_latency) = match fixed {
                Some(Row { mode: Mode::FixedRate(target), measured, .. }) => (
                    format!("{} ({})", thousands(measured.rate()), thousands(*target)),
                    p50_p99_p999(&measured.received.latency),
                ),
                _ => ("-".into(), "-".into()),
            };
            let errors = [Some(max), fixed]
                .into_iter()
                .flatten()
                .map(|r| r.measured.sent.errors + r.measured.received.errors)
                .sum::<u64>();
            table.add_row([
                max.body_bytes.to_string(),
                format!("{0}/{0}", max.clients),
                max.system.name().to_owned(),
                self.durability_of(max.system).label().to_owned(),
                thousands(max.measured.rate()),
                baseline.filter(|&b| b > 0.0).map_or_else(|| "-".into(), |b| format!("{:.2}", max.measured.rate() / b)),
                max.measured.received.latency.p50_p99(),
                fixed_rate,
                fixed_latency,
                errors.to_string(),
            ]);
        }
        for column in table.column_iter_mut().skip(4) {
            column.set_cell_alignment(CellAlignment::Right);
        }
        table
    }

    fn drain_table(&self) -> Table {
        let mut table = Table::new();
        table.load_preset(presets::ASCII_MARKDOWN).set_header([
            "system",
            "durability",
            "messages",
            "load msg/s",
            "drain msg/s",
            "drain time s",
            "complete",
        ]);
        for row in self.rows.iter().filter(|r| matches!(r.mode, Mode::Drain(_))) {
            let (loaded, load_time) = row.measured.loaded.unwrap_or((0, Duration::ZERO));
            table.add_row([
                row.system.name().to_owned(),
                self.durability_of(row.system).label().to_owned(),
                thousands(loaded as f64),
                thousands(loaded as f64 / load_time.as_secs_f64().max(f64::MIN_POSITIVE)),
                thousands(row.measured.rate()),
                format!("{:.1}", row.measured.window.as_secs_f64()),
                if row.measured.complete { "yes".into() } else { "no: hit the time limit".into() },
            ]);
        }
        for column in table.column_iter_mut().skip(2) {
            column.set_cell_alignment(CellAlignment::Right);
        }
        table
    }

    /// Sluice on PostgreSQL (1 and 3 servers), the plain SKIP LOCKED table and Sluice on its
    /// embedded store, shape by shape, with pgbench's rate below; `None` when no system on
    /// PostgreSQL was measured at max rate.
    fn postgres_table(&self) -> Option<Table> {
        let mut maxima: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.mode == Mode::MaxRate && (r.system.uses_postgres() || r.system == System::SluiceFsync))
            .collect();
        if !maxima.iter().any(|r| r.system.uses_postgres()) {
            return None;
        }
        maxima.sort_by_key(|r| (r.body_bytes, r.clients, r.system));
        let tps = match self.pgbench {
            Some(Ok(p)) if p.tps > 0.0 => Some(p.tps),
            _ => None,
        };
        let ratio = |rate: f64, base: Option<f64>| {
            base.filter(|&b| b > 0.0).map_or_else(|| "-".into(), |b| format!("{:.2}", rate / b))
        };
        let mut table = Table::new();
        table.load_preset(presets::ASCII_MARKDOWN).set_header([
            "size B",
            "clients",
            "system",
            "store",
            "durability",
            "max msg/s",
            "vs postgres",
            "vs sluice-fsync",
            "vs pgbench",
        ]);
        for max in maxima {
            let rate = max.measured.rate();
            let store = match (max.system, max.system.pg_nodes()) {
                (System::Postgres, _) => "one table, SQL".to_owned(),
                (_, Some(1)) => "PostgreSQL, 1 server".to_owned(),
                (_, Some(n)) => format!("PostgreSQL, {n} servers"),
                (_, None) => "embedded (fjall)".to_owned(),
            };
            table.add_row([
                max.body_bytes.to_string(),
                format!("{0}/{0}", max.clients),
                max.system.name().to_owned(),
                store,
                self.durability_of(max.system).label().to_owned(),
                thousands(rate),
                ratio(rate, rate_of(self.rows, System::Postgres, max.body_bytes, max.clients)),
                ratio(rate, rate_of(self.rows, System::SluiceFsync, max.body_bytes, max.clients)),
                ratio(rate, tps),
            ]);
        }
        if let Some(tps) = tps {
            table.add_row([
                "-".to_owned(),
                format!("{PGBENCH_CLIENTS}"),
                "pgbench".to_owned(),
                "TPC-B-like".to_owned(),
                self.pgbench_durability().to_owned(),
                format!("{} tx/s", thousands(tps)),
                "-".to_owned(),
                "-".to_owned(),
                "1.00".to_owned(),
            ]);
        }
        for column in table.column_iter_mut().skip(5) {
            column.set_cell_alignment(CellAlignment::Right);
        }
        Some(table)
    }

    /// pgbench commits at the server's settings, which the plain table's facts state.
    fn pgbench_durability(&self) -> &'static str {
        self.durability_of(System::Postgres).label()
    }

    fn durability_of(&self, system: System) -> Durability {
        self.facts.iter().find(|f| f.system == system).map_or(system.durability(), |f| f.durability)
    }

    fn command_line(&self) -> String {
        let (plan, peers) = (self.plan, self.peers);
        let only: Vec<&str> = peers.systems.iter().map(|s| s.name()).collect();
        let mut line = format!(
            "sluice bench --scenario peers --only {} --sizes {} --clients {} --batch {} --drain-messages {} --duration {} --warmup {} --ceiling-duration {} --sluice-interval-ms {}",
            only.join(","),
            list(&peers.sizes),
            list(&peers.clients),
            peers.batch,
            peers.drain_messages,
            humantime::format_duration(plan.duration),
            humantime::format_duration(plan.warmup),
            humantime::format_duration(plan.ceiling_duration),
            peers.sluice_interval_ms,
        );
        if let Some(n) = plan.backlog_max {
            let _ = write!(line, " --backlog-max {n}");
        }
        if plan.quick {
            line.push_str(" --quick");
        }
        line
    }

    pub fn json(&self) -> Value {
        let mut rows = Vec::new();
        for row in self.rows {
            let facts = self.facts.iter().find(|f| f.system == row.system);
            let latency = &row.measured.received.latency;
            let mut object = json!({
                "system": row.system.name(),
                "durability": facts.map_or("-", |f| f.durability_setting.as_str()),
                "durability_class": self.durability_of(row.system).label(),
                "workload": workload(row),
                "msgs_per_sec": row.measured.rate(),
                "p50_ms": latency.quantile_ms(0.5),
                "p99_ms": latency.quantile_ms(0.99),
                "p999_ms": latency.quantile_ms(0.999),
                "version": facts.map(|f| f.version.as_str()),
                "body_bytes": row.body_bytes,
                "producers": row.clients,
                "consumers": row.clients,
                "batch": row.batch,
                "duration_s": row.measured.window.as_secs_f64(),
                "sent_msgs_per_sec": row.measured.sent.rate(row.measured.window),
                "send_p50_ms": row.measured.sent.latency.quantile_ms(0.5),
                "send_p99_ms": row.measured.sent.latency.quantile_ms(0.99),
                "errors": row.measured.sent.errors + row.measured.received.errors,
            });
            match row.mode {
                Mode::MaxRate => {}
                Mode::FixedRate(target) => object["target_msgs_per_sec"] = json!(target),
                Mode::Drain(messages) => {
                    let (loaded, load_time) = row.measured.loaded.unwrap_or((0, Duration::ZERO));
                    object["messages"] = json!(messages);
                    object["loaded"] = json!(loaded);
                    object["load_msgs_per_sec"] = json!(loaded as f64 / load_time.as_secs_f64().max(f64::MIN_POSITIVE));
                    object["complete"] = json!(row.measured.complete);
                }
            }
            rows.push(crate::report::json_row(self.plan, object));
        }
        for facts in self.facts.iter().filter(|f| f.failure.is_some()) {
            rows.push(crate::report::json_row(
                self.plan,
                json!({ "system": facts.system.name(), "workload": "none", "failure": facts.failure }),
            ));
        }
        if let Some(Ok(p)) = self.pgbench {
            rows.push(crate::report::json_row(
                self.plan,
                json!({
                    "system": "pgbench",
                    "durability": p.durability_setting,
                    "workload": format!("tpcb-like-{PGBENCH_CLIENTS}c{PGBENCH_THREADS}j"),
                    "tx_per_sec": p.tps,
                    "version": p.version,
                }),
            ));
        }
        for (system, ceiling, durability, workload) in [
            ("fjall", self.fjall, "SyncData", "batch-write"),
            ("axum-empty-handler", self.http, "none", "empty-request"),
        ] {
            rows.push(crate::report::json_row(
                self.plan,
                json!({
                    "system": system,
                    "durability": durability,
                    "workload": workload,
                    "msgs_per_sec": ceiling.rate,
                    "p50_ms": ceiling.latency.quantile_ms(0.5),
                    "p99_ms": ceiling.latency.quantile_ms(0.99),
                    "p999_ms": ceiling.latency.quantile_ms(0.999),
                }),
            ));
        }
        Value::Array(rows)
    }
}

/// The workload's name in the JSON and in error lines, e.g. "256B-4p4c-max".
pub(crate) fn workload(row: &Row) -> String {
    let mode = match row.mode {
        Mode::MaxRate => "max".to_owned(),
        Mode::FixedRate(_) => format!("fixed{:.0}", FIXED_RATE_FRACTION * 100.0),
        Mode::Drain(messages) => format!("drain{messages}"),
    };
    format!("{}B-{}p{}c-{mode}", row.body_bytes, row.clients, row.clients)
}

fn rate_of(rows: &[Row], system: System, body_bytes: usize, clients: usize) -> Option<f64> {
    rows.iter()
        .find(|r| r.system == system && r.body_bytes == body_bytes && r.clients == clients && r.mode == Mode::MaxRate)
        .map(|r| r.measured.rate())
}

/// The comparisons Sluice is judged by, per shape at max rate: `sluice-fsync` against the best
/// per-write durable peer (target: at least twice as fast), and `sluice-interval` against NATS
/// JetStream at its default sync; and, where `sluice-sqs` was measured, Sluice over its SQS API
/// against `sluice-fsync` on the native API: the same server and store, so the API's cost.
pub(crate) fn ratio_lines(rows: &[Row], facts: &[Facts]) -> Vec<String> {
    let class = |s: System| facts.iter().find(|f| f.system == s).map_or(s.durability(), |f| f.durability);
    let mut shapes: Vec<(usize, usize)> =
        rows.iter().filter(|r| r.mode == Mode::MaxRate).map(|r| (r.body_bytes, r.clients)).collect();
    // Rows come system by system, so the same shape appears once per system.
    shapes.sort_unstable();
    shapes.dedup();
    let mut lines = Vec::new();
    for (body_bytes, clients) in shapes {
        let shape = format!("{body_bytes} B {clients}/{clients}:");
        let best = rows
            .iter()
            .filter(|r| r.mode == Mode::MaxRate && (r.body_bytes, r.clients) == (body_bytes, clients))
            .filter(|r| !r.system.is_sluice() && class(r.system) == Durability::PerWrite)
            .max_by(|a, b| a.measured.rate().total_cmp(&b.measured.rate()));
        match (rate_of(rows, System::SluiceFsync, body_bytes, clients), best) {
            (Some(sluice), Some(best)) if best.measured.rate() > 0.0 => {
                let ratio = sluice / best.measured.rate();
                let verdict = if ratio >= FSYNC_TARGET_RATIO { "meets" } else { "misses" };
                lines.push(format!(
                    "{shape} sluice-fsync {} msg/s = {ratio:.2}x the best per-write durable peer ({} {} msg/s); {verdict} the {FSYNC_TARGET_RATIO}x target",
                    thousands(sluice),
                    best.system.name(),
                    thousands(best.measured.rate()),
                ));
            }
            _ => lines.push(format!("{shape} sluice-fsync against per-write durable peers: not measured")),
        }
        match (
            rate_of(rows, System::SluiceInterval, body_bytes, clients),
            rate_of(rows, System::NatsDefault, body_bytes, clients),
        ) {
            (Some(sluice), Some(nats)) if nats > 0.0 => {
                let ratio = sluice / nats;
                let verdict = if ratio > 1.0 { "ahead of" } else { "behind" };
                lines.push(format!(
                    "{shape} sluice-interval {} msg/s = {ratio:.2}x nats-default ({} msg/s): {verdict} NATS JetStream at its default sync",
                    thousands(sluice),
                    thousands(nats),
                ));
            }
            _ => lines.push(format!("{shape} sluice-interval against nats-default: not measured")),
        }
        // Only where it was measured: unlike the two lines above, it is not a target.
        if let Some(sqs) = rate_of(rows, System::SluiceSqs, body_bytes, clients) {
            match rate_of(rows, System::SluiceFsync, body_bytes, clients) {
                Some(native) if native > 0.0 => lines.push(format!(
                    "{shape} sluice-sqs {} msg/s = {:.2}x sluice-fsync on the native API ({} msg/s): the SQS API's cost on the same server and store",
                    thousands(sqs),
                    sqs / native,
                    thousands(native),
                )),
                _ => lines.push(format!("{shape} sluice-sqs against sluice-fsync: not measured")),
            }
        }
    }
    lines
}

/// Sluice on PostgreSQL, per shape at max rate: one server against the plain SKIP LOCKED table
/// and pgbench's rate, and three servers against one.
pub(crate) fn postgres_ratio_lines(rows: &[Row], pgbench_tps: Option<f64>) -> Vec<String> {
    let mut shapes: Vec<(usize, usize)> = rows
        .iter()
        .filter(|r| r.mode == Mode::MaxRate && r.system.pg_nodes().is_some())
        .map(|r| (r.body_bytes, r.clients))
        .collect();
    shapes.sort_unstable();
    shapes.dedup();
    let mut lines = Vec::new();
    for (body_bytes, clients) in shapes {
        let shape = format!("{body_bytes} B {clients}/{clients}:");
        let one = rate_of(rows, System::SluicePg, body_bytes, clients);
        let three = rate_of(rows, System::SluicePg3Nodes, body_bytes, clients);
        let plain = rate_of(rows, System::Postgres, body_bytes, clients);
        for (system, rate) in [(System::SluicePg, one), (System::SluicePg3Nodes, three)] {
            let Some(rate) = rate else { continue };
            let mut line = format!("{shape} {} {} msg/s", system.name(), thousands(rate));
            if let Some(plain) = plain.filter(|&p| p > 0.0) {
                let _ =
                    write!(line, " = {:.2}x the plain SKIP LOCKED table ({} msg/s)", rate / plain, thousands(plain));
            }
            if let Some(tps) = pgbench_tps.filter(|&t| t > 0.0) {
                let _ = write!(line, "; {:.2} msg per pgbench transaction ({} tx/s)", rate / tps, thousands(tps));
            }
            lines.push(line);
        }
        if let (Some(one), Some(three)) = (one, three)
            && one > 0.0
        {
            lines.push(format!("{shape} three servers on one database = {:.2}x one server", three / one));
        }
    }
    lines
}

fn p50_p99_p999(latency: &Latency) -> String {
    match (latency.quantile_ms(0.5), latency.quantile_ms(0.99), latency.quantile_ms(0.999)) {
        (Some(a), Some(b), Some(c)) => format!("{} / {} / {}", ms(a), ms(b), ms(c)),
        _ => "-".into(),
    }
}

fn list(values: &[usize]) -> String {
    values.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// "23.4 GiB memory" from /proc/meminfo (Linux).
fn memory() -> Option<String> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: f64 =
        text.lines().find_map(|l| l.strip_prefix("MemTotal:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(format!("{:.1} GiB memory", kib / (1024.0 * 1024.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::load::Measured;
    use crate::stats::Tally;

    fn row(system: System, clients: usize, rate: u64) -> Row {
        let mut received = Tally::new();
        received.count = rate;
        let measured =
            Measured { window: Duration::from_secs(1), sent: Tally::new(), received, loaded: None, complete: true };
        Row { system, body_bytes: 256, clients, batch: 100, mode: Mode::MaxRate, measured }
    }

    fn facts(system: System, durability: Durability) -> Facts {
        Facts {
            system,
            version: String::new(),
            settings: String::new(),
            durability,
            durability_setting: String::new(),
            batch: 100,
            failure: None,
        }
    }

    #[test]
    fn sluice_is_compared_with_the_best_per_write_peer_nats_default_and_itself_over_sqs() {
        let rows = [
            row(System::SluiceFsync, 4, 30_000),
            row(System::SluiceInterval, 4, 50_000),
            // Faster than every peer here, but Sluice: compared with sluice-fsync alone.
            row(System::SluiceSqs, 4, 18_000),
            row(System::RabbitClassic, 4, 10_000),
            row(System::Postgres, 4, 12_000),
            // Faster, but not per-write durable here, so not the comparison.
            row(System::RedisDefault, 4, 90_000),
            row(System::NatsDefault, 4, 60_000),
            row(System::SluiceFsync, 16, 1_000),
            row(System::Postgres, 16, 2_000),
            row(System::SluiceSqs, 1, 900),
        ];
        let facts = [facts(System::RedisDefault, Durability::Memory)];
        assert_eq!(
            ratio_lines(&rows, &facts),
            [
                "256 B 1/1: sluice-fsync against per-write durable peers: not measured",
                "256 B 1/1: sluice-interval against nats-default: not measured",
                "256 B 1/1: sluice-sqs against sluice-fsync: not measured",
                "256 B 4/4: sluice-fsync 30,000 msg/s = 2.50x the best per-write durable peer (postgres 12,000 msg/s); meets the 2x target",
                "256 B 4/4: sluice-interval 50,000 msg/s = 0.83x nats-default (60,000 msg/s): behind NATS JetStream at its default sync",
                "256 B 4/4: sluice-sqs 18,000 msg/s = 0.60x sluice-fsync on the native API (30,000 msg/s): the SQS API's cost on the same server and store",
                "256 B 16/16: sluice-fsync 1,000 msg/s = 0.50x the best per-write durable peer (postgres 2,000 msg/s); misses the 2x target",
                "256 B 16/16: sluice-interval against nats-default: not measured",
            ]
        );
    }

    #[test]
    fn sluice_on_postgres_is_compared_with_the_plain_table_pgbench_and_one_server() {
        let rows = [
            row(System::SluicePg, 4, 6_000),
            row(System::SluicePg3Nodes, 4, 9_000),
            row(System::Postgres, 4, 12_000),
            row(System::SluicePg, 16, 5_000),
        ];
        assert_eq!(
            postgres_ratio_lines(&rows, Some(2_000.0)),
            [
                "256 B 4/4: sluice-pg 6,000 msg/s = 0.50x the plain SKIP LOCKED table (12,000 msg/s); 3.00 msg per pgbench transaction (2,000 tx/s)",
                "256 B 4/4: sluice-pg-3nodes 9,000 msg/s = 0.75x the plain SKIP LOCKED table (12,000 msg/s); 4.50 msg per pgbench transaction (2,000 tx/s)",
                "256 B 4/4: three servers on one database = 1.50x one server",
                "256 B 16/16: sluice-pg 5,000 msg/s; 2.50 msg per pgbench transaction (2,000 tx/s)",
            ]
        );
        assert!(postgres_ratio_lines(&rows[2..3], None).is_empty(), "the plain table alone has nothing to compare");
    }

    #[test]
    fn workloads_are_named_by_size_clients_and_mode() {
        let mut r = row(System::Postgres, 16, 1);
        assert_eq!(workload(&r), "256B-16p16c-max");
        r.mode = Mode::FixedRate(500.0);
        assert_eq!(workload(&r), "256B-16p16c-fixed50");
        r.mode = Mode::Drain(1_000_000);
        assert_eq!(workload(&r), "256B-16p16c-drain1000000");
    }
}
