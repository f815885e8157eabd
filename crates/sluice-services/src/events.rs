//! The event store's durable extras over the store's `EventStore`: catch-up subscriptions with
//! server-kept, forward-only checkpoints, and snapshots per stream. Both are store records (JSON
//! with a format number), so every node sees them and both backends keep them the same way:
//! `event_subscription/<name>` and `event_snapshot/<stream id>`. A checkpoint is written only by
//! compare-and-swap against the record its writer read, so two nodes checkpointing one
//! subscription at once can never move it back.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sluice_clock::Clock;
use sluice_core::events::limits::{EVENT_SNAPSHOT_BYTES_MAX, EVENT_SUBSCRIPTIONS_MAX};
use sluice_core::events::{self, AppendError, CheckpointError, EventFilter};
use sluice_core::{TimeMs, ValidationError};
use sluice_store::prelude::*;
use sluice_store::{AllEvents, AllRead, Direction, EventError, StoreError, StoredEvent, StreamRead};

pub const SUBSCRIPTION_KIND: &str = "event_subscription";
pub const SNAPSHOT_KIND: &str = "event_snapshot";
/// The format of both records; a reader refuses others rather than guess.
const RECORD_FORMAT: u8 = 1;
/// Compare-and-swap attempts of one checkpoint before it reports contention.
const CHECKPOINT_ATTEMPTS_MAX: usize = 16;

/// Where a new subscription starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFrom {
    Start,
    End,
    Position(u64),
}

/// A subscription as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscription {
    pub format: u8,
    pub name: String,
    /// The first position it delivers (resolved at creation: `end` is the head then).
    pub start_position: u64,
    pub filter: EventFilter,
    /// The position of the last event handled.
    pub checkpoint: Option<u64>,
    pub created_at: TimeMs,
}

impl Subscription {
    /// Where the next fetch starts: after the checkpoint.
    pub fn next_position(&self) -> u64 {
        self.checkpoint.map_or(self.start_position, |c| (c + 1).max(self.start_position))
    }
}

/// A snapshot as stored: the state folded up to `version` (JSON text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub format: u8,
    pub version: u64,
    pub data: String,
    pub taken_at: TimeMs,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventsError {
    #[error("no event subscription named {0:?}")]
    SubscriptionNotFound(String),
    #[error("an event subscription named {0:?} exists with different settings")]
    SubscriptionExists(String),
    #[error("this server already keeps {EVENT_SUBSCRIPTIONS_MAX} event subscriptions")]
    TooManySubscriptions,
    #[error("stream {0:?} has no snapshot")]
    SnapshotNotFound(String),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("the checkpoint kept changing under this call; retry it")]
    Contended,
    #[error(transparent)]
    Event(#[from] EventError),
}

impl From<ValidationError> for EventsError {
    fn from(e: ValidationError) -> Self {
        EventsError::Event(EventError::Invalid(e))
    }
}

impl From<StoreError> for EventsError {
    fn from(e: StoreError) -> Self {
        EventsError::Event(EventError::Store(e))
    }
}

fn decode<T: for<'de> Deserialize<'de>>(kind: &str, key: &str, bytes: &[u8]) -> Result<T, EventsError> {
    serde_json::from_slice(bytes).map_err(|e| {
        EventsError::Event(EventError::Store(StoreError::Unavailable(format!(
            "the record {kind}/{key} is unreadable: {e}"
        ))))
    })
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("plain records encode")
}

/// The event store's subscriptions and snapshots, over one store and clock.
pub struct Events {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
}

impl Events {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Events {
        Events { store, clock }
    }

    /// The log's head: the next position to be given.
    pub async fn head(&self) -> Result<u64, EventsError> {
        let read = AllRead { from_position: u64::MAX, max: 1, filter: EventFilter::default(), wait_ms: 0 };
        Ok(self.store.read_all(read).await?.head)
    }

    /// Creates a subscription; `true` when new. The same settings again answer the existing
    /// one (whatever its checkpoint); different ones are `SubscriptionExists`.
    pub async fn create_subscription(
        &self,
        name: &str,
        from: StartFrom,
        filter: EventFilter,
    ) -> Result<(Subscription, bool), EventsError> {
        events::validate_subscription_name(name)?;
        filter.validate()?;
        let existing = match self.get_subscription(name).await {
            Ok(existing) => Some(existing),
            Err(EventsError::SubscriptionNotFound(_)) => None,
            Err(e) => return Err(e),
        };
        if let Some(existing) = existing {
            let same_start = match from {
                StartFrom::Start => existing.start_position == 0,
                StartFrom::Position(p) => existing.start_position == p,
                // `end` means "from when it was created": any start matches.
                StartFrom::End => true,
            };
            if same_start && existing.filter == filter {
                return Ok((existing, false));
            }
            return Err(EventsError::SubscriptionExists(name.to_owned()));
        }
        let count =
            self.store.list_records(SUBSCRIPTION_KIND, "", None, sluice_store::RECORD_LIST_LIMIT_MAX).await?.len();
        if count >= EVENT_SUBSCRIPTIONS_MAX {
            return Err(EventsError::TooManySubscriptions);
        }
        let start_position = match from {
            StartFrom::Start => 0,
            StartFrom::End => self.head().await?,
            StartFrom::Position(p) => p,
        };
        let sub = Subscription {
            format: RECORD_FORMAT,
            name: name.to_owned(),
            start_position,
            filter,
            checkpoint: None,
            created_at: self.clock.now_ms(),
        };
        if !self.store.insert_record(SUBSCRIPTION_KIND, name, encode(&sub)).await? {
            // Another node created it meanwhile: answer that one, as a second create would.
            return Box::pin(self.create_subscription(name, from, sub.filter)).await;
        }
        Ok((sub, true))
    }

    pub async fn get_subscription(&self, name: &str) -> Result<Subscription, EventsError> {
        Ok(self.get_raw(name).await?.0)
    }

    async fn get_raw(&self, name: &str) -> Result<(Subscription, Vec<u8>), EventsError> {
        events::validate_subscription_name(name)?;
        let raw = self
            .store
            .get_record(SUBSCRIPTION_KIND, name)
            .await?
            .ok_or_else(|| EventsError::SubscriptionNotFound(name.to_owned()))?;
        Ok((decode(SUBSCRIPTION_KIND, name, &raw)?, raw))
    }

    pub async fn list_subscriptions(&self) -> Result<Vec<Subscription>, EventsError> {
        let records = self.store.list_records(SUBSCRIPTION_KIND, "", None, sluice_store::RECORD_LIST_LIMIT_MAX).await?;
        records.iter().map(|r| decode(SUBSCRIPTION_KIND, &r.key, &r.value)).collect()
    }

    pub async fn delete_subscription(&self, name: &str) -> Result<(), EventsError> {
        events::validate_subscription_name(name)?;
        if !self.store.delete_record(SUBSCRIPTION_KIND, name).await? {
            return Err(EventsError::SubscriptionNotFound(name.to_owned()));
        }
        Ok(())
    }

    /// The subscription's next events after its checkpoint, long-polling up to `wait_ms`. The
    /// checkpoint does not move: the subscriber checkpoints what it handled.
    pub async fn fetch(&self, name: &str, max: u32, wait_ms: u64) -> Result<(Subscription, AllEvents), EventsError> {
        let sub = self.get_subscription(name).await?;
        let mut filter = sub.filter.clone();
        // A tenant's subscription holds its tenant's prefix; the default tenant's keeps to the
        // streams without one.
        filter.untenanted = !name.contains(sluice_core::name::TENANT_SEPARATOR);
        let read = AllRead { from_position: sub.next_position(), max, filter, wait_ms };
        let got = self.store.read_all(read).await?;
        Ok((sub, got))
    }

    /// Moves the checkpoint to `position` (the last event handled): forward only; the same
    /// position again is a success that changes nothing.
    pub async fn checkpoint(&self, name: &str, position: u64) -> Result<Subscription, EventsError> {
        let head = self.head().await?;
        for _ in 0..CHECKPOINT_ATTEMPTS_MAX {
            let (mut sub, raw) = self.get_raw(name).await?;
            if !events::advance_checkpoint(sub.checkpoint, position, head)? {
                return Ok(sub);
            }
            sub.checkpoint = Some(position);
            if self.store.replace_record(SUBSCRIPTION_KIND, name, raw, encode(&sub)).await? {
                return Ok(sub);
            }
        }
        Err(EventsError::Contended)
    }

    /// Stores the state of `stream_id` folded up to `version` (a version the stream has).
    pub async fn put_snapshot(&self, stream_id: &str, version: u64, data: String) -> Result<Snapshot, EventsError> {
        events::validate_stream_id(stream_id)?;
        if data.len() > EVENT_SNAPSHOT_BYTES_MAX {
            return Err(ValidationError::new(
                "data",
                format!("a snapshot is at most {EVENT_SNAPSHOT_BYTES_MAX} bytes"),
            )
            .into());
        }
        let last = self
            .store
            .event_stream_version(stream_id)
            .await?
            .ok_or(EventsError::Event(EventError::Append(AppendError::StreamNotFound)))?;
        if version > last {
            return Err(ValidationError::new("version", format!("the stream's last version is {last}")).into());
        }
        let snapshot = Snapshot { format: RECORD_FORMAT, version, data, taken_at: self.clock.now_ms() };
        self.store.put_record(SNAPSHOT_KIND, stream_id, encode(&snapshot)).await?;
        Ok(snapshot)
    }

    /// The latest snapshot of `stream_id` and up to `max` events after it, with the stream's
    /// last version. A snapshot from before a soft delete is not the stream's any more.
    pub async fn read_snapshot(
        &self,
        stream_id: &str,
        max: u32,
    ) -> Result<(Snapshot, Vec<StoredEvent>, u64), EventsError> {
        events::validate_stream_id(stream_id)?;
        let missing = || EventsError::SnapshotNotFound(stream_id.to_owned());
        let raw = self.store.get_record(SNAPSHOT_KIND, stream_id).await?.ok_or_else(missing)?;
        let snapshot: Snapshot = decode(SNAPSHOT_KIND, stream_id, &raw)?;
        let read = StreamRead { from_version: Some(snapshot.version + 1), direction: Direction::Forward, max };
        let stream = self.store.read_stream(stream_id, read).await?;
        if snapshot.version < stream.first_version {
            return Err(missing());
        }
        Ok((snapshot, stream.events, stream.last_version))
    }
}
