//! Bearer authentication of the native API: `Authorization: Bearer <key>` checked against the
//! services' API keys (`sluice_services::auth`), and the call's scope against the route's
//! need (`routes.rs`). 401 `unauthenticated` without a valid key, 403 `forbidden` with
//! `details.scope_needed` when the key lacks the scope. The key's principal goes into the
//! request's extensions, where idempotency keys take it from.
//!
//! The AWS protocols do not come through here: they are checked by SigV4 (`auth.rs`).

pub mod routes;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sluice_api::ErrorCode;
use sluice_core::limits::REQUEST_BYTES_MAX;
use sluice_services::auth::{Access, NAMESPACED_KINDS, Refusal, Requirement};

use crate::{ApiError, AppState};
use routes::Need;

/// Counts refused calls by reason (`missing`, `invalid`, `revoked`, `scope`, `tenant`,
/// `rate_limited`).
fn refused(reason: &'static str) {
    metrics::counter!("sluice_auth_refused_total", "reason" => reason).increment(1);
}

pub async fn layer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let segments: Vec<String> = request
        .uri()
        .path()
        .trim_start_matches('/')
        .split('/')
        .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let need = routes::need(request.method(), &segments, state.config.protected);
    if need == Need::Open {
        return next.run(request).await;
    }
    let keys = state.services.keys();
    match keys.enforced().await {
        Ok(false) => return next.run(request).await,
        Ok(true) => {}
        Err(e) => return ApiError::from(e).into_response(),
    }
    let Some(token) = bearer(&request) else {
        refused("missing");
        return unauthenticated(
            "this call needs an API key: send `Authorization: Bearer <key>` (make one with `sluice key create`)",
        );
    };
    let access = match keys.authenticate(&token).await {
        Ok(access) => access,
        Err(Refusal::Store(e)) => return ApiError::from(e).into_response(),
        Err(e) => {
            refused(if e == Refusal::Revoked { "revoked" } else { "invalid" });
            return unauthenticated(&e.to_string());
        }
    };
    let (request, needs) = match need {
        Need::Open => unreachable!("open calls returned above"),
        Need::Scope(one) => (request, vec![one]),
        Need::Body { kind, field, action } => {
            let (parts, body) = request.into_parts();
            // `observe::limit_body` has read the body into memory already, within the limit.
            let Ok(bytes) = axum::body::to_bytes(body, REQUEST_BYTES_MAX).await else {
                return crate::extract::payload_too_large().into_response();
            };
            let names = body_names(&bytes, field);
            let needs = if names.is_empty() {
                vec![Requirement::new(kind, None, action)]
            } else {
                names.into_iter().map(|n| Requirement::new(kind, Some(n), action)).collect()
            };
            (Request::from_parts(parts, Body::from(bytes)), needs)
        }
    };
    if let Some(missing) = needs.iter().find(|n| !access.allows(n)) {
        refused("scope");
        return forbidden(&access, missing);
    }
    let namespace = access.namespace();
    let server_wide = segments.iter().map(String::as_str).eq(SERVER_WIDE_JOBS_SECRET.iter().copied());
    if let Some(outside) =
        needs.iter().find(|n| !namespace.is_default() && (server_wide || !NAMESPACED_KINDS.contains(&n.kind)))
    {
        refused("tenant");
        return outside_tenant(&access, outside);
    }
    match keys.admit(&access).await {
        Ok(None) => {}
        Ok(Some(retry_after_ms)) => {
            refused("rate_limited");
            return crate::error::rate_limited(&format!("the API key {}'s", access.key_id), retry_after_ms)
                .into_response();
        }
        Err(e) => return ApiError::from(e).into_response(),
    }
    match state.services.tenants().admit(&namespace).await {
        Ok(None) => {}
        Ok(Some(retry_after_ms)) => {
            refused("rate_limited");
            return crate::error::rate_limited(&format!("the tenant {}'s", access.tenant), retry_after_ms)
                .into_response();
        }
        Err(e) => return ApiError::from(e).into_response(),
    }
    let mut request = request;
    request.extensions_mut().insert(access.principal.clone());
    request.extensions_mut().insert(crate::tenant::Tenant(namespace.clone()));
    request.extensions_mut().insert(access);
    let response = next.run(request).await;
    if namespace.is_default() || response.status().is_success() {
        return response;
    }
    in_namespace(response, &namespace).await
}

/// The secret every job callback is signed with is the whole server's: a tenant that knew it
/// could sign callbacks to another tenant's endpoints.
const SERVER_WIDE_JOBS_SECRET: &[&str] = &["v1", "jobs", "callback-secret"];

/// Most bytes of an error answer read to show it in the tenant's names.
const ERROR_BYTES_MAX: usize = 64 * 1024;

/// An error answer with every stored name in it (`acme~orders` in "queue acme~orders does not
/// exist") shown as the tenant names it. Only the error's message and details are rewritten,
/// never anything a client sent.
async fn in_namespace(response: Response, namespace: &sluice_core::name::Namespace) -> Response {
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, ERROR_BYTES_MAX).await else {
        return ApiError::new(ErrorCode::Internal, "the error answer was too long to show").into_response();
    };
    let Ok(mut error) = serde_json::from_slice::<sluice_api::ErrorResponse>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let prefix = namespace.prefix();
    error.error.message = error.error.message.replace(&prefix, "");
    if let Some(details) = &mut error.error.details {
        strip_prefix_in(details, &prefix);
    }
    let bytes = serde_json::to_vec(&error).unwrap_or_else(|_| bytes.to_vec());
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(bytes))
}

fn strip_prefix_in(value: &mut serde_json::Value, prefix: &str) {
    match value {
        serde_json::Value::String(text) => *text = text.replace(prefix, ""),
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| strip_prefix_in(v, prefix)),
        serde_json::Value::Object(fields) => fields.values_mut().for_each(|v| strip_prefix_in(v, prefix)),
        _ => {}
    }
}

/// The token of `Authorization: Bearer <token>` (the scheme in any case, as RFC 6750 allows).
fn bearer(request: &Request) -> Option<String> {
    let value = request.headers().get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty()).then(|| token.trim().to_string())
}

/// The names a body's `field` holds: a string, or every string of a list.
fn body_names(bytes: &[u8], field: &str) -> Vec<String> {
    let Ok(serde_json::Value::Object(body)) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return Vec::new();
    };
    match body.get(field) {
        Some(serde_json::Value::String(name)) => vec![name.clone()],
        Some(serde_json::Value::Array(names)) if names.iter().all(|n| n.is_string()) => {
            names.iter().filter_map(|n| n.as_str().map(str::to_string)).collect()
        }
        _ => Vec::new(),
    }
}

fn unauthenticated(message: &str) -> Response {
    let mut response = ApiError::new(ErrorCode::Unauthenticated, message).into_response();
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"sluice\""));
    response
}

/// A tenant's key on a kind that is not namespaced yet: 403, so that no tenant sees what is
/// shared by the whole server.
fn outside_tenant(access: &Access, need: &Requirement) -> Response {
    let kinds: Vec<&str> = NAMESPACED_KINDS.iter().map(|k| k.as_str()).collect();
    ApiError::new(
        ErrorCode::Forbidden,
        format!(
            "the key {} is of the tenant {}, and tenants' keys reach only {} (the rest is shared by the server); \
             use a key of the default tenant",
            access.key_id,
            access.tenant,
            kinds.join(" and ")
        ),
    )
    .with_details(serde_json::json!({ "scope_needed": need.to_string(), "tenant": access.tenant }))
    .into_response()
}

fn forbidden(access: &Access, missing: &Requirement) -> Response {
    ApiError::new(
        ErrorCode::Forbidden,
        format!(
            "the key {} lacks the scope {missing}; use a key that has it (`sluice key create --scopes ...`)",
            access.key_id
        ),
    )
    .with_details(serde_json::json!({ "scope_needed": missing.to_string() }))
    .into_response()
}
