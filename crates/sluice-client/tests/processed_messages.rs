//! The idempotent consumer against PostgreSQL: a message delivered three times (released back
//! twice before its ack) changes the business table once, a handler that failed before its
//! commit leaves nothing and the next delivery runs it, and the sweep deletes old ids.
//!
//! Runs when `SLUICE_TEST_PG_URL` is set (a database that cannot be reached then fails the
//! test); says it was skipped otherwise. Each run works in a schema of its own.

use std::sync::Arc;
use std::time::Duration;

use sluice_api::{VisibilityEntry, VisibilityRequest};
use sluice_client::{Client, ProcessedMessages};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_store::Store;
use tokio::net::TcpListener;

async fn database(url: &str, schema: &str) -> tokio_postgres::Client {
    let (admin, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("SLUICE_TEST_PG_URL={url} is set but unusable: {e}"));
    tokio::spawn(connection);
    admin.batch_execute(&format!("CREATE SCHEMA {schema}")).await.expect("schema");
    let mut config: tokio_postgres::Config = url.parse().expect("SLUICE_TEST_PG_URL parses");
    config.options(format!("-c search_path={schema}"));
    let (client, connection) = config.connect(tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(connection);
    client
}

async fn balance(db: &tokio_postgres::Client) -> i64 {
    db.query_one("SELECT balance FROM accounts WHERE id = 1", &[]).await.expect("balance").get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_delivered_three_times_changes_the_business_table_once() {
    let Some(url) = std::env::var("SLUICE_TEST_PG_URL").ok().filter(|u| !u.is_empty()) else {
        eprintln!("SLUICE_TEST_PG_URL is not set: skipped (set it to run against PostgreSQL)");
        return;
    };
    let schema = format!("sluice_processed_{:016x}", rand::random::<u64>());
    let mut db = database(&url, &schema).await;
    db.batch_execute(
        "CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL); INSERT INTO accounts VALUES (1, 0)",
    )
    .await
    .expect("business table");
    let processed = ProcessedMessages::new();
    processed.create_table(&db).await.expect("processed table");
    processed.create_table(&db).await.expect("creating it again changes nothing");

    let dir = tempfile::tempdir().expect("temp dir");
    let store = Arc::new(
        EmbeddedStore::open(EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync })
            .expect("open"),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(sluice_server::run(listener, store.clone() as Arc<dyn Store>, async move {
        let _ = stopped.await;
    }));
    let sluice = Client::new(&format!("http://{addr}")).expect("client");
    sluice.create_queue(&serde_json::from_value(serde_json::json!({ "name": "deposits" })).unwrap()).await.unwrap();
    let id = sluice.send_text("deposits", "10").await.expect("send");

    // Delivery 1: the handler fails before its commit; nothing of it stays.
    let first = sluice.receive("deposits", 1, 1_000).await.expect("receive").remove(0);
    {
        let tx = processed.begin(&mut db, "billing", &first.id).await.expect("begin").expect("a new message");
        tx.execute("UPDATE accounts SET balance = balance + 10 WHERE id = 1", &[]).await.expect("update");
        // Dropped without commit: the change and the id roll back together.
    }
    assert_eq!(balance(&db).await, 0);
    let release = |receipt: String| VisibilityRequest { entries: vec![VisibilityEntry { receipt, timeout_ms: 0 }] };
    sluice.change_visibility("deposits", &release(first.receipt.clone().expect("receipt"))).await.expect("release");

    // Deliveries 2 and 3: the first commits its change with the id; the redelivery is skipped.
    let mut applied = 0;
    for delivery in 2..=3 {
        let message = sluice.receive("deposits", 1, 1_000).await.expect("receive").remove(0);
        assert_eq!(message.id, id);
        assert_eq!(message.receive_count, delivery);
        if let Some(tx) = processed.begin(&mut db, "billing", &message.id).await.expect("begin") {
            let amount: i64 = message.body.as_deref().unwrap_or("0").parse().expect("amount");
            tx.execute("UPDATE accounts SET balance = balance + $1 WHERE id = 1", &[&amount]).await.expect("update");
            tx.commit().await.expect("commit");
            applied += 1;
        }
        let receipt = message.receipt.clone().expect("receipt");
        if delivery == 2 {
            // The ack is lost (say the consumer died): the message comes back.
            sluice.change_visibility("deposits", &release(receipt)).await.expect("release");
        } else {
            sluice.ack("deposits", [receipt]).await.expect("ack");
        }
    }
    assert_eq!(applied, 1, "three deliveries, one change");
    assert_eq!(balance(&db).await, 10);
    // Another consumer of the same id handles it once on its own account.
    assert!(processed.begin(&mut db, "audit", &id).await.expect("begin").is_some());

    assert_eq!(processed.sweep(&db, Duration::from_secs(3600)).await.expect("sweep"), 0, "recent ids stay");
    assert_eq!(processed.sweep(&db, Duration::ZERO).await.expect("sweep"), 1, "old ids go");

    let _ = stop.send(());
    server.await.expect("server").expect("served");
    tokio::task::spawn_blocking(move || store.close()).await.expect("close");
    db.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.expect("drop schema");
}
