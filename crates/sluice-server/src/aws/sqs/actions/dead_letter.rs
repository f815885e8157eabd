//! ListDeadLetterSourceQueues: the queues whose redrive policy names this queue.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Ctx, Page, output};
use crate::aws::common::AwsError;
use crate::aws::common::input::{Int, parse};

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct Input {
    queue_url: Option<String>,
    max_results: Option<Int>,
    next_token: Option<String>,
}

#[derive(Serialize)]
struct Output {
    /// Lowercase in the model, and always present (possibly empty).
    #[serde(rename = "queueUrls")]
    queue_urls: Vec<String>,
    #[serde(rename = "NextToken", skip_serializing_if = "Option::is_none")]
    next_token: Option<String>,
}

pub async fn list_dead_letter_source_queues(ctx: &Ctx<'_>, input: Value) -> Result<Option<Value>, AwsError> {
    let input: Input = parse(input)?;
    let name = ctx.queue_name(&input.queue_url)?;
    let page = match Page::read(&input.max_results, &input.next_token) {
        Ok(p) => p,
        Err(e) => return Err(ctx.after_queue_check(&name, e).await),
    };
    ctx.queue(&name).await?;
    let mut sources: Vec<String> = ctx
        .all_queues()
        .await?
        .into_iter()
        .filter(|q| q.attributes.dead_letter.as_ref().is_some_and(|dl| dl.queue == name))
        .map(|q| q.name)
        .filter(|n| page.after.as_ref().is_none_or(|a| n > a))
        .collect();
    let next_token = page.cut(&mut sources);
    output(Output { queue_urls: sources.iter().map(|n| ctx.queue_url(n)).collect(), next_token })
}
