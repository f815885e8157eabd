//! [`JobStore`] over the writer thread: each call is a job run on the board (`jobs/`),
//! answered once its batch is durable; a long poll that finds nothing parks there.

use async_trait::async_trait;
use sluice_core::TimeMs;
use sluice_core::jobs::{ClaimSpec, Enqueued, JobError, JobId, NewJob, QueueJobStats};
use sluice_store::{
    ClaimedJob, EnqueuedJob, HeartbeatAnswer, JOB_LIST_SCAN_MAX, JobListRequest, JobPage, JobStore, JobView,
    StoreError, StoreStatus, parse_lease, validate_wait_ms,
};
use tokio::sync::oneshot;

use crate::EmbeddedStore;
use crate::engine::{Command, Engine, Reply};
use crate::jobs::{Parts, claim_now, random_u64};

fn not_found(id: JobId) -> StoreError {
    JobError::NotFound(id).into()
}

impl EmbeddedStore {
    /// Runs `f` on the writer thread. `f` answers through the sender it is given: at once,
    /// by returning the reply to run after the batch is durable, or later, by parking the
    /// sender and returning `None`.
    async fn call_parking<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Engine, TimeMs, oneshot::Sender<Result<T, StoreError>>) -> Option<Reply> + Send + 'static,
    {
        if let Some(refusal) = self.refusal() {
            return Err(refusal);
        }
        let (tx, rx) = oneshot::channel();
        let job = Box::new(move |engine: &mut Engine, now: TimeMs| -> Reply {
            f(engine, now, tx).unwrap_or_else(|| Box::new(|_| {}))
        });
        self.tx.send(Command::Run(job)).map_err(|_| self.closed_error())?;
        rx.await.map_err(|_| self.closed_error())?
    }
}

#[async_trait]
impl JobStore for EmbeddedStore {
    async fn enqueue_job(&self, job: NewJob) -> Result<EnqueuedJob, StoreError> {
        self.call(move |e, now| {
            let id = JobId(uuid::Uuid::now_v7().as_u128());
            let enqueued = e.jobs.board.enqueue(id, job, now)?;
            e.jobs.absorb();
            let view = e.jobs.view(enqueued.id(), Parts::Summary).ok_or_else(|| not_found(enqueued.id()))?;
            Ok(EnqueuedJob { view, created: matches!(enqueued, Enqueued::Created(_)) })
        })
        .await
    }

    async fn get_job(&self, id: JobId, wait_ms: u64) -> Result<JobView, StoreError> {
        validate_wait_ms(wait_ms)?;
        self.call_parking(move |e, _now, reply| {
            let view = e.jobs.view(id, Parts::All).ok_or_else(|| not_found(id));
            match view {
                Ok(view) if wait_ms > 0 && !view.record.status.is_terminal() => {
                    e.jobs.waiters.park_finish(id, wait_ms, reply);
                    None
                }
                view => Some(Box::new(move |commit| {
                    let _ = reply.send(commit.and(view));
                })),
            }
        })
        .await
    }

    async fn list_jobs(&self, request: JobListRequest) -> Result<JobPage, StoreError> {
        self.call(move |e, _now| {
            let JobListRequest { filter, tag, after, limit } = request;
            let wanted = if tag.is_some() { JOB_LIST_SCAN_MAX } else { limit };
            let (records, resume_after) = e.jobs.board.list(&filter, after, wanted, JOB_LIST_SCAN_MAX);
            let mut jobs = Vec::new();
            for record in records {
                if jobs.len() >= limit {
                    return Ok(JobPage { jobs, resume_after: None });
                }
                let view = e.jobs.view_of(record, Parts::Summary);
                if tag.as_ref().is_none_or(|t| view.details.tags.contains(t)) {
                    jobs.push(view);
                }
            }
            Ok(JobPage { jobs, resume_after })
        })
        .await
    }

    async fn cancel_job(&self, id: JobId) -> Result<JobView, StoreError> {
        self.call(move |e, now| {
            e.jobs.board.cancel(id, now)?;
            e.jobs.absorb();
            e.jobs.view(id, Parts::Summary).ok_or_else(|| not_found(id))
        })
        .await
    }

    async fn claim_jobs(&self, spec: ClaimSpec, wait_ms: u64) -> Result<Vec<ClaimedJob>, StoreError> {
        validate_wait_ms(wait_ms)?;
        self.call_parking(move |e, now, reply| {
            let claimed = claim_now(&mut e.jobs, &spec, now);
            match claimed {
                Ok(claimed) if claimed.is_empty() && wait_ms > 0 => {
                    e.jobs.waiters.park_claim(spec, wait_ms, reply);
                    None
                }
                claimed => Some(Box::new(move |commit| {
                    let _ = reply.send(commit.and(claimed));
                })),
            }
        })
        .await
    }

    async fn heartbeat_job(
        &self,
        id: JobId,
        lease: &str,
        progress: Option<Vec<u8>>,
        lease_ms: Option<u64>,
    ) -> Result<HeartbeatAnswer, StoreError> {
        let lease = parse_lease(lease)?;
        self.call(move |e, now| {
            let outcome = e.jobs.board.heartbeat(id, lease, progress, lease_ms, now)?;
            e.jobs.absorb();
            Ok(HeartbeatAnswer {
                cancel_requested: outcome.cancel_requested,
                lease_expires_at: outcome.lease_expires_at,
            })
        })
        .await
    }

    async fn complete_job(&self, id: JobId, lease: &str, result: Vec<u8>) -> Result<JobView, StoreError> {
        let lease = parse_lease(lease)?;
        self.call(move |e, now| {
            e.jobs.board.complete(id, lease, result, now)?;
            e.jobs.absorb();
            e.jobs.view(id, Parts::Summary).ok_or_else(|| not_found(id))
        })
        .await
    }

    async fn fail_job(&self, id: JobId, lease: &str, error: String, retry: bool) -> Result<JobView, StoreError> {
        let lease = parse_lease(lease)?;
        self.call(move |e, now| {
            e.jobs.board.fail(id, lease, error, retry, now, random_u64())?;
            e.jobs.absorb();
            e.jobs.view(id, Parts::Summary).ok_or_else(|| not_found(id))
        })
        .await
    }

    async fn job_stats(&self) -> Result<Vec<QueueJobStats>, StoreError> {
        self.call(move |e, _now| Ok(e.jobs.board.stats())).await
    }
}
