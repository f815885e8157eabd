//! The board's in-memory indexes: interned queue and type names, the compact per-job state
//! ([`Slot`]), and the sets the decisions read (ready jobs in claim order, timers, finished
//! jobs per queue with their result bytes, counts by queue and status).
//!
//! Every index holds a job in exactly one place determined by its slot and `now`
//! ([`Indexes::insert`]); a change removes the old slot's entries and inserts the new slot's,
//! so no index can disagree with the slot it was built from.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};

use super::record::{JobRecord, Lease, UniqueHold};
use super::spec::JobBackoff;
use super::{JobId, JobStatus};
use crate::TimeMs;

/// Names kept once however many jobs use them, with a count of users; a name is forgotten
/// with its last job.
#[derive(Debug, Default)]
pub(super) struct Names {
    ids: HashMap<String, u32>,
    names: Vec<Option<(String, u64)>>,
    free: Vec<u32>,
}

impl Names {
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            if let Some((_, users)) = self.names[id as usize].as_mut() {
                *users += 1;
            }
            return id;
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.names[id as usize] = Some((name.to_string(), 1));
                id
            }
            None => {
                self.names.push(Some((name.to_string(), 1)));
                u32::try_from(self.names.len() - 1).expect("fewer than 2^32 names")
            }
        };
        self.ids.insert(name.to_string(), id);
        id
    }

    pub fn release(&mut self, id: u32) {
        let entry = &mut self.names[id as usize];
        let Some((name, users)) = entry.as_mut() else { return };
        *users -= 1;
        if *users == 0 {
            self.ids.remove(name.as_str());
            *entry = None;
            self.free.push(id);
        }
    }

    pub fn find(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    pub fn name(&self, id: u32) -> &str {
        self.names[id as usize].as_ref().map(|(n, _)| n.as_str()).expect("an interned name in use")
    }
}

/// One job's state in memory: a [`JobRecord`] with its names interned.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Slot {
    pub id: JobId,
    pub queue: u32,
    pub job_type: u32,
    pub status: JobStatus,
    pub priority: u8,
    pub attempt: u32,
    pub max_attempts: u32,
    pub backoff: JobBackoff,
    pub timeout_ms: Option<u64>,
    pub result_ttl_ms: u64,
    pub created_at: TimeMs,
    pub run_at: TimeMs,
    pub started_at: Option<TimeMs>,
    pub finished_at: Option<TimeMs>,
    pub lease: Option<Lease>,
    pub cancel_requested: bool,
    pub unique: Option<UniqueHold>,
    pub has_callback: bool,
    pub payload_bytes: u64,
    pub result_bytes: u64,
}

impl Slot {
    pub fn from_record(r: &JobRecord, queues: &mut Names, types: &mut Names) -> Slot {
        Slot {
            id: r.id,
            queue: queues.intern(&r.queue),
            job_type: types.intern(&r.job_type),
            status: r.status,
            priority: r.priority,
            attempt: r.attempt,
            max_attempts: r.max_attempts,
            backoff: r.backoff,
            timeout_ms: r.timeout_ms,
            result_ttl_ms: r.result_ttl_ms,
            created_at: r.created_at,
            run_at: r.run_at,
            started_at: r.started_at,
            finished_at: r.finished_at,
            lease: r.lease,
            cancel_requested: r.cancel_requested,
            unique: r.unique,
            has_callback: r.has_callback,
            payload_bytes: r.payload_bytes,
            result_bytes: r.result_bytes,
        }
    }

    pub fn record(&self, queues: &Names, types: &Names) -> JobRecord {
        JobRecord {
            id: self.id,
            queue: queues.name(self.queue).to_string(),
            job_type: types.name(self.job_type).to_string(),
            status: self.status,
            priority: self.priority,
            attempt: self.attempt,
            max_attempts: self.max_attempts,
            backoff: self.backoff,
            timeout_ms: self.timeout_ms,
            result_ttl_ms: self.result_ttl_ms,
            created_at: self.created_at,
            run_at: self.run_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
            lease: self.lease,
            cancel_requested: self.cancel_requested,
            unique: self.unique,
            has_callback: self.has_callback,
            payload_bytes: self.payload_bytes,
            result_bytes: self.result_bytes,
        }
    }

    pub fn expires_at(&self) -> Option<TimeMs> {
        self.finished_at.map(|at| at.saturating_add(self.result_ttl_ms))
    }

    /// The end of a lease of `lease_ms` taken or extended at `now`: capped by the timeout.
    pub fn lease_end(&self, now: TimeMs, lease_ms: u64) -> TimeMs {
        let end = now.saturating_add(lease_ms);
        match (self.timeout_ms, self.started_at) {
            (Some(timeout), Some(started)) => end.min(started.saturating_add(timeout)),
            _ => end,
        }
    }

    /// Its place in claim order: higher priority first, then the earlier claimable, then id.
    pub fn order(&self) -> (Reverse<u8>, TimeMs, JobId) {
        (Reverse(self.priority), self.run_at, self.id)
    }
}

/// A queue's finished jobs, oldest first, and the result bytes they hold.
#[derive(Debug, Default)]
pub(super) struct Finished {
    pub order: BTreeSet<(TimeMs, JobId)>,
    pub result_bytes: u64,
}

type Order = (Reverse<u8>, TimeMs, JobId);

#[derive(Debug, Default)]
pub(super) struct Indexes {
    /// Claimable jobs by queue, in claim order.
    pub ready: BTreeSet<(u32, Order)>,
    /// The same by queue and type, for claims that name types.
    pub ready_typed: BTreeSet<(u32, u32, Order)>,
    /// One timer per job that waits for time: a delay or backoff (`run_at`), a lease's end, a
    /// finished job's pruning.
    pub timers: BTreeSet<(TimeMs, JobId)>,
    pub finished: HashMap<u32, Finished>,
    /// Jobs by queue and status.
    pub counts: HashMap<u32, [u64; 6]>,
    /// The payload bytes of every job, by queue.
    pub payload_bytes: HashMap<u32, u64>,
}

impl Indexes {
    /// Indexes `slot` as of `now`; true when it became claimable.
    pub fn insert(&mut self, slot: &Slot, now: TimeMs) -> bool {
        self.counts.entry(slot.queue).or_default()[slot.status.index()] += 1;
        *self.payload_bytes.entry(slot.queue).or_default() += slot.payload_bytes;
        match slot.status {
            JobStatus::Queued | JobStatus::Failed if slot.run_at <= now => {
                self.ready.insert((slot.queue, slot.order()));
                self.ready_typed.insert((slot.queue, slot.job_type, slot.order()));
                return true;
            }
            JobStatus::Queued | JobStatus::Failed => {
                self.timers.insert((slot.run_at, slot.id));
            }
            JobStatus::Running => {
                let lease = slot.lease.expect("a running job has a lease");
                self.timers.insert((lease.expires_at, slot.id));
            }
            JobStatus::Succeeded | JobStatus::Dead | JobStatus::Cancelled => {
                let finished_at = slot.finished_at.expect("a finished job has its time");
                self.timers.insert((slot.expires_at().expect("finished"), slot.id));
                let f = self.finished.entry(slot.queue).or_default();
                f.order.insert((finished_at, slot.id));
                f.result_bytes += slot.result_bytes;
            }
        }
        false
    }

    /// Removes every entry `slot` made.
    pub fn remove(&mut self, slot: &Slot) {
        if let Some(counts) = self.counts.get_mut(&slot.queue) {
            counts[slot.status.index()] -= 1;
            if counts.iter().all(|&n| n == 0) {
                self.counts.remove(&slot.queue);
                self.payload_bytes.remove(&slot.queue);
            } else if let Some(bytes) = self.payload_bytes.get_mut(&slot.queue) {
                *bytes = bytes.saturating_sub(slot.payload_bytes);
            }
        }
        match slot.status {
            JobStatus::Queued | JobStatus::Failed => {
                if !self.ready.remove(&(slot.queue, slot.order())) {
                    self.timers.remove(&(slot.run_at, slot.id));
                } else {
                    self.ready_typed.remove(&(slot.queue, slot.job_type, slot.order()));
                }
            }
            JobStatus::Running => {
                if let Some(lease) = slot.lease {
                    self.timers.remove(&(lease.expires_at, slot.id));
                }
            }
            JobStatus::Succeeded | JobStatus::Dead | JobStatus::Cancelled => {
                if let Some(at) = slot.expires_at() {
                    self.timers.remove(&(at, slot.id));
                }
                if let (Some(f), Some(finished_at)) = (self.finished.get_mut(&slot.queue), slot.finished_at) {
                    f.order.remove(&(finished_at, slot.id));
                    f.result_bytes -= slot.result_bytes;
                    if f.order.is_empty() {
                        self.finished.remove(&slot.queue);
                    }
                }
            }
        }
    }

    /// The first claimable job of `queue` (of one of `types` when given).
    pub fn first_ready(&self, queue: u32, types: &[u32]) -> Option<Order> {
        let lowest = (Reverse(u8::MAX), 0, JobId(0));
        if types.is_empty() {
            return self.ready.range((queue, lowest)..).next().filter(|(q, _)| *q == queue).map(|(_, o)| *o);
        }
        types
            .iter()
            .filter_map(|&t| {
                self.ready_typed.range((queue, t, lowest)..).next().filter(|(q, ty, _)| *q == queue && *ty == t)
            })
            .map(|(_, _, o)| *o)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_shared_and_forgotten_with_their_last_user() {
        let mut names = Names::default();
        let a = names.intern("a");
        assert_eq!(names.intern("a"), a);
        let b = names.intern("b");
        assert_ne!(a, b);
        names.release(a);
        assert_eq!(names.find("a"), Some(a), "one user left");
        names.release(a);
        assert_eq!(names.find("a"), None);
        assert_eq!(names.intern("c"), a, "the id is reused");
        assert_eq!(names.name(b), "b");
    }
}
