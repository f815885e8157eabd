//! AWS wire compatibility on the native API's port, three services side by side: SQS (JSON 1.0
//! and Query protocols, `sqs/`), SNS (Query protocol, `sns/`) and STS `GetCallerIdentity`
//! (`sts.rs`), over what they share (`common/`).
//!
//! This module is the front door. Every request the native router does not match comes here
//! ([`fallback`]). A request that is not an AWS one gets the native 404. An AWS request is told
//! apart by service and protocol (`detect.rs`), read in its protocol, authorised
//! (`crate::auth`), dispatched to its service's action, and answered in the same protocol with
//! a request id. Modules depend downwards only: the front door on the services, the services
//! on `common`, never the other way round.

mod access;
pub mod common;
mod detect;
pub mod sns;
pub mod sqs;
mod sts;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::AppState;
use crate::auth::{self, AuthError};
use common::limits::REQUEST_BYTES_MAX;
use common::{AwsError, json, query, xml};
use detect::{Protocol, Service};

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
    let fail = |service, e: AwsError| Handled::Aws(render_error(service, protocol, &e, request_id));
    let Ok(bytes) = axum::body::to_bytes(body, REQUEST_BYTES_MAX).await else {
        return fail(Service::Sqs, AwsError::payload_too_large(REQUEST_BYTES_MAX));
    };
    let request = match read(parts, &bytes, protocol) {
        Ok(Some(request)) => request,
        Ok(None) => return Handled::NotAws,
        Err((service, e)) => return fail(service, e),
    };
    let caller = match access::authenticate(state, parts, &bytes).await {
        Ok(caller) => caller,
        Err(access::AuthOutcome::Refused(e)) => return fail(request.service, auth_error(&e)),
        Err(access::AuthOutcome::Failed(e)) => return fail(request.service, e),
    };
    let input = match &request.input {
        Input::Json => json::parse_body(&bytes),
        Input::Query(params) if request.service == Service::Sns => query::to_sns_input(params),
        Input::Query(params) => query::to_input(params),
    };
    let outcome = match input {
        Ok(input) => match caller.access.as_ref().and_then(|a| {
            access::requirement(state, request.service, &request.action, &input, parts.uri.path())
                .map(|need| access::in_namespace(need, &a.namespace()))
                .filter(|need| !a.allows(need))
        }) {
            Some(need) => Err(access::denied(request.service, &request.action, &caller, &need)),
            None => match access::admit(state, request.service, &caller).await {
                Ok(()) => {
                    let tenant = crate::tenant::Tenant::of_access(caller.access.as_deref());
                    run(state, parts, &request, input, caller.id, tenant).await
                }
                Err(e) => Err(e),
            },
        },
        Err(e) => Err(e),
    };
    Handled::Aws(match outcome {
        Ok(output) => render_success(&request, output, request_id),
        Err(e) => render_error(request.service, request.protocol, &e, request_id),
    })
}

/// Works out service, action and protocol. `Ok(None)`: not an AWS request after all (a form
/// POST without `Action` and without a signature).
fn read(parts: &Parts, body: &[u8], protocol: Protocol) -> Result<Option<AwsRequest>, (Service, AwsError)> {
    if protocol == Protocol::Json {
        let Some(target) = detect::target(parts) else {
            return Err((Service::Sqs, AwsError::missing_action()));
        };
        let (service, action) = detect::split_target(target);
        let service = service.ok_or((Service::Sqs, AwsError::invalid_action(target)))?;
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
            return Err((service, AwsError::missing_action()));
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
    tenant: crate::tenant::Tenant,
) -> Result<Option<Value>, AwsError> {
    match request.service {
        Service::Sqs => {
            let ctx = sqs::actions::Ctx::new(state, parts, caller, tenant);
            sqs::actions::dispatch(&ctx, &request.action, input).await
        }
        Service::Sts => sts::dispatch(&state.config, &request.action, caller.as_deref()),
        Service::Sns if request.protocol == Protocol::Json => Err(AwsError::new(
            "InvalidAction",
            "InvalidAction",
            axum::http::StatusCode::BAD_REQUEST,
            format!("The action {} is not valid for this endpoint: SNS speaks the Query protocol.", request.action),
        )),
        Service::Sns => sns::dispatch(state, parts, &request.action, input, caller, tenant).await,
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

fn render_error(service: Service, protocol: Protocol, e: &AwsError, request_id: &str) -> Response {
    if e.status.is_server_error() {
        tracing::warn!(code = e.code, status = e.status.as_u16(), "AWS request failed");
    }
    match protocol {
        Protocol::Json => json::error(e, error_prefix(service)),
        Protocol::Query => xml::error(e, namespace(service), request_id),
    }
}

/// AWS's answers to a request that fails authentication, all `403`.
fn auth_error(e: &AuthError) -> AwsError {
    let forbidden = axum::http::StatusCode::FORBIDDEN;
    match e {
        AuthError::MissingSignature => AwsError::new(
            "MissingAuthenticationToken",
            "MissingAuthenticationToken",
            forbidden,
            "Request is missing Authentication Token",
        ),
        AuthError::UnknownAccessKey(_) => AwsError::new(
            "InvalidClientTokenId",
            "InvalidClientTokenId",
            forbidden,
            "The security token included in the request is invalid.",
        ),
        AuthError::Malformed(why) => AwsError::new(
            "IncompleteSignature",
            "IncompleteSignature",
            forbidden,
            format!("The request signature is malformed: {why}."),
        ),
        AuthError::Expired | AuthError::SignatureMismatch => AwsError::new(
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
