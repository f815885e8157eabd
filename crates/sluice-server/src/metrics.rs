//! `GET /metrics`: Prometheus text. Owns the process-wide recorder (request latency and
//! anything else recorded through the `metrics` macros) and renders the store's queue gauges
//! and counters fresh at every scrape.
//!
//! Queue gauges are not kept in the global recorder: set there, a deleted queue's gauges would
//! linger until removed by hand, and two apps in one process (tests) would mix their queues.
//! Instead each scrape records them into a throwaway recorder and appends its rendering.

use std::sync::OnceLock;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use sluice_core::broker::QueueView;
use sluice_core::jobs::{JobStatus, QueueJobStats};
use sluice_core::limits::LIST_QUEUES_LIMIT_MAX;
use sluice_services::{idempotency, jobs};
use sluice_store::Store;

use crate::AppState;
use crate::error::ApiError;

pub const HTTP_REQUEST_DURATION: &str = "sluice_http_request_duration_seconds";

/// Latency buckets, in seconds: from sub-millisecond answers to the longest long poll (20 s).
const HTTP_BUCKETS: &[f64] =
    &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0];
/// Job queue waits and durations, in seconds: from a millisecond to a day.
const JOB_BUCKETS: &[f64] =
    &[0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 86400.0];

static PROMETHEUS: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the global recorder on first use and returns its handle. `None` when another
/// recorder was installed first (by an embedding program); requests are then recorded there.
pub fn handle() -> Option<&'static PrometheusHandle> {
    PROMETHEUS
        .get_or_init(|| {
            let installed = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(HTTP_REQUEST_DURATION.to_string()), HTTP_BUCKETS)
                .and_then(|b| b.set_buckets_for_metric(Matcher::Full(jobs::QUEUE_WAIT_METRIC.to_string()), JOB_BUCKETS))
                .and_then(|b| b.set_buckets_for_metric(Matcher::Full(jobs::DURATION_METRIC.to_string()), JOB_BUCKETS))
                .and_then(PrometheusBuilder::install_recorder);
            match installed {
                Ok(handle) => {
                    metrics::describe_histogram!(HTTP_REQUEST_DURATION, "Time to answer an HTTP request, by route and status.");
                    metrics::describe_histogram!(jobs::QUEUE_WAIT_METRIC, "How long claimable jobs waited for a worker, by queue.");
                    metrics::describe_histogram!(jobs::DURATION_METRIC, "How long job attempts ran, by queue and outcome.");
                    metrics::describe_counter!(jobs::ATTEMPTS_METRIC, "Job attempts started (claims), by queue.");
                    metrics::describe_counter!(jobs::ENQUEUED_METRIC, "Jobs enqueued, by queue.");
                    metrics::describe_counter!(
                        idempotency::REQUESTS_METRIC,
                        "Requests with an Idempotency-Key, by outcome (executed, replayed, mismatch, in_use, refused_full, released, too_large)."
                    );
                    metrics::describe_counter!(
                        "sluice_idempotency_expired_total",
                        "Idempotency entries deleted by the sweep after their TTL."
                    );
                    metrics::describe_counter!(
                        sluice_services::sagas::QUEUE_REPLIES_METRIC,
                        "Replies taken from saga reply queues, by queue and result (applied, unmatched, malformed, retried)."
                    );
                    Some(handle)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot install the Prometheus recorder; /metrics shows store figures only");
                    None
                }
            }
        })
        .as_ref()
}

/// Folds the latency histogram's recent samples into its buckets. Rendering does this too;
/// calling it on a timer bounds memory when nobody scrapes.
pub fn upkeep() {
    if let Some(h) = handle() {
        h.run_upkeep();
    }
}

pub fn record_request(method: &str, route: &str, status: u16, seconds: f64) {
    metrics::histogram!(
        HTTP_REQUEST_DURATION,
        "method" => method.to_string(),
        "route" => route.to_string(),
        "status" => status.to_string(),
    )
    .record(seconds);
}

#[utoipa::path(
    get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text exposition format", content_type = "text/plain", body = String))
)]
pub async fn scrape(State(state): State<AppState>) -> Result<Response, ApiError> {
    let queues = all_queues(state.store().as_ref()).await?;
    let job_stats = state.services.jobs().stats().await?;
    let mut text = handle().map(PrometheusHandle::render).unwrap_or_default();
    let shed = state.shedder().refused();
    text.push_str(&render_store(state.store().as_ref(), &queues, &job_stats, &shed));
    text.push_str(&render_shedding(state.shedder()));
    text.push_str(&crate::streams::metrics_text(state.store().as_ref()).await?);
    text.push_str(&crate::relays::render_metrics(&state).await?);
    text.push_str(&crate::events::metrics_text(&state).await?);
    text.push_str(&idempotency_gauges(state.services.idempotency().totals()));
    Ok(([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response())
}

/// The idempotency entries and bytes this node counts as kept (the figures its bounds are
/// checked against).
fn idempotency_gauges((entries, bytes): (u64, u64)) -> String {
    let recorder = PrometheusBuilder::new().build_recorder();
    metrics::with_local_recorder(&recorder, || {
        metrics::describe_gauge!(idempotency::ENTRIES_METRIC, "Idempotency entries kept, as this node counts them.");
        metrics::describe_gauge!(
            idempotency::BYTES_METRIC,
            "Bytes of idempotency entries kept, as this node counts them."
        );
        metrics::gauge!(idempotency::ENTRIES_METRIC).set(entries as f64);
        metrics::gauge!(idempotency::BYTES_METRIC).set(bytes as f64);
    });
    recorder.handle().render()
}

async fn all_queues(store: &dyn Store) -> Result<Vec<QueueView>, ApiError> {
    let page = LIST_QUEUES_LIMIT_MAX as usize;
    let mut queues: Vec<QueueView> = Vec::new();
    loop {
        let after = queues.last().map(|q| q.name.clone());
        let batch = store.list_queues("", after.as_deref(), page).await?;
        let last_page = batch.len() < page;
        queues.extend(batch);
        if last_page {
            return Ok(queues);
        }
    }
}

/// Every refusal of the queues' depth limits, `sluice_rejected_total{resource, reason}` with
/// `resource` as `queue:NAME`, and each bounded queue's depth in bytes. A queue without a limit
/// and without refusals gets no series, so that unbounded queues add nothing to a scrape.
/// (Rate limits and shedding add their refusals from the services, `render_backpressure`.)
/// A queue's labels (see `sluice_core::name::resource_labels`).
fn queue_labels(stored: &str) -> Vec<metrics::Label> {
    let labels = sluice_core::name::resource_labels("queue", stored);
    labels.into_iter().map(|(k, v)| metrics::Label::new(k, v)).collect()
}

fn render_refusals(queues: &[QueueView], shed: &std::collections::BTreeMap<String, u64>) {
    metrics::describe_counter!(
        REJECTED_METRIC,
        "Writes refused or moved by backpressure, by resource and reason (queue_full, drop_head, reject_to_dlq, expired_to_dlq, rate_limited, shedding)."
    );
    metrics::describe_gauge!("sluice_queue_depth_bytes", "Bytes in a queue with a depth limit.");
    for q in queues {
        let r = q.stats.refusals;
        let bounded = q.attributes.has_depth_limit() || q.attributes.rate_limit.is_some();
        if bounded {
            metrics::gauge!("sluice_queue_depth_bytes", queue_labels(&q.name)).set(q.stats.depth_bytes as f64);
        }
        if !bounded && r == Default::default() {
            continue;
        }
        let resource = format!("queue:{}", q.name);
        for (reason, value) in [
            ("queue_full", r.queue_full),
            ("drop_head", r.drop_head),
            ("reject_to_dlq", r.rejected_to_dlq),
            ("expired_to_dlq", r.expired_to_dlq),
            ("rate_limited", r.rate_limited),
        ] {
            metrics::counter!(REJECTED_METRIC, "resource" => resource.clone(), "reason" => reason).absolute(value);
        }
    }
    for (resource, refused) in shed {
        metrics::counter!(REJECTED_METRIC, "resource" => resource.clone(), "reason" => "shedding").absolute(*refused);
    }
}

/// Load shedding: whether the server sheds and why (`sluice_shedding{reason}`, 1 while that
/// signal sheds), the figures it watches, and the writes it refused per resource.
fn render_shedding(shedder: &sluice_services::shedding::Shedder) -> String {
    use sluice_services::shedding::ShedReason;
    let recorder = PrometheusBuilder::new().build_recorder();
    metrics::with_local_recorder(&recorder, || {
        metrics::describe_gauge!(
            "sluice_shedding",
            "1 while load shedding refuses writes because of this reason's watermark."
        );
        let shedding = shedder.shedding();
        for reason in [ShedReason::Backlog, ShedReason::Memory, ShedReason::Disk] {
            let on = shedding.is_some_and(|(_, r)| r == reason);
            metrics::gauge!("sluice_shedding", "reason" => reason.as_str()).set(if on { 1.0 } else { 0.0 });
        }
        let f = shedder.figures();
        for (name, help, value) in [
            ("sluice_write_backlog", "Calls waiting for the store's write pipeline.", f.backlog),
            (
                "sluice_process_resident_bytes",
                "The server's resident memory, as load shedding sees it.",
                f.memory_bytes,
            ),
            ("sluice_data_disk_free_bytes", "Free bytes on the data directory's disk.", f.disk_free_bytes),
        ] {
            if let Some(value) = value {
                metrics::describe_gauge!(name, help);
                metrics::gauge!(name).set(value as f64);
            }
        }
    });
    recorder.handle().render()
}

/// `sluice_rejected_total{resource, reason}`: see `render_refusals`.
pub const REJECTED_METRIC: &str = "sluice_rejected_total";

fn render_store(
    store: &dyn Store,
    queues: &[QueueView],
    job_stats: &[QueueJobStats],
    shed: &std::collections::BTreeMap<String, u64>,
) -> String {
    let recorder = PrometheusBuilder::new().build_recorder();
    metrics::with_local_recorder(&recorder, || {
        metrics::describe_gauge!("sluice_queue_visible", "Messages a receive could get now.");
        metrics::describe_gauge!("sluice_queue_in_flight", "Messages received and not yet acked.");
        metrics::describe_gauge!("sluice_queue_delayed", "Messages waiting for a delay to pass.");
        metrics::describe_gauge!(
            "sluice_queue_oldest_age_seconds",
            "Age of the oldest message in the queue (0 when empty)."
        );
        metrics::describe_gauge!("sluice_queue_dlq_depth", "Messages in the queue's dead-letter queue.");
        for q in queues {
            let s = &q.stats;
            let labels = queue_labels(&q.name);
            metrics::gauge!("sluice_queue_visible", labels.clone()).set(s.visible as f64);
            metrics::gauge!("sluice_queue_in_flight", labels.clone()).set(s.in_flight as f64);
            metrics::gauge!("sluice_queue_delayed", labels.clone()).set(s.delayed as f64);
            let age_seconds = s.oldest_age_ms.map_or(0.0, |ms| ms as f64 / 1000.0);
            metrics::gauge!("sluice_queue_oldest_age_seconds", labels.clone()).set(age_seconds);
            if let Some(depth) = s.dead_letter_depth {
                metrics::gauge!("sluice_queue_dlq_depth", labels).set(depth as f64);
            }
        }
        render_refusals(queues, shed);
        metrics::describe_gauge!("sluice_jobs", "Jobs by queue and status (finished ones until pruned).");
        metrics::describe_gauge!("sluice_job_result_bytes", "Result bytes held by a queue's finished jobs.");
        for q in job_stats {
            for status in JobStatus::ALL {
                let mut labels = queue_labels(&q.queue);
                labels.push(metrics::Label::new("status", status.as_str()));
                metrics::gauge!("sluice_jobs", labels).set(q.counts[status.index()] as f64);
            }
            metrics::gauge!("sluice_job_result_bytes", queue_labels(&q.queue)).set(q.result_bytes as f64);
        }
        let c = store.counters();
        let counters = [
            ("sluice_messages_sent_total", "Messages accepted by sends.", c.messages_sent),
            ("sluice_messages_received_total", "Deliveries made by receives.", c.messages_received),
            ("sluice_messages_acked_total", "Messages deleted by acks.", c.messages_acked),
            ("sluice_messages_dead_lettered_total", "Messages moved to a dead-letter queue.", c.messages_dead_lettered),
            ("sluice_messages_expired_total", "Messages deleted at the end of their retention.", c.messages_expired),
            ("sluice_store_batches_total", "Write batches made durable (group commits).", c.batches_committed),
            ("sluice_store_records_total", "Records in those batches.", c.records_committed),
            ("sluice_jobs_lapsed_total", "Job attempts whose lease lapsed (worker gone or timed out).", c.jobs_lapsed),
        ];
        for (name, help, value) in counters {
            metrics::describe_counter!(name, help);
            metrics::counter!(name).absolute(value);
        }
        metrics::describe_counter!("sluice_jobs_pruned_total", "Finished jobs pruned, by reason (`ttl`, `budget`).");
        metrics::counter!("sluice_jobs_pruned_total", "reason" => "ttl").absolute(c.jobs_pruned_ttl);
        metrics::counter!("sluice_jobs_pruned_total", "reason" => "budget").absolute(c.jobs_pruned_budget);
    });
    recorder.handle().render()
}
