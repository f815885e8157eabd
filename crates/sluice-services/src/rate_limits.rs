//! Rate limits taken at a door (a topic's publishes, a stream's appends, a job queue's
//! enqueues): a call's writes take tokens from their resource's bucket in the store, one bucket
//! for every node (`sluice_store::RateStore`); the first writes go ahead, and what the bucket
//! refused is counted in `sluice_rejected_total{resource, reason="rate_limited"}`. (A queue's
//! own sends take theirs inside the store's send.)

use sluice_core::rate::RateLimit;
use sluice_store::{Store, StoreError};

/// What a call's writes got from their bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted {
    /// How many of the call's first writes go ahead.
    pub granted: usize,
    /// When the next token comes, for the refused ones.
    pub retry_after_ms: u64,
}

/// Takes a token for each of `asked` writes to `resource` (`topic:NAME`, ...) under `limit`.
pub async fn admit(store: &dyn Store, resource: &str, limit: RateLimit, asked: usize) -> Result<Admitted, StoreError> {
    let taken = store.take_tokens(resource, limit, asked as u64).await?;
    let granted = usize::try_from(taken.granted).unwrap_or(usize::MAX).min(asked);
    count_refused(resource, "rate_limited", (asked - granted) as u64);
    Ok(Admitted { granted, retry_after_ms: taken.retry_after_ms.unwrap_or(1) })
}

/// Counts `refused` writes to `resource` that a door refused for `reason` (`rate_limited`, or
/// `queue_full` for a stream's depth limit) in `sluice_rejected_total{resource, reason}`.
pub fn count_refused(resource: &str, reason: &'static str, refused: u64) {
    if refused > 0 {
        metrics::counter!("sluice_rejected_total", "resource" => resource.to_owned(), "reason" => reason)
            .increment(refused);
    }
}
