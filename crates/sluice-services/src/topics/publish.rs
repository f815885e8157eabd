//! Publishing: check each message, match it against every subscription of the topic, and send
//! a copy into each matching subscription's queue.
//!
//! All copies of one publish call go out at once, one `send` per queue, concurrently, so that
//! the embedded store's writer commits them in one batch (one fsync for the whole fan-out) and
//! PostgreSQL runs them side by side. A message is acknowledged only when every copy is
//! durable. What happens when a copy is refused depends on why:
//! - The store cannot take writes (poisoned, disk full, shutting down): the message is not
//!   acknowledged (`PublishError::Incomplete`); the other subscriptions' copies are durable and
//!   stay, so a retry may deliver it twice to them, as at-least-once allows. Nothing waits for
//!   the failing subscription: every other copy is sent whatever happens to it.
//! - The subscription can never take it (its queue does not exist, or refuses the message: too
//!   large for the queue, a FIFO rule): the copy goes to the subscription's dead-letter queue
//!   (`RedrivePolicy`) if it has one, and is otherwise dropped, logged and counted
//!   (`sluice_topic_deliveries_failed_total`). The message is acknowledged: retrying could not
//!   help, and one broken subscription must not stop a topic, as in SNS.

use std::collections::BTreeMap;

use sluice_core::filter::MessageView;
use sluice_core::limits::FIFO_SUFFIX;
use sluice_core::message::AttributeData;
use sluice_core::{AttributeValue, EntryError, MessageEnvelope, NewMessage};
use sluice_store::{StoreError, Write, WriteOutcome};
use tokio::task::JoinSet;

use super::checks::{Checked, Publication, check};
use super::envelope::{self, Notification};
use super::error::{Invalid, PublishError, TopicError};
use super::model::{Protocol, SubscriptionRecord};
use super::push::{MessageType, PUSH_FORMAT, PUSH_QUEUE_PREFIX, PushDelivery};
use super::{Live, Origin, SIGNING_CERT_FILE, Snapshot, Topics};
use crate::schemas::{ATTRIBUTE_TYPE, ATTRIBUTE_VERSION, Violation};
use crate::trace::{self, CommitLinks, Links, TraceEntry, TraceKind};

/// The system attributes a copy carries in its queue (the names the SQS layer shows).
const SENDER_ID: &str = "SenderId";
const DEDUP_ID: &str = "MessageDeduplicationId";

/// An acknowledged message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub message_id: String,
    /// FIFO topics only.
    pub sequence_number: Option<String>,
    /// How many subscriptions matched (and now hold a copy or dead-lettered it).
    pub deliveries: usize,
}

/// A message that passed the checks.
struct Accepted {
    index: usize,
    publication: Publication,
    /// The text for each protocol (all the same without `MessageStructure=json`).
    default_text: String,
    per_protocol: BTreeMap<String, String>,
    message_id: String,
    sequence_number: Option<String>,
    dedup_id: Option<String>,
    /// Its correlation and causation ids, when it carries a correlation id (then it and its
    /// copies into queues are traced).
    links: Option<Links>,
}

impl Accepted {
    fn text(&self, protocol: Protocol) -> &str {
        self.per_protocol.get(protocol.as_str()).unwrap_or(&self.default_text)
    }
}

/// One copy to send: which message, to which subscription.
#[derive(Clone, Copy)]
struct Delivery {
    accepted: usize,
    subscription: usize,
}

/// Everything the copies of one call share.
struct Call<'a> {
    topics: &'a Topics,
    snapshot: &'a Snapshot,
    origin: &'a Origin,
    topic_arn: String,
    timestamp: String,
}

impl Topics {
    /// Checks a message as `publish` would, without publishing it: SNS refuses a whole batch
    /// for one bad entry, so its batch checks every entry first.
    pub async fn check_publication(&self, topic: &str, publication: &Publication) -> Result<(), TopicError> {
        let snapshot = self.snapshot(topic).await?;
        check(&snapshot.topic, publication).map(|_| ()).map_err(TopicError::Invalid)
    }

    /// Publishes messages to `topic`, answering each in order: its id, or why it was refused
    /// or not acknowledged (see the module documentation). A bad message never fails the others.
    pub async fn publish(
        &self,
        topic: &str,
        publications: Vec<Publication>,
        origin: &Origin,
    ) -> Result<Vec<Result<Published, PublishError>>, TopicError> {
        let snapshot = self.snapshot(topic).await?;
        let (mut results, accepted) = self.accept_all(&snapshot, publications).await?;
        let call = self.call(topic, &snapshot, origin);
        let (matched, by_queue) = route(&snapshot, &accepted);

        // Send every queue's copies at once.
        let mut sends = JoinSet::new();
        // Only a correlated publish's copies are traced: the others skip reading their links.
        let correlated = accepted.iter().any(|m| m.links.is_some());
        let mut copy_links = BTreeMap::new();
        for (queue, messages) in copies(&call, &accepted, &by_queue) {
            let traced = correlated && traced_queue(&queue);
            let links = if traced { messages.iter().map(trace::message_links).collect() } else { Vec::new() };
            copy_links.insert(queue.clone(), links);
            let store = self.store.clone();
            sends.spawn(async move {
                let results = store.send(&queue, messages).await;
                (queue, results)
            });
        }
        let mut traced = Vec::new();
        let mut refused: Vec<(Delivery, Refusal)> = Vec::new();
        while let Some(joined) = sends.join_next().await {
            let (queue, outcome) = match joined {
                Ok(done) => done,
                // A send task panicked: its copies' fate is unknown, so none is acknowledged.
                Err(e) => {
                    tracing::error!("a topic delivery task failed: {e}");
                    for copies in by_queue.values() {
                        refused.extend(copies.iter().map(|c| (*c, Refusal::Unavailable(StoreError::ShuttingDown))));
                    }
                    continue;
                }
            };
            let copies = &by_queue[queue.as_str()];
            match outcome {
                Ok(entries) => {
                    let ids = entries.iter().map(|e| e.as_ref().ok().map(|sent| sent.id.to_string()));
                    let links = copy_links.remove(&queue).unwrap_or_default();
                    traced.extend(trace::entries(
                        TraceKind::Message,
                        &format!("queue:{queue}"),
                        links.into_iter().zip(ids),
                    ));
                    for (copy, entry) in copies.iter().zip(entries) {
                        match entry {
                            Ok(_) => {}
                            // Overflow policies took the copy already; queue_full, rate_limited: not now.
                            Err(EntryError::QueueFull { .. } | EntryError::RateLimited { .. }) => {
                                refused.push((*copy, Refusal::Full(queue.clone())))
                            }
                            Err(e) => refused.push((*copy, Refusal::Never(e.to_string()))),
                        }
                    }
                }
                Err(e) => {
                    let refusal = Refusal::of(e);
                    refused.extend(copies.iter().map(|c| (*c, refusal.clone())));
                }
            }
        }
        metrics::counter!("sluice_topic_messages_published_total").increment(accepted.len() as u64);
        metrics::counter!("sluice_topic_deliveries_total").increment(matched.iter().sum::<usize>() as u64);

        // Copies that were refused: dead-letter or drop the hopeless ones; the others keep
        // their message from being acknowledged.
        let mut unavailable: Vec<Option<StoreError>> = vec![None; accepted.len()];
        let mut full: Vec<Option<String>> = vec![None; accepted.len()];
        let mut failed = vec![0usize; accepted.len()];
        for (copy, refusal) in refused {
            let cause = match refusal {
                Refusal::Unavailable(cause) => Some(cause),
                Refusal::Never(reason) => call.dead_letter(&accepted[copy.accepted], copy.subscription, &reason).await,
                Refusal::Full(queue) => {
                    failed[copy.accepted] += 1;
                    full[copy.accepted].get_or_insert(queue);
                    continue;
                }
            };
            if let Some(cause) = cause {
                failed[copy.accepted] += 1;
                unavailable[copy.accepted].get_or_insert(cause);
            }
        }
        for (a, message) in accepted.into_iter().enumerate() {
            results[message.index] = Some(match (unavailable[a].take(), full[a].take()) {
                (Some(cause), _) => {
                    metrics::counter!("sluice_topic_deliveries_failed_total", "outcome" => "not_acknowledged")
                        .increment(failed[a] as u64);
                    Err(PublishError::Incomplete { delivered: matched[a] - failed[a], matched: matched[a], cause })
                }
                (None, Some(queue)) => {
                    metrics::counter!("sluice_topic_deliveries_failed_total", "outcome" => "queue_full")
                        .increment(failed[a] as u64);
                    Err(PublishError::QueueFull { delivered: matched[a] - failed[a], matched: matched[a], queue })
                }
                (None, None) => {
                    traced.extend(publish_entry(topic, &message));
                    Ok(Published {
                        message_id: message.message_id,
                        sequence_number: message.sequence_number,
                        deliveries: matched[a],
                    })
                }
            });
        }
        self.traces.record(traced).await;
        Ok(results.into_iter().map(|r| r.expect("every message was answered")).collect())
    }
}

/// A publish made ready to commit with writes of the caller's ([`Topics::plan_publish_all`]).
#[derive(Debug)]
pub struct PlannedPublish {
    /// Every message's answer once the commit is applied, in order: its id and deliveries, or
    /// why it was refused (those have no copies in `writes`).
    pub results: Vec<Result<Published, PublishError>>,
    /// One send per queue with a matching subscription, to commit all together.
    pub writes: Vec<Write>,
    deliveries: usize,
    /// The publishes' trace entries, and the links of the copies (whose ids the commit gives),
    /// for [`Topics::applied`].
    traced: Vec<TraceEntry>,
    copy_links: CommitLinks,
}

impl Topics {
    /// `publish`'s checks, matching and copies, without sending: for a keyed publish, whose
    /// copies and stored answer commit together (`sluice_store::CommitStore::commit_all`), so
    /// that a crash cannot apply one without the other. A copy its queue refuses refuses that
    /// commit as a whole, where `publish` would dead-letter or drop it; the caller then
    /// publishes the usual way. Once the commit is applied, [`Topics::count_planned`] counts it.
    pub async fn plan_publish_all(
        &self,
        topic: &str,
        publications: Vec<Publication>,
        origin: &Origin,
    ) -> Result<PlannedPublish, TopicError> {
        let snapshot = self.snapshot(topic).await?;
        let (mut results, accepted) = self.accept_all(&snapshot, publications).await?;
        let call = self.call(topic, &snapshot, origin);
        let (matched, by_queue) = route(&snapshot, &accepted);
        let writes: Vec<Write> = copies(&call, &accepted, &by_queue)
            .into_iter()
            .map(|(queue, messages)| Write::Send { queue, messages })
            .collect();
        let correlated = accepted.iter().any(|m| m.links.is_some());
        let copy_links = CommitLinks::of_where(&writes, |queue| correlated && traced_queue(queue));
        let traced = accepted.iter().filter_map(|message| publish_entry(topic, message)).collect();
        for (a, message) in accepted.into_iter().enumerate() {
            results[message.index] = Some(Ok(Published {
                message_id: message.message_id,
                sequence_number: message.sequence_number,
                deliveries: matched[a],
            }));
        }
        Ok(PlannedPublish {
            results: results.into_iter().map(|r| r.expect("every message was answered")).collect(),
            writes,
            deliveries: matched.iter().sum(),
            traced,
            copy_links,
        })
    }

    /// Counts and traces a planned publish whose commit was applied (its `outcomes` start with
    /// the plan's writes, in order), as `publish` counts and traces its own.
    pub async fn applied(&self, plan: PlannedPublish, outcomes: &[WriteOutcome]) {
        let published = plan.results.iter().filter(|r| r.is_ok()).count();
        metrics::counter!("sluice_topic_messages_published_total").increment(published as u64);
        metrics::counter!("sluice_topic_deliveries_total").increment(plan.deliveries as u64);
        let mut traced = plan.traced;
        traced.extend(plan.copy_links.entries(outcomes));
        self.traces.record(traced).await;
    }

    /// Checks every message (its schema first, on a topic that validates them) and gives the
    /// good ones their ids: an answer in place for each refused one, and the accepted.
    async fn accept_all(
        &self,
        snapshot: &Snapshot,
        publications: Vec<Publication>,
    ) -> Result<(Vec<Option<Result<Published, PublishError>>>, Vec<Accepted>), TopicError> {
        let mut results: Vec<Option<Result<Published, PublishError>>> = vec![None; publications.len()];
        if snapshot.topic.schema_validation() {
            for (index, publication) in publications.iter().enumerate() {
                if let Err(violation) = self.check_schema(&snapshot.topic.name, publication).await? {
                    results[index] = Some(Err(PublishError::Schema(violation)));
                }
            }
        }
        let mut accepted = Vec::new();
        for (index, publication) in publications.into_iter().enumerate() {
            if results[index].is_some() {
                continue;
            }
            match self.accept(snapshot, index, publication) {
                Ok(message) => accepted.push(message),
                Err(invalid) => results[index] = Some(Err(PublishError::Invalid(invalid))),
            }
        }
        if let Some(limit) = snapshot.topic.rate_limit()
            && !accepted.is_empty()
        {
            // One token per message that passed its checks; the first ones go ahead.
            let resource = format!("topic:{}", snapshot.topic.name);
            let admitted = crate::rate_limits::admit(&*self.store, &resource, limit, accepted.len()).await?;
            for message in accepted.split_off(admitted.granted) {
                results[message.index] =
                    Some(Err(PublishError::RateLimited { retry_after_ms: admitted.retry_after_ms }));
            }
        }
        Ok((results, accepted))
    }

    /// The copies a publish of `publication` would send now, by queue, without sending them,
    /// for a caller that sends them in an atomic commit of its own (a schedule's tick): the
    /// same checks, matching and envelopes as `publish`. A copy a queue refuses fails that
    /// commit as a whole rather than going to the subscription's dead-letter queue.
    pub async fn plan_publish(
        &self,
        topic: &str,
        publication: Publication,
        origin: &Origin,
    ) -> Result<Vec<(String, Vec<NewMessage>)>, TopicError> {
        let snapshot = self.snapshot(topic).await?;
        let accepted = vec![self.accept(&snapshot, 0, publication).map_err(TopicError::Invalid)?];
        let call = self.call(topic, &snapshot, origin);
        let (_, by_queue) = route(&snapshot, &accepted);
        Ok(copies(&call, &accepted, &by_queue))
    }

    /// Checks one message and gives it its id (and sequence number on a FIFO topic).
    /// A publication against the schema its attributes `sluice.type` and `sluice.version` name
    /// (with `MessageStructure=json`, its `default` text is checked).
    async fn check_schema(&self, topic: &str, p: &Publication) -> Result<Result<(), Violation>, StoreError> {
        let text = |name: &str| match p.attributes.get(name).map(|a| &a.value) {
            Some(AttributeData::Text(t)) => Some(t.as_str()),
            _ if name == ATTRIBUTE_TYPE => p.schema_type.as_deref(),
            _ => None,
        };
        let default;
        let body = if p.structure_json {
            default = serde_json::from_str::<serde_json::Value>(&p.message)
                .ok()
                .and_then(|v| v.get("default").and_then(|d| d.as_str().map(str::to_owned)))
                .unwrap_or_default();
            default.as_str()
        } else {
            p.message.as_str()
        };
        let namespace = sluice_core::name::Namespace::of_stored(topic);
        self.schemas
            .check_message(&namespace, text(ATTRIBUTE_TYPE), text(ATTRIBUTE_VERSION), body.as_bytes(), false)
            .await
    }

    fn accept(&self, snapshot: &Snapshot, index: usize, publication: Publication) -> Result<Accepted, Invalid> {
        let Checked { default_text, per_protocol, dedup_id } = check(&snapshot.topic, &publication)?;
        Ok(Accepted {
            index,
            message_id: publication.message_id.clone().unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
            links: trace::publication_links(&publication.attributes),
            publication,
            default_text,
            per_protocol,
            sequence_number: snapshot.topic.fifo.then(|| format!("{:020}", self.next_sequence())),
            dedup_id,
        })
    }

    fn call<'a>(&'a self, topic: &str, snapshot: &'a Snapshot, origin: &'a Origin) -> Call<'a> {
        Call {
            topics: self,
            snapshot,
            origin,
            topic_arn: self.arns.topic(topic),
            timestamp: envelope::timestamp(self.clock.now_ms()),
        }
    }
}

/// Matches every message against every confirmed subscription: how many copies each gets, and
/// the copies grouped by queue.
fn route<'s>(snapshot: &'s Snapshot, accepted: &[Accepted]) -> (Vec<usize>, BTreeMap<&'s str, Vec<Delivery>>) {
    let mut matched = vec![0usize; accepted.len()];
    let mut by_queue: BTreeMap<&str, Vec<Delivery>> = BTreeMap::new();
    for (a, message) in accepted.iter().enumerate() {
        for (s, live) in snapshot.subscriptions.iter().enumerate() {
            if live.record.pending || !matches(live, message) {
                continue;
            }
            matched[a] += 1;
            by_queue.entry(live.record.queue.as_str()).or_default().push(Delivery { accepted: a, subscription: s });
        }
    }
    (matched, by_queue)
}

/// Every copy to send, built, by queue.
/// Whether a copy in `queue` is listed in the trace: a push subscription's own queue is not
/// (the push is listed once its endpoint took it).
fn traced_queue(queue: &str) -> bool {
    !queue.starts_with(PUSH_QUEUE_PREFIX)
}

/// A correlated publish's trace entry.
fn publish_entry(topic: &str, message: &Accepted) -> Option<TraceEntry> {
    Some(message.links.as_ref()?.entry(TraceKind::Publish, &message.message_id, format!("topic:{topic}")))
}

fn copies(
    call: &Call<'_>,
    accepted: &[Accepted],
    by_queue: &BTreeMap<&str, Vec<Delivery>>,
) -> Vec<(String, Vec<NewMessage>)> {
    by_queue
        .iter()
        .map(|(queue, copies)| {
            let messages = copies.iter().map(|c| call.build(&accepted[c.accepted], c.subscription)).collect();
            (queue.to_string(), messages)
        })
        .collect()
}

/// Why the store did not take a copy.
#[derive(Debug, Clone)]
enum Refusal {
    /// It cannot take writes now: retrying the publish later may succeed.
    Unavailable(StoreError),
    /// It never will (the queue is gone or refuses this message).
    Never(String),
    /// The queue (named) is full and rejects: retrying later may succeed.
    Full(String),
}

impl Refusal {
    fn of(e: StoreError) -> Refusal {
        match e {
            StoreError::Broker(b) => Refusal::Never(b.to_string()),
            other => Refusal::Unavailable(other),
        }
    }
}

fn matches(live: &Live, message: &Accepted) -> bool {
    match &live.filter {
        None => true,
        Some(filter) => {
            let view = MessageView::new(&message.publication.attributes, message.text(live.record.protocol));
            filter.matches(&view)
        }
    }
}

impl Call<'_> {
    fn subscription(&self, s: usize) -> &SubscriptionRecord {
        &self.snapshot.subscriptions[s].record
    }

    /// The copy of `message` for subscription `s`.
    fn build(&self, message: &Accepted, s: usize) -> NewMessage {
        let sub = self.subscription(s);
        let topic = &self.snapshot.topic;
        let text = message.text(sub.protocol);
        let body = if sub.raw { text.to_string() } else { self.envelope(message, sub) };
        if sub.protocol.is_push() {
            let delivery = PushDelivery {
                format: PUSH_FORMAT,
                message_type: MessageType::Notification,
                message_id: message.message_id.clone(),
                topic_arn: self.topic_arn.clone(),
                subscription_arn: Some(self.topics.arns.subscription(&sub.topic, &sub.id)),
                raw: sub.raw,
                body,
            };
            // The worker lists a delivered push in the publication's trace.
            let mut copy = delivery.to_message();
            copy.envelope.correlation_id = message.links.as_ref().map(|l| l.correlation_id.clone());
            return copy;
        }
        let p = &message.publication;
        // Raw delivery turns message attributes into queue message attributes, except with
        // MessageStructure=json (SNS sends attributes only when the structure is not json).
        let attributes = if sub.raw && !p.structure_json { p.attributes.clone() } else { BTreeMap::new() };
        let mut system_attributes = BTreeMap::new();
        system_attributes.insert(SENDER_ID.to_string(), text_attribute(&self.origin.sender));
        let (group_id, dedup_id) = match (topic.fifo, sub.queue_fifo) {
            (true, true) => {
                if let Some(dedup) = &message.dedup_id {
                    system_attributes.insert(DEDUP_ID.to_string(), text_attribute(dedup));
                }
                (p.group_id.clone(), message.dedup_id.clone())
            }
            // A FIFO topic's groups mean nothing to a standard queue (as in SNS).
            (true, false) => (None, None),
            // Standard topics forward a group id to standard queues: fair queues.
            (false, false) => (p.group_id.clone(), None),
            // Refused at subscribe; a queue recreated as FIFO since refuses the copy.
            (false, true) => (p.group_id.clone(), None),
        };
        // A correlated publish's copies carry its correlation id and name it as their cause.
        let correlation_id = message.links.as_ref().map(|l| l.correlation_id.clone());
        if correlation_id.is_some() {
            system_attributes.extend([trace::causation_attribute(message.message_id.clone())]);
        }
        NewMessage {
            body: body.into_bytes(),
            attributes,
            system_attributes,
            envelope: MessageEnvelope { group_id, correlation_id, ..Default::default() },
            dedup_id,
            ..Default::default()
        }
    }

    fn envelope(&self, message: &Accepted, sub: &SubscriptionRecord) -> String {
        let topic = &self.snapshot.topic;
        let unsubscribe_url = format!(
            "{}/?Action=Unsubscribe&SubscriptionArn={}",
            self.origin.base_url,
            self.topics.arns.subscription(&sub.topic, &sub.id)
        );
        let cert_url = format!("{}/{SIGNING_CERT_FILE}", self.origin.base_url);
        let version = topic.attributes.get("SignatureVersion").map_or("1", String::as_str);
        let p = &message.publication;
        // MessageStructure=json sends no attributes (as SNS).
        let no_attributes = BTreeMap::new();
        envelope::notification(&Notification {
            message_id: &message.message_id,
            sequence_number: message.sequence_number.as_deref(),
            topic_arn: &self.topic_arn,
            subject: p.subject.as_deref(),
            message: message.text(sub.protocol),
            timestamp: &self.timestamp,
            signing: (!topic.fifo).then_some((version, cert_url.as_str())),
            unsubscribe_url: &unsubscribe_url,
            attributes: if p.structure_json { &no_attributes } else { &p.attributes },
        })
    }

    /// Handles a copy its subscription can never take: into the subscription's dead-letter
    /// queue when it has one, else dropped. `Some(cause)` when the dead-letter queue could not
    /// take it for now either (the message is then not acknowledged).
    async fn dead_letter(&self, message: &Accepted, s: usize, reason: &str) -> Option<StoreError> {
        let sub = self.subscription(s);
        let Some(dlq) = &sub.dead_letter_queue else {
            tracing::warn!(topic = %sub.topic, subscription = %sub.id, queue = %sub.queue, "dropped a message the subscription cannot take: {reason}");
            metrics::counter!("sluice_topic_deliveries_failed_total", "outcome" => "dropped").increment(1);
            return None;
        };
        let mut copy = self.build(message, s);
        if !dlq.ends_with(FIFO_SUFFIX) {
            copy.dedup_id = None;
        }
        let outcome = match self.topics.store.send(dlq, vec![copy]).await {
            Ok(mut entries) => match entries.pop() {
                Some(Err(e)) => Err(Refusal::Never(e.to_string())),
                _ => Ok(()),
            },
            Err(e) => Err(Refusal::of(e)),
        };
        match outcome {
            Ok(()) => {
                tracing::warn!(topic = %sub.topic, subscription = %sub.id, dead_letter_queue = %dlq, "dead-lettered a message the subscription cannot take: {reason}");
                metrics::counter!("sluice_topic_deliveries_failed_total", "outcome" => "dead_lettered").increment(1);
                None
            }
            Err(Refusal::Unavailable(cause)) => Some(cause),
            Err(Refusal::Never(why) | Refusal::Full(why)) => {
                tracing::warn!(topic = %sub.topic, subscription = %sub.id, "dropped a message neither the subscription ({reason}) nor its dead-letter queue {dlq} ({why}) can take");
                metrics::counter!("sluice_topic_deliveries_failed_total", "outcome" => "dropped").increment(1);
                None
            }
        }
    }
}

fn text_attribute(value: &str) -> AttributeValue {
    AttributeValue { data_type: "String".to_string(), value: AttributeData::Text(value.to_string()) }
}
