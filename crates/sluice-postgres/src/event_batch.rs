//! Group commit of event appends on one node. The position counter's row lock serialises every
//! append of every node from its insert to its commit (see `events.rs`), so one append per
//! transaction means one WAL flush per append. Here the appends that arrive while a transaction
//! commits wait, and go together in the next one: each in a savepoint of its own (a refused
//! append rolls back alone and gets its own answer), one COMMIT and one flush for all of them,
//! and every answer only after that COMMIT succeeded.
//!
//! Locks stay in the order that keeps appends from deadlocking: a batch first locks every
//! stream row it writes, in stream id order (creating the rows of new streams), and only then
//! takes the position counter with its first insert. A single append is the batch of one.
//! A row made for a new stream whose append was then refused stays, empty; an empty row reads
//! as a stream never written (`StreamState::NONE`).

use deadpool_postgres::Pool;
use sluice_core::events::{ExpectedVersion, NewEvent};
use sluice_store::{AppendedEvents, EventError, StoreError};
use tokio::sync::{mpsc, oneshot};

use crate::db_error;

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

/// One transaction for `work`: an answer per append, in order.
async fn commit(pool: &Pool, work: Vec<Work>) -> Vec<Result<AppendedEvents, EventError>> {
    let n = work.len();
    let all_failed = |e: EventError| vec![Err(e); n];
    let mut client = match pool.get().await {
        Ok(c) => c,
        Err(e) => return all_failed(EventError::Store(db_error(e))),
    };
    let mut tx = match client.transaction().await {
        Ok(tx) => tx,
        Err(e) => return all_failed(crate::events::failed(e)),
    };
    let mut streams: Vec<&str> = work.iter().map(|(s, _, _)| s.as_str()).collect();
    streams.sort_unstable();
    streams.dedup();
    for stream_id in streams {
        if let Err(e) = crate::events::lock_stream(&tx, stream_id).await {
            return all_failed(e);
        }
    }
    let mut results = Vec::with_capacity(n);
    for (stream_id, expected, events) in work {
        let savepoint = match tx.savepoint("append").await {
            Ok(sp) => sp,
            Err(e) => return all_failed(crate::events::failed(e)),
        };
        let outcome = crate::events::append_locked(&savepoint, &stream_id, expected, events).await;
        let settled = match outcome {
            Ok(_) => savepoint.commit().await,
            Err(_) => savepoint.rollback().await,
        };
        if let Err(e) = settled {
            return all_failed(crate::events::failed(e));
        }
        results.push(outcome);
    }
    // Nothing appended (refusals, re-sent appends): nothing to make durable.
    let wrote = results.iter().any(|r| matches!(r, Ok(a) if !a.duplicate));
    let ended = if wrote { tx.commit().await } else { tx.rollback().await };
    match ended {
        Ok(()) => results,
        // The COMMIT failed or its answer was lost: no append may be answered as made (a
        // client's retry with the same event ids is answered from the first if it did land).
        Err(e) if wrote => {
            let error = crate::events::failed(e);
            results.into_iter().map(|r| r.and(Err(error.clone()))).collect()
        }
        Err(_) => results,
    }
}
