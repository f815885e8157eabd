//! Telling an AWS request from a native one, and which AWS service and protocol it speaks.
//!
//! The order is DESIGN.md §2's: the `X-Amz-Target` header (JSON protocol), then the service in
//! the SigV4 credential scope (`Credential=ID/DATE/REGION/<service>/aws4_request`), then the
//! action's name. Header names are matched case-insensitively (axum's header map does that;
//! Ruby and JS SDKs send `x-amz-target`), and the JSON content type by prefix, because it may
//! carry `; charset=...`.

use axum::http::request::Parts;
use axum::http::{Method, header};

use super::sqs::actions::Action;

/// The AWS services that share the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Sqs,
    Sts,
    Sns,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Json,
    Query,
}

const JSON_CONTENT_TYPE: &str = "application/x-amz-json-1.0";
const FORM_CONTENT_TYPE: &str = "application/x-www-form-urlencoded";

/// Paths that belong to the native API and operations endpoints, never to AWS.
pub fn is_native_path(path: &str) -> bool {
    path == "/v1" || path.starts_with("/v1/") || matches!(path, "/metrics" | "/healthz" | "/readyz")
}

/// Whether the request line and headers say this may be an AWS request, so that it is worth
/// reading the body. Anything else keeps the native 404.
pub fn may_be_aws(parts: &Parts) -> bool {
    let header = |name: header::HeaderName| parts.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("");
    let content_type = header(header::CONTENT_TYPE).to_ascii_lowercase();
    target(parts).is_some()
        || header(header::AUTHORIZATION).starts_with("AWS4-")
        || parts.uri.query().is_some_and(|q| q.split('&').any(|p| p.starts_with("Action=")))
        || content_type.starts_with(FORM_CONTENT_TYPE)
        || content_type.starts_with(JSON_CONTENT_TYPE)
}

/// The `X-Amz-Target` header, which only JSON-protocol requests carry.
pub fn target(parts: &Parts) -> Option<&str> {
    parts.headers.get("x-amz-target").and_then(|v| v.to_str().ok()).filter(|t| !t.is_empty())
}

/// Whether a body should be read as JSON even without a target (to answer in JSON).
pub fn is_json_content(parts: &Parts) -> bool {
    parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.to_ascii_lowercase().starts_with(JSON_CONTENT_TYPE))
}

/// Whether the body carries form parameters (a POST that is not JSON).
pub fn has_form_body(parts: &Parts) -> bool {
    parts.method == Method::POST && !is_json_content(parts)
}

/// The service and action of a JSON target such as `AmazonSQS.SendMessage`; the service is
/// `None` for a prefix Sluice does not serve.
pub fn split_target(target: &str) -> (Option<Service>, &str) {
    let (prefix, action) = target.rsplit_once('.').unwrap_or(("", target));
    let service = match prefix {
        "AmazonSQS" => Some(Service::Sqs),
        "AWSSecurityTokenServiceV20110615" => Some(Service::Sts),
        _ => None,
    };
    (service, action)
}

/// The service of a Query-protocol request: from the credential scope when signed, else from
/// the API version, else from the action's name (SQS first, since SNS shares some names, and
/// SQS when nothing claims it, so that the answer is SQS's `InvalidAction`).
pub fn query_service(signing_service: Option<&str>, action: &str, version: Option<&str>) -> Service {
    match signing_service {
        Some("sqs") => return Service::Sqs,
        Some("sts") => return Service::Sts,
        Some("sns") => return Service::Sns,
        _ => {}
    }
    match version {
        Some("2011-06-15") => return Service::Sts,
        Some("2010-03-31") => return Service::Sns,
        Some("2012-11-05") => return Service::Sqs,
        _ => {}
    }
    if Action::parse(action).is_some() {
        Service::Sqs
    } else if action == "GetCallerIdentity" {
        Service::Sts
    } else if SNS_ACTIONS.contains(&action) {
        Service::Sns
    } else {
        Service::Sqs
    }
}

/// SNS actions (2010-03-31), to recognise an unsigned, versionless SNS request.
const SNS_ACTIONS: &[&str] = &[
    "AddPermission",
    "CheckIfPhoneNumberIsOptedOut",
    "ConfirmSubscription",
    "CreatePlatformApplication",
    "CreatePlatformEndpoint",
    "CreateTopic",
    "DeleteEndpoint",
    "DeletePlatformApplication",
    "DeleteTopic",
    "GetDataProtectionPolicy",
    "GetEndpointAttributes",
    "GetSubscriptionAttributes",
    "GetTopicAttributes",
    "ListSubscriptions",
    "ListSubscriptionsByTopic",
    "ListTagsForResource",
    "ListTopics",
    "Publish",
    "PublishBatch",
    "SetSubscriptionAttributes",
    "SetTopicAttributes",
    "Subscribe",
    "TagResource",
    "Unsubscribe",
    "UntagResource",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_paths() {
        for path in ["/v1", "/v1/queues", "/metrics", "/healthz", "/readyz"] {
            assert!(is_native_path(path), "{path}");
        }
        for path in ["/", "/000000000000/q", "/queue/q", "/v10"] {
            assert!(!is_native_path(path), "{path}");
        }
    }

    #[test]
    fn targets() {
        assert_eq!(split_target("AmazonSQS.SendMessage"), (Some(Service::Sqs), "SendMessage"));
        assert_eq!(
            split_target("AWSSecurityTokenServiceV20110615.GetCallerIdentity"),
            (Some(Service::Sts), "GetCallerIdentity")
        );
        assert_eq!(split_target("DynamoDB_20120810.GetItem"), (None, "GetItem"));
    }

    #[test]
    fn query_services() {
        // An action name SQS shares with SNS is SQS's unless the scope or version says SNS.
        assert_eq!(query_service(None, "AddPermission", None), Service::Sqs);
        assert_eq!(query_service(None, "AddPermission", Some("2010-03-31")), Service::Sns);
        assert_eq!(query_service(None, "AddPermission", Some("2012-11-05")), Service::Sqs);
        assert_eq!(query_service(Some("sqs"), "AddPermission", None), Service::Sqs);
        assert_eq!(query_service(None, "GetCallerIdentity", None), Service::Sts);
        assert_eq!(query_service(Some("sns"), "Publish", None), Service::Sns);
        assert_eq!(query_service(None, "Publish", None), Service::Sns);
        assert_eq!(query_service(None, "SendMessage", None), Service::Sqs);
        assert_eq!(query_service(None, "FooBar", None), Service::Sqs);
    }
}
