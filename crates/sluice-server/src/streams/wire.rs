//! Mapping between the wire types of streams (`sluice_api::streams`) and the store's, and the
//! per-entry errors of appends and receipt batches.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;
use sluice_api as api;
use sluice_api::{ErrorBody, ErrorCode};
use sluice_core::ValidationError;
use sluice_core::stream::shared::ReceiptError;
use sluice_core::stream::{NewRecord, Record, RecordError, StartAt};
use sluice_store::{GroupConfig, GroupMode, GroupView, StreamView};

use crate::convert::rfc3339;

fn exclusive(
    field: &str,
    text: Option<String>,
    b64: Option<String>,
) -> Result<Option<(Vec<u8>, bool)>, ValidationError> {
    match (text, b64) {
        (Some(_), Some(_)) => Err(ValidationError::new(field, format!("give {field} or {field}_base64, not both"))),
        (Some(t), None) => Ok(Some((t.into_bytes(), false))),
        (None, Some(b)) => STANDARD
            .decode(b.as_bytes())
            .map(|bytes| Some((bytes, true)))
            .map_err(|e| ValidationError::new(format!("{field}_base64"), format!("not base64: {e}"))),
        (None, None) => Ok(None),
    }
}

pub fn new_record(r: api::AppendRecord) -> Result<NewRecord, ValidationError> {
    let key = exclusive("key", r.key, r.key_base64)?.map(|(k, _)| k);
    let (body, body_binary) = exclusive("body", r.body, r.body_base64)?.unwrap_or_default();
    let mut headers = r.headers;
    for (field, header, value) in [
        ("version", sluice_services::schemas::ATTRIBUTE_VERSION, r.version),
        ("causation_id", sluice_services::trace::ATTRIBUTE_CAUSATION_ID, r.causation_id),
    ] {
        let Some(value) = value else { continue };
        match headers.get(header) {
            Some(given) if *given != value => {
                return Err(ValidationError::new(
                    field,
                    format!("{field} {value:?} differs from the header {header} given too; give one of them"),
                ));
            }
            _ => {
                headers.insert(header.to_owned(), value);
            }
        }
    }
    Ok(NewRecord {
        key,
        partition: r.partition,
        body,
        body_binary,
        headers,
        r#type: r.record_type,
        correlation_id: r.correlation_id,
        dedup_id: r.dedup_id,
    })
}

pub fn record(r: Record, receipt: Option<String>, deliveries: Option<u32>) -> api::StreamRecord {
    let (key, key_base64) = match r.key {
        Some(k) => match String::from_utf8(k) {
            Ok(text) => (Some(text), None),
            Err(e) => (None, Some(STANDARD.encode(e.into_bytes()))),
        },
        None => (None, None),
    };
    let (body, body_base64) = if r.body_binary {
        (None, Some(STANDARD.encode(&r.body)))
    } else {
        match String::from_utf8(r.body) {
            Ok(text) => (Some(text), None),
            Err(e) => (None, Some(STANDARD.encode(e.into_bytes()))),
        }
    };
    api::StreamRecord {
        partition: r.partition,
        offset: r.offset,
        timestamp: rfc3339(r.timestamp_ms),
        timestamp_ms: r.timestamp_ms,
        key,
        key_base64,
        body,
        body_base64,
        headers: r.headers,
        record_type: r.r#type,
        correlation_id: r.correlation_id,
        dedup_id: r.dedup_id,
        receipt,
        deliveries,
    }
}

pub fn stream(v: StreamView) -> api::Stream {
    let partition_details = v
        .partitions
        .iter()
        .enumerate()
        .map(|(i, p)| api::StreamPartition {
            partition: i as u32,
            first_offset: p.first_offset,
            next_offset: p.next_offset,
            bytes: p.bytes,
        })
        .collect();
    api::Stream {
        name: v.name,
        partitions: v.config.partitions,
        retention_ms: v.config.retention_ms,
        retention_bytes: v.config.retention_bytes,
        record_bytes_max: v.config.record_bytes_max,
        segment_bytes: v.config.segment_bytes,
        schema_validation: v.config.schema_validation,
        rate_limit: v.config.rate_limit.map(crate::convert::rate_limit_to_api),
        max_depth_messages: v.config.max_depth_messages,
        max_depth_bytes: v.config.max_depth_bytes,
        overflow: crate::convert::overflow_to_api(v.config.overflow),
        depth_messages: v.partitions.iter().map(|p| p.next_offset - p.first_offset).sum(),
        depth_bytes: v.partitions.iter().map(|p| p.bytes).sum(),
        created_at: rfc3339(v.created_at),
        created_at_ms: v.created_at,
        partition_details,
        groups: v.groups.into_iter().map(group).collect(),
    }
}

pub fn start_to_api(s: StartAt) -> api::GroupStart {
    match s {
        StartAt::Earliest => api::GroupStart::Named(api::StartName::Earliest),
        StartAt::Latest => api::GroupStart::Named(api::StartName::Latest),
        StartAt::Offset(offset) => api::GroupStart::Offset { offset },
        StartAt::Time(time_ms) => api::GroupStart::Time { time_ms },
    }
}

pub fn group(g: GroupView) -> api::StreamGroup {
    let shared = g.config.mode == GroupMode::Shared;
    let partitions: Vec<api::GroupPartition> = g
        .partitions
        .into_iter()
        .enumerate()
        .map(|(i, p)| api::GroupPartition {
            partition: i as u32,
            committed_offset: p.committed,
            lag: p.lag,
            owner: p.owner,
        })
        .collect();
    api::StreamGroup {
        name: g.name,
        mode: if shared { api::GroupMode::Shared } else { api::GroupMode::Offsets },
        start: start_to_api(g.config.start),
        session_timeout_ms: g.config.session_timeout_ms,
        ack_timeout_ms: shared.then_some(g.config.ack_timeout_ms),
        max_deliveries: shared.then_some(g.config.max_deliveries),
        dead_letter_queue: g.config.dead_letter_queue,
        key_ordered: shared.then_some(g.config.key_ordered),
        generation: (!shared).then_some(g.generation),
        members: g.members,
        lag: partitions.iter().map(|p| p.lag).sum(),
        partitions,
        in_flight: shared.then_some(g.in_flight),
        created_at: rfc3339(g.created_at),
        created_at_ms: g.created_at,
    }
}

pub fn group_config(r: &api::CreateGroupRequest) -> GroupConfig {
    let d = GroupConfig::default();
    GroupConfig {
        mode: match r.mode.unwrap_or_default() {
            api::GroupMode::Offsets => GroupMode::Offsets,
            api::GroupMode::Shared => GroupMode::Shared,
        },
        start: match r.start {
            None | Some(api::GroupStart::Named(api::StartName::Earliest)) => StartAt::Earliest,
            Some(api::GroupStart::Named(api::StartName::Latest)) => StartAt::Latest,
            Some(api::GroupStart::Offset { offset }) => StartAt::Offset(offset),
            Some(api::GroupStart::Time { time_ms }) => StartAt::Time(time_ms),
        },
        session_timeout_ms: r.session_timeout_ms.unwrap_or(d.session_timeout_ms),
        ack_timeout_ms: r.ack_timeout_ms.unwrap_or(d.ack_timeout_ms),
        max_deliveries: r.max_deliveries.unwrap_or(d.max_deliveries),
        dead_letter_queue: r.dead_letter_queue.clone(),
        key_ordered: r.key_ordered.unwrap_or(false),
    }
}

fn body(code: ErrorCode, message: String, details: serde_json::Value) -> ErrorBody {
    ErrorBody { code: code.as_str().to_string(), message, details: Some(details) }
}

/// An append entry's error, its field placed under `records[i]`.
pub fn record_error(e: &RecordError, i: usize) -> ErrorBody {
    let message = e.to_string();
    match e {
        RecordError::Invalid(v) => {
            body(ErrorCode::InvalidArgument, message, json!({ "field": format!("records[{i}].{}", v.field) }))
        }
        RecordError::TooLarge { size_bytes, max_bytes } => {
            body(ErrorCode::RecordTooLarge, message, json!({ "size_bytes": size_bytes, "max_bytes": max_bytes }))
        }
        RecordError::NoSuchPartition { partition, partitions } => body(
            ErrorCode::PartitionOutOfRange,
            message,
            json!({ "field": format!("records[{i}].partition"), "partition": partition, "partitions": partitions }),
        ),
        RecordError::DedupFull => {
            body(ErrorCode::LimitExceeded, message, json!({ "field": format!("records[{i}].dedup_id") }))
        }
        RecordError::StreamFull { depth, max_messages, max_bytes } => {
            body(ErrorCode::QueueFull, message, crate::error::queue_full_details(*depth, *max_messages, *max_bytes))
        }
    }
}

pub fn receipt_error(e: &ReceiptError) -> ErrorBody {
    let code = match e {
        ReceiptError::Invalid => ErrorCode::InvalidReceipt,
        ReceiptError::Foreign => ErrorCode::ForeignReceipt,
        ReceiptError::Stale => ErrorCode::StaleReceipt,
    };
    ErrorBody { code: code.as_str().to_string(), message: e.to_string(), details: None }
}
