//! The `fairness` scenario: how long a trickle of "quiet" messages waits behind a "noisy"
//! backlog on a standard queue, with fair queues and without.
//!
//! Each mode gets a fresh standard queue and runs three stages, each bounded by time:
//! 1. load: `--producers` tasks send the noisy backlog in batches of 1,000;
//! 2. measure: consumers drain continuously (receive 10, ack), one noisy producer tops the
//!    backlog up in batches of 1,000 as consumers make room, and after the warm-up one quiet
//!    producer sends one message every 10 ms, open loop (each send on a task of its own, so a
//!    slow send does not delay the next one);
//! 3. drain: producers stop; consumers go on until every quiet message has been received.
//!
//! In the `groups` mode the backlog is in group "noisy" and the trickle in group "quiet", so the
//! fair index serves each quiet message next. In the `ungrouped` mode nothing has a group, so
//! every message is in the one ungrouped group and the queue delivers in send order: each quiet
//! message waits for the whole backlog ahead of it. The same machinery measures both, so the
//! difference between the rows is what fairness buys.
//!
//! Messages are told apart by their `type` (`bench-noisy`, `bench-quiet`), which the ungrouped
//! mode needs; each body starts with its send time, which identifies a quiet message.

mod report;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use sluice_api::{CreateQueueRequest, ReceiveRequest, SendMessage, SendRequest};
use sluice_client::Client;
use tokio::sync::{Notify, watch};
use tokio::task::{JoinError, JoinSet};
use tokio::time::{MissedTickBehavior, sleep_until};

use crate::Plan;
use crate::ceiling::ERROR_PAUSE;
use crate::stats::{Latency, Tally};
use crate::workload::{self, RECEIVE_WAIT_MS, body_padding, sent_at_nanos, stamped_body};

/// Messages per receive (and receipts per ack).
pub(crate) const RECEIVE_MAX: u32 = 10;
/// Noisy messages per send, loading and topping up alike: a full send batch.
const NOISY_BATCH: u64 = sluice_core::limits::BATCH_ENTRIES_MAX as u64;
/// Interval between quiet sends.
const QUIET_EVERY: Duration = Duration::from_millis(10);
/// Shortest bound on the load and drain stages, whatever `--duration` says.
const STAGE_MIN: Duration = Duration::from_secs(5);
/// Visibility timeout of each receive. Consumers ack at once; this only has to outlast a mode,
/// so that nothing is redelivered while it runs.
const VISIBILITY_TIMEOUT_MS: u64 = 120_000;
const NOISY_GROUP: &str = "noisy";
const QUIET_GROUP: &str = "quiet";
const NOISY_TYPE: &str = "bench-noisy";
const QUIET_TYPE: &str = "bench-quiet";

/// Whether the noisy and quiet messages carry groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Noisy messages in group "noisy", quiet ones in group "quiet": fair queues.
    Groups,
    /// No groups: one ungrouped group, delivered in send order (the baseline).
    Ungrouped,
}

impl Mode {
    const ALL: [Mode; 2] = [Mode::Groups, Mode::Ungrouped];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Groups => "groups",
            Mode::Ungrouped => "ungrouped",
        }
    }

    /// The group a message of `group` is sent with in this mode.
    fn group(self, group: &str) -> Option<String> {
        match self {
            Mode::Groups => Some(group.to_owned()),
            Mode::Ungrouped => None,
        }
    }
}

/// How long the load stage and the drain stage may each take.
fn stage_bound(duration: Duration) -> Duration {
    duration.max(STAGE_MIN)
}

/// How many noisy messages to send next with `outstanding` sent and not yet received, or `None`
/// to wait: never past `backlog`, never more than one batch, and at least `batch_min` (or what
/// the backlog can ever hold, if less).
fn noisy_batch(outstanding: u64, backlog: u64, batch_min: u64) -> Option<u64> {
    let room = backlog.saturating_sub(outstanding);
    (room > 0 && room >= batch_min.min(backlog)).then(|| room.min(NOISY_BATCH))
}

/// What one mode measured.
#[derive(Debug, Clone)]
pub(crate) struct ModeResult {
    pub mode: Mode,
    pub queue: String,
    /// Noisy messages acknowledged by the load stage, and how long it took.
    pub loaded: u64,
    pub load_time: Duration,
    /// Visible messages when the load stage ended, as the server counts them.
    pub backlog_at_start: Option<u64>,
    pub window: Duration,
    /// Acknowledged quiet sends, with each send call's latency.
    pub quiet_sent: Tally,
    /// Wait of every quiet message: start of its send call to the end of the receive that got
    /// it, or, for one still waiting when the mode stopped, to that moment (a lower bound).
    pub quiet_wait: Latency,
    pub quiet_still_waiting: u64,
    /// Noisy messages received inside the window, with their end-to-end latency.
    pub noisy_received: Tally,
    /// Noisy messages sent while measuring (topping up).
    pub noisy_topped_up: Tally,
    /// From the end of the window to the moment the mode stopped.
    pub drain_time: Duration,
    pub load: Tally,
    pub receive: Tally,
    pub ack: Tally,
}

impl ModeResult {
    /// Quiet messages received (the waits recorded, less the lower bounds).
    pub fn quiet_received(&self) -> u64 {
        self.quiet_wait.len().saturating_sub(self.quiet_still_waiting)
    }

    pub fn errors(&self) -> u64 {
        [&self.load, &self.noisy_topped_up, &self.quiet_sent, &self.receive, &self.ack].iter().map(|t| t.errors).sum()
    }
}

pub(crate) async fn run(plan: &Plan) -> anyhow::Result<()> {
    let started = Instant::now();
    let load_average = crate::report::load_average();
    let (results, server) = crate::with_target(plan, async |url| modes(plan, url).await).await?;
    let text = report::render(plan, &server, &results, started.elapsed(), load_average.as_deref());
    crate::publish(plan, &text, report::json(plan, &server, &results))
}

async fn modes(plan: &Plan, url: &str) -> anyhow::Result<Vec<ModeResult>> {
    let client = workload::client(url)?;
    let epoch = Instant::now();
    let mut results = Vec::new();
    for mode in Mode::ALL {
        let queue = format!("{}-fair-{}", plan.queue, mode.name());
        let request = CreateQueueRequest { name: queue.clone(), ..Default::default() };
        client.create_queue(&request).await.with_context(|| format!("creating queue {queue} on {url}"))?;
        let result = measure(plan, &client, epoch, mode, &queue).await;
        // Deleted even after a failure, so that an external server is left as it was found.
        let deleted = client.delete_queue(&queue).await;
        let result = result?;
        deleted.with_context(|| format!("deleting queue {queue}"))?;
        results.push(result);
    }
    Ok(results)
}

/// What every task of a mode shares.
struct Shared {
    client: Client,
    queue: String,
    mode: Mode,
    /// Body timestamps are nanoseconds since this instant.
    epoch: Instant,
    padding: String,
    noisy_backlog: u64,
    /// Noisy messages sent (or being sent) and not yet received.
    noisy_outstanding: AtomicU64,
    /// Woken when consumers receive noisy messages, for the topping-up producer.
    room: Notify,
    noisy_sent_live: AtomicU64,
    noisy_received_live: AtomicU64,
    /// Quiet messages whose send started and that no consumer has received yet, by send time.
    quiet_pending: Mutex<BTreeSet<u64>>,
}

impl Shared {
    fn nanos_since_epoch(&self, at: Instant) -> u64 {
        u64::try_from(at.duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Reserves the next noisy batch (see `noisy_batch`); its size, or `None` if there is no room.
    fn reserve_noisy(&self, batch_min: u64) -> Option<u64> {
        let backlog = self.noisy_backlog;
        let mut count = 0;
        self.noisy_outstanding
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                count = noisy_batch(n, backlog, batch_min)?;
                Some(n + count)
            })
            .ok()
            .map(|_| count)
    }

    /// Gives back reservations: noisy messages received, or sends refused or failed.
    fn release_noisy(&self, count: u64) {
        if count == 0 {
            return;
        }
        // Saturating: a send that failed in transit but was applied is released twice.
        let _ =
            self.noisy_outstanding.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| Some(n.saturating_sub(count)));
        self.room.notify_waiters();
    }

    fn quiet_pending(&self) -> std::sync::MutexGuard<'_, BTreeSet<u64>> {
        // Nothing panics while holding the lock; if something did, the set is still consistent.
        self.quiet_pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The measuring and draining stages' timeline.
#[derive(Debug, Clone, Copy)]
struct Window {
    /// End of the warm-up: the first quiet send.
    start: Instant,
    /// The last quiet send and the end of topping up.
    end: Instant,
    /// Consumers stop here at the latest.
    drain_end: Instant,
}

impl Window {
    fn measured(&self, at: Instant) -> bool {
        at >= self.start && at < self.end
    }
}

async fn measure(plan: &Plan, client: &Client, epoch: Instant, mode: Mode, queue: &str) -> anyhow::Result<ModeResult> {
    // A leftover backlog on an external server would be counted as noisy and skew everything.
    client.purge_queue(queue).await.context("purging the queue before loading")?;
    let shared = Arc::new(Shared {
        client: client.clone(),
        queue: queue.to_owned(),
        mode,
        epoch,
        padding: body_padding(plan.body_bytes),
        noisy_backlog: plan.noisy_backlog,
        noisy_outstanding: AtomicU64::new(0),
        room: Notify::new(),
        noisy_sent_live: AtomicU64::new(0),
        noisy_received_live: AtomicU64::new(0),
        quiet_pending: Mutex::new(BTreeSet::new()),
    });
    let bound = stage_bound(plan.duration);

    // Load.
    let load_started = Instant::now();
    let load_end = load_started + bound;
    let loaders: Vec<_> =
        (0..plan.producers).map(|_| tokio::spawn(send_noisy(shared.clone(), load_end, false))).collect();
    let bar = crate::progress::phase(&format!("{}: loading", mode.name()), bound);
    while !loaders.iter().all(|l| l.is_finished()) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        bar.set_position(load_started.elapsed().as_millis() as u64);
        let sent = shared.noisy_sent_live.load(Ordering::Relaxed);
        bar.set_message(format!("sent {sent} of {}", plan.noisy_backlog));
    }
    let mut load = Tally::new();
    for loader in loaders {
        load.merge(&loader.await.context("a loading task panicked")?);
    }
    bar.finish_and_clear();
    let load_time = load_started.elapsed();
    let backlog_at_start = client.get_queue(queue).await.ok().map(|q| q.counts.visible);

    // Measure, then drain.
    let began = Instant::now();
    let start = began + plan.warmup;
    let end = start + plan.duration;
    let window = Window { start, end, drain_end: end + bound };
    let (stop, stopped) = watch::channel(false);
    let consumers: Vec<_> =
        (0..plan.consumers).map(|_| tokio::spawn(consume(shared.clone(), window, stopped.clone()))).collect();
    let topper = tokio::spawn(send_noisy(shared.clone(), window.end, true));
    let quiet = tokio::spawn(send_quiet(shared.clone(), window));
    let bar = crate::progress::phase(&format!("{}: measuring", mode.name()), plan.warmup + plan.duration);
    let stopped_at = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = Instant::now();
        let pending = shared.quiet_pending().len();
        if now >= window.drain_end || (now >= window.end && quiet.is_finished() && pending == 0) {
            break now;
        }
        bar.set_position(now.duration_since(began).as_millis() as u64);
        let stage = if now < start {
            "warm-up"
        } else if now < end {
            "measuring"
        } else {
            "draining"
        };
        let noisy = shared.noisy_received_live.load(Ordering::Relaxed);
        bar.set_message(format!("{stage}: noisy received {noisy}, quiet waiting {pending}"));
    };
    let _ = stop.send(true);

    let noisy_topped_up = topper.await.context("the noisy producer panicked")?;
    let quiet_sent = quiet.await.context("the quiet producer panicked")?;
    let mut consumed = Consumed::new();
    for consumer in consumers {
        consumed.merge(consumer.await.context("a consumer task panicked")?);
    }
    bar.finish_and_clear();
    // Quiet messages nobody received waited at least until now; counting them keeps a slow
    // queue from looking fast by dropping its worst waits.
    let still_waiting = std::mem::take(&mut *shared.quiet_pending());
    for &sent in &still_waiting {
        let sent_at = epoch + Duration::from_nanos(sent);
        consumed.quiet_wait.record(stopped_at.saturating_duration_since(sent_at));
    }
    Ok(ModeResult {
        mode,
        queue: queue.to_owned(),
        loaded: load.count,
        load_time,
        backlog_at_start,
        window: plan.duration,
        quiet_sent,
        quiet_wait: consumed.quiet_wait,
        quiet_still_waiting: still_waiting.len() as u64,
        noisy_received: consumed.noisy,
        noisy_topped_up,
        drain_time: stopped_at.saturating_duration_since(end),
        load,
        receive: consumed.receive,
        ack: consumed.ack,
    })
}

/// Sends noisy batches until `until`. Loading (`top_up: false`) takes whatever room the backlog
/// has left and stops when it is full; topping up sends only full batches and waits for the
/// consumers to make room. Returns the acknowledged messages (count) and send latencies.
async fn send_noisy(shared: Arc<Shared>, until: Instant, top_up: bool) -> Tally {
    let deadline = tokio::time::Instant::from_std(until);
    let batch_min = if top_up { NOISY_BATCH } else { 1 };
    let mut tally = Tally::new();
    loop {
        // Created before the check, so a wake-up between the check and the wait is kept.
        let room = shared.room.notified();
        if Instant::now() >= until {
            break;
        }
        let Some(count) = shared.reserve_noisy(batch_min) else {
            if !top_up {
                break;
            }
            tokio::select! {
                _ = room => continue,
                _ = sleep_until(deadline) => break,
            }
        };
        let started = Instant::now();
        let message = SendMessage {
            body: Some(stamped_body(shared.nanos_since_epoch(started), &shared.padding)),
            group_id: shared.mode.group(NOISY_GROUP),
            message_type: Some(NOISY_TYPE.into()),
            ..Default::default()
        };
        let request = SendRequest { messages: vec![message; count as usize] };
        let outcome = tokio::select! {
            outcome = shared.client.send_messages(&shared.queue, &request) => outcome,
            _ = sleep_until(deadline) => break,
        };
        match outcome {
            Ok(response) => {
                let ok = response.results.iter().filter(|r| r.id.is_some()).count() as u64;
                if ok < count {
                    let first = response.results.iter().find_map(|r| r.error.as_ref());
                    tally.error(count - ok, || format!("noisy send entry refused: {first:?}"));
                }
                shared.release_noisy(count - ok);
                shared.noisy_sent_live.fetch_add(ok, Ordering::Relaxed);
                tally.count += ok;
                tally.latency.record(started.elapsed());
            }
            Err(e) => {
                shared.release_noisy(count);
                tally.error(count, || format!("noisy send: {e}"));
                tokio::time::sleep(ERROR_PAUSE).await;
            }
        }
    }
    tally
}

/// Starts one quiet send every `QUIET_EVERY` inside the window, each on a task of its own, then
/// waits for the sends still in flight until the drain ends. Returns the acknowledged sends
/// (count) and their call latencies.
async fn send_quiet(shared: Arc<Shared>, window: Window) -> Tally {
    let end = tokio::time::Instant::from_std(window.end);
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::from_std(window.start), QUIET_EVERY);
    // After a stall, keep the spacing rather than sending a burst to catch up.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut sends = JoinSet::new();
    let mut tally = Tally::new();
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = sleep_until(end) => break,
        }
        let started = Instant::now();
        if started >= window.end {
            break;
        }
        let sent = shared.nanos_since_epoch(started);
        // Registered before the send, so that a consumer quick enough to receive the message
        // before the send call returns still finds it.
        shared.quiet_pending().insert(sent);
        let message = SendMessage {
            body: Some(stamped_body(sent, &shared.padding)),
            group_id: shared.mode.group(QUIET_GROUP),
            message_type: Some(QUIET_TYPE.into()),
            ..Default::default()
        };
        let shared_for_send = shared.clone();
        sends.spawn(async move {
            let request = SendRequest { messages: vec![message] };
            let outcome = shared_for_send.client.send_messages(&shared_for_send.queue, &request).await;
            let outcome = outcome.map_err(|e| e.to_string()).and_then(|response| match response.results.first() {
                Some(result) if result.id.is_some() => Ok(()),
                other => Err(format!("refused: {:?}", other.and_then(|r| r.error.as_ref()))),
            });
            (sent, started.elapsed(), outcome)
        });
        while let Some(joined) = sends.try_join_next() {
            count_quiet_send(&shared, &mut tally, joined);
        }
    }
    let drain_end = tokio::time::Instant::from_std(window.drain_end);
    loop {
        let joined = tokio::select! {
            joined = sends.join_next() => joined,
            _ = sleep_until(drain_end) => break,
        };
        let Some(joined) = joined else { break };
        count_quiet_send(&shared, &mut tally, joined);
    }
    tally
}

type QuietSend = (u64, Duration, Result<(), String>);

fn count_quiet_send(shared: &Shared, tally: &mut Tally, joined: Result<QuietSend, JoinError>) {
    match joined {
        Ok((_, latency, Ok(()))) => {
            tally.count += 1;
            tally.latency.record(latency);
        }
        Ok((sent, _, Err(e))) => {
            // Whether or not the server kept it, the message no longer counts as waiting.
            shared.quiet_pending().remove(&sent);
            tally.error(1, || format!("quiet send: {e}"));
        }
        Err(e) => tally.error(1, || format!("a quiet send task failed: {e}")),
    }
}

/// What a consumer saw.
struct Consumed {
    noisy: Tally,
    quiet_wait: Latency,
    /// Receive errors (failed calls, foreign messages); `count` is unused.
    receive: Tally,
    ack: Tally,
}

impl Consumed {
    fn new() -> Consumed {
        Consumed { noisy: Tally::new(), quiet_wait: Latency::new(), receive: Tally::new(), ack: Tally::new() }
    }

    fn merge(&mut self, other: Consumed) {
        self.noisy.merge(&other.noisy);
        self.quiet_wait.merge(&other.quiet_wait);
        self.receive.merge(&other.receive);
        self.ack.merge(&other.ack);
    }
}

/// Receives up to `RECEIVE_MAX`, records quiet waits and noisy latencies, acks everything
/// received in one call, until told to stop.
async fn consume(shared: Arc<Shared>, window: Window, mut stop: watch::Receiver<bool>) -> Consumed {
    let request = ReceiveRequest {
        max: Some(RECEIVE_MAX),
        wait_ms: Some(RECEIVE_WAIT_MS),
        visibility_timeout_ms: Some(VISIBILITY_TIMEOUT_MS),
    };
    let mut out = Consumed::new();
    loop {
        let outcome = tokio::select! {
            outcome = shared.client.receive_messages(&shared.queue, &request) => outcome,
            _ = stop.wait_for(|stop| *stop) => break,
        };
        let done = Instant::now();
        let messages = match outcome {
            Ok(list) => list.messages,
            Err(e) => {
                out.receive.error(1, || format!("receive: {e}"));
                tokio::time::sleep(ERROR_PAUSE).await;
                continue;
            }
        };
        let done_nanos = shared.nanos_since_epoch(done);
        let mut receipts = Vec::with_capacity(messages.len());
        let mut noisy = 0;
        for message in messages {
            let sent = message.body.as_deref().and_then(sent_at_nanos);
            match (message.message_type.as_deref(), sent) {
                (Some(QUIET_TYPE), Some(sent)) => {
                    // Absent if the send was given up on as failed: then it is not measured.
                    if shared.quiet_pending().remove(&sent) {
                        out.quiet_wait.record(Duration::from_nanos(done_nanos.saturating_sub(sent)));
                    }
                }
                (Some(NOISY_TYPE), Some(sent)) => {
                    noisy += 1;
                    if window.measured(done) {
                        out.noisy.count += 1;
                        out.noisy.latency.record(Duration::from_nanos(done_nanos.saturating_sub(sent)));
                    }
                }
                _ => out
                    .receive
                    .error(1, || format!("message {} is not the benchmark's; is the queue shared?", message.id)),
            }
            receipts.extend(message.receipt);
        }
        shared.noisy_received_live.fetch_add(noisy, Ordering::Relaxed);
        shared.release_noisy(noisy);
        if receipts.is_empty() {
            continue;
        }
        let count = receipts.len() as u64;
        let outcome = tokio::select! {
            outcome = shared.client.ack(&shared.queue, receipts) => outcome,
            _ = stop.wait_for(|stop| *stop) => break,
        };
        match outcome {
            Ok(response) => {
                let failed = response.results.iter().filter(|r| !r.ok).count() as u64;
                if failed > 0 {
                    let first = response.results.iter().find_map(|r| r.error.as_ref());
                    out.ack.error(failed, || format!("ack entry refused: {first:?}"));
                }
                out.ack.count += count - failed;
            }
            Err(e) => {
                out.ack.error(count, || format!("ack: {e}"));
                tokio::time::sleep(ERROR_PAUSE).await;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noisy_sends_fill_the_backlog_without_passing_it() {
        // Loading: any room is taken, a batch at most.
        assert_eq!(noisy_batch(0, 100_000, 1), Some(NOISY_BATCH));
        assert_eq!(noisy_batch(99_500, 100_000, 1), Some(500));
        assert_eq!(noisy_batch(100_000, 100_000, 1), None);
        assert_eq!(noisy_batch(100_010, 100_000, 1), None);
        // Topping up: only a full batch, unless the backlog is smaller than one.
        assert_eq!(noisy_batch(99_500, 100_000, NOISY_BATCH), None);
        assert_eq!(noisy_batch(99_000, 100_000, NOISY_BATCH), Some(NOISY_BATCH));
        assert_eq!(noisy_batch(0, 300, NOISY_BATCH), Some(300));
        assert_eq!(noisy_batch(10, 300, NOISY_BATCH), None);
    }

    #[test]
    fn stages_are_bounded_by_the_duration_but_not_below_the_minimum() {
        assert_eq!(stage_bound(Duration::from_secs(10)), Duration::from_secs(10));
        assert_eq!(stage_bound(Duration::from_secs(3)), STAGE_MIN);
    }

    #[test]
    fn only_the_groups_mode_sends_groups() {
        assert_eq!(Mode::Groups.group(QUIET_GROUP).as_deref(), Some("quiet"));
        assert_eq!(Mode::Ungrouped.group(QUIET_GROUP), None);
    }
}
