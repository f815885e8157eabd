//! Sagas as stored: every definition version `saga/<name>/<version>` (zero-padded, so versions
//! list in order) and the latest version's number in `saga_head/<name>`, every instance `saga_instance/<id>`, and, while an instance is unsettled, its
//! entry `saga_active/<id>` (what the orchestrator looks through for due work), plus
//! `saga_correlation/<correlation id>/<id>` so that a participant's reply finds its instance,
//! `saga_reply_queue/<queue>` for every reply queue a definition named, and `saga_failed/<id>`
//! while an instance is `failed` (written in the same commit as the instance).
//! All JSON with a format number. An instance changes only by compare-and-swap against the
//! bytes its writer read, in one commit with its active entry, so two nodes never both make the
//! same attempt: the one whose swap fails drops what it computed.

use serde::{Deserialize, Serialize};
use sluice_core::saga::{SagaDefinition, SagaInstance, SagaStatus};
use sluice_store::Write;

pub const SAGA_KIND: &str = "saga";
pub const SAGA_HEAD_KIND: &str = "saga_head";
pub const SAGA_INSTANCE_KIND: &str = "saga_instance";
pub const SAGA_ACTIVE_KIND: &str = "saga_active";
pub const SAGA_CORRELATION_KIND: &str = "saga_correlation";
/// `saga_reply_queue/<queue>`, empty: a queue some definition named as a reply queue, which
/// every node's orchestrator consumes.
pub const SAGA_REPLY_QUEUE_KIND: &str = "saga_reply_queue";
/// `saga_failed/<id>` while an instance is `failed`, holding its saga's name: what the built-in
/// `saga-failed` alert reads, without looking through every instance.
pub const SAGA_FAILED_KIND: &str = "saga_failed";

/// The format of these records; a reader refuses others rather than guess.
pub const RECORD_FORMAT: u8 = 1;

pub fn version_key(name: &str, version: u32) -> String {
    format!("{name}/{version:08}")
}

pub fn correlation_key(correlation_id: &str, id: &str) -> String {
    format!("{correlation_id}/{id}")
}

#[derive(Serialize, Deserialize)]
struct Stored<T> {
    format: u8,
    #[serde(flatten)]
    value: T,
}

pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(&Stored { format: RECORD_FORMAT, value }).expect("saga records serialize")
}

pub fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, String> {
    let stored: Stored<T> = serde_json::from_slice(bytes).map_err(|e| format!("a saga record does not parse: {e}"))?;
    if stored.format != RECORD_FORMAT {
        return Err(format!("a saga record has format {}, this version reads {RECORD_FORMAT}", stored.format));
    }
    Ok(stored.value)
}

pub fn decode_definition(bytes: &[u8]) -> Result<SagaDefinition, String> {
    decode(bytes)
}

pub fn decode_instance(bytes: &[u8]) -> Result<SagaInstance, String> {
    decode(bytes)
}

/// What the head record holds: the latest version of a saga.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    pub version: u32,
}

/// What the active entry holds: when the instance is next due (for the orchestrator's scan).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveEntry {
    pub due_at_ms: Option<u64>,
}

/// What the failed entry holds: the saga the failed instance belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedEntry {
    pub saga: String,
}

/// The writes that replace an instance read as `expected` (then in status `was`) with
/// `instance`: the swap, its active entry set (due time) or removed once it settled, and its
/// failed entry written or removed when it becomes or stops being `failed`.
pub fn replace_writes(expected: Vec<u8>, was: SagaStatus, instance: &SagaInstance) -> (Vec<Write>, Vec<u8>) {
    let value = encode(instance);
    let mut writes = vec![Write::ReplaceRecord {
        kind: SAGA_INSTANCE_KIND.into(),
        key: instance.id.clone(),
        expected,
        value: value.clone(),
    }];
    writes.push(active_write(instance));
    match (was == SagaStatus::Failed, instance.status == SagaStatus::Failed) {
        (false, true) => writes.push(Write::PutRecord {
            kind: SAGA_FAILED_KIND.into(),
            key: instance.id.clone(),
            value: encode(&FailedEntry { saga: instance.saga.clone() }),
        }),
        (true, false) => writes.push(Write::DeleteRecord { kind: SAGA_FAILED_KIND.into(), key: instance.id.clone() }),
        _ => {}
    }
    (writes, value)
}

/// The active entry's write for `instance` as it is now.
pub fn active_write(instance: &SagaInstance) -> Write {
    if instance.status.is_settled() {
        Write::DeleteRecord { kind: SAGA_ACTIVE_KIND.into(), key: instance.id.clone() }
    } else {
        Write::PutRecord {
            kind: SAGA_ACTIVE_KIND.into(),
            key: instance.id.clone(),
            value: encode(&ActiveEntry { due_at_ms: instance.next_due_at() }),
        }
    }
}
