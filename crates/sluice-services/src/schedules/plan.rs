//! Which ticks a schedule fires now: the pure decision the firing loop acts on, from the
//! schedule's recurrence, its catch-up policy, where its ticks stand, and the time.
//!
//! A tick is *on time* while less than `SCHEDULE_MISFIRE_GRACE_MS` has passed since it; older
//! due ticks were *missed* (no node could fire them: downtime) and the catch-up policy decides
//! which of them still fire. On-time ticks always fire.

use std::collections::VecDeque;

use super::record::{CatchUp, Definition, State};
use super::spec::Spec;

/// How late a tick may fire and still count as on time, not missed.
pub const SCHEDULE_MISFIRE_GRACE_MS: u64 = 60_000;
/// Most missed ticks `catch_up: all` fires after one downtime; older ones are skipped (and
/// counted).
pub const SCHEDULE_CATCH_UP_TICKS_MAX: usize = 1_000;
/// Most due ticks one decision looks at; beyond them the rest of a long downtime is skipped in
/// one step.
const SCAN_TICKS_MAX: u64 = 1_000_000;

/// What to do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Missed ticks to pass over first, without firing.
    pub skip: u64,
    /// Ticks to fire, oldest first.
    pub fires: Vec<u64>,
    /// The first tick after all of that (`None`: the schedule has ended).
    pub next: Option<u64>,
}

impl Plan {
    /// The tick after `fires[i]`.
    pub fn after_fire(&self, i: usize) -> Option<u64> {
        self.fires.get(i + 1).copied().or(self.next)
    }

    /// Whether there is nothing to do before `next`.
    pub fn is_idle(&self) -> bool {
        self.skip == 0 && self.fires.is_empty()
    }
}

pub fn plan(spec: &Spec, definition: &Definition, state: &State, now_ms: u64) -> Plan {
    let idle = |next| Plan { skip: 0, fires: Vec::new(), next };
    let Some(first) = state.next_tick_ms else { return idle(None) };
    if state.paused || first > now_ms {
        return idle(Some(first));
    }
    let ends = |t: u64| definition.end_at_ms.is_some_and(|end| t > end);
    let following = |t: u64| spec.next_after(t).filter(|&n| !ends(n));
    let missed = |t: u64| now_ms.saturating_sub(t) > SCHEDULE_MISFIRE_GRACE_MS;
    let keep = match definition.catch_up {
        CatchUp::All => SCHEDULE_CATCH_UP_TICKS_MAX,
        CatchUp::Latest => 1,
        CatchUp::None => 0,
    };

    // The latest `keep` missed ticks, how many missed ticks there were, and the on-time ones.
    let mut kept: VecDeque<u64> = VecDeque::new();
    let mut missed_count = 0u64;
    let mut on_time = Vec::new();
    let mut tick = (!ends(first)).then_some(first);
    let mut scanned = 0;
    while let Some(t) = tick
        && t <= now_ms
    {
        if scanned == SCAN_TICKS_MAX {
            // A very long downtime of a very frequent schedule: skip what is left of it.
            let resume = spec.next_after(now_ms.saturating_sub(SCHEDULE_MISFIRE_GRACE_MS));
            missed_count += 1;
            tick = resume.filter(|&n| !ends(n));
            continue;
        }
        scanned += 1;
        if missed(t) {
            missed_count += 1;
            if keep > 0 {
                if kept.len() == keep {
                    kept.pop_front();
                }
                kept.push_back(t);
            }
        } else {
            on_time.push(t);
        }
        tick = following(t);
    }
    let skip = missed_count - kept.len() as u64;
    let fires = kept.into_iter().chain(on_time).collect();
    Plan { skip, fires, next: tick }
}

#[cfg(test)]
mod tests {
    use sluice_core::message::MessageContent;

    use super::*;
    use crate::schedules::record::Target;

    const MIN: u64 = 60_000;

    fn every_minute(catch_up: CatchUp) -> (Spec, Definition) {
        let definition = Definition {
            name: "s".into(),
            cron: None,
            timezone: "UTC".into(),
            every_ms: Some(MIN),
            target: Target::Queue("q".into()),
            message: MessageContent {
                body: Vec::new(),
                body_binary: false,
                attributes: Default::default(),
                system_attributes: Default::default(),
                envelope: Default::default(),
            },
            priority: 0,
            catch_up,
            start_at_ms: None,
            end_at_ms: None,
        };
        (Spec::every(MIN, 0).unwrap(), definition)
    }

    fn at(next: u64) -> State {
        State { next_tick_ms: Some(next), ..State::default() }
    }

    #[test]
    fn on_time_ticks_fire_and_the_future_waits() {
        let (spec, d) = every_minute(CatchUp::None);
        assert_eq!(plan(&spec, &d, &at(10 * MIN), 10 * MIN - 1), Plan { skip: 0, fires: vec![], next: Some(10 * MIN) });
        assert_eq!(
            plan(&spec, &d, &at(10 * MIN), 10 * MIN),
            Plan { skip: 0, fires: vec![10 * MIN], next: Some(11 * MIN) }
        );
        // Late, but inside the grace: still on time.
        let late = plan(&spec, &d, &at(10 * MIN), 10 * MIN + SCHEDULE_MISFIRE_GRACE_MS - 1);
        assert_eq!(late, Plan { skip: 0, fires: vec![10 * MIN], next: Some(11 * MIN) });
        // A frequent schedule whose loop was slow: every tick inside the grace fires.
        let every_ten_seconds = Spec::every(10_000, 0).unwrap();
        let p = plan(&every_ten_seconds, &d, &at(0), 25_000);
        assert_eq!(p, Plan { skip: 0, fires: vec![0, 10_000, 20_000], next: Some(30_000) });
        let paused = State { paused: true, ..at(10 * MIN) };
        assert!(plan(&spec, &d, &paused, 20 * MIN).is_idle());
    }

    #[test]
    fn after_downtime_each_policy_fires_what_it_promises() {
        // Down from just after 10:00 to 15:30: 10:00..=14:00 are missed, 15:00 is on time.
        let now = 15 * MIN + 30_000;
        let (spec, none) = every_minute(CatchUp::None);
        assert_eq!(
            plan(&spec, &none, &at(10 * MIN), now),
            Plan { skip: 5, fires: vec![15 * MIN], next: Some(16 * MIN) }
        );
        let (_, latest) = every_minute(CatchUp::Latest);
        let expected = Plan { skip: 4, fires: vec![14 * MIN, 15 * MIN], next: Some(16 * MIN) };
        assert_eq!(plan(&spec, &latest, &at(10 * MIN), now), expected);
        let (_, all) = every_minute(CatchUp::All);
        let fires: Vec<u64> = (10..=15).map(|m| m * MIN).collect();
        assert_eq!(plan(&spec, &all, &at(10 * MIN), now), Plan { skip: 0, fires, next: Some(16 * MIN) });
    }

    #[test]
    fn catching_up_all_is_bounded_and_the_end_is_respected() {
        let (spec, all) = every_minute(CatchUp::All);
        let now = 5_000 * MIN;
        let p = plan(&spec, &all, &at(0), now);
        // Ticks 0..=4998 were missed; 4999 (exactly the grace ago) and 5000 are on time.
        assert_eq!(
            p.fires.len(),
            SCHEDULE_CATCH_UP_TICKS_MAX + 2,
            "the newest 1,000 missed ticks and the on-time ones"
        );
        assert_eq!(p.skip, 4_999 - SCHEDULE_CATCH_UP_TICKS_MAX as u64);
        assert_eq!((p.fires[0], p.fires.last()), (3_999 * MIN, Some(&now)));
        let (spec, mut ending) = every_minute(CatchUp::All);
        ending.end_at_ms = Some(3 * MIN);
        assert_eq!(
            plan(&spec, &ending, &at(2 * MIN), 3 * MIN),
            Plan { skip: 0, fires: vec![2 * MIN, 3 * MIN], next: None }
        );
        assert_eq!(plan(&spec, &ending, &at(4 * MIN), 9 * MIN), Plan { skip: 0, fires: vec![], next: None });
    }
}
