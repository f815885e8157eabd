//! Relays as stored: the configuration record `relay/<name>` (what the caller asked for, with
//! defaults filled in, and whether it is paused) and the state record `relay_state/<name>`
//! (the lease, the totals and the figures of the node that runs it). Both are JSON with a
//! format number, written through the store so that every node sees them.
//!
//! The state record is written only with a compare-and-swap against the bytes its writer read,
//! so two nodes can never both believe they hold the lease: the one whose swap fails has lost
//! it.

use serde::{Deserialize, Serialize};
use sluice_core::ValidationError;

use super::limits::*;
use super::url::SourceUrl;

pub const RELAY_KIND: &str = "relay";
pub const RELAY_STATE_KIND: &str = "relay_state";

/// The format of both records; a reader refuses others rather than guess.
pub const RECORD_FORMAT: u8 = 1;

/// The placeholder a target name with `route_by` must contain, replaced by the row's value of
/// that column (Debezium's name for it).
pub const ROUTE_PLACEHOLDER: &str = "${routedByValue}";

/// What happens to a row once its message is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AfterPublish {
    Delete,
    /// Set the `published_at` column to the database's time.
    Mark,
}

/// Where a relay publishes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    Topic(String),
    Queue(String),
    /// Refused until streams exist (issue 14); kept in the model so that adding them is a
    /// publisher, not a new configuration shape.
    Stream(String),
}

impl Target {
    pub fn name(&self) -> &str {
        match self {
            Target::Topic(n) | Target::Queue(n) | Target::Stream(n) => n,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Target::Topic(_) => "topic",
            Target::Queue(_) => "queue",
            Target::Stream(_) => "stream",
        }
    }
}

/// Which column holds what. The defaults are Debezium's outbox layout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Columns {
    pub id: String,
    pub aggregate_type: String,
    pub aggregate_id: String,
    #[serde(rename = "type")]
    pub event_type: String,
    pub payload: String,
    /// An optional JSON object of strings, copied into message attributes.
    pub headers: Option<String>,
    /// With `after_publish: mark`: set when the row is published; rows where it is set are done.
    pub published_at: String,
    /// The order rows are published in: a column that grows with every insert (a sequence,
    /// an auto-increment, or time-ordered ids such as UUIDv7). Default: `id`.
    pub position: Option<String>,
}

impl Default for Columns {
    fn default() -> Self {
        Columns {
            id: "id".into(),
            aggregate_type: "aggregatetype".into(),
            aggregate_id: "aggregateid".into(),
            event_type: "type".into(),
            payload: "payload".into(),
            headers: None,
            published_at: "published_at".into(),
            position: None,
        }
    }
}

impl Columns {
    pub fn position(&self) -> &str {
        self.position.as_deref().unwrap_or(&self.id)
    }
}

/// A relay as configured: the request with every default filled in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelaySpec {
    pub name: String,
    /// As given, password included: never show or log it but through `redact`.
    pub source: String,
    pub table: String,
    pub columns: Columns,
    pub target: Target,
    pub route_by: Option<String>,
    pub after_publish: AfterPublish,
    pub poll_ms: u64,
    pub batch_max: u32,
    /// Where rows that can never be published go, with the reason. Without one, such a row
    /// holds back its aggregate until it is fixed or removed by hand.
    pub dead_letter_queue: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayRecord {
    pub format: u8,
    pub spec: RelaySpec,
    pub paused: bool,
    pub created_at_ms: u64,
}

/// Who runs a relay, until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub owner: String,
    pub expires_at_ms: u64,
}

/// A relay's running state, shared by every node through the store.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RelayState {
    pub format: u8,
    pub lease: Option<Lease>,
    /// Rows published and then marked or deleted.
    pub published: u64,
    /// Rows sent to the dead-letter queue instead.
    pub dead_lettered: u64,
    /// Failed polls (source unreachable or refusing, store unavailable) and refused rows.
    pub errors: u64,
    /// Rows held back now: refused rows still being retried, rows waiting behind them, and
    /// rows that can go nowhere (no dead-letter queue). Worth an alert when above 0 for long.
    pub blocked_rows: u64,
    /// How long the oldest unpublished row the relay sees has waited since it first saw it.
    pub lag_ms: u64,
    pub rows_per_second: f64,
    pub last_error: Option<String>,
    pub last_error_at_ms: Option<u64>,
    pub updated_at_ms: u64,
}

impl RelayState {
    pub fn new() -> RelayState {
        RelayState { format: RECORD_FORMAT, ..RelayState::default() }
    }

    /// The lease holder, if its lease has not expired at `now_ms`.
    pub fn holder(&self, now_ms: u64) -> Option<&str> {
        self.lease.as_ref().filter(|l| l.expires_at_ms > now_ms).map(|l| l.owner.as_str())
    }
}

pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("relay records serialize")
}

pub fn decode_record(bytes: &[u8]) -> Result<RelayRecord, String> {
    let record: RelayRecord =
        serde_json::from_slice(bytes).map_err(|e| format!("a relay record does not parse: {e}"))?;
    if record.format != RECORD_FORMAT {
        return Err(format!("a relay record has format {}, this server reads {RECORD_FORMAT}", record.format));
    }
    Ok(record)
}

pub fn decode_state(bytes: &[u8]) -> Result<RelayState, String> {
    let state: RelayState = serde_json::from_slice(bytes).map_err(|e| format!("a relay state does not parse: {e}"))?;
    if state.format != RECORD_FORMAT {
        return Err(format!("a relay state has format {}, this server reads {RECORD_FORMAT}", state.format));
    }
    Ok(state)
}

/// A relay's name, the rules applying within its tenant (`acme~orders` is `orders`).
pub fn validate_name(name: &str) -> Result<(), ValidationError> {
    let name = sluice_core::name::without_tenant(name)?;
    let ok = !name.is_empty()
        && name.len() <= RELAY_NAME_LEN_MAX
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            "name",
            format!("a relay name is 1 to {RELAY_NAME_LEN_MAX} letters, digits, '-' and '_'"),
        ))
    }
}

/// An SQL identifier Sluice quotes itself: a letter or `_`, then letters, digits and `_`.
fn validate_identifier(field: &str, name: &str) -> Result<(), ValidationError> {
    let mut bytes = name.bytes();
    let ok = name.len() <= RELAY_IDENTIFIER_LEN_MAX
        && bytes.next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format!(
                "{name:?} is not a plain identifier: 1 to {RELAY_IDENTIFIER_LEN_MAX} letters, digits and '_', not starting with a digit"
            ),
        ))
    }
}

impl RelaySpec {
    /// Checks everything that does not need the source or the store.
    pub fn validate(&self) -> Result<(), ValidationError> {
        validate_name(&self.name)?;
        if self.source.len() > RELAY_SOURCE_LEN_MAX {
            return Err(ValidationError::new(
                "source",
                format!("a source URL is at most {RELAY_SOURCE_LEN_MAX} bytes"),
            ));
        }
        SourceUrl::parse(&self.source)?;
        let parts: Vec<&str> = self.table.split('.').collect();
        if parts.len() > 2 {
            return Err(ValidationError::new("table", "a table is `name` or `schema.name`"));
        }
        for part in parts {
            validate_identifier("table", part)?;
        }
        let c = &self.columns;
        let mut named = vec![
            ("columns.id", &c.id),
            ("columns.aggregate_type", &c.aggregate_type),
            ("columns.aggregate_id", &c.aggregate_id),
            ("columns.type", &c.event_type),
            ("columns.payload", &c.payload),
            ("columns.published_at", &c.published_at),
        ];
        if let Some(h) = &c.headers {
            named.push(("columns.headers", h));
        }
        if let Some(p) = &c.position {
            named.push(("columns.position", p));
        }
        for (field, column) in named {
            validate_identifier(field, column)?;
        }
        if let Some(route) = &self.route_by {
            validate_identifier("route_by", route)?;
        }
        self.validate_target()?;
        if !(RELAY_POLL_MS_MIN..=RELAY_POLL_MS_MAX).contains(&self.poll_ms) {
            return Err(ValidationError::new("poll_ms", format!("must be {RELAY_POLL_MS_MIN} to {RELAY_POLL_MS_MAX}")));
        }
        if self.batch_max == 0 || self.batch_max > RELAY_BATCH_MAX_MAX {
            return Err(ValidationError::new("batch_max", format!("must be 1 to {RELAY_BATCH_MAX_MAX}")));
        }
        if let Some(dlq) = &self.dead_letter_queue {
            sluice_core::name::validate_queue_name(dlq)
                .map_err(|e| ValidationError::new("dead_letter_queue", e.message))?;
        }
        Ok(())
    }

    fn validate_target(&self) -> Result<(), ValidationError> {
        let field = format!("target.{}", self.target.kind());
        let name = self.target.name();
        let placeholders = name.matches(ROUTE_PLACEHOLDER).count();
        match (&self.route_by, placeholders) {
            (None, 0) => {}
            (None, _) => {
                return Err(ValidationError::new(field, format!("{ROUTE_PLACEHOLDER} needs route_by")));
            }
            (Some(_), 1) => {}
            (Some(_), _) => {
                return Err(ValidationError::new(
                    field,
                    format!("with route_by, the target name contains {ROUTE_PLACEHOLDER} once (it may be just that)"),
                ));
            }
        }
        // The fixed part must be a valid name on its own (with the placeholder as one letter).
        let sample = name.replace(ROUTE_PLACEHOLDER, "x");
        let local = sluice_core::name::without_tenant(&sample).map_err(|e| ValidationError::new(&field, e.message))?;
        if local.is_empty() || local.len() > 256 {
            return Err(ValidationError::new(field, "a target name is 1 to 256 characters"));
        }
        if let Target::Queue(_) = self.target {
            sluice_core::name::validate_queue_name(&sample).map_err(|e| ValidationError::new(field, e.message))?;
        }
        Ok(())
    }
}
