//! The SNS JSON envelope: what a subscription without raw delivery receives (`Notification`),
//! and what an HTTP/S endpoint receives to confirm a subscription (`SubscriptionConfirmation`).
//!
//! Keys come in the order AWS delivers them (reference §5.3), so the text is written by hand
//! rather than by a map that might sort them. Standard topics carry the signature fields; FIFO
//! topics carry `SequenceNumber` after `MessageId` and no signature fields, as AWS's do.
//!
//! Signatures: Sluice has no AWS signing certificate, and an AWS signature verifier refuses any
//! certificate not served by amazonaws.com, so no Sluice envelope can pass one. The fields are
//! kept so that parsers expecting them find them: `SignatureVersion` is the topic's (default
//! `1`), `Signature` is the base64 SHA-256 digest of AWS's canonical string for the message (an
//! integrity check a receiver can recompute, not proof of origin: HTTP push deliveries will
//! carry an HMAC-SHA256 header for that), and `SigningCertURL` points at
//! `http://<host>/SimpleNotificationService-sluice.pem` on the Sluice server, which serves no
//! certificate there.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sluice_core::AttributeValue;
use sluice_core::message::AttributeData;

/// The file name Sluice puts in `SigningCertURL`.
pub const SIGNING_CERT_FILE: &str = "SimpleNotificationService-sluice.pem";

/// The fields of a notification envelope.
pub struct Notification<'a> {
    pub message_id: &'a str,
    /// FIFO topics only.
    pub sequence_number: Option<&'a str>,
    pub topic_arn: &'a str,
    pub subject: Option<&'a str>,
    pub message: &'a str,
    pub timestamp: &'a str,
    /// Standard topics only: `(signature version, signing certificate URL)`.
    pub signing: Option<(&'a str, &'a str)>,
    pub unsubscribe_url: &'a str,
    pub attributes: &'a BTreeMap<String, AttributeValue>,
}

/// A JSON string literal.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_string())
}

fn field(out: &mut String, name: &str, value: &str) {
    if out.len() > 1 {
        out.push(',');
    }
    out.push_str(&quoted(name));
    out.push(':');
    out.push_str(&quoted(value));
}

/// The base64 SHA-256 of AWS's canonical string: `name\nvalue\n` for each field, in order.
fn digest(fields: &[(&str, &str)]) -> String {
    let mut canonical = String::new();
    for (name, value) in fields {
        canonical.push_str(name);
        canonical.push('\n');
        canonical.push_str(value);
        canonical.push('\n');
    }
    let hex = sluice_core::broker::content_dedup_id(canonical.as_bytes());
    let bytes: Vec<u8> =
        (0..hex.len()).step_by(2).filter_map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok()).collect();
    STANDARD.encode(bytes)
}

pub fn notification(n: &Notification<'_>) -> String {
    let mut out = String::from("{");
    field(&mut out, "Type", "Notification");
    field(&mut out, "MessageId", n.message_id);
    if let Some(seq) = n.sequence_number {
        field(&mut out, "SequenceNumber", seq);
    }
    field(&mut out, "TopicArn", n.topic_arn);
    if let Some(subject) = n.subject {
        field(&mut out, "Subject", subject);
    }
    field(&mut out, "Message", n.message);
    field(&mut out, "Timestamp", n.timestamp);
    if let Some((version, cert_url)) = n.signing {
        let mut signed = vec![("Message", n.message), ("MessageId", n.message_id)];
        if let Some(subject) = n.subject {
            signed.push(("Subject", subject));
        }
        signed.extend([("Timestamp", n.timestamp), ("TopicArn", n.topic_arn), ("Type", "Notification")]);
        field(&mut out, "SignatureVersion", version);
        field(&mut out, "Signature", &digest(&signed));
        field(&mut out, "SigningCertURL", cert_url);
    }
    field(&mut out, "UnsubscribeURL", n.unsubscribe_url);
    if !n.attributes.is_empty() {
        out.push_str(",\"MessageAttributes\":{");
        for (i, (name, attribute)) in n.attributes.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let value = match &attribute.value {
                AttributeData::Text(text) => text.clone(),
                AttributeData::Bytes(bytes) => STANDARD.encode(bytes),
            };
            out.push_str(&quoted(name));
            out.push_str(":{");
            let mut inner = String::from("{");
            field(&mut inner, "Type", &attribute.data_type);
            field(&mut inner, "Value", &value);
            out.push_str(&inner[1..]);
            out.push('}');
        }
        out.push('}');
    }
    out.push('}');
    out
}

/// The fields of a subscription confirmation.
pub struct Confirmation<'a> {
    pub message_id: &'a str,
    pub token: &'a str,
    pub topic_arn: &'a str,
    pub subscribe_url: &'a str,
    pub timestamp: &'a str,
    pub signing: (&'a str, &'a str),
}

pub fn confirmation(c: &Confirmation<'_>) -> String {
    let message = format!(
        "You have chosen to subscribe to the topic {}.\nTo confirm the subscription, visit the SubscribeURL included in this message.",
        c.topic_arn
    );
    let mut out = String::from("{");
    field(&mut out, "Type", "SubscriptionConfirmation");
    field(&mut out, "MessageId", c.message_id);
    field(&mut out, "Token", c.token);
    field(&mut out, "TopicArn", c.topic_arn);
    field(&mut out, "Message", &message);
    field(&mut out, "SubscribeURL", c.subscribe_url);
    field(&mut out, "Timestamp", c.timestamp);
    let signed = [
        ("Message", message.as_str()),
        ("MessageId", c.message_id),
        ("SubscribeURL", c.subscribe_url),
        ("Timestamp", c.timestamp),
        ("Token", c.token),
        ("TopicArn", c.topic_arn),
        ("Type", "SubscriptionConfirmation"),
    ];
    field(&mut out, "SignatureVersion", c.signing.0);
    field(&mut out, "Signature", &digest(&signed));
    field(&mut out, "SigningCertURL", c.signing.1);
    out.push('}');
    out
}

/// `2024-01-01T00:00:00.000Z`, as SNS writes `Timestamp`.
pub fn timestamp(ms: u64) -> String {
    let format =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&format).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(data_type: &str, value: &str) -> AttributeValue {
        AttributeValue { data_type: data_type.into(), value: AttributeData::Text(value.into()) }
    }

    #[test]
    fn standard_envelope_keys_in_aws_order() {
        let mut attributes = BTreeMap::new();
        attributes.insert("an-attribute-key".to_string(), text("String", "an-attribute-value"));
        attributes.insert(
            "binary-attribute".to_string(),
            AttributeValue { data_type: "Binary".into(), value: AttributeData::Bytes(vec![2, 3, 4]) },
        );
        let n = Notification {
            message_id: "m-1",
            sequence_number: None,
            topic_arn: "arn:aws:sns:us-east-1:000000000000:t",
            subject: Some("only-if-given"),
            message: "text \"quoted\"\n",
            timestamp: "2024-01-01T00:00:00.000Z",
            signing: Some(("1", "http://h/SimpleNotificationService-sluice.pem")),
            unsubscribe_url: "http://h/?Action=Unsubscribe&SubscriptionArn=s",
            attributes: &attributes,
        };
        let json = notification(&n);
        let keys: Vec<String> = {
            let value: serde_json::Value = serde_json::from_str(&json).unwrap();
            assert_eq!(value["Message"], "text \"quoted\"\n");
            assert_eq!(value["MessageAttributes"]["binary-attribute"]["Value"], "AgME");
            assert_eq!(value["MessageAttributes"]["an-attribute-key"]["Type"], "String");
            // Key order as written, not as a map would sort it.
            json.split("\":").filter_map(|s| s.rsplit('"').next()).map(str::to_string).take(11).collect()
        };
        assert_eq!(
            keys,
            [
                "Type",
                "MessageId",
                "TopicArn",
                "Subject",
                "Message",
                "Timestamp",
                "SignatureVersion",
                "Signature",
                "SigningCertURL",
                "UnsubscribeURL",
                "MessageAttributes"
            ]
        );
    }

    #[test]
    fn fifo_envelope_has_a_sequence_number_and_no_signature() {
        let attributes = BTreeMap::new();
        let n = Notification {
            message_id: "m",
            sequence_number: Some("10000000000000000001"),
            topic_arn: "arn:aws:sns:r:0:t.fifo",
            subject: None,
            message: "Test",
            timestamp: "2024-01-01T00:00:00.000Z",
            signing: None,
            unsubscribe_url: "u",
            attributes: &attributes,
        };
        assert_eq!(
            notification(&n),
            r#"{"Type":"Notification","MessageId":"m","SequenceNumber":"10000000000000000001","TopicArn":"arn:aws:sns:r:0:t.fifo","Message":"Test","Timestamp":"2024-01-01T00:00:00.000Z","UnsubscribeURL":"u"}"#
        );
    }

    #[test]
    fn the_signature_is_a_digest_of_the_canonical_string() {
        // sha256("Message\nm\nMessageId\ni\nTimestamp\nt\nTopicArn\na\nType\nNotification\n")
        let got = digest(&[
            ("Message", "m"),
            ("MessageId", "i"),
            ("Timestamp", "t"),
            ("TopicArn", "a"),
            ("Type", "Notification"),
        ]);
        assert_eq!(STANDARD.decode(&got).unwrap().len(), 32);
        assert_ne!(got, digest(&[("Message", "m2")]));
        assert_eq!(timestamp(1_704_067_200_123), "2024-01-01T00:00:00.123Z");
    }
}
