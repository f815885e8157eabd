//! Subscription actions: Subscribe, Unsubscribe, ConfirmSubscription, ListSubscriptions,
//! ListSubscriptionsByTopic, Get/SetSubscriptionAttributes.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};
use sluice_core::filter::FilterScope;

use super::delivery_policy;
use super::errors::{self, invalid_parameter, topic_error};
use super::{Ctx, LIST_PAGE_MAX, decode_token, flag, lenient, output, parse};
use crate::aws::common::AwsError;
use crate::paging::cut_page;
use sluice_services::topics::{ArnError, Endpoint, Protocol, SubscriptionRecord};

type Outcome = Result<Option<Value>, AwsError>;

/// Protocols SNS has that Sluice does not deliver to.
const OTHER_SNS_PROTOCOLS: &[&str] = &["email", "email-json", "sms", "application", "lambda", "firehose"];

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct SubscribeInput {
    topic_arn: Option<String>,
    protocol: Option<String>,
    endpoint: Option<String>,
    #[serde(deserialize_with = "lenient")]
    attributes: BTreeMap<String, String>,
    return_subscription_arn: Option<String>,
}

pub async fn subscribe(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: SubscribeInput = parse(input)?;
    let topic = ctx.topic("TopicArn", &input.topic_arn)?;
    // SNS answers for a missing topic before it looks at the endpoint (NotFound, not
    // InvalidParameter); the topics service reads the topic again, and Subscribe is rare.
    ctx.topics.topic_record(&topic).await.map_err(topic_error)?;
    let protocol_text = input.protocol.unwrap_or_default();
    let endpoint_text = input.endpoint.unwrap_or_default();
    let endpoint = match Protocol::parse(&protocol_text) {
        Some(Protocol::Sqs) => {
            let queue = ctx
                .topics
                .arns()
                .parse_queue(&endpoint_text)
                .ok()
                .and_then(|queue| ctx.own(queue))
                .ok_or_else(|| invalid_parameter("Invalid parameter: SQS endpoint ARN"))?;
            Endpoint::Queue(queue)
        }
        Some(protocol) => {
            if !endpoint_text.starts_with(&format!("{}://", protocol.as_str())) {
                return Err(invalid_parameter("Invalid parameter: Endpoint must match the specified protocol"));
            }
            if let Err(refused) = ctx.egress.check_url(&endpoint_text) {
                return Err(invalid_parameter(format!("Invalid parameter: Endpoint {refused}")));
            }
            Endpoint::Url(endpoint_text)
        }
        None if OTHER_SNS_PROTOCOLS.contains(&protocol_text.as_str()) => {
            return Err(invalid_parameter(format!(
                "Invalid parameter: Sluice does not deliver to {protocol_text} endpoints; subscribe an sqs queue or an http or https endpoint"
            )));
        }
        None if protocol_text.is_empty() => return Err(errors::required("Protocol")),
        None => {
            return Err(invalid_parameter(format!(
                "Invalid parameter: Amazon SNS does not support this protocol string: {protocol_text}"
            )));
        }
    };
    for (name, value) in &input.attributes {
        own_redrive_target(ctx, name, value)?;
    }
    let (record, _) =
        ctx.topics.subscribe(&topic, endpoint, &input.attributes, &ctx.origin).await.map_err(topic_error)?;
    let arn = if record.pending && !flag(&input.return_subscription_arn) {
        "pending confirmation".to_string()
    } else {
        ctx.topics.arns().subscription(&record.topic, &record.id)
    };
    output(json!({ "SubscriptionArn": arn }))
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct SubscriptionArnInput {
    subscription_arn: Option<String>,
    attribute_name: Option<String>,
    attribute_value: Option<String>,
}

/// The topic and id of a `SubscriptionArn`.
fn subscription(ctx: &Ctx<'_>, arn: &Option<String>) -> Result<(String, String), AwsError> {
    let arn = arn.as_deref().filter(|a| !a.is_empty()).ok_or_else(|| errors::required("SubscriptionArn"))?;
    let (topic, id) = ctx.topics.arns().parse_subscription(arn).map_err(|e| match e {
        ArnError::Malformed => invalid_parameter("Invalid parameter: SubscriptionId"),
        e => errors::arn_error("SubscriptionArn", e, errors::subscription_not_found),
    })?;
    let topic = ctx.own(topic).ok_or_else(errors::subscription_not_found)?;
    Ok((topic, id))
}

/// A `RedrivePolicy` naming another tenant's queue names no queue of this caller's.
fn own_redrive_target(ctx: &Ctx<'_>, name: &str, value: &str) -> Result<(), AwsError> {
    if name != "RedrivePolicy" {
        return Ok(());
    }
    let target = serde_json::from_str::<Value>(value)
        .ok()
        .and_then(|v| v.get("deadLetterTargetArn").and_then(Value::as_str).map(str::to_string));
    match target.and_then(|arn| ctx.topics.arns().parse_queue(&arn).ok()) {
        Some(queue) if !ctx.tenant.owns(&queue) => Err(invalid_parameter(
            "Invalid parameter: RedrivePolicy: deadLetterTargetArn is not a queue of this server",
        )),
        _ => Ok(()),
    }
}

/// Unsubscribing what is not subscribed succeeds, as in SNS.
pub async fn unsubscribe(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: SubscriptionArnInput = parse(input)?;
    let (topic, id) = match subscription(ctx, &input.subscription_arn) {
        Ok(found) => found,
        Err(e) if e.code == "NotFound" => return Ok(None),
        Err(e) => return Err(e),
    };
    ctx.topics.unsubscribe(&topic, &id).await.map_err(topic_error)?;
    Ok(None)
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct ConfirmInput {
    topic_arn: Option<String>,
    token: Option<String>,
    #[allow(dead_code)]
    authenticate_on_unsubscribe: Option<String>,
}

pub async fn confirm_subscription(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: ConfirmInput = parse(input)?;
    let topic = ctx.topic("TopicArn", &input.topic_arn)?;
    let token = input.token.filter(|t| !t.is_empty()).ok_or_else(|| errors::required("Token"))?;
    let record = ctx.topics.confirm_subscription(&topic, &token).await.map_err(topic_error)?;
    output(json!({ "SubscriptionArn": ctx.topics.arns().subscription(&record.topic, &record.id) }))
}

/// A subscription as the list actions show it.
fn entry(ctx: &Ctx<'_>, s: &SubscriptionRecord) -> Value {
    let arns = ctx.topics.arns();
    let arn = if s.pending { "PendingConfirmation".to_string() } else { arns.subscription(&s.topic, &s.id) };
    json!({
        "SubscriptionArn": arn,
        "Owner": ctx.account,
        "Protocol": s.protocol.as_str(),
        "Endpoint": s.endpoint,
        "TopicArn": arns.topic(&s.topic),
    })
}

/// One page of a list, with the token of the next.
fn page(ctx: &Ctx<'_>, mut records: Vec<SubscriptionRecord>, by_topic: bool) -> Outcome {
    let next = cut_page(&mut records, LIST_PAGE_MAX, |s| if by_topic { s.id.clone() } else { s.key() });
    let entries: Vec<Value> = records.iter().map(|s| entry(ctx, s)).collect();
    let mut out = json!({ "Subscriptions": entries });
    if let Some(token) = next {
        out["NextToken"] = json!(token);
    }
    output(out)
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct ListInput {
    topic_arn: Option<String>,
    next_token: Option<String>,
}

pub async fn list_subscriptions(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: ListInput = parse(input)?;
    let after = decode_token(&input.next_token)?;
    let fetch =
        |after: Option<String>, n| async move { ctx.topics.list_subscriptions(None, after.as_deref(), n).await };
    let records = ctx
        .tenant
        .keep_own(after, LIST_PAGE_MAX + 1, fetch, |s| (s.key(), s.topic.clone()))
        .await
        .map_err(topic_error)?;
    page(ctx, records, false)
}

pub async fn list_subscriptions_by_topic(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: ListInput = parse(input)?;
    let topic = ctx.topic("TopicArn", &input.topic_arn)?;
    let after = decode_token(&input.next_token)?;
    let records =
        ctx.topics.list_subscriptions(Some(&topic), after.as_deref(), LIST_PAGE_MAX + 1).await.map_err(topic_error)?;
    page(ctx, records, true)
}

/// Every attribute `GetSubscriptionAttributes` shows.
fn attributes(ctx: &Ctx<'_>, s: &SubscriptionRecord) -> BTreeMap<String, String> {
    let arns = ctx.topics.arns();
    let mut out = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        out.insert(k.to_string(), v);
    };
    put("ConfirmationWasAuthenticated", (!s.pending).to_string());
    put("Endpoint", s.endpoint.clone());
    put("Owner", ctx.account.to_string());
    put("PendingConfirmation", s.pending.to_string());
    put("Protocol", s.protocol.as_str().to_string());
    put("RawMessageDelivery", s.raw.to_string());
    put("SubscriptionArn", arns.subscription(&s.topic, &s.id));
    put("SubscriptionPrincipal", format!("arn:aws:iam::{}:root", ctx.account));
    put("TopicArn", arns.topic(&s.topic));
    if let Some(policy) = &s.filter_policy {
        put("FilterPolicy", policy.clone());
        put(
            "FilterPolicyScope",
            match s.filter_scope {
                FilterScope::MessageAttributes => "MessageAttributes",
                FilterScope::MessageBody => "MessageBody",
            }
            .to_string(),
        );
    }
    if let Some(policy) = &s.redrive_policy {
        put("RedrivePolicy", policy.clone());
    }
    if let Some(policy) = &s.delivery_policy {
        // SNS shows its normalised form of the policy set, not the text.
        put("DeliveryPolicy", delivery_policy::subscription_policy(policy));
    }
    if let Some(secret) = &s.signing_secret {
        // Not an SNS attribute: the key of `x-sluice-signature` on every POST (README, Topics).
        put("SluiceSigningSecret", secret.clone());
    }
    if s.protocol.is_push() {
        put("EffectiveDeliveryPolicy", delivery_policy::effective_subscription_policy(s.delivery_policy.as_deref()));
    }
    out
}

pub async fn get_subscription_attributes(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: SubscriptionArnInput = parse(input)?;
    let (topic, id) = subscription(ctx, &input.subscription_arn)?;
    let record = ctx.topics.get_subscription(&topic, &id).await.map_err(topic_error)?;
    output(json!({ "Attributes": attributes(ctx, &record) }))
}

pub async fn set_subscription_attributes(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: SubscriptionArnInput = parse(input)?;
    let (topic, id) = subscription(ctx, &input.subscription_arn)?;
    let name = input.attribute_name.filter(|a| !a.is_empty()).ok_or_else(|| errors::required("AttributeName"))?;
    let value = input.attribute_value.unwrap_or_default();
    own_redrive_target(ctx, &name, &value)?;
    ctx.topics.set_subscription_attribute(&topic, &id, &name, &value).await.map_err(topic_error)?;
    Ok(None)
}
