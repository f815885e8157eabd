//! What the events scenario (`events.rs`) drives: an event store and its connections,
//! implemented by Sluice (over HTTP, whatever its backend: [`SluiceEvents`]) and by the plain PostgreSQL
//! events table in `peers/events.rs`, a module of its own so that neither imports the other.

use async_trait::async_trait;
use serde_json::{Value, json};
use sluice_api::events::{AppendEventsRequest, ExpectedName, ExpectedVersionWire, NewEventWire};
use sluice_client::Client;
use sluice_client::events::AllQuery;

use crate::target::InProcess;
use crate::workload;

/// An event store under test, one per run.
#[async_trait]
pub(crate) trait EventSystem: Send + Sync {
    /// Its name in the report.
    fn name(&self) -> String;
    /// What an acknowledged append survives, in the system's own settings.
    fn durability(&self) -> String;
    /// A connection for one writer or reader.
    async fn handle(&self) -> anyhow::Result<Box<dyn EventHandle>>;
    /// Stops whatever it started.
    async fn stop(self: Box<Self>) -> anyhow::Result<()>;
}

/// One writer's or reader's connection.
#[async_trait]
pub(crate) trait EventHandle: Send {
    /// Appends `count` small events to `stream` if its last version is `expected` (`None`: the
    /// stream is new): `Ok(Ok(last version))`, or `Ok(Err(actual))` when another writer won.
    async fn append(
        &mut self,
        stream: &str,
        expected: Option<u64>,
        count: usize,
    ) -> anyhow::Result<Result<u64, Option<u64>>>;
    /// Reads the global order from `from` (up to 1,000 events): how many, and the next position.
    async fn read_all(&mut self, from: u64) -> anyhow::Result<(usize, u64)>;
}

/// Sluice over its native HTTP API, whichever store the server has.
pub(crate) struct SluiceEvents {
    pub urls: Vec<String>,
    pub label: String,
    pub durability: String,
    pub next: std::sync::atomic::AtomicUsize,
    pub server: Option<InProcess>,
}

struct SluiceHandle {
    client: Client,
}

/// A small event, as every system stores it.
pub(crate) fn data(n: usize) -> Value {
    json!({ "n": n, "sku": "A-1", "qty": 1 })
}

#[async_trait]
impl EventSystem for SluiceEvents {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn durability(&self) -> String {
        self.durability.clone()
    }

    async fn handle(&self) -> anyhow::Result<Box<dyn EventHandle>> {
        let i = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % self.urls.len();
        Ok(Box::new(SluiceHandle { client: workload::client(&self.urls[i])? }))
    }

    async fn stop(self: Box<Self>) -> anyhow::Result<()> {
        match self.server {
            Some(s) => s.stop().await,
            None => Ok(()),
        }
    }
}

#[async_trait]
impl EventHandle for SluiceHandle {
    async fn append(
        &mut self,
        stream: &str,
        expected: Option<u64>,
        count: usize,
    ) -> anyhow::Result<Result<u64, Option<u64>>> {
        let events = (0..count)
            .map(|n| NewEventWire {
                id: None,
                r#type: "ItemAdded".into(),
                data: data(n),
                metadata: None,
                correlation_id: None,
                causation_id: None,
            })
            .collect();
        let expected_version =
            expected.map_or(ExpectedVersionWire::Named(ExpectedName::NoStream), ExpectedVersionWire::Version);
        match self.client.append_events(stream, &AppendEventsRequest { expected_version, events }).await {
            Ok(done) => Ok(Ok(done.last_version)),
            Err(e) => match sluice_client::events::actual_version(&e) {
                Some(actual) => Ok(Err(actual)),
                None => Err(e.into()),
            },
        }
    }

    async fn read_all(&mut self, from: u64) -> anyhow::Result<(usize, u64)> {
        let q = AllQuery { from_position: Some(from), max: Some(1_000), ..Default::default() };
        let got = self.client.read_all_events(&q).await?;
        Ok((got.events.len(), got.next_position))
    }
}
