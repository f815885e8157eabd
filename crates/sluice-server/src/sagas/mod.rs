//! Saga handlers (`/v1/sagas...`, `/v1/replies`): define versions, start instances (`202` +
//! `Location`), watch, list, cancel, retry a failed compensation, and participants' replies to
//! queue steps. Every rule is core's and every write the sagas service's
//! (`sluice_services::sagas`); wire mapping is in `convert.rs`.
//!
//! Sagas live in tenants' namespaces: a definition's name and every queue its steps name are
//! qualified with the caller's tenant, lists hold the tenant's own, and another tenant's
//! instance answers `saga_instance_not_found` as if absent (a reply, `saga_reply_unmatched`).

mod convert;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde::Deserialize;
use sluice_api::ErrorCode;
use sluice_api::{
    DefineSagaRequest, ErrorResponse, Saga, SagaInstance, SagaInstanceList, SagaList, SagaReply, SagaReplyResponse,
    StartSagaRequest,
};
use sluice_core::ValidationError;
use sluice_core::saga::{CallKind, SagaStatus};
use sluice_services::idempotency::{Template, Ticket};
use sluice_services::sagas::{SagaError, Sagas, reply_outcome};
use sluice_store::Conflict;
use utoipa::{IntoParams, OpenApi};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::paging::{PageRequest, encode_page_token};
use crate::tenant::Tenant;

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

/// Instances per list page.
const SAGA_LIST_LIMIT_DEFAULT: u32 = 100;
const SAGA_LIST_LIMIT_MAX: usize = 1_000;

/// Every saga route.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/sagas", get(list))
        .route("/v1/sagas/instances", get(instances))
        .route("/v1/sagas/instances/{id}", get(get_instance))
        .route("/v1/sagas/instances/{id}/cancel", post(cancel))
        .route("/v1/sagas/instances/{id}/retry", post(retry))
        .route("/v1/sagas/{name}", put(define).get(get_saga))
        .route("/v1/sagas/{name}/instances", post(start))
        .route("/v1/replies", post(reply))
}

#[derive(OpenApi)]
#[openapi(
    paths(define, get_saga, list, start, get_instance, instances, cancel, retry, reply),
    components(schemas(sluice_api::SagaCall, sluice_api::SagaHttpCall, sluice_api::SagaQueueCall, sluice_api::SagaRetry, sluice_api::SagaStep, sluice_api::SagaStepState, sluice_api::SagaAttempt)),
    tags((name = "sagas", description = "Sagas: steps with compensations run by the server's orchestrator; a failing step undoes what completed, in reverse order"))
)]
pub struct SagasDoc;

fn sagas(state: &AppState) -> &Sagas {
    state.services.sagas()
}

#[utoipa::path(
    put, path = "/v1/sagas/{name}", tag = "sagas",
    params(("name" = String, Path, description = "The saga's name")),
    request_body = DefineSagaRequest,
    responses(
        (status = 201, description = "A new version; running instances keep the version they started with", body = Saga),
        (status = 200, description = "The same steps as the latest version: that version, nothing new", body = Saga),
        (status = 400, description = "A step breaks a rule (`invalid_argument`, `details.field`): names, one of http/queue, templates naming only the input and earlier steps, retries, timeouts", body = ErrorResponse),
    )
)]
pub async fn define(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    Json(request): Json<DefineSagaRequest>,
) -> Result<Response, ApiError> {
    let name = tenant.name("name", &name)?;
    let steps = convert::steps(&tenant, request.steps)?;
    // A URL with a template in it is checked at each call, once it is filled in.
    for (i, step) in steps.iter().enumerate() {
        for (call, which) in [(Some(&step.action), "action"), (step.compensation.as_ref(), "compensation")] {
            if let Some(sluice_core::saga::StepCall::Http { url, .. }) = call
                && !url.contains("{{")
            {
                let field = format!("steps[{i}].{which}.http.url");
                state.push().egress().check_url(url).map_err(|e| ApiError::invalid(&field, e.to_string()))?;
            }
        }
    }
    let (definition, created) = sagas(&state).define(&name, steps).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, axum::Json(convert::saga(&tenant, &definition))).into_response())
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GetSagaParams {
    /// A version (default the latest).
    version: Option<u32>,
}

#[utoipa::path(
    get, path = "/v1/sagas/{name}", tag = "sagas",
    params(("name" = String, Path, description = "The saga's name"), GetSagaParams),
    responses(
        (status = 200, description = "The definition", body = Saga),
        (status = 404, description = "`saga_not_found`", body = ErrorResponse),
    )
)]
pub async fn get_saga(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    Query(params): Query<GetSagaParams>,
) -> JsonResult<Saga> {
    let name = tenant.name("name", &name)?;
    Ok(axum::Json(convert::saga(&tenant, &*sagas(&state).definition(&name, params.version).await?)))
}

#[utoipa::path(
    get, path = "/v1/sagas", tag = "sagas",
    responses((status = 200, description = "The latest version of every saga of the caller's tenant, by name", body = SagaList))
)]
pub async fn list(State(state): State<AppState>, tenant: Tenant) -> JsonResult<SagaList> {
    let all = sagas(&state).list().await?;
    let mine = all.iter().filter(|d| tenant.owns(&d.name));
    Ok(axum::Json(SagaList { sagas: mine.map(|d| convert::saga(&tenant, d)).collect() }))
}

fn located(status: StatusCode, tenant: &Tenant, instance: &sluice_core::saga::SagaInstance) -> Response {
    let response = (status, axum::Json(convert::instance(tenant, instance))).into_response();
    crate::convert::with_location(response, &format!("/v1/sagas/instances/{}", instance.id))
}

#[utoipa::path(
    post, path = "/v1/sagas/{name}/instances", tag = "sagas",
    params(("name" = String, Path, description = "The saga's name")),
    request_body = StartSagaRequest,
    responses(
        (status = 202, description = "Started on the latest version: `Location: /v1/sagas/instances/{id}`; send an `Idempotency-Key` so a retried start does not start twice", body = SagaInstance),
        (status = 400, description = "The input is over 128 KiB or the correlation id is not 1 to 128 visible ASCII characters", body = ErrorResponse),
        (status = 404, description = "`saga_not_found`", body = ErrorResponse),
        (status = 400, description = "`limit_exceeded`: 10,000 instances are running at once", body = ErrorResponse),
    )
)]
pub async fn start(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    ticket: Option<axum::Extension<Ticket>>,
    Json(request): Json<StartSagaRequest>,
) -> Result<Response, ApiError> {
    let name = tenant.name("name", &name)?;
    let sagas = sagas(&state);
    let instance = sagas.prepare_start(&name, request.input, request.correlation_id).await?;
    let Some(axum::Extension(ticket)) = ticket else {
        sagas
            .commit_start(&instance, Vec::new())
            .await?
            .map_err(|c| ApiError::new(ErrorCode::Internal, c.to_string()))?;
        return Ok(located(StatusCode::ACCEPTED, &tenant, &instance));
    };
    // Under an idempotency key the answer commits with the instance, so that a crash between
    // the two cannot let a retry start a second instance.
    let location = format!("/v1/sagas/instances/{}", instance.id);
    let body = serde_json::to_value(convert::instance(&tenant, &instance))
        .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
    let template =
        Template { status: StatusCode::ACCEPTED.as_u16(), location: Some(location), body, fills: Vec::new() };
    match sagas.commit_start(&instance, ticket.commit_write(template.clone())).await? {
        Ok(()) => crate::idempotency::committed_answer(&template, &[]),
        Err(Conflict::RecordChanged) => Err(crate::idempotency::in_use()),
        Err(Conflict::RecordExists) => Ok(crate::idempotency::claim_lost()),
        Err(other) => Err(ApiError::new(ErrorCode::Internal, format!("the start's commit was refused: {other}"))),
    }
}

#[utoipa::path(
    get, path = "/v1/sagas/instances/{id}", tag = "sagas",
    params(("id" = String, Path, description = "The instance id")),
    responses(
        (status = 200, description = "Its status and each step's attempts, outputs, errors and times", body = SagaInstance),
        (status = 404, description = "`saga_instance_not_found`", body = ErrorResponse),
    )
)]
pub async fn get_instance(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<String>,
) -> JsonResult<SagaInstance> {
    Ok(axum::Json(convert::instance(&tenant, &own_instance(&state, &tenant, &id).await?)))
}

/// An instance of one of the caller's tenant's sagas: another tenant's is
/// `saga_instance_not_found`, as if absent.
async fn own_instance(
    state: &AppState,
    tenant: &Tenant,
    id: &str,
) -> Result<sluice_core::saga::SagaInstance, ApiError> {
    let instance = sagas(state).get(id).await?;
    if tenant.owns(&instance.saga) { Ok(instance) } else { Err(SagaError::InstanceNotFound(id.to_owned()).into()) }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListInstancesParams {
    /// Only instances of this saga.
    saga: Option<String>,
    /// Only instances in this status.
    status: Option<String>,
    /// Most instances per page (1 to 1000, default 100).
    limit: Option<u32>,
    next_token: Option<String>,
}

#[utoipa::path(
    get, path = "/v1/sagas/instances", tag = "sagas",
    params(ListInstancesParams),
    responses(
        (status = 200, description = "A page of instances in start order; a page may be short and still have a `next_token` when filters match few", body = SagaInstanceList),
        (status = 400, description = "A bad status, limit or next_token", body = ErrorResponse),
    )
)]
pub async fn instances(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(params): Query<ListInstancesParams>,
) -> JsonResult<SagaInstanceList> {
    let page =
        PageRequest::read(params.limit, params.next_token.as_deref(), SAGA_LIST_LIMIT_DEFAULT, SAGA_LIST_LIMIT_MAX)?;
    let status = params
        .status
        .as_deref()
        .map(|s| {
            SagaStatus::parse(s).ok_or_else(|| {
                ValidationError::new(
                    "status",
                    format!("{s:?} is not running, compensating, completed, compensated or failed"),
                )
            })
        })
        .transpose()?;
    let saga = params.saga.map(|s| tenant.name("saga", &s)).transpose()?;
    let found = sagas(&state).instances(&tenant.0, saga.as_deref(), status, page.after, page.limit).await?;
    Ok(axum::Json(SagaInstanceList {
        instances: found.instances.iter().map(|i| convert::instance(&tenant, i)).collect(),
        next_token: found.next_after.as_deref().map(encode_page_token),
    }))
}

#[utoipa::path(
    post, path = "/v1/sagas/instances/{id}/cancel", tag = "sagas",
    params(("id" = String, Path, description = "The instance id")),
    responses(
        (status = 200, description = "`cancel_requested`: what completed is compensated in reverse order, after the answer or deadline of an action in flight", body = SagaInstance),
        (status = 404, description = "`saga_instance_not_found`", body = ErrorResponse),
        (status = 409, description = "`saga_wrong_state`: the instance already settled", body = ErrorResponse),
    )
)]
pub async fn cancel(State(state): State<AppState>, tenant: Tenant, Path(id): Path<String>) -> JsonResult<SagaInstance> {
    own_instance(&state, &tenant, &id).await?;
    Ok(axum::Json(convert::instance(&tenant, &sagas(&state).cancel(&id).await?)))
}

#[utoipa::path(
    post, path = "/v1/sagas/instances/{id}/retry", tag = "sagas",
    params(("id" = String, Path, description = "The instance id")),
    responses(
        (status = 200, description = "A `failed` instance's compensation starts a new round of attempts", body = SagaInstance),
        (status = 404, description = "`saga_instance_not_found`", body = ErrorResponse),
        (status = 409, description = "`saga_wrong_state`: the instance is not `failed`", body = ErrorResponse),
    )
)]
pub async fn retry(State(state): State<AppState>, tenant: Tenant, Path(id): Path<String>) -> JsonResult<SagaInstance> {
    own_instance(&state, &tenant, &id).await?;
    Ok(axum::Json(convert::instance(&tenant, &sagas(&state).retry_compensation(&id).await?)))
}

#[utoipa::path(
    post, path = "/v1/replies", tag = "sagas",
    request_body = SagaReply,
    responses(
        (status = 200, description = "The answer was applied to the instances waiting for it", body = SagaReplyResponse),
        (status = 404, description = "`saga_reply_unmatched`: nothing of the caller's tenant waits for this step's answer (late, duplicate, the wrong `kind`/`attempt`, or another tenant's instance)", body = ErrorResponse),
    )
)]
pub async fn reply(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(request): Json<SagaReply>,
) -> JsonResult<SagaReplyResponse> {
    let kind = match request.kind.as_deref() {
        None => CallKind::Action,
        Some(k) => CallKind::parse(k)
            .ok_or_else(|| ValidationError::new("kind", format!("{k:?} is not `action` or `compensation`")))?,
    };
    let outcome = reply_outcome(request.ok, request.output, request.error, request.retry);
    let sagas = sagas(&state);
    let applied =
        sagas.reply(&tenant.0, &request.correlation_id, &request.step, Some(kind), request.attempt, outcome).await?;
    Ok(axum::Json(SagaReplyResponse { applied }))
}
