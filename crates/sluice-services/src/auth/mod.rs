//! Authentication: API keys (store records, hashed), the scopes they grant, and whether the
//! server asks for a key at all.
//!
//! A key is a record of kind [`API_KEY_KIND`] under its id, holding its tenant, name, scopes and
//! the Argon2id hash of its token (`token.rs`). Checking a token costs one Argon2 verification
//! the first time this node sees it; after that its SHA-256 is remembered in memory, so a call
//! pays a map lookup. The key's record itself is read again once it is older than
//! [`KEY_REFRESH_MS`], so a key revoked on one node is refused by every node within that bound
//! (at once on the node that revoked it).
//!
//! Keys are asked for when the server was given a bootstrap admin token (`--admin-key-file`,
//! `SLUICE_ADMIN_KEY`) or the store holds any key, revoked ones included: making the first key
//! turns authentication on, and revoking every key does not turn it off. `--insecure-no-auth`
//! turns it off whatever the store holds.

pub mod scope;
pub mod token;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sluice_clock::Clock;
use sluice_core::ValidationError;
use sluice_core::rate::RateLimit;
use sluice_store::{RECORD_LIST_LIMIT_MAX, Store, StoreError};
use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;

use crate::idempotency::Principal;
pub use scope::{Action, Kind, Requirement, Scope};
pub use sluice_core::name::{DEFAULT_TENANT, Namespace, TENANT_LEN_MAX, validate_tenant};

/// The record kind of API keys.
pub const API_KEY_KIND: &str = "api_key";
/// Most keys a server holds, revoked ones included.
pub const KEYS_MAX: usize = RECORD_LIST_LIMIT_MAX;
/// How old a key's record may be before it is read again: the bound on a revocation (or a
/// change of scopes) reaching every node.
pub const KEY_REFRESH_MS: u64 = 1_000;
/// Longest key name, in bytes.
pub const KEY_NAME_LEN_MAX: usize = 128;
/// Most tokens one node remembers as verified; past it the memory is cleared and tokens are
/// verified again.
const VERIFIED_MAX: usize = 10_000;
/// Argon2 verifications running at once on this node (each takes about 19 MiB and some tens of
/// milliseconds), so that a flood of wrong tokens cannot take every core.
const VERIFY_PERMITS: usize = 2;

/// Whether keys are asked for, and the bootstrap admin token.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AuthConfig {
    /// A token that is an admin key of the default tenant without a record (never stored).
    pub admin_token: Option<String>,
    /// `--insecure-no-auth`: every call is let in, keys or not.
    pub disabled: bool,
}

impl std::fmt::Debug for AuthConfig {
    // Never print the admin token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("admin_token", &self.admin_token.as_ref().map(|_| "<redacted>"))
            .field("disabled", &self.disabled)
            .finish()
    }
}

/// A key as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredKey {
    id: String,
    tenant: String,
    name: String,
    scopes: Vec<String>,
    hash: String,
    /// The secret of the key's AWS access key, when it has one. SigV4 signs with the secret
    /// itself, so unlike the token it cannot be stored as a hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    aws_secret: Option<String>,
    /// The key's own token bucket, shared by every node: each call takes one token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rate_limit: Option<RateLimit>,
    created_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    revoked_ms: Option<u64>,
}

/// A key as listed: everything but its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyView {
    pub id: String,
    pub tenant: String,
    pub name: String,
    pub scopes: Vec<String>,
    /// The key's AWS access key id (`SLK...`), when it was made with one.
    pub aws_access_key_id: Option<String>,
    pub rate_limit: Option<RateLimit>,
    pub created_ms: u64,
    pub revoked_ms: Option<u64>,
}

/// A key just made: its view, its token and its AWS secret, each shown only this once.
#[derive(Debug, Clone)]
pub struct CreatedKey {
    pub view: KeyView,
    pub token: String,
    pub aws_secret: Option<String>,
}

/// What making a key asks for.
#[derive(Debug, Clone)]
pub struct NewKey {
    pub tenant: Option<String>,
    pub name: String,
    pub scopes: Vec<String>,
    /// Also make an AWS access key (id and secret) for SigV4 clients, with the same scopes.
    pub aws: bool,
    /// Calls per second the key may make, every node together (429 `rate_limited` past it).
    pub rate_limit: Option<RateLimit>,
}

/// Who a call comes from and what it may do.
#[derive(Debug, Clone)]
pub struct Access {
    pub principal: Principal,
    pub key_id: String,
    pub tenant: String,
    pub scopes: Vec<Scope>,
    pub rate_limit: Option<RateLimit>,
}

impl Access {
    pub fn allows(&self, need: &Requirement) -> bool {
        self.scopes.iter().any(|s| s.allows(need))
    }

    /// The namespace the key's calls name resources in.
    pub fn namespace(&self) -> Namespace {
        Namespace::of(&self.tenant)
    }
}

/// The kinds whose resources live in tenants' namespaces: every kind but `admin`, whose
/// resources (keys, tenants, alerts, stats, traces) are the whole server's and stay with the
/// default tenant's keys. A key of another tenant reaches only these.
pub const NAMESPACED_KINDS: &[Kind] = &[
    Kind::Queues,
    Kind::Topics,
    Kind::Streams,
    Kind::Jobs,
    Kind::Events,
    Kind::Schedules,
    Kind::Schemas,
    Kind::Sagas,
    Kind::Relays,
];

/// Why a token was refused (every one is 401 `unauthenticated`, with this as the message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("this is not a Sluice API key (they start with slk_)")]
    NotAKey,
    #[error("the API key is not valid on this server")]
    Unknown,
    #[error("the API key was revoked")]
    Revoked,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a key call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum KeyError {
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("no API key has the id {0}")]
    NotFound(String),
    #[error("the server holds {KEYS_MAX} keys, its most; delete revoked ones or reuse keys")]
    LimitReached,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A key's record with its scopes parsed once, as a node remembers it.
struct Known {
    key: StoredKey,
    access: Arc<Access>,
}

impl Known {
    fn new(key: StoredKey) -> Arc<Known> {
        let access = Arc::new(access_of(&key));
        Arc::new(Known { key, access })
    }
}

#[derive(Default)]
struct Cache {
    /// Each key's record (or its absence) and when it was read.
    keys: HashMap<String, (Option<Arc<Known>>, u64)>,
    /// Digests of tokens verified on this node, and their key ids.
    verified: HashMap<[u8; 32], String>,
    /// Whether the store held any key, and when that was read.
    any: Option<(bool, u64)>,
}

/// The API keys of one server.
pub struct Keys {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    admin_digest: Option<[u8; 32]>,
    disabled: bool,
    cache: Mutex<Cache>,
    permits: Semaphore,
}

impl Keys {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, config: AuthConfig) -> Keys {
        Keys {
            store,
            clock,
            admin_digest: config.admin_token.as_deref().map(token::digest),
            disabled: config.disabled,
            cache: Mutex::new(Cache::default()),
            permits: Semaphore::new(VERIFY_PERMITS),
        }
    }

    /// Whether calls must carry a key now.
    pub async fn enforced(&self) -> Result<bool, StoreError> {
        if self.disabled {
            return Ok(false);
        }
        if self.admin_digest.is_some() {
            return Ok(true);
        }
        let now = self.clock.now_ms();
        if let Some((any, at)) = self.lock().any
            && (any || now.saturating_sub(at) < KEY_REFRESH_MS)
        {
            // Once keys exist they never stop existing (revoked ones are kept), so `true` is
            // final; `false` is read again after the refresh bound.
            return Ok(any);
        }
        let any = keys_exist(self.store.as_ref()).await?;
        self.lock().any = Some((any, now));
        Ok(any)
    }

    /// Takes a token from the key's bucket when it has a rate limit: `Some(retry_after_ms)`
    /// when there is none left (counted as `sluice_rejected_total{resource="key:ID"}`).
    pub async fn admit(&self, access: &Access) -> Result<Option<u64>, StoreError> {
        let Some(limit) = access.rate_limit else { return Ok(None) };
        let admitted =
            crate::rate_limits::admit(self.store.as_ref(), &format!("key:{}", access.key_id), limit, 1).await?;
        Ok((admitted.granted == 0).then_some(admitted.retry_after_ms))
    }

    /// Checks a bearer token.
    pub async fn authenticate(&self, presented: &str) -> Result<Arc<Access>, Refusal> {
        let digest = token::digest(presented);
        if let Some(admin) = &self.admin_digest
            && bool::from(admin.ct_eq(&digest))
        {
            return Ok(Arc::new(Access {
                principal: Principal("key:admin".to_string()),
                key_id: "admin".to_string(),
                tenant: DEFAULT_TENANT.to_string(),
                scopes: vec![Scope::parse("*:*:*").expect("a valid scope")],
                rate_limit: None,
            }));
        }
        let id = token::key_id(presented).ok_or(Refusal::NotAKey)?;
        let known_key = self.key(id).await?.ok_or(Refusal::Unknown)?;
        let key = &known_key.key;
        if key.revoked_ms.is_some() {
            return Err(Refusal::Revoked);
        }
        let known = self.lock().verified.get(&digest).is_some_and(|known| known == id);
        if !known {
            let _permit = self.permits.acquire().await.map_err(|_| StoreError::ShuttingDown)?;
            let (token, hash) = (presented.to_string(), key.hash.clone());
            let ok = tokio::task::spawn_blocking(move || token::verify(&token, &hash))
                .await
                .map_err(|e| StoreError::Unavailable(format!("the key check did not finish: {e}")))?;
            if !ok {
                return Err(Refusal::Unknown);
            }
            let mut cache = self.lock();
            if cache.verified.len() >= VERIFIED_MAX {
                cache.verified.clear();
            }
            cache.verified.insert(digest, id.to_string());
        }
        Ok(Arc::clone(&known_key.access))
    }

    /// The secret and the access of the key whose AWS access key id this is, for checking a
    /// SigV4 signature. `Ok(None)`: no key has this access key id (or it has no AWS key).
    pub async fn aws_access(&self, access_key_id: &str) -> Result<Option<(String, Arc<Access>)>, Refusal> {
        let Some(id) = token::key_id_of_aws(access_key_id) else { return Ok(None) };
        let Some(known) = self.key(&id).await? else { return Ok(None) };
        let Some(secret) = known.key.aws_secret.clone() else { return Ok(None) };
        if known.key.revoked_ms.is_some() {
            return Err(Refusal::Revoked);
        }
        Ok(Some((secret, Arc::clone(&known.access))))
    }

    /// Makes a key; the answer holds its token (and AWS secret), which are never shown again.
    pub async fn create(&self, new: NewKey) -> Result<CreatedKey, KeyError> {
        let tenant = new.tenant.unwrap_or_else(|| DEFAULT_TENANT.to_string());
        validate_tenant(&tenant)?;
        if new.name.is_empty() || new.name.len() > KEY_NAME_LEN_MAX || new.name.chars().any(char::is_control) {
            return Err(ValidationError::new(
                "name",
                format!("a key name is 1 to {KEY_NAME_LEN_MAX} bytes, without control characters"),
            )
            .into());
        }
        let scopes: Vec<String> = scope::parse_scopes(&new.scopes)?.iter().map(Scope::to_string).collect();
        if let Some(limit) = &new.rate_limit {
            limit.validate("rate_limit")?;
        }
        if self.store.list_records(API_KEY_KIND, "", None, KEYS_MAX).await?.len() >= KEYS_MAX {
            return Err(KeyError::LimitReached);
        }
        let (id, token) = token::generate();
        let hash = tokio::task::spawn_blocking({
            let token = token.clone();
            move || token::hash(&token)
        })
        .await
        .map_err(|e| StoreError::Unavailable(format!("hashing the key did not finish: {e}")))?;
        let aws_secret = new.aws.then(token::aws_secret);
        let key = StoredKey {
            id: id.clone(),
            tenant,
            name: new.name,
            scopes,
            hash,
            aws_secret: aws_secret.clone(),
            rate_limit: new.rate_limit,
            created_ms: self.clock.now_ms(),
            revoked_ms: None,
        };
        // 64 random bits: a clash is not expected, and `insert_record` would refuse it rather
        // than overwrite another key.
        if !self.store.insert_record(API_KEY_KIND, &id, encode(&key)).await? {
            return Err(StoreError::Unavailable("a fresh key id was taken; retry".to_string()).into());
        }
        let mut cache = self.lock();
        cache.any = Some((true, self.clock.now_ms()));
        cache.keys.insert(id, (Some(Known::new(key.clone())), self.clock.now_ms()));
        Ok(CreatedKey { view: view(&key), token, aws_secret })
    }

    /// Every key, without secrets, in id order.
    pub async fn list(&self) -> Result<Vec<KeyView>, StoreError> {
        let records = self.store.list_records(API_KEY_KIND, "", None, KEYS_MAX).await?;
        Ok(records.iter().filter_map(|r| decode(&r.value)).map(|k| view(&k)).collect())
    }

    pub async fn get(&self, id: &str) -> Result<KeyView, KeyError> {
        let key = self.read(id).await?.ok_or_else(|| KeyError::NotFound(id.to_string()))?;
        Ok(view(&key))
    }

    /// Revokes a key: refused at once on this node, and on every other within
    /// [`KEY_REFRESH_MS`]. Revoking a revoked key changes nothing and answers the same.
    pub async fn revoke(&self, id: &str) -> Result<KeyView, KeyError> {
        loop {
            let Some(raw) = self.raw(id).await? else {
                return Err(KeyError::NotFound(id.to_string()));
            };
            let mut key = decode(&raw).ok_or_else(|| KeyError::NotFound(id.to_string()))?;
            if key.revoked_ms.is_none() {
                key.revoked_ms = Some(self.clock.now_ms());
                if !self.store.replace_record(API_KEY_KIND, id, raw, encode(&key)).await? {
                    continue;
                }
            }
            self.lock().keys.insert(id.to_string(), (Some(Known::new(key.clone())), self.clock.now_ms()));
            return Ok(view(&key));
        }
    }

    /// A key's record, from memory while it is fresh.
    async fn key(&self, id: &str) -> Result<Option<Arc<Known>>, StoreError> {
        let now = self.clock.now_ms();
        if let Some((key, at)) = self.lock().keys.get(id)
            && now.saturating_sub(*at) < KEY_REFRESH_MS
        {
            return Ok(key.clone());
        }
        let key = self.read(id).await?.map(Known::new);
        let mut cache = self.lock();
        if cache.keys.len() >= VERIFIED_MAX {
            cache.keys.clear();
        }
        cache.keys.insert(id.to_string(), (key.clone(), now));
        Ok(key)
    }

    async fn read(&self, id: &str) -> Result<Option<StoredKey>, StoreError> {
        Ok(self.raw(id).await?.as_deref().and_then(decode))
    }

    async fn raw(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        // Ids are hex; anything else names no key and must not reach the store's key checks.
        if id.is_empty() || id.len() > 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        self.store.get_record(API_KEY_KIND, id).await
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether the store holds any API key (revoked ones included): what turns authentication on.
pub async fn keys_exist(store: &dyn Store) -> Result<bool, StoreError> {
    Ok(!store.list_records(API_KEY_KIND, "", None, 1).await?.is_empty())
}

fn access_of(key: &StoredKey) -> Access {
    // Scopes were checked when the key was made; one that no longer parses grants nothing.
    let scopes = key.scopes.iter().filter_map(|s| Scope::parse(s).ok()).collect();
    Access {
        principal: Principal(format!("key:{}", key.id)),
        key_id: key.id.clone(),
        tenant: key.tenant.clone(),
        scopes,
        rate_limit: key.rate_limit,
    }
}

fn view(key: &StoredKey) -> KeyView {
    KeyView {
        id: key.id.clone(),
        tenant: key.tenant.clone(),
        name: key.name.clone(),
        scopes: key.scopes.clone(),
        aws_access_key_id: key.aws_secret.as_ref().map(|_| token::aws_access_key_id(&key.id)),
        rate_limit: key.rate_limit,
        created_ms: key.created_ms,
        revoked_ms: key.revoked_ms,
    }
}

fn encode(key: &StoredKey) -> Vec<u8> {
    serde_json::to_vec(key).expect("a key serializes")
}

fn decode(raw: &[u8]) -> Option<StoredKey> {
    serde_json::from_slice(raw).ok()
}

#[cfg(test)]
mod tests;
