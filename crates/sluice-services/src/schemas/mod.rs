//! The schema registry: JSON Schema (2020-12) versions per message `type`, each new version
//! checked against earlier ones under the type's compatibility mode, and the check at the door
//! that queues, topics and streams with `schema_validation` apply to every message.
//!
//! - `record.rs`: the stored records, names and limits.
//! - `compat.rs`: whether one schema accepts everything another does (the compatibility rules).
//! - `validate.rs`: compiling a schema and finding where a body breaks it (the jsonschema crate).
//! - `check.rs`: the check at the door, with its caches.
//!
//! A message names its schema by `type` and `version` (the version number as text; without one,
//! the type's latest version). Over SQS and SNS the message attributes `sluice.type` and
//! `sluice.version` carry them.

pub mod check;
pub mod compat;
pub mod record;
pub mod validate;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jsonschema::Validator;
use serde_json::Value;
use sluice_clock::Clock;
use sluice_core::ValidationError;
use sluice_store::{Conflict, RECORD_LIST_LIMIT_MAX, Refused, Store, StoreError, Write};

pub use check::{ATTRIBUTE_TYPE, ATTRIBUTE_VERSION, QueueDoor, StreamDoor, Violation};
pub use compat::Incompatibility;
pub use record::{
    Compatibility, SCHEMA_BYTES_MAX, SCHEMA_TYPE_LEN_MAX, SCHEMA_TYPES_MAX, SCHEMA_VERSIONS_MAX, TypeRecord,
    VersionRecord,
};
use record::{
    RECORD_FORMAT, TYPE_KIND, VERSION_KIND, decode, encode, validate_type_name, version_key, versions_prefix,
};

/// How often a registration retries after another registration changed the type under it.
/// Every round has a winner, so this many writers racing on one type all get through.
const REGISTER_ATTEMPTS_MAX: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("no schema is registered for type {0:?}")]
    TypeNotFound(String),
    #[error("type {name:?} has no version {version}")]
    VersionNotFound { name: String, version: u32 },
    /// The schema is not a JSON Schema 2020-12 document (or is too large).
    #[error("the schema is not valid JSON Schema 2020-12: {0}")]
    SchemaInvalid(String),
    /// The new version breaks the type's compatibility mode.
    #[error("the schema is not {} compatible with version {}", .compatibility.as_str(), .reasons.first().map_or(0, |r| r.version))]
    Incompatible { compatibility: Compatibility, reasons: Vec<Reason> },
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("{0}")]
    LimitExceeded(String),
    #[error("the type changed under this call too often; try again")]
    Contended,
    #[error("a stored schema could not be read: {0}")]
    Corrupt(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a new version is incompatible with one earlier version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    /// The earlier version.
    pub version: u32,
    /// `backward`: messages of that version would be refused by the new one; `forward`:
    /// messages of the new one would be refused by that version.
    pub direction: &'static str,
    pub incompatibility: Incompatibility,
}

/// What a registration did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registered {
    pub version: u32,
    /// `false`: the same schema was already that version (registration is idempotent).
    pub created: bool,
}

/// A type with its versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeView {
    pub record: TypeRecord,
    pub versions: Vec<u32>,
}

/// The registry of one server. Reads every node's registrations from the store.
pub struct Schemas {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    /// Compiled versions (a version never changes once written).
    validators: Mutex<HashMap<(String, u32), Arc<Validator>>>,
    caches: check::Caches,
}

impl Schemas {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Arc<Schemas> {
        Arc::new(Schemas { store, clock, validators: Mutex::new(HashMap::new()), caches: check::Caches::default() })
    }

    /// Registers `schema` as the type's next version, unless it is one already; refused when
    /// it breaks the type's compatibility with earlier versions.
    pub async fn register(&self, name: &str, schema: &Value) -> Result<Registered, SchemaError> {
        validate_type_name(name)?;
        let text = schema_text(schema)?;
        let validator = validate::compile(schema).map_err(SchemaError::SchemaInvalid)?;
        for _ in 0..REGISTER_ATTEMPTS_MAX {
            let stored = self.store.get_record(TYPE_KIND, name).await?;
            let current = stored.as_deref().map(decode_type).transpose()?;
            let versions = self.versions(name).await?;
            if let Some(same) = versions.iter().find(|v| parse_schema(&v.schema).is_ok_and(|s| &s == schema)) {
                return Ok(Registered { version: same.version, created: false });
            }
            let compatibility = current.as_ref().map(|t| t.compatibility).unwrap_or_default();
            let reasons = incompatibilities(compatibility, &versions, schema)?;
            if !reasons.is_empty() {
                metrics::counter!("sluice_schema_registrations_total", "result" => "incompatible").increment(1);
                return Err(SchemaError::Incompatible { compatibility, reasons });
            }
            let latest = versions.last().map_or(0, |v| v.version);
            if latest >= SCHEMA_VERSIONS_MAX {
                return Err(SchemaError::LimitExceeded(format!(
                    "type {name:?} has {SCHEMA_VERSIONS_MAX} versions, the most a type may have"
                )));
            }
            if current.is_none() {
                self.check_type_count().await?;
            }
            let now = self.clock.now_ms();
            let version = latest + 1;
            let next = TypeRecord {
                format: RECORD_FORMAT,
                name: name.to_owned(),
                compatibility,
                latest: version,
                created_at_ms: current.as_ref().map_or(now, |t| t.created_at_ms),
                updated_at_ms: now,
            };
            let record = VersionRecord {
                format: RECORD_FORMAT,
                name: name.to_owned(),
                version,
                schema: text.clone(),
                created_at_ms: now,
            };
            let type_write = match stored {
                Some(expected) => {
                    Write::ReplaceRecord { kind: TYPE_KIND.into(), key: name.into(), expected, value: encode(&next) }
                }
                None => Write::InsertRecord { kind: TYPE_KIND.into(), key: name.into(), value: encode(&next) },
            };
            let version_write = Write::InsertRecord {
                kind: VERSION_KIND.into(),
                key: version_key(name, version),
                value: encode(&record),
            };
            match self.store.commit_all(vec![type_write, version_write]).await? {
                Ok(_) => {
                    self.validators.lock().expect("validators").insert((name.to_owned(), version), Arc::new(validator));
                    self.caches.latest_changed(name, version, now);
                    metrics::counter!("sluice_schema_registrations_total", "result" => "created").increment(1);
                    return Ok(Registered { version, created: true });
                }
                // Another registration (or a config change) got there first: look again, after
                // letting the others run.
                Err(Refused { conflict: Conflict::RecordChanged | Conflict::RecordExists, .. }) => {
                    tokio::task::yield_now().await;
                    continue;
                }
                Err(Refused { conflict, .. }) => return Err(SchemaError::Corrupt(conflict.to_string())),
            }
        }
        Err(SchemaError::Contended)
    }

    /// What registering `schema` would answer, without registering it: the reasons it is
    /// incompatible (empty when it is compatible), after checking that it is a valid schema.
    pub async fn check_compatibility(&self, name: &str, schema: &Value) -> Result<Vec<Reason>, SchemaError> {
        validate_type_name(name)?;
        schema_text(schema)?;
        validate::compile(schema).map_err(SchemaError::SchemaInvalid)?;
        let compatibility = self.type_record(name).await?.map(|t| t.compatibility).unwrap_or_default();
        incompatibilities(compatibility, &self.versions(name).await?, schema)
    }

    /// Sets a type's compatibility mode (creating the type, without versions, if it is new).
    pub async fn set_compatibility(&self, name: &str, compatibility: Compatibility) -> Result<TypeView, SchemaError> {
        validate_type_name(name)?;
        for _ in 0..REGISTER_ATTEMPTS_MAX {
            let stored = self.store.get_record(TYPE_KIND, name).await?;
            let now = self.clock.now_ms();
            let done = match &stored {
                Some(bytes) => {
                    let mut next = decode_type(bytes)?;
                    next.compatibility = compatibility;
                    next.updated_at_ms = now;
                    self.store.replace_record(TYPE_KIND, name, bytes.clone(), encode(&next)).await?
                }
                None => {
                    self.check_type_count().await?;
                    let next = TypeRecord {
                        format: RECORD_FORMAT,
                        name: name.to_owned(),
                        compatibility,
                        latest: 0,
                        created_at_ms: now,
                        updated_at_ms: now,
                    };
                    self.store.insert_record(TYPE_KIND, name, encode(&next)).await?
                }
            };
            if done {
                return self.get(name).await;
            }
        }
        Err(SchemaError::Contended)
    }

    /// A type and the numbers of its versions.
    pub async fn get(&self, name: &str) -> Result<TypeView, SchemaError> {
        validate_type_name(name)?;
        let record = self.type_record(name).await?.ok_or_else(|| SchemaError::TypeNotFound(name.to_owned()))?;
        let versions = self.versions(name).await?.into_iter().map(|v| v.version).collect();
        Ok(TypeView { record, versions })
    }

    /// One version (`None`: the latest).
    pub async fn version(&self, name: &str, version: Option<u32>) -> Result<VersionRecord, SchemaError> {
        validate_type_name(name)?;
        let version = match version {
            Some(v) => v,
            None => match self.type_record(name).await? {
                Some(t) if t.latest > 0 => t.latest,
                _ => return Err(SchemaError::TypeNotFound(name.to_owned())),
            },
        };
        let bytes = self
            .store
            .get_record(VERSION_KIND, &version_key(name, version))
            .await?
            .ok_or_else(|| SchemaError::VersionNotFound { name: name.to_owned(), version })?;
        decode(&bytes, |r: &VersionRecord| r.format).map_err(SchemaError::Corrupt)
    }

    /// Types in name order, after `after`, at most `limit`.
    pub async fn list(&self, after: Option<&str>, limit: usize) -> Result<Vec<TypeRecord>, SchemaError> {
        let records = self.store.list_records(TYPE_KIND, "", after, limit.min(RECORD_LIST_LIMIT_MAX)).await?;
        records.iter().map(|r| decode_type(&r.value)).collect()
    }

    async fn type_record(&self, name: &str) -> Result<Option<TypeRecord>, SchemaError> {
        self.store.get_record(TYPE_KIND, name).await?.as_deref().map(decode_type).transpose()
    }

    /// Every version of a type, oldest first (at most `SCHEMA_VERSIONS_MAX`, one list call).
    async fn versions(&self, name: &str) -> Result<Vec<VersionRecord>, SchemaError> {
        let records =
            self.store.list_records(VERSION_KIND, &versions_prefix(name), None, RECORD_LIST_LIMIT_MAX).await?;
        records.iter().map(|r| decode(&r.value, |v: &VersionRecord| v.format).map_err(SchemaError::Corrupt)).collect()
    }

    async fn check_type_count(&self) -> Result<(), SchemaError> {
        let mut after: Option<String> = None;
        let mut count = 0;
        loop {
            let page = self.store.list_records(TYPE_KIND, "", after.as_deref(), RECORD_LIST_LIMIT_MAX).await?;
            count += page.len();
            if count >= SCHEMA_TYPES_MAX {
                return Err(SchemaError::LimitExceeded(format!("the registry holds at most {SCHEMA_TYPES_MAX} types")));
            }
            match page.last() {
                Some(last) if page.len() == RECORD_LIST_LIMIT_MAX => after = Some(last.key.clone()),
                _ => return Ok(()),
            }
        }
    }

    /// The compiled schema of one version, from the cache or the store.
    async fn validator(&self, name: &str, version: u32) -> Result<Option<Arc<Validator>>, SchemaError> {
        let key = (name.to_owned(), version);
        if let Some(v) = self.validators.lock().expect("validators").get(&key) {
            return Ok(Some(v.clone()));
        }
        let record = match self.version(name, Some(version)).await {
            Ok(record) => record,
            Err(SchemaError::VersionNotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let schema = parse_schema(&record.schema)?;
        let compiled = Arc::new(validate::compile(&schema).map_err(SchemaError::Corrupt)?);
        let mut cache = self.validators.lock().expect("validators");
        if cache.len() >= check::VALIDATORS_CACHED_MAX {
            cache.clear();
        }
        cache.insert(key, compiled.clone());
        Ok(Some(compiled))
    }
}

/// Every reason `schema` breaks `compatibility` against the earlier `versions` (oldest first).
fn incompatibilities(
    compatibility: Compatibility,
    versions: &[VersionRecord],
    schema: &Value,
) -> Result<Vec<Reason>, SchemaError> {
    let against: &[VersionRecord] = if compatibility.transitive() {
        versions
    } else {
        versions.last().map(std::slice::from_ref).unwrap_or_default()
    };
    let mut reasons = Vec::new();
    for earlier in against.iter().rev() {
        let old = parse_schema(&earlier.schema)?;
        let mut add = |direction: &'static str, found: Vec<Incompatibility>| {
            reasons.extend(found.into_iter().map(|incompatibility| Reason {
                version: earlier.version,
                direction,
                incompatibility,
            }));
        };
        if compatibility.backward() {
            add("backward", compat::accepts_all(&old, schema));
        }
        if compatibility.forward() {
            add("forward", compat::accepts_all(schema, &old));
        }
    }
    Ok(reasons)
}

/// The schema as stored text, refused past `SCHEMA_BYTES_MAX`.
fn schema_text(schema: &Value) -> Result<String, SchemaError> {
    let text = schema.to_string();
    if text.len() > SCHEMA_BYTES_MAX {
        return Err(SchemaError::SchemaInvalid(format!(
            "the schema is {} bytes as JSON; at most {SCHEMA_BYTES_MAX}",
            text.len()
        )));
    }
    Ok(text)
}

fn parse_schema(text: &str) -> Result<Value, SchemaError> {
    serde_json::from_str(text).map_err(|e| SchemaError::Corrupt(format!("a stored schema is not JSON: {e}")))
}

fn decode_type(bytes: &[u8]) -> Result<TypeRecord, SchemaError> {
    decode(bytes, |t: &TypeRecord| t.format).map_err(SchemaError::Corrupt)
}

#[cfg(test)]
mod compat_tests;
#[cfg(test)]
mod tests;
