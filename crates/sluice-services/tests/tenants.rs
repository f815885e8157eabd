//! Tenants' quotas on a manual clock. Resources: the creation past `max_resources` is refused
//! with the limit and the count, counting the tenant's queues and topics and no one else's.
//! Stored bytes: a send past `max_stored_bytes` is refused, against usage at most
//! `USAGE_REFRESH_MS` old (so the bound on an overshoot is what is sent within it), and a
//! drained tenant is let in again. Rate: the tenant's bucket refuses the call past its burst.
//! Two nodes over one PostgreSQL database: quotas set on one hold on the other within
//! `QUOTA_REFRESH_MS`, and their rate bucket is one for both (runs when `SLUICE_TEST_PG_URL` is set).

use std::sync::Arc;

use sluice_clock::ManualClock;
use sluice_core::name::Namespace;
use sluice_core::rate::RateLimit;
use sluice_core::{NewMessage, QueueAttributes};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_services::tenants::{QUOTA_REFRESH_MS, Quotas, TenantError, USAGE_REFRESH_MS};
use sluice_services::topics::Arns;
use sluice_services::{Services, ServicesConfig};
use sluice_store::{ReceiveRequest, Store};

const T0_MS: u64 = 1_700_000_000_000;

fn services(store: Arc<dyn Store>, clock: &ManualClock) -> Arc<Services> {
    let arns = Arns { region: "us-east-1".into(), account: "000000000000".into() };
    Services::new(store, Arc::new(clock.clone()), ServicesConfig::new(arns))
}

fn embedded(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    let config = EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync };
    Arc::new(EmbeddedStore::open(config).expect("open"))
}

fn quota_of(result: Result<(), TenantError>) -> (&'static str, u64, u64) {
    match result {
        Err(TenantError::Quota(q)) => (q.quota, q.limit, q.used),
        other => panic!("expected a quota refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_refuse_past_their_limits_and_only_for_their_tenant() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = embedded(&dir);
    let clock = ManualClock::new(T0_MS);
    let services = services(store.clone(), &clock);
    let tenants = services.tenants();
    let (acme, beta) = (Namespace::of("acme"), Namespace::of("beta"));

    let quotas = Quotas { max_resources: Some(2), max_stored_bytes: Some(100), rate_limit: None };
    let set = tenants.set("acme", quotas).await.expect("set");
    assert_eq!((set.quotas, set.usage.resources, set.updated_ms), (quotas, 0, Some(T0_MS)));
    assert!(matches!(tenants.set("default", quotas).await, Err(TenantError::Invalid(_))), "the default has none");
    let bad = Quotas { max_stored_bytes: Some(0), ..Quotas::default() };
    assert!(matches!(tenants.set("acme", bad).await, Err(TenantError::Invalid(_))));

    // Resources: a queue and a topic of acme's fill its two; beta's and the default's do not count.
    tenants.check_create(&acme).await.expect("first");
    store.create_queue("acme~orders", QueueAttributes::default()).await.expect("queue");
    services.topics().create_topic("acme~events", false, Default::default(), Default::default()).await.expect("topic");
    store.create_queue("beta~orders", QueueAttributes::default()).await.expect("beta's");
    store.create_queue("acmeish", QueueAttributes::default()).await.expect("the default's");
    assert_eq!(quota_of(tenants.check_create(&acme).await), ("max_resources", 2, 2));
    // A stream counts as well: three of two.
    tenants.set("acme", Quotas { max_resources: Some(3), ..quotas }).await.expect("raise");
    tenants.check_create(&acme).await.expect("room for a third");
    store.create_stream("acme~clicks", Default::default()).await.expect("stream");
    assert_eq!(quota_of(tenants.check_create(&acme).await), ("max_resources", 3, 3));
    tenants.set("acme", quotas).await.expect("back to two");
    tenants.check_create(&beta).await.expect("beta has no quotas");
    assert_eq!(tenants.get("acme").await.expect("get").usage.resources, 3);

    // Stored bytes: 60 sent, 40 more fit, 41 do not.
    let body = |n: usize| vec![NewMessage { body: vec![b'x'; n], ..Default::default() }];
    tenants.check_write(&acme, 60).await.expect("room");
    store.send("acme~orders", body(60)).await.expect("send");
    // The usage read before the send stands for USAGE_REFRESH_MS: the overshoot bound.
    tenants.check_write(&acme, 100).await.expect("within the refresh bound the old usage stands");
    clock.advance_by(USAGE_REFRESH_MS);
    tenants.check_write(&acme, 40).await.expect("exactly at the limit");
    assert_eq!(quota_of(tenants.check_write(&acme, 41).await), ("max_stored_bytes", 100, 60));
    assert_eq!(tenants.get("acme").await.expect("get").usage.stored_bytes, 60);
    // Draining lets the tenant in again once its usage is read anew.
    let got = store.receive("acme~orders", ReceiveRequest { max: 10, wait_ms: None, visibility_timeout_ms: None });
    let receipts: Vec<String> = got.await.expect("receive").into_iter().map(|r| r.receipt).collect();
    store.ack("acme~orders", receipts).await.expect("ack");
    clock.advance_by(USAGE_REFRESH_MS);
    tenants.check_write(&acme, 100).await.expect("drained");

    // Rate: a burst of 2, then a refusal with a retry time; beta is not held back.
    let limit = RateLimit { per_second: 1, burst: 2 };
    tenants.set("acme", Quotas { rate_limit: Some(limit), ..quotas }).await.expect("set rate");
    assert_eq!(tenants.admit(&acme).await.expect("1"), None);
    assert_eq!(tenants.admit(&acme).await.expect("2"), None);
    assert!(tenants.admit(&acme).await.expect("3").is_some_and(|ms| ms <= 1_000));
    assert_eq!(tenants.admit(&beta).await.expect("beta"), None);

    let listed = tenants.list().await.expect("list");
    assert_eq!(listed.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["acme"]);
    tenants.remove("acme").await.expect("remove");
    assert!(matches!(tenants.remove("acme").await, Err(TenantError::NotFound(_))));
    clock.advance_by(QUOTA_REFRESH_MS);
    tenants.check_create(&acme).await.expect("no quotas any more");
}

async fn pg_node(url: &str, schema: &str) -> Arc<dyn Store> {
    let options = sluice_postgres::PostgresOptions { schema: Some(schema.to_string()), ..Default::default() };
    Arc::new(
        sluice_postgres::PostgresStore::connect(url, options)
            .await
            .unwrap_or_else(|e| panic!("SLUICE_TEST_PG_URL={url} is set but unusable: {e}")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_set_on_one_node_hold_on_the_other_within_the_refresh_bound() {
    let Some(url) = std::env::var("SLUICE_TEST_PG_URL").ok().filter(|u| !u.is_empty()) else {
        eprintln!("SLUICE_TEST_PG_URL is not set: skipped (set it to run against PostgreSQL)");
        return;
    };
    let schema = format!("sluice_test_{}", uuid::Uuid::now_v7().simple());
    let clock = ManualClock::new(T0_MS);
    let (store_a, store_b) = (pg_node(&url, &schema).await, pg_node(&url, &schema).await);
    let (a, b) = (services(store_a.clone(), &clock), services(store_b, &clock));
    let acme = Namespace::of("acme");

    // Node b reads acme's quotas (none) and remembers them.
    b.tenants().check_create(&acme).await.expect("no quotas yet");
    store_a.create_queue("acme~one", QueueAttributes::default()).await.expect("queue");
    let limit = RateLimit { per_second: 1, burst: 3 };
    a.tenants()
        .set("acme", Quotas { max_resources: Some(1), rate_limit: Some(limit), ..Quotas::default() })
        .await
        .expect("set");
    assert_eq!(quota_of(a.tenants().check_create(&acme).await), ("max_resources", 1, 1), "at once on its node");
    clock.advance_by(QUOTA_REFRESH_MS - 1);
    b.tenants().check_create(&acme).await.expect("inside the bound the other node may still let it by");
    clock.advance_by(1);
    assert_eq!(quota_of(b.tenants().check_create(&acme).await), ("max_resources", 1, 1), "once the bound passed");

    // One bucket for both nodes: three tokens in all, whichever node takes them.
    let taken = [
        a.tenants().admit(&acme).await.expect("a"),
        b.tenants().admit(&acme).await.expect("b"),
        a.tenants().admit(&acme).await.expect("a"),
        b.tenants().admit(&acme).await.expect("b"),
    ];
    assert_eq!(taken.iter().filter(|t| t.is_none()).count(), 3, "{taken:?}");
    assert!(taken[3].is_some());
}
