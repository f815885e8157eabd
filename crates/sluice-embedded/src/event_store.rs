//! [`EventStore`] over the writer thread: appends and deletes are jobs on the event log
//! (`events/`), answered once their turn is durable, which then moves the durable head that
//! reads stop at. Long polls of `$all` wait outside the writer, woken (`$all` in the streams'
//! wake-up registry, a name no stream can have) after each durable append.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use sluice_core::events::{ExpectedVersion, NewEvent};
use sluice_store::{
    AllEvents, AllRead, AppendedEvents, EventError, EventStore, StreamEvents, StreamRead, validate_append_events,
};

use crate::EmbeddedStore;
use crate::engine::Engine;

/// The wake-up key of `$all`'s long polls.
const ALL: &str = "$all";
/// Longest a long poll waits before it looks again by itself.
const LONG_POLL_RECHECK_MS: u64 = 250;

impl EmbeddedStore {
    async fn event_call<T, F>(&self, f: F) -> Result<T, EventError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Engine, u64) -> Result<T, EventError> + Send + 'static,
    {
        match self.call(move |e, now| Ok(f(e, now))).await {
            Ok(result) => result,
            Err(store) => Err(EventError::Store(store)),
        }
    }
}

#[async_trait]
impl EventStore for EmbeddedStore {
    async fn append_events(
        &self,
        stream_id: &str,
        expected: ExpectedVersion,
        events: Vec<NewEvent>,
    ) -> Result<AppendedEvents, EventError> {
        validate_append_events(stream_id, &events)?;
        let id = stream_id.to_owned();
        let appended = self.event_call(move |e, now| e.events.append(&id, expected, events, now)).await?;
        // Answered after the turn's sync: everything up to this append is durable.
        self.shared.events_durable.reached(appended.last_position + 1);
        if !appended.duplicate {
            self.shared.stream_wakers.wake(ALL);
        }
        Ok(appended)
    }

    async fn read_stream(&self, stream_id: &str, read: StreamRead) -> Result<StreamEvents, EventError> {
        read.validate()?;
        let id = stream_id.to_owned();
        let head = self.shared.events_durable.get();
        self.event_call(move |e, _| e.events.read_stream(&id, read, head)).await
    }

    async fn read_all(&self, read: AllRead) -> Result<AllEvents, EventError> {
        read.validate()?;
        let deadline = Instant::now() + Duration::from_millis(read.wait_ms);
        let mut read = read;
        loop {
            let mut woken = self.shared.stream_wakers.subscribe(ALL);
            let head = self.shared.events_durable.get();
            let r = read.clone();
            let got = self.event_call(move |e, _| e.events.read_all(&r, head)).await?;
            let now = Instant::now();
            if !got.events.is_empty() || now >= deadline {
                return Ok(got);
            }
            // What a filtered read passed over needs no second look.
            read.from_position = got.next_position.max(read.from_position);
            let pause = (deadline - now).min(Duration::from_millis(LONG_POLL_RECHECK_MS));
            let _ = tokio::time::timeout(pause, woken.changed()).await;
        }
    }

    async fn delete_event_stream(&self, stream_id: &str, hard: bool) -> Result<(), EventError> {
        sluice_core::events::validate_stream_id(stream_id)?;
        let id = stream_id.to_owned();
        self.event_call(move |e, _| e.events.delete(&mut e.records, &id, hard)).await
    }

    async fn event_stream_version(&self, stream_id: &str) -> Result<Option<u64>, EventError> {
        let id = stream_id.to_owned();
        self.event_call(move |e, _| Ok(e.events.version(&id))).await
    }
}
