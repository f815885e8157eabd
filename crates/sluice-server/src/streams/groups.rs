//! Consumer-group handlers (`/v1/streams/{name}/groups...`): create, list, view and delete
//! groups; `offsets` mode's fetch, commit and seek; `shared` mode's fetch, ack, release and
//! nack.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use sluice_api::{
    BatchResponse, CommitRequest, CreateGroupRequest, EntryResult, ErrorCode, ErrorResponse, FetchRequest,
    FetchResponse, GroupList, ReceiptsRequest, SeekRequest, SeekResponse, StreamGroup,
};
use sluice_core::limits::BATCH_ENTRIES_MAX;
use sluice_core::stream::limits::READ_RECORDS_DEFAULT;
use sluice_store::{ReceiptResults, SeekTo};

use super::wire;
use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Json, JsonOrEmpty, Path};
use crate::tenant::Tenant;

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

#[utoipa::path(
    post, path = "/v1/streams/{name}/groups", tag = "streams",
    params(("name" = String, Path, description = "Stream name")),
    request_body = CreateGroupRequest,
    responses(
        (status = 201, description = "Created", body = StreamGroup),
        (status = 200, description = "A group with these settings already exists", body = StreamGroup),
        (status = 400, description = "`invalid_argument`, `dead_letter_queue_not_found`", body = ErrorResponse),
        (status = 404, description = "`stream_not_found`", body = ErrorResponse),
        (status = 409, description = "`group_exists`", body = ErrorResponse),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(stream): Path<String>,
    Json(mut request): Json<CreateGroupRequest>,
) -> Result<(StatusCode, axum::Json<StreamGroup>), ApiError> {
    let stream = tenant.name("name", &stream)?;
    if let Some(queue) = &mut request.dead_letter_queue {
        *queue = tenant.name("dead_letter_queue", queue)?;
    }
    let (view, created) = state.store().create_group(&stream, &request.name, wire::group_config(&request)).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, axum::Json(tenant.group(wire::group(view)))))
}

#[utoipa::path(
    get, path = "/v1/streams/{name}/groups", tag = "streams",
    params(("name" = String, Path, description = "Stream name")),
    responses((status = 200, description = "The stream's groups with their lag", body = GroupList), (status = 404, description = "`stream_not_found`", body = ErrorResponse))
)]
pub async fn list(State(state): State<AppState>, tenant: Tenant, Path(stream): Path<String>) -> JsonResult<GroupList> {
    let stream = tenant.name("name", &stream)?;
    let view = state.store().get_stream(&stream).await?;
    Ok(axum::Json(GroupList { groups: view.groups.into_iter().map(|g| tenant.group(wire::group(g))).collect() }))
}

#[utoipa::path(
    get, path = "/v1/streams/{name}/groups/{group}", tag = "streams",
    params(("name" = String, Path, description = "Stream name"), ("group" = String, Path, description = "Group name")),
    responses((status = 200, description = "The group: members, generation, committed offsets and lag per partition", body = StreamGroup), (status = 404, description = "`stream_not_found`, `group_not_found`", body = ErrorResponse))
)]
pub async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((stream, group)): Path<(String, String)>,
) -> JsonResult<StreamGroup> {
    let stream = tenant.name("name", &stream)?;
    Ok(axum::Json(tenant.group(wire::group(state.store().get_group(&stream, &group).await?))))
}

#[utoipa::path(
    delete, path = "/v1/streams/{name}/groups/{group}", tag = "streams",
    params(("name" = String, Path, description = "Stream name"), ("group" = String, Path, description = "Group name")),
    responses((status = 204, description = "Deleted"), (status = 404, description = "`stream_not_found`, `group_not_found`", body = ErrorResponse))
)]
pub async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((stream, group)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let stream = tenant.name("name", &stream)?;
    state.store().delete_group(&stream, &group).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post, path = "/v1/streams/{name}/groups/{group}/fetch", tag = "streams",
    params(("name" = String, Path, description = "Stream name"), ("group" = String, Path, description = "Group name")),
    request_body = FetchRequest,
    responses(
        (status = 200, description = "Records: offsets mode with the `generation` to commit with and the member's `partitions`; shared mode with a `receipt` each", body = FetchResponse),
        (status = 400, description = "`invalid_argument`", body = ErrorResponse),
        (status = 404, description = "`stream_not_found`, `group_not_found`", body = ErrorResponse),
    )
)]
pub async fn fetch(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((stream, group)): Path<(String, String)>,
    Json(request): Json<FetchRequest>,
) -> JsonResult<FetchResponse> {
    let stream = tenant.name("name", &stream)?;
    let request = sluice_store::FetchRequest {
        member: request.member,
        max: request.max.unwrap_or(READ_RECORDS_DEFAULT),
        wait_ms: request.wait_ms.unwrap_or(0),
    };
    let fetched = state.store().fetch(&stream, &group, request).await?;
    let offsets = fetched.generation.is_some();
    Ok(axum::Json(FetchResponse {
        records: fetched.records.into_iter().map(|r| wire::record(r.record, r.receipt, r.deliveries)).collect(),
        generation: fetched.generation,
        partitions: offsets.then_some(fetched.partitions),
    }))
}

#[utoipa::path(
    post, path = "/v1/streams/{name}/groups/{group}/commit", tag = "streams",
    params(("name" = String, Path, description = "Stream name"), ("group" = String, Path, description = "Group name")),
    request_body = CommitRequest,
    responses(
        (status = 204, description = "Committed"),
        (status = 400, description = "`invalid_argument`, `partition_out_of_range`", body = ErrorResponse),
        (status = 404, description = "`stream_not_found`, `group_not_found`", body = ErrorResponse),
        (status = 409, description = "`stale_generation`, `offset_regression`, `wrong_group_mode`", body = ErrorResponse),
        (status = 416, description = "`offset_out_of_range`: past the partition's end", body = ErrorResponse),
    )
)]
pub async fn commit(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((stream, group)): Path<(String, String)>,
    Json(request): Json<CommitRequest>,
) -> Result<StatusCode, ApiError> {
    let stream = tenant.name("name", &stream)?;
    if request.offsets.is_empty() {
        return Err(ApiError::invalid("offsets", "commit at least one partition's offset"));
    }
    let mut offsets = BTreeMap::new();
    for (p, o) in request.offsets {
        let partition =
            p.parse::<u32>().map_err(|_| ApiError::invalid("offsets", format!("{p:?} is not a partition number")))?;
        offsets.insert(partition, o);
    }
    state.store().commit(&stream, &group, &request.member, request.generation, offsets).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post, path = "/v1/streams/{name}/groups/{group}/seek", tag = "streams",
    params(("name" = String, Path, description = "Stream name"), ("group" = String, Path, description = "Group name")),
    request_body = SeekRequest,
    responses(
        (status = 200, description = "The offset the group's partition now starts at; it is also the committed offset", body = SeekResponse),
        (status = 400, description = "`invalid_argument`, `partition_out_of_range`", body = ErrorResponse),
        (status = 404, description = "`stream_not_found`, `group_not_found`", body = ErrorResponse),
    )
)]
pub async fn seek(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((stream, group)): Path<(String, String)>,
    Json(request): Json<SeekRequest>,
) -> JsonResult<SeekResponse> {
    let stream = tenant.name("name", &stream)?;
    let to = match (request.offset, request.time_ms) {
        (Some(o), None) => SeekTo::Offset(o),
        (None, Some(t)) => SeekTo::Time(t),
        _ => return Err(ApiError::invalid("offset", "give offset or time_ms, one of them")),
    };
    let offset = state.store().seek(&stream, &group, request.partition, to).await?;
    Ok(axum::Json(SeekResponse { partition: request.partition, offset }))
}

fn check_receipts(request: &ReceiptsRequest) -> Result<(), ApiError> {
    let n = request.receipts.len();
    if n == 0 {
        return Err(ApiError::new(ErrorCode::EmptyBatch, "receipts is empty")
            .with_details(serde_json::json!({ "field": "receipts" })));
    }
    if n > BATCH_ENTRIES_MAX {
        return Err(ApiError::new(
            ErrorCode::BatchTooLarge,
            format!("receipts has {n} entries; at most {BATCH_ENTRIES_MAX}"),
        )
        .with_details(serde_json::json!({ "field": "receipts", "count": n, "max": BATCH_ENTRIES_MAX })));
    }
    Ok(())
}

fn results(r: ReceiptResults) -> axum::Json<BatchResponse> {
    let results = r
        .iter()
        .map(|r| match r {
            Ok(()) => EntryResult { ok: true, error: None },
            Err(e) => EntryResult { ok: false, error: Some(wire::receipt_error(e)) },
        })
        .collect();
    axum::Json(BatchResponse { results })
}

#[utoipa::path(
    post, path = "/v1/streams/{name}/groups/{group}/ack", tag = "streams",
    params(("name" = String, Path, description = "Stream name"), ("group" = String, Path, description = "Group name")),
    request_body = ReceiptsRequest,
    responses((status = 200, description = "One result per receipt", body = BatchResponse), (status = 409, description = "`wrong_group_mode`", body = ErrorResponse))
)]
pub async fn ack(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((stream, group)): Path<(String, String)>,
    Json(request): Json<ReceiptsRequest>,
) -> JsonResult<BatchResponse> {
    let stream = tenant.name("name", &stream)?;
    check_receipts(&request)?;
    Ok(results(state.store().ack_shared(&stream, &group, request.receipts).await?))
}

#[utoipa::path(
    post, path = "/v1/streams/{name}/groups/{group}/release", tag = "streams",
    params(("name" = String, Path, description = "Stream name"), ("group" = String, Path, description = "Group name")),
    request_body = ReceiptsRequest,
    responses((status = 200, description = "One result per receipt; released records are handed out again, not counted as failures", body = BatchResponse), (status = 409, description = "`wrong_group_mode`", body = ErrorResponse))
)]
pub async fn release(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((stream, group)): Path<(String, String)>,
    JsonOrEmpty(request): JsonOrEmpty<ReceiptsRequest>,
) -> JsonResult<BatchResponse> {
    let stream = tenant.name("name", &stream)?;
    check_receipts(&request)?;
    Ok(results(state.store().release_shared(&stream, &group, request.receipts, request.error).await?))
}

#[utoipa::path(
    post, path = "/v1/streams/{name}/groups/{group}/nack", tag = "streams",
    params(("name" = String, Path, description = "Stream name"), ("group" = String, Path, description = "Group name")),
    request_body = ReceiptsRequest,
    responses((status = 200, description = "One result per receipt; a nack counts as a failed delivery (dead-lettered after max_deliveries)", body = BatchResponse), (status = 409, description = "`wrong_group_mode`", body = ErrorResponse))
)]
pub async fn nack(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((stream, group)): Path<(String, String)>,
    Json(request): Json<ReceiptsRequest>,
) -> JsonResult<BatchResponse> {
    let stream = tenant.name("name", &stream)?;
    check_receipts(&request)?;
    Ok(results(state.store().nack_shared(&stream, &group, request.receipts, request.error).await?))
}
