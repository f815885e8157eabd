//! Sluice under load: producers and consumers over the native HTTP API against one queue, one
//! phase per batch size (the throughput scenario) or per queue (the `fifo` scenario, whose FIFO
//! phases spread messages round-robin over message groups).
//!
//! Every task is closed-loop (it waits for its call's answer before the next one) and stops by
//! itself at the end of the phase, abandoning a call still in flight. A call counts when it
//! completes inside the measured window, which starts after the warm-up.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use sluice_api::{CreateQueueRequest, ReceiveRequest, SendMessage, SendRequest};
use sluice_client::Client;
use tokio::sync::Notify;
use tokio::time::sleep_until;

use crate::Plan;
use crate::ceiling::ERROR_PAUSE;
use crate::stats::Tally;

/// Long-poll wait of each receive.
pub(crate) const RECEIVE_WAIT_MS: u64 = 1_000;
/// Visibility timeout of each receive; longer than any phase, so nothing is redelivered.
const VISIBILITY_TIMEOUT_MS: u64 = 30_000;
/// Hex digits of the send timestamp at the start of every body.
const TIMESTAMP_DIGITS: usize = 16;
/// How long the server may take to answer a call before the benchmark gives up on it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One phase: which queue, which batch size, and for a FIFO queue how many message groups.
#[derive(Debug, Clone)]
pub(crate) struct PhaseSpec {
    /// Shown on the progress bar.
    pub label: String,
    /// Must exist; purged before the phase.
    pub queue: String,
    pub batch: u32,
    /// FIFO queues: message `k` of the phase goes to group `k mod groups` with a dedup id unique
    /// to this run. `None`: no group and no dedup id (standard queues).
    pub groups: Option<u32>,
}

/// What one phase achieved.
#[derive(Debug, Clone)]
pub(crate) struct PhaseResult {
    pub batch: u32,
    pub window: Duration,
    /// Messages whose send was acknowledged; latency of each send call.
    pub sent: Tally,
    /// Messages received; latency from the start of their send call to the end of the receive.
    pub received: Tally,
    /// Acks that failed, per receipt.
    pub ack: Tally,
    /// Messages left in the queue (visible, in flight or delayed) when the phase stopped.
    pub backlog: Option<u64>,
}

/// Runs one phase per batch size against the server at `url`.
pub(crate) async fn run(plan: &Plan, url: &str) -> anyhow::Result<Vec<PhaseResult>> {
    let client = client(url)?;
    client
        .create_queue(&CreateQueueRequest { name: plan.queue.clone(), ..Default::default() })
        .await
        .with_context(|| format!("creating queue {} on {url}", plan.queue))?;
    // Timestamps in bodies are nanoseconds since this instant; producers and consumers share it.
    let epoch = Instant::now();
    let mut results = Vec::with_capacity(plan.batches.len());
    for &batch in &plan.batches {
        let spec = PhaseSpec { label: format!("batch {batch}"), queue: plan.queue.clone(), batch, groups: None };
        results.push(phase(plan, &client, epoch, &spec).await?);
    }
    // Leave an external server's queue empty, as it was found or better.
    client.purge_queue(&plan.queue).await.context("purging the queue after the last phase")?;
    Ok(results)
}

/// A client for the benchmark's calls. One attempt per call: a retried send would hide errors
/// and blur latencies.
pub(crate) fn client(url: &str) -> anyhow::Result<Client> {
    Ok(Client::builder(url).timeout(REQUEST_TIMEOUT).attempts(1).build()?)
}

/// What every task of a phase shares.
struct Phase {
    client: Client,
    queue: String,
    batch: u32,
    groups: Option<u32>,
    /// Messages the phase's producers have taken numbers for; numbers pick groups and dedup ids.
    numbered: AtomicU64,
    /// Prefix of the dedup ids, unique to this process, so that a rerun against the same external
    /// server within the dedup window is not deduplicated away.
    dedup_prefix: String,
    body_bytes: usize,
    epoch: Instant,
    /// Start of the measured window (end of the warm-up).
    start: Instant,
    end: Instant,
    sent_live: AtomicU64,
    received_live: AtomicU64,
    /// Messages producers have started to send and consumers have not yet received.
    outstanding: AtomicU64,
    /// `None`: producers never wait.
    outstanding_max: Option<u64>,
    /// Woken when consumers receive, so that waiting producers look at `outstanding` again.
    room: Notify,
}

impl Phase {
    fn measured(&self, at: Instant) -> bool {
        at >= self.start && at < self.end
    }

    /// Waits until `count` more messages fit under the backlog limit and reserves them; false if
    /// the phase ended first. Producers check and add separately, so the limit can be overshot
    /// by one batch per producer: it is a bound on queueing, not an exact count.
    async fn reserve(&self, count: u64) -> bool {
        let Some(max) = self.outstanding_max else { return true };
        let end = tokio::time::Instant::from_std(self.end);
        loop {
            // Created before the check, so a wake-up between the check and the wait is kept.
            let room = self.room.notified();
            if self.outstanding.load(Ordering::Acquire) + count <= max.max(count) {
                self.outstanding.fetch_add(count, Ordering::AcqRel);
                return true;
            }
            tokio::select! {
                _ = room => {}
                _ = sleep_until(end) => return false,
            }
        }
    }

    /// Gives back reservations: messages received, or sends that were refused or failed.
    fn release(&self, count: u64) {
        if self.outstanding_max.is_none() || count == 0 {
            return;
        }
        // Saturating: a send that failed in transit but was applied is released twice.
        let _ = self.outstanding.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| Some(n.saturating_sub(count)));
        self.room.notify_waiters();
    }

    fn nanos_since_epoch(&self, at: Instant) -> u64 {
        u64::try_from(at.duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Runs one phase against `spec.queue`, which must exist.
pub(crate) async fn phase(
    plan: &Plan,
    client: &Client,
    epoch: Instant,
    spec: &PhaseSpec,
) -> anyhow::Result<PhaseResult> {
    let batch = spec.batch;
    // A backlog left by the previous phase would inflate this one's end-to-end latency.
    client.purge_queue(&spec.queue).await.context("purging the queue before a phase")?;
    let began = Instant::now();
    let start = began + plan.warmup;
    let phase = Arc::new(Phase {
        client: client.clone(),
        queue: spec.queue.clone(),
        batch,
        groups: spec.groups,
        numbered: AtomicU64::new(0),
        dedup_prefix: run_nonce(),
        body_bytes: plan.body_bytes,
        epoch,
        start,
        end: start + plan.duration,
        sent_live: AtomicU64::new(0),
        received_live: AtomicU64::new(0),
        outstanding: AtomicU64::new(0),
        outstanding_max: plan.backlog_max(batch),
        room: Notify::new(),
    });
    let producers: Vec<_> = (0..plan.producers).map(|_| tokio::spawn(produce(phase.clone()))).collect();
    let consumers: Vec<_> = (0..plan.consumers).map(|_| tokio::spawn(consume(phase.clone()))).collect();

    let bar = crate::progress::phase(&spec.label, plan.warmup + plan.duration);
    while Instant::now() < phase.end {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = Instant::now();
        bar.set_position(now.duration_since(began).as_millis() as u64);
        let stage = if now < start { "warm-up" } else { "measuring" };
        let sent = phase.sent_live.load(Ordering::Relaxed);
        let received = phase.received_live.load(Ordering::Relaxed);
        bar.set_message(format!("{stage}: sent {sent}, received {received}"));
    }

    let mut sent = Tally::new();
    for task in producers {
        sent.merge(&task.await.context("a producer task panicked")?);
    }
    let mut received = Tally::new();
    let mut ack = Tally::new();
    for task in consumers {
        let (r, a) = task.await.context("a consumer task panicked")?;
        received.merge(&r);
        ack.merge(&a);
    }
    bar.finish_and_clear();
    let backlog =
        client.get_queue(&spec.queue).await.ok().map(|q| q.counts.visible + q.counts.in_flight + q.counts.delayed);
    Ok(PhaseResult { batch, window: plan.duration, sent, received, ack, backlog })
}

/// Sends batches until the phase ends; each body starts with the send call's start time.
async fn produce(phase: Arc<Phase>) -> Tally {
    let end = tokio::time::Instant::from_std(phase.end);
    let padding = body_padding(phase.body_bytes);
    let mut tally = Tally::new();
    loop {
        if !phase.reserve(u64::from(phase.batch)).await {
            break;
        }
        let first = phase.numbered.fetch_add(u64::from(phase.batch), Ordering::Relaxed);
        let started = Instant::now();
        let body = stamped_body(phase.nanos_since_epoch(started), &padding);
        let messages = (first..first + u64::from(phase.batch))
            .map(|k| {
                let mut message = SendMessage { body: Some(body.clone()), ..Default::default() };
                if let Some(groups) = phase.groups {
                    message.group_id = Some(group_of(k, groups));
                    message.dedup_id = Some(format!("{}-{k}", phase.dedup_prefix));
                }
                message
            })
            .collect();
        let request = SendRequest { messages };
        let outcome = tokio::select! {
            outcome = phase.client.send_messages(&phase.queue, &request) => outcome,
            _ = sleep_until(end) => break,
        };
        let done = Instant::now();
        match outcome {
            Ok(response) => {
                let ok = response.results.iter().filter(|r| r.id.is_some()).count() as u64;
                let refused = response.results.len() as u64 - ok;
                if refused > 0 {
                    let first = response.results.iter().find_map(|r| r.error.as_ref());
                    tally.error(refused, || format!("send entry refused: {first:?}"));
                }
                phase.release(u64::from(phase.batch) - ok);
                phase.sent_live.fetch_add(ok, Ordering::Relaxed);
                if phase.measured(done) {
                    tally.count += ok;
                    tally.latency.record(done - started);
                }
            }
            Err(e) => {
                // The send may still have been applied; if so, receiving it releases it twice,
                // which `release` tolerates by saturating.
                phase.release(u64::from(phase.batch));
                tally.error(u64::from(phase.batch), || format!("send: {e}"));
                tokio::time::sleep(ERROR_PAUSE).await;
            }
        }
    }
    tally
}

/// Long-polls, records each message's end-to-end latency, then acks everything received in one
/// call, until the phase ends. Returns the receive tally and the ack tally.
async fn consume(phase: Arc<Phase>) -> (Tally, Tally) {
    let end = tokio::time::Instant::from_std(phase.end);
    let request = ReceiveRequest {
        max: Some(phase.batch),
        wait_ms: Some(RECEIVE_WAIT_MS),
        visibility_timeout_ms: Some(VISIBILITY_TIMEOUT_MS),
    };
    let mut received = Tally::new();
    let mut ack = Tally::new();
    loop {
        let outcome = tokio::select! {
            outcome = phase.client.receive_messages(&phase.queue, &request) => outcome,
            _ = sleep_until(end) => break,
        };
        let done = Instant::now();
        let messages = match outcome {
            Ok(list) => list.messages,
            Err(e) => {
                received.error(1, || format!("receive: {e}"));
                tokio::time::sleep(ERROR_PAUSE).await;
                continue;
            }
        };
        let done_nanos = phase.nanos_since_epoch(done);
        let mut receipts = Vec::with_capacity(messages.len());
        let mut ours = 0;
        for message in messages {
            match message.body.as_deref().and_then(sent_at_nanos) {
                Some(sent) => {
                    ours += 1;
                    phase.received_live.fetch_add(1, Ordering::Relaxed);
                    if phase.measured(done) {
                        received.count += 1;
                        received.latency.record(Duration::from_nanos(done_nanos.saturating_sub(sent)));
                    }
                }
                None => {
                    received.error(1, || format!("message {} has no send timestamp; is the queue shared?", message.id))
                }
            }
            receipts.extend(message.receipt);
        }
        phase.release(ours);
        if receipts.is_empty() {
            continue;
        }
        let count = receipts.len() as u64;
        let outcome = tokio::select! {
            outcome = phase.client.ack(&phase.queue, receipts) => outcome,
            _ = sleep_until(end) => break,
        };
        match outcome {
            Ok(response) => {
                let failed = response.results.iter().filter(|r| !r.ok).count() as u64;
                if failed > 0 {
                    let first = response.results.iter().find_map(|r| r.error.as_ref());
                    ack.error(failed, || format!("ack entry refused: {first:?}"));
                }
                ack.count += count - failed;
            }
            Err(e) => {
                ack.error(count, || format!("ack: {e}"));
                tokio::time::sleep(ERROR_PAUSE).await;
            }
        }
    }
    (received, ack)
}

/// The padding that makes a stamped body `body_bytes` long (at least `TIMESTAMP_DIGITS`).
pub(crate) fn body_padding(body_bytes: usize) -> String {
    ".".repeat(body_bytes.saturating_sub(TIMESTAMP_DIGITS))
}

/// A body that starts with its send time: `nanos` since the run's epoch, in hex.
pub(crate) fn stamped_body(nanos: u64, padding: &str) -> String {
    format!("{nanos:016x}{padding}")
}

/// The send time written by `stamped_body` at the start of a body.
pub(crate) fn sent_at_nanos(body: &str) -> Option<u64> {
    u64::from_str_radix(body.get(..TIMESTAMP_DIGITS)?, 16).ok()
}

/// The message group of a FIFO phase's `k`-th message: round-robin over `groups` groups.
fn group_of(k: u64, groups: u32) -> String {
    format!("g{}", k % u64::from(groups.max(1)))
}

/// A string unique to this process run: its start in nanoseconds since the Unix epoch, in hex.
pub(crate) fn run_nonce() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("{nanos:x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_carry_their_send_time() {
        let body = stamped_body(123_456_789, &body_padding(20));
        assert_eq!(body.len(), 20);
        assert_eq!(sent_at_nanos(&body), Some(123_456_789));
        assert_eq!(sent_at_nanos(&format!("{:016x}....", 123_456_789u64)), Some(123_456_789));
        assert_eq!(sent_at_nanos("short"), None);
        assert_eq!(sent_at_nanos("not hex at all, not hex at all"), None);
    }

    #[test]
    fn fifo_messages_go_round_robin_over_the_groups() {
        let groups = |n: u32| (0..5).map(|k| group_of(k, n)).collect::<Vec<_>>();
        assert_eq!(groups(1), ["g0", "g0", "g0", "g0", "g0"]);
        assert_eq!(groups(2), ["g0", "g1", "g0", "g1", "g0"]);
        assert_eq!(groups(1_000), ["g0", "g1", "g2", "g3", "g4"]);
        assert_eq!(group_of(1_999, 1_000), "g999");
    }
}
