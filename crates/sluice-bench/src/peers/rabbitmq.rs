//! RabbitMQ as a peer, through lapin: a durable classic queue or a quorum queue, persistent
//! messages (delivery mode 2) with publisher confirms, and consumers with manual acks.
//!
//! A confirm for a persistent message on a durable queue comes after the message is on disk
//! (classic queues' message store and quorum queues' Raft log both fsync before confirming, in
//! groups), so both queue types are per-write durable.

use std::time::Duration;

use anyhow::{Context, bail};
use async_trait::async_trait;
use bytes::Bytes;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};

use super::driver::{Connected, Consumer, Peer, Producer, take_ready};
use super::system::Durability;

/// Most messages per publish burst and receive: RabbitMQ has no batch publish, so a "batch" is
/// that many publishes followed by waiting for all their confirms; the prefetch matches it.
const BATCH_MAX: usize = 1_000;
/// How long `rabbitmqctl version` may take.
const VERSION_WAIT: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueType {
    Classic,
    Quorum,
    /// A stream queue (x-queue-type=stream) over AMQP 0-9-1: an append-only log, read from its
    /// first record by each consumer (RabbitMQ 3.10 has no consumer groups on streams).
    Stream,
}

impl QueueType {
    fn name(self) -> &'static str {
        match self {
            QueueType::Classic => "classic",
            QueueType::Quorum => "quorum",
            QueueType::Stream => "stream",
        }
    }
}

pub(crate) struct RabbitMq {
    url: String,
    queue_type: QueueType,
    admin: Connection,
    channel: Channel,
}

pub(crate) async fn connect(url: &str, queue_type: QueueType) -> anyhow::Result<Connected> {
    let admin = Connection::connect(url, ConnectionProperties::default())
        .await
        .with_context(|| format!("connecting to RabbitMQ at {url}"))?;
    let channel = admin.create_channel().await?;
    let version = server_version().await;
    let kind = queue_type.name();
    let settings = format!(
        "{url} via lapin; durable {kind} queue (x-queue-type={kind}), persistent messages (delivery mode 2) on the \
         default exchange, publisher confirms (a batch = that many publishes, then waiting for every confirm), \
         manual acks (one basic.ack with multiple=true per receive), prefetch = batch; one connection per producer \
         and consumer"
    );
    // A stream confirms a publish once it is written to the stream's segment file, which is
    // not fsynced: RabbitMQ leaves a stream's durability to replication and the page cache.
    let (durability, setting) = match queue_type {
        QueueType::Stream => (Durability::Deferred, "stream queue, confirms (segment files not fsynced)".to_owned()),
        _ => (Durability::PerWrite, format!("{kind} queue, persistent + confirms")),
    };
    Ok(Connected {
        peer: Box::new(RabbitMq { url: url.to_owned(), queue_type, admin, channel }),
        version,
        settings,
        durability,
        durability_setting: setting,
        batch_max: BATCH_MAX,
    })
}

/// "RabbitMQ 3.10.8" from `rabbitmqctl version` (lapin does not expose the server's properties),
/// or why it is unknown.
async fn server_version() -> String {
    let run = tokio::process::Command::new("rabbitmqctl").arg("version").kill_on_drop(true).output();
    match tokio::time::timeout(VERSION_WAIT, run).await {
        Ok(Ok(output)) if output.status.success() => {
            let text = String::from_utf8_lossy(&output.stdout);
            match text.lines().map(str::trim).rfind(|l| !l.is_empty()) {
                Some(version) => format!("RabbitMQ {version}"),
                None => "RabbitMQ (version unknown: rabbitmqctl printed nothing)".into(),
            }
        }
        Ok(Ok(output)) => format!("RabbitMQ (version unknown: rabbitmqctl version exited {})", output.status),
        Ok(Err(e)) => format!("RabbitMQ (version unknown: rabbitmqctl: {e})"),
        Err(_) => format!("RabbitMQ (version unknown: rabbitmqctl took over {VERSION_WAIT:?})"),
    }
}

async fn open_channel(url: &str) -> anyhow::Result<(Connection, Channel)> {
    let connection = Connection::connect(url, ConnectionProperties::default()).await?;
    let channel = connection.create_channel().await?;
    Ok((connection, channel))
}

#[async_trait]
impl Peer for RabbitMq {
    async fn create(&self, queue: &str) -> anyhow::Result<()> {
        let mut arguments = FieldTable::default();
        arguments.insert("x-queue-type".into(), AMQPValue::LongString(self.queue_type.name().into()));
        let options = QueueDeclareOptions { durable: true, ..Default::default() };
        self.channel.queue_declare(queue.into(), options, arguments).await?;
        Ok(())
    }

    async fn producer(&self, queue: &str) -> anyhow::Result<Box<dyn Producer>> {
        let (connection, channel) = open_channel(&self.url).await?;
        channel.confirm_select(ConfirmSelectOptions::default()).await?;
        Ok(Box::new(RabbitProducer { _connection: connection, channel, queue: queue.to_owned() }))
    }

    async fn consumer(&self, queue: &str, batch: usize) -> anyhow::Result<Box<dyn Consumer>> {
        let (connection, channel) = open_channel(&self.url).await?;
        let prefetch = u16::try_from(batch).unwrap_or(u16::MAX);
        channel.basic_qos(prefetch, BasicQosOptions::default()).await?;
        let mut arguments = FieldTable::default();
        if self.queue_type == QueueType::Stream {
            arguments.insert("x-stream-offset".into(), AMQPValue::LongString("first".into()));
        }
        let deliveries =
            channel.basic_consume(queue.into(), "".into(), BasicConsumeOptions::default(), arguments).await?;
        Ok(Box::new(RabbitConsumer { _connection: connection, channel, deliveries, last_tag: None }))
    }

    async fn delete(&self, queue: &str) -> anyhow::Result<()> {
        self.channel.queue_delete(queue.into(), QueueDeleteOptions::default()).await?;
        Ok(())
    }

    async fn stop(self: Box<Self>) -> anyhow::Result<()> {
        self.admin.close(200, "benchmark done".into()).await?;
        Ok(())
    }
}

struct RabbitProducer {
    /// Kept open for the channel's sake.
    _connection: Connection,
    channel: Channel,
    queue: String,
}

#[async_trait]
impl Producer for RabbitProducer {
    async fn send(&mut self, bodies: &[Bytes]) -> anyhow::Result<()> {
        let mut confirms = Vec::with_capacity(bodies.len());
        for body in bodies {
            let properties = BasicProperties::default().with_delivery_mode(2);
            let confirm = self
                .channel
                .basic_publish("".into(), self.queue.as_str().into(), BasicPublishOptions::default(), body, properties)
                .await?;
            confirms.push(confirm);
        }
        for confirm in confirms {
            if !confirm.await?.is_ack() {
                bail!("the broker refused a message (basic.nack)");
            }
        }
        Ok(())
    }
}

struct RabbitConsumer {
    _connection: Connection,
    channel: Channel,
    deliveries: lapin::Consumer,
    /// Delivery tag of the last message received and not yet acknowledged.
    last_tag: Option<u64>,
}

#[async_trait]
impl Consumer for RabbitConsumer {
    async fn receive(&mut self, max: usize, wait: Duration) -> anyhow::Result<Vec<Bytes>> {
        let deliveries = take_ready(&mut self.deliveries, max, wait).await?;
        self.last_tag = deliveries.last().map(|d| d.delivery_tag);
        Ok(deliveries.into_iter().map(|d| Bytes::from(d.data)).collect())
    }

    async fn ack(&mut self) -> anyhow::Result<()> {
        if let Some(tag) = self.last_tag.take() {
            self.channel.basic_ack(tag, BasicAckOptions { multiple: true }).await?;
        }
        Ok(())
    }
}
