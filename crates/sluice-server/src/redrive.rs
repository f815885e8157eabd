//! Redrive handlers: start a redrive of a (dead-letter) queue, list, inspect and cancel tasks.
//! The tasks themselves run in `redrive_tasks`.

use axum::extract::State;
use axum::http::StatusCode;
use sluice_api::{ErrorCode, ErrorResponse, RedriveRequest, RedriveTask, RedriveTaskList};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{JsonOrEmpty, Path};

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

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
    let task = state.redrives.start(&name, request.to, request.max_per_second).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(task)))
}

#[utoipa::path(
    get, path = "/v1/queues/{name}/redrive", tag = "redrive",
    params(("name" = String, Path, description = "Source queue")),
    responses(
        (status = 200, description = "Redrive tasks of this queue, oldest first (since the server started)", body = RedriveTaskList),
    )
)]
pub async fn list_for_queue(State(state): State<AppState>, Path(name): Path<String>) -> JsonResult<RedriveTaskList> {
    Ok(axum::Json(RedriveTaskList { tasks: state.redrives.list(Some(&name)) }))
}

#[utoipa::path(
    get, path = "/v1/redrives", tag = "redrive",
    responses((status = 200, description = "Every redrive task since the server started, oldest first", body = RedriveTaskList))
)]
pub async fn list(State(state): State<AppState>) -> axum::Json<RedriveTaskList> {
    axum::Json(RedriveTaskList { tasks: state.redrives.list(None) })
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
    state.redrives.get(&id).map(axum::Json).ok_or_else(|| not_found(&id))
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
    state.redrives.cancel(&id).map(axum::Json).ok_or_else(|| not_found(&id))
}
