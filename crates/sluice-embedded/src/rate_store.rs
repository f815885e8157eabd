//! [`RateStore`] for the embedded store: the buckets in memory, on the store's clock. One
//! process is the whole deployment, so in memory is exact; buckets are not written to disk, so
//! a restart starts every bucket full again (at most one extra burst per restart).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use sluice_clock::Clock;
use sluice_core::rate::{Bucket, RateLimit, Taken, take};
use sluice_store::{RateStore, StoreError, StoreStatus, validate_rate_key};

use crate::EmbeddedStore;

/// Most buckets kept: a bucket is a resource (queue, topic, stream, job queue), and a server
/// holds at most `QUEUES_MAX` queues; past it the buckets full again are forgotten first.
const BUCKETS_MAX: usize = 200_000;

pub(crate) struct Buckets {
    clock: Arc<dyn Clock>,
    buckets: Mutex<HashMap<String, (RateLimit, Bucket)>>,
}

impl Buckets {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Buckets {
        Buckets { clock, buckets: Mutex::new(HashMap::new()) }
    }

    fn take(&self, key: &str, limit: RateLimit, asked: u64) -> Taken {
        let now = self.clock.now_ms();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= BUCKETS_MAX && !buckets.contains_key(key) {
            // A bucket that refilled to its burst is the same as one never used: forgetting it
            // changes no decision. Such buckets are found by refilling each to now.
            buckets.retain(|_, (l, b)| take(*l, Some(*b), 0, now).0.tokens_milli < l.capacity_milli());
        }
        let (next, taken) = take(limit, buckets.get(key).map(|(_, b)| *b), asked, now);
        buckets.insert(key.to_string(), (limit, next));
        taken
    }
}

#[async_trait]
impl RateStore for EmbeddedStore {
    async fn take_tokens(&self, key: &str, limit: RateLimit, asked: u64) -> Result<Taken, StoreError> {
        validate_rate_key(key)?;
        if let Some(refusal) = self.refusal() {
            return Err(refusal);
        }
        Ok(self.rates.take(key, limit, asked))
    }
}
