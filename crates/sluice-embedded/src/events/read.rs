//! Reads of the event log: one stream by its version index, `$all` by position, through the
//! type and correlation indexes when a filter names them. Every read stops at the durable head
//! it is given, so it serves only what a crash cannot take back.

use sluice_core::events::limits::EVENT_SCAN_MAX;
use sluice_core::events::{AppendError, EventFilter};
use sluice_core::stream::limits::READ_BYTES_MAX;
use sluice_store::{AllEvents, AllRead, Direction, EventError, StoreError, StoredEvent, StreamEvents, StreamRead};

use super::{EventBody, EventLog};
use crate::codec;
use crate::log::ReadError;

fn read_failed(e: ReadError, position: u64) -> EventError {
    let reason = match e {
        ReadError::OutOfRange => format!("position {position} is not in the event log"),
        ReadError::Damaged(d) => format!("{} is damaged: {}", d.file.display(), d.reason),
    };
    tracing::error!("reading the event log: {reason}");
    EventError::Store(StoreError::Unavailable(format!("{reason}; no event of it is served")))
}

impl EventLog {
    /// Up to `count` consecutive events from `from`, decoded (fewer past `READ_BYTES_MAX`).
    fn run(&mut self, from: u64, count: usize, bytes: &mut u64) -> Result<Vec<StoredEvent>, EventError> {
        let mut out = Vec::with_capacity(count);
        let mut at = from;
        while out.len() < count && *bytes < READ_BYTES_MAX {
            let records =
                self.log.read(at, count - out.len(), READ_BYTES_MAX - *bytes).map_err(|e| read_failed(e, at))?;
            let Some(last) = records.last() else { break };
            at = last.offset + 1;
            for r in records {
                *bytes += r.body.len() as u64;
                let body: EventBody = codec::decode(&r.body).map_err(|e| {
                    EventError::Store(StoreError::Unavailable(format!("the event at position {}: {e}", r.offset)))
                })?;
                out.push(body.stored(r.offset, r.timestamp_ms));
            }
        }
        Ok(out)
    }

    /// The events at `positions` (ascending), reading runs of consecutive positions at once.
    fn at_positions(&mut self, positions: &[u64]) -> Result<Vec<StoredEvent>, EventError> {
        let mut out = Vec::with_capacity(positions.len());
        let mut bytes = 0u64;
        let mut i = 0;
        while i < positions.len() && bytes < READ_BYTES_MAX {
            let mut j = i + 1;
            while j < positions.len() && positions[j] == positions[j - 1] + 1 {
                j += 1;
            }
            out.extend(self.run(positions[i], j - i, &mut bytes)?);
            i = j;
        }
        Ok(out)
    }

    pub fn read_stream(&mut self, stream_id: &str, read: StreamRead, head: u64) -> Result<StreamEvents, EventError> {
        let not_found = EventError::Append(AppendError::StreamNotFound);
        let s = self.streams.get(stream_id).ok_or(not_found.clone())?;
        let state = s.state();
        state.last_version().ok_or(not_found.clone())?;
        let durable = s.positions.partition_point(|&p| p < head) as u64;
        if durable == 0 {
            return Err(not_found);
        }
        let first_version = state.visible_from;
        let last_version = first_version + durable - 1;
        let max = u64::from(read.max);
        let versions: Vec<u64> = match read.direction {
            Direction::Forward => {
                let from = read.from_version.unwrap_or(first_version).max(first_version);
                (from..=last_version).take(max as usize).collect()
            }
            Direction::Backward => {
                let from = read.from_version.unwrap_or(last_version).min(last_version);
                if from < first_version {
                    Vec::new()
                } else {
                    (first_version..=from).rev().take(max as usize).collect()
                }
            }
        };
        let mut positions: Vec<u64> = versions.iter().map(|v| s.positions[(v - first_version) as usize]).collect();
        let backward = read.direction == Direction::Backward;
        if backward {
            positions.reverse();
        }
        let mut events = self.at_positions(&positions)?;
        if backward {
            events.reverse();
        }
        Ok(StreamEvents { events, last_version, first_version })
    }

    /// Reads `$all` below `head`; see `AllRead` and `AllEvents`.
    pub fn read_all(&mut self, read: &AllRead, head: u64) -> Result<AllEvents, EventError> {
        let from = read.from_position;
        let max = read.max as usize;
        if from >= head {
            return Ok(AllEvents { events: Vec::new(), next_position: from, head });
        }
        let f = &read.filter;
        // The default tenant's read of everything is the plain run with other tenants' events
        // left out: a page may hold fewer than `max`, and `next_position` is past them.
        if f.is_empty_within_tenant() {
            let mut events = self.run(from, max.min((head - from) as usize), &mut 0)?;
            let next_position = events.last().map_or(from, |e| e.position + 1);
            events.retain(|e| f.matches(&e.stream_id, &e.r#type, e.correlation_id.as_deref()));
            return Ok(AllEvents { events, next_position, head });
        }
        if let Some(candidates) = self.indexed(f, from, head, max) {
            let full = candidates.len() >= max;
            let mut events = self.at_positions(&candidates)?;
            let read_all = events.len() == candidates.len();
            let next_position = match events.last() {
                Some(e) if full || !read_all => e.position + 1,
                _ => head,
            };
            events.retain(|e| f.matches(&e.stream_id, &e.r#type, e.correlation_id.as_deref()));
            return Ok(AllEvents { events, next_position, head });
        }
        // A stream prefix alone: scan, at most `EVENT_SCAN_MAX` events.
        let end = head.min(from.saturating_add(EVENT_SCAN_MAX));
        let mut events = Vec::new();
        let mut at = from;
        while at < end && events.len() < max {
            let chunk = self.run(at, ((end - at) as usize).min(1_000), &mut 0)?;
            let Some(last) = chunk.last() else { break };
            let last = last.position;
            for e in chunk {
                if events.len() >= max {
                    return Ok(AllEvents { next_position: e.position, events, head });
                }
                at = e.position + 1;
                if f.matches(&e.stream_id, &e.r#type, e.correlation_id.as_deref()) {
                    events.push(e);
                }
            }
            at = at.max(last + 1);
        }
        Ok(AllEvents { events, next_position: at, head })
    }

    /// Positions from `from` (below `head`) of the events a filter's types or correlation id
    /// name, ascending, at most `max`; `None` when the filter names neither.
    fn indexed(&self, f: &EventFilter, from: u64, head: u64, max: usize) -> Option<Vec<u64>> {
        let lists: Vec<&Vec<u64>> = if let Some(c) = &f.correlation_id {
            self.correlations.get(c).into_iter().collect()
        } else if !f.types.is_empty() {
            f.types.iter().filter_map(|t| self.types.get(t)).collect()
        } else {
            return None;
        };
        let mut out: Vec<u64> = Vec::new();
        for list in lists {
            let start = list.partition_point(|&p| p < from);
            out.extend(list[start..].iter().copied().take_while(|&p| p < head).take(max));
        }
        out.sort_unstable();
        out.dedup();
        out.truncate(max);
        Some(out)
    }
}
