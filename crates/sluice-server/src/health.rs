//! Liveness and readiness probes (`/healthz`, `/readyz`) and the JSON answers for unknown
//! routes and methods.

use axum::extract::State;
use axum::http::{Method, Uri};
use serde_json::{Value, json};
use sluice_api::{ErrorCode, ErrorResponse};

use sluice_services::shedding::{LOW_PRIORITY_MAX, NORMAL_PRIORITY_MAX, ShedLevel};

use crate::AppState;
use crate::error::ApiError;

#[utoipa::path(
    get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The server is up and answering", body = Object))
)]
pub async fn healthz() -> axum::Json<Value> {
    axum::Json(json!({ "status": "ok" }))
}

#[utoipa::path(
    get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "The store accepts writes: `{\"status\":\"ready\"}`, or `{\"status\":\"shedding\", \"shedding\":{reason, refused_priority_max, ...}}` while load shedding refuses low priorities", body = Object),
        (status = 503, description = "`store_poisoned`: a write or sync failed; restart the server", body = ErrorResponse),
        (status = 507, description = "`insufficient_storage`: the disk is full; ready again once space is freed", body = ErrorResponse),
    )
)]
pub async fn readyz(State(state): State<AppState>) -> Result<axum::Json<Value>, ApiError> {
    if let Some(refusal) = state.store().refusal() {
        return Err(refusal.into());
    }
    // Shedding is still ready (high priorities are taken), and says so and why.
    Ok(axum::Json(match state.shedder().shedding() {
        None => json!({ "status": "ready" }),
        Some((level, reason)) => {
            let refused_priority_max = match level {
                ShedLevel::Low => LOW_PRIORITY_MAX,
                ShedLevel::Normal => NORMAL_PRIORITY_MAX,
            };
            let f = state.shedder().figures();
            json!({
                "status": "shedding",
                "shedding": {
                    "reason": reason.as_str(),
                    "refused_priority_max": refused_priority_max,
                    "backlog": f.backlog,
                    "memory_bytes": f.memory_bytes,
                    "disk_free_bytes": f.disk_free_bytes,
                },
            })
        }
    }))
}

pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no route {}", uri.path()))
}

/// axum adds the `Allow` header itself.
pub async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(ErrorCode::MethodNotAllowed, format!("{} does not take {method}", uri.path()))
}
