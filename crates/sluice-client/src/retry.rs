//! When the client repeats a request, and how long it waits first.
//!
//! The decision is a pure function of how the attempt failed, whether the request is safe to
//! repeat and a random draw, so it is unit-tested without a network. A request is repeated only
//! when doing so cannot apply it twice: always when the connection was never made, and for a
//! safe request (a GET, or any call sent with an `Idempotency-Key`, which the client gives every
//! mutating call) also after a broken connection or a `503 Service Unavailable`.

use std::time::Duration;

use sluice_core::backoff::Backoff;

/// How many times a request is tried and how the retries are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; 1 turns retries off.
    pub attempts_max: u32,
    /// Exponential backoff with full jitter between attempts.
    pub backoff: Backoff,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { attempts_max: 4, backoff: Backoff { base_ms: 100, cap_ms: 2_000 } }
    }
}

/// How one attempt failed, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// No connection was made, so the server never saw the request.
    NotSent,
    /// The connection broke after the request may have reached the server.
    AfterSend,
    /// The server answered `503`: it is shutting down or cannot write right now.
    Unavailable,
    /// Anything else (a timeout, a 4xx, a 500): repeating would not help or is not safe.
    Final,
}

impl RetryPolicy {
    /// The delay before the next attempt, or `None` to give up. `attempt` counts the attempts
    /// already made (1 after the first); `draw` is uniform in `0..=u64::MAX`.
    pub(crate) fn next_delay(&self, attempt: u32, safe: bool, failure: Failure, draw: u64) -> Option<Duration> {
        let repeatable = match failure {
            Failure::NotSent => true,
            Failure::AfterSend | Failure::Unavailable => safe,
            Failure::Final => false,
        };
        if !repeatable || attempt >= self.attempts_max {
            return None;
        }
        Some(Duration::from_millis(self.backoff.delay_ms(attempt - 1, draw)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(safe: bool, failure: Failure, attempt: u32, expected: Option<u64>) {
        let policy = RetryPolicy { attempts_max: 3, backoff: Backoff { base_ms: 100, cap_ms: 1_000 } };
        let got = policy.next_delay(attempt, safe, failure, u64::MAX).map(|d| d.as_millis() as u64);
        assert_eq!(got, expected, "safe={safe} failure={failure:?} attempt={attempt}");
    }

    #[test]
    fn retries_only_what_cannot_apply_twice() {
        // Never sent: any request may be repeated.
        check(false, Failure::NotSent, 1, Some(100));
        check(true, Failure::NotSent, 1, Some(100));
        // Maybe applied: only safe requests.
        check(true, Failure::AfterSend, 1, Some(100));
        check(false, Failure::AfterSend, 1, None);
        check(true, Failure::Unavailable, 1, Some(100));
        check(false, Failure::Unavailable, 1, None);
        // Final failures never.
        check(true, Failure::Final, 1, None);
    }

    #[test]
    fn delays_grow_and_attempts_run_out() {
        check(true, Failure::NotSent, 2, Some(200));
        check(true, Failure::NotSent, 3, None);
        let policy = RetryPolicy { attempts_max: 1, ..RetryPolicy::default() };
        assert_eq!(policy.next_delay(1, true, Failure::NotSent, 0), None, "one attempt means no retry");
    }

    #[test]
    fn jitter_stays_within_the_bound() {
        let policy = RetryPolicy { attempts_max: 10, backoff: Backoff { base_ms: 100, cap_ms: 1_000 } };
        for draw in [0, 1, u64::MAX / 3, u64::MAX / 2, u64::MAX] {
            let delay = policy.next_delay(4, true, Failure::NotSent, draw).unwrap();
            assert!(delay <= Duration::from_millis(800), "draw {draw} gave {delay:?}");
        }
        assert_eq!(policy.next_delay(4, true, Failure::NotSent, 0), Some(Duration::ZERO));
    }
}
