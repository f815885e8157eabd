//! Sluice's streams as a system of the streams scenario: an in-process server on a fresh
//! embedded store, driven over the native HTTP API by `sluice-client`. A "queue" of the load
//! generator is a stream with one partition per consumer (so that every member of an `offsets`
//! group owns one, as Kafka's consumers would) and one group; producers append without keys
//! (round robin), consumers fetch and then commit (`offsets`) or ack (`shared`) what they got.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, bail};
use async_trait::async_trait;
use bytes::Bytes;
use sluice_api::{AppendRecord, CreateGroupRequest, CreateStreamRequest, GroupMode, GroupStart, StartName};
use sluice_client::Client;
use sluice_client::streams::Settle;
use sluice_core::stream::limits::{APPEND_RECORDS_MAX, READ_RECORDS_MAX};
use sluice_embedded::Durability as StoreDurability;

use super::driver::{Connected, Consumer, Peer, Producer};
use super::system::Durability;
use crate::target::InProcess;

/// The group every consumer of a phase is a member of.
const GROUP: &str = "bench";
/// Shared mode: how long a fetched record is held, longer than any phase.
const ACK_TIMEOUT_MS: u64 = 60_000;

pub(crate) struct SluiceStreams {
    server: InProcess,
    url: String,
    mode: GroupMode,
    partitions: u32,
    members: std::sync::atomic::AtomicU64,
}

/// A server on a fresh store; groups of `mode`, streams of `partitions` partitions.
pub(crate) async fn connect(
    tmp_dir: &std::path::Path,
    durability: StoreDurability,
    mode: GroupMode,
    partitions: u32,
) -> anyhow::Result<Connected> {
    let server = InProcess::start(tmp_dir, durability).await?;
    let url = server.url().to_owned();
    let (class, setting) = match durability {
        StoreDurability::Fsync => (Durability::PerWrite, "fsync".to_owned()),
        StoreDurability::Interval(every) => (Durability::Deferred, format!("interval:{}", every.as_millis())),
    };
    let group = match mode {
        GroupMode::Offsets => "an offsets group (fetch, then commit the next offsets)",
        GroupMode::Shared => "a shared group (fetch with receipts, then ack them in one call)",
    };
    let settings = format!(
        "in-process on {url}, embedded store in {}, --durability {setting}; native HTTP/1.1 API through \
         sluice-client, one connection per producer and consumer; a stream of {partitions} partitions per phase, \
         appends without keys (round robin), one batch call each; consumers in {group}",
        server.data_dir().display()
    );
    Ok(Connected {
        peer: Box::new(SluiceStreams { server, url, mode, partitions, members: 0.into() }),
        version: format!("Sluice {}", env!("CARGO_PKG_VERSION")),
        settings,
        durability: class,
        durability_setting: setting,
        batch_max: APPEND_RECORDS_MAX.min(READ_RECORDS_MAX as usize),
    })
}

#[async_trait]
impl Peer for SluiceStreams {
    async fn create(&self, queue: &str) -> anyhow::Result<()> {
        let client = crate::workload::client(&self.url)?;
        let stream =
            CreateStreamRequest { name: queue.to_owned(), partitions: Some(self.partitions), ..Default::default() };
        client.create_stream(&stream).await?;
        let shared = self.mode == GroupMode::Shared;
        let group = CreateGroupRequest {
            name: GROUP.into(),
            mode: Some(self.mode),
            start: Some(GroupStart::Named(StartName::Earliest)),
            ack_timeout_ms: shared.then_some(ACK_TIMEOUT_MS),
            ..Default::default()
        };
        client.create_group(queue, &group).await?;
        Ok(())
    }

    async fn producer(&self, queue: &str) -> anyhow::Result<Box<dyn Producer>> {
        Ok(Box::new(StreamProducer { client: crate::workload::client(&self.url)?, stream: queue.to_owned() }))
    }

    async fn consumer(&self, queue: &str, _batch: usize) -> anyhow::Result<Box<dyn Consumer>> {
        let n = self.members.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Box::new(StreamConsumer {
            client: crate::workload::client(&self.url)?,
            stream: queue.to_owned(),
            member: format!("m{n}"),
            mode: self.mode,
            generation: 0,
            next: BTreeMap::new(),
            receipts: Vec::new(),
        }))
    }

    async fn delete(&self, queue: &str) -> anyhow::Result<()> {
        crate::workload::client(&self.url)?.delete_stream(queue).await?;
        Ok(())
    }

    async fn stop(self: Box<Self>) -> anyhow::Result<()> {
        self.server.stop().await
    }
}

struct StreamProducer {
    client: Client,
    stream: String,
}

#[async_trait]
impl Producer for StreamProducer {
    async fn send(&mut self, bodies: &[Bytes]) -> anyhow::Result<()> {
        let records = bodies
            .iter()
            .map(|body| {
                let body = std::str::from_utf8(body).context("bodies are text")?;
                Ok(AppendRecord { body: Some(body.to_owned()), ..Default::default() })
            })
            .collect::<anyhow::Result<_>>()?;
        let results = self.client.append(&self.stream, records).await?;
        if let Some(error) = results.iter().find_map(|r| r.error.as_ref()) {
            bail!("append entry refused: {error:?}");
        }
        Ok(())
    }
}

struct StreamConsumer {
    client: Client,
    stream: String,
    member: String,
    mode: GroupMode,
    /// `offsets`: the generation of the last fetch and the next offset of each partition in it.
    generation: u64,
    next: BTreeMap<u32, u64>,
    /// `shared`: the receipts of the last fetch.
    receipts: Vec<String>,
}

#[async_trait]
impl Consumer for StreamConsumer {
    async fn receive(&mut self, max: usize, wait: Duration) -> anyhow::Result<Vec<Bytes>> {
        let max = u32::try_from(max).unwrap_or(u32::MAX);
        let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        let fetched = self.client.fetch(&self.stream, GROUP, &self.member, max, wait_ms).await?;
        self.generation = fetched.generation.unwrap_or(0);
        self.next.clear();
        self.receipts.clear();
        let mut bodies = Vec::with_capacity(fetched.records.len());
        for r in fetched.records {
            self.next.insert(r.partition, r.offset + 1);
            self.receipts.extend(r.receipt);
            bodies.push(Bytes::from(r.body.unwrap_or_default()));
        }
        Ok(bodies)
    }

    async fn ack(&mut self) -> anyhow::Result<()> {
        match self.mode {
            GroupMode::Offsets if !self.next.is_empty() => {
                let next = std::mem::take(&mut self.next);
                match self.client.commit(&self.stream, GROUP, &self.member, self.generation, &next).await {
                    // A member that joined meanwhile took a partition: its new owner reads it
                    // from the last commit, as a Kafka consumer after a rebalance would.
                    Err(e) if e.code_str() == Some("stale_generation") => Ok(()),
                    other => Ok(other?),
                }
            }
            GroupMode::Shared if !self.receipts.is_empty() => {
                let receipts = std::mem::take(&mut self.receipts);
                let answer = self.client.settle(&self.stream, GROUP, Settle::Ack, receipts, None).await?;
                if let Some(error) = answer.results.iter().find_map(|r| r.error.as_ref()) {
                    bail!("ack entry refused: {error:?}");
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}
