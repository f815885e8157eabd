//! Long polls parked on the job board: claims waiting for a claimable job, and waits for a job
//! to finish. Each turn of the writer serves those the turn made answerable (`serve`), in the
//! order they arrived, and ends those whose wait is over with what there is; their answers go
//! out with the turn's batch, after it is durable.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use sluice_core::TimeMs;
use sluice_core::jobs::{ClaimSpec, JobId};
use sluice_store::{ClaimedJob, JobView, StoreError};
use tokio::sync::oneshot;

use super::{JobState, Parts, random_u64};
use crate::sync::Reply;

pub type ClaimReply = oneshot::Sender<Result<Vec<ClaimedJob>, StoreError>>;
pub type ViewReply = oneshot::Sender<Result<JobView, StoreError>>;

enum Waiter {
    Claim { spec: ClaimSpec, reply: ClaimReply },
    Finish { job: JobId, reply: ViewReply },
}

#[derive(Default)]
pub struct Waiters {
    /// By arrival.
    parked: BTreeMap<u64, (Instant, Waiter)>,
    deadlines: BTreeSet<(Instant, u64)>,
    /// Waits on a job, by job.
    by_job: HashMap<JobId, Vec<u64>>,
    next: u64,
}

impl Waiters {
    fn park(&mut self, wait_ms: u64, waiter: Waiter) {
        let id = self.next;
        self.next += 1;
        let deadline = Instant::now() + Duration::from_millis(wait_ms);
        if let Waiter::Finish { job, .. } = &waiter {
            self.by_job.entry(*job).or_default().push(id);
        }
        self.deadlines.insert((deadline, id));
        self.parked.insert(id, (deadline, waiter));
    }

    pub fn park_claim(&mut self, spec: ClaimSpec, wait_ms: u64, reply: ClaimReply) {
        self.park(wait_ms, Waiter::Claim { spec, reply });
    }

    pub fn park_finish(&mut self, job: JobId, wait_ms: u64, reply: ViewReply) {
        self.park(wait_ms, Waiter::Finish { job, reply });
    }

    fn take(&mut self, id: u64) -> Option<(Instant, Waiter)> {
        let (deadline, waiter) = self.parked.remove(&id)?;
        self.deadlines.remove(&(deadline, id));
        if let Waiter::Finish { job, .. } = &waiter
            && let Some(ids) = self.by_job.get_mut(job)
        {
            ids.retain(|&w| w != id);
            if ids.is_empty() {
                self.by_job.remove(job);
            }
        }
        Some((deadline, waiter))
    }

    /// Parks a claim again under its id and deadline (it found nothing after all).
    fn reinsert(&mut self, id: u64, deadline: Instant, waiter: Waiter) {
        self.deadlines.insert((deadline, id));
        self.parked.insert(id, (deadline, waiter));
    }

    /// When the earliest wait ends.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|&(at, _)| at)
    }

    /// Answers every parked long poll with `refusal`.
    pub fn fail_all(&mut self, refusal: &StoreError) {
        for (_, (_, waiter)) in std::mem::take(&mut self.parked) {
            match waiter {
                Waiter::Claim { reply, .. } => drop(reply.send(Err(refusal.clone()))),
                Waiter::Finish { reply, .. } => drop(reply.send(Err(refusal.clone()))),
            }
        }
        self.deadlines.clear();
        self.by_job.clear();
    }

    /// Ends every parked long poll as if its wait were over (the store is closing).
    pub fn end_all(&mut self) {
        self.fail_all(&StoreError::ShuttingDown);
    }
}

/// Serves the long polls this turn made answerable and ends those whose wait is over; their
/// answers are added to the turn's replies.
pub fn serve(jobs: &mut JobState, now: TimeMs, replies: &mut Vec<Reply>) {
    let woken: HashSet<String> = jobs.board.take_woken().into_iter().collect();
    let finished = jobs.board.take_finished();
    let mut ready: Vec<u64> = Vec::new();
    for job in &finished {
        ready.extend(jobs.waiters.by_job.get(job).into_iter().flatten().copied());
    }
    if !woken.is_empty() {
        let claims = jobs.waiters.parked.iter().filter_map(|(&id, (_, waiter))| match waiter {
            Waiter::Claim { spec, .. } if spec.queues.iter().any(|q| woken.contains(q)) => Some(id),
            _ => None,
        });
        ready.extend(claims);
    }
    ready.sort_unstable();
    ready.dedup();
    for id in ready {
        answer(jobs, id, now, false, replies);
    }
    let real_now = Instant::now();
    while let Some(&(deadline, id)) = jobs.waiters.deadlines.first() {
        if deadline > real_now {
            break;
        }
        answer(jobs, id, now, true, replies);
    }
}

/// Claims what is claimable now, with each job's payload.
pub fn claim_now(jobs: &mut JobState, spec: &ClaimSpec, now: TimeMs) -> Result<Vec<ClaimedJob>, StoreError> {
    let claimed = jobs.board.claim(spec, now, random_u64)?;
    jobs.absorb();
    Ok(claimed
        .into_iter()
        .map(|c| ClaimedJob { view: jobs.view_of(c.record, Parts::Claim), lease: c.lease.encode() })
        .collect())
}

/// Answers parked poll `id` if it can be answered now (or `expired`: with what there is).
fn answer(jobs: &mut JobState, id: u64, now: TimeMs, expired: bool, replies: &mut Vec<Reply>) {
    let Some((deadline, waiter)) = jobs.waiters.take(id) else { return };
    match waiter {
        Waiter::Claim { spec, reply } => {
            if reply.is_closed() {
                return;
            }
            let claimed = match claim_now(jobs, &spec, now) {
                Ok(claimed) => claimed,
                Err(e) => {
                    let _ = reply.send(Err(e));
                    return;
                }
            };
            if claimed.is_empty() && !expired {
                // Someone else took what was claimable; keep waiting.
                jobs.waiters.reinsert(id, deadline, Waiter::Claim { spec, reply });
                return;
            }
            replies.push(Box::new(move |commit| {
                let _ = reply.send(commit.map(|()| claimed));
            }));
        }
        Waiter::Finish { job, reply } => {
            let view = jobs.view(job, Parts::All).ok_or(sluice_core::jobs::JobError::NotFound(job).into());
            replies.push(Box::new(move |commit| {
                let _ = reply.send(commit.and(view));
            }));
        }
    }
}
