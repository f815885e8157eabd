//! The `idempotency` scenario (`sluice bench --idempotency-keys`): what an `Idempotency-Key`
//! costs a send; and the `auth` scenario, the same measurement for an API key (`Door`).
//!
//! For the `auth` scenario the "off" phases go to a server that has no keys (and asks for
//! none) and the "on" phases to a second server, started beside it, that has keys, with a key
//! of exactly the scope a send needs (`queues:*:send` plus the queue management the phases do):
//! each send is then authenticated (a token checked against its remembered digest, the key's
//! record fresh within a second) and its scope matched. Before measuring, a send without a key
//! must be refused 401 by the second server.
//!
//! Idempotency keys: The same closed-loop sends of the same batch go into queues without and with a
//! key (a fresh one per call, as a client's retries would carry), in the same run, in the order
//! off, on, on, off (so that a store growing or compacting over the run weighs on both alike);
//! the report gives each phase, both modes' rates over their two phases and the ratio. With a
//! key, each send also claims the key (one record inserted) and commits its answer with its
//! messages, so the difference is exactly what the key adds.
//!
//! Nobody consumes: at the end of a phase the queue's depth is compared with what was
//! acknowledged. Before measuring, one keyed send is repeated and must be answered with the
//! first one's ids (and enqueue nothing more), so that the figures cannot describe keys the
//! server ignored.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use comfy_table::{CellAlignment, Table, presets};
use serde_json::{Value, json};
use sluice_api::{CreateQueueRequest, SendMessage, SendRequest};
use sluice_client::Client;

use crate::Plan;
use crate::report::{self, thousands};
use crate::stats::Tally;
use crate::workload;

/// Messages per send call.
pub(crate) const SEND_BATCH: u32 = 10;

/// Which key a scenario measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Door {
    IdempotencyKey,
    ApiKey,
}

impl Door {
    fn header(self) -> &'static str {
        match self {
            Door::IdempotencyKey => "Idempotency-Key",
            Door::ApiKey => "API key",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Door::IdempotencyKey => "idempotency",
            Door::ApiKey => "auth",
        }
    }
}

/// One phase: a queue sent to without (`keyed: false`) or with keys.
#[derive(Debug, Clone)]
struct Row {
    keyed: bool,
    /// Which of the mode's two phases (1 or 2).
    round: usize,
    sent: Tally,
    calls: u64,
    window: Duration,
    acked_total: u64,
    stored: u64,
}

impl Row {
    fn rate(&self) -> f64 {
        self.sent.rate(self.window)
    }
}

/// The phases in the order they run: off, on, on, off.
const PHASES: [bool; 4] = [false, true, true, false];

pub(crate) async fn run(plan: &Plan, door: Door) -> anyhow::Result<()> {
    let started = Instant::now();
    let load_average = report::load_average();
    let body = "x".repeat(plan.body_bytes);
    let (rows, server) = match door {
        Door::IdempotencyKey => {
            crate::with_target(plan, async |url| phases(plan, (url, url), &body, door).await).await?
        }
        // Two servers: one that never has a key, and one that has.
        Door::ApiKey => {
            let ((rows, secured), open) = crate::with_target(plan, async |open| {
                crate::with_target(plan, async |secured| phases(plan, (open, secured), &body, door).await).await
            })
            .await?;
            (rows, format!("{open}\n           and, with keys, {secured}"))
        }
    };
    let text = render(plan, &server, &rows, started.elapsed(), load_average.as_deref(), door);
    crate::publish(plan, &text, json(plan, &server, &rows, door))
}

fn queue_name(plan: &Plan, keyed: bool, round: usize, door: Door) -> String {
    format!("{}-{}-{}-{round}", plan.queue, door.slug(), if keyed { "on" } else { "off" })
}

/// The tenant of the bench's API key: its calls go through the whole door, the key, the
/// tenant's namespace and its quotas (set high enough never to refuse).
const BENCH_TENANT: &str = "bench";

/// A key on the secured server with the scopes the phases use, of a tenant with quotas, and a
/// check that a send without it is refused there.
async fn api_key_client(url: &str, plan: &Plan) -> anyhow::Result<Client> {
    let admin = sluice_api::CreateKeyRequest {
        tenant: None,
        name: "bench-admin".into(),
        scopes: vec!["*:*:admin".into()],
        aws: false,
        rate_limit: None,
    };
    let admin = workload::client(url)?.create_key(&admin).await.context("making the bench's admin key")?;
    let admin = Client::builder(url).attempts(1).api_key(admin.key).build()?;
    let quotas = sluice_api::TenantQuotas {
        max_resources: Some(1_000_000),
        max_stored_bytes: Some(1 << 50),
        rate_limit: Some(sluice_api::RateLimit { per_second: 10_000_000, burst: 10_000_000 }),
    };
    admin.set_tenant(BENCH_TENANT, &quotas).await.context("setting the bench tenant's quotas")?;
    let request = sluice_api::CreateKeyRequest {
        tenant: Some(BENCH_TENANT.into()),
        name: "bench".into(),
        scopes: vec![format!("queues:{}-auth-*:send,read,manage", plan.queue)],
        aws: false,
        rate_limit: None,
    };
    let made = admin.create_key(&request).await.context("making the bench's API key")?;
    let queue = format!("{}-auth-check", plan.queue);
    let refused = workload::client(url)?.create_queue(&CreateQueueRequest { name: queue, ..Default::default() }).await;
    if !matches!(refused, Err(ref e) if e.code() == Some(sluice_api::ErrorCode::Unauthenticated)) {
        bail!("a call without a key was answered {refused:?}, not 401: the server does not ask for keys");
    }
    Ok(Client::builder(url).attempts(1).api_key(made.key).build()?)
}

async fn phases(plan: &Plan, (url_off, url_on): (&str, &str), body: &str, door: Door) -> anyhow::Result<Vec<Row>> {
    // One attempt, so the client adds no key of its own: the keyed phases give theirs.
    let plain = workload::client(url_off)?;
    let keyed_client = match door {
        Door::IdempotencyKey => plain.clone(),
        Door::ApiKey => api_key_client(url_on, plan).await?,
    };
    let mut rows: Vec<Row> = Vec::new();
    // Each run's keys are its own, so a rerun against the same server is not answered from
    // the last one's.
    let run = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let run = format!("{run:x}");
    for keyed in PHASES {
        let round = rows.iter().filter(|r| r.keyed == keyed).count() + 1;
        let queue = queue_name(plan, keyed, round, door);
        let request = CreateQueueRequest { name: queue.clone(), ..Default::default() };
        let client = if keyed { &keyed_client } else { &plain };
        let result = async {
            client.create_queue(&request).await.with_context(|| format!("creating queue {queue}"))?;
            let prefix = (keyed && door == Door::IdempotencyKey).then(|| format!("{run}-{round}"));
            if let Some(prefix) = &prefix {
                replayed_when_repeated(client, &queue, &format!("{prefix}-check")).await?;
            }
            phase(plan, client, &queue, body, keyed, prefix.as_deref(), door).await.map(|row| Row { round, ..row })
        }
        .await;
        let deleted = client.delete_queue(&queue).await;
        let row = result?;
        deleted.with_context(|| format!("deleting queue {queue}"))?;
        rows.push(row);
    }
    Ok(rows)
}

/// A keyed send repeated must answer the first one's ids and enqueue nothing, or the keyed
/// figures mean nothing. Leaves the queue empty again.
async fn replayed_when_repeated(client: &Client, queue: &str, key: &str) -> anyhow::Result<()> {
    let request = SendRequest { messages: vec![SendMessage { body: Some("check".into()), ..Default::default() }] };
    let first = client.send_messages_with_key(queue, &request, key).await?;
    let again = client.send_messages_with_key(queue, &request, key).await?;
    if first != again {
        bail!("a repeated keyed send was answered {again:?}, not its first answer {first:?}: keys are not honoured");
    }
    let counts = client.get_queue(queue).await?.counts;
    if counts.visible != 1 {
        bail!("a repeated keyed send left {} messages in {queue}, not 1", counts.visible);
    }
    client.purge_queue(queue).await?;
    Ok(())
}

async fn phase(
    plan: &Plan,
    client: &Client,
    queue: &str,
    body: &str,
    keyed: bool,
    prefix: Option<&str>,
    door: Door,
) -> anyhow::Result<Row> {
    let start = Instant::now();
    let measure_from = start + plan.warmup;
    let end = measure_from + plan.duration;
    let acked_total = Arc::new(AtomicU64::new(0));
    let request = Arc::new(SendRequest {
        messages: (0..SEND_BATCH).map(|_| SendMessage { body: Some(body.to_owned()), ..Default::default() }).collect(),
    });
    let mut tasks = Vec::new();
    for p in 0..plan.producers {
        let (client, queue, request, acked_total) =
            (client.clone(), queue.to_owned(), request.clone(), acked_total.clone());
        let prefix = prefix.map(|prefix| format!("{prefix}-{p}"));
        tasks.push(tokio::spawn(async move {
            producer(&client, &queue, &request, prefix.as_deref(), measure_from, end, &acked_total).await
        }));
    }
    let label = match (door, keyed) {
        (Door::IdempotencyKey, true) => "with Idempotency-Keys",
        (Door::ApiKey, true) => "with an API key",
        (_, false) => "without keys",
    };
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
        keyed,
        round: 1,
        sent,
        calls,
        window: plan.duration,
        acked_total: acked_total.load(Ordering::Relaxed),
        stored: counts.visible + counts.in_flight + counts.delayed,
    })
}

/// Sends batches until `end`, each under a new key `{prefix}-{n}` when `prefix` is given.
async fn producer(
    client: &Client,
    queue: &str,
    request: &SendRequest,
    prefix: Option<&str>,
    measure_from: Instant,
    end: Instant,
    acked_total: &AtomicU64,
) -> (Tally, u64) {
    let n = AtomicU64::new(0);
    crate::stats::closed_loop(SEND_BATCH, measure_from, end, acked_total, || async {
        let response = match prefix {
            Some(prefix) => {
                let key = format!("{prefix}-{}", n.fetch_add(1, Ordering::Relaxed));
                client.send_messages_with_key(queue, request, &key).await
            }
            None => client.send_messages(queue, request).await,
        }
        .map_err(|e| e.to_string())?;
        Ok(crate::stats::batch_answer(response.results.iter().map(|r| (r.id.is_some(), r.error.as_ref()))))
    })
    .await
}

/// A mode's messages per second over all its phases; `None` when it has none.
fn mode_rate(rows: &[Row], keyed: bool) -> Option<f64> {
    let of_mode = || rows.iter().filter(move |r| r.keyed == keyed);
    let window: f64 = of_mode().map(|r| r.window.as_secs_f64()).sum();
    (window > 0.0).then(|| of_mode().map(|r| r.sent.count as f64).sum::<f64>() / window)
}

/// With keys over without, by messages per second; `None` without a baseline.
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
    elapsed: Duration,
    load_average: Option<&str>,
    door: Door,
) -> String {
    let mut out = String::new();
    let w = &mut out;
    report::header(w, plan, server, elapsed, load_average);
    let keys = match door {
        Door::IdempotencyKey => "Idempotency-Key off, on, on, off (a new key per send call)",
        Door::ApiKey => {
            "API key off (a server without keys), on, on (a server with keys: one key of a tenant with quotas, scoped\n           to the queues, so every send passes the key, the tenant's namespace and its quota checks), off"
        }
    };
    let _ = writeln!(
        w,
        "workload   a queue per phase, {keys}; {}-byte bodies;\n           \
         {} producers, closed loop over HTTP/1.1 (sluice-client), {SEND_BATCH} messages per send; no consumers\n           \
         (the queue's depth is checked at the end); {} warm-up, then {} measured per phase",
        plan.body_bytes,
        plan.producers,
        humantime::format_duration(plan.warmup),
        humantime::format_duration(plan.duration),
    );
    let _ = writeln!(w, "reproduce  {}", command_line(plan, door));
    let _ = writeln!(w);
    let _ = writeln!(w, "{}", table(rows, door));
    let rate_text = |keyed| mode_rate(rows, keyed).map_or_else(|| "-".into(), thousands);
    let ratio_text = ratio(rows).map_or_else(|| "-".into(), |x| format!("{x:.2}"));
    let _ = writeln!(
        w,
        "without keys {} msg/s, with keys {} msg/s (each over its two phases): with / without = {ratio_text} (goal: at least {})",
        rate_text(false),
        rate_text(true),
        match door {
            Door::IdempotencyKey => "0.90",
            Door::ApiKey => "0.95",
        },
    );
    let _ = writeln!(
        w,
        "sent = messages whose send was acknowledged (durable); latency = one send call of {SEND_BATCH} messages;\n\
         stored / acked = messages in the queue at the end over those acknowledged (warm-up included)."
    );
    for row in rows {
        if let Some(first) = &row.sent.first_error {
            let queue = queue_name(plan, row.keyed, row.round, door);
            let _ = writeln!(w, "{queue}: {} send errors, first: {first}", row.sent.errors);
        }
    }
    out
}

fn table(rows: &[Row], door: Door) -> Table {
    let mut table = Table::new();
    table.load_preset(presets::ASCII_MARKDOWN).set_header([
        "phase",
        door.header(),
        "sends/s",
        "sent msg/s",
        "send p50 / p99 ms",
        "stored / acked",
        "errors",
    ]);
    for (i, row) in rows.iter().enumerate() {
        table.add_row([
            (i + 1).to_string(),
            if row.keyed { "on" } else { "off" }.to_owned(),
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
fn command_line(plan: &Plan, door: Door) -> String {
    let target = match &plan.server {
        Some(url) => format!("--server {url}"),
        None => format!("--durability {}", plan.durability_label()),
    };
    format!(
        "sluice bench --scenario {} {target} --producers {} --body-bytes {} --duration {} --warmup {}",
        door.slug(),
        plan.producers,
        plan.body_bytes,
        humantime::format_duration(plan.duration),
        humantime::format_duration(plan.warmup),
    )
}

fn json(plan: &Plan, server: &str, rows: &[Row], door: Door) -> Value {
    let ratio = ratio(rows);
    let rows_all = rows;
    let rows = rows.iter().map(|row| {
        report::json_row(
            plan,
            json!({
                "system": "sluice",
                "durability": plan.durability_label(),
                "workload": "queue-send",
                "server": server,
                "door": door.slug(),
                "keyed": row.keyed,
                "round": row.round,
                "batch": SEND_BATCH,
                "producers": plan.producers,
                "body_bytes": plan.body_bytes,
                "duration_s": row.window.as_secs_f64(),
                "sends_per_sec": row.calls as f64 / row.window.as_secs_f64(),
                "msgs_per_sec": row.rate(),
                "p50_ms": row.sent.latency.quantile_ms(0.5),
                "p99_ms": row.sent.latency.quantile_ms(0.99),
                "mode_msgs_per_sec": mode_rate(rows_all, row.keyed),
                "ratio_with_to_without": ratio,
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
    fn the_ratio_is_with_over_without_each_mode_over_its_phases() {
        let row = |keyed, count| {
            let mut sent = Tally::new();
            sent.count = count;
            Row { keyed, round: 1, sent, calls: 0, window: Duration::from_secs(1), acked_total: 0, stored: 0 }
        };
        let abba = [row(false, 1_200), row(true, 1_000), row(true, 600), row(false, 800)];
        assert_eq!(
            (mode_rate(&abba, false), mode_rate(&abba, true), ratio(&abba)),
            (Some(1_000.0), Some(800.0), Some(0.8))
        );
        assert_eq!(ratio(&[row(true, 800)]), None);
        assert_eq!(PHASES.iter().filter(|&&on| on).count(), 2, "two phases per mode");
    }
}
