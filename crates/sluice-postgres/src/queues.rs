//! Queue calls: create, read with live counts, list, update, delete, purge.
//!
//! The checks are core's (`validate_queue_name`, `QueueAttributes::validate`, `apply`,
//! `same_config`); what `Broker` checks against its in-memory map (the dead-letter queue exists
//! and is of the same type, the queue count, the `.fifo` name suffix) is checked here against
//! the table inside the same transaction. Purge and delete also forget the queue's
//! deduplication keys, as in core (and SQS).

use deadpool_postgres::GenericClient;
use sluice_core::broker::{QueueStats, QueueView};
use sluice_core::limits::{FIFO_SUFFIX, QUEUES_MAX};
use sluice_core::name::validate_queue_name;
use sluice_core::overflow::RefusalCounts;
use sluice_core::{BrokerError, QueueAttributes, QueueAttributesPatch, ValidationError};
use sluice_store::StoreError;
use tokio_postgres::Row;

use crate::codec::{self, ms};
use crate::{Inner, db_error};

/// A queue as the other modules need it: its id and configuration.
pub struct QueueRow {
    pub id: u64,
    pub attributes: QueueAttributes,
}

/// A queue with its live counts. `visible` includes holds that ran out and await the sweeper,
/// as they are receivable; `oldest` is the oldest message in any state.
macro_rules! view_select {
    () => {
        "SELECT q.id, q.name, q.attributes, q.created_at, q.modified_at, t.now,
            (SELECT count(*) FROM messages m WHERE m.queue_id = q.id AND NOT m.in_flight AND m.visible_at <= t.now)
              + (SELECT count(*) FROM messages m WHERE m.queue_id = q.id AND m.in_flight AND m.visible_at <= t.now)
              AS visible,
            (SELECT count(*) FROM messages m WHERE m.queue_id = q.id AND m.in_flight AND m.visible_at > t.now)
              AS in_flight,
            (SELECT count(*) FROM messages m WHERE m.queue_id = q.id AND NOT m.in_flight AND m.visible_at > t.now)
              AS delayed,
            (SELECT min(m.sent_at) FROM messages m WHERE m.queue_id = q.id) AS oldest_sent_at,
            (SELECT coalesce(sum(m.size_bytes), 0)::int8 FROM messages m WHERE m.queue_id = q.id) AS depth_bytes,
            q.refused_full, q.dropped_head, q.rejected_to_dlq, q.expired_to_dlq, q.rate_limited,
            d.id AS dead_letter_id,
            (SELECT count(*) FROM messages m WHERE m.queue_id = d.id) AS dead_letter_depth
         FROM queues q
         CROSS JOIN (SELECT sluice_now_ms() AS now) t
         LEFT JOIN queues d ON d.name = q.dead_letter_queue AND d.id <> q.id"
    };
}

const GET_VIEW: &str = concat!(view_select!(), " WHERE q.name = $1");
const LIST_VIEWS: &str = concat!(
    view_select!(),
    " WHERE starts_with(q.name, $1) AND ($2::text IS NULL OR q.name > $2) ORDER BY q.name LIMIT $3"
);
const LOOKUP: &str = "SELECT id, attributes FROM queues WHERE name = $1";
const INSERT: &str = "INSERT INTO queues (name, attributes, visibility_timeout_ms, delay_ms, retention_ms,
        message_bytes_max, dead_letter_queue, max_receive_count, fifo, created_at, modified_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, sluice_now_ms(), sluice_now_ms())
    ON CONFLICT (name) DO NOTHING
    RETURNING id";
const UPDATE: &str = "UPDATE queues SET attributes = $2, visibility_timeout_ms = $3, delay_ms = $4,
        retention_ms = $5, message_bytes_max = $6, dead_letter_queue = $7, max_receive_count = $8,
        modified_at = sluice_now_ms()
    WHERE id = $1";

fn view_from_row(row: &Row) -> Result<QueueView, StoreError> {
    let read = || -> Result<QueueView, codec::DecodeError> {
        let now = ms(row.try_get("now")?);
        let oldest: Option<i64> = row.try_get("oldest_sent_at")?;
        let dead_letter_id: Option<i64> = row.try_get("dead_letter_id")?;
        let count = |name: &str| -> Result<u64, codec::DecodeError> { Ok(ms(row.try_get(name)?)) };
        Ok(QueueView {
            id: ms(row.try_get("id")?),
            name: row.try_get("name")?,
            attributes: codec::queue_attributes_from_json(row.try_get("attributes")?)?,
            created_at: ms(row.try_get("created_at")?),
            modified_at: ms(row.try_get("modified_at")?),
            stats: QueueStats {
                visible: count("visible")?,
                in_flight: count("in_flight")?,
                delayed: count("delayed")?,
                oldest_age_ms: oldest.map(|t| now.saturating_sub(ms(t))),
                dead_letter_depth: match dead_letter_id {
                    Some(_) => Some(count("dead_letter_depth")?),
                    None => None,
                },
                depth_bytes: count("depth_bytes")?,
                refusals: RefusalCounts {
                    queue_full: count("refused_full")?,
                    drop_head: count("dropped_head")?,
                    rejected_to_dlq: count("rejected_to_dlq")?,
                    expired_to_dlq: count("expired_to_dlq")?,
                    rate_limited: count("rate_limited")?,
                },
            },
        })
    };
    read().map_err(db_error)
}

/// The queue named `name`, or `QueueNotFound`.
pub async fn lookup(client: &impl GenericClient, name: &str) -> Result<QueueRow, StoreError> {
    let statement = client.prepare_cached(LOOKUP).await.map_err(db_error)?;
    let row = client.query_opt(&statement, &[&name]).await.map_err(db_error)?;
    let row = row.ok_or_else(|| BrokerError::QueueNotFound(name.to_string()))?;
    let id: i64 = row.get(0);
    let attributes = codec::queue_attributes_from_json(row.get(1)).map_err(db_error)?;
    Ok(QueueRow { id: ms(id), attributes })
}

async fn view(client: &impl GenericClient, name: &str) -> Result<QueueView, StoreError> {
    let statement = client.prepare_cached(GET_VIEW).await.map_err(db_error)?;
    let row = client.query_opt(&statement, &[&name]).await.map_err(db_error)?;
    view_from_row(&row.ok_or_else(|| BrokerError::QueueNotFound(name.to_string()))?)
}

/// Core's `Broker::check_dead_letter`, against the table.
async fn check_dead_letter(
    client: &impl GenericClient,
    name: &str,
    attributes: &QueueAttributes,
) -> Result<(), StoreError> {
    if let Some(dl) = &attributes.dead_letter {
        if dl.queue == name {
            return Err(ValidationError::new("dead_letter.queue", "a queue cannot be its own dead-letter queue").into());
        }
        let found =
            client.query_opt("SELECT fifo FROM queues WHERE name = $1", &[&dl.queue]).await.map_err(db_error)?;
        let Some(found) = found else {
            return Err(BrokerError::DeadLetterQueueNotFound(dl.queue.clone()).into());
        };
        if found.get::<_, bool>(0) != attributes.fifo {
            let message = if attributes.fifo {
                "a FIFO queue's dead-letter queue must be a FIFO queue"
            } else {
                "a standard queue's dead-letter queue must be a standard queue"
            };
            return Err(ValidationError::new("dead_letter.queue", message).into());
        }
    }
    Ok(())
}

/// The columns that repeat attribute fields for SQL, in the order of `INSERT`/`UPDATE`'s
/// parameters after the attributes themselves.
struct Columns {
    json: serde_json::Value,
    visibility_timeout_ms: i64,
    delay_ms: i64,
    retention_ms: i64,
    message_bytes_max: i64,
    dead_letter_queue: Option<String>,
    max_receive_count: Option<i32>,
    fifo: bool,
}

impl Columns {
    fn of(a: &QueueAttributes) -> Columns {
        // Validated attributes are far below i64::MAX; the casts cannot wrap.
        Columns {
            json: codec::queue_attributes_to_json(a),
            visibility_timeout_ms: a.visibility_timeout_ms as i64,
            delay_ms: a.delay_ms as i64,
            retention_ms: a.retention_ms as i64,
            message_bytes_max: a.message_bytes_max as i64,
            dead_letter_queue: a.dead_letter.as_ref().map(|d| d.queue.clone()),
            // The number SQL compares receive counts with (`fragments::dead`), as core defines
            // it. Rows keep what it was when they were written: a change to its definition in
            // core needs a migration that rewrites the column from `attributes`.
            max_receive_count: a.dead_letter.as_ref().map(|d| d.exhausted_receive_count() as i32),
            fifo: a.fifo,
        }
    }
}

/// The answer to a create that meets an existing queue: the queue itself when it has the same
/// configuration, `QueueExists` when not; `None` when there is no such queue.
async fn existing(
    client: &impl GenericClient,
    name: &str,
    attributes: &QueueAttributes,
) -> Result<Option<(QueueView, bool)>, StoreError> {
    match lookup(client, name).await {
        Ok(q) if q.attributes.same_config(attributes) => Ok(Some((view(client, name).await?, false))),
        Ok(_) => Err(BrokerError::QueueExists(name.to_string()).into()),
        Err(StoreError::Broker(BrokerError::QueueNotFound(_))) => Ok(None),
        Err(e) => Err(e),
    }
}

pub async fn create(inner: &Inner, name: &str, attributes: QueueAttributes) -> Result<(QueueView, bool), StoreError> {
    validate_queue_name(name)?;
    attributes.validate()?;
    if name.ends_with(FIFO_SUFFIX) && !attributes.fifo {
        return Err(ValidationError::new("fifo", "names ending in .fifo belong to FIFO queues; set fifo: true").into());
    }
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(db_error)?;
    if let Some(found) = existing(&tx, name, &attributes).await? {
        return Ok(found);
    }
    check_dead_letter(&tx, name, &attributes).await?;
    let count: i64 = tx.query_one("SELECT count(*) FROM queues", &[]).await.map_err(db_error)?.get(0);
    if count as usize >= QUEUES_MAX {
        return Err(BrokerError::TooManyQueues.into());
    }
    let c = Columns::of(&attributes);
    let inserted = tx
        .query_opt(
            INSERT,
            &[
                &name,
                &c.json,
                &c.visibility_timeout_ms,
                &c.delay_ms,
                &c.retention_ms,
                &c.message_bytes_max,
                &c.dead_letter_queue,
                &c.max_receive_count,
                &c.fifo,
            ],
        )
        .await
        .map_err(db_error)?;
    if inserted.is_none() {
        // Another node created it since our look; its attributes decide, as if it came first.
        drop(tx);
        let client = inner.client().await?;
        return existing(&client, name, &attributes)
            .await?
            .ok_or_else(|| db_error(codec::DecodeError(format!("queue {name:?} vanished while being created"))));
    }
    let created = view(&tx, name).await?;
    tx.commit().await.map_err(db_error)?;
    inner.counters.committed(1);
    Ok((created, true))
}

pub async fn get(inner: &Inner, name: &str) -> Result<QueueView, StoreError> {
    let client = inner.client().await?;
    view(&client, name).await
}

pub async fn list(
    inner: &Inner,
    prefix: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<QueueView>, StoreError> {
    let client = inner.client().await?;
    let statement = client.prepare_cached(LIST_VIEWS).await.map_err(db_error)?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = client.query(&statement, &[&prefix, &after, &limit]).await.map_err(db_error)?;
    rows.iter().map(view_from_row).collect()
}

pub async fn update(inner: &Inner, name: &str, patch: QueueAttributesPatch) -> Result<QueueView, StoreError> {
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(db_error)?;
    let row = tx
        .query_opt("SELECT id, attributes FROM queues WHERE name = $1 FOR UPDATE", &[&name])
        .await
        .map_err(db_error)?
        .ok_or_else(|| BrokerError::QueueNotFound(name.to_string()))?;
    let id: i64 = row.get(0);
    let current = codec::queue_attributes_from_json(row.get(1)).map_err(db_error)?;
    let next = current.apply(&patch);
    next.validate()?;
    check_dead_letter(&tx, name, &next).await?;
    let c = Columns::of(&next);
    tx.execute(
        UPDATE,
        &[
            &id,
            &c.json,
            &c.visibility_timeout_ms,
            &c.delay_ms,
            &c.retention_ms,
            &c.message_bytes_max,
            &c.dead_letter_queue,
            &c.max_receive_count,
        ],
    )
    .await
    .map_err(db_error)?;
    let updated = view(&tx, name).await?;
    tx.commit().await.map_err(db_error)?;
    inner.counters.committed(1);
    Ok(updated)
}

/// Deletes the queue and its messages in one transaction, and records the id so that the
/// sweeper removes any message a racing send slipped in under it.
pub async fn delete(inner: &Inner, name: &str) -> Result<(), StoreError> {
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(db_error)?;
    let row = tx
        .query_opt("DELETE FROM queues WHERE name = $1 RETURNING id", &[&name])
        .await
        .map_err(db_error)?
        .ok_or_else(|| BrokerError::QueueNotFound(name.to_string()))?;
    let id: i64 = row.get(0);
    let removed = tx.execute("DELETE FROM messages WHERE queue_id = $1", &[&id]).await.map_err(db_error)?;
    tx.execute("DELETE FROM dedup WHERE queue_id = $1", &[&id]).await.map_err(db_error)?;
    tx.execute("DELETE FROM fair_groups WHERE queue_id = $1", &[&id]).await.map_err(db_error)?;
    tx.execute("INSERT INTO deleted_queues (id, deleted_at) VALUES ($1, sluice_now_ms())", &[&id])
        .await
        .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    inner.counters.committed(removed + 2);
    // Long polls on the queue end (with nothing) as soon as they look again.
    inner.notify(&[ms(id)]).await;
    Ok(())
}

/// Deletes every message of the queue and forgets its deduplication keys and when its groups
/// were served, in one transaction.
pub async fn purge(inner: &Inner, name: &str) -> Result<u64, StoreError> {
    let mut client = inner.client().await?;
    let q = lookup(&client, name).await?;
    let id = q.id as i64;
    let tx = client.transaction().await.map_err(db_error)?;
    let removed = tx.execute("DELETE FROM messages WHERE queue_id = $1", &[&id]).await.map_err(db_error)?;
    let forgotten = tx.execute("DELETE FROM dedup WHERE queue_id = $1", &[&id]).await.map_err(db_error)?
        + tx.execute("DELETE FROM fair_groups WHERE queue_id = $1", &[&id]).await.map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    inner.counters.committed(removed + forgotten);
    Ok(removed)
}
