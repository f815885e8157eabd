//! Starts the real `sluice` binary on port 0 with its own data directory, and runs its client
//! commands against it. Dropping a [`Server`] kills the process.

#![allow(dead_code)] // Each test crate uses a different part of this module.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a server may take to print its listening line, or to exit after SIGTERM.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

pub fn sluice_bin() -> &'static str {
    env!("CARGO_BIN_EXE_sluice")
}

/// A running `sluice serve`.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`, as the server announced it.
    pub url: String,
    pub data_dir: PathBuf,
    /// Where the server's stderr (its log) goes.
    log: tempfile::NamedTempFile,
    /// Kept open so that the server never writes into a closed pipe.
    _stdout: BufReader<ChildStdout>,
}

impl Server {
    /// Starts a server on a free port over `data_dir` and waits for its listening line.
    pub fn start(data_dir: &Path) -> Server {
        Server::start_with(data_dir, &[])
    }

    pub fn start_with(data_dir: &Path, extra: &[&str]) -> Server {
        let log = tempfile::NamedTempFile::new().expect("a temporary log file");
        let mut child = Command::new(sluice_bin())
            .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .args(extra)
            .env("SLUICE_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log.reopen().expect("the log file"))
            .spawn()
            .expect("start sluice serve");
        let stdout = child.stdout.take().expect("piped stdout");
        // Read on a thread so that a server that never announces fails the test instead of
        // hanging it.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let read = reader.read_line(&mut line);
            let _ = tx.send((read.map(|_| line), reader));
        });
        let announced = rx.recv_timeout(STARTUP_TIMEOUT);
        let log_text = || std::fs::read_to_string(log.path()).unwrap_or_default();
        let (line, reader) = match announced {
            Ok((Ok(line), reader)) if !line.is_empty() => (line, reader),
            other => {
                let _ = child.kill();
                let status = child.wait();
                panic!(
                    "sluice serve did not announce itself ({other:?}, exit {status:?}); its log:\n{}",
                    log_text().trim_end()
                );
            }
        };
        let url = line
            .trim_end()
            .strip_prefix("sluice listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        assert!(url.starts_with("http://127.0.0.1:") && !url.ends_with(":0"), "the real port is announced: {url}");
        Server { child, url, data_dir: data_dir.to_owned(), log, _stdout: reader }
    }

    pub fn client(&self) -> sluice_client::Client {
        sluice_client::Client::new(&self.url).expect("a client for the announced URL")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn terminate(mut self) -> ExitStatus {
        signal(self.child.id(), "TERM");
        self.wait_exit()
    }

    /// Waits for the process to exit by itself.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("poll the server process") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit within {SHUTDOWN_TIMEOUT:?}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs `sluice ARGS... --server URL` against this server.
    pub fn cli(&self, args: &[&str]) -> CliOutput {
        run_cli(args, Some(&self.url), None)
    }

    /// As [`Server::cli`], with `input` on standard input.
    pub fn cli_with_stdin(&self, args: &[&str], input: &[u8]) -> CliOutput {
        run_cli(args, Some(&self.url), Some(input))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends a signal by name (TERM, INT, KILL) with the system's `kill`.
pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill").arg(format!("-{name}")).arg(pid.to_string()).status().expect("run kill");
    assert!(status.success(), "kill -{name} {pid} failed");
}

/// What a CLI run printed and how it exited.
#[derive(Debug)]
pub struct CliOutput {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    /// Asserts exit code 0 and returns stdout.
    #[track_caller]
    pub fn ok(&self) -> &str {
        assert_eq!(self.code, Some(0), "expected success:\n{self:#?}");
        &self.stdout
    }

    /// Asserts success and parses stdout as JSON.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        let stdout = self.ok();
        serde_json::from_str(stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{stdout}"))
    }

    /// Asserts exit code 1 and returns stderr.
    #[track_caller]
    pub fn failed(&self) -> &str {
        assert_eq!(self.code, Some(1), "expected failure:\n{self:#?}");
        &self.stderr
    }
}

/// Runs `sluice ARGS... [--server URL]`.
pub fn run_cli(args: &[&str], server: Option<&str>, input: Option<&[u8]>) -> CliOutput {
    let mut command = Command::new(sluice_bin());
    command.args(args).env_remove("SLUICE_SERVER").stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(url) = server {
        command.args(["--server", url]);
    }
    command.stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = command.spawn().expect("run sluice");
    if let Some(input) = input {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped stdin");
        stdin.write_all(input).expect("write stdin");
    }
    let Output { status, stdout, stderr } = child.wait_with_output().expect("wait for sluice");
    CliOutput {
        code: status.code(),
        stdout: String::from_utf8(stdout).expect("UTF-8 stdout"),
        stderr: String::from_utf8(stderr).expect("UTF-8 stderr"),
    }
}

/// Runs `sluice ARGS...` that is expected to exit by itself (such as a `serve` that cannot
/// start), killing it if it is still running after the startup timeout.
pub fn run_until_exit(args: &[&str]) -> CliOutput {
    use std::io::Read;
    let mut child = Command::new(sluice_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sluice");
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll sluice") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sluice {args:?} was still running after {STARTUP_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    child.stdout.take().expect("piped").read_to_string(&mut stdout).expect("read stdout");
    child.stderr.take().expect("piped").read_to_string(&mut stderr).expect("read stderr");
    CliOutput { code: status.code(), stdout, stderr }
}
