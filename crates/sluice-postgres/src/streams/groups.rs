//! Consumer groups on PostgreSQL: one row per group whose `state` (sluice-core's `OffsetsGroup`
//! or `SharedGroup`, as JSON) every call reads `FOR UPDATE`, changes with core's rules and writes
//! back in the same transaction. Membership, assignments, positions and holds are therefore the
//! same for every node, and calls on one group are serialized by the row's lock.
//!
//! Shared-mode records past `max_deliveries` go to the group's dead-letter queue through
//! `sluice_send` in the same transaction as the state change (each under a savepoint, so that a
//! queue that refuses one drops that one with a warning instead of failing the call).

use std::collections::{BTreeMap, HashMap};

use base64::Engine;
use deadpool_postgres::GenericClient;
use serde::{Deserialize, Serialize};
use sluice_core::stream::group::OffsetsGroup;
use sluice_core::stream::limits::{GROUPS_PER_STREAM_MAX, READ_BYTES_MAX};
use sluice_core::stream::shared::{Exhausted, ReceiptError, SharedGroup, SharedReceipt, SharedSettings};
use sluice_core::stream::{self, Record, StartAt};
use sluice_store::{
    Fetched, FetchedRecord, GroupConfig, GroupMode, GroupPartitionView, GroupView, LogError, ReceiptResults, SeekTo,
};

use super::append::{bounds, offset_for_time, read_from};
use super::{now_ms, partitions, store_error, stream_row};
use crate::Inner;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum GroupState {
    Offsets(OffsetsGroup),
    Shared(SharedGroup),
}

pub struct Group {
    pub config: GroupConfig,
    pub created_at: u64,
    pub state: GroupState,
}

fn corrupt(what: &str, e: serde_json::Error) -> LogError {
    LogError::Store(sluice_store::StoreError::Unavailable(format!("a group's {what} cannot be read: {e}")))
}

impl Group {
    pub fn from_row(config: serde_json::Value, created_at: u64, state: serde_json::Value) -> Result<Group, LogError> {
        Ok(Group {
            config: serde_json::from_value(config).map_err(|e| corrupt("settings", e))?,
            created_at,
            state: serde_json::from_value(state).map_err(|e| corrupt("state", e))?,
        })
    }

    pub fn view(&self, name: &str, ends: &[u64], now: u64) -> GroupView {
        let pv = |committed: u64, end: u64, owner| GroupPartitionView {
            committed,
            lag: end.saturating_sub(committed),
            owner,
        };
        let (generation, members, parts, in_flight) = match &self.state {
            GroupState::Offsets(o) => {
                let live =
                    |m: &str| o.members.get(m).is_some_and(|&t| now.saturating_sub(t) < self.config.session_timeout_ms);
                let members = o.members.keys().filter(|m| live(m)).cloned().collect();
                let parts = o
                    .partitions
                    .iter()
                    .zip(ends)
                    .map(|(p, &e)| pv(p.committed, e, p.owner.clone().filter(|m| live(m))))
                    .collect();
                (o.generation, members, parts, 0)
            }
            GroupState::Shared(s) => {
                let parts =
                    (0..s.partitions.len()).zip(ends).map(|(p, &e)| pv(s.low_water(p as u32), e, None)).collect();
                (0, Vec::new(), parts, s.in_flight() as u64)
            }
        };
        GroupView {
            name: name.to_owned(),
            config: self.config.clone(),
            created_at: self.created_at,
            generation,
            members,
            partitions: parts,
            in_flight,
        }
    }
}

fn not_found(stream: &str, group: &str) -> LogError {
    LogError::GroupNotFound { stream: stream.to_owned(), group: group.to_owned() }
}

fn wrong_mode(group: &str, mode: GroupMode) -> LogError {
    LogError::WrongMode { group: group.to_owned(), mode: if mode == GroupMode::Shared { "shared" } else { "offsets" } }
}

fn settings(c: &GroupConfig) -> SharedSettings {
    SharedSettings { ack_timeout_ms: c.ack_timeout_ms, max_deliveries: c.max_deliveries, key_ordered: c.key_ordered }
}

/// The group's row, locked until the transaction ends.
async fn locked(c: &impl GenericClient, stream_id: i64, stream: &str, group: &str) -> Result<Group, LogError> {
    let row = c
        .query_opt(
            "SELECT config, created_at, state FROM stream_groups WHERE stream_id = $1 AND name = $2 FOR UPDATE",
            &[&stream_id, &group],
        )
        .await
        .map_err(store_error)?
        .ok_or_else(|| not_found(stream, group))?;
    Group::from_row(row.get(0), row.get::<_, i64>(1) as u64, row.get(2))
}

async fn write(c: &impl GenericClient, stream_id: i64, group: &str, state: &GroupState) -> Result<(), LogError> {
    let json = serde_json::to_value(state).expect("group states serialize");
    c.execute("UPDATE stream_groups SET state = $3 WHERE stream_id = $1 AND name = $2", &[&stream_id, &group, &json])
        .await
        .map_err(store_error)?;
    Ok(())
}

pub async fn create(
    inner: &Inner,
    stream: &str,
    name: &str,
    config: GroupConfig,
) -> Result<(GroupView, bool), LogError> {
    stream::validate_name("name", name)?;
    config.validate()?;
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(store_error)?;
    let s = stream_row(&tx, stream).await?;
    if let Some(q) = &config.dead_letter_queue {
        let exists = tx.query_opt("SELECT 1 FROM queues WHERE name = $1", &[q]).await.map_err(store_error)?;
        if exists.is_none() {
            return Err(LogError::DeadLetterQueueNotFound(q.clone()));
        }
    }
    let parts = partitions(&tx, s.id).await?;
    let ends: Vec<u64> = parts.iter().map(|p| p.next_offset).collect();
    let now = now_ms(&tx).await?;
    let existing = tx
        .query_opt(
            "SELECT config, created_at, state FROM stream_groups WHERE stream_id = $1 AND name = $2",
            &[&s.id, &name],
        )
        .await
        .map_err(store_error)?;
    if let Some(row) = existing {
        let g = Group::from_row(row.get(0), row.get::<_, i64>(1) as u64, row.get(2))?;
        if g.config.same(&config) {
            return Ok((g.view(name, &ends, now), false));
        }
        return Err(LogError::GroupExists { stream: stream.to_owned(), group: name.to_owned() });
    }
    let count: i64 = tx
        .query_one("SELECT count(*) FROM stream_groups WHERE stream_id = $1", &[&s.id])
        .await
        .map_err(store_error)?
        .get(0);
    if count as usize >= GROUPS_PER_STREAM_MAX {
        return Err(LogError::LimitExceeded(format!("a stream has at most {GROUPS_PER_STREAM_MAX} groups")));
    }
    let mut start = Vec::with_capacity(parts.len());
    for (p, part) in parts.iter().enumerate() {
        start.push(match config.start {
            StartAt::Earliest => part.first_offset,
            StartAt::Latest => part.next_offset,
            StartAt::Offset(o) => o.clamp(part.first_offset, part.next_offset),
            StartAt::Time(t) => offset_for_time(&tx, s.id, p as u32, t).await?.unwrap_or(part.next_offset),
        });
    }
    let state = match config.mode {
        GroupMode::Offsets => GroupState::Offsets(OffsetsGroup::new(start)),
        GroupMode::Shared => GroupState::Shared(SharedGroup::new(uuid::Uuid::now_v7().as_u128() as u64, start)),
    };
    let g = Group { config, created_at: now, state };
    let (config_json, state_json) =
        (serde_json::to_value(&g.config).expect("serializes"), serde_json::to_value(&g.state).expect("serializes"));
    let inserted = tx
        .execute(
            "INSERT INTO stream_groups (stream_id, name, config, created_at, state) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            &[&s.id, &name, &config_json, &(now as i64), &state_json],
        )
        .await
        .map_err(store_error)?;
    if inserted == 0 {
        // Another node created it meanwhile: answer as if it had come first.
        return Err(LogError::Store(sluice_store::StoreError::Unavailable(
            "the group was created concurrently; retry".into(),
        )));
    }
    tx.commit().await.map_err(store_error)?;
    Ok((g.view(name, &ends, now), true))
}

/// Every group of a stream grows to `partitions`.
pub async fn resize_all(c: &impl GenericClient, stream_id: i64, partitions: usize) -> Result<(), LogError> {
    let rows = c
        .query("SELECT name, state FROM stream_groups WHERE stream_id = $1 FOR UPDATE", &[&stream_id])
        .await
        .map_err(store_error)?;
    for r in rows {
        let name: String = r.get(0);
        let mut state: GroupState = serde_json::from_value(r.get(1)).map_err(|e| corrupt("state", e))?;
        match &mut state {
            GroupState::Offsets(o) => o.resize(partitions, 0),
            GroupState::Shared(s) => s.resize(partitions, 0),
        }
        write(c, stream_id, &name, &state).await?;
    }
    Ok(())
}

/// Sends exhausted records to the dead-letter queue, in the caller's transaction.
async fn dead_letter(
    tx: &mut deadpool_postgres::Transaction<'_>,
    stream: &str,
    stream_id: i64,
    group: &str,
    config: &GroupConfig,
    exhausted: Vec<Exhausted>,
) -> Result<(), LogError> {
    for e in exhausted {
        let Some(queue) = &config.dead_letter_queue else {
            tracing::warn!(
                "dropping record {}/{} of stream {stream}: it failed {} times and group {group} has no dead-letter queue",
                e.partition,
                e.offset,
                e.deliveries
            );
            continue;
        };
        let mut records = match read_from(&*tx, stream_id, e.partition, e.offset, 1).await {
            Ok(r) => r,
            Err(LogError::OffsetOutOfRange { .. }) => continue,
            Err(err) => return Err(err),
        };
        let Some(r) = records.pop().filter(|r| r.offset == e.offset) else { continue };
        let text = |v: String| serde_json::json!({ "type": "String", "value": v });
        let number = |v: u64| serde_json::json!({ "type": "Number", "value": v.to_string() });
        let mut attributes = serde_json::json!({
            "sluice.stream": text(stream.to_owned()),
            "sluice.group": text(group.to_owned()),
            "sluice.partition": number(u64::from(e.partition)),
            "sluice.offset": number(e.offset),
            "sluice.deliveries": number(u64::from(e.deliveries)),
        });
        if let Some(error) = &e.last_error {
            attributes["sluice.last_error"] = text(error.clone());
        }
        if let Some(key) = &r.key {
            attributes["sluice.key"] =
                serde_json::json!({ "type": "Binary", "value": base64::engine::general_purpose::STANDARD.encode(key) });
        }
        let envelope = serde_json::json!({ "type": r.r#type, "correlation_id": r.correlation_id });
        let sp = tx.savepoint("dead_letter").await.map_err(store_error)?;
        let sent = sp
            .execute(
                "SELECT sluice_send($1, $2, $3, NULL, 0, jsonb_strip_nulls($4), $5)",
                &[queue, &r.body, &attributes, &envelope, &r.body_binary],
            )
            .await;
        match sent {
            Ok(_) => sp.commit().await.map_err(store_error)?,
            Err(err) => {
                tracing::warn!(
                    "dropping an exhausted record of stream {stream}: its dead-letter queue {queue:?} refused it: {}",
                    crate::describe(&err)
                );
                sp.rollback().await.map_err(store_error)?;
            }
        }
    }
    Ok(())
}

pub async fn fetch(inner: &Inner, stream: &str, group: &str, member: &str, max: usize) -> Result<Fetched, LogError> {
    let mut client = inner.client().await?;
    let mut tx = client.transaction().await.map_err(store_error)?;
    let s = stream_row(&tx, stream).await?;
    let mut g = locked(&tx, s.id, stream, group).await?;
    let now = now_ms(&tx).await?;
    let out = match &mut g.state {
        GroupState::Offsets(o) => {
            let a = o
                .fetch(member, now, g.config.session_timeout_ms)
                .map_err(|e| LogError::LimitExceeded(e.to_string()))?;
            let mut records = Vec::new();
            let count = a.partitions.len();
            let first = if count == 0 { 0 } else { now as usize % count };
            let mut bytes = 0u64;
            for i in 0..count {
                let (p, position) = a.partitions[(first + i) % count];
                if records.len() >= max || bytes >= READ_BYTES_MAX {
                    break;
                }
                let (first_offset, next) = bounds(&tx, s.id, p).await?;
                let from = position.max(first_offset);
                if from >= next {
                    continue;
                }
                let got = read_from(&tx, s.id, p, from, max - records.len()).await?;
                if let Some(last) = got.last() {
                    o.advance(member, p, position, last.offset + 1);
                }
                bytes += got.iter().map(|r| r.body.len() as u64).sum::<u64>();
                records.extend(got.into_iter().map(|record| FetchedRecord { record, receipt: None, deliveries: None }));
            }
            Fetched {
                generation: Some(a.generation),
                partitions: a.partitions.iter().map(|(p, _)| *p).collect(),
                records,
            }
        }
        GroupState::Shared(sg) => {
            let st = settings(&g.config);
            let exhausted = sg.expire(now, &st);
            let count = sg.partitions.len() as u32;
            let mut records = Vec::new();
            for i in 0..count {
                if records.len() >= max {
                    break;
                }
                let p = (sg.next_partition + i) % count;
                let (first_offset, next) = bounds(&tx, s.id, p).await?;
                sg.forget_below(p, first_offset);
                let want = (max - records.len()).min(sg.room(p));
                let cursor = sg.partitions[p as usize].cursor;
                let fresh: Vec<Record> =
                    if want > 0 && cursor < next { read_from(&tx, s.id, p, cursor, want).await? } else { Vec::new() };
                let keys: Vec<(u64, Option<u64>)> =
                    fresh.iter().map(|r| (r.offset, r.key.as_deref().map(stream::key_hash))).collect();
                let mut by_offset: HashMap<u64, Record> = fresh.into_iter().map(|r| (r.offset, r)).collect();
                for d in sg.take(p, &keys, max - records.len(), member, now, &st) {
                    let record = match by_offset.remove(&d.offset) {
                        Some(r) => Some(r),
                        None => read_from(&tx, s.id, p, d.offset, 1).await?.pop(),
                    };
                    if let Some(record) = record {
                        records.push(FetchedRecord {
                            record,
                            receipt: Some(d.receipt.encode()),
                            deliveries: Some(d.deliveries),
                        });
                    }
                }
            }
            sg.next_partition = (sg.next_partition + 1) % count.max(1);
            let config = g.config.clone();
            dead_letter(&mut tx, stream, s.id, group, &config, exhausted).await?;
            Fetched { generation: None, partitions: Vec::new(), records }
        }
    };
    write(&tx, s.id, group, &g.state).await?;
    tx.commit().await.map_err(store_error)?;
    Ok(out)
}

pub async fn commit(
    inner: &Inner,
    stream: &str,
    group: &str,
    member: &str,
    generation: u64,
    offsets: BTreeMap<u32, u64>,
) -> Result<(), LogError> {
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(store_error)?;
    let s = stream_row(&tx, stream).await?;
    let mut g = locked(&tx, s.id, stream, group).await?;
    let ends: Vec<u64> = partitions(&tx, s.id).await?.iter().map(|p| p.next_offset).collect();
    let now = now_ms(&tx).await?;
    let GroupState::Offsets(o) = &mut g.state else { return Err(wrong_mode(group, g.config.mode)) };
    let result = o.commit(member, generation, &offsets, &ends, now, g.config.session_timeout_ms);
    // Expired members are gone whether or not the commit was accepted.
    write(&tx, s.id, group, &g.state).await?;
    tx.commit().await.map_err(store_error)?;
    Ok(result?)
}

pub async fn seek(inner: &Inner, stream: &str, group: &str, partition: u32, to: SeekTo) -> Result<u64, LogError> {
    let mut client = inner.client().await?;
    let tx = client.transaction().await.map_err(store_error)?;
    let s = stream_row(&tx, stream).await?;
    if partition >= s.config.partitions {
        return Err(LogError::NoSuchPartition { partition, partitions: s.config.partitions });
    }
    let mut g = locked(&tx, s.id, stream, group).await?;
    let (first, next) = bounds(&tx, s.id, partition).await?;
    let offset = match to {
        SeekTo::Offset(o) => o.clamp(first, next),
        SeekTo::Time(t) => offset_for_time(&tx, s.id, partition, t).await?.unwrap_or(next),
    };
    match &mut g.state {
        GroupState::Offsets(o) => o.seek(partition, offset),
        GroupState::Shared(sg) => sg.seek(partition, offset),
    }
    write(&tx, s.id, group, &g.state).await?;
    tx.commit().await.map_err(store_error)?;
    inner.notify_stream(s.id).await;
    Ok(offset)
}

/// Which shared-mode call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Give {
    Ack,
    Release,
    Nack,
}

pub async fn settle(
    inner: &Inner,
    stream: &str,
    group: &str,
    receipts: Vec<String>,
    give: Give,
    error: Option<String>,
) -> Result<ReceiptResults, LogError> {
    use sluice_core::stream::limits::RECORD_ERROR_LEN_MAX;
    if receipts.is_empty() || receipts.len() > sluice_core::limits::BATCH_ENTRIES_MAX {
        return Err(sluice_core::ValidationError::new("receipts", "1 to 1000 receipts").into());
    }
    if error.as_ref().is_some_and(|e| e.len() > RECORD_ERROR_LEN_MAX) {
        return Err(sluice_core::ValidationError::new("error", format!("at most {RECORD_ERROR_LEN_MAX} bytes")).into());
    }
    let mut client = inner.client().await?;
    let mut tx = client.transaction().await.map_err(store_error)?;
    let s = stream_row(&tx, stream).await?;
    let mut g = locked(&tx, s.id, stream, group).await?;
    let config = g.config.clone();
    let GroupState::Shared(sg) = &mut g.state else { return Err(wrong_mode(group, config.mode)) };
    let st = settings(&config);
    let mut exhausted = Vec::new();
    let results: Vec<Result<(), ReceiptError>> = receipts
        .iter()
        .map(|text| {
            let receipt = SharedReceipt::decode(text)?;
            match give {
                Give::Ack => sg.ack(&receipt),
                Give::Release => sg.release(&receipt, error.clone()),
                Give::Nack => sg.nack(&receipt, error.clone(), &st).map(|e| exhausted.extend(e)),
            }
        })
        .collect();
    dead_letter(&mut tx, stream, s.id, group, &config, exhausted).await?;
    write(&tx, s.id, group, &g.state).await?;
    tx.commit().await.map_err(store_error)?;
    if give != Give::Ack || results.iter().any(Result::is_ok) {
        inner.notify_stream(s.id).await;
    }
    Ok(results)
}

/// Ends the expired holds of every shared group of `stream_id` (the sweep).
pub async fn expire_all(inner: &Inner, stream: &str, stream_id: i64) -> Result<u64, LogError> {
    let names: Vec<String> = {
        let client = inner.client().await?;
        client
            .query("SELECT name FROM stream_groups WHERE stream_id = $1 AND config->>'mode' = 'Shared'", &[&stream_id])
            .await
            .map_err(store_error)?
            .iter()
            .map(|r| r.get(0))
            .collect()
    };
    let mut dead = 0;
    for name in names {
        let mut client = inner.client().await?;
        let mut tx = client.transaction().await.map_err(store_error)?;
        let mut g = match locked(&tx, stream_id, stream, &name).await {
            Ok(g) => g,
            Err(LogError::GroupNotFound { .. }) => continue,
            Err(e) => return Err(e),
        };
        let now = now_ms(&tx).await?;
        let config = g.config.clone();
        let GroupState::Shared(sg) = &mut g.state else { continue };
        if sg.next_due().is_none_or(|due| due > now) {
            continue;
        }
        let exhausted = sg.expire(now, &settings(&config));
        dead += exhausted.len() as u64;
        dead_letter(&mut tx, stream, stream_id, &name, &config, exhausted).await?;
        write(&tx, stream_id, &name, &g.state).await?;
        tx.commit().await.map_err(store_error)?;
        inner.notify_stream(stream_id).await;
    }
    Ok(dead)
}
