//! The dashboard's figures (`/v1/stats...`): the overview with the server's recent rates, every
//! queue's latest sample, and one queue's history, from the services' sampler
//! (`sluice_services::stats`). Rates are per second over one sample, counted on this node.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use sluice_api::{
    ErrorResponse, QueueHistory, QueuePoint, QueueRates, QueueRatesList, Stats, StoreHealth, TotalsPoint,
};
use sluice_services::stats::{QueueSample, STATS_HISTORY_SAMPLES_MAX, TotalsSample};
use sluice_store::StoreError;
use utoipa::OpenApi;

use crate::AppState;
use crate::convert::rfc3339;
use crate::error::ApiError;
use crate::extract::Path;

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/stats", get(overview))
        .route("/v1/stats/queues", get(queues))
        .route("/v1/stats/queues/{name}", get(queue))
}

#[derive(OpenApi)]
#[openapi(
    paths(overview, queues, queue),
    tags((name = "stats", description = "The short history behind the dashboard: recent rates and depths"))
)]
pub struct StatsDoc;

fn per_second(count: u64, interval_ms: u64) -> f64 {
    if interval_ms == 0 { 0.0 } else { count as f64 * 1000.0 / interval_ms as f64 }
}

fn totals_point(s: &TotalsSample) -> TotalsPoint {
    TotalsPoint {
        at_ms: s.at_ms,
        sent_per_second: per_second(s.sent, s.interval_ms),
        received_per_second: per_second(s.received, s.interval_ms),
        acked_per_second: per_second(s.acked, s.interval_ms),
        dead_lettered_per_second: per_second(s.dead_lettered, s.interval_ms),
        expired_per_second: per_second(s.expired, s.interval_ms),
        depth: s.depth,
    }
}

fn queue_point(s: &QueueSample) -> QueuePoint {
    QueuePoint {
        at_ms: s.at_ms,
        visible: s.visible,
        in_flight: s.in_flight,
        delayed: s.delayed,
        oldest_age_ms: s.oldest_age_ms,
        dlq_depth: s.dlq_depth,
        sent_per_second: per_second(s.sent, s.interval_ms),
        received_per_second: per_second(s.received, s.interval_ms),
        acked_per_second: per_second(s.acked, s.interval_ms),
    }
}

/// The error code every call gets while the store refuses them all, or `ok`.
fn health_status(refusal: Option<StoreError>) -> String {
    match refusal {
        None => "ok".to_string(),
        Some(e) => ApiError::from(e).code.as_str().to_string(),
    }
}

#[utoipa::path(
    get, path = "/v1/stats", tag = "stats",
    responses(
        (status = 200, description = "Totals, recent rates (an hour at the default 10 s), firing alerts, store health", body = Stats),
        (status = 503, description = "The store refuses calls", body = ErrorResponse),
    )
)]
pub async fn overview(State(state): State<AppState>) -> JsonResult<Stats> {
    let stats = state.stats();
    let series: Vec<TotalsPoint> = stats.totals().iter().map(totals_point).collect();
    let latest = stats.totals().last().copied().unwrap_or_default();
    let firing = state.alerts().alerts(false).await?.len() as u64;
    let store = state.store();
    let counters = store.counters();
    let now_ms = state.now_ms();
    Ok(axum::Json(Stats {
        now: rfc3339(now_ms),
        now_ms,
        sample_ms: stats.sample_ms(),
        history_samples_max: STATS_HISTORY_SAMPLES_MAX as u64,
        queues: latest.queues,
        depth: latest.depth,
        firing_alerts: firing,
        store: StoreHealth {
            status: health_status(store.refusal()),
            batches_committed: counters.batches_committed,
            records_committed: counters.records_committed,
        },
        messages_sent: counters.messages_sent,
        messages_received: counters.messages_received,
        messages_acked: counters.messages_acked,
        messages_dead_lettered: counters.messages_dead_lettered,
        series,
    }))
}

#[utoipa::path(
    get, path = "/v1/stats/queues", tag = "stats",
    responses((status = 200, description = "Every sampled queue's latest sample (the first 1,000 queues by name)", body = QueueRatesList))
)]
pub async fn queues(State(state): State<AppState>) -> JsonResult<QueueRatesList> {
    let queues = state
        .stats()
        .latest()
        .iter()
        .map(|(name, sample)| QueueRates { name: name.clone(), latest: queue_point(sample) })
        .collect();
    Ok(axum::Json(QueueRatesList { queues }))
}

#[utoipa::path(
    get, path = "/v1/stats/queues/{name}", tag = "stats",
    params(("name" = String, Path, description = "Queue name")),
    responses(
        (status = 200, description = "The queue's samples, oldest first", body = QueueHistory),
        (status = 404, description = "`queue_not_found`", body = ErrorResponse),
    )
)]
pub async fn queue(State(state): State<AppState>, Path(name): Path<String>) -> JsonResult<QueueHistory> {
    let series = match state.stats().queue(&name) {
        Some(series) => series.iter().map(queue_point).collect(),
        None => {
            // No history: an unknown queue is a 404, a known one has no samples yet.
            state.store().get_queue(&name).await?;
            Vec::new()
        }
    };
    Ok(axum::Json(QueueHistory { name, sample_ms: state.stats().sample_ms(), series }))
}
