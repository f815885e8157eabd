//! Async jobs: the request-reply state machine behind `/v1/jobs`, as plain data and pure
//! functions (time and randomness are arguments).
//!
//! A job is enqueued `queued` (claimable once its `run_at` has come); a worker's claim makes it
//! `running` under a lease (an attempt number and a nonce) that heartbeats extend, capped by
//! the job's `timeout_ms`; the worker completes it (`succeeded`, with a result) or fails it: a
//! failure that may be retried waits in `failed` for a backoff (exponential, capped, with full
//! jitter: [`JobBackoff`]), then is claimable again, until `max_attempts` attempts were made,
//! when it is `dead`. A lease that lapses (the worker died or stopped heartbeating, or the
//! timeout passed) ends the attempt: back to `queued` at once for another one, or `dead` when
//! it was the last. Cancelling a waiting job ends it at once (`cancelled`); a running one gets
//! `cancel_requested`, which its worker learns from its next heartbeat; its attempt then ends
//! as `cancelled` unless it completes. `succeeded`, `dead` and `cancelled` are terminal: the
//! job is kept, with its result, for `result_ttl_ms` after it finished and within its queue's
//! budget of result bytes and finished jobs ([`JobLimits`]), then pruned and counted.
//!
//! A lease names one attempt: the attempt number grows at every claim and is never reused, so
//! a heartbeat, completion or failure with an earlier attempt's lease is refused
//! ([`JobError::StaleLease`]) and never touches a newer attempt.
//!
//! Modules: `spec` (what an enqueue asks for, and its validation), `record` (a job's state as
//! stored, the effects a store persists, leases), `board` ([`JobBoard`]: every job's state and
//! the indexes the decisions need, for the embedded store; PostgreSQL restates the same rules
//! in SQL), `limits` (every named limit).

mod board;
mod index;
pub mod limits;
mod record;
mod spec;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::message::MessageId;
use crate::validation::ValidationError;

pub use board::{Claimed, Enqueued, HeartbeatOutcome, JobBoard, JobCounters, JobFilter, QueueJobStats};
pub use limits::JobLimits;
pub use record::{DataKind, JobDetails, JobEffect, JobRecord, Lease, LeaseToken, UniqueHold, lapse_error};
pub use spec::{
    ClaimSpec, Jitter, JobBackoff, NewJob, unique_key_hash, validate_callback_url, validate_job_queue,
    validate_job_type, validate_lease_ms, validate_tag,
};

/// A job's identity (a UUID, time-ordered when the store makes it from UUIDv7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct JobId(pub u128);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        MessageId(self.0).fmt(f)
    }
}

impl std::str::FromStr for JobId {
    type Err = ValidationError;

    /// A UUID in its usual 8-4-4-4-12 hex layout (either case).
    fn from_str(s: &str) -> Result<JobId, ValidationError> {
        let bad = || ValidationError::new("id", format!("{s:?} is not a job id (a UUID)"));
        if s.len() != 36 {
            return Err(bad());
        }
        let mut value: u128 = 0;
        for (i, c) in s.chars().enumerate() {
            if matches!(i, 8 | 13 | 18 | 23) {
                if c != '-' {
                    return Err(bad());
                }
                continue;
            }
            let digit = c.to_digit(16).ok_or_else(bad)?;
            value = (value << 4) | u128::from(digit);
        }
        Ok(JobId(value))
    }
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum JobStatus {
    /// Waiting for a worker (claimable once `run_at` has come).
    Queued,
    /// Claimed by a worker, under a lease.
    Running,
    /// Done; the result is kept.
    Succeeded,
    /// An attempt failed and the job will be retried after its backoff.
    Failed,
    /// Every attempt was used up (or a failure said not to retry).
    Dead,
    /// Cancelled before it finished.
    Cancelled,
}

impl JobStatus {
    pub const ALL: [JobStatus; 6] = [
        JobStatus::Queued,
        JobStatus::Running,
        JobStatus::Succeeded,
        JobStatus::Failed,
        JobStatus::Dead,
        JobStatus::Cancelled,
    ];

    /// As the API writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Succeeded => "succeeded",
            JobStatus::Failed => "failed",
            JobStatus::Dead => "dead",
            JobStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<JobStatus> {
        JobStatus::ALL.into_iter().find(|status| status.as_str() == s)
    }

    /// Terminal: nothing changes any more but the pruning.
    pub const fn is_terminal(self) -> bool {
        matches!(self, JobStatus::Succeeded | JobStatus::Dead | JobStatus::Cancelled)
    }

    /// Waiting for a claim (now or after `run_at`).
    pub const fn is_waiting(self) -> bool {
        matches!(self, JobStatus::Queued | JobStatus::Failed)
    }

    /// Position in [`JobStatus::ALL`], for per-status counters.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The status's number in stores that keep it as one (PostgreSQL): its index.
    pub const fn code(self) -> i16 {
        self as i16
    }

    pub fn from_code(code: i16) -> Option<JobStatus> {
        usize::try_from(code).ok().and_then(|i| JobStatus::ALL.get(i).copied())
    }
}

/// Why a job call changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("no job has id {0}")]
    NotFound(JobId),
    /// The lease is not the current attempt's, or the attempt is over (completed, failed,
    /// lapsed, cancelled): a newer attempt is never touched by an older lease.
    #[error("the lease of job {id} is stale: the attempt it names is over")]
    StaleLease { id: JobId, status: JobStatus },
    /// Cancelling a job that already finished otherwise.
    #[error("job {id} already finished ({})", status.as_str())]
    Finished { id: JobId, status: JobStatus },
    #[error(transparent)]
    Invalid(#[from] ValidationError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_statuses_parse() {
        let id = JobId(0x0192_f1c3_0000_7000_8000_0000_0000_00ff);
        let text = id.to_string();
        assert_eq!(text, "0192f1c3-0000-7000-8000-0000000000ff");
        assert_eq!(text.parse::<JobId>().unwrap(), id);
        assert_eq!(text.to_uppercase().parse::<JobId>().unwrap(), id);
        assert!("0192f1c3".parse::<JobId>().is_err());
        assert!("0192f1c3-0000-7000-8000-0000000000fg".parse::<JobId>().is_err());
        assert!("0192f1c3x0000-7000-8000-0000000000ff".parse::<JobId>().is_err());
        for status in JobStatus::ALL {
            assert_eq!(JobStatus::parse(status.as_str()), Some(status));
            assert_eq!(JobStatus::from_code(status.code()), Some(status));
        }
        assert_eq!(JobStatus::parse("pending"), None);
        let terminal: Vec<_> = JobStatus::ALL.into_iter().filter(|s| s.is_terminal()).collect();
        assert_eq!(terminal, [JobStatus::Succeeded, JobStatus::Dead, JobStatus::Cancelled]);
    }
}
