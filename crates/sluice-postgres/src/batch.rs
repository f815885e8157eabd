//! What both sends (standard queues in `messages.rs`, FIFO queues in `fifo.rs`) share: the
//! checks core's `Broker::send` makes last, new message ids, and the rows of one insert as
//! one array per column.

use sluice_core::{EntryError, NewMessage, QueueAttributes, TimeMs, ValidationError};

use crate::codec;

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
