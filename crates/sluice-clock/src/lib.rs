//! The one clock of a Sluice process: every time the store, the services and the server
//! decide by (visibility timeouts, delays, retention, retry schedules, breakers, redrive rates,
//! leases, schedules, TTLs) comes from a [`Clock`]. `serve` runs on the [`SystemClock`]; tests
//! run on a [`ManualClock`] they move by hand, so that a retry schedule, a lease or a cron tick
//! is checked to the millisecond without waiting for it.
//!
//! Two kinds of waiting, and what follows the clock:
//! - Async code waits with [`Clock::sleep_until`], a future that completes when the clock
//!   reaches a time (for a manual clock: when a test moves it there).
//! - A thread that cannot await (the embedded store's writer) asks [`Clock::real_wait`] how long
//!   to block at most, and registers with [`Clock::on_advance`] to be woken when a manual clock
//!   moves; the system clock needs no waking, since its time flows by itself.
//!
//! What stays on real time, on purpose, because it decides only how soon something is noticed
//! or how long a caller is kept waiting, never when something is due: long-poll waits (a
//! caller's patience), cache refreshes, polling cadences, pauses after a failed call, and the
//! interval of interval-mode syncs. A manual clock nobody moves must not freeze them.
//!
//! The PostgreSQL store keeps the database's clock for what it decides in SQL, so that nodes
//! with drifting clocks agree; tests of timers on a manual clock run on the embedded store.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

/// Milliseconds since the Unix epoch.
pub type TimeMs = u64;

/// A future that a [`Clock`] completes. It owns what it needs, so that it can be handed to a
/// task of its own.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A callback a [`ManualClock`] calls after every move (see [`Clock::on_advance`]).
pub type OnAdvance = Box<dyn Fn() + Send + Sync + 'static>;

/// Where Sluice takes its time from (milliseconds since the Unix epoch).
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> TimeMs;
    /// Completes once `now_ms() >= at_ms` (at once if it already is).
    fn sleep_until(&self, at_ms: TimeMs) -> Sleep;
    /// For a thread that blocks instead of awaiting: how long in real time until `at_ms` comes
    /// by itself, or `None` when it never does (a manual clock, which wakes such a thread
    /// through [`Clock::on_advance`] instead).
    fn real_wait(&self, at_ms: TimeMs) -> Option<Duration>;
    /// Registers `wake`, to be called after every move of the clock. Time that flows by itself
    /// (the system clock) never calls it.
    fn on_advance(&self, wake: OnAdvance);
}

/// The system's wall clock, with Tokio's timer for sleeping.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl SystemClock {
    /// The system's time, for the few places that run before any clock is handed out.
    pub fn now() -> TimeMs {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> TimeMs {
        SystemClock::now()
    }

    fn sleep_until(&self, at_ms: TimeMs) -> Sleep {
        let wait_ms = at_ms.saturating_sub(self.now_ms());
        Box::pin(tokio::time::sleep(Duration::from_millis(wait_ms)))
    }

    fn real_wait(&self, at_ms: TimeMs) -> Option<Duration> {
        Some(Duration::from_millis(at_ms.saturating_sub(self.now_ms())))
    }

    fn on_advance(&self, _wake: OnAdvance) {}
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

struct ManualShared {
    now_ms: watch::Sender<u64>,
    /// Deadline → how many sleepers wait for it. Held for map operations only.
    sleepers: Mutex<BTreeMap<u64, usize>>,
    /// Called after every move (threads that block rather than await). Held while calling
    /// them; a callback must not touch the clock.
    on_advance: Mutex<Vec<OnAdvance>>,
}

impl std::fmt::Debug for ManualShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManualShared").field("now_ms", &*self.now_ms.borrow()).finish_non_exhaustive()
    }
}

impl ManualShared {
    fn sleepers(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, usize>> {
        self.sleepers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ManualClock {
    pub fn new(start_ms: u64) -> ManualClock {
        let shared = ManualShared {
            now_ms: watch::Sender::new(start_ms),
            sleepers: Mutex::new(BTreeMap::new()),
            on_advance: Mutex::new(Vec::new()),
        };
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
        for wake in self.shared.on_advance.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            wake();
        }
    }

    /// Moves the clock forward by `ms`.
    pub fn advance_by(&self, ms: u64) {
        self.advance_to(self.now_ms().saturating_add(ms));
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
    fn now_ms(&self) -> TimeMs {
        *self.shared.now_ms.borrow()
    }

    fn real_wait(&self, _at_ms: TimeMs) -> Option<Duration> {
        None
    }

    fn on_advance(&self, wake: OnAdvance) {
        self.shared.on_advance.lock().unwrap_or_else(PoisonError::into_inner).push(wake);
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

    #[test]
    fn a_manual_clock_wakes_blocked_threads_on_every_move_and_never_by_itself() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let clock = ManualClock::new(0);
        let woken = Arc::new(AtomicUsize::new(0));
        let counter = woken.clone();
        clock.on_advance(Box::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(clock.real_wait(5_000), None, "manual time never comes by itself");
        clock.advance_by(10);
        clock.advance_to(10);
        assert_eq!(woken.load(Ordering::SeqCst), 2);
        assert_eq!(clock.now_ms(), 10);
        let system = SystemClock;
        let wait = system.real_wait(system.now_ms() + 60_000).expect("system time flows");
        assert!(wait <= Duration::from_secs(60) && wait >= Duration::from_secs(59));
    }
}
