//! Appends and reads on PostgreSQL.
//!
//! An append is one transaction: dedup ids are claimed first (`INSERT ... ON CONFLICT DO
//! NOTHING`; an id another transaction holds makes this one wait for it, then counts as a
//! duplicate), then each partition's row gives the offsets (`UPDATE ... RETURNING`, in partition
//! order so that two appends never deadlock), then the records go in with one `INSERT ... SELECT
//! FROM unnest(...)`. The partition row stays locked until commit, so commit order is offset
//! order and no reader ever sees an offset before those below it.
//!
//! The dedup ids a stream remembers are not counted against `STREAM_DEDUP_ENTRIES_MAX` here:
//! that bound protects the embedded store's memory, which holds every live id, while these are
//! rows on disk, deleted by the sweep 5 minutes after their append. An exact count would be a
//! row that every append to any partition of the stream updates, serializing appends that the
//! per-partition offset rows let run side by side on every node (README, "Streams").

use std::collections::{BTreeMap, HashMap};

use deadpool_postgres::GenericClient;
use sluice_core::overflow::Depth;
use sluice_core::stream::limits::{READ_BYTES_MAX, STREAM_DEDUP_WINDOW_MS};
use sluice_core::stream::{NewRecord, Record, RecordError, partitioner};
use sluice_store::{AppendResults, Appended, Expectation, LogError, ReadBatch, ReadFrom, ReadRequest};

use super::{RoundRobin, now_ms, store_error, stream_row};
use crate::Inner;

const INSERT: &str = "INSERT INTO stream_records
        (stream_id, partition, \"offset\", timestamp_ms, size_bytes, key, body, body_binary, headers, type, correlation_id, dedup_id)
    SELECT $1, * FROM unnest($2::int4[], $3::int8[], $4::int8[], $5::int4[], $6::bytea[], $7::bytea[], $8::bool[],
                             $9::jsonb[], $10::text[], $11::text[], $12::text[])";

pub async fn append(
    inner: &Inner,
    rr: &RoundRobin,
    stream: &str,
    records: Vec<NewRecord>,
    expect: Option<Expectation>,
) -> Result<AppendResults, LogError> {
    sluice_store::validate_append(&records)?;
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(store_error)?;
    let appended = append_in(&tx, rr, stream, records, expect).await?;
    tx.commit().await.map_err(store_error)?;
    appended.done(inner).await;
    Ok(appended.results)
}

/// What [`append_in`] did, for the caller to report once its transaction committed.
pub(crate) struct InTransaction {
    pub results: AppendResults,
    stream_id: i64,
    /// Whether any record was inserted (not only duplicates or refusals).
    appended: bool,
}

impl InTransaction {
    /// Counts the append and wakes the stream's long polls; call after the commit.
    pub(crate) async fn done(&self, inner: &Inner) {
        inner.counters.committed(self.results.len() as u64);
        if self.appended {
            inner.notify_stream(self.stream_id).await;
        }
    }
}

/// An append inside the caller's transaction (a plain append's, or a commit's with other
/// writes); nothing is visible until that transaction commits, and a rollback undoes it whole.
pub(crate) async fn append_in(
    tx: &deadpool_postgres::Transaction<'_>,
    rr: &RoundRobin,
    stream: &str,
    records: Vec<NewRecord>,
    expect: Option<Expectation>,
) -> Result<InTransaction, LogError> {
    let s = stream_row(tx, stream).await?;
    let now = now_ms(tx).await?;
    let mut records = records;
    if let Some(e) = expect {
        if e.partition >= s.config.partitions {
            return Err(LogError::NoSuchPartition { partition: e.partition, partitions: s.config.partitions });
        }
        let row = tx
            .query_one(
                "SELECT next_offset FROM stream_partitions WHERE stream_id = $1 AND partition = $2 FOR UPDATE",
                &[&s.id, &(e.partition as i32)],
            )
            .await
            .map_err(store_error)?;
        let actual = row.get::<_, i64>(0) as u64;
        if actual != e.next_offset {
            return Err(LogError::ExpectationFailed { partition: e.partition, expected: e.next_offset, actual });
        }
        for (i, r) in records.iter_mut().enumerate() {
            r.partition = Some(e.partition);
            if let Err(err) = r.validate(&s.config) {
                return Err(LogError::Invalid(sluice_core::ValidationError::new(
                    format!("records[{i}]"),
                    err.to_string(),
                )));
            }
        }
    }
    let mut results: Vec<Option<Result<Appended, RecordError>>> = vec![None; records.len()];
    // Dedup ids: expired claims go, then each id is claimed; an id claimed before is a duplicate.
    let ids: Vec<String> =
        records.iter().filter(|r| r.validate(&s.config).is_ok()).filter_map(|r| r.dedup_id.clone()).collect();
    let mut claimed: Vec<String> = Vec::new();
    let mut earlier: HashMap<String, Appended> = HashMap::new();
    if !ids.is_empty() {
        let now_i = now as i64;
        tx.execute(
            "DELETE FROM stream_dedup WHERE stream_id = $1 AND dedup_id = ANY($2) AND expires_at <= $3",
            &[&s.id, &ids, &now_i],
        )
        .await
        .map_err(store_error)?;
        let rows = tx
            .query(
                "INSERT INTO stream_dedup (stream_id, dedup_id, partition, \"offset\", timestamp_ms, expires_at)
                 SELECT $1, d, -1, -1, 0, $3 FROM (SELECT DISTINCT unnest($2::text[]) AS d) AS ids
                 ON CONFLICT (stream_id, dedup_id) DO NOTHING RETURNING dedup_id",
                &[&s.id, &ids, &(now_i + STREAM_DEDUP_WINDOW_MS as i64)],
            )
            .await
            .map_err(store_error)?;
        claimed = rows.iter().map(|r| r.get(0)).collect();
        let others: Vec<&String> = ids.iter().filter(|i| !claimed.contains(i)).collect();
        if !others.is_empty() {
            let rows = tx
                .query("SELECT dedup_id, partition, \"offset\", timestamp_ms FROM stream_dedup WHERE stream_id = $1 AND dedup_id = ANY($2)", &[&s.id, &others])
                .await
                .map_err(store_error)?;
            for r in rows {
                let a = Appended {
                    partition: r.get::<_, i32>(1) as u32,
                    offset: r.get::<_, i64>(2) as u64,
                    timestamp_ms: r.get::<_, i64>(3) as u64,
                    duplicate: true,
                };
                earlier.insert(r.get(0), a);
            }
        }
    }
    // A bounded stream: its row locked for the transaction, so that appends on every node are
    // serialised on it and the depth read under the lock holds until commit (what the lock does
    // not order, retention, only lowers it).
    let mut depth = if s.config.bounded() { Some(locked_depth(tx, s.id).await?) } else { None };
    // Partitions, and which records each partition takes, in order.
    let mut by_partition: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    let mut first_of_id: HashMap<String, usize> = HashMap::new();
    {
        let mut counters = rr.0.lock().unwrap_or_else(|e| e.into_inner());
        let counter = counters.entry(s.id).or_insert(0);
        for (i, r) in records.iter().enumerate() {
            if let Err(e) = r.validate(&s.config) {
                results[i] = Some(Err(e));
                continue;
            }
            if let Some(id) = &r.dedup_id {
                if let Some(a) = earlier.get(id) {
                    results[i] = Some(Ok(*a));
                    continue;
                }
                if first_of_id.contains_key(id) {
                    continue; // A repeat within this append: answered with the first's place below.
                }
                first_of_id.insert(id.clone(), i);
            }
            if let Some(depth) = depth.as_mut() {
                let size = r.size_bytes();
                if !s.config.fits(*depth, size) {
                    let full = RecordError::StreamFull {
                        depth: *depth,
                        max_messages: s.config.max_depth_messages,
                        max_bytes: s.config.max_depth_bytes,
                    };
                    results[i] = Some(Err(full));
                    continue;
                }
                depth.messages += 1;
                depth.bytes += size;
            }
            let p = partitioner::choose(r.partition, r.key.as_deref(), s.config.partitions, counter);
            by_partition.entry(p).or_default().push(i);
        }
    }
    let mut places: Vec<Option<Appended>> = vec![None; records.len()];
    let mut cols = Columns::default();
    for (&p, indexes) in &by_partition {
        let bytes: i64 = indexes.iter().map(|&i| records[i].size_bytes() as i64).sum();
        let n = indexes.len() as i64;
        let row = tx
            .query_one(
                "UPDATE stream_partitions SET next_offset = next_offset + $3, bytes = bytes + $4, last_ts = GREATEST(last_ts, $5)
                 WHERE stream_id = $1 AND partition = $2 RETURNING next_offset - $3, last_ts",
                &[&s.id, &(p as i32), &n, &bytes, &(now as i64)],
            )
            .await
            .map_err(store_error)?;
        let (base, ts): (i64, i64) = (row.get(0), row.get(1));
        for (k, &i) in indexes.iter().enumerate() {
            let offset = base + k as i64;
            places[i] =
                Some(Appended { partition: p, offset: offset as u64, timestamp_ms: ts as u64, duplicate: false });
            cols.push(p, offset, ts, &records[i]);
        }
    }
    if !cols.partition.is_empty() {
        tx.execute(
            INSERT,
            &[
                &s.id,
                &cols.partition,
                &cols.offset,
                &cols.ts,
                &cols.size,
                &cols.key,
                &cols.body,
                &cols.binary,
                &cols.headers,
                &cols.kind,
                &cols.correlation,
                &cols.dedup,
            ],
        )
        .await
        .map_err(store_error)?;
    }
    // Each claimed id now names its record's place; the ids of refused records are let go, so
    // that a retry appends them.
    let mut refused_ids = Vec::new();
    for id in &claimed {
        if let Some(a) = first_of_id.get(id).and_then(|&i| places[i]) {
            tx.execute(
                "UPDATE stream_dedup SET partition = $3, \"offset\" = $4, timestamp_ms = $5 WHERE stream_id = $1 AND dedup_id = $2",
                &[&s.id, id, &(a.partition as i32), &(a.offset as i64), &(a.timestamp_ms as i64)],
            )
            .await
            .map_err(store_error)?;
        } else {
            refused_ids.push(id.clone());
        }
    }
    if !refused_ids.is_empty() {
        tx.execute("DELETE FROM stream_dedup WHERE stream_id = $1 AND dedup_id = ANY($2)", &[&s.id, &refused_ids])
            .await
            .map_err(store_error)?;
    }
    let appended = !cols.partition.is_empty();
    let out: AppendResults = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            if let Some(result) = &results[i] {
                return result.clone();
            }
            if let Some(place) = places[i] {
                return Ok(place);
            }
            // A repeat within this append: its first's place, or its first's refusal.
            let first =
                r.dedup_id.as_ref().and_then(|id| first_of_id.get(id)).copied().expect("a repeat follows its first");
            match (&results[first], places[first]) {
                (Some(Err(refused)), _) => Err(refused.clone()),
                (_, place) => Ok(Appended { duplicate: true, ..place.expect("a first is placed or refused") }),
            }
        })
        .collect();
    Ok(InTransaction { results: out, stream_id: s.id, appended })
}

/// Locks stream `stream_id`'s row for the transaction and reads what the stream keeps: records
/// and bytes over every partition, as its view counts them.
async fn locked_depth(tx: &deadpool_postgres::Transaction<'_>, stream_id: i64) -> Result<Depth, LogError> {
    tx.execute("SELECT 1 FROM streams WHERE id = $1 FOR UPDATE", &[&stream_id]).await.map_err(store_error)?;
    let row = tx
        .query_one(
            "SELECT coalesce(sum(next_offset - first_offset), 0)::int8, coalesce(sum(bytes), 0)::int8
             FROM stream_partitions WHERE stream_id = $1",
            &[&stream_id],
        )
        .await
        .map_err(store_error)?;
    Ok(Depth { messages: row.get::<_, i64>(0) as u64, bytes: row.get::<_, i64>(1) as u64 })
}

/// The columns of the records an append inserts.
#[derive(Default)]
struct Columns {
    partition: Vec<i32>,
    offset: Vec<i64>,
    ts: Vec<i64>,
    size: Vec<i32>,
    key: Vec<Option<Vec<u8>>>,
    body: Vec<Vec<u8>>,
    binary: Vec<bool>,
    headers: Vec<Option<serde_json::Value>>,
    kind: Vec<Option<String>>,
    correlation: Vec<Option<String>>,
    dedup: Vec<Option<String>>,
}

impl Columns {
    fn push(&mut self, p: u32, offset: i64, ts: i64, r: &NewRecord) {
        self.partition.push(p as i32);
        self.offset.push(offset);
        self.ts.push(ts);
        self.size.push(r.size_bytes() as i32);
        self.key.push(r.key.clone());
        self.body.push(r.body.clone());
        self.binary.push(r.body_binary);
        self.headers
            .push((!r.headers.is_empty()).then(|| serde_json::to_value(&r.headers).expect("headers serialize")));
        self.kind.push(r.r#type.clone());
        self.correlation.push(r.correlation_id.clone());
        self.dedup.push(r.dedup_id.clone());
    }
}

/// The first offset of a partition whose record is at or after `ts`, if any.
pub(crate) async fn offset_for_time(
    c: &impl GenericClient,
    stream_id: i64,
    partition: u32,
    ts: u64,
) -> Result<Option<u64>, LogError> {
    let row = c
        .query_opt(
            "SELECT \"offset\" FROM stream_records WHERE stream_id = $1 AND partition = $2 AND timestamp_ms >= $3
             ORDER BY timestamp_ms, \"offset\" LIMIT 1",
            &[&stream_id, &(partition as i32), &(ts as i64)],
        )
        .await
        .map_err(store_error)?;
    Ok(row.map(|r| r.get::<_, i64>(0) as u64))
}

/// The partition's (first, next) offsets.
pub(crate) async fn bounds(c: &impl GenericClient, stream_id: i64, partition: u32) -> Result<(u64, u64), LogError> {
    let row = c
        .query_one(
            "SELECT first_offset, next_offset FROM stream_partitions WHERE stream_id = $1 AND partition = $2",
            &[&stream_id, &(partition as i32)],
        )
        .await
        .map_err(store_error)?;
    Ok((row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64))
}

/// Up to `max` records of a partition from `from` on, at most `READ_BYTES_MAX` of bodies (at
/// least one); records below the first kept offset are `OffsetOutOfRange`.
pub(crate) async fn read_from(
    c: &impl GenericClient,
    stream_id: i64,
    partition: u32,
    from: u64,
    max: usize,
) -> Result<Vec<Record>, LogError> {
    let (first, next) = bounds(c, stream_id, partition).await?;
    let out_of_range =
        |first: u64| LogError::OffsetOutOfRange { partition, offset: from, first_offset: first, next_offset: next };
    if from < first {
        return Err(out_of_range(first));
    }
    let (p, f, n) = (partition as i32, from as i64, next as i64);
    let sizes = c
        .query(
            "SELECT \"offset\", size_bytes FROM stream_records WHERE stream_id = $1 AND partition = $2 AND \"offset\" >= $3 AND \"offset\" < $4
             ORDER BY \"offset\" LIMIT $5",
            &[&stream_id, &p, &f, &n, &(max as i64)],
        )
        .await
        .map_err(store_error)?;
    let Some(first_row) = sizes.first() else { return Ok(Vec::new()) };
    if first_row.get::<_, i64>(0) != f {
        // Retention removed `from` meanwhile.
        let (first, _) = bounds(c, stream_id, partition).await?;
        return Err(out_of_range(first));
    }
    let mut cut = f;
    let mut bytes = 0i64;
    for r in &sizes {
        let size = i64::from(r.get::<_, i32>(1));
        if cut > f && bytes + size > READ_BYTES_MAX as i64 {
            break;
        }
        bytes += size;
        cut = r.get::<_, i64>(0) + 1;
    }
    let rows = c
        .query(
            "SELECT \"offset\", timestamp_ms, key, body, body_binary, headers, type, correlation_id, dedup_id FROM stream_records
             WHERE stream_id = $1 AND partition = $2 AND \"offset\" >= $3 AND \"offset\" < $4 ORDER BY \"offset\"",
            &[&stream_id, &p, &f, &cut],
        )
        .await
        .map_err(store_error)?;
    Ok(rows
        .iter()
        .map(|r| Record {
            partition,
            offset: r.get::<_, i64>(0) as u64,
            timestamp_ms: r.get::<_, i64>(1) as u64,
            key: r.get(2),
            body: r.get(3),
            body_binary: r.get(4),
            headers: r
                .get::<_, Option<serde_json::Value>>(5)
                .and_then(|v| serde_json::from_value(v).ok())
                .unwrap_or_default(),
            r#type: r.get(6),
            correlation_id: r.get(7),
            dedup_id: r.get(8),
        })
        .collect())
}

pub async fn read(inner: &Inner, stream: &str, request: ReadRequest) -> Result<ReadBatch, LogError> {
    let client = inner.client().await?;
    let c = &client;
    let s = stream_row(c, stream).await?;
    if request.partition >= s.config.partitions {
        return Err(LogError::NoSuchPartition { partition: request.partition, partitions: s.config.partitions });
    }
    let from = match request.from {
        ReadFrom::Offset(o) => o,
        ReadFrom::Time(t) => match offset_for_time(c, s.id, request.partition, t).await? {
            Some(o) => o,
            None => bounds(c, s.id, request.partition).await?.1,
        },
    };
    let records = read_from(c, s.id, request.partition, from, request.max as usize).await?;
    let (first_offset, next_offset) = bounds(c, s.id, request.partition).await?;
    Ok(ReadBatch { records, first_offset, next_offset })
}
