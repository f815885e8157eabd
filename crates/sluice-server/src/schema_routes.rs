//! `/v1/schemas`: register JSON Schema versions per message type, read them back, set a type's
//! compatibility mode, and check a schema or a message before registering or sending it. The
//! registry and its rules are `sluice_services::schemas`; the check at the door of each
//! protocol words a refusal with `crate::error::violation_body`.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use serde::Deserialize;
use serde_json::json;
use sluice_api as api;
use sluice_api::{ErrorCode, ErrorResponse};
use sluice_services::schemas::{Compatibility, Reason, SchemaError, TypeRecord, Violation};
use utoipa::{IntoParams, OpenApi};

use crate::AppState;
use crate::convert::rfc3339;
use crate::error::{ApiError, failure};
use crate::extract::{Json, Path, Query};
use crate::paging::PageRequest;
use crate::tenant::Tenant;
use sluice_core::name::Namespace;

/// Types per page of a list: default and most.
const LIST_LIMIT_DEFAULT: u32 = 100;
const LIST_LIMIT_MAX: usize = 1_000;

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/schemas", get(list))
        .route("/v1/schemas/{type}", get(get_type))
        .route("/v1/schemas/{type}/versions", post(register))
        .route("/v1/schemas/{type}/versions/{version}", get(get_version))
        .route("/v1/schemas/{type}/config", put(configure))
        .route("/v1/schemas/{type}/check", post(check))
}

#[derive(OpenApi)]
#[openapi(
    paths(register, list, get_type, get_version, configure, check),
    tags((name = "schemas", description = "JSON Schema versions per message type, compatibility modes, and the check of messages sent to destinations with schema_validation"))
)]
pub struct SchemaDoc;

impl From<SchemaError> for ApiError {
    fn from(e: SchemaError) -> ApiError {
        let message = e.to_string();
        match e {
            SchemaError::TypeNotFound(name) => {
                ApiError::new(ErrorCode::SchemaNotFound, message).with_details(json!({ "type": name }))
            }
            SchemaError::VersionNotFound { name, version } => ApiError::new(ErrorCode::SchemaNotFound, message)
                .with_details(json!({ "type": name, "version": version })),
            SchemaError::SchemaInvalid(reason) => {
                ApiError::new(ErrorCode::SchemaInvalid, message).with_details(json!({ "reason": reason }))
            }
            SchemaError::Incompatible { compatibility, reasons } => {
                let reasons: Vec<_> = reasons.iter().map(reason).collect();
                ApiError::new(ErrorCode::SchemaIncompatible, message)
                    .with_details(json!({ "compatibility": mode_to_api(compatibility), "reasons": reasons }))
            }
            SchemaError::Invalid(v) => v.into(),
            SchemaError::LimitExceeded(_) => ApiError::new(ErrorCode::LimitExceeded, message),
            SchemaError::Contended => ApiError::new(ErrorCode::Contended, message),
            SchemaError::Corrupt(reason) => ApiError::new(ErrorCode::Internal, reason),
            SchemaError::Store(s) => s.into(),
        }
    }
}

fn reason(r: &Reason) -> api::IncompatibilityReason {
    api::IncompatibilityReason {
        version: r.version,
        direction: r.direction.to_owned(),
        kind: r.incompatibility.kind.to_owned(),
        path: r.incompatibility.path.clone(),
        message: r.incompatibility.message.clone(),
    }
}

fn mode_to_api(c: Compatibility) -> api::Compatibility {
    match c {
        Compatibility::Backward => api::Compatibility::Backward,
        Compatibility::BackwardTransitive => api::Compatibility::BackwardTransitive,
        Compatibility::Forward => api::Compatibility::Forward,
        Compatibility::ForwardTransitive => api::Compatibility::ForwardTransitive,
        Compatibility::Full => api::Compatibility::Full,
        Compatibility::FullTransitive => api::Compatibility::FullTransitive,
        Compatibility::None => api::Compatibility::None,
    }
}

fn mode_from_api(c: api::Compatibility) -> Compatibility {
    match c {
        api::Compatibility::Backward => Compatibility::Backward,
        api::Compatibility::BackwardTransitive => Compatibility::BackwardTransitive,
        api::Compatibility::Forward => Compatibility::Forward,
        api::Compatibility::ForwardTransitive => Compatibility::ForwardTransitive,
        api::Compatibility::Full => Compatibility::Full,
        api::Compatibility::FullTransitive => Compatibility::FullTransitive,
        api::Compatibility::None => Compatibility::None,
    }
}

/// A type as `tenant` sees it: by its name in the tenant's namespace.
fn type_view(t: &TypeRecord, versions: Option<Vec<u32>>, tenant: &Tenant) -> api::SchemaType {
    api::SchemaType {
        message_type: tenant.show(&t.name),
        compatibility: mode_to_api(t.compatibility),
        latest_version: (t.latest > 0).then_some(t.latest),
        versions,
        created_at: rfc3339(t.created_at_ms),
        created_at_ms: t.created_at_ms,
        updated_at: rfc3339(t.updated_at_ms),
        updated_at_ms: t.updated_at_ms,
    }
}

#[utoipa::path(
    post, path = "/v1/schemas/{type}/versions", tag = "schemas",
    params(("type" = String, Path, description = "Message type, e.g. order.created")),
    request_body = api::RegisterSchemaRequest,
    responses(
        (status = 201, description = "Registered as the type's next version", body = api::RegisteredSchema),
        (status = 200, description = "The same schema is already this version", body = api::RegisteredSchema),
        (status = 400, description = "`schema_invalid`, `invalid_argument` (the type's name)", body = ErrorResponse),
        (status = 409, description = "`schema_incompatible`: `details.reasons` lists each way it breaks the mode", body = ErrorResponse),
    )
)]
pub async fn register(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    Json(request): Json<api::RegisterSchemaRequest>,
) -> Result<(StatusCode, axum::Json<api::RegisteredSchema>), ApiError> {
    let registered = state.services.schemas().register(&tenant.name("type", &name)?, &request.schema).await?;
    let status = if registered.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, axum::Json(api::RegisteredSchema { message_type: name, version: registered.version })))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Most types per page (1 to 1000, default 100).
    limit: Option<u32>,
    /// The `next_token` of the previous page.
    next_token: Option<String>,
}

#[utoipa::path(
    get, path = "/v1/schemas", tag = "schemas",
    params(ListParams),
    responses(
        (status = 200, description = "Types in name order", body = api::SchemaTypeList),
        (status = 400, description = "`invalid_argument`", body = ErrorResponse),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(params): Query<ListParams>,
) -> JsonResult<api::SchemaTypeList> {
    let page = PageRequest::read(params.limit, params.next_token.as_deref(), LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX)?;
    let after = page.after.as_deref().map(|a| tenant.name("next_token", a)).transpose()?;
    let schemas = state.services.schemas();
    let fetch = |after: Option<String>, n| async move { schemas.list(after.as_deref(), n).await };
    let mut found = tenant.keep_own(after, page.fetch_count(), fetch, |t| (t.name.clone(), t.name.clone())).await?;
    let next_token = page.cut(&mut found, |t| tenant.show(&t.name));
    let types = found.iter().map(|t| type_view(t, None, &tenant)).collect();
    Ok(axum::Json(api::SchemaTypeList { types, next_token }))
}

#[utoipa::path(
    get, path = "/v1/schemas/{type}", tag = "schemas",
    params(("type" = String, Path, description = "Message type")),
    responses(
        (status = 200, description = "The type, its mode and its versions", body = api::SchemaType),
        (status = 404, description = "`schema_not_found`", body = ErrorResponse),
    )
)]
pub async fn get_type(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> JsonResult<api::SchemaType> {
    let view = state.services.schemas().get(&tenant.name("type", &name)?).await?;
    Ok(axum::Json(type_view(&view.record, Some(view.versions), &tenant)))
}

#[utoipa::path(
    get, path = "/v1/schemas/{type}/versions/{version}", tag = "schemas",
    params(
        ("type" = String, Path, description = "Message type"),
        ("version" = String, Path, description = "A version number, or `latest`"),
    ),
    responses(
        (status = 200, description = "The schema of that version", body = api::SchemaVersion),
        (status = 400, description = "`invalid_argument`: the version is neither a number nor `latest`", body = ErrorResponse),
        (status = 404, description = "`schema_not_found`", body = ErrorResponse),
    )
)]
pub async fn get_version(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((name, version)): Path<(String, String)>,
) -> JsonResult<api::SchemaVersion> {
    let name = tenant.name("type", &name)?;
    let version = match version.as_str() {
        "latest" => None,
        text => Some(text.parse::<u32>().map_err(|_| {
            ApiError::invalid("version", format!("{text:?} is not a version: give a number (1, 2, ...) or latest"))
        })?),
    };
    let record = state.services.schemas().version(&name, version).await?;
    let schema = serde_json::from_str(&record.schema)
        .map_err(|e| ApiError::new(ErrorCode::Internal, format!("a stored schema is not JSON: {e}")))?;
    Ok(axum::Json(api::SchemaVersion {
        message_type: tenant.show(&record.name),
        version: record.version,
        schema,
        created_at: rfc3339(record.created_at_ms),
        created_at_ms: record.created_at_ms,
    }))
}

#[utoipa::path(
    put, path = "/v1/schemas/{type}/config", tag = "schemas",
    params(("type" = String, Path, description = "Message type (created without versions if new)")),
    request_body = api::SchemaConfig,
    responses(
        (status = 200, description = "The type with its new mode; later registrations are checked under it", body = api::SchemaType),
        (status = 400, description = "`invalid_argument`", body = ErrorResponse),
    )
)]
pub async fn configure(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    Json(request): Json<api::SchemaConfig>,
) -> JsonResult<api::SchemaType> {
    let name = tenant.name("type", &name)?;
    let view = state.services.schemas().set_compatibility(&name, mode_from_api(request.compatibility)).await?;
    Ok(axum::Json(type_view(&view.record, Some(view.versions), &tenant)))
}

#[utoipa::path(
    post, path = "/v1/schemas/{type}/check", tag = "schemas",
    params(("type" = String, Path, description = "Message type")),
    request_body = api::CheckSchemaRequest,
    responses(
        (status = 200, description = "For `schema`: whether registering it would be accepted, and why not. For `body`: whether a message would pass, and where it fails", body = api::CheckSchemaResponse),
        (status = 400, description = "`invalid_argument` (neither or both of schema and body), `schema_invalid`", body = ErrorResponse),
    )
)]
pub async fn check(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(local): Path<String>,
    Json(request): Json<api::CheckSchemaRequest>,
) -> JsonResult<api::CheckSchemaResponse> {
    let schemas = state.services.schemas();
    let name = tenant.name("type", &local)?;
    let answer = match (request.schema, request.body) {
        (Some(schema), None) => {
            if request.version.is_some() {
                return Err(ApiError::invalid(
                    "version",
                    "version goes with body; a schema is checked by the type's mode",
                ));
            }
            let reasons = schemas.check_compatibility(&name, &schema).await?;
            api::CheckSchemaResponse {
                compatible: Some(reasons.is_empty()),
                reasons: reasons.iter().map(reason).collect(),
                valid: None,
                version: None,
                errors: Vec::new(),
            }
        }
        (None, Some(body)) => {
            let version = request.version.map(|v| v.to_string());
            let outcome =
                schemas.check_message(&tenant.0, Some(&local), version.as_deref(), body.as_bytes(), false).await?;
            match outcome {
                Ok(()) => api::CheckSchemaResponse {
                    compatible: None,
                    reasons: Vec::new(),
                    valid: Some(true),
                    version: match request.version {
                        Some(v) => Some(v),
                        None => schemas.get(&name).await.ok().map(|t| t.record.latest),
                    },
                    errors: Vec::new(),
                },
                Err(v) => {
                    let mut errors: Vec<_> = v.failures.iter().map(failure).collect();
                    if errors.is_empty() {
                        errors.push(api::SchemaFailure {
                            pointer: v.pointer.clone(),
                            schema_path: String::new(),
                            message: v.reason.clone(),
                        });
                    }
                    api::CheckSchemaResponse {
                        compatible: None,
                        reasons: Vec::new(),
                        valid: Some(false),
                        version: v.version,
                        errors,
                    }
                }
            }
        }
        _ => {
            return Err(ApiError::invalid(
                "schema",
                "give schema (to check a new version) or body (to check a message), not both",
            ));
        }
    };
    Ok(axum::Json(answer))
}

/// The check at a queue's door: when `queue` has `schema_validation`, each message that breaks
/// its schema is taken out of `messages` and answered with its position (the messages'
/// positions travel with them). A message names its schema by its `type` and `version`, or by
/// the attributes `sluice.type` and `sluice.version` (SQS).
pub async fn refuse_invalid<M: std::borrow::Borrow<sluice_core::NewMessage>>(
    state: &AppState,
    queue: &str,
    messages: &mut Vec<(usize, M)>,
) -> Result<Vec<(usize, Violation)>, sluice_store::StoreError> {
    let schemas = state.services.schemas();
    if messages.is_empty() || !schemas.queue_validates(queue).await? {
        return Ok(Vec::new());
    }
    let mut refused = Vec::new();
    let mut kept = Vec::with_capacity(messages.len());
    for (position, message) in messages.drain(..) {
        match schemas.check_new_message(&Namespace::of_stored(queue), message.borrow()).await? {
            Ok(()) => kept.push((position, message)),
            Err(violation) => refused.push((position, violation)),
        }
    }
    *messages = kept;
    Ok(refused)
}
