//! Subscriptions: subscribe (to a queue or an HTTP(S) endpoint), confirm, list, change and
//! remove them, and the confirmation request an endpoint subscription sends.

use std::collections::BTreeMap;

use sluice_core::QueueAttributes;
use sluice_core::filter::{FilterScope, SnsCall};
use sluice_core::limits::FIFO_SUFFIX;
use sluice_store::{RECORD_LIST_LIMIT_MAX, StoreError};

use super::attributes::{self, Setting, SubscriptionContext};
use super::limits::{
    ENDPOINT_LEN_MAX, FILTER_POLICIES_PER_TOPIC_MAX, RECORD_UPDATE_ATTEMPTS_MAX, SUBSCRIPTIONS_PER_TOPIC_MAX,
};
use super::model::{self, SUBSCRIPTION_KIND};
use super::{
    Endpoint, Invalid, Origin, Protocol, SIGNING_CERT_FILE, SubscriptionRecord, TopicError, TopicRecord, Topics,
    envelope, push,
};

impl Topics {
    /// Every subscription of `topic`, in id order.
    pub(super) async fn all_subscriptions(&self, topic: &str) -> Result<Vec<SubscriptionRecord>, TopicError> {
        let prefix = format!("{topic}/");
        let mut out: Vec<SubscriptionRecord> = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page =
                self.store.list_records(SUBSCRIPTION_KIND, &prefix, after.as_deref(), RECORD_LIST_LIMIT_MAX).await?;
            let done = page.len() < RECORD_LIST_LIMIT_MAX;
            after = page.last().map(|r| r.key.clone());
            for record in page {
                out.push(model::decode_subscription(&record.value)?);
            }
            if done {
                return Ok(out);
            }
        }
    }

    /// Subscriptions of one topic (or of all topics), after the subscription `after` (an id for
    /// one topic, `<topic>/<id>` for all), in order.
    pub async fn list_subscriptions(
        &self,
        topic: Option<&str>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<SubscriptionRecord>, TopicError> {
        let limit = limit.min(RECORD_LIST_LIMIT_MAX);
        let records = match topic {
            Some(topic) => {
                self.topic_record(topic).await?;
                let after = after.map(|id| model::subscription_key(topic, id));
                self.store.list_records(SUBSCRIPTION_KIND, &format!("{topic}/"), after.as_deref(), limit).await?
            }
            None => self.store.list_records(SUBSCRIPTION_KIND, "", after, limit).await?,
        };
        records.iter().map(|r| model::decode_subscription(&r.value)).collect()
    }

    pub async fn get_subscription(&self, topic: &str, id: &str) -> Result<SubscriptionRecord, TopicError> {
        let key = model::subscription_key(topic, id);
        match self.store.get_record(SUBSCRIPTION_KIND, &key).await {
            Ok(Some(bytes)) => model::decode_subscription(&bytes),
            Ok(None) | Err(StoreError::Broker(sluice_core::BrokerError::Invalid(_))) => {
                Err(TopicError::SubscriptionNotFound(self.arns.subscription(topic, id)))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Subscribes an endpoint; `true` when the subscription is new. Subscribing the same
    /// endpoint again answers the existing subscription if every attribute given matches it
    /// (`SubscriptionExists` otherwise); for a pending HTTP/S subscription it also sends the
    /// confirmation request again.
    ///
    /// A queue subscription is confirmed at once, whether the queue exists or not (as in SNS:
    /// deliveries to a missing queue fail then, see `publish`). An HTTP/S subscription gets its
    /// delivery queue and a confirmation request in it, and receives nothing before
    /// `confirm_subscription`.
    pub async fn subscribe(
        &self,
        topic: &str,
        endpoint: Endpoint,
        attributes: &BTreeMap<String, String>,
        origin: &Origin,
    ) -> Result<(SubscriptionRecord, bool), TopicError> {
        let topic_record = self.topic_record(topic).await?;
        let (protocol, endpoint_text, queue, queue_fifo) = self.resolve_endpoint(&topic_record, endpoint).await?;
        let id =
            model::subscription_id(topic, protocol, if protocol == Protocol::Sqs { &queue } else { &endpoint_text });
        let queue = if protocol.is_push() { model::push_queue_name(&id) } else { queue };
        let mut record = SubscriptionRecord {
            format: model::RECORD_FORMAT,
            id: id.clone(),
            topic: topic.to_string(),
            protocol,
            endpoint: endpoint_text,
            queue: queue.clone(),
            queue_fifo,
            raw: false,
            filter_policy: None,
            filter_scope: FilterScope::MessageAttributes,
            redrive_policy: None,
            dead_letter_queue: None,
            delivery_policy: None,
            pending: protocol.is_push(),
            token: protocol.is_push().then(random_token),
            signing_secret: protocol.is_push().then(random_token),
            created_at_ms: self.clock.now_ms(),
        };
        let ctx = SubscriptionContext {
            call: SnsCall::Subscribe,
            arns: &self.arns,
            topic_fifo: topic_record.fifo,
            queue_fifo,
        };
        apply_settings(&ctx, &mut record, attributes)?;

        let existing = self.all_subscriptions(topic).await?;
        if let Some(current) = existing.iter().find(|s| s.id == id) {
            return self.resubscribe(current, &ctx, attributes, origin).await.map(|s| (s, false));
        }
        if existing.len() >= SUBSCRIPTIONS_PER_TOPIC_MAX {
            return Err(TopicError::LimitExceeded {
                message: format!("a topic has at most {SUBSCRIPTIONS_PER_TOPIC_MAX} subscriptions"),
                sns_code: "SubscriptionLimitExceeded",
                sns_message: format!("Subscription limit of {SUBSCRIPTIONS_PER_TOPIC_MAX} per topic exceeded"),
            });
        }
        if record.filter_policy.is_some()
            && existing.iter().filter(|s| s.filter_policy.is_some()).count() >= FILTER_POLICIES_PER_TOPIC_MAX
        {
            return Err(filter_policy_limit());
        }
        if protocol.is_push() {
            // Before the record, so that a subscription never exists without its queue.
            let attributes =
                QueueAttributes { retention_ms: push::PUSH_QUEUE_RETENTION_MS, ..QueueAttributes::default() };
            self.store.create_queue(&queue, attributes).await?;
        }
        if !self.store.insert_record(SUBSCRIPTION_KIND, &record.key(), model::encode(&record)).await? {
            // Another node subscribed the same endpoint just now.
            let current = self.get_subscription(topic, &id).await?;
            return self.resubscribe(&current, &ctx, attributes, origin).await.map(|s| (s, false));
        }
        self.invalidate(topic);
        if record.pending {
            self.send_confirmation(&record, origin).await?;
        }
        Ok((record, true))
    }

    /// `subscribe` of an endpoint that is subscribed already.
    async fn resubscribe(
        &self,
        current: &SubscriptionRecord,
        ctx: &SubscriptionContext<'_>,
        attributes: &BTreeMap<String, String>,
        origin: &Origin,
    ) -> Result<SubscriptionRecord, TopicError> {
        let mut wanted = current.clone();
        apply_settings(ctx, &mut wanted, attributes)?;
        if wanted != *current {
            return Err(TopicError::SubscriptionExists(self.arns.subscription(&current.topic, &current.id)));
        }
        if current.pending {
            self.send_confirmation(current, origin).await?;
        }
        Ok(current.clone())
    }

    /// Checks an endpoint against the topic: `(protocol, endpoint as shown, queue, queue is
    /// FIFO)`.
    async fn resolve_endpoint(
        &self,
        topic: &TopicRecord,
        endpoint: Endpoint,
    ) -> Result<(Protocol, String, String, bool), TopicError> {
        match endpoint {
            Endpoint::Queue(name) => {
                if sluice_core::name::validate_queue_name(&name).is_err() {
                    return Err(Invalid::new(
                        "endpoint",
                        format!("{name:?} is not a queue name"),
                        "Invalid parameter: SQS endpoint ARN",
                    )
                    .into());
                }
                let fifo = match self.store.get_queue(&name).await {
                    Ok(view) => view.attributes.fifo,
                    Err(StoreError::Broker(_)) => name.ends_with(FIFO_SUFFIX),
                    Err(e) => return Err(e.into()),
                };
                if fifo && !topic.fifo {
                    return Err(Invalid::new(
                        "queue",
                        "a FIFO queue can only subscribe to a FIFO topic",
                        "Invalid parameter: Invalid parameter: Endpoint Reason: FIFO SQS Queues can not be subscribed to standard SNS topics",
                    )
                    .into());
                }
                Ok((Protocol::Sqs, self.arns.queue(&name), name, fifo))
            }
            Endpoint::Url(url) => {
                let protocol = if url.starts_with("https://") {
                    Protocol::Https
                } else if url.starts_with("http://") {
                    Protocol::Http
                } else {
                    return Err(Invalid::new(
                        "endpoint",
                        "an HTTP endpoint is an http:// or https:// URL",
                        "Invalid parameter: Endpoint must match the specified protocol",
                    )
                    .into());
                };
                let host_ok = url.split_once("://").is_some_and(|(_, rest)| !rest.is_empty() && !rest.starts_with('/'));
                if url.len() > ENDPOINT_LEN_MAX || !host_ok || url.chars().any(char::is_whitespace) {
                    return Err(Invalid::new(
                        "endpoint",
                        format!("the endpoint is not a URL of at most {ENDPOINT_LEN_MAX} bytes"),
                        "Invalid parameter: Endpoint must match the specified protocol",
                    )
                    .into());
                }
                if topic.fifo {
                    return Err(Invalid::new(
                        "endpoint",
                        "FIFO topics deliver to queues only",
                        "Invalid parameter: Invalid protocol type for FIFO topic: only sqs is supported",
                    )
                    .into());
                }
                Ok((protocol, url, String::new(), false))
            }
        }
    }

    /// Sends an HTTP/S subscription's confirmation request into its delivery queue.
    async fn send_confirmation(&self, record: &SubscriptionRecord, origin: &Origin) -> Result<(), TopicError> {
        let Some(token) = &record.token else { return Ok(()) };
        let topic_arn = self.arns.topic(&record.topic);
        let message_id = uuid::Uuid::now_v7().to_string();
        let subscribe_url = format!(
            "{}/?Action=ConfirmSubscription&TopicArn={}&Token={token}",
            origin.base_url,
            url_encode(&topic_arn)
        );
        let cert_url = format!("{}/{SIGNING_CERT_FILE}", origin.base_url);
        let timestamp = envelope::timestamp(self.clock.now_ms());
        let body = envelope::confirmation(&envelope::Confirmation {
            message_id: &message_id,
            token,
            topic_arn: &topic_arn,
            subscribe_url: &subscribe_url,
            timestamp: &timestamp,
            signing: ("1", &cert_url),
        });
        let delivery = push::PushDelivery {
            format: push::PUSH_FORMAT,
            message_type: push::MessageType::SubscriptionConfirmation,
            message_id,
            topic_arn,
            subscription_arn: None,
            raw: false,
            body,
        };
        let mut results = self.store.send(&record.queue, vec![delivery.to_message()]).await?;
        match results.pop() {
            Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(TopicError::Store(StoreError::Broker(sluice_core::BrokerError::Invalid(
                sluice_core::ValidationError::new("confirmation", e.to_string()),
            )))),
            None => Ok(()),
        }
    }

    /// Confirms a pending HTTP/S subscription of `topic` with the token its confirmation
    /// request carried. Confirming a confirmed subscription again succeeds.
    pub async fn confirm_subscription(&self, topic: &str, token: &str) -> Result<SubscriptionRecord, TopicError> {
        let bad_token =
            || Invalid::new("token", "no subscription of this topic has this token", "Invalid parameter: Token");
        if !is_token(token) {
            return Err(Invalid::new("token", "not a confirmation token", "Invalid token").into());
        }
        match self.topic_record(topic).await {
            Ok(_) => {}
            Err(TopicError::TopicNotFound(_)) => return Err(bad_token().into()),
            Err(e) => return Err(e),
        }
        let subscriptions = self.all_subscriptions(topic).await?;
        let Some(found) = subscriptions.into_iter().find(|s| s.token.as_deref() == Some(token)) else {
            return Err(bad_token().into());
        };
        if !found.pending {
            return Ok(found);
        }
        self.update_subscription(topic, &found.id, |record| {
            record.pending = false;
            Ok(())
        })
        .await
    }

    async fn update_subscription(
        &self,
        topic: &str,
        id: &str,
        change: impl Fn(&mut SubscriptionRecord) -> Result<(), TopicError>,
    ) -> Result<SubscriptionRecord, TopicError> {
        let key = model::subscription_key(topic, id);
        for _ in 0..RECORD_UPDATE_ATTEMPTS_MAX {
            let old = match self.store.get_record(SUBSCRIPTION_KIND, &key).await {
                Ok(Some(old)) => old,
                Ok(None) | Err(StoreError::Broker(sluice_core::BrokerError::Invalid(_))) => {
                    return Err(TopicError::SubscriptionNotFound(self.arns.subscription(topic, id)));
                }
                Err(e) => return Err(e.into()),
            };
            let mut record = model::decode_subscription(&old)?;
            change(&mut record)?;
            if self.store.replace_record(SUBSCRIPTION_KIND, &key, old, model::encode(&record)).await? {
                self.invalidate(topic);
                return Ok(record);
            }
        }
        Err(TopicError::Contended)
    }

    /// Sets one subscription attribute by its SNS name.
    pub async fn set_subscription_attribute(
        &self,
        topic: &str,
        id: &str,
        name: &str,
        value: &str,
    ) -> Result<SubscriptionRecord, TopicError> {
        let topic_fifo = self.topic_record(topic).await.map(|t| t.fifo).unwrap_or(false);
        let with_policy =
            self.all_subscriptions(topic).await?.iter().filter(|s| s.filter_policy.is_some() && s.id != id).count();
        self.update_subscription(topic, id, |record| {
            let ctx = SubscriptionContext {
                call: SnsCall::SetSubscriptionAttributes,
                arns: &self.arns,
                topic_fifo,
                queue_fifo: record.queue_fifo,
            };
            apply_settings(&ctx, record, &BTreeMap::from([(name.to_string(), value.to_string())]))?;
            if record.filter_policy.is_some() && with_policy >= FILTER_POLICIES_PER_TOPIC_MAX {
                return Err(filter_policy_limit());
            }
            Ok(())
        })
        .await
    }

    /// Removes a subscription; `false` when there was none.
    pub async fn unsubscribe(&self, topic: &str, id: &str) -> Result<bool, TopicError> {
        match self.get_subscription(topic, id).await {
            Ok(record) => self.remove_subscription(&record).await,
            Err(TopicError::SubscriptionNotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub(super) async fn remove_subscription(&self, record: &SubscriptionRecord) -> Result<bool, TopicError> {
        let deleted = self.store.delete_record(SUBSCRIPTION_KIND, &record.key()).await?;
        self.invalidate(&record.topic);
        if record.protocol.is_push() {
            match self.store.delete_queue(&record.queue).await {
                Ok(()) | Err(StoreError::Broker(sluice_core::BrokerError::QueueNotFound(_))) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(deleted)
    }
}

fn filter_policy_limit() -> TopicError {
    TopicError::LimitExceeded {
        message: format!("a topic has at most {FILTER_POLICIES_PER_TOPIC_MAX} subscriptions with a filter policy"),
        sns_code: "FilterPolicyLimitExceeded",
        sns_message: format!("Filter policy limit of {FILTER_POLICIES_PER_TOPIC_MAX} per topic exceeded"),
    }
}

/// Applies checked subscription attributes to a record. The scope applies first, so that a
/// policy is checked against the scope it will be used with, and a changed scope re-checks the
/// policy the subscription has.
fn apply_settings(
    ctx: &SubscriptionContext<'_>,
    record: &mut SubscriptionRecord,
    attributes: &BTreeMap<String, String>,
) -> Result<(), TopicError> {
    if let Some(value) = attributes.get("FilterPolicyScope") {
        if let Setting::FilterScope(scope) =
            attributes::check_subscription_attribute(ctx, "FilterPolicyScope", value, record.filter_scope)?
        {
            record.filter_scope = scope;
        }
        if let Some(policy) = record.filter_policy.clone()
            && !attributes.contains_key("FilterPolicy")
        {
            attributes::check_subscription_attribute(ctx, "FilterPolicy", &policy, record.filter_scope)?;
        }
    }
    for (name, value) in attributes.iter().filter(|(name, _)| name.as_str() != "FilterPolicyScope") {
        match attributes::check_subscription_attribute(ctx, name, value, record.filter_scope)? {
            Setting::Raw(raw) => record.raw = raw,
            Setting::FilterPolicy(policy) => record.filter_policy = policy,
            Setting::FilterScope(scope) => record.filter_scope = scope,
            Setting::Redrive(Some((policy, queue))) => {
                record.redrive_policy = Some(policy);
                record.dead_letter_queue = Some(queue);
            }
            Setting::Redrive(None) => {
                record.redrive_policy = None;
                record.dead_letter_queue = None;
            }
            Setting::DeliveryPolicy(policy) => record.delivery_policy = policy,
        }
    }
    Ok(())
}

/// A confirmation token: 64 hex digits, 128 of them random (two UUIDv7s hashed).
fn random_token() -> String {
    let mut seed = uuid::Uuid::now_v7().as_bytes().to_vec();
    seed.extend_from_slice(uuid::Uuid::now_v7().as_bytes());
    sluice_core::broker::content_dedup_id(&seed)
}

fn is_token(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Percent-encodes a query parameter value.
fn url_encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
