//! Retry delays: exponential backoff with full jitter, capped.
//!
//! Full jitter (a uniform draw between zero and the exponential bound) spreads retries of many
//! clients that failed together, which is what keeps a recovering server from being flattened.
//! The random draw is an argument so the maths stays pure and testable.

/// How retries are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Bound of the first retry's delay.
    pub base_ms: u64,
    /// No delay exceeds this.
    pub cap_ms: u64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { base_ms: 100, cap_ms: 30_000 }
    }
}

impl Backoff {
    /// The upper bound for retry number `attempt` (0 for the first retry): `min(cap, base·2^attempt)`.
    pub fn bound_ms(&self, attempt: u32) -> u64 {
        let factor = 1u64.checked_shl(attempt.min(63)).unwrap_or(u64::MAX);
        self.base_ms.saturating_mul(factor).min(self.cap_ms)
    }

    /// The delay before retry `attempt`, given a uniform random `draw` in `0..=u64::MAX`.
    pub fn delay_ms(&self, attempt: u32, draw: u64) -> u64 {
        full_jitter_ms(self.bound_ms(attempt), draw)
    }
}

/// Full jitter: a delay uniform in `0..=bound_ms`, from a uniform random `draw` in
/// `0..=u64::MAX` (scaled, without modulo bias worth speaking of).
pub fn full_jitter_ms(bound_ms: u64, draw: u64) -> u64 {
    ((u128::from(draw) * (u128::from(bound_ms) + 1)) >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_grow_then_cap() {
        let b = Backoff { base_ms: 100, cap_ms: 1_000 };
        let bounds: Vec<u64> = (0..6).map(|a| b.bound_ms(a)).collect();
        assert_eq!(bounds, [100, 200, 400, 800, 1_000, 1_000]);
        assert_eq!(b.bound_ms(500), 1_000);
    }

    #[test]
    fn delays_stay_within_bound() {
        let b = Backoff { base_ms: 100, cap_ms: 1_000 };
        assert_eq!(b.delay_ms(3, 0), 0);
        assert_eq!(b.delay_ms(3, u64::MAX), 800);
        assert_eq!(b.delay_ms(3, u64::MAX / 2), 400);
        assert_eq!(b.delay_ms(40, u64::MAX), 1_000);
    }
}
