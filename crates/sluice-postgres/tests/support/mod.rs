//! Shared by the PostgreSQL tests: the database from `SLUICE_TEST_PG_URL`, and a fresh schema
//! per test so that tests run in parallel without seeing each other.
//!
//! Without `SLUICE_TEST_PG_URL` a test says it was skipped and passes; with it, a database that
//! cannot be reached fails the test.

#![allow(dead_code)]

use sluice_postgres::{PostgresOptions, PostgresStore};

/// The test database's URL, if the environment names one.
pub fn test_url() -> Option<String> {
    std::env::var("SLUICE_TEST_PG_URL").ok().filter(|u| !u.is_empty())
}

/// Evaluates to the test database's URL, or returns from the test after saying it was skipped.
#[macro_export]
macro_rules! pg_url_or_skip {
    () => {
        match $crate::support::test_url() {
            Some(url) => url,
            None => {
                eprintln!("SLUICE_TEST_PG_URL is not set: skipped (set it to run against PostgreSQL)");
                return;
            }
        }
    };
}

/// A uniquely named schema, dropped (with everything in it) when this is dropped.
pub struct TestSchema {
    pub url: String,
    pub name: String,
}

impl TestSchema {
    pub fn new(url: &str) -> TestSchema {
        let name = format!("sluice_test_{}", uuid::Uuid::now_v7().simple());
        TestSchema { url: url.to_string(), name }
    }

    pub fn options(&self) -> PostgresOptions {
        PostgresOptions { schema: Some(self.name.clone()), pool_connections_max: 4, ..Default::default() }
    }

    /// A store over this schema (created and migrated on first use). Panics, loudly, when the
    /// database cannot be reached: a set `SLUICE_TEST_PG_URL` promises a database.
    pub async fn connect(&self) -> PostgresStore {
        PostgresStore::connect(&self.url, self.options())
            .await
            .unwrap_or_else(|e| panic!("SLUICE_TEST_PG_URL={} is set but unusable: {e}", self.url))
    }

    /// A store whose background sweeper stays asleep, for tests that sweep by hand.
    pub async fn connect_without_sweeper(&self) -> PostgresStore {
        let options = PostgresOptions { sweep_interval_ms: 3_600_000, ..self.options() };
        PostgresStore::connect(&self.url, options)
            .await
            .unwrap_or_else(|e| panic!("SLUICE_TEST_PG_URL={} is set but unusable: {e}", self.url))
    }

    /// A plain connection whose search_path is this schema.
    pub async fn client(&self) -> tokio_postgres::Client {
        let mut config: tokio_postgres::Config = self.url.parse().expect("SLUICE_TEST_PG_URL parses");
        config.options(format!("-c search_path={}", self.name));
        let (client, connection) = config.connect(tokio_postgres::NoTls).await.expect("connect to the test database");
        tokio::spawn(connection);
        client
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        let (url, name) = (self.url.clone(), self.name.clone());
        // Drop runs inside the test's runtime, which cannot be blocked on: use a thread of our own.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            runtime.block_on(async {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
                tokio::spawn(connection);
                client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE")).await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) && !std::thread::panicking() {
            panic!("could not drop test schema {}: {dropped:?}", self.name);
        }
    }
}
