//! NATS JetStream as a peer, through async-nats: one work-queue stream on file storage per
//! phase, one durable pull consumer with explicit acks shared by every consumer task, and
//! producers that publish a batch and then wait for every publish ack.
//!
//! Two settings: the running server at its default sync (nats-server syncs the file store every
//! two minutes unless told otherwise), and a second nats-server this driver starts itself with
//! `sync_interval: always`, which syncs before acknowledging every publish.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use async_nats::jetstream::{self, consumer, stream};
use async_trait::async_trait;
use bytes::Bytes;
use futures::future::try_join_all;

use super::driver::{Connected, Consumer, Peer, Producer, take_ready};
use super::spawned::Spawned;
use super::system::Durability;

/// The durable consumer every consumer task pulls from.
const CONSUMER_NAME: &str = "sluice-bench";
/// Most messages per publish burst and per pull request.
const BATCH_MAX: usize = 1_000;
/// Redelivery timeout of an unacknowledged message: longer than any phase.
const ACK_WAIT: Duration = Duration::from_secs(60);

pub(crate) struct Nats {
    url: String,
    /// `WorkQueue` for the peers scenario (a message goes once acked), `Limits` for streams (a
    /// log that the durable consumer reads and acks, every message kept).
    retention: stream::RetentionPolicy,
    admin: jetstream::Context,
    /// The second server, when this driver started one.
    server: Option<Spawned>,
}

/// The running server at `url`, at its default sync.
pub(crate) async fn connect_default(url: &str) -> anyhow::Result<Connected> {
    connect(url, None, "default sync (the file store is synced every 2 minutes)", stream::RetentionPolicy::WorkQueue)
        .await
}

/// As [`connect_default`] and [`connect_always`] (`always`), with streams that keep every
/// message (limits retention), as a log: the streams scenario's setting.
pub(crate) async fn connect_log(url: &str, tmp_dir: &Path, always: bool) -> anyhow::Result<Connected> {
    let retention = stream::RetentionPolicy::Limits;
    if always {
        let server = spawn_always(tmp_dir).await?;
        let url = format!("nats://127.0.0.1:{}", server.port);
        connect(&url, Some(server), "sync_interval: always", retention).await
    } else {
        connect(url, None, "default sync (the file store is synced every 2 minutes)", retention).await
    }
}

/// A second nats-server on a free port with its own store, syncing every write.
pub(crate) async fn connect_always(tmp_dir: &Path) -> anyhow::Result<Connected> {
    let server = spawn_always(tmp_dir).await?;
    let url = format!("nats://127.0.0.1:{}", server.port);
    connect(&url, Some(server), "sync_interval: always", stream::RetentionPolicy::WorkQueue).await
}

async fn spawn_always(tmp_dir: &Path) -> anyhow::Result<Spawned> {
    Spawned::start("nats-server", tmp_dir, |port, dir| {
        let config = format!(
            "listen: 127.0.0.1:{port}\njetstream {{\n  store_dir: \"{}\"\n  sync_interval: always\n}}\n",
            dir.join("jetstream").display()
        );
        let path = dir.join("nats.conf");
        std::fs::write(&path, config).context("writing nats.conf")?;
        Ok(vec!["-c".into(), path.display().to_string()])
    })
    .await
    .context("starting a second nats-server with `sync_interval: always`")
}

async fn connect(
    url: &str,
    server: Option<Spawned>,
    sync: &str,
    retention: stream::RetentionPolicy,
) -> anyhow::Result<Connected> {
    let client = async_nats::connect(url).await.with_context(|| format!("connecting to NATS at {url}"))?;
    let info = client.server_info();
    if !info.jetstream {
        anyhow::bail!("the NATS server at {url} does not have JetStream enabled");
    }
    let started = match &server {
        Some(s) => format!(", started by the harness with its store in {}", s.dir().display()),
        None => String::new(),
    };
    let kind = match retention {
        stream::RetentionPolicy::WorkQueue => "a work-queue stream",
        _ => "a stream keeping every message (limits retention)",
    };
    let settings = format!(
        "{url}{started} via async-nats; {kind} on file storage, 1 replica, {sync}; one durable pull \
         consumer with explicit acks (one ack per message, not awaited), max_ack_pending unlimited, pulled in \
         batches; producers publish a batch then await every publish ack; one connection per producer and consumer"
    );
    let (durability, setting) = match server {
        Some(_) => (Durability::PerWrite, "sync_interval: always".to_owned()),
        None => (Durability::Deferred, "default sync (every 2 min)".to_owned()),
    };
    Ok(Connected {
        peer: Box::new(Nats { url: url.to_owned(), retention, admin: jetstream::new(client), server }),
        version: format!("nats-server {}", info.version),
        settings,
        durability,
        durability_setting: setting,
        batch_max: BATCH_MAX,
    })
}

#[async_trait]
impl Peer for Nats {
    async fn create(&self, queue: &str) -> anyhow::Result<()> {
        let config = stream::Config {
            name: queue.to_owned(),
            subjects: vec![queue.to_owned()],
            retention: self.retention,
            storage: stream::StorageType::File,
            num_replicas: 1,
            ..Default::default()
        };
        let stream = self.admin.create_stream(config).await?;
        let consumer = consumer::pull::Config {
            durable_name: Some(CONSUMER_NAME.to_owned()),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: ACK_WAIT,
            max_ack_pending: -1,
            ..Default::default()
        };
        stream.create_consumer(consumer).await?;
        Ok(())
    }

    async fn producer(&self, queue: &str) -> anyhow::Result<Box<dyn Producer>> {
        let client = async_nats::connect(&self.url).await?;
        Ok(Box::new(NatsProducer { js: jetstream::new(client), subject: queue.to_owned() }))
    }

    async fn consumer(&self, queue: &str, batch: usize) -> anyhow::Result<Box<dyn Consumer>> {
        let client = async_nats::connect(&self.url).await?;
        let js = jetstream::new(client);
        let consumer: consumer::PullConsumer = js.get_consumer_from_stream(CONSUMER_NAME, queue).await?;
        let messages = consumer.stream().max_messages_per_batch(batch).messages().await?;
        Ok(Box::new(NatsConsumer { messages, unacked: Vec::new() }))
    }

    async fn delete(&self, queue: &str) -> anyhow::Result<()> {
        self.admin.delete_stream(queue).await?;
        Ok(())
    }

    async fn stop(self: Box<Self>) -> anyhow::Result<()> {
        let Nats { admin, server, .. } = *self;
        drop(admin);
        match server {
            Some(server) => server.stop().await,
            None => Ok(()),
        }
    }
}

struct NatsProducer {
    js: jetstream::Context,
    subject: String,
}

#[async_trait]
impl Producer for NatsProducer {
    async fn send(&mut self, bodies: &[Bytes]) -> anyhow::Result<()> {
        let mut acks = Vec::with_capacity(bodies.len());
        for body in bodies {
            acks.push(self.js.publish(self.subject.clone(), body.clone()).await?.into_future());
        }
        try_join_all(acks).await?;
        Ok(())
    }
}

struct NatsConsumer {
    messages: consumer::pull::Stream,
    unacked: Vec<jetstream::Message>,
}

#[async_trait]
impl Consumer for NatsConsumer {
    async fn receive(&mut self, max: usize, wait: Duration) -> anyhow::Result<Vec<Bytes>> {
        self.unacked = take_ready(&mut self.messages, max, wait).await?;
        Ok(self.unacked.iter().map(|m| m.payload.clone()).collect())
    }

    async fn ack(&mut self) -> anyhow::Result<()> {
        for message in self.unacked.drain(..) {
            message.ack().await.map_err(|e| anyhow::anyhow!("ack: {e}"))?;
        }
        Ok(())
    }
}
