//! A second server process the harness starts itself (nats-server with `sync_interval: always`,
//! redis-server with `appendfsync always`): on a free loopback port, with its own temporary data
//! directory, and killed when the run ends, failed or not.
//!
//! The child is killed on drop as well, so an error or an interrupted run that unwinds past
//! `stop` still leaves no server behind; its directory is removed with it.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tempfile::TempDir;
use tokio::process::{Child, Command};

/// How long a started server may take to accept connections.
const READY_WAIT: Duration = Duration::from_secs(10);
/// How long a killed server may take to exit.
const EXIT_WAIT: Duration = Duration::from_secs(10);
/// Most bytes of the server's log quoted when it fails to start.
const LOG_QUOTE_BYTES_MAX: usize = 600;

pub(crate) struct Spawned {
    child: Child,
    /// The data directory and the server's log; removed on drop.
    dir: TempDir,
    pub port: u16,
    program: String,
}

impl Spawned {
    /// Runs `program` with the arguments `args(port, dir)` gives, its output going to a log in
    /// `dir`, and waits until it accepts TCP connections on `port`. A server that exits first
    /// is an error quoting the end of its log (a refused setting, a missing binary).
    pub async fn start(
        program: &str,
        tmp_dir: &Path,
        args: impl FnOnce(u16, &Path) -> anyhow::Result<Vec<String>>,
    ) -> anyhow::Result<Spawned> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("sluice-bench-{program}-"))
            .tempdir_in(tmp_dir)
            .with_context(|| format!("creating a temporary directory in {}", tmp_dir.display()))?;
        let port = free_port()?;
        let args = args(port, dir.path())?;
        let log_path = dir.path().join("server.log");
        let log = std::fs::File::create(&log_path).context("creating the server's log file")?;
        let child = Command::new(program)
            .args(&args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {program}; is it installed?"))?;
        let mut spawned = Spawned { child, dir, port, program: program.to_owned() };
        let deadline = Instant::now() + READY_WAIT;
        loop {
            if let Some(status) = spawned.child.try_wait()? {
                bail!("{program} exited ({status}) before accepting connections: {}", spawned.log_tail());
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return Ok(spawned);
            }
            if Instant::now() >= deadline {
                bail!(
                    "{program} did not accept connections on port {port} within {READY_WAIT:?}: {}",
                    spawned.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The end of the server's log, on one line.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        let text = text.trim();
        let start = text.len().saturating_sub(LOG_QUOTE_BYTES_MAX);
        let start = (start..text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(text.len());
        text[start..].replace('\n', " | ")
    }

    /// Kills the server (its data is thrown away, so there is nothing to flush), waits for it
    /// to exit, and removes its directory.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.child.start_kill().with_context(|| format!("killing {}", self.program))?;
        tokio::time::timeout(EXIT_WAIT, self.child.wait())
            .await
            .with_context(|| format!("{} did not exit within {EXIT_WAIT:?}", self.program))??;
        self.dir.close().context("removing the server's temporary directory")?;
        Ok(())
    }
}

/// A loopback port nobody listens on now. Another process could take it before the server
/// binds it; the server then fails to start and the report says so.
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}
