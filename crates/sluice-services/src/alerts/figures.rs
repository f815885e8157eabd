//! What rules measure, read from the store once per evaluation: every queue's live counts, which
//! queues are dead-letter queues, and every subscription's backlog (its lag).
//!
//! The seam for later capabilities: streams add each consumer group's lag to `lags` under
//! `<stream>/<group>`, and backpressure adds each queue's running count of refusals to
//! `rejected_totals` (from its `QueueStats::refusals`); the rules `lag_above`, `lag_growing` and
//! `rejected_rate_above` then evaluate them with no other change.

use std::collections::{BTreeMap, BTreeSet};

use sluice_core::broker::QueueStats;
use sluice_core::limits::LIST_QUEUES_LIMIT_MAX;
use sluice_store::{RECORD_LIST_LIMIT_MAX, Store, StoreError};

use super::model::Kind;
use super::pattern;

/// One evaluation's measurements.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// Every queue's live counts, by name.
    pub queues: BTreeMap<String, QueueStats>,
    /// Queues named as the dead-letter queue of a queue or a subscription.
    pub dead_letter_queues: BTreeSet<String>,
    /// Backlog by subject: `<topic>/<subscription id>` (the messages waiting in the queue the
    /// subscription delivers into: visible, in flight and delayed).
    pub lags: BTreeMap<String, u64>,
    /// Refusals counted so far by queue name: sends its depth limit or rate limit refused, and
    /// messages `drop_head` or `reject_to_dlq` moved to its dead-letter queue (expiry is not a
    /// refusal). On PostgreSQL the counts are the cluster's, so the rate is too.
    pub rejected_totals: BTreeMap<String, u64>,
    /// Saga instances that are `failed`: instance id → saga name (at most
    /// [`FAILED_SAGAS_READ_MAX`]).
    pub failed_sagas: BTreeMap<String, String>,
}

/// Failed saga instances one evaluation reads at most (in id order); past it the newest are not
/// alerted on until older ones are dealt with. The same bound as a rule's subjects.
pub const FAILED_SAGAS_READ_MAX: usize = super::model::ALERT_SUBJECTS_PER_RULE_MAX;

/// Messages a queue holds in any state.
pub fn depth(stats: &QueueStats) -> u64 {
    stats.visible + stats.in_flight + stats.delayed
}

impl Figures {
    /// Reads the figures from the store.
    pub async fn read(store: &dyn Store) -> Result<Figures, StoreError> {
        let mut figures = Figures::default();
        let page = LIST_QUEUES_LIMIT_MAX as usize;
        let mut after: Option<String> = None;
        loop {
            let batch = store.list_queues("", after.as_deref(), page).await?;
            let last = batch.len() < page;
            after = batch.last().map(|q| q.name.clone());
            for view in batch {
                if let Some(dead_letter) = &view.attributes.dead_letter {
                    figures.dead_letter_queues.insert(dead_letter.queue.clone());
                }
                let r = view.stats.refusals;
                let rejected = r.queue_full + r.drop_head + r.rejected_to_dlq + r.rate_limited;
                if rejected > 0 || view.attributes.has_depth_limit() || view.attributes.rate_limit.is_some() {
                    figures.rejected_totals.insert(view.name.clone(), rejected);
                }
                figures.queues.insert(view.name, view.stats);
            }
            if last {
                break;
            }
        }
        let mut after: Option<String> = None;
        loop {
            let records = store
                .list_records(crate::topics::SUBSCRIPTION_KIND, "", after.as_deref(), RECORD_LIST_LIMIT_MAX)
                .await?;
            let last = records.len() < RECORD_LIST_LIMIT_MAX;
            after = records.last().map(|r| r.key.clone());
            for record in records {
                // An unreadable subscription is the push worker's to report; it has no lag here.
                let Ok(sub) = crate::topics::decode_subscription(&record.value) else {
                    continue;
                };
                if let Some(dlq) = &sub.dead_letter_queue {
                    figures.dead_letter_queues.insert(dlq.clone());
                }
                if let Some(stats) = figures.queues.get(&sub.queue) {
                    figures.lags.insert(format!("{}/{}", sub.topic, sub.id), depth(stats));
                }
            }
            if last {
                break;
            }
        }
        let mut after: Option<String> = None;
        while figures.failed_sagas.len() < FAILED_SAGAS_READ_MAX {
            let limit = (FAILED_SAGAS_READ_MAX - figures.failed_sagas.len()).min(RECORD_LIST_LIMIT_MAX);
            let records = store.list_records(crate::sagas::SAGA_FAILED_KIND, "", after.as_deref(), limit).await?;
            let last = records.len() < limit;
            after = records.last().map(|r| r.key.clone());
            for record in records {
                // An unreadable entry still names a failed instance; its saga is then unknown.
                let saga = crate::sagas::decode_record::<crate::sagas::FailedEntry>(&record.value)
                    .map_or_else(|_| "?".to_string(), |e| e.saga);
                figures.failed_sagas.insert(record.key, saga);
            }
            if last {
                break;
            }
        }
        // A dead-letter queue that does not exist holds nothing.
        let queues = &figures.queues;
        figures.dead_letter_queues.retain(|name| queues.contains_key(name));
        Ok(figures)
    }

    /// The subjects a rule of `kind` with `target` measures, in name order, with their raw
    /// figure (the lag for both lag kinds, the running total for refusals).
    pub fn subjects(&self, kind: Kind, target: &str) -> Vec<(String, f64)> {
        let matching = |name: &str| pattern::matches(target, name);
        match kind {
            Kind::DlqDepthAbove => self
                .dead_letter_queues
                .iter()
                .filter(|name| matching(name))
                .filter_map(|name| Some((name.clone(), depth(self.queues.get(name)?) as f64)))
                .collect(),
            Kind::OldestAgeAboveMs => self
                .queues
                .iter()
                .filter(|(name, _)| matching(name))
                .map(|(name, stats)| (name.clone(), stats.oldest_age_ms.unwrap_or(0) as f64))
                .collect(),
            Kind::LagAbove | Kind::LagGrowing => self
                .lags
                .iter()
                .filter(|(name, _)| matching(name))
                .map(|(name, &lag)| (name.clone(), lag as f64))
                .collect(),
            Kind::RejectedRateAbove => self
                .rejected_totals
                .iter()
                .filter(|(name, _)| matching(name))
                .map(|(name, &total)| (name.clone(), total as f64))
                .collect(),
            Kind::SagaFailed => {
                let mut failed: Vec<(String, f64)> = self
                    .failed_sagas
                    .iter()
                    .filter(|(_, saga)| matching(saga))
                    .map(|(id, saga)| (format!("{saga}/{id}"), 1.0))
                    .collect();
                failed.sort_by(|a, b| a.0.cmp(&b.0));
                failed
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_what_the_target_matches_of_the_kind() {
        let stats = |visible, oldest| QueueStats { visible, oldest_age_ms: oldest, ..QueueStats::default() };
        let figures = Figures {
            queues: [("jobs", stats(3, Some(9_000))), ("jobs-dlq", stats(2, Some(100))), ("mail", stats(0, None))]
                .into_iter()
                .map(|(n, s)| (n.to_string(), s))
                .collect(),
            dead_letter_queues: ["jobs-dlq".to_string()].into(),
            lags: [("orders/ab".to_string(), 7)].into(),
            rejected_totals: BTreeMap::new(),
            failed_sagas: [("0192-a".to_string(), "order".to_string()), ("0192-b".to_string(), "refund".to_string())]
                .into(),
        };
        let names = |kind, target| figures.subjects(kind, target);
        assert_eq!(names(Kind::DlqDepthAbove, "*"), [("jobs-dlq".to_string(), 2.0)]);
        assert_eq!(names(Kind::DlqDepthAbove, "jobs"), []);
        assert_eq!(
            names(Kind::OldestAgeAboveMs, "*"),
            [("jobs".to_string(), 9_000.0), ("jobs-dlq".to_string(), 100.0), ("mail".to_string(), 0.0)]
        );
        assert_eq!(names(Kind::LagAbove, "orders/*"), [("orders/ab".to_string(), 7.0)]);
        assert_eq!(names(Kind::LagGrowing, "billing/*"), []);
        assert_eq!(names(Kind::RejectedRateAbove, "*"), []);
        assert_eq!(
            names(Kind::SagaFailed, "*"),
            [("order/0192-a".to_string(), 1.0), ("refund/0192-b".to_string(), 1.0)]
        );
        assert_eq!(names(Kind::SagaFailed, "ord*"), [("order/0192-a".to_string(), 1.0)], "by the saga's name");
    }
}
