//! What the sends (standard queues in `messages.rs`, FIFO queues in `fifo.rs`, bounded queues
//! in `depth.rs`) share: the checks core's `Broker::send` makes, new message ids, the rows of
//! one insert as one array per column, and a standard queue's insert.

use std::collections::HashMap;

use sluice_core::{EntryError, NewMessage, QueueAttributes, TimeMs, ValidationError};
use sluice_store::StoreError;
use tokio_postgres::types::ToSql;

use crate::{codec, db_error};

/// This node's clock, for the few checks made before a row reaches the database (whose clock
/// decides every stored time).
pub(crate) fn now_ms() -> TimeMs {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as TimeMs).unwrap_or(0)
}

pub(crate) fn new_message_id() -> uuid::Uuid {
    uuid::Uuid::now_v7()
}

/// The checks `Broker::send` makes last, on both queue types: the queue's size limit, and a
/// delay that ends within retention.
pub(crate) fn check_size_and_delay(
    message: &NewMessage,
    attributes: &QueueAttributes,
    now_ms: TimeMs,
) -> Result<(), EntryError> {
    let size_bytes = message.size_bytes();
    if size_bytes > attributes.message_bytes_max {
        return Err(EntryError::MessageTooLarge { size_bytes, max_bytes: attributes.message_bytes_max });
    }
    let visible_in_ms = match (message.delay_ms, message.deliver_at_ms) {
        (_, Some(at)) => at.saturating_sub(now_ms),
        (Some(delay), None) => delay,
        (None, None) => attributes.delay_ms,
    };
    if visible_in_ms >= attributes.retention_ms {
        let field = if message.deliver_at_ms.is_some() { "deliver_at" } else { "delay_ms" };
        return Err(ValidationError::new(
            field,
            format!(
                "the message would become visible after this queue's retention ({} ms) ends",
                attributes.retention_ms
            ),
        )
        .into());
    }
    Ok(())
}

/// The parameters of `INSERT` (and of `fifo::INSERT`), one array per column.
#[derive(Default)]
pub(crate) struct Batch {
    pub ids: Vec<uuid::Uuid>,
    pub priorities: Vec<i16>,
    pub delays_ms: Vec<i64>,
    pub deliver_at_ms: Vec<Option<i64>>,
    pub sizes_bytes: Vec<i64>,
    pub group_ids: Vec<Option<String>>,
    pub bodies: Vec<Vec<u8>>,
    pub binary: Vec<bool>,
    pub attributes: Vec<serde_json::Value>,
    pub system_attributes: Vec<serde_json::Value>,
    pub envelopes: Vec<serde_json::Value>,
}

impl Batch {
    pub fn push(&mut self, id: uuid::Uuid, m: NewMessage, queue: &QueueAttributes) {
        self.ids.push(id);
        self.priorities.push(i16::from(m.priority));
        // Bounded by DELAY_MS_MAX and retention; the casts cannot wrap.
        self.delays_ms.push(m.delay_ms.unwrap_or(queue.delay_ms) as i64);
        self.deliver_at_ms.push(m.deliver_at_ms.map(|t| t.min(i64::MAX as u64) as i64));
        self.sizes_bytes.push(m.size_bytes() as i64);
        self.group_ids.push(m.envelope.group_id.clone());
        self.attributes.push(codec::attributes_to_json(&m.attributes));
        self.system_attributes.push(codec::attributes_to_json(&m.system_attributes));
        self.envelopes.push(codec::envelope_to_json(&m.envelope));
        self.binary.push(m.body_binary);
        self.bodies.push(m.body);
    }
}

/// Inserts a batch in the order given, so sequence numbers follow send order. Inserts nothing
/// when the queue is gone.
pub(crate) const INSERT: &str = "
INSERT INTO messages (queue_id, id, priority, sent_at, visible_at, size_bytes, group_id, body, body_binary,
                      attributes, system_attributes, envelope)
SELECT $1, r.id, r.priority, sluice_now_ms(),
       CASE WHEN r.deliver_at IS NULL THEN sluice_now_ms() + r.delay_ms
            ELSE greatest(r.deliver_at, sluice_now_ms()) END,
       r.size_bytes, r.group_id, r.body, r.body_binary, r.attributes, r.system_attributes, r.envelope
FROM unnest($2::uuid[], $3::int2[], $4::int8[], $5::int8[], $6::int8[], $7::text[], $8::bytea[], $9::bool[],
            $10::jsonb[], $11::jsonb[], $12::jsonb[])
     WITH ORDINALITY AS r(id, priority, delay_ms, deliver_at, size_bytes, group_id, body, body_binary,
                          attributes, system_attributes, envelope, ord)
WHERE EXISTS (SELECT 1 FROM queues WHERE id = $1)
ORDER BY r.ord
RETURNING seq, id";

/// The checks core's `Broker::send` makes before accepting a message into a standard queue.
/// `now_ms` (this node's clock) only matters for `deliver_at`, to refuse a time beyond
/// retention; the message's actual times come from the database's clock. FIFO queues check
/// their own rules first (see `fifo::send`).
pub fn admit(message: &NewMessage, attributes: &QueueAttributes, now_ms: TimeMs) -> Result<(), EntryError> {
    message.validate()?;
    if message.dedup_id.is_some() {
        return Err(ValidationError::new("dedup_id", "only FIFO queues deduplicate; this queue is standard").into());
    }
    check_size_and_delay(message, attributes, now_ms)
}

/// Inserts `batch` into queue `queue_id` in the caller's transaction; each message's sequence
/// number by its id. `QueueNotFound` when the queue was deleted since it was looked up.
pub(crate) async fn insert_in(
    tx: &deadpool_postgres::Transaction<'_>,
    (name, queue_id): (&str, i64),
    batch: &Batch,
) -> Result<HashMap<uuid::Uuid, i64>, StoreError> {
    let statement = tx.prepare_cached(INSERT).await.map_err(db_error)?;
    let rows = tx.query(&statement, &insert_params(&queue_id, batch)).await.map_err(db_error)?;
    if rows.is_empty() {
        // The queue was deleted between the look-up and the insert.
        return Err(sluice_core::BrokerError::QueueNotFound(name.to_string()).into());
    }
    Ok(rows.iter().map(|r| (r.get("id"), r.get("seq"))).collect())
}

/// The parameters of `INSERT` for a batch into queue `queue_id`.
pub(crate) fn insert_params<'a>(queue_id: &'a i64, batch: &'a Batch) -> [&'a (dyn ToSql + Sync); 12] {
    [
        queue_id,
        &batch.ids,
        &batch.priorities,
        &batch.delays_ms,
        &batch.deliver_at_ms,
        &batch.sizes_bytes,
        &batch.group_ids,
        &batch.bodies,
        &batch.binary,
        &batch.attributes,
        &batch.system_attributes,
        &batch.envelopes,
    ]
}
