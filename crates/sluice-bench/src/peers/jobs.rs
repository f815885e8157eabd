//! The job systems the `jobs` scenario (`src/jobs.rs`) runs beside Sluice, in the shapes their
//! users run them:
//!
//! - PostgreSQL, River's and graphile-worker's shape: one `jobs` table (state, queue, priority,
//!   scheduled_at, attempt, args jsonb, ...) with River's partial index on available jobs; an
//!   enqueue is one INSERT; a claim is one UPDATE of the first available row taken
//!   `FOR UPDATE SKIP LOCKED` (River's `JobGetAvailable`); a completion is one UPDATE to
//!   `completed` (rows are kept, as River keeps them, as Sluice keeps results). Each statement
//!   is its own transaction. An empty claim polls again after `PG_POLL_INTERVAL`.
//! - Redis, BullMQ's shape: `wait` and `active` lists, a hash per job, a `completed` sorted set,
//!   an id counter; an enqueue is one Lua script (INCR, HSET, LPUSH), a claim is a blocking
//!   BLMOVE from `wait` to `active` then one script (a lock key with a TTL, `processedOn`), a
//!   completion is one script (LREM from `active`, drop the lock, HSET `finishedOn`, ZADD to
//!   `completed`) — BullMQ's `addJob`, `moveToActive`, `moveToFinished`, simplified. Once on the
//!   running server as configured, once on a second redis-server started here with
//!   `appendfsync always`.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use redis::aio::MultiplexedConnection;

use super::postgres::{commit_settings, open, redact};
use super::spawned::Spawned;
use super::system::Durability;
use crate::Plan;
use crate::job_system::{Claimed, JobHandle, JobSystem};

/// Pause before an empty claim looks again (River's and graphile's own loops are woken by
/// LISTEN/NOTIFY and poll every second; a short poll keeps this peer's latency honest).
const PG_POLL_INTERVAL: Duration = Duration::from_millis(2);
/// How long a blocking claim waits on Redis, in seconds.
const REDIS_BLOCK_S: f64 = 0.5;

/// Every peer that could be reached, and a note for each that could not.
pub(crate) async fn systems(plan: &Plan) -> (Vec<Box<dyn JobSystem>>, Vec<String>) {
    let pg_url = plan.job_peer_urls.0.clone();
    let redis_url = plan.job_peer_urls.1.clone();
    let mut systems: Vec<Box<dyn JobSystem>> = Vec::new();
    let mut notes = Vec::new();
    match PgJobs::connect(&pg_url).await {
        Ok(pg) => systems.push(Box::new(pg)),
        Err(e) => notes.push(format!("postgres skipped: {e:#}")),
    }
    match RedisJobs::connect(&redis_url, None).await {
        Ok(r) => systems.push(Box::new(r)),
        Err(e) => notes.push(format!("redis-default skipped: {e:#}")),
    }
    match RedisJobs::start_always(&plan.tmp_dir).await {
        Ok(r) => systems.push(Box::new(r)),
        Err(e) => notes.push(format!("redis-always skipped: {e:#}")),
    }
    (systems, notes)
}

// ----- PostgreSQL --------------------------------------------------------------------------

struct PgJobs {
    url: String,
    admin: tokio_postgres::Client,
    durability: Durability,
    setting: String,
    tables: std::sync::Mutex<Vec<String>>,
}

impl PgJobs {
    async fn connect(url: &str) -> anyhow::Result<PgJobs> {
        let (admin, _task) = open(url).await.with_context(|| format!("connecting to {}", redact(url)))?;
        let commit = commit_settings(&admin).await?;
        let setting = format!("{}, {}", commit.durability_setting, commit.version);
        Ok(PgJobs { url: url.to_owned(), admin, durability: commit.durability, setting, tables: Default::default() })
    }
}

struct PgHandle {
    client: tokio_postgres::Client,
    enqueue: tokio_postgres::Statement,
    claim: tokio_postgres::Statement,
    complete: tokio_postgres::Statement,
}

#[async_trait]
impl JobSystem for PgJobs {
    fn name(&self) -> String {
        "postgres".into()
    }

    fn durability(&self) -> String {
        self.setting.clone()
    }

    fn per_write_durable(&self) -> bool {
        self.durability == Durability::PerWrite
    }

    async fn prepare(&self, queue: &str) -> anyhow::Result<()> {
        let table = format!("bench_{queue}");
        self.admin
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS {table};
                 CREATE TABLE {table} (
                     id bigserial PRIMARY KEY, state text NOT NULL DEFAULT 'available', queue text NOT NULL,
                     kind text NOT NULL, args jsonb NOT NULL, priority smallint NOT NULL DEFAULT 1,
                     attempt smallint NOT NULL DEFAULT 0, max_attempts smallint NOT NULL DEFAULT 25,
                     scheduled_at timestamptz NOT NULL DEFAULT now(), attempted_at timestamptz,
                     finalized_at timestamptz, created_at timestamptz NOT NULL DEFAULT now(),
                     metadata jsonb NOT NULL DEFAULT '{{}}');
                 CREATE INDEX ON {table} (queue, priority, scheduled_at, id) WHERE state = 'available';"
            ))
            .await
            .context("creating the jobs table")?;
        self.tables.lock().unwrap_or_else(|e| e.into_inner()).push(table);
        Ok(())
    }

    async fn handle(&self, queue: &str) -> anyhow::Result<Box<dyn JobHandle>> {
        let table = format!("bench_{queue}");
        let (client, _task) = open(&self.url).await?;
        let enqueue =
            client.prepare(&format!("INSERT INTO {table} (queue, kind, args) VALUES ('{queue}', 'bench', $1)")).await?;
        let claim = client
            .prepare(&format!(
                "WITH locked AS (SELECT id FROM {table} WHERE state = 'available' AND queue = '{queue}'
                     AND scheduled_at <= now() ORDER BY priority, scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
                 UPDATE {table} j SET state = 'running', attempt = j.attempt + 1, attempted_at = now()
                 FROM locked WHERE j.id = locked.id RETURNING j.id, j.args"
            ))
            .await?;
        let complete = client
            .prepare(&format!(
                "UPDATE {table} SET state = 'completed', finalized_at = now() WHERE id = $1 AND state = 'running'"
            ))
            .await?;
        Ok(Box::new(PgHandle { client, enqueue, claim, complete }))
    }

    async fn stop(self: Box<Self>) -> anyhow::Result<()> {
        let tables = std::mem::take(&mut *self.tables.lock().unwrap_or_else(|e| e.into_inner()));
        for table in tables {
            self.admin.batch_execute(&format!("DROP TABLE IF EXISTS {table}")).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl JobHandle for PgHandle {
    async fn enqueue(&mut self, enqueued_us: u64) -> anyhow::Result<()> {
        self.client.execute(&self.enqueue, &[&serde_json::json!(enqueued_us)]).await?;
        Ok(())
    }

    async fn claim(&mut self) -> anyhow::Result<Option<Claimed>> {
        let rows = self.client.query(&self.claim, &[]).await?;
        let Some(row) = rows.first() else {
            tokio::time::sleep(PG_POLL_INTERVAL).await;
            return Ok(None);
        };
        let id: i64 = row.get(0);
        let args: serde_json::Value = row.get(1);
        Ok(Some(Claimed { id: id.to_string(), lease: String::new(), enqueued_us: args.as_u64().unwrap_or(0) }))
    }

    async fn complete(&mut self, job: &Claimed) -> anyhow::Result<()> {
        let id: i64 = job.id.parse()?;
        self.client.execute(&self.complete, &[&id]).await?;
        Ok(())
    }
}

// ----- Redis -------------------------------------------------------------------------------

const ADD_JOB: &str = "local id = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[2] .. id, 'name', 'bench', 'data', ARGV[1], 'timestamp', ARGV[2], 'attemptsMade', 0)
redis.call('LPUSH', KEYS[3], id)
return id";

const MOVE_TO_ACTIVE: &str = "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[2], 'processedOn', ARGV[3])
return redis.call('HGET', KEYS[2], 'data')";

const MOVE_TO_FINISHED: &str = "redis.call('LREM', KEYS[1], -1, ARGV[1])
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[3], 'finishedOn', ARGV[2], 'returnvalue', 'null')
redis.call('ZADD', KEYS[4], ARGV[2], ARGV[1])
return 1";

struct RedisJobs {
    client: redis::Client,
    label: String,
    setting: String,
    always: bool,
    _server: Option<Spawned>,
}

impl RedisJobs {
    async fn connect(url: &str, server: Option<Spawned>) -> anyhow::Result<RedisJobs> {
        let client = redis::Client::open(url).with_context(|| format!("the Redis URL {url}"))?;
        let mut admin =
            client.get_multiplexed_async_connection().await.with_context(|| format!("connecting to {url}"))?;
        let get = async |admin: &mut MultiplexedConnection, name: &str| -> anyhow::Result<String> {
            let pair: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query_async(admin).await?;
            Ok(pair.get(1).cloned().unwrap_or_default())
        };
        let appendonly = get(&mut admin, "appendonly").await?;
        let appendfsync = get(&mut admin, "appendfsync").await?;
        let always = appendonly == "yes" && appendfsync == "always";
        let label = if server.is_some() { "redis-always" } else { "redis-default" }.to_string();
        let setting = format!("appendonly {appendonly}, appendfsync {appendfsync}");
        Ok(RedisJobs { client, label, setting, always, _server: server })
    }

    async fn start_always(tmp_dir: &Path) -> anyhow::Result<RedisJobs> {
        let (server, url) = super::redis::spawn_always(tmp_dir).await?;
        RedisJobs::connect(&url, Some(server)).await
    }
}

struct RedisHandle {
    connection: MultiplexedConnection,
    prefix: String,
}

async fn eval<T: redis::FromRedisValue>(
    connection: &mut MultiplexedConnection,
    script: &str,
    keys: &[&str],
    args: &[String],
) -> anyhow::Result<T> {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(script).arg(keys.len());
    for k in keys {
        cmd.arg(*k);
    }
    for a in args {
        cmd.arg(a);
    }
    Ok(cmd.query_async(connection).await?)
}

fn now_ms() -> String {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis()).to_string()
}

#[async_trait]
impl JobSystem for RedisJobs {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn durability(&self) -> String {
        self.setting.clone()
    }

    fn per_write_durable(&self) -> bool {
        self.always
    }

    async fn prepare(&self, queue: &str) -> anyhow::Result<()> {
        let mut admin = self.client.get_multiplexed_async_connection().await?;
        let pattern = format!("bull:{queue}:*");
        let keys: Vec<String> = redis::cmd("KEYS").arg(&pattern).query_async(&mut admin).await?;
        if !keys.is_empty() {
            let _: () = redis::cmd("DEL").arg(keys).query_async(&mut admin).await?;
        }
        Ok(())
    }

    async fn handle(&self, queue: &str) -> anyhow::Result<Box<dyn JobHandle>> {
        // A connection of its own: a blocking BLMOVE holds it.
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(30)));
        let connection = self.client.get_multiplexed_async_connection_with_config(&config).await?;
        Ok(Box::new(RedisHandle { connection, prefix: format!("bull:{queue}") }))
    }

    async fn stop(self: Box<Self>) -> anyhow::Result<()> {
        let mut admin = self.client.get_multiplexed_async_connection().await?;
        let keys: Vec<String> = redis::cmd("KEYS").arg("bull:*").query_async(&mut admin).await?;
        for chunk in keys.chunks(1_000) {
            let _: () = redis::cmd("DEL").arg(chunk).query_async(&mut admin).await?;
        }
        if let Some(server) = self._server {
            server.stop().await?;
        }
        Ok(())
    }
}

#[async_trait]
impl JobHandle for RedisHandle {
    async fn enqueue(&mut self, enqueued_us: u64) -> anyhow::Result<()> {
        let p = &self.prefix;
        let keys = [format!("{p}:id"), format!("{p}:"), format!("{p}:wait")];
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let _: i64 = eval(&mut self.connection, ADD_JOB, &keys, &[enqueued_us.to_string(), now_ms()]).await?;
        Ok(())
    }

    async fn claim(&mut self) -> anyhow::Result<Option<Claimed>> {
        let p = &self.prefix;
        let id: Option<String> = redis::cmd("BLMOVE")
            .arg(format!("{p}:wait"))
            .arg(format!("{p}:active"))
            .arg("RIGHT")
            .arg("LEFT")
            .arg(REDIS_BLOCK_S)
            .query_async(&mut self.connection)
            .await?;
        let Some(id) = id else { return Ok(None) };
        let token = format!("{id}-token");
        let keys = [format!("{p}:{id}:lock"), format!("{p}:{id}")];
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let data: String =
            eval(&mut self.connection, MOVE_TO_ACTIVE, &keys, &[token.clone(), "30000".into(), now_ms()]).await?;
        Ok(Some(Claimed { id, lease: token, enqueued_us: data.parse().unwrap_or(0) }))
    }

    async fn complete(&mut self, job: &Claimed) -> anyhow::Result<()> {
        let p = &self.prefix;
        let id = &job.id;
        let keys = [format!("{p}:active"), format!("{p}:{id}:lock"), format!("{p}:{id}"), format!("{p}:completed")];
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let _: i64 = eval(&mut self.connection, MOVE_TO_FINISHED, &keys, &[id.clone(), now_ms()]).await?;
        Ok(())
    }
}
