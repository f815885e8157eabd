//! Conformance of [`RateStore`](crate::RateStore): a bucket starts full, grants at most its
//! burst at once (part of a batch when that is all it holds), says when to retry, refills, and
//! keeps buckets of different keys apart. The exact refill arithmetic is checked on a manual
//! clock in `sluice_core::rate`; here the rate is slow (1 a second) so that real time passing
//! during the test can add at most one token per second it takes.

use std::time::Instant;

use sluice_core::rate::RateLimit;

use super::Backend;

pub async fn rate_buckets_grant_their_burst_then_their_rate(b: &dyn Backend) {
    let s = b.open().await;
    let limit = RateLimit { per_second: 1, burst: 5 };
    let started = Instant::now();
    let first = s.take_tokens("queue:a", limit, 3).await.unwrap();
    assert_eq!((first.granted, first.retry_after_ms), (3, None));
    let second = s.take_tokens("queue:a", limit, 3).await.unwrap();
    let refilled = started.elapsed().as_secs();
    assert!((2..=2 + refilled).contains(&second.granted), "granted {}", second.granted);
    if second.granted < 3 {
        let wait = second.retry_after_ms.expect("a partial grant says when to retry");
        assert!((1..=1_000).contains(&wait), "retry after {wait} ms");
    }
    // Another key has its own bucket.
    assert_eq!(s.take_tokens("queue:b", limit, 5).await.unwrap().granted, 5);
    // Over many takes, no more than the burst plus one token a second.
    let mut total = first.granted + second.granted;
    for _ in 0..20 {
        total += s.take_tokens("queue:a", limit, 1).await.unwrap().granted;
    }
    let elapsed = started.elapsed().as_secs();
    assert!(total <= 5 + elapsed + 1, "granted {total} in {elapsed} s");
    assert!(s.take_tokens("", limit, 1).await.is_err(), "an empty key is refused");
    b.close(s).await;
}

/// A queue's `rate_limit`: a send takes a token an entry; the entries past the bucket are
/// refused as `RateLimited` (the first ones go), and counted on the queue.
pub async fn a_queue_rate_limit_refuses_the_entries_past_its_bucket(b: &dyn Backend) {
    let s = b.open().await;
    let limit = RateLimit { per_second: 1, burst: 3 };
    let attributes = sluice_core::QueueAttributes { rate_limit: Some(limit), ..Default::default() };
    s.create_queue("q", attributes).await.unwrap();
    let started = Instant::now();
    let bodies = ["a", "b", "c", "d", "e"];
    let results = s.send("q", bodies.iter().map(|b| super::text(b)).collect()).await.unwrap();
    let granted = results.iter().take_while(|r| r.is_ok()).count();
    let refill = started.elapsed().as_secs() as usize;
    assert!((3..=3 + refill).contains(&granted), "granted {granted}");
    for r in &results[granted..] {
        assert!(
            matches!(r, Err(sluice_core::EntryError::RateLimited { retry_after_ms }) if (1..=1_000).contains(retry_after_ms)),
            "{r:?}"
        );
    }
    let view = s.get_queue("q").await.unwrap();
    assert_eq!(view.stats.visible as usize, granted);
    assert_eq!(view.stats.refusals.rate_limited as usize, bodies.len() - granted);
    b.close(s).await;
}
