//! Sagas: an orchestrator for business operations across services, each step with a
//! compensation, over store records (so every backend and every node shares them).
//!
//! - `records.rs`: definitions, instances, the active entries and the correlation index.
//! - `runner.rs`: the orchestrator loop every node runs: it finds due instances, records each
//!   attempt as in flight by compare-and-swap before making the call (so of two nodes exactly
//!   one makes it), makes HTTP calls and sends queue steps' messages, and applies answers.
//! - `replies.rs`: the consumers of reply queues, through which participants may answer queue
//!   steps with messages rather than `POST /v1/replies`.
//!
//! The rules (what happens after a success, a failure, a timeout, a cancel) are core's
//! (`sluice_core::saga`); this module stores, calls and waits.

mod records;
mod replies;
mod runner;

use crate::trace::{TraceEntry, TraceKind, Traces};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use sluice_clock::Clock;
use sluice_core::ValidationError;
use sluice_core::name::Namespace;
use sluice_core::saga::limits::{SAGA_ACTIVE_MAX, SAGA_VERSIONS_MAX};
use sluice_core::saga::{
    Applied, CallKind, Outcome, SagaDefinition, SagaInstance, SagaStatus, StepCall, StepDef, validate_saga_name,
    validate_start, validate_steps,
};
use sluice_store::{Conflict, RECORD_LIST_LIMIT_MAX, Record, Store, StoreError, Write};
use tokio::sync::Notify;

pub use records::{
    FailedEntry, SAGA_ACTIVE_KIND, SAGA_CORRELATION_KIND, SAGA_FAILED_KIND, SAGA_HEAD_KIND, SAGA_INSTANCE_KIND,
    SAGA_KIND, SAGA_REPLY_QUEUE_KIND, decode as decode_record,
};
use records::{Head, correlation_key, decode, decode_definition, decode_instance, encode, replace_writes, version_key};
pub use replies::{QUEUE_REPLIES_METRIC, QueueReply, parse_reply, reply_outcome};
pub use runner::{
    ATTR_ATTEMPT, ATTR_CORRELATION_ID, ATTR_IDEMPOTENCY_KEY, ATTR_INSTANCE, ATTR_KIND, ATTR_REPLY_QUEUE, ATTR_STEP,
    SagaCallConfig,
};

/// Most instances one list call looks at, whatever it matches.
pub const SAGA_LIST_SCAN_MAX: usize = 5_000;
/// Times a read-modify-write of one instance is tried before the call gives up as contended.
const SWAP_TRIES_MAX: usize = 16;

/// The jitter draw of a retry decided at `now`: derived from the instance and the time, so that
/// a run on a manual clock replays exactly while instances that fail together spread apart.
fn jitter(id: &str, now: u64) -> u64 {
    crate::topics::worker::draw(id, (now ^ (now >> 32)) as u32)
}

/// Why a saga call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SagaError {
    #[error("no saga is named {0}")]
    NotFound(String),
    #[error("saga {name} has no version {version}")]
    VersionNotFound { name: String, version: u32 },
    #[error("no saga instance has id {0}")]
    InstanceNotFound(String),
    #[error("no running saga instance with correlation id {correlation_id} waits for step {step}")]
    ReplyUnmatched { correlation_id: String, step: String },
    #[error("the instance is {status}: {why}")]
    WrongState { status: &'static str, why: &'static str },
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("{0}")]
    LimitExceeded(String),
    #[error("the instance kept changing under this call; retry it")]
    Contended,
    #[error("{0}")]
    Corrupt(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One page of instances.
#[derive(Debug, Clone, PartialEq)]
pub struct InstancePage {
    pub instances: Vec<SagaInstance>,
    /// The last id looked at, when there may be more.
    pub next_after: Option<String>,
}

/// The sagas of one node, over the shared store.
pub struct Sagas {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    /// Each start, step attempt and queue step's message is listed in the causal trace.
    traces: Arc<Traces>,
    calls: SagaCallConfig,
    /// Where HTTP steps may go (`crate::egress`).
    egress: Arc<crate::egress::Egress>,
    /// Definitions never change once written, so every node may keep them.
    definitions: Mutex<HashMap<(String, u32), Arc<SagaDefinition>>>,
    /// Wakes the orchestrator at once after a start, a cancel or a reply through this node.
    wake: Notify,
    /// Unsettled instances at the orchestrator's last scan, against `SAGA_ACTIVE_MAX`.
    active_seen: AtomicUsize,
    /// Wakes the reply-queue consumers after a definition through this node named one.
    reply_queues_named: Notify,
}

impl Sagas {
    pub(crate) fn egress(&self) -> &Arc<crate::egress::Egress> {
        &self.egress
    }

    /// The orchestrator over `store`; its HTTP steps go only where `egress` lets them.
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        calls: SagaCallConfig,
        egress: Arc<crate::egress::Egress>,
        traces: Arc<Traces>,
    ) -> Arc<Sagas> {
        Arc::new(Sagas {
            store,
            clock,
            traces,
            calls,
            egress,
            definitions: Mutex::new(HashMap::new()),
            wake: Notify::new(),
            active_seen: AtomicUsize::new(0),
            reply_queues_named: Notify::new(),
        })
    }

    fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Writes a new version of `name` with these steps; the same steps as the latest version
    /// answer that version (`false`: nothing new was written).
    pub async fn define(&self, name: &str, steps: Vec<StepDef>) -> Result<(SagaDefinition, bool), SagaError> {
        validate_saga_name(name)?;
        validate_steps(&steps)?;
        for _ in 0..SWAP_TRIES_MAX {
            let latest = self.latest(name).await?;
            if let Some(latest) = &latest
                && latest.steps == steps
            {
                return Ok((latest.as_ref().clone(), false));
            }
            let version = latest.as_ref().map_or(1, |d| d.version + 1);
            if version > SAGA_VERSIONS_MAX {
                return Err(SagaError::LimitExceeded(format!(
                    "saga {name} has {SAGA_VERSIONS_MAX} versions, the most kept"
                )));
            }
            let definition =
                SagaDefinition { name: name.to_owned(), version, steps: steps.clone(), created_at_ms: self.now() };
            let insert = Write::InsertRecord {
                kind: SAGA_KIND.into(),
                key: version_key(name, version),
                value: encode(&definition),
            };
            // The head names the latest version, so that a start reads one record (and a
            // cached definition) rather than every version. Versions are inserted in order (each
            // one after reading its predecessor), so the head only moves forward.
            let head = Write::PutRecord {
                kind: SAGA_HEAD_KIND.into(),
                key: name.to_owned(),
                value: encode(&Head { version }),
            };
            // Every reply queue a definition names is consumed by every node from then on.
            let mut writes = vec![insert, head];
            let reply_queues: std::collections::BTreeSet<&str> = steps
                .iter()
                .flat_map(|s| [Some(&s.action), s.compensation.as_ref()])
                .flatten()
                .filter_map(StepCall::reply_queue)
                .collect();
            writes.extend(reply_queues.iter().map(|q| Write::PutRecord {
                kind: SAGA_REPLY_QUEUE_KIND.into(),
                key: (*q).to_owned(),
                value: Vec::new(),
            }));
            match self.store.commit_all(writes).await? {
                Ok(_) => {
                    if !reply_queues.is_empty() {
                        self.reply_queues_named.notify_one();
                    }
                    return Ok((definition, true));
                }
                // Another call wrote this version first: look again.
                Err(refused) if refused.conflict == Conflict::RecordExists => continue,
                Err(refused) => return Err(SagaError::Corrupt(refused.conflict.to_string())),
            }
        }
        Err(SagaError::Contended)
    }

    /// Every record of `kind` under `prefix`, in key order, page after page.
    async fn records(&self, kind: &str, prefix: &str) -> Result<Vec<Record>, SagaError> {
        let mut out = Vec::new();
        loop {
            let after = out.last().map(|r: &Record| r.key.clone());
            let page = self.store.list_records(kind, prefix, after.as_deref(), RECORD_LIST_LIMIT_MAX).await?;
            let full = page.len() == RECORD_LIST_LIMIT_MAX;
            out.extend(page);
            if !full {
                return Ok(out);
            }
        }
    }

    /// Every version of `name`, oldest first.
    pub async fn versions(&self, name: &str) -> Result<Vec<SagaDefinition>, SagaError> {
        let records = self.records(SAGA_KIND, &format!("{name}/")).await?;
        records.iter().map(|r| decode_definition(&r.value).map_err(SagaError::Corrupt)).collect()
    }

    /// The latest version of every saga, by name.
    pub async fn list(&self) -> Result<Vec<SagaDefinition>, SagaError> {
        let mut latest: Vec<SagaDefinition> = Vec::new();
        for r in self.records(SAGA_KIND, "").await? {
            let d = decode_definition(&r.value).map_err(SagaError::Corrupt)?;
            match latest.last_mut() {
                Some(last) if last.name == d.name => *last = d,
                _ => latest.push(d),
            }
        }
        Ok(latest)
    }

    async fn latest(&self, name: &str) -> Result<Option<Arc<SagaDefinition>>, SagaError> {
        let Some(bytes) = self.store.get_record(SAGA_HEAD_KIND, name).await? else { return Ok(None) };
        let head: Head = decode(&bytes).map_err(SagaError::Corrupt)?;
        self.version(name, head.version).await.map(Some)
    }

    fn remember(&self, d: SagaDefinition) -> Arc<SagaDefinition> {
        let d = Arc::new(d);
        self.definitions.lock().unwrap_or_else(PoisonError::into_inner).insert((d.name.clone(), d.version), d.clone());
        d
    }

    /// Version `version` of `name` (the latest when `None`).
    pub async fn definition(&self, name: &str, version: Option<u32>) -> Result<Arc<SagaDefinition>, SagaError> {
        match version {
            Some(version) => self.version(name, version).await,
            None => self.latest(name).await?.ok_or_else(|| SagaError::NotFound(name.to_owned())),
        }
    }

    /// Version `version` of `name`: from this node's cache (definitions never change) or read
    /// once.
    async fn version(&self, name: &str, version: u32) -> Result<Arc<SagaDefinition>, SagaError> {
        if let Some(d) =
            self.definitions.lock().unwrap_or_else(PoisonError::into_inner).get(&(name.to_owned(), version))
        {
            return Ok(d.clone());
        }
        let bytes = self.store.get_record(SAGA_KIND, &version_key(name, version)).await?;
        let d = bytes.ok_or_else(|| SagaError::VersionNotFound { name: name.to_owned(), version })?;
        Ok(self.remember(decode_definition(&d).map_err(SagaError::Corrupt)?))
    }

    /// Starts an instance of the latest version of `name`; its first step is due at once.
    pub async fn start(
        &self,
        name: &str,
        input: Value,
        correlation_id: Option<String>,
    ) -> Result<SagaInstance, SagaError> {
        let instance = self.prepare_start(name, input, correlation_id).await?;
        self.commit_start(&instance, Vec::new()).await?.map_err(|c| SagaError::Corrupt(c.to_string()))?;
        Ok(instance)
    }

    /// A new instance of the latest version of `name`, checked and built but not written: its
    /// id is chosen here, so an answer naming it can be written in the same commit as the
    /// instance ([`Sagas::commit_start`]; an `Idempotency-Key`'s answer is).
    pub async fn prepare_start(
        &self,
        name: &str,
        input: Value,
        correlation_id: Option<String>,
    ) -> Result<SagaInstance, SagaError> {
        validate_start(&input, correlation_id.as_deref())?;
        let definition = self.definition(name, None).await?;
        if self.active_seen.load(Ordering::Relaxed) >= SAGA_ACTIVE_MAX {
            return Err(SagaError::LimitExceeded(format!(
                "{SAGA_ACTIVE_MAX} saga instances are running, the most at once; start this one when some have finished"
            )));
        }
        let id = uuid::Uuid::now_v7().to_string();
        let correlation_id = correlation_id.unwrap_or_else(|| id.clone());
        Ok(SagaInstance::new(id, &definition, input, correlation_id, self.now()))
    }

    /// Writes a prepared instance with `extra` writes in one commit; the refusal of an extra
    /// write (its condition) is answered as it is, with nothing written.
    pub async fn commit_start(
        &self,
        instance: &SagaInstance,
        extra: Vec<Write>,
    ) -> Result<Result<(), Conflict>, SagaError> {
        let id = instance.id.clone();
        let mut writes = vec![
            Write::InsertRecord { kind: SAGA_INSTANCE_KIND.into(), key: id.clone(), value: encode(instance) },
            records::active_write(instance),
            Write::PutRecord {
                kind: SAGA_CORRELATION_KIND.into(),
                key: correlation_key(&instance.correlation_id, &id),
                value: Vec::new(),
            },
        ];
        // The start's trace entry commits with the instance: a started saga is always traced.
        let target = format!("saga:{}", instance.saga);
        let detail = format!("{} v{}", instance.saga, instance.version);
        let mut traced =
            vec![TraceEntry::new(TraceKind::Saga, &id, &instance.correlation_id, target).detail(Some(&detail))];
        writes.extend(self.traces.writes(&mut traced));
        let own = writes.len();
        writes.extend(extra);
        match self.store.commit_all(writes).await? {
            Ok(_) => crate::trace::committed(&traced),
            Err(refused) if refused.write >= own => return Ok(Err(refused.conflict)),
            Err(refused) => return Err(SagaError::Corrupt(refused.conflict.to_string())),
        }
        self.wake.notify_one();
        Ok(Ok(()))
    }

    async fn read(&self, id: &str) -> Result<(Vec<u8>, SagaInstance), SagaError> {
        let bytes = self
            .store
            .get_record(SAGA_INSTANCE_KIND, id)
            .await?
            .ok_or_else(|| SagaError::InstanceNotFound(id.to_owned()))?;
        let instance = decode_instance(&bytes).map_err(SagaError::Corrupt)?;
        Ok((bytes, instance))
    }

    pub async fn get(&self, id: &str) -> Result<SagaInstance, SagaError> {
        Ok(self.read(id).await?.1)
    }

    /// Instances of `tenant`'s sagas in id order (which is start order) after `after`, of
    /// `saga` (a stored name) and in `status` when given; looks at most at
    /// [`SAGA_LIST_SCAN_MAX`] instances per call.
    pub async fn instances(
        &self,
        tenant: &Namespace,
        saga: Option<&str>,
        status: Option<SagaStatus>,
        after: Option<String>,
        limit: usize,
    ) -> Result<InstancePage, SagaError> {
        let mut out = Vec::new();
        let mut after = after;
        let mut scanned = 0;
        while scanned < SAGA_LIST_SCAN_MAX {
            let page = self.store.list_records(SAGA_INSTANCE_KIND, "", after.as_deref(), RECORD_LIST_LIMIT_MAX).await?;
            let full = page.len() == RECORD_LIST_LIMIT_MAX;
            for r in page {
                scanned += 1;
                after = Some(r.key.clone());
                let i = decode_instance(&r.value).map_err(SagaError::Corrupt)?;
                let mine = tenant.local(&i.saga).is_some();
                if mine && saga.is_none_or(|s| s == i.saga) && status.is_none_or(|s| s == i.status) {
                    out.push(i);
                    if out.len() == limit {
                        return Ok(InstancePage { instances: out, next_after: after });
                    }
                }
            }
            if !full {
                return Ok(InstancePage { instances: out, next_after: None });
            }
        }
        Ok(InstancePage { instances: out, next_after: after })
    }

    /// Reads `id`, lets `change` decide (it answers whether it changed anything), and swaps the
    /// result in; tried again when another writer got there first.
    async fn update<T>(
        &self,
        id: &str,
        change: impl FnMut(&mut SagaInstance, &SagaDefinition, u64) -> Result<T, SagaError>,
    ) -> Result<(SagaInstance, T), SagaError> {
        self.update_traced(id, change, |_, _| Vec::new()).await
    }

    /// [`Sagas::update`] whose commit also writes the trace entries `traced` gives for the
    /// changed instance and the change's answer (durable with the change, in one write).
    async fn update_traced<T>(
        &self,
        id: &str,
        mut change: impl FnMut(&mut SagaInstance, &SagaDefinition, u64) -> Result<T, SagaError>,
        traced: impl Fn(&SagaInstance, &T) -> Vec<crate::trace::TraceEntry>,
    ) -> Result<(SagaInstance, T), SagaError> {
        for _ in 0..SWAP_TRIES_MAX {
            let (bytes, mut instance) = self.read(id).await?;
            let definition = self.definition(&instance.saga, Some(instance.version)).await?;
            let was = instance.status;
            let answer = change(&mut instance, &definition, self.now())?;
            let (mut writes, written) = replace_writes(bytes.clone(), was, &instance);
            if written == bytes {
                return Ok((instance, answer));
            }
            let mut entries = traced(&instance, &answer);
            writes.extend(self.traces.writes(&mut entries));
            match self.store.commit_all(writes).await? {
                Ok(_) => {
                    crate::trace::committed(&entries);
                    self.wake.notify_one();
                    return Ok((instance, answer));
                }
                Err(refused) if refused.conflict == Conflict::RecordChanged => continue,
                Err(refused) => return Err(SagaError::Corrupt(refused.conflict.to_string())),
            }
        }
        Err(SagaError::Contended)
    }

    /// Turns the instance back: what completed is compensated in reverse order (after the
    /// answer or deadline of an action in flight).
    pub async fn cancel(&self, id: &str) -> Result<SagaInstance, SagaError> {
        let (instance, _) = self
            .update(id, |i, d, now| {
                if i.status.is_settled() {
                    return Err(SagaError::WrongState {
                        status: i.status.as_str(),
                        why: "only a running instance can be cancelled",
                    });
                }
                i.cancel(d, now);
                Ok(())
            })
            .await?;
        Ok(instance)
    }

    /// Starts a new round of the compensation that kept failing.
    pub async fn retry_compensation(&self, id: &str) -> Result<SagaInstance, SagaError> {
        let (instance, _) = self
            .update(id, |i, _, now| {
                if i.retry_compensation(now) {
                    Ok(())
                } else {
                    Err(SagaError::WrongState {
                        status: i.status.as_str(),
                        why: "only a failed instance's compensation can be retried",
                    })
                }
            })
            .await?;
        Ok(instance)
    }

    /// A participant's answer to a queue step of every instance with this correlation id that
    /// waits for `step`'s action (or, with `kind: compensation`, its compensation); the number of
    /// instances it changed. The kind defaults to the action, never to whatever the instance is
    /// doing now: a late answer to an action must not be taken for a compensation's. Only
    /// instances of `tenant`'s sagas are answered: correlation ids are the clients' own, so two
    /// tenants may use the same one, and neither may answer the other's steps.
    pub async fn reply(
        &self,
        tenant: &Namespace,
        correlation_id: &str,
        step: &str,
        kind: Option<CallKind>,
        attempt: Option<u32>,
        outcome: Outcome,
    ) -> Result<usize, SagaError> {
        let prefix = format!("{correlation_id}/");
        let ids: Vec<String> = self
            .store
            .list_records(SAGA_CORRELATION_KIND, &prefix, None, RECORD_LIST_LIMIT_MAX)
            .await?
            .into_iter()
            .filter_map(|r| r.key.strip_prefix(&prefix).map(str::to_owned))
            .collect();
        let mut applied = 0;
        for id in ids {
            let result = self
                .update(&id, |i, d, now| {
                    if tenant.local(&i.saga).is_none() {
                        return Ok(Applied::Stale);
                    }
                    let Some(index) = i.steps.iter().position(|s| s.name == step) else { return Ok(Applied::Stale) };
                    let state = &i.steps[index];
                    let kind = kind.unwrap_or(CallKind::Action);
                    let number = attempt.unwrap_or(match kind {
                        CallKind::Action => state.attempts,
                        CallKind::Compensation => state.compensation_attempts,
                    });
                    Ok(i.on_result(d, index, kind, number, outcome.clone(), now, jitter(&i.id, now)))
                })
                .await;
            match result {
                Ok((_, Applied::Yes)) => applied += 1,
                Ok((_, Applied::Stale)) | Err(SagaError::InstanceNotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        if applied == 0 {
            return Err(SagaError::ReplyUnmatched { correlation_id: correlation_id.to_owned(), step: step.to_owned() });
        }
        Ok(applied)
    }

    /// The orchestrator of this node (`runner.rs`) and its reply-queue consumers
    /// (`replies.rs`). Runs until aborted, which ends both.
    pub fn spawn(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let (runner, replies) = (runner::run(self.clone()), replies::run(self.clone()));
        tokio::spawn(async move {
            tokio::join!(runner, replies);
        })
    }
}
