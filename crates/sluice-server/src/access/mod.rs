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
use sluice_services::auth::{Access, Refusal, Requirement};

use crate::{ApiError, AppState};
use routes::Need;

/// Counts refused calls by reason (`missing`, `invalid`, `revoked`, `scope`).
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
    match keys.admit(&access).await {
        Ok(None) => {}
        Ok(Some(retry_after_ms)) => {
            refused("rate_limited");
            return crate::error::rate_limited(&format!("the API key {}'s", access.key_id), retry_after_ms)
                .into_response();
        }
        Err(e) => return ApiError::from(e).into_response(),
    }
    let mut request = request;
    request.extensions_mut().insert(access.principal.clone());
    request.extensions_mut().insert(access);
    next.run(request).await
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
