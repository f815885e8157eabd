//! The store conformance suite, run against PostgreSQL: one fresh schema per test.

mod support;

use std::sync::Arc;

use async_trait::async_trait;
use sluice_store::Store;
use sluice_store::conformance::Backend;

struct Postgres {
    schema: support::TestSchema,
}

impl Postgres {
    fn new(url: &str) -> Postgres {
        Postgres { schema: support::TestSchema::new(url) }
    }
}

#[async_trait]
impl Backend for Postgres {
    /// A new store over the same schema: what a restart (or another node) sees.
    async fn open(&self) -> Arc<dyn Store> {
        Arc::new(self.schema.connect().await)
    }

    /// Dropping the store stops its tasks and closes its connections.
    async fn close(&self, store: Arc<dyn Store>) {
        drop(store);
    }

    /// Another node over the same schema.
    async fn open_peer(&self) -> Option<Arc<dyn Store>> {
        Some(Arc::new(self.schema.connect().await))
    }
}

sluice_store::conformance_tests!(Postgres::new(&pg_url_or_skip!()));
