//! Queue actions: CreateQueue, GetQueueUrl, ListQueues, DeleteQueue, GetQueueAttributes,
//! SetQueueAttributes and PurgeQueue.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_core::BrokerError;
use sluice_core::broker::QueueView;
use sluice_core::name::validate_queue_name;
use sluice_store::StoreError;

use super::{Ctx, Page, is_fifo_name, output};
use crate::aws::common::AwsError;
use crate::aws::common::input::{Int, parse, required};
use crate::aws::sqs::queue_attributes::{self, Request};

type Outcome = Result<Option<Value>, AwsError>;

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct QueueUrlOutput {
    queue_url: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct CreateQueueInput {
    queue_name: Option<String>,
    attributes: Option<BTreeMap<String, String>>,
    /// Lowercase in the JSON protocol (a quirk of the model); `Tag.N` in Query.
    #[serde(rename = "tags", alias = "Tags")]
    tags: Option<BTreeMap<String, String>>,
}

pub async fn create_queue(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: CreateQueueInput = parse(input)?;
    let name = required(&input.queue_name, "QueueName")?;
    let attributes = input.attributes.unwrap_or_default();
    // A FIFO queue is asked for with `FifoQueue=true`, and its name must end in `.fifo`; a
    // standard queue's name may not (the dot is not among its characters).
    let fifo = queue_attributes::wants_fifo(&attributes);
    if fifo != is_fifo_name(name) {
        return Err(queue_name_error(fifo));
    }
    validate_queue_name(name).map_err(|_| queue_name_error(fifo))?;
    let stored = ctx.qualify(name).ok_or_else(|| queue_name_error(fifo))?;
    let name = stored.as_str();
    let mut config = queue_attributes::new_queue(&attributes, fifo, ctx.account())?;
    own_dead_letter(ctx, config.dead_letter.as_ref(), &attributes)?;
    match ctx.store().get_queue(name).await {
        Ok(existing) => return same_queue(ctx, &existing, &attributes),
        Err(StoreError::Broker(BrokerError::QueueNotFound(_))) => {}
        Err(e) => return Err(e.into()),
    }
    if ctx.state.sqs().deleted_recently(name, ctx.state.now_ms()) {
        return Err(AwsError::queue_deleted_recently());
    }
    ctx.check_create().await?;
    config.tags = input.tags.unwrap_or_default();
    match ctx.store().create_queue(name, config).await {
        Ok((view, _)) => output(QueueUrlOutput { queue_url: ctx.queue_url(&view.name) }),
        // Created by someone else since the look-up above.
        Err(StoreError::Broker(BrokerError::QueueExists(_))) => same_queue(ctx, &ctx.queue(name).await?, &attributes),
        Err(e) => Err(attribute_error(e, &attributes)),
    }
}

/// A `RedrivePolicy` naming another tenant's queue names no queue of this caller's.
fn own_dead_letter(
    ctx: &Ctx<'_>,
    dead_letter: Option<&sluice_core::DeadLetter>,
    attributes: &BTreeMap<String, String>,
) -> Result<(), AwsError> {
    match dead_letter {
        Some(d) if !ctx.tenant.owns(&d.queue) => Err(AwsError::invalid_value(
            "RedrivePolicy",
            attributes.get("RedrivePolicy").map_or("", String::as_str),
            "Dead letter target does not exist.",
        )),
        _ => Ok(()),
    }
}

/// AWS's refusal of a queue name, which for a FIFO queue also says the name must end in
/// `.fifo`.
fn queue_name_error(fifo: bool) -> AwsError {
    AwsError::invalid_parameter_value(if fifo {
        "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length"
    } else {
        "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"
    })
}

/// CreateQueue on an existing queue answers its URL when every attribute the request names
/// has the queue's value (attributes it does not name are not compared, as in AWS).
fn same_queue(ctx: &Ctx<'_>, existing: &QueueView, attributes: &BTreeMap<String, String>) -> Outcome {
    let current = &existing.attributes;
    for (name, value) in attributes {
        let one = BTreeMap::from([(name.clone(), value.clone())]);
        let patch = queue_attributes::patch(&one, Request::Create, current.fifo, ctx.account())?;
        // The scope is compared as the queue reports it, which SetQueueAttributes may have
        // changed since the creation fixed the one deduplication uses.
        let same = if name == "DeduplicationScope" {
            value == queue_attributes::reported_scope(current)
        } else {
            patch.apply_to(current) == *current
        };
        if !same {
            return Err(AwsError::queue_name_exists(name));
        }
    }
    output(QueueUrlOutput { queue_url: ctx.queue_url(&existing.name) })
}

/// A store refusal of new attributes, in SQS's words.
fn attribute_error(e: StoreError, attributes: &BTreeMap<String, String>) -> AwsError {
    match e {
        // The core's rule that a dead-letter queue is of its source's type (FIFO or standard).
        StoreError::Broker(BrokerError::Invalid(v))
            if v.field == "dead_letter.queue" && v.message.contains("dead-letter queue must be a") =>
        {
            AwsError::invalid_value(
                "RedrivePolicy",
                attributes.get("RedrivePolicy").map_or("", String::as_str),
                "Dead-letter queue must be same type of queue as the source..",
            )
        }
        StoreError::Broker(BrokerError::Invalid(v)) => queue_attributes::core_error(v),
        StoreError::Broker(BrokerError::DeadLetterQueueNotFound(_)) => AwsError::invalid_value(
            "RedrivePolicy",
            attributes.get("RedrivePolicy").map_or("", String::as_str),
            "Dead letter target does not exist.",
        ),
        other => other.into(),
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct GetQueueUrlInput {
    queue_name: Option<String>,
    #[serde(rename = "QueueOwnerAWSAccountId")]
    owner: Option<String>,
}

pub async fn get_queue_url(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: GetQueueUrlInput = parse(input)?;
    let name = required(&input.queue_name, "QueueName")?;
    if input.owner.as_deref().is_some_and(|owner| !owner.is_empty() && owner != ctx.account()) {
        return Err(AwsError::queue_does_not_exist());
    }
    let name = ctx.qualify(name).ok_or_else(AwsError::queue_does_not_exist)?;
    let view = ctx.queue(&name).await?;
    output(QueueUrlOutput { queue_url: ctx.queue_url(&view.name) })
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct ListQueuesInput {
    queue_name_prefix: Option<String>,
    max_results: Option<Int>,
    next_token: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct ListQueuesOutput {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    queue_urls: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_token: Option<String>,
}

pub async fn list_queues(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: ListQueuesInput = parse(input)?;
    let page = Page::read(&input.max_results, &input.next_token)?;
    let Some(prefix) = ctx.qualify(&input.queue_name_prefix.unwrap_or_default()) else {
        return output(ListQueuesOutput { queue_urls: Vec::new(), next_token: None });
    };
    // One more than asked tells whether another page follows.
    let queues = ctx.tenant.list_queues(ctx.store(), &prefix, page.after.clone(), page.limit() + 1).await?;
    let mut names: Vec<String> = queues.into_iter().map(|q| q.name).collect();
    let next_token = page.cut(&mut names);
    output(ListQueuesOutput { queue_urls: names.iter().map(|n| ctx.queue_url(n)).collect(), next_token })
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct QueueUrlInput {
    queue_url: Option<String>,
}

pub async fn delete_queue(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: QueueUrlInput = parse(input)?;
    let name = ctx.queue_name(&input.queue_url)?;
    ctx.store().delete_queue(&name).await?;
    ctx.state.services.schemas().forget_queue(&name);
    ctx.state.sqs().record_delete(&name, ctx.state.now_ms());
    Ok(None)
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct GetQueueAttributesInput {
    queue_url: Option<String>,
    attribute_names: Option<Vec<String>>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct AttributesOutput {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    attributes: BTreeMap<String, String>,
}

pub async fn get_queue_attributes(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: GetQueueAttributesInput = parse(input)?;
    let name = ctx.queue_name(&input.queue_url)?;
    let view = ctx.queue(&name).await?;
    let all = queue_attributes::render(&view, ctx.region(), ctx.account());
    let attributes = queue_attributes::select(all, input.attribute_names.as_deref().unwrap_or_default())?;
    output(AttributesOutput { attributes })
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct SetQueueAttributesInput {
    queue_url: Option<String>,
    attributes: Option<BTreeMap<String, String>>,
}

pub async fn set_queue_attributes(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: SetQueueAttributesInput = parse(input)?;
    let name = ctx.queue_name(&input.queue_url)?;
    // Which attributes are allowed depends on the queue's type, so the queue comes first (a
    // missing queue is also reported before a bad parameter, as AWS does).
    let view = ctx.queue(&name).await?;
    let Some(attributes) = input.attributes else {
        return Err(AwsError::missing_parameter("Attributes"));
    };
    let patch = queue_attributes::patch(&attributes, Request::Set, view.attributes.fifo, ctx.account())?;
    own_dead_letter(ctx, patch.core.dead_letter.as_ref().and_then(Option::as_ref), &attributes)?;
    queue_attributes::check_fifo(&patch.apply_to(&view.attributes))?;
    ctx.store().update_queue(&name, patch.core).await.map_err(|e| attribute_error(e, &attributes))?;
    Ok(None)
}

pub async fn purge_queue(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: QueueUrlInput = parse(input)?;
    let name = ctx.queue_name(&input.queue_url)?;
    if !ctx.state.sqs().start_purge(&name, ctx.state.now_ms()) {
        return Err(ctx.after_queue_check(&name, AwsError::purge_in_progress(&name)).await);
    }
    if let Err(e) = ctx.store().purge_queue(&name).await {
        ctx.state.sqs().cancel_purge(&name);
        return Err(e.into());
    }
    Ok(None)
}
