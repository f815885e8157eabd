//! The outbox relay against real databases: SQLite files always, PostgreSQL when
//! `SLUICE_TEST_PG_URL` is set and MySQL/MariaDB when `SLUICE_TEST_MYSQL_URL` is (each fails
//! loudly when set and unreachable, and says it was skipped when unset). Every test has its
//! own schema, tables or file, so they run in parallel beside other tests on the same server.

mod failures;
mod mysql_db;
mod outbox;
mod postgres_db;
mod proxy;
mod scenarios;
mod schemas;
mod sqlite_db;
mod support;

use sluice_services::relays::AfterPublish;

use outbox::Outbox;

macro_rules! skip_unless {
    ($url:expr, $var:literal) => {
        match $url {
            Some(url) => url,
            None => {
                eprintln!(concat!($var, " is not set: skipped"));
                return;
            }
        }
    };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_rows_arrive_in_order_and_are_deleted() {
    scenarios::in_order(&sqlite_db::Sqlite::new(), AfterPublish::Delete).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_rows_arrive_in_order_and_are_marked() {
    scenarios::in_order(&sqlite_db::Sqlite::new(), AfterPublish::Mark).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_writers_take_turns_so_ids_follow_commits() {
    let db = sqlite_db::Sqlite::new();
    let open = db.begin().await;
    let refused = db.try_insert_now().expect_err("a second writer must wait for the first");
    assert!(refused.to_string().contains("locked"), "{refused}");
    db.commit(open).await;
    db.try_insert_now().expect("writes once the first committed");
    scenarios::concurrent(&sqlite_db::Sqlite::new(), 7).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_rows_arrive_in_order_deleted_and_marked() {
    let url = skip_unless!(postgres_db::url(), "SLUICE_TEST_PG_URL");
    for after in [AfterPublish::Delete, AfterPublish::Mark] {
        let db = postgres_db::Postgres::new(&url).await;
        scenarios::in_order(&db, after).await;
        db.drop_table().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_late_commits_are_published_in_order() {
    let url = skip_unless!(postgres_db::url(), "SLUICE_TEST_PG_URL");
    let db = postgres_db::Postgres::new(&url).await;
    scenarios::late_commit(&db).await;
    scenarios::concurrent(&db, 11).await;
    db.drop_table().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_rows_arrive_in_order_deleted_and_marked() {
    let url = skip_unless!(mysql_db::url(), "SLUICE_TEST_MYSQL_URL");
    for after in [AfterPublish::Delete, AfterPublish::Mark] {
        let db = mysql_db::Mysql::new(&url).await;
        scenarios::in_order(&db, after).await;
        db.drop_table().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_late_commits_are_published_in_order() {
    let url = skip_unless!(mysql_db::url(), "SLUICE_TEST_MYSQL_URL");
    let db = mysql_db::Mysql::new(&url).await;
    scenarios::late_commit(&db).await;
    scenarios::concurrent(&db, 13).await;
    db.drop_table().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_refused_row_goes_to_the_dead_letter_queue() {
    failures::refused_row_is_dead_lettered(&sqlite_db::Sqlite::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_rows_breaking_a_queue_schema_are_dead_lettered() {
    schemas::schema_refusals_are_dead_lettered(schemas::Kind::Queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_rows_breaking_a_topic_schema_are_dead_lettered() {
    schemas::schema_refusals_are_dead_lettered(schemas::Kind::Topic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_rows_breaking_a_stream_schema_are_dead_lettered() {
    schemas::schema_refusals_are_dead_lettered(schemas::Kind::Stream).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_lease_is_taken_over_when_a_node_dies() {
    failures::lease_is_taken_over(&sqlite_db::Sqlite::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_source_goes_away_and_comes_back() {
    let url = skip_unless!(postgres_db::url(), "SLUICE_TEST_PG_URL");
    let db = postgres_db::Postgres::new(&url).await;
    let config: tokio_postgres::Config = url.parse().expect("a PostgreSQL URL");
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("postgres").to_string();
    let dbname = config.get_dbname().unwrap_or("postgres").to_string();
    let via = |p: u16| format!("postgres://{user}@127.0.0.1:{p}/{dbname}");
    failures::source_goes_away(&db, &format!("{host}:{port}"), via).await;
    db.drop_table().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_source_goes_away_and_comes_back() {
    let url = skip_unless!(mysql_db::url(), "SLUICE_TEST_MYSQL_URL");
    let db = mysql_db::Mysql::new(&url).await;
    let opts = mysql_async::Opts::from_url(&url).expect("a MySQL URL");
    let (host, port) = (opts.ip_or_hostname().to_string(), opts.tcp_port());
    let user = opts.user().unwrap_or("root").to_string();
    let dbname = opts.db_name().unwrap_or("test").to_string();
    let via = |p: u16| format!("mysql://{user}@127.0.0.1:{p}/{dbname}");
    failures::source_goes_away(&db, &format!("{host}:{port}"), via).await;
    db.drop_table().await;
}

/// The README's example: an order and its `order.placed` row in one transaction; the relay
/// routes by `aggregatetype` to the topic `order-events`, which fans out to two queues. The
/// raw copy carries the row id as `outbox_id`; the envelope's `MessageId` is the row id too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_orders_fan_out_through_a_routed_topic() {
    use std::collections::BTreeMap;

    use sluice_core::QueueAttributes;
    use sluice_services::relays::{RelaySpec, Target};
    use sluice_services::topics::{Endpoint, Origin};

    let db = sqlite_db::Sqlite::new();
    let f = support::Fixture::new().await;
    let topics = f.services().topics();
    topics.create_topic("order-events", false, BTreeMap::new(), BTreeMap::new()).await.expect("topic");
    let origin = Origin { base_url: "http://localhost".into(), sender: "test".into() };
    for queue in ["billing", "shipping"] {
        f.store.create_queue(queue, QueueAttributes::default()).await.expect("queue");
    }
    let raw = BTreeMap::from([("RawMessageDelivery".to_string(), "true".to_string())]);
    topics.subscribe("order-events", Endpoint::Queue("billing".into()), &raw, &origin).await.expect("billing");
    topics
        .subscribe("order-events", Endpoint::Queue("shipping".into()), &BTreeMap::new(), &origin)
        .await
        .expect("shipping");
    let spec = RelaySpec {
        target: Target::Topic("${routedByValue}-events".into()),
        route_by: Some("aggregatetype".into()),
        ..support::spec("orders", &db.url(), &db.table())
    };
    f.services().create_relay(spec).await.expect("create the relay");
    let id = outbox::insert_one(&db, "order-42", "{\"order\":42}").await;
    let billing = support::drain(&f.store, "billing", 1).await;
    assert_eq!((billing[0].id.as_str(), billing[0].body.as_str()), (id.as_str(), "{\"order\":42}"));
    let shipping = support::drain(&f.store, "shipping", 1).await;
    let envelope: serde_json::Value = serde_json::from_str(&shipping[0].body).expect("the SNS envelope");
    assert_eq!(envelope["MessageId"], id.as_str(), "the row id is the message id");
    assert_eq!(envelope["Message"], "{\"order\":42}");
    assert_eq!(envelope["MessageAttributes"]["outbox_type"]["Value"], "order.placed");
}

/// A FIFO queue target groups by aggregate and deduplicates by row id: a row published again
/// (here: marked unpublished by hand, as a crash between publish and mark would leave it) is
/// dropped by the queue's deduplication, and each aggregate keeps its order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_fifo_target_drops_a_row_published_twice() {
    use sluice_core::QueueAttributes;
    use sluice_services::relays::{RelaySpec, Target};

    let db = sqlite_db::Sqlite::new();
    let f = support::Fixture::new().await;
    f.store
        .create_queue("out.fifo", QueueAttributes { fifo: true, ..QueueAttributes::default() })
        .await
        .expect("queue");
    let spec = RelaySpec {
        target: Target::Queue("out.fifo".into()),
        after_publish: AfterPublish::Mark,
        ..support::spec("fifo", &db.url(), &db.table())
    };
    f.services().create_relay(spec).await.expect("create the relay");
    let mut written = Vec::new();
    for (aggregate, body) in [("a", "a1"), ("b", "b1"), ("a", "a2")] {
        written.push((outbox::insert_one(&db, aggregate, body).await, aggregate.to_string(), body.to_string()));
    }
    let got = support::drain(&f.store, "out.fifo", 3).await;
    assert_eq!(support::check_delivery(&written, &got), 0);
    support::eventually("every row marked", || async { db.marked().await == 3 }).await;
    db.exec("UPDATE outbox SET published_at = NULL");
    support::eventually("the rows marked again", || async { db.marked().await == 3 }).await;
    let request = sluice_store::ReceiveRequest { max: 10, wait_ms: Some(200), visibility_timeout_ms: None };
    let again = f.store.receive("out.fifo", request).await.expect("receive");
    assert!(again.is_empty(), "the copies were deduplicated by row id: {again:?}");
}

/// A stream target keys each record by its aggregate id (one partition per aggregate, in row
/// order), carries the row id as `outbox_id` and as the dedup id, and a row relayed again (here:
/// marked unpublished by hand, as a crash between append and mark would leave it) gets its first
/// offset back instead of a second record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_stream_target_keys_by_aggregate_and_dedups_a_row_relayed_twice() {
    use sluice_core::stream::StreamConfig;
    use sluice_services::relays::{OUTBOX_ID, RelaySpec, Target};
    use sluice_store::{ReadFrom, ReadRequest};

    let db = sqlite_db::Sqlite::new();
    let f = support::Fixture::new().await;
    let config = StreamConfig { partitions: 4, ..StreamConfig::default() };
    f.store.create_stream("order-log", config).await.expect("stream");
    let spec = RelaySpec {
        target: Target::Stream("order-log".into()),
        after_publish: AfterPublish::Mark,
        ..support::spec("log", &db.url(), &db.table())
    };
    f.services().create_relay(spec).await.expect("create the relay");
    let mut written = Vec::new();
    for (aggregate, body) in [("a", "a1"), ("b", "b1"), ("a", "a2"), ("c", "c1"), ("a", "a3")] {
        written.push((outbox::insert_one(&db, aggregate, body).await, aggregate.to_string(), body.to_string()));
    }
    support::eventually("every row marked", || async { db.marked().await == 5 }).await;
    let read_all = || async {
        let mut records = Vec::new();
        for partition in 0..4 {
            let request = ReadRequest { partition, from: ReadFrom::Offset(0), max: 100, wait_ms: 0 };
            records.extend(f.store.read("order-log", request).await.expect("read").records);
        }
        records
    };
    let records = read_all().await;
    assert_eq!(records.len(), 5, "{records:?}");
    for (id, aggregate, body) in &written {
        let record = records.iter().find(|r| r.headers.get(OUTBOX_ID) == Some(id)).expect("every row appended");
        assert_eq!(record.key.as_deref(), Some(aggregate.as_bytes()));
        assert_eq!((record.body.as_slice(), record.dedup_id.as_deref()), (body.as_bytes(), Some(id.as_str())));
        assert_eq!(record.r#type.as_deref(), Some("order.placed"));
    }
    let a: Vec<&[u8]> = records.iter().filter(|r| r.key.as_deref() == Some(b"a")).map(|r| r.body.as_slice()).collect();
    assert_eq!(a, [b"a1".as_slice(), b"a2", b"a3"], "one partition per aggregate, in row order");
    let mut partitions: Vec<u32> =
        records.iter().filter(|r| r.key.as_deref() == Some(b"a")).map(|r| r.partition).collect();
    partitions.dedup();
    assert_eq!(partitions.len(), 1, "an aggregate's rows share a partition");

    db.exec("UPDATE outbox SET published_at = NULL");
    support::eventually("the rows marked again", || async { db.marked().await == 5 }).await;
    assert_eq!(read_all().await.len(), 5, "the rows relayed again were deduplicated by row id");
}
