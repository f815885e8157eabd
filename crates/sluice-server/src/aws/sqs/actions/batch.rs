//! Batch actions: SendMessageBatch, DeleteMessageBatch and ChangeMessageVisibilityBatch.
//!
//! The whole request fails for a malformed batch (empty, more than ten entries, a bad or
//! repeated id, more than 1 MiB in total); otherwise each entry succeeds or fails on its own
//! and the answer is `200` with `Successful` and `Failed` lists, each left out when empty as
//! AWS does.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_services::trace;

use super::messages;
use super::send::{Digests, SendEntry, send_error, sequence_number};
use super::{Ctx, is_fifo_name, output};
use crate::aws::common::input::{Int, parse};
use crate::aws::common::{AwsError, BatchError};
use crate::aws::sqs::limits::{BATCH_ENTRIES_MAX, BATCH_ENTRY_ID_LEN_MAX, BATCH_PAYLOAD_BYTES_MAX};

type Outcome = Result<Option<Value>, AwsError>;

/// Checks the batch as a whole: 1 to 10 entries, each id 1 to 80 of `[A-Za-z0-9_-]`, no id
/// twice.
fn check_batch<'a>(ids: impl ExactSizeIterator<Item = Option<&'a str>>, entry: &str) -> Result<(), AwsError> {
    let count = ids.len();
    if count == 0 {
        return Err(AwsError::empty_batch(entry));
    }
    if count > BATCH_ENTRIES_MAX {
        return Err(AwsError::too_many_entries(count));
    }
    let mut seen: Vec<&str> = Vec::with_capacity(count);
    for id in ids {
        let id = id.unwrap_or("");
        let valid = !id.is_empty()
            && id.len() <= BATCH_ENTRY_ID_LEN_MAX
            && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            return Err(AwsError::invalid_batch_entry_id());
        }
        if seen.contains(&id) {
            return Err(AwsError::batch_ids_not_distinct(id));
        }
        seen.push(id);
    }
    Ok(())
}

#[derive(Serialize)]
struct BatchOutput<T: Serialize> {
    #[serde(rename = "Successful", skip_serializing_if = "Vec::is_empty")]
    successful: Vec<T>,
    #[serde(rename = "Failed", skip_serializing_if = "Vec::is_empty")]
    failed: Vec<BatchError>,
}

#[derive(Serialize)]
struct IdOnly {
    #[serde(rename = "Id")]
    id: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct SendBatchInput {
    queue_url: Option<String>,
    entries: Option<Vec<SendEntry>>,
}

#[derive(Serialize)]
struct SendBatchResult {
    #[serde(rename = "Id")]
    id: String,
    #[serde(rename = "MessageId")]
    message_id: String,
    #[serde(flatten)]
    digests: Digests,
    #[serde(rename = "SequenceNumber", skip_serializing_if = "Option::is_none")]
    sequence_number: Option<String>,
}

/// FIFO rules that refuse a whole SendMessageBatch rather than one entry, as AWS does
/// (LocalStack's recordings of real AWS, `test_send_batch_missing_*_for_fifo_queue`): an
/// entry without a deduplication id on a queue without content-based deduplication, or
/// without a group id. The queue is read only when an entry lacks a deduplication id.
async fn check_fifo_batch(ctx: &Ctx<'_>, name: &str, entries: &[SendEntry]) -> Result<(), AwsError> {
    let missing = |v: &Option<String>| v.as_deref().is_none_or(str::is_empty);
    if entries.iter().any(|e| missing(&e.message_deduplication_id))
        && !ctx.queue(name).await?.attributes.content_based_dedup
    {
        return Err(AwsError::invalid_parameter_value(
            "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
        ));
    }
    if entries.iter().any(|e| missing(&e.message_group_id)) {
        return Err(AwsError::invalid_parameter_value("The request must contain the parameter MessageGroupId."));
    }
    Ok(())
}

pub async fn send_message_batch(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: SendBatchInput = parse(input)?;
    let name = ctx.queue_name(&input.queue_url)?;
    let entries = input.entries.unwrap_or_default();
    let checked = check_batch(entries.iter().map(|e| e.id.as_deref()), "SendMessageBatchRequestEntry").and_then(|()| {
        let total: u64 = entries.iter().map(SendEntry::payload_bytes).sum();
        if total > BATCH_PAYLOAD_BYTES_MAX { Err(AwsError::batch_too_long(total)) } else { Ok(()) }
    });
    if let Err(e) = checked {
        return Err(ctx.after_queue_check(&name, e).await);
    }
    let fifo = is_fifo_name(&name);
    if fifo && let Err(e) = check_fifo_batch(ctx, &name, &entries).await {
        return Err(ctx.after_queue_check(&name, e).await);
    }
    let mut failed = Vec::new();
    let mut ready = Vec::with_capacity(entries.len());
    for entry in entries {
        let id = entry.id.clone().unwrap_or_default();
        match entry.prepare(ctx.sender(), ctx.trace_header.as_deref(), fifo) {
            Ok(prepared) => ready.push((id, prepared)),
            Err(e) => failed.push(e.entry(&id)),
        }
    }
    let mut checked: Vec<(usize, _)> = ready.into_iter().enumerate().collect();
    let mut entries: Vec<(usize, &sluice_core::NewMessage)> =
        checked.iter().map(|(i, (_, p))| (*i, &p.message)).collect();
    // Shed entries get SQS's throttling error (SDKs retry them); invalid ones their own.
    let shed = crate::shed::refuse_shed(ctx.state, &format!("queue:{name}"), &mut entries);
    let mut refused_at: std::collections::HashMap<usize, AwsError> =
        shed.into_iter().map(|(i, s)| (i, AwsError::request_throttled(s.to_string()))).collect();
    let refused = crate::schema_routes::refuse_invalid(ctx.state, &name, &mut entries).await?;
    refused_at.extend(refused.into_iter().map(|(i, v)| (i, AwsError::invalid_parameter_value(v.to_string()))));
    drop(entries);
    checked.retain(|(i, (id, _))| match refused_at.get(i) {
        Some(error) => {
            failed.push(error.entry(id));
            false
        }
        None => true,
    });
    let ready: Vec<_> = checked.into_iter().map(|(_, entry)| entry).collect();
    let mut successful = Vec::with_capacity(ready.len());
    if ready.is_empty() {
        // Nothing reaches the store, which would otherwise report a missing queue.
        ctx.queue(&name).await?;
    } else {
        let (ids, prepared): (Vec<String>, Vec<_>) = ready.into_iter().unzip();
        let (messages, digests): (Vec<_>, Vec<_>) = prepared.into_iter().map(|p| (p.message, p.digests)).unzip();
        let links: Vec<_> = messages.iter().map(trace::message_links).collect();
        ctx.check_write(messages.iter().map(sluice_core::NewMessage::size_bytes).sum()).await?;
        let results = ctx.store().send(&name, messages).await?;
        if results.len() != ids.len() {
            return Err(AwsError::internal());
        }
        let sent = results.iter().map(|r| r.as_ref().ok().map(|sent| sent.id.to_string()));
        ctx.state.services.traces().record_messages(&name, links.into_iter().zip(sent)).await;
        for ((id, digests), result) in ids.into_iter().zip(digests).zip(results) {
            match result {
                Ok(sent) => successful.push(SendBatchResult {
                    id,
                    message_id: sent.id.to_string(),
                    digests,
                    sequence_number: sequence_number(&sent, fifo),
                }),
                Err(e) => failed.push(send_error(&e, true).entry(&id)),
            }
        }
    }
    output(BatchOutput { successful, failed })
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct HandleEntry {
    id: Option<String>,
    receipt_handle: Option<String>,
    visibility_timeout: Option<Int>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct HandleBatchInput {
    queue_url: Option<String>,
    entries: Option<Vec<HandleEntry>>,
}

/// The entries that passed their own checks, with their ids, and those that did not.
struct Sorted<T> {
    ready: Vec<(String, T)>,
    failed: Vec<BatchError>,
}

fn sort<T>(entries: Vec<HandleEntry>, check: impl Fn(&HandleEntry) -> Result<T, AwsError>) -> Sorted<T> {
    let mut sorted = Sorted { ready: Vec::with_capacity(entries.len()), failed: Vec::new() };
    for entry in entries {
        let id = entry.id.clone().unwrap_or_default();
        match check(&entry) {
            Ok(v) => sorted.ready.push((id, v)),
            Err(e) => sorted.failed.push(e.entry(&id)),
        }
    }
    sorted
}

fn handle(entry: &HandleEntry) -> Result<String, AwsError> {
    match entry.receipt_handle.as_deref() {
        Some(h) if !h.is_empty() => Ok(h.to_string()),
        _ => Err(AwsError::missing_parameter("ReceiptHandle")),
    }
}

/// Reads and checks a delete or visibility batch; `entry` names its entries in errors.
async fn read_batch(ctx: &Ctx<'_>, input: Value, entry: &str) -> Result<(String, Vec<HandleEntry>), AwsError> {
    let input: HandleBatchInput = parse(input)?;
    let name = ctx.queue_name(&input.queue_url)?;
    let entries = input.entries.unwrap_or_default();
    if let Err(e) = check_batch(entries.iter().map(|e| e.id.as_deref()), entry) {
        return Err(ctx.after_queue_check(&name, e).await);
    }
    Ok((name, entries))
}

/// Puts the store's answers for the ready entries next to the entries that failed earlier.
fn collect(ids: Vec<String>, results: Vec<Result<(), AwsError>>, mut failed: Vec<BatchError>) -> Outcome {
    let mut successful = Vec::with_capacity(ids.len());
    for (id, result) in ids.into_iter().zip(results) {
        match result {
            Ok(()) => successful.push(IdOnly { id }),
            Err(e) => failed.push(e.entry(&id)),
        }
    }
    output(BatchOutput { successful, failed })
}

pub async fn delete_message_batch(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let (name, entries) = read_batch(ctx, input, "DeleteMessageBatchRequestEntry").await?;
    let Sorted { ready, failed } = sort(entries, handle);
    let (ids, handles): (Vec<String>, Vec<String>) = ready.into_iter().unzip();
    if handles.is_empty() {
        ctx.queue(&name).await?;
        return collect(ids, Vec::new(), failed);
    }
    let results = messages::delete(ctx, &name, handles).await?;
    collect(ids, results, failed)
}

pub async fn change_message_visibility_batch(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let (name, entries) = read_batch(ctx, input, "ChangeMessageVisibilityBatchRequestEntry").await?;
    let Sorted { ready, failed } =
        sort(entries, |e| Ok((handle(e)?, messages::visibility_timeout_ms(&e.visibility_timeout)?)));
    let (ids, changes): (Vec<String>, Vec<(String, u64)>) = ready.into_iter().unzip();
    if changes.is_empty() {
        ctx.queue(&name).await?;
        return collect(ids, Vec::new(), failed);
    }
    let results = messages::change_visibility(ctx, &name, changes).await?;
    collect(ids, results, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(ids: &[Option<&str>]) -> Result<(), &'static str> {
        check_batch(ids.iter().copied(), "E").map_err(|e| e.code)
    }

    #[test]
    fn batch_rules() {
        assert_eq!(check(&[Some("a"), Some("b-1"), Some("C_2")]), Ok(()));
        assert_eq!(check(&[]), Err("AWS.SimpleQueueService.EmptyBatchRequest"));
        let eleven: Vec<Option<&str>> = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"].map(Some).to_vec();
        assert_eq!(check(&eleven), Err("AWS.SimpleQueueService.TooManyEntriesInBatchRequest"));
        for bad in [None, Some(""), Some("invalid:id"), Some(&*"x".repeat(81))] {
            assert_eq!(check(&[bad]), Err("AWS.SimpleQueueService.InvalidBatchEntryId"), "{bad:?}");
        }
        assert_eq!(check(&[Some("a"), Some("a")]), Err("AWS.SimpleQueueService.BatchEntryIdsNotDistinct"));
    }
}
