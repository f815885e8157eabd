//! One relay's loop on one node: take the lease, poll the source, publish, mark or delete,
//! record the state, wait; and let go of the lease when stopped.
//!
//! The order of a poll is what makes it at least once: rows are marked or deleted only after
//! their messages are durable, so a crash (or a lost lease) between the two publishes them
//! again on the next poll, with the same `outbox_id`. The lease and the state are one record,
//! written with a compare-and-swap, so a node that lost the lease learns it at its next write
//! and stops; until then it may publish a batch the new holder publishes too (duplicates,
//! never losses). Poll pauses, backoff and the lease follow the services' clock.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use sluice_store::StoreError;
use tokio::sync::watch;

use super::limits::*;
use super::model::{Lease, RELAY_STATE_KIND, RelayRecord, RelayState, decode_state, encode};
use super::source::{Row, Source, SourceError, SourceSpec};
use super::target::{self, DeadLetterError, Outcome, Targets};
use crate::Services;

/// How often the totals are written while rows flow (errors and blocked rows at once).
const STATE_WRITE_MS: u64 = 500;

/// How long to wait before the next step.
enum Next {
    /// A full batch was published: poll again at once.
    Now,
    /// Nothing more now: wait `poll_ms`.
    Poll,
    /// Something failed: wait the growing backoff.
    Backoff,
    /// Another node holds the lease until then.
    Standby(u64),
}

/// A row the target refused: since when, how often, why.
struct Refusal {
    first_ms: u64,
    count: u32,
}

pub struct Runner {
    services: Arc<Services>,
    record: RelayRecord,
    /// This runner's name on the lease: the node and a number, so that the runner that
    /// replaces another on the same node (after a change) waits for it to let go.
    owner: String,
    source: Source,
    targets: Targets,
    /// The state as this runner last read or wrote it, and its bytes (the swap's expectation).
    state: RelayState,
    state_bytes: Option<Vec<u8>>,
    holding: bool,
    last_write_ms: u64,
    /// Something changed since the last write: counts (written at most every
    /// `STATE_WRITE_MS`), or an error or the blocked rows (written at once, for alerts).
    dirty: bool,
    urgent: bool,
    refusals: HashMap<String, Refusal>,
    /// The oldest unpublished row seen and when it was first seen (for `lag_ms`).
    head: Option<(String, u64)>,
    /// (time, published total) samples for `rows_per_second`.
    samples: VecDeque<(u64, u64)>,
    backoff_ms: u64,
    stop: watch::Receiver<bool>,
}

impl Runner {
    pub fn new(services: Arc<Services>, record: RelayRecord, owner: String, stop: watch::Receiver<bool>) -> Runner {
        let spec = &record.spec;
        let source = Source::new(SourceSpec {
            url: spec.source.clone(),
            table: spec.table.clone(),
            columns: spec.columns.clone(),
            route_by: spec.route_by.clone(),
            after_publish: spec.after_publish,
        })
        .expect("a stored relay was validated when it was created");
        Runner {
            services,
            owner,
            source,
            targets: Targets::default(),
            state: RelayState::new(),
            state_bytes: None,
            holding: false,
            last_write_ms: 0,
            dirty: false,
            urgent: false,
            refusals: HashMap::new(),
            head: None,
            samples: VecDeque::new(),
            backoff_ms: record.spec.poll_ms,
            record,
            stop,
        }
    }

    fn name(&self) -> &str {
        &self.record.spec.name
    }

    fn now(&self) -> u64 {
        self.services.clock().now_ms()
    }

    pub async fn run(mut self) {
        tracing::info!(relay = %self.name(), owner = %self.owner, "relay started");
        while !*self.stop.borrow() {
            // A stop cuts a step short (a query can take `RELAY_QUERY_MS`): whatever it did
            // not finish is done again by whoever runs the relay next (at least once).
            let mut stop = self.stop.clone();
            let next = tokio::select! {
                next = self.step() => next,
                _ = stop.changed() => break,
            };
            let now = self.now();
            let wake_ms = match next {
                Next::Now => continue,
                Next::Poll => {
                    self.backoff_ms = self.record.spec.poll_ms;
                    now + self.record.spec.poll_ms
                }
                Next::Backoff => {
                    let wait = self.backoff_ms;
                    self.backoff_ms = (self.backoff_ms * 2).min(RELAY_BACKOFF_MS_MAX);
                    now + wait
                }
                Next::Standby(until) => until.min(now + RELAY_SCAN_MS).max(now + 1),
            };
            let sleep = self.services.clock().sleep_until(wake_ms);
            tokio::select! {
                _ = sleep => {}
                _ = self.stop.changed() => {}
            }
        }
        self.release().await;
        tracing::info!(relay = %self.name(), "relay stopped");
    }

    /// Holds the lease (taking or renewing it as due), then polls once.
    async fn step(&mut self) -> Next {
        let now = self.now();
        if !self.holding || now >= self.last_write_ms + RELAY_LEASE_RENEW_MS {
            match self.write_state(now).await {
                Ok(None) => {}
                Ok(Some(until)) => return Next::Standby(until),
                Err(e) => {
                    tracing::warn!(relay = %self.name(), "cannot write the relay's state: {e}");
                    return Next::Backoff;
                }
            }
        }
        let next = self.poll().await;
        let now = self.now();
        if self.dirty && (self.urgent || now >= self.last_write_ms + STATE_WRITE_MS) {
            match self.write_state(now).await {
                Ok(None) => {}
                Ok(Some(until)) => return Next::Standby(until),
                Err(e) => tracing::warn!(relay = %self.name(), "cannot write the relay's state: {e}"),
            }
        }
        next
    }

    fn error(&mut self, text: String) {
        tracing::warn!(relay = %self.name(), "{text}");
        self.state.errors += 1;
        self.state.last_error = Some(text.chars().take(RELAY_ERROR_LEN_MAX).collect());
        self.state.last_error_at_ms = Some(self.now());
        self.dirty = true;
        self.urgent = true;
    }

    async fn poll(&mut self) -> Next {
        let spec = self.record.spec.clone();
        let rows = match self.source.fetch(spec.batch_max, RELAY_BATCH_BYTES_MAX).await {
            Ok(rows) => rows,
            Err(SourceError::Waiting(why)) => {
                tracing::debug!(relay = %self.name(), "{why}");
                self.update_lag(None);
                return Next::Poll;
            }
            Err(e) => {
                self.error(e.to_string());
                self.update_lag(None);
                return Next::Backoff;
            }
        };
        if rows.is_empty() {
            self.head = None;
        }
        self.update_lag(rows.first().map(|r| r.id.clone()));
        if rows.is_empty() {
            self.refusals.clear();
            self.set_blocked(0);
            return Next::Poll;
        }
        // A slow poll may have eaten into the lease: renew it before publishing, so that no
        // batch goes out under a lease that another node may have taken meanwhile.
        let now = self.now();
        if now + RELAY_LEASE_RENEW_MS >= self.last_write_ms + RELAY_LEASE_MS {
            match self.write_state(now).await {
                Ok(None) => {}
                Ok(Some(until)) => return Next::Standby(until),
                Err(e) => {
                    tracing::warn!(relay = %self.name(), "cannot renew the relay's lease: {e}");
                    return Next::Backoff;
                }
            }
        }
        let outcomes = target::publish(&self.services, &spec, &mut self.targets, &rows).await;
        let now = self.now();
        let mut done: Vec<String> = Vec::new();
        let (mut published, mut dead_lettered, mut blocked) = (0u64, 0u64, 0u64);
        let mut unavailable = None;
        for (row, outcome) in rows.iter().zip(outcomes) {
            match outcome {
                Outcome::Published => {
                    done.push(row.id.clone());
                    published += 1;
                }
                Outcome::Blocked => blocked += 1,
                Outcome::Unavailable(cause) => {
                    unavailable.get_or_insert(cause);
                }
                Outcome::Refused(reason) => match self.refused(row, &reason, now).await {
                    Ok(true) => {
                        done.push(row.id.clone());
                        dead_lettered += 1;
                    }
                    Ok(false) => blocked += 1,
                    Err(cause) => {
                        blocked += 1;
                        unavailable.get_or_insert(cause);
                    }
                },
            }
        }
        let seen: std::collections::HashSet<&str> = rows.iter().map(|r| r.id.as_str()).collect();
        self.refusals.retain(|id, _| seen.contains(id.as_str()));
        if let Err(e) = self.source.finish(&done).await {
            // The messages are durable; the rows stay unpublished and are published again.
            self.error(format!("published {} rows but could not mark or delete them: {e}", done.len()));
            return Next::Backoff;
        }
        self.state.published += published;
        self.state.dead_lettered += dead_lettered;
        self.set_blocked(blocked);
        if published + dead_lettered > 0 {
            self.dirty = true;
            if self.head.as_ref().is_some_and(|(id, _)| done.contains(id)) {
                self.head = None;
            }
        }
        if let Some(cause) = unavailable {
            self.error(format!("the store could not take the relay's messages: {cause}"));
            return Next::Backoff;
        }
        if rows.len() as u32 == spec.batch_max && published + dead_lettered > 0 { Next::Now } else { Next::Poll }
    }

    fn set_blocked(&mut self, blocked: u64) {
        if self.state.blocked_rows != blocked {
            self.state.blocked_rows = blocked;
            self.dirty = true;
            self.urgent = true;
        }
    }

    /// A refused row: dead-letter it once refused long enough. `Ok(true)` when it was.
    async fn refused(&mut self, row: &Row, reason: &str, now: u64) -> Result<bool, String> {
        let refusal = self.refusals.entry(row.id.clone()).or_insert(Refusal { first_ms: now, count: 0 });
        refusal.count += 1;
        let (count, first_ms) = (refusal.count, refusal.first_ms);
        if count == 1 {
            self.error(format!("row {} cannot be published: {reason}", row.id));
        }
        if count < RELAY_REFUSALS_MAX || now < first_ms + RELAY_REFUSAL_GRACE_MS {
            return Ok(false);
        }
        let Some(dlq) = self.record.spec.dead_letter_queue.clone() else {
            if count == RELAY_REFUSALS_MAX {
                self.error(format!(
                    "row {} cannot be published ({reason}) and the relay has no dead_letter_queue: its aggregate waits",
                    row.id
                ));
            }
            return Ok(false);
        };
        match target::dead_letter(&self.services, &self.record.spec, &dlq, row, reason).await {
            Ok(()) => {
                tracing::warn!(relay = %self.name(), row = %row.id, dead_letter_queue = %dlq, "dead-lettered a row: {reason}");
                self.refusals.remove(&row.id);
                Ok(true)
            }
            Err(DeadLetterError::Unavailable(cause)) => Err(cause),
            Err(DeadLetterError::Refused(why)) => {
                self.error(format!("row {} cannot go to the dead-letter queue {dlq} either: {why}", row.id));
                Ok(false)
            }
        }
    }

    /// Lag: how long the oldest unpublished row seen has waited since it was first seen.
    fn update_lag(&mut self, head: Option<String>) {
        let now = self.now();
        // Without a head (the source could not be read), count on from the last head seen.
        if let Some(id) = head
            && self.head.as_ref().is_none_or(|(h, _)| *h != id)
        {
            self.head = Some((id, now));
        }
        let lag = self.head.as_ref().map_or(0, |(_, since)| now.saturating_sub(*since));
        if lag != self.state.lag_ms {
            self.state.lag_ms = lag;
            self.dirty = true;
        }
    }

    fn rate(&mut self, now: u64) -> f64 {
        self.samples.push_back((now, self.state.published));
        while self.samples.len() > 2 && self.samples.front().is_some_and(|(t, _)| *t + RELAY_RATE_WINDOW_MS < now) {
            self.samples.pop_front();
        }
        match (self.samples.front(), self.samples.back()) {
            (Some((t0, n0)), Some((t1, n1))) if t1 > t0 => (n1 - n0) as f64 * 1000.0 / (t1 - t0) as f64,
            _ => 0.0,
        }
    }

    /// Takes or renews the lease, writing the state with it. `Ok(Some(until))` when another
    /// runner holds the lease until then.
    async fn write_state(&mut self, now: u64) -> Result<Option<u64>, StoreError> {
        let store = self.services.store().clone();
        let name = self.name().to_string();
        if !self.holding {
            // Start from what is stored: the totals carry over from the last holder.
            let stored = store.get_record(RELAY_STATE_KIND, &name).await?;
            self.state = match stored.as_deref().map(decode_state) {
                Some(Ok(state)) => state,
                Some(Err(e)) => {
                    tracing::error!(relay = %name, "{e}; starting it afresh");
                    RelayState::new()
                }
                None => RelayState::new(),
            };
            self.state_bytes = stored;
            if let Some(holder) = self.state.holder(now)
                && holder != self.owner
                && !self.services.relays().stale(holder)
            {
                return Ok(Some(self.state.lease.as_ref().map_or(now, |l| l.expires_at_ms)));
            }
        }
        let mut next = self.state.clone();
        next.lease = Some(Lease { owner: self.owner.clone(), expires_at_ms: now + RELAY_LEASE_MS });
        next.rows_per_second = self.rate(now);
        next.updated_at_ms = now;
        let bytes = encode(&next);
        let written = match &self.state_bytes {
            Some(expected) => store.replace_record(RELAY_STATE_KIND, &name, expected.clone(), bytes.clone()).await?,
            None => store.insert_record(RELAY_STATE_KIND, &name, bytes.clone()).await?,
        };
        if !written {
            // Someone else wrote it (another node took the lease, or the relay was deleted):
            // read it again at the next step.
            if self.holding {
                tracing::warn!(relay = %name, "lost the relay's lease");
            }
            self.holding = false;
            return Ok(Some(now + self.record.spec.poll_ms));
        }
        if !self.holding {
            tracing::info!(relay = %name, owner = %self.owner, "took the relay's lease");
            self.head = None;
        }
        self.state = next;
        self.state_bytes = Some(bytes);
        self.holding = true;
        self.last_write_ms = now;
        self.dirty = false;
        self.urgent = false;
        Ok(None)
    }

    /// Lets go of the lease, so that another node takes over at once.
    async fn release(&mut self) {
        if !self.holding {
            return;
        }
        let mut next = self.state.clone();
        next.lease = None;
        next.updated_at_ms = self.now();
        let Some(expected) = self.state_bytes.clone() else { return };
        let name = self.name().to_string();
        match self.services.store().replace_record(RELAY_STATE_KIND, &name, expected, encode(&next)).await {
            Ok(_) => {}
            Err(e) => tracing::warn!(relay = %name, "cannot release the relay's lease (it expires by itself): {e}"),
        }
        self.holding = false;
    }
}
