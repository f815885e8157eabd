//! Streams on PostgreSQL (migration 6): records as rows keyed by (stream, partition, offset),
//! offsets taken from each partition's row in the append's transaction (gapless, in commit
//! order, across nodes), groups as one row each whose state sluice-core's rules change under
//! the row's lock, and a sweep (`sweep.rs`) that applies retention in small chunks.
//!
//! - `append.rs`: appends (partitioner, dedup claims, expectations) and reads;
//! - `groups.rs`: groups, fetches, commits, seeks, acks, releases, nacks, dead-lettering
//!   through `sluice_send` in the same transaction;
//! - `sweep.rs`: retention, shared-mode ack timeouts, expired dedup ids, rows of deleted
//!   streams; one node at a time (an advisory lock per sweep).
//!
//! Long polls wait on `wake::Wakers` keyed by stream id, woken here at once and on every other
//! node through `NOTIFY` with the payload `s<stream id>`.
//!
//! Round robin (records without key or partition) counts per node: several nodes spread such
//! records over the partitions each on its own.

mod append;
pub(crate) use append::append_in;
mod groups;
mod sweep;

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use sluice_core::stream::{self, NewRecord, StreamConfig, StreamConfigPatch};
use sluice_store::{
    AppendResults, Expectation, FetchRequest, Fetched, GroupConfig, GroupView, LogError, LogStore, PartitionView,
    ReadBatch, ReadRequest, ReceiptResults, SeekTo, StreamView, SweepReport,
};

use crate::{Inner, PostgresStore, db_error};

/// Per node: the round-robin counter of every stream appended to through it.
#[derive(Default)]
pub struct RoundRobin(Mutex<HashMap<i64, u64>>);

pub(crate) fn store_error(e: tokio_postgres::Error) -> LogError {
    LogError::Store(db_error(e))
}

/// A stream's row.
pub(crate) struct StreamRow {
    pub id: i64,
    pub name: String,
    pub config: StreamConfig,
    pub created_at: u64,
}

pub(crate) fn config_of(v: serde_json::Value) -> Result<StreamConfig, LogError> {
    serde_json::from_value(v)
        .map_err(|e| LogError::Store(sluice_store::StoreError::Unavailable(format!("a stream's config: {e}"))))
}

pub(crate) async fn stream_row(c: &impl GenericClient, name: &str) -> Result<StreamRow, LogError> {
    let row = c
        .query_opt("SELECT id, config, created_at FROM streams WHERE name = $1", &[&name])
        .await
        .map_err(store_error)?
        .ok_or_else(|| LogError::StreamNotFound(name.to_owned()))?;
    Ok(StreamRow {
        id: row.get(0),
        name: name.to_owned(),
        config: config_of(row.get(1))?,
        created_at: row.get::<_, i64>(2) as u64,
    })
}

pub(crate) async fn partitions(c: &impl GenericClient, stream_id: i64) -> Result<Vec<PartitionView>, LogError> {
    let rows = c
        .query(
            "SELECT first_offset, next_offset, bytes FROM stream_partitions WHERE stream_id = $1 ORDER BY partition",
            &[&stream_id],
        )
        .await
        .map_err(store_error)?;
    Ok(rows
        .iter()
        .map(|r| PartitionView {
            first_offset: r.get::<_, i64>(0) as u64,
            next_offset: r.get::<_, i64>(1) as u64,
            bytes: r.get::<_, i64>(2) as u64,
        })
        .collect())
}

async fn view(c: &impl GenericClient, s: StreamRow) -> Result<StreamView, LogError> {
    let parts = partitions(c, s.id).await?;
    let ends: Vec<u64> = parts.iter().map(|p| p.next_offset).collect();
    let now = now_ms(c).await?;
    let rows = c
        .query("SELECT name, config, created_at, state FROM stream_groups WHERE stream_id = $1 ORDER BY name", &[&s.id])
        .await
        .map_err(store_error)?;
    let mut group_views = Vec::with_capacity(rows.len());
    for r in rows {
        let g = groups::Group::from_row(r.get(1), r.get::<_, i64>(2) as u64, r.get(3))?;
        group_views.push(g.view(r.get::<_, String>(0).as_str(), &ends, now));
    }
    Ok(StreamView { name: s.name, config: s.config, created_at: s.created_at, partitions: parts, groups: group_views })
}

pub(crate) async fn now_ms(c: &impl GenericClient) -> Result<u64, LogError> {
    let row = c.query_one("SELECT sluice_now_ms()", &[]).await.map_err(store_error)?;
    Ok(row.get::<_, i64>(0) as u64)
}

impl Inner {
    /// Wakes long polls on a stream, here and on every node.
    pub(crate) async fn notify_stream(&self, stream_id: i64) {
        self.stream_wakers.wake(stream_id as u64);
        let result = async {
            let client = self.pool.get().await.map_err(|e| e.to_string())?;
            client
                .execute("SELECT pg_notify($1, 's' || $2::text)", &[&self.channel, &stream_id])
                .await
                .map_err(|e| e.to_string())
        }
        .await;
        if let Err(e) = result {
            tracing::warn!("could not notify other nodes of new records in stream {stream_id}: {e}");
        }
    }

    /// Tries `attempt` until it returns something or `wait_ms` is over, woken by the stream.
    pub(crate) async fn long_poll<T, F, Fut>(
        &self,
        stream: &str,
        wait_ms: u64,
        empty: impl Fn(&T) -> bool,
        mut attempt: F,
    ) -> Result<T, LogError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, LogError>>,
    {
        use std::time::{Duration, Instant};
        /// Longest wait before a long poll looks again by itself (members stay alive, ack
        /// timeouts and notifications lost with a LISTEN connection are noticed).
        const RECHECK_MS: u64 = 500;
        let deadline = Instant::now() + Duration::from_millis(wait_ms);
        let mut id = None;
        loop {
            let mut sub = id.map(|id| self.stream_wakers.subscribe(id));
            let got = attempt().await?;
            let now = Instant::now();
            if !empty(&got) || now >= deadline {
                return Ok(got);
            }
            if id.is_none() {
                let client = self.client().await?;
                id = Some(stream_row(&client, stream).await?.id as u64);
                continue;
            }
            let pause = (deadline - now).min(Duration::from_millis(RECHECK_MS));
            match sub.as_mut() {
                Some(sub) => {
                    let _ = tokio::time::timeout(pause, sub.changed()).await;
                }
                None => tokio::time::sleep(pause).await,
            }
        }
    }
}

#[async_trait]
impl LogStore for PostgresStore {
    async fn create_stream(&self, name: &str, config: StreamConfig) -> Result<(StreamView, bool), LogError> {
        stream::validate_stream_name(name)?;
        config.validate()?;
        let mut client = self.inner.client().await?;
        let tx = client.transaction().await.map_err(store_error)?;
        let json = serde_json::to_value(&config).expect("configs serialize");
        let count: i64 = tx.query_one("SELECT count(*) FROM streams", &[]).await.map_err(store_error)?.get(0);
        let inserted = tx
            .query_opt(
                "INSERT INTO streams (name, config, created_at) VALUES ($1, $2, sluice_now_ms()) ON CONFLICT (name) DO NOTHING RETURNING id",
                &[&name, &json],
            )
            .await
            .map_err(store_error)?;
        let Some(row) = inserted else {
            let existing = stream_row(&tx, name).await?;
            if existing.config != config {
                return Err(LogError::StreamExists(name.to_owned()));
            }
            return Ok((view(&tx, existing).await?, false));
        };
        if count as usize >= stream::limits::STREAMS_MAX {
            return Err(LogError::LimitExceeded(format!(
                "this server already holds {} streams",
                stream::limits::STREAMS_MAX
            )));
        }
        let id: i64 = row.get(0);
        tx.execute(
            "INSERT INTO stream_partitions (stream_id, partition) SELECT $1, p FROM generate_series(0, $2 - 1) AS p",
            &[&id, &(config.partitions as i32)],
        )
        .await
        .map_err(store_error)?;
        let s = stream_row(&tx, name).await?;
        let v = view(&tx, s).await?;
        tx.commit().await.map_err(store_error)?;
        Ok((v, true))
    }

    async fn get_stream(&self, name: &str) -> Result<StreamView, LogError> {
        let client = self.inner.client().await?;
        let s = stream_row(&client, name).await?;
        view(&client, s).await
    }

    async fn list_streams(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Vec<StreamView>, LogError> {
        let client = self.inner.client().await?;
        let rows = client
            .query(
                "SELECT id, name, config, created_at FROM streams WHERE starts_with(name, $1) AND ($2::text IS NULL OR name > $2)
                 ORDER BY name LIMIT $3",
                &[&prefix, &after, &(limit.min(10_000) as i64)],
            )
            .await
            .map_err(store_error)?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let s = StreamRow {
                id: r.get(0),
                name: r.get(1),
                config: config_of(r.get(2))?,
                created_at: r.get::<_, i64>(3) as u64,
            };
            out.push(view(&client, s).await?);
        }
        Ok(out)
    }

    async fn update_stream(&self, name: &str, patch: StreamConfigPatch) -> Result<StreamView, LogError> {
        let mut client = self.inner.client().await?;
        let tx = client.transaction().await.map_err(store_error)?;
        tx.execute("SELECT 1 FROM streams WHERE name = $1 FOR UPDATE", &[&name]).await.map_err(store_error)?;
        let s = stream_row(&tx, name).await?;
        let next = s.config.apply(&patch)?;
        let json = serde_json::to_value(&next).expect("configs serialize");
        tx.execute("UPDATE streams SET config = $2 WHERE id = $1", &[&s.id, &json]).await.map_err(store_error)?;
        if next.partitions > s.config.partitions {
            tx.execute(
                "INSERT INTO stream_partitions (stream_id, partition) SELECT $1, p FROM generate_series($2, $3 - 1) AS p",
                &[&s.id, &(s.config.partitions as i32), &(next.partitions as i32)],
            )
            .await
            .map_err(store_error)?;
            groups::resize_all(&tx, s.id, next.partitions as usize).await?;
        }
        let s = stream_row(&tx, name).await?;
        let v = view(&tx, s).await?;
        tx.commit().await.map_err(store_error)?;
        Ok(v)
    }

    async fn delete_stream(&self, name: &str) -> Result<(), LogError> {
        let client = self.inner.client().await?;
        let row = client
            .query_opt("DELETE FROM streams WHERE name = $1 RETURNING id", &[&name])
            .await
            .map_err(store_error)?;
        let id: i64 = row.ok_or_else(|| LogError::StreamNotFound(name.to_owned()))?.get(0);
        self.inner.notify_stream(id).await;
        Ok(())
    }

    async fn append(
        &self,
        stream: &str,
        records: Vec<NewRecord>,
        expect: Option<Expectation>,
    ) -> Result<AppendResults, LogError> {
        append::append(&self.inner, &self.round_robin, stream, records, expect).await
    }

    async fn read(&self, stream: &str, request: ReadRequest) -> Result<ReadBatch, LogError> {
        request.validate()?;
        self.inner
            .long_poll(
                stream,
                request.wait_ms,
                |b: &ReadBatch| b.records.is_empty(),
                || append::read(&self.inner, stream, request),
            )
            .await
    }

    async fn create_group(&self, stream: &str, name: &str, config: GroupConfig) -> Result<(GroupView, bool), LogError> {
        groups::create(&self.inner, stream, name, config).await
    }

    async fn get_group(&self, stream: &str, group: &str) -> Result<GroupView, LogError> {
        let v = self.get_stream(stream).await?;
        v.groups
            .into_iter()
            .find(|g| g.name == group)
            .ok_or_else(|| LogError::GroupNotFound { stream: stream.to_owned(), group: group.to_owned() })
    }

    async fn delete_group(&self, stream: &str, group: &str) -> Result<(), LogError> {
        let client = self.inner.client().await?;
        let s = stream_row(&client, stream).await?;
        let n = client
            .execute("DELETE FROM stream_groups WHERE stream_id = $1 AND name = $2", &[&s.id, &group])
            .await
            .map_err(store_error)?;
        if n == 0 {
            return Err(LogError::GroupNotFound { stream: stream.to_owned(), group: group.to_owned() });
        }
        Ok(())
    }

    async fn fetch(&self, stream: &str, group: &str, request: FetchRequest) -> Result<Fetched, LogError> {
        use sluice_core::stream::limits::{READ_RECORDS_MAX, READ_WAIT_MS_MAX};
        if request.max == 0 || request.max > READ_RECORDS_MAX {
            return Err(sluice_core::ValidationError::new("max", format!("must be 1 to {READ_RECORDS_MAX}")).into());
        }
        if request.wait_ms > READ_WAIT_MS_MAX {
            return Err(
                sluice_core::ValidationError::new("wait_ms", format!("must be at most {READ_WAIT_MS_MAX}")).into()
            );
        }
        stream::validate_member(&request.member)?;
        self.inner
            .long_poll(
                stream,
                request.wait_ms,
                |f: &Fetched| f.records.is_empty(),
                || groups::fetch(&self.inner, stream, group, &request.member, request.max as usize),
            )
            .await
    }

    async fn commit(
        &self,
        stream: &str,
        group: &str,
        member: &str,
        generation: u64,
        offsets: BTreeMap<u32, u64>,
    ) -> Result<(), LogError> {
        stream::validate_member(member)?;
        groups::commit(&self.inner, stream, group, member, generation, offsets).await
    }

    async fn seek(&self, stream: &str, group: &str, partition: u32, to: SeekTo) -> Result<u64, LogError> {
        groups::seek(&self.inner, stream, group, partition, to).await
    }

    async fn ack_shared(&self, stream: &str, group: &str, receipts: Vec<String>) -> Result<ReceiptResults, LogError> {
        groups::settle(&self.inner, stream, group, receipts, groups::Give::Ack, None).await
    }

    async fn release_shared(
        &self,
        stream: &str,
        group: &str,
        receipts: Vec<String>,
        error: Option<String>,
    ) -> Result<ReceiptResults, LogError> {
        groups::settle(&self.inner, stream, group, receipts, groups::Give::Release, error).await
    }

    async fn nack_shared(
        &self,
        stream: &str,
        group: &str,
        receipts: Vec<String>,
        error: Option<String>,
    ) -> Result<ReceiptResults, LogError> {
        groups::settle(&self.inner, stream, group, receipts, groups::Give::Nack, error).await
    }

    async fn sweep_streams(&self) -> Result<SweepReport, LogError> {
        sweep::sweep(&self.inner).await
    }
}
