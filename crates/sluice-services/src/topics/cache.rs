//! Each node's cache of the topics it published to: the topic record and its subscriptions
//! with their compiled filter policies, kept for at most `SUBSCRIPTION_CACHE_MS` and dropped at
//! once by a change made through this node.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use sluice_core::filter::FilterPolicy;

use super::limits::{SUBSCRIPTION_CACHE_MS, SUBSCRIPTION_CACHE_TOPICS_MAX};
use super::{SubscriptionRecord, TopicError, TopicRecord, Topics};

/// A subscription as a publish uses it: its record and compiled filter policy.
pub(super) struct Live {
    pub(super) record: SubscriptionRecord,
    pub(super) filter: Option<FilterPolicy>,
}

/// A topic and its subscriptions, as one node holds them between reads.
pub(super) struct Snapshot {
    pub(super) topic: TopicRecord,
    pub(super) subscriptions: Vec<Live>,
}

pub(super) struct Cached {
    loaded: Instant,
    snapshot: Arc<Snapshot>,
}

impl Topics {
    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Cached>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops a topic from this node's cache after a change made through this node.
    pub(super) fn invalidate(&self, topic: &str) {
        self.cache().remove(topic);
    }

    /// The topic and its subscriptions, from this node's cache while fresh.
    pub(super) async fn snapshot(&self, topic: &str) -> Result<Arc<Snapshot>, TopicError> {
        let fresh = Duration::from_millis(SUBSCRIPTION_CACHE_MS);
        if let Some(cached) = self.cache().get(topic)
            && cached.loaded.elapsed() < fresh
        {
            return Ok(cached.snapshot.clone());
        }
        let loaded = Instant::now();
        let record = self.topic_record(topic).await?;
        let subscriptions = self
            .all_subscriptions(topic)
            .await?
            .into_iter()
            .filter_map(|record| {
                let Some(text) = record.filter_policy.as_deref() else {
                    return Some(Live { record, filter: None });
                };
                match FilterPolicy::parse(text, record.filter_scope) {
                    Ok(filter) => Some(Live { filter: Some(filter), record }),
                    Err(e) => {
                        // Checked when set; only a record written by another version fails.
                        // Such a subscription matches nothing rather than everything.
                        tracing::error!(subscription = %record.id, "a stored filter policy does not parse: {e}");
                        None
                    }
                }
            })
            .collect();
        let snapshot = Arc::new(Snapshot { topic: record, subscriptions });
        let mut cache = self.cache();
        if cache.len() >= SUBSCRIPTION_CACHE_TOPICS_MAX {
            cache.retain(|_, c| c.loaded.elapsed() < fresh);
        }
        cache.insert(topic.to_string(), Cached { loaded, snapshot: snapshot.clone() });
        Ok(snapshot)
    }
}
