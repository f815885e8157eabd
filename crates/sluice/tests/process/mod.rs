//! A `sluice serve` child process on port 0 over its own data directory: its log kept in a
//! file, its announcement read on a thread (so that a server that never announces fails the
//! test instead of hanging it), killed when dropped. The functional tests (`common`) and the
//! torture tests (`torture`) both start their servers here, each with its own arguments.

#![allow(dead_code)] // Each test crate uses a different part of this module.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a server may take to announce itself (recovery included) or to exit.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

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

/// Spawns `sluice serve --addr 127.0.0.1:0 --data-dir DATA_DIR ARGS...`, logging at
/// `log_level` into a temporary file.
pub fn spawn(data_dir: &Path, log_level: &str, args: &[&str]) -> Process {
    let log = tempfile::NamedTempFile::new().expect("a temporary log file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .args(args)
        .env("SLUICE_LOG", log_level)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log.reopen().expect("the log file"))
        .spawn()
        .expect("start sluice serve");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, first_line) = mpsc::channel();
    // Reads the announcement, then keeps the pipe open (and drained) until the process ends,
    // so that the server never writes into a closed pipe.
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
pub fn start(data_dir: &Path, log_level: &str, args: &[&str]) -> Serve {
    spawn(data_dir, log_level, args).wait_started().unwrap_or_else(|refused| {
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
                    assert!(
                        url.starts_with("http://127.0.0.1:") && !url.ends_with(":0"),
                        "the real port is announced: {url}"
                    );
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
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// SIGKILL.
    pub fn kill(self) {
        self.process.kill();
    }

    /// SIGTERM, then waits for a graceful exit.
    pub fn terminate(mut self) -> ExitStatus {
        signal(self.pid(), "TERM");
        self.wait_exit()
    }

    /// Waits for the process to exit by itself (after a signal sent by the test).
    pub fn wait_exit(&mut self) -> ExitStatus {
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

/// Sends a signal by name (TERM, INT, KILL) with the system's `kill`.
pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill").arg(format!("-{name}")).arg(pid.to_string()).status().expect("run kill");
    assert!(status.success(), "kill -{name} {pid} failed");
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
