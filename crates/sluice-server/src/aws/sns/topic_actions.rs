//! Topic actions: CreateTopic, DeleteTopic, ListTopics, Get/SetTopicAttributes, and the tag
//! actions (SNS tags topics only).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::delivery_policy;
use super::errors::{self, invalid_parameter, topic_error};
use super::{Ctx, LIST_PAGE_MAX, decode_token, lenient, output, parse};
use crate::aws::common::AwsError;
use crate::paging::cut_page;
use sluice_services::topics::{TopicError, TopicView, fifo_topic_value};

type Outcome = Result<Option<Value>, AwsError>;

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase")]
pub struct Tag {
    pub key: String,
    #[serde(default)]
    pub value: String,
}

/// Tags as a map; SNS refuses a key given twice.
fn tag_map(tags: Vec<Tag>) -> Result<BTreeMap<String, String>, AwsError> {
    let mut map = BTreeMap::new();
    for tag in tags {
        if map.insert(tag.key, tag.value).is_some() {
            return Err(invalid_parameter("Invalid parameter: Duplicated keys are not allowed."));
        }
    }
    Ok(map)
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct CreateTopicInput {
    name: Option<String>,
    #[serde(deserialize_with = "lenient")]
    attributes: BTreeMap<String, String>,
    #[serde(deserialize_with = "lenient")]
    tags: Vec<Tag>,
    /// Accepted and ignored: Sluice does not inspect message contents.
    #[allow(dead_code)]
    data_protection_policy: Option<String>,
}

pub async fn create_topic(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let mut input: CreateTopicInput = parse(input)?;
    let name = ctx
        .tenant
        .name("Name", &input.name.unwrap_or_default())
        .map_err(|_| super::errors::invalid_parameter("Invalid parameter: Topic Name"))?;
    let fifo = match input.attributes.remove("FifoTopic") {
        Some(value) => fifo_topic_value(&value).map_err(|e| topic_error(e.into()))?,
        None => false,
    };
    let tags = tag_map(input.tags)?;
    ctx.check_create(&name).await?;
    let (record, _) = ctx.topics.create_topic(&name, fifo, input.attributes, tags).await.map_err(topic_error)?;
    output(json!({ "TopicArn": ctx.topics.arns().topic(&record.name) }))
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct TopicArnInput {
    topic_arn: Option<String>,
}

/// Deleting a topic that does not exist succeeds, as in SNS.
pub async fn delete_topic(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: TopicArnInput = parse(input)?;
    let name = match ctx.topic("TopicArn", &input.topic_arn) {
        Ok(name) => name,
        Err(e) if e.code == "NotFound" => return Ok(None),
        Err(e) => return Err(e),
    };
    ctx.topics.delete_topic(&name).await.map_err(topic_error)?;
    Ok(None)
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct ListInput {
    next_token: Option<String>,
}

pub async fn list_topics(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: ListInput = parse(input)?;
    let after = decode_token(&input.next_token)?;
    let fetch = |after: Option<String>, n| async move { ctx.topics.list_topics("", after.as_deref(), n).await };
    let mut topics = ctx
        .tenant
        .keep_own(after, LIST_PAGE_MAX + 1, fetch, |t| (t.name.clone(), t.name.clone()))
        .await
        .map_err(topic_error)?;
    let next = cut_page(&mut topics, LIST_PAGE_MAX, |t| t.name.clone());
    let arns: Vec<Value> = topics.iter().map(|t| json!({ "TopicArn": ctx.topics.arns().topic(&t.name) })).collect();
    let mut out = json!({ "Topics": arns });
    if let Some(token) = next {
        out["NextToken"] = json!(token);
    }
    output(out)
}

/// The access policy SNS gives a new topic.
fn default_policy(arn: &str, account: &str) -> String {
    json!({
        "Version": "2008-10-17",
        "Id": "__default_policy_ID",
        "Statement": [{
            "Sid": "__default_statement_ID",
            "Effect": "Allow",
            "Principal": { "AWS": "*" },
            "Action": [
                "SNS:GetTopicAttributes",
                "SNS:SetTopicAttributes",
                "SNS:AddPermission",
                "SNS:RemovePermission",
                "SNS:DeleteTopic",
                "SNS:Subscribe",
                "SNS:ListSubscriptionsByTopic",
                "SNS:Publish"
            ],
            "Resource": arn,
            "Condition": { "StringEquals": { "AWS:SourceOwner": account } }
        }]
    })
    .to_string()
}

/// Every attribute `GetTopicAttributes` shows: the ones set, and SNS's computed ones.
pub fn topic_attributes(ctx: &Ctx<'_>, view: &TopicView) -> BTreeMap<String, String> {
    let record = &view.record;
    let mut attributes = record.attributes.clone();
    attributes.insert("TopicArn".into(), view.arn.clone());
    attributes.insert("Owner".into(), ctx.account.to_string());
    attributes.entry("Policy".into()).or_insert_with(|| default_policy(&view.arn, ctx.account));
    attributes.entry("DisplayName".into()).or_default();
    attributes.insert("SubscriptionsConfirmed".into(), view.subscriptions_confirmed.to_string());
    attributes.insert("SubscriptionsPending".into(), view.subscriptions_pending.to_string());
    attributes.insert("SubscriptionsDeleted".into(), "0".into());
    // SNS shows its normalised form of the policy set, not the text.
    match record.attributes.get("DeliveryPolicy").and_then(|text| delivery_policy::topic_policy(text)) {
        Some(shown) => attributes.insert("DeliveryPolicy".into(), shown),
        None => attributes.remove("DeliveryPolicy"),
    };
    let effective =
        delivery_policy::effective_topic_policy(record.attributes.get("DeliveryPolicy").map(String::as_str));
    attributes.insert("EffectiveDeliveryPolicy".into(), effective);
    if record.fifo {
        attributes.insert("FifoTopic".into(), "true".into());
        attributes.entry("ContentBasedDeduplication".into()).or_insert_with(|| "false".into());
    }
    attributes
}

pub async fn get_topic_attributes(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: TopicArnInput = parse(input)?;
    let name = ctx.topic("TopicArn", &input.topic_arn)?;
    let view = ctx.topics.get_topic(&name).await.map_err(topic_error)?;
    output(json!({ "Attributes": topic_attributes(ctx, &view) }))
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct SetTopicAttributesInput {
    topic_arn: Option<String>,
    attribute_name: Option<String>,
    attribute_value: Option<String>,
}

pub async fn set_topic_attributes(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: SetTopicAttributesInput = parse(input)?;
    let name = ctx.topic("TopicArn", &input.topic_arn)?;
    let attribute = input.attribute_name.filter(|a| !a.is_empty()).ok_or_else(|| errors::required("AttributeName"))?;
    let value = input.attribute_value.unwrap_or_default();
    ctx.topics.set_topic_attribute(&name, &attribute, &value).await.map_err(topic_error)?;
    Ok(None)
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct TagInput {
    resource_arn: Option<String>,
    #[serde(deserialize_with = "lenient")]
    tags: Vec<Tag>,
    #[serde(deserialize_with = "lenient")]
    tag_keys: Vec<String>,
}

/// The topic a tag action names; a topic that does not exist is `ResourceNotFound`.
fn tagged_topic(ctx: &Ctx<'_>, arn: &Option<String>) -> Result<String, AwsError> {
    let arn = arn.as_deref().unwrap_or("");
    let name = ctx
        .topics
        .arns()
        .parse_topic(arn)
        .map_err(|e| errors::arn_error("ResourceArn", e, errors::resource_not_found))?;
    // Another tenant's topic is no resource of this caller's.
    ctx.own(name).ok_or_else(errors::resource_not_found)
}

fn tag_error(e: TopicError) -> AwsError {
    match e {
        TopicError::TopicNotFound(_) => errors::resource_not_found(),
        other => topic_error(other),
    }
}

pub async fn tag_resource(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: TagInput = parse(input)?;
    let name = tagged_topic(ctx, &input.resource_arn)?;
    let tags = tag_map(input.tags)?;
    ctx.topics.tag_topic(&name, &tags).await.map_err(tag_error)?;
    output(json!({}))
}

pub async fn untag_resource(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: TagInput = parse(input)?;
    let name = tagged_topic(ctx, &input.resource_arn)?;
    ctx.topics.untag_topic(&name, &input.tag_keys).await.map_err(tag_error)?;
    output(json!({}))
}

pub async fn list_tags_for_resource(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: TagInput = parse(input)?;
    let name = tagged_topic(ctx, &input.resource_arn)?;
    let view = ctx.topics.get_topic(&name).await.map_err(tag_error)?;
    let tags: Vec<Tag> = view.record.tags.into_iter().map(|(key, value)| Tag { key, value }).collect();
    output(json!({ "Tags": tags }))
}
