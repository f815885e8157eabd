//! Conformance of [`JobStore`](crate::JobStore): enqueue, unique keys, claims in order, leases,
//! heartbeats, completion, retries, lapses, cancels, long polls, pruning, completion
//! webhooks, restarts.
//!
//! Time-driven changes are waited for by polling with a generous deadline (a backend may apply
//! them from a sweeper, within its interval); no assertion depends on how long anything took.

use std::time::{Duration, Instant};

use sluice_core::jobs::{ClaimSpec, Jitter, JobBackoff, JobError, JobFilter, JobStatus, NewJob};

use super::{Backend, recv};
use crate::{ClaimedJob, JOB_CALLBACK_QUEUE, JobCallback, JobListRequest, Store, StoreError};

/// How long a time-driven change may take to show (a sweeper's interval, and then some).
const SETTLE: Duration = Duration::from_secs(10);

fn job(queue: &str, job_type: &str, n: u32) -> NewJob {
    NewJob {
        queue: queue.into(),
        job_type: job_type.into(),
        payload: format!("{{\"n\":{n}}}").into_bytes(),
        ..NewJob::default()
    }
}

fn claim(queues: &[&str], max: u32, lease_ms: u64) -> ClaimSpec {
    ClaimSpec { queues: queues.iter().map(|q| q.to_string()).collect(), types: vec![], max, lease_ms }
}

fn payloads(claimed: &[ClaimedJob]) -> Vec<String> {
    claimed
        .iter()
        .map(|c| String::from_utf8_lossy(c.view.payload.as_deref().unwrap_or_default()).into_owned())
        .collect()
}

fn is_stale<T: std::fmt::Debug>(r: Result<T, StoreError>) -> bool {
    matches!(r, Err(StoreError::Job(JobError::StaleLease { .. })))
}

/// Claims from `queues` until something comes or `SETTLE` passes.
async fn claim_eventually(s: &dyn Store, spec: ClaimSpec) -> Vec<ClaimedJob> {
    let deadline = Instant::now() + SETTLE;
    loop {
        let got = s.claim_jobs(spec.clone(), 200).await.expect("claim");
        if !got.is_empty() || Instant::now() > deadline {
            return got;
        }
    }
}

/// Waits until the job's status is `status`.
async fn status_eventually(s: &dyn Store, id: sluice_core::jobs::JobId, status: JobStatus) -> bool {
    let deadline = Instant::now() + SETTLE;
    loop {
        match s.get_job(id, 0).await {
            Ok(v) if v.record.status == status => return true,
            _ if Instant::now() > deadline => return false,
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

pub async fn jobs_enqueue_get_list_filter_and_unique(b: &dyn Backend) {
    let s = b.open().await;
    let tagged = NewJob { tags: vec!["tenant:acme".into()], priority: 5, ..job("reports", "pdf", 1) };
    let first = s.enqueue_job(tagged).await.unwrap();
    assert!(first.created);
    let r = &first.view.record;
    assert_eq!(
        (r.status, r.attempt, r.priority, r.queue.as_str(), r.job_type.as_str()),
        (JobStatus::Queued, 0, 5, "reports", "pdf")
    );
    s.enqueue_job(job("reports", "csv", 2)).await.unwrap();
    s.enqueue_job(job("mail", "pdf", 3)).await.unwrap();

    let got = s.get_job(r.id, 0).await.unwrap();
    assert_eq!(got.payload.as_deref(), Some(&b"{\"n\":1}"[..]));
    assert_eq!(got.details.tags, ["tenant:acme"]);
    assert_eq!((got.result, got.error), (None, None));

    let list = |filter: JobFilter, tag: Option<&str>| {
        let request = JobListRequest { filter, tag: tag.map(str::to_string), after: None, limit: 100 };
        let s = s.clone();
        async move {
            s.list_jobs(request)
                .await
                .unwrap()
                .jobs
                .into_iter()
                .map(|v| v.record.job_type + "@" + &v.record.queue)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(list(JobFilter::default(), None).await, ["pdf@reports", "csv@reports", "pdf@mail"], "creation order");
    let by_queue = JobFilter { queue: Some("reports".into()), ..JobFilter::default() };
    assert_eq!(list(by_queue, None).await, ["pdf@reports", "csv@reports"]);
    let by_type = JobFilter { job_type: Some("pdf".into()), ..JobFilter::default() };
    assert_eq!(list(by_type, None).await, ["pdf@reports", "pdf@mail"]);
    assert_eq!(list(JobFilter::default(), Some("tenant:acme")).await, ["pdf@reports"]);
    let running = JobFilter { status: Some(JobStatus::Running), ..JobFilter::default() };
    assert!(list(running, None).await.is_empty());
    let page = s.list_jobs(JobListRequest { limit: 1, ..JobListRequest::default() }).await.unwrap();
    let after = page.jobs[0].record.id;
    let next = s.list_jobs(JobListRequest { limit: 5, after: Some(after), ..JobListRequest::default() }).await.unwrap();
    assert_eq!(next.jobs.len(), 2, "the page after the first job");
    assert!(page.jobs[0].payload.is_none(), "lists leave payloads out");

    // A unique key within its window returns the holder and enqueues nothing.
    let unique = NewJob { unique_key: Some("report-7".into()), ..job("reports", "pdf", 4) };
    let a = s.enqueue_job(unique.clone()).await.unwrap();
    let again = s.enqueue_job(NewJob { payload: b"{\"other\":true}".to_vec(), ..unique.clone() }).await.unwrap();
    assert!(a.created && !again.created);
    assert_eq!(again.view.record.id, a.view.record.id);
    let elsewhere = s.enqueue_job(NewJob { queue: "mail".into(), ..unique }).await.unwrap();
    assert!(elsewhere.created, "unique keys are per queue");
    let short = NewJob { unique_key: Some("brief".into()), unique_for_ms: Some(100), ..job("reports", "pdf", 5) };
    let held = s.enqueue_job(short.clone()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let after_window = s.enqueue_job(short).await.unwrap();
    assert!(after_window.created && after_window.view.record.id != held.view.record.id, "the window ended");

    let bad = s.enqueue_job(job("no spaces allowed", "pdf", 6)).await;
    assert!(matches!(bad, Err(StoreError::Job(JobError::Invalid(ref v))) if v.field == "queue"), "{bad:?}");
    let missing = s.get_job(sluice_core::jobs::JobId(7), 0).await;
    assert!(matches!(missing, Err(StoreError::Job(JobError::NotFound(_)))), "{missing:?}");
    let stats = s.job_stats().await.unwrap();
    let reports = stats.iter().find(|q| q.queue == "reports").expect("reports counted");
    assert_eq!(reports.counts[JobStatus::Queued.index()], 5);
    b.close(s).await;
}

pub async fn jobs_claim_heartbeat_complete_and_stale_leases(b: &dyn Backend) {
    let s = b.open().await;
    let id = s.enqueue_job(job("q", "t", 1)).await.unwrap().view.record.id;
    let claimed = s.claim_jobs(claim(&["q"], 10, 30_000), 0).await.unwrap();
    assert_eq!(payloads(&claimed), ["{\"n\":1}"]);
    let c = &claimed[0];
    assert_eq!((c.view.record.status, c.view.record.attempt), (JobStatus::Running, 1));
    assert!(c.view.record.started_at.is_some());
    assert!(s.claim_jobs(claim(&["q"], 10, 30_000), 0).await.unwrap().is_empty(), "a running job is not claimed");

    let beat = s.heartbeat_job(id, &c.lease, Some(b"{\"done\":0.5}".to_vec()), Some(60_000)).await.unwrap();
    assert!(!beat.cancel_requested);
    let lease = s.get_job(id, 0).await.unwrap().record.lease.expect("a lease");
    assert_eq!(lease.expires_at, beat.lease_expires_at);
    assert_eq!(s.get_job(id, 0).await.unwrap().progress.as_deref(), Some(&b"{\"done\":0.5}"[..]));

    let done = s.complete_job(id, &c.lease, b"{\"url\":\"/r/1\"}".to_vec()).await.unwrap();
    assert_eq!(done.record.status, JobStatus::Succeeded);
    let view = s.get_job(id, 0).await.unwrap();
    assert_eq!(view.result.as_deref(), Some(&b"{\"url\":\"/r/1\"}"[..]));
    assert!(view.record.finished_at.is_some() && view.record.lease.is_none());
    // The attempt is over: its lease changes nothing any more.
    assert!(is_stale(s.complete_job(id, &c.lease, b"2".to_vec()).await));
    assert!(is_stale(s.heartbeat_job(id, &c.lease, None, None).await));
    assert!(is_stale(s.fail_job(id, &c.lease, "late".into(), true).await));
    assert_eq!(s.get_job(id, 0).await.unwrap().record.status, JobStatus::Succeeded);
    let junk = s.complete_job(id, "not a lease", b"1".to_vec()).await;
    assert!(matches!(junk, Err(StoreError::Job(JobError::Invalid(ref v))) if v.field == "lease"), "{junk:?}");
    b.close(s).await;
}

pub async fn jobs_fail_retries_after_backoff_then_dead(b: &dyn Backend) {
    let s = b.open().await;
    let backoff = JobBackoff { initial_ms: 500, max_ms: 500, multiplier: 2.0, jitter: Jitter::None };
    let id = s.enqueue_job(NewJob { max_attempts: Some(2), backoff, ..job("q", "t", 1) }).await.unwrap().view.record.id;
    let first = s.claim_jobs(claim(&["q"], 1, 30_000), 0).await.unwrap();
    let failed = s.fail_job(id, &first[0].lease, "boom 1".into(), true).await.unwrap();
    assert_eq!(failed.record.status, JobStatus::Failed);
    let finished = failed.record.started_at.expect("started");
    assert!(failed.record.run_at >= finished + 500, "retried after the backoff: {:?}", failed.record);
    assert_eq!(s.get_job(id, 0).await.unwrap().error.as_deref(), Some("boom 1"));
    let second = claim_eventually(s.as_ref(), claim(&["q"], 1, 30_000)).await;
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].view.record.attempt, 2);
    let started = second[0].view.record.started_at.expect("started");
    assert!(started >= failed.record.run_at, "claimed again only after its backoff: {:?}", second[0].view.record);
    assert!(is_stale(s.complete_job(id, &first[0].lease, b"1".to_vec()).await), "the first attempt's lease");
    let dead = s.fail_job(id, &second[0].lease, "boom 2".into(), true).await.unwrap();
    assert_eq!(dead.record.status, JobStatus::Dead, "the last attempt failed");
    assert_eq!(s.get_job(id, 0).await.unwrap().error.as_deref(), Some("boom 2"));

    // `retry: false` ends it at once.
    let other = s.enqueue_job(NewJob { max_attempts: Some(5), ..job("q", "t", 2) }).await.unwrap().view.record.id;
    let c = s.claim_jobs(claim(&["q"], 1, 30_000), 0).await.unwrap();
    let dead = s.fail_job(other, &c[0].lease, "bad input".into(), false).await.unwrap();
    assert_eq!((dead.record.status, dead.record.attempt), (JobStatus::Dead, 1));
    b.close(s).await;
}

pub async fn jobs_lapsed_lease_requeues_and_the_old_lease_is_stale(b: &dyn Backend) {
    let s = b.open().await;
    let id = s.enqueue_job(NewJob { max_attempts: Some(2), ..job("q", "t", 1) }).await.unwrap().view.record.id;
    let first = s.claim_jobs(claim(&["q"], 1, 300), 0).await.unwrap();
    let expires_at = first[0].view.record.lease.expect("lease").expires_at;
    // Nobody heartbeats: after the lease the job is claimable again, as the next attempt.
    let second = claim_eventually(s.as_ref(), claim(&["q"], 1, 300)).await;
    assert_eq!(second.len(), 1, "the lapsed job came back");
    let again = &second[0].view.record;
    assert_eq!(again.attempt, 2);
    assert!(again.started_at.expect("started") >= expires_at, "claimed again only after the lease ended");
    assert!(s.get_job(id, 0).await.unwrap().error.is_some_and(|e| e.contains("lease")), "the lapse is the last error");
    assert!(is_stale(s.heartbeat_job(id, &first[0].lease, None, None).await));
    assert!(is_stale(s.complete_job(id, &first[0].lease, b"1".to_vec()).await));
    // The last attempt lapses too: dead.
    assert!(status_eventually(s.as_ref(), id, JobStatus::Dead).await, "the last attempt lapsed");
    b.close(s).await;
}

pub async fn jobs_cancel_waiting_and_running(b: &dyn Backend) {
    let s = b.open().await;
    let waiting = s.enqueue_job(job("q", "t", 1)).await.unwrap().view.record.id;
    assert_eq!(s.cancel_job(waiting).await.unwrap().record.status, JobStatus::Cancelled);
    assert_eq!(s.cancel_job(waiting).await.unwrap().record.status, JobStatus::Cancelled, "again: no change");
    assert!(s.claim_jobs(claim(&["q"], 1, 30_000), 0).await.unwrap().is_empty());

    let running = s.enqueue_job(NewJob { max_attempts: Some(5), ..job("q", "t", 2) }).await.unwrap().view.record.id;
    let c = s.claim_jobs(claim(&["q"], 1, 30_000), 0).await.unwrap();
    let view = s.cancel_job(running).await.unwrap();
    assert_eq!((view.record.status, view.record.cancel_requested), (JobStatus::Running, true));
    assert!(s.heartbeat_job(running, &c[0].lease, None, None).await.unwrap().cancel_requested, "the worker learns it");
    let ended = s.fail_job(running, &c[0].lease, "stopped".into(), true).await.unwrap();
    assert_eq!(ended.record.status, JobStatus::Cancelled, "a cancelled job is not retried");

    let done = s.enqueue_job(job("q", "t", 3)).await.unwrap().view.record.id;
    let c = s.claim_jobs(claim(&["q"], 1, 30_000), 0).await.unwrap();
    s.complete_job(done, &c[0].lease, b"1".to_vec()).await.unwrap();
    let refused = s.cancel_job(done).await;
    assert!(
        matches!(refused, Err(StoreError::Job(JobError::Finished { status: JobStatus::Succeeded, .. }))),
        "{refused:?}"
    );
    b.close(s).await;
}

pub async fn jobs_claim_order_delay_and_types(b: &dyn Backend) {
    let s = b.open().await;
    s.enqueue_job(NewJob { delay_ms: Some(400), priority: 9, ..job("a", "t", 0) }).await.unwrap();
    for (n, queue, priority) in [(1, "a", 1), (2, "b", 5), (3, "a", 5), (4, "b", 1)] {
        s.enqueue_job(NewJob { priority, ..job(queue, "t", n) }).await.unwrap();
    }
    s.enqueue_job(job("a", "other", 5)).await.unwrap();
    let spec = ClaimSpec { types: vec!["t".into()], ..claim(&["a", "b"], 10, 30_000) };
    let got = s.claim_jobs(spec.clone(), 0).await.unwrap();
    assert_eq!(
        payloads(&got),
        ["{\"n\":2}", "{\"n\":3}", "{\"n\":1}", "{\"n\":4}"],
        "priority, then age, across queues"
    );
    let other = s.claim_jobs(ClaimSpec { types: vec!["other".into()], ..spec.clone() }, 0).await.unwrap();
    assert_eq!(payloads(&other), ["{\"n\":5}"]);
    assert!(s.claim_jobs(claim(&["nobody"], 10, 30_000), 0).await.unwrap().is_empty());
    let delayed = claim_eventually(s.as_ref(), spec).await;
    assert_eq!(payloads(&delayed), ["{\"n\":0}"], "the delayed job, once its time came");
    assert!(delayed[0].view.record.started_at.expect("started") >= delayed[0].view.record.run_at);
    b.close(s).await;
}

pub async fn jobs_long_polls_wake_on_enqueue_and_on_finish(b: &dyn Backend) {
    let s = b.open().await;
    let waiter = {
        let s = s.clone();
        tokio::spawn(async move { s.claim_jobs(claim(&["q"], 1, 30_000), 10_000).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let id = s.enqueue_job(job("q", "t", 1)).await.unwrap().view.record.id;
    let claimed = waiter.await.expect("task").expect("claim");
    assert_eq!(payloads(&claimed), ["{\"n\":1}"]);
    assert!(started.elapsed() < Duration::from_secs(9), "woken by the enqueue, not the wait's end");

    let watcher = {
        let s = s.clone();
        tokio::spawn(async move { s.get_job(id, 10_000).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!watcher.is_finished(), "a running job is waited for");
    s.complete_job(id, &claimed[0].lease, b"42".to_vec()).await.unwrap();
    let view = watcher.await.expect("task").expect("get");
    assert_eq!((view.record.status, view.result.as_deref()), (JobStatus::Succeeded, Some(&b"42"[..])));
    let empty = s.claim_jobs(claim(&["q"], 1, 30_000), 200).await.unwrap();
    assert!(empty.is_empty(), "a long poll with nothing to claim ends empty");
    b.close(s).await;
}

pub async fn jobs_finished_are_pruned_after_their_ttl(b: &dyn Backend) {
    let s = b.open().await;
    let id = s.enqueue_job(NewJob { result_ttl_ms: Some(300), ..job("q", "t", 1) }).await.unwrap().view.record.id;
    let kept = s.enqueue_job(job("q", "t", 2)).await.unwrap().view.record.id;
    let c = s.claim_jobs(claim(&["q"], 2, 30_000), 0).await.unwrap();
    for claimed in &c {
        s.complete_job(claimed.view.record.id, &claimed.lease, b"{}".to_vec()).await.unwrap();
    }
    let deadline = Instant::now() + SETTLE;
    while s.get_job(id, 0).await.is_ok() {
        assert!(Instant::now() < deadline, "the finished job was not pruned after its result_ttl_ms");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(matches!(s.get_job(id, 0).await, Err(StoreError::Job(JobError::NotFound(_)))));
    assert_eq!(s.get_job(kept, 0).await.unwrap().record.status, JobStatus::Succeeded, "a longer TTL keeps it");
    let stats = s.job_stats().await.unwrap();
    assert_eq!(stats.iter().find(|q| q.queue == "q").map(|q| q.counts[JobStatus::Succeeded.index()]), Some(1));
    assert_eq!(stats.iter().find(|q| q.queue == "q").map(|q| q.result_bytes), Some(2));
    let payload = stats.iter().find(|q| q.queue == "q").map(|q| q.payload_bytes);
    assert_eq!(payload, Some(7), "the kept job's payload, {{\"n\":2}}; the pruned one's left the count");
    b.close(s).await;
}

pub async fn jobs_survive_restart_with_their_leases(b: &dyn Backend) {
    let s = b.open().await;
    let held = s.enqueue_job(job("q", "t", 1)).await.unwrap().view.record.id;
    let claimed = s.claim_jobs(claim(&["q"], 1, 60_000), 0).await.unwrap();
    let done = s.enqueue_job(job("q", "t", 2)).await.unwrap().view.record.id;
    let c = s.claim_jobs(claim(&["q"], 1, 60_000), 0).await.unwrap();
    s.complete_job(done, &c[0].lease, b"\"ok\"".to_vec()).await.unwrap();
    let unique = NewJob { unique_key: Some("u".into()), ..job("q", "t", 3) };
    let waiting = s.enqueue_job(unique.clone()).await.unwrap().view.record.id;
    b.close(s).await;

    let s = b.open().await;
    let view = s.get_job(held, 0).await.unwrap();
    assert_eq!((view.record.status, view.record.attempt), (JobStatus::Running, 1));
    s.heartbeat_job(held, &claimed[0].lease, None, None).await.expect("a lease survives a restart");
    assert_eq!(s.get_job(done, 0).await.unwrap().result.as_deref(), Some(&b"\"ok\""[..]));
    let again = s.enqueue_job(unique).await.unwrap();
    assert!(!again.created && again.view.record.id == waiting, "unique keys survive a restart");
    let next = s.claim_jobs(claim(&["q"], 5, 60_000), 0).await.unwrap();
    assert_eq!(payloads(&next), ["{\"n\":3}"]);
    s.complete_job(held, &claimed[0].lease, b"1".to_vec()).await.unwrap();
    b.close(s).await;
}

pub async fn jobs_callbacks_are_enqueued_with_the_transition(b: &dyn Backend) {
    let s = b.open().await;
    let url = "http://127.0.0.1:9/hook";
    let with = s.enqueue_job(NewJob { callback_url: Some(url.into()), ..job("q", "t", 1) }).await.unwrap();
    s.enqueue_job(job("q", "t", 2)).await.unwrap();
    let cancelled = s.enqueue_job(NewJob { callback_url: Some(url.into()), ..job("q", "t", 3) }).await.unwrap();
    assert_eq!(with.view.details.callback_url.as_deref(), Some(url));
    let c = s.claim_jobs(claim(&["q"], 2, 30_000), 0).await.unwrap();
    for claimed in &c {
        s.complete_job(claimed.view.record.id, &claimed.lease, b"1".to_vec()).await.unwrap();
    }
    s.cancel_job(cancelled.view.record.id).await.unwrap();
    let messages = s.receive(JOB_CALLBACK_QUEUE, recv(10, 0, None)).await.expect("the callback queue exists");
    let mut got: Vec<(String, String)> = messages
        .iter()
        .map(|m| JobCallback::from_body(&m.message.content.body).expect("a callback"))
        .map(|c| (c.job_id, c.status))
        .collect();
    got.sort();
    let mut want = vec![
        (with.view.record.id.to_string(), "succeeded".to_string()),
        (cancelled.view.record.id.to_string(), "cancelled".to_string()),
    ];
    want.sort();
    assert_eq!(got, want, "one webhook per finished job with a callback_url, none for the other");
    b.close(s).await;
}
