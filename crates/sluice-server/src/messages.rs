//! Message handlers of a queue: send, receive, ack, visibility, nack and peek
//! (`/v1/queues/{name}/...`). Batch calls answer per entry, in the order given.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use sluice_api::{
    AckRequest, BatchResponse, EntryResult, ErrorBody, ErrorCode, ErrorResponse, MessageList, NackRequest,
    ReceiveRequest, SendRequest, SendResponse, SendResult, VisibilityRequest,
};
use sluice_core::limits::{BATCH_ENTRIES_MAX, PEEK_MESSAGES_MAX};
use sluice_core::{EntryError, NewMessage};
use sluice_services::idempotency::{Fill, FillField, Template, Ticket};
use sluice_services::trace;
use sluice_store::{Conflict, EntryResults, Refused, StoredOutcome, VisibilityRule, Write, WriteOutcome};
use utoipa::IntoParams;

use crate::AppState;
use crate::convert;
use crate::error::{ApiError, entry_error, entry_validation_error};
use crate::extract::{Json, JsonOrEmpty, Path, Query};
use crate::tenant::Tenant;

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

/// Most messages a peek returns when the client does not say.
const PEEK_MESSAGES_DEFAULT: u32 = 100;

/// Refuses an empty or oversized batch before any entry is looked at.
fn check_batch(field: &str, len: usize) -> Result<(), ApiError> {
    if len == 0 {
        return Err(ApiError::new(
            ErrorCode::EmptyBatch,
            format!("{field} is empty; send 1 to {BATCH_ENTRIES_MAX} entries"),
        )
        .with_details(serde_json::json!({ "field": field })));
    }
    if len > BATCH_ENTRIES_MAX {
        return Err(ApiError::new(
            ErrorCode::BatchTooLarge,
            format!("{field} has {len} entries; a batch holds at most {BATCH_ENTRIES_MAX}"),
        )
        .with_details(serde_json::json!({ "field": field, "count": len, "max": BATCH_ENTRIES_MAX })));
    }
    Ok(())
}

/// An entry's error, its field (if any) placed under the entry's position, e.g. `messages[3].priority`.
fn entry_error_at(e: &EntryError, prefix: &str) -> ErrorBody {
    match e {
        EntryError::Invalid(v) => entry_validation_error(&v.clone().within(prefix)),
        other => entry_error(other),
    }
}

fn batch_response(field: &str, results: EntryResults<()>, expected: usize) -> JsonResult<BatchResponse> {
    if results.len() != expected {
        return Err(ApiError::new(
            ErrorCode::Internal,
            format!("store answered {} of {expected} {field} entries", results.len()),
        ));
    }
    let results = results
        .iter()
        .enumerate()
        .map(|(i, r)| match r {
            Ok(()) => EntryResult { ok: true, error: None },
            Err(e) => EntryResult { ok: false, error: Some(entry_error_at(e, &format!("{field}[{i}]"))) },
        })
        .collect();
    Ok(axum::Json(BatchResponse { results }))
}

#[utoipa::path(
    post, path = "/v1/queues/{name}/messages", tag = "messages",
    params(("name" = String, Path, description = "Queue name")),
    request_body = SendRequest,
    responses(
        (status = 200, description = "One result per message, in order: `id` or `error` (`queue_full` with `Retry-After` when some did not fit); for a queue with a depth limit, `depth` and the headers `Sluice-Queue-Depth` and `Sluice-Queue-Depth-Max`", body = SendResponse),
        (status = 503, description = "`shedding`: the server is past a load-shedding watermark and every message was of a priority it refuses now; `Retry-After`", body = ErrorResponse),
        (status = 429, description = "`queue_full` or `rate_limited`: every message was refused by backpressure (the queue is at its depth limit, or its rate limit has no token); `Retry-After` says when to try again", body = ErrorResponse),
        (status = 400, description = "`empty_batch`, `batch_too_large` or `invalid_json`", body = ErrorResponse),
        (status = 404, description = "`queue_not_found`", body = ErrorResponse),
        (status = 413, description = "`payload_too_large`", body = ErrorResponse),
    )
)]
pub async fn send(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    ticket: Option<axum::Extension<Ticket>>,
    Json(request): Json<SendRequest>,
) -> Result<Response, ApiError> {
    let name = tenant.name("name", &name)?;
    check_batch("messages", request.messages.len())?;
    let count = request.messages.len();
    // Entries the wire format already rules out get their error here; the others go to the
    // store, and their answers are put back in place by position.
    let mut results: Vec<Option<SendResult>> = vec![None; count];
    let mut accepted = Vec::with_capacity(count);
    let mut positions = Vec::with_capacity(count);
    for (i, m) in request.messages.into_iter().enumerate() {
        match convert::new_message(m) {
            Ok(message) => {
                accepted.push(message);
                positions.push(i);
            }
            Err(e) => {
                let error = entry_validation_error(&e.within(&format!("messages[{i}]")));
                results[i] = Some(SendResult::refused(error));
            }
        }
    }
    let mut entries: Vec<(usize, NewMessage)> = positions.into_iter().zip(accepted).collect();
    // Entries refused by backpressure (shed, queue full, rate limited), with their Retry-After.
    let mut throttled: Vec<(ErrorBody, u64)> = Vec::new();
    for (i, shed) in crate::shed::refuse_shed(&state, &format!("queue:{name}"), &mut entries) {
        let error = crate::shed::shed_body(&shed);
        throttled.push((error.clone(), shed.retry_after_s));
        results[i] = Some(SendResult::refused(error));
    }
    for (i, violation) in crate::schema_routes::refuse_invalid(&state, &name, &mut entries).await? {
        results[i] = Some(SendResult::refused(crate::error::violation_body(&violation)));
    }
    let (positions, accepted): (Vec<usize>, Vec<NewMessage>) = entries.into_iter().unzip();
    if !accepted.is_empty() {
        let bytes = accepted.iter().map(NewMessage::size_bytes).sum();
        state.services.tenants().check_write(&tenant.0, bytes).await?;
    }
    let mut depth = None;
    if let Some(axum::Extension(ticket)) = ticket {
        return send_committed(&state, &name, &ticket, results, positions, accepted).await;
    }
    if accepted.is_empty() {
        // Nothing to send, but an unknown queue must still be a 404, not a list of errors.
        state.store().get_queue(&name).await?;
    } else {
        let links: Vec<_> = accepted.iter().map(trace::message_links).collect();
        let sent = state.store().send(&name, accepted).await?;
        if sent.len() != positions.len() {
            return Err(ApiError::new(
                ErrorCode::Internal,
                format!("store answered {} of {} sends", sent.len(), positions.len()),
            ));
        }
        let ids = sent.iter().map(|s| s.as_ref().ok().map(|s| s.id.to_string()));
        state.services.traces().record_messages(&name, links.into_iter().zip(ids)).await;
        for (i, outcome) in positions.into_iter().zip(sent) {
            results[i] = Some(match outcome {
                Ok(sent) => {
                    depth = sent.depth.or(depth);
                    SendResult { dead_lettered: sent.dead_lettered, ..SendResult::sent(sent.id.to_string()) }
                }
                Err(e) => {
                    // Counted by the store, per queue (`sluice_rejected_total`).
                    let error = entry_error_at(&e, &format!("messages[{i}]"));
                    if let Some(seconds) = crate::error::retry_after_s(&e) {
                        throttled.push((error.clone(), seconds));
                    }
                    SendResult::refused(error)
                }
            });
        }
    }
    let retry_after = throttled.iter().map(|(_, s)| *s).max();
    if throttled.len() == count {
        // Every message was refused by backpressure: the whole call is the refusal (429, or
        // 503 when shed).
        let (first, seconds) = throttled.swap_remove(0);
        let code = ErrorCode::parse(&first.code).unwrap_or(ErrorCode::QueueFull);
        let mut error = ApiError::new(code, first.message).with_retry_after(seconds);
        error.details = first.details;
        return Err(error);
    }
    let results = results.into_iter().flatten().collect();
    let body = SendResponse { results, depth: depth.map(convert::queue_depth) };
    let mut response = axum::Json(body).into_response();
    let headers = response.headers_mut();
    if let Some(seconds) = retry_after {
        headers.insert(axum::http::header::RETRY_AFTER, seconds.into());
    }
    if let Some(d) = depth {
        depth_headers(headers, d);
    }
    Ok(response)
}

/// A send under an idempotency key: the messages and the answer in one commit, so that a crash
/// cannot part them. The answer's ids are filled in from the commit's outcomes, by the same
/// template a replay renders. A message the queue refuses refuses the commit; it gets its error
/// in its place and the commit is tried again without it, so every entry is answered as a plain
/// send answers it.
async fn send_committed(
    state: &AppState,
    name: &str,
    ticket: &Ticket,
    mut results: Vec<Option<SendResult>>,
    mut positions: Vec<usize>,
    mut accepted: Vec<NewMessage>,
) -> Result<Response, ApiError> {
    let count = results.len();
    // Entries refused because the queue was full: when that is every entry, the whole call is
    // the refusal (429, not stored, so a retry sends once there is room), as for a plain send.
    let mut full: Vec<ErrorBody> = Vec::new();
    loop {
        if accepted.is_empty() {
            state.store().get_queue(name).await?;
            if full.len() == count {
                let first = full.swap_remove(0);
                let mut error = ApiError::new(ErrorCode::QueueFull, first.message)
                    .with_retry_after(crate::error::QUEUE_FULL_RETRY_AFTER_S);
                error.details = first.details;
                return Err(error);
            }
        }
        let mut body = results.clone();
        let mut fills = Vec::with_capacity(positions.len());
        for (item, &i) in positions.iter().enumerate() {
            body[i] = Some(SendResult::sent(String::new()));
            fills.push(Fill { pointer: format!("/results/{i}/id"), write: 0, item, field: FillField::Id });
        }
        // A bounded queue's depth after the last message, as a plain send answers it.
        if let Some(last) = positions.len().checked_sub(1) {
            fills.push(Fill { pointer: String::new(), write: 0, item: last, field: FillField::Depth });
        }
        let body = serde_json::to_value(SendResponse { results: body.into_iter().flatten().collect(), depth: None })
            .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
        let template = Template { status: 200, location: None, body, fills };
        let mut writes = Vec::with_capacity(2);
        if !accepted.is_empty() {
            writes.push(Write::Send { queue: name.to_string(), messages: accepted.clone() });
        }
        // Without messages, the answer is the only write; its fills name none.
        let answer_write = writes.len();
        writes.extend(ticket.commit_write(template.clone()));
        match state.store().commit_all(writes).await? {
            Ok(outcomes) => {
                if let Some(WriteOutcome::Sent(sent)) = outcomes.first() {
                    let links = accepted.iter().map(trace::message_links);
                    let ids = sent.iter().map(|s| Some(s.id.to_string()));
                    state.services.traces().record_messages(name, links.zip(ids)).await;
                }
                let stored: Vec<StoredOutcome> = outcomes.iter().map(StoredOutcome::from).collect();
                let mut response = crate::idempotency::committed_answer(&template, &stored)?;
                // The depth headers of a plain send; a replay carries the body's `depth` only.
                if let Some(WriteOutcome::Sent(sent)) = outcomes.first()
                    && let Some(d) = sent.last().and_then(|s| s.depth)
                {
                    depth_headers(response.headers_mut(), d);
                }
                if !full.is_empty() {
                    let seconds = crate::error::QUEUE_FULL_RETRY_AFTER_S;
                    response.headers_mut().insert(axum::http::header::RETRY_AFTER, seconds.into());
                }
                return Ok(response);
            }
            Err(Refused { write: 0, conflict: Conflict::MessageRefused { message, error } }) if answer_write == 1 => {
                let i = positions.remove(message);
                accepted.remove(message);
                let refusal = entry_error_at(&error, &format!("messages[{i}]"));
                if matches!(error, EntryError::QueueFull { .. }) {
                    full.push(refusal.clone());
                }
                results[i] = Some(SendResult::refused(refusal));
            }
            Err(Refused { conflict: Conflict::RecordChanged, .. }) => return Err(crate::idempotency::in_use()),
            Err(Refused { conflict: Conflict::RecordExists, .. }) => return Ok(crate::idempotency::claim_lost()),
            Err(other) => {
                return Err(ApiError::new(ErrorCode::Internal, format!("the send's commit was refused: {other:?}")));
            }
        }
    }
}

fn depth_headers(headers: &mut axum::http::HeaderMap, d: sluice_core::overflow::DepthReport) {
    headers.insert(DEPTH_HEADER, d.depth.messages.into());
    if let Some(max) = d.limits.max_messages {
        headers.insert(DEPTH_MAX_HEADER, max.into());
    }
}

/// A send answer's headers for a queue with a depth limit: its depth in messages after the
/// send, and its `max_depth_messages` when it has one (the body's `depth` has the bytes too).
pub const DEPTH_HEADER: &str = "sluice-queue-depth";
pub const DEPTH_MAX_HEADER: &str = "sluice-queue-depth-max";

#[utoipa::path(
    post, path = "/v1/queues/{name}/receive", tag = "messages",
    params(("name" = String, Path, description = "Queue name")),
    request_body(content = ReceiveRequest, description = "May be empty: one message, the queue's wait and visibility timeout"),
    responses(
        (status = 200, description = "The messages received (possibly none)", body = MessageList),
        (status = 400, description = "`invalid_argument`", body = ErrorResponse),
        (status = 404, description = "`queue_not_found`", body = ErrorResponse),
    )
)]
pub async fn receive(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    JsonOrEmpty(request): JsonOrEmpty<ReceiveRequest>,
) -> JsonResult<MessageList> {
    let name = tenant.name("name", &name)?;
    let request = sluice_store::ReceiveRequest {
        max: request.max.unwrap_or(1),
        wait_ms: request.wait_ms,
        visibility_timeout_ms: request.visibility_timeout_ms,
    };
    request.validate()?;
    let received = state.store().receive(&name, request).await?;
    let messages =
        received.into_iter().map(|r| tenant.message(convert::message(&r.message, Some(r.receipt), None))).collect();
    Ok(axum::Json(MessageList { messages }))
}

#[utoipa::path(
    post, path = "/v1/queues/{name}/ack", tag = "messages",
    params(("name" = String, Path, description = "Queue name")),
    request_body = AckRequest,
    responses(
        (status = 200, description = "One result per receipt, in order", body = BatchResponse),
        (status = 400, description = "`empty_batch`, `batch_too_large` or `invalid_json`", body = ErrorResponse),
        (status = 404, description = "`queue_not_found`", body = ErrorResponse),
    )
)]
pub async fn ack(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    Json(request): Json<AckRequest>,
) -> JsonResult<BatchResponse> {
    let name = tenant.name("name", &name)?;
    check_batch("receipts", request.receipts.len())?;
    let count = request.receipts.len();
    let results = state.store().ack(&name, request.receipts).await?;
    batch_response("receipts", results, count)
}

#[utoipa::path(
    post, path = "/v1/queues/{name}/visibility", tag = "messages",
    params(("name" = String, Path, description = "Queue name")),
    request_body = VisibilityRequest,
    responses(
        (status = 200, description = "One result per entry, in order", body = BatchResponse),
        (status = 400, description = "`empty_batch`, `batch_too_large` or `invalid_json`", body = ErrorResponse),
        (status = 404, description = "`queue_not_found`", body = ErrorResponse),
    )
)]
pub async fn change_visibility(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    Json(request): Json<VisibilityRequest>,
) -> JsonResult<BatchResponse> {
    let name = tenant.name("name", &name)?;
    check_batch("entries", request.entries.len())?;
    let count = request.entries.len();
    let entries = request.entries.into_iter().map(|e| (e.receipt, e.timeout_ms)).collect();
    let results = state.store().change_visibility(&name, entries, VisibilityRule::Native).await?;
    batch_response("entries", results, count)
}

#[utoipa::path(
    post, path = "/v1/queues/{name}/nack", tag = "messages",
    params(("name" = String, Path, description = "Queue name")),
    request_body = NackRequest,
    responses(
        (status = 200, description = "One result per entry, in order", body = BatchResponse),
        (status = 400, description = "`empty_batch`, `batch_too_large` or `invalid_json`", body = ErrorResponse),
        (status = 404, description = "`queue_not_found`", body = ErrorResponse),
    )
)]
pub async fn nack(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    Json(request): Json<NackRequest>,
) -> JsonResult<BatchResponse> {
    let name = tenant.name("name", &name)?;
    check_batch("entries", request.entries.len())?;
    let count = request.entries.len();
    let entries = request
        .entries
        .into_iter()
        .map(|e| sluice_store::NackEntry { receipt: e.receipt, delay_ms: e.delay_ms.unwrap_or(0), error: e.error })
        .collect();
    let results = state.store().nack(&name, entries).await?;
    batch_response("entries", results, count)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PeekParams {
    /// Most messages to return (1 to 1000, default 100).
    limit: Option<u32>,
}

#[utoipa::path(
    get, path = "/v1/queues/{name}/messages", tag = "messages",
    params(("name" = String, Path, description = "Queue name"), PeekParams),
    responses(
        (status = 200, description = "Messages in send order, each with its `state`; nothing is received", body = MessageList),
        (status = 400, description = "`invalid_argument`", body = ErrorResponse),
        (status = 404, description = "`queue_not_found`", body = ErrorResponse),
    )
)]
pub async fn peek(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    Query(params): Query<PeekParams>,
) -> JsonResult<MessageList> {
    let name = tenant.name("name", &name)?;
    let limit = params.limit.unwrap_or(PEEK_MESSAGES_DEFAULT);
    if limit == 0 || limit > PEEK_MESSAGES_MAX {
        return Err(ApiError::invalid("limit", format!("limit must be 1 to {PEEK_MESSAGES_MAX}")));
    }
    let peeked = state.store().peek(&name, limit as usize).await?;
    let messages =
        peeked.into_iter().map(|p| tenant.message(convert::message(&p.message, None, Some(p.state)))).collect();
    Ok(axum::Json(MessageList { messages }))
}
