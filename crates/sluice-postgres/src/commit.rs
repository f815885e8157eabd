//! `CommitStore::commit`: every write in one transaction, in order; the first refused message
//! or failed record condition rolls the whole transaction back. Long polls of the queues it sent
//! into (and the streams it appended to) are woken after the commit, as for a plain send or
//! append. An append takes its offsets from its partitions' rows in the same transaction, so
//! its records appear, gapless, exactly when the rest of the commit does.

use sluice_store::{
    Committed, Conflict, LogError, Refused, StoreError, Write, WriteOutcome, validate_commit, with_outcomes,
};

use crate::queues::lookup;
use crate::{Counters, Inner, db_error};

const PUT: &str = "INSERT INTO records (kind, key, value, updated_at) VALUES ($1, $2, $3, sluice_now_ms())
    ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at";
const INSERT: &str = "INSERT INTO records (kind, key, value, updated_at) VALUES ($1, $2, $3, sluice_now_ms())
    ON CONFLICT (kind, key) DO NOTHING";
const REPLACE: &str = "UPDATE records SET value = $4, updated_at = sluice_now_ms()
    WHERE kind = $1 AND key = $2 AND value = $3";
const DELETE: &str = "DELETE FROM records WHERE kind = $1 AND key = $2";

pub async fn commit(
    inner: &Inner,
    rr: &crate::streams::RoundRobin,
    writes: Vec<Write>,
) -> Result<Committed, StoreError> {
    validate_commit(&writes)?;
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(db_error)?;
    let mut outcomes = Vec::with_capacity(writes.len());
    let mut woken = Vec::new();
    let mut appends = Vec::new();
    let (mut sent, mut changed) = (0u64, 0u64);
    for (index, write) in writes.into_iter().enumerate() {
        // Dropping `tx` without committing rolls every earlier write back.
        let refused = |conflict| Ok(Err(Refused { write: index, conflict }));
        match write {
            Write::Send { queue, messages } => {
                let q = lookup(&tx, &queue).await?;
                match crate::messages::send_in(&tx, (&queue, &q), messages).await? {
                    Ok((answers, inserted)) => {
                        sent += inserted;
                        changed += inserted;
                        woken.push(q.id);
                        outcomes.push(WriteOutcome::Sent(answers));
                    }
                    Err((message, error)) => return refused(Conflict::MessageRefused { message, error }),
                }
            }
            Write::PutRecord { kind, key, value } => {
                changed += execute(&tx, PUT, &[&kind, &key, &value]).await?;
                outcomes.push(WriteOutcome::Recorded);
            }
            Write::InsertRecord { kind, key, value } => {
                if execute(&tx, INSERT, &[&kind, &key, &value]).await? == 0 {
                    return refused(Conflict::RecordExists);
                }
                changed += 1;
                outcomes.push(WriteOutcome::Recorded);
            }
            Write::ReplaceRecord { kind, key, expected, value } => {
                if execute(&tx, REPLACE, &[&kind, &key, &expected, &value]).await? == 0 {
                    return refused(Conflict::RecordChanged);
                }
                changed += 1;
                outcomes.push(WriteOutcome::Recorded);
            }
            Write::DeleteRecord { kind, key } => {
                changed += execute(&tx, DELETE, &[&kind, &key]).await?;
                outcomes.push(WriteOutcome::Recorded);
            }
            Write::RecordOutcomes { kind, key, expected, value } => {
                let value = with_outcomes(&value, &outcomes);
                match expected {
                    Some(expected) => {
                        if execute(&tx, REPLACE, &[&kind, &key, &expected, &value]).await? == 0 {
                            return refused(Conflict::RecordChanged);
                        }
                        changed += 1;
                    }
                    None => changed += execute(&tx, PUT, &[&kind, &key, &value]).await?,
                }
                outcomes.push(WriteOutcome::Recorded);
            }
            Write::Append { stream, records } => {
                let appended = match crate::streams::append_in(&tx, rr, &stream, records, None).await {
                    Ok(appended) => appended,
                    Err(LogError::StreamNotFound(name)) => return refused(Conflict::StreamNotFound(name)),
                    Err(LogError::Store(e)) => return Err(e),
                    Err(LogError::Invalid(v)) => return Err(v.into()),
                    // Only an append with an expectation meets the rest, and a commit has none.
                    Err(other) => unreachable!("an append without an expectation failed with {other}"),
                };
                let mut places = Vec::with_capacity(appended.results.len());
                for (record, result) in appended.results.iter().enumerate() {
                    match result {
                        Ok(place) => places.push(*place),
                        Err(error) => return refused(Conflict::RecordRefused { record, error: error.clone() }),
                    }
                }
                outcomes.push(WriteOutcome::Appended(places));
                appends.push(appended);
            }
        }
    }
    tx.commit().await.map_err(db_error)?;
    drop(client);
    Counters::add(&inner.counters.messages_sent, sent);
    inner.counters.committed(changed);
    woken.sort_unstable();
    woken.dedup();
    inner.notify(&woken).await;
    for appended in appends {
        appended.done(inner).await;
    }
    Ok(Ok(outcomes))
}

/// Runs one statement in the transaction; answers how many rows it changed.
async fn execute(
    tx: &deadpool_postgres::Transaction<'_>,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<u64, StoreError> {
    let statement = tx.prepare_cached(sql).await.map_err(db_error)?;
    tx.execute(&statement, params).await.map_err(db_error)
}
