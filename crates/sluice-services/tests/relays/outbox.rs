//! The outbox table a test writes, through the database's own client: the same few calls on
//! PostgreSQL, MySQL/MariaDB and SQLite, so that each scenario is written once.

#![allow(async_fn_in_trait)]

/// An outbox table of a test's own (a fresh schema, table or file), with Debezium's columns
/// plus `published_at`, and a business table `orders` written in the same transactions.
pub trait Outbox {
    type Tx;
    /// The relay's source URL.
    fn url(&self) -> String;
    /// The relay's table name.
    fn table(&self) -> String;
    /// Whether a second transaction can insert while another one holds uncommitted rows.
    fn concurrent_writers(&self) -> bool;
    async fn begin(&self) -> Self::Tx;
    /// Writes an order and its outbox row; the row's id.
    async fn insert(&self, tx: &mut Self::Tx, aggregate: &str, body: &str) -> String;
    async fn commit(&self, tx: Self::Tx);
    /// Rows not yet deleted or marked.
    async fn unpublished(&self) -> u64;
    /// Rows marked published.
    async fn marked(&self) -> u64;
    async fn drop_table(&self);
}

/// Writes one row in a transaction of its own; its id.
pub async fn insert_one<O: Outbox>(outbox: &O, aggregate: &str, body: &str) -> String {
    let mut tx = outbox.begin().await;
    let id = outbox.insert(&mut tx, aggregate, body).await;
    outbox.commit(tx).await;
    id
}
