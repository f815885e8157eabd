//! What the torture tests (`crash.rs`, `crash_topics.rs`, `corruption.rs`, `full_disk.rs`)
//! share: message bodies that carry their own checksum; a `sluice serve` process that may be
//! killed at any moment, may refuse to start, and keeps its log in a file (a [`process`] in
//! `fsync` mode); and the crash tests' harness: the [`Killer`] that kills and restarts the
//! server (sometimes during its recovery), the [`ServerUrl`] it updates, and the consumer
//! loop and final drain, which record what arrives through a test's own [`Consume`].

#![allow(dead_code)] // Each test crate uses a different part of this module.

#[path = "../process/mod.rs"]
mod process;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sluice_api::ReceiveRequest;

// Like the dead-code allowance above: each test crate uses a different part.
#[allow(unused_imports)]
pub use process::{Process, Refused, Serve, client};

/// Every torture test runs in `fsync` mode, whatever `SLUICE_DURABILITY` says: an acknowledged
/// write must survive a crash.
const FSYNC: &[&str] = &["--durability", "fsync"];

/// A body that carries its own checksum, so that any damage is detected:
/// `payload|len|filler|sum`, about `64 + 3 × payload` bytes.
pub fn body_for(payload: &str) -> String {
    body_sized(payload, 64 + payload.len() * 3)
}

/// As [`body_for`], with `filler_bytes` of filler.
pub fn body_sized(payload: &str, filler_bytes: usize) -> String {
    assert!(!payload.contains('|') && !payload.is_empty());
    let filler: String = payload.chars().cycle().take(filler_bytes).collect();
    let sum = fnv(payload.as_bytes(), filler.as_bytes());
    format!("{payload}|{}|{filler}|{sum:016x}", filler.len())
}

/// The payload of a body made by [`body_for`], or `None` if the body is damaged.
pub fn payload_of(body: &str) -> Option<String> {
    let mut parts = body.split('|');
    let payload = parts.next()?;
    let len: usize = parts.next()?.parse().ok()?;
    let filler = parts.next()?;
    let sum = u64::from_str_radix(parts.next()?, 16).ok()?;
    (parts.next().is_none() && filler.len() == len && fnv(payload.as_bytes(), filler.as_bytes()) == sum)
        .then(|| payload.to_string())
}

fn fnv(a: &[u8], b: &[u8]) -> u64 {
    a.iter().chain(b).fold(0xcbf2_9ce4_8422_2325, |h, &x| (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3))
}

/// Spawns `sluice serve` on port 0 over `data_dir` in `fsync` mode, logging at `log_level`
/// into a temporary file.
pub fn spawn(data_dir: &Path, log_level: &str) -> Process {
    process::spawn(data_dir, log_level, FSYNC)
}

/// Spawns and waits for the announcement; panics with the log if the server does not start.
pub fn start(data_dir: &Path, log_level: &str) -> Serve {
    process::start(data_dir, log_level, FSYNC)
}

/// [`start`] with more flags after the durability mode's.
pub fn start_with(data_dir: &Path, log_level: &str, extra: &[&str]) -> Serve {
    let args: Vec<&str> = FSYNC.iter().chain(extra).copied().collect();
    process::start(data_dir, log_level, &args)
}

/// A body with `filler_bytes` of random letters and digits: fjall compresses journal values
/// of 4 KiB and more, and random filler keeps such a body as large on disk as on the wire.
pub fn body_random(payload: &str, filler_bytes: usize, rng: &mut impl rand::Rng) -> String {
    assert!(!payload.contains('|') && !payload.is_empty());
    let filler: String = (0..filler_bytes).map(|_| char::from(rng.sample(rand::distributions::Alphanumeric))).collect();
    let sum = fnv(payload.as_bytes(), filler.as_bytes());
    format!("{payload}|{}|{filler}|{sum:016x}", filler.len())
}

/// How many kills a crash test does: `var` if set (soak runs use hundreds), else `default`.
pub fn kills(var: &str, default: u32) -> u32 {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The seed of a crash test's timings: `SLUICE_CRASH_SEED` replays a run, else a random one
/// (which the test prints).
pub fn seed() -> u64 {
    std::env::var("SLUICE_CRASH_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| rand::thread_rng().r#gen())
}

/// The URL of the server now running: the [`Killer`] sets it on every restart, and the
/// clients read it before every request.
pub struct ServerUrl(RwLock<String>);

impl ServerUrl {
    pub fn new(url: &str) -> ServerUrl {
        ServerUrl(RwLock::new(url.to_owned()))
    }

    pub fn get(&self) -> String {
        self.0.read().expect("url lock").clone()
    }

    fn set(&self, url: &str) {
        url.clone_into(&mut self.0.write().expect("url lock"));
    }
}

/// A crash test's client tasks, which read the running server's [`ServerUrl`] before every
/// request and run until stopped.
pub struct Clients {
    pub url: Arc<ServerUrl>,
    pub stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Clients {
    /// No clients yet, against the server at `url`.
    pub fn new(url: &str) -> Clients {
        Clients { url: Arc::new(ServerUrl::new(url)), stop: Arc::new(AtomicBool::new(false)), tasks: Vec::new() }
    }

    /// Runs `task`, which must end soon after [`Clients::stop`] sets `stop`.
    pub fn spawn(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        self.tasks.push(tokio::spawn(task));
    }

    /// Runs a consumer that records through `consumer` until stopped.
    pub fn spawn_consumer(&mut self, consumer: Arc<impl Consume + 'static>) {
        self.spawn(consume_until_stopped(consumer, self.url.clone(), self.stop.clone()));
    }

    /// Stops every task and waits for it; a task's panic (a failed assertion) fails the test.
    pub async fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for task in std::mem::take(&mut self.tasks) {
            task.await.expect("client task");
        }
    }
}

/// What a crash-test producer sends: batches of 1 to 5 payloads named `PREFIX-N`, N counting
/// from 1, the batch sizes drawn from the run's seed so that it replays.
pub struct Payloads {
    rng: StdRng,
    prefix: String,
    n: u64,
}

impl Payloads {
    /// The payloads of producer `index` in a run with `seed`, named `{letter}{index}-N`.
    pub fn new(letter: char, index: usize, seed: u64) -> Payloads {
        Payloads { rng: StdRng::seed_from_u64(seed ^ ((index as u64) << 32)), prefix: format!("{letter}{index}"), n: 0 }
    }

    pub fn next_batch(&mut self) -> Vec<String> {
        let batch = self.rng.gen_range(1..=5);
        (0..batch)
            .map(|_| {
                self.n += 1;
                format!("{}-{}", self.prefix, self.n)
            })
            .collect()
    }
}

/// One restart in this many is first killed during its start-up.
const STARTUP_KILL_ONE_IN: u32 = 3;

/// Kills and restarts the server, sometimes killing the restart again during its recovery.
pub struct Killer {
    rng: StdRng,
    kills: u32,
    /// Restarts killed during start-up, and how many of those before the announcement.
    pub startup_kills: u32,
    startup_kills_before_ready: u32,
    /// The last start-up's duration, spawn to announcement: the range of the early kills.
    last_startup: Duration,
    startups: u32,
    startup_total: Duration,
    startup_max: Duration,
}

impl Killer {
    pub fn new(seed: u64) -> Killer {
        Killer {
            rng: StdRng::seed_from_u64(seed),
            kills: 0,
            startup_kills: 0,
            startup_kills_before_ready: 0,
            last_startup: Duration::from_millis(50),
            startups: 0,
            startup_total: Duration::ZERO,
            startup_max: Duration::ZERO,
        }
    }

    /// Starts a server over `dir` and records how long its start-up took.
    pub fn start(&mut self, dir: &Path) -> Serve {
        let server = start(dir, "warn");
        self.last_startup = server.startup;
        self.startups += 1;
        self.startup_total += server.startup;
        self.startup_max = self.startup_max.max(server.startup);
        server
    }

    /// Waits a random 30–300 ms, kills `server` with SIGKILL and starts it again (one time in
    /// [`STARTUP_KILL_ONE_IN`], killing the first restart a random moment into its start-up);
    /// points `url` at the new server.
    pub async fn kill_and_restart(&mut self, server: Serve, dir: &Path, url: &ServerUrl) -> Serve {
        tokio::time::sleep(Duration::from_millis(self.rng.gen_range(30..300))).await;
        // Process waits block; keep the runtime's other worker serving the clients.
        tokio::task::block_in_place(|| {
            server.kill();
            self.kills += 1;
            if self.rng.gen_ratio(1, STARTUP_KILL_ONE_IN) {
                let spawned = spawn(dir, "warn");
                let startup_ms = self.last_startup.as_millis() as u64;
                std::thread::sleep(Duration::from_millis(self.rng.gen_range(0..=startup_ms.max(5))));
                self.startup_kills += 1;
                if !spawned.kill() {
                    self.startup_kills_before_ready += 1;
                }
            }
            let server = self.start(dir);
            url.set(&server.url);
            server
        })
    }

    pub fn summary(&self) -> String {
        format!(
            "{} kills under load, {} more during start-up ({} of them before the server was ready); start-up (recovery included) {} ms on average, {} ms at most",
            self.kills,
            self.startup_kills,
            self.startup_kills_before_ready,
            (self.startup_total / self.startups.max(1)).as_millis(),
            self.startup_max.as_millis()
        )
    }
}

/// How long a crash test's consumer holds what it receives: a message in flight at a kill
/// comes back after this.
pub const VISIBILITY_MS: u64 = 1_000;

/// A crash test's consumer: the queue it reads and the ledger in which it records what arrived.
pub trait Consume: Send + Sync {
    fn queue(&self) -> &str;

    /// Records one received body (checking it is the test's job: a damaged body is a finding).
    fn record(&self, body: String);
}

/// One round of `consumer` against the server at `url`: receives up to 10 messages,
/// long-polling up to `wait_ms`, records each and acks them (an ack lost to a crash makes the
/// message come back: a counted, allowed duplicate). The number of messages received, or
/// `Err` if the server did not answer, as it does not while it is down.
pub async fn consume_once(consumer: &impl Consume, url: &str, wait_ms: u64) -> Result<usize, ()> {
    let c = client(url);
    let request = ReceiveRequest { max: Some(10), wait_ms: Some(wait_ms), visibility_timeout_ms: Some(VISIBILITY_MS) };
    let messages = c.receive_messages(consumer.queue(), &request).await.map_err(|_| ())?.messages;
    let count = messages.len();
    let mut receipts = Vec::new();
    for m in messages {
        consumer.record(m.body.unwrap_or_default());
        receipts.extend(m.receipt);
    }
    if !receipts.is_empty() {
        let _ = c.ack(consumer.queue(), receipts).await;
    }
    Ok(count)
}

/// Consumes from whichever server is running until `stop`, pausing 20 ms after a failed round.
pub async fn consume_until_stopped(consumer: Arc<impl Consume>, url: Arc<ServerUrl>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        if consume_once(consumer.as_ref(), &url.get(), 200).await.is_err() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Receives from `server` until `empty_polls` long polls in a row come back empty. Each poll
/// waits longer than [`VISIBILITY_MS`], so that messages in flight at the last kill, which
/// reappear only after it, are received too. Panics if the server stops answering or
/// `deadline` passes.
pub async fn drain(consumer: &impl Consume, server: &Serve, empty_polls: u32, deadline: Instant) {
    let mut empty_in_a_row = 0;
    while empty_in_a_row < empty_polls {
        assert!(Instant::now() < deadline, "drain did not finish");
        match consume_once(consumer, &server.url, VISIBILITY_MS + 500).await {
            Ok(0) => empty_in_a_row += 1,
            Ok(_) => empty_in_a_row = 0,
            Err(()) => panic!("the server stopped answering during the drain; log:\n{}", server.log()),
        }
    }
}
