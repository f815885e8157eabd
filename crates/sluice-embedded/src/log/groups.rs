//! Consumer groups of the embedded log engine: core's `OffsetsGroup` and `SharedGroup` applied
//! in the writer thread over the partitions' records, their state kept as one record per group
//! (kind `stream_group`, key `<stream id>/<group>`), written whenever it changes.
//!
//! `offsets` positions are not written when only they change (a fetch that joins nobody): after
//! a restart they go back to the committed offsets (at least once). Shared-mode holds are
//! written with every fetch, ack, release and nack, so receipts stay valid across a restart.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use sluice_core::message::{AttributeData, MessageEnvelope};
use sluice_core::stream::group::OffsetsGroup;
use sluice_core::stream::limits::{GROUPS_PER_STREAM_MAX, READ_BYTES_MAX};
use sluice_core::stream::shared::{Exhausted, ReceiptError, SharedGroup, SharedReceipt, SharedSettings};
use sluice_core::stream::{self, Record, StartAt};
use sluice_core::{AttributeValue, NewMessage, TimeMs};
use sluice_store::{Fetched, FetchedRecord, GroupConfig, GroupMode, GroupView, LogError, ReceiptResults, SeekTo};

use super::{KIND_GROUP, Stream, damaged, partition_view, read_error};
use crate::codec;
use crate::records::Records;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum GroupState {
    Offsets(OffsetsGroup),
    Shared(SharedGroup),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Group {
    pub config: GroupConfig,
    pub created_at: TimeMs,
    pub state: GroupState,
}

/// A record leaving a shared group for its dead-letter queue (or dropped, without one).
pub struct DeadLetter {
    pub queue: Option<String>,
    pub message: NewMessage,
}

pub fn not_found(stream: &str, group: &str) -> LogError {
    LogError::GroupNotFound { stream: stream.to_owned(), group: group.to_owned() }
}

fn settings(c: &GroupConfig) -> SharedSettings {
    SharedSettings { ack_timeout_ms: c.ack_timeout_ms, max_deliveries: c.max_deliveries, key_ordered: c.key_ordered }
}

pub fn persist(records: &mut Records, stream_id: u64, name: &str, g: &Group) {
    records.put(KIND_GROUP, &format!("{stream_id}/{name}"), codec::encode(g));
}

impl Group {
    pub fn restore(&mut self, now: TimeMs) {
        if let GroupState::Offsets(o) = &mut self.state {
            o.restore(now);
        }
    }

    pub fn resize(&mut self, partitions: usize) {
        match &mut self.state {
            GroupState::Offsets(o) => o.resize(partitions, 0),
            GroupState::Shared(s) => s.resize(partitions, 0),
        }
    }

    pub fn view(&self, name: &str, ends: &[u64], now: TimeMs) -> GroupView {
        let (generation, members, partitions, in_flight) = match &self.state {
            GroupState::Offsets(o) => {
                let live = |m: &str| {
                    o.members.get(m).is_some_and(|&seen| now.saturating_sub(seen) < self.config.session_timeout_ms)
                };
                let members = o.members.keys().filter(|m| live(m)).cloned().collect();
                let partitions = o
                    .partitions
                    .iter()
                    .zip(ends)
                    .map(|(p, &end)| partition_view(p.committed, end, p.owner.clone().filter(|m| live(m))))
                    .collect();
                (o.generation, members, partitions, 0)
            }
            GroupState::Shared(s) => {
                let partitions = (0..s.partitions.len())
                    .zip(ends)
                    .map(|(p, &end)| partition_view(s.low_water(p as u32), end, None))
                    .collect();
                (0, Vec::new(), partitions, s.in_flight() as u64)
            }
        };
        GroupView {
            name: name.to_owned(),
            config: self.config.clone(),
            created_at: self.created_at,
            generation,
            members,
            partitions,
            in_flight,
        }
    }
}

/// Where a group starts in each partition of `s`.
fn start_offsets(s: &mut Stream, start: StartAt) -> Result<Vec<u64>, LogError> {
    let mut out = Vec::with_capacity(s.partitions.len());
    for p in &mut s.partitions {
        out.push(match start {
            StartAt::Earliest => p.first_offset(),
            StartAt::Latest => p.next_offset,
            StartAt::Offset(o) => o.clamp(p.first_offset(), p.next_offset),
            StartAt::Time(t) => p.offset_for_time(t).map_err(damaged)?,
        });
    }
    Ok(out)
}

pub fn create(
    s: &mut Stream,
    records: &mut Records,
    name: &str,
    config: GroupConfig,
    now: TimeMs,
) -> Result<(GroupView, bool), LogError> {
    stream::validate_name("name", name)?;
    config.validate()?;
    let ends = s.ends();
    if let Some(g) = s.groups.get(name) {
        if g.config.same(&config) {
            return Ok((g.view(name, &ends, now), false));
        }
        return Err(LogError::GroupExists { stream: s.name.clone(), group: name.to_owned() });
    }
    if s.groups.len() >= GROUPS_PER_STREAM_MAX {
        return Err(LogError::LimitExceeded(format!("a stream has at most {GROUPS_PER_STREAM_MAX} groups")));
    }
    let start = start_offsets(s, config.start)?;
    let state = match config.mode {
        GroupMode::Offsets => GroupState::Offsets(OffsetsGroup::new(start)),
        GroupMode::Shared => GroupState::Shared(SharedGroup::new(uuid::Uuid::now_v7().as_u128() as u64, start)),
    };
    let g = Group { config, created_at: now, state };
    persist(records, s.id, name, &g);
    let view = g.view(name, &ends, now);
    s.groups.insert(name.to_owned(), g);
    Ok((view, true))
}

pub fn delete(s: &mut Stream, records: &mut Records, name: &str) -> Result<(), LogError> {
    s.groups.remove(name).ok_or_else(|| not_found(&s.name, name))?;
    records.delete(KIND_GROUP, &format!("{}/{name}", s.id));
    Ok(())
}

fn wrong_mode(name: &str, g: &Group) -> LogError {
    let mode = match g.config.mode {
        GroupMode::Offsets => "offsets",
        GroupMode::Shared => "shared",
    };
    LogError::WrongMode { group: name.to_owned(), mode }
}

/// A fetch: `offsets` mode joins `member` and reads its partitions; `shared` mode hands out
/// records with receipts. Exhausted shared records come back for the dead-letter queue.
pub fn fetch(
    s: &mut Stream,
    records: &mut Records,
    name: &str,
    member: &str,
    max: usize,
    now: TimeMs,
) -> Result<(Fetched, Vec<DeadLetter>), LogError> {
    stream::validate_member(member)?;
    let stream_name = s.name.clone();
    let Stream { id, partitions, groups, .. } = s;
    let g = groups.get_mut(name).ok_or_else(|| not_found(&stream_name, name))?;
    let config = g.config.clone();
    match &mut g.state {
        GroupState::Offsets(o) => {
            let generation = o.generation;
            let a =
                o.fetch(member, now, config.session_timeout_ms).map_err(|e| LogError::LimitExceeded(e.to_string()))?;
            let mut out = Vec::new();
            let mut bytes = 0u64;
            let count = a.partitions.len();
            // Start at a different partition each time, so that no partition starves.
            let first = if count == 0 { 0 } else { (now as usize) % count };
            for i in 0..count {
                let (p, position) = a.partitions[(first + i) % count];
                if out.len() >= max || bytes >= READ_BYTES_MAX {
                    break;
                }
                let part = &mut partitions[p as usize];
                let from = position.max(part.first_offset());
                let got = part
                    .read(from, max - out.len(), READ_BYTES_MAX - bytes)
                    .map_err(|e| read_error(e, p, from, part))?;
                if let Some(last) = got.last() {
                    o.advance(member, p, position, last.offset + 1);
                }
                bytes += got.iter().map(|r| r.body.len() as u64).sum::<u64>();
                out.extend(got.into_iter().map(|record| FetchedRecord { record, receipt: None, deliveries: None }));
            }
            if o.generation != generation {
                persist(records, *id, name, g);
            }
            let partitions = a.partitions.iter().map(|(p, _)| *p).collect();
            Ok((Fetched { generation: Some(a.generation), partitions, records: out }, Vec::new()))
        }
        GroupState::Shared(sg) => {
            let settings = settings(&config);
            let exhausted = sg.expire(now, &settings);
            let count = partitions.len() as u32;
            let mut out = Vec::new();
            for i in 0..count {
                if out.len() >= max {
                    break;
                }
                let p = (sg.next_partition + i) % count;
                let part = &mut partitions[p as usize];
                sg.forget_below(p, part.first_offset());
                let want = (max - out.len()).min(sg.room(p));
                let cursor = sg.partitions[p as usize].cursor;
                let fresh: Vec<Record> = if want > 0 && cursor < part.next_offset {
                    part.read(cursor, want, READ_BYTES_MAX).map_err(|e| read_error(e, p, cursor, part))?
                } else {
                    Vec::new()
                };
                let keys: Vec<(u64, Option<u64>)> =
                    fresh.iter().map(|r| (r.offset, r.key.as_deref().map(stream::key_hash))).collect();
                let mut by_offset: HashMap<u64, Record> = fresh.into_iter().map(|r| (r.offset, r)).collect();
                for d in sg.take(p, &keys, max - out.len(), member, now, &settings) {
                    let record = match by_offset.remove(&d.offset) {
                        Some(r) => r,
                        None => match part
                            .read(d.offset, 1, READ_BYTES_MAX)
                            .map_err(|e| read_error(e, p, d.offset, part))?
                            .pop()
                        {
                            Some(r) => r,
                            None => continue,
                        },
                    };
                    out.push(FetchedRecord {
                        record,
                        receipt: Some(d.receipt.encode()),
                        deliveries: Some(d.deliveries),
                    });
                }
            }
            sg.next_partition = (sg.next_partition + 1) % count.max(1);
            let dead = dead_letters(&stream_name, name, &config, partitions, exhausted);
            persist(records, *id, name, g);
            Ok((Fetched { generation: None, partitions: Vec::new(), records: out }, dead))
        }
    }
}

/// The dead-letter messages of `exhausted` records (those retention already removed are gone).
fn dead_letters(
    stream: &str,
    group: &str,
    config: &GroupConfig,
    partitions: &mut [super::Partition],
    exhausted: Vec<Exhausted>,
) -> Vec<DeadLetter> {
    let mut out = Vec::new();
    for e in exhausted {
        let Some(part) = partitions.get_mut(e.partition as usize) else { continue };
        let record = match part.read(e.offset, 1, READ_BYTES_MAX) {
            Ok(mut r) => r.pop(),
            Err(_) => None,
        };
        let Some(record) = record.filter(|r| r.offset == e.offset) else { continue };
        let text = |v: String| AttributeValue { data_type: "String".into(), value: AttributeData::Text(v) };
        let number = |v: u64| AttributeValue { data_type: "Number".into(), value: AttributeData::Text(v.to_string()) };
        let mut attributes = BTreeMap::from([
            ("sluice.stream".to_owned(), text(stream.to_owned())),
            ("sluice.group".to_owned(), text(group.to_owned())),
            ("sluice.partition".to_owned(), number(u64::from(e.partition))),
            ("sluice.offset".to_owned(), number(e.offset)),
            ("sluice.deliveries".to_owned(), number(u64::from(e.deliveries))),
        ]);
        if let Some(error) = e.last_error {
            attributes.insert("sluice.last_error".to_owned(), text(error));
        }
        if let Some(key) = &record.key {
            attributes.insert(
                "sluice.key".to_owned(),
                AttributeValue { data_type: "Binary".into(), value: AttributeData::Bytes(key.clone()) },
            );
        }
        let message = NewMessage {
            body: record.body,
            body_binary: record.body_binary,
            attributes,
            envelope: MessageEnvelope {
                r#type: record.r#type,
                correlation_id: record.correlation_id,
                ..Default::default()
            },
            ..Default::default()
        };
        out.push(DeadLetter { queue: config.dead_letter_queue.clone(), message });
    }
    out
}

pub fn commit(
    s: &mut Stream,
    records: &mut Records,
    name: &str,
    member: &str,
    generation: u64,
    offsets: &BTreeMap<u32, u64>,
    now: TimeMs,
) -> Result<(), LogError> {
    stream::validate_member(member)?;
    let ends = s.ends();
    let g = s.groups.get_mut(name).ok_or_else(|| not_found(&s.name, name))?;
    let timeout = g.config.session_timeout_ms;
    let GroupState::Offsets(o) = &mut g.state else { return Err(wrong_mode(name, g)) };
    let result = o.commit(member, generation, offsets, &ends, now, timeout);
    persist(records, s.id, name, g);
    Ok(result?)
}

pub fn seek(s: &mut Stream, records: &mut Records, name: &str, partition: u32, to: SeekTo) -> Result<u64, LogError> {
    let stream_name = s.name.clone();
    let part = s.partition(partition)?;
    let offset = match to {
        SeekTo::Offset(o) => o.clamp(part.first_offset(), part.next_offset),
        SeekTo::Time(t) => part.offset_for_time(t).map_err(damaged)?,
    };
    let g = s.groups.get_mut(name).ok_or_else(|| not_found(&stream_name, name))?;
    match &mut g.state {
        GroupState::Offsets(o) => o.seek(partition, offset),
        GroupState::Shared(sg) => sg.seek(partition, offset),
    }
    persist(records, s.id, name, g);
    Ok(offset)
}

/// Which shared-mode call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Give {
    Ack,
    Release,
    Nack,
}

pub fn settle(
    s: &mut Stream,
    records: &mut Records,
    name: &str,
    receipts: Vec<String>,
    give: Give,
    error: Option<String>,
) -> Result<(ReceiptResults, Vec<DeadLetter>), LogError> {
    let stream_name = s.name.clone();
    let Stream { id, partitions, groups, .. } = s;
    let g = groups.get_mut(name).ok_or_else(|| not_found(&stream_name, name))?;
    let config = g.config.clone();
    let GroupState::Shared(sg) = &mut g.state else { return Err(wrong_mode(name, g)) };
    let settings = settings(&config);
    let mut exhausted = Vec::new();
    let results = receipts
        .iter()
        .map(|text| {
            let receipt = SharedReceipt::decode(text)?;
            match give {
                Give::Ack => sg.ack(&receipt),
                Give::Release => sg.release(&receipt, error.clone()),
                Give::Nack => sg.nack(&receipt, error.clone(), &settings).map(|e| exhausted.extend(e)),
            }
        })
        .collect::<Vec<Result<(), ReceiptError>>>();
    let dead = dead_letters(&stream_name, name, &config, partitions, exhausted);
    persist(records, *id, name, g);
    Ok((results, dead))
}

/// Ends the holds of group `name` whose ack timeout passed.
pub fn expire(s: &mut Stream, records: &mut Records, name: &str, now: TimeMs) -> Result<Vec<DeadLetter>, LogError> {
    let stream_name = s.name.clone();
    let Stream { id, partitions, groups, .. } = s;
    let Some(g) = groups.get_mut(name) else { return Ok(Vec::new()) };
    let config = g.config.clone();
    let GroupState::Shared(sg) = &mut g.state else { return Ok(Vec::new()) };
    if sg.next_due().is_none_or(|due| due > now) {
        return Ok(Vec::new());
    }
    let exhausted = sg.expire(now, &settings(&config));
    let dead = dead_letters(&stream_name, name, &config, partitions, exhausted);
    persist(records, *id, name, g);
    Ok(dead)
}
