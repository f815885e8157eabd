//! Wire types of the event store (`/v1/events...`): per-aggregate streams appended with an
//! expected version, the global order `$all` by position, durable catch-up subscriptions and
//! snapshots. Versions (per stream) and positions (global) count from 0; `from_version` and
//! `from_position` are inclusive; a subscription's checkpoint is the position of the last event
//! handled. List answers use `events`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `expected_version`: `"any"`, `"no_stream"`, `"exists"`, or the stream's last version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ExpectedVersionWire {
    Version(u64),
    /// `"any"`, `"no_stream"` or `"exists"`.
    Named(ExpectedName),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExpectedName {
    Any,
    NoStream,
    Exists,
}

impl Default for ExpectedVersionWire {
    fn default() -> Self {
        ExpectedVersionWire::Named(ExpectedName::Any)
    }
}

/// One event to append. `data` and `metadata` are any JSON values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewEventWire {
    /// Up to 128 visible ASCII characters (a UUID is usual); the server gives a UUID when
    /// omitted, but only a client-given id makes a re-sent append safe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Up to 256 visible ASCII characters, e.g. `OrderPlaced`.
    pub r#type: String,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causation_id: Option<String>,
}

/// `POST /v1/events/streams/{stream_id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendEventsRequest {
    /// Default `"any"`.
    #[serde(default)]
    pub expected_version: ExpectedVersionWire,
    /// 1 to 1,000 events, at most 1 MiB each and 8 MiB together.
    pub events: Vec<NewEventWire>,
}

/// The answer to an append (also to a re-sent one, which appended nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AppendEventsResponse {
    pub first_version: u64,
    pub last_version: u64,
    pub first_position: u64,
    pub last_position: u64,
}

/// An event as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventWire {
    pub stream_id: String,
    pub version: u64,
    pub position: u64,
    pub id: String,
    pub r#type: String,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causation_id: Option<String>,
    /// RFC 3339, and milliseconds since the epoch.
    pub time: String,
    pub time_ms: u64,
}

/// `GET /v1/events/streams/{stream_id}`: the events, and the stream's visible range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StreamEventsResponse {
    pub stream_id: String,
    pub events: Vec<EventWire>,
    pub first_version: u64,
    pub last_version: u64,
}

/// `GET /v1/events/all` and a subscription's fetch: the events, where to go on from (past
/// every event looked at, matching or not), and the log's head (the next position to be given).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AllEventsResponse {
    pub events: Vec<EventWire>,
    pub next_position: u64,
    pub head_position: u64,
}

/// Where a new subscription starts: `"start"`, `"end"`, or `{"position": N}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum SubscriptionFrom {
    Named(SubscriptionFromName),
    Position { position: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SubscriptionFromName {
    Start,
    End,
}

impl Default for SubscriptionFrom {
    fn default() -> Self {
        SubscriptionFrom::Named(SubscriptionFromName::Start)
    }
}

/// `POST /v1/events/subscriptions` (same settings again: 200; different: 409).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateEventSubscriptionRequest {
    /// 1 to 80 ASCII letters, digits, `-`, `_` and `.`.
    pub name: String,
    #[serde(default)]
    pub from: SubscriptionFrom,
    /// Only events of these types (at most 32); all when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_prefix: Option<String>,
}

/// A subscription: its settings, its checkpoint (the last event handled; none yet: null), and
/// where its next fetch starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EventSubscription {
    pub name: String,
    pub start_position: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_prefix: Option<String>,
    pub checkpoint: Option<u64>,
    pub next_position: u64,
    pub head_position: u64,
    pub created_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EventSubscriptionList {
    pub subscriptions: Vec<EventSubscription>,
}

/// `POST /v1/events/subscriptions/{name}/fetch`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FetchEventsRequest {
    /// 1 to 1,000 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
    /// Long poll at the end, at most 20,000 (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

/// `POST /v1/events/subscriptions/{name}/checkpoint`: the position of the last event handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointRequest {
    pub position: u64,
}

/// `PUT /v1/events/streams/{stream_id}/snapshot`: the state folded up to `version`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutSnapshotRequest {
    pub version: u64,
    /// At most 512 KiB as JSON text.
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SnapshotWire {
    pub version: u64,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    pub taken_at: String,
}

/// `GET /v1/events/streams/{stream_id}/snapshot`: the latest snapshot and the events after it
/// (up to `max`; `last_version` says whether there are more).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SnapshotResponse {
    pub stream_id: String,
    pub snapshot: SnapshotWire,
    pub events: Vec<EventWire>,
    pub last_version: u64,
}
