//! Topic handlers (`/v1/topics...`, `/v1/subscriptions`): create, list, get and delete
//! topics; subscribe, list, get and remove subscriptions; publish. They translate the native
//! API's fields into the topics service's SNS-named settings (`crate::topics`), which holds
//! every rule.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use sluice_api::{
    CreateTopicRequest, ErrorCode, ErrorResponse, FilterPolicyScope, PublishRequest, PublishResponse, PublishResult,
    SubscribeRequest, Subscription, SubscriptionCounts, SubscriptionList, Topic, TopicList, UpdateTopicRequest,
};
use sluice_core::filter::FilterScope;
use sluice_core::message::AttributeData;
use sluice_core::{AttributeValue, ValidationError};
use sluice_services::schemas::{ATTRIBUTE_TYPE, ATTRIBUTE_VERSION};
use sluice_services::trace::{ATTRIBUTE_CAUSATION_ID, ATTRIBUTE_CORRELATION_ID};
use utoipa::IntoParams;

use crate::AppState;
use crate::convert::{self, rfc3339};
use crate::error::{ApiError, publish_error};
use crate::extract::{Json, Path, Query};
use crate::paging::PageRequest;
use crate::tenant::Tenant;
use sluice_services::idempotency::{Template, Ticket};
use sluice_services::topics::limits::{LIST_LIMIT_MAX, PUBLISH_BATCH_ENTRIES_MAX};
use sluice_services::topics::{
    Endpoint, Origin, PlannedPublish, Publication, PublishError, Published, SubscriptionRecord, TopicError,
    TopicRecord, TopicView,
};
use sluice_store::{COMMIT_MESSAGES_MAX, COMMIT_WRITES_MAX, Conflict, Refused, StoreError, Write};

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

/// Page size when the client does not give one.
const LIST_LIMIT_DEFAULT: u32 = 100;

/// The topic attribute `RateLimit` of the native `rate_limit` (checked when it is set).
fn rate_limit_attribute(limit: sluice_api::RateLimit) -> String {
    serde_json::json!({ "per_second": limit.per_second, "burst": limit.burst }).to_string()
}

fn topic(tenant: &Tenant, record: &TopicRecord, arn: String, counts: Option<SubscriptionCounts>) -> Topic {
    Topic {
        name: tenant.show(&record.name),
        arn,
        fifo: record.fifo,
        content_based_dedup: record.fifo.then(|| record.content_based_dedup()),
        display_name: record.attributes.get("DisplayName").cloned(),
        attributes: record.attributes.clone(),
        tags: record.tags.clone(),
        schema_validation: record.schema_validation(),
        rate_limit: record.rate_limit().map(crate::convert::rate_limit_to_api),
        subscriptions: counts,
        created_at: rfc3339(record.created_at_ms),
        created_at_ms: record.created_at_ms,
    }
}

fn topic_view(tenant: &Tenant, view: &TopicView) -> Topic {
    let counts = SubscriptionCounts {
        confirmed: view.subscriptions_confirmed as u64,
        pending: view.subscriptions_pending as u64,
    };
    topic(tenant, &view.record, view.arn.clone(), Some(counts))
}

/// A stored policy as JSON (it was checked to be JSON when set).
fn policy_json(text: &Option<String>) -> Option<serde_json::Value> {
    text.as_ref().map(|t| serde_json::from_str(t).unwrap_or_else(|_| serde_json::Value::String(t.clone())))
}

/// A subscription in the tenant's names (its ARNs, like every ARN, name the stored topic and
/// queue: see `tenant.rs`).
fn subscription(state: &AppState, tenant: &Tenant, s: &SubscriptionRecord) -> Subscription {
    Subscription {
        id: s.id.clone(),
        arn: state.topics().arns().subscription(&s.topic, &s.id),
        topic: tenant.show(&s.topic),
        protocol: s.protocol.as_str().to_string(),
        endpoint: s.endpoint.clone(),
        queue: tenant.show(&s.queue),
        raw: s.raw,
        filter_policy: policy_json(&s.filter_policy),
        filter_policy_scope: match s.filter_scope {
            FilterScope::MessageAttributes => FilterPolicyScope::Attributes,
            FilterScope::MessageBody => FilterPolicyScope::Body,
        },
        dead_letter_queue: s.dead_letter_queue.as_deref().map(|q| tenant.show(q)),
        delivery_policy: policy_json(&s.delivery_policy),
        pending_confirmation: s.pending,
        signing_secret: s.signing_secret.clone(),
        breaker: sluice_services::topics::worker::endpoint_key(&s.endpoint)
            .filter(|_| s.protocol.is_push())
            .and_then(|endpoint| state.push().state(&endpoint))
            .map(|state| sluice_services::topics::worker::breaker_state_name(state).to_string()),
        created_at: rfc3339(s.created_at_ms),
        created_at_ms: s.created_at_ms,
    }
}

/// Names the native field a service error is about, instead of the SNS attribute.
fn native(e: TopicError) -> ApiError {
    let TopicError::Invalid(mut invalid) = e else { return e.into() };
    let renamed = match invalid.field.as_str() {
        "attributes.RawMessageDelivery" => "raw",
        "attributes.FilterPolicy" => "filter_policy",
        "attributes.FilterPolicyScope" => "filter_policy_scope",
        "attributes.RedrivePolicy" => "dead_letter_queue",
        "attributes.DeliveryPolicy" => "delivery_policy",
        "attributes.DisplayName" => "display_name",
        "attributes.ContentBasedDeduplication" => "content_based_dedup",
        "attributes.SchemaValidation" => "schema_validation",
        "endpoint" => "endpoint",
        other => other,
    };
    invalid.field = renamed.to_string();
    TopicError::Invalid(invalid).into()
}

pub(crate) fn origin(state: &AppState, headers: &HeaderMap) -> Origin {
    let host = headers.get(axum::http::header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("localhost");
    Origin { base_url: format!("{}://{host}", state.scheme()), sender: state.config.account.clone() }
}

/// The paging parameters of a topic or subscription list.
fn page(params: &ListParams) -> Result<PageRequest, ApiError> {
    PageRequest::read(params.limit, params.next_token.as_deref(), LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX)
}

#[utoipa::path(
    post, path = "/v1/topics", tag = "topics",
    request_body = CreateTopicRequest,
    responses(
        (status = 201, description = "The topic was created", body = Topic),
        (status = 200, description = "The topic exists with these attributes and tags", body = Topic),
        (status = 400, description = "A name or attribute breaks a rule", body = ErrorResponse),
        (status = 409, description = "The topic exists with different attributes or tags (`topic_exists`)", body = ErrorResponse),
    )
)]
pub async fn create_topic(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(mut request): Json<CreateTopicRequest>,
) -> Result<(StatusCode, axum::Json<Topic>), ApiError> {
    request.name = tenant.name("name", &request.name)?;
    let mut attributes = request.attributes.unwrap_or_default();
    let fifo = match (request.fifo, attributes.remove("FifoTopic")) {
        (Some(fifo), _) => fifo,
        (None, Some(value)) => sluice_services::topics::fifo_topic_value(&value).map_err(|e| native(e.into()))?,
        (None, None) => request.name.ends_with(sluice_core::limits::FIFO_SUFFIX),
    };
    if let Some(dedup) = request.content_based_dedup {
        attributes.insert("ContentBasedDeduplication".into(), dedup.to_string());
    }
    if let Some(on) = request.schema_validation {
        attributes.insert(sluice_services::topics::SCHEMA_VALIDATION.into(), on.to_string());
    }
    if let Some(limit) = request.rate_limit {
        attributes.insert(sluice_services::topics::RATE_LIMIT.into(), rate_limit_attribute(limit));
    }
    if let Some(name) = request.display_name {
        attributes.insert("DisplayName".into(), name);
    }
    if let Some(policy) = request.delivery_policy {
        attributes.insert("DeliveryPolicy".into(), policy.to_string());
    }
    let tags = request.tags.unwrap_or_default();
    if !tenant.0.is_default() && state.topics().topic_record(&request.name).await.is_err() {
        state.services.tenants().check_create(&tenant.0).await?;
    }
    let (record, created) = state.topics().create_topic(&request.name, fifo, attributes, tags).await.map_err(native)?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, axum::Json(topic(&tenant, &record, state.topics().arns().topic(&record.name), None))))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only names starting with this (topics).
    prefix: Option<String>,
    /// Most items per page (1 to 1000, default 100).
    limit: Option<u32>,
    /// The `next_token` of the previous page.
    next_token: Option<String>,
}

#[utoipa::path(
    get, path = "/v1/topics", tag = "topics",
    params(ListParams),
    responses(
        (status = 200, description = "A page of topics in name order", body = TopicList),
        (status = 400, description = "Bad limit or next_token", body = ErrorResponse),
    )
)]
pub async fn list_topics(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(params): Query<ListParams>,
) -> JsonResult<TopicList> {
    let page = page(&params)?;
    let prefix = tenant.name("prefix", &params.prefix.unwrap_or_default())?;
    let after = page.after.as_deref().map(|a| tenant.name("next_token", a)).transpose()?;
    let (topics, prefix) = (state.topics(), prefix.as_str());
    let fetch = |after: Option<String>, n| async move { topics.list_topics(prefix, after.as_deref(), n).await };
    let mut records = tenant.keep_own(after, page.fetch_count(), fetch, |t| (t.name.clone(), t.name.clone())).await?;
    let next_token = page.cut(&mut records, |t| tenant.show(&t.name));
    let topics = records.iter().map(|t| topic(&tenant, t, state.topics().arns().topic(&t.name), None)).collect();
    Ok(axum::Json(TopicList { topics, next_token }))
}

#[utoipa::path(
    get, path = "/v1/topics/{name}", tag = "topics",
    params(("name" = String, Path, description = "Topic name")),
    responses(
        (status = 200, description = "The topic with its subscription counts", body = Topic),
        (status = 404, description = "`topic_not_found`", body = ErrorResponse),
    )
)]
pub async fn get_topic(State(state): State<AppState>, tenant: Tenant, Path(name): Path<String>) -> JsonResult<Topic> {
    let name = tenant.name("name", &name)?;
    Ok(axum::Json(topic_view(&tenant, &state.topics().get_topic(&name).await?)))
}

#[utoipa::path(
    patch, path = "/v1/topics/{name}", tag = "topics",
    params(("name" = String, Path, description = "Topic name")),
    request_body = UpdateTopicRequest,
    responses(
        (status = 200, description = "The topic as it is now, with its subscription counts", body = Topic),
        (status = 400, description = "A setting breaks a rule (nothing changed)", body = ErrorResponse),
        (status = 404, description = "`topic_not_found`", body = ErrorResponse),
    )
)]
pub async fn update_topic(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    Json(request): Json<UpdateTopicRequest>,
) -> JsonResult<Topic> {
    let name = tenant.name("name", &name)?;
    let mut changes = request.attributes.unwrap_or_default();
    if let Some(dedup) = request.content_based_dedup {
        changes.insert("ContentBasedDeduplication".into(), dedup.to_string());
    }
    if let Some(on) = request.schema_validation {
        changes.insert(sluice_services::topics::SCHEMA_VALIDATION.into(), on.to_string());
    }
    if let Some(limit) = request.rate_limit {
        // `null` removes it: an empty attribute value removes an optional attribute.
        changes.insert(sluice_services::topics::RATE_LIMIT.into(), limit.map(rate_limit_attribute).unwrap_or_default());
    }
    if let Some(display_name) = request.display_name {
        changes.insert("DisplayName".into(), display_name);
    }
    if let Some(policy) = request.delivery_policy {
        changes.insert("DeliveryPolicy".into(), policy.to_string());
    }
    // Like a queue's PATCH, an empty one changes nothing and answers the topic.
    if !changes.is_empty() {
        state.topics().set_topic_attributes(&name, &changes).await.map_err(native)?;
    }
    Ok(axum::Json(topic_view(&tenant, &state.topics().get_topic(&name).await?)))
}

#[utoipa::path(
    delete, path = "/v1/topics/{name}", tag = "topics",
    params(("name" = String, Path, description = "Topic name")),
    responses(
        (status = 204, description = "The topic and its subscriptions are gone"),
        (status = 404, description = "`topic_not_found`", body = ErrorResponse),
    )
)]
pub async fn delete_topic(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    if state.topics().delete_topic(&tenant.name("name", &name)?).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(TopicError::TopicNotFound(name).into())
    }
}

#[utoipa::path(
    post, path = "/v1/topics/{name}/subscriptions", tag = "topics",
    params(("name" = String, Path, description = "Topic name")),
    request_body = SubscribeRequest,
    responses(
        (status = 201, description = "The subscription was created", body = Subscription),
        (status = 200, description = "The endpoint is subscribed with these settings already", body = Subscription),
        (status = 400, description = "A setting breaks a rule (a bad filter policy, a FIFO queue on a standard topic, ...)", body = ErrorResponse),
        (status = 404, description = "`topic_not_found`", body = ErrorResponse),
        (status = 409, description = "The endpoint is subscribed with other settings (`subscription_exists`)", body = ErrorResponse),
    )
)]
pub async fn subscribe(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    headers: HeaderMap,
    Json(request): Json<SubscribeRequest>,
) -> Result<(StatusCode, axum::Json<Subscription>), ApiError> {
    let name = tenant.name("name", &name)?;
    let arns = state.topics().arns();
    let endpoint = match (request.queue, request.endpoint) {
        (Some(queue), None) if queue.starts_with("arn:") => {
            // An ARN names the stored queue; another tenant's is no queue of this tenant's.
            let stored = arns.parse_queue(&queue).ok().filter(|q| tenant.owns(q));
            Endpoint::Queue(stored.ok_or_else(|| {
                ApiError::invalid("queue", format!("{queue:?} is not the ARN of a queue of this server"))
            })?)
        }
        (Some(queue), None) => Endpoint::Queue(tenant.name("queue", &queue)?),
        (None, Some(url)) => {
            // Refused now when the URL itself says so (an address, a denied host pattern); a name
            // resolving to a refused address is refused at each delivery.
            state.push().egress().check_url(&url).map_err(|e| ApiError::invalid("endpoint", e.to_string()))?;
            Endpoint::Url(url)
        }
        _ => return Err(ApiError::invalid("queue", "give a queue (name or ARN) or an http(s) endpoint, not both")),
    };
    let mut attributes = BTreeMap::new();
    if let Some(raw) = request.raw {
        attributes.insert("RawMessageDelivery".to_string(), raw.to_string());
    }
    if let Some(policy) = request.filter_policy {
        attributes.insert("FilterPolicy".to_string(), policy.to_string());
    }
    if let Some(scope) = request.filter_policy_scope {
        let scope = match scope {
            FilterPolicyScope::Attributes => FilterScope::MessageAttributes,
            FilterPolicyScope::Body => FilterScope::MessageBody,
        };
        attributes.insert("FilterPolicyScope".to_string(), scope.as_str().to_string());
    }
    if let Some(queue) = request.dead_letter_queue {
        let policy =
            serde_json::json!({ "deadLetterTargetArn": arns.queue(&tenant.name("dead_letter_queue", &queue)?) });
        attributes.insert("RedrivePolicy".to_string(), policy.to_string());
    }
    if let Some(policy) = request.delivery_policy {
        attributes.insert("DeliveryPolicy".to_string(), policy.to_string());
    }
    let origin = origin(&state, &headers);
    let (record, created) = state.topics().subscribe(&name, endpoint, &attributes, &origin).await.map_err(native)?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, axum::Json(subscription(&state, &tenant, &record))))
}

#[utoipa::path(
    get, path = "/v1/topics/{name}/subscriptions", tag = "topics",
    params(("name" = String, Path, description = "Topic name"), ListParams),
    responses(
        (status = 200, description = "A page of the topic's subscriptions", body = SubscriptionList),
        (status = 404, description = "`topic_not_found`", body = ErrorResponse),
    )
)]
pub async fn list_topic_subscriptions(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    Query(params): Query<ListParams>,
) -> JsonResult<SubscriptionList> {
    let name = tenant.name("name", &name)?;
    list(&state, &tenant, Some(&name), params).await
}

#[utoipa::path(
    get, path = "/v1/subscriptions", tag = "topics",
    params(ListParams),
    responses((status = 200, description = "A page of every topic's subscriptions, by topic", body = SubscriptionList))
)]
pub async fn list_subscriptions(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(params): Query<ListParams>,
) -> JsonResult<SubscriptionList> {
    list(&state, &tenant, None, params).await
}

/// A page of one topic's subscriptions (paged by id), or of every topic's (paged by
/// `<topic>/<id>`, the topic in the tenant's names).
async fn list(
    state: &AppState,
    tenant: &Tenant,
    topic: Option<&str>,
    params: ListParams,
) -> JsonResult<SubscriptionList> {
    let page = page(&params)?;
    let topics = state.topics();
    let mut records = match topic {
        Some(_) => topics.list_subscriptions(topic, page.after.as_deref(), page.fetch_count()).await?,
        None => {
            let after = page.after.as_deref().map(|a| tenant.name("next_token", a)).transpose()?;
            let fetch =
                |after: Option<String>, n| async move { topics.list_subscriptions(None, after.as_deref(), n).await };
            tenant.keep_own(after, page.fetch_count(), fetch, |s| (s.key(), s.topic.clone())).await?
        }
    };
    let next_token = page.cut(&mut records, |s| if topic.is_some() { s.id.clone() } else { tenant.show(&s.key()) });
    let subscriptions = records.iter().map(|s| subscription(state, tenant, s)).collect();
    Ok(axum::Json(SubscriptionList { subscriptions, next_token }))
}

#[utoipa::path(
    get, path = "/v1/topics/{name}/subscriptions/{id}", tag = "topics",
    params(("name" = String, Path, description = "Topic name"), ("id" = String, Path, description = "Subscription id")),
    responses(
        (status = 200, description = "The subscription", body = Subscription),
        (status = 404, description = "`subscription_not_found`", body = ErrorResponse),
    )
)]
pub async fn get_subscription(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((name, id)): Path<(String, String)>,
) -> JsonResult<Subscription> {
    let record = state.topics().get_subscription(&tenant.name("name", &name)?, &id).await?;
    Ok(axum::Json(subscription(&state, &tenant, &record)))
}

#[utoipa::path(
    delete, path = "/v1/topics/{name}/subscriptions/{id}", tag = "topics",
    params(("name" = String, Path, description = "Topic name"), ("id" = String, Path, description = "Subscription id")),
    responses(
        (status = 204, description = "Unsubscribed (an HTTP/S subscription's undelivered messages are dropped)"),
        (status = 404, description = "`subscription_not_found`", body = ErrorResponse),
    )
)]
pub async fn unsubscribe(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((name, id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let name = tenant.name("name", &name)?;
    if state.topics().unsubscribe(&name, &id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(TopicError::SubscriptionNotFound(state.topics().arns().subscription(&name, &id)).into())
    }
}

#[utoipa::path(
    post, path = "/v1/topics/{name}/publish", tag = "topics",
    params(("name" = String, Path, description = "Topic name")),
    request_body = PublishRequest,
    responses(
        (status = 200, description = "Per-message results, in order: `id` once the message is durable in every matching subscription's queue, else `error` (`invalid_argument`, or `publish_incomplete` when the store refused some copies: retry)", body = PublishResponse),
        (status = 400, description = "No messages, or more than 100", body = ErrorResponse),
        (status = 404, description = "`topic_not_found`", body = ErrorResponse),
        (status = 429, description = "`rate_limited`: the topic's `rate_limit` refused every message (`Retry-After`; when it refused only some, they carry the error in their place)", body = ErrorResponse),
    )
)]
pub async fn publish(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    headers: HeaderMap,
    ticket: Option<axum::Extension<Ticket>>,
    Json(request): Json<PublishRequest>,
) -> Result<Response, ApiError> {
    let name = tenant.name("name", &name)?;
    let count = request.messages.len();
    if count == 0 {
        return Err(ApiError::new(ErrorCode::EmptyBatch, "messages is empty; publish 1 to 100 messages")
            .with_details(serde_json::json!({ "field": "messages" })));
    }
    if count > PUBLISH_BATCH_ENTRIES_MAX {
        return Err(ApiError::new(
            ErrorCode::BatchTooLarge,
            format!("messages has {count} entries; a publish holds at most {PUBLISH_BATCH_ENTRIES_MAX}"),
        )
        .with_details(serde_json::json!({ "field": "messages", "count": count, "max": PUBLISH_BATCH_ENTRIES_MAX })));
    }
    // A publish carries no priority: the low band, refused first while the server sheds.
    crate::shed::admit(&state, &format!("topic:{name}"), 0)?;
    let bytes = request.messages.iter().map(|m| m.body.len() as u64).sum();
    state.services.tenants().check_write(&tenant.0, bytes).await?;
    let mut results: Vec<Option<PublishResult>> = vec![None; count];
    let mut publications = Vec::with_capacity(count);
    let mut positions = Vec::with_capacity(count);
    for (i, message) in request.messages.into_iter().enumerate() {
        let mut attributes = BTreeMap::new();
        let mut bad = None;
        for (attribute, value) in message.attributes {
            match convert::attribute_from_api(value) {
                Ok(v) => {
                    attributes.insert(attribute, v);
                }
                Err(e) => {
                    bad = Some(crate::error::entry_validation_error(
                        &e.within(&format!("messages[{i}].attributes.{attribute}")),
                    ))
                }
            }
        }
        for (field, name, value) in [
            ("type", ATTRIBUTE_TYPE, message.message_type),
            ("version", ATTRIBUTE_VERSION, message.version),
            ("correlation_id", ATTRIBUTE_CORRELATION_ID, message.correlation_id),
            ("causation_id", ATTRIBUTE_CAUSATION_ID, message.causation_id),
        ] {
            let Some(value) = value else { continue };
            match attributes.get(name) {
                Some(given) if given.value != AttributeData::Text(value.clone()) => {
                    bad = Some(crate::error::entry_validation_error(&ValidationError::new(
                        format!("messages[{i}].{field}"),
                        format!("{field} {value:?} differs from the attribute {name} given too; give one of them"),
                    )));
                }
                _ => {
                    attributes.insert(
                        name.to_owned(),
                        AttributeValue { data_type: "String".into(), value: AttributeData::Text(value) },
                    );
                }
            }
        }
        if let Some(error) = bad {
            results[i] = Some(PublishResult { id: None, sequence_number: None, deliveries: None, error: Some(error) });
            continue;
        }
        positions.push(i);
        publications.push(Publication {
            message: message.body,
            subject: message.subject,
            attributes,
            structure_json: false,
            group_id: message.group_id,
            dedup_id: message.dedup_id,
            message_id: None,
            // The type is the attribute sluice.type (set from `type` above, natively).
            schema_type: None,
        });
    }
    let origin = origin(&state, &headers);
    if let Some(axum::Extension(ticket)) = ticket {
        let planned = state.topics().plan_publish_all(&name, publications.clone(), &origin).await?;
        if let Some(refusal) = all_rate_limited(positions.len() == count, &planned.results) {
            return Err(refusal);
        }
        match publish_committed(&state, &ticket, planned, results.clone(), &positions).await? {
            Some(response) => return Ok(response),
            // Nothing was applied: a claiming request runs again, and publishes this way.
            None if ticket.is_optimistic() => return Ok(crate::idempotency::claim_lost()),
            // A copy its queue refuses: published the usual way (dead-lettered or dropped,
            // as any publish does), its answer stored by the layer after.
            None => {}
        }
    }
    // The topics service lists a correlated publish and its copies in the trace.
    let published = state.topics().publish(&name, publications, &origin).await?;
    if let Some(refusal) = all_rate_limited(positions.len() == count, &published) {
        return Err(refusal);
    }
    let retry_after = published.iter().find_map(|p| match p {
        Err(PublishError::RateLimited { retry_after_ms }) => Some(crate::error::retry_after_secs(*retry_after_ms)),
        _ => None,
    });
    let mut response = axum::Json(publish_answer(results, &positions, published)).into_response();
    if let Some(seconds) = retry_after {
        response.headers_mut().insert(axum::http::header::RETRY_AFTER, seconds.into());
    }
    Ok(response)
}

/// The whole call's refusal (429 `rate_limited` with `Retry-After`) when the topic's rate limit
/// refused every message of it (`every_checked`: none was refused before publishing).
fn all_rate_limited(every_checked: bool, outcomes: &[Result<Published, PublishError>]) -> Option<ApiError> {
    let mut wait_ms = 0;
    for outcome in outcomes {
        let Err(PublishError::RateLimited { retry_after_ms }) = outcome else { return None };
        wait_ms = wait_ms.max(*retry_after_ms);
    }
    if !every_checked || outcomes.is_empty() {
        return None;
    }
    Some(crate::error::rate_limited("the topic's", wait_ms))
}

/// A publish under an idempotency key: every copy and the answer in one commit, so that a crash
/// cannot apply one without the other. `None` when the commit was refused for a copy (a queue
/// that refuses it or is gone, or more copies than a commit holds): nothing was applied.
async fn publish_committed(
    state: &AppState,
    ticket: &Ticket,
    mut planned: PlannedPublish,
    results: Vec<Option<PublishResult>>,
    positions: &[usize],
) -> Result<Option<Response>, ApiError> {
    let copies: usize =
        planned.writes.iter().map(|w| if let Write::Send { messages, .. } = w { messages.len() } else { 0 }).sum();
    if copies > COMMIT_MESSAGES_MAX || planned.writes.len() + 2 > COMMIT_WRITES_MAX {
        return Ok(None);
    }
    let body = publish_answer(results, positions, planned.results.clone());
    let body = serde_json::to_value(body).map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
    let template = Template { status: 200, location: None, body, fills: Vec::new() };
    let mut writes = std::mem::take(&mut planned.writes);
    writes.extend(ticket.commit_write(template.clone()));
    match state.store().commit_all(writes).await {
        Ok(Ok(outcomes)) => {
            state.topics().applied(planned, &outcomes).await;
            crate::idempotency::committed_answer(&template, &[]).map(Some)
        }
        Ok(Err(Refused { conflict: Conflict::RecordExists, .. })) => Ok(Some(crate::idempotency::claim_lost())),
        Ok(Err(Refused { conflict: Conflict::RecordChanged, .. })) => Err(crate::idempotency::in_use()),
        Ok(Err(_)) | Err(StoreError::Broker(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The answer of a publish: the entries refused before publishing in place, and the others'
/// outcomes at their positions.
fn publish_answer(
    mut results: Vec<Option<PublishResult>>,
    positions: &[usize],
    published: Vec<Result<Published, PublishError>>,
) -> PublishResponse {
    for (&i, outcome) in positions.iter().zip(published) {
        results[i] = Some(match outcome {
            Ok(p) => PublishResult {
                id: Some(p.message_id),
                sequence_number: p.sequence_number,
                deliveries: Some(p.deliveries as u64),
                error: None,
            },
            Err(e) => PublishResult {
                id: None,
                sequence_number: None,
                deliveries: None,
                error: Some(publish_error(&e, &format!("messages[{i}]"))),
            },
        });
    }
    PublishResponse { results: results.into_iter().flatten().collect() }
}
