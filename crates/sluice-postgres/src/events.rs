//! The event store on PostgreSQL (migration 9): events as rows by position, a row per stream
//! holding core's `StreamState`, and one counter row of positions.
//!
//! An append is one transaction that takes two locks, always in this order, so two appends
//! never deadlock: its stream's row (`FOR UPDATE`: versions are decided one append at a time
//! per stream, on every node), then the position counter (`UPDATE ... RETURNING`, in the same
//! statement that inserts the events). The counter's row lock is held until COMMIT, so the next
//! append gets its positions only after this one committed: commit order is position order.
//! That is what keeps `$all` gapless for readers. With a sequence, positions are handed out at
//! insert time and transactions commit in any order, so a reader can read past position `p`
//! (not yet committed) to `p + 1` and never come back for `p`; here, when the counter reads `n`,
//! every position below `n` is committed, and a rolled-back append gives its positions back.
//! The price is that transactions holding appends commit one at a time, one WAL flush each
//! (PostgreSQL's group commit cannot merge them), so each node gathers the appends that arrive
//! meanwhile into one transaction (`event_batch.rs`). Reads take the counter's committed value
//! first and read below it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use sluice_core::events::limits::EVENT_SCAN_MAX;
use sluice_core::events::{self, AppendError, ExpectedVersion, NewEvent, StreamState, StreamStatus};
use sluice_core::name::TENANT_SEPARATOR;
use sluice_store::{
    AllEvents, AllRead, AppendedEvents, Direction, EventError, EventStore, StoredEvent, StreamEvents, StreamRead,
    validate_append_events,
};

use crate::{Inner, PostgresStore, db_error};

/// The wake-up key of `$all`'s long polls in the streams' registry (no stream has this id).
const ALL_KEY: u64 = u64::MAX;
/// Longest a long poll waits before it looks again by itself (a notification lost with the
/// LISTEN connection is noticed).
const RECHECK_MS: u64 = 500;

const COLUMNS: &str =
    "position, stream_id, version, event_id, event_type, data, metadata, correlation_id, causation_id, time_ms";

pub(crate) fn failed(e: tokio_postgres::Error) -> EventError {
    EventError::Store(db_error(e))
}

fn state_of(row: &tokio_postgres::Row) -> StreamState {
    let status = match row.get::<_, i16>(2) {
        0 => StreamStatus::Live,
        1 => StreamStatus::Deleted,
        _ => StreamStatus::Tombstoned,
    };
    StreamState { next_version: row.get::<_, i64>(0) as u64, visible_from: row.get::<_, i64>(1) as u64, status }
}

fn status_code(s: StreamStatus) -> i16 {
    match s {
        StreamStatus::Live => 0,
        StreamStatus::Deleted => 1,
        StreamStatus::Tombstoned => 2,
    }
}

fn event_of(r: &tokio_postgres::Row) -> StoredEvent {
    StoredEvent {
        position: r.get::<_, i64>(0) as u64,
        stream_id: r.get(1),
        version: r.get::<_, i64>(2) as u64,
        id: r.get(3),
        r#type: r.get(4),
        data: r.get(5),
        metadata: r.get(6),
        correlation_id: r.get(7),
        causation_id: r.get(8),
        time_ms: r.get::<_, i64>(9) as u64,
    }
}

async fn state(c: &impl GenericClient, stream_id: &str, lock: bool) -> Result<Option<StreamState>, EventError> {
    let sql = if lock {
        "SELECT next_version, visible_from, status FROM event_streams WHERE stream_id = $1 FOR UPDATE"
    } else {
        "SELECT next_version, visible_from, status FROM event_streams WHERE stream_id = $1"
    };
    Ok(c.query_opt(sql, &[&stream_id]).await.map_err(failed)?.as_ref().map(state_of))
}

/// The committed head: every position below it is committed (see the module's comment).
async fn head(c: &impl GenericClient) -> Result<u64, EventError> {
    let row = c.query_one("SELECT next_position FROM event_positions WHERE id = 1", &[]).await.map_err(failed)?;
    Ok(row.get::<_, i64>(0) as u64)
}

/// Locks the rows of `streams` (in id order, as given) for the rest of the transaction,
/// making empty ones for new streams (waiting for a racing creator's commit): their states.
pub(crate) async fn lock_streams<'a>(
    c: &impl GenericClient,
    streams: &[&'a str],
) -> Result<HashMap<&'a str, StreamState>, EventError> {
    let mut states = HashMap::with_capacity(streams.len());
    for &stream_id in streams {
        let state = match state(c, stream_id, true).await? {
            Some(s) => s,
            None => {
                c.execute(
                    "INSERT INTO event_streams (stream_id, next_version) VALUES ($1, 0) ON CONFLICT DO NOTHING",
                    &[&stream_id],
                )
                .await
                .map_err(failed)?;
                state(c, stream_id, true).await?.unwrap_or(StreamState::NONE)
            }
        };
        states.insert(stream_id, state);
    }
    Ok(states)
}

/// The stored version of each (stream, event id) that has one (the latest, where a stream
/// deleted and written again holds it twice).
pub(crate) async fn stored_versions(
    c: &impl GenericClient,
    keys: &[(&str, &str)],
) -> Result<HashMap<(String, String), u64>, EventError> {
    let (streams, ids): (Vec<&str>, Vec<&str>) = keys.iter().copied().unzip();
    let rows = c
        .query(
            "SELECT e.stream_id, e.event_id, max(e.version) FROM events e
               JOIN unnest($1::text[], $2::text[]) AS q(sid, eid) ON e.stream_id = q.sid AND e.event_id = q.eid
             GROUP BY e.stream_id, e.event_id",
            &[&streams, &ids],
        )
        .await
        .map_err(failed)?;
    Ok(rows.iter().map(|r| ((r.get(0), r.get(1)), r.get::<_, i64>(2) as u64)).collect())
}

/// The ids of up to `count` stored events of `stream_id` from `version` on.
pub(crate) async fn stored_ids(
    c: &impl GenericClient,
    stream_id: &str,
    version: u64,
    count: usize,
) -> Result<Vec<String>, EventError> {
    let rows = c
        .query(
            "SELECT event_id FROM events WHERE stream_id = $1 AND version >= $2 ORDER BY version LIMIT $3",
            &[&stream_id, &(version as i64), &(count as i64)],
        )
        .await
        .map_err(failed)?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The answer to a re-sent append of `count` events stored from `first_version` on.
pub(crate) async fn stored_append(
    c: &impl GenericClient,
    stream_id: &str,
    first_version: u64,
    count: usize,
) -> Result<AppendedEvents, EventError> {
    let row = c
        .query_one(
            "SELECT position FROM events WHERE stream_id = $1 AND version = $2",
            &[&stream_id, &(first_version as i64)],
        )
        .await
        .map_err(failed)?;
    Ok(AppendedEvents::span(first_version, row.get::<_, i64>(0) as u64, count as u64, true))
}

impl PostgresStore {
    /// Wakes `$all`'s long polls here and, through NOTIFY, on every node.
    async fn notify_all(inner: &Inner) {
        inner.stream_wakers.wake(ALL_KEY);
        let result = async {
            let client = inner.pool.get().await.map_err(|e| e.to_string())?;
            client
                .execute("SELECT pg_notify($1, $2)", &[&inner.channel, &format!("s{ALL_KEY}")])
                .await
                .map_err(|e| e.to_string())
        }
        .await;
        if let Err(e) = result {
            tracing::warn!("could not notify other nodes of new events: {e}");
        }
    }

    async fn read_all_once(&self, read: &AllRead) -> Result<AllEvents, EventError> {
        let client = self.inner.client().await?;
        let head = head(&client).await?;
        let from = read.from_position;
        if from >= head {
            return Ok(AllEvents { events: Vec::new(), next_position: from, head });
        }
        let f = &read.filter;
        let filtered = !f.is_empty();
        // A filtered read passes over at most `EVENT_SCAN_MAX` positions unless an index
        // (type, correlation id) finds its rows.
        let indexed = !f.types.is_empty() || f.correlation_id.is_some();
        let end = if filtered && !indexed { head.min(from.saturating_add(EVENT_SCAN_MAX)) } else { head };
        let types: Option<Vec<String>> = (!f.types.is_empty()).then(|| f.types.clone());
        let prefix = f.stream_prefix.clone().filter(|p| !p.is_empty());
        let rows = client
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM events WHERE position >= $1 AND position < $2
                       AND ($3::text[] IS NULL OR event_type = ANY($3))
                       AND ($4::text IS NULL OR starts_with(stream_id, $4))
                       AND ($5::text IS NULL OR correlation_id = $5)
                       AND (NOT $7 OR strpos(stream_id, '{TENANT_SEPARATOR}') = 0)
                     ORDER BY position LIMIT $6"
                ),
                &[
                    &(from as i64),
                    &(end as i64),
                    &types,
                    &prefix,
                    &f.correlation_id,
                    &i64::from(read.max),
                    &f.untenanted,
                ],
            )
            .await
            .map_err(failed)?;
        let events: Vec<StoredEvent> = rows.iter().map(event_of).collect();
        let next_position = match events.last() {
            Some(e) if events.len() >= read.max as usize => e.position + 1,
            _ => end,
        };
        Ok(AllEvents { events, next_position, head })
    }
}

#[async_trait]
impl EventStore for PostgresStore {
    async fn append_events(
        &self,
        stream_id: &str,
        expected: ExpectedVersion,
        events: Vec<NewEvent>,
    ) -> Result<AppendedEvents, EventError> {
        validate_append_events(stream_id, &events)?;
        let appended = self.inner.appends.append(stream_id, expected, events).await?;
        self.inner.counters.committed(appended.last_version - appended.first_version + 1);
        if !appended.duplicate {
            Self::notify_all(&self.inner).await;
        }
        Ok(appended)
    }

    async fn read_stream(&self, stream_id: &str, read: StreamRead) -> Result<StreamEvents, EventError> {
        read.validate()?;
        let client = self.inner.client().await?;
        let not_found = EventError::Append(AppendError::StreamNotFound);
        let s = state(&client, stream_id, false).await?.ok_or(not_found.clone())?;
        let last_version = s.last_version().ok_or(not_found)?;
        let first_version = s.visible_from;
        let (sql, from) = match read.direction {
            Direction::Forward => (
                format!(
                    "SELECT {COLUMNS} FROM events WHERE stream_id = $1 AND version >= $2 AND version <= $3 ORDER BY version LIMIT $4"
                ),
                read.from_version.unwrap_or(first_version).max(first_version),
            ),
            Direction::Backward => (
                format!(
                    "SELECT {COLUMNS} FROM events WHERE stream_id = $1 AND version <= $2 AND version >= $3 ORDER BY version DESC LIMIT $4"
                ),
                read.from_version.unwrap_or(last_version).min(last_version),
            ),
        };
        let bound = if read.direction == Direction::Forward { last_version } else { first_version };
        let rows = client
            .query(&sql, &[&stream_id, &(from as i64), &(bound as i64), &i64::from(read.max)])
            .await
            .map_err(failed)?;
        Ok(StreamEvents { events: rows.iter().map(event_of).collect(), last_version, first_version })
    }

    async fn read_all(&self, read: AllRead) -> Result<AllEvents, EventError> {
        read.validate()?;
        let deadline = Instant::now() + Duration::from_millis(read.wait_ms);
        let mut read = read;
        loop {
            let mut woken = self.inner.stream_wakers.subscribe(ALL_KEY);
            let got = self.read_all_once(&read).await?;
            let now = Instant::now();
            if !got.events.is_empty() || now >= deadline {
                return Ok(got);
            }
            read.from_position = got.next_position.max(read.from_position);
            let pause = (deadline - now).min(Duration::from_millis(RECHECK_MS));
            let _ = tokio::time::timeout(pause, woken.changed()).await;
        }
    }

    async fn delete_event_stream(&self, stream_id: &str, hard: bool) -> Result<(), EventError> {
        events::validate_stream_id(stream_id)?;
        let mut client = self.inner.client().await?;
        let tx = client.transaction().await.map_err(failed)?;
        let s = state(&tx, stream_id, true).await?.ok_or(EventError::Append(AppendError::StreamNotFound))?;
        let next = s.deleted(hard)?;
        tx.execute(
            "UPDATE event_streams SET visible_from = $2, status = $3 WHERE stream_id = $1",
            &[&stream_id, &(next.visible_from as i64), &status_code(next.status)],
        )
        .await
        .map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        Ok(())
    }

    async fn event_stream_version(&self, stream_id: &str) -> Result<Option<u64>, EventError> {
        let client = self.inner.client().await?;
        Ok(state(&client, stream_id, false).await?.and_then(|s| s.last_version()))
    }
}
