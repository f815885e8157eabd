//! The server under test: started in-process on an embedded store in a fresh temporary
//! directory, or an external one named by `--server`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_store::Store;
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::Plan;

/// How long the in-process server may take to stop after the workload's clients are gone.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

pub(crate) enum Target {
    InProcess(InProcess),
    External { url: String },
}

pub(crate) struct InProcess {
    url: String,
    store: Arc<EmbeddedStore>,
    stop: oneshot::Sender<()>,
    server: JoinHandle<std::io::Result<()>>,
    /// Removed on drop, after the store is closed.
    dir: TempDir,
}

impl Target {
    pub async fn start(plan: &Plan) -> anyhow::Result<Target> {
        if let Some(url) = &plan.server {
            return Ok(Target::External { url: url.trim_end_matches('/').to_owned() });
        }
        Ok(Target::InProcess(InProcess::start(&plan.tmp_dir, plan.durability).await?))
    }
}

impl InProcess {
    /// A server on 127.0.0.1, port 0, over an embedded store in a fresh directory in `tmp_dir`.
    pub async fn start(tmp_dir: &Path, durability: Durability) -> anyhow::Result<InProcess> {
        InProcess::start_with(tmp_dir, durability, sluice_server::ServerConfig::default()).await
    }

    /// [`InProcess::start`] with a server configuration (load shedding's watermarks, say).
    pub async fn start_with(
        tmp_dir: &Path,
        durability: Durability,
        server_config: sluice_server::ServerConfig,
    ) -> anyhow::Result<InProcess> {
        let dir = tempfile::Builder::new()
            .prefix("sluice-bench-data-")
            .tempdir_in(tmp_dir)
            .with_context(|| format!("creating a temporary directory in {}", tmp_dir.display()))?;
        let config = EmbeddedConfig { data_dir: dir.path().to_owned(), durability };
        // Opening replays the directory from disk: blocking work, kept off the async threads.
        let store = tokio::task::spawn_blocking(move || EmbeddedStore::open(config))
            .await
            .context("opening the store panicked")?
            .context("opening the embedded store")?;
        let store = Arc::new(store);
        let listener = TcpListener::bind("127.0.0.1:0").await.context("binding 127.0.0.1:0")?;
        let url = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = oneshot::channel::<()>();
        let shared: Arc<dyn Store> = store.clone();
        let server = tokio::spawn(sluice_server::run_with(listener, shared, server_config, async {
            let _ = stopped.await;
        }));
        Ok(InProcess { url, store, stop, server, dir })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Stops the server, then closes (syncs) the store and removes its directory.
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        let served = tokio::time::timeout(SHUTDOWN_WAIT, self.server).await;
        let store = self.store;
        tokio::task::spawn_blocking(move || store.close()).await.context("closing the store panicked")?;
        self.dir.close().context("removing the temporary data directory")?;
        match served {
            Ok(joined) => joined.context("the server task panicked")?.context("the server failed"),
            Err(_) => bail!("the in-process server did not stop within {SHUTDOWN_WAIT:?}"),
        }
    }
}

impl Target {
    pub fn url(&self) -> &str {
        match self {
            Target::InProcess(p) => p.url(),
            Target::External { url } => url,
        }
    }

    /// True for a server running in this process (whose memory is this process's).
    pub fn is_in_process(&self) -> bool {
        matches!(self, Target::InProcess(_))
    }

    /// The in-process server's data directory; `None` for an external server.
    pub fn data_dir(&self) -> Option<&Path> {
        match self {
            Target::InProcess(p) => Some(p.data_dir()),
            Target::External { .. } => None,
        }
    }

    /// "in-process, data in DIR" or the external URL, for the report.
    pub fn describe(&self) -> String {
        match self {
            Target::InProcess(p) => format!("in-process on {}, embedded store in {}", p.url, p.dir.path().display()),
            Target::External { url } => format!("external server at {url}"),
        }
    }

    /// Stops the in-process server, then closes (syncs) the store and removes its directory.
    pub async fn stop(self) -> anyhow::Result<()> {
        match self {
            Target::InProcess(p) => p.stop().await,
            Target::External { .. } => Ok(()),
        }
    }
}
