//! The causal trace (`GET /v1/trace/{correlation_id}`): what carried a correlation id, in
//! causal order, from the services' index (`sluice_services::trace`).

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use sluice_api::{ErrorResponse, TraceResponse};
use sluice_services::trace::{TRACE_ID_LEN_MAX, Trace};
use utoipa::OpenApi;

use crate::AppState;
use crate::convert::rfc3339;
use crate::error::ApiError;
use crate::extract::Path;

pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/trace/{correlation_id}", get(trace))
}

#[derive(OpenApi)]
#[openapi(
    paths(trace),
    tags((name = "trace", description = "Every message, publish, push, stream record, event, job and saga step that carried a correlation id, in causal order"))
)]
pub struct TraceDoc;

#[utoipa::path(
    get, path = "/v1/trace/{correlation_id}", tag = "trace",
    params(("correlation_id" = String, Path, description = "The correlation id (1 to 256 bytes)")),
    responses(
        (status = 200, description = "The entries in causal order: each after the entry its `causation_id` names, otherwise oldest first; none for an id nothing carried (or whose entries expired)", body = TraceResponse),
        (status = 400, description = "`invalid_argument`: the id is longer than 256 bytes", body = ErrorResponse),
    )
)]
pub async fn trace(
    State(state): State<AppState>,
    Path(correlation_id): Path<String>,
) -> Result<axum::Json<TraceResponse>, ApiError> {
    if correlation_id.len() > TRACE_ID_LEN_MAX {
        return Err(ApiError::invalid(
            "correlation_id",
            format!("a correlation id is at most {TRACE_ID_LEN_MAX} bytes; this one is {}", correlation_id.len()),
        ));
    }
    let trace = state.services.traces().read(&correlation_id).await?;
    Ok(axum::Json(response(trace)))
}

fn response(trace: Trace) -> TraceResponse {
    let entries = trace
        .entries
        .into_iter()
        .map(|(e, depth)| sluice_api::TraceEntry {
            kind: e.kind.as_str().to_string(),
            id: e.id,
            causation_id: e.causation_id,
            target: e.target,
            detail: e.detail,
            at: rfc3339(e.at_ms),
            at_ms: e.at_ms,
            depth: u32::try_from(depth).unwrap_or(u32::MAX),
        })
        .collect();
    TraceResponse { correlation_id: trace.correlation_id, entries, truncated: trace.truncated }
}
