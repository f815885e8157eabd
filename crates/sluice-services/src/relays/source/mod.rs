//! Outbox sources: reading a batch of unpublished rows in order, and marking or deleting the
//! rows whose messages are durable. One driver per database (`postgres.rs`, `mysql.rs`,
//! `sqlite.rs`) behind the closed enum [`Source`].
//!
//! No source keeps a high-water mark: every poll reads the rows that are still unpublished
//! (all rows with `after_publish: delete`, rows whose `published_at` is NULL with `mark`),
//! in position order. A row whose transaction commits after rows numbered above it were
//! published is therefore still unpublished at the next poll, and is read then: nothing is
//! skipped, whatever order transactions commit in. What each driver adds is a barrier that
//! keeps a poll from reading past a row that may still commit, so that rows of one aggregate
//! are published in position order too; each driver's module says how its database allows it.
//!
//! Every field is length-checked in the SQL before it is read (a longer value is cut by the
//! database and refused here), and a payload larger than `RELAY_PAYLOAD_BYTES_MAX` is not read
//! at all: only its length is.

mod mysql;
mod postgres;
mod sqlite;

use sluice_core::ValidationError;

use super::limits::RELAY_ROW_FIELD_BYTES_MAX;
use super::model::{AfterPublish, Columns};
use super::redact::scrub;
pub use super::url::SourceUrl;

/// A payload as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    Text(String),
    /// Not valid UTF-8 (a `bytea` or `BLOB` column).
    Bytes(Vec<u8>),
    /// Larger than `RELAY_PAYLOAD_BYTES_MAX`: not read, only measured.
    TooLarge(u64),
    Null,
}

/// One outbox row. Text fields are at most `RELAY_ROW_FIELD_BYTES_MAX` bytes plus one
/// character (the SQL cuts them there); `check` refuses longer ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub id: String,
    pub aggregate_type: Option<String>,
    pub aggregate_id: Option<String>,
    pub event_type: Option<String>,
    pub payload: Payload,
    /// The `headers` column as text (JSON), if mapped and not NULL; `Err` with its length when
    /// it is too long to read.
    pub headers: Option<Result<String, u64>>,
    /// The `route_by` column's value.
    pub route: Option<String>,
}

impl Row {
    pub fn payload_bytes(&self) -> u64 {
        match &self.payload {
            Payload::Text(t) => t.len() as u64,
            Payload::Bytes(b) => b.len() as u64,
            Payload::TooLarge(_) | Payload::Null => 0,
        }
    }

    /// Why this row cannot be published as it stands, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        let fields = [
            ("aggregate_type", &self.aggregate_type),
            ("aggregate_id", &self.aggregate_id),
            ("type", &self.event_type),
            ("route_by", &self.route),
        ];
        for (name, value) in fields {
            if let Some(v) = value
                && v.len() > RELAY_ROW_FIELD_BYTES_MAX
            {
                return Err(format!("the {name} column is longer than {RELAY_ROW_FIELD_BYTES_MAX} bytes"));
            }
        }
        match self.payload {
            Payload::TooLarge(n) => Err(format!(
                "the payload is {n} bytes, more than the {} a message may hold",
                super::limits::RELAY_PAYLOAD_BYTES_MAX
            )),
            Payload::Null => Err("the payload is NULL".to_string()),
            _ => Ok(()),
        }
    }
}

/// Why a poll or a mark failed. Both are retried after a pause; the text is shown in the
/// relay's state (scrubbed of the source's password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The database could not be reached or the connection broke.
    #[error("the source database is unreachable: {0}")]
    Unreachable(String),
    /// The database answered with an error (missing table or column, permissions, a row id
    /// too long to mark).
    #[error("the source database refused the relay's query: {0}")]
    Refused(String),
    /// The barrier held: an open transaction may still commit rows the poll must not read
    /// past (MySQL's lock wait ran out). Not a failure: the relay polls again.
    #[error("waiting for an open transaction in the source database: {0}")]
    Waiting(String),
}

/// What a relay reads, and how it finishes rows.
#[derive(Debug, Clone)]
pub struct SourceSpec {
    pub url: String,
    pub table: String,
    pub columns: Columns,
    pub route_by: Option<String>,
    pub after_publish: AfterPublish,
}

impl SourceSpec {
    fn scrub(&self, text: String) -> String {
        scrub(&text, &self.url)
    }
}

/// One relay's connection to its source. Each driver connects lazily and again after any
/// error, so a database that goes away and comes back needs nothing from the caller but
/// calling again.
pub enum Source {
    Postgres(postgres::PgSource),
    Mysql(mysql::MySource),
    Sqlite(sqlite::LiteSource),
}

impl Source {
    pub fn new(spec: SourceSpec) -> Result<Source, ValidationError> {
        Ok(match SourceUrl::parse(&spec.url)? {
            SourceUrl::Postgres(url) => Source::Postgres(postgres::PgSource::new(spec, url)),
            SourceUrl::Mysql(url) => Source::Mysql(mysql::MySource::new(spec, url)),
            SourceUrl::Sqlite(path) => Source::Sqlite(sqlite::LiteSource::new(spec, path)),
        })
    }

    /// Up to `max` unpublished rows in position order, stopping early once their payloads
    /// pass `bytes_max` (at least one row). Rows behind the driver's barrier wait for a later
    /// poll.
    pub async fn fetch(&mut self, max: u32, bytes_max: u64) -> Result<Vec<Row>, SourceError> {
        match self {
            Source::Postgres(s) => s.fetch(max, bytes_max).await,
            Source::Mysql(s) => s.fetch(max, bytes_max).await,
            Source::Sqlite(s) => s.fetch(max, bytes_max).await,
        }
    }

    /// Deletes or marks these rows (by id), as the relay is configured.
    pub async fn finish(&mut self, ids: &[String]) -> Result<(), SourceError> {
        if ids.is_empty() {
            return Ok(());
        }
        match self {
            Source::Postgres(s) => s.finish(ids).await,
            Source::Mysql(s) => s.finish(ids).await,
            Source::Sqlite(s) => s.finish(ids).await,
        }
    }

    /// Connects and reads no row, so that a relay whose table or columns do not exist is
    /// refused when it is created rather than failing forever afterwards.
    pub async fn probe(&mut self) -> Result<(), SourceError> {
        self.fetch(0, 0).await.map(|_| ())
    }
}

/// The columns every driver reads, in this order: id, aggregate type, aggregate id, type,
/// payload length, payload (NULL when too large), headers length, headers (NULL when too
/// long), route. Each driver writes the list in its dialect with `quote` for its identifiers,
/// `cut` for a text field and `measured` for a length and a value bounded by it.
pub(super) fn select_list(
    spec: &SourceSpec,
    nulls: Nulls,
    quote: impl Fn(&str) -> String,
    cut: impl Fn(&str) -> String,
    measured: impl Fn(&str, u64) -> (String, String),
) -> String {
    let c = &spec.columns;
    let (payload_len, payload) = measured(&quote(&c.payload), super::limits::RELAY_PAYLOAD_BYTES_MAX);
    let (headers_len, headers) = match &c.headers {
        Some(h) => measured(&quote(h), super::limits::RELAY_HEADERS_BYTES_MAX as u64),
        None => (nulls.number.to_string(), nulls.bytes.to_string()),
    };
    let route = spec.route_by.as_deref().map_or(nulls.text.to_string(), |r| cut(&quote(r)));
    [
        cut(&quote(&c.id)),
        cut(&quote(&c.aggregate_type)),
        cut(&quote(&c.aggregate_id)),
        cut(&quote(&c.event_type)),
        payload_len,
        payload,
        headers_len,
        headers,
        route,
    ]
    .join(", ")
}

/// A dialect's typed NULLs, for the columns a relay does not map (PostgreSQL types even those).
pub(super) struct Nulls {
    pub number: &'static str,
    pub bytes: &'static str,
    pub text: &'static str,
}

/// The columns a relay needs in the table, for the check when it connects.
pub(super) fn needed_columns(spec: &SourceSpec) -> Vec<&str> {
    let c = &spec.columns;
    let mut needed = vec![c.id.as_str(), &c.aggregate_type, &c.aggregate_id, &c.event_type, &c.payload, c.position()];
    needed.extend(c.headers.as_deref());
    needed.extend(spec.route_by.as_deref());
    if spec.after_publish == AfterPublish::Mark {
        needed.push(&c.published_at);
    }
    needed
}

/// The missing column, if one is.
pub(super) fn missing_column(spec: &SourceSpec, present: &[String]) -> Result<(), SourceError> {
    match needed_columns(spec).into_iter().find(|n| !present.iter().any(|p| p == n)) {
        Some(missing) => Err(SourceError::Refused(format!("the table {} has no column {missing}", spec.table))),
        None => Ok(()),
    }
}

/// `a.b` quoted part by part with `quote`.
pub(super) fn quote_table(table: &str, quote: impl Fn(&str) -> String) -> String {
    table.split('.').map(quote).collect::<Vec<_>>().join(".")
}

/// One more character than a field may hold, so that an over-long value is seen as such.
pub(super) const FIELD_CUT: usize = RELAY_ROW_FIELD_BYTES_MAX + 1;

/// Turns a payload read as bytes into a [`Payload`].
pub(super) fn payload_from_bytes(length: Option<u64>, bytes: Option<Vec<u8>>) -> Payload {
    match (length, bytes) {
        (None, _) => Payload::Null,
        (Some(_), Some(b)) => match String::from_utf8(b) {
            Ok(text) => Payload::Text(text),
            Err(e) => Payload::Bytes(e.into_bytes()),
        },
        (Some(n), None) => Payload::TooLarge(n),
    }
}

/// Turns the headers column's length and text into a row's `headers`.
pub(super) fn headers_from(length: Option<u64>, text: Option<String>) -> Option<Result<String, u64>> {
    match (length, text) {
        (None, _) => None,
        (Some(_), Some(t)) => Some(Ok(t)),
        (Some(n), None) => Some(Err(n)),
    }
}
