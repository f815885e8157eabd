//! The events scenario's peers: Sluice on PostgreSQL (two in-process nodes over one fresh
//! schema, writers spread over them), and the plain PostgreSQL events table that applications
//! write by hand: `(stream, version)` unique, one multi-row INSERT per append, a unique
//! violation as the lost race, a bigserial as the global order (which a reader can pass over
//! while an earlier value has not committed: the gap Sluice's counter row closes).

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use sluice_postgres::{PostgresOptions, PostgresStore};
use sluice_store::Store;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::postgres::{commit_settings, open, redact};
use crate::Plan;
use crate::event_system::{EventHandle, EventSystem, SluiceEvents};

/// Nodes of Sluice on PostgreSQL.
const SLUICE_PG_NODES: usize = 2;
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

pub(crate) async fn systems(plan: &Plan) -> (Vec<Box<dyn EventSystem>>, Vec<String>) {
    let url = plan.job_peer_urls.0.clone();
    let mut systems: Vec<Box<dyn EventSystem>> = Vec::new();
    let mut notes = Vec::new();
    match SluicePg::start(&url).await {
        Ok(s) => systems.push(Box::new(s)),
        Err(e) => notes.push(format!("sluice-postgres skipped: {e:#}")),
    }
    match PgTable::connect(&url).await {
        Ok(t) => systems.push(Box::new(t)),
        Err(e) => notes.push(format!("postgres-table skipped: {e:#}")),
    }
    (systems, notes)
}

// ----- Sluice on PostgreSQL ------------------------------------------------------------------

struct Node {
    url: String,
    stop: oneshot::Sender<()>,
    server: JoinHandle<std::io::Result<()>>,
}

struct SluicePg {
    nodes: Vec<Node>,
    inner: SluiceEvents,
    schema: String,
    admin: tokio_postgres::Client,
}

impl SluicePg {
    async fn start(url: &str) -> anyhow::Result<SluicePg> {
        let (admin, _task) = open(url).await.with_context(|| format!("connecting to {}", redact(url)))?;
        let commit = commit_settings(&admin).await?;
        let schema = format!("sluice_bench_events_{}", crate::workload::run_nonce());
        let options = PostgresOptions { schema: Some(schema.clone()), ..PostgresOptions::default() };
        let mut nodes = Vec::new();
        for _ in 0..SLUICE_PG_NODES {
            let store = PostgresStore::connect(url, options.clone()).await.context("opening a PostgresStore")?;
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            let node_url = format!("http://{}", listener.local_addr()?);
            let (stop, stopped) = oneshot::channel::<()>();
            let store: Arc<dyn Store> = Arc::new(store);
            let server = tokio::spawn(sluice_server::run(listener, store, async {
                let _ = stopped.await;
            }));
            nodes.push(Node { url: node_url, stop, server });
        }
        let inner = SluiceEvents {
            urls: nodes.iter().map(|n| n.url.clone()).collect(),
            label: "sluice-postgres".into(),
            durability: format!("{} ({SLUICE_PG_NODES} nodes)", commit.durability_setting),
            next: AtomicUsize::new(0),
            server: None,
        };
        Ok(SluicePg { nodes, inner, schema, admin })
    }
}

#[async_trait]
impl EventSystem for SluicePg {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn durability(&self) -> String {
        self.inner.durability()
    }

    async fn handle(&self) -> anyhow::Result<Box<dyn EventHandle>> {
        self.inner.handle().await
    }

    async fn stop(self: Box<Self>) -> anyhow::Result<()> {
        let SluicePg { nodes, schema, admin, .. } = *self;
        for node in nodes {
            let _ = node.stop.send(());
            let _ = tokio::time::timeout(SHUTDOWN_WAIT, node.server).await;
        }
        admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await?;
        Ok(())
    }
}

// ----- The plain PostgreSQL events table -----------------------------------------------------

struct PgTable {
    url: String,
    table: String,
    admin: tokio_postgres::Client,
    setting: String,
}

impl PgTable {
    async fn connect(url: &str) -> anyhow::Result<PgTable> {
        let (admin, _task) = open(url).await.with_context(|| format!("connecting to {}", redact(url)))?;
        let commit = commit_settings(&admin).await?;
        let table = format!("bench_events_{}", crate::workload::run_nonce());
        admin
            .batch_execute(&format!(
                "CREATE TABLE {table} (
                     position bigserial PRIMARY KEY,
                     stream   text NOT NULL,
                     version  bigint NOT NULL,
                     type     text NOT NULL,
                     data     jsonb NOT NULL,
                     UNIQUE (stream, version)
                 )"
            ))
            .await?;
        Ok(PgTable { url: url.to_owned(), table, admin, setting: commit.durability_setting })
    }
}

struct PgTableHandle {
    client: tokio_postgres::Client,
    insert: tokio_postgres::Statement,
    last: tokio_postgres::Statement,
    read: tokio_postgres::Statement,
}

#[async_trait]
impl EventSystem for PgTable {
    fn name(&self) -> String {
        "postgres-table".into()
    }

    fn durability(&self) -> String {
        self.setting.clone()
    }

    async fn handle(&self) -> anyhow::Result<Box<dyn EventHandle>> {
        let (client, _task) = open(&self.url).await?;
        let t = &self.table;
        let insert = client
            .prepare(&format!(
                "INSERT INTO {t} (stream, version, type, data)
                 SELECT $1::text, $2::bigint + n, 'ItemAdded', jsonb_build_object('n', n, 'sku', 'A-1', 'qty', 1)
                 FROM generate_series(0::bigint, $3::bigint - 1) AS n"
            ))
            .await?;
        let last = client.prepare(&format!("SELECT max(version) FROM {t} WHERE stream = $1")).await?;
        let read = client
            .prepare(&format!("SELECT position, stream, version, type, data FROM {t} WHERE position >= $1::bigint ORDER BY position LIMIT 1000"))
            .await?;
        Ok(Box::new(PgTableHandle { client, insert, last, read }))
    }

    async fn stop(self: Box<Self>) -> anyhow::Result<()> {
        self.admin.batch_execute(&format!("DROP TABLE IF EXISTS {}", self.table)).await?;
        Ok(())
    }
}

#[async_trait]
impl EventHandle for PgTableHandle {
    async fn append(
        &mut self,
        stream: &str,
        expected: Option<u64>,
        count: usize,
    ) -> anyhow::Result<Result<u64, Option<u64>>> {
        let first = expected.map_or(0, |v| v as i64 + 1);
        match self.client.execute(&self.insert, &[&stream, &first, &(count as i64)]).await {
            Ok(_) => Ok(Ok(first as u64 + count as u64 - 1)),
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => {
                let row = self.client.query_one(&self.last, &[&stream]).await?;
                Ok(Err(row.get::<_, Option<i64>>(0).map(|v| v as u64)))
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn read_all(&mut self, from: u64) -> anyhow::Result<(usize, u64)> {
        let rows = self.client.query(&self.read, &[&(from as i64)]).await?;
        let next = rows.last().map_or(from, |r| r.get::<_, i64>(0) as u64 + 1);
        Ok((rows.len(), next))
    }
}
