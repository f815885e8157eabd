//! Topics: pub/sub fan-out over the store, shared by the native API (`/v1/topics`) and the SNS
//! API (the server's `aws::sns`).
//!
//! Topics and subscriptions are store records (`model.rs`, managed by `topic_records.rs` and
//! `subscriptions.rs`), so they are as durable as queues and every node of a PostgreSQL
//! deployment shares them. A publish (`publish.rs`) matches the
//! message against every subscription of the topic and sends a copy into each matching
//! subscription's queue: the subscribed queue for `sqs`, the subscription's delivery queue for
//! `http`/`https` (`push.rs`, drained by the push worker). It is acknowledged only once every
//! copy is durable.
//!
//! Each node keeps every topic it published to in memory (`cache.rs`) with its subscriptions
//! and their compiled filter policies, for at most `SUBSCRIPTION_CACHE_MS`; a change made
//! through this node drops the topic from its cache at once, and other nodes read it again
//! within that time.
//!
//! The rules for names and attributes (`attributes.rs`) are SNS's, by SNS's attribute names;
//! the native API translates its fields into them. Errors (`error.rs`) carry both APIs' words.

mod attributes;
mod cache;
mod checks;
mod envelope;
mod error;
pub mod limits;
mod model;
mod publish;
pub mod push;
mod subscriptions;
mod topic_records;
pub mod worker;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use sluice_clock::Clock;
use sluice_store::Store;

use crate::schemas::Schemas;
use crate::trace::Traces;

pub use attributes::fifo_topic_value;
pub use checks::Publication;
pub use envelope::SIGNING_CERT_FILE;
pub use error::{Invalid, PublishError, TAG_LIMIT_EXCEEDED, TopicError};
pub use model::{
    ArnError, Arns, Protocol, RATE_LIMIT, SCHEMA_VALIDATION, SUBSCRIPTION_KIND, SubscriptionRecord, TopicRecord,
    decode_subscription,
};
pub use publish::{PlannedPublish, Published};

use cache::{Cached, Live, Snapshot};

/// Where a subscription delivers, as a caller names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A queue of this server, by name.
    Queue(String),
    /// An `http://` or `https://` URL.
    Url(String),
}

/// Who is calling and how the server is reached, for the URLs and ids written into messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// `http://<host the client used>`: the base of `UnsubscribeURL` and `SubscribeURL`.
    pub base_url: String,
    /// Kept as the `SenderId` of the messages a publish sends into queues.
    pub sender: String,
}

/// A topic with its subscription counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicView {
    pub record: TopicRecord,
    pub arn: String,
    pub subscriptions_confirmed: usize,
    pub subscriptions_pending: usize,
}

/// The topics service. One per server; cheap to share in an `Arc`.
pub struct Topics {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    arns: Arns,
    /// Topic name → snapshot. The lock is held for map operations only, never across an await.
    cache: Mutex<HashMap<String, Cached>>,
    /// The last FIFO sequence number handed out (see `next_sequence`).
    sequence: AtomicU64,
    /// Checks publishes to topics with `SchemaValidation`.
    schemas: Arc<Schemas>,
    /// Where a correlated publish and its copies into queues are listed.
    traces: Arc<Traces>,
}

impl Topics {
    pub fn new(
        store: Arc<dyn Store>,
        arns: Arns,
        clock: Arc<dyn Clock>,
        schemas: Arc<Schemas>,
        traces: Arc<Traces>,
    ) -> Topics {
        Topics { store, clock, arns, cache: Mutex::new(HashMap::new()), sequence: AtomicU64::new(0), schemas, traces }
    }

    pub fn arns(&self) -> &Arns {
        &self.arns
    }

    /// Where publishes are traced, for the services that send through topics' copies.
    pub(crate) fn traces(&self) -> &Arc<Traces> {
        &self.traces
    }

    /// The next FIFO sequence number: increasing on this node, and above the clock in
    /// milliseconds times 2^20, so that numbers keep increasing across restarts.
    fn next_sequence(&self) -> u64 {
        let floor = self.clock.now_ms() << 20;
        let previous = self
            .sequence
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |prev| Some(prev.max(floor - 1) + 1))
            .unwrap_or(0);
        previous.max(floor - 1) + 1
    }
}

#[cfg(test)]
mod tests;
