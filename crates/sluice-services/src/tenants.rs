//! Tenants' quotas: how many queues, topics and streams a tenant may have, how many bytes its queues may
//! hold, and how many calls a second its keys may make together. A tenant is a namespace
//! (`sluice_core::name`); its quotas are a record of kind [`TENANT_KIND`] under its name, read
//! again when older than [`QUOTA_REFRESH_MS`] (the bound on a change reaching every node). A
//! tenant without a record has no quotas; the default tenant never has any (it is the
//! operator's).
//!
//! How exact each is:
//! - `max_resources` is counted from the store at each creation of a queue or topic that does not
//!   exist yet. Two creations racing on two nodes can both pass at the last free place, so a
//!   tenant may end one resource per node over.
//! - `max_stored_bytes` is compared with the bytes of the tenant's queues and streams as read at most
//!   [`USAGE_REFRESH_MS`] ago, plus what the call sends: a tenant may overshoot by what it sends
//!   within that time. Sends, publishes and appends are refused; receives, acks and deletes never
//!   are, so a tenant over its quota can always drain back under it (a stream by its retention).
//! - `rate_limit` is a token bucket in the store, one for every node, like a key's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use sluice_clock::Clock;
use sluice_core::ValidationError;
use sluice_core::name::{Namespace, validate_tenant};
use sluice_core::rate::RateLimit;
use sluice_store::prelude::*;
use sluice_store::{RECORD_LIST_LIMIT_MAX, StoreError};

use crate::topics::Topics;

/// The record kind of tenants' quotas.
pub const TENANT_KIND: &str = "tenant";
/// How old a tenant's quotas may be before they are read again.
pub const QUOTA_REFRESH_MS: u64 = 1_000;
/// How old a tenant's stored bytes may be before they are counted again.
pub const USAGE_REFRESH_MS: u64 = 1_000;
/// Most tenants with quotas a server holds.
pub const TENANTS_MAX: usize = RECORD_LIST_LIMIT_MAX;
/// Most tenants one node remembers quotas and usage of; past it the memory is cleared.
const REMEMBERED_MAX: usize = 10_000;

/// A tenant's quotas; `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quotas {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_resources: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_stored_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
}

impl Quotas {
    pub fn validate(&self) -> Result<(), ValidationError> {
        if self.max_stored_bytes == Some(0) {
            return Err(ValidationError::new("max_stored_bytes", "max_stored_bytes is at least 1"));
        }
        if let Some(limit) = &self.rate_limit {
            limit.validate("rate_limit")?;
        }
        Ok(())
    }
}

/// What a tenant holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Queues, topics and streams.
    pub resources: u64,
    /// Bytes of every message in its queues.
    pub stored_bytes: u64,
}

/// A tenant as shown: its quotas and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantView {
    pub name: String,
    pub quotas: Quotas,
    pub usage: Usage,
    pub updated_ms: Option<u64>,
}

/// Which quota a call would break, with its limit and what the tenant holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the tenant {tenant} is at its {quota} quota ({used} of {limit}); {hint}")]
pub struct QuotaExceeded {
    pub tenant: String,
    /// `max_resources` or `max_stored_bytes`.
    pub quota: &'static str,
    pub limit: u64,
    pub used: u64,
    pub hint: &'static str,
}

#[derive(Debug, thiserror::Error)]
pub enum TenantError {
    #[error(transparent)]
    Quota(#[from] QuotaExceeded),
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("no tenant {0} has quotas")]
    NotFound(String),
    #[error("a server holds quotas of at most {TENANTS_MAX} tenants")]
    TooMany,
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredTenant {
    quotas: Quotas,
    updated_ms: u64,
}

#[derive(Default)]
struct Memory {
    quotas: HashMap<String, (Option<StoredTenant>, u64)>,
    stored_bytes: HashMap<String, (u64, u64)>,
}

pub struct Tenants {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    topics: Arc<Topics>,
    memory: Mutex<Memory>,
}

impl Tenants {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, topics: Arc<Topics>) -> Tenants {
        Tenants { store, clock, topics, memory: Mutex::new(Memory::default()) }
    }

    fn lock(&self) -> MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sets a tenant's quotas (replacing the ones it had).
    pub async fn set(&self, tenant: &str, quotas: Quotas) -> Result<TenantView, TenantError> {
        validate_quota_tenant(tenant)?;
        quotas.validate()?;
        let exists = self.store.get_record(TENANT_KIND, tenant).await?.is_some();
        if !exists && self.store.list_records(TENANT_KIND, "", None, TENANTS_MAX).await?.len() >= TENANTS_MAX {
            return Err(TenantError::TooMany);
        }
        let stored = StoredTenant { quotas, updated_ms: self.clock.now_ms() };
        let value = serde_json::to_vec(&stored).expect("quotas serialise");
        self.store.put_record(TENANT_KIND, tenant, value).await?;
        self.lock().quotas.insert(tenant.to_string(), (Some(stored), self.clock.now_ms()));
        self.get(tenant).await
    }

    /// A tenant's quotas and usage; a tenant without quotas is shown with none.
    pub async fn get(&self, tenant: &str) -> Result<TenantView, TenantError> {
        validate_tenant(tenant)?;
        let namespace = Namespace::of(tenant);
        let stored = self.read(tenant).await?;
        let usage = self.usage(&namespace).await?;
        Ok(TenantView {
            name: tenant.to_string(),
            quotas: stored.as_ref().map(|s| s.quotas).unwrap_or_default(),
            usage,
            updated_ms: stored.map(|s| s.updated_ms),
        })
    }

    /// Every tenant with quotas, by name.
    pub async fn list(&self) -> Result<Vec<TenantView>, TenantError> {
        let records = self.store.list_records(TENANT_KIND, "", None, TENANTS_MAX).await?;
        let mut views = Vec::with_capacity(records.len());
        for record in records {
            views.push(self.get(&record.key).await?);
        }
        Ok(views)
    }

    /// Removes a tenant's quotas (its resources stay).
    pub async fn remove(&self, tenant: &str) -> Result<(), TenantError> {
        if !self.store.delete_record(TENANT_KIND, tenant).await? {
            return Err(TenantError::NotFound(tenant.to_string()));
        }
        self.lock().quotas.remove(tenant);
        Ok(())
    }

    /// Refuses a new queue, topic or stream past the tenant's `max_resources`. Call it only for a
    /// resource that does not exist yet (making an existing one again is never refused).
    pub async fn check_create(&self, namespace: &Namespace) -> Result<(), TenantError> {
        let Some(quotas) = self.quotas(namespace).await? else { return Ok(()) };
        let Some(limit) = quotas.max_resources else { return Ok(()) };
        let used = self.usage(namespace).await?.resources;
        if used >= limit {
            let hint = "delete a queue, topic or stream, or raise the quota (`sluice tenant set`)";
            return Err(exceeded(namespace, "max_resources", limit, used, hint));
        }
        Ok(())
    }

    /// Refuses sending `bytes` more when the tenant's queues and streams hold
    /// `max_stored_bytes` already.
    pub async fn check_write(&self, namespace: &Namespace, bytes: u64) -> Result<(), TenantError> {
        let Some(quotas) = self.quotas(namespace).await? else { return Ok(()) };
        let Some(limit) = quotas.max_stored_bytes else { return Ok(()) };
        let now = self.clock.now_ms();
        let remembered = self.lock().stored_bytes.get(namespace.tenant()).copied();
        let used = match remembered {
            Some((used, at)) if now.saturating_sub(at) < USAGE_REFRESH_MS => used,
            _ => {
                let used = self.holdings(namespace).await?.stored_bytes();
                let mut memory = self.lock();
                if memory.stored_bytes.len() >= REMEMBERED_MAX {
                    memory.stored_bytes.clear();
                }
                memory.stored_bytes.insert(namespace.tenant().to_string(), (used, now));
                used
            }
        };
        if used.saturating_add(bytes) > limit {
            let hint = "receive and delete messages, or raise the quota (`sluice tenant set`)";
            return Err(exceeded(namespace, "max_stored_bytes", limit, used, hint));
        }
        Ok(())
    }

    /// Takes a token from the tenant's rate limit, if it has one: `Some(retry_after_ms)` when
    /// none is left.
    pub async fn admit(&self, namespace: &Namespace) -> Result<Option<u64>, TenantError> {
        let Some(limit) = self.quotas(namespace).await?.and_then(|q| q.rate_limit) else { return Ok(None) };
        let resource = format!("tenant:{}", namespace.tenant());
        let admitted = crate::rate_limits::admit(self.store.as_ref(), &resource, limit, 1).await?;
        Ok((admitted.granted == 0).then_some(admitted.retry_after_ms))
    }

    /// The tenant's quotas, as read at most [`QUOTA_REFRESH_MS`] ago.
    async fn quotas(&self, namespace: &Namespace) -> Result<Option<Quotas>, StoreError> {
        if namespace.is_default() {
            return Ok(None);
        }
        let tenant = namespace.tenant();
        let now = self.clock.now_ms();
        if let Some((stored, at)) = self.lock().quotas.get(tenant)
            && now.saturating_sub(*at) < QUOTA_REFRESH_MS
        {
            return Ok(stored.as_ref().map(|s| s.quotas));
        }
        let stored = self.read(tenant).await?;
        let mut memory = self.lock();
        if memory.quotas.len() >= REMEMBERED_MAX {
            memory.quotas.clear();
        }
        memory.quotas.insert(tenant.to_string(), (stored.clone(), now));
        Ok(stored.map(|s| s.quotas))
    }

    async fn read(&self, tenant: &str) -> Result<Option<StoredTenant>, StoreError> {
        // A record that no longer decodes sets no quotas.
        Ok(self.store.get_record(TENANT_KIND, tenant).await?.and_then(|raw| serde_json::from_slice(&raw).ok()))
    }

    /// What the tenant holds now: one walk over its queues, topics and streams.
    async fn usage(&self, namespace: &Namespace) -> Result<Usage, StoreError> {
        if namespace.is_default() {
            return Ok(Usage::default());
        }
        let holdings = self.holdings(namespace).await?;
        let prefix = namespace.prefix();
        let (topics, prefix) = (self.topics.as_ref(), prefix.as_str());
        let topics = all_pages(
            |after, n| async move { topics.list_topics(prefix, after.as_deref(), n).await.map_err(topic_store_error) },
            |t: &crate::topics::TopicRecord| t.name.clone(),
        )
        .await?;
        Ok(Usage {
            resources: (holdings.queues.len() + topics.len() + holdings.streams.len()) as u64,
            stored_bytes: holdings.stored_bytes(),
        })
    }

    /// The tenant's queues, streams (a store that keeps no streams has none) and job queues.
    async fn holdings(&self, namespace: &Namespace) -> Result<Holdings, StoreError> {
        let prefix = namespace.prefix();
        let prefix = prefix.as_str();
        let store = self.store.as_ref();
        let queues = all_pages(
            |after, n| async move { store.list_queues(prefix, after.as_deref(), n).await },
            |q: &sluice_core::broker::QueueView| q.name.clone(),
        )
        .await?;
        let streams = all_pages(
            |after, n| async move {
                match store.list_streams(prefix, after.as_deref(), n).await {
                    Ok(streams) => Ok(streams),
                    Err(sluice_store::LogError::Unsupported) => Ok(Vec::new()),
                    Err(sluice_store::LogError::Store(e)) => Err(e),
                    Err(e) => Err(StoreError::Unavailable(e.to_string())),
                }
            },
            |s: &sluice_store::StreamView| s.name.clone(),
        )
        .await?;
        let jobs = store.job_stats().await?.into_iter().filter(|q| namespace.local(&q.queue).is_some()).collect();
        Ok(Holdings { queues, streams, jobs })
    }
}

/// Every item of a list the store pages by name: `fetch(after, n)` gives up to `n` after a name.
async fn all_pages<T, F, Fut>(mut fetch: F, name: impl Fn(&T) -> String) -> Result<Vec<T>, StoreError>
where
    F: FnMut(Option<String>, usize) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<T>, StoreError>>,
{
    let page = RECORD_LIST_LIMIT_MAX;
    let mut all: Vec<T> = Vec::new();
    loop {
        let batch = fetch(all.last().map(&name), page).await?;
        let done = batch.len() < page;
        all.extend(batch);
        if done {
            return Ok(all);
        }
    }
}

/// What a tenant holds.
struct Holdings {
    queues: Vec<sluice_core::broker::QueueView>,
    streams: Vec<sluice_store::StreamView>,
    jobs: Vec<sluice_core::jobs::QueueJobStats>,
}

impl Holdings {
    /// Bytes of every message in its queues, every record its streams keep, and its jobs'
    /// payloads and finished results.
    fn stored_bytes(&self) -> u64 {
        let messages: u64 = self.queues.iter().map(|q| q.stats.depth_bytes).sum();
        let records: u64 = self.streams.iter().flat_map(|s| &s.partitions).map(|p| p.bytes).sum();
        let jobs: u64 = self.jobs.iter().map(|q| q.payload_bytes + q.result_bytes).sum();
        messages + records + jobs
    }
}

/// A quota refusal, counted in `sluice_rejected_total{resource="tenant:T", reason="quota_exceeded"}`.
fn exceeded(namespace: &Namespace, quota: &'static str, limit: u64, used: u64, hint: &'static str) -> TenantError {
    crate::rate_limits::count_refused(&format!("tenant:{}", namespace.tenant()), "quota_exceeded", 1);
    QuotaExceeded { tenant: namespace.tenant().to_string(), quota, limit, used, hint }.into()
}

/// Quotas are for named tenants: the default tenant is the operator's.
fn validate_quota_tenant(tenant: &str) -> Result<(), ValidationError> {
    validate_tenant(tenant)?;
    if Namespace::of(tenant).is_default() {
        return Err(ValidationError::new("tenant", "the default tenant has no quotas; set them on a named tenant"));
    }
    Ok(())
}

fn topic_store_error(e: crate::topics::TopicError) -> StoreError {
    match e {
        crate::topics::TopicError::Store(e) => e,
        other => StoreError::Unavailable(other.to_string()),
    }
}
