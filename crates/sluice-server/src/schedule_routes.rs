//! `/v1/schedules`: create, list, inspect, pause, resume and delete recurring sends. The
//! schedules themselves, and the loop that fires them, are in `sluice_services::schedules`.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;
use sluice_api as api;
use sluice_api::{ErrorCode, ErrorResponse};
use sluice_core::ValidationError;
use sluice_core::message::MessageContent;
use sluice_services::schedules::{self as schedules, Definition, JobTarget, ScheduleError, ScheduleView, Target};
use utoipa::{IntoParams, OpenApi};

use crate::AppState;
use crate::convert::{self, parse_rfc3339, rfc3339};
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::paging::PageRequest;
use crate::tenant::Tenant;
use crate::topic_routes::origin;

/// Schedules per page of a list: default and most.
const LIST_LIMIT_DEFAULT: u32 = 100;
const LIST_LIMIT_MAX: usize = 1_000;

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/schedules", get(list).post(create))
        .route("/v1/schedules/{name}", get(get_one).delete(delete))
        .route("/v1/schedules/{name}/pause", post(pause))
        .route("/v1/schedules/{name}/resume", post(resume))
}

#[derive(OpenApi)]
#[openapi(
    paths(create, list, get_one, delete, pause, resume),
    tags((name = "schedules", description = "Recurring sends into a queue, a topic, a stream or a job queue (cron or fixed interval), each tick fired once"))
)]
pub struct ScheduleDoc;

impl From<ScheduleError> for ApiError {
    fn from(e: ScheduleError) -> ApiError {
        let message = e.to_string();
        match e {
            ScheduleError::NotFound(name) => {
                ApiError::new(ErrorCode::ScheduleNotFound, message).with_details(json!({ "schedule": name }))
            }
            ScheduleError::Exists(name) => {
                ApiError::new(ErrorCode::ScheduleExists, message).with_details(json!({ "schedule": name }))
            }
            ScheduleError::Invalid(v) => v.into(),
            ScheduleError::TooMany => ApiError::new(ErrorCode::LimitExceeded, message),
            ScheduleError::Contended => ApiError::new(ErrorCode::Contended, message),
            ScheduleError::Corrupt(reason) => ApiError::new(ErrorCode::Internal, reason),
            ScheduleError::Topic(t) => t.into(),
            ScheduleError::Store(s) => s.into(),
        }
    }
}

fn invalid(field: &str, message: &str) -> ApiError {
    ApiError::from(ValidationError::new(field, message))
}

/// The definition a create request asks for.
/// The definition a request asks for, its name and target in `tenant`'s namespace.
fn definition(r: api::CreateScheduleRequest, tenant: &Tenant) -> Result<Definition, ApiError> {
    let target = match r.target {
        api::ScheduleTarget { queue: Some(q), topic: None, stream: None, job: None } => {
            Target::Queue(tenant.name("target.queue", &q)?)
        }
        api::ScheduleTarget { queue: None, topic: Some(t), stream: None, job: None } => {
            Target::Topic(tenant.name("target.topic", &t)?)
        }
        api::ScheduleTarget { queue: None, topic: None, stream: Some(s), job: None } => {
            Target::Stream(tenant.name("target.stream", &s)?)
        }
        api::ScheduleTarget { queue: None, topic: None, stream: None, job: Some(j) } => Target::Job(JobTarget {
            queue: tenant.name("target.job.queue", &j.queue)?,
            job_type: j.job_type,
            priority: j.priority,
            timeout_ms: j.timeout_ms,
            max_attempts: j.max_attempts,
        }),
        _ => return Err(invalid("target", "name exactly one of queue, topic, stream or job")),
    };
    for (field, given) in [
        ("message.delay_ms", r.message.delay_ms.is_some()),
        ("message.deliver_at", r.message.deliver_at.is_some()),
        ("message.dedup_id", r.message.dedup_id.is_some()),
    ] {
        if given {
            return Err(invalid(field, "does not apply to a schedule's message (a tick is its own dedup id)"));
        }
    }
    let sent = convert::new_message(r.message).map_err(|mut v| {
        v.field = format!("message.{}", v.field);
        ApiError::from(v)
    })?;
    let message = MessageContent {
        body: sent.body,
        body_binary: sent.body_binary,
        attributes: sent.attributes,
        system_attributes: sent.system_attributes,
        envelope: sent.envelope,
    };
    let time = |field: &str, text: Option<String>| text.map(|t| parse_rfc3339(field, &t)).transpose();
    Ok(Definition {
        name: tenant.name("name", &r.name)?,
        cron: r.cron,
        timezone: r.timezone.unwrap_or_else(|| "UTC".into()),
        every_ms: r.every_ms,
        target,
        message,
        priority: sent.priority,
        catch_up: match r.catch_up {
            api::CatchUp::None => schedules::CatchUp::None,
            api::CatchUp::Latest => schedules::CatchUp::Latest,
            api::CatchUp::All => schedules::CatchUp::All,
        },
        start_at_ms: time("start_at", r.start_at)?,
        end_at_ms: time("end_at", r.end_at)?,
    })
}

/// A schedule as the API shows it.
/// A schedule as `tenant` sees it: its name and target in the tenant's names.
fn view(v: &ScheduleView, tenant: &Tenant) -> api::Schedule {
    let d = &v.record.definition;
    let s = &v.record.state;
    let mut target = api::ScheduleTarget::default();
    match &d.target {
        Target::Queue(q) => target.queue = Some(tenant.show(q)),
        Target::Topic(t) => target.topic = Some(tenant.show(t)),
        Target::Stream(s) => target.stream = Some(tenant.show(s)),
        Target::Job(j) => {
            target.job = Some(api::ScheduleJob {
                queue: tenant.show(&j.queue),
                job_type: j.job_type.clone(),
                priority: j.priority,
                timeout_ms: j.timeout_ms,
                max_attempts: j.max_attempts,
            })
        }
    }
    let status = if s.paused {
        "paused"
    } else if s.next_tick_ms.is_none() {
        "ended"
    } else {
        "active"
    };
    let next = (!s.paused).then_some(s.next_tick_ms).flatten();
    let message = convert::send_message(&d.message, d.priority);
    api::Schedule {
        name: tenant.show(&d.name),
        cron: d.cron.clone(),
        every_ms: d.every_ms,
        timezone: d.timezone.clone(),
        target,
        message,
        catch_up: match d.catch_up {
            schedules::CatchUp::None => api::CatchUp::None,
            schedules::CatchUp::Latest => api::CatchUp::Latest,
            schedules::CatchUp::All => api::CatchUp::All,
        },
        start_at: d.start_at_ms.map(rfc3339),
        end_at: d.end_at_ms.map(rfc3339),
        created_at: rfc3339(v.record.created_at_ms),
        status: status.into(),
        next_fire_at: next.map(rfc3339),
        next_fire_at_ms: next,
        upcoming: v.upcoming_ms.iter().copied().map(rfc3339).collect(),
        fired: s.fired,
        skipped: s.skipped,
        last_tick_at: s.last_tick_ms.map(rfc3339),
        last_fired_at: s.last_fired_at_ms.map(rfc3339),
        last_error: s.last_error.clone(),
        errors: s.errors,
    }
}

#[utoipa::path(
    post, path = "/v1/schedules", tag = "schedules",
    request_body = api::CreateScheduleRequest,
    responses(
        (status = 201, description = "The schedule was created", body = api::Schedule),
        (status = 200, description = "A schedule with this definition already exists", body = api::Schedule),
        (status = 400, description = "`invalid_argument` (cron, timezone, every_ms, target, message, start_at, end_at)", body = ErrorResponse),
        (status = 404, description = "`topic_not_found`: a topic target must exist", body = ErrorResponse),
        (status = 409, description = "`schedule_exists`: the name is taken by another definition", body = ErrorResponse),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    headers: HeaderMap,
    Json(request): Json<api::CreateScheduleRequest>,
) -> Result<(StatusCode, axum::Json<api::Schedule>), ApiError> {
    let definition = definition(request, &tenant)?;
    let (schedule, created) = state.services.schedules().create(definition, &origin(&state, &headers)).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, axum::Json(view(&schedule, &tenant))))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only schedules whose names start with this.
    prefix: Option<String>,
    /// Most schedules per page (1 to 1000, default 100).
    limit: Option<u32>,
    /// The `next_token` of the previous page.
    next_token: Option<String>,
}

#[utoipa::path(
    get, path = "/v1/schedules", tag = "schedules",
    params(ListParams),
    responses(
        (status = 200, description = "A page of schedules in name order", body = api::ScheduleList),
        (status = 400, description = "Bad limit or next_token", body = ErrorResponse),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(params): Query<ListParams>,
) -> JsonResult<api::ScheduleList> {
    let page = PageRequest::read(params.limit, params.next_token.as_deref(), LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX)?;
    let prefix = tenant.name("prefix", &params.prefix.unwrap_or_default())?;
    let after = page.after.as_deref().map(|a| tenant.name("next_token", a)).transpose()?;
    let (schedules, prefix) = (state.services.schedules(), prefix.as_str());
    let fetch = |after: Option<String>, n| async move { schedules.list(prefix, after.as_deref(), n).await };
    let name = |s: &ScheduleView| (s.record.definition.name.clone(), s.record.definition.name.clone());
    let mut found = tenant.keep_own(after, page.fetch_count(), fetch, name).await?;
    let next_token = page.cut(&mut found, |s| tenant.show(&s.record.definition.name));
    Ok(axum::Json(api::ScheduleList { schedules: found.iter().map(|s| view(s, &tenant)).collect(), next_token }))
}

#[utoipa::path(
    get, path = "/v1/schedules/{name}", tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    responses(
        (status = 200, description = "The schedule, its state and its next ticks", body = api::Schedule),
        (status = 404, description = "`schedule_not_found`", body = ErrorResponse),
    )
)]
pub async fn get_one(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> JsonResult<api::Schedule> {
    let name = tenant.name("name", &name)?;
    Ok(axum::Json(view(&state.services.schedules().get(&name).await?, &tenant)))
}

#[utoipa::path(
    delete, path = "/v1/schedules/{name}", tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    responses(
        (status = 204, description = "The schedule is gone; no tick of it fires after this answer"),
        (status = 404, description = "`schedule_not_found`", body = ErrorResponse),
    )
)]
pub async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let name = tenant.name("name", &name)?;
    if state.services.schedules().delete(&name).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ScheduleError::NotFound(name).into())
    }
}

#[utoipa::path(
    post, path = "/v1/schedules/{name}/pause", tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    responses(
        (status = 200, description = "Paused: no tick fires until resumed", body = api::Schedule),
        (status = 404, description = "`schedule_not_found`", body = ErrorResponse),
    )
)]
pub async fn pause(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> JsonResult<api::Schedule> {
    let name = tenant.name("name", &name)?;
    Ok(axum::Json(view(&state.services.schedules().pause(&name).await?, &tenant)))
}

#[utoipa::path(
    post, path = "/v1/schedules/{name}/resume", tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    responses(
        (status = 200, description = "Resumed from the next tick to come (ticks of the pause are not caught up)", body = api::Schedule),
        (status = 404, description = "`schedule_not_found`", body = ErrorResponse),
    )
)]
pub async fn resume(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> JsonResult<api::Schedule> {
    let name = tenant.name("name", &name)?;
    Ok(axum::Json(view(&state.services.schedules().resume(&name).await?, &tenant)))
}
