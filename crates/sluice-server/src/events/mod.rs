//! Event store handlers (`/v1/events...`): appends with an expected version, reads of a stream
//! and of `$all`, soft and hard deletes, snapshots, and catch-up subscriptions
//! (`subscriptions.rs`). They translate wire types (`wire.rs`) and call the store's
//! [`EventStore`](sluice_store::EventStore) or the services' `events`; every rule is core's.

mod subscriptions;
mod wire;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use serde::Deserialize;
use sluice_api::events::{
    AllEventsResponse, AppendEventsRequest, AppendEventsResponse, ExpectedName, ExpectedVersionWire,
    PutSnapshotRequest, SnapshotResponse, SnapshotWire, StreamEventsResponse,
};
use sluice_api::{ErrorCode, ErrorResponse};
use sluice_core::ValidationError;
use sluice_core::events::limits::{EVENT_READ_DEFAULT, EVENTS_PER_APPEND_MAX};
use sluice_core::events::{EventFilter, ExpectedVersion, NewEvent};
use sluice_services::trace::{TraceEntry, TraceKind};
use sluice_store::{AllRead, Direction, EventError, StreamRead};
use utoipa::{IntoParams, OpenApi};

use crate::AppState;
use crate::convert::rfc3339;
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};
use crate::tenant::Tenant;

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

/// Every event store route.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/events/streams/{stream_id}", post(append).get(read_stream).delete(delete_stream))
        .route("/v1/events/streams/{stream_id}/snapshot", get(get_snapshot).put(put_snapshot))
        .route("/v1/events/all", get(read_all))
        .route("/v1/events/subscriptions", get(subscriptions::list).post(subscriptions::create))
        .route("/v1/events/subscriptions/{name}", get(subscriptions::get).delete(subscriptions::delete))
        .route("/v1/events/subscriptions/{name}/fetch", post(subscriptions::fetch))
        .route("/v1/events/subscriptions/{name}/checkpoint", post(subscriptions::checkpoint))
}

/// The OpenAPI paths of the event store, merged into the server's document.
#[derive(OpenApi)]
#[openapi(
    paths(
        append, read_stream, delete_stream, put_snapshot, get_snapshot, read_all,
        subscriptions::create, subscriptions::list, subscriptions::get, subscriptions::delete,
        subscriptions::fetch, subscriptions::checkpoint,
    ),
    tags((name = "events", description = "Event store: expected-version appends, one global order ($all), catch-up subscriptions, snapshots"))
)]
pub struct EventsDoc;

fn expected(e: ExpectedVersionWire) -> ExpectedVersion {
    match e {
        ExpectedVersionWire::Version(v) => ExpectedVersion::Exact(v),
        ExpectedVersionWire::Named(ExpectedName::Any) => ExpectedVersion::Any,
        ExpectedVersionWire::Named(ExpectedName::NoStream) => ExpectedVersion::NoStream,
        ExpectedVersionWire::Named(ExpectedName::Exists) => ExpectedVersion::Exists,
    }
}

#[utoipa::path(
    post, path = "/v1/events/streams/{stream_id}", tag = "events",
    params(("stream_id" = String, Path, description = "The stream (one per aggregate, e.g. `order-123`)")),
    request_body = AppendEventsRequest,
    responses(
        (status = 200, description = "Appended (or a re-sent append answered from the original): versions and positions, inclusive", body = AppendEventsResponse),
        (status = 400, description = "`invalid_argument`, `empty_batch`, `batch_too_large`, `invalid_json`", body = ErrorResponse),
        (status = 409, description = "`wrong_expected_version` (`details.actual_version`), `event_id_conflict`; nothing appended", body = ErrorResponse),
        (status = 410, description = "`event_stream_deleted`: the stream was hard-deleted", body = ErrorResponse),
    )
)]
pub async fn append(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(stream_id): Path<String>,
    ticket: Option<axum::Extension<sluice_services::idempotency::Ticket>>,
    Json(request): Json<AppendEventsRequest>,
) -> JsonResult<AppendEventsResponse> {
    let stream_id = tenant.name("stream_id", &stream_id)?;
    let count = request.events.len();
    if count == 0 {
        return Err(ApiError::new(
            ErrorCode::EmptyBatch,
            format!("events is empty; send 1 to {EVENTS_PER_APPEND_MAX}"),
        )
        .with_details(serde_json::json!({ "field": "events" })));
    }
    if count > EVENTS_PER_APPEND_MAX {
        return Err(ApiError::new(
            ErrorCode::BatchTooLarge,
            format!("{count} events; an append holds at most {EVENTS_PER_APPEND_MAX}"),
        )
        .with_details(serde_json::json!({ "field": "events" })));
    }
    let events: Vec<NewEvent> = request
        .events
        .into_iter()
        .enumerate()
        .map(|(n, e)| NewEvent {
            // Under an Idempotency-Key, an event without an id gets one named after the
            // request: an attempt that runs again after a crash between the append and its
            // stored answer is then a re-sent append, answered from the first.
            id: e.id.unwrap_or_else(|| match &ticket {
                Some(axum::Extension(ticket)) => ticket.effect_id(n).to_string(),
                None => uuid::Uuid::now_v7().to_string(),
            }),
            r#type: e.r#type,
            data: e.data.to_string(),
            metadata: e.metadata.map(|m| m.to_string()),
            correlation_id: e.correlation_id,
            causation_id: e.causation_id,
        })
        .collect();
    let bytes = events.iter().map(|e| (e.data.len() + e.metadata.as_ref().map_or(0, String::len)) as u64).sum();
    state.services.tenants().check_write(&tenant.0, bytes).await?;
    let target = format!("events:{stream_id}");
    let traced: Vec<TraceEntry> = events
        .iter()
        .filter_map(|e| {
            let entry = TraceEntry::new(TraceKind::Event, &e.id, e.correlation_id.as_deref()?, &target);
            Some(entry.caused_by(e.causation_id.as_deref()).detail(Some(&e.r#type)))
        })
        .collect();
    let outcome = state.store().append_events(&stream_id, expected(request.expected_version), events).await;
    let label = match &outcome {
        Ok(a) if a.duplicate => "duplicate",
        Ok(_) => "appended",
        Err(EventError::Append(sluice_core::events::AppendError::WrongExpectedVersion { .. })) => {
            "wrong_expected_version"
        }
        Err(_) => "refused",
    };
    metrics::counter!("sluice_event_appends_total", "outcome" => label).increment(1);
    let a = outcome?;
    if !a.duplicate {
        metrics::counter!("sluice_events_appended_total").increment(a.last_version - a.first_version + 1);
        state.services.traces().record(traced).await;
    }
    Ok(axum::Json(AppendEventsResponse {
        first_version: a.first_version,
        last_version: a.last_version,
        first_position: a.first_position,
        last_position: a.last_position,
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StreamParams {
    /// Inclusive; default the first visible version (forward) or the last (backward).
    from_version: Option<u64>,
    /// `forward` (default) or `backward`.
    direction: Option<String>,
    /// 1 to 1,000 (default 100).
    max: Option<u32>,
}

#[utoipa::path(
    get, path = "/v1/events/streams/{stream_id}", tag = "events",
    params(("stream_id" = String, Path, description = "The stream"), StreamParams),
    responses(
        (status = 200, description = "The stream's events, with its first and last visible version", body = StreamEventsResponse),
        (status = 404, description = "`event_stream_not_found` (never written, or deleted)", body = ErrorResponse),
    )
)]
pub async fn read_stream(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(stream_id): Path<String>,
    Query(params): Query<StreamParams>,
) -> JsonResult<StreamEventsResponse> {
    let stored = tenant.name("stream_id", &stream_id)?;
    sluice_core::events::validate_stream_id(&stored)?;
    let direction = match params.direction.as_deref() {
        None | Some("forward") => Direction::Forward,
        Some("backward") => Direction::Backward,
        Some(_) => return Err(ValidationError::new("direction", "is forward or backward").into()),
    };
    let read =
        StreamRead { from_version: params.from_version, direction, max: params.max.unwrap_or(EVENT_READ_DEFAULT) };
    let got = state.store().read_stream(&stored, read).await?;
    wire::count_read("stream", got.events.len());
    Ok(axum::Json(StreamEventsResponse {
        stream_id,
        events: wire::events(got.events, &tenant),
        first_version: got.first_version,
        last_version: got.last_version,
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeleteParams {
    /// `true`: delete for good (every later append is refused with 410). Default false: a soft
    /// delete, after which a `no_stream` append starts the stream again at the next version.
    hard: Option<bool>,
}

#[utoipa::path(
    delete, path = "/v1/events/streams/{stream_id}", tag = "events",
    params(("stream_id" = String, Path, description = "The stream"), DeleteParams),
    responses(
        (status = 204, description = "Deleted; its events keep their positions in $all"),
        (status = 404, description = "`event_stream_not_found`", body = ErrorResponse),
        (status = 410, description = "`event_stream_deleted`: already hard-deleted", body = ErrorResponse),
    )
)]
pub async fn delete_stream(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(stream_id): Path<String>,
    Query(params): Query<DeleteParams>,
) -> Result<StatusCode, ApiError> {
    let stream_id = tenant.name("stream_id", &stream_id)?;
    state.store().delete_event_stream(&stream_id, params.hard.unwrap_or(false)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    put, path = "/v1/events/streams/{stream_id}/snapshot", tag = "events",
    params(("stream_id" = String, Path, description = "The stream")),
    request_body = PutSnapshotRequest,
    responses(
        (status = 200, description = "Stored; it replaces the stream's previous snapshot", body = SnapshotWire),
        (status = 400, description = "`invalid_argument`: a version the stream does not have, or data over 512 KiB", body = ErrorResponse),
        (status = 404, description = "`event_stream_not_found`", body = ErrorResponse),
    )
)]
pub async fn put_snapshot(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(stream_id): Path<String>,
    Json(request): Json<PutSnapshotRequest>,
) -> JsonResult<SnapshotWire> {
    let stream_id = tenant.name("stream_id", &stream_id)?;
    let s = state.services.events().put_snapshot(&stream_id, request.version, request.data.to_string()).await?;
    Ok(axum::Json(SnapshotWire { version: s.version, data: request.data, taken_at: rfc3339(s.taken_at) }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SnapshotParams {
    /// Events after the snapshot to return, 1 to 1,000 (default 1,000).
    max: Option<u32>,
}

#[utoipa::path(
    get, path = "/v1/events/streams/{stream_id}/snapshot", tag = "events",
    params(("stream_id" = String, Path, description = "The stream"), SnapshotParams),
    responses(
        (status = 200, description = "The latest snapshot and the events after it", body = SnapshotResponse),
        (status = 404, description = "`snapshot_not_found`, `event_stream_not_found`", body = ErrorResponse),
    )
)]
pub async fn get_snapshot(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(stream_id): Path<String>,
    Query(params): Query<SnapshotParams>,
) -> JsonResult<SnapshotResponse> {
    let max = params.max.unwrap_or(sluice_core::events::limits::EVENT_READ_MAX);
    let stored = tenant.name("stream_id", &stream_id)?;
    let (s, events, last_version) = state.services.events().read_snapshot(&stored, max).await?;
    wire::count_read("stream", events.len());
    let data = serde_json::from_str(&s.data).unwrap_or(serde_json::Value::Null);
    Ok(axum::Json(SnapshotResponse {
        stream_id,
        snapshot: SnapshotWire { version: s.version, data, taken_at: rfc3339(s.taken_at) },
        events: wire::events(events, &tenant),
        last_version,
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AllParams {
    /// Inclusive; default 0.
    from_position: Option<u64>,
    /// 1 to 1,000 (default 100).
    max: Option<u32>,
    /// Only these event types, comma-separated (at most 32).
    types: Option<String>,
    /// Only streams whose ids start with this.
    stream_prefix: Option<String>,
    /// Only events with this correlation id (served by the server's correlation index).
    correlation_id: Option<String>,
    /// Long poll at the end, at most 20,000 (default 0).
    wait_ms: Option<u64>,
}

/// Splits `types=a,b` into the filter's types.
fn types_of(text: Option<&str>) -> Vec<String> {
    text.map(|t| t.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect()).unwrap_or_default()
}

#[utoipa::path(
    get, path = "/v1/events/all", tag = "events", params(AllParams),
    responses(
        (status = 200, description = "Events in position order (commit order, no gaps), where to go on from, and the head", body = AllEventsResponse),
        (status = 400, description = "`invalid_argument`", body = ErrorResponse),
    )
)]
pub async fn read_all(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(params): Query<AllParams>,
) -> JsonResult<AllEventsResponse> {
    let filter = EventFilter {
        types: types_of(params.types.as_deref()),
        stream_prefix: tenant_prefix(&tenant, params.stream_prefix)?,
        correlation_id: params.correlation_id,
        // The default tenant's streams are those without a tenant's prefix.
        untenanted: tenant.0.is_default(),
    };
    let read = AllRead {
        from_position: params.from_position.unwrap_or(0),
        max: params.max.unwrap_or(EVENT_READ_DEFAULT),
        filter,
        wait_ms: params.wait_ms.unwrap_or(0),
    };
    if read.from_position == u64::MAX {
        return Err(ValidationError::new("from_position", "is past any position").into());
    }
    let got = state.store().read_all(read).await?;
    wire::count_read("all", got.events.len());
    Ok(axum::Json(AllEventsResponse {
        events: wire::events(got.events, &tenant),
        next_position: got.next_position,
        head_position: got.head,
    }))
}

/// The stream prefix of a `$all` filter in the tenant's names: a tenant's streams share its
/// prefix, so a named tenant's filter always has one.
pub(super) fn tenant_prefix(tenant: &Tenant, stream_prefix: Option<String>) -> Result<Option<String>, ApiError> {
    Ok(match stream_prefix {
        Some(p) => Some(tenant.name("stream_prefix", &p)?),
        None => Some(tenant.0.prefix()).filter(|p| !p.is_empty()),
    })
}

/// The event store's gauges for `/metrics`: the log's head and each subscription's lag (the
/// events between its next position and the head; filtered ones counted too).
pub async fn metrics_text(state: &AppState) -> Result<String, ApiError> {
    let events = state.services.events();
    let head = match events.head().await {
        Ok(h) => h,
        Err(sluice_services::events::EventsError::Event(EventError::Unsupported)) => return Ok(String::new()),
        Err(e) => return Err(e.into()),
    };
    let subs = events.list_subscriptions().await?;
    let mut out = String::new();
    out.push_str("# HELP sluice_events_head_position The next position $all gives (events ever appended).\n");
    out.push_str("# TYPE sluice_events_head_position gauge\n");
    out.push_str(&format!("sluice_events_head_position {head}\n"));
    out.push_str("# HELP sluice_event_subscription_lag Positions between a subscription's next fetch and the head.\n");
    out.push_str("# TYPE sluice_event_subscription_lag gauge\n");
    for s in subs {
        let labels: Vec<String> = sluice_core::name::resource_labels("subscription", &s.name)
            .into_iter()
            .map(|(k, v)| format!("{k}=\"{v}\""))
            .collect();
        let lag = head.saturating_sub(s.next_position());
        out.push_str(&format!("sluice_event_subscription_lag{{{}}} {lag}\n", labels.join(",")));
    }
    Ok(out)
}
