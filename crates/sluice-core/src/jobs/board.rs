//! [`JobBoard`]: every job's state and the decisions of the job state machine (see the module
//! documentation of `jobs`), over the indexes of `index.rs`. Each call takes `now` (and, where
//! something is drawn, the random number) as an argument and appends the [`JobEffect`]s a
//! store must persist; a store rebuilds the board at open from the records those effects
//! wrote ([`JobBoard::restore`]).
//!
//! Every call first applies what time has made due ([`JobBoard::tick`]), so that a lease that
//! ran out is over before anyone can use it, whoever calls.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::index::{Indexes, Names, Slot};
use super::limits::{JOB_ERROR_BYTES_MAX, JOB_PROGRESS_BYTES_MAX, JOB_RESULT_BYTES_MAX, JobLimits};
use super::record::{DataKind, JobDetails, JobEffect, JobRecord, Lease, LeaseToken, UniqueHold, lapse_error};
use super::spec::{ClaimSpec, NewJob, unique_key_hash, validate_lease_ms};
use super::{JobError, JobId, JobStatus};
use crate::TimeMs;
use crate::validation::ValidationError;

/// What an enqueue did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    Created(JobId),
    /// Its unique key is held by this job, which is returned instead.
    Existing(JobId),
}

impl Enqueued {
    pub fn id(self) -> JobId {
        match self {
            Enqueued::Created(id) | Enqueued::Existing(id) => id,
        }
    }
}

/// One job handed to a worker.
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed {
    pub record: JobRecord,
    pub lease: LeaseToken,
}

/// What a heartbeat tells its worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatOutcome {
    pub cancel_requested: bool,
    pub lease_expires_at: TimeMs,
}

/// Which jobs a list returns (the store filters by tag, which the board does not hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    pub queue: Option<String>,
    pub status: Option<JobStatus>,
    pub job_type: Option<String>,
}

/// A queue's jobs by status (in [`JobStatus::ALL`] order), its finished jobs' result bytes,
/// and the payload bytes of every job it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueJobStats {
    pub queue: String,
    pub counts: [u64; 6],
    pub result_bytes: u64,
    pub payload_bytes: u64,
}

/// Running totals since the board was built (not persisted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobCounters {
    pub enqueued: u64,
    pub claimed: u64,
    pub succeeded: u64,
    /// Attempts that failed (whether retried or not).
    pub failed: u64,
    pub dead: u64,
    pub cancelled: u64,
    /// Attempts whose lease ran out.
    pub lapsed: u64,
    /// Finished jobs pruned at the end of `result_ttl_ms`, and to keep a queue's budget.
    pub pruned_ttl: u64,
    pub pruned_budget: u64,
}

/// Why a finished job is pruned.
#[derive(Clone, Copy)]
enum Prune {
    Ttl,
    Budget,
}

#[derive(Debug, Default)]
pub struct JobBoard {
    limits: JobLimits,
    jobs: BTreeMap<JobId, Slot>,
    queues: Names,
    types: Names,
    index: Indexes,
    /// Unique key hash → the job holding it and until when.
    unique: HashMap<[u8; 16], (JobId, TimeMs)>,
    effects: Vec<JobEffect>,
    /// Queues that got a claimable job, and jobs that finished, since last taken.
    woken: BTreeSet<u32>,
    finished_now: Vec<JobId>,
    counters: JobCounters,
}

impl JobBoard {
    pub fn new(limits: JobLimits) -> JobBoard {
        JobBoard { limits: limits.sane(), ..JobBoard::default() }
    }

    /// Changes the per-queue budget of finished jobs; it is kept from the next finish on.
    pub fn set_limits(&mut self, limits: JobLimits) {
        self.limits = limits.sane();
    }

    pub fn limits(&self) -> JobLimits {
        self.limits
    }

    // ----- calls ----------------------------------------------------------------------------

    /// Enqueues `job` as `id` (a new id, never used before), or returns the job that holds its
    /// unique key.
    pub fn enqueue(&mut self, id: JobId, job: NewJob, now: TimeMs) -> Result<Enqueued, JobError> {
        self.tick(now);
        job.validate(now)?;
        let hold = job.unique_key.as_deref().map(|key| unique_key_hash(&job.queue, key));
        if let Some(hash) = hold
            && let Some(&(existing, until)) = self.unique.get(&hash)
            && until > now
            && self.jobs.contains_key(&existing)
        {
            return Ok(Enqueued::Existing(existing));
        }
        let record = JobRecord {
            id,
            queue: job.queue.clone(),
            job_type: job.job_type.clone(),
            status: JobStatus::Queued,
            priority: job.priority,
            attempt: 0,
            max_attempts: job.max_attempts(),
            backoff: job.backoff,
            timeout_ms: job.timeout_ms,
            result_ttl_ms: job.result_ttl_ms(),
            created_at: now,
            run_at: job.run_at(now),
            started_at: None,
            finished_at: None,
            lease: None,
            cancel_requested: false,
            unique: hold.map(|key_hash| UniqueHold { key_hash, until: now.saturating_add(job.unique_for_ms()) }),
            has_callback: job.callback_url.is_some(),
            payload_bytes: job.payload.len() as u64,
            result_bytes: 0,
        };
        let slot = Slot::from_record(&record, &mut self.queues, &mut self.types);
        if let Some(h) = record.unique {
            self.unique.insert(h.key_hash, (id, h.until));
        }
        self.effects.push(JobEffect::Put(record));
        self.effects.push(JobEffect::Data { id, kind: DataKind::Payload, bytes: job.payload });
        let details = JobDetails { callback_url: job.callback_url, tags: job.tags, unique_key: job.unique_key };
        self.effects.push(JobEffect::Details { id, details });
        self.place(slot, now);
        self.counters.enqueued += 1;
        Ok(Enqueued::Created(id))
    }

    /// Claims up to `spec.max` claimable jobs of `spec.queues` (and `spec.types`), highest
    /// priority first, then the longest claimable, across the queues. `nonce` draws each
    /// lease's nonce.
    pub fn claim(
        &mut self,
        spec: &ClaimSpec,
        now: TimeMs,
        mut nonce: impl FnMut() -> u64,
    ) -> Result<Vec<Claimed>, JobError> {
        spec.validate()?;
        self.tick(now);
        let queues: Vec<u32> = spec.queues.iter().filter_map(|q| self.queues.find(q)).collect();
        let types: Vec<u32> = spec.types.iter().filter_map(|t| self.types.find(t)).collect();
        let mut out = Vec::new();
        if queues.is_empty() || (!spec.types.is_empty() && types.is_empty()) {
            return Ok(out);
        }
        while out.len() < spec.max as usize {
            let Some((_, _, id)) = queues.iter().filter_map(|&q| self.index.first_ready(q, &types)).min() else {
                break;
            };
            let mut slot = self.take(id);
            slot.attempt += 1;
            slot.status = JobStatus::Running;
            slot.started_at = Some(now);
            let expires_at = slot.lease_end(now, spec.lease_ms);
            slot.lease = Some(Lease { nonce: nonce(), lease_ms: spec.lease_ms, expires_at });
            let record = slot.record(&self.queues, &self.types);
            let lease = record.lease_token().expect("running with a lease");
            self.effects.push(JobEffect::Put(record.clone()));
            self.place(slot, now);
            self.counters.claimed += 1;
            out.push(Claimed { record, lease });
        }
        Ok(out)
    }

    /// Extends the current attempt's lease by `lease_ms` (the claim's when `None`) and keeps
    /// `progress` (JSON text) when given; tells the worker whether cancellation was asked.
    pub fn heartbeat(
        &mut self,
        id: JobId,
        lease: LeaseToken,
        progress: Option<Vec<u8>>,
        lease_ms: Option<u64>,
        now: TimeMs,
    ) -> Result<HeartbeatOutcome, JobError> {
        self.tick(now);
        if let Some(ms) = lease_ms {
            validate_lease_ms(ms, "lease_ms")?;
        }
        if progress.as_ref().is_some_and(|p| p.len() > JOB_PROGRESS_BYTES_MAX) {
            return Err(
                ValidationError::new("progress", format!("at most {JOB_PROGRESS_BYTES_MAX} bytes of JSON")).into()
            );
        }
        self.check_lease(id, lease)?;
        let mut slot = self.take(id);
        let mut current = slot.lease.expect("checked: running");
        current.lease_ms = lease_ms.unwrap_or(current.lease_ms);
        current.expires_at = slot.lease_end(now, current.lease_ms);
        slot.lease = Some(current);
        let outcome =
            HeartbeatOutcome { cancel_requested: slot.cancel_requested, lease_expires_at: current.expires_at };
        if let Some(bytes) = progress {
            self.effects.push(JobEffect::Data { id, kind: DataKind::Progress, bytes });
        }
        self.place_and_put(slot, now);
        Ok(outcome)
    }

    /// Ends the current attempt with `result` (JSON text): `succeeded`.
    pub fn complete(&mut self, id: JobId, lease: LeaseToken, result: Vec<u8>, now: TimeMs) -> Result<(), JobError> {
        self.tick(now);
        if result.len() > JOB_RESULT_BYTES_MAX {
            return Err(ValidationError::new("result", format!("at most {JOB_RESULT_BYTES_MAX} bytes of JSON")).into());
        }
        self.check_lease(id, lease)?;
        let mut slot = self.take(id);
        slot.result_bytes = result.len() as u64;
        self.effects.push(JobEffect::Data { id, kind: DataKind::Result, bytes: result });
        self.finish(slot, JobStatus::Succeeded, now);
        Ok(())
    }

    /// Ends the current attempt with `error`: retried after its backoff (`failed`), unless
    /// `retry` is false, the attempts are used up (`dead`), or cancellation was asked
    /// (`cancelled`). `draw` is the jitter's uniform random number.
    pub fn fail(
        &mut self,
        id: JobId,
        lease: LeaseToken,
        error: String,
        retry: bool,
        now: TimeMs,
        draw: u64,
    ) -> Result<(), JobError> {
        self.tick(now);
        if error.len() > JOB_ERROR_BYTES_MAX {
            return Err(ValidationError::new("error", format!("at most {JOB_ERROR_BYTES_MAX} bytes")).into());
        }
        self.check_lease(id, lease)?;
        let mut slot = self.take(id);
        self.effects.push(JobEffect::Data { id, kind: DataKind::Error, bytes: error.into_bytes() });
        self.counters.failed += 1;
        if slot.cancel_requested {
            self.finish(slot, JobStatus::Cancelled, now);
        } else if !retry || slot.attempt >= slot.max_attempts {
            self.finish(slot, JobStatus::Dead, now);
        } else {
            slot.status = JobStatus::Failed;
            slot.lease = None;
            slot.run_at = now.saturating_add(slot.backoff.delay_ms(slot.attempt - 1, draw));
            self.place_and_put(slot, now);
        }
        Ok(())
    }

    /// Cancels a waiting job at once; asks a running one's worker to stop (it learns so from
    /// its next heartbeat). A cancelled job stays so; another finished one is an error.
    pub fn cancel(&mut self, id: JobId, now: TimeMs) -> Result<(), JobError> {
        self.tick(now);
        let slot = self.jobs.get(&id).ok_or(JobError::NotFound(id))?;
        match slot.status {
            JobStatus::Queued | JobStatus::Failed => {
                let slot = self.take(id);
                self.finish(slot, JobStatus::Cancelled, now);
            }
            JobStatus::Running if !slot.cancel_requested => {
                let mut slot = self.take(id);
                slot.cancel_requested = true;
                self.place_and_put(slot, now);
            }
            JobStatus::Running | JobStatus::Cancelled => {}
            status @ (JobStatus::Succeeded | JobStatus::Dead) => return Err(JobError::Finished { id, status }),
        }
        Ok(())
    }

    /// Applies everything due at `now`, oldest first: delays and backoffs end (the jobs become
    /// claimable), leases lapse, finished jobs past their `result_ttl_ms` are pruned.
    pub fn tick(&mut self, now: TimeMs) {
        while let Some(&(at, id)) = self.index.timers.first() {
            if at > now {
                break;
            }
            let slot = self.take(id);
            match slot.status {
                JobStatus::Queued | JobStatus::Failed => self.place(slot, now),
                JobStatus::Running => self.lapse(slot, now),
                JobStatus::Succeeded | JobStatus::Dead | JobStatus::Cancelled => self.prune(slot, Prune::Ttl),
            }
        }
    }

    // ----- reads ----------------------------------------------------------------------------

    pub fn get(&self, id: JobId) -> Option<JobRecord> {
        self.jobs.get(&id).map(|s| s.record(&self.queues, &self.types))
    }

    /// Jobs matching `filter` with ids after `after`, in id order, at most `limit`, looking at
    /// no more than `scan_max` jobs. The second value is set when the scan stopped at
    /// `scan_max` before `limit` jobs matched: the last id looked at, where the next page
    /// goes on.
    pub fn list(
        &self,
        filter: &JobFilter,
        after: Option<JobId>,
        limit: usize,
        scan_max: usize,
    ) -> (Vec<JobRecord>, Option<JobId>) {
        let queue = filter.queue.as_deref().map(|q| self.queues.find(q));
        let job_type = filter.job_type.as_deref().map(|t| self.types.find(t));
        if matches!(queue, Some(None)) || matches!(job_type, Some(None)) {
            return (Vec::new(), None);
        }
        let start = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        let mut out = Vec::new();
        let mut looked_at = None;
        for (scanned, (&id, slot)) in self.jobs.range((start, std::ops::Bound::Unbounded)).enumerate() {
            if out.len() >= limit {
                return (out, None);
            }
            if scanned >= scan_max {
                return (out, looked_at);
            }
            looked_at = Some(id);
            let matches = queue.is_none_or(|q| q == Some(slot.queue))
                && job_type.is_none_or(|t| t == Some(slot.job_type))
                && filter.status.is_none_or(|s| s == slot.status);
            if matches {
                out.push(slot.record(&self.queues, &self.types));
            }
        }
        (out, None)
    }

    /// Every queue's jobs by status and finished result bytes, by queue name.
    pub fn stats(&self) -> Vec<QueueJobStats> {
        let mut out: Vec<QueueJobStats> = self
            .index
            .counts
            .iter()
            .map(|(&q, &counts)| QueueJobStats {
                queue: self.queues.name(q).to_string(),
                counts,
                result_bytes: self.index.finished.get(&q).map_or(0, |f| f.result_bytes),
                payload_bytes: self.index.payload_bytes.get(&q).copied().unwrap_or(0),
            })
            .collect();
        out.sort_by(|a, b| a.queue.cmp(&b.queue));
        out
    }

    /// The earliest time something is due (a delay, a lease, a pruning).
    pub fn next_due(&self) -> Option<TimeMs> {
        self.index.timers.first().map(|&(at, _)| at)
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    pub fn counters(&self) -> JobCounters {
        self.counters
    }

    /// Hands over the effects appended since the last call (`buffer` comes back empty).
    pub fn swap_effects(&mut self, buffer: &mut Vec<JobEffect>) {
        std::mem::swap(&mut self.effects, buffer);
    }

    /// Queues that got a claimable job since the last call (for parked claims).
    pub fn take_woken(&mut self) -> Vec<String> {
        let woken = std::mem::take(&mut self.woken);
        woken
            .into_iter()
            .filter(|&q| self.index.counts.contains_key(&q))
            .map(|q| self.queues.name(q).to_string())
            .collect()
    }

    /// Jobs that finished since the last call (for waits on a job).
    pub fn take_finished(&mut self) -> Vec<JobId> {
        std::mem::take(&mut self.finished_now)
    }

    // ----- restore --------------------------------------------------------------------------

    /// Adds a job read back from a store at open, as it was (a lease that ran out while the
    /// store was closed lapses at the first tick, as it would have live).
    pub fn restore(&mut self, record: &JobRecord, now: TimeMs) {
        let slot = Slot::from_record(record, &mut self.queues, &mut self.types);
        if let Some(h) = record.unique
            && h.until > now
        {
            self.unique.insert(h.key_hash, (record.id, h.until));
        }
        self.place(slot, now);
        self.woken.clear();
    }

    // ----- the state machine's steps ----------------------------------------------------------

    fn check_lease(&self, id: JobId, lease: LeaseToken) -> Result<(), JobError> {
        let slot = self.jobs.get(&id).ok_or(JobError::NotFound(id))?;
        let current = slot.status == JobStatus::Running
            && slot.attempt == lease.attempt
            && slot.lease.is_some_and(|l| l.nonce == lease.nonce);
        if current { Ok(()) } else { Err(JobError::StaleLease { id, status: slot.status }) }
    }

    /// A lease ran out: the attempt is over. Back to `queued` for the next attempt at once, or
    /// `dead` after the last one (`cancelled` if cancellation was asked).
    fn lapse(&mut self, mut slot: Slot, now: TimeMs) {
        let error = lapse_error(&slot.record(&self.queues, &self.types));
        self.effects.push(JobEffect::Data { id: slot.id, kind: DataKind::Error, bytes: error.into_bytes() });
        self.counters.lapsed += 1;
        if slot.cancel_requested {
            self.finish(slot, JobStatus::Cancelled, now);
        } else if slot.attempt >= slot.max_attempts {
            self.finish(slot, JobStatus::Dead, now);
        } else {
            slot.status = JobStatus::Queued;
            slot.lease = None;
            slot.run_at = now;
            self.place_and_put(slot, now);
        }
    }

    /// Makes `slot` terminal, then keeps its queue within its budget of finished jobs by
    /// pruning the oldest others.
    fn finish(&mut self, mut slot: Slot, status: JobStatus, now: TimeMs) {
        slot.status = status;
        slot.lease = None;
        slot.finished_at = Some(now);
        match status {
            JobStatus::Succeeded => self.counters.succeeded += 1,
            JobStatus::Dead => self.counters.dead += 1,
            _ => self.counters.cancelled += 1,
        }
        let (id, queue, callback) = (slot.id, slot.queue, slot.has_callback);
        self.place_and_put(slot, now);
        if callback {
            self.effects.push(JobEffect::Callback(id));
        }
        self.finished_now.push(id);
        while let Some(f) = self.index.finished.get(&queue) {
            let over = f.result_bytes > self.limits.result_bytes_per_queue_max
                || f.order.len() as u64 > self.limits.finished_per_queue_max;
            match f.order.first() {
                Some(&(_, oldest)) if over && oldest != id => {
                    let slot = self.take(oldest);
                    self.prune(slot, Prune::Budget);
                }
                _ => break,
            }
        }
    }

    /// Forgets a finished job with everything stored beside it.
    fn prune(&mut self, slot: Slot, why: Prune) {
        match why {
            Prune::Ttl => self.counters.pruned_ttl += 1,
            Prune::Budget => self.counters.pruned_budget += 1,
        }
        if let Some(h) = slot.unique
            && self.unique.get(&h.key_hash).is_some_and(|&(holder, _)| holder == slot.id)
        {
            self.unique.remove(&h.key_hash);
        }
        self.queues.release(slot.queue);
        self.types.release(slot.job_type);
        self.effects.push(JobEffect::Delete(slot.id));
    }

    /// Removes a job from the map and from every index, to change it (or prune it).
    fn take(&mut self, id: JobId) -> Slot {
        let slot = self.jobs.remove(&id).expect("a job in the index is in the map");
        self.index.remove(&slot);
        slot
    }

    /// Puts a (changed) job back into the map and the indexes.
    fn place(&mut self, slot: Slot, now: TimeMs) {
        if self.index.insert(&slot, now) {
            self.woken.insert(slot.queue);
        }
        self.jobs.insert(slot.id, slot);
    }

    fn place_and_put(&mut self, slot: Slot, now: TimeMs) {
        self.effects.push(JobEffect::Put(slot.record(&self.queues, &self.types)));
        self.place(slot, now);
    }
}
