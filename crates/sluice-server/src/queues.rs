//! Queue resource handlers: create, list, get, update, delete, purge (`/v1/queues...`).

use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use sluice_api::{CreateQueueRequest, ErrorResponse, PurgeResponse, Queue, QueueList, UpdateQueueRequest};
use sluice_core::limits::{LIST_QUEUES_LIMIT_DEFAULT, LIST_QUEUES_LIMIT_MAX};
use utoipa::IntoParams;

use crate::AppState;
use crate::convert;
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::paging::PageRequest;
use crate::tenant::Tenant;

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

#[utoipa::path(
    post, path = "/v1/queues", tag = "queues",
    request_body = CreateQueueRequest,
    responses(
        (status = 201, description = "The queue was created", body = Queue),
        (status = 200, description = "A queue with these attributes already exists", body = Queue),
        (status = 400, description = "An attribute breaks a rule", body = ErrorResponse),
        (status = 409, description = "The queue exists with different attributes (`queue_exists`)", body = ErrorResponse),
    )
)]
pub async fn create_queue(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(mut request): Json<CreateQueueRequest>,
) -> Result<(StatusCode, axum::Json<Queue>), ApiError> {
    request.name = tenant.name("name", &request.name)?;
    if let Some(dead_letter) = &mut request.dead_letter {
        dead_letter.queue = tenant.name("dead_letter.queue", &dead_letter.queue)?;
    }
    let (name, attributes) = convert::create_attributes(request);
    if !tenant.0.is_default() && state.store().get_queue(&name).await.is_err() {
        state.services.tenants().check_create(&tenant.0).await?;
    }
    let (view, created) = state.store().create_queue(&name, attributes).await?;
    state.services.schemas().forget_queue(&name);
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, axum::Json(tenant.queue(&view))))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQueuesParams {
    /// Only queues whose names start with this.
    prefix: Option<String>,
    /// Most queues per page (1 to 1000, default 100).
    limit: Option<u32>,
    /// The `next_token` of the previous page.
    next_token: Option<String>,
}

#[utoipa::path(
    get, path = "/v1/queues", tag = "queues",
    params(ListQueuesParams),
    responses(
        (status = 200, description = "A page of queues in name order", body = QueueList),
        (status = 400, description = "Bad limit or next_token", body = ErrorResponse),
    )
)]
pub async fn list_queues(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(params): Query<ListQueuesParams>,
) -> JsonResult<QueueList> {
    let page = PageRequest::read(
        params.limit,
        params.next_token.as_deref(),
        LIST_QUEUES_LIMIT_DEFAULT,
        LIST_QUEUES_LIMIT_MAX as usize,
    )?;
    let prefix = tenant.name("prefix", &params.prefix.unwrap_or_default())?;
    let after = page.after.as_deref().map(|a| tenant.name("next_token", a)).transpose()?;
    let mut views = tenant.list_queues(state.store().as_ref(), &prefix, after, page.fetch_count()).await?;
    let next_token = page.cut(&mut views, |v| tenant.show(&v.name));
    Ok(axum::Json(QueueList { queues: views.iter().map(|v| tenant.queue(v)).collect(), next_token }))
}

#[utoipa::path(
    get, path = "/v1/queues/{name}", tag = "queues",
    params(("name" = String, Path, description = "Queue name")),
    responses(
        (status = 200, description = "Attributes and live counts", body = Queue),
        (status = 404, description = "`queue_not_found`", body = ErrorResponse),
    )
)]
pub async fn get_queue(State(state): State<AppState>, tenant: Tenant, Path(name): Path<String>) -> JsonResult<Queue> {
    let view = state.store().get_queue(&tenant.name("name", &name)?).await?;
    Ok(axum::Json(tenant.queue(&view)))
}

#[utoipa::path(
    patch, path = "/v1/queues/{name}", tag = "queues",
    params(("name" = String, Path, description = "Queue name")),
    request_body = UpdateQueueRequest,
    responses(
        (status = 200, description = "The queue after the update", body = Queue),
        (status = 400, description = "An attribute breaks a rule", body = ErrorResponse),
        (status = 404, description = "`queue_not_found`", body = ErrorResponse),
    )
)]
pub async fn update_queue(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    Json(mut request): Json<UpdateQueueRequest>,
) -> JsonResult<Queue> {
    let name = tenant.name("name", &name)?;
    if let Some(Some(dead_letter)) = &mut request.dead_letter {
        dead_letter.queue = tenant.name("dead_letter.queue", &dead_letter.queue)?;
    }
    let view = state.store().update_queue(&name, convert::patch(request)).await?;
    state.services.schemas().forget_queue(&name);
    Ok(axum::Json(tenant.queue(&view)))
}

#[utoipa::path(
    delete, path = "/v1/queues/{name}", tag = "queues",
    params(("name" = String, Path, description = "Queue name")),
    responses(
        (status = 204, description = "The queue and its messages are gone"),
        (status = 404, description = "`queue_not_found`", body = ErrorResponse),
    )
)]
pub async fn delete_queue(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let name = tenant.name("name", &name)?;
    state.store().delete_queue(&name).await?;
    state.services.schemas().forget_queue(&name);
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post, path = "/v1/queues/{name}/purge", tag = "queues",
    params(("name" = String, Path, description = "Queue name")),
    responses(
        (status = 200, description = "How many messages were deleted", body = PurgeResponse),
        (status = 404, description = "`queue_not_found`", body = ErrorResponse),
    )
)]
pub async fn purge_queue(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> JsonResult<PurgeResponse> {
    let purged = state.store().purge_queue(&tenant.name("name", &name)?).await?;
    Ok(axum::Json(PurgeResponse { purged }))
}
