//! Outbox relays: publish the rows an application writes into an outbox table of its own
//! database (PostgreSQL, MySQL/MariaDB, SQLite), in order per aggregate, at least once, and
//! then delete or mark them.
//!
//! - `model.rs`: the configuration record `relay/<name>` and the state record
//!   `relay_state/<name>` (lease, totals, lag), both store records so every node sees them.
//! - `source/`: the database drivers, each with the barrier that keeps a poll from reading past
//!   a row that may still commit (how each database allows it is in its module).
//! - `target.rs`: publishing rows to a topic or a queue, and the dead-letter queue.
//! - `runner.rs`: one relay's loop on the node holding its lease.
//! - `redact.rs`: source URLs without their passwords, for every view and log line;
//!   `url.rs`: which database a source URL names.
//!
//! Every node runs a supervisor (`supervise`) that reads the relay records every
//! `RELAY_SCAN_MS` (and at once after a change through this node) and keeps one runner per
//! relay that is not paused; the runners compete for each relay's lease, so one node relays a
//! source at a time and another takes over within `RELAY_LEASE_MS` when it dies.

pub mod limits;
mod model;
mod redact;
mod runner;
mod source;
mod target;
mod url;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use sluice_core::ValidationError;
use sluice_store::{RECORD_LIST_LIMIT_MAX, StoreError};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::Services;
use limits::{RELAY_SCAN_MS, RELAYS_MAX};
pub use model::{
    AfterPublish, Columns, Lease, RELAY_KIND, RELAY_STATE_KIND, ROUTE_PLACEHOLDER, RelayRecord, RelaySpec, RelayState,
    Target,
};
pub use redact::{redact, scrub as scrub_error};
pub use target::{AGGREGATE_ID, AGGREGATE_TYPE, OUTBOX_ID, OUTBOX_TYPE, RELAY_ERROR, RELAY_NAME};
pub use url::SourceUrl;

use model::{RECORD_FORMAT, decode_record, decode_state, encode};
use source::{Source, SourceError, SourceSpec};

/// Why a relay call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RelayError {
    #[error("no relay is named {0}")]
    NotFound(String),
    #[error("a relay named {0} exists with a different configuration")]
    Exists(String),
    #[error("the relay {relay} already publishes this table from this source")]
    SourceInUse { relay: String },
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("{0}")]
    SourceUnreachable(String),
    #[error("{0}")]
    SourceInvalid(String),
    #[error("at most {RELAYS_MAX} relays")]
    LimitExceeded,
    #[error("the relay kept changing under this call; retry it")]
    Contended,
    #[error("{0}")]
    Corrupt(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A relay with its state.
#[derive(Debug, Clone, PartialEq)]
pub struct RelayView {
    pub record: RelayRecord,
    pub state: RelayState,
}

impl RelayView {
    /// `paused`, `active` (a node holds the lease) or `starting` (no node holds it yet, or
    /// the last holder stopped and its lease has not run out).
    pub fn status(&self, now_ms: u64) -> &'static str {
        if self.record.paused {
            "paused"
        } else if self.state.holder(now_ms).is_some() {
            "active"
        } else {
            "starting"
        }
    }

    /// The node running the relay now (the lease holder's node name).
    pub fn active_node(&self, now_ms: u64) -> Option<String> {
        self.state.holder(now_ms).map(|owner| Owner::parse(owner).node.to_string())
    }
}

/// A lease holder's name, `INCARNATION#GENERATION@NODE`: the node's name, this process's
/// random incarnation, and the runner's number within it.
pub(crate) struct Owner<'a> {
    pub node: &'a str,
    pub incarnation: &'a str,
}

impl Owner<'_> {
    pub fn parse(owner: &str) -> Owner<'_> {
        let (runner, node) = owner.split_once('@').unwrap_or(("", owner));
        Owner { node, incarnation: runner.split('#').next().unwrap_or("") }
    }
}

/// The relays service: configuration through the store, and the runners of this node.
pub struct Relays {
    /// This node's name on leases. A node that restarts under the same name takes back its
    /// leases at once instead of waiting for them to run out: `serve` names an embedded node
    /// after its data directory (one process per directory); without a name, a random one.
    node: String,
    /// This process's random part of every lease it holds.
    incarnation: String,
    generation: AtomicU64,
    /// Wakes the supervisor after a change through this node.
    changed: Notify,
    stop: watch::Sender<bool>,
    supervisor: Mutex<Option<JoinHandle<()>>>,
}

impl Relays {
    pub fn new(node: Option<String>) -> Relays {
        let incarnation = uuid::Uuid::now_v7().simple().to_string()[20..].to_string();
        let node = node.unwrap_or_else(|| format!("node-{}-{incarnation}", std::process::id()));
        Relays {
            node,
            incarnation,
            generation: AtomicU64::new(0),
            changed: Notify::new(),
            stop: watch::Sender::new(false),
            supervisor: Mutex::new(None),
        }
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// Whether a lease held by `owner` may be taken now, before it runs out: it was this
    /// node's in an earlier process (which a restart proves dead).
    pub(crate) fn stale(&self, owner: &str) -> bool {
        let owner = Owner::parse(owner);
        owner.node == self.node && owner.incarnation != self.incarnation
    }

    /// Starts this node's supervisor (once).
    pub(crate) fn start(services: &Arc<Services>) {
        let mut slot = services.relays().supervisor.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(tokio::spawn(supervise(services.clone())));
        }
    }

    /// Stops every runner on this node (each lets go of its lease after its current poll).
    pub(crate) fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// Waits for the supervisor and its runners to stop.
    pub(crate) async fn join(&self) {
        let handle = self.supervisor.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(handle) = handle {
            let _ = handle.await;
        }
    }
}

impl Services {
    /// Creates a relay: `true` when new, `false` when one with this exact configuration
    /// exists. The source is connected to and its table and columns checked first.
    pub async fn create_relay(&self, spec: RelaySpec) -> Result<(RelayView, bool), RelayError> {
        spec.validate()?;
        let existing = self.relay_records().await?;
        if let Some(same) = existing.iter().find(|r| r.spec.name == spec.name) {
            return if same.spec == spec {
                Ok((self.relay(&spec.name).await?, false))
            } else {
                Err(RelayError::Exists(spec.name))
            };
        }
        if let Some(other) =
            existing.iter().find(|r| r.spec.table == spec.table && redact(&r.spec.source) == redact(&spec.source))
        {
            return Err(RelayError::SourceInUse { relay: other.spec.name.clone() });
        }
        if existing.len() >= RELAYS_MAX {
            return Err(RelayError::LimitExceeded);
        }
        let mut source = Source::new(SourceSpec {
            url: spec.source.clone(),
            table: spec.table.clone(),
            columns: spec.columns.clone(),
            route_by: spec.route_by.clone(),
            after_publish: spec.after_publish,
        })?;
        match source.probe().await {
            Ok(()) => {}
            Err(SourceError::Refused(why)) => return Err(RelayError::SourceInvalid(why)),
            Err(e) => return Err(RelayError::SourceUnreachable(e.to_string())),
        }
        let record = RelayRecord {
            format: RECORD_FORMAT,
            spec: spec.clone(),
            paused: false,
            created_at_ms: self.clock().now_ms(),
        };
        // A state left by an earlier relay of this name would carry its totals over.
        self.store().delete_record(RELAY_STATE_KIND, &spec.name).await?;
        if !self.store().insert_record(RELAY_KIND, &spec.name, encode(&record)).await? {
            // Created meanwhile through another node: the same rules as above.
            let view = self.relay(&spec.name).await?;
            return if view.record.spec == spec { Ok((view, false)) } else { Err(RelayError::Exists(spec.name)) };
        }
        self.relays().changed.notify_one();
        Ok((RelayView { record, state: RelayState::new() }, true))
    }

    pub async fn relay(&self, name: &str) -> Result<RelayView, RelayError> {
        let bytes =
            self.store().get_record(RELAY_KIND, name).await?.ok_or_else(|| RelayError::NotFound(name.into()))?;
        let record = decode_record(&bytes).map_err(RelayError::Corrupt)?;
        let state = self.relay_state(name).await?;
        Ok(RelayView { record, state })
    }

    async fn relay_state(&self, name: &str) -> Result<RelayState, RelayError> {
        Ok(match self.store().get_record(RELAY_STATE_KIND, name).await? {
            Some(bytes) => decode_state(&bytes).map_err(RelayError::Corrupt)?,
            None => RelayState::new(),
        })
    }

    /// Every relay's configuration, by name (at most `RELAYS_MAX`, so one page).
    async fn relay_records(&self) -> Result<Vec<RelayRecord>, RelayError> {
        let records = self.store().list_records(RELAY_KIND, "", None, RECORD_LIST_LIMIT_MAX).await?;
        records.iter().map(|r| decode_record(&r.value).map_err(RelayError::Corrupt)).collect()
    }

    /// Relays after `after` in name order, at most `limit`, with their states.
    pub async fn list_relays(&self, after: Option<&str>, limit: usize) -> Result<Vec<RelayView>, RelayError> {
        let mut views = Vec::new();
        for record in self.relay_records().await? {
            if after.is_some_and(|a| record.spec.name.as_str() <= a) {
                continue;
            }
            if views.len() == limit {
                break;
            }
            let state = self.relay_state(&record.spec.name).await?;
            views.push(RelayView { record, state });
        }
        Ok(views)
    }

    /// Pauses or resumes a relay. A paused relay's runner stops after its current poll and
    /// lets go of the lease.
    pub async fn set_relay_paused(&self, name: &str, paused: bool) -> Result<RelayView, RelayError> {
        for _ in 0..8 {
            let bytes =
                self.store().get_record(RELAY_KIND, name).await?.ok_or_else(|| RelayError::NotFound(name.into()))?;
            let mut record = decode_record(&bytes).map_err(RelayError::Corrupt)?;
            if record.paused != paused {
                record.paused = paused;
                if !self.store().replace_record(RELAY_KIND, name, bytes, encode(&record)).await? {
                    continue;
                }
                self.relays().changed.notify_one();
            }
            return Ok(RelayView { record, state: self.relay_state(name).await? });
        }
        Err(RelayError::Contended)
    }

    /// Deletes a relay and its state; `false` when there was none. Rows stay in the table.
    pub async fn delete_relay(&self, name: &str) -> Result<bool, RelayError> {
        let existed = self.store().delete_record(RELAY_KIND, name).await?;
        self.store().delete_record(RELAY_STATE_KIND, name).await?;
        self.relays().changed.notify_one();
        Ok(existed)
    }
}

/// A runner this node keeps.
struct Running {
    record: RelayRecord,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// Keeps one runner per relay that is not paused, until the services stop.
async fn supervise(services: Arc<Services>) {
    let relays = services.relays();
    let mut stopping = relays.stop.subscribe();
    let mut running: HashMap<String, Running> = HashMap::new();
    let mut retired: Vec<JoinHandle<()>> = Vec::new();
    while !*stopping.borrow() {
        match services.relay_records().await {
            Ok(records) => {
                let wanted: HashMap<String, RelayRecord> =
                    records.into_iter().filter(|r| !r.paused).map(|r| (r.spec.name.clone(), r)).collect();
                let gone: Vec<String> = running
                    .iter()
                    .filter(|(name, r)| !wanted.get(*name).is_some_and(|w| *w == r.record) || r.task.is_finished())
                    .map(|(name, _)| name.clone())
                    .collect();
                for name in gone {
                    let r = running.remove(&name).expect("listed above");
                    r.stop.send_replace(true);
                    retired.push(r.task);
                }
                for (name, record) in wanted {
                    if running.contains_key(&name) {
                        continue;
                    }
                    let generation = relays.generation.fetch_add(1, Ordering::Relaxed);
                    let owner = format!("{}#{generation}@{}", relays.incarnation, relays.node);
                    let (stop, receiver) = watch::channel(false);
                    let runner = runner::Runner::new(services.clone(), record.clone(), owner, receiver);
                    running.insert(name, Running { record, stop, task: tokio::spawn(runner.run()) });
                }
            }
            Err(e) => tracing::warn!("cannot read the relays: {e}"),
        }
        // Runners that were told to stop are awaited at shutdown; drop the finished ones.
        retired.retain(|t| !t.is_finished());
        // Real time, not the services' clock: the scan decides only how soon a change made
        // through another node is noticed (as cache refreshes do), and a manual clock in a
        // test must not hold a deadline for it.
        let sleep = tokio::time::sleep(std::time::Duration::from_millis(RELAY_SCAN_MS));
        tokio::select! {
            _ = sleep => {}
            _ = relays.changed.notified() => {}
            _ = stopping.changed() => {}
        }
    }
    for (_, r) in running.drain() {
        r.stop.send_replace(true);
        retired.push(r.task);
    }
    for task in retired {
        let _ = task.await;
    }
}
