//! Sluice over PostgreSQL as a peer: N in-process servers, each on its own `PostgresStore`, all
//! over one fresh schema of the benchmark's PostgreSQL database (as N `sluice serve --store URL`
//! processes would be, but in this process), driven over the native HTTP API by the same
//! producer and consumer as Sluice on the embedded store. Producers and consumers are spread
//! over the servers in turn, so with three servers a message is often sent through one and
//! received through another, woken by LISTEN/NOTIFY.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use async_trait::async_trait;
use sluice_api::CreateQueueRequest;
use sluice_postgres::{PostgresOptions, PostgresStore};
use sluice_store::Store;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_postgres::Client;

use super::driver::{Connected, Consumer, Peer, Producer};
use super::postgres::{commit_settings, open, redact};
use super::sluice::{VISIBILITY_TIMEOUT_MS, consumer, producer};

/// How long a server may take to stop after the workload's clients are gone.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

struct Node {
    url: String,
    stop: oneshot::Sender<()>,
    server: JoinHandle<std::io::Result<()>>,
}

pub(crate) struct SluicePg {
    nodes: Vec<Node>,
    /// Which node the next producer or consumer connects to.
    next: AtomicUsize,
    schema: String,
    admin: Client,
    connection: JoinHandle<()>,
}

/// Starts `nodes` servers over a fresh schema of the database at `url`.
pub(crate) async fn connect(url: &str, nodes: usize) -> anyhow::Result<Connected> {
    let (admin, connection) = open(url).await.with_context(|| format!("connecting to PostgreSQL at {url}"))?;
    let commit = commit_settings(&admin).await?;
    let schema = format!("sluice_bench_{}", crate::workload::run_nonce());
    let options = PostgresOptions { schema: Some(schema.clone()), ..PostgresOptions::default() };
    let mut started = Vec::with_capacity(nodes);
    for _ in 0..nodes {
        let store = PostgresStore::connect(url, options.clone())
            .await
            .with_context(|| format!("opening a Sluice store in schema {schema}"))?;
        let listener = TcpListener::bind("127.0.0.1:0").await.context("binding 127.0.0.1:0")?;
        let node_url = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = oneshot::channel::<()>();
        let store: Arc<dyn Store> = Arc::new(store);
        let server = tokio::spawn(sluice_server::run(listener, store, async {
            let _ = stopped.await;
        }));
        started.push(Node { url: node_url, stop, server });
    }
    let urls: Vec<&str> = started.iter().map(|n| n.url.as_str()).collect();
    let settings = format!(
        "{nodes} in-process server(s) on {}, each with its own PostgresStore (pool of {} connections, sweep every \
         {} ms, own VACUUM past {} dead rows) over schema {schema} of {}; {}, {}; native HTTP/1.1 API through \
         sluice-client, one connection per producer and consumer, spread over the servers in turn; send = one batch \
         call, receive = long poll (visibility {VISIBILITY_TIMEOUT_MS} ms), ack = one batch call",
        urls.join(", "),
        options.pool_connections_max,
        options.sweep_interval_ms,
        options.vacuum_dead_rows_max,
        redact(url),
        commit.durability_setting,
        commit.wal,
    );
    Ok(Connected {
        peer: Box::new(SluicePg { nodes: started, next: AtomicUsize::new(0), schema, admin, connection }),
        version: format!("Sluice {} over {}", env!("CARGO_PKG_VERSION"), commit.version),
        settings,
        durability: commit.durability,
        durability_setting: commit.durability_setting,
        batch_max: sluice_core::limits::BATCH_ENTRIES_MAX.min(sluice_core::limits::RECEIVE_MESSAGES_MAX as usize),
    })
}

impl SluicePg {
    fn next_url(&self) -> &str {
        &self.nodes[self.next.fetch_add(1, Ordering::Relaxed) % self.nodes.len()].url
    }
}

#[async_trait]
impl Peer for SluicePg {
    async fn create(&self, queue: &str) -> anyhow::Result<()> {
        let client = crate::workload::client(&self.nodes[0].url)?;
        client.create_queue(&CreateQueueRequest { name: queue.to_owned(), ..Default::default() }).await?;
        Ok(())
    }

    async fn producer(&self, queue: &str) -> anyhow::Result<Box<dyn Producer>> {
        producer(self.next_url(), queue)
    }

    async fn consumer(&self, queue: &str, _batch: usize) -> anyhow::Result<Box<dyn Consumer>> {
        consumer(self.next_url(), queue)
    }

    async fn delete(&self, queue: &str) -> anyhow::Result<()> {
        crate::workload::client(&self.nodes[0].url)?.delete_queue(queue).await?;
        Ok(())
    }

    /// Stops every server (which closes its store), then drops the schema.
    async fn stop(self: Box<Self>) -> anyhow::Result<()> {
        let SluicePg { nodes, schema, admin, connection, .. } = *self;
        let mut failures = Vec::new();
        for node in nodes {
            let _ = node.stop.send(());
            match tokio::time::timeout(SHUTDOWN_WAIT, node.server).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => failures.push(format!("{}: {e}", node.url)),
                Ok(Err(e)) => failures.push(format!("{}: the server task panicked: {e}", node.url)),
                Err(_) => failures.push(format!("{}: did not stop within {SHUTDOWN_WAIT:?}", node.url)),
            }
        }
        let dropped = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await;
        drop(admin);
        connection.await.context("the PostgreSQL connection task panicked")?;
        dropped.with_context(|| format!("dropping schema {schema}"))?;
        if !failures.is_empty() {
            bail!("stopping the servers: {}", failures.join("; "));
        }
        Ok(())
    }
}
