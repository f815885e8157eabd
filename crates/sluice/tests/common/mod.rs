//! Starts the real `sluice` binary on port 0 with its own data directory, and runs its client
//! commands against it. Dropping a [`Server`] kills the process; the process itself is
//! [`process`]'s, which the torture tests share.

#![allow(dead_code)] // Each test crate uses a different part of this module.

#[path = "../process/mod.rs"]
mod process;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use process::Serve;
// Like the dead-code allowance above: each test crate uses a different part.
#[allow(unused_imports)]
pub use process::signal;

/// How long a `sluice` run that should exit by itself (such as a `serve` that cannot start)
/// may take.
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

pub fn sluice_bin() -> &'static str {
    env!("CARGO_BIN_EXE_sluice")
}

/// A running `sluice serve`, logging at `info`, in the durability mode its arguments say.
pub struct Server {
    serve: Serve,
    /// `http://127.0.0.1:PORT`, as the server announced it.
    pub url: String,
    pub data_dir: PathBuf,
}

impl Server {
    /// Starts a server on a free port over `data_dir` and waits for its listening line.
    pub fn start(data_dir: &Path) -> Server {
        Server::start_with(data_dir, &[])
    }

    /// As [`Server::start`], with `extra` arguments to `sluice serve`.
    pub fn start_with(data_dir: &Path, extra: &[&str]) -> Server {
        let serve = process::start(data_dir, "info", extra);
        Server { url: serve.url.clone(), data_dir: data_dir.to_owned(), serve }
    }

    /// A client with the default retries, as an application would make it.
    pub fn client(&self) -> sluice_client::Client {
        sluice_client::Client::new(&self.url).expect("a client for the announced URL")
    }

    pub fn pid(&self) -> u32 {
        self.serve.pid()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        self.serve.log()
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn terminate(self) -> ExitStatus {
        self.serve.terminate()
    }

    /// Waits for the process to exit by itself.
    pub fn wait_exit(&mut self) -> ExitStatus {
        self.serve.wait_exit()
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
    let deadline = Instant::now() + EXIT_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll sluice") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sluice {args:?} was still running after {EXIT_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    child.stdout.take().expect("piped").read_to_string(&mut stdout).expect("read stdout");
    child.stderr.take().expect("piped").read_to_string(&mut stderr).expect("read stderr");
    CliOutput { code: status.code(), stdout, stderr }
}
