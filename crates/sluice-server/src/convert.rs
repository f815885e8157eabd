//! Mapping between the wire types of `sluice_api` and the core and store types: queues,
//! messages, attributes and times. Pure functions, so every field mapping is testable here.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sluice_api as api;
use sluice_core::broker::QueueView;
use sluice_core::message::AttributeData;
use sluice_core::overflow::{DepthReport, Overflow, RefusalCounts};
use sluice_core::{
    AttributeValue, DeadLetter, MessageEnvelope, MessageState, NewMessage, QueueAttributes, QueueAttributesPatch,
    ValidationError,
};
use sluice_services::trace;
use sluice_store::StoredMessage;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// An epoch-milliseconds time as RFC 3339 in UTC.
pub fn rfc3339(ms: u64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        // Only times past the year 9999 fail, and no stored time is that late.
        .unwrap_or_default()
}

/// Parses an RFC 3339 time into epoch milliseconds, rounding up so that a message is never
/// delivered before the instant the client asked for.
pub fn parse_rfc3339(field: &str, text: &str) -> Result<u64, ValidationError> {
    let t = OffsetDateTime::parse(text, &Rfc3339)
        .map_err(|e| ValidationError::new(field, format!("{text:?} is not an RFC 3339 time: {e}")))?;
    let nanos = t.unix_timestamp_nanos();
    if nanos < 0 {
        return Err(ValidationError::new(field, "times before 1970 are not accepted"));
    }
    let ms = (nanos + 999_999) / 1_000_000;
    u64::try_from(ms).map_err(|_| ValidationError::new(field, "time is out of range"))
}

// ----- queues ------------------------------------------------------------------------------

pub fn queue(view: &QueueView) -> api::Queue {
    let a = &view.attributes;
    api::Queue {
        name: view.name.clone(),
        visibility_timeout_ms: a.visibility_timeout_ms,
        delay_ms: a.delay_ms,
        retention_ms: a.retention_ms,
        message_bytes_max: a.message_bytes_max,
        receive_wait_ms: a.receive_wait_ms,
        dead_letter: a.dead_letter.as_ref().map(dead_letter_to_api),
        fifo: a.fifo,
        content_based_dedup: a.fifo.then_some(a.content_based_dedup),
        dedup_window_ms: a.fifo.then_some(a.dedup_window_ms),
        dedup_scope: a.fifo.then_some(match a.dedup_scope {
            sluice_core::attributes::DedupScope::Queue => api::DedupScope::Queue,
            sluice_core::attributes::DedupScope::MessageGroup => api::DedupScope::MessageGroup,
        }),
        tags: a.tags.clone(),
        schema_validation: a.schema_validation,
        max_depth_messages: a.max_depth_messages,
        max_depth_bytes: a.max_depth_bytes,
        overflow: overflow_to_api(a.overflow),
        expired_to_dlq: a.expired_to_dlq,
        rate_limit: a.rate_limit.map(rate_limit_to_api),
        created_at: rfc3339(view.created_at),
        created_at_ms: view.created_at,
        counts: api::QueueCounts {
            visible: view.stats.visible,
            in_flight: view.stats.in_flight,
            delayed: view.stats.delayed,
            oldest_age_ms: view.stats.oldest_age_ms,
            dlq_depth: view.stats.dead_letter_depth,
            depth_bytes: view.stats.depth_bytes,
            refusals: refusals_to_api(view.stats.refusals),
        },
    }
}

pub fn overflow_to_api(o: Overflow) -> api::Overflow {
    match o {
        Overflow::Reject => api::Overflow::Reject,
        Overflow::DropHead => api::Overflow::DropHead,
        Overflow::RejectToDlq => api::Overflow::RejectToDlq,
    }
}

pub fn overflow_from_api(o: api::Overflow) -> Overflow {
    match o {
        api::Overflow::Reject => Overflow::Reject,
        api::Overflow::DropHead => Overflow::DropHead,
        api::Overflow::RejectToDlq => Overflow::RejectToDlq,
    }
}

pub fn refusals_to_api(r: RefusalCounts) -> api::Refusals {
    api::Refusals {
        queue_full: r.queue_full,
        drop_head: r.drop_head,
        rejected_to_dlq: r.rejected_to_dlq,
        expired_to_dlq: r.expired_to_dlq,
        rate_limited: r.rate_limited,
    }
}

pub fn rate_limit_from_api(r: api::RateLimit) -> sluice_core::rate::RateLimit {
    sluice_core::rate::RateLimit { per_second: r.per_second, burst: r.burst }
}

pub fn rate_limit_to_api(r: sluice_core::rate::RateLimit) -> api::RateLimit {
    api::RateLimit { per_second: r.per_second, burst: r.burst }
}

/// A send answer's depth, from the depth a send reported with the queue's limits.
pub fn queue_depth(report: DepthReport) -> api::QueueDepth {
    api::QueueDepth {
        messages: report.depth.messages,
        bytes: report.depth.bytes,
        max_depth_messages: report.limits.max_messages,
        max_depth_bytes: report.limits.max_bytes,
    }
}

fn dead_letter_to_api(d: &DeadLetter) -> api::DeadLetter {
    api::DeadLetter { queue: d.queue.clone(), max_receive_count: d.max_receive_count }
}

fn dead_letter_from_api(d: api::DeadLetter) -> DeadLetter {
    DeadLetter { queue: d.queue, max_receive_count: d.max_receive_count }
}

/// The attributes a create asks for; omitted fields take their defaults.
pub fn create_attributes(r: api::CreateQueueRequest) -> (String, QueueAttributes) {
    let d = QueueAttributes::default();
    let attributes = QueueAttributes {
        visibility_timeout_ms: r.visibility_timeout_ms.unwrap_or(d.visibility_timeout_ms),
        delay_ms: r.delay_ms.unwrap_or(d.delay_ms),
        retention_ms: r.retention_ms.unwrap_or(d.retention_ms),
        message_bytes_max: r.message_bytes_max.unwrap_or(d.message_bytes_max),
        receive_wait_ms: r.receive_wait_ms.unwrap_or(d.receive_wait_ms),
        dead_letter: r.dead_letter.map(dead_letter_from_api),
        fifo: r.fifo.unwrap_or(d.fifo),
        content_based_dedup: r.content_based_dedup.unwrap_or(d.content_based_dedup),
        dedup_window_ms: r.dedup_window_ms.unwrap_or(d.dedup_window_ms),
        dedup_scope: match r.dedup_scope {
            Some(api::DedupScope::MessageGroup) => sluice_core::attributes::DedupScope::MessageGroup,
            Some(api::DedupScope::Queue) | None => sluice_core::attributes::DedupScope::Queue,
        },
        tags: r.tags.unwrap_or_default(),
        sqs_attributes: d.sqs_attributes,
        schema_validation: r.schema_validation.unwrap_or(d.schema_validation),
        max_depth_messages: r.max_depth_messages,
        max_depth_bytes: r.max_depth_bytes,
        overflow: r.overflow.map_or(d.overflow, overflow_from_api),
        expired_to_dlq: r.expired_to_dlq.unwrap_or(d.expired_to_dlq),
        rate_limit: r.rate_limit.map(rate_limit_from_api),
    };
    (r.name, attributes)
}

pub fn patch(r: api::UpdateQueueRequest) -> QueueAttributesPatch {
    QueueAttributesPatch {
        visibility_timeout_ms: r.visibility_timeout_ms,
        delay_ms: r.delay_ms,
        retention_ms: r.retention_ms,
        message_bytes_max: r.message_bytes_max,
        receive_wait_ms: r.receive_wait_ms,
        dead_letter: r.dead_letter.map(|d| d.map(dead_letter_from_api)),
        content_based_dedup: r.content_based_dedup,
        dedup_window_ms: r.dedup_window_ms,
        tags: r.tags,
        sqs_attributes: BTreeMap::new(),
        schema_validation: r.schema_validation,
        max_depth_messages: r.max_depth_messages,
        max_depth_bytes: r.max_depth_bytes,
        overflow: r.overflow.map(overflow_from_api),
        expired_to_dlq: r.expired_to_dlq,
        rate_limit: r.rate_limit.map(|l| l.map(rate_limit_from_api)),
    }
}

// ----- messages ----------------------------------------------------------------------------

/// A message to send, decoded. Checks only what the wire format decides (body xor
/// body_base64, base64, times); the rules of Sluice are checked by the broker.
pub fn new_message(m: api::SendMessage) -> Result<NewMessage, ValidationError> {
    let (body, body_binary) = match (m.body, m.body_base64) {
        (Some(text), None) => (text.into_bytes(), false),
        (None, Some(b64)) => {
            let bytes = STANDARD
                .decode(b64.as_bytes())
                .map_err(|e| ValidationError::new("body_base64", format!("not valid base64: {e}")))?;
            (bytes, true)
        }
        (Some(_), Some(_)) => {
            return Err(ValidationError::new("body", "give body or body_base64, not both"));
        }
        (None, None) => {
            return Err(ValidationError::new("body", "give body (text) or body_base64 (bytes)"));
        }
    };
    let mut attributes = BTreeMap::new();
    for (name, attribute) in m.attributes {
        let value = attribute_from_api(attribute).map_err(|e| e.within(&format!("attributes.{name}")))?;
        attributes.insert(name, value);
    }
    let deliver_at_ms = m.deliver_at.as_deref().map(|t| parse_rfc3339("deliver_at", t)).transpose()?;
    // What caused the message rides as a system attribute: it links the trace, and does not
    // count toward the message's size.
    let system_attributes = m.causation_id.map(trace::causation_attribute).into_iter().collect();
    Ok(NewMessage {
        body,
        body_binary,
        attributes,
        system_attributes,
        delay_ms: m.delay_ms,
        deliver_at_ms,
        priority: m.priority.unwrap_or(0),
        envelope: MessageEnvelope {
            r#type: m.message_type,
            version: m.version,
            source: m.source,
            correlation_id: m.correlation_id,
            group_id: m.group_id,
        },
        dedup_id: m.dedup_id,
    })
}

/// The message a stored template sends, as a send request would give it (the inverse of
/// [`new_message`] for a message without times or dedup id).
pub fn send_message(content: &sluice_core::message::MessageContent, priority: u8) -> api::SendMessage {
    let (body, body_base64) = if content.body_binary {
        (None, Some(STANDARD.encode(&content.body)))
    } else {
        (Some(String::from_utf8_lossy(&content.body).into_owned()), None)
    };
    let e = &content.envelope;
    api::SendMessage {
        body,
        body_base64,
        attributes: content.attributes.iter().map(|(k, v)| (k.clone(), attribute_to_api(v))).collect(),
        delay_ms: None,
        deliver_at: None,
        priority: (priority > 0).then_some(priority),
        message_type: e.r#type.clone(),
        version: e.version.clone(),
        source: e.source.clone(),
        correlation_id: e.correlation_id.clone(),
        causation_id: trace::causation_id(&content.system_attributes),
        group_id: e.group_id.clone(),
        dedup_id: None,
    }
}

pub fn attribute_from_api(a: api::Attribute) -> Result<AttributeValue, ValidationError> {
    let binary = a.data_type.split('.').next() == Some("Binary");
    let value = if binary {
        let bytes = STANDARD
            .decode(a.value.as_bytes())
            .map_err(|e| ValidationError::new("value", format!("Binary attributes carry base64: {e}")))?;
        AttributeData::Bytes(bytes)
    } else {
        AttributeData::Text(a.value)
    };
    Ok(AttributeValue { data_type: a.data_type, value })
}

pub fn attribute_to_api(a: &AttributeValue) -> api::Attribute {
    let value = match &a.value {
        AttributeData::Text(s) => s.clone(),
        AttributeData::Bytes(b) => STANDARD.encode(b),
    };
    api::Attribute { data_type: a.data_type.clone(), value }
}

pub fn state_name(state: MessageState) -> &'static str {
    match state {
        MessageState::Visible => "visible",
        MessageState::InFlight => "in_flight",
        MessageState::Delayed => "delayed",
    }
}

/// A stored message as receive (`receipt`) or peek (`state`) returns it.
pub fn message(m: &StoredMessage, receipt: Option<String>, state: Option<MessageState>) -> api::Message {
    let meta = &m.meta;
    let content = &m.content;
    let (body, body_base64) = if content.body_binary {
        (None, Some(STANDARD.encode(&content.body)))
    } else {
        match String::from_utf8(content.body.clone()) {
            Ok(text) => (Some(text), None),
            // A text body is UTF-8 when sent; should a stored one not be, base64 still returns
            // it byte-exact, which matters more than the field it arrives in.
            Err(e) => (None, Some(STANDARD.encode(e.as_bytes()))),
        }
    };
    // A received message is in flight until `visible_at`; a peeked one has a meaningful
    // `visible_at` only while it is not visible.
    let visible_at_ms = match (&receipt, state) {
        (Some(_), _) | (None, Some(MessageState::InFlight | MessageState::Delayed)) => Some(meta.visible_at),
        _ => None,
    };
    api::Message {
        id: meta.id.to_string(),
        body,
        body_base64,
        receipt,
        state: state.map(|s| state_name(s).to_string()),
        receive_count: meta.receive_count,
        sequence_number: Some(m.seq.to_string()),
        sent_at: rfc3339(meta.sent_at),
        sent_at_ms: meta.sent_at,
        first_received_at: meta.first_received_at.map(rfc3339),
        first_received_at_ms: meta.first_received_at,
        visible_at_ms,
        attributes: content.attributes.iter().map(|(k, v)| (k.clone(), attribute_to_api(v))).collect(),
        priority: meta.priority,
        message_type: content.envelope.r#type.clone(),
        version: content.envelope.version.clone(),
        source: content.envelope.source.clone(),
        correlation_id: content.envelope.correlation_id.clone(),
        causation_id: trace::causation_id(&content.system_attributes),
        group_id: content.envelope.group_id.clone(),
        dead_letter_source: meta.dead_letter_source.clone(),
        last_error: meta.last_error.clone(),
    }
}

/// `response` with `Location: location` (a path this server built; one that is not a valid
/// header value is left out rather than failing the answer).
pub fn with_location(mut response: axum::response::Response, location: &str) -> axum::response::Response {
    if let Ok(value) = axum::http::HeaderValue::from_str(location) {
        response.headers_mut().insert(axum::http::header::LOCATION, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::message::MessageContent;
    use sluice_core::{MessageId, MessageMeta};

    #[test]
    fn times_round_trip() {
        let ms = 1_700_000_000_123;
        let text = rfc3339(ms);
        assert_eq!(text, "2023-11-14T22:13:20.123Z");
        assert_eq!(parse_rfc3339("t", &text), Ok(ms));
        // Sub-millisecond instants round up, never down.
        assert_eq!(parse_rfc3339("t", "2023-11-14T22:13:20.1231Z"), Ok(ms + 1));
        assert_eq!(parse_rfc3339("deliver_at", "tomorrow").unwrap_err().field, "deliver_at");
        assert!(parse_rfc3339("t", "1969-12-31T23:59:59Z").is_err());
    }

    /// `body`, `body_base64`, and the decoded body and binary flag, or the field in error.
    type BodyCase = (Option<&'static str>, Option<&'static str>, Result<(&'static [u8], bool), &'static str>);

    #[test]
    fn send_bodies() {
        let table: &[BodyCase] = &[
            (Some("hi"), None, Ok((b"hi", false))),
            (None, Some("AAH/"), Ok((&[0, 1, 255], true))),
            (None, None, Err("body")),
            (Some("a"), Some("YQ=="), Err("body")),
            (None, Some("***"), Err("body_base64")),
        ];
        for (body, b64, want) in table {
            let m =
                api::SendMessage { body: body.map(Into::into), body_base64: b64.map(Into::into), ..Default::default() };
            let got = new_message(m).map(|n| (n.body, n.body_binary)).map_err(|e| e.field);
            let want = want.map(|(b, bin)| (b.to_vec(), bin)).map_err(str::to_string);
            assert_eq!(got, want, "body={body:?} body_base64={b64:?}");
        }
    }

    #[test]
    fn binary_attributes_are_decoded_and_re_encoded() {
        let mut m = api::SendMessage { body: Some("x".into()), ..Default::default() };
        m.attributes.insert("raw".into(), api::Attribute { data_type: "Binary".into(), value: "AAE=".into() });
        m.attributes.insert("n".into(), api::Attribute { data_type: "Number.int".into(), value: "42".into() });
        let new = new_message(m.clone()).unwrap();
        assert_eq!(new.attributes["raw"].value, AttributeData::Bytes(vec![0, 1]));
        assert_eq!(new.attributes["n"].value, AttributeData::Text("42".into()));
        let stored = StoredMessage {
            seq: 7,
            meta: MessageMeta {
                queue: 1,
                id: MessageId(7),
                priority: 3,
                sent_at: 1_000,
                visible_at: 5_000,
                in_flight: true,
                receive_count: 2,
                epoch: 2,
                first_received_at: Some(2_000),
                size_bytes: 1,
                group_id: None,
                dead_letter_source: Some("orders".into()),
                last_error: Some("boom".into()),
            },
            content: MessageContent {
                body: b"x".to_vec(),
                body_binary: false,
                attributes: new.attributes,
                system_attributes: Default::default(),
                envelope: Default::default(),
            },
        };
        let out = message(&stored, Some("r".into()), None);
        assert_eq!(out.attributes, m.attributes);
        assert_eq!(out.body.as_deref(), Some("x"));
        assert_eq!(out.visible_at_ms, Some(5_000));
        assert_eq!(out.first_received_at_ms, Some(2_000));
        assert_eq!(out.dead_letter_source.as_deref(), Some("orders"));
        assert_eq!(out.last_error.as_deref(), Some("boom"));
        let bad = m.attributes.insert("raw".into(), api::Attribute { data_type: "Binary".into(), value: "%%".into() });
        assert!(bad.is_some());
        assert_eq!(new_message(m).unwrap_err().field, "attributes.raw.value");
    }
}
