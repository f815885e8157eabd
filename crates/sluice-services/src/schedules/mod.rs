//! Schedules: cron or fixed-interval recurring sends into a queue or a topic, each tick fired
//! exactly once, across restarts and nodes.
//!
//! A schedule is one store record (`record.rs`) holding its definition and where its ticks
//! stand. Firing a tick is one atomic commit (`CommitStore`): a compare-and-swap of the record
//! (the tick recorded as fired, the next one computed) together with the sends of the tick's
//! message. A crash cannot separate them, so a restart neither repeats nor loses the tick; two
//! nodes racing for it both try the same condition and exactly one commit wins. When the tick
//! is due and how downtime is caught up are pure decisions (`spec.rs`, `plan.rs`); this module
//! keeps the records and runs the loop (`fire.rs`) on the services' clock.

mod fire;
pub mod plan;
pub mod record;
pub mod spec;

use std::sync::Arc;

use sluice_clock::Clock;
use sluice_core::ValidationError;
use sluice_store::{RECORD_LIST_LIMIT_MAX, Store, StoreError};
use tokio::sync::Notify;

pub use record::{CatchUp, Definition, JobTarget, SCHEDULE_KIND, ScheduleRecord, State, Target};

use crate::topics::{Origin, TopicError, Topics};
use spec::Spec;

/// Longest schedule name, in bytes (`[A-Za-z0-9._-]`).
pub const SCHEDULE_NAME_LEN_MAX: usize = 128;
/// Most schedules one server keeps.
pub const SCHEDULES_MAX: usize = 10_000;
/// Largest message a schedule sends (body and attributes), in bytes.
pub const SCHEDULE_MESSAGE_BYTES_MAX: u64 = 256 * 1024;
/// How many upcoming ticks a view lists.
pub const SCHEDULE_UPCOMING_COUNT: usize = 5;
/// How often the loop reads every schedule again to see the changes made on other nodes
/// (real time: it decides only how soon a change is noticed, never when a tick is due).
pub const SCHEDULE_REFRESH_MS: u64 = 1_000;
/// After a failure to fire (the target missing, the message refused), how long until the next
/// attempt, on the clock.
pub const SCHEDULE_RETRY_MS: u64 = 5_000;
/// The attribute every fired message carries: its tick's scheduled time (RFC 3339).
pub const SCHEDULED_AT_ATTRIBUTE: &str = "scheduled_at";
/// The attribute naming the schedule that fired the message.
pub const SCHEDULE_ATTRIBUTE: &str = "sluice.schedule";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("no schedule is named {0:?}")]
    NotFound(String),
    /// The name is taken by a schedule with another definition.
    #[error("schedule {0:?} exists with a different definition")]
    Exists(String),
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("at most {SCHEDULES_MAX} schedules")]
    TooMany,
    #[error("the schedule changed under this call too often; try again")]
    Contended,
    #[error("a stored schedule could not be read: {0}")]
    Corrupt(String),
    #[error(transparent)]
    Topic(#[from] TopicError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A schedule with its upcoming ticks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleView {
    pub record: ScheduleRecord,
    /// The next ticks that would fire (none while paused or once ended).
    pub upcoming_ms: Vec<u64>,
}

/// The schedules service: one per server.
pub struct Schedules {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    topics: Arc<Topics>,
    /// Wakes the loop after a change through this node.
    changed: Notify,
}

impl Schedules {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, topics: Arc<Topics>) -> Arc<Schedules> {
        Arc::new(Schedules { store, clock, topics, changed: Notify::new() })
    }

    /// Creates a schedule; `true` when it is new. The same definition again returns the
    /// existing schedule; another definition under its name is `Exists`.
    pub async fn create(&self, definition: Definition, origin: &Origin) -> Result<(ScheduleView, bool), ScheduleError> {
        check(&definition)?;
        let now = self.clock.now_ms();
        let mut record = ScheduleRecord {
            format: record::RECORD_FORMAT,
            definition,
            created_at_ms: now,
            origin: (origin.base_url.clone(), origin.sender.clone()),
            state: State::default(),
        };
        let spec = record.spec().map_err(|e| invalid(field_of(&record.definition), e.0))?;
        record.state.next_tick_ms = first_tick(&spec, &record.definition, now);
        if let Target::Topic(topic) = &record.definition.target {
            // The topic must exist now; the message must be one SNS takes.
            let publication = fire::publication(&record, now);
            self.topics.check_publication(topic, &publication).await?;
        }
        let name = record.definition.name.clone();
        if self.store.list_records(SCHEDULE_KIND, "", None, RECORD_LIST_LIMIT_MAX).await?.len() >= SCHEDULES_MAX
            && self.store.get_record(SCHEDULE_KIND, &name).await?.is_none()
        {
            return Err(ScheduleError::TooMany);
        }
        if self.store.insert_record(SCHEDULE_KIND, &name, record.encode()).await? {
            self.changed.notify_one();
            return Ok((self.view(record), true));
        }
        let existing = self.record(&name).await?;
        if existing.definition == record.definition {
            Ok((self.view(existing), false))
        } else {
            Err(ScheduleError::Exists(name))
        }
    }

    pub async fn get(&self, name: &str) -> Result<ScheduleView, ScheduleError> {
        Ok(self.view(self.record(name).await?))
    }

    /// Schedules whose names start with `prefix`, after `after`, at most `limit`.
    pub async fn list(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ScheduleView>, ScheduleError> {
        let records = self.store.list_records(SCHEDULE_KIND, prefix, after, limit).await?;
        records
            .iter()
            .map(|r| ScheduleRecord::decode(&r.value).map(|s| self.view(s)).map_err(ScheduleError::Corrupt))
            .collect()
    }

    /// Deletes the schedule; `false` when there was none. A tick being fired on another node
    /// at that moment loses its compare-and-swap and is not sent.
    pub async fn delete(&self, name: &str) -> Result<bool, ScheduleError> {
        Ok(self.store.delete_record(SCHEDULE_KIND, name).await?)
    }

    /// Stops firing until resumed.
    pub async fn pause(&self, name: &str) -> Result<ScheduleView, ScheduleError> {
        self.update(name, |state, _, _| state.paused = true).await
    }

    /// Fires again from the next tick to come: ticks that passed while paused are not caught
    /// up (pausing means not wanting them).
    pub async fn resume(&self, name: &str) -> Result<ScheduleView, ScheduleError> {
        let view = self
            .update(name, |state, spec, now| {
                if state.paused {
                    state.paused = false;
                    state.next_tick_ms = spec.and_then(|(spec, d)| first_tick(spec, d, now));
                }
            })
            .await?;
        self.changed.notify_one();
        Ok(view)
    }

    /// Read-modify-write of a schedule's state by compare-and-swap, retried when the loop on
    /// some node fired a tick meanwhile.
    async fn update(
        &self,
        name: &str,
        change: impl Fn(&mut State, Option<(&Spec, &Definition)>, u64),
    ) -> Result<ScheduleView, ScheduleError> {
        for _ in 0..16 {
            let Some(bytes) = self.store.get_record(SCHEDULE_KIND, name).await? else {
                return Err(ScheduleError::NotFound(name.to_string()));
            };
            let mut record = ScheduleRecord::decode(&bytes).map_err(ScheduleError::Corrupt)?;
            let spec = record.spec().ok();
            let definition = record.definition.clone();
            change(&mut record.state, spec.as_ref().map(|s| (s, &definition)), self.clock.now_ms());
            if self.store.replace_record(SCHEDULE_KIND, name, bytes, record.encode()).await? {
                return Ok(self.view(record));
            }
        }
        Err(ScheduleError::Contended)
    }

    async fn record(&self, name: &str) -> Result<ScheduleRecord, ScheduleError> {
        let bytes = self.store.get_record(SCHEDULE_KIND, name).await?;
        let bytes = bytes.ok_or_else(|| ScheduleError::NotFound(name.to_string()))?;
        ScheduleRecord::decode(&bytes).map_err(ScheduleError::Corrupt)
    }

    fn view(&self, record: ScheduleRecord) -> ScheduleView {
        let mut upcoming_ms = Vec::new();
        if let (false, Some(first), Ok(spec)) = (record.state.paused, record.state.next_tick_ms, record.spec()) {
            let ends = |t: u64| record.definition.end_at_ms.is_some_and(|end| t > end);
            let mut tick = Some(first);
            while let Some(t) = tick
                && upcoming_ms.len() < SCHEDULE_UPCOMING_COUNT
                && !ends(t)
            {
                upcoming_ms.push(t);
                tick = spec.next_after(t);
            }
        }
        ScheduleView { record, upcoming_ms }
    }
}

/// The first tick at or after the later of `now` and the start.
fn first_tick(spec: &Spec, definition: &Definition, now: u64) -> Option<u64> {
    let from = definition.start_at_ms.unwrap_or(0).max(now);
    spec.next_after(from.saturating_sub(1)).filter(|&t| definition.end_at_ms.is_none_or(|end| t <= end))
}

fn invalid(field: &str, message: impl Into<String>) -> ScheduleError {
    ScheduleError::Invalid(ValidationError::new(field, message))
}

fn field_of(definition: &Definition) -> &'static str {
    if definition.cron.is_some() { "cron" } else { "every_ms" }
}

/// The rules of a definition that need no store: name, recurrence, window, message.
fn check(d: &Definition) -> Result<(), ScheduleError> {
    let name = sluice_core::name::without_tenant(&d.name)?;
    let name_ok = !name.is_empty()
        && name.len() <= SCHEDULE_NAME_LEN_MAX
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !name_ok {
        return Err(invalid("name", format!("a schedule name is 1 to {SCHEDULE_NAME_LEN_MAX} of [A-Za-z0-9._-]")));
    }
    match (&d.cron, d.every_ms) {
        (Some(_), Some(_)) => return Err(invalid("cron", "give cron or every_ms, not both")),
        (None, None) => return Err(invalid("cron", "give cron (an expression) or every_ms (an interval)")),
        (Some(cron), None) => {
            Spec::cron(cron, &d.timezone)
                .map_err(|e| invalid(if e.0.contains("zone") { "timezone" } else { "cron" }, e.0))?;
        }
        (None, Some(every_ms)) => {
            Spec::every(every_ms, 0).map_err(|e| invalid("every_ms", e.0))?;
            if d.timezone != "UTC" {
                return Err(invalid("timezone", "a time zone applies to cron expressions only"));
            }
        }
    }
    if let (Some(start), Some(end)) = (d.start_at_ms, d.end_at_ms)
        && end < start
    {
        return Err(invalid("end_at", "the end is before the start"));
    }
    if d.target.name().is_empty() {
        return Err(invalid("target", "name a queue, a topic or a stream"));
    }
    if let Target::Stream(stream) = &d.target {
        sluice_core::stream::validate_name("target.stream", stream)?;
    }
    if let Target::Job(job) = &d.target {
        // The job a tick would enqueue, checked as an enqueue checks it (`now` 0: no run_at).
        let tick_job = fire::job(d, job, 0);
        tick_job.validate(0).map_err(|mut v| {
            v.field = match v.field.as_str() {
                "payload" => "message.body".into(),
                "type" => "target.job.type".into(),
                other => format!("target.job.{other}"),
            };
            v
        })?;
        if serde_json::from_slice::<serde::de::IgnoredAny>(&d.message.body).is_err() {
            return Err(invalid("message.body", "a job's payload is JSON: the message body must be JSON text"));
        }
    }
    let size = sluice_core::NewMessage {
        body: d.message.body.clone(),
        attributes: d.message.attributes.clone(),
        ..Default::default()
    }
    .size_bytes();
    if size > SCHEDULE_MESSAGE_BYTES_MAX {
        return Err(invalid("message", format!("a schedule's message is at most {SCHEDULE_MESSAGE_BYTES_MAX} bytes")));
    }
    if d.priority > sluice_core::limits::PRIORITY_MAX {
        return Err(invalid("message.priority", format!("priority is 0 to {}", sluice_core::limits::PRIORITY_MAX)));
    }
    Ok(())
}
