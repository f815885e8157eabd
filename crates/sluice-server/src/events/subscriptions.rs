//! Catch-up subscription handlers (`/v1/events/subscriptions...`): create, list, view and
//! delete; fetch the events after the checkpoint (long-polling at the end); checkpoint the last
//! event handled, forward only. The state is the services' (`sluice_services::events`).

use axum::extract::State;
use axum::http::StatusCode;
use sluice_api::ErrorResponse;
use sluice_api::events::{
    AllEventsResponse, CheckpointRequest, CreateEventSubscriptionRequest, EventSubscription, EventSubscriptionList,
    FetchEventsRequest, SubscriptionFrom, SubscriptionFromName,
};
use sluice_core::events::EventFilter;
use sluice_core::events::limits::EVENT_READ_DEFAULT;
use sluice_services::events::{StartFrom, Subscription};

use super::wire;
use crate::AppState;
use crate::convert::rfc3339;
use crate::error::ApiError;
use crate::extract::{Json, JsonOrEmpty, Path};
use crate::tenant::Tenant;

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

/// A subscription as `tenant` sees it: its name and stream prefix in the tenant's names.
fn view(s: Subscription, head: u64, tenant: &Tenant) -> EventSubscription {
    EventSubscription {
        next_position: s.next_position(),
        name: tenant.show(&s.name),
        start_position: s.start_position,
        types: s.filter.types,
        stream_prefix: s.filter.stream_prefix.map(|p| tenant.show(&p)).filter(|p| !p.is_empty()),
        checkpoint: s.checkpoint,
        head_position: head,
        created_at: rfc3339(s.created_at),
    }
}

#[utoipa::path(
    post, path = "/v1/events/subscriptions", tag = "events",
    request_body = CreateEventSubscriptionRequest,
    responses(
        (status = 201, description = "Created", body = EventSubscription),
        (status = 200, description = "A subscription with these settings already exists", body = EventSubscription),
        (status = 400, description = "`invalid_argument`", body = ErrorResponse),
        (status = 409, description = "`event_subscription_exists`: same name, different settings", body = ErrorResponse),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(request): Json<CreateEventSubscriptionRequest>,
) -> Result<(StatusCode, axum::Json<EventSubscription>), ApiError> {
    let from = match request.from {
        SubscriptionFrom::Named(SubscriptionFromName::Start) => StartFrom::Start,
        SubscriptionFrom::Named(SubscriptionFromName::End) => StartFrom::End,
        SubscriptionFrom::Position { position } => StartFrom::Position(position),
    };
    // The default tenant's subscriptions keep to its streams when they fetch (the services'
    // rule), so the stored filter holds only what the client asked for.
    let stream_prefix = super::tenant_prefix(&tenant, request.stream_prefix)?;
    let filter = EventFilter { types: request.types, stream_prefix, ..EventFilter::default() };
    let name = tenant.name("name", &request.name)?;
    let events = state.services.events();
    let (sub, created) = events.create_subscription(&name, from, filter).await?;
    let head = events.head().await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, axum::Json(view(sub, head, &tenant))))
}

#[utoipa::path(
    get, path = "/v1/events/subscriptions", tag = "events",
    responses((status = 200, description = "Every subscription in name order", body = EventSubscriptionList))
)]
pub async fn list(State(state): State<AppState>, tenant: Tenant) -> JsonResult<EventSubscriptionList> {
    let events = state.services.events();
    let head = events.head().await?;
    let subs = events.list_subscriptions().await?;
    let mine = subs.into_iter().filter(|s| tenant.owns(&s.name));
    Ok(axum::Json(EventSubscriptionList { subscriptions: mine.map(|s| view(s, head, &tenant)).collect() }))
}

#[utoipa::path(
    get, path = "/v1/events/subscriptions/{name}", tag = "events",
    params(("name" = String, Path, description = "Subscription name")),
    responses(
        (status = 200, description = "Settings, checkpoint, next position and the head", body = EventSubscription),
        (status = 404, description = "`event_subscription_not_found`", body = ErrorResponse),
    )
)]
pub async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> JsonResult<EventSubscription> {
    let events = state.services.events();
    let sub = events.get_subscription(&tenant.name("name", &name)?).await?;
    Ok(axum::Json(view(sub, events.head().await?, &tenant)))
}

#[utoipa::path(
    delete, path = "/v1/events/subscriptions/{name}", tag = "events",
    params(("name" = String, Path, description = "Subscription name")),
    responses((status = 204, description = "Deleted"), (status = 404, description = "`event_subscription_not_found`", body = ErrorResponse))
)]
pub async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.services.events().delete_subscription(&tenant.name("name", &name)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post, path = "/v1/events/subscriptions/{name}/fetch", tag = "events",
    params(("name" = String, Path, description = "Subscription name")),
    request_body = FetchEventsRequest,
    responses(
        (status = 200, description = "The events after the checkpoint (the checkpoint does not move)", body = AllEventsResponse),
        (status = 404, description = "`event_subscription_not_found`", body = ErrorResponse),
    )
)]
pub async fn fetch(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    JsonOrEmpty(request): JsonOrEmpty<FetchEventsRequest>,
) -> JsonResult<AllEventsResponse> {
    let max = request.max.unwrap_or(EVENT_READ_DEFAULT);
    let name = tenant.name("name", &name)?;
    let (_, got) = state.services.events().fetch(&name, max, request.wait_ms.unwrap_or(0)).await?;
    wire::count_read("subscription", got.events.len());
    Ok(axum::Json(AllEventsResponse {
        events: wire::events(got.events, &tenant),
        next_position: got.next_position,
        head_position: got.head,
    }))
}

#[utoipa::path(
    post, path = "/v1/events/subscriptions/{name}/checkpoint", tag = "events",
    params(("name" = String, Path, description = "Subscription name")),
    request_body = CheckpointRequest,
    responses(
        (status = 200, description = "The subscription with its checkpoint (the same position again changes nothing)", body = EventSubscription),
        (status = 400, description = "`invalid_argument`: past the log's end", body = ErrorResponse),
        (status = 404, description = "`event_subscription_not_found`", body = ErrorResponse),
        (status = 409, description = "`checkpoint_regression`: below the current checkpoint", body = ErrorResponse),
    )
)]
pub async fn checkpoint(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    Json(request): Json<CheckpointRequest>,
) -> JsonResult<EventSubscription> {
    let events = state.services.events();
    let sub = events.checkpoint(&tenant.name("name", &name)?, request.position).await?;
    Ok(axum::Json(view(sub, events.head().await?, &tenant)))
}
