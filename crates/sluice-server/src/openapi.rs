//! `GET /v1/openapi.json`: the OpenAPI document, generated from the handlers' `#[utoipa::path]`
//! annotations and the `sluice_api` types, so it cannot drift from the code.

use std::sync::OnceLock;

use utoipa::OpenApi;

use crate::streams::MergeDoc;
use crate::{health, messages, metrics, queues, redrive, topic_routes};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Sluice native API",
        description = "Durable queues and topics over HTTP. Errors are `{\"error\": {\"code\", \"message\", \"details\"}}` with a stable `code`.",
    ),
    paths(
        queues::create_queue,
        queues::list_queues,
        queues::get_queue,
        queues::update_queue,
        queues::delete_queue,
        queues::purge_queue,
        messages::send,
        messages::receive,
        messages::ack,
        messages::change_visibility,
        messages::nack,
        messages::peek,
        redrive::start,
        redrive::list_for_queue,
        redrive::list,
        redrive::get,
        redrive::cancel,
        topic_routes::create_topic,
        topic_routes::list_topics,
        topic_routes::get_topic,
        topic_routes::update_topic,
        topic_routes::delete_topic,
        topic_routes::subscribe,
        topic_routes::list_topic_subscriptions,
        topic_routes::get_subscription,
        topic_routes::unsubscribe,
        topic_routes::publish,
        topic_routes::list_subscriptions,
        health::healthz,
        health::readyz,
        metrics::scrape,
        openapi_json,
    ),
    components(schemas(sluice_api::ErrorResponse, sluice_api::ErrorBody)),
    modifiers(&MergeDoc),
    tags(
        (name = "queues", description = "Create, inspect and configure queues"),
        (name = "messages", description = "Send, receive, acknowledge and inspect messages"),
        (name = "redrive", description = "Move dead-lettered messages back"),
        (name = "topics", description = "Topics, subscriptions and publishing (fan-out into queues and HTTP endpoints)"),
        (name = "operations", description = "Health, readiness, metrics and this document"),
    )
)]
pub struct ApiDoc;

#[utoipa::path(
    get, path = "/v1/openapi.json", tag = "operations",
    responses((status = 200, description = "This OpenAPI document", body = Object))
)]
pub async fn openapi_json() -> axum::Json<&'static utoipa::openapi::OpenApi> {
    static DOC: OnceLock<utoipa::openapi::OpenApi> = OnceLock::new();
    axum::Json(DOC.get_or_init(document))
}

/// The document: the core routes above, and each later module's own.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.merge(crate::schedule_routes::ScheduleDoc::openapi());
    doc.merge(crate::schema_routes::SchemaDoc::openapi());
    doc.merge(crate::stats_routes::StatsDoc::openapi());
    doc.merge(crate::alert_routes::AlertsDoc::openapi());
    doc.merge(crate::trace_routes::TraceDoc::openapi());
    doc.merge(crate::ui::UiDoc::openapi());
    doc.merge(crate::relays::RelaysDoc::openapi());
    doc.merge(crate::events::EventsDoc::openapi());
    doc.merge(crate::jobs::JobsDoc::openapi());
    doc.merge(crate::sagas::SagasDoc::openapi());
    doc.merge(crate::key_routes::KeysDoc::openapi());
    doc.merge(crate::tenant_routes::TenantsDoc::openapi());
    bearer(&mut doc);
    // Last: it adds the Idempotency-Key header to every mutating operation merged above.
    crate::idempotency::document(&mut doc);
    doc
}

/// The bearer scheme every `/v1` call takes once the server has keys (`access/`): declared as
/// the document's security, with "no key" allowed too, since a server without keys asks for
/// none.
fn bearer(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
    let mut scheme = Http::new(HttpAuthScheme::Bearer);
    scheme.description = Some(
        "An API key (`slk_...`, `sluice key create`) or the server's admin key. Without a valid one: 401 \
         `unauthenticated`; with one that lacks the call's scope: 403 `forbidden` with `details.scope_needed`."
            .to_string(),
    );
    doc.components.get_or_insert_with(Default::default).add_security_scheme("bearer", SecurityScheme::Http(scheme));
    doc.security = Some(vec![SecurityRequirement::default(), SecurityRequirement::new("bearer", Vec::<String>::new())]);
}
