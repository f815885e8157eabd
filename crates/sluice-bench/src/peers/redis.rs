//! Redis Streams as a peer, through the redis crate: XADD (a batch is one pipeline of XADDs),
//! XREADGROUP with a consumer group, XACK. The persistence settings of the server are read
//! back and reported, and decide the durability class the report gives it.
//!
//! Two settings: the running server as it is configured, and a second redis-server this driver
//! starts itself with `appendonly yes` and `appendfsync always`, which writes and syncs the
//! append-only file before it answers (once per event-loop turn, so pipelines share a sync).

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use async_trait::async_trait;
use bytes::Bytes;
use redis::aio::MultiplexedConnection;
use redis::streams::StreamReadReply;
use redis::{AsyncConnectionConfig, Client, Value};

use super::driver::{Connected, Consumer, Peer, Producer};
use super::spawned::Spawned;
use super::system::Durability;

/// The consumer group every consumer task reads in.
const GROUP: &str = "sluice-bench";
/// The field holding the body in each stream entry.
const FIELD: &str = "b";
/// Most commands per pipeline and entries per XREADGROUP.
const BATCH_MAX: usize = 1_000;
/// How long a command may take; longer than any blocking read.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) struct Redis {
    client: Client,
    admin: MultiplexedConnection,
    /// Names consumers uniquely within the group.
    consumers: AtomicU64,
    /// Every stream created, deleted again at `stop`: a pipeline of XADDs still in flight on a
    /// producer's connection when its phase ended can recreate a stream after `delete`.
    created: Mutex<Vec<String>>,
    server: Option<Spawned>,
}

/// The running server at `url`, with its persistence as configured.
pub(crate) async fn connect_default(url: &str) -> anyhow::Result<Connected> {
    connect(url, None).await
}

/// A second redis-server on a free port with its own directory, syncing every write, and its
/// URL.
pub(crate) async fn spawn_always(tmp_dir: &Path) -> anyhow::Result<(Spawned, String)> {
    let server = Spawned::start("redis-server", tmp_dir, |port, dir| {
        let args = [
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--dir",
            &dir.display().to_string(),
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
            "--daemonize",
            "no",
        ]
        .map(str::to_owned);
        Ok(args.to_vec())
    })
    .await
    .context("starting a second redis-server with `appendfsync always`")?;
    let url = format!("redis://127.0.0.1:{}/", server.port);
    Ok((server, url))
}

/// [`spawn_always`], connected.
pub(crate) async fn connect_always(tmp_dir: &Path) -> anyhow::Result<Connected> {
    let (server, url) = spawn_always(tmp_dir).await?;
    connect(&url, Some(server)).await
}

async fn open(client: &Client) -> anyhow::Result<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new().set_response_timeout(Some(RESPONSE_TIMEOUT));
    Ok(client.get_multiplexed_async_connection_with_config(&config).await?)
}

async fn connect(url: &str, server: Option<Spawned>) -> anyhow::Result<Connected> {
    let client = Client::open(url).with_context(|| format!("parsing the Redis URL {url}"))?;
    let mut admin = open(&client).await.with_context(|| format!("connecting to Redis at {url}"))?;
    let info: String = redis::cmd("INFO").arg("server").query_async(&mut admin).await?;
    let version = info_field(&info, "redis_version").unwrap_or("unknown").to_owned();
    let mut get = async |name: &str| -> anyhow::Result<String> {
        let pair: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query_async(&mut admin).await?;
        Ok(pair.get(1).cloned().unwrap_or_default())
    };
    let persistence = Persistence {
        appendonly: get("appendonly").await?,
        appendfsync: get("appendfsync").await?,
        save: get("save").await?,
    };
    let started = match &server {
        Some(s) => format!(", started by the harness with its files in {}", s.dir().display()),
        None => String::new(),
    };
    let settings = format!(
        "{url}{started} via the redis crate; persistence {}; one stream per phase, XADD (a batch = one pipeline of \
         XADDs), XREADGROUP COUNT batch BLOCK in one consumer group, XACK of each batch in one call; one \
         connection per producer and consumer",
        persistence.describe()
    );
    Ok(Connected {
        peer: Box::new(Redis { client, admin, consumers: AtomicU64::new(0), created: Mutex::new(Vec::new()), server }),
        version: format!("Redis {version}"),
        settings,
        durability: persistence.class(),
        durability_setting: persistence.describe(),
        batch_max: BATCH_MAX,
    })
}

/// A field of `INFO`'s `name:value` lines.
fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(':')).map(str::trim)
}

/// The server's persistence settings, as `CONFIG GET` reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Persistence {
    appendonly: String,
    appendfsync: String,
    save: String,
}

impl Persistence {
    fn class(&self) -> Durability {
        match (self.appendonly.as_str(), self.appendfsync.as_str()) {
            ("yes", "always") => Durability::PerWrite,
            ("yes", _) => Durability::Deferred,
            // RDB snapshots, if any, are taken on a timer and lose everything since the last one.
            _ => Durability::Memory,
        }
    }

    fn describe(&self) -> String {
        let save = if self.save.is_empty() {
            "save \"\" (no RDB snapshots)".to_owned()
        } else {
            format!("save \"{}\"", self.save)
        };
        if self.appendonly == "yes" {
            format!("appendonly yes, appendfsync {}, {save}", self.appendfsync)
        } else {
            format!("appendonly no, {save}")
        }
    }
}

#[async_trait]
impl Peer for Redis {
    async fn create(&self, queue: &str) -> anyhow::Result<()> {
        self.created.lock().expect("no panic holds the lock").push(queue.to_owned());
        let mut admin = self.admin.clone();
        let _: () = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(queue)
            .arg(GROUP)
            .arg("$")
            .arg("MKSTREAM")
            .query_async(&mut admin)
            .await?;
        Ok(())
    }

    async fn producer(&self, queue: &str) -> anyhow::Result<Box<dyn Producer>> {
        Ok(Box::new(RedisProducer { connection: open(&self.client).await?, key: queue.to_owned() }))
    }

    async fn consumer(&self, queue: &str, _batch: usize) -> anyhow::Result<Box<dyn Consumer>> {
        let name = format!("c{}", self.consumers.fetch_add(1, Ordering::Relaxed));
        Ok(Box::new(RedisConsumer {
            connection: open(&self.client).await?,
            key: queue.to_owned(),
            name,
            unacked: Vec::new(),
        }))
    }

    async fn delete(&self, queue: &str) -> anyhow::Result<()> {
        let mut admin = self.admin.clone();
        let _: () = redis::cmd("DEL").arg(queue).query_async(&mut admin).await?;
        Ok(())
    }

    async fn stop(self: Box<Self>) -> anyhow::Result<()> {
        let Redis { mut admin, server, created, .. } = *self;
        let created = created.into_inner().expect("no panic holds the lock");
        if !created.is_empty() {
            let _: () = redis::cmd("DEL").arg(&created).query_async(&mut admin).await?;
        }
        drop(admin);
        match server {
            Some(server) => server.stop().await,
            None => Ok(()),
        }
    }
}

struct RedisProducer {
    connection: MultiplexedConnection,
    key: String,
}

#[async_trait]
impl Producer for RedisProducer {
    async fn send(&mut self, bodies: &[Bytes]) -> anyhow::Result<()> {
        let mut pipe = redis::pipe();
        for body in bodies {
            pipe.cmd("XADD").arg(&self.key).arg("*").arg(FIELD).arg(body.as_ref());
        }
        let _: () = pipe.query_async(&mut self.connection).await?;
        Ok(())
    }
}

struct RedisConsumer {
    connection: MultiplexedConnection,
    key: String,
    name: String,
    unacked: Vec<String>,
}

#[async_trait]
impl Consumer for RedisConsumer {
    async fn receive(&mut self, max: usize, wait: Duration) -> anyhow::Result<Vec<Bytes>> {
        let block_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1);
        let reply: Option<StreamReadReply> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(&self.name)
            .arg("COUNT")
            .arg(max)
            .arg("BLOCK")
            .arg(block_ms)
            .arg("STREAMS")
            .arg(&self.key)
            .arg(">")
            .query_async(&mut self.connection)
            .await?;
        self.unacked.clear();
        let mut bodies = Vec::new();
        for entry in reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids) {
            match entry.map.get(FIELD) {
                Some(Value::BulkString(body)) => bodies.push(Bytes::copy_from_slice(body)),
                other => bail!("stream entry {} has no {FIELD:?} field: {other:?}", entry.id),
            }
            self.unacked.push(entry.id);
        }
        Ok(bodies)
    }

    async fn ack(&mut self) -> anyhow::Result<()> {
        if self.unacked.is_empty() {
            return Ok(());
        }
        let ids = std::mem::take(&mut self.unacked);
        let _: u64 = redis::cmd("XACK").arg(&self.key).arg(GROUP).arg(&ids).query_async(&mut self.connection).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn persistence(appendonly: &str, appendfsync: &str, save: &str) -> Persistence {
        Persistence { appendonly: appendonly.into(), appendfsync: appendfsync.into(), save: save.into() }
    }

    #[test]
    fn persistence_settings_decide_the_durability_class() {
        let check = |p: Persistence, class: Durability, words: &str| {
            assert_eq!((p.class(), p.describe().as_str()), (class, words));
        };
        check(
            persistence("yes", "always", ""),
            Durability::PerWrite,
            "appendonly yes, appendfsync always, save \"\" (no RDB snapshots)",
        );
        check(
            persistence("yes", "everysec", "3600 1"),
            Durability::Deferred,
            "appendonly yes, appendfsync everysec, save \"3600 1\"",
        );
        check(persistence("no", "everysec", ""), Durability::Memory, "appendonly no, save \"\" (no RDB snapshots)");
    }

    #[test]
    fn info_fields_are_found_by_name() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n";
        assert_eq!(info_field(info, "redis_version"), Some("7.0.15"));
        assert_eq!(info_field(info, "redis_mode"), None);
    }
}
