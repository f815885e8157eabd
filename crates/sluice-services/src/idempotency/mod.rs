//! Idempotency keys: the entries behind `Idempotency-Key` (DESIGN.md §4b), kept as store
//! records of kind `idempotency` (`model.rs` has their layout and every limit), claimed by an
//! atomic insert, finished by compare-and-swap, expired on the services' clock and swept by one
//! node at a time (`sweep.rs`).
//!
//! A request goes through [`Idempotency::claim`]: the first one of a scope gets a [`Ticket`]
//! and runs; the others get its answer, a mismatch, or "in use". The ticket's holder then
//! either stores the answer after the effect ([`Idempotency::complete`]: routes whose effect is
//! harmless to repeat), or writes it in the same commit as the effect
//! ([`Ticket::commit_write`], `sluice_store::Write::RecordOutcomes`: routes that carry data, so
//! that a crash between the effect and the answer cannot make a retry execute twice), or gives
//! the claim back ([`Idempotency::release`]) when nothing was done, so that a retry executes.
//! Routes that commit their answer with their effect may skip the claim instead
//! ([`Idempotency::optimistic`]): their commit inserts the entry, so a new key costs them no
//! durable turn of their own, and a commit that finds the key taken is refused whole.
//!
//! The bounds on entries and their bytes are checked against totals that every node counts
//! again at each sweep and moves by its own claims in between; several nodes can overshoot a
//! bound by what they claim within one sweep interval, never by more.

pub mod model;
mod sweep;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sha2::{Digest, Sha256};
use sluice_clock::Clock;
use sluice_store::{Store, StoreError, Write};
use tokio::sync::Notify;

pub use model::{
    CLAIM_ABANDONED_MS_DEFAULT, ENTRIES_BYTES_MAX_DEFAULT, ENTRIES_COUNT_MAX_DEFAULT, ENTRY_KIND, Entry, EntryState,
    Fill, FillField, KEY_LEN_MAX, KeyError, Principal, Scope, StoredAnswer, TTL_MS_DEFAULT, TTL_MS_MAX, TTL_MS_MIN,
    Template, WAIT_S_MAX, fingerprint, validate_key,
};
pub use sweep::SweepReport;

/// Metric names. The two gauges are rendered from [`Idempotency::totals`] at every scrape.
pub const REQUESTS_METRIC: &str = "sluice_idempotency_requests_total";
pub const ENTRIES_METRIC: &str = "sluice_idempotency_entries";
pub const BYTES_METRIC: &str = "sluice_idempotency_bytes";

/// How often a request waiting (`Prefer: wait=N`) for another node's request looks again. A
/// request of this node wakes it at once; one on another node is seen at this poll, since the
/// store has no notification for records.
const WAIT_POLL_MS: u64 = 100;

/// The feature's settings (`sluice serve --idempotency-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyConfig {
    /// How long an answer is kept after the first request started.
    pub ttl_ms: u64,
    /// Most entries kept at once; past it, new keys are refused.
    pub entries_count_max: u64,
    /// Most bytes of entries kept at once; past it, new keys are refused.
    pub entries_bytes_max: u64,
    /// How long another process's in-progress entry is taken for alive.
    pub claim_abandoned_ms: u64,
    /// True when no other process shares the store (the embedded backend): an in-progress entry
    /// of another process was left by an earlier run that died, and is taken over at once.
    pub single_process: bool,
}

impl Default for IdempotencyConfig {
    fn default() -> Self {
        IdempotencyConfig {
            ttl_ms: TTL_MS_DEFAULT,
            entries_count_max: ENTRIES_COUNT_MAX_DEFAULT,
            entries_bytes_max: ENTRIES_BYTES_MAX_DEFAULT,
            claim_abandoned_ms: CLAIM_ABANDONED_MS_DEFAULT,
            single_process: false,
        }
    }
}

/// The bound a refused claim met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Entries { max: u64 },
    Bytes { max: u64 },
}

/// What a claim found.
#[derive(Debug)]
pub enum Claim {
    /// This request is the first (or the first one's claim had expired or was abandoned): run it.
    Execute(Ticket),
    /// The first request's answer.
    Replay(StoredAnswer),
    /// The key was used with another body.
    Mismatch,
    /// The first request is still running.
    InUse,
    /// The entries are at a bound; nothing was claimed.
    Full(Bound),
}

/// The start of the unique key of a job enqueued under an `Idempotency-Key` without one of its
/// own ([`Ticket::job_unique_key`]).
pub const JOB_UNIQUE_KEY_PREFIX: &str = "idempotency:";

/// The right to run a claimed request and to store its answer.
///
/// A ticket from [`Idempotency::claim`] holds a claim already written. One from
/// [`Idempotency::optimistic`] holds none: its request runs first and claims the key in the
/// commit of its effect, so that a new key costs no durable turn of its own. Such a commit is
/// refused with `Conflict::RecordExists` when the key was taken meanwhile (or is kept still),
/// and the request goes the claiming way instead, where it finds the answer to replay.
#[derive(Debug, Clone)]
pub struct Ticket {
    record_key: String,
    /// The record value the claim wrote; finishing compares against it. `None` before an
    /// optimistic ticket's request wrote anything.
    claimed: Option<Vec<u8>>,
    entry: Entry,
}

impl Ticket {
    pub fn scope(&self) -> Scope {
        self.entry.scope()
    }

    /// True for a ticket of [`Idempotency::optimistic`], which claimed nothing yet.
    pub fn is_optimistic(&self) -> bool {
        self.claimed.is_none()
    }

    /// A name for the `n`th effect of this request that every attempt of it under this claim
    /// gives alike (an attempt after a crash takes the abandoned claim over, and keeps its
    /// time), and no other request gives: the ids of events appended without one, the unique
    /// key of a job enqueued without one. The store's own deduplication by that name then
    /// makes a second attempt, run after a crash between the effect and its stored answer,
    /// answer as the first instead of repeating the effect. A key used again after its TTL
    /// is a new request, with new names.
    pub fn effect_id(&self, n: usize) -> uuid::Uuid {
        let mut h = Sha256::new();
        h.update(self.record_key.as_bytes());
        h.update(self.entry.created_at_ms.to_be_bytes());
        h.update((n as u64).to_be_bytes());
        let digest = h.finalize();
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        uuid::Builder::from_custom_bytes(bytes).into_uuid()
    }

    /// The unique key a job enqueued under this request without one of its own is given:
    /// [`JOB_UNIQUE_KEY_PREFIX`] and the request's first [`Ticket::effect_id`].
    pub fn job_unique_key(&self) -> String {
        format!("{JOB_UNIQUE_KEY_PREFIX}{}", self.effect_id(0))
    }

    /// How long the key is kept from its claim on: what a name from [`Ticket::effect_id`]
    /// must be remembered for.
    pub fn kept_for_ms(&self) -> u64 {
        self.entry.expires_at_ms.saturating_sub(self.entry.created_at_ms)
    }

    /// The writes that store `template` as this request's answer, for the commit that makes
    /// its effect (after the effect's own writes): refused with `Conflict::RecordChanged` if
    /// the claim is no longer this ticket's, or, for an optimistic ticket, with
    /// `Conflict::RecordExists` if the key has an entry already.
    pub fn commit_write(&self, template: Template) -> Vec<Write> {
        let committed = Entry { state: EntryState::Committed { template }, ..self.entry.clone() }.json();
        let record = |expected: Vec<u8>| Write::RecordOutcomes {
            kind: ENTRY_KIND.to_string(),
            key: self.record_key.clone(),
            expected: Some(expected),
            value: committed.clone(),
        };
        match &self.claimed {
            Some(claimed) => vec![record(claimed.clone())],
            // The claim and the answer in the same commit: the insert decides who is first,
            // the next write fills in the effect's outcomes.
            None => {
                let claim = self.entry.encode();
                vec![
                    Write::InsertRecord {
                        kind: ENTRY_KIND.to_string(),
                        key: self.record_key.clone(),
                        value: claim.clone(),
                    },
                    record(claim),
                ]
            }
        }
    }
}

/// Entries and bytes as last counted, moved by this node's claims since.
#[derive(Debug, Default)]
struct Totals {
    entries: AtomicU64,
    bytes: AtomicU64,
}

impl Totals {
    fn add(&self, entries: i64, bytes: i64) {
        let shift = |a: &AtomicU64, by: i64| {
            let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| Some(v.saturating_add_signed(by)));
        };
        shift(&self.entries, entries);
        shift(&self.bytes, bytes);
    }

    fn set(&self, entries: u64, bytes: u64) {
        self.entries.store(entries, Ordering::Relaxed);
        self.bytes.store(bytes, Ordering::Relaxed);
    }
}

/// The idempotency service. One per server; share it in an `Arc`.
pub struct Idempotency {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: IdempotencyConfig,
    /// This process's id, the owner of its claims.
    owner: String,
    totals: Totals,
    /// Requests of this node waiting for a scope's answer, by record key.
    waiters: Mutex<HashMap<String, Arc<Notify>>>,
}

fn count(outcome: &'static str) {
    metrics::counter!(REQUESTS_METRIC, "outcome" => outcome).increment(1);
}

impl Idempotency {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, config: IdempotencyConfig) -> Idempotency {
        Idempotency {
            store,
            clock,
            config,
            owner: uuid::Uuid::now_v7().to_string(),
            totals: Totals::default(),
            waiters: Mutex::new(HashMap::new()),
        }
    }

    pub fn config(&self) -> &IdempotencyConfig {
        &self.config
    }

    /// Entries and bytes as this node counts them now.
    pub fn totals(&self) -> (u64, u64) {
        (self.totals.entries.load(Ordering::Relaxed), self.totals.bytes.load(Ordering::Relaxed))
    }

    /// Claims `scope` for a request whose body has `fingerprint`.
    pub async fn claim(&self, scope: &Scope, fingerprint: &str) -> Result<Claim, StoreError> {
        let claim = self.try_claim(scope, fingerprint).await;
        if let Ok(Claim::InUse) = claim {
            count("in_use");
        }
        claim
    }

    /// A ticket that claims nothing before its request runs: for routes that commit their
    /// answer with their effect (`Ticket::commit_write`), whose commit then claims the key.
    /// `None` when the entries are at a bound, where only [`Idempotency::claim`] can tell a
    /// kept key (replayed) from a new one (refused).
    pub fn optimistic(&self, scope: &Scope, fingerprint: &str) -> Option<Ticket> {
        if self.full().is_some() {
            return None;
        }
        let entry = self.in_progress(scope, fingerprint);
        Some(Ticket { record_key: scope.record_key(), claimed: None, entry })
    }

    /// The in-progress entry this node writes to claim `scope`.
    fn in_progress(&self, scope: &Scope, fingerprint: &str) -> Entry {
        let now = self.clock.now_ms();
        Entry {
            format: model::ENTRY_FORMAT,
            principal: scope.principal.clone(),
            method: scope.method.clone(),
            path: scope.path.clone(),
            key: scope.key.clone(),
            fingerprint: fingerprint.to_string(),
            created_at_ms: now,
            expires_at_ms: now.saturating_add(self.config.ttl_ms),
            state: EntryState::InProgress { owner: self.owner.clone(), started_at_ms: now },
        }
    }

    /// [`Idempotency::claim`] without counting `in_use`, which a waiting request meets at every
    /// look and counts once, at its end.
    async fn try_claim(&self, scope: &Scope, fingerprint: &str) -> Result<Claim, StoreError> {
        let record_key = scope.record_key();
        // The first round inserts without reading: most keys are new, and a store call less
        // is a durable turn less on the embedded store (a read is answered after the sync of
        // its turn, like a write). An insert that finds an entry leads to a read. A claim loses
        // a race only to a change made since its read, which the next read sees; three more
        // rounds cover a claim, its release and a new claim in between.
        for round in 0..4 {
            let now = self.clock.now_ms();
            let current = if round == 0 { None } else { self.store.get_record(ENTRY_KIND, &record_key).await? };
            let mut taken_over = None;
            let replacing = match &current {
                None => None,
                Some(value) => match Entry::decode(value) {
                    Ok((entry, outcomes)) if entry.expires_at_ms > now => {
                        if entry.fingerprint != fingerprint {
                            count("mismatch");
                            return Ok(Claim::Mismatch);
                        }
                        if let Some(answer) = entry.answer(&outcomes) {
                            count("replayed");
                            return Ok(Claim::Replay(answer));
                        }
                        if !self.abandoned(&entry, now) {
                            return Ok(Claim::InUse);
                        }
                        tracing::info!(path = %entry.path, "an abandoned idempotency claim is taken over");
                        taken_over = Some(entry.created_at_ms);
                        Some(value.clone())
                    }
                    // Expired, or unreadable (written by a later version, say): free to reuse.
                    _ => Some(value.clone()),
                },
            };
            let mut entry = self.in_progress(scope, fingerprint);
            if let Some(first) = taken_over {
                // The same request again, after its first attempt's process died: it keeps
                // that attempt's time, so that `Ticket::effect_id` names the same effects.
                entry.created_at_ms = first;
            }
            let claimed = entry.encode();
            let won = match &replacing {
                None => {
                    if let Some(bound) = self.full() {
                        if round == 0 {
                            // The key may be one kept already, whose answer is still due: read.
                            continue;
                        }
                        count("refused_full");
                        return Ok(Claim::Full(bound));
                    }
                    self.store.insert_record(ENTRY_KIND, &record_key, claimed.clone()).await?
                }
                Some(old) => self.store.replace_record(ENTRY_KIND, &record_key, old.clone(), claimed.clone()).await?,
            };
            if won {
                match &replacing {
                    None => self.totals.add(1, claimed.len() as i64),
                    Some(old) => self.totals.add(0, claimed.len() as i64 - old.len() as i64),
                }
                count("executed");
                return Ok(Claim::Execute(Ticket { record_key, claimed: Some(claimed), entry }));
            }
        }
        Ok(Claim::InUse)
    }

    /// [`Idempotency::claim`], waiting up to `wait` for a request in progress to finish
    /// (`Prefer: wait=N`): woken at once by a request of this node, and looking again every
    /// `WAIT_POLL_MS` for one of another node.
    pub async fn claim_waiting(&self, scope: &Scope, fingerprint: &str, wait: Duration) -> Result<Claim, StoreError> {
        let deadline = tokio::time::Instant::now() + wait;
        let record_key = scope.record_key();
        loop {
            let notify = self.waiter(&record_key);
            let done = {
                let woken = notify.notified();
                tokio::pin!(woken);
                // Registered before the look, so that a finish between the look and the wait
                // is not missed.
                woken.as_mut().enable();
                let claim = self.try_claim(scope, fingerprint).await;
                let now = tokio::time::Instant::now();
                if !matches!(claim, Ok(Claim::InUse)) || now >= deadline {
                    Some(claim)
                } else {
                    let poll = deadline.min(now + Duration::from_millis(WAIT_POLL_MS));
                    let _ = tokio::time::timeout_at(poll, woken).await;
                    None
                }
            };
            drop(notify);
            if let Some(claim) = done {
                self.forget_waiter(&record_key);
                if let Ok(Claim::InUse) = claim {
                    count("in_use");
                }
                return claim;
            }
        }
    }

    /// An optimistic ticket's request ran (its claim is not counted until then).
    fn ran(&self, ticket: &Ticket) {
        if ticket.is_optimistic() {
            count("executed");
        }
    }

    /// Stores `answer` for the ticket's request, after its effect. Answers `false` when the
    /// claim was no longer the ticket's (it expired and was claimed again); the answer is then
    /// the caller's alone.
    pub async fn complete(&self, ticket: Ticket, answer: &StoredAnswer) -> Result<bool, StoreError> {
        self.ran(&ticket);
        let done = Entry { state: Entry::done(answer), ..ticket.entry }.encode();
        let stored = match &ticket.claimed {
            Some(claimed) => {
                self.store.replace_record(ENTRY_KIND, &ticket.record_key, claimed.clone(), done.clone()).await
            }
            None => self.store.insert_record(ENTRY_KIND, &ticket.record_key, done.clone()).await,
        };
        if let Ok(true) = stored {
            let (entries, before) = ticket.claimed.as_ref().map_or((1, 0), |c| (0, c.len() as i64));
            self.totals.add(entries, done.len() as i64 - before);
        }
        self.wake(&ticket.record_key);
        stored
    }

    /// Tells waiters that the ticket's answer was committed with its effect
    /// ([`Ticket::commit_write`]), `bytes` in all.
    pub fn committed(&self, ticket: &Ticket, bytes: usize) {
        self.ran(ticket);
        let (entries, before) = ticket.claimed.as_ref().map_or((1, 0), |c| (0, c.len() as i64));
        self.totals.add(entries, bytes as i64 - before);
        self.wake(&ticket.record_key);
    }

    /// Gives the claim back (nothing was done), so that the next request with the key runs.
    pub async fn release(&self, ticket: Ticket) -> Result<(), StoreError> {
        self.ran(&ticket);
        count("released");
        let Some(claimed) = ticket.claimed else { return Ok(()) };
        let removed = self.delete_if(&ticket.record_key, claimed.clone()).await;
        if let Ok(true) = removed {
            self.totals.add(-1, -(claimed.len() as i64));
        }
        self.wake(&ticket.record_key);
        removed.map(|_| ())
    }

    /// The entry of `scope`, if one is kept (expired ones included until swept).
    pub async fn get(&self, scope: &Scope) -> Result<Option<(Entry, Option<StoredAnswer>)>, StoreError> {
        let Some(value) = self.store.get_record(ENTRY_KIND, &scope.record_key()).await? else { return Ok(None) };
        Ok(Entry::decode(&value).ok().map(|(entry, outcomes)| {
            let answer = entry.answer(&outcomes);
            (entry, answer)
        }))
    }

    /// Deletes the record only if it still holds `expected`: a compare-and-swap onto itself and
    /// the delete, in one commit.
    async fn delete_if(&self, record_key: &str, expected: Vec<u8>) -> Result<bool, StoreError> {
        let writes = vec![
            Write::ReplaceRecord {
                kind: ENTRY_KIND.to_string(),
                key: record_key.to_string(),
                expected: expected.clone(),
                value: expected,
            },
            Write::DeleteRecord { kind: ENTRY_KIND.to_string(), key: record_key.to_string() },
        ];
        Ok(self.store.commit_all(writes).await?.is_ok())
    }

    fn abandoned(&self, entry: &Entry, now: u64) -> bool {
        match &entry.state {
            EntryState::InProgress { owner, started_at_ms } => {
                *owner != self.owner
                    && (self.config.single_process
                        || started_at_ms.saturating_add(self.config.claim_abandoned_ms) <= now)
            }
            _ => false,
        }
    }

    fn full(&self) -> Option<Bound> {
        let (entries, bytes) = self.totals();
        if entries >= self.config.entries_count_max {
            return Some(Bound::Entries { max: self.config.entries_count_max });
        }
        if bytes >= self.config.entries_bytes_max {
            return Some(Bound::Bytes { max: self.config.entries_bytes_max });
        }
        None
    }

    fn waiter(&self, record_key: &str) -> Arc<Notify> {
        let mut waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        waiters.entry(record_key.to_string()).or_default().clone()
    }

    /// Drops the scope's waker once no waiter holds it.
    fn forget_waiter(&self, record_key: &str) {
        let mut waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        if waiters.get(record_key).is_some_and(|n| Arc::strong_count(n) == 1) {
            waiters.remove(record_key);
        }
    }

    fn wake(&self, record_key: &str) {
        let notify = self.waiters.lock().unwrap_or_else(PoisonError::into_inner).get(record_key).cloned();
        if let Some(notify) = notify {
            notify.notify_waiters();
        }
    }
}
