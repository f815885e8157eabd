//! The store's own vacuuming: churn past a small `vacuum_dead_rows_max` and the store runs
//! `VACUUM` on `messages` by itself (the server's autovacuum may be off, as on the project's
//! machine, and is not counted: `vacuum_count` is manual vacuums only); with the limit at 0 it
//! never does.

mod support;

use std::time::{Duration, Instant};

use sluice_core::{NewMessage, QueueAttributes};
use sluice_postgres::{PostgresOptions, PostgresStore};
use sluice_store::ReceiveRequest;
use sluice_store::prelude::*;

/// The limit the tests set: small, so that a few hundred messages pass it.
const DEAD_ROWS_MAX: u64 = 100;
/// Messages each test sends, receives and acks: each leaves at least two dead row versions
/// (the receive's update, the ack's delete).
const CHURN_MESSAGES: usize = 500;
const CHECK_INTERVAL_MS: u64 = 100;
/// Longest wait for the statistics to show the churn: a backend reports them when it goes idle,
/// at most about once a second, or after 10 s of idleness.
const STATS_WAIT: Duration = Duration::from_secs(30);

async fn connect(schema: &support::TestSchema, vacuum_dead_rows_max: u64) -> PostgresStore {
    let options =
        PostgresOptions { vacuum_dead_rows_max, vacuum_check_interval_ms: CHECK_INTERVAL_MS, ..schema.options() };
    PostgresStore::connect(&schema.url, options).await.expect("SLUICE_TEST_PG_URL is set but unusable")
}

async fn churn(store: &PostgresStore) {
    store.create_queue("q", QueueAttributes::default()).await.unwrap();
    for _ in 0..CHURN_MESSAGES / 10 {
        let batch = (0..10).map(|_| NewMessage { body: b"x".to_vec(), ..Default::default() }).collect();
        store.send("q", batch).await.unwrap();
        let request = ReceiveRequest { max: 10, wait_ms: Some(0), visibility_timeout_ms: None };
        let got = store.receive("q", request).await.unwrap();
        assert_eq!(got.len(), 10);
        let acked = store.ack("q", got.into_iter().map(|m| m.receipt).collect()).await.unwrap();
        assert!(acked.iter().all(Result::is_ok));
    }
}

/// `messages`' manual vacuums so far, and its dead rows as the statistics last heard.
async fn messages_stats(client: &tokio_postgres::Client) -> (i64, i64) {
    let row = client
        .query_one(
            "SELECT vacuum_count, n_dead_tup FROM pg_stat_user_tables
             WHERE schemaname = current_schema() AND relname = 'messages'",
            &[],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_vacuums_messages_once_dead_rows_pass_the_limit() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = connect(&schema, DEAD_ROWS_MAX).await;
    let client = schema.client().await;
    assert_eq!(messages_stats(&client).await.0, 0, "a new table was never vacuumed");
    churn(&store).await;
    let started = Instant::now();
    loop {
        let (vacuums, dead) = messages_stats(&client).await;
        if vacuums > 0 {
            break;
        }
        assert!(
            started.elapsed() < STATS_WAIT,
            "no vacuum within {STATS_WAIT:?} of churning {CHURN_MESSAGES} messages ({dead} dead rows shown)"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_limit_at_zero_the_store_never_vacuums() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let store = connect(&schema, 0).await;
    let client = schema.client().await;
    churn(&store).await;
    // Wait until the statistics show the churn past the limit the other test uses, then for
    // many check intervals: a store that vacuums would have done it by then.
    let started = Instant::now();
    loop {
        let (_, dead) = messages_stats(&client).await;
        if dead > DEAD_ROWS_MAX as i64 {
            break;
        }
        assert!(started.elapsed() < STATS_WAIT, "the statistics never showed the churn ({dead} dead rows)");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(20 * CHECK_INTERVAL_MS)).await;
    assert_eq!(messages_stats(&client).await.0, 0, "no vacuum with the limit at 0");
}
