//! AWS wire compatibility on the native API's port: SQS (JSON 1.0 and Query protocols),
//! STS `GetCallerIdentity`, and the front door of SNS (Query protocol, in `crate::sns`).
//!
//! Every request the native router does not match comes here ([`fallback`]). A request that
//! is not an AWS one gets the native 404. An AWS request is read in its protocol
//! (`json.rs`, `query.rs`), authorised (`crate::auth`), dispatched to its action
//! (`actions/`), and answered in the same protocol (`json.rs`, `xml.rs`) with a request id.
//! SNS requests are parsed with SNS's flattening and answered in its XML style, and their
//! actions live in `crate::sns`; `SqsError` is the AWS error type of all three services.
//! Actions translate to the same `Store` calls the native API makes: SQS semantics that differ
//! from Sluice's are mapped here, and state only SQS has (the 60-second purge and delete
//! rules) is kept in [`SqsState`].

mod actions;
mod attempts;
mod detect;
pub(crate) mod dispatch;
mod errors;
mod input;
mod json;
mod limits;
mod md5;
mod message_attributes;
mod query;
mod queue_attributes;
mod sts;
mod urls;
mod xml;

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::AppState;
use crate::auth::{self, AuthError};
use detect::{Protocol, Service};
use limits::{DELETED_NAME_COOLDOWN_MS, PURGE_INTERVAL_MS, REQUEST_BYTES_MAX};

pub(crate) use errors::SqsError;
/// SNS's `MessageAttributes` are SQS's, as sent.
pub(crate) use message_attributes::AttributeIn;

/// State that exists only for SQS's sake and only in memory: when each queue was last purged
/// and when each name was last deleted, for the two 60-second rules, and the answers of FIFO
/// receives made with a `ReceiveRequestAttemptId` (`attempts.rs`). Losing it at a restart
/// only lifts the 60-second rules early and makes a retried receive receive afresh.
#[derive(Debug, Default)]
pub(crate) struct SqsState {
    recent: Mutex<Recent>,
    attempts: Mutex<attempts::Attempts>,
}

#[derive(Debug, Default)]
struct Recent {
    purged_at_ms: HashMap<String, u64>,
    deleted_at_ms: HashMap<String, u64>,
}

impl SqsState {
    /// The lock is held for map operations only, never across an await.
    fn recent(&self) -> MutexGuard<'_, Recent> {
        self.recent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a purge of `queue` at `now_ms` unless one happened within the last minute.
    /// Checked and recorded at once, so two concurrent purges cannot both pass.
    fn start_purge(&self, queue: &str, now_ms: u64) -> bool {
        let mut recent = self.recent();
        recent.purged_at_ms.retain(|_, at| now_ms.saturating_sub(*at) < PURGE_INTERVAL_MS);
        if recent.purged_at_ms.contains_key(queue) {
            return false;
        }
        recent.purged_at_ms.insert(queue.to_string(), now_ms);
        true
    }

    /// Forgets a purge that the store then refused.
    fn cancel_purge(&self, queue: &str) {
        self.recent().purged_at_ms.remove(queue);
    }

    fn record_delete(&self, queue: &str, now_ms: u64) {
        let mut recent = self.recent();
        recent.deleted_at_ms.retain(|_, at| now_ms.saturating_sub(*at) < DELETED_NAME_COOLDOWN_MS);
        recent.deleted_at_ms.insert(queue.to_string(), now_ms);
        recent.purged_at_ms.remove(queue);
    }

    /// The lock is held for map operations only, never across an await.
    fn attempts(&self) -> MutexGuard<'_, attempts::Attempts> {
        self.attempts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn deleted_recently(&self, queue: &str, now_ms: u64) -> bool {
        self.recent().deleted_at_ms.get(queue).is_some_and(|at| now_ms.saturating_sub(*at) < DELETED_NAME_COOLDOWN_MS)
    }
}

/// The router's fallback: AWS requests on any path outside the native API, else the native
/// 404.
pub(crate) async fn fallback(State(state): State<AppState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if detect::is_native_path(parts.uri.path()) || !detect::may_be_aws(&parts) {
        return crate::health::not_found(parts.uri).await.into_response();
    }
    let request_id = uuid::Uuid::now_v7().to_string();
    let mut response = match handle(&state, &parts, body, &request_id).await {
        Handled::Aws(response) => response,
        Handled::NotAws => return crate::health::not_found(parts.uri.clone()).await.into_response(),
    };
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-amzn-RequestId", v);
    }
    response
}

enum Handled {
    Aws(Response),
    NotAws,
}

/// A request as read: which service and action, in which protocol, with which input.
struct AwsRequest {
    service: Service,
    protocol: Protocol,
    action: String,
    input: Input,
}

enum Input {
    Json,
    Query(Vec<(String, String)>),
}

async fn handle(state: &AppState, parts: &Parts, body: Body, request_id: &str) -> Handled {
    let protocol = if detect::target(parts).is_some() || detect::is_json_content(parts) {
        Protocol::Json
    } else {
        Protocol::Query
    };
    let fail = |service, e: SqsError| Handled::Aws(render_error(service, protocol, &e, request_id));
    let Ok(bytes) = axum::body::to_bytes(body, REQUEST_BYTES_MAX).await else {
        return fail(Service::Sqs, SqsError::payload_too_large(REQUEST_BYTES_MAX));
    };
    let request = match read(parts, &bytes, protocol) {
        Ok(Some(request)) => request,
        Ok(None) => return Handled::NotAws,
        Err((service, e)) => return fail(service, e),
    };
    let caller = match auth::authorize(&state.config.access_keys, parts, &bytes) {
        Ok(caller) => caller,
        Err(e) => return fail(request.service, auth_error(&e)),
    };
    let input = match &request.input {
        Input::Json => json::parse_body(&bytes),
        Input::Query(params) if request.service == Service::Sns => query::to_sns_input(params),
        Input::Query(params) => query::to_input(params),
    };
    let outcome = match input {
        Ok(input) => run(state, parts, &request, input, caller).await,
        Err(e) => Err(e),
    };
    Handled::Aws(match outcome {
        Ok(output) => render_success(&request, output, request_id),
        Err(e) => render_error(request.service, request.protocol, &e, request_id),
    })
}

/// Works out service, action and protocol. `Ok(None)`: not an AWS request after all (a form
/// POST without `Action` and without a signature).
fn read(parts: &Parts, body: &[u8], protocol: Protocol) -> Result<Option<AwsRequest>, (Service, SqsError)> {
    if protocol == Protocol::Json {
        let Some(target) = detect::target(parts) else {
            return Err((Service::Sqs, SqsError::missing_action()));
        };
        let (service, action) = detect::split_target(target);
        let service = service.ok_or((Service::Sqs, SqsError::invalid_action(target)))?;
        return Ok(Some(AwsRequest { service, protocol, action: action.to_string(), input: Input::Json }));
    }
    let query = parts.uri.query().unwrap_or("");
    let mut params = query::decode(query.as_bytes()).map_err(|e| (Service::Sqs, e))?;
    if detect::has_form_body(parts) && !body.is_empty() {
        params.extend(query::decode(body).map_err(|e| (Service::Sqs, e))?);
    }
    let signing_service = auth::signing_service(parts);
    let Some(action) = query::get(&params, "Action").map(str::to_string) else {
        if signing_service.is_some() {
            let service = detect::query_service(signing_service.as_deref(), "", query::get(&params, "Version"));
            return Err((service, SqsError::missing_action()));
        }
        return Ok(None);
    };
    let service = detect::query_service(signing_service.as_deref(), &action, query::get(&params, "Version"));
    Ok(Some(AwsRequest { service, protocol, action, input: Input::Query(params) }))
}

async fn run(
    state: &AppState,
    parts: &Parts,
    request: &AwsRequest,
    input: Value,
    caller: Option<String>,
) -> Result<Option<Value>, SqsError> {
    match request.service {
        Service::Sqs => {
            let ctx = actions::Ctx::new(state, parts, caller);
            actions::dispatch(&ctx, &request.action, input).await
        }
        Service::Sts => sts::dispatch(&state.config, &request.action, caller.as_deref()),
        Service::Sns if request.protocol == Protocol::Json => Err(SqsError::new(
            "InvalidAction",
            "InvalidAction",
            axum::http::StatusCode::BAD_REQUEST,
            format!("The action {} is not valid for this endpoint: SNS speaks the Query protocol.", request.action),
        )),
        Service::Sns => crate::sns::dispatch(state, parts, &request.action, input, caller).await,
    }
}

fn namespace(service: Service) -> &'static str {
    match service {
        Service::Sqs => xml::SQS_NAMESPACE,
        Service::Sts => xml::STS_NAMESPACE,
        Service::Sns => xml::SNS_NAMESPACE,
    }
}

/// The `__type` prefix of a service's JSON errors (clients read only what follows the `#`).
fn error_prefix(service: Service) -> &'static str {
    match service {
        Service::Sqs => "com.amazonaws.sqs#",
        Service::Sts => "com.amazonaws.sts#",
        Service::Sns => "com.amazonaws.sns#",
    }
}

fn render_success(request: &AwsRequest, output: Option<Value>, request_id: &str) -> Response {
    match request.protocol {
        Protocol::Json => json::success(output),
        Protocol::Query if request.service == Service::Sns => {
            xml::success_in(xml::Style::Wrapped, &request.action, output.as_ref(), xml::SNS_NAMESPACE, request_id)
        }
        Protocol::Query => xml::success(&request.action, output.as_ref(), namespace(request.service), request_id),
    }
}

fn render_error(service: Service, protocol: Protocol, e: &SqsError, request_id: &str) -> Response {
    if e.status.is_server_error() {
        tracing::warn!(code = e.code, status = e.status.as_u16(), "AWS request failed");
    }
    match protocol {
        Protocol::Json => json::error(e, error_prefix(service)),
        Protocol::Query => xml::error(e, namespace(service), request_id),
    }
}

/// AWS's answers to a request that fails authentication, all `403`.
fn auth_error(e: &AuthError) -> SqsError {
    let forbidden = axum::http::StatusCode::FORBIDDEN;
    match e {
        AuthError::MissingSignature => SqsError::new(
            "MissingAuthenticationToken",
            "MissingAuthenticationToken",
            forbidden,
            "Request is missing Authentication Token",
        ),
        AuthError::UnknownAccessKey(_) => SqsError::new(
            "InvalidClientTokenId",
            "InvalidClientTokenId",
            forbidden,
            "The security token included in the request is invalid.",
        ),
        AuthError::Malformed(why) => SqsError::new(
            "IncompleteSignature",
            "IncompleteSignature",
            forbidden,
            format!("The request signature is malformed: {why}."),
        ),
        AuthError::Expired | AuthError::SignatureMismatch => SqsError::new(
            "SignatureDoesNotMatch",
            "SignatureDoesNotMatch",
            forbidden,
            format!("{}.", capitalised(&e.to_string())),
        ),
    }
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_and_delete_rules_are_per_name_and_expire() {
        let s = SqsState::default();
        assert!(s.start_purge("q", 1_000));
        assert!(!s.start_purge("q", 1_000 + PURGE_INTERVAL_MS - 1));
        assert!(s.start_purge("other", 1_000));
        assert!(s.start_purge("q", 1_000 + PURGE_INTERVAL_MS));
        s.cancel_purge("other");
        assert!(s.start_purge("other", 2_000));
        s.record_delete("q", 5_000);
        assert!(s.deleted_recently("q", 5_000 + DELETED_NAME_COOLDOWN_MS - 1));
        assert!(!s.deleted_recently("q", 5_000 + DELETED_NAME_COOLDOWN_MS));
        assert!(!s.deleted_recently("other", 5_000));
    }

    #[test]
    fn auth_errors_are_forbidden() {
        for (e, code) in [
            (AuthError::UnknownAccessKey("AKID".into()), "InvalidClientTokenId"),
            (AuthError::SignatureMismatch, "SignatureDoesNotMatch"),
            (AuthError::MissingSignature, "MissingAuthenticationToken"),
        ] {
            let e = auth_error(&e);
            assert_eq!((e.code, e.status.as_u16()), (code, 403));
        }
    }
}
