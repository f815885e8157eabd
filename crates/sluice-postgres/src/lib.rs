//! Sluice's scale-out backend: every queue and message lives in PostgreSQL tables, so any number
//! of Sluice nodes can serve the same queues from one database.
//!
//! The rules are sluice-core's, restated as SQL over rows instead of applied by `Broker` to
//! in-memory indexes (which one node cannot share with another). What is reused from core as
//! is: validation (`NewMessage::validate`, `QueueAttributes::validate`, queue names, limits),
//! FIFO's send rules and dedup keys (`fifo_send_rules`), the receipt format,
//! `MessageMeta::state`, `QueueAttributes::apply`/`same_config`, and the dead-letter rule's
//! threshold (`DeadLetter::exhausted_receive_count`, kept per queue for SQL to compare with).
//!
//! How the pieces fit (see also the module docs):
//! - `migrate`: versioned SQL files applied at connect (and by `migrate` for `sluice migrate`).
//! - `queues`, `messages`, `receive`: one module per group of `Store` calls. Every call is one
//!   statement or one transaction (but a redrive step, which attempts again while rows it could
//!   move are held, see `messages::MOVE`); a receive picks rows with `FOR UPDATE SKIP LOCKED`,
//!   so consumers on different nodes never wait for, nor get, each other's messages.
//! - `fair`: the receive of standard queues, fair across message groups (least recently served
//!   group first, stamps in `fair_groups`), as core's `FairIndex`.
//! - `fifo`: FIFO queues: sends deduplicated through the `dedup` table (`INSERT … ON CONFLICT`,
//!   so two nodes sending one key enqueue it once), and a receive that keeps each group in
//!   order across nodes, using the row lock on a group's oldest message as the group's lock.
//! - `fragments`: the SQL that the receives, the hold changes and the sweep share (the queue's
//!   dead-letter target, the dead-letter rule, a move to the dead-letter queue, a receive's pick
//!   and delivery), so that each is written once.
//! - `wake`: LISTEN/NOTIFY and per-queue timers wake long polls on every node.
//! - `sweep`: a background task per store ends expired holds (dead-lettering exhausted
//!   messages) in a short transaction of its own, then applies retention, forgets expired dedup
//!   keys and idle groups' stamps, and removes orphans; several nodes never double-process,
//!   because every row is taken with `FOR UPDATE SKIP LOCKED` and re-checked, and an advisory
//!   lock keeps all but one node from even scanning.
//! - `vacuum`: a background task per store that vacuums the churning tables once their dead
//!   rows pass `vacuum_dead_rows_max`, one node at a time, so that throughput holds without
//!   relying on the server's autovacuum.
//! - `transactional`: `sluice_send` from the application's own transaction.
//! - `records`: durable configuration records (topics, subscriptions), one row each.
//! - `streams`: streams (migration 6): records as rows, offsets from each partition's row in
//!   the append's transaction, groups as rows whose state core's rules change, a chunked sweep.
//! - `jobs`: async jobs (core's job state machine in SQL over the `jobs` table), their long
//!   polls and their part of the sweep.
//!
//! Time is the database's clock (`sluice_now_ms()` in SQL), so nodes with drifting clocks agree
//! on when holds and delays end.

mod batch;
mod codec;
mod commit;
mod depth;
mod event_batch;
mod events;
mod fair;
mod fifo;
mod fragments;
mod jobs;
mod messages;
pub mod migrate;
mod queues;
mod rate;
mod receive;
mod records;
mod streams;
mod sweep;
mod transactional;
mod vacuum;
mod wake;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use sluice_core::broker::{MoveOutcome, QueueView, Sent};
use sluice_core::{NewMessage, QueueAttributes, QueueAttributesPatch};
use sluice_store::{
    CommitStore, Committed, Counters, EntryResults, NackEntry, PeekedMessage, QueueStore, ReceiveRequest,
    ReceivedMessage, Record, RecordStore, StoreCounters, StoreError, StoreStatus, VisibilityRule, Write,
};
use tokio::task::JoinHandle;

pub use migrate::{MigrateError, MigrationReport};
pub use transactional::{TransactionalSendError, send_in_transaction};
pub use vacuum::{CHURNING_TABLES, VACUUMS_METRIC};

/// Longest schema name accepted in [`PostgresOptions::schema`]: the NOTIFY channel
/// `sluice_wake_<schema>` must fit PostgreSQL's 63-byte identifiers.
pub const SCHEMA_NAME_LEN_MAX: usize = 48;

/// How a store connects and runs.
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// Schema holding Sluice's tables, created if missing; the connection's default search_path
    /// (normally `public`) when `None`. Lowercase letters, digits and `_`, starting with a letter
    /// or `_`, at most `SCHEMA_NAME_LEN_MAX` bytes.
    pub schema: Option<String>,
    /// Most connections the store holds (the LISTEN connection comes on top).
    pub pool_connections_max: usize,
    /// How often the sweeper looks for expired holds, messages past retention and orphans.
    pub sweep_interval_ms: u64,
    /// Most dead rows (row versions left behind by deletes and updates) one of the churning
    /// tables ([`CHURNING_TABLES`]) may gather before the store runs `VACUUM` on it itself,
    /// whatever the server's autovacuum does; 0 leaves vacuuming to autovacuum alone. See the
    /// `vacuum` module for why.
    pub vacuum_dead_rows_max: u64,
    /// How often one node reads the churning tables' dead rows (from `pg_stat_user_tables`).
    pub vacuum_check_interval_ms: u64,
    /// Each job queue's budget of finished jobs, kept by the sweeper.
    pub job_limits: sluice_core::jobs::JobLimits,
}

/// Default of [`PostgresOptions::vacuum_dead_rows_max`]: the threshold migration 1 gives
/// autovacuum, small enough that a vacuum takes a fraction of a second.
pub const VACUUM_DEAD_ROWS_MAX_DEFAULT: u64 = 10_000;

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            schema: None,
            pool_connections_max: 16,
            sweep_interval_ms: 250,
            vacuum_dead_rows_max: VACUUM_DEAD_ROWS_MAX_DEFAULT,
            vacuum_check_interval_ms: 1_000,
            job_limits: sluice_core::jobs::JobLimits::default(),
        }
    }
}

/// Why a store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("invalid PostgreSQL URL: {0}")]
    Url(String),
    #[error("invalid schema name {0:?}: use 1 to {SCHEMA_NAME_LEN_MAX} lowercase letters, digits and '_'")]
    Schema(String),
    #[error("cannot connect to PostgreSQL: {0}")]
    Database(String),
    #[error(transparent)]
    Migrate(#[from] MigrateError),
}

impl From<tokio_postgres::Error> for ConnectError {
    fn from(e: tokio_postgres::Error) -> Self {
        ConnectError::Database(describe(&e))
    }
}

/// A database error in words: tokio-postgres displays a server error only as "db error".
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {} ({})", db.severity(), db.message(), db.code().code()),
        None => e.to_string(),
    }
}

/// What every part of a store shares: the pool, the wake-up registry, the counters.
pub(crate) struct Inner {
    pool: Pool,
    /// The NOTIFY channel of this schema.
    channel: String,
    wakers: Arc<wake::Wakers>,
    /// Long polls on streams, by stream id (`streams`).
    stream_wakers: Arc<wake::Wakers>,
    counters: Counters,
    job_limits: sluice_core::jobs::JobLimits,
    /// Event appends gathered into one transaction per turn (`event_batch`).
    appends: event_batch::AppendBatcher,
}

/// Maps a database failure to the error a store call returns: `Unavailable`, which the server
/// answers with 503 `store_unavailable` (retry) and a message that hides the cause.
///
/// Every failure maps there, the server's errors (serialization failure, admin shutdown, a
/// read-only replica after a failover, …) and the client's (connection refused or lost, no
/// pooled connection within the pool's wait), because none is the store's to fix and nothing is
/// sticky: the next call asks the database again, and `Store::poisoned` stays `None`. This is
/// never `Poisoned`, whose advice (restart the server) would not help: the database owns
/// durability, and a restarted node reads the same database. A call that fails this way changed
/// nothing, except in the one case no client library can rule out: the connection dropping
/// while a COMMIT was in flight, when the change may or may not have been made.
pub(crate) fn db_error<E: std::error::Error + 'static>(e: E) -> StoreError {
    let text = match (&e as &dyn std::error::Error).downcast_ref::<tokio_postgres::Error>() {
        Some(pg) => describe(pg),
        None => e.to_string(),
    };
    tracing::error!("PostgreSQL call failed: {text}");
    StoreError::Unavailable(format!("database error: {text}"))
}

impl Inner {
    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(db_error)
    }

    /// Wakes long polls on `queues`, here at once and on every node through NOTIFY. Called after
    /// the change committed; a failure only delays waiters until their safety re-check, so it is
    /// logged, not returned.
    async fn notify(&self, queues: &[u64]) {
        if queues.is_empty() {
            return;
        }
        for &q in queues {
            self.wakers.wake(q);
        }
        let ids: Vec<i64> = queues.iter().map(|&q| q as i64).collect();
        let result = async {
            let client = self.pool.get().await.map_err(|e| e.to_string())?;
            let statement = client.prepare_cached(messages::NOTIFY).await.map_err(|e| e.to_string())?;
            client.execute(&statement, &[&self.channel, &ids]).await.map_err(|e| e.to_string())
        }
        .await;
        if let Err(e) = result {
            tracing::warn!("could not notify other nodes of new work in queues {queues:?}: {e}");
        }
    }
}

/// The PostgreSQL store. Dropping it stops its background tasks and closes its connections.
pub struct PostgresStore {
    inner: Arc<Inner>,
    tasks: Vec<JoinHandle<()>>,
    /// This node's round-robin counters of streams.
    round_robin: streams::RoundRobin,
}

impl PostgresStore {
    /// Connects, applies pending migrations, starts listening for wake-ups and starts the
    /// sweeper. Fails if the database cannot be reached.
    pub async fn connect(url: &str, options: PostgresOptions) -> Result<PostgresStore, ConnectError> {
        let config = pg_config(url, &options)?;
        let mut client = connect_one(&config).await?;
        let report = migrate::apply(&mut client).await?;
        if !report.applied.is_empty() {
            tracing::info!("applied migrations {:?}; schema at version {}", report.applied, report.version);
        }
        let schema: String = client.query_one("SELECT current_schema()", &[]).await?.get(0);
        drop(client);
        let channel = format!("sluice_wake_{schema}");

        let manager = Manager::from_config(
            config.clone(),
            tokio_postgres::NoTls,
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_connections_max.max(1))
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(Duration::from_secs(10)))
            .wait_timeout(Some(Duration::from_secs(30)))
            .build()
            .map_err(|e| ConnectError::Database(e.to_string()))?;
        let wakers = Arc::new(wake::Wakers::default());
        let stream_wakers = Arc::new(wake::Wakers::default());
        let listener = wake::listen(&config, &channel).await?;
        let inner = Arc::new(Inner {
            appends: event_batch::AppendBatcher::start(pool.clone()),
            pool,
            channel: channel.clone(),
            wakers: wakers.clone(),
            stream_wakers: stream_wakers.clone(),
            counters: Counters::default(),
            job_limits: options.job_limits.sane(),
        });
        let mut tasks = vec![
            tokio::spawn(wake::run(config, channel, wakers, stream_wakers, listener)),
            tokio::spawn(sweep::run(inner.clone(), Duration::from_millis(options.sweep_interval_ms.max(1)))),
        ];
        if options.vacuum_dead_rows_max > 0 {
            let every = Duration::from_millis(options.vacuum_check_interval_ms.max(1));
            tasks.push(tokio::spawn(vacuum::run(inner.clone(), options.vacuum_dead_rows_max, every)));
        }
        Ok(PostgresStore { inner, tasks, round_robin: streams::RoundRobin::default() })
    }

    /// Runs one sweep now (normally the background task's job); returns false when another
    /// node holds the sweep lease.
    pub async fn sweep_now(&self) -> Result<bool, StoreError> {
        sweep::sweep_once(&self.inner, true).await
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Applies pending migrations to the database at `url` (for `sluice migrate`). The schema is
/// the first on the URL's search_path; see [`migrate_with`] to name one.
pub async fn migrate(url: &str) -> Result<MigrationReport, ConnectError> {
    migrate_with(url, &PostgresOptions::default()).await
}

/// Applies pending migrations to `options.schema` (created if missing).
pub async fn migrate_with(url: &str, options: &PostgresOptions) -> Result<MigrationReport, ConnectError> {
    let config = pg_config(url, options)?;
    let mut client = connect_one(&config).await?;
    Ok(migrate::apply(&mut client).await?)
}

fn pg_config(url: &str, options: &PostgresOptions) -> Result<tokio_postgres::Config, ConnectError> {
    let mut config: tokio_postgres::Config =
        url.parse().map_err(|e: tokio_postgres::Error| ConnectError::Url(e.to_string()))?;
    if config.get_application_name().is_none() {
        config.application_name("sluice");
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    if let Some(schema) = &options.schema {
        let ok = !schema.is_empty()
            && schema.len() <= SCHEMA_NAME_LEN_MAX
            && schema.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            && !schema.as_bytes()[0].is_ascii_digit();
        if !ok {
            return Err(ConnectError::Schema(schema.clone()));
        }
        config.options(format!("-c search_path={schema}"));
    }
    Ok(config)
}

/// One connection outside the pool, its driver spawned; creates the configured schema if it
/// is missing.
async fn connect_one(config: &tokio_postgres::Config) -> Result<tokio_postgres::Client, ConnectError> {
    let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!("PostgreSQL connection ended: {e}");
        }
    });
    let schema: Option<String> = client.query_one("SELECT current_schema()", &[]).await?.get(0);
    if schema.is_none() {
        // The search_path names a schema that does not exist yet: create the first one.
        let path: String = client.query_one("SHOW search_path", &[]).await?.get(0);
        let first = path.split(',').next().unwrap_or("").trim().trim_matches('"').to_string();
        if first.is_empty() || first.starts_with('$') {
            return Err(ConnectError::Database(format!(
                "no schema to create Sluice's tables in (search_path {path:?})"
            )));
        }
        // Nodes starting together would race on the catalog's unique index: one at a time.
        client
            .batch_execute(&format!(
                "BEGIN;
                 SELECT pg_advisory_xact_lock(hashtext('sluice_create_schema:' || {}));
                 CREATE SCHEMA IF NOT EXISTS {};
                 COMMIT;",
                quote_literal(&first),
                wake::quote_ident(&first)
            ))
            .await?;
    }
    Ok(client)
}

/// `text` as a quoted SQL string literal.
fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[async_trait]
impl QueueStore for PostgresStore {
    async fn create_queue(&self, name: &str, attributes: QueueAttributes) -> Result<(QueueView, bool), StoreError> {
        queues::create(&self.inner, name, attributes).await
    }

    async fn get_queue(&self, name: &str) -> Result<QueueView, StoreError> {
        queues::get(&self.inner, name).await
    }

    async fn list_queues(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Vec<QueueView>, StoreError> {
        queues::list(&self.inner, prefix, after, limit).await
    }

    async fn update_queue(&self, name: &str, patch: QueueAttributesPatch) -> Result<QueueView, StoreError> {
        queues::update(&self.inner, name, patch).await
    }

    async fn delete_queue(&self, name: &str) -> Result<(), StoreError> {
        queues::delete(&self.inner, name).await
    }

    async fn purge_queue(&self, name: &str) -> Result<u64, StoreError> {
        queues::purge(&self.inner, name).await
    }

    async fn send(&self, queue: &str, messages: Vec<NewMessage>) -> Result<EntryResults<Sent>, StoreError> {
        messages::send(&self.inner, queue, messages).await
    }

    async fn receive(&self, queue: &str, request: ReceiveRequest) -> Result<Vec<ReceivedMessage>, StoreError> {
        receive::receive(&self.inner, queue, request).await
    }

    async fn ack(&self, queue: &str, receipts: Vec<String>) -> Result<EntryResults<()>, StoreError> {
        messages::ack(&self.inner, queue, receipts).await
    }

    async fn change_visibility(
        &self,
        queue: &str,
        entries: Vec<(String, u64)>,
        rule: VisibilityRule,
    ) -> Result<EntryResults<()>, StoreError> {
        messages::change_visibility(&self.inner, queue, entries, rule == VisibilityRule::Sqs).await
    }

    async fn nack(&self, queue: &str, entries: Vec<NackEntry>) -> Result<EntryResults<()>, StoreError> {
        messages::nack(&self.inner, queue, entries).await
    }

    async fn peek(&self, queue: &str, limit: usize) -> Result<Vec<PeekedMessage>, StoreError> {
        messages::peek(&self.inner, queue, limit).await
    }

    async fn move_messages(&self, from: &str, to: Option<&str>, max: u64) -> Result<MoveOutcome, StoreError> {
        messages::move_messages(&self.inner, from, to, max).await
    }
}

#[async_trait]
impl RecordStore for PostgresStore {
    async fn insert_record(&self, kind: &str, key: &str, value: Vec<u8>) -> Result<bool, StoreError> {
        records::insert(&self.inner, kind, key, value).await
    }

    async fn put_record(&self, kind: &str, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        records::put(&self.inner, kind, key, value).await
    }

    async fn replace_record(
        &self,
        kind: &str,
        key: &str,
        expected: Vec<u8>,
        value: Vec<u8>,
    ) -> Result<bool, StoreError> {
        records::replace(&self.inner, kind, key, expected, value).await
    }

    async fn get_record(&self, kind: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        records::get(&self.inner, kind, key).await
    }

    async fn list_records(
        &self,
        kind: &str,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        records::list(&self.inner, kind, prefix, after, limit).await
    }

    async fn delete_record(&self, kind: &str, key: &str) -> Result<bool, StoreError> {
        records::delete(&self.inner, kind, key).await
    }
}

#[async_trait]
impl CommitStore for PostgresStore {
    async fn commit_all(&self, writes: Vec<Write>) -> Result<Committed, StoreError> {
        commit::commit(&self.inner, &self.round_robin, writes).await
    }
}

#[async_trait]
impl sluice_store::RateStore for PostgresStore {
    async fn take_tokens(
        &self,
        key: &str,
        limit: sluice_core::rate::RateLimit,
        asked: u64,
    ) -> Result<sluice_core::rate::Taken, StoreError> {
        rate::take_tokens(&self.inner, key, limit, asked).await
    }
}

impl StoreStatus for PostgresStore {
    /// Never refuses as a whole: the database owns durability, and after a failed call the next
    /// one simply reads the database's state again (see `db_error`).
    fn refusal(&self) -> Option<StoreError> {
        None
    }

    fn counters(&self) -> StoreCounters {
        self.inner.counters.snapshot()
    }
}
