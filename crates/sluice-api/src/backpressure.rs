//! Wire types of backpressure: a queue's depth limits and overflow policy, what its limits
//! refused or moved, and the depth a send answer reports so that producers can slow down.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What a send into a full queue does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Overflow {
    /// Refuse the new message: 429 `queue_full` with `Retry-After` (default).
    #[default]
    Reject,
    /// Move the oldest messages not in flight to the dead-letter queue to make room.
    DropHead,
    /// Send the new message to the dead-letter queue instead.
    RejectToDlq,
}

/// What a queue's depth limits did since the queue was created (PostgreSQL: across every node)
/// or since the server started (embedded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Refusals {
    /// Sends refused because the queue was full (`queue_full`).
    pub queue_full: u64,
    /// Old messages `drop_head` moved to the dead-letter queue.
    pub drop_head: u64,
    /// New messages `reject_to_dlq` sent to the dead-letter queue.
    pub rejected_to_dlq: u64,
    /// Expired messages `expired_to_dlq` moved to the dead-letter queue.
    pub expired_to_dlq: u64,
    /// Sends refused by the queue's `rate_limit` (`rate_limited`).
    #[serde(default)]
    pub rate_limited: u64,
}

/// A token bucket: `per_second` tokens a second, up to `burst`; every message sent takes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    pub per_second: u64,
    pub burst: u64,
}

/// A queue's depth and its limits, in a send answer (also the headers `Sluice-Queue-Depth`
/// and `Sluice-Queue-Depth-Max`). Present only for a queue with a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct QueueDepth {
    /// Messages in the queue after the send, whatever their state.
    pub messages: u64,
    /// Their bytes, as `message_bytes_max` counts them.
    pub bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth_messages: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth_bytes: Option<u64>,
}
