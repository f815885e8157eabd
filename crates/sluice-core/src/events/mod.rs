//! The event store's rules: optimistic concurrency (`expected_version`), what an append must
//! hold, when a re-sent append is the same append (event-id dedup), soft and hard deletion, and
//! forward-only subscription checkpoints.
//!
//! Both backends apply these functions to the state they hold (the embedded store on its writer
//! thread, PostgreSQL under the stream row's lock), so a rule lives here once. Versions count
//! from 0 within a stream and are never reused, not even after a soft delete: a stream
//! appended to again after one continues its numbering and hides what came before, so that
//! `(stream, version)` names one event forever. Positions (the global `$all` order) are the
//! backends' business: they give them in commit order, gapless.

pub mod limits;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use crate::validation::ValidationError;
use limits::*;

/// The condition an append puts on its stream's last version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExpectedVersion {
    /// Append whatever the stream holds (creating it if needed).
    Any,
    /// The stream must not exist (never written, or soft-deleted).
    NoStream,
    /// The stream must exist and hold at least one visible event.
    Exists,
    /// The stream's last version must be this one.
    Exact(u64),
}

impl ExpectedVersion {
    /// Reads the wire form: `"any"`, `"no_stream"`, `"exists"` or a version number.
    pub fn parse(text: &str) -> Result<ExpectedVersion, ValidationError> {
        match text {
            "any" => Ok(ExpectedVersion::Any),
            "no_stream" => Ok(ExpectedVersion::NoStream),
            "exists" => Ok(ExpectedVersion::Exists),
            n => n.parse::<u64>().map(ExpectedVersion::Exact).map_err(|_| {
                ValidationError::new("expected_version", "is \"any\", \"no_stream\", \"exists\" or a version number")
            }),
        }
    }
}

impl std::fmt::Display for ExpectedVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExpectedVersion::Any => f.write_str("any"),
            ExpectedVersion::NoStream => f.write_str("no_stream"),
            ExpectedVersion::Exists => f.write_str("exists"),
            ExpectedVersion::Exact(v) => write!(f, "{v}"),
        }
    }
}

/// An event as an application appends it. `data` and `metadata` are JSON text.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NewEvent {
    pub id: String,
    pub r#type: String,
    pub data: String,
    pub metadata: Option<String>,
    pub correlation_id: Option<String>,
    pub causation_id: Option<String>,
}

impl NewEvent {
    /// The bytes this event counts against `EVENT_BYTES_MAX` and `APPEND_BYTES_MAX`.
    pub fn size_bytes(&self) -> usize {
        self.id.len()
            + self.r#type.len()
            + self.data.len()
            + self.metadata.as_ref().map_or(0, String::len)
            + self.correlation_id.as_ref().map_or(0, String::len)
            + self.causation_id.as_ref().map_or(0, String::len)
    }
}

/// Whether a stream takes appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StreamStatus {
    Live,
    /// Soft-deleted: reads find no stream; `no_stream` or `any` appends start it again, at the
    /// next version.
    Deleted,
    /// Hard-deleted: gone for good; every append is refused.
    Tombstoned,
}

/// What the rules need to know of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamState {
    /// The version the next event gets (events ever appended, hidden ones included).
    pub next_version: u64,
    /// Versions below this one are hidden by a soft delete.
    pub visible_from: u64,
    pub status: StreamStatus,
}

impl StreamState {
    /// A stream never written.
    pub const NONE: StreamState = StreamState { next_version: 0, visible_from: 0, status: StreamStatus::Live };

    /// The last visible version; `None` when the stream does not exist for readers and writers
    /// (never written, or deleted and not written since).
    pub fn last_version(&self) -> Option<u64> {
        (self.status == StreamStatus::Live && self.next_version > self.visible_from).then(|| self.next_version - 1)
    }

    /// The state after appending `count` events.
    pub fn appended(&self, count: u64) -> StreamState {
        StreamState {
            next_version: self.next_version + count,
            visible_from: self.visible_from,
            status: StreamStatus::Live,
        }
    }

    /// The state after a delete; `NotFound` when there is nothing to delete.
    pub fn deleted(&self, hard: bool) -> Result<StreamState, AppendError> {
        match self.status {
            StreamStatus::Tombstoned => Err(AppendError::StreamTombstoned),
            // A hard delete of a stream already soft-deleted makes it permanent.
            StreamStatus::Deleted if hard => Ok(StreamState { status: StreamStatus::Tombstoned, ..*self }),
            _ if self.last_version().is_none() => Err(AppendError::StreamNotFound),
            _ => Ok(StreamState {
                next_version: self.next_version,
                visible_from: self.next_version,
                status: if hard { StreamStatus::Tombstoned } else { StreamStatus::Deleted },
            }),
        }
    }
}

/// Where the first event id of an append already sits among the stream's visible events, and
/// the ids stored from there on (as many as the append holds, fewer at the stream's end): what
/// a backend found when it looked the id up, for [`decide_append`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prior<'a> {
    pub first_version: u64,
    pub ids: &'a [String],
}

/// What an append does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Append the events at `first_version` and on.
    Append { first_version: u64 },
    /// The same events were appended there before: answer that, append nothing.
    Duplicate { first_version: u64 },
}

/// Why an append (or a delete) was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppendError {
    #[error("expected version {expected}, but the stream is at {}; nothing was appended", display_version(.actual))]
    WrongExpectedVersion { expected: ExpectedVersion, actual: Option<u64> },
    #[error(
        "event id {id:?} is already at version {version} of this stream, but the append is not the one that put it there"
    )]
    EventIdConflict { id: String, version: u64 },
    #[error("the stream was hard-deleted and takes no more events")]
    StreamTombstoned,
    #[error("no such event stream")]
    StreamNotFound,
}

fn display_version(v: &Option<u64>) -> String {
    v.map_or_else(|| "no_stream (it holds no events)".to_owned(), |v| format!("version {v}"))
}

/// Decides an append of events with `ids` to a stream in `state` under `expected`, given where
/// (if anywhere among the visible events) the first id already is.
///
/// The dedup rule: an append whose ids are exactly those stored from a version on, and whose
/// `expected_version` would have put them at that version, is a retry of that append: it
/// answers the original versions and appends nothing, whatever was appended since. Any other
/// append naming a stored id is refused (`EventIdConflict`), so that an id names one event of
/// a stream.
pub fn decide_append(
    state: &StreamState,
    expected: ExpectedVersion,
    ids: &[&str],
    prior: Option<Prior<'_>>,
) -> Result<Decision, AppendError> {
    if state.status == StreamStatus::Tombstoned {
        return Err(AppendError::StreamTombstoned);
    }
    if let Some(p) = prior {
        let same = p.ids.len() >= ids.len() && p.ids.iter().zip(ids).all(|(a, b)| a == b);
        let placed = match expected {
            ExpectedVersion::Any | ExpectedVersion::Exists => true,
            ExpectedVersion::NoStream => p.first_version == state.visible_from,
            ExpectedVersion::Exact(v) => v.checked_add(1) == Some(p.first_version),
        };
        if same && placed && p.first_version >= state.visible_from {
            return Ok(Decision::Duplicate { first_version: p.first_version });
        }
        return Err(AppendError::EventIdConflict { id: ids[0].to_owned(), version: p.first_version });
    }
    let actual = state.last_version();
    let ok = match expected {
        ExpectedVersion::Any => true,
        ExpectedVersion::NoStream => actual.is_none(),
        ExpectedVersion::Exists => actual.is_some(),
        ExpectedVersion::Exact(v) => actual == Some(v),
    };
    if !ok {
        return Err(AppendError::WrongExpectedVersion { expected, actual });
    }
    Ok(Decision::Append { first_version: state.next_version })
}

/// Checks an append's events before anything is stored: count, sizes, ids, type, links, and
/// that `data`/`metadata` are JSON. Event ids must be distinct within the append.
pub fn validate_events(events: &[NewEvent]) -> Result<(), ValidationError> {
    if events.is_empty() || events.len() > EVENTS_PER_APPEND_MAX {
        return Err(ValidationError::new("events", format!("an append holds 1 to {EVENTS_PER_APPEND_MAX} events")));
    }
    let mut total = 0usize;
    let mut seen = std::collections::HashSet::with_capacity(events.len());
    for (i, e) in events.iter().enumerate() {
        let at = |field: &str| format!("events[{i}].{field}");
        let size = e.size_bytes();
        if size > EVENT_BYTES_MAX {
            return Err(ValidationError::new(
                format!("events[{i}]"),
                format!("an event is at most {EVENT_BYTES_MAX} bytes (this one is {size})"),
            ));
        }
        total += size;
        visible_ascii(&at("id"), &e.id, EVENT_ID_LEN_MAX)?;
        visible_ascii(&at("type"), &e.r#type, EVENT_TYPE_LEN_MAX)?;
        if let Some(c) = &e.correlation_id {
            visible_ascii(&at("correlation_id"), c, EVENT_LINK_ID_LEN_MAX)?;
        }
        if let Some(c) = &e.causation_id {
            visible_ascii(&at("causation_id"), c, EVENT_LINK_ID_LEN_MAX)?;
        }
        if serde_json::from_str::<serde::de::IgnoredAny>(&e.data).is_err() {
            return Err(ValidationError::new(at("data"), "must be JSON"));
        }
        if let Some(m) = &e.metadata
            && serde_json::from_str::<serde::de::IgnoredAny>(m).is_err()
        {
            return Err(ValidationError::new(at("metadata"), "must be JSON"));
        }
        if !seen.insert(e.id.as_str()) {
            return Err(ValidationError::new(at("id"), "event ids must be distinct within an append"));
        }
    }
    if total > APPEND_BYTES_MAX {
        return Err(ValidationError::new("events", format!("an append is at most {APPEND_BYTES_MAX} bytes")));
    }
    Ok(())
}

fn visible_ascii(field: &str, value: &str, max: usize) -> Result<(), ValidationError> {
    if value.is_empty() || value.len() > max || !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ValidationError::new(field, format!("is 1 to {max} visible ASCII characters")));
    }
    Ok(())
}

/// Checks a stream id: 1 to `EVENT_STREAM_ID_LEN_MAX` of ASCII letters, digits and `-_.:@`,
/// not starting with `$` (names like `$all` are the server's).
pub fn validate_stream_id(id: &str) -> Result<(), ValidationError> {
    let id = crate::name::without_tenant(id).map_err(|e| ValidationError::new("stream_id", e.message))?;
    let ok = !id.is_empty()
        && id.len() <= EVENT_STREAM_ID_LEN_MAX
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'@'));
    if !ok {
        return Err(ValidationError::new(
            "stream_id",
            format!("a stream id is 1 to {EVENT_STREAM_ID_LEN_MAX} ASCII letters, digits, '-', '_', '.', ':' and '@'"),
        ));
    }
    Ok(())
}

/// Checks a subscription name: 1 to `EVENT_SUBSCRIPTION_NAME_LEN_MAX` ASCII letters, digits,
/// `-`, `_` and `.`.
pub fn validate_subscription_name(name: &str) -> Result<(), ValidationError> {
    let name = crate::name::without_tenant(name)?;
    let ok = !name.is_empty()
        && name.len() <= EVENT_SUBSCRIPTION_NAME_LEN_MAX
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !ok {
        return Err(ValidationError::new(
            "name",
            format!(
                "a subscription name is 1 to {EVENT_SUBSCRIPTION_NAME_LEN_MAX} ASCII letters, digits, '-', '_' and '.'"
            ),
        ));
    }
    Ok(())
}

/// A filter over `$all`: event types (any of them) and a stream id prefix; empty passes all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventFilter {
    pub types: Vec<String>,
    pub stream_prefix: Option<String>,
    #[serde(default)]
    pub correlation_id: Option<String>,
    /// Only the default tenant's streams (ids without the tenant separator): what the default
    /// tenant reads, so that no tenant's events reach it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untenanted: bool,
}

impl EventFilter {
    pub fn validate(&self) -> Result<(), ValidationError> {
        if self.types.len() > EVENT_FILTER_TYPES_MAX {
            return Err(ValidationError::new("types", format!("at most {EVENT_FILTER_TYPES_MAX} types")));
        }
        for t in &self.types {
            visible_ascii("types", t, EVENT_TYPE_LEN_MAX)?;
        }
        if let Some(p) = &self.stream_prefix
            && p.len() > EVENT_STREAM_ID_LEN_MAX
        {
            return Err(ValidationError::new("stream_prefix", format!("at most {EVENT_STREAM_ID_LEN_MAX} bytes")));
        }
        if let Some(c) = &self.correlation_id {
            visible_ascii("correlation_id", c, EVENT_LINK_ID_LEN_MAX)?;
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.is_empty_within_tenant() && !self.untenanted
    }

    /// Whether the filter leaves out nothing but other tenants' streams (`untenanted`).
    pub fn is_empty_within_tenant(&self) -> bool {
        self.types.is_empty()
            && self.stream_prefix.as_deref().is_none_or(str::is_empty)
            && self.correlation_id.is_none()
    }

    pub fn matches(&self, stream_id: &str, r#type: &str, correlation_id: Option<&str>) -> bool {
        (self.types.is_empty() || self.types.iter().any(|t| t == r#type))
            && self.stream_prefix.as_deref().is_none_or(|p| stream_id.starts_with(p))
            && self.correlation_id.as_deref().is_none_or(|c| correlation_id == Some(c))
            && !(self.untenanted && stream_id.contains(crate::name::TENANT_SEPARATOR))
    }
}

/// Why a checkpoint was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    #[error("the checkpoint is at position {current}; it only moves forward (asked for {asked})")]
    Regression { current: u64, asked: u64 },
    #[error("position {asked} is past the end of the log ({head} events)")]
    PastEnd { asked: u64, head: u64 },
}

/// A subscription's checkpoint (the position of the last event handled) moving to `asked`,
/// with `head` events in the log: `Ok(true)` when it moves, `Ok(false)` when it is already
/// there (a retried checkpoint), an error when it would go back or past the log's end.
pub fn advance_checkpoint(current: Option<u64>, asked: u64, head: u64) -> Result<bool, CheckpointError> {
    if asked >= head {
        return Err(CheckpointError::PastEnd { asked, head });
    }
    match current {
        Some(c) if asked < c => Err(CheckpointError::Regression { current: c, asked }),
        Some(c) if asked == c => Ok(false),
        _ => Ok(true),
    }
}
