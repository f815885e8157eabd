//! The caller's tenant: the namespace its names are read in and shown from (see
//! `sluice_core::name`). Handlers qualify every name a client gives (path, query, body) with
//! [`Tenant::name`] and show stored names back with [`Tenant::show`]; lists keep only the
//! tenant's own. A call without a key (authentication off) is the default tenant's.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use sluice_core::broker::QueueView;
use sluice_core::name::Namespace;
use sluice_services::auth::Access;
use sluice_store::StoreError;
use sluice_store::prelude::*;

use crate::error::ApiError;

#[derive(Debug, Clone, Default)]
pub struct Tenant(pub Namespace);

impl Tenant {
    /// The stored name of a name the client gave in `field`.
    pub fn name(&self, field: &str, name: &str) -> Result<String, ApiError> {
        self.0.qualify(field, name).map_err(ApiError::from)
    }

    /// The client's name of a stored name.
    pub fn show(&self, stored: &str) -> String {
        self.0.show(stored)
    }

    /// Whether a stored name is this tenant's.
    pub fn owns(&self, stored: &str) -> bool {
        self.0.local(stored).is_some()
    }

    pub fn of_access(access: Option<&Access>) -> Tenant {
        Tenant(access.map(Access::namespace).unwrap_or_default())
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        // The bearer layer puts the key's tenant into the request.
        Ok(parts.extensions.get::<Tenant>().cloned().unwrap_or_default())
    }
}

impl Tenant {
    /// A queue as the tenant sees it: its own name, and its dead-letter queue's.
    pub fn queue(&self, view: &QueueView) -> sluice_api::Queue {
        let mut queue = crate::convert::queue(view);
        queue.name = self.show(&queue.name);
        if let Some(dead_letter) = &mut queue.dead_letter {
            dead_letter.queue = self.show(&dead_letter.queue);
        }
        queue
    }

    /// A stream as the tenant sees it: its own name, and its groups' dead-letter queues.
    pub fn stream(&self, mut stream: sluice_api::Stream) -> sluice_api::Stream {
        stream.name = self.show(&stream.name);
        stream.groups = stream.groups.into_iter().map(|g| self.group(g)).collect();
        stream
    }

    /// A consumer group as the tenant sees it: its dead-letter queue by its own name.
    pub fn group(&self, mut group: sluice_api::StreamGroup) -> sluice_api::StreamGroup {
        group.dead_letter_queue = group.dead_letter_queue.map(|q| self.show(&q));
        group
    }

    /// A job as the tenant sees it: its queue by its own name.
    pub fn job(&self, mut job: sluice_api::Job) -> sluice_api::Job {
        job.queue = self.show(&job.queue);
        job
    }

    /// A message as the tenant sees it: the queue it was dead-lettered from by its own name.
    pub fn message(&self, mut message: sluice_api::Message) -> sluice_api::Message {
        message.dead_letter_source = message.dead_letter_source.map(|q| self.show(&q));
        message
    }

    /// Up to `limit` of the tenant's queues whose stored names start with `prefix` (a qualified
    /// one), after `after`.
    pub async fn list_queues(
        &self,
        store: &dyn Store,
        prefix: &str,
        after: Option<String>,
        limit: usize,
    ) -> Result<Vec<QueueView>, StoreError> {
        let fetch = |after: Option<String>, n| async move { store.list_queues(prefix, after.as_deref(), n).await };
        self.keep_own(after, limit, fetch, |v| (v.name.clone(), v.name.clone())).await
    }

    /// Up to `limit` of the tenant's items of a list the store pages by key: `fetch(after, n)`
    /// gives up to `n` items after a key, `keys` an item's key and the stored name that says
    /// whose it is. A tenant's names share a prefix no other tenant's have, so its pages come
    /// whole; the default tenant's names have none, so its list steps over the others'.
    pub async fn keep_own<T, E, F, Fut>(
        &self,
        after: Option<String>,
        limit: usize,
        mut fetch: F,
        keys: impl Fn(&T) -> (String, String),
    ) -> Result<Vec<T>, E>
    where
        F: FnMut(Option<String>, usize) -> Fut,
        Fut: std::future::Future<Output = Result<Vec<T>, E>>,
    {
        let prefix = self.0.prefix();
        // A tenant's keys all sort after its bare prefix.
        let mut after = match after {
            None if !prefix.is_empty() => Some(prefix.clone()),
            after => after,
        };
        let mut mine = Vec::new();
        loop {
            let batch = fetch(after.clone(), limit).await?;
            let exhausted = batch.len() < limit;
            let mut past_mine = false;
            for item in batch {
                let (key, owner) = keys(&item);
                after = Some(key.clone());
                if self.owns(&owner) {
                    mine.push(item);
                } else if !prefix.is_empty() && key.as_str() > prefix.as_str() && !key.starts_with(&prefix) {
                    past_mine = true;
                    break;
                }
            }
            if exhausted || past_mine || mine.len() >= limit {
                mine.truncate(limit);
                return Ok(mine);
            }
        }
    }
}
