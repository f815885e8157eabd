//! Stream handlers (`/v1/streams...`): create, list, view, change and delete streams; append
//! and read records; consumer groups (`groups.rs`). They translate wire types (`wire.rs`) and
//! call the store's [`LogStore`](sluice_store::LogStore); every rule is core's, applied there.

mod groups;
mod wire;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use sluice_api::{
    AppendRequest, AppendResponse, AppendResult, CreateStreamRequest, ErrorCode, ErrorResponse, ReadResponse, Stream,
    StreamList, UpdateStreamRequest,
};
use sluice_core::EntryError;
use sluice_core::stream::limits::{APPEND_RECORDS_MAX, READ_RECORDS_DEFAULT};
use sluice_core::stream::{RecordError, StreamConfig, StreamConfigPatch};
use sluice_services::idempotency::{Fill, FillField, Template, Ticket};
use sluice_services::trace::{self, TraceKind};
use sluice_store::{Conflict, ReadFrom, ReadRequest, Refused, Store, StoredOutcome, Write, WriteOutcome};
use utoipa::{IntoParams, OpenApi};

use crate::AppState;
use crate::error::{ApiError, entry_validation_error};
use crate::extract::{Json, Path, Query};
use crate::paging::PageRequest;
use crate::tenant::Tenant;

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

/// Page size of stream lists when the client does not give one, and the largest.
const LIST_LIMIT_DEFAULT: u32 = 100;
const LIST_LIMIT_MAX: usize = 1_000;

/// Every stream route.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/streams", get(list_streams).post(create_stream))
        .route("/v1/streams/{name}", get(get_stream).patch(update_stream).delete(delete_stream))
        .route("/v1/streams/{name}/records", post(append))
        .route("/v1/streams/{name}/partitions/{partition}/records", get(read))
        .route("/v1/streams/{name}/groups", get(groups::list).post(groups::create))
        .route("/v1/streams/{name}/groups/{group}", get(groups::get).delete(groups::delete))
        .route("/v1/streams/{name}/groups/{group}/fetch", post(groups::fetch))
        .route("/v1/streams/{name}/groups/{group}/commit", post(groups::commit))
        .route("/v1/streams/{name}/groups/{group}/seek", post(groups::seek))
        .route("/v1/streams/{name}/groups/{group}/ack", post(groups::ack))
        .route("/v1/streams/{name}/groups/{group}/release", post(groups::release))
        .route("/v1/streams/{name}/groups/{group}/nack", post(groups::nack))
}

/// The OpenAPI paths of streams, merged into the server's document by [`MergeDoc`].
#[derive(OpenApi)]
#[openapi(
    paths(
        create_stream, list_streams, get_stream, update_stream, delete_stream, append, read,
        groups::create, groups::list, groups::get, groups::delete, groups::fetch, groups::commit, groups::seek,
        groups::ack, groups::release, groups::nack,
    ),
    tags((name = "streams", description = "Partitioned, replayable logs: append, read, consumer groups (offsets and shared modes)"))
)]
pub struct StreamsDoc;

/// Adds [`StreamsDoc`] to the document it modifies.
pub struct MergeDoc;

impl utoipa::Modify for MergeDoc {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        openapi.merge(StreamsDoc::openapi());
    }
}

fn config(r: &CreateStreamRequest) -> StreamConfig {
    let d = StreamConfig::default();
    StreamConfig {
        partitions: r.partitions.unwrap_or(d.partitions),
        retention_ms: r.retention_ms.unwrap_or(d.retention_ms),
        retention_bytes: r.retention_bytes,
        record_bytes_max: r.record_bytes_max.unwrap_or(d.record_bytes_max),
        segment_bytes: r.segment_bytes.unwrap_or(d.segment_bytes),
        schema_validation: r.schema_validation.unwrap_or(d.schema_validation),
        rate_limit: r.rate_limit.map(crate::convert::rate_limit_from_api),
        max_depth_messages: r.max_depth_messages,
        max_depth_bytes: r.max_depth_bytes,
        overflow: r.overflow.map_or(d.overflow, crate::convert::overflow_from_api),
    }
}

#[utoipa::path(
    post, path = "/v1/streams", tag = "streams",
    request_body = CreateStreamRequest,
    responses(
        (status = 201, description = "Created", body = Stream),
        (status = 200, description = "A stream with these settings already exists", body = Stream),
        (status = 400, description = "`invalid_argument`", body = ErrorResponse),
        (status = 409, description = "`stream_exists`: same name, different settings", body = ErrorResponse),
    )
)]
pub async fn create_stream(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(mut request): Json<CreateStreamRequest>,
) -> Result<(StatusCode, axum::Json<Stream>), ApiError> {
    request.name = tenant.name("name", &request.name)?;
    if !tenant.0.is_default() && state.store().get_stream(&request.name).await.is_err() {
        state.services.tenants().check_create(&tenant.0).await?;
    }
    let (view, created) = state.store().create_stream(&request.name, config(&request)).await?;
    state.services.schemas().forget_stream(&request.name);
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, axum::Json(tenant.stream(wire::stream(view)))))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only streams whose names start with this.
    prefix: Option<String>,
    /// Streams per page (1 to 1000, default 100).
    limit: Option<u32>,
    /// The `next_token` of the previous page.
    next_token: Option<String>,
}

#[utoipa::path(
    get, path = "/v1/streams", tag = "streams", params(ListParams),
    responses((status = 200, description = "Streams in name order", body = StreamList), (status = 400, description = "`invalid_argument`", body = ErrorResponse))
)]
pub async fn list_streams(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(params): Query<ListParams>,
) -> JsonResult<StreamList> {
    let page = PageRequest::read(params.limit, params.next_token.as_deref(), LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX)?;
    let prefix = tenant.name("prefix", &params.prefix.unwrap_or_default())?;
    let after = page.after.as_deref().map(|a| tenant.name("next_token", a)).transpose()?;
    let (store, prefix) = (state.store().as_ref(), prefix.as_str());
    let fetch = |after: Option<String>, n| async move { store.list_streams(prefix, after.as_deref(), n).await };
    let mut views = tenant.keep_own(after, page.fetch_count(), fetch, |v| (v.name.clone(), v.name.clone())).await?;
    let next_token = page.cut(&mut views, |v| tenant.show(&v.name));
    Ok(axum::Json(StreamList {
        streams: views.into_iter().map(|v| tenant.stream(wire::stream(v))).collect(),
        next_token,
    }))
}

#[utoipa::path(
    get, path = "/v1/streams/{name}", tag = "streams",
    params(("name" = String, Path, description = "Stream name")),
    responses(
        (status = 200, description = "Settings, each partition's first and next offset and bytes, each group's lag", body = Stream),
        (status = 404, description = "`stream_not_found`", body = ErrorResponse),
    )
)]
pub async fn get_stream(State(state): State<AppState>, tenant: Tenant, Path(name): Path<String>) -> JsonResult<Stream> {
    let name = tenant.name("name", &name)?;
    Ok(axum::Json(tenant.stream(wire::stream(state.store().get_stream(&name).await?))))
}

#[utoipa::path(
    patch, path = "/v1/streams/{name}", tag = "streams",
    params(("name" = String, Path, description = "Stream name")),
    request_body = UpdateStreamRequest,
    responses(
        (status = 200, description = "The stream as it is now", body = Stream),
        (status = 400, description = "`invalid_argument` (partitions can only grow)", body = ErrorResponse),
        (status = 404, description = "`stream_not_found`", body = ErrorResponse),
    )
)]
pub async fn update_stream(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    Json(request): Json<UpdateStreamRequest>,
) -> JsonResult<Stream> {
    let name = tenant.name("name", &name)?;
    let patch = StreamConfigPatch {
        partitions: request.partitions,
        retention_ms: request.retention_ms,
        retention_bytes: request.retention_bytes,
        record_bytes_max: request.record_bytes_max,
        segment_bytes: request.segment_bytes,
        schema_validation: request.schema_validation,
        rate_limit: request.rate_limit.map(|l| l.map(crate::convert::rate_limit_from_api)),
        max_depth_messages: request.max_depth_messages,
        max_depth_bytes: request.max_depth_bytes,
        overflow: request.overflow.map(crate::convert::overflow_from_api),
    };
    let view = state.store().update_stream(&name, patch).await?;
    state.services.schemas().forget_stream(&name);
    Ok(axum::Json(tenant.stream(wire::stream(view))))
}

#[utoipa::path(
    delete, path = "/v1/streams/{name}", tag = "streams",
    params(("name" = String, Path, description = "Stream name")),
    responses((status = 204, description = "Deleted with its records and groups"), (status = 404, description = "`stream_not_found`", body = ErrorResponse))
)]
pub async fn delete_stream(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let name = tenant.name("name", &name)?;
    state.store().delete_stream(&name).await?;
    state.services.schemas().forget_stream(&name);
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post, path = "/v1/streams/{name}/records", tag = "streams",
    params(("name" = String, Path, description = "Stream name")),
    request_body = AppendRequest,
    responses(
        (status = 200, description = "One result per record, in order: `partition`, `offset`, `timestamp_ms`, or `error`", body = AppendResponse),
        (status = 400, description = "`empty_batch`, `batch_too_large`, `invalid_json`", body = ErrorResponse),
        (status = 404, description = "`stream_not_found`", body = ErrorResponse),
        (status = 413, description = "`payload_too_large`", body = ErrorResponse),
        (status = 429, description = "`rate_limited`: the stream's `rate_limit` refused every record; `queue_full`: the stream holds its `max_depth_messages` or `max_depth_bytes` and every record was refused (`Retry-After` on both; when only some were refused, they carry the error in their place)", body = ErrorResponse),
    )
)]
pub async fn append(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    ticket: Option<axum::Extension<Ticket>>,
    Json(request): Json<AppendRequest>,
) -> Result<Response, ApiError> {
    let name = tenant.name("name", &name)?;
    let count = request.records.len();
    if count == 0 {
        return Err(ApiError::new(ErrorCode::EmptyBatch, format!("records is empty; send 1 to {APPEND_RECORDS_MAX}"))
            .with_details(serde_json::json!({ "field": "records" })));
    }
    if count > APPEND_RECORDS_MAX {
        return Err(ApiError::new(
            ErrorCode::BatchTooLarge,
            format!("records has {count} entries; at most {APPEND_RECORDS_MAX}"),
        )
        .with_details(serde_json::json!({ "field": "records", "count": count, "max": APPEND_RECORDS_MAX })));
    }
    // Records carry no priority: the low band, refused first while the server sheds.
    crate::shed::admit(&state, &format!("stream:{name}"), 0)?;
    let bytes =
        request.records.iter().map(|r| r.body.as_ref().or(r.body_base64.as_ref()).map_or(0, |b| b.len() as u64)).sum();
    state.services.tenants().check_write(&tenant.0, bytes).await?;
    let mut results: Vec<Option<AppendResult>> = vec![None; count];
    let (mut accepted, mut positions) = (Vec::with_capacity(count), Vec::with_capacity(count));
    for (i, r) in request.records.into_iter().enumerate() {
        match wire::new_record(r) {
            Ok(record) => {
                accepted.push(record);
                positions.push(i);
            }
            Err(e) => results[i] = Some(failed(entry_validation_error(&e.within(&format!("records[{i}]"))))),
        }
    }
    // The checks at the door: a refused record is answered in its place, the others are
    // appended.
    let door = state.services.schemas().stream_door(&name).await?;
    if !accepted.is_empty() && door.schema_validation {
        let schemas = state.services.schemas();
        let mut kept = (Vec::with_capacity(accepted.len()), Vec::with_capacity(accepted.len()));
        for (record, i) in accepted.into_iter().zip(positions) {
            match schemas.check_record(&tenant.0, &record).await? {
                Ok(()) => {
                    kept.0.push(record);
                    kept.1.push(i);
                }
                Err(violation) => results[i] = Some(failed(crate::error::violation_body(&violation))),
            }
        }
        (accepted, positions) = kept;
    }
    let mut retry_after = None;
    if let Some(limit) = door.rate_limit
        && !accepted.is_empty()
    {
        // One token per record that passed its checks; the first ones are appended.
        let every_record = positions.len() == count;
        let resource = format!("stream:{name}");
        let admitted = sluice_services::rate_limits::admit(&**state.store(), &resource, limit, accepted.len()).await?;
        accepted.truncate(admitted.granted);
        let refused = positions.split_off(admitted.granted);
        if !refused.is_empty() {
            if accepted.is_empty() && every_record {
                return Err(crate::error::rate_limited("the stream's", admitted.retry_after_ms));
            }
            retry_after = Some(crate::error::retry_after_secs(admitted.retry_after_ms));
        }
        let refusal = EntryError::RateLimited { retry_after_ms: admitted.retry_after_ms };
        for i in refused {
            results[i] = Some(failed(crate::error::entry_error(&refusal)));
        }
    }
    if let Some(axum::Extension(ticket)) = ticket {
        return append_committed(&state, &name, &ticket, results, positions, accepted).await;
    }
    if accepted.is_empty() {
        state.store().get_stream(&name).await?;
    } else {
        let links: Vec<_> = accepted.iter().map(trace::record_links).collect();
        let appended = state.store().append(&name, accepted, None).await?;
        if appended.len() != positions.len() {
            return Err(ApiError::new(
                ErrorCode::Internal,
                format!("store answered {} of {} records", appended.len(), positions.len()),
            ));
        }
        let ids = appended.iter().map(|a| a.as_ref().ok().filter(|a| !a.duplicate).map(trace::record_id));
        let traced = trace::entries(TraceKind::Record, &format!("stream:{name}"), links.into_iter().zip(ids));
        state.services.traces().record(traced).await;
        let full: Vec<&RecordError> = appended
            .iter()
            .filter_map(|a| a.as_ref().err())
            .filter(|e| matches!(e, RecordError::StreamFull { .. }))
            .collect();
        count_stream_full(&name, full.len());
        if full.len() == count {
            return Err(stream_full(full[0]));
        }
        if !full.is_empty() {
            retry_after = retry_after.max(Some(crate::error::QUEUE_FULL_RETRY_AFTER_S));
        }
        for (i, outcome) in positions.into_iter().zip(appended) {
            results[i] = Some(match outcome {
                Ok(a) => AppendResult {
                    partition: Some(a.partition),
                    offset: Some(a.offset),
                    timestamp_ms: Some(a.timestamp_ms),
                    duplicate: a.duplicate,
                    error: None,
                },
                Err(e) => failed(wire::record_error(&e, i)),
            });
        }
    }
    let mut response = axum::Json(AppendResponse { results: results.into_iter().flatten().collect() }).into_response();
    if let Some(seconds) = retry_after {
        response.headers_mut().insert(axum::http::header::RETRY_AFTER, seconds.into());
    }
    Ok(response)
}

/// Counts `refused` records a stream's depth limit refused (`sluice_rejected_total`).
fn count_stream_full(name: &str, refused: usize) {
    sluice_services::rate_limits::count_refused(&format!("stream:{name}"), "queue_full", refused as u64);
}

/// A call whose every record the stream's depth limit refused: 429 `queue_full` with
/// `Retry-After`, as for a queue.
fn stream_full(first: &RecordError) -> ApiError {
    let body = wire::record_error(first, 0);
    let mut error =
        ApiError::new(ErrorCode::QueueFull, body.message).with_retry_after(crate::error::QUEUE_FULL_RETRY_AFTER_S);
    error.details = body.details;
    error
}

/// An append under an idempotency key: the records and the answer in one commit
/// (`Write::Append` beside the answer), so that a crash cannot part them; the places are filled
/// in from the commit's outcomes by the template a replay renders. A record the stream refuses
/// refuses the commit; it gets its error in its place and the commit is tried again without it.
async fn append_committed(
    state: &AppState,
    name: &str,
    ticket: &Ticket,
    mut results: Vec<Option<AppendResult>>,
    mut positions: Vec<usize>,
    mut accepted: Vec<sluice_core::stream::NewRecord>,
) -> Result<Response, ApiError> {
    let count = results.len();
    // The refusals of the stream's depth limit, answered once the commit went through.
    let mut full: Vec<RecordError> = Vec::new();
    loop {
        if accepted.is_empty() {
            state.store().get_stream(name).await?;
            if full.len() == count {
                // An optimistic attempt's refusal runs again under the claim (which may
                // replay a stored answer instead): counted there, once.
                if !ticket.is_optimistic() {
                    count_stream_full(name, count);
                }
                return Err(stream_full(&full[0]));
            }
        }
        let mut body = results.clone();
        let mut fills = Vec::with_capacity(4 * positions.len());
        for (item, &i) in positions.iter().enumerate() {
            body[i] = Some(AppendResult {
                partition: Some(0),
                offset: Some(0),
                timestamp_ms: Some(0),
                duplicate: false,
                error: None,
            });
            for (field, pointer) in [
                (FillField::Partition, format!("/results/{i}/partition")),
                (FillField::Offset, format!("/results/{i}/offset")),
                (FillField::TimestampMs, format!("/results/{i}/timestamp_ms")),
                (FillField::Duplicate, format!("/results/{i}")),
            ] {
                fills.push(Fill { pointer, write: 0, item, field });
            }
        }
        let body = serde_json::to_value(AppendResponse { results: body.into_iter().flatten().collect() })
            .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
        let template = Template { status: 200, location: None, body, fills };
        let mut writes = Vec::with_capacity(2);
        if !accepted.is_empty() {
            writes.push(Write::Append { stream: name.to_string(), records: accepted.clone() });
        }
        let answer_write = writes.len();
        writes.extend(ticket.commit_write(template.clone()));
        match state.store().commit_all(writes).await? {
            Ok(outcomes) => {
                if let Some(WriteOutcome::Appended(appended)) = outcomes.first() {
                    let links = accepted.iter().map(trace::record_links);
                    let ids = appended.iter().map(|a| (!a.duplicate).then(|| trace::record_id(a)));
                    let traced = trace::entries(TraceKind::Record, &format!("stream:{name}"), links.zip(ids));
                    state.services.traces().record(traced).await;
                }
                let stored: Vec<StoredOutcome> = outcomes.iter().map(StoredOutcome::from).collect();
                let mut response = crate::idempotency::committed_answer(&template, &stored)?;
                if !full.is_empty() {
                    count_stream_full(name, full.len());
                    let seconds = crate::error::QUEUE_FULL_RETRY_AFTER_S;
                    response.headers_mut().insert(axum::http::header::RETRY_AFTER, seconds.into());
                }
                return Ok(response);
            }
            Err(Refused { write: 0, conflict: Conflict::RecordRefused { record, error } }) if answer_write == 1 => {
                let i = positions.remove(record);
                accepted.remove(record);
                results[i] = Some(failed(wire::record_error(&error, i)));
                if matches!(error, RecordError::StreamFull { .. }) {
                    full.push(error);
                }
            }
            Err(Refused { conflict: Conflict::StreamNotFound(stream), .. }) => {
                return Err(sluice_store::LogError::StreamNotFound(stream).into());
            }
            Err(Refused { conflict: Conflict::RecordChanged, .. }) => return Err(crate::idempotency::in_use()),
            Err(Refused { conflict: Conflict::RecordExists, .. }) => return Ok(crate::idempotency::claim_lost()),
            Err(other) => {
                return Err(ApiError::new(ErrorCode::Internal, format!("the append's commit was refused: {other:?}")));
            }
        }
    }
}

/// A record's id in the trace: `partition/offset`.
fn failed(error: sluice_api::ErrorBody) -> AppendResult {
    AppendResult { partition: None, offset: None, timestamp_ms: None, duplicate: false, error: Some(error) }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReadParams {
    /// The first offset to read (inclusive); default: the partition's first kept record.
    from_offset: Option<u64>,
    /// Or: the first record at or after this time (ms since the epoch).
    from_time_ms: Option<u64>,
    /// Most records (1 to 1000, default 100); at most 16 MiB of bodies.
    max: Option<u32>,
    /// Long poll at the end of the partition (at most 20000, default 0).
    wait_ms: Option<u64>,
}

/// A partition number from the path.
pub(crate) fn partition_number(text: &str) -> Result<u32, ApiError> {
    text.parse().map_err(|_| ApiError::invalid("partition", format!("{text:?} is not a partition number")))
}

#[utoipa::path(
    get, path = "/v1/streams/{name}/partitions/{partition}/records", tag = "streams",
    params(("name" = String, Path, description = "Stream name"), ("partition" = u32, Path, description = "Partition"), ReadParams),
    responses(
        (status = 200, description = "Records in offset order, with the partition's bounds", body = ReadResponse),
        (status = 400, description = "`partition_out_of_range`, `invalid_argument`", body = ErrorResponse),
        (status = 404, description = "`stream_not_found`", body = ErrorResponse),
        (status = 416, description = "`offset_out_of_range`: below the first kept offset (`details.first_offset`)", body = ErrorResponse),
    )
)]
pub async fn read(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((name, partition)): Path<(String, String)>,
    Query(params): Query<ReadParams>,
) -> JsonResult<ReadResponse> {
    let name = tenant.name("name", &name)?;
    let partition = partition_number(&partition)?;
    let from = match (params.from_offset, params.from_time_ms) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid("from_offset", "give from_offset or from_time_ms, not both"));
        }
        (Some(o), None) => ReadFrom::Offset(o),
        (None, Some(t)) => ReadFrom::Time(t),
        // Every timestamp is at or after 0: the first record kept.
        (None, None) => ReadFrom::Time(0),
    };
    let request = ReadRequest {
        partition,
        from,
        max: params.max.unwrap_or(READ_RECORDS_DEFAULT),
        wait_ms: params.wait_ms.unwrap_or(0),
    };
    request.validate()?;
    let batch = state.store().read(&name, request).await?;
    let records = batch.records.into_iter().map(|r| wire::record(r, None, None)).collect();
    Ok(axum::Json(ReadResponse { records, first_offset: batch.first_offset, next_offset: batch.next_offset }))
}

/// A stream's labels (see `sluice_core::name::resource_labels`), then `extra`.
fn labels(stored: &str, extra: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    let mut labels = sluice_core::name::resource_labels("stream", stored);
    labels.extend_from_slice(extra);
    labels
}

/// The streams' gauges for `/metrics`: every partition's offsets and bytes, every group's lag
/// per partition and records in flight.
pub async fn metrics_text(store: &dyn Store) -> Result<String, ApiError> {
    let mut streams = Vec::new();
    loop {
        let after = streams.last().map(|v: &sluice_store::StreamView| v.name.clone());
        let page = match store.list_streams("", after.as_deref(), LIST_LIMIT_MAX).await {
            Ok(page) => page,
            Err(sluice_store::LogError::Unsupported) => return Ok(String::new()),
            Err(e) => return Err(e.into()),
        };
        let last = page.len() < LIST_LIMIT_MAX;
        streams.extend(page);
        if last {
            break;
        }
    }
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    metrics::with_local_recorder(&recorder, || {
        metrics::describe_gauge!(
            "sluice_stream_next_offset",
            "The offset the next record appended to the partition gets."
        );
        metrics::describe_gauge!("sluice_stream_first_offset", "The partition's first kept offset.");
        metrics::describe_gauge!("sluice_stream_bytes", "Bytes the partition keeps.");
        metrics::describe_gauge!(
            "sluice_stream_group_lag",
            "Records from the group's committed offset to the partition's end."
        );
        metrics::describe_gauge!("sluice_stream_group_in_flight", "Shared groups: records held by members now.");
        for s in &streams {
            for (p, part) in s.partitions.iter().enumerate() {
                let labels = labels(&s.name, &[("partition", p.to_string())]);
                metrics::gauge!("sluice_stream_next_offset", labels.as_slice()).set(part.next_offset as f64);
                metrics::gauge!("sluice_stream_first_offset", labels.as_slice()).set(part.first_offset as f64);
                metrics::gauge!("sluice_stream_bytes", labels.as_slice()).set(part.bytes as f64);
            }
            for g in &s.groups {
                for (p, gp) in g.partitions.iter().enumerate() {
                    let labels = labels(&s.name, &[("group", g.name.clone()), ("partition", p.to_string())]);
                    metrics::gauge!("sluice_stream_group_lag", labels.as_slice()).set(gp.lag as f64);
                }
                if g.config.mode == sluice_store::GroupMode::Shared {
                    let labels = labels(&s.name, &[("group", g.name.clone())]);
                    metrics::gauge!("sluice_stream_group_in_flight", labels.as_slice()).set(g.in_flight as f64);
                }
            }
        }
    });
    Ok(recorder.handle().render())
}
