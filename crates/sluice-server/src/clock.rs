//! The time the HTTP/S push worker (`topics/worker.rs`) decides by: a [`Clock`] that tells the
//! time and sleeps until a time, the [`SystemClock`] that `serve` runs on, and a
//! [`ManualClock`] that tests move by hand so that a retry schedule or a breaker's cooldown is
//! checked to the millisecond without waiting for it.
//!
//! What follows the clock: every time the worker decides by, namely when a delivery is
//! attempted, the delay of a retry, the breaker's window, cooldown and probe deadline, and the
//! signature's timestamp.
//!
//! What does not, on purpose:
//! - The store keeps its own time. The worker hands it a retry as a relative delay
//!   (`nack(receipt, delay_ms)`); with the system clock both agree. A test on a manual clock
//!   wraps the real store so that the delay of each nack runs on the manual clock (it holds
//!   the delivery and nacks it with no delay when the clock reaches the due time): that is the
//!   one timer the worker gives the store, so the real store still decides visibility,
//!   receive counts, long-poll wake-ups and dead-lettering. Teaching the store itself an
//!   injected clock would reach into the embedded engine's writer loop and its waiters, and
//!   could not reach PostgreSQL, whose delays run on the database's own `now()`.
//! - Cadences that decide only how soon the worker notices a change, never when a delivery
//!   is due, stay on Tokio's real time: the subscription refresh, the receive long poll, the
//!   look every `PUSH_HALF_OPEN_POLL_MS` for a probe's answer, and the pause after a failed
//!   receive. A manual clock nobody advances must not freeze them.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

/// A future that a [`Clock`] completes. It owns what it needs, so that it can be handed to a
/// task of its own.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Where the push worker takes its time from (milliseconds since the Unix epoch).
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> u64;
    /// Completes once `now_ms() >= at_ms` (at once if it already is).
    fn sleep_until(&self, at_ms: u64) -> Sleep;
}

/// The system's wall clock, with Tokio's timer for sleeping.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        crate::convert::now_ms()
    }

    fn sleep_until(&self, at_ms: u64) -> Sleep {
        let wait_ms = at_ms.saturating_sub(self.now_ms());
        Box::pin(tokio::time::sleep(Duration::from_millis(wait_ms)))
    }
}

/// A clock that stands still until it is moved with [`ManualClock::advance_to`]; for tests.
/// Clones share one time.
///
/// It knows the deadlines its sleepers wait for ([`ManualClock::deadlines_ms`]), so a test
/// can move it to the next thing due, as Tokio's paused time does, once the system is idle.
#[derive(Debug, Clone)]
pub struct ManualClock {
    shared: Arc<ManualShared>,
}

#[derive(Debug)]
struct ManualShared {
    now_ms: watch::Sender<u64>,
    /// Deadline → how many sleepers wait for it. Held for map operations only.
    sleepers: Mutex<BTreeMap<u64, usize>>,
}

impl ManualShared {
    fn sleepers(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, usize>> {
        self.sleepers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ManualClock {
    pub fn new(start_ms: u64) -> ManualClock {
        let shared = ManualShared { now_ms: watch::Sender::new(start_ms), sleepers: Mutex::new(BTreeMap::new()) };
        ManualClock { shared: Arc::new(shared) }
    }

    /// Moves the clock to `at_ms` and wakes every sleeper due by then.
    ///
    /// # Panics
    /// If `at_ms` is earlier than now: this clock never goes back.
    pub fn advance_to(&self, at_ms: u64) {
        self.shared.now_ms.send_modify(|now| {
            assert!(at_ms >= *now, "a manual clock never goes back (from {now} to {at_ms})");
            *now = at_ms;
        });
    }

    /// The earliest deadline, later than now, that a sleeper waits for.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        self.deadlines_ms().first().copied()
    }

    /// The deadline of every sleeper that waits for a time later than now, earliest first,
    /// once per sleeper. (A sleeper whose deadline has come may not have run yet: it is not
    /// waiting any more.)
    pub fn deadlines_ms(&self) -> Vec<u64> {
        let now = self.now_ms();
        let sleepers = self.shared.sleepers();
        sleepers.range(now.saturating_add(1)..).flat_map(|(&at, &count)| std::iter::repeat_n(at, count)).collect()
    }
}

/// Counts one sleeper for its deadline while it waits, until it completes or is dropped.
struct Sleeper {
    shared: Arc<ManualShared>,
    at_ms: u64,
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let mut sleepers = self.shared.sleepers();
        if let Some(count) = sleepers.get_mut(&self.at_ms) {
            *count -= 1;
            if *count == 0 {
                sleepers.remove(&self.at_ms);
            }
        }
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        *self.shared.now_ms.borrow()
    }

    fn sleep_until(&self, at_ms: u64) -> Sleep {
        // Counted when called rather than when first polled, so that a test sees the deadline
        // as soon as the sleeper exists.
        *self.shared.sleepers().entry(at_ms).or_insert(0) += 1;
        let sleeper = Sleeper { shared: self.shared.clone(), at_ms };
        let mut now = self.shared.now_ms.subscribe();
        Box::pin(async move {
            let _sleeper = sleeper;
            // Cannot fail: the sleeper holds the sender.
            let _ = now.wait_for(|&now| now >= at_ms).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll, Waker};

    use super::*;

    fn ready(sleep: &mut Sleep) -> bool {
        sleep.as_mut().poll(&mut Context::from_waker(Waker::noop())) == Poll::Ready(())
    }

    #[test]
    fn a_manual_clock_wakes_its_sleepers_when_moved_to_their_deadline() {
        let clock = ManualClock::new(1_000);
        let mut a = clock.sleep_until(1_500);
        let mut b = clock.sleep_until(2_000);
        let b_too = clock.sleep_until(2_000);
        assert_eq!(clock.deadlines_ms(), [1_500, 2_000, 2_000]);
        assert_eq!(clock.next_deadline_ms(), Some(1_500));
        assert!(!ready(&mut a) && !ready(&mut b));

        clock.advance_to(1_499);
        assert!(!ready(&mut a));
        clock.advance_to(1_700);
        assert_eq!(clock.now_ms(), 1_700);
        // Past deadlines are not pending, whether or not their sleeper has run yet.
        assert_eq!(clock.deadlines_ms(), [2_000, 2_000]);
        assert!(ready(&mut a) && !ready(&mut b));
        drop(b_too);
        assert_eq!(clock.deadlines_ms(), [2_000], "the other sleeper still waits");
        clock.advance_to(2_000);
        assert!(ready(&mut b));
        drop((a, b));
        assert_eq!(clock.next_deadline_ms(), None);
        assert!(clock.shared.sleepers().is_empty(), "finished sleepers are forgotten");
        // A deadline already reached completes at once.
        assert!(ready(&mut clock.sleep_until(10)));
    }
}
