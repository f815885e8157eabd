//! The soak scenario's output: the live table of samples while it runs, and the report at the
//! end; and the process and disk readings each sample takes.

use super::*;

pub(super) const MIB: f64 = 1024.0 * 1024.0;

/// Prints a line of the live table on stderr: above the bar on a terminal, plainly when stderr
/// is redirected (where indicatif hides the bar and everything it would print), so a soak run
/// into a log file still shows its samples as they come.
pub(super) fn live(bar: &indicatif::ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// Columns of the sample table, and their widths in the live table printed while running.
pub(super) const COLUMNS: [(&str, usize); 10] = [
    ("time", 7),
    ("sent/s", 9),
    ("recv/s", 9),
    ("send p50/p99/max ms", 22),
    ("e2e p50/p99/max ms", 24),
    ("backlog", 8),
    ("RSS MiB", 8),
    ("files", 5),
    ("data MiB", 8),
    ("errors", 6),
];

/// A line of the live table: each cell right-aligned in its column.
pub(super) fn live_line(cells: &[String]) -> String {
    let mut line = String::new();
    for (cell, (_, width)) in cells.iter().zip(COLUMNS) {
        let _ = write!(line, "{cell:>width$} ");
    }
    line.trim_end().to_owned()
}

pub(super) fn table_header() -> String {
    live_line(&COLUMNS.map(|(name, _)| name.to_owned()))
}

pub(super) fn table_row(s: &Sample) -> String {
    live_line(&cells(s))
}

pub(super) fn cells(s: &Sample) -> Vec<String> {
    let triple = |a: Option<f64>, b: Option<f64>, c: Option<f64>| match (a, b, c) {
        (Some(a), Some(b), Some(c)) => format!("{} / {} / {}", ms(a), ms(b), ms(c)),
        _ => "-".into(),
    };
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    vec![
        format!("{}s", s.elapsed.as_secs()),
        thousands(s.sent_per_s),
        thousands(s.received_per_s),
        triple(s.send_p50_ms, s.send_p99_ms, s.send_max_ms),
        triple(s.e2e_p50_ms, s.e2e_p99_ms, s.e2e_max_ms),
        opt(s.backlog.map(|b| b.to_string())),
        opt(s.rss_mib.map(|m| format!("{m:.0}"))),
        opt(s.open_files.map(|f| f.to_string())),
        opt(s.data_mib.map(|m| format!("{m:.0}"))),
        s.errors.to_string(),
    ]
}

/// This process's resident set in MiB (Linux), `None` elsewhere.
pub(super) fn resident_mib() -> Option<f64> {
    Some(Process::Current.resident_kib()? as f64 / 1024.0)
}

/// This process's open file descriptors (Linux), `None` elsewhere.
pub(super) fn open_files() -> Option<u64> {
    Process::Current.open_files()
}

/// Bytes the files under `dir` take on disk (allocated blocks, so a preallocated journal counts
/// for what it holds), counting what could be read.
pub(super) fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&entry.path()),
            Ok(_) => entry.metadata().map_or(0, |m| std::os::unix::fs::MetadataExt::blocks(&m) * 512),
            Err(_) => 0,
        })
        .sum()
}

pub(super) fn render(
    plan: &Plan,
    soak: &SoakPlan,
    server: &str,
    o: &Outcome,
    elapsed: Duration,
    load_average: Option<&str>,
) -> String {
    let mut w = String::new();
    report::header(&mut w, plan, server, elapsed, load_average);
    let rate_rule = match o.probed_max {
        Some(max) => format!(
            "{:.0} % of {} msg/s, the max rate a closed-loop probe (batch {SOAK_BATCH}) measured just before",
            SOAK_RATE_FRACTION * 100.0,
            thousands(max)
        ),
        None => "as given by --rate".into(),
    };
    let _ = writeln!(
        w,
        "workload   {} producers on a schedule at {} msg/s ({rate_rule}), sending what is due up to {SOAK_BATCH} a call; {} consumers (receive up to {SOAK_RECEIVE_MAX}, ack); {} B bodies, {} in all, sampled every {}",
        plan.producers,
        thousands(o.target_rate),
        plan.consumers,
        plan.body_bytes,
        humantime::format_duration(plan.duration),
        humantime::format_duration(soak.sample_every),
    );
    let _ = writeln!(w);
    let mut table = Table::new();
    table.load_preset(NOTHING);
    table.set_header(COLUMNS.map(|(name, _)| name));
    for s in &o.samples {
        table.add_row(cells(s));
    }
    for column in table.column_iter_mut() {
        column.set_cell_alignment(CellAlignment::Right);
    }
    let _ = writeln!(w, "{table}");
    let _ = writeln!(w);
    let quantiles = |l: &Latency| match (l.quantile_ms(0.5), l.quantile_ms(0.99), l.quantile_ms(0.999), l.max_ms()) {
        (Some(a), Some(b), Some(c), Some(d)) => format!("{} / {} / {} / {} ms", ms(a), ms(b), ms(c), ms(d)),
        _ => "-".into(),
    };
    let rss: Vec<f64> = o.samples.iter().filter_map(|s| s.rss_mib).collect();
    let memory = match (rss.first(), rss.iter().copied().reduce(f64::max), rss.last()) {
        (Some(first), Some(max), Some(last)) => format!(
            "first sample {first:.0} MiB, max {max:.0} MiB, last {last:.0} MiB; bound {} MiB",
            soak.memory_max_mib
        ),
        _ => "not sampled (external server)".into(),
    };
    let _ = writeln!(
        w,
        "rate        {} msg/s acknowledged over the run (target {})",
        thousands(o.achieved_rate()),
        thousands(o.target_rate)
    );
    let _ = writeln!(w, "send        p50 / p99 / p99.9 / max {}", quantiles(&o.send_latency));
    let _ =
        writeln!(w, "end-to-end  p50 / p99 / p99.9 / max {} (from each message's due time)", quantiles(&o.e2e_latency));
    let _ = writeln!(w, "memory      {memory}");
    let _ = writeln!(
        w,
        "ledger      acknowledged {}, uncertain {}, received {}, lost {}, unexpected {}, duplicated {}, unreadable {}; drained in {:.1?}{}",
        o.acked,
        o.uncertain,
        o.received,
        o.lost,
        o.unexpected,
        o.duplicates,
        o.malformed,
        o.drain,
        if o.drained { "" } else { " (gave up)" }
    );
    let _ = writeln!(
        w,
        "errors      {}{}",
        o.errors,
        o.last_error.as_deref().map_or(String::new(), |e| format!(", the last: {e}"))
    );
    let failures = o.failures(soak);
    let _ = writeln!(w, "verdict     {}", if failures.is_empty() { "passed".to_owned() } else { failures.join("; ") });
    w
}
