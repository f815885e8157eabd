//! The firing loop: every node reads the schedules, plans what is due (`plan.rs`) and fires
//! each tick as one commit — the record's compare-and-swap together with the tick's sends — so
//! that a tick fires once whatever crashes and however many nodes race for it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sluice_core::jobs::NewJob;
use sluice_core::message::AttributeData;
use sluice_core::stream::NewRecord;
use sluice_core::{AttributeValue, NewMessage};
use sluice_store::{Conflict, RECORD_LIST_LIMIT_MAX, Refused, StoreError, Write};

use super::plan::{Plan, plan};
use super::record::{Definition, JobTarget, SCHEDULE_KIND, ScheduleRecord, Target};
use super::{SCHEDULE_ATTRIBUTE, SCHEDULE_REFRESH_MS, SCHEDULE_RETRY_MS, SCHEDULED_AT_ATTRIBUTE, Schedules};
use crate::topics::{Origin, Publication};
use crate::trace::CommitLinks;

/// What became of one schedule's turn.
enum Turn {
    /// Wake again at this tick (or never, `None`).
    Wait(Option<u64>),
    /// Another node, or a change through the API, got there first: read it again now.
    Changed,
}

/// Why a commit of a schedule's record did not happen.
enum Unswapped {
    /// The record was changed elsewhere.
    Changed,
    /// The store refused the tick's writes or failed (already logged); why, for the schedule.
    Failed(String),
}

impl Schedules {
    /// Runs until the task is aborted.
    pub async fn run(self: Arc<Self>) {
        // Schedules that failed to fire, and when to try them again (on the clock).
        let mut retry_at: HashMap<String, u64> = HashMap::new();
        loop {
            let mut wake: Option<u64> = None;
            match self.turn(&mut retry_at).await {
                Ok(next) => wake = next,
                Err(e) => tracing::warn!("schedules: {e}"),
            }
            let due = async {
                match wake {
                    Some(at) => self.clock.sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = due => {}
                () = self.changed.notified() => {}
                () = tokio::time::sleep(Duration::from_millis(SCHEDULE_REFRESH_MS)) => {}
            }
        }
    }

    /// One pass over every schedule; answers the earliest time something is due.
    async fn turn(&self, retry_at: &mut HashMap<String, u64>) -> Result<Option<u64>, StoreError> {
        let mut wake: Option<u64> = None;
        let mut after: Option<String> = None;
        loop {
            let page = self.store.list_records(SCHEDULE_KIND, "", after.as_deref(), RECORD_LIST_LIMIT_MAX).await?;
            let done = page.len() < RECORD_LIST_LIMIT_MAX;
            after = page.last().map(|r| r.key.clone());
            for stored in page {
                let now = self.clock.now_ms();
                if let Some(&at) = retry_at.get(&stored.key)
                    && at > now
                {
                    wake = earliest(wake, Some(at));
                    continue;
                }
                let mut bytes = stored.value;
                // A schedule another node changed meanwhile is read again at once, a few times.
                for _ in 0..4 {
                    let Ok(record) = ScheduleRecord::decode(&bytes) else {
                        tracing::error!(schedule = stored.key, "an unreadable schedule record is skipped");
                        break;
                    };
                    match self.fire_due(&stored.key, bytes.clone(), record, retry_at).await {
                        Turn::Wait(next) => {
                            wake = earliest(wake, next);
                            break;
                        }
                        Turn::Changed => match self.store.get_record(SCHEDULE_KIND, &stored.key).await? {
                            Some(fresh) => bytes = fresh,
                            None => break,
                        },
                    }
                }
            }
            if done {
                return Ok(wake);
            }
        }
    }

    /// Fires (or passes over) whatever of one schedule is due now.
    async fn fire_due(
        &self,
        name: &str,
        mut current: Vec<u8>,
        mut record: ScheduleRecord,
        retry_at: &mut HashMap<String, u64>,
    ) -> Turn {
        let Ok(spec) = record.spec() else { return Turn::Wait(None) };
        let now = self.clock.now_ms();
        let Plan { skip, fires, next } = plan(&spec, &record.definition, &record.state, now);
        if skip > 0 || (fires.is_empty() && next != record.state.next_tick_ms) {
            let mut updated = record.clone();
            updated.state.skipped += skip;
            updated.state.next_tick_ms = fires.first().copied().or(next);
            match self.swap(name, &current, &updated, Vec::new()).await {
                Ok(bytes) => {
                    metrics::counter!("sluice_schedule_ticks_skipped_total").increment(skip);
                    (current, record) = (bytes, updated);
                }
                Err(Unswapped::Changed) => return Turn::Changed,
                Err(Unswapped::Failed(_)) => return Turn::Wait(None),
            }
        }
        for (i, &tick) in fires.iter().enumerate() {
            let mut updated = record.clone();
            updated.state.next_tick_ms = fires.get(i + 1).copied().or(next);
            updated.state.fired += 1;
            updated.state.last_tick_ms = Some(tick);
            updated.state.last_fired_at_ms = Some(now);
            updated.state.last_error = None;
            let sends = match self.sends(&record, tick).await {
                Ok(sends) => sends,
                Err(reason) => return self.failed(name, &current, &record, reason, retry_at).await,
            };
            match self.swap(name, &current, &updated, sends).await {
                Ok(bytes) => {
                    retry_at.remove(name);
                    metrics::counter!("sluice_schedule_fires_total").increment(1);
                    metrics::histogram!("sluice_schedule_lateness_seconds")
                        .record(now.saturating_sub(tick) as f64 / 1000.0);
                    (current, record) = (bytes, updated);
                }
                Err(Unswapped::Failed(reason)) => return self.failed(name, &current, &record, reason, retry_at).await,
                Err(Unswapped::Changed) => return Turn::Changed,
            }
        }
        Turn::Wait(record.state.next_tick_ms)
    }

    /// Commits `updated` in place of `current` with `sends`.
    async fn swap(
        &self,
        name: &str,
        current: &[u8],
        updated: &ScheduleRecord,
        sends: Vec<Write>,
    ) -> Result<Vec<u8>, Unswapped> {
        let bytes = updated.encode();
        let mut writes = vec![Write::ReplaceRecord {
            kind: SCHEDULE_KIND.into(),
            key: name.into(),
            expected: current.to_vec(),
            value: bytes.clone(),
        }];
        writes.extend(sends);
        let links = CommitLinks::of(&writes);
        match self.store.commit_all(writes).await {
            Ok(Ok(outcomes)) => {
                // A tick that carries a correlation id is listed in its trace.
                self.topics.traces().record(links.entries(&outcomes)).await;
                Ok(bytes)
            }
            Ok(Err(Refused { write: 0, conflict: Conflict::RecordChanged })) => Err(Unswapped::Changed),
            Ok(Err(refused)) => {
                tracing::warn!(schedule = name, "a tick's message was refused: {}", refused.conflict);
                Err(Unswapped::Failed(format!("the tick's message was refused: {}", refused.conflict)))
            }
            Err(e) => {
                tracing::warn!(schedule = name, "firing a tick failed: {e}");
                Err(Unswapped::Failed(format!("firing the tick failed: {e}")))
            }
        }
    }

    /// Records a failure to fire in the schedule (not advancing it: the tick fires once its
    /// target takes it) and tries again after `SCHEDULE_RETRY_MS`.
    async fn failed(
        &self,
        name: &str,
        current: &[u8],
        record: &ScheduleRecord,
        reason: String,
        retry_at: &mut HashMap<String, u64>,
    ) -> Turn {
        metrics::counter!("sluice_schedule_errors_total").increment(1);
        let at = self.clock.now_ms().saturating_add(SCHEDULE_RETRY_MS);
        retry_at.insert(name.to_string(), at);
        if record.state.last_error.as_deref() != Some(reason.as_str()) {
            let mut updated = record.clone();
            updated.state.last_error = Some(reason);
            updated.state.errors += 1;
            // Losing this race only loses the error text; the next attempt writes it again.
            let _ = self.swap(name, current, &updated, Vec::new()).await;
        }
        Turn::Wait(Some(at))
    }

    /// The writes that send the tick's message to the schedule's target.
    async fn sends(&self, record: &ScheduleRecord, tick: u64) -> Result<Vec<Write>, String> {
        match &record.definition.target {
            Target::Queue(queue) => {
                let mut message = message(record, tick);
                if queue.ends_with(sluice_core::limits::FIFO_SUFFIX) {
                    // The tick is its own dedup id: a FIFO queue can never take it twice. (The
                    // schedule's name within its tenant: the queue is the tenant's too.)
                    let name = local(&record.definition.name);
                    message.dedup_id = Some(format!("{name}/{tick}"));
                    message.envelope.group_id.get_or_insert_with(|| name.to_string());
                }
                Ok(vec![Write::Send { queue: queue.clone(), messages: vec![message] }])
            }
            Target::Stream(stream) => {
                Ok(vec![Write::Append { stream: stream.clone(), records: vec![stream_record(record, tick)] }])
            }
            Target::Topic(topic) => {
                let origin = Origin { base_url: record.origin.0.clone(), sender: record.origin.1.clone() };
                let copies = self.topics.plan_publish(topic, publication(record, tick), &origin).await;
                let copies = copies.map_err(|e| e.to_string())?;
                Ok(copies.into_iter().map(|(queue, messages)| Write::Send { queue, messages }).collect())
            }
            Target::Job(target) => {
                // Durable before the record's swap; its unique key makes a second enqueue of
                // the same tick (after a crash, or by a node that lost the swap) find this one.
                let enqueued = self.store.enqueue_job(job(&record.definition, target, tick)).await;
                let enqueued = enqueued.map_err(|e| format!("the tick's job was refused: {e}"))?;
                if enqueued.created {
                    let labels = sluice_core::name::resource_labels("queue", &target.queue);
                    metrics::counter!(crate::jobs::ENQUEUED_METRIC, labels.as_slice()).increment(1);
                }
                Ok(Vec::new())
            }
        }
    }
}

fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A schedule's name within its tenant: what its messages carry (their target is the tenant's
/// own, so the name is unique there).
fn local(name: &str) -> &str {
    sluice_core::name::split_tenant(name).1
}

/// The tick's attributes: the schedule's, with the tick's time and the schedule's name.
fn attributes(record: &ScheduleRecord, tick: u64) -> std::collections::BTreeMap<String, AttributeValue> {
    let mut attributes = record.definition.message.attributes.clone();
    let text = |value: String| AttributeValue { data_type: "String".into(), value: AttributeData::Text(value) };
    attributes.insert(SCHEDULED_AT_ATTRIBUTE.into(), text(rfc3339(tick)));
    attributes.insert(SCHEDULE_ATTRIBUTE.into(), text(local(&record.definition.name).to_string()));
    attributes
}

fn message(record: &ScheduleRecord, tick: u64) -> NewMessage {
    let content = &record.definition.message;
    NewMessage {
        body: content.body.clone(),
        body_binary: content.body_binary,
        attributes: attributes(record, tick),
        system_attributes: content.system_attributes.clone(),
        priority: record.definition.priority,
        envelope: content.envelope.clone(),
        ..NewMessage::default()
    }
}

/// The tick's record for a stream target: keyed by the schedule's name (one partition, in tick
/// order), the message's attributes as headers (text and numbers as they are, binary ones in
/// base64), `scheduled_at` and `sluice.schedule` among them, and the tick as its dedup id.
fn stream_record(record: &ScheduleRecord, tick: u64) -> NewRecord {
    use base64::Engine as _;
    let content = &record.definition.message;
    let name = local(&record.definition.name);
    let headers = attributes(record, tick)
        .into_iter()
        .map(|(header, value)| {
            let value = match value.value {
                AttributeData::Text(text) => text,
                AttributeData::Bytes(bytes) => base64::engine::general_purpose::STANDARD.encode(bytes),
            };
            (header, value)
        })
        .collect();
    NewRecord {
        key: Some(name.as_bytes().to_vec()),
        partition: None,
        body: content.body.clone(),
        body_binary: content.body_binary,
        headers,
        r#type: content.envelope.r#type.clone(),
        correlation_id: content.envelope.correlation_id.clone(),
        dedup_id: Some(format!("{name}/{tick}")),
    }
}

/// The tick's message as a topic publishes it (text, with the same attributes).
pub(super) fn publication(record: &ScheduleRecord, tick: u64) -> Publication {
    let content = &record.definition.message;
    let fifo = record.definition.target.name().ends_with(sluice_core::limits::FIFO_SUFFIX);
    let name = local(&record.definition.name);
    Publication {
        message: String::from_utf8_lossy(&content.body).into_owned(),
        subject: None,
        attributes: attributes(record, tick),
        structure_json: false,
        // A FIFO topic needs a group, and the tick is its own dedup id there.
        group_id: content.envelope.group_id.clone().or_else(|| fifo.then(|| name.to_string())),
        dedup_id: fifo.then(|| format!("{name}/{tick}")),
        message_id: None,
        schema_type: None,
    }
}

/// The job a tick enqueues: the message body as its payload, the tick as its unique key (kept
/// for the longest window jobs allow) and in its tags (`schedule=NAME` only when it fits a
/// tag's 64 bytes).
pub(super) fn job(definition: &Definition, target: &JobTarget, tick: u64) -> NewJob {
    let name = local(&definition.name);
    NewJob {
        queue: target.queue.clone(),
        job_type: target.job_type.clone(),
        payload: definition.message.body.clone(),
        priority: target.priority.unwrap_or(definition.priority),
        timeout_ms: target.timeout_ms,
        max_attempts: target.max_attempts,
        unique_key: Some(format!("schedule/{name}/{tick}")),
        unique_for_ms: Some(sluice_core::jobs::limits::JOB_UNIQUE_FOR_MS_MAX),
        tags: [format!("scheduled_at={}", rfc3339(tick)), format!("schedule={name}")]
            .into_iter()
            .filter(|tag| tag.len() <= sluice_core::jobs::limits::JOB_TAG_LEN_MAX)
            .collect(),
        ..NewJob::default()
    }
}

fn rfc3339(ms: u64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default()
}
