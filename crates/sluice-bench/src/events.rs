//! The `events` scenario: the event store's appends with an expected version (1 event per
//! append and 10, over many streams, and 1 per append on one hot stream where writers race),
//! the `$all` read rate, and a catch-up read of a large log from position 0.
//!
//! Beside Sluice on the embedded store (in-process), the same load runs in the same run, when
//! the build has the `peers` feature (`peers/events.rs`), against Sluice on PostgreSQL (two
//! in-process nodes over one schema, writers spread over them) and against a plain PostgreSQL
//! events table with a unique (stream, version) index (one INSERT of the batch's rows per
//! append; a unique violation is the conflict; `$all` by a bigserial, which is the gapful
//! order Sluice's counter row avoids). Ratios compare each system with that table at matched
//! durability (Sluice `fsync`, PostgreSQL `synchronous_commit on`).
//!
//! Writers are closed-loop: each waits for its append's answer before the next. On the hot
//! stream a writer that loses a race learns the actual version from the refusal and tries
//! again; appends/s counts successes, and the conflicts are reported beside them.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::Context;
use comfy_table::{CellAlignment, Table, presets};
use serde_json::{Value, json};

use crate::Plan;
use crate::event_system::{EventSystem, SluiceEvents};
use crate::report::{self, thousands};
use crate::target::InProcess;

/// Writers per append phase (unless `--producers` says otherwise).
pub(crate) const WRITERS_DEFAULT: usize = 16;
/// Streams each writer owns in the many-streams phases.
const STREAMS_PER_WRITER: usize = 50;
/// Events per append while loading the catch-up log.
const LOAD_BATCH: usize = 500;

/// The phases, in order.
const PHASES: [(&str, usize, bool); 3] = [
    ("many streams, 1/append", 1, false),
    ("many streams, 10/append", 10, false),
    ("one hot stream, 1/append", 1, true),
];

/// One measured figure of one system.
struct Row {
    system: String,
    durability: String,
    phase: String,
    /// Events appended (or read) per second.
    events_per_s: f64,
    /// Successful appends per second (append phases).
    appends_per_s: Option<f64>,
    conflicts_per_s: Option<f64>,
    errors: u64,
}

async fn append_phase(
    plan: &Plan,
    system: &dyn EventSystem,
    run: &str,
    writers: usize,
    per_append: usize,
    hot: bool,
) -> anyhow::Result<(f64, f64, f64, u64)> {
    let epoch = Instant::now();
    let measure_from = epoch + plan.warmup;
    let end = measure_from + plan.duration;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let mut handle = system.handle().await?;
        let streams: Vec<String> = if hot {
            vec![format!("{run}-hot")]
        } else {
            (0..STREAMS_PER_WRITER).map(|s| format!("{run}-w{w}-s{s}")).collect()
        };
        tasks.push(tokio::spawn(async move {
            let mut known: Vec<Option<u64>> = vec![None; streams.len()];
            let (mut appends, mut conflicts, mut errors) = (0u64, 0u64, 0u64);
            let mut turn = 0usize;
            while Instant::now() < end {
                let s = turn % streams.len();
                turn += 1;
                let outcome = handle.append(&streams[s], known[s], per_append).await;
                let counted = Instant::now() >= measure_from;
                match outcome {
                    Ok(Ok(last)) => {
                        known[s] = Some(last);
                        appends += u64::from(counted);
                    }
                    Ok(Err(actual)) => {
                        known[s] = actual;
                        conflicts += u64::from(counted);
                    }
                    Err(_) => errors += 1,
                }
            }
            (appends, conflicts, errors)
        }));
    }
    let (mut appends, mut conflicts, mut errors) = (0, 0, 0);
    for t in tasks {
        let (a, c, e) = t.await.context("a writer panicked")?;
        appends += a;
        conflicts += c;
        errors += e;
    }
    let secs = plan.duration.as_secs_f64();
    Ok((appends as f64 * per_append as f64 / secs, appends as f64 / secs, conflicts as f64 / secs, errors))
}

/// Loads the catch-up log to `total` events (what the append phases left counts), then reads
/// `$all` from 0 to its end with one reader: events per second.
async fn catch_up(system: &dyn EventSystem, run: &str, total: u64, writers: usize) -> anyhow::Result<(f64, u64)> {
    let mut reader = system.handle().await?;
    let mut head = 0u64;
    loop {
        let (n, next) = reader.read_all(head).await?;
        if n == 0 {
            break;
        }
        head = next;
    }
    if head < total {
        let per_writer = (total - head).div_ceil(writers as u64);
        let mut tasks = Vec::new();
        for w in 0..writers {
            let mut handle = system.handle().await?;
            let stream = format!("{run}-load-{w}");
            tasks.push(tokio::spawn(async move {
                let (mut known, mut done) = (None, 0u64);
                while done < per_writer {
                    let n = LOAD_BATCH.min((per_writer - done) as usize);
                    match handle.append(&stream, known, n).await? {
                        Ok(last) => known = Some(last),
                        Err(actual) => anyhow::bail!("a lone writer lost a race on {stream} (at {actual:?})"),
                    }
                    done += n as u64;
                }
                Ok::<(), anyhow::Error>(())
            }));
        }
        for t in tasks {
            t.await.context("a loader panicked")??;
        }
    }
    let started = Instant::now();
    let (mut read, mut at) = (0u64, 0u64);
    loop {
        let (n, next) = reader.read_all(at).await?;
        if n == 0 {
            break;
        }
        read += n as u64;
        at = next;
    }
    Ok((read as f64 / started.elapsed().as_secs_f64().max(1e-9), read))
}

pub(crate) async fn run(plan: &Plan) -> anyhow::Result<()> {
    let started = Instant::now();
    let load_average = report::load_average();
    let writers = plan.events_writers;
    let mut systems: Vec<Box<dyn EventSystem>> = Vec::new();
    let server = InProcess::start(&plan.tmp_dir, plan.durability).await?;
    systems.push(Box::new(SluiceEvents {
        urls: vec![server.url().to_owned()],
        label: "sluice-embedded".into(),
        durability: plan.durability_label(),
        next: Default::default(),
        server: Some(server),
    }));
    let mut notes = Vec::new();
    #[cfg(feature = "peers")]
    {
        let (peers, skipped) = crate::peers::events::systems(plan).await;
        systems.extend(peers);
        notes.extend(skipped);
    }
    #[cfg(not(feature = "peers"))]
    notes.push(
        "peers (Sluice on PostgreSQL, the plain PostgreSQL table) skipped: this build has no `peers` feature".into(),
    );
    let mut rows = Vec::new();
    let run = crate::workload::run_nonce();
    for system in systems {
        for (i, (phase, per_append, hot)) in PHASES.iter().enumerate() {
            eprintln!("events: {} — {phase}", system.name());
            let prefix = format!("b{run}-{i}");
            let (eps, aps, cps, errors) = append_phase(plan, system.as_ref(), &prefix, writers, *per_append, *hot)
                .await
                .with_context(|| format!("{}: {phase}", system.name()))?;
            rows.push(Row {
                system: system.name(),
                durability: system.durability(),
                phase: (*phase).into(),
                events_per_s: eps,
                appends_per_s: Some(aps),
                conflicts_per_s: Some(cps),
                errors,
            });
        }
        eprintln!("events: {} — catch-up of {} events", system.name(), plan.events_catchup);
        let (rate, read) = catch_up(system.as_ref(), &format!("b{run}"), plan.events_catchup, writers)
            .await
            .with_context(|| format!("{}: catch-up", system.name()))?;
        rows.push(Row {
            system: system.name(),
            durability: system.durability(),
            phase: format!("$all catch-up read of {} events", thousands(read as f64)),
            events_per_s: rate,
            appends_per_s: None,
            conflicts_per_s: None,
            errors: 0,
        });
        system.stop().await?;
    }
    let text = render(plan, &rows, &notes, writers, started.elapsed(), load_average.as_deref());
    crate::publish(plan, &text, json_rows(plan, &rows))
}

/// The plain PostgreSQL table's figure of the same phase, for the ratios.
fn baseline<'a>(rows: &'a [Row], phase: &str) -> Option<&'a Row> {
    rows.iter().find(|r| r.system == "postgres-table" && r.phase.split(" of ").next() == phase.split(" of ").next())
}

fn render(
    plan: &Plan,
    rows: &[Row],
    notes: &[String],
    writers: usize,
    elapsed: Duration,
    load: Option<&str>,
) -> String {
    let mut w = String::new();
    report::header(&mut w, plan, "see the systems below", elapsed, load);
    let _ = writeln!(
        w,
        "events scenario: {writers} closed-loop writers per append phase ({STREAMS_PER_WRITER} streams each, or one hot \
         stream), {} measured after {} of warm-up; catch-up: one reader from position 0, pages of 1,000",
        humantime::format_duration(plan.duration),
        humantime::format_duration(plan.warmup),
    );
    let mut table = Table::new();
    table.load_preset(presets::NOTHING).set_header(vec![
        "SYSTEM",
        "DURABILITY",
        "PHASE",
        "EVENTS/S",
        "APPENDS/S",
        "CONFLICTS/S",
        "VS PG TABLE",
        "ERRORS",
    ]);
    for r in rows {
        let ratio = baseline(rows, &r.phase)
            .filter(|b| b.events_per_s > 0.0)
            .map_or("-".to_owned(), |b| format!("{:.2}x", r.events_per_s / b.events_per_s));
        table.add_row(vec![
            r.system.clone(),
            r.durability.clone(),
            r.phase.clone(),
            thousands(r.events_per_s),
            r.appends_per_s.map_or("-".into(), thousands),
            r.conflicts_per_s.map_or("-".into(), thousands),
            ratio,
            r.errors.to_string(),
        ]);
    }
    for c in 3..=7 {
        if let Some(col) = table.column_mut(c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    for line in table.to_string().lines() {
        let _ = writeln!(w, "{}", line.trim_end());
    }
    for n in notes {
        let _ = writeln!(w, "note: {n}");
    }
    w
}

fn json_rows(plan: &Plan, rows: &[Row]) -> Value {
    Value::Array(
        rows.iter()
            .map(|r| {
                report::json_row(
                    plan,
                    json!({
                        "scenario": "events",
                        "system": r.system,
                        "durability": r.durability,
                        "phase": r.phase,
                        "events_per_s": r.events_per_s,
                        "appends_per_s": r.appends_per_s,
                        "conflicts_per_s": r.conflicts_per_s,
                        "errors": r.errors,
                    }),
                )
            })
            .collect(),
    )
}
