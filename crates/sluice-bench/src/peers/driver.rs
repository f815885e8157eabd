//! The one interface every system under test implements, so that one load generator
//! (`peers::load`) drives Sluice and each peer through the same calls.
//!
//! A driver owns its connections and everything it created; `Peer::delete` removes a queue and
//! `Peer::stop` whatever the driver started (a second server process, an in-process Sluice).

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use super::system::Durability;

/// A system ready to measure, with what the report says about it.
pub(crate) struct Connected {
    pub peer: Box<dyn Peer>,
    /// The server's name and version as it reports them, e.g. "RabbitMQ 3.10.8".
    pub version: String,
    /// Every setting that bears on the figures, in words: durability, queue type, client.
    pub settings: String,
    /// What an acknowledged send survives with these settings.
    pub durability: Durability,
    /// The durability setting in the system's own words, e.g. "appendfsync always".
    pub durability_setting: String,
    /// Most messages per send and per receive through this driver.
    pub batch_max: usize,
}

/// One system under test, connected and set up with its durability setting.
#[async_trait]
pub(crate) trait Peer: Send + Sync {
    /// Creates an empty queue (stream, table) named `queue`, which must not exist yet.
    async fn create(&self, queue: &str) -> anyhow::Result<()>;

    /// A producer on its own connection to `queue`.
    async fn producer(&self, queue: &str) -> anyhow::Result<Box<dyn Producer>>;

    /// A consumer on its own connection to `queue`, holding at most `batch` unacknowledged
    /// messages where the system has such a setting (prefetch, pull batch).
    async fn consumer(&self, queue: &str, batch: usize) -> anyhow::Result<Box<dyn Consumer>>;

    /// Deletes `queue` and every message left in it. Called after every phase, failed or not.
    async fn delete(&self, queue: &str) -> anyhow::Result<()>;

    /// Closes connections and stops what the driver started. Called once, failed run or not.
    async fn stop(self: Box<Self>) -> anyhow::Result<()>;
}

/// Sends messages and waits until the system has taken responsibility for them.
#[async_trait]
pub(crate) trait Producer: Send {
    /// Sends `bodies` (at most the system's batch size) and returns once every one is
    /// acknowledged at the system's durability setting: confirmed, synced, committed.
    async fn send(&mut self, bodies: &[Bytes]) -> anyhow::Result<()>;
}

/// Receives messages and acknowledges them.
#[async_trait]
pub(crate) trait Consumer: Send {
    /// Waits up to `wait` for a first message, then returns it with whatever else is ready, at
    /// most `max` in all; an empty list when `wait` passed with nothing to deliver.
    async fn receive(&mut self, max: usize, wait: Duration) -> anyhow::Result<Vec<Bytes>>;

    /// Acknowledges every message the last `receive` returned, so that it is not delivered again.
    async fn ack(&mut self) -> anyhow::Result<()>;
}

/// Receives from a push-style stream of deliveries (RabbitMQ's consumer, NATS's pull stream):
/// waits up to `wait` for the first item, then takes what is already buffered, up to `max`.
/// `None` from the stream means the subscription ended, which is an error for a benchmark.
pub(crate) async fn take_ready<S, T, E>(stream: &mut S, max: usize, wait: Duration) -> anyhow::Result<Vec<T>>
where
    S: futures::Stream<Item = Result<T, E>> + Unpin,
    E: std::fmt::Display,
{
    use futures::{FutureExt as _, StreamExt as _};

    let mut taken = Vec::with_capacity(max);
    let first = match tokio::time::timeout(wait, stream.next()).await {
        Err(_) => return Ok(taken),
        Ok(None) => anyhow::bail!("the subscription ended"),
        Ok(Some(item)) => item.map_err(|e| anyhow::anyhow!("{e}"))?,
    };
    taken.push(first);
    while taken.len() < max {
        // `now_or_never` polls once: a delivery already received is taken, none is waited for.
        match stream.next().now_or_never() {
            Some(Some(item)) => taken.push(item.map_err(|e| anyhow::anyhow!("{e}"))?),
            Some(None) => anyhow::bail!("the subscription ended"),
            None => break,
        }
    }
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;

    use super::*;

    #[tokio::test]
    async fn take_ready_takes_what_is_buffered_up_to_max() {
        let items: Vec<Result<u32, String>> = (0..5).map(Ok).collect();
        let mut stream = futures::stream::iter(items).chain(futures::stream::pending());
        let wait = Duration::from_millis(10);
        assert_eq!(take_ready(&mut stream, 3, wait).await.ok(), Some(vec![0, 1, 2]));
        assert_eq!(take_ready(&mut stream, 3, wait).await.ok(), Some(vec![3, 4]));
        assert_eq!(take_ready(&mut stream, 3, wait).await.ok(), Some(vec![]));
    }

    #[tokio::test]
    async fn take_ready_reports_errors_and_an_ended_stream() {
        let wait = Duration::from_millis(10);
        let mut failing = futures::stream::iter(vec![Ok(1), Err("broken".to_owned())]);
        assert_eq!(take_ready(&mut failing, 5, wait).await.map_err(|e| e.to_string()), Err("broken".to_owned()));
        let mut ended = futures::stream::iter(Vec::<Result<u32, String>>::new());
        let error = take_ready(&mut ended, 5, wait).await.map_err(|e| e.to_string());
        assert_eq!(error, Err("the subscription ended".to_owned()));
    }
}
