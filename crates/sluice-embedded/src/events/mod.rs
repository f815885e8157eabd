//! The event store on the embedded backend: every event of every stream in one log partition
//! (`events/all/`, the streams' log engine: CRC-checked batches in segment files), whose offsets
//! are the global positions, and indexes in memory rebuilt from it at open.
//!
//! Why this is gapless in commit order by construction: only the writer thread stages events,
//! one append after another, so positions are given in the order appends are decided; the
//! turn's events are written in one batch after the turn's fjall batch and synced by the sync
//! stage before any of them is answered. Readers see positions below the *durable head* only
//! (advanced after a turn is synced, `Durable`), so a reader can never see position `p + 1`
//! before `p`, nor see an event that a crash could take back.
//!
//! The indexes (per stream: its state, the positions of its visible events, its event ids; per
//! type and per correlation id: positions) are derived data: the log is the truth. A delete is
//! a record (`event_stream/<id>`, the stream's `StreamState`) written with the writer's batch;
//! recovery applies those records to what the log holds.

mod read;

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use sluice_core::TimeMs;
use sluice_core::events::{self, AppendError, Decision, ExpectedVersion, NewEvent, Prior, StreamState, StreamStatus};
use sluice_core::stream::{NewRecord, StreamConfig};
use sluice_store::{AppendedEvents, EventError, StoredEvent};

use crate::codec;
use crate::log::Partition;
use crate::log::segment::Damage;
use crate::records::Records;

/// The record kind of a deleted stream's state.
const KIND_STREAM: &str = "event_stream";
/// Records read per step of the scan at open.
const OPEN_SCAN_RECORDS: usize = 1_000;

/// An event as the log holds it (the position and time are the record's offset and timestamp).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct EventBody {
    pub stream_id: String,
    pub version: u64,
    pub id: String,
    pub r#type: String,
    pub data: String,
    pub metadata: Option<String>,
    pub correlation_id: Option<String>,
    pub causation_id: Option<String>,
}

impl EventBody {
    fn stored(self, position: u64, time_ms: TimeMs) -> StoredEvent {
        StoredEvent {
            stream_id: self.stream_id,
            version: self.version,
            position,
            id: self.id,
            r#type: self.r#type,
            data: self.data,
            metadata: self.metadata,
            correlation_id: self.correlation_id,
            causation_id: self.causation_id,
            time_ms,
        }
    }
}

/// The durable head: every position below it is on disk (synced, in `fsync` mode). Shared by
/// the writer (which knows the log) and the callers (which learn that a turn is durable).
#[derive(Debug, Default)]
pub struct Durable(AtomicU64);

impl Durable {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Called with `next` once every position below it is durable.
    pub fn reached(&self, next: u64) {
        self.0.fetch_max(next, Ordering::AcqRel);
    }

    fn reset(&self, next: u64) {
        self.0.store(next, Ordering::Release);
    }
}

/// One stream's index.
#[derive(Debug, Default)]
struct EventStream {
    state: Option<StreamState>,
    /// Positions of the visible events, by version from `state.visible_from`.
    positions: Vec<u64>,
    /// Visible event ids → version.
    ids: HashMap<String, u64>,
}

impl EventStream {
    fn state(&self) -> StreamState {
        self.state.unwrap_or(StreamState::NONE)
    }
}

/// The event log and its indexes, owned by the writer thread.
pub struct EventLog {
    log: Partition,
    config: StreamConfig,
    streams: HashMap<String, EventStream>,
    types: HashMap<String, Vec<u64>>,
    correlations: HashMap<String, Vec<u64>>,
    durable: Arc<Durable>,
}

impl EventLog {
    /// Opens `data_dir/events/all` (creating it), rebuilds the indexes from it and the deleted
    /// streams' records, and sets `durable` to the log's end.
    pub fn open(data_dir: &Path, records: &Records, durable: Arc<Durable>) -> Result<EventLog, Damage> {
        let opened = Partition::open(data_dir.join("events").join("all"), 0, 0)?;
        if let Some((file, at, why)) = &opened.torn {
            tracing::warn!(
                "cut the event log's torn tail (never acknowledged) at byte {at} of {}: {why}",
                file.display()
            );
        }
        let config = StreamConfig { retention_ms: u64::MAX, ..StreamConfig::default() };
        let mut me = EventLog {
            log: opened.partition,
            config,
            streams: HashMap::new(),
            types: HashMap::new(),
            correlations: HashMap::new(),
            durable,
        };
        for r in records.list(KIND_STREAM, "", None, usize::MAX) {
            let state: StreamState = codec::decode(&r.value).map_err(|e| Damage {
                file: data_dir.join("events"),
                reason: format!("event_stream/{}: {e}", r.key),
            })?;
            me.streams.entry(r.key).or_default().state = Some(state);
        }
        let mut at = me.log.first_offset();
        let end = me.log.next_offset;
        while at < end {
            let batch = me.log.read(at, OPEN_SCAN_RECORDS, u64::MAX).map_err(|e| match e {
                crate::log::ReadError::Damaged(d) => d,
                crate::log::ReadError::OutOfRange => {
                    Damage { file: data_dir.join("events"), reason: format!("position {at} is missing") }
                }
            })?;
            let Some(last) = batch.last() else { break };
            at = last.offset + 1;
            for r in batch {
                let body: EventBody = codec::decode(&r.body).map_err(|e| Damage {
                    file: data_dir.join("events"),
                    reason: format!("the event at position {}: {e}", r.offset),
                })?;
                me.index(&body, r.offset, true);
            }
        }
        me.durable.reset(me.log.next_offset);
        Ok(me)
    }

    /// Adds an event to the indexes. At open, a stream's state comes from its delete record
    /// (if any) and the events found: an event at or above `visible_from` brings it back.
    fn index(&mut self, e: &EventBody, position: u64, opening: bool) {
        // `$all`'s indexes hold every event, hidden or not: a delete hides a stream's events
        // from reads of the stream, never from the global order.
        self.types.entry(e.r#type.clone()).or_default().push(position);
        if let Some(c) = &e.correlation_id {
            self.correlations.entry(c.clone()).or_default().push(position);
        }
        let s = self.streams.entry(e.stream_id.clone()).or_default();
        let state = s.state();
        if opening {
            let next_version = state.next_version.max(e.version + 1);
            if e.version < state.visible_from {
                s.state = Some(StreamState { next_version, ..state });
                return;
            }
            s.state = Some(StreamState { next_version, visible_from: state.visible_from, status: StreamStatus::Live });
        } else {
            s.state = Some(state.appended(1));
        }
        s.positions.push(position);
        s.ids.insert(e.id.clone(), e.version);
    }

    /// Decides and stages an append (the caller checked the events); the answer holds once the
    /// turn is durable.
    pub fn append(
        &mut self,
        stream_id: &str,
        expected: ExpectedVersion,
        new: Vec<NewEvent>,
        now: TimeMs,
    ) -> Result<AppendedEvents, EventError> {
        let (state, prior) = match self.streams.get(stream_id) {
            None => (StreamState::NONE, None),
            Some(s) => (s.state(), Self::prior(s, &new)),
        };
        let ids: Vec<&str> = new.iter().map(|e| e.id.as_str()).collect();
        let count = new.len() as u64;
        let prior_ref = prior.as_ref().map(|(v, ids)| Prior { first_version: *v, ids });
        match events::decide_append(&state, expected, &ids, prior_ref)? {
            Decision::Duplicate { first_version } => {
                let s = &self.streams[stream_id];
                let at = |v: u64| s.positions[(v - state.visible_from) as usize];
                Ok(AppendedEvents {
                    first_version,
                    last_version: first_version + count - 1,
                    first_position: at(first_version),
                    last_position: at(first_version + count - 1),
                    duplicate: true,
                })
            }
            Decision::Append { first_version } => {
                let first_position = self.log.next_offset;
                for (i, e) in new.into_iter().enumerate() {
                    let body = EventBody {
                        stream_id: stream_id.to_owned(),
                        version: first_version + i as u64,
                        id: e.id,
                        r#type: e.r#type,
                        data: e.data,
                        metadata: e.metadata,
                        correlation_id: e.correlation_id,
                        causation_id: e.causation_id,
                    };
                    let record = NewRecord { body: codec::encode(&body), ..NewRecord::default() };
                    let (position, _) = self.log.stage(&record, now);
                    self.index(&body, position, false);
                }
                Ok(AppendedEvents::span(first_version, first_position, count, false))
            }
        }
    }

    /// Where the append's first id is in the stream, with the ids stored from there that equal
    /// the append's (enough for `decide_append` to tell a retry from a conflict).
    fn prior(s: &EventStream, new: &[NewEvent]) -> Option<(u64, Vec<String>)> {
        let first = *s.ids.get(&new[0].id)?;
        let ids = new
            .iter()
            .enumerate()
            .take_while(|(i, e)| s.ids.get(&e.id) == Some(&(first + *i as u64)))
            .map(|(_, e)| e.id.clone())
            .collect();
        Some((first, ids))
    }

    /// Soft- or hard-deletes a stream, as a record in this turn's batch.
    pub fn delete(&mut self, records: &mut Records, stream_id: &str, hard: bool) -> Result<(), EventError> {
        let s = self.streams.get_mut(stream_id).ok_or(EventError::Append(AppendError::StreamNotFound))?;
        let state = s.state().deleted(hard)?;
        records.put(KIND_STREAM, stream_id, codec::encode(&state));
        s.state = Some(state);
        s.positions.clear();
        s.ids.clear();
        Ok(())
    }

    /// The stream's last visible version.
    pub fn version(&self, stream_id: &str) -> Option<u64> {
        self.streams.get(stream_id).and_then(|s| s.state().last_version())
    }

    pub fn staged_bytes(&self) -> usize {
        self.log.staged_bytes()
    }

    /// Writes the turn's staged events (after the turn's fjall batch) and adds the file to
    /// `dirty` for the sync stage.
    pub fn flush(&mut self, now: TimeMs, dirty: &mut Vec<Arc<File>>) -> std::io::Result<u64> {
        self.log.flush(now, &self.config, dirty)
    }

    pub fn sync(&self) -> std::io::Result<()> {
        self.log.sync()
    }

    pub fn durable(&self) -> &Arc<Durable> {
        &self.durable
    }
}
