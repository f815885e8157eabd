//! The idempotent consumer: messages are delivered at least once, so a consumer that changes
//! its own PostgreSQL database records each message id it handled in a `processed_messages`
//! table, in the same transaction as the change. A redelivered message then finds its id there
//! and is skipped, and a crash between the change and the ack leaves both or neither.
//!
//! [`ProcessedMessages::begin`] opens the transaction and inserts the id
//! (`INSERT ... ON CONFLICT DO NOTHING`): a new id gives the transaction to do the change in
//! and commit; an id already there gives `None`, and the message should just be acked.
//! [`ProcessedMessages::sweep`] deletes ids older than the TTL, which must be longer than the
//! longest time a message can be redelivered (the queue's retention). Times are the
//! database's (`now()`), so every consumer process agrees on them.

use std::time::Duration;

use tokio_postgres::{Client, Transaction};

/// The table's name when none is given.
pub const PROCESSED_TABLE_DEFAULT: &str = "processed_messages";
/// Longest table name, in bytes (PostgreSQL's identifier limit).
pub const TABLE_NAME_LEN_MAX: usize = 63;

/// The processed-messages table of one application database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessedMessages {
    table: String,
    insert: String,
}

/// A table name that is not a plain identifier (it is written into SQL, so only
/// `[a-z_][a-z0-9_]*`, at most [`TABLE_NAME_LEN_MAX`] bytes, is taken).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a table name: use 1 to 63 of [a-z0-9_], not starting with a digit")]
pub struct BadTableName(
    /// The name refused.
    pub String,
);

impl ProcessedMessages {
    /// The table [`PROCESSED_TABLE_DEFAULT`].
    pub fn new() -> ProcessedMessages {
        ProcessedMessages::with_table(PROCESSED_TABLE_DEFAULT).expect("the default name is valid")
    }

    /// The table named `table`.
    pub fn with_table(table: &str) -> Result<ProcessedMessages, BadTableName> {
        let ok = !table.is_empty()
            && table.len() <= TABLE_NAME_LEN_MAX
            && !table.starts_with(|c: char| c.is_ascii_digit())
            && table.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !ok {
            return Err(BadTableName(table.to_string()));
        }
        let insert = format!("INSERT INTO {table} (consumer, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING");
        Ok(ProcessedMessages { table: table.to_string(), insert })
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the table if it does not exist: `(consumer, message_id)` as its key, so that
    /// several consumers of one message (one per queue or group) each handle it once.
    pub async fn create_table(&self, client: &Client) -> Result<(), tokio_postgres::Error> {
        let t = &self.table;
        client
            .batch_execute(&format!(
                "CREATE TABLE IF NOT EXISTS {t} (
                    consumer text NOT NULL,
                    message_id text NOT NULL,
                    processed_at timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (consumer, message_id));
                 CREATE INDEX IF NOT EXISTS {t}_processed_at ON {t} (processed_at);"
            ))
            .await
    }

    /// Starts handling `message_id` for `consumer`: `Some(transaction)`, with the id recorded
    /// in it, when it was not handled before (make the business change in it, then commit);
    /// `None` when it was (the transaction is rolled back; ack the message).
    pub async fn begin<'c>(
        &self,
        client: &'c mut Client,
        consumer: &str,
        message_id: &str,
    ) -> Result<Option<Transaction<'c>>, tokio_postgres::Error> {
        let tx = client.transaction().await?;
        // A second delivery racing this one waits on the row lock here, and finds the id once
        // this transaction commits (or takes over if it rolls back).
        let inserted = tx.execute(&self.insert, &[&consumer, &message_id]).await?;
        if inserted == 0 {
            tx.rollback().await?;
            return Ok(None);
        }
        Ok(Some(tx))
    }

    /// Deletes the ids processed more than `ttl` ago (by the database's clock); answers how
    /// many.
    pub async fn sweep(&self, client: &Client, ttl: Duration) -> Result<u64, tokio_postgres::Error> {
        let sql = format!("DELETE FROM {} WHERE processed_at < now() - make_interval(secs => $1)", self.table);
        client.execute(&sql, &[&ttl.as_secs_f64()]).await
    }
}

impl Default for ProcessedMessages {
    fn default() -> Self {
        ProcessedMessages::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_are_plain_identifiers() {
        assert_eq!(ProcessedMessages::new().table(), "processed_messages");
        assert!(ProcessedMessages::with_table("app_seen_2").is_ok());
        for bad in ["", "2x", "Seen", "a;drop table x", "a b", &"x".repeat(64)] {
            assert!(ProcessedMessages::with_table(bad).is_err(), "{bad:?}");
        }
    }
}
