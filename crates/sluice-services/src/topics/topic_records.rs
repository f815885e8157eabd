//! Topics as store records: create, read, list, change, tag and delete them.

use std::collections::BTreeMap;

use sluice_store::{RECORD_LIST_LIMIT_MAX, StoreError};

use super::limits::RECORD_UPDATE_ATTEMPTS_MAX;
use super::model::{self, TOPIC_KIND};
use super::{TopicError, TopicRecord, TopicView, Topics, attributes};

impl Topics {
    /// Creates a topic; `true` when it is new. The same name again answers the existing topic
    /// if every attribute and tag given matches it (attributes and tags not given are not
    /// compared, as in SNS), and `TopicExists` otherwise.
    pub async fn create_topic(
        &self,
        name: &str,
        fifo: bool,
        attributes: BTreeMap<String, String>,
        tags: BTreeMap<String, String>,
    ) -> Result<(TopicRecord, bool), TopicError> {
        attributes::check_topic_name(name, fifo)?;
        let mut checked = BTreeMap::new();
        for (attribute, value) in &attributes {
            checked.insert(attribute.clone(), attributes::check_topic_attribute(fifo, attribute, value)?);
        }
        attributes::check_tags(&tags, tags.len())?;
        let record = TopicRecord {
            format: model::RECORD_FORMAT,
            name: name.to_string(),
            fifo,
            attributes: checked,
            tags,
            created_at_ms: self.clock.now_ms(),
        };
        if self.store.insert_record(TOPIC_KIND, name, model::encode(&record)).await? {
            // Subscriptions left by a delete of an earlier topic of this name that did not
            // finish (the process died) must not receive this topic's messages.
            for stale in self.all_subscriptions(name).await? {
                self.remove_subscription(&stale).await?;
            }
            self.invalidate(name);
            return Ok((record, true));
        }
        let existing = self.topic_record(name).await?;
        let same_attributes = record.attributes.iter().all(|(k, v)| existing.attributes.get(k) == Some(v));
        if !same_attributes {
            return Err(TopicError::TopicExists { name: name.to_string(), tags: false });
        }
        let same_tags = record.tags.iter().all(|(k, v)| existing.tags.get(k) == Some(v));
        if !same_tags {
            return Err(TopicError::TopicExists { name: name.to_string(), tags: true });
        }
        Ok((existing, false))
    }

    /// The topic's record alone (no subscription counts, unlike `get_topic`): the cheap way to
    /// learn whether a topic exists.
    pub async fn topic_record(&self, name: &str) -> Result<TopicRecord, TopicError> {
        match self.store.get_record(TOPIC_KIND, name).await {
            Ok(Some(bytes)) => model::decode_topic(&bytes),
            Ok(None) => Err(TopicError::TopicNotFound(name.to_string())),
            // A name no record could have (too long, NUL) names no topic.
            Err(StoreError::Broker(sluice_core::BrokerError::Invalid(_))) => {
                Err(TopicError::TopicNotFound(name.to_string()))
            }
            Err(e) => Err(e.into()),
        }
    }

    pub async fn get_topic(&self, name: &str) -> Result<TopicView, TopicError> {
        let record = self.topic_record(name).await?;
        let subscriptions = self.all_subscriptions(name).await?;
        let pending = subscriptions.iter().filter(|s| s.pending).count();
        Ok(TopicView {
            arn: self.arns.topic(name),
            record,
            subscriptions_confirmed: subscriptions.len() - pending,
            subscriptions_pending: pending,
        })
    }

    /// Topics whose names start with `prefix`, after `after`, in name order.
    pub async fn list_topics(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<TopicRecord>, TopicError> {
        let records = self.store.list_records(TOPIC_KIND, prefix, after, limit.min(RECORD_LIST_LIMIT_MAX)).await?;
        records.iter().map(|r| model::decode_topic(&r.value)).collect()
    }

    /// Deletes the topic and its subscriptions (with their delivery queues); `false` when there
    /// was no such topic. The subscriptions go first, so that a delete cut short by a crash
    /// leaves the topic, and deleting it again finishes the job.
    pub async fn delete_topic(&self, name: &str) -> Result<bool, TopicError> {
        if let Err(TopicError::TopicNotFound(_)) = self.topic_record(name).await {
            return Ok(false);
        }
        for subscription in self.all_subscriptions(name).await? {
            self.remove_subscription(&subscription).await?;
        }
        let deleted = self.store.delete_record(TOPIC_KIND, name).await?;
        self.invalidate(name);
        Ok(deleted)
    }

    /// Reads, changes and writes back a topic record, retrying when another writer changed it
    /// in between (compare-and-swap).
    async fn update_topic(
        &self,
        name: &str,
        change: impl Fn(&mut TopicRecord) -> Result<(), TopicError>,
    ) -> Result<TopicRecord, TopicError> {
        for _ in 0..RECORD_UPDATE_ATTEMPTS_MAX {
            let Some(old) = self.store.get_record(TOPIC_KIND, name).await? else {
                return Err(TopicError::TopicNotFound(name.to_string()));
            };
            let mut record = model::decode_topic(&old)?;
            change(&mut record)?;
            if self.store.replace_record(TOPIC_KIND, name, old, model::encode(&record)).await? {
                self.invalidate(name);
                return Ok(record);
            }
        }
        Err(TopicError::Contended)
    }

    /// Sets one topic attribute by its SNS name; an empty value removes optional ones.
    pub async fn set_topic_attribute(&self, name: &str, attribute: &str, value: &str) -> Result<(), TopicError> {
        self.set_topic_attributes(name, &BTreeMap::from([(attribute.to_string(), value.to_string())])).await.map(|_| ())
    }

    /// Sets several topic attributes by their SNS names in one write (all or none: the first
    /// that breaks a rule refuses the lot); an empty value removes optional ones. Returns the
    /// topic as it is now.
    pub async fn set_topic_attributes(
        &self,
        name: &str,
        changes: &BTreeMap<String, String>,
    ) -> Result<TopicRecord, TopicError> {
        self.update_topic(name, |record| {
            for (attribute, value) in changes {
                let value = attributes::check_topic_attribute(record.fifo, attribute, value)?;
                if value.is_empty() {
                    record.attributes.remove(attribute);
                } else {
                    record.attributes.insert(attribute.to_string(), value);
                }
            }
            Ok(())
        })
        .await
    }

    /// Adds or replaces tags.
    pub async fn tag_topic(&self, name: &str, tags: &BTreeMap<String, String>) -> Result<(), TopicError> {
        self.update_topic(name, |record| {
            let mut merged = record.tags.clone();
            merged.extend(tags.iter().map(|(k, v)| (k.clone(), v.clone())));
            attributes::check_tags(tags, merged.len())?;
            record.tags = merged;
            Ok(())
        })
        .await
        .map(|_| ())
    }

    pub async fn untag_topic(&self, name: &str, keys: &[String]) -> Result<(), TopicError> {
        self.update_topic(name, |record| {
            for key in keys {
                record.tags.remove(key);
            }
            Ok(())
        })
        .await
        .map(|_| ())
    }
}
