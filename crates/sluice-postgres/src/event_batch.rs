//! Group commit of event appends on one node. The position counter's row lock serialises every
//! append of every node from its insert to its commit (see `events.rs`), so one append per
//! transaction means one WAL flush per append. Here the appends that arrive while a transaction
//! commits wait, and go together in the next one: each decided by core's rules as if the ones
//! before it had committed (a refused append gets its own answer and writes nothing), all their
//! events inserted by one statement, one COMMIT and one flush for all of them, and every answer
//! only after that COMMIT succeeded.
//!
//! Locks stay in the order that keeps appends from deadlocking: a batch first locks every
//! stream row it writes, in stream id order (creating the rows of new streams), and only then
//! takes the position counter with its first insert. A single append is the batch of one.
//! A row made for a new stream whose append was then refused stays, empty; an empty row reads
//! as a stream never written (`StreamState::NONE`).

use std::collections::HashMap;

use deadpool_postgres::Pool;
use sluice_core::events::{self, Decision, ExpectedVersion, NewEvent, Prior, StreamState, StreamStatus};
use sluice_store::{AppendedEvents, EventError, StoreError};
use tokio::sync::{mpsc, oneshot};

use crate::db_error;
use crate::events::failed;

/// Most appends one transaction takes, and most events (a single append may hold more).
const BATCH_APPENDS_MAX: usize = 64;
const BATCH_EVENTS_MAX: usize = 4_000;
/// Appends waiting for a batch; a caller past it waits for room.
const WAITING_MAX: usize = 4_096;

struct Pending {
    stream_id: String,
    expected: ExpectedVersion,
    events: Vec<NewEvent>,
    reply: oneshot::Sender<Result<AppendedEvents, EventError>>,
}

/// The node's append queue; its worker runs while the batcher lives.
pub(crate) struct AppendBatcher {
    queue: mpsc::Sender<Pending>,
}

fn stopped() -> EventError {
    EventError::Store(StoreError::Unavailable("the event append worker stopped".into()))
}

impl AppendBatcher {
    /// Starts the worker on the current Tokio runtime.
    pub fn start(pool: Pool) -> AppendBatcher {
        let (queue, waiting) = mpsc::channel(WAITING_MAX);
        tokio::spawn(run(pool, waiting));
        AppendBatcher { queue }
    }

    /// Appends `events` to `stream_id` in the next batch; answers once it committed.
    pub async fn append(
        &self,
        stream_id: &str,
        expected: ExpectedVersion,
        events: Vec<NewEvent>,
    ) -> Result<AppendedEvents, EventError> {
        let (reply, answer) = oneshot::channel();
        let pending = Pending { stream_id: stream_id.to_owned(), expected, events, reply };
        self.queue.send(pending).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

async fn run(pool: Pool, mut waiting: mpsc::Receiver<Pending>) {
    while let Some(first) = waiting.recv().await {
        let mut events = first.events.len();
        let mut batch = vec![first];
        while batch.len() < BATCH_APPENDS_MAX && events < BATCH_EVENTS_MAX {
            match waiting.try_recv() {
                Ok(next) => {
                    events += next.events.len();
                    batch.push(next);
                }
                Err(_) => break,
            }
        }
        let (replies, work): (Vec<_>, Vec<_>) =
            batch.into_iter().map(|p| (p.reply, (p.stream_id, p.expected, p.events))).unzip();
        let results = commit(&pool, work).await;
        for (reply, result) in replies.into_iter().zip(results) {
            // A caller that went away (its request dropped) needs no answer.
            let _ = reply.send(result);
        }
    }
}

type Work = (String, ExpectedVersion, Vec<NewEvent>);

/// Takes every position of a batch and inserts all its events in one statement; then sets
/// each written stream's next version.
const INSERT: &str = "WITH pos AS (
        UPDATE event_positions SET next_position = next_position + $1 WHERE id = 1 RETURNING next_position - $1 AS first
    ), ins AS (
        INSERT INTO events (position, stream_id, version, event_id, event_type, data, metadata, correlation_id, causation_id, time_ms)
        SELECT pos.first + t.ord - 1, t.sid, t.ver, t.id, t.typ, t.data, t.meta, t.corr, t.caus, sluice_now_ms()
        FROM pos, unnest($2::text[], $3::int8[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])
             WITH ORDINALITY AS t(sid, ver, id, typ, data, meta, corr, caus, ord)
    ), upd AS (
        UPDATE event_streams s SET next_version = u.next, status = 0
        FROM unnest($10::text[], $11::int8[]) AS u(sid, next) WHERE s.stream_id = u.sid
    )
    SELECT first FROM pos";

/// What the batch decided for one append.
#[derive(Debug, PartialEq)]
enum Decided {
    /// Appended: its first version, and the offset of its first event among the batch's rows.
    Append {
        first_version: u64,
        offset: u64,
        count: u64,
    },
    /// A re-sent append answered from a stored one (`first_version` on).
    Stored {
        first_version: u64,
        count: u64,
    },
    /// A re-sent append of one earlier in this batch (its index), from `first_version` on.
    Again {
        of: usize,
        first_version: u64,
        count: u64,
    },
    Refused(EventError),
}

/// The rows one INSERT writes, column by column, and each written stream's next version.
#[derive(Debug, Default)]
struct Rows {
    streams: Vec<String>,
    versions: Vec<i64>,
    columns: [Vec<Option<String>>; 6],
    next_versions: HashMap<String, u64>,
}

/// What the store holds of a batch's appends before it: each stream's state, the stored
/// version of each append's first event id (where it has one), and the ids stored from there.
#[derive(Debug, Default)]
struct Before {
    states: HashMap<String, StreamState>,
    first_ids: HashMap<(String, String), u64>,
    ids_from: HashMap<(String, u64), Vec<String>>,
}

/// Decides each append of `work` in order by core's rules, as if each had committed before
/// the next: a later append sees the versions and ids of the earlier ones (an earlier append's
/// retry in the same batch is answered from it). The appended events move into the rows.
fn decide(work: Vec<Work>, before: &Before) -> (Vec<Decided>, Rows) {
    let mut states: HashMap<String, StreamState> = HashMap::new();
    let mut written: HashMap<String, Vec<(u64, String, usize)>> = HashMap::new();
    let mut rows = Rows::default();
    let mut decided = Vec::with_capacity(work.len());
    for (index, (stream_id, expected, events)) in work.into_iter().enumerate() {
        let state =
            states.get(&stream_id).or_else(|| before.states.get(&stream_id)).copied().unwrap_or(StreamState::NONE);
        let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
        let in_batch = written.get(&stream_id).and_then(|w| w.iter().find(|(_, id, _)| id == ids[0]));
        let stored =
            before.first_ids.get(&(stream_id.clone(), ids[0].to_owned())).filter(|&&v| v >= state.visible_from);
        let outcome = match (in_batch, stored) {
            (Some(&(version, _, of)), _) => {
                let batch_ids: Vec<String> =
                    written[&stream_id].iter().filter(|(v, _, _)| *v >= version).map(|(_, id, _)| id.clone()).collect();
                let prior = Prior { first_version: version, ids: &batch_ids };
                events::decide_append(&state, expected, &ids, Some(prior)).map(|d| (d, Some(of)))
            }
            (None, Some(&version)) => {
                let none = Vec::new();
                let prior_ids = before.ids_from.get(&(stream_id.clone(), version)).unwrap_or(&none);
                let prior = Prior { first_version: version, ids: prior_ids };
                events::decide_append(&state, expected, &ids, Some(prior)).map(|d| (d, None))
            }
            (None, None) => events::decide_append(&state, expected, &ids, None).map(|d| (d, None)),
        };
        let count = events.len() as u64;
        decided.push(match outcome {
            Err(e) => Decided::Refused(e.into()),
            Ok((Decision::Duplicate { first_version }, Some(of))) => Decided::Again { of, first_version, count },
            Ok((Decision::Duplicate { first_version }, None)) => Decided::Stored { first_version, count },
            Ok((Decision::Append { first_version }, _)) => {
                let offset = rows.streams.len() as u64;
                let mine = written.entry(stream_id.clone()).or_default();
                for (k, e) in events.into_iter().enumerate() {
                    let version = first_version + k as u64;
                    mine.push((version, e.id.clone(), index));
                    rows.streams.push(stream_id.clone());
                    rows.versions.push(version as i64);
                    let c = &mut rows.columns;
                    c[0].push(Some(e.id));
                    c[1].push(Some(e.r#type));
                    c[2].push(Some(e.data));
                    c[3].push(e.metadata);
                    c[4].push(e.correlation_id);
                    c[5].push(e.causation_id);
                }
                let next = StreamState { next_version: first_version + count, status: StreamStatus::Live, ..state };
                rows.next_versions.insert(stream_id.clone(), next.next_version);
                states.insert(stream_id, next);
                Decided::Append { first_version, offset, count }
            }
        });
    }
    (decided, rows)
}

/// One transaction for `work`: an answer per append, in order. The decisions are made with the
/// batch's streams locked and before the position counter is taken, so the counter's lock is
/// held for one statement and the COMMIT only.
async fn commit(pool: &Pool, work: Vec<Work>) -> Vec<Result<AppendedEvents, EventError>> {
    let n = work.len();
    let all_failed = |e: EventError| vec![Err(e); n];
    let mut client = match pool.get().await {
        Ok(c) => c,
        Err(e) => return all_failed(EventError::Store(db_error(e))),
    };
    let tx = match client.transaction().await {
        Ok(tx) => tx,
        Err(e) => return all_failed(failed(e)),
    };
    let before = match read_before(&tx, &work).await {
        Ok(before) => before,
        Err(e) => return all_failed(e),
    };
    let streams: Vec<String> = work.iter().map(|(s, _, _)| s.clone()).collect();
    let (decided, rows) = decide(work, &before);
    // The positions of re-sent appends answered from stored ones.
    let mut stored = HashMap::new();
    for (index, d) in decided.iter().enumerate() {
        if let Decided::Stored { first_version, count } = d {
            match crate::events::stored_append(&tx, &streams[index], *first_version, *count as usize).await {
                Ok(a) => stored.insert(index, a),
                Err(e) => return all_failed(e),
            };
        }
    }
    let first_position = if rows.streams.is_empty() {
        0
    } else {
        let (sids, nexts): (Vec<&str>, Vec<i64>) =
            rows.next_versions.iter().map(|(s, next)| (s.as_str(), *next as i64)).unzip();
        let c = &rows.columns;
        let total = rows.streams.len() as i64;
        let inserted = tx
            .query_one(
                INSERT,
                &[&total, &rows.streams, &rows.versions, &c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &sids, &nexts],
            )
            .await;
        match inserted {
            Ok(row) => row.get::<_, i64>(0) as u64,
            Err(e) => return all_failed(failed(e)),
        }
    };
    let ended = if rows.streams.is_empty() { tx.rollback().await } else { tx.commit().await };
    if let Err(e) = ended
        && !rows.streams.is_empty()
    {
        // The COMMIT failed or its answer was lost: no append may be answered as made (a
        // client's retry with the same event ids is answered from the first if it did land).
        let error = failed(e);
        return decided
            .into_iter()
            .enumerate()
            .map(|(index, d)| match d {
                Decided::Refused(e) => Err(e),
                Decided::Stored { .. } => Ok(stored[&index]),
                _ => Err(error.clone()),
            })
            .collect();
    }
    let mut answers: Vec<Result<AppendedEvents, EventError>> = Vec::with_capacity(n);
    for (index, d) in decided.into_iter().enumerate() {
        answers.push(match d {
            Decided::Append { first_version, offset, count } => {
                Ok(AppendedEvents::span(first_version, first_position + offset, count, false))
            }
            Decided::Stored { .. } => Ok(stored[&index]),
            Decided::Again { of, first_version, count } => match &answers[of] {
                Ok(a) => {
                    let first_position = a.first_position + (first_version - a.first_version);
                    Ok(AppendedEvents::span(first_version, first_position, count, true))
                }
                Err(e) => Err(e.clone()),
            },
            Decided::Refused(e) => Err(e),
        });
    }
    answers
}

/// Locks the batch's streams (in id order) and reads what `decide` needs of the store.
async fn read_before(tx: &impl deadpool_postgres::GenericClient, work: &[Work]) -> Result<Before, EventError> {
    let mut streams: Vec<&str> = work.iter().map(|(s, _, _)| s.as_str()).collect();
    streams.sort_unstable();
    streams.dedup();
    let states = crate::events::lock_streams(tx, &streams).await?;
    let firsts: Vec<(&str, &str)> = work.iter().map(|(s, _, events)| (s.as_str(), events[0].id.as_str())).collect();
    let first_ids = crate::events::stored_versions(tx, &firsts).await?;
    let mut ids_from = HashMap::new();
    for ((stream_id, _), &version) in &first_ids {
        let count = work.iter().filter(|(s, _, _)| s == stream_id).map(|(_, _, e)| e.len()).max().unwrap_or(1);
        let ids = crate::events::stored_ids(tx, stream_id, version, count).await?;
        ids_from.insert((stream_id.clone(), version), ids);
    }
    let states = states.into_iter().map(|(s, st)| (s.to_string(), st)).collect();
    Ok(Before { states, first_ids, ids_from })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append(stream: &str, expected: ExpectedVersion, ids: &[&str]) -> Work {
        let events = ids
            .iter()
            .map(|id| NewEvent {
                id: id.to_string(),
                r#type: "T".into(),
                data: "{}".into(),
                metadata: None,
                correlation_id: None,
                causation_id: None,
            })
            .collect();
        (stream.to_string(), expected, events)
    }

    #[test]
    fn a_batch_decides_each_append_as_if_the_earlier_ones_had_committed() {
        let mut before = Before::default();
        before.states.insert("old".into(), StreamState { next_version: 3, ..StreamState::NONE });
        before.first_ids.insert(("old".into(), "o1".into()), 1);
        before.ids_from.insert(("old".into(), 1), vec!["o1".into(), "o2".into()]);
        before.first_ids.insert(("old".into(), "o2".into()), 2);
        before.ids_from.insert(("old".into(), 2), vec!["o2".into()]);
        let work = vec![
            append("new", ExpectedVersion::NoStream, &["a", "b"]),
            // The same append again, in the same batch: answered from the first.
            append("new", ExpectedVersion::NoStream, &["a", "b"]),
            // Versions go on from the first append's.
            append("new", ExpectedVersion::Exact(1), &["c"]),
            append("new", ExpectedVersion::Exact(1), &["d"]),
            // A re-sent append of stored events, and a stored id used for another event.
            append("old", ExpectedVersion::Exact(0), &["o1", "o2"]),
            append("old", ExpectedVersion::Exact(5), &["o2"]),
            append("old", ExpectedVersion::Any, &["o3"]),
        ];
        let (decided, rows) = decide(work, &before);
        assert_eq!(decided[0], Decided::Append { first_version: 0, offset: 0, count: 2 });
        assert_eq!(decided[1], Decided::Again { of: 0, first_version: 0, count: 2 });
        assert_eq!(decided[2], Decided::Append { first_version: 2, offset: 2, count: 1 });
        let wrong = sluice_core::events::AppendError::WrongExpectedVersion {
            expected: ExpectedVersion::Exact(1),
            actual: Some(2),
        };
        assert_eq!(decided[3], Decided::Refused(wrong.into()));
        assert_eq!(decided[4], Decided::Stored { first_version: 1, count: 2 });
        let conflict = sluice_core::events::AppendError::EventIdConflict { id: "o2".into(), version: 2 };
        assert_eq!(decided[5], Decided::Refused(conflict.into()));
        assert_eq!(decided[6], Decided::Append { first_version: 3, offset: 3, count: 1 });
        assert_eq!(rows.streams, ["new", "new", "new", "old"]);
        assert_eq!(rows.versions, [0, 1, 2, 3]);
        assert_eq!(rows.next_versions, HashMap::from([("new".to_string(), 3), ("old".to_string(), 4)]));
    }
}
