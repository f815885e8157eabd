//! Job handlers (`/v1/jobs...`): enqueue (`202 Accepted` + `Location`), get (with a long poll
//! until the job finishes), list, cancel, and the worker calls (claim, heartbeat, complete,
//! fail). Every rule is the store's, reached through the jobs service
//! (`sluice_services::jobs`); wire mapping is in `convert.rs`.

pub(crate) mod convert;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use sluice_api::{
    CallbackSecret, ClaimJobsRequest, ClaimJobsResponse, ClaimedJob, CompleteJobRequest, EnqueueJobRequest, ErrorCode,
    ErrorResponse, FailJobRequest, HeartbeatRequest, HeartbeatResponse, Job, JobList, JobStatsList,
};
use sluice_core::jobs::limits::{
    JOB_LEASE_MS_DEFAULT, JOB_LIST_LIMIT_DEFAULT, JOB_LIST_LIMIT_MAX, JOB_UNIQUE_FOR_MS_MAX,
};
use sluice_core::jobs::{ClaimSpec, JobFilter, JobId, JobStatus, validate_tag};
use sluice_services::jobs::Jobs;
use sluice_services::trace::TraceKind;
use sluice_store::JobListRequest;
use utoipa::{IntoParams, OpenApi};

use crate::AppState;
use crate::convert::rfc3339;
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::paging::{PageRequest, encode_page_token};
use crate::tenant::Tenant;

pub use convert::webhook_body;

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

/// Every job route.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/jobs", post(enqueue).get(list))
        .route("/v1/jobs/claim", post(claim))
        .route("/v1/jobs/callback-secret", get(callback_secret))
        .route("/v1/jobs/stats", get(stats))
        .route("/v1/jobs/{id}", get(get_job))
        .route("/v1/jobs/{id}/cancel", post(cancel))
        .route("/v1/jobs/{id}/heartbeat", post(heartbeat))
        .route("/v1/jobs/{id}/complete", post(complete))
        .route("/v1/jobs/{id}/fail", post(fail))
}

#[derive(OpenApi)]
#[openapi(
    paths(enqueue, list, get_job, cancel, claim, heartbeat, complete, fail, callback_secret, stats),
    components(schemas(sluice_api::JobBackoff)),
    tags((name = "jobs", description = "Async jobs: enqueue and get a job id at once (202), poll or wait for the result or get a webhook; workers claim, heartbeat, complete and fail"))
)]
pub struct JobsDoc;

fn jobs(state: &AppState) -> &Jobs {
    state.services.jobs()
}

/// A job id from a path: anything that is not one names no job.
fn job_id(text: &str) -> Result<JobId, ApiError> {
    text.parse().map_err(|_| {
        ApiError::new(ErrorCode::JobNotFound, format!("no job has id {text:?}"))
            .with_details(serde_json::json!({ "job": text }))
    })
}

#[utoipa::path(
    post, path = "/v1/jobs", tag = "jobs",
    request_body = EnqueueJobRequest,
    responses(
        (status = 202, description = "Enqueued: `Location: /v1/jobs/{id}`; `status` is `queued`", body = Job),
        (status = 200, description = "The unique key is held within its window: the existing job, nothing enqueued", body = Job),
        (status = 400, description = "A field breaks a rule (`invalid_argument`, `details.field`), or the payload breaks its type's schema while a queue of the job queue's name has `schema_validation` (`schema_validation_failed`, `details.pointer`)", body = ErrorResponse),
        (status = 413, description = "The body is too large", body = ErrorResponse),
        (status = 429, description = "`rate_limited`: a queue of the job queue's name has a `rate_limit` and its bucket for enqueues (`job_queue:NAME`) is empty (`Retry-After`)", body = ErrorResponse),
    )
)]
pub async fn enqueue(
    State(state): State<AppState>,
    tenant: Tenant,
    ticket: Option<axum::Extension<sluice_services::idempotency::Ticket>>,
    Json(mut request): Json<EnqueueJobRequest>,
) -> Result<Response, ApiError> {
    request.queue = tenant.name("queue", &request.queue)?;
    // Job queues have no attributes of their own: a Sluice queue of the same name with
    // schema_validation has its jobs' payloads checked against their type's latest schema,
    // and its rate_limit limits the enqueues (a bucket of their own, `job_queue:NAME`).
    if let Some(url) = &request.callback_url {
        state.push().egress().check_url(url).map_err(|e| ApiError::invalid("callback_url", e.to_string()))?;
    }
    let schemas = state.services.schemas();
    let door = schemas.queue_door(&request.queue).await?;
    if door.schema_validation
        && let Err(violation) = schemas.check_value(&tenant.0, Some(&request.job_type), None, &request.payload).await?
    {
        return Err(crate::error::violation_error(&violation));
    }
    let links = convert::trace_links(&request)?;
    let mut job = convert::new_job(request)?;
    state.services.tenants().check_write(&tenant.0, job.payload.len() as u64).await?;
    if let Some(axum::Extension(ticket)) = ticket
        && job.unique_key.is_none()
    {
        // Under an Idempotency-Key, a job without a unique key of its own gets one named
        // after the request, held as long as the key: an attempt that runs again after a
        // crash between the enqueue and its stored answer finds the first attempt's job and
        // answers it (`200`) instead of enqueueing a second.
        job.unique_key = Some(ticket.job_unique_key());
        job.unique_for_ms = Some(ticket.kept_for_ms().clamp(1, JOB_UNIQUE_FOR_MS_MAX));
    }
    // A job's priority is its band while the server sheds.
    let resource = format!("job_queue:{}", job.queue);
    crate::shed::admit(&state, &resource, job.priority)?;
    if let Some(limit) = door.rate_limit {
        let admitted = sluice_services::rate_limits::admit(&**state.store(), &resource, limit, 1).await?;
        if admitted.granted == 0 {
            return Err(crate::error::rate_limited("the job queue's", admitted.retry_after_ms));
        }
    }
    let enqueued = jobs(&state).enqueue(job).await?;
    if let Some(links) = links.filter(|_| enqueued.created) {
        let entry = links.entry(
            TraceKind::Job,
            enqueued.view.record.id.to_string(),
            format!("job:{}", enqueued.view.record.queue),
        );
        state.services.traces().record(vec![entry]).await;
    }
    let body = tenant.job(convert::job(&enqueued.view));
    let location = format!("/v1/jobs/{}", body.id);
    let status = if enqueued.created { StatusCode::ACCEPTED } else { StatusCode::OK };
    Ok(crate::convert::with_location((status, axum::Json(body)).into_response(), &location))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GetJobParams {
    /// Wait up to this long (at most 20000) for the job to finish; answers at once if it has.
    wait_ms: Option<u64>,
}

#[utoipa::path(
    get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "The job id"), GetJobParams),
    responses(
        (status = 200, description = "The job, with its payload, progress, result and last error", body = Job),
        (status = 404, description = "`job_not_found` (never existed, or pruned after `result_ttl_ms`)", body = ErrorResponse),
    )
)]
pub async fn get_job(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<String>,
    Query(params): Query<GetJobParams>,
) -> JsonResult<Job> {
    let id = own_job(&state, &tenant, &id).await?;
    let view = jobs(&state).get(id, params.wait_ms.unwrap_or(0)).await?;
    Ok(axum::Json(tenant.job(convert::job(&view))))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListJobsParams {
    /// Only jobs of this queue.
    queue: Option<String>,
    /// Only jobs with this status.
    status: Option<String>,
    /// Only jobs of this type.
    #[serde(rename = "type")]
    #[param(rename = "type")]
    job_type: Option<String>,
    /// Only jobs with this tag.
    tag: Option<String>,
    /// Most jobs per page (1 to 1000, default 100).
    limit: Option<u32>,
    /// The `next_token` of the previous page.
    next_token: Option<String>,
}

#[utoipa::path(
    get, path = "/v1/jobs", tag = "jobs",
    params(ListJobsParams),
    responses(
        (status = 200, description = "A page of jobs in creation order, without payloads and results; a page may be short (even empty) and still have a `next_token` when filters match few jobs", body = JobList),
        (status = 400, description = "A bad filter, limit or next_token", body = ErrorResponse),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(params): Query<ListJobsParams>,
) -> JsonResult<JobList> {
    let page = PageRequest::read(
        params.limit,
        params.next_token.as_deref(),
        JOB_LIST_LIMIT_DEFAULT,
        JOB_LIST_LIMIT_MAX as usize,
    )?;
    let after = page
        .after
        .as_deref()
        .map(|text| {
            text.parse::<JobId>()
                .map_err(|_| ApiError::invalid("next_token", "next_token is not one this server returned"))
        })
        .transpose()?;
    let status = params
        .status
        .as_deref()
        .map(|s| {
            JobStatus::parse(s).ok_or_else(|| {
                ApiError::invalid(
                    "status",
                    format!("{s:?} is not queued, running, succeeded, failed, dead or cancelled"),
                )
            })
        })
        .transpose()?;
    if let Some(tag) = &params.tag {
        validate_tag(tag, "tag")?;
    }
    let queue = params.queue.map(|q| tenant.name("queue", &q)).transpose()?;
    let filter = JobFilter { queue, status, job_type: params.job_type };
    let request = JobListRequest { filter, tag: params.tag, after, limit: page.fetch_count() };
    let result = jobs(&state).list(request).await?;
    let mut views = result.jobs;
    let mut next_token = page.cut(&mut views, |v| v.record.id.to_string());
    if next_token.is_none() {
        next_token = result.resume_after.map(|id| encode_page_token(&id.to_string()));
    }
    // Jobs of every tenant share one order: another tenant's are left out of the page, which
    // may then be short (as with any filter) and still have a `next_token`.
    views.retain(|v| tenant.owns(&v.record.queue));
    Ok(axum::Json(JobList { jobs: views.iter().map(|v| tenant.job(convert::job(v))).collect(), next_token }))
}

/// The id of a job of the caller's tenant: another tenant's is `job_not_found`, as if absent.
/// (Calls that carry a lease need no such check: only the claim, which is the tenant's own,
/// hands the lease out.)
async fn own_job(state: &AppState, tenant: &Tenant, id: &str) -> Result<JobId, ApiError> {
    let job = job_id(id)?;
    let view = jobs(state).get(job, 0).await?;
    if tenant.owns(&view.record.queue) {
        Ok(job)
    } else {
        Err(ApiError::from(sluice_store::StoreError::from(sluice_core::jobs::JobError::NotFound(job))))
    }
}

#[utoipa::path(
    post, path = "/v1/jobs/{id}/cancel", tag = "jobs",
    params(("id" = String, Path, description = "The job id")),
    responses(
        (status = 200, description = "A waiting job is `cancelled` at once; a running one has `cancel_requested` set, which its worker sees on its next heartbeat", body = Job),
        (status = 404, description = "`job_not_found`", body = ErrorResponse),
        (status = 409, description = "`job_finished`: it succeeded or is dead", body = ErrorResponse),
    )
)]
pub async fn cancel(State(state): State<AppState>, tenant: Tenant, Path(id): Path<String>) -> JsonResult<Job> {
    let id = own_job(&state, &tenant, &id).await?;
    let view = jobs(&state).cancel(id).await?;
    Ok(axum::Json(tenant.job(convert::job(&view))))
}

#[utoipa::path(
    post, path = "/v1/jobs/claim", tag = "jobs",
    request_body = ClaimJobsRequest,
    responses(
        (status = 200, description = "Claimed jobs, each with its payload and `lease`: highest priority first, then the longest claimable, across the queues (empty after `wait_ms`)", body = ClaimJobsResponse),
        (status = 400, description = "`invalid_argument`", body = ErrorResponse),
    )
)]
pub async fn claim(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(request): Json<ClaimJobsRequest>,
) -> JsonResult<ClaimJobsResponse> {
    let queues = request.queues.iter().map(|q| tenant.name("queues", q)).collect::<Result<_, _>>()?;
    let spec = ClaimSpec {
        queues,
        types: request.types,
        max: request.max.unwrap_or(1),
        lease_ms: request.lease_ms.unwrap_or(JOB_LEASE_MS_DEFAULT),
    };
    let claimed = jobs(&state).claim(spec, request.wait_ms.unwrap_or(0)).await?;
    let jobs =
        claimed.iter().map(|c| ClaimedJob { lease: c.lease.clone(), job: tenant.job(convert::job(&c.view)) }).collect();
    Ok(axum::Json(ClaimJobsResponse { jobs }))
}

#[utoipa::path(
    post, path = "/v1/jobs/{id}/heartbeat", tag = "jobs",
    params(("id" = String, Path, description = "The job id")),
    request_body = HeartbeatRequest,
    responses(
        (status = 200, description = "The lease is extended; `cancel_requested` says whether to stop", body = HeartbeatResponse),
        (status = 404, description = "`job_not_found`", body = ErrorResponse),
        (status = 409, description = "`stale_lease`: the attempt is over (lapsed, completed, failed); stop working on it", body = ErrorResponse),
    )
)]
pub async fn heartbeat(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Json(request): Json<HeartbeatRequest>,
) -> JsonResult<HeartbeatResponse> {
    let progress = request.progress.as_ref().map(convert::json_text);
    let answer = jobs(&state).heartbeat(job_id(&id)?, &request.lease, progress, request.lease_ms).await?;
    Ok(axum::Json(HeartbeatResponse {
        cancel_requested: answer.cancel_requested,
        lease_expires_at: rfc3339(answer.lease_expires_at),
        lease_expires_at_ms: answer.lease_expires_at,
    }))
}

#[utoipa::path(
    post, path = "/v1/jobs/{id}/complete", tag = "jobs",
    params(("id" = String, Path, description = "The job id")),
    request_body = CompleteJobRequest,
    responses(
        (status = 200, description = "The job `succeeded` with this result", body = Job),
        (status = 404, description = "`job_not_found`", body = ErrorResponse),
        (status = 409, description = "`stale_lease`: the attempt is over; the result was not kept", body = ErrorResponse),
    )
)]
pub async fn complete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<String>,
    Json(request): Json<CompleteJobRequest>,
) -> JsonResult<Job> {
    let result = convert::json_text(&request.result);
    let view = jobs(&state).complete(job_id(&id)?, &request.lease, result).await?;
    Ok(axum::Json(tenant.job(convert::job(&view))))
}

#[utoipa::path(
    post, path = "/v1/jobs/{id}/fail", tag = "jobs",
    params(("id" = String, Path, description = "The job id")),
    request_body = FailJobRequest,
    responses(
        (status = 200, description = "`failed` (retried after its backoff), `dead` (last attempt, or `retry: false`) or `cancelled` (a cancel was asked)", body = Job),
        (status = 404, description = "`job_not_found`", body = ErrorResponse),
        (status = 409, description = "`stale_lease`: the attempt is over", body = ErrorResponse),
    )
)]
pub async fn fail(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<String>,
    Json(request): Json<FailJobRequest>,
) -> JsonResult<Job> {
    let error = request.error.unwrap_or_else(|| "failed".to_string());
    let view = jobs(&state).fail(job_id(&id)?, &request.lease, error, request.retry.unwrap_or(true)).await?;
    Ok(axum::Json(tenant.job(convert::job(&view))))
}

#[utoipa::path(
    get, path = "/v1/jobs/callback-secret", tag = "jobs",
    responses((status = 200, description = "The secret every node signs completion webhooks with", body = CallbackSecret))
)]
pub async fn callback_secret(State(state): State<AppState>) -> JsonResult<CallbackSecret> {
    Ok(axum::Json(CallbackSecret { secret: jobs(&state).callback_secret().await? }))
}

#[utoipa::path(
    get, path = "/v1/jobs/stats", tag = "jobs",
    responses((status = 200, description = "Every job queue that holds jobs, by name, with its jobs counted by status: one call however many jobs there are", body = JobStatsList))
)]
pub async fn stats(State(state): State<AppState>, tenant: Tenant) -> JsonResult<JobStatsList> {
    let stats = jobs(&state).stats().await?;
    let mine = stats.iter().filter(|s| tenant.owns(&s.queue));
    let mut queues: Vec<_> = mine
        .map(convert::queue_stats)
        .map(|mut q| {
            q.queue = tenant.show(&q.queue);
            q
        })
        .collect();
    queues.sort_by(|a, b| a.queue.cmp(&b.queue));
    Ok(axum::Json(JobStatsList { queues }))
}
