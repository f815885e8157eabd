//! Sluice as a peer: an in-process server on a fresh embedded store, driven over the native
//! HTTP API by `sluice-client`, exactly as the throughput scenario drives it. The producer and
//! consumer here drive Sluice over PostgreSQL too (`sluice_pg`).

use std::time::Duration;

use anyhow::{Context, bail};
use async_trait::async_trait;
use bytes::Bytes;
use sluice_api::{CreateQueueRequest, ReceiveRequest, SendMessage, SendRequest};
use sluice_client::Client;
use sluice_core::limits::{BATCH_ENTRIES_MAX, RECEIVE_MESSAGES_MAX};
use sluice_embedded::Durability as StoreDurability;

use super::driver::{Connected, Consumer, Peer, Producer};
use super::system::Durability;
use crate::target::InProcess;

/// Visibility timeout of each receive: longer than any phase, so nothing is delivered twice.
pub(super) const VISIBILITY_TIMEOUT_MS: u64 = 60_000;

pub(crate) struct Sluice {
    server: InProcess,
    url: String,
}

pub(crate) async fn connect(tmp_dir: &std::path::Path, durability: StoreDurability) -> anyhow::Result<Connected> {
    let server = InProcess::start(tmp_dir, durability).await?;
    let url = server.url().to_owned();
    let (class, setting) = match durability {
        StoreDurability::Fsync => (Durability::PerWrite, "fsync".to_owned()),
        StoreDurability::Interval(every) => (Durability::Deferred, format!("interval:{}", every.as_millis())),
    };
    let settings = format!(
        "in-process on {url}, embedded store (fjall) in {}, --durability {setting}; native HTTP/1.1 API through \
         sluice-client, one connection per producer and consumer; send = one batch call, receive = long poll \
         (visibility {VISIBILITY_TIMEOUT_MS} ms), ack = one batch call",
        server.data_dir().display()
    );
    Ok(Connected {
        peer: Box::new(Sluice { server, url }),
        version: format!("Sluice {}", env!("CARGO_PKG_VERSION")),
        settings,
        durability: class,
        durability_setting: setting,
        batch_max: BATCH_ENTRIES_MAX.min(RECEIVE_MESSAGES_MAX as usize),
    })
}

#[async_trait]
impl Peer for Sluice {
    async fn create(&self, queue: &str) -> anyhow::Result<()> {
        let client = crate::workload::client(&self.url)?;
        client.create_queue(&CreateQueueRequest { name: queue.to_owned(), ..Default::default() }).await?;
        Ok(())
    }

    async fn producer(&self, queue: &str) -> anyhow::Result<Box<dyn Producer>> {
        producer(&self.url, queue)
    }

    async fn consumer(&self, queue: &str, _batch: usize) -> anyhow::Result<Box<dyn Consumer>> {
        consumer(&self.url, queue)
    }

    async fn delete(&self, queue: &str) -> anyhow::Result<()> {
        crate::workload::client(&self.url)?.delete_queue(queue).await?;
        Ok(())
    }

    async fn stop(self: Box<Self>) -> anyhow::Result<()> {
        self.server.stop().await
    }
}

/// A producer of `queue` on its own connection to the server at `url`.
pub(super) fn producer(url: &str, queue: &str) -> anyhow::Result<Box<dyn Producer>> {
    Ok(Box::new(SluiceProducer { client: crate::workload::client(url)?, queue: queue.to_owned() }))
}

/// A consumer of `queue` on its own connection to the server at `url`.
pub(super) fn consumer(url: &str, queue: &str) -> anyhow::Result<Box<dyn Consumer>> {
    let client = crate::workload::client(url)?;
    Ok(Box::new(SluiceConsumer { client, queue: queue.to_owned(), receipts: Vec::new() }))
}

struct SluiceProducer {
    client: Client,
    queue: String,
}

#[async_trait]
impl Producer for SluiceProducer {
    async fn send(&mut self, bodies: &[Bytes]) -> anyhow::Result<()> {
        let messages = bodies
            .iter()
            .map(|body| {
                let body = std::str::from_utf8(body).context("bodies are text")?;
                Ok(SendMessage { body: Some(body.to_owned()), ..Default::default() })
            })
            .collect::<anyhow::Result<_>>()?;
        let response = self.client.send_messages(&self.queue, &SendRequest { messages }).await?;
        if let Some(error) = response.results.iter().find_map(|r| r.error.as_ref()) {
            bail!("send entry refused: {error:?}");
        }
        Ok(())
    }
}

struct SluiceConsumer {
    client: Client,
    queue: String,
    receipts: Vec<String>,
}

#[async_trait]
impl Consumer for SluiceConsumer {
    async fn receive(&mut self, max: usize, wait: Duration) -> anyhow::Result<Vec<Bytes>> {
        let request = ReceiveRequest {
            max: Some(u32::try_from(max).unwrap_or(u32::MAX)),
            wait_ms: Some(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)),
            visibility_timeout_ms: Some(VISIBILITY_TIMEOUT_MS),
        };
        let list = self.client.receive_messages(&self.queue, &request).await?;
        self.receipts.clear();
        let mut bodies = Vec::with_capacity(list.messages.len());
        for message in list.messages {
            bodies.push(Bytes::from(message.body.unwrap_or_default()));
            self.receipts.extend(message.receipt);
        }
        Ok(bodies)
    }

    async fn ack(&mut self) -> anyhow::Result<()> {
        if self.receipts.is_empty() {
            return Ok(());
        }
        let receipts = std::mem::take(&mut self.receipts);
        let response = self.client.ack(&self.queue, receipts).await?;
        if let Some(error) = response.results.iter().find_map(|r| r.error.as_ref()) {
            bail!("ack entry refused: {error:?}");
        }
        Ok(())
    }
}
