//! The `fanout` scenario: what a topic's fan-out costs. One topic with 1, then 10, then 100 raw
//! queue subscriptions (one phase each); producers publish batches of `PUBLISH_BATCH` messages
//! closed-loop over the native API (`POST /v1/topics/{name}/publish`), and each publish is
//! acknowledged only once every copy is durable, so deliveries/s is the rate of durable copies.
//!
//! Nobody consumes: the phase measures the publish side alone, and at its end the queues'
//! depths are read and compared with what was acknowledged (every acknowledged message must be
//! in every queue). Each phase creates its own topic and queues and deletes them afterwards, so
//! no phase starts with another's backlog.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use comfy_table::{CellAlignment, Table, presets};
use serde_json::{Value, json};
use sluice_api::{CreateQueueRequest, CreateTopicRequest, PublishMessage, PublishRequest, SubscribeRequest};
use sluice_client::Client;

use crate::Plan;
use crate::report::{self, thousands};
use crate::stats::Tally;
use crate::workload;

/// Messages per publish call.
pub(crate) const PUBLISH_BATCH: u32 = 10;
/// Queue subscriptions of the topic, one phase each.
const SUBSCRIPTION_COUNTS: [u32; 3] = [1, 10, 100];

/// One phase's figures.
#[derive(Debug, Clone)]
struct Row {
    subscriptions: u32,
    /// Messages acknowledged inside the measured window, with the latency of each publish call.
    published: Tally,
    /// Publish calls completed inside the window.
    calls: u64,
    window: Duration,
    /// Messages acknowledged over the whole phase, warm-up included.
    acked_total: u64,
    /// Messages found in all the phase's queues at its end (visible, in flight or delayed).
    stored: u64,
}

impl Row {
    fn published_rate(&self) -> f64 {
        self.published.rate(self.window)
    }

    fn deliveries_rate(&self) -> f64 {
        self.published_rate() * f64::from(self.subscriptions)
    }

    /// Copies the queues should hold: every acknowledged message in every subscription.
    fn expected(&self) -> u64 {
        self.acked_total * u64::from(self.subscriptions)
    }
}

pub(crate) async fn run(plan: &Plan) -> anyhow::Result<()> {
    let started = Instant::now();
    let load_average = report::load_average();
    let (rows, server) = crate::with_target(plan, async |url| phases(plan, url).await).await?;
    let text = render(plan, &server, &rows, started.elapsed(), load_average.as_deref());
    crate::publish(plan, &text, json(plan, &server, &rows))
}

fn queue_name(prefix: &str, subscriptions: u32, i: u32) -> String {
    format!("{prefix}-fanout-{subscriptions}-{i}")
}

async fn phases(plan: &Plan, url: &str) -> anyhow::Result<Vec<Row>> {
    let client = workload::client(url)?;
    let mut rows = Vec::new();
    for subscriptions in SUBSCRIPTION_COUNTS {
        let topic = format!("{}-fanout-{subscriptions}", plan.queue);
        let queues: Vec<String> = (0..subscriptions).map(|i| queue_name(&plan.queue, subscriptions, i)).collect();
        let result = async {
            client
                .create_topic(&CreateTopicRequest { name: topic.clone(), ..Default::default() })
                .await
                .with_context(|| format!("creating topic {topic} on {url}"))?;
            for queue in &queues {
                client
                    .create_queue(&CreateQueueRequest { name: queue.clone(), ..Default::default() })
                    .await
                    .with_context(|| format!("creating queue {queue}"))?;
                let request = SubscribeRequest { queue: Some(queue.clone()), raw: Some(true), ..Default::default() };
                client.subscribe(&topic, &request).await.with_context(|| format!("subscribing {queue} to {topic}"))?;
            }
            phase(plan, &client, &topic, &queues).await
        }
        .await;
        // Deleted even after a failed phase, so that an external server is left as it was found.
        let topic_deleted = client.delete_topic(&topic).await;
        for queue in &queues {
            let _ = client.delete_queue(queue).await;
        }
        let row = result?;
        topic_deleted.with_context(|| format!("deleting topic {topic}"))?;
        rows.push(row);
    }
    Ok(rows)
}

/// Runs the producers for the warm-up and the measured window, then reads the queues' depths.
async fn phase(plan: &Plan, client: &Client, topic: &str, queues: &[String]) -> anyhow::Result<Row> {
    let subscriptions = queues.len() as u32;
    let start = Instant::now();
    let measure_from = start + plan.warmup;
    let end = measure_from + plan.duration;
    let acked_total = Arc::new(AtomicU64::new(0));
    let body = workload::body_padding(plan.body_bytes);
    let mut tasks = Vec::new();
    for _ in 0..plan.producers {
        let (client, topic, body, acked_total) = (client.clone(), topic.to_owned(), body.clone(), acked_total.clone());
        tasks
            .push(tokio::spawn(async move { producer(&client, &topic, &body, measure_from, end, &acked_total).await }));
    }
    let bar = crate::progress::phase(&format!("fan-out to {subscriptions}"), plan.warmup + plan.duration);
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(100)).await;
        bar.set_position(u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX));
        bar.set_message(format!("{} published", thousands(acked_total.load(Ordering::Relaxed) as f64)));
    }
    let mut published = Tally::new();
    let mut calls = 0;
    for task in tasks {
        let (tally, task_calls) = task.await.context("a producer task panicked")?;
        published.merge(&tally);
        calls += task_calls;
    }
    bar.finish_and_clear();
    let mut stored = 0;
    for queue in queues {
        let counts = client.get_queue(queue).await.with_context(|| format!("reading queue {queue}"))?.counts;
        stored += counts.visible + counts.in_flight + counts.delayed;
    }
    Ok(Row {
        subscriptions,
        published,
        calls,
        window: plan.duration,
        acked_total: acked_total.load(Ordering::Relaxed),
        stored,
    })
}

/// Publishes batches until `end`; counts what completes after `measure_from`. Returns the
/// tally (messages) and the number of publish calls measured.
async fn producer(
    client: &Client,
    topic: &str,
    body: &str,
    measure_from: Instant,
    end: Instant,
    acked_total: &AtomicU64,
) -> (Tally, u64) {
    let request = PublishRequest {
        messages: (0..PUBLISH_BATCH)
            .map(|_| PublishMessage { body: workload::stamped_body(0, body), ..Default::default() })
            .collect(),
    };
    crate::stats::closed_loop(PUBLISH_BATCH, measure_from, end, acked_total, || async {
        let response = client.publish(topic, &request).await.map_err(|e| e.to_string())?;
        Ok(crate::stats::batch_answer(response.results.iter().map(|r| (r.id.is_some(), r.error.as_ref()))))
    })
    .await
}

fn render(plan: &Plan, server: &str, rows: &[Row], elapsed: Duration, load_average: Option<&str>) -> String {
    let mut out = String::new();
    let w = &mut out;
    report::header(w, plan, server, elapsed, load_average);
    let _ = writeln!(
        w,
        "workload   one topic per phase with 1, 10 or 100 raw queue subscriptions (no filter policy);\n           \
         {} producers, closed loop over HTTP/1.1 (sluice-client), {PUBLISH_BATCH} messages of {} bytes per publish;\n           \
         no consumers: the queues keep every copy and their depths are checked at the end;\n           \
         {} warm-up, then {} measured per phase",
        plan.producers,
        plan.body_bytes,
        humantime::format_duration(plan.warmup),
        humantime::format_duration(plan.duration),
    );
    let _ = writeln!(w, "reproduce  {}", command_line(plan));
    let _ = writeln!(w);
    let _ = writeln!(w, "{}", table(rows));
    let _ = writeln!(
        w,
        "published = messages whose publish was acknowledged (durable in every subscription's queue);\n\
         deliveries = published x subscriptions, the copies made durable per second; latency = one publish call of\n\
         {PUBLISH_BATCH} messages; stored / expected = messages in the phase's queues at its end over acknowledged\n\
         messages (warm-up included) x subscriptions: a copy of an unacknowledged publish may make stored exceed it."
    );
    for row in rows {
        if let Some(first) = &row.published.first_error {
            let _ = writeln!(
                w,
                "{} subscriptions: {} publish errors, first: {first}",
                row.subscriptions, row.published.errors
            );
        }
    }
    out
}

fn table(rows: &[Row]) -> Table {
    let mut table = Table::new();
    table.load_preset(presets::ASCII_MARKDOWN).set_header([
        "subscriptions",
        "publishes/s",
        "published msg/s",
        "deliveries/s",
        "publish p50 / p99 ms",
        "stored / expected",
        "errors",
    ]);
    for row in rows {
        table.add_row([
            row.subscriptions.to_string(),
            thousands(row.calls as f64 / row.window.as_secs_f64()),
            thousands(row.published_rate()),
            thousands(row.deliveries_rate()),
            row.published.latency.p50_p99(),
            format!("{} / {}", row.stored, row.expected()),
            row.published.errors.to_string(),
        ]);
    }
    for column in table.column_iter_mut() {
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
        "sluice bench --scenario fanout {target} --producers {} --body-bytes {} --duration {} --warmup {}",
        plan.producers,
        plan.body_bytes,
        humantime::format_duration(plan.duration),
        humantime::format_duration(plan.warmup),
    )
}

fn json(plan: &Plan, server: &str, rows: &[Row]) -> Value {
    let rows = rows.iter().map(|row| {
        report::json_row(
            plan,
            json!({
                "system": "sluice",
                "durability": plan.durability_label(),
                "workload": "topic-publish-fanout",
                "server": server,
                "subscriptions": row.subscriptions,
                "batch": PUBLISH_BATCH,
                "producers": plan.producers,
                "body_bytes": plan.body_bytes,
                "duration_s": row.window.as_secs_f64(),
                "publishes_per_sec": row.calls as f64 / row.window.as_secs_f64(),
                "msgs_per_sec": row.published_rate(),
                "deliveries_per_sec": row.deliveries_rate(),
                "p50_ms": row.published.latency.quantile_ms(0.5),
                "p99_ms": row.published.latency.quantile_ms(0.99),
                "stored_at_end": row.stored,
                "expected_at_end": row.expected(),
                "publish_errors": row.published.errors,
            }),
        )
    });
    Value::Array(rows.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deliveries_are_published_messages_times_subscriptions() {
        let mut published = Tally::new();
        published.count = 2_000;
        let row = Row {
            subscriptions: 10,
            published,
            calls: 200,
            window: Duration::from_secs(2),
            acked_total: 3_000,
            stored: 30_000,
        };
        assert_eq!((row.published_rate(), row.deliveries_rate(), row.expected()), (1_000.0, 10_000.0, 30_000));
        assert_eq!(queue_name("b", 100, 7), "b-fanout-100-7");
    }
}
