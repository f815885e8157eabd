//! Mapping between the jobs' wire types (`sluice_api::jobs`) and the core's and the store's:
//! an enqueue request into a `NewJob`, a `JobView` into the job the API shows (also the body of
//! its completion webhook). Pure functions, tested here.

use sluice_api as api;
use sluice_core::ValidationError;
use sluice_core::jobs::{Jitter, JobBackoff, JobStatus, NewJob, QueueJobStats};
use sluice_services::trace::{Links, TRACE_ID_LEN_MAX};
use sluice_store::JobView;

use crate::convert::{parse_rfc3339, rfc3339};

/// JSON text of a value the API took as JSON (it always encodes).
pub fn json_text(value: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// A value stored as JSON text, as JSON again (text that is not JSON, which no API call
/// writes, is shown as a string rather than hidden).
fn json_value(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

pub fn backoff(wire: Option<&api::JobBackoff>) -> Result<JobBackoff, ValidationError> {
    let default = JobBackoff::default();
    let Some(b) = wire else { return Ok(default) };
    let jitter = match b.jitter.as_deref() {
        None => default.jitter,
        Some(text) => Jitter::parse(text)
            .ok_or_else(|| ValidationError::new("backoff.jitter", format!("{text:?} is not `full` or `none`")))?,
    };
    let initial_ms = b.initial_ms.unwrap_or(default.initial_ms);
    Ok(JobBackoff {
        initial_ms,
        // A given initial delay above the default cap raises the cap with it.
        max_ms: b.max_ms.unwrap_or(default.max_ms.max(initial_ms)),
        multiplier: b.multiplier.unwrap_or(default.multiplier),
        jitter,
    })
}

pub fn backoff_view(b: &JobBackoff) -> api::JobBackoff {
    api::JobBackoff {
        initial_ms: Some(b.initial_ms),
        max_ms: Some(b.max_ms),
        multiplier: Some(b.multiplier),
        jitter: Some(b.jitter.as_str().to_string()),
    }
}

/// The enqueue's trace links, its ids checked: `None` without a correlation id.
pub fn trace_links(request: &api::EnqueueJobRequest) -> Result<Option<Links>, ValidationError> {
    for (field, id) in [("correlation_id", &request.correlation_id), ("causation_id", &request.causation_id)] {
        if let Some(id) = id
            && (id.is_empty() || id.len() > TRACE_ID_LEN_MAX)
        {
            return Err(ValidationError::new(field, format!("1 to {TRACE_ID_LEN_MAX} bytes")));
        }
    }
    Ok(request.correlation_id.clone().map(|correlation_id| Links {
        correlation_id,
        causation_id: request.causation_id.clone(),
        detail: Some(request.job_type.clone()),
    }))
}

/// An enqueue request as the store takes it (the store checks every rule).
pub fn new_job(request: api::EnqueueJobRequest) -> Result<NewJob, ValidationError> {
    let run_at = request.run_at.as_deref().map(|text| parse_rfc3339("run_at", text)).transpose()?;
    Ok(NewJob {
        payload: json_text(&request.payload),
        backoff: backoff(request.backoff.as_ref())?,
        queue: request.queue,
        job_type: request.job_type,
        priority: request.priority.unwrap_or(0),
        delay_ms: request.delay_ms,
        run_at,
        timeout_ms: request.timeout_ms,
        max_attempts: request.max_attempts,
        unique_key: request.unique_key,
        unique_for_ms: request.unique_for_ms,
        callback_url: request.callback_url,
        result_ttl_ms: request.result_ttl_ms,
        tags: request.tags,
    })
}

/// A job as the API shows it.
pub fn job(view: &JobView) -> api::Job {
    let r = &view.record;
    let lease_expires_at = r.lease.map(|l| l.expires_at);
    let expires_at = r.expires_at();
    api::Job {
        id: r.id.to_string(),
        queue: r.queue.clone(),
        job_type: r.job_type.clone(),
        status: r.status.as_str().to_string(),
        priority: r.priority,
        attempts: r.attempt,
        max_attempts: r.max_attempts,
        payload: view.payload.as_deref().map(json_value),
        result: view.result.as_deref().map(json_value),
        progress: view.progress.as_deref().map(json_value),
        error: view.error.clone(),
        cancel_requested: r.cancel_requested,
        tags: view.details.tags.clone(),
        unique_key: view.details.unique_key.clone(),
        callback_url: view.details.callback_url.clone(),
        timeout_ms: r.timeout_ms,
        result_ttl_ms: r.result_ttl_ms,
        backoff: backoff_view(&r.backoff),
        created_at: rfc3339(r.created_at),
        created_at_ms: r.created_at,
        run_at: rfc3339(r.run_at),
        run_at_ms: r.run_at,
        started_at: r.started_at.map(rfc3339),
        started_at_ms: r.started_at,
        finished_at: r.finished_at.map(rfc3339),
        finished_at_ms: r.finished_at,
        lease_expires_at: lease_expires_at.map(rfc3339),
        lease_expires_at_ms: lease_expires_at,
        expires_at: expires_at.map(rfc3339),
        expires_at_ms: expires_at,
    }
}

/// A completion webhook's body: the job's final view, as `GET /v1/jobs/{id}` shows it.
/// One job queue's counts as the API writes them.
pub fn queue_stats(stats: &QueueJobStats) -> api::JobQueueStats {
    let count = |status: JobStatus| stats.counts[status.index()];
    api::JobQueueStats {
        queue: stats.queue.clone(),
        queued: count(JobStatus::Queued),
        running: count(JobStatus::Running),
        succeeded: count(JobStatus::Succeeded),
        failed: count(JobStatus::Failed),
        dead: count(JobStatus::Dead),
        cancelled: count(JobStatus::Cancelled),
        total: stats.counts.iter().sum(),
        result_bytes: stats.result_bytes,
    }
}

pub fn webhook_body(view: &JobView) -> Vec<u8> {
    serde_json::to_vec(&job(view)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::jobs::{JobDetails, JobId, JobRecord, JobStatus};

    #[test]
    fn requests_map_to_jobs_and_views_back() {
        let request: api::EnqueueJobRequest = serde_json::from_value(serde_json::json!({
            "queue": "reports", "type": "pdf", "payload": {"id": 7}, "priority": 4,
            "run_at": "2024-01-01T00:00:00.0001Z", "backoff": {"initial_ms": 600000, "jitter": "none"},
            "tags": ["a"]
        }))
        .unwrap();
        let job_in = new_job(request).unwrap();
        assert_eq!(job_in.payload, br#"{"id":7}"#);
        assert_eq!(job_in.run_at, Some(1_704_067_200_001), "rounded up to the next millisecond");
        assert_eq!(
            (job_in.backoff.initial_ms, job_in.backoff.max_ms, job_in.backoff.jitter),
            (600_000, 600_000, Jitter::None)
        );
        let bad = api::EnqueueJobRequest {
            backoff: Some(api::JobBackoff { jitter: Some("some".into()), ..Default::default() }),
            ..Default::default()
        };
        assert_eq!(new_job(bad).unwrap_err().field, "backoff.jitter");

        let record = JobRecord {
            id: JobId(1),
            queue: "reports".into(),
            job_type: "pdf".into(),
            status: JobStatus::Succeeded,
            priority: 4,
            attempt: 1,
            max_attempts: 3,
            backoff: JobBackoff::default(),
            timeout_ms: None,
            result_ttl_ms: 1_000,
            created_at: 10,
            run_at: 10,
            started_at: Some(20),
            finished_at: Some(30),
            lease: None,
            cancel_requested: false,
            unique: None,
            has_callback: false,
            payload_bytes: 8,
            result_bytes: 2,
        };
        let view = JobView {
            record,
            details: JobDetails::default(),
            payload: Some(br#"{"id":7}"#.to_vec()),
            result: Some(b"42".to_vec()),
            progress: None,
            error: None,
        };
        let shown = job(&view);
        assert_eq!((shown.status.as_str(), shown.attempts, shown.expires_at_ms), ("succeeded", 1, Some(1_030)));
        assert_eq!(shown.result, Some(serde_json::json!(42)));
        let body: serde_json::Value = serde_json::from_slice(&webhook_body(&view)).unwrap();
        assert_eq!(body["id"], "00000000-0000-0000-0000-000000000001");
        assert_eq!(body["type"], "pdf");
        assert_eq!(body["result"], 42);
    }
}
