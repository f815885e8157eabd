//! State that only the SQS API has: its 60-second purge and delete rules, and the answers of
//! FIFO receives made with a `ReceiveRequestAttemptId` (`attempts.rs`). In memory only (see
//! [`SqsState`]).

mod attempts;

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

pub use attempts::{Attempt, Attempts};

/// A queue may be purged once per this period, and a deleted queue's name may not be reused
/// for a new queue within it.
pub const PURGE_INTERVAL_MS: u64 = 60_000;
pub const DELETED_NAME_COOLDOWN_MS: u64 = 60_000;
/// `ReceiveRequestAttemptId` (FIFO): a retried receive with the same id within this window
/// returns the same messages and receipt handles. The answers are remembered in memory only
/// (a restart forgets them, and the retry then receives afresh), at most this many answers
/// and this many message bytes in all; past either bound the oldest are forgotten first.
pub const RECEIVE_ATTEMPT_WINDOW_MS: u64 = 5 * 60 * 1000;
pub const RECEIVE_ATTEMPTS_MAX: usize = 10_000;
pub const RECEIVE_ATTEMPT_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// State that exists only for SQS's sake and only in memory: when each queue was last purged
/// and when each name was last deleted, for the two 60-second rules, and the answers of FIFO
/// receives made with a `ReceiveRequestAttemptId` (`attempts.rs`). Losing it at a restart
/// only lifts the 60-second rules early and makes a retried receive receive afresh.
#[derive(Debug, Default)]
pub struct SqsState {
    recent: Mutex<Recent>,
    attempts: Mutex<attempts::Attempts>,
}

#[derive(Debug, Default)]
struct Recent {
    purged_at_ms: HashMap<String, u64>,
    deleted_at_ms: HashMap<String, u64>,
}

impl SqsState {
    /// The lock is held for map operations only, never across an await.
    fn recent(&self) -> MutexGuard<'_, Recent> {
        self.recent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a purge of `queue` at `now_ms` unless one happened within the last minute.
    /// Checked and recorded at once, so two concurrent purges cannot both pass.
    pub fn start_purge(&self, queue: &str, now_ms: u64) -> bool {
        let mut recent = self.recent();
        recent.purged_at_ms.retain(|_, at| now_ms.saturating_sub(*at) < PURGE_INTERVAL_MS);
        if recent.purged_at_ms.contains_key(queue) {
            return false;
        }
        recent.purged_at_ms.insert(queue.to_string(), now_ms);
        true
    }

    /// Forgets a purge that the store then refused.
    pub fn cancel_purge(&self, queue: &str) {
        self.recent().purged_at_ms.remove(queue);
    }

    pub fn record_delete(&self, queue: &str, now_ms: u64) {
        let mut recent = self.recent();
        recent.deleted_at_ms.retain(|_, at| now_ms.saturating_sub(*at) < DELETED_NAME_COOLDOWN_MS);
        recent.deleted_at_ms.insert(queue.to_string(), now_ms);
        recent.purged_at_ms.remove(queue);
    }

    /// The lock is held for map operations only, never across an await.
    pub fn attempts(&self) -> MutexGuard<'_, attempts::Attempts> {
        self.attempts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn deleted_recently(&self, queue: &str, now_ms: u64) -> bool {
        self.recent().deleted_at_ms.get(queue).is_some_and(|at| now_ms.saturating_sub(*at) < DELETED_NAME_COOLDOWN_MS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_and_delete_rules_are_per_name_and_expire() {
        let s = SqsState::default();
        assert!(s.start_purge("q", 1_000));
        assert!(!s.start_purge("q", 1_000 + PURGE_INTERVAL_MS - 1));
        assert!(s.start_purge("other", 1_000));
        assert!(s.start_purge("q", 1_000 + PURGE_INTERVAL_MS));
        s.cancel_purge("other");
        assert!(s.start_purge("other", 2_000));
        s.record_delete("q", 5_000);
        assert!(s.deleted_recently("q", 5_000 + DELETED_NAME_COOLDOWN_MS - 1));
        assert!(!s.deleted_recently("q", 5_000 + DELETED_NAME_COOLDOWN_MS));
        assert!(!s.deleted_recently("other", 5_000));
    }
}
