//! Transactional enqueue: a message that exists if and only if the application's own
//! transaction commits.
//!
//! The work is done by the SQL function `sluice_send` (migration 2), so applications in any
//! language can call it; this is the typed Rust door to it. It checks the message with core's
//! `NewMessage::validate` first (so a bad message gives the same field-named error as the API),
//! then lets the function check what depends on the queue (it exists, the size limit, a delay
//! within retention). The wake-up NOTIFY is part of the caller's transaction: delivered at
//! commit, dropped on rollback.
//!
//! `sluice_send` is resolved through the transaction's search_path, which must therefore reach
//! the schema Sluice was migrated into (it is `public` unless a schema was chosen). It refuses
//! FIFO queues (migration 3): it takes no dedup id, so it cannot apply FIFO's send rules.

use sluice_core::{EntryError, MessageId, NewMessage};

use crate::codec;

#[derive(Debug, thiserror::Error)]
pub enum TransactionalSendError {
    /// The message breaks a rule that does not depend on the queue; nothing was sent and the
    /// transaction is untouched.
    #[error(transparent)]
    Invalid(#[from] EntryError),
    /// System attributes are set by infrastructure (SQS trace headers), not by applications
    /// enqueuing from SQL; `sluice_send` has no parameter for them.
    #[error("system attributes cannot be sent from a transaction")]
    SystemAttributes,
    /// `sluice_send` refused the message (unknown queue, too large, delay beyond retention) or
    /// the database failed. The caller's transaction is aborted, as after any failed statement.
    #[error("sluice_send failed: {}", database_message(.0))]
    Database(#[from] tokio_postgres::Error),
}

/// The database's own message ("sluice_send: queue 'q' is full ..."), which `Display` of
/// `tokio_postgres::Error` leaves out ("db error").
fn database_message(e: &tokio_postgres::Error) -> String {
    e.as_db_error().map_or_else(|| e.to_string(), |db| db.message().to_owned())
}

/// Enqueues `message` on `queue` as part of `tx`. Returns the new message's id; the message is
/// visible to consumers (subject to its delay) once `tx` commits, and never if it rolls back.
pub async fn send_in_transaction(
    tx: &tokio_postgres::Transaction<'_>,
    queue: &str,
    message: &NewMessage,
) -> Result<MessageId, TransactionalSendError> {
    message.validate().map_err(EntryError::from)?;
    if !message.system_attributes.is_empty() {
        return Err(TransactionalSendError::SystemAttributes);
    }
    let attributes = codec::attributes_to_json(&message.attributes);
    let envelope = codec::envelope_to_json(&message.envelope);
    // Validated: at most DELAY_MS_MAX, so the casts cannot wrap.
    let delay_ms = message.delay_ms.map(|d| d as i64);
    let deliver_at_ms = message.deliver_at_ms.map(|t| t.min(i64::MAX as u64) as i64);
    let priority = i32::from(message.priority);
    let row = tx
        .query_one(
            "SELECT sluice_send($1, $2, $3, $4, $5, $6, $7, $8)",
            &[
                &queue,
                &message.body,
                &attributes,
                &delay_ms,
                &priority,
                &envelope,
                &message.body_binary,
                &deliver_at_ms,
            ],
        )
        .await?;
    let id: uuid::Uuid = row.get(0);
    Ok(MessageId(id.as_u128()))
}
