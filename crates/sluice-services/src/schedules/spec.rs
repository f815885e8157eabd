//! When a schedule's ticks fall: a cron expression in a time zone, or a fixed interval, between
//! an optional start and end. Pure functions of the time they are given.
//!
//! Cron expressions are parsed and matched by `croner` (5 fields, or 6 with seconds first),
//! always against wall-clock time in the schedule's zone; Sluice decides what a wall-clock time
//! that a daylight-saving change skips or repeats means, as cron does for jobs at fixed times:
//! - a matching time in a gap (spring forward) fires once, at the first instant after the gap;
//! - a matching time that occurs twice (fall back) fires once, at its first occurrence;
//! - ticks strictly increase: several matching times that land on one instant fire once.
//!
//! cron also repeats jobs whose hour is a wildcard during a repeated hour; Sluice does not (a
//! wall-clock time fires once), which is documented in the README.

use std::str::FromStr;

use chrono::{DateTime, Duration, LocalResult, NaiveDateTime, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds};

/// The shortest interval of an `every_ms` schedule.
pub const EVERY_MS_MIN: u64 = 100;
/// The longest: a year.
pub const EVERY_MS_MAX: u64 = 366 * 24 * 60 * 60 * 1000;
/// The longest cron expression, in bytes.
pub const CRON_LEN_MAX: usize = 256;
/// How far past a daylight-saving gap's start its end is looked for (real zones' gaps are at
/// most a few hours), in minutes.
const GAP_MINUTES_MAX: i64 = 24 * 60;

/// How a schedule's ticks recur.
#[derive(Debug, Clone)]
pub enum Spec {
    Cron {
        cron: Box<Cron>,
        zone: Tz,
    },
    /// Every `every_ms` from `anchor_ms` (the start, or when the schedule was created).
    Every {
        every_ms: u64,
        anchor_ms: u64,
    },
}

/// Why a cron expression, zone or interval was refused, in words for the API's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

impl Spec {
    pub fn cron(expression: &str, zone: &str) -> Result<Spec, SpecError> {
        if expression.is_empty() || expression.len() > CRON_LEN_MAX {
            return Err(SpecError(format!("a cron expression is 1 to {CRON_LEN_MAX} bytes")));
        }
        let fields = expression.split_whitespace().count();
        if !(5..=6).contains(&fields) {
            return Err(SpecError(format!(
                "{expression:?} has {fields} fields; cron takes 5 (minute hour day month weekday) or 6 (seconds first)"
            )));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .build()
            .parse(expression)
            .map_err(|e| SpecError(format!("{expression:?} is not a cron expression: {e}")))?;
        let zone = Tz::from_str(zone).map_err(|_| {
            SpecError(format!("{zone:?} is not a time zone of the IANA database (e.g. Europe/Paris, UTC)"))
        })?;
        Ok(Spec::Cron { cron: Box::new(cron), zone })
    }

    pub fn every(every_ms: u64, anchor_ms: u64) -> Result<Spec, SpecError> {
        if !(EVERY_MS_MIN..=EVERY_MS_MAX).contains(&every_ms) {
            return Err(SpecError(format!("every_ms is {EVERY_MS_MIN} to {EVERY_MS_MAX}")));
        }
        Ok(Spec::Every { every_ms, anchor_ms })
    }

    /// The first tick strictly after `after_ms`, if there is one (a cron expression such as
    /// February 30th has none).
    pub fn next_after(&self, after_ms: u64) -> Option<u64> {
        match self {
            Spec::Every { every_ms, anchor_ms } => {
                if after_ms < *anchor_ms {
                    return Some(*anchor_ms);
                }
                let steps = (after_ms - anchor_ms) / every_ms + 1;
                anchor_ms.checked_add(steps.checked_mul(*every_ms)?)
            }
            Spec::Cron { cron, zone } => next_cron_tick(cron, *zone, after_ms),
        }
    }
}

fn instant(ms: u64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_millis(i64::try_from(ms).ok()?)
}

fn millis(t: DateTime<Utc>) -> Option<u64> {
    u64::try_from(t.timestamp_millis()).ok()
}

/// The next wall-clock time after `local` that matches, found by croner on the wall clock
/// itself (evaluated as if it were UTC, where no time is skipped or repeated).
fn next_wall_time(cron: &Cron, local: NaiveDateTime) -> Option<NaiveDateTime> {
    let as_utc = Utc.from_utc_datetime(&local);
    cron.find_next_occurrence(&as_utc, false).ok().map(|t| t.naive_utc())
}

/// The instant a wall-clock time means in `zone`: itself, its first occurrence when it is
/// repeated, or the end of the gap when it is skipped.
fn resolve(zone: Tz, local: NaiveDateTime) -> Option<DateTime<Utc>> {
    match zone.from_local_datetime(&local) {
        LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(first, _) => Some(first.with_timezone(&Utc)),
        LocalResult::None => {
            // In a gap: the first whole minute after it is where the wall clock resumes.
            let minute_start = local.with_second(0)?.with_nanosecond(0)?;
            (1..=GAP_MINUTES_MAX).find_map(|m| match zone.from_local_datetime(&(minute_start + Duration::minutes(m))) {
                LocalResult::None => None,
                LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Some(t.with_timezone(&Utc)),
            })
        }
    }
}

fn next_cron_tick(cron: &Cron, zone: Tz, after_ms: u64) -> Option<u64> {
    let after = instant(after_ms)?;
    // Ticks fall on whole seconds: search from the second `after` is in.
    let mut wall = after.with_timezone(&zone).naive_local().with_nanosecond(0)?;
    // Wall-clock times before `after` can still map to instants after it (a repeated hour
    // read from its second pass): start a little earlier and skip what resolves too early.
    wall -= Duration::hours(26);
    for _ in 0..100_000 {
        wall = next_wall_time(cron, wall)?;
        let tick = resolve(zone, wall)?;
        if tick > after {
            return millis(tick);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ticks after `from` as local wall times with offsets, to read DST behaviour at a glance.
    fn ticks(spec: &Spec, zone: Tz, from: &str, n: usize) -> Vec<String> {
        let start = zone.from_local_datetime(&NaiveDateTime::from_str(from).unwrap()).earliest().unwrap();
        let mut at = millis(start.with_timezone(&Utc)).unwrap();
        let mut out = Vec::new();
        for _ in 0..n {
            at = spec.next_after(at).unwrap();
            out.push(instant(at).unwrap().with_timezone(&zone).format("%m-%d %H:%M:%S%z").to_string());
        }
        out
    }

    fn ny() -> Tz {
        "America/New_York".parse().unwrap()
    }

    #[test]
    fn a_time_in_the_spring_forward_gap_fires_once_when_the_clock_resumes() {
        // 2027-03-14: 02:00 EST jumps to 03:00 EDT.
        let daily = Spec::cron("30 2 * * *", "America/New_York").unwrap();
        assert_eq!(
            ticks(&daily, ny(), "2027-03-13T12:00:00", 3),
            ["03-14 03:00:00-0400", "03-15 02:30:00-0400", "03-16 02:30:00-0400"]
        );
        // Every half hour: 02:00 and 02:30 do not exist; both land on 03:00, which fires once.
        let half_hourly = Spec::cron("*/30 * * * *", "America/New_York").unwrap();
        assert_eq!(
            ticks(&half_hourly, ny(), "2027-03-14T01:10:00", 4),
            ["03-14 01:30:00-0500", "03-14 03:00:00-0400", "03-14 03:30:00-0400", "03-14 04:00:00-0400"]
        );
        // A fixed time just before the gap is not repeated after it.
        let early = Spec::cron("30 1 * * *", "America/New_York").unwrap();
        assert_eq!(ticks(&early, ny(), "2027-03-14T00:50:00", 2), ["03-14 01:30:00-0500", "03-15 01:30:00-0400"]);
    }

    #[test]
    fn a_time_the_fall_back_repeats_fires_once_at_its_first_occurrence() {
        // 2027-11-07: 02:00 EDT falls back to 01:00 EST.
        let daily = Spec::cron("30 1 * * *", "America/New_York").unwrap();
        assert_eq!(ticks(&daily, ny(), "2027-11-07T00:50:00", 2), ["11-07 01:30:00-0400", "11-08 01:30:00-0500"]);
        let half_hourly = Spec::cron("*/30 * * * *", "America/New_York").unwrap();
        assert_eq!(
            ticks(&half_hourly, ny(), "2027-11-07T00:50:00", 4),
            ["11-07 01:00:00-0400", "11-07 01:30:00-0400", "11-07 02:00:00-0500", "11-07 02:30:00-0500"]
        );
        // Asked from inside the repeated hour's second pass, the next tick is still ahead.
        let second_pass = instant(T_NOV7_0115_EST).unwrap();
        let next = daily.next_after(millis(second_pass).unwrap()).unwrap();
        assert_eq!(instant(next).unwrap().with_timezone(&ny()).format("%m-%d %H:%M%z").to_string(), "11-08 01:30-0500");
    }

    /// 2027-11-07 01:15 EST = 06:15 UTC.
    const T_NOV7_0115_EST: u64 = 1_825_568_100_000;

    #[test]
    fn seconds_zones_and_intervals() {
        let every_ten_seconds = Spec::cron("*/10 * * * * *", "UTC").unwrap();
        assert_eq!(every_ten_seconds.next_after(1_000), Some(10_000));
        assert_eq!(every_ten_seconds.next_after(10_000), Some(20_000));
        let paris = Spec::cron("0 9 * * MON-FRI", "Europe/Paris").unwrap();
        // Friday 2027-01-01 08:00 UTC is 09:00 in Paris.
        assert_eq!(paris.next_after(1_798_761_600_000 - 1), Some(1_798_761_600_000 + 8 * 3_600_000));
        let every = Spec::every(1_000, 5_000).unwrap();
        assert_eq!(
            (every.next_after(0), every.next_after(5_000), every.next_after(5_999)),
            (Some(5_000), Some(6_000), Some(6_000))
        );
        assert!(Spec::cron("* * * *", "UTC").unwrap_err().0.contains("4 fields"));
        assert!(Spec::cron("61 * * * *", "UTC").is_err());
        assert!(Spec::cron("0 * * * *", "Mars/Olympus").unwrap_err().0.contains("time zone"));
        assert!(Spec::every(EVERY_MS_MIN - 1, 0).is_err());
        assert_eq!(Spec::cron("0 0 30 2 *", "UTC").unwrap().next_after(0), None, "February 30th never comes");
    }
}
