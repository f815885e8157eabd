//! The `Idempotency-Key` layer over every `POST`, `PUT`, `PATCH` and `DELETE` under `/v1`
//! (DESIGN.md §4b): checks the key, fingerprints the body, claims the scope through the
//! services' `Idempotency`, runs the route, stores its answer and returns it; a retry gets the
//! stored answer with `Idempotency-Replayed: true`.
//!
//! Routes whose effect carries data (queue sends, topic publishes, stream appends, saga starts)
//! find a `Ticket` in their request's extensions and commit their answer with their effect
//! (`Ticket::commit_write`); they mark their response with [`AnswerCommitted`], and this layer
//! stores nothing more. Job enqueues and event appends, whose stores commit apart, name their
//! effect after the request instead (`Ticket::effect_id`: a job's unique key, an event's id),
//! so that a second attempt after a crash is deduplicated by the store and answers as the
//! first. Those routes ([`commits_its_answer`]) run before anything is claimed:
//! their commit claims the key too, so a new key costs a keyed send no durable turn more than a
//! plain one. Of requests racing with one key, one commit wins; the others are refused whole
//! (nothing of theirs is applied), answer [`claim_lost`], and go the claiming way, where they
//! find the first one's answer. Every other route is claimed first and its answer stored here,
//! after it ran: those routes' effects repeat harmlessly (a create with the same attributes
//! answers as the first did).
//!
//! Answers refused before anything was done are not stored and the claim is given back, so
//! that a retry executes: [`NOT_STORED`].

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_TYPE, LOCATION, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sluice_api::ErrorCode;
use sluice_core::limits::REQUEST_BYTES_MAX;
use sluice_services::idempotency::{
    Bound, Claim, Idempotency, Principal, Scope, StoredAnswer, Template, Ticket, WAIT_S_MAX, fingerprint, validate_key,
};
use sluice_store::StoredOutcome;

use crate::AppState;
use crate::error::ApiError;

pub const KEY_HEADER: &str = "idempotency-key";
pub const REPLAYED_HEADER: &str = "idempotency-replayed";

/// Statuses whose answers are not stored: the request was refused before it ran (validation,
/// authentication, permission, size, rate) or nothing was done (503, 507). Their claim is given
/// back, so that a retry executes.
pub const NOT_STORED: [u16; 7] = [400, 401, 403, 413, 429, 503, 507];

/// The largest answer body stored, in bytes: an answer larger than this (a receive of many
/// large messages) is returned but not stored, and its claim given back (a retry runs again),
/// since a record holds at most `RECORD_VALUE_BYTES_MAX` and the body is stored in base64.
pub const ANSWER_BYTES_MAX: usize = 512 * 1024;

/// Set on a response whose answer the route committed with its effect; holds the bytes the
/// stored entry takes, for the bounds' totals.
#[derive(Debug, Clone, Copy)]
pub struct AnswerCommitted(pub usize);

/// Set on the answer of a route whose optimistic commit found the key taken: nothing of the
/// request was applied, and this layer claims the key the usual way to find what to answer.
#[derive(Debug, Clone, Copy)]
pub struct ClaimLost;

/// True for the routes that commit their answer with their effect, so that their key is
/// claimed by that commit ([`Idempotency::optimistic`]). Every one of them handles the commit's
/// `Conflict::RecordExists` by answering [`claim_lost`].
pub fn commits_its_answer(method: &Method, path: &str) -> bool {
    if *method != Method::POST {
        return false;
    }
    let segments: Vec<&str> = path.split('/').collect();
    matches!(
        segments.as_slice(),
        ["", "v1", "queues", name, "messages"]
            | ["", "v1", "topics", name, "publish"]
            | ["", "v1", "streams", name, "records"]
            | ["", "v1", "sagas", name, "instances"]
            if !name.is_empty()
    )
}

/// What a route answers when its optimistic commit was refused because the key has an entry:
/// the layer replaces it with the entry's answer. Should it reach a client all the same, it
/// says what is true: another request holds the key.
pub fn claim_lost() -> Response {
    let mut response = in_use().into_response();
    response.extensions_mut().insert(ClaimLost);
    response
}

pub async fn layer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let mutating = matches!(*request.method(), Method::POST | Method::PUT | Method::PATCH | Method::DELETE);
    if !mutating || !request.uri().path().starts_with("/v1/") {
        return next.run(request).await;
    }
    // A new key's answer holds its token, which must never be stored: an Idempotency-Key on a
    // key call is ignored (the call runs as without one).
    if request.uri().path().starts_with("/v1/keys") {
        return next.run(request).await;
    }
    let Some(raw) = request.headers().get(KEY_HEADER) else { return next.run(request).await };
    let key = match validate_key(raw.as_bytes()) {
        Ok(key) => key.to_string(),
        Err(e) => {
            return ApiError::new(ErrorCode::IdempotencyKeyInvalid, e.to_string())
                .with_details(serde_json::json!({ "header": "Idempotency-Key" }))
                .into_response();
        }
    };
    let principal = request.extensions().get::<Principal>().cloned().unwrap_or_else(Principal::anonymous);
    let wait = prefer_wait(request.headers());
    let (parts, body) = request.into_parts();
    // `observe::limit_body` has read the body into memory already, within the request limit.
    let Ok(bytes) = axum::body::to_bytes(body, REQUEST_BYTES_MAX).await else {
        return crate::extract::payload_too_large().into_response();
    };
    let scope = Scope {
        principal: principal.0,
        method: parts.method.as_str().to_string(),
        path: parts.uri.path().to_string(),
        key,
    };
    let fingerprint = fingerprint(&bytes);
    let idempotency = state.services.idempotency();
    if commits_its_answer(&parts.method, &scope.path)
        && let Some(ticket) = idempotency.optimistic(&scope, &fingerprint)
    {
        let mut request = Request::from_parts(parts.clone(), Body::from(bytes.clone()));
        request.extensions_mut().insert(ticket.clone());
        let response = next.clone().run(request).await;
        if response.extensions().get::<AnswerCommitted>().is_some() {
            return finish(idempotency, ticket, response).await;
        }
        // Either the key has an entry (`ClaimLost`): the first request's (replayed below),
        // another body's (a mismatch), one in progress, or an expired one the claim takes
        // over; or the route answered before its commit (a refusal, an unknown queue),
        // having done nothing. Both go the claiming way, which answers as for any route:
        // a kept answer is replayed, a mismatch refused, and a request that runs again
        // meets the same refusal.
    }
    let claim = match wait {
        Some(wait) => idempotency.claim_waiting(&scope, &fingerprint, wait).await,
        None => idempotency.claim(&scope, &fingerprint).await,
    };
    match claim {
        Err(e) => ApiError::from(e).into_response(),
        Ok(Claim::Replay(answer)) => replay(answer),
        Ok(Claim::Mismatch) => ApiError::new(
            ErrorCode::IdempotencyKeyMismatch,
            "this Idempotency-Key was used for this method and path with another body; use a new key for a new request",
        )
        .into_response(),
        Ok(Claim::InUse) => in_use().into_response(),
        Ok(Claim::Full(bound)) => full(bound),
        Ok(Claim::Execute(ticket)) => {
            let mut request = Request::from_parts(parts, Body::from(bytes));
            request.extensions_mut().insert(ticket.clone());
            let response = next.run(request).await;
            finish(idempotency, ticket, response).await
        }
    }
}

/// The answer when the claim is another request's.
pub fn in_use() -> ApiError {
    ApiError::new(
        ErrorCode::IdempotencyKeyInUse,
        "a request with this Idempotency-Key is still running; retry later, or send `Prefer: wait=N` to wait for its answer",
    )
}

/// Stores the route's answer (unless the route committed it, or it is not to be stored) and
/// returns it.
async fn finish(idempotency: &Idempotency, ticket: Ticket, response: Response) -> Response {
    if let Some(AnswerCommitted(bytes)) = response.extensions().get::<AnswerCommitted>().copied() {
        idempotency.committed(&ticket, bytes);
        return response;
    }
    let status = response.status().as_u16();
    if NOT_STORED.contains(&status) {
        release(idempotency, ticket).await;
        return response;
    }
    let (parts, body) = response.into_parts();
    // The route's own limits bound its answer (a receive's 16 MiB the most).
    let body = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(body) => body,
        Err(e) => {
            tracing::warn!("an answer could not be read to be stored: {e}");
            release(idempotency, ticket).await;
            return ApiError::new(ErrorCode::Internal, "the answer could not be read").into_response();
        }
    };
    if body.len() > ANSWER_BYTES_MAX {
        // Too large to keep: the route ran and its answer goes out, but cannot be replayed.
        // Giving the claim back lets a retry run again, which only a large receive meets.
        tracing::debug!(path = %ticket.scope().path, bytes = body.len(), "an answer over {ANSWER_BYTES_MAX} bytes is not stored");
        metrics::counter!(sluice_services::idempotency::REQUESTS_METRIC, "outcome" => "too_large").increment(1);
        release(idempotency, ticket).await;
        return Response::from_parts(parts, Body::from(body));
    }
    let header =
        |name: axum::http::HeaderName| parts.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let answer =
        StoredAnswer { status, location: header(LOCATION), content_type: header(CONTENT_TYPE), body: body.to_vec() };
    match idempotency.complete(ticket, &answer).await {
        Ok(true) => {}
        Ok(false) => tracing::warn!("an idempotency claim was taken over before its answer was stored"),
        // The effect happened: the answer goes out, and the claim stays in progress until a
        // restart or its abandonment lets a retry run (never before).
        Err(e) => tracing::warn!("an idempotency answer could not be stored: {e}"),
    }
    Response::from_parts(parts, Body::from(body))
}

async fn release(idempotency: &Idempotency, ticket: Ticket) {
    if let Err(e) = idempotency.release(ticket).await {
        // The claim stays until it is abandoned or expires; a retry meanwhile is `in_use`.
        tracing::warn!("an idempotency claim could not be given back: {e}");
    }
}

/// The first answer of a route that committed its answer with its effect: the template
/// completed by the commit's outcomes, exactly as a replay will render it.
pub fn committed_answer(template: &Template, outcomes: &[StoredOutcome]) -> Result<Response, ApiError> {
    let answer = template
        .render(outcomes)
        .ok_or_else(|| ApiError::new(ErrorCode::Internal, "a committed answer's template names a missing outcome"))?;
    // The entry's size as the bounds count it until the next sweep counts it exactly: the
    // template and the outcomes are each about the size of the body.
    let bytes = 2 * answer.body.len();
    let mut response = answer_response(answer);
    response.extensions_mut().insert(AnswerCommitted(bytes));
    Ok(response)
}

fn replay(answer: StoredAnswer) -> Response {
    let mut response = answer_response(answer);
    response.headers_mut().insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    response
}

fn answer_response(answer: StoredAnswer) -> Response {
    let mut response = Response::new(Body::from(answer.body));
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    for (name, value) in [(CONTENT_TYPE, answer.content_type), (LOCATION, answer.location)] {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
            headers.insert(name, value);
        }
    }
    response
}

fn full(bound: Bound) -> Response {
    let (what, max) = match bound {
        Bound::Entries { max } => ("entries", max),
        Bound::Bytes { max } => ("bytes", max),
    };
    let mut response = ApiError::new(
        ErrorCode::IdempotencyKeysFull,
        format!("the stored idempotency answers reached their bound of {max} {what}; retry once older keys expire"),
    )
    .with_details(serde_json::json!({ "bound": what, "max": max }))
    .into_response();
    let retry = sluice_services::idempotency::model::SWEEP_MS / 1000;
    response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(retry));
    response
}

/// `Prefer: wait=N` (RFC 7240), in seconds, at most [`WAIT_S_MAX`]; `None` when absent or not
/// a number (an unknown preference is ignored, as the RFC asks).
fn prefer_wait(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get_all("prefer")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split([',', ';']))
        .find_map(|p| p.trim().strip_prefix("wait=").and_then(|n| n.trim().parse::<u64>().ok()))
        .map(|n| Duration::from_secs(n.min(WAIT_S_MAX)))
}

/// Adds the `Idempotency-Key` and `Prefer` headers, the replay header and the layer's error
/// answers to every mutating `/v1` operation of the OpenAPI document.
pub fn document(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    use utoipa::openapi::{ContentBuilder, Ref, Required, ResponseBuilder};

    let key = ParameterBuilder::new()
        .name("Idempotency-Key")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "1 to 255 visible ASCII characters. The first request with a key runs once and its answer is stored; \
             a retry with the same key and body gets that answer with `Idempotency-Replayed: true`.",
        ))
        .schema(Some(ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)).max_length(Some(255))))
        .build();
    let prefer = ParameterBuilder::new()
        .name("Prefer")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(format!(
            "`wait=N` (seconds, at most {WAIT_S_MAX}): while a request with the same key runs, wait for its answer instead of 409 `idempotency_key_in_use`."
        )))
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .build();
    let error = |description: &str| {
        ResponseBuilder::new()
            .description(description)
            .content(
                "application/json",
                ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorResponse"))).build(),
            )
            .build()
    };
    for (path, item) in doc.paths.paths.iter_mut() {
        if !path.starts_with("/v1/") {
            continue;
        }
        for op in [&mut item.post, &mut item.put, &mut item.patch, &mut item.delete].into_iter().flatten() {
            let parameters = op.parameters.get_or_insert_with(Vec::new);
            parameters.push(key.clone());
            parameters.push(prefer.clone());
            for (status, text) in [
                ("400", "`idempotency_key_invalid`: the Idempotency-Key header is malformed"),
                (
                    "409",
                    "`idempotency_key_mismatch`: the key was used with another body; `idempotency_key_in_use`: a request with the key still runs",
                ),
                ("429", "`idempotency_keys_full`: the stored idempotency answers are at their bound"),
            ] {
                match op.responses.responses.get_mut(status) {
                    Some(utoipa::openapi::RefOr::T(existing)) => {
                        existing.description = format!("{}; {text}", existing.description);
                    }
                    Some(utoipa::openapi::RefOr::Ref(_)) => {}
                    None => {
                        op.responses.responses.insert(status.to_string(), error(text).into());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefer_wait_is_read_among_other_preferences_and_bounded() {
        let mut h = HeaderMap::new();
        assert_eq!(prefer_wait(&h), None);
        h.insert("prefer", HeaderValue::from_static("respond-async, wait=5"));
        assert_eq!(prefer_wait(&h), Some(Duration::from_secs(5)));
        h.insert("prefer", HeaderValue::from_static("wait=100000"));
        assert_eq!(prefer_wait(&h), Some(Duration::from_secs(WAIT_S_MAX)));
        h.insert("prefer", HeaderValue::from_static("wait=soon"));
        assert_eq!(prefer_wait(&h), None);
    }
}
