//! Wire types of the short history behind the dashboard (`/v1/stats`). Rates are per second
//! over one sample interval, counted on the node that answers.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The store's health as the node that answers sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StoreHealth {
    /// `ok`, or the code every call gets now: `store_poisoned`, `insufficient_storage`,
    /// `store_unavailable`, `shutting_down`.
    pub status: String,
    /// Durable write batches since start, and the records in them (group commit).
    pub batches_committed: u64,
    pub records_committed: u64,
}

/// The server at one sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TotalsPoint {
    pub at_ms: u64,
    pub sent_per_second: f64,
    pub received_per_second: f64,
    pub acked_per_second: f64,
    pub dead_lettered_per_second: f64,
    pub expired_per_second: f64,
    /// Messages in every sampled queue.
    pub depth: u64,
}

/// `GET /v1/stats`: the overview.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Stats {
    pub now: String,
    pub now_ms: u64,
    /// The sampling interval and the most samples kept per series.
    pub sample_ms: u64,
    pub history_samples_max: u64,
    pub queues: u64,
    pub depth: u64,
    pub firing_alerts: u64,
    pub store: StoreHealth,
    /// Running totals since this node started.
    pub messages_sent: u64,
    pub messages_received: u64,
    pub messages_acked: u64,
    pub messages_dead_lettered: u64,
    /// Oldest first; the last one is the latest sample.
    pub series: Vec<TotalsPoint>,
}

/// One queue at one sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QueuePoint {
    pub at_ms: u64,
    pub visible: u64,
    pub in_flight: u64,
    pub delayed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_age_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dlq_depth: Option<u64>,
    pub sent_per_second: f64,
    pub received_per_second: f64,
    pub acked_per_second: f64,
}

/// A queue's latest sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QueueRates {
    pub name: String,
    #[serde(flatten)]
    pub latest: QueuePoint,
}

/// `GET /v1/stats/queues`: every sampled queue's latest sample, by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QueueRatesList {
    pub queues: Vec<QueueRates>,
}

/// `GET /v1/stats/queues/{name}`: one queue's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QueueHistory {
    pub name: String,
    pub sample_ms: u64,
    /// Oldest first; empty until the queue's first sample (or past the sampled-queue limit).
    pub series: Vec<QueuePoint>,
}
