//! Model-based property test of the circuit breaker: random calls (asks, and outcomes recorded
//! for any permit still held, in any order, late or not) over random time steps, run on the
//! real `Breaker` and on a reference model that keeps every counted outcome in a `Vec` and
//! counts the window by scanning it. After every step the two must agree on every answer and
//! on the state.
//!
//! Beside the comparison, the contract is checked on the breaker's outputs directly:
//! - never more than one probe in flight: a probe is given only when no earlier probe is still
//!   unanswered within its timeout, and never while closed;
//! - never open without the threshold: whenever a record opens a closed breaker, the window
//!   (as the model counts it) held at least `calls_min` calls, at least `failure_percent` % of
//!   them failures;
//! - a rejection's `retry_at_ms` is in the future, and no call is permitted while open before
//!   the cooldown ends.
//!
//! Failures are reproducible: proptest records the seed in
//! `tests/proptest-regressions/breaker_properties.txt`, replayed first on every run.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use sluice_core::TimeMs;
use sluice_core::breaker::{Admission, Breaker, BreakerConfig, BreakerState, Outcome, Permit, WINDOW_BUCKETS};

#[derive(Debug, Clone)]
enum Op {
    Wait(u64),
    Allow,
    /// Record for the permit at this index (modulo) among those held.
    Record(prop::sample::Index, Outcome),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0u64..400).prop_map(Op::Wait),
        1 => (0u64..4_000).prop_map(Op::Wait),
        4 => Just(Op::Allow),
        4 => (any::<prop::sample::Index>(), prop_oneof![Just(Outcome::Success), Just(Outcome::Failure)])
            .prop_map(|(i, o)| Op::Record(i, o)),
    ]
}

fn config() -> impl Strategy<Value = BreakerConfig> {
    (1_000u64..3_000, 1u32..6, 1u8..=100, 0u64..3_000, 1u64..2_000).prop_map(
        |(window_ms, calls_min, failure_percent, cooldown_ms, probe_timeout_ms)| BreakerConfig {
            window_ms,
            calls_min,
            failure_percent,
            cooldown_ms,
            probe_timeout_ms,
        },
    )
}

/// The documented behaviour, written as plainly as possible.
struct Model {
    config: BreakerConfig,
    state: BreakerState,
    /// Changes with every change of state; permits remember the one they were given in.
    era: u64,
    /// Outcomes recorded while closed in this era: (time, failed).
    outcomes: Vec<(TimeMs, bool)>,
    /// Open: when the cooldown ends. Half-open: when the probe is presumed lost.
    until: TimeMs,
}

impl Model {
    fn bucket_ms(&self) -> u64 {
        self.config.window_ms.div_ceil(WINDOW_BUCKETS as u64)
    }

    /// Outcomes whose bucket is the current one or one of the `WINDOW_BUCKETS - 1` before it.
    fn window(&self, now: TimeMs) -> (u32, u32) {
        let current = now / self.bucket_ms();
        let counted = self.outcomes.iter().filter(|(t, _)| t / self.bucket_ms() + WINDOW_BUCKETS as u64 > current);
        counted.fold((0, 0), |(calls, failures), (_, failed)| (calls + 1, failures + u32::from(*failed)))
    }

    fn change(&mut self, state: BreakerState, until: TimeMs) {
        self.state = state;
        self.until = until;
        self.era += 1;
        self.outcomes.clear();
    }

    /// `Ok((era, probe))` for a permit, `Err(retry_at)` for a rejection.
    fn allow(&mut self, now: TimeMs) -> Result<(u64, bool), TimeMs> {
        match self.state {
            BreakerState::Closed => Ok((self.era, false)),
            _ if now < self.until => Err(self.until),
            _ => {
                self.change(BreakerState::HalfOpen, now + self.config.probe_timeout_ms);
                Ok((self.era, true))
            }
        }
    }

    fn record(&mut self, now: TimeMs, era: u64, failed: bool) -> Option<BreakerState> {
        if era != self.era {
            return None;
        }
        match self.state {
            BreakerState::Closed => {
                self.outcomes.push((now, failed));
                let (calls, failures) = self.window(now);
                let percent = u32::from(self.config.failure_percent);
                if failed && calls >= self.config.calls_min && failures * 100 >= percent * calls {
                    self.change(BreakerState::Open, now + self.config.cooldown_ms);
                    return Some(BreakerState::Open);
                }
                None
            }
            BreakerState::HalfOpen if failed => {
                self.change(BreakerState::Open, now + self.config.cooldown_ms);
                Some(BreakerState::Open)
            }
            BreakerState::HalfOpen => {
                self.change(BreakerState::Closed, 0);
                Some(BreakerState::Closed)
            }
            BreakerState::Open => None,
        }
    }
}

/// A permit held by the test: the breaker's, the model's era, and when it was given.
struct Held {
    permit: Permit,
    era: u64,
    given_at: TimeMs,
}

fn run(config: BreakerConfig, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut breaker = Breaker::new(config);
    let mut model = Model { config, state: BreakerState::Closed, era: 0, outcomes: Vec::new(), until: 0 };
    let mut held: Vec<Held> = Vec::new();
    let mut now: TimeMs = 1_000_000;
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::Wait(ms) => now += ms,
            Op::Allow => {
                let state_before = breaker.state();
                match (breaker.allow(now), model.allow(now)) {
                    (Admission::Permitted(permit), Ok((era, probe))) => {
                        prop_assert_eq!(permit.is_probe(), probe, "step {}", step);
                        if probe {
                            prop_assert!(state_before != BreakerState::Closed, "step {}: a probe while closed", step);
                            let in_flight = held
                                .iter()
                                .filter(|h| h.permit.is_probe() && now < h.given_at + config.probe_timeout_ms)
                                .count();
                            prop_assert_eq!(in_flight, 0, "step {}: a second probe in flight", step);
                        }
                        held.push(Held { permit, era, given_at: now });
                    }
                    (Admission::Rejected { retry_at_ms }, Err(until)) => {
                        prop_assert_eq!(retry_at_ms, until, "step {}", step);
                        prop_assert!(retry_at_ms > now, "step {}: retry_at in the past", step);
                    }
                    (got, want) => prop_assert!(false, "step {}: breaker {:?}, model {:?}", step, got, want),
                }
            }
            Op::Record(index, outcome) => {
                if held.is_empty() {
                    continue;
                }
                let h = held.remove(index.index(held.len()));
                let window_before = model.window(now);
                let was_closed = model.state == BreakerState::Closed && h.era == model.era;
                let failed = *outcome == Outcome::Failure;
                let got = breaker.record(now, h.permit, *outcome);
                let want = model.record(now, h.era, failed);
                prop_assert_eq!(got, want, "step {}", step);
                if was_closed && got == Some(BreakerState::Open) {
                    // The window the breaker tripped on: the earlier outcomes and this failure.
                    let (calls, failures) = (window_before.0 + 1, window_before.1 + 1);
                    prop_assert!(calls >= config.calls_min, "step {}: opened with {} calls", step, calls);
                    prop_assert!(
                        failures * 100 >= u32::from(config.failure_percent) * calls,
                        "step {}: opened at {} of {} failures",
                        step,
                        failures,
                        calls
                    );
                }
            }
        }
        prop_assert_eq!(breaker.state(), model.state, "step {}", step);
        let snapshot = breaker.snapshot(now);
        prop_assert_eq!(snapshot.state, model.state);
        if model.state == BreakerState::Closed {
            prop_assert_eq!((snapshot.calls, snapshot.failures), model.window(now), "step {}", step);
        } else {
            prop_assert_eq!(snapshot.next_probe_at_ms, Some(model.until), "step {}", step);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("tests/proptest-regressions/breaker_properties.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn breaker_matches_model(config in config(), ops in proptest::collection::vec(op(), 1..200)) {
        run(config, &ops)?;
    }
}
