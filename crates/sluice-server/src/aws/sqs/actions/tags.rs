//! Tag actions: TagQueue, UntagQueue and ListQueueTags, on the queue's core tags.
//!
//! The store updates a queue's tags as a whole, so tagging reads the tags, changes them and
//! writes them back; two clients tagging one queue at the same instant can lose one change.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_core::{BrokerError, QueueAttributesPatch};
use sluice_store::StoreError;

use super::{Ctx, output};
use crate::aws::common::AwsError;
use crate::aws::common::input::parse;
use crate::aws::sqs::queue_attributes;

type Outcome = Result<Option<Value>, AwsError>;

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct TagQueueInput {
    queue_url: Option<String>,
    tags: Option<BTreeMap<String, String>>,
}

/// `TagQueue` without tags and `UntagQueue` without keys are `MissingParameter`, whichever
/// protocol carried them: the Query protocol cannot express an empty map at all (boto3 sends
/// nothing for `Tags={}`), and AWS's JSON front end answers as its Query one does.
pub async fn tag_queue(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: TagQueueInput = parse(input)?;
    let name = ctx.queue_name(&input.queue_url)?;
    let Some(new) = input.tags.filter(|tags| !tags.is_empty()) else {
        return Err(ctx.after_queue_check(&name, AwsError::missing_parameter("Tags")).await);
    };
    let mut tags = ctx.queue(&name).await?.attributes.tags;
    tags.extend(new);
    write(ctx, &name, tags).await
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct UntagQueueInput {
    queue_url: Option<String>,
    tag_keys: Option<Vec<String>>,
}

pub async fn untag_queue(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: UntagQueueInput = parse(input)?;
    let name = ctx.queue_name(&input.queue_url)?;
    let Some(keys) = input.tag_keys.filter(|keys| !keys.is_empty()) else {
        return Err(ctx.after_queue_check(&name, AwsError::missing_parameter("TagKeys")).await);
    };
    let mut tags = ctx.queue(&name).await?.attributes.tags;
    // Removing a key the queue does not have is not an error.
    for key in &keys {
        tags.remove(key);
    }
    write(ctx, &name, tags).await
}

async fn write(ctx: &Ctx<'_>, name: &str, tags: BTreeMap<String, String>) -> Outcome {
    let patch = QueueAttributesPatch { tags: Some(tags), ..Default::default() };
    match ctx.store().update_queue(name, patch).await {
        Ok(_) => Ok(None),
        Err(StoreError::Broker(BrokerError::Invalid(v))) => Err(queue_attributes::core_error(v)),
        Err(e) => Err(e.into()),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct ListQueueTagsOutput {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    tags: BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct QueueUrlInput {
    queue_url: Option<String>,
}

pub async fn list_queue_tags(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: QueueUrlInput = parse(input)?;
    let name = ctx.queue_name(&input.queue_url)?;
    let tags = ctx.queue(&name).await?.attributes.tags;
    output(ListQueueTagsOutput { tags })
}
