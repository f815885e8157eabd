//! The schedule of a fixed-rate producer, shared by the soak scenario and the peers scenario's
//! fixed-rate workload: when each message is due, so that a stalled system shows up in the
//! latency instead of quietly lowering the rate.

use std::time::{Duration, Instant};

/// The schedule of one fixed-rate producer: message `k` is due at `start + k * interval`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schedule {
    pub start: Instant,
    pub interval: Duration,
}

impl Schedule {
    /// For producer `index` of `producers` sharing `rate` messages per second: each sends every
    /// `producers / rate` seconds, offset from the others so that sends spread evenly.
    pub fn new(start: Instant, rate: f64, index: usize, producers: usize) -> Schedule {
        let interval = Duration::from_secs_f64(producers as f64 / rate.max(f64::MIN_POSITIVE));
        let offset = interval.mul_f64(index as f64 / producers as f64);
        Schedule { start: start + offset, interval }
    }

    pub fn due_at(&self, k: u64) -> Instant {
        self.start + self.interval.mul_f64(k as f64)
    }

    /// How many messages are due at `now`: the `k` with `due_at(k) <= now`.
    pub fn due_count(&self, now: Instant) -> u64 {
        match now.checked_duration_since(self.start) {
            None => 0,
            Some(elapsed) => (elapsed.as_secs_f64() / self.interval.as_secs_f64()).floor() as u64 + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_spreads_producers_and_counts_what_is_due() {
        let start = Instant::now();
        // 1,000 msg/s over 4 producers: each sends every 4 ms, the second 1 ms after the first.
        let first = Schedule::new(start, 1_000.0, 0, 4);
        let second = Schedule::new(start, 1_000.0, 1, 4);
        assert_eq!(first.interval, Duration::from_millis(4));
        assert_eq!(second.due_at(0) - start, Duration::from_millis(1));
        assert_eq!(first.due_count(start), 1);
        assert_eq!(second.due_count(start), 0);
        assert_eq!(first.due_count(start + Duration::from_micros(3_999)), 1);
        assert_eq!(first.due_count(start + Duration::from_millis(4)), 2);
        assert_eq!(first.due_count(start + Duration::from_secs(1)), 251);
        assert_eq!(first.due_at(250) - start, Duration::from_secs(1));
    }
}
