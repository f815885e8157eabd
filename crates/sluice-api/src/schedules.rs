//! Wire types of `/v1/schedules`: recurring sends into a queue, a topic, a stream or jobs.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::SendMessage;

/// Where every tick's message goes: exactly one of the fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleTarget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// A stream: each tick appends one record keyed by the schedule's name, with the tick's
    /// `scheduled_at` as a header and `NAME/TICK_MS` as its dedup id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    /// A job: each tick enqueues one, with the message's body (JSON) as its payload, tagged
    /// `schedule=NAME` and `scheduled_at=RFC3339`, and `schedule/NAME/TICK_MS` as its unique key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<ScheduleJob>,
}

/// The job a schedule enqueues every tick.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleJob {
    /// The job queue, as in `POST /v1/jobs`.
    pub queue: String,
    /// The job type, as in `POST /v1/jobs`.
    #[serde(rename = "type")]
    pub job_type: String,
    /// 0 to 9; the message's priority when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
}

/// What to do with ticks missed while no server ran: `none` (default), `latest` (fire the
/// latest once), `all` (fire each, oldest first, at most 1,000).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    #[default]
    None,
    Latest,
    All,
}

/// `POST /v1/schedules`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateScheduleRequest {
    /// 1 to 128 of `[A-Za-z0-9._-]`.
    pub name: String,
    /// A cron expression: 5 fields (minute hour day month weekday), or 6 with seconds first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// A fixed interval instead of `cron` (100 ms to a year), from `start_at` or the creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
    /// The IANA time zone of a cron expression's wall-clock times (default `UTC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    pub target: ScheduleTarget,
    /// The message every tick sends, as in a send (`delay_ms`, `deliver_at` and `dedup_id` do
    /// not apply); its attributes gain `scheduled_at`, the tick's time.
    pub message: SendMessage,
    #[serde(default)]
    pub catch_up: CatchUp,
    /// RFC 3339: no tick before this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
    /// RFC 3339: no tick after this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_at: Option<String>,
}

/// A schedule and where its ticks stand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Schedule {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
    pub timezone: String,
    pub target: ScheduleTarget,
    pub message: SendMessage,
    pub catch_up: CatchUp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_at: Option<String>,
    pub created_at: String,
    /// `active`, `paused` or `ended`.
    pub status: String,
    /// The next tick, unless paused or ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_fire_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_fire_at_ms: Option<u64>,
    /// The next few ticks (RFC 3339).
    pub upcoming: Vec<String>,
    /// Ticks fired, and ticks passed over after downtime by the catch-up policy.
    pub fired: u64,
    pub skipped: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_tick_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fired_at: Option<String>,
    /// Why the last attempt to fire failed (the target missing, the message refused); cleared
    /// by the next fire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub errors: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ScheduleList {
    pub schedules: Vec<Schedule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
}
