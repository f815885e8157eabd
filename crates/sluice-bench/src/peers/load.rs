//! The load generator of the peers scenario: the same three workloads, in the OpenMessaging
//! Benchmark's shapes, against any `Peer`.
//!
//! - Max rate: producers send full batches closed-loop (each waits for its confirmation before
//!   the next), held back while too many messages are sent but not yet received, so the figure
//!   is a steady state rather than a growing backlog.
//! - Fixed rate: producers send on a schedule at a given total rate; each message is stamped
//!   with the time it was *due*, not the time it went out, so a stalled system shows up in the
//!   latency instead of quietly lowering the rate (no coordinated omission). Whatever is due
//!   goes out together, up to a batch, as a client library with no linger would send it.
//! - Drain: producers load a backlog with no consumer running, then consumers empty it.
//!
//! Every message body starts with its stamp (nanoseconds since the run's epoch, 16 hex digits),
//! so consumers measure end-to-end latency: the stamp to the end of the receive call. Every task
//! stops by itself when the phase is stopped, abandoning a call still in flight.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use tokio::sync::Notify;

use super::driver::{Consumer, Peer, Producer};
use crate::ceiling::ERROR_PAUSE;
use crate::schedule::Schedule;
use crate::stats::Tally;
use crate::workload::{body_padding, stamped_body};

/// How long a consumer's receive waits for a first message before asking again.
pub(crate) const RECEIVE_WAIT: Duration = Duration::from_secs(1);
/// Hex digits of the stamp at the start of every body.
const STAMP_DIGITS: usize = 16;

/// Message size, concurrency and batch of one workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    pub body_bytes: usize,
    pub producers: usize,
    pub consumers: usize,
    /// Messages per send at most, and per receive at most.
    pub batch: usize,
}

/// What one phase measured.
#[derive(Debug, Clone)]
pub(crate) struct Measured {
    /// The measured time: after the warm-up (rates), or the drain's consume stage.
    pub window: Duration,
    /// Messages confirmed to producers in the window; latency of each send call.
    pub sent: Tally,
    /// Messages received in the window; end-to-end latency of each (none for a drain).
    pub received: Tally,
    /// Drain only: messages loaded and how long loading took.
    pub loaded: Option<(u64, Duration)>,
    /// False when a drain hit its time limit before every message was received.
    pub complete: bool,
}

impl Measured {
    /// Received messages per second of the window.
    pub fn rate(&self) -> f64 {
        self.received.rate(self.window)
    }
}

/// What every task of a phase shares.
struct Run {
    shape: Shape,
    epoch: Instant,
    /// Start and end of the measured window.
    start: Instant,
    end: Instant,
    padding: String,
    sent_live: AtomicU64,
    received_live: AtomicU64,
    /// Drain: messages producers have claimed, and how many to load in all.
    claimed: AtomicU64,
    load_target: u64,
    /// Drain: when the last of `load_target` messages was received.
    drained_at: Mutex<Option<Instant>>,
    /// Messages sent (or being sent) and not yet received; producers wait above `outstanding_max`.
    outstanding: AtomicU64,
    outstanding_max: Option<u64>,
    /// Woken when consumers receive, so that waiting producers look at `outstanding` again.
    room: Notify,
    stopping: AtomicBool,
    stop: Notify,
}

impl Run {
    fn new(shape: Shape, epoch: Instant, start: Instant, end: Instant) -> Run {
        Run {
            shape,
            epoch,
            start,
            end,
            padding: body_padding(shape.body_bytes),
            sent_live: AtomicU64::new(0),
            received_live: AtomicU64::new(0),
            claimed: AtomicU64::new(0),
            load_target: 0,
            drained_at: Mutex::new(None),
            outstanding: AtomicU64::new(0),
            outstanding_max: None,
            room: Notify::new(),
            stopping: AtomicBool::new(false),
            stop: Notify::new(),
        }
    }

    fn measured(&self, at: Instant) -> bool {
        at >= self.start && at < self.end
    }

    fn body(&self, due: Instant) -> Bytes {
        let nanos = u64::try_from(due.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX);
        Bytes::from(stamped_body(nanos, &self.padding))
    }

    /// Resolves once the phase is told to stop.
    async fn stopped(&self) {
        loop {
            // Created before the check, so that a stop between the check and the wait is kept.
            let woken = self.stop.notified();
            if self.stopping.load(Ordering::Acquire) {
                return;
            }
            woken.await;
        }
    }

    fn halt(&self) {
        self.stopping.store(true, Ordering::Release);
        self.stop.notify_waiters();
    }

    /// Waits until `count` more messages fit under the backlog limit and takes them; false if
    /// the phase stopped first. The check and the add are separate, so the limit can be overshot
    /// by a batch per producer: it bounds queueing, it is not an exact count.
    async fn reserve(&self, count: u64) -> bool {
        let Some(max) = self.outstanding_max else { return true };
        loop {
            let room = self.room.notified();
            if self.outstanding.load(Ordering::Acquire) + count <= max.max(count) {
                self.outstanding.fetch_add(count, Ordering::AcqRel);
                return true;
            }
            tokio::select! {
                _ = room => {}
                _ = self.stopped() => return false,
            }
        }
    }

    fn release(&self, count: u64) {
        if self.outstanding_max.is_none() || count == 0 {
            return;
        }
        let _ = self.outstanding.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| Some(n.saturating_sub(count)));
        self.room.notify_waiters();
    }
}

/// The stamp written by `Run::body` at the start of a body.
pub(crate) fn stamp_of(body: &[u8]) -> Option<u64> {
    let digits = std::str::from_utf8(body.get(..STAMP_DIGITS)?).ok()?;
    u64::from_str_radix(digits, 16).ok()
}

/// How producers pace themselves in a rate phase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Pace {
    /// Max rate: closed loop, waiting while more than `backlog_max` messages (if any) are sent
    /// and not yet received.
    ClosedLoop { backlog_max: Option<u64> },
    /// Fixed rate: this many messages per second in all.
    Fixed(f64),
}

/// Timing of a rate phase.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub warmup: Duration,
    pub duration: Duration,
}

/// Producers and consumers on `queue`, which exists and is empty, paced by `pace`.
pub(crate) async fn rate_phase(
    peer: &dyn Peer,
    queue: &str,
    shape: Shape,
    timing: Timing,
    pace: Pace,
    epoch: Instant,
    label: &str,
) -> anyhow::Result<Measured> {
    let (producers, consumers) = connect(peer, queue, shape).await?;
    let began = Instant::now();
    let start = began + timing.warmup;
    let mut run = Run::new(shape, epoch, start, start + timing.duration);
    run.outstanding_max = match pace {
        Pace::ClosedLoop { backlog_max } => backlog_max,
        Pace::Fixed(_) => None,
    };
    let run = Arc::new(run);
    let producer_tasks: Vec<_> = producers
        .into_iter()
        .enumerate()
        .map(|(index, producer)| match pace {
            Pace::ClosedLoop { .. } => tokio::spawn(produce_closed_loop(run.clone(), producer)),
            Pace::Fixed(rate) => {
                let schedule = Schedule::new(began, rate, index, shape.producers);
                tokio::spawn(produce_on_schedule(run.clone(), producer, schedule))
            }
        })
        .collect();
    let consumer_tasks: Vec<_> = consumers.into_iter().map(|c| tokio::spawn(consume(run.clone(), c))).collect();

    let bar = crate::progress::phase(label, timing.warmup + timing.duration);
    while Instant::now() < run.end {
        tokio::time::sleep(Duration::from_millis(100).min(run.end.saturating_duration_since(Instant::now()))).await;
        let now = Instant::now();
        bar.set_position(now.duration_since(began).as_millis() as u64);
        let stage = if now < start { "warm-up" } else { "measuring" };
        bar.set_message(format!(
            "{stage}: sent {}, received {}",
            run.sent_live.load(Ordering::Relaxed),
            run.received_live.load(Ordering::Relaxed)
        ));
    }
    run.halt();
    let (sent, received) = join(producer_tasks, consumer_tasks).await?;
    bar.finish_and_clear();
    Ok(Measured { window: timing.duration, sent, received, loaded: None, complete: true })
}

/// Loads `messages` into `queue` (which exists and is empty) with no consumer running, then
/// consumes them all; each stage stops at `stage_max`. The rate is the consume stage's.
pub(crate) async fn drain_phase(
    peer: &dyn Peer,
    queue: &str,
    shape: Shape,
    messages: u64,
    stage_max: Duration,
    epoch: Instant,
    label: &str,
) -> anyhow::Result<Measured> {
    // Stage 1: load. Producers stop by themselves once every message is claimed and confirmed.
    let producers = connect_producers(peer, queue, shape).await?;
    let began = Instant::now();
    let mut run = Run::new(shape, epoch, began, began + stage_max);
    run.load_target = messages;
    let run = Arc::new(run);
    let tasks: Vec<_> = producers.into_iter().map(|p| tokio::spawn(produce_backlog(run.clone(), p))).collect();
    let bar = crate::progress::phase(&format!("{label} load"), stage_max);
    let loading = futures::future::join_all(tasks);
    tokio::pin!(loading);
    let joined = loop {
        tokio::select! {
            joined = &mut loading => break joined,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {
                bar.set_position(began.elapsed().as_millis() as u64);
                bar.set_message(format!("sent {} of {messages}", run.sent_live.load(Ordering::Relaxed)));
                if Instant::now() >= run.end {
                    run.halt();
                }
            }
        }
    };
    let load_time = began.elapsed();
    bar.finish_and_clear();
    let mut sent = Tally::new();
    for task in joined {
        sent.merge(&task.context("a producer task panicked")?);
    }
    let loaded = run.sent_live.load(Ordering::Relaxed);

    // Stage 2: consume what was loaded.
    let consumers = connect_consumers(peer, queue, shape).await?;
    let began = Instant::now();
    let mut run = Run::new(shape, epoch, began, began + stage_max);
    run.load_target = loaded;
    let run = Arc::new(run);
    let tasks: Vec<_> = consumers.into_iter().map(|c| tokio::spawn(consume(run.clone(), c))).collect();
    let bar = crate::progress::phase(&format!("{label} drain"), stage_max);
    loop {
        let received = run.received_live.load(Ordering::Relaxed);
        if received >= loaded || Instant::now() >= run.end {
            break;
        }
        bar.set_position(began.elapsed().as_millis() as u64);
        bar.set_message(format!("received {received} of {loaded}"));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let drained_at = *run.drained_at.lock().expect("no task panics holding the lock");
    run.halt();
    let (_, mut received) = join(Vec::new(), tasks).await?;
    bar.finish_and_clear();
    let complete = loaded == messages && drained_at.is_some();
    let window = drained_at.unwrap_or_else(Instant::now).duration_since(began);
    // End-to-end latency of a drain is how long the backlog waited: not a figure to compare.
    received.latency = crate::stats::Latency::new();
    received.count = received.count.min(loaded);
    Ok(Measured { window, sent, received, loaded: Some((loaded, load_time)), complete })
}

async fn connect(
    peer: &dyn Peer,
    queue: &str,
    shape: Shape,
) -> anyhow::Result<(Vec<Box<dyn Producer>>, Vec<Box<dyn Consumer>>)> {
    Ok((connect_producers(peer, queue, shape).await?, connect_consumers(peer, queue, shape).await?))
}

async fn connect_producers(peer: &dyn Peer, queue: &str, shape: Shape) -> anyhow::Result<Vec<Box<dyn Producer>>> {
    let mut producers = Vec::with_capacity(shape.producers);
    for _ in 0..shape.producers {
        producers.push(peer.producer(queue).await.context("connecting a producer")?);
    }
    Ok(producers)
}

async fn connect_consumers(peer: &dyn Peer, queue: &str, shape: Shape) -> anyhow::Result<Vec<Box<dyn Consumer>>> {
    let mut consumers = Vec::with_capacity(shape.consumers);
    for _ in 0..shape.consumers {
        consumers.push(peer.consumer(queue, shape.batch).await.context("connecting a consumer")?);
    }
    Ok(consumers)
}

async fn join(
    producers: Vec<tokio::task::JoinHandle<Tally>>,
    consumers: Vec<tokio::task::JoinHandle<Tally>>,
) -> anyhow::Result<(Tally, Tally)> {
    let mut sent = Tally::new();
    for task in producers {
        sent.merge(&task.await.context("a producer task panicked")?);
    }
    let mut received = Tally::new();
    for task in consumers {
        received.merge(&task.await.context("a consumer task panicked")?);
    }
    Ok((sent, received))
}

/// Sends `bodies`, counting them if confirmed inside the window; false when the phase stopped.
async fn send(run: &Run, producer: &mut dyn Producer, bodies: &[Bytes], started: Instant, tally: &mut Tally) -> bool {
    let count = bodies.len() as u64;
    let outcome = tokio::select! {
        outcome = producer.send(bodies) => outcome,
        _ = run.stopped() => return false,
    };
    let done = Instant::now();
    match outcome {
        Ok(()) => {
            run.sent_live.fetch_add(count, Ordering::Relaxed);
            if run.measured(done) {
                tally.count += count;
                tally.latency.record(done - started);
            }
        }
        Err(e) => {
            run.release(count);
            tally.error(count, || format!("send: {e:#}"));
            tokio::time::sleep(ERROR_PAUSE).await;
        }
    }
    true
}

async fn produce_closed_loop(run: Arc<Run>, mut producer: Box<dyn Producer>) -> Tally {
    let batch = run.shape.batch;
    let mut tally = Tally::new();
    while run.reserve(batch as u64).await {
        let started = Instant::now();
        let body = run.body(started);
        let bodies = vec![body; batch];
        if !send(&run, producer.as_mut(), &bodies, started, &mut tally).await {
            break;
        }
    }
    tally
}

async fn produce_on_schedule(run: Arc<Run>, mut producer: Box<dyn Producer>, schedule: Schedule) -> Tally {
    let mut tally = Tally::new();
    let mut next = 0u64;
    loop {
        let due = schedule.due_count(Instant::now());
        if due <= next {
            let at = tokio::time::Instant::from_std(schedule.due_at(next));
            tokio::select! {
                _ = tokio::time::sleep_until(at) => continue,
                _ = run.stopped() => break,
            }
        }
        let count = (due - next).min(run.shape.batch as u64);
        let bodies: Vec<Bytes> = (next..next + count).map(|k| run.body(schedule.due_at(k))).collect();
        // The send latency, like the end-to-end one, counts from when the first message was due.
        if !send(&run, producer.as_mut(), &bodies, schedule.due_at(next), &mut tally).await {
            break;
        }
        next += count;
    }
    tally
}

async fn produce_backlog(run: Arc<Run>, mut producer: Box<dyn Producer>) -> Tally {
    let batch = run.shape.batch as u64;
    let mut tally = Tally::new();
    loop {
        let first = run.claimed.fetch_add(batch, Ordering::AcqRel);
        if first >= run.load_target {
            break;
        }
        let count = batch.min(run.load_target - first);
        let started = Instant::now();
        let body = run.body(started);
        let bodies = vec![body; count as usize];
        if !send(&run, producer.as_mut(), &bodies, started, &mut tally).await {
            break;
        }
    }
    tally
}

/// Receives, records each message's end-to-end latency, then acknowledges what it received.
async fn consume(run: Arc<Run>, mut consumer: Box<dyn Consumer>) -> Tally {
    let batch = run.shape.batch;
    let mut tally = Tally::new();
    loop {
        let outcome = tokio::select! {
            outcome = consumer.receive(batch, RECEIVE_WAIT) => outcome,
            _ = run.stopped() => break,
        };
        let done = Instant::now();
        let bodies = match outcome {
            Ok(bodies) => bodies,
            Err(e) => {
                tally.error(1, || format!("receive: {e:#}"));
                tokio::time::sleep(ERROR_PAUSE).await;
                continue;
            }
        };
        if bodies.is_empty() {
            continue;
        }
        let done_nanos = u64::try_from(done.duration_since(run.epoch).as_nanos()).unwrap_or(u64::MAX);
        let measured = run.measured(done);
        for body in &bodies {
            match stamp_of(body) {
                Some(stamp) if measured => {
                    tally.count += 1;
                    tally.latency.record(Duration::from_nanos(done_nanos.saturating_sub(stamp)));
                }
                Some(_) => {}
                None => tally.error(1, || "a message without a stamp: is the queue shared?".into()),
            }
        }
        let count = bodies.len() as u64;
        let total = run.received_live.fetch_add(count, Ordering::AcqRel) + count;
        if run.load_target > 0 && total >= run.load_target {
            let mut drained = run.drained_at.lock().expect("no task panics holding the lock");
            drained.get_or_insert(done);
        }
        run.release(count);
        let acked = tokio::select! {
            acked = consumer.ack() => acked,
            _ = run.stopped() => break,
        };
        if let Err(e) = acked {
            tally.error(count, || format!("ack: {e:#}"));
            tokio::time::sleep(ERROR_PAUSE).await;
        }
    }
    tally
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_read_back_from_bodies() {
        let run = Run::new(
            Shape { body_bytes: 256, producers: 1, consumers: 1, batch: 1 },
            Instant::now(),
            Instant::now(),
            Instant::now(),
        );
        let body = run.body(run.epoch + Duration::from_nanos(0xABCDEF));
        assert_eq!(body.len(), 256);
        assert_eq!(stamp_of(&body), Some(0xABCDEF));
        assert_eq!(stamp_of(b"0123"), None);
        assert_eq!(stamp_of(&[0xFF; 32]), None);
    }
}
