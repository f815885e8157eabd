//! SendMessage, and reading one message to send (shared with SendMessageBatch): AWS's
//! rules for bodies, attributes and group ids, the digests the answer carries, and the
//! store's refusals in SQS's words.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_core::message::AttributeData;
use sluice_core::{AttributeValue, EntryError, MessageEnvelope, NewMessage, Sent};
use sluice_services::trace;

use super::{Ctx, is_fifo_name, output};
use crate::aws::common::AwsError;
use crate::aws::common::input::{Int, optional_int, parse, required, signed};
use crate::aws::common::message_attributes::{self, AttributeIn, TRACE_HEADER};
use crate::aws::sqs::limits::{DELAY_SECONDS_MAX, FIFO_ID_LEN_MAX};
use crate::aws::sqs::md5;

type Outcome = Result<Option<Value>, AwsError>;

/// Where the sender's identity is kept among a message's system attributes, for the
/// `SenderId` attribute receivers may ask for.
pub const SENDER_ID: &str = "SenderId";

/// Where a FIFO message's deduplication id is kept among its system attributes, for the
/// `MessageDeduplicationId` attribute receivers may ask for: the id the sender gave, or the
/// SHA-256 of the body that content-based deduplication uses.
pub const DEDUP_ID: &str = "MessageDeduplicationId";

/// AWS's reason for a parameter the queue's type does not take (a FIFO queue's per-message
/// delay, a standard queue's deduplication id), word for word as recorded: "include", not
/// "includes".
const NOT_FOR_THIS_QUEUE_TYPE: &str = "The request include parameter that is not valid for this queue type.";

/// One message to send: SendMessage's parameters, or one SendMessageBatch entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct SendEntry {
    pub id: Option<String>,
    pub message_body: Option<String>,
    pub delay_seconds: Option<Int>,
    pub message_attributes: Option<BTreeMap<String, AttributeIn>>,
    pub message_system_attributes: Option<BTreeMap<String, AttributeIn>>,
    pub message_deduplication_id: Option<String>,
    pub message_group_id: Option<String>,
}

/// A message checked and converted, with the digests its answer carries.
pub struct Prepared {
    pub message: NewMessage,
    pub digests: Digests,
}

#[derive(Debug, Clone, Serialize)]
pub struct Digests {
    #[serde(rename = "MD5OfMessageBody")]
    pub body: String,
    #[serde(rename = "MD5OfMessageAttributes", skip_serializing_if = "Option::is_none")]
    pub attributes: Option<String>,
    #[serde(rename = "MD5OfMessageSystemAttributes", skip_serializing_if = "Option::is_none")]
    pub system_attributes: Option<String>,
}

impl SendEntry {
    /// Bytes this entry counts toward a batch's 1 MiB: body plus attribute names, types and
    /// values, as sent (base64 binary values count decoded, so this estimates from above).
    pub fn payload_bytes(&self) -> u64 {
        let body = self.message_body.as_ref().map_or(0, String::len);
        let attributes: usize =
            self.message_attributes.iter().flatten().map(|(name, a)| name.len() + a.payload_bytes()).sum();
        (body + attributes) as u64
    }

    /// Applies AWS's rules for one message to a FIFO or a standard queue and builds what the
    /// store takes. `sender` is kept as the message's `SenderId`; `trace` (the request's X-Ray
    /// header) becomes its `AWSTraceHeader` unless the message carries one.
    ///
    /// FIFO: `MessageGroupId` is required; a per-message `DelaySeconds` other than 0 is
    /// refused (the queue's delay applies); without a `MessageDeduplicationId` the core
    /// deduplicates by content if the queue says so, and refuses the message otherwise.
    pub fn prepare(self, sender: &str, trace: Option<&str>, fifo: bool) -> Result<Prepared, AwsError> {
        let body = required(&self.message_body, "MessageBody")?;
        let delay_seconds = optional_int(
            &self.delay_seconds,
            "DelaySeconds",
            0,
            signed(DELAY_SECONDS_MAX),
            "DelaySeconds must be >= 0 and <= 900.",
        )?;
        let attributes = message_attributes::user_attributes(self.message_attributes.as_ref())?;
        if !message_attributes::valid_text(body) {
            return Err(AwsError::invalid_message_contents());
        }
        let system = message_attributes::system_attributes(self.message_system_attributes.as_ref())?;
        check_fifo_id("MessageGroupId", self.message_group_id.as_deref())?;
        check_fifo_id("MessageDeduplicationId", self.message_deduplication_id.as_deref())?;
        let delay_ms = if fifo {
            if let Some(delay) = delay_seconds.filter(|d| *d != 0) {
                return Err(AwsError::invalid_value("DelaySeconds", delay, NOT_FOR_THIS_QUEUE_TYPE));
            }
            if self.message_group_id.is_none() {
                return Err(AwsError::missing_parameter("MessageGroupId"));
            }
            None
        } else {
            if let Some(dedup) = &self.message_deduplication_id {
                return Err(AwsError::invalid_value("MessageDeduplicationId", dedup, NOT_FOR_THIS_QUEUE_TYPE));
            }
            delay_seconds.map(|s| s * 1000)
        };
        let digests = Digests {
            body: md5::of_body(body.as_bytes()),
            attributes: md5::of_attributes(&attributes),
            system_attributes: md5::of_attributes(&system),
        };
        let mut system_attributes = system;
        if let Some(trace) = trace
            && !system_attributes.contains_key(TRACE_HEADER)
        {
            let value = AttributeData::Text(trace.to_string());
            system_attributes
                .insert(TRACE_HEADER.to_string(), AttributeValue { data_type: "String".to_string(), value });
        }
        let text =
            |value: String| AttributeValue { data_type: "String".to_string(), value: AttributeData::Text(value) };
        system_attributes.insert(SENDER_ID.to_string(), text(sender.to_string()));
        let body = self.message_body.unwrap_or_default().into_bytes();
        if fifo {
            // Without an explicit id the core uses the body's SHA-256 if the queue deduplicates
            // by content (and refuses the message if not, so this label is then never seen).
            let dedup_id =
                self.message_deduplication_id.clone().unwrap_or_else(|| sluice_core::broker::content_dedup_id(&body));
            system_attributes.insert(DEDUP_ID.to_string(), text(dedup_id));
        }
        let message = NewMessage {
            body,
            body_binary: false,
            attributes,
            system_attributes,
            delay_ms,
            envelope: MessageEnvelope { group_id: self.message_group_id, ..Default::default() },
            dedup_id: self.message_deduplication_id,
            ..Default::default()
        };
        Ok(Prepared { message, digests })
    }
}

/// `MessageGroupId` and `MessageDeduplicationId`: 1 to 128 ASCII letters, digits and
/// punctuation.
fn check_fifo_id(parameter: &str, value: Option<&str>) -> Result<(), AwsError> {
    let Some(value) = value else { return Ok(()) };
    let ok = !value.is_empty()
        && value.chars().count() <= FIFO_ID_LEN_MAX
        && value.chars().all(|c| c.is_ascii_alphanumeric() || c.is_ascii_punctuation());
    if ok {
        return Ok(());
    }
    Err(AwsError::invalid_value(
        parameter,
        value,
        &format!("{parameter} can only include alphanumeric and punctuation characters. 1 to 128 in length."),
    ))
}

/// A store's refusal of one message. AWS words the size error differently in batches.
pub fn send_error(e: &EntryError, batch: bool) -> AwsError {
    match e {
        EntryError::MessageTooLarge { max_bytes, .. } => {
            let verb = if batch { "cannot be validated" } else { "are invalid" };
            AwsError::invalid_parameter_value(format!(
                "One or more parameters {verb}. Reason: Message must be shorter than {max_bytes} bytes."
            ))
        }
        // FIFO rules the core checks: these need the queue's configuration (content-based
        // deduplication) or are met only by a FIFO queue without the `.fifo` name.
        EntryError::Invalid(v) if v.field == "dedup_id" => AwsError::invalid_parameter_value(
            "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
        ),
        EntryError::Invalid(v) if v.field == "group_id" => AwsError::missing_parameter("MessageGroupId"),
        // A full queue whose overflow is reject, or its rate limit: the throttling error SDKs
        // retry.
        e @ (EntryError::QueueFull { .. } | EntryError::RateLimited { .. }) => {
            AwsError::request_throttled(e.to_string())
        }
        EntryError::Invalid(v) => match v.field.strip_prefix("attributes.").and_then(|f| f.strip_suffix(".value")) {
            Some(name) => AwsError::invalid_parameter_value(format!(
                "Can't cast the value of message (user) attribute '{name}' to a number."
            )),
            None => AwsError::invalid_parameter_value(v.message.clone()),
        },
        other => AwsError::invalid_parameter_value(other.to_string()),
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct SendMessageInput {
    queue_url: Option<String>,
    #[serde(flatten)]
    entry: SendEntry,
}

#[derive(Serialize)]
struct SendMessageOutput {
    #[serde(rename = "MessageId")]
    message_id: String,
    #[serde(flatten)]
    digests: Digests,
    #[serde(rename = "SequenceNumber", skip_serializing_if = "Option::is_none")]
    sequence_number: Option<String>,
}

/// A FIFO message's `SequenceNumber`: the store's sequence number, as a decimal string
/// (increasing in send order, with gaps, as AWS's). A duplicate inside the deduplication
/// window is answered with the original message's id and sequence number.
pub fn sequence_number(sent: &Sent, fifo: bool) -> Option<String> {
    fifo.then(|| sent.seq.to_string())
}

pub async fn send_message(ctx: &Ctx<'_>, input: Value) -> Outcome {
    let input: SendMessageInput = parse(input)?;
    let name = ctx.queue_name(&input.queue_url)?;
    let fifo = is_fifo_name(&name);
    let prepared = match input.entry.prepare(ctx.sender(), ctx.trace_header.as_deref(), fifo) {
        Ok(p) => p,
        Err(e) => return Err(ctx.after_queue_check(&name, e).await),
    };
    let mut entry = vec![(0, &prepared.message)];
    if let Some((_, shed)) = crate::shed::refuse_shed(ctx.state, &format!("queue:{name}"), &mut entry).pop() {
        return Err(AwsError::request_throttled(shed.to_string()));
    }
    if let Some((_, violation)) = crate::schema_routes::refuse_invalid(ctx.state, &name, &mut entry).await?.pop() {
        return Err(AwsError::invalid_parameter_value(violation.to_string()));
    }
    let links = trace::message_links(&prepared.message);
    ctx.check_write(prepared.message.size_bytes()).await?;
    let mut results = ctx.store().send(&name, vec![prepared.message]).await?;
    let id = results.first().and_then(|r| r.as_ref().ok()).map(|sent| sent.id.to_string());
    ctx.state.services.traces().record_messages(&name, [(links, id)]).await;
    match results.pop() {
        Some(Ok(sent)) => output(SendMessageOutput {
            message_id: sent.id.to_string(),
            digests: prepared.digests,
            sequence_number: sequence_number(&sent, fifo),
        }),
        Some(Err(e)) => Err(send_error(&e, false)),
        None => Err(AwsError::internal()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(body: &str) -> SendEntry {
        SendEntry { message_body: Some(body.into()), ..Default::default() }
    }

    #[test]
    fn a_prepared_message_carries_its_digests_and_sender() {
        let p = entry("msg").prepare("AKID", None, false).unwrap();
        assert_eq!(p.digests.body, "6e2baaf3b97dbeef01c0043275f9a0e7");
        assert_eq!(p.digests.attributes, None);
        assert_eq!(p.digests.system_attributes, None);
        assert_eq!(p.message.system_attributes[SENDER_ID].value, AttributeData::Text("AKID".into()));
        assert_eq!(p.message.delay_ms, None);
        // The X-Ray header is kept, but an explicit AWSTraceHeader wins and is what is digested.
        let traced = entry("msg").prepare("s", Some("Root=1"), false).unwrap();
        assert_eq!(traced.message.system_attributes[TRACE_HEADER].value, AttributeData::Text("Root=1".into()));
        assert_eq!(traced.digests.system_attributes, None);
        let explicit = SendEntry {
            message_system_attributes: Some(BTreeMap::from([(
                TRACE_HEADER.to_string(),
                AttributeIn {
                    data_type: Some("String".into()),
                    string_value: Some("Root=2".into()),
                    binary_value: None,
                },
            )])),
            ..entry("msg")
        };
        let p = explicit.prepare("s", Some("Root=1"), false).unwrap();
        assert_eq!(p.message.system_attributes[TRACE_HEADER].value, AttributeData::Text("Root=2".into()));
        assert!(p.digests.system_attributes.is_some());
    }

    #[test]
    fn aws_send_rules() {
        let code = |e: SendEntry| e.prepare("s", None, false).err().map(|e| (e.code, e.message));
        assert_eq!(
            code(entry("")),
            Some(("MissingParameter", "The request must contain the parameter MessageBody.".to_string()))
        );
        assert_eq!(code(entry("a\u{1}b")).map(|e| e.0), Some("InvalidMessageContents"));
        let delayed = SendEntry { delay_seconds: Some(Int::new(901)), ..entry("x") };
        assert_eq!(code(delayed).map(|e| e.0), Some("InvalidParameterValue"));
        let grouped = SendEntry { message_group_id: Some("group 123".into()), ..entry("x") };
        assert_eq!(
            code(grouped).map(|e| e.1),
            Some("Value group 123 for parameter MessageGroupId is invalid. Reason: MessageGroupId can only include alphanumeric and punctuation characters. 1 to 128 in length.".to_string())
        );
        let dedup = SendEntry { message_deduplication_id: Some("d".into()), ..entry("x") };
        assert_eq!(
            code(dedup).unwrap().1,
            "Value d for parameter MessageDeduplicationId is invalid. Reason: The request include parameter that is not valid for this queue type."
        );
        let ok = SendEntry { message_group_id: Some("g-1".into()), delay_seconds: Some(Int::new(900)), ..entry("x") };
        let p = ok.prepare("s", None, false).unwrap();
        assert_eq!((p.message.envelope.group_id.as_deref(), p.message.delay_ms), (Some("g-1"), Some(900_000)));
    }

    #[test]
    fn aws_fifo_send_rules() {
        let fifo = |e: SendEntry| e.prepare("s", None, true);
        let grouped = |body: &str| SendEntry { message_group_id: Some("g".into()), ..entry(body) };
        let e = fifo(entry("x")).err().unwrap();
        assert_eq!(
            (e.code, e.message.as_str()),
            ("MissingParameter", "The request must contain the parameter MessageGroupId.")
        );
        let e = fifo(SendEntry { delay_seconds: Some(Int::new(2)), ..grouped("x") }).err().unwrap();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                "InvalidParameterValue",
                "Value 2 for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type."
            )
        );
        // A zero delay is accepted and the queue's delay applies.
        let p = fifo(SendEntry { delay_seconds: Some(Int::new(0)), ..grouped("x") }).unwrap();
        assert_eq!(p.message.delay_ms, None);
        // Without an explicit id, the label is the body's SHA-256 and the core decides.
        let p = fifo(grouped("abc")).unwrap();
        assert_eq!(p.message.dedup_id, None);
        assert_eq!(
            p.message.system_attributes[DEDUP_ID].value,
            AttributeData::Text("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad".into())
        );
        assert_eq!(p.message.envelope.group_id.as_deref(), Some("g"));
        let p = fifo(SendEntry { message_deduplication_id: Some("d-1".into()), ..grouped("abc") }).unwrap();
        assert_eq!(p.message.dedup_id.as_deref(), Some("d-1"));
        assert_eq!(p.message.system_attributes[DEDUP_ID].value, AttributeData::Text("d-1".into()));
        assert_eq!(p.digests.system_attributes, None, "the dedup label is not a sent system attribute");
        // Standard queues carry no dedup label.
        assert!(!entry("x").prepare("s", None, false).unwrap().message.system_attributes.contains_key(DEDUP_ID));
        for (parameter, bad) in
            [("MessageDeduplicationId", ""), ("MessageDeduplicationId", "a b"), ("MessageGroupId", "")]
        {
            let mut e = grouped("x");
            match parameter {
                "MessageGroupId" => e.message_group_id = Some(bad.into()),
                _ => e.message_deduplication_id = Some(bad.into()),
            }
            let got = fifo(e).err().unwrap();
            assert_eq!(
                got.message,
                format!(
                    "Value {bad} for parameter {parameter} is invalid. Reason: {parameter} can only include alphanumeric and punctuation characters. 1 to 128 in length."
                )
            );
        }
        let long = "a".repeat(129);
        assert!(fifo(SendEntry { message_deduplication_id: Some(long), ..grouped("x") }).is_err());
        assert!(fifo(SendEntry { message_deduplication_id: Some("a".repeat(128)), ..grouped("x") }).is_ok());
    }

    #[test]
    fn core_fifo_refusals_in_aws_words() {
        use sluice_core::ValidationError;
        let e = send_error(&EntryError::Invalid(ValidationError::new("dedup_id", "give a dedup_id")), false);
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                "InvalidParameterValue",
                "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly"
            )
        );
        let e = send_error(&EntryError::Invalid(ValidationError::new("group_id", "needs a group")), true);
        assert_eq!(e.code, "MissingParameter");
        let sent = Sent::new(42, sluice_core::MessageId(7));
        assert_eq!(sequence_number(&sent, true).as_deref(), Some("42"));
        assert_eq!(sequence_number(&sent, false), None);
    }

    #[test]
    fn size_errors_are_worded_like_aws() {
        let e = EntryError::MessageTooLarge { size_bytes: 2000, max_bytes: 1024 };
        assert_eq!(
            send_error(&e, false).message,
            "One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes."
        );
        assert_eq!(
            send_error(&e, true).message,
            "One or more parameters cannot be validated. Reason: Message must be shorter than 1024 bytes."
        );
    }
}
