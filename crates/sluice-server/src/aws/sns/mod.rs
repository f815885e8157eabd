//! The AWS SNS API (Query protocol, version 2010-03-31) on the native API's port, over the
//! topics service (`sluice_services::topics`).
//!
//! The AWS front door (`crate::aws::fallback`) reads every AWS request, tells SNS from
//! SQS and STS (SigV4 credential scope `sns`, `Version=2010-03-31`, or an SNS-only action name),
//! checks its signature, and hands an SNS request here with its parameters already turned into
//! JSON by `sqs::query::to_sns_input`; the answer is written as XML by `sqs::xml` in SNS's
//! wrapped style. This module only maps SNS's actions, names and error texts onto the topics
//! service: one file per resource (topics, subscriptions, publishing).

mod delivery_policy;
mod errors;
mod publish;
mod subscription_actions;
mod topic_actions;

use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::AppState;
use crate::aws::common::AwsError;
use crate::aws::common::dispatch::{aws_actions, host_header};
use crate::paging::decode_page_token;
use crate::tenant::Tenant;
use sluice_services::topics::{Origin, Topics};

/// Items per page of `ListTopics`, `ListSubscriptions` and `ListSubscriptionsByTopic` (SNS's
/// 100).
const LIST_PAGE_MAX: usize = 100;

aws_actions! {
    /// The SNS actions Sluice serves.
    CreateTopic,
    DeleteTopic,
    ListTopics,
    GetTopicAttributes,
    SetTopicAttributes,
    Subscribe,
    Unsubscribe,
    ConfirmSubscription,
    ListSubscriptions,
    ListSubscriptionsByTopic,
    GetSubscriptionAttributes,
    SetSubscriptionAttributes,
    Publish,
    PublishBatch,
    TagResource,
    UntagResource,
    ListTagsForResource,
}

/// What an action needs: the topics service, the account, and the URLs and sender of this
/// request.
pub struct Ctx<'a> {
    pub topics: &'a Topics,
    pub account: &'a str,
    pub origin: Origin,
    /// Where HTTP/S subscriptions may point.
    pub egress: &'a sluice_services::egress::Egress,
    /// The caller's key's tenant: topic names are qualified with it, and an ARN of another
    /// tenant's topic or queue names nothing (see `crate::tenant`).
    pub tenant: Tenant,
    pub tenants: &'a sluice_services::tenants::Tenants,
}

/// Runs one SNS action; `Ok(None)` for actions without an output.
pub async fn dispatch(
    state: &AppState,
    parts: &Parts,
    action: &str,
    input: Value,
    caller: Option<String>,
    tenant: Tenant,
) -> Result<Option<Value>, AwsError> {
    let action = Action::parse(action).ok_or_else(|| AwsError::invalid_action(action))?;
    let host = host_header(parts).unwrap_or_else(|| "localhost".to_string());
    let account = state.config.account.as_str();
    let ctx = Ctx {
        topics: state.topics(),
        egress: state.push().egress(),
        account,
        tenant,
        tenants: state.services.tenants(),
        origin: Origin {
            base_url: format!("{}://{host}", state.scheme()),
            sender: caller.unwrap_or_else(|| account.to_string()),
        },
    };
    match action {
        Action::CreateTopic => topic_actions::create_topic(&ctx, input).await,
        Action::DeleteTopic => topic_actions::delete_topic(&ctx, input).await,
        Action::ListTopics => topic_actions::list_topics(&ctx, input).await,
        Action::GetTopicAttributes => topic_actions::get_topic_attributes(&ctx, input).await,
        Action::SetTopicAttributes => topic_actions::set_topic_attributes(&ctx, input).await,
        Action::TagResource => topic_actions::tag_resource(&ctx, input).await,
        Action::UntagResource => topic_actions::untag_resource(&ctx, input).await,
        Action::ListTagsForResource => topic_actions::list_tags_for_resource(&ctx, input).await,
        Action::Subscribe => subscription_actions::subscribe(&ctx, input).await,
        Action::Unsubscribe => subscription_actions::unsubscribe(&ctx, input).await,
        Action::ConfirmSubscription => subscription_actions::confirm_subscription(&ctx, input).await,
        Action::ListSubscriptions => subscription_actions::list_subscriptions(&ctx, input).await,
        Action::ListSubscriptionsByTopic => subscription_actions::list_subscriptions_by_topic(&ctx, input).await,
        Action::GetSubscriptionAttributes => subscription_actions::get_subscription_attributes(&ctx, input).await,
        Action::SetSubscriptionAttributes => subscription_actions::set_subscription_attributes(&ctx, input).await,
        Action::Publish => publish::publish(&ctx, input).await,
        Action::PublishBatch => publish::publish_batch(&ctx, input).await,
    }
}

impl Ctx<'_> {
    /// The topic name of a `TopicArn` (or other ARN) parameter.
    fn topic(&self, parameter: &str, arn: &Option<String>) -> Result<String, AwsError> {
        let arn = arn.as_deref().unwrap_or("");
        let name = self
            .topics
            .arns()
            .parse_topic(arn)
            .map_err(|e| errors::arn_error(parameter, e, errors::topic_not_found))?;
        self.own(name).ok_or_else(errors::topic_not_found)
    }

    /// Refuses a publish of `bytes` past the tenant's `max_stored_bytes` (`Throttled`).
    async fn check_write(&self, bytes: u64) -> Result<(), AwsError> {
        let refused = self.tenants.check_write(&self.tenant.0, bytes).await;
        refused.map_err(|e| crate::aws::common::errors::tenant_refusal(true, e))
    }

    /// Refuses a new topic past the tenant's `max_resources` (`TopicLimitExceeded`).
    async fn check_create(&self, name: &str) -> Result<(), AwsError> {
        if self.tenant.0.is_default() || self.topics.topic_record(name).await.is_ok() {
            return Ok(());
        }
        let refused = self.tenants.check_create(&self.tenant.0).await;
        refused.map_err(|e| crate::aws::common::errors::tenant_refusal(true, e))
    }

    /// A stored topic or queue name from an ARN, if it is the caller's tenant's.
    fn own(&self, stored: String) -> Option<String> {
        self.tenant.owns(&stored).then_some(stored)
    }
}

/// Deserialises an action's input.
fn parse<T: DeserializeOwned>(input: Value) -> Result<T, AwsError> {
    serde_json::from_value(input).map_err(|e| errors::invalid_parameter(format!("Invalid parameter: {e}")))
}

/// A list or map parameter, which the Query protocol sends as one empty parameter (`Tags=`)
/// when it is empty.
fn lenient<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    match Value::deserialize(deserializer)? {
        Value::Null => Ok(T::default()),
        Value::String(s) if s.is_empty() => Ok(T::default()),
        other => serde_json::from_value(other).map_err(serde::de::Error::custom),
    }
}

/// `"true"`/`"false"` (any case) as the Query protocol sends booleans.
fn flag(value: &Option<String>) -> bool {
    value.as_deref().is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// Serialises an action's output (plain structs, so it cannot fail in practice).
fn output<T: serde::Serialize>(value: T) -> Result<Option<Value>, AwsError> {
    serde_json::to_value(value).map(Some).map_err(|e| errors::internal(e.to_string()))
}

/// The last key of the previous page, from an opaque page token (`crate::paging`).
fn decode_token(token: &Option<String>) -> Result<Option<String>, AwsError> {
    let Some(token) = token.as_deref().filter(|t| !t.is_empty()) else { return Ok(None) };
    decode_page_token(token).map(Some).ok_or_else(|| errors::invalid_parameter("Invalid parameter: NextToken"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_parse_and_tokens_round_trip() {
        assert_eq!(Action::parse("PublishBatch"), Some(Action::PublishBatch));
        assert_eq!(Action::parse("CreatePlatformEndpoint"), None);
        let token = crate::paging::encode_page_token("t/1");
        assert_eq!(decode_token(&Some(token)).unwrap().as_deref(), Some("t/1"));
        assert!(decode_token(&Some("***".into())).is_err());
        assert_eq!(decode_token(&Some(String::new())).unwrap(), None);
    }
}
