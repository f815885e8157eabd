//! Rows to core types and back: message rows, queue rows, and the JSON shapes kept in jsonb
//! columns.
//!
//! Message attributes are stored in the native API's shape, `{"name": {"type": "...",
//! "value": "..."}}` with Binary values in standard base64, because `sluice_send` (SQL) takes
//! the same JSON from applications. The envelope and the queue attributes are stored as serde
//! writes the core types.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};
use sluice_core::message::{AttributeData, MessageContent, MessageEnvelope};
use sluice_core::{AttributeValue, MessageId, MessageMeta, QueueAttributes};
use sluice_store::StoredMessage;
use tokio_postgres::Row;

/// The columns of a message row, in the order `message_from_row` reads them by name. Every
/// statement that reads messages names the table `m`.
macro_rules! message_columns {
    () => {
        "m.seq, m.queue_id, m.id, m.priority, m.sent_at, m.visible_at, m.in_flight, m.receive_count, m.epoch, \
         m.first_received_at, m.size_bytes, m.group_id, m.dead_letter_source, m.last_error, m.body, m.body_binary, \
         m.attributes, m.system_attributes, m.envelope"
    };
}
pub(crate) use message_columns;

/// Why a stored row could not be read back. Only possible if something other than Sluice wrote
/// the row, or a column was changed by hand.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

impl From<tokio_postgres::Error> for DecodeError {
    fn from(e: tokio_postgres::Error) -> Self {
        DecodeError(e.to_string())
    }
}

pub fn attributes_to_json(attributes: &BTreeMap<String, AttributeValue>) -> Value {
    let map: Map<String, Value> = attributes
        .iter()
        .map(|(name, a)| {
            let value = match &a.value {
                AttributeData::Text(s) => s.clone(),
                AttributeData::Bytes(b) => STANDARD.encode(b),
            };
            let mut entry = Map::new();
            entry.insert("type".into(), Value::String(a.data_type.clone()));
            entry.insert("value".into(), Value::String(value));
            (name.clone(), Value::Object(entry))
        })
        .collect();
    Value::Object(map)
}

pub fn attributes_from_json(value: &Value) -> Result<BTreeMap<String, AttributeValue>, DecodeError> {
    let Value::Object(map) = value else {
        return Err(DecodeError("attributes are not a JSON object".into()));
    };
    let mut out = BTreeMap::new();
    for (name, entry) in map {
        let field = |key: &str| {
            entry
                .get(key)
                .and_then(Value::as_str)
                .ok_or_else(|| DecodeError(format!("attribute {name:?} has no string {key:?}")))
        };
        let data_type = field("type")?.to_string();
        let raw = field("value")?;
        let attribute = AttributeValue { data_type, value: AttributeData::Text(String::new()) };
        let value = if attribute.base_type() == "Binary" {
            AttributeData::Bytes(
                STANDARD.decode(raw).map_err(|e| DecodeError(format!("attribute {name:?} is not base64: {e}")))?,
            )
        } else {
            AttributeData::Text(raw.to_string())
        };
        out.insert(name.clone(), AttributeValue { value, ..attribute });
    }
    Ok(out)
}

pub fn envelope_to_json(envelope: &MessageEnvelope) -> Value {
    serde_json::to_value(envelope).expect("an envelope always serializes")
}

pub fn queue_attributes_to_json(attributes: &QueueAttributes) -> Value {
    serde_json::to_value(attributes).expect("queue attributes always serialize")
}

/// Reads queue attributes, taking the default for any field the stored JSON lacks: a row written
/// before a field was added to `QueueAttributes` still reads, with the field at its default.
pub fn queue_attributes_from_json(value: Value) -> Result<QueueAttributes, DecodeError> {
    let Value::Object(stored) = value else {
        return Err(DecodeError("queue attributes are not a JSON object".into()));
    };
    let mut merged = match queue_attributes_to_json(&QueueAttributes::default()) {
        Value::Object(defaults) => defaults,
        _ => unreachable!("a struct serializes to an object"),
    };
    merged.extend(stored);
    serde_json::from_value(Value::Object(merged)).map_err(|e| DecodeError(format!("queue attributes: {e}")))
}

/// Milliseconds are stored as `bigint`; none is ever negative.
pub fn ms(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// A message row (see `message_columns!`) as its sequence number and stored message.
pub fn message_from_row(row: &Row) -> Result<(u64, StoredMessage), DecodeError> {
    let seq: i64 = row.try_get("seq")?;
    let id: uuid::Uuid = row.try_get("id")?;
    let priority: i16 = row.try_get("priority")?;
    let receive_count: i32 = row.try_get("receive_count")?;
    let epoch: i64 = row.try_get("epoch")?;
    let meta = MessageMeta {
        queue: ms(row.try_get("queue_id")?),
        id: MessageId(id.as_u128()),
        priority: u8::try_from(priority).map_err(|_| DecodeError(format!("priority {priority}")))?,
        sent_at: ms(row.try_get("sent_at")?),
        visible_at: ms(row.try_get("visible_at")?),
        in_flight: row.try_get("in_flight")?,
        receive_count: u32::try_from(receive_count).unwrap_or(0),
        epoch: u32::try_from(epoch).map_err(|_| DecodeError(format!("epoch {epoch} is beyond a receipt's range")))?,
        first_received_at: row.try_get::<_, Option<i64>>("first_received_at")?.map(ms),
        size_bytes: ms(row.try_get("size_bytes")?),
        group_id: row.try_get("group_id")?,
        dead_letter_source: row.try_get("dead_letter_source")?,
        last_error: row.try_get("last_error")?,
    };
    let envelope: Value = row.try_get("envelope")?;
    let content = MessageContent {
        body: row.try_get("body")?,
        body_binary: row.try_get("body_binary")?,
        attributes: attributes_from_json(&row.try_get("attributes")?)?,
        system_attributes: attributes_from_json(&row.try_get("system_attributes")?)?,
        envelope: serde_json::from_value(envelope).map_err(|e| DecodeError(format!("envelope: {e}")))?,
    };
    Ok((ms(seq), StoredMessage { seq: ms(seq), meta, content }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_round_trip_in_the_api_shape() {
        let mut attributes = BTreeMap::new();
        attributes.insert(
            "n".to_string(),
            AttributeValue { data_type: "Number.int".into(), value: AttributeData::Text("42".into()) },
        );
        attributes.insert(
            "b".to_string(),
            AttributeValue { data_type: "Binary".into(), value: AttributeData::Bytes(vec![0, 255]) },
        );
        let json = attributes_to_json(&attributes);
        assert_eq!(
            json,
            serde_json::json!({"n": {"type": "Number.int", "value": "42"}, "b": {"type": "Binary", "value": "AP8="}})
        );
        assert_eq!(attributes_from_json(&json).unwrap(), attributes);
    }

    #[test]
    fn malformed_attributes_are_reported() {
        assert!(attributes_from_json(&serde_json::json!([])).is_err());
        assert!(attributes_from_json(&serde_json::json!({"a": {"type": "String"}})).is_err());
        assert!(attributes_from_json(&serde_json::json!({"a": {"type": "Binary", "value": "%%"}})).is_err());
    }

    #[test]
    fn queue_attributes_missing_a_field_read_with_its_default() {
        let attributes = QueueAttributes { visibility_timeout_ms: 5, ..Default::default() };
        let mut json = queue_attributes_to_json(&attributes);
        json.as_object_mut().unwrap().remove("receive_wait_ms");
        assert_eq!(queue_attributes_from_json(json).unwrap(), attributes);
        assert!(queue_attributes_from_json(serde_json::json!([])).is_err());
    }

    #[test]
    fn envelope_reads_back_with_missing_fields() {
        let envelope: MessageEnvelope = serde_json::from_value(serde_json::json!({"type": "t"})).unwrap();
        assert_eq!(envelope, MessageEnvelope { r#type: Some("t".into()), ..Default::default() });
        let full = MessageEnvelope { source: Some("s".into()), ..envelope };
        assert_eq!(serde_json::from_value::<MessageEnvelope>(envelope_to_json(&full)).unwrap(), full);
    }
}
