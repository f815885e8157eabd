//! Publishing a poll's rows to the relay's target, and dead-lettering the rows it refuses.
//!
//! Rows go out in position order. Consecutive rows bound for the same target name (one name
//! without `route_by`) form one call: a queue `send` of up to 1,000 messages, or a topic
//! publish of up to 100, or a stream append of up to 1,000 records, so the embedded store
//! commits each call in one batch. A row is
//! checked first as the target would check it (size, attributes, FIFO ids), so that the target
//! seldom refuses a single message of a call; a refused row holds back every later row of its
//! aggregate in the poll (they wait: order per aggregate). A call the store cannot take now
//! (unavailable, full, poisoned) ends the poll: it and every later row are left for the next.
//!
//! Every message carries the row's id as its identity: the attribute `outbox_id`, the FIFO
//! dedup id on FIFO targets (with the aggregate id as the group), and the topic message id
//! (the SNS envelope's `MessageId`). On a stream the row's id is the record's `dedup_id` and
//! the aggregate id its key: rows of one aggregate land on one partition in order, and a row
//! relayed again after a crash within the stream's dedup window gets its first offset back
//! instead of a second record. Adding a target kind is one arm in [`publish`].
//!
//! A target with schema validation checks each row against the schema of its `type` column
//! (the version: a `sluice.version` header, else the latest): queues and streams here, in
//! `prepare`, as their doors would; topics in their own publish. A row that breaks it is
//! refused like any other refusal: dead-lettered with the reason, or its aggregate waits.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use sluice_core::limits::FIFO_SUFFIX;
use sluice_core::message::AttributeData;
use sluice_core::name::{Namespace, TENANT_SEPARATOR, split_tenant};
use sluice_core::stream::{NewRecord, StreamConfig};
use sluice_core::{AttributeValue, BrokerError, MessageEnvelope, NewMessage};
use sluice_store::{LogError, StoreError};

use super::limits::{RELAY_RESERVED_ATTRIBUTES, RELAY_ROW_FIELD_BYTES_MAX};
use super::model::{ROUTE_PLACEHOLDER, RelaySpec, Target};
use super::source::{Payload, Row};
use crate::Services;
use crate::topics::limits::PUBLISH_BATCH_ENTRIES_MAX;
use crate::topics::{Origin, Publication, PublishError, TopicError};

/// Attributes every relayed message carries.
pub const OUTBOX_ID: &str = "outbox_id";
pub const OUTBOX_TYPE: &str = "outbox_type";
pub const AGGREGATE_TYPE: &str = "aggregate_type";
pub const AGGREGATE_ID: &str = "aggregate_id";
/// On dead-lettered rows: why, and which relay.
pub const RELAY_ERROR: &str = "relay_error";
pub const RELAY_NAME: &str = "relay";

/// How long a queue's attributes are used before they are read again (real time: a cache).
const QUEUE_INFO_CACHE_MS: u64 = 1_000;

/// What became of one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Durable in the target.
    Published,
    /// The target cannot take it as it stands.
    Refused(String),
    /// Held back behind an earlier row of its aggregate that was not published.
    Blocked,
    /// The store could not take it now; nothing after it was tried.
    Unavailable(String),
}

/// A queue's attributes as far as relaying needs them.
#[derive(Clone, Copy)]
struct QueueInfo {
    fifo: bool,
    message_bytes_max: u64,
}

/// What a relay remembers between polls about its targets.
#[derive(Default)]
pub struct Targets {
    queues: HashMap<String, (Instant, Result<QueueInfo, String>)>,
    streams: HashMap<String, (Instant, Result<StreamConfig, String>)>,
}

impl Targets {
    async fn queue(&mut self, services: &Services, name: &str) -> Result<Result<QueueInfo, String>, StoreError> {
        if let Some((at, info)) = self.queues.get(name)
            && at.elapsed() < Duration::from_millis(QUEUE_INFO_CACHE_MS)
        {
            return Ok(info.clone());
        }
        let info = match services.store().get_queue(name).await {
            Ok(view) => {
                Ok(QueueInfo { fifo: view.attributes.fifo, message_bytes_max: view.attributes.message_bytes_max })
            }
            Err(StoreError::Broker(BrokerError::QueueNotFound(_))) => Err(format!("the queue {name} does not exist")),
            Err(e) => return Err(e),
        };
        if self.queues.len() > 1_000 {
            self.queues.clear();
        }
        self.queues.insert(name.to_string(), (Instant::now(), info.clone()));
        Ok(info)
    }

    async fn stream(&mut self, services: &Services, name: &str) -> Result<Result<StreamConfig, String>, StoreError> {
        if let Some((at, config)) = self.streams.get(name)
            && at.elapsed() < Duration::from_millis(QUEUE_INFO_CACHE_MS)
        {
            return Ok(config.clone());
        }
        let config = match services.store().get_stream(name).await {
            Ok(view) => Ok(view.config),
            Err(LogError::StreamNotFound(_)) => Err(format!("the stream {name} does not exist")),
            Err(LogError::Store(e)) => return Err(e),
            Err(e) => Err(e.to_string()),
        };
        if self.streams.len() > 1_000 {
            self.streams.clear();
        }
        self.streams.insert(name.to_string(), (Instant::now(), config.clone()));
        Ok(config)
    }
}

/// The target name of a row: the configured one, with `route_by`'s value in place, in the
/// relay's tenant. The target is stored in the tenant's namespace when the relay is created; a
/// routed value is the application's data, so it is put in the relay's tenant here, and one
/// holding the separator (which could name another tenant's target) is refused.
fn target_name(spec: &RelaySpec, row: &Row) -> Result<String, String> {
    let tenant = Namespace::of_stored(&spec.name);
    let template = tenant
        .local(spec.target.name())
        .ok_or_else(|| format!("the target {} is not in the relay's tenant {}", spec.target.name(), tenant.tenant()))?;
    let name = match &spec.route_by {
        None => template.to_string(),
        Some(column) => match &row.route {
            Some(value) if value.contains(TENANT_SEPARATOR) => {
                return Err(format!(
                    "the route_by column {column} holds {value:?}: names may not hold '{TENANT_SEPARATOR}'"
                ));
            }
            Some(value) if !value.is_empty() => template.replace(ROUTE_PLACEHOLDER, value),
            _ => return Err(format!("the route_by column {column} is NULL or empty")),
        },
    };
    tenant.qualify("route_by", &name).map_err(|e| e.message)
}

fn text(value: &str) -> AttributeValue {
    AttributeValue { data_type: "String".into(), value: AttributeData::Text(value.into()) }
}

/// The attributes of a row's message: the reserved four and the `headers` column's.
fn attributes(row: &Row) -> Result<BTreeMap<String, AttributeValue>, String> {
    let mut attributes = BTreeMap::new();
    if let Some(headers) = &row.headers {
        let headers = headers.as_ref().map_err(|n| format!("the headers column is {n} bytes, too long"))?;
        let object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(headers).map_err(|e| format!("the headers column is not a JSON object: {e}"))?;
        let max = sluice_core::limits::MESSAGE_ATTRIBUTES_MAX - RELAY_RESERVED_ATTRIBUTES;
        if object.len() > max {
            return Err(format!("the headers column has {} entries, more than {max}", object.len()));
        }
        for (key, value) in object {
            let value = match value {
                serde_json::Value::String(s) => text(&s),
                serde_json::Value::Number(n) => {
                    AttributeValue { data_type: "Number".into(), value: AttributeData::Text(n.to_string()) }
                }
                serde_json::Value::Bool(b) => text(&b.to_string()),
                _ => return Err(format!("the header {key:?} is not a string, number or boolean")),
            };
            attributes.insert(key, value);
        }
    }
    attributes.insert(OUTBOX_ID.into(), text(&row.id));
    for (name, value) in
        [(OUTBOX_TYPE, &row.event_type), (AGGREGATE_TYPE, &row.aggregate_type), (AGGREGATE_ID, &row.aggregate_id)]
    {
        if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
            attributes.insert(name.into(), text(v));
        }
    }
    Ok(attributes)
}

/// The queue message for a row.
fn queue_message(row: &Row, fifo: bool) -> Result<NewMessage, String> {
    let (body, body_binary) = match &row.payload {
        Payload::Text(t) => (t.clone().into_bytes(), false),
        Payload::Bytes(b) => (b.clone(), true),
        Payload::TooLarge(_) | Payload::Null => return Err(row.check().err().unwrap_or_default()),
    };
    let group_id = row.aggregate_id.clone().filter(|g| !g.is_empty());
    if fifo && group_id.is_none() {
        return Err("a FIFO target needs an aggregate id (the message group)".into());
    }
    Ok(NewMessage {
        body,
        body_binary,
        attributes: attributes(row)?,
        envelope: MessageEnvelope {
            r#type: row.event_type.clone().filter(|t| !t.is_empty()),
            group_id,
            ..Default::default()
        },
        dedup_id: fifo.then(|| row.id.clone()),
        ..Default::default()
    })
}

/// The topic publication for a row.
fn publication(row: &Row, fifo: bool) -> Result<Publication, String> {
    let message = match &row.payload {
        Payload::Text(t) => t.clone(),
        Payload::Bytes(_) => return Err("a topic takes text: the payload is not UTF-8".into()),
        Payload::TooLarge(_) | Payload::Null => return Err(row.check().err().unwrap_or_default()),
    };
    let group_id = row.aggregate_id.clone().filter(|g| !g.is_empty());
    if fifo && group_id.is_none() {
        return Err("a FIFO topic needs an aggregate id (the message group)".into());
    }
    Ok(Publication {
        message,
        attributes: attributes(row)?,
        group_id,
        dedup_id: fifo.then(|| row.id.clone()),
        message_id: Some(row.id.clone()),
        // A topic with schema validation checks the row against its type's schema.
        schema_type: row.event_type.clone().filter(|t| !t.is_empty()),
        ..Default::default()
    })
}

/// The stream record for a row: keyed by its aggregate id (none: round robin), its
/// attributes as headers, its id as the dedup id.
fn stream_record(row: &Row) -> Result<NewRecord, String> {
    let (body, body_binary) = match &row.payload {
        Payload::Text(t) => (t.clone().into_bytes(), false),
        Payload::Bytes(b) => (b.clone(), true),
        Payload::TooLarge(_) | Payload::Null => return Err(row.check().err().unwrap_or_default()),
    };
    let headers = attributes(row)?
        .into_iter()
        .map(|(name, value)| match value.value {
            AttributeData::Text(text) => (name, text),
            AttributeData::Bytes(bytes) => {
                use base64::Engine as _;
                (name, base64::engine::general_purpose::STANDARD.encode(bytes))
            }
        })
        .collect();
    Ok(NewRecord {
        key: row.aggregate_id.as_deref().filter(|a| !a.is_empty()).map(|a| a.as_bytes().to_vec()),
        partition: None,
        body,
        body_binary,
        headers,
        r#type: row.event_type.clone().filter(|t| !t.is_empty()),
        correlation_id: None,
        dedup_id: Some(row.id.clone()),
    })
}

/// One call: consecutive rows (by index) bound for one target name, with what to send.
enum Call {
    Queue { name: String, rows: Vec<(usize, NewMessage)> },
    Topic { name: String, rows: Vec<(usize, Publication)> },
    Stream { name: String, rows: Vec<(usize, NewRecord)> },
}

/// Publishes `rows` (in position order), answering each.
pub async fn publish(services: &Services, spec: &RelaySpec, targets: &mut Targets, rows: &[Row]) -> Vec<Outcome> {
    let mut outcomes: Vec<Option<Outcome>> = vec![None; rows.len()];
    let mut blocked: HashSet<&str> = HashSet::new();
    let mut call: Option<Call> = None;
    for (i, row) in rows.iter().enumerate() {
        let aggregate = row.aggregate_id.as_deref().unwrap_or("");
        if blocked.contains(aggregate) {
            outcomes[i] = Some(Outcome::Blocked);
            continue;
        }
        let prepared = match prepare(services, spec, targets, row).await {
            Ok(p) => p,
            Err(Err(unavailable)) => {
                finish_unavailable(&mut outcomes, &call, unavailable);
                return close(outcomes);
            }
            Err(Ok(refusal)) => {
                outcomes[i] = Some(Outcome::Refused(refusal));
                blocked.insert(aggregate);
                continue;
            }
        };
        if !call.as_ref().is_some_and(|c| c.takes(&prepared)) {
            if let Some(full) = call.take()
                && let Err(unavailable) = send(services, full, rows, &mut outcomes, &mut blocked).await
            {
                mark_rest(&mut outcomes, unavailable);
                return close(outcomes);
            }
            call = Some(prepared.start());
        }
        call.as_mut().expect("started above").push(i, prepared);
    }
    if let Some(last) = call
        && let Err(unavailable) = send(services, last, rows, &mut outcomes, &mut blocked).await
    {
        mark_rest(&mut outcomes, unavailable);
    }
    close(outcomes)
}

/// One row, ready to join a call.
enum Prepared {
    Queue { name: String, message: NewMessage },
    Topic { name: String, publication: Publication },
    Stream { name: String, record: NewRecord },
}

impl Prepared {
    fn start(&self) -> Call {
        match self {
            Prepared::Queue { name, .. } => Call::Queue { name: name.clone(), rows: Vec::new() },
            Prepared::Topic { name, .. } => Call::Topic { name: name.clone(), rows: Vec::new() },
            Prepared::Stream { name, .. } => Call::Stream { name: name.clone(), rows: Vec::new() },
        }
    }
}

impl Call {
    fn takes(&self, p: &Prepared) -> bool {
        match (self, p) {
            (Call::Queue { name, rows, .. }, Prepared::Queue { name: n, .. }) => {
                name == n && rows.len() < sluice_core::limits::BATCH_ENTRIES_MAX
            }
            (Call::Topic { name, rows }, Prepared::Topic { name: n, .. }) => {
                name == n && rows.len() < PUBLISH_BATCH_ENTRIES_MAX
            }
            (Call::Stream { name, rows }, Prepared::Stream { name: n, .. }) => {
                name == n && rows.len() < sluice_core::stream::limits::APPEND_RECORDS_MAX
            }
            _ => false,
        }
    }

    fn push(&mut self, index: usize, p: Prepared) {
        match (self, p) {
            (Call::Queue { rows, .. }, Prepared::Queue { message, .. }) => rows.push((index, message)),
            (Call::Topic { rows, .. }, Prepared::Topic { publication, .. }) => rows.push((index, publication)),
            (Call::Stream { rows, .. }, Prepared::Stream { record, .. }) => rows.push((index, record)),
            _ => unreachable!("a call takes only rows it `takes`"),
        }
    }

    fn indexes(&self) -> Vec<usize> {
        match self {
            Call::Queue { rows, .. } => rows.iter().map(|(i, _)| *i).collect(),
            Call::Topic { rows, .. } => rows.iter().map(|(i, _)| *i).collect(),
            Call::Stream { rows, .. } => rows.iter().map(|(i, _)| *i).collect(),
        }
    }
}

/// Checks a row and builds its message. `Err(Ok(reason))`: refused; `Err(Err(cause))`: the
/// store could not answer now.
async fn prepare(
    services: &Services,
    spec: &RelaySpec,
    targets: &mut Targets,
    row: &Row,
) -> Result<Prepared, Result<String, String>> {
    row.check().map_err(Ok)?;
    if row.id.is_empty() || row.id.len() > RELAY_ROW_FIELD_BYTES_MAX {
        return Err(Ok(format!("the row id is empty or longer than {RELAY_ROW_FIELD_BYTES_MAX} bytes")));
    }
    let name = target_name(spec, row).map_err(Ok)?;
    match &spec.target {
        Target::Queue(_) => {
            let info = targets.queue(services, &name).await.map_err(|e| Err(e.to_string()))?.map_err(Ok)?;
            let message = queue_message(row, info.fifo).map_err(Ok)?;
            message.validate().map_err(|e| Ok(e.to_string()))?;
            let schemas = services.schemas();
            if schemas.queue_validates(&name).await.map_err(|e| Err(e.to_string()))?
                && let Err(violation) = schemas
                    .check_new_message(&Namespace::of_stored(&name), &message)
                    .await
                    .map_err(|e| Err(e.to_string()))?
            {
                return Err(Ok(violation.to_string()));
            }
            if message.size_bytes() > info.message_bytes_max {
                return Err(Ok(format!(
                    "the message is {} bytes, more than the queue's message_bytes_max of {}",
                    message.size_bytes(),
                    info.message_bytes_max
                )));
            }
            Ok(Prepared::Queue { name, message })
        }
        Target::Topic(_) => {
            let publication = publication(row, name.ends_with(FIFO_SUFFIX)).map_err(Ok)?;
            match services.topics().check_publication(&name, &publication).await {
                Ok(()) => Ok(Prepared::Topic { name, publication }),
                Err(TopicError::Store(e)) if !matches!(e, StoreError::Broker(_)) => Err(Err(e.to_string())),
                Err(e) => Err(Ok(e.to_string())),
            }
        }
        Target::Stream(_) => {
            let config = targets.stream(services, &name).await.map_err(|e| Err(e.to_string()))?.map_err(Ok)?;
            let record = stream_record(row).map_err(Ok)?;
            record.validate(&config).map_err(|e| Ok(e.to_string()))?;
            if config.schema_validation
                && let Err(violation) = services
                    .schemas()
                    .check_record(&Namespace::of_stored(&name), &record)
                    .await
                    .map_err(|e| Err(e.to_string()))?
            {
                return Err(Ok(violation.to_string()));
            }
            Ok(Prepared::Stream { name, record })
        }
    }
}

/// Sends one call, recording each row's outcome; a refused row blocks its aggregate. `Err`
/// when the store could not take the call now.
async fn send<'r>(
    services: &Services,
    call: Call,
    rows: &'r [Row],
    outcomes: &mut [Option<Outcome>],
    blocked: &mut HashSet<&'r str>,
) -> Result<(), String> {
    let indexes = call.indexes();
    let results: Vec<Result<(), String>> = match call {
        Call::Queue { name, rows: messages } => {
            let messages: Vec<NewMessage> = messages.into_iter().map(|(_, m)| m).collect();
            match services.store().send(&name, messages).await {
                Ok(entries) => entries.into_iter().map(|e| e.map(|_| ()).map_err(|e| e.to_string())).collect(),
                Err(StoreError::Broker(b)) => vec![Err(b.to_string()); indexes.len()],
                Err(e) => return Err(e.to_string()),
            }
        }
        Call::Topic { name, rows: publications } => {
            let publications: Vec<Publication> = publications.into_iter().map(|(_, p)| p).collect();
            let origin = Origin { base_url: "http://localhost".into(), sender: "sluice-relay".into() };
            match services.topics().publish(&name, publications, &origin).await {
                Ok(entries) => {
                    let mut results = Vec::with_capacity(entries.len());
                    for entry in entries {
                        results.push(match entry {
                            Ok(_) => Ok(()),
                            Err(PublishError::Invalid(i)) => Err(i.message),
                            // The topic checks schemas: a refusal like any other.
                            Err(PublishError::Schema(violation)) => Err(violation.to_string()),
                            // Not acknowledged: some copies may be durable; the row is published
                            // again later (at least once).
                            Err(PublishError::Incomplete { cause, .. }) => return Err(cause.to_string()),
                            // A subscription's queue is full, or the topic's rate limit is
                            // reached: published again later, as above.
                            Err(e @ (PublishError::QueueFull { .. } | PublishError::RateLimited { .. })) => {
                                return Err(e.to_string());
                            }
                        });
                    }
                    results
                }
                Err(TopicError::Store(e)) if !matches!(e, StoreError::Broker(_)) => return Err(e.to_string()),
                Err(e) => vec![Err(e.to_string()); indexes.len()],
            }
        }
        Call::Stream { name, rows: records } => {
            let records: Vec<NewRecord> = records.into_iter().map(|(_, r)| r).collect();
            match services.store().append(&name, records, None).await {
                Ok(entries) => entries.into_iter().map(|e| e.map(|_| ()).map_err(|e| e.to_string())).collect(),
                Err(LogError::Store(e)) if !matches!(e, StoreError::Broker(_)) => return Err(e.to_string()),
                Err(e) => vec![Err(e.to_string()); indexes.len()],
            }
        }
    };
    for (i, result) in indexes.into_iter().zip(results) {
        outcomes[i] = Some(match result {
            Ok(()) => Outcome::Published,
            Err(reason) => {
                blocked.insert(rows[i].aggregate_id.as_deref().unwrap_or(""));
                Outcome::Refused(reason)
            }
        });
    }
    Ok(())
}

/// The store failed before `call` was sent: it and everything untried are unavailable.
fn finish_unavailable(outcomes: &mut [Option<Outcome>], call: &Option<Call>, cause: String) {
    if let Some(call) = call {
        for i in call.indexes() {
            outcomes[i] = Some(Outcome::Unavailable(cause.clone()));
        }
    }
    mark_rest(outcomes, cause);
}

fn mark_rest(outcomes: &mut [Option<Outcome>], cause: String) {
    for o in outcomes.iter_mut().filter(|o| o.is_none()) {
        *o = Some(Outcome::Unavailable(cause.clone()));
    }
}

fn close(outcomes: Vec<Option<Outcome>>) -> Vec<Outcome> {
    outcomes.into_iter().map(|o| o.unwrap_or(Outcome::Unavailable("not tried".into()))).collect()
}

/// Why a row could not be dead-lettered.
pub enum DeadLetterError {
    /// Try again later.
    Unavailable(String),
    /// The dead-letter queue is missing or refuses the message.
    Refused(String),
}

/// Sends a refused row to the relay's dead-letter queue with the reason.
pub async fn dead_letter(
    services: &Services,
    spec: &RelaySpec,
    queue: &str,
    row: &Row,
    reason: &str,
) -> Result<(), DeadLetterError> {
    let fifo = queue.ends_with(FIFO_SUFFIX);
    let mut attributes = attributes(row).unwrap_or_default();
    // The row's own headers may be what was refused; keep only the reserved attributes then.
    if attributes.len() > sluice_core::limits::MESSAGE_ATTRIBUTES_MAX - 2 {
        attributes.retain(|k, _| [OUTBOX_ID, OUTBOX_TYPE, AGGREGATE_TYPE, AGGREGATE_ID].contains(&k.as_str()));
    }
    let reason: String = reason.chars().take(1_000).collect();
    attributes.insert(RELAY_ERROR.into(), text(&reason));
    // The relay by its name in its tenant, whose queue this is.
    attributes.insert(RELAY_NAME.into(), text(split_tenant(&spec.name).1));
    let (body, body_binary) = match &row.payload {
        Payload::Text(t) => (t.clone().into_bytes(), false),
        Payload::Bytes(b) => (b.clone(), true),
        Payload::TooLarge(n) => (format!("(a payload of {n} bytes, not copied)").into_bytes(), false),
        Payload::Null => (b"(no payload)".to_vec(), false),
    };
    let group = row.aggregate_id.clone().filter(|g| !g.is_empty() && g.len() <= RELAY_ROW_FIELD_BYTES_MAX);
    let message = NewMessage {
        body,
        body_binary,
        attributes,
        envelope: MessageEnvelope {
            group_id: if fifo { group.or_else(|| Some("relay".into())) } else { group },
            ..Default::default()
        },
        dedup_id: fifo.then(|| row.id.chars().take(RELAY_ROW_FIELD_BYTES_MAX).collect()),
        ..Default::default()
    };
    match services.store().send(queue, vec![message]).await {
        Ok(mut entries) => match entries.pop() {
            Some(Err(e)) => Err(DeadLetterError::Refused(e.to_string())),
            _ => Ok(()),
        },
        Err(StoreError::Broker(b)) => Err(DeadLetterError::Refused(b.to_string())),
        Err(e) => Err(DeadLetterError::Unavailable(e.to_string())),
    }
}
