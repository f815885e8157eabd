//! Relay handlers (`/v1/relays...`): create, list, get, pause, resume and delete outbox
//! relays, and their figures at `/metrics`. They translate the native API's fields into the
//! relays service's (`sluice_services::relays`), which holds every rule; source URLs leave
//! here only with their passwords masked.
//!
//! Relays live in tenants' namespaces: a relay's name, its target and its dead-letter queue are
//! qualified with the caller's tenant and shown back in its names; lists hold the tenant's own,
//! and another tenant's relay answers `relay_not_found` as if absent. A relay routing by a
//! column publishes into its own tenant (`sluice_services::relays`, `target.rs`).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use metrics_exporter_prometheus::PrometheusBuilder;
use serde::Deserialize;
use sluice_api::{
    AfterPublish, CreateRelayRequest, ErrorCode, ErrorResponse, Relay, RelayColumns, RelayList, RelayStatus,
    RelayTarget,
};
use sluice_services::relays::limits::{RELAY_BATCH_MAX_DEFAULT, RELAY_POLL_MS_DEFAULT, RELAYS_MAX};
use sluice_services::relays::{self as service, Columns, RelayError, RelaySpec, RelayView, SourceUrl, Target, redact};
use utoipa::IntoParams;

use crate::AppState;
use crate::convert::rfc3339;
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::paging::PageRequest;
use crate::tenant::Tenant;

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

/// The relay routes, merged into the router by `lib.rs`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/relays", get(list_relays).post(create_relay))
        .route("/v1/relays/{name}", get(get_relay).delete(delete_relay))
        .route("/v1/relays/{name}/pause", post(pause_relay))
        .route("/v1/relays/{name}/resume", post(resume_relay))
}

/// The relay routes' part of the OpenAPI document, merged by `openapi.rs`.
#[derive(utoipa::OpenApi)]
#[openapi(
    paths(create_relay, list_relays, get_relay, pause_relay, resume_relay, delete_relay),
    tags((name = "relays", description = "Outbox relays: publish the rows of an outbox table in the application's own database (PostgreSQL, MySQL/MariaDB, SQLite)"))
)]
pub struct RelaysDoc;

/// The request as the service's configuration, defaults filled in, every name in `tenant`'s
/// namespace.
fn spec(tenant: &Tenant, request: CreateRelayRequest) -> Result<RelaySpec, ApiError> {
    let target = match (request.target.topic, request.target.queue, request.target.stream) {
        (Some(topic), None, None) => Target::Topic(tenant.name("target.topic", &topic)?),
        (None, Some(queue), None) => Target::Queue(tenant.name("target.queue", &queue)?),
        (None, None, Some(stream)) => Target::Stream(tenant.name("target.stream", &stream)?),
        _ => {
            return Err(ApiError::invalid(
                "target",
                "give exactly one of target.topic, target.queue and target.stream",
            ));
        }
    };
    let c = request.columns.unwrap_or_default();
    let d = Columns::default();
    let columns = Columns {
        id: c.id.unwrap_or(d.id),
        aggregate_type: c.aggregate_type.unwrap_or(d.aggregate_type),
        aggregate_id: c.aggregate_id.unwrap_or(d.aggregate_id),
        event_type: c.event_type.unwrap_or(d.event_type),
        payload: c.payload.unwrap_or(d.payload),
        headers: c.headers,
        published_at: c.published_at.unwrap_or(d.published_at),
        position: c.position,
    };
    Ok(RelaySpec {
        name: tenant.name("name", &request.name)?,
        source: request.source,
        table: request.table,
        columns,
        target,
        route_by: request.route_by,
        after_publish: match request.after_publish.unwrap_or_default() {
            AfterPublish::Delete => service::AfterPublish::Delete,
            AfterPublish::Mark => service::AfterPublish::Mark,
        },
        poll_ms: request.poll_ms.unwrap_or(RELAY_POLL_MS_DEFAULT),
        batch_max: request.batch_max.unwrap_or(RELAY_BATCH_MAX_DEFAULT),
        dead_letter_queue: request.dead_letter_queue.map(|q| tenant.name("dead_letter_queue", &q)).transpose()?,
    })
}

/// A relay as `tenant` sees it: its name, target and dead-letter queue in the tenant's names,
/// and its last error without the tenant's prefix.
fn relay(tenant: &Tenant, view: &RelayView, now_ms: u64) -> Relay {
    let s = &view.record.spec;
    let state = &view.state;
    let c = &s.columns;
    Relay {
        name: tenant.show(&s.name),
        source: redact(&s.source),
        source_kind: SourceUrl::parse(&s.source).map(|u| u.kind()).unwrap_or("unknown").to_string(),
        table: s.table.clone(),
        columns: RelayColumns {
            id: Some(c.id.clone()),
            aggregate_type: Some(c.aggregate_type.clone()),
            aggregate_id: Some(c.aggregate_id.clone()),
            event_type: Some(c.event_type.clone()),
            payload: Some(c.payload.clone()),
            headers: c.headers.clone(),
            published_at: Some(c.published_at.clone()),
            position: Some(c.position().to_string()),
        },
        target: match &s.target {
            Target::Topic(t) => RelayTarget { topic: Some(tenant.show(t)), ..Default::default() },
            Target::Queue(q) => RelayTarget { queue: Some(tenant.show(q)), ..Default::default() },
            Target::Stream(st) => RelayTarget { stream: Some(tenant.show(st)), ..Default::default() },
        },
        route_by: s.route_by.clone(),
        after_publish: match s.after_publish {
            service::AfterPublish::Delete => AfterPublish::Delete,
            service::AfterPublish::Mark => AfterPublish::Mark,
        },
        poll_ms: s.poll_ms,
        batch_max: s.batch_max,
        dead_letter_queue: s.dead_letter_queue.as_deref().map(|q| tenant.show(q)),
        paused: view.record.paused,
        status: RelayStatus {
            state: view.status(now_ms).to_string(),
            active_node: view.active_node(now_ms),
            lease_expires_at_ms: state.holder(now_ms).and(state.lease.as_ref()).map(|l| l.expires_at_ms),
            lag_ms: state.lag_ms,
            published: state.published,
            dead_lettered: state.dead_lettered,
            errors: state.errors,
            blocked_rows: state.blocked_rows,
            rows_per_second: state.rows_per_second,
            last_error: state
                .last_error
                .as_deref()
                .map(|e| sluice_services::relays::scrub_error(e, &s.source).replace(&tenant.0.prefix(), "")),
            last_error_at: state.last_error_at_ms.map(rfc3339),
            last_error_at_ms: state.last_error_at_ms,
        },
        created_at: rfc3339(view.record.created_at_ms),
        created_at_ms: view.record.created_at_ms,
    }
}

#[utoipa::path(
    post, path = "/v1/relays", tag = "relays",
    request_body = CreateRelayRequest,
    responses(
        (status = 201, description = "The relay was created and starts relaying", body = Relay),
        (status = 200, description = "A relay with this exact configuration exists", body = Relay),
        (status = 400, description = "A field breaks a rule (`invalid_argument`), the source cannot be reached (`relay_source_unreachable`) or lacks the table or a column (`relay_source_invalid`)", body = ErrorResponse),
        (status = 409, description = "`relay_exists` (another configuration under this name) or `relay_source_in_use` (another relay publishes this table)", body = ErrorResponse),
    )
)]
pub async fn create_relay(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(request): Json<CreateRelayRequest>,
) -> Result<(StatusCode, axum::Json<Relay>), ApiError> {
    let (view, created) = match state.services.create_relay(spec(&tenant, request)?).await {
        // Two relays of one table would publish every row twice, whoever's they are; another
        // tenant's relay is not named.
        Err(RelayError::SourceInUse { relay }) if !tenant.owns(&relay) => {
            return Err(ApiError::new(
                ErrorCode::RelaySourceInUse,
                "a relay of another tenant already publishes this table from this source",
            ));
        }
        made => made?,
    };
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, axum::Json(relay(&tenant, &view, state.now_ms()))))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Most relays per page (1 to 100, default 100).
    limit: Option<u32>,
    /// The `next_token` of the previous page.
    next_token: Option<String>,
}

#[utoipa::path(
    get, path = "/v1/relays", tag = "relays",
    params(ListParams),
    responses(
        (status = 200, description = "A page of relays in name order, each with its status", body = RelayList),
        (status = 400, description = "Bad limit or next_token", body = ErrorResponse),
    )
)]
pub async fn list_relays(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(params): Query<ListParams>,
) -> JsonResult<RelayList> {
    let page = PageRequest::read(params.limit, params.next_token.as_deref(), RELAYS_MAX as u32, RELAYS_MAX)?;
    let after = page.after.as_deref().map(|a| tenant.name("next_token", a)).transpose()?;
    let services = &state.services;
    let fetch = |after: Option<String>, n| async move { services.list_relays(after.as_deref(), n).await };
    let name = |v: &RelayView| (v.record.spec.name.clone(), v.record.spec.name.clone());
    let mut views = tenant.keep_own(after, page.fetch_count(), fetch, name).await?;
    let next_token = page.cut(&mut views, |v| tenant.show(&v.record.spec.name));
    let now = state.now_ms();
    Ok(axum::Json(RelayList { relays: views.iter().map(|v| relay(&tenant, v, now)).collect(), next_token }))
}

#[utoipa::path(
    get, path = "/v1/relays/{name}", tag = "relays",
    params(("name" = String, Path, description = "Relay name")),
    responses(
        (status = 200, description = "The relay with its lag, totals and last error", body = Relay),
        (status = 404, description = "`relay_not_found`", body = ErrorResponse),
    )
)]
pub async fn get_relay(State(state): State<AppState>, tenant: Tenant, Path(name): Path<String>) -> JsonResult<Relay> {
    let name = tenant.name("name", &name)?;
    Ok(axum::Json(relay(&tenant, &state.services.relay(&name).await?, state.now_ms())))
}

#[utoipa::path(
    post, path = "/v1/relays/{name}/pause", tag = "relays",
    params(("name" = String, Path, description = "Relay name")),
    responses(
        (status = 200, description = "Paused: the relay stops after its current poll, on every node", body = Relay),
        (status = 404, description = "`relay_not_found`", body = ErrorResponse),
    )
)]
pub async fn pause_relay(State(state): State<AppState>, tenant: Tenant, Path(name): Path<String>) -> JsonResult<Relay> {
    let name = tenant.name("name", &name)?;
    Ok(axum::Json(relay(&tenant, &state.services.set_relay_paused(&name, true).await?, state.now_ms())))
}

#[utoipa::path(
    post, path = "/v1/relays/{name}/resume", tag = "relays",
    params(("name" = String, Path, description = "Relay name")),
    responses(
        (status = 200, description = "Resumed: a node takes the relay up within a second", body = Relay),
        (status = 404, description = "`relay_not_found`", body = ErrorResponse),
    )
)]
pub async fn resume_relay(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> JsonResult<Relay> {
    let name = tenant.name("name", &name)?;
    Ok(axum::Json(relay(&tenant, &state.services.set_relay_paused(&name, false).await?, state.now_ms())))
}

#[utoipa::path(
    delete, path = "/v1/relays/{name}", tag = "relays",
    params(("name" = String, Path, description = "Relay name")),
    responses(
        (status = 204, description = "The relay is gone; its table is left as it is"),
        (status = 404, description = "`relay_not_found`", body = ErrorResponse),
    )
)]
pub async fn delete_relay(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let name = tenant.name("name", &name)?;
    if state.services.delete_relay(&name).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(RelayError::NotFound(name).into())
    }
}

/// Every relay's figures for `/metrics`, read from the store, so every node shows the same.
pub async fn render_metrics(state: &AppState) -> Result<String, ApiError> {
    let views = state.services.list_relays(None, RELAYS_MAX).await?;
    let now = state.now_ms();
    let recorder = PrometheusBuilder::new().build_recorder();
    metrics::with_local_recorder(&recorder, || {
        metrics::describe_gauge!("sluice_relay_lag_seconds", "How long the oldest unpublished outbox row has waited.");
        metrics::describe_counter!(
            "sluice_relay_rows_published_total",
            "Outbox rows published, then deleted or marked."
        );
        metrics::describe_counter!(
            "sluice_relay_rows_dead_lettered_total",
            "Outbox rows sent to the relay's dead-letter queue."
        );
        metrics::describe_counter!("sluice_relay_errors_total", "Failed polls and refused rows.");
        metrics::describe_gauge!(
            "sluice_relay_blocked_rows",
            "Rows held back behind a row that cannot be published (alert above 0)."
        );
        metrics::describe_gauge!("sluice_relay_rows_per_second", "Rows published per second over the last 10 s.");
        metrics::describe_gauge!(
            "sluice_relay_active",
            "1 while a node holds the relay's lease, 0 when paused or unowned."
        );
        for v in &views {
            // The relay's name within its tenant, and the tenant unless it is the default one.
            let labels = sluice_core::name::resource_labels("relay", &v.record.spec.name);
            let labels = labels.as_slice();
            let s = &v.state;
            metrics::gauge!("sluice_relay_lag_seconds", labels).set(s.lag_ms as f64 / 1000.0);
            metrics::counter!("sluice_relay_rows_published_total", labels).absolute(s.published);
            metrics::counter!("sluice_relay_rows_dead_lettered_total", labels).absolute(s.dead_lettered);
            metrics::counter!("sluice_relay_errors_total", labels).absolute(s.errors);
            metrics::gauge!("sluice_relay_blocked_rows", labels).set(s.blocked_rows as f64);
            metrics::gauge!("sluice_relay_rows_per_second", labels).set(s.rows_per_second);
            let active = if v.status(now) == "active" { 1.0 } else { 0.0 };
            metrics::gauge!("sluice_relay_active", labels).set(active);
        }
    });
    Ok(recorder.handle().render())
}
