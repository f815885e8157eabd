//! The topics service over a real embedded store: topics, subscriptions of every kind, fan-out
//! with envelopes, raw delivery and filter policies, FIFO topics, failures that must not stop
//! other subscriptions, and the cache between two nodes.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use sluice_core::broker::{MoveOutcome, QueueView};
use sluice_core::message::AttributeData;
use sluice_core::{AttributeValue, NewMessage, QueueAttributes, QueueAttributesPatch, Sent};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_store::{
    EntryResults, NackEntry, PeekedMessage, QueueStore, ReceiveRequest, ReceivedMessage, Store, StoreError, StoreParts,
    VisibilityRule,
};

use super::publish::Published;
use super::push::{MessageType, PushDelivery};
use super::*;
use crate::trace::{ATTRIBUTE_CORRELATION_ID, TRACE_RETENTION_MS_DEFAULT, TraceKind, Traces};

struct Fixture {
    topics: Topics,
    store: Arc<dyn Store>,
    embedded: Arc<EmbeddedStore>,
    _dir: tempfile::TempDir,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.embedded.close();
    }
}

fn arns() -> Arns {
    Arns { region: "us-east-1".into(), account: "000000000000".into() }
}

fn origin() -> Origin {
    Origin { base_url: "http://localhost:9324".into(), sender: "000000000000".into() }
}

fn schemas(store: &Arc<dyn Store>) -> Arc<crate::schemas::Schemas> {
    crate::schemas::Schemas::new(store.clone(), Arc::new(sluice_clock::SystemClock))
}

fn traces(store: &Arc<dyn Store>) -> Arc<Traces> {
    Arc::new(Traces::new(store.clone(), Arc::new(sluice_clock::SystemClock), TRACE_RETENTION_MS_DEFAULT))
}

fn topics_over(store: &Arc<dyn Store>) -> Topics {
    Topics::new(store.clone(), arns(), Arc::new(sluice_clock::SystemClock), schemas(store), traces(store))
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let embedded = Arc::new(
        EmbeddedStore::open(EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync })
            .unwrap(),
    );
    let store: Arc<dyn Store> = embedded.clone();
    Fixture { topics: topics_over(&store), store, embedded, _dir: dir }
}

fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn text(data_type: &str, value: &str) -> AttributeValue {
    AttributeValue { data_type: data_type.into(), value: AttributeData::Text(value.into()) }
}

fn publication(message: &str, attributes: &[(&str, AttributeValue)]) -> Publication {
    Publication {
        message: message.into(),
        attributes: attributes.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
        ..Default::default()
    }
}

impl Fixture {
    async fn queue(&self, name: &str, fifo: bool) {
        let attributes = QueueAttributes { fifo, ..QueueAttributes::default() };
        self.store.create_queue(name, attributes).await.unwrap();
    }

    async fn subscribe(&self, topic: &str, queue: &str, attributes: &[(&str, &str)]) -> SubscriptionRecord {
        self.topics.subscribe(topic, Endpoint::Queue(queue.into()), &attrs(attributes), &origin()).await.unwrap().0
    }

    async fn publish_one(&self, topic: &str, p: Publication) -> Published {
        let mut results = self.topics.publish(topic, vec![p], &origin()).await.unwrap();
        results.pop().unwrap().unwrap()
    }

    /// Everything in a queue now, in order.
    async fn drain(&self, queue: &str) -> Vec<ReceivedMessage> {
        let request = ReceiveRequest { max: 100, wait_ms: Some(0), visibility_timeout_ms: None };
        self.store.receive(queue, request).await.unwrap()
    }

    async fn bodies(&self, queue: &str) -> Vec<String> {
        self.drain(queue).await.iter().map(|m| String::from_utf8_lossy(&m.message.content.body).into_owned()).collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_created_once_and_refuse_other_attributes_or_tags() {
    let f = fixture();
    let (t, created) = f
        .topics
        .create_topic("orders", false, attrs(&[("DisplayName", "Orders")]), attrs(&[("team", "a")]))
        .await
        .unwrap();
    assert!(created);
    assert_eq!(t.attributes["DisplayName"], "Orders");
    let (_, created) = f.topics.create_topic("orders", false, BTreeMap::new(), BTreeMap::new()).await.unwrap();
    assert!(!created, "the same name without attributes is the same topic");
    let e =
        f.topics.create_topic("orders", false, attrs(&[("DisplayName", "Other")]), BTreeMap::new()).await.unwrap_err();
    assert_eq!(e, TopicError::TopicExists { name: "orders".into(), tags: false });
    let e = f
        .topics
        .create_topic("orders", false, BTreeMap::new(), attrs(&[("team", "a"), ("more", "b")]))
        .await
        .unwrap_err();
    assert_eq!(e, TopicError::TopicExists { name: "orders".into(), tags: true });
    assert!(matches!(
        f.topics.create_topic("bad name", false, BTreeMap::new(), BTreeMap::new()).await,
        Err(TopicError::Invalid(_))
    ));
    assert!(matches!(
        f.topics.create_topic("x.fifo", false, BTreeMap::new(), BTreeMap::new()).await,
        Err(TopicError::Invalid(_))
    ));
    f.topics
        .create_topic("events.fifo", true, attrs(&[("ContentBasedDeduplication", "true")]), BTreeMap::new())
        .await
        .unwrap();

    let names: Vec<String> = f.topics.list_topics("", None, 10).await.unwrap().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["events.fifo", "orders"]);
    f.topics.set_topic_attribute("orders", "DisplayName", "Renamed").await.unwrap();
    f.topics.tag_topic("orders", &attrs(&[("env", "prod")])).await.unwrap();
    f.topics.untag_topic("orders", &["team".to_string()]).await.unwrap();
    let view = f.topics.get_topic("orders").await.unwrap();
    assert_eq!(view.record.attributes["DisplayName"], "Renamed");
    assert_eq!(view.record.tags, attrs(&[("env", "prod")]));
    assert_eq!(view.arn, "arn:aws:sns:us-east-1:000000000000:orders");
    assert!(f.topics.delete_topic("orders").await.unwrap());
    assert!(!f.topics.delete_topic("orders").await.unwrap());
    assert!(matches!(f.topics.get_topic("orders").await, Err(TopicError::TopicNotFound(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_with_envelope_raw_delivery_and_filters() {
    let f = fixture();
    f.topics.create_topic("t", false, BTreeMap::new(), BTreeMap::new()).await.unwrap();
    for q in ["enveloped", "raw", "red", "cheap"] {
        f.queue(q, false).await;
    }
    let enveloped = f.subscribe("t", "enveloped", &[]).await;
    f.subscribe("t", "raw", &[("RawMessageDelivery", "true")]).await;
    f.subscribe("t", "red", &[("FilterPolicy", r#"{"color": ["red"]}"#)]).await;
    f.subscribe(
        "t",
        "cheap",
        &[("FilterPolicy", r#"{"price": [{"numeric": ["<", 10]}]}"#), ("FilterPolicyScope", "MessageBody")],
    )
    .await;

    let red = f
        .publish_one(
            "t",
            Publication {
                subject: Some("hello".into()),
                ..publication("{\"price\": 5}", &[("color", text("String", "red"))])
            },
        )
        .await;
    assert_eq!(red.deliveries, 4);
    let blue = f.publish_one("t", publication("{\"price\": 50}", &[("color", text("String", "blue"))])).await;
    assert_eq!(blue.deliveries, 2);

    let got = f.drain("enveloped").await;
    assert_eq!(got.len(), 2);
    let envelope: Value = serde_json::from_slice(&got[0].message.content.body).unwrap();
    assert_eq!(envelope["Type"], "Notification");
    assert_eq!(envelope["MessageId"], red.message_id.as_str());
    assert_eq!(envelope["TopicArn"], "arn:aws:sns:us-east-1:000000000000:t");
    assert_eq!(envelope["Subject"], "hello");
    assert_eq!(envelope["Message"], "{\"price\": 5}");
    assert_eq!(envelope["MessageAttributes"]["color"], serde_json::json!({"Type": "String", "Value": "red"}));
    assert_eq!(envelope["SignatureVersion"], "1");
    assert_eq!(
        envelope["UnsubscribeURL"],
        format!(
            "http://localhost:9324/?Action=Unsubscribe&SubscriptionArn=arn:aws:sns:us-east-1:000000000000:t:{}",
            enveloped.id
        )
    );
    assert!(got[0].message.content.attributes.is_empty(), "enveloped copies carry attributes in the envelope only");

    let raw = f.drain("raw").await;
    assert_eq!(
        raw.iter().map(|m| m.message.content.body.clone()).collect::<Vec<_>>(),
        [b"{\"price\": 5}".to_vec(), b"{\"price\": 50}".to_vec()]
    );
    assert_eq!(raw[0].message.content.attributes["color"], text("String", "red"));
    assert_eq!(f.drain("red").await.len(), 1, "attribute filter");
    assert_eq!(f.drain("cheap").await.len(), 1, "body filter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_are_idempotent_per_endpoint_and_checked() {
    let f = fixture();
    f.topics.create_topic("t", false, BTreeMap::new(), BTreeMap::new()).await.unwrap();
    let (a, created) = f
        .topics
        .subscribe("t", Endpoint::Queue("q".into()), &attrs(&[("RawMessageDelivery", "true")]), &origin())
        .await
        .unwrap();
    assert!(created, "a queue that does not exist yet can be subscribed, as in SNS");
    assert!(!a.pending);
    let (b, created) = f.topics.subscribe("t", Endpoint::Queue("q".into()), &BTreeMap::new(), &origin()).await.unwrap();
    assert_eq!((b.id.as_str(), created), (a.id.as_str(), false));
    let e = f
        .topics
        .subscribe("t", Endpoint::Queue("q".into()), &attrs(&[("RawMessageDelivery", "false")]), &origin())
        .await
        .unwrap_err();
    assert!(matches!(e, TopicError::SubscriptionExists(_)), "{e:?}");
    assert!(matches!(
        f.topics.subscribe("nope", Endpoint::Queue("q".into()), &BTreeMap::new(), &origin()).await,
        Err(TopicError::TopicNotFound(_))
    ));
    let e = f.topics.subscribe("t", Endpoint::Queue("q.fifo".into()), &BTreeMap::new(), &origin()).await.unwrap_err();
    let TopicError::Invalid(i) = e else { panic!("{e:?}") };
    assert!(i.sns_message.contains("FIFO SQS Queues can not be subscribed to standard SNS topics"));
    let e = f
        .topics
        .subscribe("t", Endpoint::Queue("q2".into()), &attrs(&[("FilterPolicy", "{invalid")]), &origin())
        .await
        .unwrap_err();
    let TopicError::Invalid(i) = e else { panic!("{e:?}") };
    assert!(
        i.sns_message.starts_with("Invalid parameter: Attributes Reason: FilterPolicy: failed to parse JSON."),
        "{}",
        i.sns_message
    );

    let updated = f.topics.set_subscription_attribute("t", &a.id, "FilterPolicy", r#"{"k": ["v"]}"#).await.unwrap();
    assert_eq!(updated.filter_policy.as_deref(), Some(r#"{"k": ["v"]}"#));
    let e = f.topics.set_subscription_attribute("t", &a.id, "FilterPolicyScope", "Nope").await.unwrap_err();
    assert!(matches!(e, TopicError::Invalid(_)));
    let listed = f.topics.list_subscriptions(Some("t"), None, 10).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(f.topics.list_subscriptions(None, None, 10).await.unwrap().len(), 1);
    assert!(f.topics.unsubscribe("t", &a.id).await.unwrap());
    assert!(!f.topics.unsubscribe("t", &a.id).await.unwrap());
    assert!(matches!(f.topics.get_subscription("t", &a.id).await, Err(TopicError::SubscriptionNotFound(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_topics_forward_groups_and_dedup_ids_to_fifo_queues() {
    let f = fixture();
    f.topics
        .create_topic("t.fifo", true, attrs(&[("ContentBasedDeduplication", "true")]), BTreeMap::new())
        .await
        .unwrap();
    f.queue("q.fifo", true).await;
    f.queue("std", false).await;
    f.subscribe("t.fifo", "q.fifo", &[("RawMessageDelivery", "true")]).await;
    f.subscribe("t.fifo", "std", &[]).await;
    let grouped = |body: &str, group: &str| Publication { group_id: Some(group.into()), ..publication(body, &[]) };
    let first = f.publish_one("t.fifo", grouped("one", "g1")).await;
    let second = f.publish_one("t.fifo", grouped("two", "g1")).await;
    assert!(first.sequence_number.is_some());
    assert!(second.sequence_number > first.sequence_number, "sequence numbers increase");
    // The same body again: content-based deduplication in the FIFO queue drops it.
    f.publish_one("t.fifo", grouped("one", "g1")).await;
    let got = f.drain("q.fifo").await;
    let bodies: Vec<_> = got.iter().map(|m| String::from_utf8_lossy(&m.message.content.body).into_owned()).collect();
    assert_eq!(bodies, ["one", "two"], "in order, the duplicate dropped by the queue's deduplication");
    assert_eq!(got[0].message.meta.group_id.as_deref(), Some("g1"));
    assert_eq!(
        got[0].message.content.system_attributes["MessageDeduplicationId"].value,
        AttributeData::Text(sluice_core::broker::content_dedup_id(b"one"))
    );
    // The standard queue gets every copy (no dedup there) without the group, in envelopes.
    let std = f.drain("std").await;
    assert_eq!(std.len(), 3);
    assert_eq!(std[0].message.meta.group_id, None);
    let envelope: Value = serde_json::from_slice(&std[0].message.content.body).unwrap();
    assert_eq!(envelope["SequenceNumber"], first.sequence_number.clone().unwrap());
    assert!(envelope.get("Signature").is_none(), "FIFO envelopes carry no signature");
    let results = f.topics.publish("t.fifo", vec![publication("no group", &[])], &origin()).await.unwrap();
    assert!(matches!(&results[0], Err(PublishError::Invalid(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_subscriptions_wait_for_confirmation_in_their_delivery_queue() {
    let f = fixture();
    f.topics.create_topic("t", false, BTreeMap::new(), BTreeMap::new()).await.unwrap();
    let (sub, created) = f
        .topics
        .subscribe(
            "t",
            Endpoint::Url("http://127.0.0.1:9/hook".into()),
            &attrs(&[("RawMessageDelivery", "true")]),
            &origin(),
        )
        .await
        .unwrap();
    assert!(created && sub.pending);
    assert_eq!(sub.protocol, Protocol::Http);
    assert_eq!(sub.queue, format!("sluice-push-{}", sub.id));
    // Nothing is delivered before the confirmation.
    assert_eq!(f.publish_one("t", publication("early", &[])).await.deliveries, 0);
    let waiting = f.drain(&sub.queue).await;
    assert_eq!(waiting.len(), 1);
    let confirmation = PushDelivery::from_body(&waiting[0].message.content.body).unwrap();
    assert_eq!(confirmation.message_type, MessageType::SubscriptionConfirmation);
    let body: Value = serde_json::from_str(&confirmation.body).unwrap();
    let token = body["Token"].as_str().unwrap().to_string();
    assert!(body["SubscribeURL"].as_str().unwrap().contains(&token));

    assert!(matches!(f.topics.confirm_subscription("t", &"0".repeat(64)).await, Err(TopicError::Invalid(_))));
    assert!(
        matches!(f.topics.confirm_subscription("t", "short").await, Err(TopicError::Invalid(i)) if i.sns_message == "Invalid token")
    );
    let confirmed = f.topics.confirm_subscription("t", &token).await.unwrap();
    assert!(!confirmed.pending);
    f.publish_one("t", publication("after", &[])).await;
    let deliveries = f.drain(&sub.queue).await;
    assert_eq!(deliveries.len(), 1);
    let delivery = PushDelivery::from_body(&deliveries[0].message.content.body).unwrap();
    assert_eq!(
        (delivery.message_type, delivery.raw, delivery.body.as_str()),
        (MessageType::Notification, true, "after")
    );
    assert_eq!(delivery.subscription_arn, Some(format!("arn:aws:sns:us-east-1:000000000000:t:{}", sub.id)));

    // HTTP endpoints are refused on FIFO topics, and deleting the topic removes the queue.
    f.topics.create_topic("f.fifo", true, BTreeMap::new(), BTreeMap::new()).await.unwrap();
    assert!(
        f.topics.subscribe("f.fifo", Endpoint::Url("http://h/".into()), &BTreeMap::new(), &origin()).await.is_err()
    );
    assert!(f.topics.delete_topic("t").await.unwrap());
    assert!(f.store.get_queue(&sub.queue).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_that_cannot_take_a_message_does_not_stop_the_others() {
    let f = fixture();
    f.topics.create_topic("t", false, BTreeMap::new(), BTreeMap::new()).await.unwrap();
    f.queue("ok", false).await;
    f.queue("dlq", false).await;
    let small = QueueAttributes { message_bytes_max: 1024, ..QueueAttributes::default() };
    f.store.create_queue("small", small).await.unwrap();
    f.subscribe("t", "ok", &[]).await;
    f.subscribe("t", "missing", &[]).await;
    f.subscribe(
        "t",
        "small",
        &[("RedrivePolicy", r#"{"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:dlq"}"#)],
    )
    .await;
    let published = f.publish_one("t", publication(&"x".repeat(2000), &[])).await;
    assert_eq!(published.deliveries, 3);
    assert_eq!(f.drain("ok").await.len(), 1);
    assert_eq!(f.drain("small").await.len(), 0);
    assert_eq!(f.drain("dlq").await.len(), 1, "the copy the queue refused went to the dead-letter queue");
}

/// A store whose sends into one queue fail as a full disk does.
struct FullFor {
    inner: Arc<dyn Store>,
    queue: &'static str,
}

#[async_trait]
impl QueueStore for FullFor {
    async fn create_queue(&self, n: &str, a: QueueAttributes) -> Result<(QueueView, bool), StoreError> {
        self.inner.create_queue(n, a).await
    }
    async fn get_queue(&self, n: &str) -> Result<QueueView, StoreError> {
        self.inner.get_queue(n).await
    }
    async fn list_queues(&self, p: &str, a: Option<&str>, l: usize) -> Result<Vec<QueueView>, StoreError> {
        self.inner.list_queues(p, a, l).await
    }
    async fn update_queue(&self, n: &str, p: QueueAttributesPatch) -> Result<QueueView, StoreError> {
        self.inner.update_queue(n, p).await
    }
    async fn delete_queue(&self, n: &str) -> Result<(), StoreError> {
        self.inner.delete_queue(n).await
    }
    async fn purge_queue(&self, n: &str) -> Result<u64, StoreError> {
        self.inner.purge_queue(n).await
    }
    async fn send(&self, q: &str, m: Vec<NewMessage>) -> Result<EntryResults<Sent>, StoreError> {
        if q == self.queue {
            return Err(StoreError::StorageFull("test".into()));
        }
        self.inner.send(q, m).await
    }
    async fn receive(&self, q: &str, r: ReceiveRequest) -> Result<Vec<ReceivedMessage>, StoreError> {
        self.inner.receive(q, r).await
    }
    async fn ack(&self, q: &str, r: Vec<String>) -> Result<EntryResults<()>, StoreError> {
        self.inner.ack(q, r).await
    }
    async fn change_visibility(
        &self,
        q: &str,
        e: Vec<(String, u64)>,
        rule: VisibilityRule,
    ) -> Result<EntryResults<()>, StoreError> {
        self.inner.change_visibility(q, e, rule).await
    }
    async fn nack(&self, q: &str, e: Vec<NackEntry>) -> Result<EntryResults<()>, StoreError> {
        self.inner.nack(q, e).await
    }
    async fn peek(&self, q: &str, l: usize) -> Result<Vec<PeekedMessage>, StoreError> {
        self.inner.peek(q, l).await
    }
    async fn move_messages(&self, f: &str, t: Option<&str>, m: u64) -> Result<MoveOutcome, StoreError> {
        self.inner.move_messages(f, t, m).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failure_for_one_subscription_is_reported_and_the_others_get_the_message() {
    let f = fixture();
    let failing = StoreParts {
        queues: Arc::new(FullFor { inner: f.store.clone(), queue: "broken" }),
        records: f.store.clone(),
        commits: f.store.clone(),
        logs: f.store.clone(),
        jobs: f.store.clone(),
        events: f.store.clone(),
        rates: f.store.clone(),
        status: f.store.clone(),
    };
    let failing: Arc<dyn Store> = Arc::new(failing);
    let failing = topics_over(&failing);
    failing.create_topic("t", false, BTreeMap::new(), BTreeMap::new()).await.unwrap();
    for q in ["a", "broken", "b"] {
        f.queue(q, false).await;
        failing.subscribe("t", Endpoint::Queue(q.into()), &BTreeMap::new(), &origin()).await.unwrap();
    }
    let results = failing.publish("t", vec![publication("m", &[])], &origin()).await.unwrap();
    match &results[0] {
        Err(PublishError::Incomplete { delivered: 2, matched: 3, cause: StoreError::StorageFull(_) }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(f.bodies("a").await.len(), 1);
    assert_eq!(f.bodies("b").await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_node_sees_a_new_subscription_within_the_cache_time() {
    let f = fixture();
    let other = topics_over(&f.store);
    f.topics.create_topic("t", false, BTreeMap::new(), BTreeMap::new()).await.unwrap();
    f.queue("q", false).await;
    assert_eq!(
        other.publish("t", vec![publication("before", &[])], &origin()).await.unwrap()[0].as_ref().unwrap().deliveries,
        0
    );
    f.subscribe("t", "q", &[]).await;
    // This node sees its own change at once.
    assert_eq!(f.publish_one("t", publication("here", &[])).await.deliveries, 1);
    tokio::time::sleep(std::time::Duration::from_millis(limits::SUBSCRIPTION_CACHE_MS + 50)).await;
    let results = other.publish("t", vec![publication("there", &[])], &origin()).await.unwrap();
    assert_eq!(results[0].as_ref().unwrap().deliveries, 1, "the other node read the subscriptions again");
    assert_eq!(f.bodies("q").await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correlated_publish_and_its_copies_are_traced_and_the_copies_name_it_as_their_cause() {
    let f = fixture();
    f.topics.create_topic("orders", false, BTreeMap::new(), BTreeMap::new()).await.unwrap();
    for q in ["billing", "audit"] {
        f.queue(q, false).await;
        f.subscribe("orders", q, &[]).await;
    }
    let published =
        f.publish_one("orders", publication("placed", &[(ATTRIBUTE_CORRELATION_ID, text("String", "order-9"))])).await;
    f.publish_one("orders", publication("not correlated", &[])).await;

    let trace = traces(&f.store).read("order-9").await.unwrap();
    let listed: Vec<_> = trace.entries.iter().map(|(e, depth)| (e.kind, e.target.clone(), *depth)).collect();
    assert_eq!(listed.len(), 3, "the publish and one copy per queue, the other publish not: {listed:?}");
    assert_eq!(listed[0], (TraceKind::Publish, "topic:orders".to_string(), 0));
    assert_eq!(trace.entries[0].0.id, published.message_id);
    let mut copies: Vec<_> = listed[1..].to_vec();
    copies.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(
        copies,
        vec![(TraceKind::Message, "queue:audit".into(), 1), (TraceKind::Message, "queue:billing".into(), 1)]
    );
    for q in ["billing", "audit"] {
        let got = f.drain(q).await;
        let content =
            &got.iter().find(|m| m.message.content.envelope.correlation_id.is_some()).unwrap().message.content;
        assert_eq!(content.envelope.correlation_id.as_deref(), Some("order-9"));
        assert_eq!(crate::trace::causation_id(&content.system_attributes), Some(published.message_id.clone()));
        let entry = trace.entries.iter().find(|(e, _)| e.target == format!("queue:{q}")).unwrap();
        assert_eq!(entry.0.causation_id.as_deref(), Some(published.message_id.as_str()));
    }
}
