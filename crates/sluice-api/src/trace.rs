//! Wire types of the causal trace (`GET /v1/trace/{correlation_id}`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One thing that carried the correlation id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TraceEntry {
    /// `message` (sent to a queue), `publish` (to a topic), `push` (a topic's copy delivered to
    /// an HTTP/S endpoint), `record` (appended to a stream), `event` (appended to the event
    /// store), `job` (enqueued), `saga` (an instance started) or `saga_step` (one attempt of a
    /// step's action or compensation).
    pub kind: String,
    /// Its own id: a message, event, job or saga instance id; `partition/offset` for a stream
    /// record; `<instance>/<step>/<action|compensation>/<attempt>` for a saga step;
    /// `<message id>/<subscription id>` for a push.
    pub id: String,
    /// The id of what caused it, when the writer named one (`causation_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causation_id: Option<String>,
    /// Where it went: `queue:NAME`, `topic:NAME`, `push:URL`, `stream:NAME`, `events:STREAM`,
    /// `job:QUEUE` or `saga:NAME`.
    pub target: String,
    /// The message, record, event or job type; a saga step's name, kind and attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// When it was recorded (RFC 3339, and in ms since the epoch).
    pub at: String,
    pub at_ms: u64,
    /// How many causes above it are in this trace: 0 for an entry whose cause is not listed.
    pub depth: u32,
}

/// `GET /v1/trace/{correlation_id}`: every entry in causal order (each after the entry it
/// names as its cause, otherwise oldest first). An id nothing carried has no entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TraceResponse {
    pub correlation_id: String,
    pub entries: Vec<TraceEntry>,
    /// The correlation has more than 10,000 entries: the oldest 10,000 are listed.
    pub truncated: bool,
}
