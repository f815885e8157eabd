//! Message move tasks (DLQ redrive): StartMessageMoveTask, ListMessageMoveTasks and
//! CancelMessageMoveTask, on the same redrive task manager the native API uses.
//!
//! A task handle is opaque to clients; Sluice's is base64 of
//! `{"taskId": "...", "sourceArn": "...", "startedTimestamp": ...}`, so that cancelling can
//! tell a missing source queue from a missing task (AWS answers each differently), and a
//! handle from before a restart (task ids start again at 1) cannot cancel a newer task.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sluice_api::ErrorCode;

use super::{Ctx, output};
use sluice_services::redrive::{Status, TaskInfo};

use crate::aws::common::AwsError;
use crate::aws::common::input::{Int, optional_int, parse, required, signed};
use crate::aws::sqs::limits::{MOVE_TASK_LIST_MAX, MOVE_TASK_RATE_MAX};
use crate::aws::sqs::urls::{self, ArnError};
use crate::error::ApiError;

type Outcome = Result<Option<Value>, AwsError>;

/// The queue an ARN parameter names; it must exist.
async fn existing_queue(ctx: &Ctx<'_>, arn: &str, parameter: &str) -> Result<String, AwsError> {
    let missing = || {
        AwsError::resource_not_found(format!(
            "The resource that you specified for the {parameter} parameter doesn't exist."
        ))
    };
    let name = match urls::queue_name_from_arn(arn, ctx.account()) {
        Ok(name) => ctx.own(name.to_string()).ok_or_else(missing)?,
        Err(ArnError::OtherAccount) => return Err(missing()),
        Err(ArnError::Malformed) => {
            return Err(AwsError::invalid_parameter_value(format!(
                "You must use this format to specify the {parameter}: arn:<partition>:<service>:<region>:<account-id>:<resource-id>"
            )));
        }
    };
    match ctx.queue(&name).await {
        Ok(_) => Ok(name),
        Err(e) if e.shape == "QueueDoesNotExist" => Err(missing()),
        Err(e) => Err(e),
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct StartInput {
    source_arn: Option<String>,
    destination_arn: Option<String>,
    max_number_of_messages_per_second: Option<Int>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct StartOutput {
    task_handle: String,
}

pub async fn start_message_move_task(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: StartInput = parse(input)?;
    let source_arn = required(&input.source_arn, "SourceArn")?;
    let source = existing_queue(ctx, source_arn, "SourceArn").await?;
    let is_dead_letter_queue =
        ctx.all_queues().await?.iter().any(|q| q.attributes.dead_letter.as_ref().is_some_and(|dl| dl.queue == source));
    if !is_dead_letter_queue {
        return Err(AwsError::invalid_parameter_value("Source queue must be configured as a Dead Letter Queue."));
    }
    let destination = match input.destination_arn.as_deref().filter(|a| !a.is_empty()) {
        Some(arn) => Some(existing_queue(ctx, arn, "DestinationArn").await?),
        None => None,
    };
    let rate = optional_int(
        &input.max_number_of_messages_per_second,
        "MaxNumberOfMessagesPerSecond",
        1,
        signed(MOVE_TASK_RATE_MAX),
        "Must be between 1 and 500, if provided.",
    )?;
    let rate = rate.map(|r| u32::try_from(r).unwrap_or(u32::MAX));
    let task = ctx.state.redrives().start(&source, destination, rate).await.map_err(ApiError::from);
    let task = task.map_err(|e| match e.code {
        ErrorCode::RedriveRunning => AwsError::invalid_parameter_value(
            "There is already a task running. Only one active task is allowed for a source queue arn at a given time.",
        ),
        ErrorCode::QueueNotFound => {
            AwsError::resource_not_found("The resource that you specified for the SourceArn parameter doesn't exist.")
        }
        ErrorCode::ShuttingDown
        | ErrorCode::StorePoisoned
        | ErrorCode::StoreUnavailable
        | ErrorCode::InsufficientStorage => AwsError::service_unavailable(),
        _ => AwsError::invalid_parameter_value(e.message),
    })?;
    output(StartOutput { task_handle: encode_handle(&task, &ctx.queue_arn(&source)) })
}

fn encode_handle(task: &TaskInfo, source_arn: &str) -> String {
    let handle =
        json!({ "taskId": task.id.to_string(), "sourceArn": source_arn, "startedTimestamp": task.started_at_ms });
    STANDARD.encode(handle.to_string())
}

/// Task id, source ARN and start time of a handle this server issued.
fn decode_handle(handle: &str) -> Option<(u64, String, u64)> {
    let bytes = STANDARD.decode(handle.as_bytes()).ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    let id = value.get("taskId")?.as_str()?.parse().ok()?;
    let source = value.get("sourceArn")?.as_str()?.to_string();
    let started = value.get("startedTimestamp")?.as_u64()?;
    Some((id, source, started))
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct ListInput {
    source_arn: Option<String>,
    max_results: Option<Int>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct ListOutput {
    results: Vec<Entry>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Entry {
    /// Only while the task runs, as in AWS.
    #[serde(skip_serializing_if = "Option::is_none")]
    task_handle: Option<String>,
    status: &'static str,
    source_arn: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    destination_arn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_number_of_messages_per_second: Option<u32>,
    approximate_number_of_messages_moved: u64,
    approximate_number_of_messages_to_move: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure_reason: Option<&'static str>,
    started_timestamp: u64,
}

/// The tasks of one source queue, most recent first (one unless `MaxResults` says more).
pub async fn list_message_move_tasks(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: ListInput = parse(input)?;
    let source_arn = required(&input.source_arn, "SourceArn")?;
    let source = existing_queue(ctx, source_arn, "SourceArn").await?;
    let max = optional_int(
        &input.max_results,
        "MaxResults",
        1,
        signed(MOVE_TASK_LIST_MAX),
        "You must enter a number that's between 1 and 10.",
    )?
    .unwrap_or(1) as usize;
    let arn = ctx.queue_arn(&source);
    let results = ctx
        .state
        .redrives()
        .list(Some(&source))
        .into_iter()
        // Newest first, as AWS lists them.
        .rev()
        .take(max)
        .map(|t| Entry {
            task_handle: (t.status == Status::Running).then(|| encode_handle(&t, &arn)),
            status: status_name(t.status),
            source_arn: arn.clone(),
            destination_arn: t.to.as_deref().map(|d| ctx.queue_arn(d)),
            max_number_of_messages_per_second: t.requested_rate,
            approximate_number_of_messages_moved: t.moved,
            approximate_number_of_messages_to_move: t.total,
            failure_reason: t.failure.clone().map(|f| failure_reason(ApiError::from(f).code)),
            started_timestamp: t.started_at_ms,
        })
        .collect();
    output(ListOutput { results })
}

fn status_name(status: Status) -> &'static str {
    match status {
        Status::Running => "RUNNING",
        Status::Completed => "COMPLETED",
        Status::Cancelled => "CANCELLED",
        Status::Failed => "FAILED",
    }
}

/// AWS reports the error code that failed a task, e.g. a destination deleted meanwhile.
fn failure_reason(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::QueueNotFound => "AWS.SimpleQueueService.NonExistentQueue",
        ErrorCode::StorePoisoned
        | ErrorCode::StoreUnavailable
        | ErrorCode::ShuttingDown
        | ErrorCode::InsufficientStorage => "ServiceUnavailable",
        _ => "InternalFailure",
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct CancelInput {
    task_handle: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct CancelOutput {
    approximate_number_of_messages_moved: u64,
}

pub async fn cancel_message_move_task(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: CancelInput = parse(input)?;
    let handle = required(&input.task_handle, "TaskHandle")?;
    let (id, source_arn, started_at_ms) = decode_handle(handle)
        .ok_or_else(|| AwsError::invalid_parameter_value("Value for parameter TaskHandle is invalid."))?;
    let source = existing_queue(ctx, &source_arn, "SourceArn").await?;
    let task = ctx
        .state
        .redrives()
        .get(id)
        .filter(|t| t.source == source && t.started_at_ms == started_at_ms)
        .ok_or_else(|| AwsError::resource_not_found("Task does not exist."))?;
    if task.status != Status::Running {
        return Err(AwsError::invalid_parameter_value("Only a task that is in the RUNNING state can be cancelled."));
    }
    let cancelled =
        ctx.state.redrives().cancel(id).ok_or_else(|| AwsError::resource_not_found("Task does not exist."))?;
    output(CancelOutput { approximate_number_of_messages_moved: cancelled.moved })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_and_garbage_is_refused() {
        let task = TaskInfo {
            id: 7,
            source: "dlq".into(),
            to: None,
            max_per_second: 500,
            requested_rate: None,
            status: Status::Running,
            moved: 0,
            failed: 0,
            total: 3,
            started_at_ms: 1_700_000_000_000,
            finished_at_ms: None,
            error: None,
            failure: None,
        };
        let handle = encode_handle(&task, "arn:aws:sqs:us-east-1:000000000000:dlq");
        assert_eq!(
            decode_handle(&handle),
            Some((7, "arn:aws:sqs:us-east-1:000000000000:dlq".to_string(), 1_700_000_000_000))
        );
        assert_eq!(decode_handle("garbage"), None);
        assert_eq!(decode_handle(&STANDARD.encode("{}")), None);
    }
}
