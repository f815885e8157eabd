//! Circuit breaker for one push endpoint: stop calling an endpoint that keeps failing, and try
//! it again, carefully, after a cooldown.
//!
//! ```text
//!            failure rate ≥ threshold            cooldown over: one probe
//!  Closed ─────────────────────────────▶ Open ─────────────────────────────▶ HalfOpen
//!    ▲        (with ≥ calls_min calls       ▲                                   │  │
//!    │         in the window)               └──────── probe failed ─────────────┘  │
//!    └─────────────────────────────── probe succeeded ─────────────────────────────┘
//! ```
//!
//! - **Closed**: every call is permitted. Outcomes are counted over a sliding time window of
//!   `window_ms`, kept as [`WINDOW_BUCKETS`] buckets of `window_ms / WINDOW_BUCKETS` each: an
//!   outcome counts while its bucket is the current one or one of the `WINDOW_BUCKETS - 1`
//!   before it, so for between `window_ms - bucket` and `window_ms`. A time window rather than
//!   the last N calls, so that failures from an hour ago do not trip a quiet endpoint's breaker
//!   on its next failure. The breaker opens when a failure brings the window to at least
//!   `calls_min` calls of which at least `failure_percent` % failed.
//! - **Open**: every call is rejected, with the time the cooldown ends, until `cooldown_ms`
//!   after opening.
//! - **HalfOpen**: the first call after the cooldown is the probe, and it alone is permitted;
//!   others are rejected. Its success closes the breaker (with an empty window), its failure
//!   opens it again for another cooldown. A probe whose outcome is not recorded within
//!   `probe_timeout_ms` is presumed lost, and the next call becomes a new probe.
//!
//! Each [`Permit`] belongs to the state it was given in: an outcome recorded for a permit given
//! before the breaker last changed state is ignored, so a slow call from before the breaker
//! opened cannot close it, and an abandoned probe cannot decide for its successor.
//!
//! Time is an argument (milliseconds, as everywhere in the core). A time earlier than one
//! already seen is taken as that one: the breaker never moves backwards.

use serde::{Deserialize, Serialize};

use crate::TimeMs;
use crate::limits::{
    BREAKER_CALLS_MIN_MAX, BREAKER_COOLDOWN_MS_MAX, BREAKER_PROBE_TIMEOUT_MS_MAX, BREAKER_WINDOW_MS_MAX,
    BREAKER_WINDOW_MS_MIN,
};
use crate::validation::ValidationError;

/// How many buckets the sliding window is kept in.
pub const WINDOW_BUCKETS: usize = 10;

/// When a breaker opens and how long it stays open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BreakerConfig {
    /// Length of the sliding window outcomes are counted over.
    pub window_ms: u64,
    /// Fewest calls in the window before the breaker may open.
    pub calls_min: u32,
    /// Failure rate, in percent of the calls in the window, that opens the breaker (1–100).
    pub failure_percent: u8,
    /// How long the breaker stays open before letting a probe through.
    pub cooldown_ms: u64,
    /// How long a probe may go unanswered before another is let through.
    pub probe_timeout_ms: u64,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            window_ms: 60_000,
            calls_min: 10,
            failure_percent: 50,
            cooldown_ms: 30_000,
            probe_timeout_ms: 30_000,
        }
    }
}

impl BreakerConfig {
    pub fn validate(&self) -> Result<(), ValidationError> {
        if !(BREAKER_WINDOW_MS_MIN..=BREAKER_WINDOW_MS_MAX).contains(&self.window_ms) {
            return Err(ValidationError::new(
                "window_ms",
                format!("must be {BREAKER_WINDOW_MS_MIN} to {BREAKER_WINDOW_MS_MAX}"),
            ));
        }
        if !(1..=BREAKER_CALLS_MIN_MAX).contains(&self.calls_min) {
            return Err(ValidationError::new("calls_min", format!("must be 1 to {BREAKER_CALLS_MIN_MAX}")));
        }
        if !(1..=100).contains(&self.failure_percent) {
            return Err(ValidationError::new("failure_percent", "must be 1 to 100"));
        }
        if self.cooldown_ms > BREAKER_COOLDOWN_MS_MAX {
            return Err(ValidationError::new("cooldown_ms", format!("must be at most {BREAKER_COOLDOWN_MS_MAX}")));
        }
        if !(1..=BREAKER_PROBE_TIMEOUT_MS_MAX).contains(&self.probe_timeout_ms) {
            return Err(ValidationError::new(
                "probe_timeout_ms",
                format!("must be 1 to {BREAKER_PROBE_TIMEOUT_MS_MAX}"),
            ));
        }
        Ok(())
    }
}

/// The breaker's state, as the API and metrics name it (`closed`, `open`, `half_open`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

/// Leave to make one call. Record its outcome with [`Breaker::record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permit {
    generation: u64,
    probe: bool,
}

impl Permit {
    /// Whether this call is the half-open probe that decides whether the breaker closes.
    pub fn is_probe(&self) -> bool {
        self.probe
    }
}

/// The answer to [`Breaker::allow`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Permitted(Permit),
    /// Fail fast. `retry_at_ms` is the earliest time `allow` may permit a call unless an
    /// outcome is recorded first (the end of the cooldown, or of the probe's timeout).
    Rejected {
        retry_at_ms: TimeMs,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Success,
    Failure,
}

/// What the breaker shows the API and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BreakerSnapshot {
    pub state: BreakerState,
    /// Calls and failures counted in the window (only while closed; zero otherwise).
    pub calls: u32,
    pub failures: u32,
    /// `failures / calls`, from 0 to 1 (0 when there were no calls).
    pub failure_rate: f64,
    /// When the breaker last opened, while it is open or half-open.
    pub opened_at_ms: Option<TimeMs>,
    /// While open, when the cooldown ends and a probe may go; while half-open, when the
    /// probe in flight is presumed lost and another may go.
    pub next_probe_at_ms: Option<TimeMs>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Closed,
    Open { opened_at_ms: TimeMs, retry_at_ms: TimeMs },
    HalfOpen { opened_at_ms: TimeMs, probe_deadline_ms: TimeMs },
}

/// One endpoint's circuit breaker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breaker {
    config: BreakerConfig,
    phase: Phase,
    /// Raised by every change of state; permits carry the value they were given under.
    generation: u64,
    window: Window,
    /// The latest time seen.
    now_ms: TimeMs,
}

impl Breaker {
    /// A closed breaker.
    ///
    /// # Panics
    /// If `config` fails [`BreakerConfig::validate`]: configuration is checked where it enters
    /// the system, so a bad one here is a bug.
    pub fn new(config: BreakerConfig) -> Breaker {
        if let Err(e) = config.validate() {
            panic!("invalid breaker configuration: {e}");
        }
        Breaker { config, phase: Phase::Closed, generation: 0, window: Window::new(config.window_ms), now_ms: 0 }
    }

    pub fn config(&self) -> &BreakerConfig {
        &self.config
    }

    pub fn state(&self) -> BreakerState {
        match self.phase {
            Phase::Closed => BreakerState::Closed,
            Phase::Open { .. } => BreakerState::Open,
            Phase::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    /// Whether a call may go now.
    pub fn allow(&mut self, now_ms: TimeMs) -> Admission {
        let now = self.advance(now_ms);
        match self.phase {
            Phase::Closed => Admission::Permitted(Permit { generation: self.generation, probe: false }),
            Phase::Open { opened_at_ms, retry_at_ms }
            | Phase::HalfOpen { opened_at_ms, probe_deadline_ms: retry_at_ms } => {
                if now < retry_at_ms {
                    return Admission::Rejected { retry_at_ms };
                }
                // The cooldown is over, or the probe in flight is presumed lost: this call is
                // the (new) probe, and a new generation disowns any earlier one.
                let probe_deadline_ms = now.saturating_add(self.config.probe_timeout_ms);
                self.change(Phase::HalfOpen { opened_at_ms, probe_deadline_ms });
                Admission::Permitted(Permit { generation: self.generation, probe: true })
            }
        }
    }

    /// Records how a permitted call went. Returns the new state if this changed it. An
    /// outcome for a permit given before the last change of state is ignored.
    pub fn record(&mut self, now_ms: TimeMs, permit: Permit, outcome: Outcome) -> Option<BreakerState> {
        let now = self.advance(now_ms);
        if permit.generation != self.generation {
            return None;
        }
        match (self.phase, outcome) {
            (Phase::Closed, _) => {
                self.window.add(now, outcome);
                let (calls, failures) = self.window.totals(now);
                let tripped = outcome == Outcome::Failure
                    && calls >= self.config.calls_min
                    && u64::from(failures) * 100 >= u64::from(self.config.failure_percent) * u64::from(calls);
                tripped.then(|| self.open(now))
            }
            (Phase::HalfOpen { .. }, Outcome::Success) => {
                self.window = Window::new(self.config.window_ms);
                self.change(Phase::Closed);
                Some(BreakerState::Closed)
            }
            (Phase::HalfOpen { .. }, Outcome::Failure) => Some(self.open(now)),
            // No permit of the current generation exists while open.
            (Phase::Open { .. }, _) => None,
        }
    }

    /// The state with its figures, as of `now_ms`.
    pub fn snapshot(&self, now_ms: TimeMs) -> BreakerSnapshot {
        let now = now_ms.max(self.now_ms);
        let (calls, failures) = match self.phase {
            Phase::Closed => self.window.totals(now),
            _ => (0, 0),
        };
        let (opened_at_ms, next_probe_at_ms) = match self.phase {
            Phase::Closed => (None, None),
            Phase::Open { opened_at_ms, retry_at_ms } => (Some(opened_at_ms), Some(retry_at_ms)),
            Phase::HalfOpen { opened_at_ms, probe_deadline_ms } => (Some(opened_at_ms), Some(probe_deadline_ms)),
        };
        let failure_rate = if calls == 0 { 0.0 } else { f64::from(failures) / f64::from(calls) };
        BreakerSnapshot { state: self.state(), calls, failures, failure_rate, opened_at_ms, next_probe_at_ms }
    }

    fn advance(&mut self, now_ms: TimeMs) -> TimeMs {
        self.now_ms = self.now_ms.max(now_ms);
        self.now_ms
    }

    fn open(&mut self, now: TimeMs) -> BreakerState {
        self.change(Phase::Open { opened_at_ms: now, retry_at_ms: now.saturating_add(self.config.cooldown_ms) });
        BreakerState::Open
    }

    fn change(&mut self, phase: Phase) {
        self.phase = phase;
        self.generation += 1;
    }
}

/// Outcomes of the last `WINDOW_BUCKETS` buckets, in a ring.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Window {
    bucket_ms: u64,
    buckets: [Bucket; WINDOW_BUCKETS],
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Bucket {
    /// `time / bucket_ms` of the outcomes counted here.
    index: u64,
    calls: u32,
    failures: u32,
}

impl Window {
    fn new(window_ms: u64) -> Window {
        Window {
            bucket_ms: window_ms.div_ceil(WINDOW_BUCKETS as u64).max(1),
            buckets: [Bucket::default(); WINDOW_BUCKETS],
        }
    }

    fn add(&mut self, now: TimeMs, outcome: Outcome) {
        let index = now / self.bucket_ms;
        let bucket = &mut self.buckets[(index % WINDOW_BUCKETS as u64) as usize];
        if bucket.index != index {
            *bucket = Bucket { index, calls: 0, failures: 0 };
        }
        bucket.calls = bucket.calls.saturating_add(1);
        if outcome == Outcome::Failure {
            bucket.failures = bucket.failures.saturating_add(1);
        }
    }

    /// Calls and failures in the current bucket and the ones before it in the window.
    fn totals(&self, now: TimeMs) -> (u32, u32) {
        let index = now / self.bucket_ms;
        self.buckets
            .iter()
            .filter(|b| b.index <= index && b.index.saturating_add(WINDOW_BUCKETS as u64) > index)
            .fold((0u32, 0u32), |(c, f), b| (c.saturating_add(b.calls), f.saturating_add(b.failures)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One step of a script: at a time, ask or answer, and what the breaker must say.
    enum Step {
        /// `allow` must permit (a probe or not).
        Allowed { at: TimeMs, probe: bool },
        /// `allow` must reject until `retry_at`.
        Rejected { at: TimeMs, retry_at: TimeMs },
        /// Record the outcome of the latest permit; the state after must be `then`.
        Record { at: TimeMs, outcome: Outcome, then: BreakerState },
        /// Record for the permit given `back` permits ago (a stale one); nothing may change.
        Late { at: TimeMs, back: usize, outcome: Outcome },
    }
    use Outcome::{Failure, Success};
    use Step::*;

    fn config() -> BreakerConfig {
        BreakerConfig {
            window_ms: 10_000,
            calls_min: 4,
            failure_percent: 50,
            cooldown_ms: 5_000,
            probe_timeout_ms: 2_000,
        }
    }

    fn check(config: BreakerConfig, script: &[Step]) {
        let mut breaker = Breaker::new(config);
        let mut permits: Vec<Permit> = Vec::new();
        for (i, step) in script.iter().enumerate() {
            match *step {
                Allowed { at, probe } => match breaker.allow(at) {
                    Admission::Permitted(p) => {
                        assert_eq!(p.is_probe(), probe, "step {i}: probe");
                        permits.push(p);
                    }
                    other => panic!("step {i}: expected a permit, got {other:?}"),
                },
                Rejected { at, retry_at } => {
                    assert_eq!(breaker.allow(at), Admission::Rejected { retry_at_ms: retry_at }, "step {i}")
                }
                Record { at, outcome, then } => {
                    let before = breaker.state();
                    let permit = *permits.last().expect("a permit to record");
                    let changed = breaker.record(at, permit, outcome);
                    assert_eq!(breaker.state(), then, "step {i}: state");
                    assert_eq!(changed, (before != then).then_some(then), "step {i}: reported change");
                }
                Late { at, back, outcome } => {
                    let before = breaker.clone();
                    let permit = permits[permits.len() - 1 - back];
                    assert_eq!(breaker.record(at, permit, outcome), None, "step {i}");
                    assert_eq!(breaker.state(), before.state(), "step {i}");
                }
            }
        }
    }

    fn closed_call(at: TimeMs, outcome: Outcome, then: BreakerState) -> [Step; 2] {
        [Allowed { at, probe: false }, Record { at, outcome, then }]
    }

    #[test]
    fn opens_at_the_threshold_with_enough_calls() {
        let mut script = Vec::new();
        // Three failures: 100 % but fewer than calls_min calls.
        for t in [0, 1, 2] {
            script.extend(closed_call(t, Failure, BreakerState::Closed));
        }
        // A success does not trip it, whatever the rate.
        script.extend(closed_call(3, Success, BreakerState::Closed));
        // 4 failures of 5 calls.
        script.extend(closed_call(4, Failure, BreakerState::Open));
        script.push(Rejected { at: 5, retry_at: 5_004 });
        script.push(Rejected { at: 5_003, retry_at: 5_004 });
        check(config(), &script);
    }

    #[test]
    fn exactly_the_threshold_opens() {
        let mut script = Vec::new();
        script.extend(closed_call(0, Success, BreakerState::Closed));
        script.extend(closed_call(0, Success, BreakerState::Closed));
        script.extend(closed_call(0, Failure, BreakerState::Closed));
        script.extend(closed_call(0, Failure, BreakerState::Open)); // 2 of 4 = 50 %
        check(config(), &script);
    }

    #[test]
    fn old_outcomes_leave_the_window() {
        let mut script = Vec::new();
        for t in [0, 1, 2] {
            script.extend(closed_call(t, Failure, BreakerState::Closed));
        }
        // 10 s later the first bucket has left: one more failure is 1 of 1 call.
        script.extend(closed_call(10_000, Failure, BreakerState::Closed));
        script.extend(closed_call(10_001, Failure, BreakerState::Closed));
        script.extend(closed_call(10_002, Failure, BreakerState::Closed));
        script.extend(closed_call(10_003, Failure, BreakerState::Open));
        check(config(), &script);
    }

    #[test]
    fn one_probe_after_the_cooldown_decides() {
        let mut script = Vec::new();
        for t in 0..4 {
            script.extend(closed_call(t, Failure, if t == 3 { BreakerState::Open } else { BreakerState::Closed }));
        }
        script.extend([
            Rejected { at: 100, retry_at: 5_003 },
            Allowed { at: 5_003, probe: true },
            // Others fail fast while the probe is out, until it is presumed lost.
            Rejected { at: 5_004, retry_at: 7_003 },
            Rejected { at: 7_002, retry_at: 7_003 },
            Record { at: 7_002, outcome: Failure, then: BreakerState::Open },
            Rejected { at: 7_003, retry_at: 12_002 },
            Allowed { at: 12_002, probe: true },
            Record { at: 12_500, outcome: Success, then: BreakerState::Closed },
            // Closed again, with an empty window.
            Allowed { at: 12_501, probe: false },
            Record { at: 12_501, outcome: Failure, then: BreakerState::Closed },
        ]);
        check(config(), &script);
    }

    #[test]
    fn a_lost_probe_is_replaced_and_its_late_outcome_ignored() {
        let mut script = Vec::new();
        for t in 0..4 {
            script.extend(closed_call(t, Failure, if t == 3 { BreakerState::Open } else { BreakerState::Closed }));
        }
        script.extend([
            Allowed { at: 5_003, probe: true },
            Allowed { at: 7_003, probe: true },
            // The first probe answers late: ignored.
            Late { at: 7_004, back: 1, outcome: Success },
            Rejected { at: 7_005, retry_at: 9_003 },
            Record { at: 7_010, outcome: Success, then: BreakerState::Closed },
        ]);
        check(config(), &script);
    }

    #[test]
    fn calls_from_before_opening_cannot_close_it() {
        let mut script = vec![Allowed { at: 0, probe: false }];
        for t in 1..5 {
            script.extend(closed_call(t, Failure, if t == 4 { BreakerState::Open } else { BreakerState::Closed }));
        }
        script.extend([
            Late { at: 6, back: 4, outcome: Success },
            Allowed { at: 5_004, probe: true },
            Late { at: 5_005, back: 5, outcome: Success },
            Record { at: 5_006, outcome: Failure, then: BreakerState::Open },
        ]);
        check(config(), &script);
    }

    #[test]
    fn time_never_runs_backwards() {
        let mut script = Vec::new();
        for t in 0..4 {
            script.extend(closed_call(
                1_000 + t,
                Failure,
                if t == 3 { BreakerState::Open } else { BreakerState::Closed },
            ));
        }
        // A time from before the opening is read as the latest time seen.
        script.push(Rejected { at: 0, retry_at: 6_003 });
        check(config(), &script);
    }

    #[test]
    fn snapshots_show_state_rate_and_times() {
        let mut b = Breaker::new(config());
        let calls = [Success, Failure, Success];
        for (t, outcome) in calls.into_iter().enumerate() {
            let Admission::Permitted(p) = b.allow(t as u64) else { panic!() };
            b.record(t as u64, p, outcome);
        }
        let s = b.snapshot(10);
        assert_eq!(
            (s.state, s.calls, s.failures, s.opened_at_ms, s.next_probe_at_ms),
            (BreakerState::Closed, 3, 1, None, None)
        );
        assert!((s.failure_rate - 1.0 / 3.0).abs() < 1e-12);
        // A second failure makes 2 of 4 calls: open.
        let Admission::Permitted(p) = b.allow(20) else { panic!() };
        assert_eq!(b.record(20, p, Failure), Some(BreakerState::Open));
        let s = b.snapshot(30);
        assert_eq!((s.state, s.opened_at_ms, s.next_probe_at_ms), (BreakerState::Open, Some(20), Some(5_020)));
        let json = serde_json::to_value(s).unwrap();
        assert_eq!(json["state"], "open");
        assert_eq!(json["next_probe_at_ms"], 5_020);
        assert_eq!(serde_json::to_value(BreakerState::HalfOpen).unwrap(), "half_open");
    }

    #[test]
    fn configuration_is_validated() {
        assert_eq!(BreakerConfig::default().validate(), Ok(()));
        let bad = [
            (BreakerConfig { window_ms: 10, ..config() }, "window_ms"),
            (BreakerConfig { calls_min: 0, ..config() }, "calls_min"),
            (BreakerConfig { failure_percent: 0, ..config() }, "failure_percent"),
            (BreakerConfig { failure_percent: 101, ..config() }, "failure_percent"),
            (BreakerConfig { cooldown_ms: BREAKER_COOLDOWN_MS_MAX + 1, ..config() }, "cooldown_ms"),
            (BreakerConfig { probe_timeout_ms: 0, ..config() }, "probe_timeout_ms"),
        ];
        for (c, field) in bad {
            assert_eq!(c.validate().unwrap_err().field, field);
        }
        let parsed: BreakerConfig = serde_json::from_str(r#"{"cooldown_ms": 1000}"#).unwrap();
        assert_eq!(parsed, BreakerConfig { cooldown_ms: 1_000, ..BreakerConfig::default() });
    }
}
