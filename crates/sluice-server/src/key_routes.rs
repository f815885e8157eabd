//! `/v1/keys`: make, list, view and revoke API keys. The keys themselves, their hashing and
//! their checking are in `sluice_services::auth`; the bearer check of every call is `access/`.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use serde_json::json;
use sluice_api as api;
use sluice_api::{ErrorCode, ErrorResponse};
use sluice_services::auth::{KeyError, KeyView, NewKey};
use utoipa::OpenApi;

use crate::AppState;
use crate::convert::rfc3339;
use crate::error::ApiError;
use crate::extract::{Json, Path};

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/keys", get(list).post(create)).route("/v1/keys/{id}", get(get_one).delete(revoke))
}

#[derive(OpenApi)]
#[openapi(
    paths(create, list, get_one, revoke),
    tags((name = "keys", description = "API keys: a tenant, scopes `kind:name-pattern:actions`, a token shown once and stored hashed; every `/v1` call takes one as `Authorization: Bearer <key>` once any key exists"))
)]
pub struct KeysDoc;

impl From<KeyError> for ApiError {
    fn from(e: KeyError) -> ApiError {
        let message = e.to_string();
        match e {
            KeyError::Invalid(v) => v.into(),
            KeyError::NotFound(id) => ApiError::new(ErrorCode::KeyNotFound, message).with_details(json!({ "id": id })),
            KeyError::LimitReached => ApiError::new(ErrorCode::LimitExceeded, message),
            KeyError::Store(s) => s.into(),
        }
    }
}

fn view(key: &KeyView) -> api::ApiKey {
    api::ApiKey {
        id: key.id.clone(),
        tenant: key.tenant.clone(),
        name: key.name.clone(),
        scopes: key.scopes.clone(),
        aws_access_key_id: key.aws_access_key_id.clone(),
        rate_limit: key.rate_limit.map(crate::convert::rate_limit_to_api),
        created_at: rfc3339(key.created_ms),
        revoked_at: key.revoked_ms.map(rfc3339),
    }
}

#[utoipa::path(
    post, path = "/v1/keys", tag = "keys",
    request_body = api::CreateKeyRequest,
    responses(
        (status = 201, description = "The key, with its token: the only time the token is shown", body = api::CreatedKey),
        (status = 400, description = "`invalid_argument` (tenant, name, scopes); `limit_exceeded` past 1,000 keys", body = ErrorResponse),
        (status = 401, description = "`unauthenticated`", body = ErrorResponse),
        (status = 403, description = "`forbidden`: making keys needs `admin:keys:manage`", body = ErrorResponse),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    Json(request): Json<api::CreateKeyRequest>,
) -> Result<(StatusCode, axum::Json<api::CreatedKey>), ApiError> {
    let new = NewKey {
        tenant: request.tenant,
        name: request.name,
        scopes: request.scopes,
        aws: request.aws,
        rate_limit: request.rate_limit.map(crate::convert::rate_limit_from_api),
    };
    let made = state.services.keys().create(new).await?;
    let key = &made.view;
    tracing::info!(key = %key.id, tenant = %key.tenant, name = %key.name, aws = key.aws_access_key_id.is_some(), "API key made");
    let created = api::CreatedKey { key: made.token, aws_secret_access_key: made.aws_secret, api_key: view(key) };
    Ok((StatusCode::CREATED, axum::Json(created)))
}

#[utoipa::path(
    get, path = "/v1/keys", tag = "keys",
    responses(
        (status = 200, description = "Every key (revoked ones too) in id order, without secrets", body = api::KeyList),
        (status = 403, description = "`forbidden`: listing keys needs `admin:keys:read`", body = ErrorResponse),
    )
)]
pub async fn list(State(state): State<AppState>) -> JsonResult<api::KeyList> {
    let keys = state.services.keys().list().await?;
    Ok(axum::Json(api::KeyList { keys: keys.iter().map(view).collect() }))
}

#[utoipa::path(
    get, path = "/v1/keys/{id}", tag = "keys",
    params(("id" = String, Path, description = "Key id")),
    responses(
        (status = 200, description = "The key, without its secret", body = api::ApiKey),
        (status = 404, description = "`key_not_found`", body = ErrorResponse),
    )
)]
pub async fn get_one(State(state): State<AppState>, Path(id): Path<String>) -> JsonResult<api::ApiKey> {
    Ok(axum::Json(view(&state.services.keys().get(&id).await?)))
}

#[utoipa::path(
    delete, path = "/v1/keys/{id}", tag = "keys",
    params(("id" = String, Path, description = "Key id")),
    responses(
        (status = 200, description = "The key, revoked: refused at once on this node and within 1 s on every other; revoking again answers the same", body = api::ApiKey),
        (status = 404, description = "`key_not_found`", body = ErrorResponse),
    )
)]
pub async fn revoke(State(state): State<AppState>, Path(id): Path<String>) -> JsonResult<api::ApiKey> {
    let key = state.services.keys().revoke(&id).await?;
    tracing::info!(key = %key.id, "API key revoked");
    Ok(axum::Json(view(&key)))
}
