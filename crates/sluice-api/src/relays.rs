//! Wire types of outbox relays (`/v1/relays...`).
//!
//! A relay polls an outbox table in the application's own database and publishes each row to
//! a topic or a queue, at least once and in order per aggregate, then deletes or marks the
//! row. Source URLs are shown with their passwords masked.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Which column holds what; every field defaults to Debezium's outbox layout.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RelayColumns {
    /// The row id, which becomes the message's `outbox_id` (and FIFO dedup id). Default `id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Default `aggregatetype`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate_type: Option<String>,
    /// The aggregate (order is kept per aggregate; the FIFO group). Default `aggregateid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate_id: Option<String>,
    /// The event type (the message's `type`). Default `type`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// The message body. Default `payload`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// A JSON object of strings copied into message attributes. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<String>,
    /// With `after_publish: mark`, the timestamp column set when a row is published. Default
    /// `published_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_at: Option<String>,
    /// The column rows are published in the order of; it must grow with every insert (a
    /// sequence, an auto-increment, time-ordered ids). Default: the id column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<String>,
}

/// Where a relay publishes: exactly one of `topic`, `queue` (`stream` is refused until streams
/// exist). With `route_by` the name contains `${routedByValue}`, replaced by the row's value of
/// that column.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RelayTarget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
}

/// What happens to a row once its message is durable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AfterPublish {
    #[default]
    Delete,
    /// Set the `published_at` column; rows where it is set are done.
    Mark,
}

/// `POST /v1/relays`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRelayRequest {
    /// 1 to 80 letters, digits, `-` and `_`.
    pub name: String,
    /// `postgres://USER:PASSWORD@HOST:PORT/DB`, `mysql://…` (MariaDB too) or `sqlite:///PATH`.
    pub source: String,
    /// The outbox table, `name` or `schema.name`.
    pub table: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columns: Option<RelayColumns>,
    pub target: RelayTarget,
    /// A column whose value names the target (e.g. `aggregatetype`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_by: Option<String>,
    /// `delete` (default) or `mark`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_publish: Option<AfterPublish>,
    /// Pause after a poll that found less than a full batch, 10 to 60000 (default 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_ms: Option<u64>,
    /// Most rows per poll, 1 to 1000 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_max: Option<u32>,
    /// A queue for rows that can never be published (with the reason in the `relay_error`
    /// attribute). Without one such a row holds back its aggregate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_queue: Option<String>,
}

/// A relay's running figures, from the node that holds its lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RelayStatus {
    /// `active` (a node relays it), `starting` (no node holds it yet) or `paused`.
    pub state: String,
    /// The node relaying it now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at_ms: Option<u64>,
    /// How long the oldest unpublished row has waited since the relay first saw it.
    pub lag_ms: u64,
    /// Rows published (and then deleted or marked), by every node, since the relay was created.
    pub published: u64,
    /// Rows sent to the dead-letter queue.
    pub dead_lettered: u64,
    /// Failed polls and refused rows.
    pub errors: u64,
    /// Rows held back now behind a row that cannot be published; worth an alert above 0.
    pub blocked_rows: u64,
    pub rows_per_second: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error_at_ms: Option<u64>,
}

/// A relay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Relay {
    pub name: String,
    /// The source URL with its password masked (`***`).
    pub source: String,
    /// `postgres`, `mysql` or `sqlite`.
    pub source_kind: String,
    pub table: String,
    /// Every column, defaults filled in.
    pub columns: RelayColumns,
    pub target: RelayTarget,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_by: Option<String>,
    pub after_publish: AfterPublish,
    pub poll_ms: u64,
    pub batch_max: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_queue: Option<String>,
    pub paused: bool,
    pub status: RelayStatus,
    pub created_at: String,
    pub created_at_ms: u64,
}

/// `GET /v1/relays`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RelayList {
    pub relays: Vec<Relay>,
    /// Pass as `next_token` to get the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
}
