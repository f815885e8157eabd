//! Sluice over its SQS API: an in-process server on a fresh embedded store at `--durability
//! fsync`, as `sluice-fsync` starts it, driven by the official AWS SDK for Rust (`aws-sdk-sqs`,
//! AWS JSON 1.0) instead of the native API, so that beside `sluice-fsync` it shows what the SQS
//! API costs on the same server and store.
//!
//! SQS allows at most 10 entries per batch call and 10 messages per receive, so a send of N
//! messages is ceil(N / 10) `SendMessageBatch` calls (fewer entries when 10 bodies would pass the
//! 1 MiB batch payload), a receive is one `ReceiveMessage` of at most 10 with long polling, and
//! an ack is `DeleteMessageBatch` calls of at most 10 receipts. A send's calls are issued
//! concurrently, so that the store's writer can group-commit them in one fsync as it commits one
//! native batch call: the comparison then measures the API (more, smaller, signed JSON requests)
//! and not ten fsyncs in a row, which a producer issuing its calls in sequence would wait for.

use std::time::Duration;

use anyhow::{Context, bail};
use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::retry::RetryConfig;
use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_sqs::types::{BatchResultErrorEntry, DeleteMessageBatchRequestEntry, SendMessageBatchRequestEntry};
use bytes::Bytes;
use futures::future::try_join_all;
use sluice_embedded::Durability as StoreDurability;

use super::driver::{Connected, Consumer, Peer, Producer};
use super::sluice::VISIBILITY_TIMEOUT_MS;
use super::system::Durability;
use crate::target::InProcess;

/// AWS's limits on one SQS call, which Sluice's SQS API enforces as AWS does (its own copy,
/// `sluice_server`'s `sqs::limits`, is private to the server): entries per batch call, body
/// bytes per batch call, messages per receive, and the longest long poll.
const SQS_BATCH_ENTRIES_MAX: usize = 10;
const SQS_BATCH_PAYLOAD_BYTES_MAX: usize = 1_048_576;
const SQS_RECEIVE_MESSAGES_MAX: usize = 10;
const SQS_WAIT_SECONDS_MAX: u64 = 20;

/// Most messages per send through this driver. A send is split into SQS batches, all in
/// flight at once, so this is the native API's batch limit: the same offered batch as
/// `sluice-fsync`, at most 100 concurrent calls per producer.
const SEND_MESSAGES_MAX: usize = sluice_core::limits::BATCH_ENTRIES_MAX;

/// The region the SDK signs for. The server accepts any signature unless it was started with
/// access keys, and the in-process server is not, so the keys are dummies too.
const REGION: &str = "us-east-1";

/// `VISIBILITY_TIMEOUT_MS` in SQS's whole seconds (60, so the cast cannot truncate).
const VISIBILITY_TIMEOUT_SECONDS: i32 = (VISIBILITY_TIMEOUT_MS / 1000) as i32;

pub(crate) struct SluiceSqs {
    server: InProcess,
    url: String,
    /// Creates and deletes queues; producers and consumers have clients of their own.
    admin: Client,
}

pub(crate) async fn connect(tmp_dir: &std::path::Path) -> anyhow::Result<Connected> {
    let server = InProcess::start(tmp_dir, StoreDurability::Fsync).await?;
    let url = server.url().to_owned();
    let settings = format!(
        "in-process on {url}, embedded store (fjall) in {}, --durability fsync; SQS API (AWS JSON 1.0) through \
         aws-sdk-sqs {} over plain HTTP/1.1, signed with dummy static keys, retries off; one SDK client (its own \
         connection pool) per producer and consumer; send = ceil(batch / {SQS_BATCH_ENTRIES_MAX}) SendMessageBatch \
         calls of at most {SQS_BATCH_ENTRIES_MAX} entries (and 1 MiB), issued concurrently; receive = one \
         ReceiveMessage, MaxNumberOfMessages at most {SQS_RECEIVE_MESSAGES_MAX}, WaitTimeSeconds long poll \
         (visibility {VISIBILITY_TIMEOUT_SECONDS} s); ack = DeleteMessageBatch, at most {SQS_BATCH_ENTRIES_MAX} entries per call",
        server.data_dir().display(),
        aws_sdk_sqs::meta::PKG_VERSION,
    );
    let admin = client(&url);
    Ok(Connected {
        peer: Box::new(SluiceSqs { server, url, admin }),
        version: format!("Sluice {}", env!("CARGO_PKG_VERSION")),
        settings,
        durability: Durability::PerWrite,
        durability_setting: "fsync".to_owned(),
        batch_max: SEND_MESSAGES_MAX,
    })
}

/// An SDK client of the server at `url` with its own connection pool: dummy keys, plain HTTP
/// without a TLS stack, and no retries, so that a failed call is counted as an error instead
/// of hiding in a slower success.
fn client(url: &str) -> Client {
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .credentials_provider(Credentials::new("AKIDSLUICEBENCH", "sluice-bench", None, None, "sluice-bench"))
        .endpoint_url(url)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .retry_config(RetryConfig::disabled())
        .build();
    Client::from_conf(config)
}

impl SluiceSqs {
    async fn queue_url(&self, queue: &str) -> anyhow::Result<String> {
        let found = self.admin.get_queue_url().queue_name(queue).send().await.context("GetQueueUrl")?;
        found.queue_url.context("GetQueueUrl returned no queue URL")
    }
}

#[async_trait]
impl Peer for SluiceSqs {
    async fn create(&self, queue: &str) -> anyhow::Result<()> {
        self.admin.create_queue().queue_name(queue).send().await.context("CreateQueue")?;
        Ok(())
    }

    async fn producer(&self, queue: &str) -> anyhow::Result<Box<dyn Producer>> {
        let queue_url = self.queue_url(queue).await?;
        Ok(Box::new(SqsProducer { client: client(&self.url), queue_url }))
    }

    async fn consumer(&self, queue: &str, _batch: usize) -> anyhow::Result<Box<dyn Consumer>> {
        let queue_url = self.queue_url(queue).await?;
        Ok(Box::new(SqsConsumer { client: client(&self.url), queue_url, receipts: Vec::new() }))
    }

    async fn delete(&self, queue: &str) -> anyhow::Result<()> {
        let queue_url = self.queue_url(queue).await?;
        self.admin.delete_queue().queue_url(queue_url).send().await.context("DeleteQueue")?;
        Ok(())
    }

    async fn stop(self: Box<Self>) -> anyhow::Result<()> {
        // The admin client's idle connection is closed first, so that the server's graceful
        // shutdown has no connection to wait for.
        let SluiceSqs { server, admin, .. } = *self;
        drop(admin);
        server.stop().await
    }
}

/// `bodies` cut into SQS batches, in order: at most 10 entries each, and at most 1 MiB of
/// bodies unless one body alone is larger (the server then refuses that call).
fn send_batches(bodies: &[Bytes]) -> Vec<&[Bytes]> {
    let mut batches = Vec::with_capacity(bodies.len().div_ceil(SQS_BATCH_ENTRIES_MAX));
    let (mut start, mut payload_bytes) = (0, 0);
    for (i, body) in bodies.iter().enumerate() {
        let full = i - start == SQS_BATCH_ENTRIES_MAX || payload_bytes + body.len() > SQS_BATCH_PAYLOAD_BYTES_MAX;
        if full && i > start {
            batches.push(&bodies[start..i]);
            (start, payload_bytes) = (i, 0);
        }
        payload_bytes += body.len();
    }
    if start < bodies.len() {
        batches.push(&bodies[start..]);
    }
    batches
}

/// `wait` as SQS's `WaitTimeSeconds`, which counts whole seconds: rounded up, so that a wait
/// under a second still long-polls instead of returning at once, and at most 20.
fn wait_seconds(wait: Duration) -> i32 {
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    // At most 20, so the cast cannot truncate.
    seconds.min(SQS_WAIT_SECONDS_MAX) as i32
}

/// The first refused entry of a batch call, as an error.
fn refused(call: &str, failed: &[BatchResultErrorEntry]) -> anyhow::Result<()> {
    match failed.first() {
        None => Ok(()),
        Some(entry) => bail!(
            "{call}: {} of the entries refused, the first ({}) with {}: {}",
            failed.len(),
            entry.id(),
            entry.code(),
            entry.message().unwrap_or("no message")
        ),
    }
}

struct SqsProducer {
    client: Client,
    queue_url: String,
}

impl SqsProducer {
    async fn send_batch(&self, bodies: &[Bytes]) -> anyhow::Result<()> {
        let entries = bodies
            .iter()
            .enumerate()
            .map(|(i, body)| {
                let body = std::str::from_utf8(body).context("bodies are text")?;
                SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(body)
                    .build()
                    .context("building a SendMessageBatch entry")
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let sent = self
            .client
            .send_message_batch()
            .queue_url(&self.queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .context("SendMessageBatch")?;
        refused("SendMessageBatch", sent.failed())
    }
}

#[async_trait]
impl Producer for SqsProducer {
    async fn send(&mut self, bodies: &[Bytes]) -> anyhow::Result<()> {
        let this = &*self;
        try_join_all(send_batches(bodies).into_iter().map(|batch| this.send_batch(batch))).await?;
        Ok(())
    }
}

struct SqsConsumer {
    client: Client,
    queue_url: String,
    /// Receipt handles of the messages the last receive returned.
    receipts: Vec<String>,
}

impl SqsConsumer {
    async fn delete_batch(&self, receipts: &[String]) -> anyhow::Result<()> {
        let entries = receipts
            .iter()
            .enumerate()
            .map(|(i, receipt)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(receipt)
                    .build()
                    .context("building a DeleteMessageBatch entry")
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let deleted = self
            .client
            .delete_message_batch()
            .queue_url(&self.queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .context("DeleteMessageBatch")?;
        refused("DeleteMessageBatch", deleted.failed())
    }
}

#[async_trait]
impl Consumer for SqsConsumer {
    async fn receive(&mut self, max: usize, wait: Duration) -> anyhow::Result<Vec<Bytes>> {
        // At most 10, so the cast cannot truncate.
        let max = max.clamp(1, SQS_RECEIVE_MESSAGES_MAX) as i32;
        let received = self
            .client
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(max)
            .wait_time_seconds(wait_seconds(wait))
            .visibility_timeout(VISIBILITY_TIMEOUT_SECONDS)
            .send()
            .await
            .context("ReceiveMessage")?;
        self.receipts.clear();
        let messages = received.messages.unwrap_or_default();
        let mut bodies = Vec::with_capacity(messages.len());
        for message in messages {
            bodies.push(Bytes::from(message.body.unwrap_or_default()));
            self.receipts.extend(message.receipt_handle);
        }
        Ok(bodies)
    }

    async fn ack(&mut self) -> anyhow::Result<()> {
        let receipts = std::mem::take(&mut self.receipts);
        let this = &*self;
        try_join_all(receipts.chunks(SQS_BATCH_ENTRIES_MAX).map(|batch| this.delete_batch(batch))).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entry count of each batch `send_batches` cuts bodies of these sizes into.
    fn check_batches(body_bytes: &[usize], expected: &[usize]) {
        let bodies: Vec<Bytes> = body_bytes.iter().map(|&n| Bytes::from(vec![b'.'; n])).collect();
        let batches = send_batches(&bodies);
        let counts: Vec<usize> = batches.iter().map(|b| b.len()).collect();
        assert_eq!(counts, expected, "bodies of {body_bytes:?} B");
        assert_eq!(batches.concat(), bodies, "every body once, in order");
    }

    #[test]
    fn a_send_is_cut_into_batches_of_ten_within_the_payload_limit() {
        check_batches(&[], &[]);
        check_batches(&[256; 7], &[7]);
        check_batches(&[256; 10], &[10]);
        check_batches(&[256; 100], &[10; 10]);
        check_batches(&[4_096; 25], &[10, 10, 5]);
        // 4 x 256 KiB is exactly the payload limit; a fifth body opens a new batch.
        check_batches(&[262_144; 5], &[4, 1]);
        // A body larger than the limit goes alone, for the server to refuse.
        check_batches(&[16, 1_048_577, 16], &[1, 1, 1]);
    }

    #[test]
    fn waits_are_whole_seconds_rounded_up_to_at_most_twenty() {
        let cases = [(0, 0), (1, 1), (999, 1), (1_000, 1), (1_001, 2), (20_000, 20), (60_000, 20)];
        for (wait_ms, expected) in cases {
            assert_eq!(wait_seconds(Duration::from_millis(wait_ms)), expected, "{wait_ms} ms");
        }
    }
}
