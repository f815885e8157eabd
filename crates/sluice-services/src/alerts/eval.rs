//! The rules of one alert's life, as pure functions of what was and what is measured now, so
//! that they are tested on data: [`step`] moves an alert between nothing, pending, firing and
//! resolved; [`Growth`] keeps the recent figures that `lag_growing` compares against, and
//! [`Rates`] turns running totals into per-second rates (`rejected_rate_above`).
//!
//! An alert is pending from the first evaluation whose condition holds; it fires at the first
//! evaluation at least `for_ms` later at which the condition still holds, and it resolves at the
//! first evaluation at which it no longer does. A pending alert whose condition stops holding is
//! forgotten without a word, which is what keeps a condition that flickers faster than `for_ms`
//! from notifying anyone. An evaluation that cannot measure the figure (`None`) changes nothing.

use std::collections::{HashMap, VecDeque};

use super::model::Status;

/// A change that a webhook hears about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Fired,
    Resolved,
}

/// Where an alert stands: its status and since when (`None`: no alert).
pub type Phase = Option<(Status, u64)>;

/// The next phase of an alert, and the change to notify if it fired or resolved.
pub fn step(current: Phase, holds: Option<bool>, now_ms: u64, for_ms: u64) -> (Phase, Option<Change>) {
    let Some(holds) = holds else { return (current, None) };
    match (current, holds) {
        (None | Some((Status::Resolved, _)), false) => (None, None),
        (None | Some((Status::Resolved, _)), true) if for_ms == 0 => {
            (Some((Status::Firing, now_ms)), Some(Change::Fired))
        }
        (None | Some((Status::Resolved, _)), true) => (Some((Status::Pending, now_ms)), None),
        (Some((Status::Pending, _)), false) => (None, None),
        (Some((Status::Pending, since)), true) if now_ms.saturating_sub(since) >= for_ms => {
            (Some((Status::Firing, now_ms)), Some(Change::Fired))
        }
        (Some((Status::Pending, since)), true) => (Some((Status::Pending, since)), None),
        (Some((Status::Firing, since)), true) => (Some((Status::Firing, since)), None),
        (Some((Status::Firing, _)), false) => (Some((Status::Resolved, now_ms)), Some(Change::Resolved)),
    }
}

/// Points kept per series at most (an hour at one evaluation every 5 s is 720).
pub const GROWTH_POINTS_MAX: usize = 2_048;

/// Recent figures per key (rule and subject), in memory on the evaluating node: after a
/// restart or a change of evaluator, `lag_growing` measures nothing until a whole window has
/// passed again (an alert already firing stays firing until then).
#[derive(Debug, Default)]
pub struct Growth {
    series: HashMap<String, VecDeque<(u64, f64)>>,
}

impl Growth {
    /// Records `value` at `now_ms` and returns how much it grew over the last `window_ms`: the
    /// difference from the latest point at least `window_ms` old, or `None` while there is no
    /// such point yet.
    pub fn record(&mut self, key: &str, now_ms: u64, value: f64, window_ms: u64) -> Option<f64> {
        let points = self.series.entry(key.to_string()).or_default();
        if points.back().is_some_and(|&(at, _)| at >= now_ms) {
            points.pop_back();
        }
        points.push_back((now_ms, value));
        let horizon = now_ms.checked_sub(window_ms);
        // Drop points older than the newest one that is at least a window old: it is the only
        // old point ever compared against from now on.
        if let Some(horizon) = horizon {
            while points.len() >= 2 && points[1].0 <= horizon {
                points.pop_front();
            }
        }
        while points.len() > GROWTH_POINTS_MAX {
            points.pop_front();
        }
        let &(first_at, first_value) = points.front()?;
        match horizon {
            Some(horizon) if first_at <= horizon => Some(value - first_value),
            _ => None,
        }
    }

    /// Forgets every series whose key is not in `live`.
    pub fn retain(&mut self, live: &std::collections::HashSet<String>) {
        self.series.retain(|key, _| live.contains(key));
    }
}

/// The previous total per key, to turn running totals into rates.
#[derive(Debug, Default)]
pub struct Rates {
    previous: HashMap<String, (u64, u64)>,
}

impl Rates {
    /// The rate per second of `total` since the previous call for `key`; `None` on the first
    /// call, or when no time passed.
    pub fn record(&mut self, key: &str, now_ms: u64, total: u64) -> Option<f64> {
        let previous = self.previous.insert(key.to_string(), (now_ms, total));
        let (at, before) = previous?;
        let elapsed_ms = now_ms.checked_sub(at).filter(|&ms| ms > 0)?;
        Some(total.saturating_sub(before) as f64 * 1000.0 / elapsed_ms as f64)
    }

    pub fn retain(&mut self, live: &std::collections::HashSet<String>) {
        self.previous.retain(|key, _| live.contains(key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs one alert through `(time, condition)` evaluations with `for_ms` and returns the
    /// changes, with their times, and the phase at the end.
    fn run(for_ms: u64, script: &[(u64, Option<bool>)]) -> (Vec<(u64, Change)>, Phase) {
        let mut phase = None;
        let mut changes = Vec::new();
        for &(at, holds) in script {
            let (next, change) = step(phase, holds, at, for_ms);
            phase = next;
            changes.extend(change.map(|c| (at, c)));
        }
        (changes, phase)
    }

    #[test]
    fn fires_after_for_ms_and_resolves_once() {
        let t = |s: u64| s * 1_000;
        let script =
            [(t(0), Some(true)), (t(5), Some(true)), (t(10), Some(true)), (t(15), Some(true)), (t(20), Some(false))];
        let (changes, phase) = run(10_000, &script);
        assert_eq!(changes, [(t(10), Change::Fired), (t(20), Change::Resolved)]);
        assert_eq!(phase, Some((Status::Resolved, t(20))));
        // With no for_ms, the first evaluation that holds fires.
        let (changes, phase) = run(0, &[(t(0), Some(false)), (t(5), Some(true))]);
        assert_eq!(changes, [(t(5), Change::Fired)]);
        assert_eq!(phase, Some((Status::Firing, t(5))));
    }

    #[test]
    fn a_condition_flickering_faster_than_for_ms_never_notifies() {
        let script: Vec<(u64, Option<bool>)> = (0..40).map(|i| (i * 5_000, Some(i % 3 != 2))).collect();
        let (changes, phase) = run(15_000, &script);
        assert_eq!(changes, [], "held for 10 s at most, never the 15 s asked");
        assert_eq!(phase, Some((Status::Pending, 195_000)));
    }

    #[test]
    fn an_unmeasured_figure_changes_nothing() {
        let (changes, phase) = run(0, &[(0, Some(true)), (5, None), (10, None)]);
        assert_eq!(changes, [(0, Change::Fired)]);
        assert_eq!(phase, Some((Status::Firing, 0)), "still firing, since its first evaluation");
        assert_eq!(run(0, &[(0, None)]), (vec![], None));
    }

    #[test]
    fn firing_again_after_a_resolve_is_a_new_change() {
        let (changes, _) = run(0, &[(0, Some(true)), (5, Some(false)), (10, Some(true)), (15, Some(true))]);
        assert_eq!(changes, [(0, Change::Fired), (5, Change::Resolved), (10, Change::Fired)]);
    }

    #[test]
    fn growth_compares_with_the_figure_a_window_ago() {
        let mut growth = Growth::default();
        let window = 30_000;
        assert_eq!(growth.record("k", 0, 10.0, window), None);
        assert_eq!(growth.record("k", 10_000, 12.0, window), None);
        assert_eq!(growth.record("k", 20_000, 15.0, window), None);
        assert_eq!(growth.record("k", 30_000, 20.0, window), Some(10.0));
        assert_eq!(growth.record("k", 40_000, 20.0, window), Some(8.0));
        assert_eq!(growth.record("k", 70_000, 20.0, window), Some(0.0));
        assert_eq!(growth.record("k", 75_000, 5.0, window), Some(-15.0));
        assert!(growth.series["k"].len() <= 3, "old points are dropped: {:?}", growth.series["k"]);
    }

    #[test]
    fn rates_are_per_second_between_calls() {
        let mut rates = Rates::default();
        assert_eq!(rates.record("q", 1_000, 100), None);
        assert_eq!(rates.record("q", 6_000, 150), Some(10.0));
        assert_eq!(rates.record("q", 6_000, 160), None, "no time passed");
    }
}
