//! The store conformance suite, run against the embedded backend in a temporary directory.

use std::sync::Arc;

use async_trait::async_trait;
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_store::Store;
use sluice_store::conformance::Backend;

struct Embedded {
    dir: tempfile::TempDir,
    durability: Durability,
}

impl Embedded {
    fn new(durability: Durability) -> Embedded {
        Embedded { dir: tempfile::tempdir().expect("temp dir"), durability }
    }
}

#[async_trait]
impl Backend for Embedded {
    async fn open(&self) -> Arc<dyn Store> {
        let config = EmbeddedConfig { data_dir: self.dir.path().to_path_buf(), durability: self.durability };
        Arc::new(EmbeddedStore::open(config).expect("open the embedded store"))
    }

    async fn close(&self, store: Arc<dyn Store>) {
        // Dropping the last handle closes the store and syncs; wait for it off the runtime.
        tokio::task::spawn_blocking(move || drop(store)).await.expect("close");
    }
}

mod fsync {
    sluice_store::conformance_tests!(super::Embedded::new(sluice_embedded::Durability::Fsync));
}

mod interval {
    sluice_store::conformance_tests!(super::Embedded::new(sluice_embedded::Durability::Interval(
        std::time::Duration::from_millis(5)
    )));
}
