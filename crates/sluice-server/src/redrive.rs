//! Redrive handlers: start a redrive of a (dead-letter) queue, list, inspect and cancel tasks.
//! The tasks themselves run in `redrive_tasks`.

use axum::extract::State;
use axum::http::StatusCode;
use sluice_api::{ErrorCode, ErrorResponse, RedriveRequest, RedriveTask, RedriveTaskList};

use sluice_services::redrive::TaskInfo;

use crate::AppState;
use crate::convert::rfc3339;
use crate::error::ApiError;
use crate::extract::{JsonOrEmpty, Path};

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

/// A task as the native API shows it.
fn task_view(t: &TaskInfo) -> RedriveTask {
    RedriveTask {
        id: t.id.to_string(),
        source: t.source.clone(),
        to: t.to.clone(),
        max_per_second: t.max_per_second,
        status: t.status.as_str().to_string(),
        moved: t.moved,
        failed: t.failed,
        total: t.total,
        started_at: rfc3339(t.started_at_ms),
        finished_at: t.finished_at_ms.map(rfc3339),
        // A failure is shown as the API shows its error, without internals for a 5xx.
        error: match &t.failure {
            Some(failure) => Some(ApiError::from(failure.clone()).body().message),
            None => t.error.clone(),
        },
    }
}

/// Task ids are numbers; anything else names no task.
fn parse_id(id: &str) -> Option<u64> {
    id.parse().ok()
}

fn not_found(id: &str) -> ApiError {
    ApiError::new(ErrorCode::RedriveNotFound, format!("no redrive task has id {id:?}"))
        .with_details(serde_json::json!({ "redrive": id }))
}

#[utoipa::path(
    post, path = "/v1/queues/{name}/redrive", tag = "redrive",
    params(("name" = String, Path, description = "The queue to move messages out of (usually a dead-letter queue)")),
    request_body(content = RedriveRequest, description = "May be empty: back to each message's source, 500 per second"),
    responses(
        (status = 202, description = "The task started; poll it for progress", body = RedriveTask),
        (status = 400, description = "`invalid_argument`", body = ErrorResponse),
        (status = 404, description = "`queue_not_found` (source or destination)", body = ErrorResponse),
        (status = 409, description = "`redrive_running`: this queue already has a running redrive", body = ErrorResponse),
    )
)]
pub async fn start(
    State(state): State<AppState>,
    Path(name): Path<String>,
    JsonOrEmpty(request): JsonOrEmpty<RedriveRequest>,
) -> Result<(StatusCode, axum::Json<RedriveTask>), ApiError> {
    let task = state.redrives().start(&name, request.to, request.max_per_second).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(task_view(&task))))
}

#[utoipa::path(
    get, path = "/v1/queues/{name}/redrive", tag = "redrive",
    params(("name" = String, Path, description = "Source queue")),
    responses(
        (status = 200, description = "Redrive tasks of this queue, oldest first (since the server started)", body = RedriveTaskList),
    )
)]
pub async fn list_for_queue(State(state): State<AppState>, Path(name): Path<String>) -> JsonResult<RedriveTaskList> {
    Ok(axum::Json(RedriveTaskList { tasks: state.redrives().list(Some(&name)).iter().map(task_view).collect() }))
}

#[utoipa::path(
    get, path = "/v1/redrives", tag = "redrive",
    responses((status = 200, description = "Every redrive task since the server started, oldest first", body = RedriveTaskList))
)]
pub async fn list(State(state): State<AppState>) -> axum::Json<RedriveTaskList> {
    axum::Json(RedriveTaskList { tasks: state.redrives().list(None).iter().map(task_view).collect() })
}

#[utoipa::path(
    get, path = "/v1/redrives/{id}", tag = "redrive",
    params(("id" = String, Path, description = "Redrive task id")),
    responses(
        (status = 200, description = "The task and its progress", body = RedriveTask),
        (status = 404, description = "`redrive_not_found`", body = ErrorResponse),
    )
)]
pub async fn get(State(state): State<AppState>, Path(id): Path<String>) -> JsonResult<RedriveTask> {
    parse_id(&id).and_then(|n| state.redrives().get(n)).map(|t| axum::Json(task_view(&t))).ok_or_else(|| not_found(&id))
}

#[utoipa::path(
    delete, path = "/v1/redrives/{id}", tag = "redrive",
    params(("id" = String, Path, description = "Redrive task id")),
    responses(
        (status = 200, description = "The task, cancelled (or as it finished); it stops before its next step", body = RedriveTask),
        (status = 404, description = "`redrive_not_found`", body = ErrorResponse),
    )
)]
pub async fn cancel(State(state): State<AppState>, Path(id): Path<String>) -> JsonResult<RedriveTask> {
    parse_id(&id)
        .and_then(|n| state.redrives().cancel(n))
        .map(|t| axum::Json(task_view(&t)))
        .ok_or_else(|| not_found(&id))
}
