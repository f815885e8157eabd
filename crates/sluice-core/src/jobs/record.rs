//! A job as a store keeps it: the fixed-size state every decision reads ([`JobRecord`]), the
//! variable-size parts written beside it and read only to show the job ([`DataKind`],
//! [`JobDetails`]), leases, and the effects a store persists.

use serde::{Deserialize, Serialize};

use super::spec::JobBackoff;
use super::{JobId, JobStatus};
use crate::TimeMs;

/// The current attempt's hold on a running job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// Drawn at the claim, so that a lease cannot be made up from the attempt number alone.
    pub nonce: u64,
    /// What each heartbeat extends the lease by (the claim's `lease_ms`, or a heartbeat's).
    pub lease_ms: u64,
    /// The attempt ends (lapses) at this time unless a heartbeat extends it first; never
    /// later than the start plus the job's `timeout_ms`.
    pub expires_at: TimeMs,
}

/// A held unique key: its hash ([`super::unique_key_hash`]) and until when it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UniqueHold {
    pub key_hash: [u8; 16],
    pub until: TimeMs,
}

/// The state of one job that every decision needs. Fixed size apart from the queue and type
/// names; the payload, the result, the progress, the last error and the details are stored
/// beside it ([`JobEffect::Data`], [`JobEffect::Details`]) and never needed to decide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: JobId,
    pub queue: String,
    pub job_type: String,
    pub status: JobStatus,
    pub priority: u8,
    /// Attempts started (claims); the current attempt's number while running.
    pub attempt: u32,
    pub max_attempts: u32,
    pub backoff: JobBackoff,
    pub timeout_ms: Option<u64>,
    pub result_ttl_ms: u64,
    pub created_at: TimeMs,
    /// Waiting: claimable from this time. Otherwise when it last became claimable.
    pub run_at: TimeMs,
    /// The current (or last) attempt's start.
    pub started_at: Option<TimeMs>,
    pub finished_at: Option<TimeMs>,
    /// Set while running.
    pub lease: Option<Lease>,
    pub cancel_requested: bool,
    pub unique: Option<UniqueHold>,
    /// Whether the job has a `callback_url` (in its details), to be called when it finishes.
    pub has_callback: bool,
    pub payload_bytes: u64,
    pub result_bytes: u64,
}

impl JobRecord {
    /// When a finished job is pruned.
    pub fn expires_at(&self) -> Option<TimeMs> {
        self.finished_at.map(|at| at.saturating_add(self.result_ttl_ms))
    }

    /// The lease a worker holds while the job runs.
    pub fn lease_token(&self) -> Option<LeaseToken> {
        self.lease
            .filter(|_| self.status == JobStatus::Running)
            .map(|l| LeaseToken { attempt: self.attempt, nonce: l.nonce })
    }

    /// The end of a lease of `lease_ms` taken or extended at `now`: capped by the timeout.
    pub fn lease_end(&self, now: TimeMs, lease_ms: u64) -> TimeMs {
        let end = now.saturating_add(lease_ms);
        match (self.timeout_ms, self.started_at) {
            (Some(timeout), Some(started)) => end.min(started.saturating_add(timeout)),
            _ => end,
        }
    }
}

/// Why an attempt whose lease ran out ended: the timeout, or a lease nobody extended.
pub fn lapse_error(record: &JobRecord) -> String {
    let timed_out = match (record.timeout_ms, record.started_at, record.lease) {
        (Some(timeout), Some(started), Some(lease)) => lease.expires_at >= started.saturating_add(timeout),
        _ => false,
    };
    match (timed_out, record.timeout_ms, record.lease) {
        (true, Some(timeout), _) => format!("attempt {} timed out after {timeout} ms", record.attempt),
        (_, _, Some(lease)) => {
            format!("attempt {}: the lease lapsed (no heartbeat within {} ms)", record.attempt, lease.lease_ms)
        }
        _ => format!("attempt {}: the lease lapsed", record.attempt),
    }
}

/// What a worker holds to heartbeat, complete or fail a job: the attempt and its nonce,
/// written as 24 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseToken {
    pub attempt: u32,
    pub nonce: u64,
}

impl LeaseToken {
    pub fn encode(&self) -> String {
        format!("{:08x}{:016x}", self.attempt, self.nonce)
    }

    pub fn decode(text: &str) -> Option<LeaseToken> {
        if text.len() != 24 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let attempt = u32::from_str_radix(&text[..8], 16).ok()?;
        let nonce = u64::from_str_radix(&text[8..], 16).ok()?;
        Some(LeaseToken { attempt, nonce })
    }
}

/// The parts of a job written once at enqueue that no decision reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobDetails {
    pub callback_url: Option<String>,
    pub tags: Vec<String>,
    pub unique_key: Option<String>,
}

/// The variable-size values stored beside a job, each written whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DataKind {
    /// JSON text, written at enqueue.
    Payload,
    /// JSON text, written at completion.
    Result,
    /// JSON text, the latest a heartbeat reported.
    Progress,
    /// The last failure's text (a worker's error, or why a lease lapsed).
    Error,
}

impl DataKind {
    pub const ALL: [DataKind; 4] = [DataKind::Payload, DataKind::Result, DataKind::Progress, DataKind::Error];

    /// Its byte in a store's keys.
    pub const fn tag(self) -> u8 {
        self as u8
    }
}

/// What a store must write for a change of the board; applied in order, everything one call
/// (or one tick) produced in one durable write.
#[derive(Debug, Clone, PartialEq)]
pub enum JobEffect {
    /// Create or replace a job's record.
    Put(JobRecord),
    /// Delete a job with everything stored beside it (pruned).
    Delete(JobId),
    /// Store one of a job's values.
    Data { id: JobId, kind: DataKind, bytes: Vec<u8> },
    /// Store a job's details (at enqueue).
    Details { id: JobId, details: JobDetails },
    /// The job finished and has a callback URL: enqueue its completion webhook, in the same
    /// write as the change that finished it.
    Callback(JobId),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_tokens_round_trip_and_refuse_junk() {
        let token = LeaseToken { attempt: 3, nonce: 0xdead_beef_0000_0001 };
        let text = token.encode();
        assert_eq!(text, "00000003deadbeef00000001");
        assert_eq!(LeaseToken::decode(&text), Some(token));
        assert_eq!(LeaseToken::decode("3"), None);
        assert_eq!(LeaseToken::decode("00000003deadbeef0000000g"), None);
        assert_eq!(LeaseToken::decode("+0000003deadbeef00000001"), None);
    }
}
