//! Message actions: ReceiveMessage, DeleteMessage and ChangeMessageVisibility, and the SQS
//! meaning of each store answer for a receipt handle (shared with the batch forms).

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_core::EntryError;
use sluice_core::message::AttributeData;
use sluice_store::{ReceiveRequest, ReceivedMessage, VisibilityRule};

use super::send::{DEDUP_ID, SENDER_ID};
use super::{Ctx, is_fifo_name, output};
use crate::aws::common::AwsError;
use crate::aws::common::input::{Int, optional_int, parse, required, signed};
use crate::aws::common::message_attributes::{self, TRACE_HEADER};
use crate::aws::sqs::limits::{
    RECEIVE_ATTEMPT_ID_LEN_MAX, RECEIVE_MESSAGES_MAX, VISIBILITY_TIMEOUT_SECONDS_MAX, WAIT_SECONDS_MAX,
};
use crate::aws::sqs::md5;
use crate::aws::sqs::receipt_error;
use sluice_services::sqs::Attempt;

type Outcome = Result<Option<Value>, AwsError>;

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct ReceiveMessageInput {
    queue_url: Option<String>,
    attribute_names: Option<Vec<String>>,
    message_system_attribute_names: Option<Vec<String>>,
    message_attribute_names: Option<Vec<String>>,
    max_number_of_messages: Option<Int>,
    visibility_timeout: Option<Int>,
    wait_time_seconds: Option<Int>,
    /// FIFO only: AWS ignores it on standard queues, and so does Sluice.
    receive_request_attempt_id: Option<String>,
}

#[derive(Serialize)]
struct ReceiveMessageOutput {
    #[serde(rename = "Messages", skip_serializing_if = "Vec::is_empty")]
    messages: Vec<MessageOutput>,
}

#[derive(Serialize)]
struct MessageOutput {
    #[serde(rename = "MessageId")]
    message_id: String,
    #[serde(rename = "ReceiptHandle")]
    receipt_handle: String,
    #[serde(rename = "MD5OfBody")]
    md5_of_body: String,
    #[serde(rename = "Body")]
    body: String,
    #[serde(rename = "Attributes", skip_serializing_if = "BTreeMap::is_empty")]
    attributes: BTreeMap<&'static str, String>,
    #[serde(rename = "MD5OfMessageAttributes", skip_serializing_if = "Option::is_none")]
    md5_of_message_attributes: Option<String>,
    #[serde(rename = "MessageAttributes", skip_serializing_if = "Option::is_none")]
    message_attributes: Option<Value>,
}

pub async fn receive_message(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: ReceiveMessageInput = parse(input)?;
    let name = ctx.queue_name(&input.queue_url)?;
    let fifo = is_fifo_name(&name);
    let attempt_id = input.receive_request_attempt_id.as_deref().filter(|_| fifo);
    let checked = receive_request(&input).and_then(|request| {
        attempt_id.map_or(Ok(()), check_attempt_id)?;
        Ok(request)
    });
    let request = match checked {
        Ok(r) => r,
        Err(e) => return Err(ctx.after_queue_check(&name, e).await),
    };
    let received = match attempt_id {
        Some(id) => receive_attempt(ctx, &name, id, request).await?,
        None => ctx.store().receive(&name, request).await?,
    };
    let mut system_names = input.attribute_names.unwrap_or_default();
    system_names.extend(input.message_system_attribute_names.unwrap_or_default());
    let attribute_names = input.message_attribute_names.unwrap_or_default();
    let messages = received.iter().map(|r| render(ctx, r, &system_names, &attribute_names, fifo)).collect();
    output(ReceiveMessageOutput { messages })
}

/// `ReceiveRequestAttemptId`: 1 to 128 ASCII letters, digits and punctuation.
fn check_attempt_id(id: &str) -> Result<(), AwsError> {
    let ok = !id.is_empty()
        && id.chars().count() <= RECEIVE_ATTEMPT_ID_LEN_MAX
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c.is_ascii_punctuation());
    if ok {
        return Ok(());
    }
    Err(AwsError::invalid_value(
        "ReceiveRequestAttemptId",
        id,
        "ReceiveRequestAttemptId can only include alphanumeric and punctuation characters. 1 to 128 in length.",
    ))
}

/// A FIFO receive with an attempt id. The first call receives and remembers the answer; a
/// retry within five minutes gets the same messages and receipt handles again, with their
/// visibility timeout restarted (as AWS documents), provided that each is still held by that
/// receive: once one was deleted, released, received again or its visibility timeout passed,
/// the receive is not retryable and the retry is refused as AWS refuses it.
async fn receive_attempt(
    ctx: &Ctx<'_>,
    queue: &str,
    id: &str,
    request: ReceiveRequest,
) -> Result<Vec<ReceivedMessage>, AwsError> {
    let recalled = ctx.state.sqs().attempts().recall(queue, id, ctx.state.now_ms());
    if let Some(attempt) = recalled {
        let entries = attempt.messages.iter().map(|m| (m.receipt.clone(), attempt.visibility_ms)).collect();
        let results = ctx.store().change_visibility(queue, entries, VisibilityRule::Native).await?;
        if results.iter().all(Result::is_ok) {
            return Ok(attempt.messages);
        }
        ctx.state.sqs().attempts().discard(queue, id);
        return Err(AwsError::invalid_value(
            "ReceiveRequestAttemptId",
            id,
            "The receiveRequestAttemptId is not valid anymore since the receive call is not retryable.",
        ));
    }
    let received = ctx.store().receive(queue, request).await?;
    let now = ctx.state.now_ms();
    // The queue's default when the request named none: read back from the deliveries.
    let visibility_ms = request
        .visibility_timeout_ms
        .or_else(|| received.first().map(|m| m.message.meta.visible_at.saturating_sub(now)))
        .unwrap_or(0);
    let attempt = Attempt { messages: received.clone(), visibility_ms };
    ctx.state.sqs().attempts().remember(queue, id, attempt, now);
    Ok(received)
}

fn receive_request(input: &ReceiveMessageInput) -> Result<ReceiveRequest, AwsError> {
    let max = optional_int(
        &input.max_number_of_messages,
        "MaxNumberOfMessages",
        1,
        signed(RECEIVE_MESSAGES_MAX),
        "Must be between 1 and 10, if provided.",
    )?;
    let wait = optional_int(
        &input.wait_time_seconds,
        "WaitTimeSeconds",
        0,
        signed(WAIT_SECONDS_MAX),
        "Must be >= 0 and <= 20, if provided.",
    )?;
    let visibility = optional_int(
        &input.visibility_timeout,
        "VisibilityTimeout",
        0,
        signed(VISIBILITY_TIMEOUT_SECONDS_MAX),
        "Must be >= 0 and <= 43200, if provided.",
    )?;
    Ok(ReceiveRequest {
        max: u32::try_from(max.unwrap_or(1)).unwrap_or(1),
        wait_ms: wait.map(|s| s * 1000),
        visibility_timeout_ms: visibility.map(|s| s * 1000),
    })
}

fn render(
    ctx: &Ctx<'_>,
    received: &ReceivedMessage,
    system_names: &[String],
    attribute_names: &[String],
    fifo: bool,
) -> MessageOutput {
    let content = &received.message.content;
    // SQS bodies are text. A body sent as bytes through the native API comes back base64, so
    // that it stays recoverable; the digest is of what is returned.
    let body = if content.body_binary {
        STANDARD.encode(&content.body)
    } else {
        String::from_utf8(content.body.clone()).unwrap_or_else(|e| STANDARD.encode(e.as_bytes()))
    };
    let selected = message_attributes::select(&content.attributes, attribute_names);
    MessageOutput {
        message_id: received.message.meta.id.to_string(),
        receipt_handle: received.receipt.clone(),
        md5_of_body: md5::of_body(body.as_bytes()),
        body,
        attributes: system_attributes(ctx, received, system_names, fifo),
        md5_of_message_attributes: md5::of_attributes(&selected),
        message_attributes: (!selected.is_empty()).then(|| message_attributes::render(&selected)),
    }
}

/// The system attributes a receive asked for, by name or with `All`. FIFO messages also have
/// `SequenceNumber` and `MessageDeduplicationId`.
fn system_attributes(
    ctx: &Ctx<'_>,
    received: &ReceivedMessage,
    names: &[String],
    fifo: bool,
) -> BTreeMap<&'static str, String> {
    let all = names.iter().any(|n| n == "All");
    let wanted = |name: &str| all || names.iter().any(|n| n == name);
    let meta = &received.message.meta;
    let content = &received.message.content;
    let text = |name: &str| match content.system_attributes.get(name).map(|a| &a.value) {
        Some(AttributeData::Text(t)) => Some(t.clone()),
        _ => None,
    };
    let candidates: [(&'static str, Option<String>); 9] = [
        (SENDER_ID, Some(text(SENDER_ID).unwrap_or_else(|| ctx.account().to_string()))),
        ("SentTimestamp", Some(meta.sent_at.to_string())),
        ("ApproximateReceiveCount", Some(meta.receive_count.to_string())),
        ("ApproximateFirstReceiveTimestamp", Some(meta.first_received_at.unwrap_or(meta.sent_at).to_string())),
        ("SequenceNumber", fifo.then(|| received.message.seq.to_string())),
        (DEDUP_ID, text(DEDUP_ID).filter(|_| fifo)),
        ("MessageGroupId", content.envelope.group_id.clone()),
        (TRACE_HEADER, text(TRACE_HEADER)),
        ("DeadLetterQueueSourceArn", meta.dead_letter_source.as_deref().map(|q| ctx.queue_arn(q))),
    ];
    candidates.into_iter().filter(|(name, _)| wanted(name)).filter_map(|(name, v)| v.map(|v| (name, v))).collect()
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct DeleteMessageInput {
    queue_url: Option<String>,
    receipt_handle: Option<String>,
}

pub async fn delete_message(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: DeleteMessageInput = parse(input)?;
    let name = ctx.queue_name(&input.queue_url)?;
    let handle = required(&input.receipt_handle, "ReceiptHandle")?.to_string();
    delete(ctx, &name, vec![handle]).await?.pop().unwrap_or_else(|| Err(AwsError::internal()))?;
    Ok(None)
}

/// Deletes by receipt handle. A handle whose delivery is over (the message was deleted,
/// or received again since) succeeds without effect, as SQS documents; a handle this queue
/// never issued is `ReceiptHandleIsInvalid`.
pub async fn delete(ctx: &Ctx<'_>, queue: &str, handles: Vec<String>) -> Result<Vec<Result<(), AwsError>>, AwsError> {
    let results = ctx.store().ack(queue, handles.clone()).await?;
    answers(results, &handles, |e, handle| match e {
        EntryError::StaleReceipt => Ok(()),
        // Only FIFO queues refuse an ack whose hold ended (the group may have moved on).
        EntryError::NotInFlight => {
            Err(AwsError::invalid_value("ReceiptHandle", handle, "The receipt handle has expired."))
        }
        other => Err(receipt_error(other, handle)),
    })
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct ChangeMessageVisibilityInput {
    queue_url: Option<String>,
    receipt_handle: Option<String>,
    visibility_timeout: Option<Int>,
}

pub async fn change_message_visibility(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: ChangeMessageVisibilityInput = parse(input)?;
    let name = ctx.queue_name(&input.queue_url)?;
    let handle = required(&input.receipt_handle, "ReceiptHandle")?.to_string();
    let timeout_ms = match visibility_timeout_ms(&input.visibility_timeout) {
        Ok(t) => t,
        Err(e) => return Err(ctx.after_queue_check(&name, e).await),
    };
    change_visibility(ctx, &name, vec![(handle, timeout_ms)])
        .await?
        .pop()
        .unwrap_or_else(|| Err(AwsError::internal()))?;
    Ok(None)
}

/// A visibility change's required `VisibilityTimeout`, in milliseconds.
pub fn visibility_timeout_ms(value: &Option<Int>) -> Result<u64, AwsError> {
    let value = value.as_ref().ok_or_else(|| AwsError::missing_parameter("VisibilityTimeout"))?;
    let seconds = value.within(
        "VisibilityTimeout",
        0,
        signed(VISIBILITY_TIMEOUT_SECONDS_MAX),
        "Must be between 0 and 43200, if provided.",
    )?;
    Ok(seconds * 1000)
}

/// Changes visibility by receipt handle, counted from now.
///
/// SQS answers success for a message whose visibility timeout already ran out and that
/// nobody received since, and hides it again: the store's SQS rule. It answers success too for
/// an older receipt of a message received again since, which must not touch the newer delivery
/// (DESIGN §3): the store refuses it as `StaleReceipt`, changing nothing, and this layer answers
/// success. A handle whose message left the queue (deleted, moved) is `InvalidParameterValue`,
/// as in SQS; the store's SQS rule reports that case apart (`MessageGone`).
///
/// The mapping of `StaleReceipt` to success is made here rather than in the store's rule
/// because it is a choice of SQS's answer, not of what happens: the store's answer stays true
/// (nothing was changed, the receipt is stale) for every caller, the native API's included,
/// exactly as `delete` below maps a stale ack. A store that does not tell the two stale cases
/// apart (the PostgreSQL one reports both as `StaleReceipt`) errs towards success without
/// effect, which DESIGN §3 allows, never towards touching the newer delivery.
///
/// On a FIFO queue a message whose visibility timeout ran out is no longer the handle's to
/// hide: AWS refuses the handle as expired, so Sluice's own rule is used there.
pub async fn change_visibility(
    ctx: &Ctx<'_>,
    queue: &str,
    entries: Vec<(String, u64)>,
) -> Result<Vec<Result<(), AwsError>>, AwsError> {
    let handles: Vec<String> = entries.iter().map(|(h, _)| h.clone()).collect();
    if is_fifo_name(queue) {
        let results = ctx.store().change_visibility(queue, entries, VisibilityRule::Native).await?;
        return answers(results, &handles, |e, handle| {
            Err(match e {
                EntryError::NotInFlight => {
                    AwsError::invalid_value("ReceiptHandle", handle, "The receipt handle has expired.")
                }
                other => receipt_error(other, handle),
            })
        });
    }
    let results = ctx.store().change_visibility(queue, entries, VisibilityRule::Sqs).await?;
    answers(results, &handles, |e, handle| match e {
        EntryError::StaleReceipt => Ok(()),
        other => Err(receipt_error(other, handle)),
    })
}

/// Maps the store's per-entry answers, which come one per handle, in order.
fn answers(
    results: Vec<Result<(), EntryError>>,
    handles: &[String],
    on_error: impl Fn(&EntryError, &str) -> Result<(), AwsError>,
) -> Result<Vec<Result<(), AwsError>>, AwsError> {
    if results.len() != handles.len() {
        tracing::error!(
            answers = results.len(),
            entries = handles.len(),
            "the store answered the wrong number of entries"
        );
        return Err(AwsError::internal());
    }
    Ok(results.into_iter().zip(handles).map(|(r, h)| r.or_else(|e| on_error(&e, h))).collect())
}
