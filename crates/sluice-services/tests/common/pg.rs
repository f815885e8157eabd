//! A PostgreSQL store in a schema of its own, for the tests that also run over PostgreSQL when
//! `SLUICE_TEST_PG_URL` is set (CI sets it, so there they fail loudly if it is unusable).
//! Included by `#[path]` from each test crate that needs it.

use std::sync::Arc;

use sluice_postgres::{PostgresOptions, PostgresStore};

/// A store in a fresh schema, dropped by [`Schema::drop_schema`]; `None` (and a note on
/// stderr) when `SLUICE_TEST_PG_URL` is not set.
pub async fn store() -> Option<(Arc<PostgresStore>, Schema)> {
    let Some(url) = std::env::var("SLUICE_TEST_PG_URL").ok().filter(|u| !u.is_empty()) else {
        eprintln!("SLUICE_TEST_PG_URL is not set: skipped (set it to run against PostgreSQL)");
        return None;
    };
    let schema = format!("sluice_test_{}", uuid::Uuid::now_v7().simple());
    let options = PostgresOptions { schema: Some(schema.clone()), pool_connections_max: 4, ..Default::default() };
    let store = PostgresStore::connect(&url, options)
        .await
        .unwrap_or_else(|e| panic!("SLUICE_TEST_PG_URL={url} is set but unusable: {e}"));
    Some((Arc::new(store), Schema { url, schema }))
}

/// The schema a test's store lives in.
pub struct Schema {
    url: String,
    schema: String,
}

impl Schema {
    /// Drops the schema and everything in it, once the test is done with the store.
    pub async fn drop_schema(self) {
        let (client, connection) = tokio_postgres::connect(&self.url, tokio_postgres::NoTls).await.expect("connect");
        tokio::spawn(connection);
        let sql = format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.schema);
        client.batch_execute(&sql).await.expect("drop the schema");
    }
}
