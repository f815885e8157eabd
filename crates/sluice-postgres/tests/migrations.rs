//! Versioned migrations: applied once, by one node even when several start together, and a
//! database migrated by a newer Sluice is refused.

mod support;

use sluice_postgres::migrate::MIGRATIONS;
use sluice_postgres::{ConnectError, MigrateError, PostgresStore, migrate_with};

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
    assert_eq!(versions, (1..=known).collect::<Vec<_>>(), "each migration recorded once");

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
