//! Who signed an AWS request and whether they may make it: the SigV4 side of authentication.
//!
//! A request is checked against the `--access-key` keys (every right, as before API keys) and,
//! once the server asks for keys (`sluice_services::auth`), against the AWS access keys of API
//! keys made with `aws: true`, whose scopes then apply: an SQS `SendMessage` needs
//! `queues:NAME:send`, an SNS `Publish` `topics:NAME:publish`, as the native routes do
//! (`crate::access::routes`). With neither, any request is accepted, signed or not.
//!
//! Refusals are AWS's own: `MissingAuthenticationToken`, `InvalidClientTokenId` (an unknown or
//! revoked key), `SignatureDoesNotMatch`, then `AccessDenied` (SQS) or `AuthorizationError`
//! (SNS), all 403.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::http::request::Parts;
use serde_json::Value;
use sluice_services::auth::{Access, Action, Kind, Refusal, Requirement};

use super::common::AwsError;
use super::detect::Service;
use super::sqs::urls;
use crate::AppState;
use crate::auth::{self, AccessKey, AuthError};

/// The signer of a request: its access key id, and its scopes (`None`: every right).
pub struct Caller {
    pub id: Option<String>,
    pub access: Option<Arc<Access>>,
}

/// Checks the request's signature, as the server's keys ask.
pub async fn authenticate(state: &AppState, parts: &Parts, body: &[u8]) -> Result<Caller, AuthOutcome> {
    let statics = &state.config.access_keys;
    let keys = state.services.keys();
    let enforced = keys.enforced().await.map_err(|e| AuthOutcome::Failed(e.into()))?;
    if !enforced && statics.is_empty() {
        let id = auth::signed_header(parts).ok().map(|h| h.access_key_id.to_string());
        return Ok(Caller { id, access: None });
    }
    let header = auth::signed_header(parts).map_err(AuthOutcome::Refused)?;
    let id = header.access_key_id.to_string();
    if let Some(key) = statics.iter().find(|k| k.id == id) {
        auth::verify(key, &header, parts, body).map_err(AuthOutcome::Refused)?;
        return Ok(Caller { id: Some(id), access: None });
    }
    let unknown = || AuthOutcome::Refused(AuthError::UnknownAccessKey(id.clone()));
    if !enforced {
        return Err(unknown());
    }
    let (secret, access) = match keys.aws_access(&id).await {
        Ok(Some(found)) => found,
        Ok(None) | Err(Refusal::Revoked | Refusal::Unknown | Refusal::NotAKey) => return Err(unknown()),
        Err(Refusal::Store(e)) => return Err(AuthOutcome::Failed(e.into())),
    };
    auth::verify(&AccessKey { id: id.clone(), secret }, &header, parts, body).map_err(AuthOutcome::Refused)?;
    Ok(Caller { id: Some(id), access: Some(access) })
}

/// Why a request was not let in: refused, or the keys could not be read.
pub enum AuthOutcome {
    Refused(AuthError),
    Failed(AwsError),
}

/// The scope an AWS action needs, from its input (`QueueUrl`, `QueueName`, `TopicArn`...).
/// `None`: being signed is enough (STS `GetCallerIdentity`).
pub fn requirement(state: &AppState, service: Service, action: &str, input: &Value, path: &str) -> Option<Requirement> {
    let text = |field: &str| input.get(field).and_then(Value::as_str);
    match service {
        Service::Sts => None,
        Service::Sqs => {
            use Action::*;
            let account = state.config.account.as_str();
            let by_url = || urls::queue_name(text("QueueUrl"), path, account).ok();
            let by_arn = |field: &str| {
                text(field).and_then(|arn| urls::queue_name_from_arn(arn, account).ok()).map(str::to_string)
            };
            let (name, action) = match action {
                "CreateQueue" => (text("QueueName").map(str::to_string), Manage),
                "GetQueueUrl" => (text("QueueName").map(str::to_string), Read),
                "ListQueues" => (None, Read),
                "DeleteQueue" | "SetQueueAttributes" | "PurgeQueue" | "TagQueue" | "UntagQueue" | "AddPermission"
                | "RemovePermission" => (by_url(), Manage),
                "GetQueueAttributes" | "ListQueueTags" | "ListDeadLetterSourceQueues" => (by_url(), Read),
                "SendMessage" | "SendMessageBatch" => (by_url(), Send),
                "ReceiveMessage"
                | "DeleteMessage"
                | "ChangeMessageVisibility"
                | "DeleteMessageBatch"
                | "ChangeMessageVisibilityBatch" => (by_url(), Receive),
                "StartMessageMoveTask" => (by_arn("SourceArn"), Manage),
                "ListMessageMoveTasks" => (by_arn("SourceArn"), Read),
                // CancelMessageMoveTask names a task, not a queue; unknown actions are refused
                // by the dispatcher, unless the key could not make them anyway.
                _ => (None, Manage),
            };
            Some(Requirement::new(Kind::Queues, name, action))
        }
        Service::Sns => {
            use Action::*;
            let arns = state.services.topics().arns();
            let topic = |field: &str| text(field).and_then(|arn| arns.parse_topic(arn).ok());
            let of_subscription =
                || text("SubscriptionArn").and_then(|arn| arns.parse_subscription(arn).ok()).map(|(t, _)| t);
            let (name, action) = match action {
                "CreateTopic" => (text("Name").map(str::to_string), Manage),
                "DeleteTopic" | "SetTopicAttributes" => (topic("TopicArn"), Manage),
                "TagResource" | "UntagResource" => (topic("ResourceArn"), Manage),
                "GetTopicAttributes" | "ListSubscriptionsByTopic" => (topic("TopicArn"), Read),
                "ListTagsForResource" => (topic("ResourceArn"), Read),
                "ListTopics" | "ListSubscriptions" => (None, Read),
                "Subscribe" | "ConfirmSubscription" => (topic("TopicArn"), Subscribe),
                "Unsubscribe" | "SetSubscriptionAttributes" => (of_subscription(), Subscribe),
                "GetSubscriptionAttributes" => (of_subscription(), Read),
                "Publish" => (topic("TopicArn").or_else(|| topic("TargetArn")), Publish),
                "PublishBatch" => (topic("TopicArn"), Publish),
                _ => (None, Manage),
            };
            Some(Requirement::new(Kind::Topics, name, action))
        }
    }
}

/// A requirement over a stored name (from a queue URL or an ARN) as the key's scopes name it:
/// by the name within its tenant. Another tenant's name stays whole, so that only a pattern
/// of `*` lets it by, and the action then finds no such resource.
pub fn in_namespace(mut need: Requirement, namespace: &sluice_core::name::Namespace) -> Requirement {
    need.name = need.name.map(|n| namespace.local(&n).map(str::to_string).unwrap_or(n));
    need
}

/// Takes a token from the caller's key's rate limit, if it has one; AWS's throttling error
/// (which SDKs retry) when none is left.
pub async fn admit(state: &AppState, service: Service, caller: &Caller) -> Result<(), AwsError> {
    let Some(access) = &caller.access else { return Ok(()) };
    match state.services.keys().admit(access).await {
        Ok(None) => {}
        Ok(Some(retry_after_ms)) => {
            let message =
                format!("The API key {} is over its rate limit; retry in {retry_after_ms} ms.", access.key_id);
            return Err(throttled(service, message));
        }
        Err(e) => return Err(e.into()),
    }
    match state.services.tenants().admit(&access.namespace()).await {
        Ok(None) => Ok(()),
        Ok(Some(retry_after_ms)) => {
            let message = format!("The tenant {} is over its rate limit; retry in {retry_after_ms} ms.", access.tenant);
            Err(throttled(service, message))
        }
        Err(e) => Err(super::common::errors::tenant_refusal(service == Service::Sns, e)),
    }
}

/// The service's throttling error, which AWS SDKs retry with backoff.
fn throttled(service: Service, message: String) -> AwsError {
    match service {
        Service::Sns => AwsError::sns_throttled(message),
        _ => AwsError::request_throttled(message),
    }
}

/// AWS's refusal of a signed request its key's scopes do not cover.
pub fn denied(service: Service, action: &str, caller: &Caller, need: &Requirement) -> AwsError {
    let who = caller.id.as_deref().unwrap_or("anonymous");
    let (shape, code, prefix) = match service {
        Service::Sns => ("AuthorizationErrorException", "AuthorizationError", "sns"),
        _ => ("AccessDeniedException", "AccessDenied", "sqs"),
    };
    AwsError::new(
        shape,
        code,
        StatusCode::FORBIDDEN,
        format!("User: {who} is not authorized to perform: {prefix}:{action}; the key lacks the scope {need}"),
    )
}
