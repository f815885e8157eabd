//! CQRS projections: a [`ProjectionRunner`] folds an event subscription into a read model that
//! lives in the application's own database, exactly once across crashes.
//!
//! Exactly once comes from where the checkpoint lives: the application's [`Projection`] applies
//! a batch of events to its read model *and* records the position of the last one in the same
//! database transaction. After a crash (of the runner, the application or Sluice) the runner
//! asks the projection for that checkpoint and skips every event at or below it, so an event
//! is applied once even when the subscription hands it out again. The subscription's own
//! server-side checkpoint is moved after each applied batch, for its lag in `/metrics` and so
//! that a restarted runner does not fetch far behind; it is never the one trusted.
//!
//! This crate has no database driver: the example `examples/orders.rs` implements
//! [`Projection`] over PostgreSQL with `tokio-postgres`.

use std::future::Future;

use sluice_api::events::{CreateEventSubscriptionRequest, EventWire, SubscriptionFrom, SubscriptionFromName};

use crate::{Client, ClientError};

/// A read model that applies events and keeps its checkpoint beside them.
pub trait Projection: Send {
    /// The read model's failures (its database's errors).
    type Error: std::error::Error + Send + Sync + 'static;
    /// The position of the last event applied, as the read model's database holds it (`None`
    /// before the first batch).
    fn checkpoint(&mut self) -> impl Future<Output = Result<Option<u64>, Self::Error>> + Send;
    /// Applies `events` (in position order, all after the checkpoint) and sets the checkpoint
    /// to `checkpoint` in one transaction: all of it happens, or none of it. `events` may be
    /// empty when a filtered subscription passed over events that concern nobody: the
    /// checkpoint still moves, so they are not read again.
    fn apply(&mut self, events: &[EventWire], checkpoint: u64) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// Why a runner stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProjectionError<E: std::error::Error + 'static> {
    /// A call to Sluice failed.
    #[error("the event store: {0}")]
    Sluice(#[from] ClientError),
    /// The read model failed; its transaction applied nothing.
    #[error("the projection: {0}")]
    Projection(#[source] E),
}

/// Runs one projection over one subscription. The subscription is created (from the start,
/// with the runner's filter) on first use.
#[derive(Debug, Clone)]
pub struct ProjectionRunner {
    client: Client,
    subscription: String,
    types: Vec<String>,
    stream_prefix: Option<String>,
    max: u32,
    wait_ms: u64,
}

impl ProjectionRunner {
    /// A runner over subscription `name`, 100 events per fetch, long-polling 5 s at the end.
    pub fn new(client: Client, name: impl Into<String>) -> ProjectionRunner {
        ProjectionRunner {
            client,
            subscription: name.into(),
            types: Vec::new(),
            stream_prefix: None,
            max: 100,
            wait_ms: 5_000,
        }
    }

    /// Only events of these types reach the projection.
    pub fn types(mut self, types: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.types = types.into_iter().map(Into::into).collect();
        self
    }

    /// Only events of streams whose ids start with `prefix`.
    pub fn stream_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.stream_prefix = Some(prefix.into());
        self
    }

    /// Events per fetch (1 to 1,000) and the long poll at the end.
    pub fn batch(mut self, max: u32, wait_ms: u64) -> Self {
        self.max = max;
        self.wait_ms = wait_ms;
        self
    }

    async fn ensure_subscription(&self) -> Result<(), ClientError> {
        let request = CreateEventSubscriptionRequest {
            name: self.subscription.clone(),
            from: SubscriptionFrom::Named(SubscriptionFromName::Start),
            types: self.types.clone(),
            stream_prefix: self.stream_prefix.clone(),
        };
        self.client.create_event_subscription(&request).await.map(|_| ())
    }

    /// One step: fetches the next events, applies those past the projection's checkpoint, and
    /// moves the server's checkpoint after them. Answers how many events were applied.
    pub async fn step<P: Projection>(&self, projection: &mut P) -> Result<usize, ProjectionError<P::Error>> {
        self.ensure_subscription().await?;
        let done = projection.checkpoint().await.map_err(ProjectionError::Projection)?;
        let got = self.client.fetch_events(&self.subscription, Some(self.max), Some(self.wait_ms)).await?;
        let fresh: Vec<EventWire> = got.events.into_iter().filter(|e| done.is_none_or(|d| e.position > d)).collect();
        // The last position looked at: past filtered-out events too.
        let Some(last) = got.next_position.checked_sub(1) else { return Ok(0) };
        if done.is_some_and(|d| last <= d) {
            // Everything here was applied before a crash; let the server catch up.
            self.move_server_checkpoint(done.unwrap_or(last)).await?;
            return Ok(0);
        }
        projection.apply(&fresh, last).await.map_err(ProjectionError::Projection)?;
        self.move_server_checkpoint(last).await?;
        Ok(fresh.len())
    }

    /// Forward-only on the server: a checkpoint it already has (or passed) is no error here.
    async fn move_server_checkpoint(&self, position: u64) -> Result<(), ClientError> {
        match self.client.checkpoint_events(&self.subscription, position).await {
            Ok(_) => Ok(()),
            Err(e) if e.code_str() == Some("checkpoint_regression") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Steps until `stop` resolves (checked between steps) or an error.
    pub async fn run<P: Projection>(
        &self,
        projection: &mut P,
        stop: impl Future<Output = ()>,
    ) -> Result<(), ProjectionError<P::Error>> {
        let mut stop = std::pin::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => return Ok(()),
                step = self.step(projection) => { step?; }
            }
        }
    }
}
