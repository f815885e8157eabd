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
use crate::tenant::Tenant;

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

/// A task as the native API shows it, in the tenant's names.
fn task_view(tenant: &Tenant, t: &TaskInfo) -> RedriveTask {
    RedriveTask {
        id: t.id.to_string(),
        source: tenant.show(&t.source),
        to: t.to.as_deref().map(|q| tenant.show(q)),
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

/// The tenant's task with this id: ids are numbers, and another tenant's task is as absent.
fn own_task(state: &AppState, tenant: &Tenant, id: &str) -> Option<TaskInfo> {
    let task = state.redrives().get(id.parse().ok()?)?;
    tenant.owns(&task.source).then_some(task)
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
    tenant: Tenant,
    Path(name): Path<String>,
    JsonOrEmpty(request): JsonOrEmpty<RedriveRequest>,
) -> Result<(StatusCode, axum::Json<RedriveTask>), ApiError> {
    let name = tenant.name("name", &name)?;
    let to = request.to.map(|to| tenant.name("to", &to)).transpose()?;
    let task = state.redrives().start(&name, to, request.max_per_second).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(task_view(&tenant, &task))))
}

#[utoipa::path(
    get, path = "/v1/queues/{name}/redrive", tag = "redrive",
    params(("name" = String, Path, description = "Source queue")),
    responses(
        (status = 200, description = "Redrive tasks of this queue, oldest first (since the server started)", body = RedriveTaskList),
    )
)]
pub async fn list_for_queue(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> JsonResult<RedriveTaskList> {
    let name = tenant.name("name", &name)?;
    let tasks = state.redrives().list(Some(&name)).iter().map(|t| task_view(&tenant, t)).collect();
    Ok(axum::Json(RedriveTaskList { tasks }))
}

#[utoipa::path(
    get, path = "/v1/redrives", tag = "redrive",
    responses((status = 200, description = "Every redrive task since the server started, oldest first", body = RedriveTaskList))
)]
pub async fn list(State(state): State<AppState>, tenant: Tenant) -> axum::Json<RedriveTaskList> {
    let tasks = state.redrives().list(None);
    let tasks = tasks.iter().filter(|t| tenant.owns(&t.source)).map(|t| task_view(&tenant, t)).collect();
    axum::Json(RedriveTaskList { tasks })
}

#[utoipa::path(
    get, path = "/v1/redrives/{id}", tag = "redrive",
    params(("id" = String, Path, description = "Redrive task id")),
    responses(
        (status = 200, description = "The task and its progress", body = RedriveTask),
        (status = 404, description = "`redrive_not_found`", body = ErrorResponse),
    )
)]
pub async fn get(State(state): State<AppState>, tenant: Tenant, Path(id): Path<String>) -> JsonResult<RedriveTask> {
    own_task(&state, &tenant, &id).map(|t| axum::Json(task_view(&tenant, &t))).ok_or_else(|| not_found(&id))
}

#[utoipa::path(
    delete, path = "/v1/redrives/{id}", tag = "redrive",
    params(("id" = String, Path, description = "Redrive task id")),
    responses(
        (status = 200, description = "The task, cancelled (or as it finished); it stops before its next step", body = RedriveTask),
        (status = 404, description = "`redrive_not_found`", body = ErrorResponse),
    )
)]
pub async fn cancel(State(state): State<AppState>, tenant: Tenant, Path(id): Path<String>) -> JsonResult<RedriveTask> {
    own_task(&state, &tenant, &id)
        .and_then(|t| state.redrives().cancel(t.id))
        .map(|t| axum::Json(task_view(&tenant, &t)))
        .ok_or_else(|| not_found(&id))
}
