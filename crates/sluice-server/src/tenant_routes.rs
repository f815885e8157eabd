//! `/v1/tenants`: set, view, list and remove tenants' quotas (`sluice_services::tenants`), and
//! the refusals of calls past them.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use serde_json::json;
use sluice_api as api;
use sluice_api::{ErrorCode, ErrorResponse};
use sluice_services::tenants::{Quotas, TenantError, TenantView};
use utoipa::OpenApi;

use crate::AppState;
use crate::convert::rfc3339;
use crate::error::ApiError;
use crate::extract::{Json, Path};

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/tenants", get(list)).route("/v1/tenants/{name}", get(get_one).put(set).delete(remove))
}

#[derive(OpenApi)]
#[openapi(
    paths(set, get_one, list, remove),
    tags((name = "tenants", description = "Tenants' quotas: most queues, topics and streams, most stored bytes, calls a second of all a tenant's keys; a tenant is the namespace of its keys' queues, topics and streams"))
)]
pub struct TenantsDoc;

impl From<TenantError> for ApiError {
    fn from(e: TenantError) -> ApiError {
        let message = e.to_string();
        match e {
            TenantError::Quota(q) => ApiError::new(ErrorCode::QuotaExceeded, message)
                .with_details(json!({ "tenant": q.tenant, "quota": q.quota, "limit": q.limit, "used": q.used })),
            TenantError::Invalid(v) => v.into(),
            TenantError::NotFound(name) => {
                ApiError::new(ErrorCode::TenantNotFound, message).with_details(json!({ "tenant": name }))
            }
            TenantError::TooMany => ApiError::new(ErrorCode::LimitExceeded, message),
            TenantError::Store(s) => s.into(),
        }
    }
}

fn view(t: &TenantView) -> api::Tenant {
    api::Tenant {
        name: t.name.clone(),
        quotas: api::TenantQuotas {
            max_resources: t.quotas.max_resources,
            max_stored_bytes: t.quotas.max_stored_bytes,
            rate_limit: t.quotas.rate_limit.map(crate::convert::rate_limit_to_api),
        },
        usage: api::TenantUsage { resources: t.usage.resources, stored_bytes: t.usage.stored_bytes },
        updated_at: t.updated_ms.map(rfc3339),
    }
}

#[utoipa::path(
    put, path = "/v1/tenants/{name}", tag = "tenants",
    params(("name" = String, Path, description = "Tenant name (not `default`, which has no quotas)")),
    request_body = api::TenantQuotas,
    responses(
        (status = 200, description = "The tenant with its new quotas and what it holds", body = api::Tenant),
        (status = 400, description = "A bad tenant name or quota (`invalid_argument` with the field)", body = ErrorResponse),
    )
)]
pub async fn set(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Json(request): Json<api::TenantQuotas>,
) -> JsonResult<api::Tenant> {
    let quotas = Quotas {
        max_resources: request.max_resources,
        max_stored_bytes: request.max_stored_bytes,
        rate_limit: request.rate_limit.map(crate::convert::rate_limit_from_api),
    };
    Ok(axum::Json(view(&state.services.tenants().set(&name, quotas).await?)))
}

#[utoipa::path(
    get, path = "/v1/tenants/{name}", tag = "tenants",
    params(("name" = String, Path, description = "Tenant name")),
    responses(
        (status = 200, description = "The tenant's quotas (none when it has no record) and what it holds", body = api::Tenant),
        (status = 400, description = "Not a tenant name", body = ErrorResponse),
    )
)]
pub async fn get_one(State(state): State<AppState>, Path(name): Path<String>) -> JsonResult<api::Tenant> {
    Ok(axum::Json(view(&state.services.tenants().get(&name).await?)))
}

#[utoipa::path(
    get, path = "/v1/tenants", tag = "tenants",
    responses((status = 200, description = "Every tenant with quotas, by name", body = api::TenantList))
)]
pub async fn list(State(state): State<AppState>) -> JsonResult<api::TenantList> {
    let tenants = state.services.tenants().list().await?;
    Ok(axum::Json(api::TenantList { tenants: tenants.iter().map(view).collect() }))
}

#[utoipa::path(
    delete, path = "/v1/tenants/{name}", tag = "tenants",
    params(("name" = String, Path, description = "Tenant name")),
    responses(
        (status = 204, description = "The quotas are gone (the tenant's queues, topics and streams stay)"),
        (status = 404, description = "`tenant_not_found`", body = ErrorResponse),
    )
)]
pub async fn remove(State(state): State<AppState>, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    state.services.tenants().remove(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}
