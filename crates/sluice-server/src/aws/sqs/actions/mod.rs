//! The 23 SQS actions: a closed enum, the dispatch `match`, and the context every action gets.
//! One file per resource: queues, messages, batches, tags, permissions, dead-letter sources
//! and move tasks.

mod batch;
mod dead_letter;
mod messages;
mod move_tasks;
mod permissions;
mod queues;
mod send;
mod tags;

use axum::http::request::Parts;
use serde_json::Value;
use sluice_core::broker::QueueView;
use sluice_store::Store;

use super::limits::LIST_RESULTS_MAX;
use super::urls;
use crate::AppState;
use crate::aws::common::AwsError;
use crate::aws::common::dispatch::{aws_actions, host_header};
use crate::aws::common::input::{Int, optional_int, signed};
use crate::paging::{cut_page, decode_page_token};
use crate::tenant::Tenant;

aws_actions! {
    /// Every action of the SQS API 2012-11-05.
    AddPermission,
    CancelMessageMoveTask,
    ChangeMessageVisibility,
    ChangeMessageVisibilityBatch,
    CreateQueue,
    DeleteMessage,
    DeleteMessageBatch,
    DeleteQueue,
    GetQueueAttributes,
    GetQueueUrl,
    ListDeadLetterSourceQueues,
    ListMessageMoveTasks,
    ListQueueTags,
    ListQueues,
    PurgeQueue,
    ReceiveMessage,
    RemovePermission,
    SendMessage,
    SendMessageBatch,
    SetQueueAttributes,
    StartMessageMoveTask,
    TagQueue,
    UntagQueue,
}

/// Runs one action; `Ok(None)` for actions without an output.
pub async fn dispatch(ctx: &Ctx<'_>, action: &str, input: Value) -> Result<Option<Value>, AwsError> {
    let action = Action::parse(action).ok_or_else(|| AwsError::invalid_action(action))?;
    match action {
        Action::CreateQueue => queues::create_queue(ctx, input).await,
        Action::GetQueueUrl => queues::get_queue_url(ctx, input).await,
        Action::ListQueues => queues::list_queues(ctx, input).await,
        Action::DeleteQueue => queues::delete_queue(ctx, input).await,
        Action::GetQueueAttributes => queues::get_queue_attributes(ctx, input).await,
        Action::SetQueueAttributes => queues::set_queue_attributes(ctx, input).await,
        Action::PurgeQueue => queues::purge_queue(ctx, input).await,
        Action::SendMessage => send::send_message(ctx, input).await,
        Action::ReceiveMessage => messages::receive_message(ctx, input).await,
        Action::DeleteMessage => messages::delete_message(ctx, input).await,
        Action::ChangeMessageVisibility => messages::change_message_visibility(ctx, input).await,
        Action::SendMessageBatch => batch::send_message_batch(ctx, input).await,
        Action::DeleteMessageBatch => batch::delete_message_batch(ctx, input).await,
        Action::ChangeMessageVisibilityBatch => batch::change_message_visibility_batch(ctx, input).await,
        Action::TagQueue => tags::tag_queue(ctx, input).await,
        Action::UntagQueue => tags::untag_queue(ctx, input).await,
        Action::ListQueueTags => tags::list_queue_tags(ctx, input).await,
        Action::AddPermission => permissions::add_permission(ctx, input).await,
        Action::RemovePermission => permissions::remove_permission(ctx, input).await,
        Action::ListDeadLetterSourceQueues => dead_letter::list_dead_letter_source_queues(ctx, input).await,
        Action::StartMessageMoveTask => move_tasks::start_message_move_task(ctx, input).await,
        Action::ListMessageMoveTasks => move_tasks::list_message_move_tasks(ctx, input).await,
        Action::CancelMessageMoveTask => move_tasks::cancel_message_move_task(ctx, input).await,
    }
}

/// Whether the SQS layer applies FIFO rules to a queue's messages (SendMessage's required
/// `MessageGroupId`, `SequenceNumber`, `ReceiveRequestAttemptId`, expired FIFO handles):
/// decided by the name, without a store call on the hot path. Through SQS a FIFO queue's name
/// always ends in `.fifo`, and the core refuses that suffix to a standard queue. A FIFO queue
/// created through the native API without the suffix is treated as standard by these rules
/// (the core still enforces its own: group id, dedup, order).
pub fn is_fifo_name(name: &str) -> bool {
    name.ends_with(sluice_core::limits::FIFO_SUFFIX)
}

/// What an action needs beyond its input: the server's state and configuration, and the
/// request's host (queue URLs echo it), path (a queue URL itself) and caller.
pub struct Ctx<'a> {
    pub state: &'a AppState,
    host: String,
    path: String,
    /// The access key id the request was signed with, if any.
    pub caller: Option<String>,
    /// The X-Ray header (`X-Amzn-Trace-Id`), which SQS keeps as a sent message's
    /// `AWSTraceHeader` when the message does not carry one itself.
    pub trace_header: Option<String>,
    /// The caller's key's tenant: queue names are qualified with it, and a URL or ARN of
    /// another tenant's queue names no queue (see `crate::tenant`).
    pub tenant: Tenant,
}

impl<'a> Ctx<'a> {
    pub fn new(state: &'a AppState, parts: &Parts, caller: Option<String>, tenant: Tenant) -> Ctx<'a> {
        let host = host_header(parts)
            .or_else(|| parts.uri.authority().map(|a| a.to_string()))
            .unwrap_or_else(|| "localhost".to_string());
        let trace_header = parts
            .headers
            .get("x-amzn-trace-id")
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(str::to_string);
        Ctx { state, host, path: parts.uri.path().to_string(), caller, trace_header, tenant }
    }

    pub fn store(&self) -> &dyn Store {
        self.state.store().as_ref()
    }

    pub fn account(&self) -> &str {
        &self.state.config.account
    }

    pub fn region(&self) -> &str {
        &self.state.config.region
    }

    /// The `SenderId` of messages this request sends: the signing access key id, or the
    /// account when the request was not signed.
    pub fn sender(&self) -> &str {
        self.caller.as_deref().unwrap_or(self.account())
    }

    pub fn queue_url(&self, name: &str) -> String {
        urls::queue_url(self.state.scheme(), &self.host, self.account(), name)
    }

    pub fn queue_arn(&self, name: &str) -> String {
        urls::queue_arn(self.region(), self.account(), name)
    }

    /// The queue a request names through `QueueUrl` or its path.
    pub fn queue_name(&self, queue_url: &Option<String>) -> Result<String, AwsError> {
        let name = urls::queue_name(queue_url.as_deref(), &self.path, self.account())?;
        self.own(name).ok_or_else(AwsError::queue_does_not_exist)
    }

    /// Refuses a send of `bytes` past the tenant's `max_stored_bytes` (`RequestThrottled`).
    pub async fn check_write(&self, bytes: u64) -> Result<(), AwsError> {
        let tenants = self.state.services.tenants();
        tenants
            .check_write(&self.tenant.0, bytes)
            .await
            .map_err(|e| crate::aws::common::errors::tenant_refusal(false, e))
    }

    /// Refuses a new queue past the tenant's `max_resources` (`OverLimit`).
    pub async fn check_create(&self) -> Result<(), AwsError> {
        let tenants = self.state.services.tenants();
        tenants.check_create(&self.tenant.0).await.map_err(|e| crate::aws::common::errors::tenant_refusal(false, e))
    }

    /// A stored queue name from a URL or ARN, if it is the caller's tenant's.
    pub fn own(&self, stored: String) -> Option<String> {
        self.tenant.owns(&stored).then_some(stored)
    }

    /// The stored name of a `QueueName` parameter; one holding `~` is no valid name.
    pub fn qualify(&self, name: &str) -> Option<String> {
        self.tenant.0.qualify("QueueName", name).ok()
    }

    pub async fn queue(&self, name: &str) -> Result<QueueView, AwsError> {
        Ok(self.store().get_queue(name).await?)
    }

    /// Returns `e` unless the queue does not exist: AWS reports a missing queue before a bad
    /// parameter. Used where the parameters are checked before the store sees the queue, so
    /// that the usual path costs no extra store call.
    pub async fn after_queue_check(&self, name: &str, e: AwsError) -> AwsError {
        match self.queue(name).await {
            Ok(_) => e,
            Err(missing) => missing,
        }
    }

    /// Every queue of the caller's tenant, in name order.
    pub async fn all_queues(&self) -> Result<Vec<QueueView>, AwsError> {
        let page = sluice_core::limits::LIST_QUEUES_LIMIT_MAX as usize;
        let mut queues: Vec<QueueView> = Vec::new();
        loop {
            let after = queues.last().map(|q| q.name.clone());
            let batch = self.store().list_queues("", after.as_deref(), page).await?;
            let done = batch.len() < page;
            queues.extend(batch);
            if done {
                queues.retain(|q| self.tenant.owns(&q.name));
                return Ok(queues);
            }
        }
    }
}

/// Serialises an action's output. Outputs are plain structs of strings, numbers and maps, so
/// this cannot fail; were it to, the client gets an internal error rather than a panic.
pub fn output<T: serde::Serialize>(value: T) -> Result<Option<Value>, AwsError> {
    serde_json::to_value(value).map(Some).map_err(|e| {
        tracing::error!(error = %e, "an SQS output did not serialise");
        AwsError::internal()
    })
}

/// A list action's paging parameters. AWS returns at most 1,000 items, and pages (with a
/// `NextToken`) only when the client set `MaxResults`.
pub struct Page {
    max: Option<u64>,
    /// The last name of the previous page.
    pub after: Option<String>,
}

impl Page {
    pub fn read(max_results: &Option<Int>, next_token: &Option<String>) -> Result<Page, AwsError> {
        let max = optional_int(
            max_results,
            "MaxResults",
            1,
            signed(LIST_RESULTS_MAX),
            "MaxResults must be an integer between 1 and 1000.",
        )?;
        let after = next_token.as_deref().filter(|t| !t.is_empty()).map(decode_token).transpose()?;
        Ok(Page { max, after })
    }

    pub fn limit(&self) -> usize {
        self.max.unwrap_or(LIST_RESULTS_MAX) as usize
    }

    /// Cuts `names` (fetched with one more than `limit`) to the page, and the token of the
    /// next page if there is one and the client pages.
    pub fn cut(&self, names: &mut Vec<String>) -> Option<String> {
        cut_page(names, self.limit(), String::clone).filter(|_| self.max.is_some())
    }
}

/// The last name of the previous page, from an opaque page token (`crate::paging`).
pub fn decode_token(token: &str) -> Result<String, AwsError> {
    decode_page_token(token).ok_or_else(|| AwsError::invalid_parameter_value("Invalid NextToken value."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paging::encode_page_token;

    #[test]
    fn every_action_parses_by_name() {
        let names = [
            "AddPermission",
            "CancelMessageMoveTask",
            "ChangeMessageVisibility",
            "ChangeMessageVisibilityBatch",
            "CreateQueue",
            "DeleteMessage",
            "DeleteMessageBatch",
            "DeleteQueue",
            "GetQueueAttributes",
            "GetQueueUrl",
            "ListDeadLetterSourceQueues",
            "ListMessageMoveTasks",
            "ListQueueTags",
            "ListQueues",
            "PurgeQueue",
            "ReceiveMessage",
            "RemovePermission",
            "SendMessage",
            "SendMessageBatch",
            "SetQueueAttributes",
            "StartMessageMoveTask",
            "TagQueue",
            "UntagQueue",
        ];
        for name in names {
            assert!(Action::parse(name).is_some(), "{name}");
        }
        assert_eq!(Action::parse("FooBar"), None);
        assert_eq!(decode_token(&encode_page_token("q-1")).unwrap(), "q-1");
        assert!(decode_token("***").is_err());
    }
}
