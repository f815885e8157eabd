//! Versioned migrations: applied once, by one node even when several start together, and a
//! database migrated by a newer Sluice is refused.

mod support;

use sluice_postgres::migrate::MIGRATIONS;
use sluice_postgres::{ConnectError, MigrateError, PostgresStore, migrate_with};
use sluice_store::prelude::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_apply_once_and_a_newer_schema_is_refused() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let known = MIGRATIONS.last().unwrap().version;

    // Several nodes starting at once over an empty schema.
    let opens = (0..3).map(|_| PostgresStore::connect(&url, schema.options()));
    for store in futures::future::join_all(opens).await {
        store.expect("every node opens");
    }
    let report = migrate_with(&url, &schema.options()).await.unwrap();
    assert_eq!((report.applied, report.version), (vec![], known), "nothing left to apply");
    let client = schema.client().await;
    let versions: Vec<i32> = client
        .query("SELECT version FROM schema_migrations ORDER BY version", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, MIGRATIONS.iter().map(|m| m.version).collect::<Vec<_>>(), "each migration recorded once");

    client.execute("INSERT INTO schema_migrations (version, name) VALUES (999, 'from the future')", &[]).await.unwrap();
    match PostgresStore::connect(&url, schema.options()).await {
        Err(ConnectError::Migrate(MigrateError::TooNew { found: 999, known: k })) => assert_eq!(k, known),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("opened a schema migrated by a newer version"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_is_an_error_not_a_hang() {
    let _url = pg_url_or_skip!();
    let options = sluice_postgres::PostgresOptions::default();
    // Port 1 on loopback: nothing listens there.
    let result = PostgresStore::connect("postgres://postgres@127.0.0.1:1/none?connect_timeout=5", options).await;
    assert!(matches!(result, Err(ConnectError::Database(_))), "{:?}", result.err());
    let bad = sluice_postgres::PostgresOptions { schema: Some("Bad-Name".into()), ..Default::default() };
    assert!(matches!(PostgresStore::connect(&_url, bad).await, Err(ConnectError::Schema(_))));
}

/// A schema that an earlier Sluice migrated to version 2 (before FIFO queues and fair
/// scheduling), holding a queue with messages, upgrades in place when a store opens it: the
/// messages are delivered, the queue reads as standard, and `sluice_send` keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_2_schema_with_messages_upgrades_in_place() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    admin.batch_execute(&format!("CREATE SCHEMA \"{}\"", schema.name)).await.unwrap();
    let client = schema.client().await;
    // What version 2's `migrate::apply` left behind.
    client
        .batch_execute(
            "CREATE TABLE schema_migrations (
                 version    integer PRIMARY KEY,
                 name       text NOT NULL,
                 applied_at timestamptz NOT NULL DEFAULT now()
             )",
        )
        .await
        .unwrap();
    for m in &MIGRATIONS[..2] {
        client.batch_execute(m.sql).await.unwrap();
        client
            .execute("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", &[&m.version, &m.name])
            .await
            .unwrap();
    }
    client
        .batch_execute(
            "INSERT INTO queues (name, attributes, visibility_timeout_ms, delay_ms, retention_ms, message_bytes_max,
                                 created_at, modified_at)
             VALUES ('old', '{\"visibility_timeout_ms\": 30000}', 30000, 0, 345600000, 1048576,
                     sluice_now_ms(), sluice_now_ms());
             SELECT sluice_send('old', convert_to('first', 'UTF8'), envelope => '{\"group_id\": \"a\"}');
             SELECT sluice_send('old', convert_to('second', 'UTF8'), envelope => '{\"group_id\": \"a\"}');
             SELECT sluice_send('old', convert_to('third', 'UTF8'));",
        )
        .await
        .unwrap();

    let store = schema.connect().await;
    let version: i32 = client.query_one("SELECT max(version) FROM schema_migrations", &[]).await.unwrap().get(0);
    assert_eq!(version, MIGRATIONS.last().unwrap().version);
    let queue = store.get_queue("old").await.unwrap();
    assert!(!queue.attributes.fifo);
    assert_eq!(queue.stats.visible, 3);
    client.execute("SELECT sluice_send('old', convert_to('fourth', 'UTF8'))", &[]).await.unwrap();
    let request = sluice_store::ReceiveRequest { max: 10, wait_ms: Some(0), visibility_timeout_ms: None };
    let got = store.receive("old", request).await.unwrap();
    let bodies: Vec<&[u8]> = got.iter().map(|m| m.message.content.body.as_slice()).collect();
    // Group a and the ungrouped group take turns ('' first by name): fair scheduling applies
    // to messages sent before the upgrade too.
    assert_eq!(bodies, [&b"third"[..], b"first", b"fourth", b"second"]);
}
