//! What the torture tests (`crash.rs`, `corruption.rs`, `full_disk.rs`) share: message bodies
//! that carry their own checksum, and a `sluice serve` process that may be killed at any
//! moment, may refuse to start, and keeps its log in a file.

#![allow(dead_code)] // Each test crate uses a different part of this module.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a server may take to announce itself or to exit.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

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

/// A `sluice serve` process, started but perhaps not yet announced. Dropping it kills it.
pub struct Process {
    child: Child,
    log: tempfile::NamedTempFile,
    /// The first line of stdout; an empty string if stdout closed without one.
    first_line: mpsc::Receiver<String>,
    started: Instant,
}

/// A server that announced itself.
pub struct Serve {
    pub process: Process,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// How long it took from spawn to the announcement (recovery included).
    pub startup: Duration,
}

/// A server that exited before announcing itself.
#[derive(Debug)]
pub struct Refused {
    pub status: ExitStatus,
    pub log: String,
}

/// Spawns `sluice serve` on port 0 over `data_dir` in `fsync` mode, logging at `log_level`
/// into a temporary file.
pub fn spawn(data_dir: &Path, log_level: &str) -> Process {
    let log = tempfile::NamedTempFile::new().expect("a temporary log file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--addr", "127.0.0.1:0", "--durability", "fsync", "--data-dir"])
        .arg(data_dir)
        .env("SLUICE_LOG", log_level)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log.reopen().expect("the log file"))
        .spawn()
        .expect("start sluice serve");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, first_line) = mpsc::channel();
    // Reads the announcement, then keeps the pipe open (and drained) until the process ends.
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = tx.send(line);
        let mut rest = String::new();
        while reader.read_line(&mut rest).is_ok_and(|n| n > 0) {
            rest.clear();
        }
    });
    Process { child, log, first_line, started: Instant::now() }
}

/// Spawns and waits for the announcement; panics with the log if the server does not start.
pub fn start(data_dir: &Path, log_level: &str) -> Serve {
    spawn(data_dir, log_level).wait_started().unwrap_or_else(|refused| {
        panic!("sluice serve did not start ({:?}); its log:\n{}", refused.status, refused.log.trim_end())
    })
}

impl Process {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// Waits until the server announces itself or exits.
    pub fn wait_started(mut self) -> Result<Serve, Refused> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            match self.first_line.recv_timeout(Duration::from_millis(20)) {
                Ok(line) if !line.is_empty() => {
                    let url = line
                        .trim_end()
                        .strip_prefix("sluice listening on ")
                        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
                        .to_owned();
                    let startup = self.started.elapsed();
                    return Ok(Serve { process: self, url, startup });
                }
                Ok(_) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = self.wait_exit(deadline);
                    return Err(Refused { status, log: self.log() });
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if let Some(status) = self.child.try_wait().expect("poll the server") {
                // It may have announced just before exiting; the line decides.
                if let Ok(line) = self.first_line.recv_timeout(Duration::from_secs(1))
                    && !line.is_empty()
                {
                    panic!("the server announced {line:?} and exited at once ({status:?}):\n{}", self.log());
                }
                return Err(Refused { status, log: self.log() });
            }
            assert!(Instant::now() < deadline, "the server neither started nor exited; log:\n{}", self.log());
        }
    }

    /// SIGKILL: no shutdown hook runs, nothing is flushed. Returns whether the server had
    /// announced itself (finished recovery) before it died.
    pub fn kill(mut self) -> bool {
        self.child.kill().expect("SIGKILL the server");
        self.child.wait().expect("reap the server");
        // The reader thread sends the line, or an empty one at end of file.
        self.first_line.recv_timeout(Duration::from_secs(5)).is_ok_and(|line| !line.is_empty())
    }

    fn wait_exit(&mut self, deadline: Instant) -> ExitStatus {
        loop {
            if let Some(status) = self.child.try_wait().expect("poll the server") {
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not exit; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Serve {
    /// SIGKILL.
    pub fn kill(self) {
        self.process.kill();
    }

    /// SIGTERM, then waits for a graceful exit.
    pub fn terminate(mut self) -> ExitStatus {
        let status = Command::new("kill").arg("-TERM").arg(self.process.pid().to_string()).status();
        assert!(status.is_ok_and(|s| s.success()), "kill -TERM failed");
        self.process.wait_exit(Instant::now() + STARTUP_TIMEOUT)
    }

    pub fn log(&self) -> String {
        self.process.log()
    }

    /// A client that gives up after one attempt: the tests decide what a failure means.
    pub fn client(&self) -> sluice_client::Client {
        client(&self.url)
    }
}

/// A client for `url` that never retries and waits at most 10 s.
pub fn client(url: &str) -> sluice_client::Client {
    sluice_client::Client::builder(url).attempts(1).timeout(Duration::from_secs(10)).build().expect("a client")
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A body with `filler_bytes` of random letters and digits: fjall compresses journal values
/// of 4 KiB and more, and random filler keeps such a body as large on disk as on the wire.
pub fn body_random(payload: &str, filler_bytes: usize, rng: &mut impl rand::Rng) -> String {
    assert!(!payload.contains('|') && !payload.is_empty());
    let filler: String = (0..filler_bytes).map(|_| char::from(rng.sample(rand::distributions::Alphanumeric))).collect();
    let sum = fnv(payload.as_bytes(), filler.as_bytes());
    format!("{payload}|{}|{filler}|{sum:016x}", filler.len())
}
