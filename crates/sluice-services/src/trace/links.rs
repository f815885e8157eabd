//! Where each kind of write carries its correlation and causation ids, read into trace
//! entries: a queue message's envelope (`correlation_id`) and system attribute
//! `sluice.causation_id`; a publication's attributes `sluice.correlation_id` and
//! `sluice.causation_id` (which its subscribers receive); a stream record's `correlation_id`
//! and header `sluice.causation_id`.

use std::collections::BTreeMap;

use sluice_core::message::AttributeData;
use sluice_core::stream::NewRecord;
use sluice_core::{AttributeValue, NewMessage};
use sluice_store::{Appended, Write, WriteOutcome};

use super::model::{TraceEntry, TraceKind};

/// The attribute a publication (and every copy of it) carries its correlation id in.
pub const ATTRIBUTE_CORRELATION_ID: &str = "sluice.correlation_id";
/// The attribute (a queue message's system attribute, a publication's attribute, a stream
/// record's header) that names what caused it.
pub const ATTRIBUTE_CAUSATION_ID: &str = "sluice.causation_id";

/// A write's correlation id, what caused it and its type, before the store gave it an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Links {
    pub correlation_id: String,
    pub causation_id: Option<String>,
    pub detail: Option<String>,
}

impl Links {
    /// The entry of the write once it has an id.
    pub fn entry(&self, kind: TraceKind, id: impl Into<String>, target: impl Into<String>) -> TraceEntry {
        TraceEntry::new(kind, id, &self.correlation_id, target)
            .caused_by(self.causation_id.as_deref())
            .detail(self.detail.as_deref())
    }
}

/// What caused a queue message: its system attribute `sluice.causation_id`.
pub fn causation_id(system_attributes: &BTreeMap<String, AttributeValue>) -> Option<String> {
    text(system_attributes, ATTRIBUTE_CAUSATION_ID)
}

/// The system attribute that keeps what caused a queue message.
pub fn causation_attribute(causation_id: String) -> (String, AttributeValue) {
    let value = AttributeValue { data_type: "String".into(), value: AttributeData::Text(causation_id) };
    (ATTRIBUTE_CAUSATION_ID.to_string(), value)
}

fn text(attributes: &BTreeMap<String, AttributeValue>, name: &str) -> Option<String> {
    match &attributes.get(name)?.value {
        AttributeData::Text(t) => Some(t.clone()),
        AttributeData::Bytes(_) => None,
    }
}

/// A queue message's links; `None` without a correlation id (not traced).
pub fn message_links(m: &NewMessage) -> Option<Links> {
    let correlation_id = m.envelope.correlation_id.clone().or_else(|| text(&m.attributes, ATTRIBUTE_CORRELATION_ID))?;
    let causation_id = causation_id(&m.system_attributes).or_else(|| text(&m.attributes, ATTRIBUTE_CAUSATION_ID));
    Some(Links { correlation_id, causation_id, detail: m.envelope.r#type.clone() })
}

/// A publication's links, from its attributes.
pub fn publication_links(attributes: &BTreeMap<String, AttributeValue>) -> Option<Links> {
    Some(Links {
        correlation_id: text(attributes, ATTRIBUTE_CORRELATION_ID)?,
        causation_id: text(attributes, ATTRIBUTE_CAUSATION_ID),
        detail: text(attributes, crate::schemas::ATTRIBUTE_TYPE),
    })
}

/// A stream record's links.
pub fn record_links(r: &NewRecord) -> Option<Links> {
    Some(Links {
        correlation_id: r.correlation_id.clone()?,
        causation_id: r.headers.get(ATTRIBUTE_CAUSATION_ID).cloned(),
        detail: r.r#type.clone(),
    })
}

/// The entries of a batch written to `target`: each written item with links and an id.
pub fn entries(
    kind: TraceKind,
    target: &str,
    written: impl IntoIterator<Item = (Option<Links>, Option<String>)>,
) -> Vec<TraceEntry> {
    written.into_iter().filter_map(|(links, id)| Some(links?.entry(kind, id?, target))).collect()
}

/// A stream record's id in a trace: `partition/offset`.
pub fn record_id(a: &Appended) -> String {
    format!("{}/{}", a.partition, a.offset)
}

/// The links of a commit's sends and appends, read before the commit takes its writes, so
/// that once it is applied its messages and records are listed with the ids it gave them.
#[derive(Debug, Default)]
pub struct CommitLinks(Vec<Option<WriteLinks>>);

/// A send's or an append's kind of entry, its target and each item's links.
#[derive(Debug)]
struct WriteLinks {
    kind: TraceKind,
    target: String,
    links: Vec<Option<Links>>,
}

impl CommitLinks {
    pub fn of(writes: &[Write]) -> CommitLinks {
        CommitLinks::of_where(writes, |_| true)
    }

    /// As [`CommitLinks::of`], listing only the sends to queues `traced` names.
    pub fn of_where(writes: &[Write], traced: impl Fn(&str) -> bool) -> CommitLinks {
        CommitLinks(
            writes
                .iter()
                .map(|w| match w {
                    Write::Send { queue, messages } if traced(queue) => Some(WriteLinks {
                        kind: TraceKind::Message,
                        target: format!("queue:{queue}"),
                        links: messages.iter().map(message_links).collect(),
                    }),
                    Write::Append { stream, records } => Some(WriteLinks {
                        kind: TraceKind::Record,
                        target: format!("stream:{stream}"),
                        links: records.iter().map(record_links).collect(),
                    }),
                    _ => None,
                })
                .collect(),
        )
    }

    /// The entries of what the applied commit wrote; `outcomes` are its writes' in order. A
    /// FIFO or dedup duplicate wrote nothing new and is not listed again.
    pub fn entries(self, outcomes: &[WriteOutcome]) -> Vec<TraceEntry> {
        let mut out = Vec::new();
        for (links, outcome) in self.0.into_iter().zip(outcomes) {
            let Some(WriteLinks { kind, target, links }) = links else { continue };
            let ids: Vec<Option<String>> = match outcome {
                WriteOutcome::Sent(sent) => sent.iter().map(|s| Some(s.id.to_string())).collect(),
                WriteOutcome::Appended(appended) => {
                    appended.iter().map(|a| (!a.duplicate).then(|| record_id(a))).collect()
                }
                WriteOutcome::Recorded => continue,
            };
            out.extend(entries(kind, &target, links.into_iter().zip(ids)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use sluice_core::MessageEnvelope;

    use super::*;

    fn attribute(value: &str) -> AttributeValue {
        AttributeValue { data_type: "String".into(), value: AttributeData::Text(value.into()) }
    }

    #[test]
    fn a_message_is_traced_by_its_envelope_or_its_attribute_and_names_its_cause() {
        let plain = NewMessage::default();
        assert_eq!(message_links(&plain), None, "no correlation id, no entry");
        let m = NewMessage {
            envelope: MessageEnvelope {
                correlation_id: Some("c".into()),
                r#type: Some("t".into()),
                ..Default::default()
            },
            system_attributes: BTreeMap::from([(ATTRIBUTE_CAUSATION_ID.to_string(), attribute("cause"))]),
            ..Default::default()
        };
        let links = message_links(&m).unwrap();
        assert_eq!((links.correlation_id.as_str(), links.causation_id.as_deref()), ("c", Some("cause")));
        let copy = NewMessage {
            attributes: BTreeMap::from([(ATTRIBUTE_CORRELATION_ID.to_string(), attribute("from-topic"))]),
            ..Default::default()
        };
        assert_eq!(message_links(&copy).unwrap().correlation_id, "from-topic");
        let written =
            entries(TraceKind::Message, "queue:q", [(Some(links), Some("m1".into())), (None, Some("m2".into()))]);
        assert_eq!(written.len(), 1);
        assert_eq!((written[0].id.as_str(), written[0].detail.as_deref()), ("m1", Some("t")));
    }
}
