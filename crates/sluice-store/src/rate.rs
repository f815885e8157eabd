//! The rate store: token buckets of rate limits (`sluice_core::rate`), kept where every node
//! of a store sees them, so that a limit is one limit for the whole deployment.

use async_trait::async_trait;
use sluice_core::rate::{RateLimit, Taken};

use crate::StoreError;

/// Longest key of a bucket, in bytes (a resource kind and name, e.g. `queue:orders`).
pub const RATE_KEY_LEN_MAX: usize = 256;

#[async_trait]
pub trait RateStore: Send + Sync + 'static {
    /// Takes up to `asked` tokens from the bucket named `key` under `limit`, as
    /// `sluice_core::rate::take` decides at the store's time: one decision for every node (the
    /// embedded store is one node; PostgreSQL takes in one statement under the bucket row's
    /// lock). A bucket never used starts full. The default answers that the store keeps no
    /// buckets, for test stores that stand in for other concerns.
    async fn take_tokens(&self, key: &str, limit: RateLimit, asked: u64) -> Result<Taken, StoreError> {
        let _ = (key, limit, asked);
        Err(StoreError::Unavailable("this store keeps no rate-limit buckets".into()))
    }
}

/// Refuses a key no bucket may have (empty or longer than [`RATE_KEY_LEN_MAX`]).
pub fn validate_rate_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty() || key.len() > RATE_KEY_LEN_MAX {
        return Err(
            sluice_core::ValidationError::new("key", format!("a bucket key is 1 to {RATE_KEY_LEN_MAX} bytes")).into()
        );
    }
    Ok(())
}
