//! The message: what a producer sends, what is stored, and the metadata the scheduler keeps.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::TimeMs;
use crate::limits::*;
use crate::validation::ValidationError;

/// A message's identity, unique across the server and kept when the message moves between
/// queues (dead-lettering, redrive). Shown as a UUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MessageId(pub u128);

impl fmt::Display for MessageId {
    /// Lower-case hex in the 8-4-4-4-12 UUID layout. Written digit by digit rather than with
    /// `write!("{:08x}-...")`: every sent and received message is shown this way, and the
    /// padded formatting machinery was a tenth of the HTTP workers' CPU in `perf`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut text = [b'-'; 36];
        let mut nibble = 0;
        for (i, byte) in text.iter_mut().enumerate() {
            if matches!(i, 8 | 13 | 18 | 23) {
                continue;
            }
            *byte = HEX[((self.0 >> (124 - 4 * nibble)) & 0xf) as usize];
            nibble += 1;
        }
        f.write_str(std::str::from_utf8(&text).expect("hex digits and dashes are ASCII"))
    }
}

/// A typed message attribute, as in SQS: the data type is `String`, `Number` or `Binary`,
/// optionally followed by `.` and a custom label (`Number.float`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeValue {
    pub data_type: String,
    pub value: AttributeData,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AttributeData {
    Text(String),
    Bytes(Vec<u8>),
}

impl AttributeValue {
    pub fn base_type(&self) -> &str {
        self.data_type.split('.').next().unwrap_or("")
    }

    fn size_bytes(&self) -> usize {
        self.data_type.len()
            + match &self.value {
                AttributeData::Text(s) => s.len(),
                AttributeData::Bytes(b) => b.len(),
            }
    }

    fn validate(&self) -> Result<(), ValidationError> {
        match (self.base_type(), &self.value) {
            ("String", AttributeData::Text(_)) => Ok(()),
            ("Number", AttributeData::Text(s)) => {
                if is_decimal_number(s) {
                    Ok(())
                } else {
                    Err(ValidationError::new("value", format!("{s:?} is not a number")))
                }
            }
            ("Binary", AttributeData::Bytes(_)) => Ok(()),
            ("String" | "Number", AttributeData::Bytes(_)) => {
                Err(ValidationError::new("value", "String and Number attributes carry text, not bytes"))
            }
            ("Binary", AttributeData::Text(_)) => {
                Err(ValidationError::new("value", "Binary attributes carry base64 bytes"))
            }
            _ => Err(ValidationError::new(
                "type",
                format!("{:?} is not String, Number or Binary (optionally with a .label)", self.data_type),
            )),
        }
    }
}

/// Accepts what SQS accepts for Number attributes: an optional sign, digits, an optional
/// fraction and an optional exponent.
fn is_decimal_number(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exponent) = match s.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e)),
        None => (s, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = (!int.is_empty() || !frac.is_empty()) && digits(int) && digits(frac);
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

/// CloudEvents-style envelope fields carried beside the body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageEnvelope {
    pub r#type: Option<String>,
    pub version: Option<String>,
    pub source: Option<String>,
    pub correlation_id: Option<String>,
    pub group_id: Option<String>,
}

/// A message as a producer sends it, before the broker accepts it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewMessage {
    pub body: Vec<u8>,
    /// True when the producer sent base64 (`body_base64`); the body is returned the same way.
    pub body_binary: bool,
    pub attributes: BTreeMap<String, AttributeValue>,
    /// Attributes set by infrastructure rather than the application (SQS `AWSTraceHeader`).
    /// They do not count toward the message size.
    pub system_attributes: BTreeMap<String, AttributeValue>,
    pub delay_ms: Option<u64>,
    pub deliver_at_ms: Option<TimeMs>,
    pub priority: u8,
    pub envelope: MessageEnvelope,
    /// FIFO queues: a send with the same id inside the dedup window enqueues nothing.
    pub dedup_id: Option<String>,
}

/// The immutable part of a stored message: written once at send, read at receive and peek.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageContent {
    pub body: Vec<u8>,
    pub body_binary: bool,
    pub attributes: BTreeMap<String, AttributeValue>,
    pub system_attributes: BTreeMap<String, AttributeValue>,
    pub envelope: MessageEnvelope,
}

impl NewMessage {
    /// Body plus attribute bytes, the figure compared with `message_bytes_max`.
    pub fn size_bytes(&self) -> u64 {
        let attrs: usize = self.attributes.iter().map(|(k, v)| k.len() + v.size_bytes()).sum();
        (self.body.len() + attrs) as u64
    }

    /// Checks everything that does not depend on the queue.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if self.priority > PRIORITY_MAX {
            return Err(ValidationError::new("priority", format!("must be 0 to {PRIORITY_MAX}")));
        }
        if self.delay_ms.is_some() && self.deliver_at_ms.is_some() {
            return Err(ValidationError::new("delay_ms", "give delay_ms or deliver_at, not both"));
        }
        if let Some(d) = self.delay_ms
            && d > DELAY_MS_MAX
        {
            return Err(ValidationError::new("delay_ms", format!("must be at most {DELAY_MS_MAX}")));
        }
        if self.attributes.len() > MESSAGE_ATTRIBUTES_MAX {
            return Err(ValidationError::new(
                "attributes",
                format!("a message has at most {MESSAGE_ATTRIBUTES_MAX} attributes"),
            ));
        }
        for (name, value) in &self.attributes {
            validate_attribute_name(name)?;
            value.validate().map_err(|e| e.within(&format!("attributes.{name}")))?;
        }
        if self.system_attributes.len() > SYSTEM_ATTRIBUTES_MAX {
            return Err(ValidationError::new(
                "system_attributes",
                format!("a message has at most {SYSTEM_ATTRIBUTES_MAX} system attributes"),
            ));
        }
        for (name, value) in &self.system_attributes {
            validate_attribute_name(name)?;
            value.validate().map_err(|e| e.within(&format!("system_attributes.{name}")))?;
            if value.size_bytes() > SYSTEM_ATTRIBUTE_BYTES_MAX {
                return Err(ValidationError::new(
                    format!("system_attributes.{name}"),
                    format!("at most {SYSTEM_ATTRIBUTE_BYTES_MAX} bytes"),
                ));
            }
        }
        let envelope = [
            ("type", &self.envelope.r#type),
            ("version", &self.envelope.version),
            ("source", &self.envelope.source),
            ("correlation_id", &self.envelope.correlation_id),
            ("group_id", &self.envelope.group_id),
        ];
        for (field, value) in envelope {
            if let Some(v) = value
                && (v.is_empty() || v.len() > ENVELOPE_FIELD_LEN_MAX)
            {
                return Err(ValidationError::new(field, format!("must be 1 to {ENVELOPE_FIELD_LEN_MAX} bytes")));
            }
        }
        if let Some(v) = &self.dedup_id
            && (v.is_empty() || v.len() > ENVELOPE_FIELD_LEN_MAX)
        {
            return Err(ValidationError::new("dedup_id", format!("must be 1 to {ENVELOPE_FIELD_LEN_MAX} bytes")));
        }
        Ok(())
    }

    pub fn content(&self) -> MessageContent {
        MessageContent {
            body: self.body.clone(),
            body_binary: self.body_binary,
            attributes: self.attributes.clone(),
            system_attributes: self.system_attributes.clone(),
            envelope: self.envelope.clone(),
        }
    }
}

/// SQS's and SNS's rule for attribute names. Letters and digits are those of any script
/// (`attr.1øßä`), as AWS takes them; the length is in characters, as AWS counts it.
fn validate_attribute_name(name: &str) -> Result<(), ValidationError> {
    let ok_chars = name.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if name.is_empty()
        || name.chars().count() > ATTRIBUTE_NAME_LEN_MAX
        || !ok_chars
        || name.starts_with('.')
        || name.ends_with('.')
        || name.contains("..")
    {
        return Err(ValidationError::new(
            format!("attributes.{name}"),
            format!(
                "attribute names are 1 to {ATTRIBUTE_NAME_LEN_MAX} characters of letters, digits, '_', '-' and '.' (not leading, trailing or doubled)"
            ),
        ));
    }
    Ok(())
}

/// Where a message stands, as peek reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MessageState {
    /// Ready for the next receive.
    Visible,
    /// Held by a consumer until its visibility timeout.
    InFlight,
    /// Waiting for a delay (from the send, or from a nack) to pass.
    Delayed,
}

/// The scheduler's view of one message: small, kept in memory, rewritten on every receive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageMeta {
    pub queue: u64,
    pub id: MessageId,
    pub priority: u8,
    pub sent_at: TimeMs,
    /// While `in_flight`, when the visibility timeout ends; otherwise when a delay ends
    /// (a time at or before now means visible).
    pub visible_at: TimeMs,
    pub in_flight: bool,
    /// Receives that counted toward the dead-letter policy (reset by redrive).
    pub receive_count: u32,
    /// The delivery epoch carried in receipts: raised by every receive and by every move to
    /// another queue (dead-lettering, redrive). Never reset, so a receipt from an earlier
    /// delivery can never match a later one, nor the message after it moved.
    pub epoch: u32,
    pub first_received_at: Option<TimeMs>,
    pub size_bytes: u64,
    pub group_id: Option<String>,
    pub dead_letter_source: Option<String>,
    pub last_error: Option<String>,
}

impl MessageMeta {
    pub fn state(&self, now_ms: TimeMs) -> MessageState {
        if self.in_flight && self.visible_at > now_ms {
            MessageState::InFlight
        } else if !self.in_flight && self.visible_at > now_ms {
            MessageState::Delayed
        } else {
            MessageState::Visible
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_id_displays_as_uuid() {
        assert_eq!(MessageId(0x0123456789abcdef_0011223344556677).to_string(), "01234567-89ab-cdef-0011-223344556677");
        assert_eq!(MessageId(0).to_string(), "00000000-0000-0000-0000-000000000000");
        assert_eq!(MessageId(u128::MAX).to_string(), "ffffffff-ffff-ffff-ffff-ffffffffffff");
        assert_eq!(MessageId(0xa).to_string(), "00000000-0000-0000-0000-00000000000a");
        assert_eq!(MessageId(0xb << 124).to_string(), "b0000000-0000-0000-0000-000000000000");
    }

    #[test]
    fn numbers() {
        for ok in ["0", "-1", "+2.5", "1e10", ".5", "5.", "1.5E-3"] {
            assert!(is_decimal_number(ok), "{ok}");
        }
        for bad in ["", "-", "1e", "abc", "1.2.3", "0x10", "."] {
            assert!(!is_decimal_number(bad), "{bad}");
        }
    }

    #[test]
    fn attribute_rules() {
        let mut m = NewMessage::default();
        m.attributes
            .insert("n".into(), AttributeValue { data_type: "Number".into(), value: AttributeData::Text("x".into()) });
        assert_eq!(m.validate().unwrap_err().field, "attributes.n.value");
        m.attributes.clear();
        m.attributes.insert(
            "bad name".into(),
            AttributeValue { data_type: "String".into(), value: AttributeData::Text("x".into()) },
        );
        assert_eq!(m.validate().unwrap_err().field, "attributes.bad name");
        m.attributes.clear();
        m.attributes
            .insert("k".into(), AttributeValue { data_type: "Blob".into(), value: AttributeData::Text("x".into()) });
        assert_eq!(m.validate().unwrap_err().field, "attributes.k.type");
        m.attributes.clear();
        // Letters of any script count, and the length is in characters (as AWS has them).
        let text = || AttributeValue { data_type: "String".into(), value: AttributeData::Text("x".into()) };
        for good in ["attr.1øßä", "ключ", &"ø".repeat(ATTRIBUTE_NAME_LEN_MAX)] {
            m.attributes = BTreeMap::from([(good.to_string(), text())]);
            assert_eq!(m.validate(), Ok(()), "{good}");
        }
        for bad in ["a§b", "a..b", ".a", "a.", &"ø".repeat(ATTRIBUTE_NAME_LEN_MAX + 1)] {
            m.attributes = BTreeMap::from([(bad.to_string(), text())]);
            assert_eq!(m.validate().unwrap_err().field, format!("attributes.{bad}"));
        }
        m.attributes.clear();
        m.priority = 10;
        assert_eq!(m.validate().unwrap_err().field, "priority");
    }
}
