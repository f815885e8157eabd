//! The check at the door: a message sent to a queue, topic or stream with `schema_validation`
//! must name a registered `type` (and optionally `version`), be JSON text, and pass that
//! version's schema. Refusals are [`Violation`]s, which every protocol reports in its own way
//! (`schema_validation_failed` natively, `InvalidParameterValue` over SQS and SNS).
//!
//! Short-lived caches keep the check off the store on the hot path: a type's latest version
//! (for messages without a version) and whether a queue or a stream validates, each trusted for
//! [`CACHE_TTL_MS`] on the injected clock. A change made through this node takes effect at once;
//! one made on another node of a shared database takes effect within that time.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;
use sluice_core::message::AttributeData;
use sluice_core::name::Namespace;
use sluice_core::stream::NewRecord;
use sluice_core::{BrokerError, NewMessage};
use sluice_store::{LogError, StoreError};

use super::validate::{self, Failure};
use super::{SchemaError, Schemas};

/// The SQS/SNS message attribute that names a message's type.
pub const ATTRIBUTE_TYPE: &str = "sluice.type";
/// The SQS/SNS message attribute that names a message's schema version.
pub const ATTRIBUTE_VERSION: &str = "sluice.version";

/// How long a cached latest version or queue setting is trusted, in milliseconds.
pub const CACHE_TTL_MS: u64 = 1_000;
/// Most compiled schemas kept; past it the cache starts again empty.
pub const VALIDATORS_CACHED_MAX: usize = 4_096;
/// Most entries each of the other caches keeps.
const ENTRIES_CACHED_MAX: usize = 65_536;

/// Why a message was refused at the door.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub r#type: Option<String>,
    pub version: Option<u32>,
    /// The JSON pointer of the (first) failure in the body; `""` for the whole message.
    pub pointer: String,
    /// The first failure, for people.
    pub reason: String,
    /// Every failure found (at most `VIOLATION_ERRORS_MAX`), empty when the message could not
    /// be checked at all (no type, not JSON).
    pub failures: Vec<Failure>,
}

impl Violation {
    fn whole(r#type: Option<&str>, version: Option<u32>, reason: impl Into<String>) -> Violation {
        Violation {
            r#type: r#type.map(str::to_owned),
            version,
            pointer: String::new(),
            reason: reason.into(),
            failures: Vec::new(),
        }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.r#type, self.version) {
            (Some(t), Some(v)) => write!(f, "the message breaks schema {t} version {v}")?,
            (Some(t), None) => write!(f, "the message breaks the schema of {t}")?,
            _ => write!(f, "the message cannot be checked against a schema")?,
        }
        if self.pointer.is_empty() {
            write!(f, ": {}", self.reason)
        } else {
            write!(f, " at {}: {}", self.pointer, self.reason)
        }
    }
}

#[derive(Default)]
pub(super) struct Caches {
    /// Type → (latest version, 0 when none; when it was read).
    latest: Mutex<HashMap<String, (u32, u64)>>,
    /// Queue → (what its door checks; when it was read).
    queues: Mutex<HashMap<String, (QueueDoor, u64)>>,
    /// Stream → (what its door checks; when it was read).
    streams: Mutex<HashMap<String, (StreamDoor, u64)>>,
}

/// What a queue's settings ask of the writes checked at the door: its messages' schemas and,
/// for the job queue of the same name (job queues have no settings of their own), its
/// `rate_limit` on enqueues.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDoor {
    pub schema_validation: bool,
    pub rate_limit: Option<sluice_core::rate::RateLimit>,
}

/// What a stream's appends are checked against before the log sees them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamDoor {
    pub schema_validation: bool,
    pub rate_limit: Option<sluice_core::rate::RateLimit>,
}

impl Caches {
    pub(super) fn latest_changed(&self, name: &str, version: u32, now_ms: u64) {
        put(&self.latest, name, (version, now_ms));
    }
}

fn fresh<T: Copy>(cache: &Mutex<HashMap<String, (T, u64)>>, key: &str, now_ms: u64) -> Option<T> {
    let map = cache.lock().expect("schema cache");
    map.get(key).filter(|(_, at)| now_ms.saturating_sub(*at) < CACHE_TTL_MS).map(|(v, _)| *v)
}

fn put<T>(cache: &Mutex<HashMap<String, (T, u64)>>, key: &str, entry: (T, u64)) {
    let mut map = cache.lock().expect("schema cache");
    if map.len() >= ENTRIES_CACHED_MAX {
        map.clear();
    }
    map.insert(key.to_owned(), entry);
}

impl Schemas {
    /// Checks one message body against the schema its type names in `namespace` (the tenant
    /// of the queue, topic or stream at whose door it is): `Ok(Err(violation))` refuses it;
    /// `Err` is the store failing.
    pub async fn check_message(
        &self,
        namespace: &Namespace,
        r#type: Option<&str>,
        version: Option<&str>,
        body: &[u8],
        binary: bool,
    ) -> Result<Result<(), Violation>, StoreError> {
        counted(self.check_inner(namespace, r#type, version, Body::Bytes { body, binary }).await)
    }

    /// Checks a message as a queue's door does: its schema is named by its `type` and
    /// `version`, or by the attributes `sluice.type` and `sluice.version` (SQS, relays).
    pub async fn check_new_message(
        &self,
        namespace: &Namespace,
        m: &NewMessage,
    ) -> Result<Result<(), Violation>, StoreError> {
        let named = |name: &str| match m.attributes.get(name).map(|a| &a.value) {
            Some(AttributeData::Text(t)) => Some(t.as_str()),
            _ => None,
        };
        let r#type = m.envelope.r#type.as_deref().or_else(|| named(ATTRIBUTE_TYPE));
        let version = m.envelope.version.as_deref().or_else(|| named(ATTRIBUTE_VERSION));
        self.check_message(namespace, r#type, version, &m.body, m.body_binary).await
    }

    /// Checks a stream record: its schema is named by its `type` (or the header `sluice.type`)
    /// and the header `sluice.version`.
    pub async fn check_record(
        &self,
        namespace: &Namespace,
        r: &NewRecord,
    ) -> Result<Result<(), Violation>, StoreError> {
        let r#type = r.r#type.as_deref().or_else(|| r.headers.get(ATTRIBUTE_TYPE).map(String::as_str));
        let version = r.headers.get(ATTRIBUTE_VERSION).map(String::as_str);
        self.check_message(namespace, r#type, version, &r.body, r.body_binary).await
    }

    /// Checks a JSON value that is already parsed (a job's payload).
    pub async fn check_value(
        &self,
        namespace: &Namespace,
        r#type: Option<&str>,
        version: Option<&str>,
        instance: &Value,
    ) -> Result<Result<(), Violation>, StoreError> {
        counted(self.check_inner(namespace, r#type, version, Body::Json(instance)).await)
    }

    async fn check_inner(
        &self,
        namespace: &Namespace,
        r#type: Option<&str>,
        version: Option<&str>,
        body: Body<'_>,
    ) -> Result<Result<(), Violation>, StoreError> {
        let Some(name) = r#type else {
            return Ok(Err(Violation::whole(
                None,
                None,
                "the message has no type; give `type` (over SQS and SNS the attribute sluice.type) naming its schema",
            )));
        };
        // The type's schema is its tenant's: a tenant's messages name its own types.
        let stored = match namespace.qualify("type", name) {
            Ok(stored) => stored,
            Err(e) => return Ok(Err(Violation::whole(Some(name), None, e.message))),
        };
        let version = match version {
            Some(text) => match text.trim().parse::<u32>() {
                Ok(v) if v > 0 => v,
                _ => {
                    return Ok(Err(Violation::whole(
                        Some(name),
                        None,
                        format!("the version {text:?} is not a schema version number (1, 2, ...)"),
                    )));
                }
            },
            None => match self.latest(&stored).await? {
                0 => {
                    return Ok(Err(Violation::whole(
                        Some(name),
                        None,
                        format!("no schema is registered for type {name:?}"),
                    )));
                }
                v => v,
            },
        };
        let validator = match self.validator(&stored, version).await {
            Ok(Some(v)) => v,
            Ok(None) => {
                return Ok(Err(Violation::whole(
                    Some(name),
                    Some(version),
                    format!("type {name:?} has no version {version}"),
                )));
            }
            Err(SchemaError::Store(e)) => return Err(e),
            Err(e) => return Ok(Err(Violation::whole(Some(name), Some(version), e.to_string()))),
        };
        let parsed;
        let instance = match body {
            Body::Json(instance) => instance,
            Body::Bytes { binary: true, .. } => {
                return Ok(Err(Violation::whole(
                    Some(name),
                    Some(version),
                    "the body is binary; a schema checks JSON text",
                )));
            }
            Body::Bytes { body, binary: false } => match serde_json::from_slice::<Value>(body) {
                Ok(v) => {
                    parsed = v;
                    &parsed
                }
                Err(e) => {
                    return Ok(Err(Violation::whole(Some(name), Some(version), format!("the body is not JSON: {e}"))));
                }
            },
        };
        let failures = validate::failures(&validator, instance);
        let Some(first) = failures.first() else { return Ok(Ok(())) };
        Ok(Err(Violation {
            r#type: Some(name.to_owned()),
            version: Some(version),
            pointer: first.pointer.clone(),
            reason: first.message.clone(),
            failures,
        }))
    }

    /// A type's latest version, 0 when it has none (cached).
    async fn latest(&self, name: &str) -> Result<u32, StoreError> {
        let now = self.clock.now_ms();
        if let Some(v) = fresh(&self.caches.latest, name, now) {
            return Ok(v);
        }
        let latest = match self.type_record(name).await {
            Ok(record) => record.map_or(0, |t| t.latest),
            Err(SchemaError::Store(e)) => return Err(e),
            // An unreadable type record names no usable version.
            Err(_) => 0,
        };
        put(&self.caches.latest, name, (latest, now));
        Ok(latest)
    }

    /// Whether sends into `queue` are checked (cached); an unknown queue is not (its send
    /// answers `queue_not_found` anyway).
    pub async fn queue_validates(&self, queue: &str) -> Result<bool, StoreError> {
        Ok(self.queue_door(queue).await?.schema_validation)
    }

    /// A queue's checks at the door, as read at most a cache time ago (none for a queue that
    /// does not exist).
    pub async fn queue_door(&self, queue: &str) -> Result<QueueDoor, StoreError> {
        let now = self.clock.now_ms();
        if let Some(door) = fresh(&self.caches.queues, queue, now) {
            return Ok(door);
        }
        let door = match self.store.get_queue(queue).await {
            Ok(view) => QueueDoor {
                schema_validation: view.attributes.schema_validation,
                rate_limit: view.attributes.rate_limit,
            },
            Err(StoreError::Broker(BrokerError::QueueNotFound(_))) => QueueDoor::default(),
            Err(e) => return Err(e),
        };
        put(&self.caches.queues, queue, (door, now));
        Ok(door)
    }

    /// Forgets what is cached about a queue, after it was created, changed or deleted here.
    pub fn forget_queue(&self, queue: &str) {
        self.caches.queues.lock().expect("schema cache").remove(queue);
    }

    /// Whether appends to `stream` are checked (cached); an unknown stream is not (its append
    /// answers `stream_not_found` anyway).
    pub async fn stream_validates(&self, stream: &str) -> Result<bool, StoreError> {
        Ok(self.stream_door(stream).await?.schema_validation)
    }

    /// A stream's checks at the door (its schema validation and rate limit), as read at most
    /// a cache time ago.
    pub async fn stream_door(&self, stream: &str) -> Result<StreamDoor, StoreError> {
        let now = self.clock.now_ms();
        if let Some(door) = fresh(&self.caches.streams, stream, now) {
            return Ok(door);
        }
        let door = match self.store.get_stream(stream).await {
            Ok(view) => {
                StreamDoor { schema_validation: view.config.schema_validation, rate_limit: view.config.rate_limit }
            }
            Err(LogError::Store(e)) => return Err(e),
            // Not found, or a store without streams: nothing to check.
            Err(_) => StreamDoor::default(),
        };
        put(&self.caches.streams, stream, (door, now));
        Ok(door)
    }

    /// Forgets what is cached about a stream, after it was created, changed or deleted here.
    pub fn forget_stream(&self, stream: &str) {
        self.caches.streams.lock().expect("schema cache").remove(stream);
    }
}

/// What a check is given: a body as sent, or JSON already parsed.
enum Body<'a> {
    Bytes { body: &'a [u8], binary: bool },
    Json(&'a Value),
}

/// Counts a check's outcome in `sluice_schema_checks_total`.
fn counted(outcome: Result<Result<(), Violation>, StoreError>) -> Result<Result<(), Violation>, StoreError> {
    let result = match &outcome {
        Ok(Ok(())) => "valid",
        Ok(Err(_)) => "refused",
        Err(_) => "error",
    };
    metrics::counter!("sluice_schema_checks_total", "result" => result).increment(1);
    outcome
}
