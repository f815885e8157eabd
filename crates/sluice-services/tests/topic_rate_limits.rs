//! A topic's rate limit (the attribute `RateLimit`): each published message takes a token from
//! the topic's bucket, the first messages of a call go ahead and the rest are refused as
//! `RateLimited` with the wait, on the store's clock (a manual one here, so refill is exact);
//! a bad limit is refused when set; and two nodes over one PostgreSQL database share one bucket
//! (when `SLUICE_TEST_PG_URL` is set).

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_clock::ManualClock;
use sluice_core::QueueAttributes;
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_services::topics::{Arns, Endpoint, Origin, Publication, PublishError, RATE_LIMIT, TopicError};
use sluice_services::{Services, ServicesConfig};
use sluice_store::Store;

#[path = "common/pg.rs"]
mod pg;

const T0_MS: u64 = 1_798_761_600_000;

fn origin() -> Origin {
    Origin { base_url: "http://127.0.0.1:9324".into(), sender: "000000000000".into() }
}

fn services(store: Arc<dyn Store>, clock: &ManualClock) -> Arc<Services> {
    let arns = Arns { region: "us-east-1".into(), account: "000000000000".into() };
    Services::new(store, Arc::new(clock.clone()), ServicesConfig::new(arns))
}

fn limited(per_second: u64, burst: u64) -> BTreeMap<String, String> {
    BTreeMap::from([(RATE_LIMIT.to_string(), format!(r#"{{"per_second": {per_second}, "burst": {burst}}}"#))])
}

/// Publishes `n` messages in one call: which went ahead (`None`) and each refusal's wait.
async fn publish(node: &Services, topic: &str, n: usize) -> Vec<Option<u64>> {
    let publications = (0..n).map(|i| Publication { message: format!("m{i}"), ..Default::default() }).collect();
    let results = node.topics().publish(topic, publications, &origin()).await.expect("publish");
    results
        .into_iter()
        .map(|r| match r {
            Ok(_) => None,
            Err(PublishError::RateLimited { retry_after_ms }) => Some(retry_after_ms),
            Err(other) => panic!("not a rate-limit refusal: {other}"),
        })
        .collect()
}

async fn depth(store: &Arc<dyn Store>, queue: &str) -> u64 {
    store.get_queue(queue).await.expect("queue").stats.visible
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_refuses_past_its_bucket_and_refills_on_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0_MS);
    let config = EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync };
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open_with_clock(config, Arc::new(clock.clone())).unwrap());
    store.create_queue("copies", QueueAttributes::default()).await.unwrap();
    let node = services(store.clone(), &clock);
    node.topics().create_topic("orders", false, limited(2, 3), BTreeMap::new()).await.unwrap();
    node.topics().subscribe("orders", Endpoint::Queue("copies".into()), &BTreeMap::new(), &origin()).await.unwrap();

    // A full bucket of 3: the first three of five go ahead, the last two wait for a token
    // (half a second at 2 a second).
    assert_eq!(publish(&node, "orders", 5).await, [None, None, None, Some(500), Some(500)]);
    assert_eq!(depth(&store, "copies").await, 3, "a refused message sends no copy");
    clock.advance_by(499);
    assert_eq!(publish(&node, "orders", 1).await, [Some(1)]);
    clock.advance_by(1);
    assert_eq!(publish(&node, "orders", 2).await, [None, Some(500)]);
    // Ten seconds refill at most the burst.
    clock.advance_by(10_000);
    assert_eq!(publish(&node, "orders", 4).await, [None, None, None, Some(500)]);
    assert_eq!(depth(&store, "copies").await, 7);

    // Removed, nothing is refused; a bad limit is refused with its field.
    let remove = BTreeMap::from([(RATE_LIMIT.to_string(), String::new())]);
    node.topics().set_topic_attributes("orders", &remove).await.unwrap();
    assert_eq!(publish(&node, "orders", 10).await, vec![None; 10]);
    for (bad, field) in [(limited(0, 1), "rate_limit.per_second"), (limited(1, 0), "rate_limit.burst")] {
        match node.topics().set_topic_attributes("orders", &bad).await {
            Err(TopicError::Invalid(invalid)) => assert_eq!(invalid.field, field),
            other => panic!("{other:?}"),
        }
    }
    let text = BTreeMap::from([(RATE_LIMIT.to_string(), "fast".to_string())]);
    assert!(matches!(node.topics().set_topic_attributes("orders", &text).await, Err(TopicError::Invalid(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_share_a_topics_bucket_on_postgresql() {
    let Some((store, schema)) = pg::store().await else { return };
    let store: Arc<dyn Store> = store;
    let clock = ManualClock::new(T0_MS);
    let (a, b) = (services(store.clone(), &clock), services(store.clone(), &clock));
    // One token a second: within this test the bucket refills by a few tokens at most.
    a.topics().create_topic("orders", false, limited(1, 6), BTreeMap::new()).await.unwrap();
    let first = publish(&a, "orders", 4).await;
    let second = publish(&b, "orders", 4).await;
    let granted = first.iter().chain(&second).filter(|r| r.is_none()).count();
    assert!((6..=7).contains(&granted), "one bucket of 6 (plus at most a refill) for both nodes: {first:?} {second:?}");
    assert_eq!(first, [None; 4], "the first node's four fit in the bucket");
    assert!(second.iter().any(Option::is_some), "the second node finds the bucket the first drained: {second:?}");
    schema.drop_schema().await;
}
