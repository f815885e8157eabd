//! FIFO queues' send rules and dedup keys, as pure functions that the PostgreSQL backend applies
//! too.

use crate::attributes::{DedupScope, QueueAttributes};
use crate::message::NewMessage;
use crate::validation::ValidationError;

/// Checks what a FIFO queue demands of a send and returns its deduplication key (the dedup id,
/// or the body's SHA-256 with content-based dedup; prefixed by the group under
/// `DedupScope::MessageGroup`). Public so that backends that cannot run `Broker` over shared
/// state (PostgreSQL) apply the same rules.
pub fn fifo_send_rules(attributes: &QueueAttributes, message: &NewMessage) -> Result<String, ValidationError> {
    let Some(group) = &message.envelope.group_id else {
        return Err(ValidationError::new("group_id", "FIFO queues need a group_id on every message"));
    };
    if message.delay_ms.is_some() || message.deliver_at_ms.is_some() {
        return Err(ValidationError::new(
            "delay_ms",
            "FIFO queues take only the queue's delay; set delay_ms on the queue instead",
        ));
    }
    if message.priority != 0 {
        return Err(ValidationError::new("priority", "FIFO queues deliver in send order; priorities do not apply"));
    }
    let id = match &message.dedup_id {
        Some(id) => id.clone(),
        None if attributes.content_based_dedup => content_dedup_id(&message.body),
        None => {
            return Err(ValidationError::new(
                "dedup_id",
                "give a dedup_id, or enable content_based_dedup on the queue",
            ));
        }
    };
    Ok(match attributes.dedup_scope {
        DedupScope::Queue => id,
        // The group's length first, so that no (group, id) pair can spell another's key.
        DedupScope::MessageGroup => format!("{}:{group}{id}", group.len()),
    })
}

/// The dedup id of a FIFO message sent without one to a queue with content-based dedup: the
/// lowercase hex SHA-256 of its body (as SQS).
pub fn content_dedup_id(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod dedup_tests {
    #[test]
    fn content_dedup_id_is_the_hex_sha256_of_the_body() {
        // FIPS 180-2 test vector.
        assert_eq!(super::content_dedup_id(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
