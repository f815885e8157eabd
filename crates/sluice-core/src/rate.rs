//! Rate limits: a token bucket per limited resource (`rate_limit: {per_second, burst}` on
//! queues, topics, streams and job queues), as one pure function of the bucket, the limit, the
//! tokens asked for and the time.
//!
//! Tokens are counted in thousandths (`tokens_milli`) so that refilling is integer arithmetic:
//! `per_second` tokens a second is `per_second` thousandths a millisecond, with no rounding and
//! no drift however often the bucket is looked at. The PostgreSQL backend restates [`take`] in
//! one SQL statement (sluice-postgres `rate.rs`) over the same integers, so both backends grant
//! exactly the same tokens for the same times.

use serde::{Deserialize, Serialize};

use crate::TimeMs;
use crate::limits::{RATE_BURST_MAX, RATE_PER_SECOND_MAX};
use crate::validation::ValidationError;

/// A token bucket's shape: it refills at `per_second` tokens a second up to `burst` tokens;
/// every message (record, job) a call writes takes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    pub per_second: u64,
    pub burst: u64,
}

impl RateLimit {
    pub fn validate(&self, field: &str) -> Result<(), ValidationError> {
        if self.per_second == 0 || self.per_second > RATE_PER_SECOND_MAX {
            return Err(ValidationError::new(
                format!("{field}.per_second"),
                format!("must be 1 to {RATE_PER_SECOND_MAX}"),
            ));
        }
        if self.burst == 0 || self.burst > RATE_BURST_MAX {
            return Err(ValidationError::new(format!("{field}.burst"), format!("must be 1 to {RATE_BURST_MAX}")));
        }
        Ok(())
    }

    /// The bucket's capacity in thousandths of a token.
    pub fn capacity_milli(&self) -> u64 {
        self.burst * 1000
    }
}

/// A bucket's state: its tokens (thousandths) as of `updated_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Bucket {
    pub tokens_milli: u64,
    pub updated_at: TimeMs,
}

/// What a take got: `granted` of the tokens asked for (the call's first `granted` entries go
/// ahead, the others are refused as `rate_limited`), and, when it got fewer than asked, how
/// long until the next whole token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    pub granted: u64,
    pub retry_after_ms: Option<u64>,
}

/// The most milliseconds of refill counted at once: past it any bucket the limits allow is
/// full, and the product with `per_second` stays far inside an `i64` (PostgreSQL's `bigint`).
pub const REFILL_MS_MAX: u64 = 10_000_000_000;

/// Takes up to `asked` tokens from `bucket` (`None`: a bucket never used, which starts full)
/// at `now_ms`; returns the bucket's new state and what was taken. Time going backwards (a
/// clock step) refills nothing and never moves `updated_at` back.
pub fn take(limit: RateLimit, bucket: Option<Bucket>, asked: u64, now_ms: TimeMs) -> (Bucket, Taken) {
    let capacity = limit.capacity_milli();
    let (have, updated_at) = match bucket {
        None => (capacity, now_ms),
        Some(b) => {
            let elapsed = now_ms.saturating_sub(b.updated_at).min(REFILL_MS_MAX);
            (capacity.min(b.tokens_milli + elapsed * limit.per_second), b.updated_at.max(now_ms))
        }
    };
    let granted = asked.min(have / 1000);
    let tokens_milli = have - granted * 1000;
    let retry_after_ms = (granted < asked).then(|| (1000 - tokens_milli % 1000).div_ceil(limit.per_second).max(1));
    (Bucket { tokens_milli, updated_at }, Taken { granted, retry_after_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: RateLimit = RateLimit { per_second: 10, burst: 5 };

    /// A script of takes on a manual clock: (time, asked) → (granted, retry_after_ms).
    fn run(limit: RateLimit, script: &[(TimeMs, u64)]) -> Vec<(u64, Option<u64>)> {
        let mut bucket = None;
        script
            .iter()
            .map(|&(now, asked)| {
                let (next, taken) = take(limit, bucket, asked, now);
                bucket = Some(next);
                (taken.granted, taken.retry_after_ms)
            })
            .collect()
    }

    #[test]
    fn a_new_bucket_is_full_and_refills_at_the_rate() {
        // 10/s is one token every 100 ms.
        let got = run(LIMIT, &[(0, 5), (0, 1), (99, 1), (100, 1), (100, 1), (1_000, 20)]);
        assert_eq!(got, [(5, None), (0, Some(100)), (0, Some(1)), (1, None), (0, Some(100)), (5, Some(100))]);
    }

    #[test]
    fn part_of_a_batch_is_granted() {
        let got = run(LIMIT, &[(0, 3), (0, 3), (250, 3)]);
        // 2 left, then 2.5 tokens refilled: 2 whole ones granted, half a token kept.
        assert_eq!(got, [(3, None), (2, Some(100)), (2, Some(50))]);
    }

    #[test]
    fn refill_stops_at_the_burst() {
        let got = run(LIMIT, &[(0, 5), (60_000, 6), (60_000, 1)]);
        assert_eq!(got, [(5, None), (5, Some(100)), (0, Some(100))]);
    }

    #[test]
    fn the_long_run_rate_is_exact() {
        // One take a millisecond for 10 s at 10/s with a burst of 5: 5 + 100 tokens, no more.
        let mut bucket = None;
        let mut granted = 0;
        for now in 0..=10_000 {
            let (next, taken) = take(LIMIT, bucket, 1, now);
            bucket = Some(next);
            granted += taken.granted;
        }
        assert_eq!(granted, 105);
    }

    #[test]
    fn a_clock_step_back_refills_nothing() {
        let (b, _) = take(LIMIT, None, 5, 10_000);
        let (b, t) = take(LIMIT, Some(b), 1, 5_000);
        assert_eq!((t.granted, b.updated_at), (0, 10_000));
        let (_, t) = take(LIMIT, Some(b), 1, 10_100);
        assert_eq!(t.granted, 1);
    }

    #[test]
    fn slow_rates_wait_long_enough() {
        let limit = RateLimit { per_second: 1, burst: 1 };
        assert_eq!(
            run(limit, &[(0, 1), (0, 1), (999, 1), (1_000, 1)]),
            [(1, None), (0, Some(1_000)), (0, Some(1)), (1, None)]
        );
    }

    #[test]
    fn bounds_name_the_field() {
        assert_eq!(
            RateLimit { per_second: 0, burst: 1 }.validate("rate_limit").unwrap_err().field,
            "rate_limit.per_second"
        );
        assert_eq!(RateLimit { per_second: 1, burst: 0 }.validate("rate_limit").unwrap_err().field, "rate_limit.burst");
        LIMIT.validate("rate_limit").unwrap();
    }
}
