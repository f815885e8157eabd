//! A schedule as it is stored: one record of kind `schedule` per name, holding both the
//! definition a user gave and the state of its ticks, so that the write that fires a tick is
//! the same compare-and-swap that records it.

use serde::{Deserialize, Serialize};
use sluice_core::message::MessageContent;

use super::spec::{Spec, SpecError};

pub const SCHEDULE_KIND: &str = "schedule";
/// The record's format; a newer Sluice reads older formats.
pub const RECORD_FORMAT: u8 = 1;

/// Where a tick's message goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    Queue(String),
    Topic(String),
    /// A stream: each tick appends one record keyed by the schedule's name, so that the ticks
    /// of a schedule keep their order in one partition.
    Stream(String),
    /// A job queue: each tick enqueues one job, deduplicated by its unique key
    /// `schedule/NAME/TICK_MS` (the enqueue comes before the record's swap, so a tick fired
    /// again after a crash or by a racing node finds its job there).
    Job(JobTarget),
}

/// The job every tick enqueues; the schedule's message body (JSON) is its payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobTarget {
    pub queue: String,
    pub job_type: String,
    #[serde(default)]
    pub priority: Option<u8>,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub max_attempts: Option<u32>,
}

impl Target {
    pub fn name(&self) -> &str {
        match self {
            Target::Queue(name) | Target::Topic(name) | Target::Stream(name) => name,
            Target::Job(job) => &job.queue,
        }
    }
}

/// What to do with the ticks that passed while no node could fire them (downtime).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Fire none of them; the schedule goes on from the next tick to come.
    None,
    /// Fire the latest of them, once.
    Latest,
    /// Fire every one of them, oldest first (at most `SCHEDULE_CATCH_UP_TICKS_MAX`).
    All,
}

/// A schedule as its user defined it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Definition {
    pub name: String,
    /// A cron expression (5 fields, or 6 with seconds first), or `every_ms`.
    pub cron: Option<String>,
    /// The zone cron's wall-clock times are in (IANA name, default `UTC`).
    pub timezone: String,
    pub every_ms: Option<u64>,
    pub target: Target,
    /// The message every tick sends (its attributes gain `scheduled_at`).
    pub message: MessageContent,
    pub priority: u8,
    pub catch_up: CatchUp,
    /// No tick before `start_at_ms`; none after `end_at_ms`.
    pub start_at_ms: Option<u64>,
    pub end_at_ms: Option<u64>,
}

/// Where the ticks stand. Changed only by compare-and-swap of the whole record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub paused: bool,
    /// The next tick not yet fired or skipped; `None` once the schedule has ended.
    pub next_tick_ms: Option<u64>,
    pub fired: u64,
    /// Ticks passed over by the catch-up policy after downtime.
    pub skipped: u64,
    pub last_tick_ms: Option<u64>,
    pub last_fired_at_ms: Option<u64>,
    /// The last failure to fire (the target missing, the message refused), cleared by a fire.
    pub last_error: Option<String>,
    pub errors: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleRecord {
    pub format: u8,
    #[serde(flatten)]
    pub definition: Definition,
    pub created_at_ms: u64,
    /// The base URL and sender id written into the SNS envelopes of a topic target's copies.
    pub origin: (String, String),
    pub state: State,
}

impl ScheduleRecord {
    /// The recurrence, from the stored definition (checked when it was created).
    pub fn spec(&self) -> Result<Spec, SpecError> {
        let d = &self.definition;
        match (&d.cron, d.every_ms) {
            (Some(cron), _) => Spec::cron(cron, &d.timezone),
            (None, Some(every_ms)) => Spec::every(every_ms, d.start_at_ms.unwrap_or(self.created_at_ms)),
            (None, None) => Err(SpecError("the schedule has neither cron nor every_ms".into())),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a schedule record encodes")
    }

    pub fn decode(bytes: &[u8]) -> Result<ScheduleRecord, String> {
        let record: ScheduleRecord =
            serde_json::from_slice(bytes).map_err(|e| format!("an unreadable schedule record: {e}"))?;
        if record.format > RECORD_FORMAT {
            return Err(format!("schedule record format {} is newer than this Sluice reads", record.format));
        }
        Ok(record)
    }
}
