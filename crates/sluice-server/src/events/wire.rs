//! The event store's wire mapping: stored events to their JSON form, and the metrics every
//! event route records.

use sluice_api::events::EventWire;
use sluice_store::StoredEvent;

use crate::convert::rfc3339;
use crate::tenant::Tenant;

/// JSON text as stored, back to a value (stored text was checked to be JSON on the way in).
fn json(text: String) -> serde_json::Value {
    serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
}

/// An event as `tenant` sees it: its stream by the tenant's name.
pub fn event(e: StoredEvent, tenant: &Tenant) -> EventWire {
    EventWire {
        stream_id: tenant.show(&e.stream_id),
        version: e.version,
        position: e.position,
        id: e.id,
        r#type: e.r#type,
        data: json(e.data),
        metadata: e.metadata.map(json),
        correlation_id: e.correlation_id,
        causation_id: e.causation_id,
        time: rfc3339(e.time_ms),
        time_ms: e.time_ms,
    }
}

pub fn events(list: Vec<StoredEvent>, tenant: &Tenant) -> Vec<EventWire> {
    list.into_iter().map(|e| event(e, tenant)).collect()
}

/// Counts events handed to readers, by how they were read (`stream`, `all`, `subscription`).
pub fn count_read(kind: &'static str, n: usize) {
    metrics::counter!("sluice_events_read_total", "kind" => kind).increment(n as u64);
}
