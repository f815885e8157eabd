//! The embedded store's log engine: streams as append-only logs of segment files, one
//! directory per partition (`streams/<stream id>/<partition>/`), written by the writer thread
//! with its batches and made durable by the sync stage.
//!
//! - `format`: the CRC-checked record batches; `segment`: segment files, their sparse offset
//!   and time indexes, scans at start; `partition`: one partition (staging, writing, rolling,
//!   reads, retention); `groups`: consumer groups over core's rules; `wake`: long polls.
//!
//! How a write travels: an append job stages its records in their partitions (offsets and
//! timestamps are given at once) and their dedup ids in the records map. When the writer
//! commits the turn, the fjall batch goes first (so a dedup id is never on disk without its
//! record's batch having been written after it), then every touched partition writes its one
//! batch for the turn to its active segment ([`Logs::flush`]); the files written are handed to
//! the sync stage, which `fdatasync`s them after the journal and only then answers the turn.
//!
//! What lives where: stream settings, group state and dedup ids are records (`records.rs`, in
//! fjall's `meta` keyspace) under the kinds `stream`, `stream_group` and `stream_dedup`; the
//! records themselves are only in the segment files.

pub mod format;
mod groups;
/// The group calls, for `log_store.rs`.
pub mod groups_api {
    pub use super::groups::{Give, commit, create, delete, fetch, seek, settle};
}
mod partition;
pub mod segment;
mod stream_record;
pub mod wake;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sluice_core::TimeMs;
use sluice_core::overflow::Depth;
use sluice_core::stream::limits::*;
use sluice_core::stream::{self, NewRecord, RecordError, StreamConfig, StreamConfigPatch};
use sluice_store::{
    AppendResults, Appended, Expectation, GroupPartitionView, GroupView, LogError, PartitionView, ReadBatch, ReadFrom,
    ReadRequest, StreamView, SweepReport,
};

pub use groups::{DeadLetter, Group};
pub use partition::Partition;
pub use partition::ReadError;
use segment::Damage;

use crate::codec;
use crate::records::Records;

/// Record kinds (see `records.rs`) of the log engine's durable state.
const KIND_STREAM: &str = "stream";
const KIND_META: &str = "stream_meta";
const KIND_GROUP: &str = "stream_group";
const KIND_DEDUP: &str = "stream_dedup";

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct DedupEntry {
    partition: u32,
    offset: u64,
    timestamp_ms: TimeMs,
    expires_at: TimeMs,
}

pub struct Stream {
    pub id: u64,
    pub name: String,
    pub config: StreamConfig,
    pub created_at: TimeMs,
    pub partitions: Vec<Partition>,
    pub groups: BTreeMap<String, Group>,
    round_robin: u64,
    dedup: HashMap<String, DedupEntry>,
    /// Dedup ids by expiry, oldest first.
    dedup_order: VecDeque<(TimeMs, String)>,
}

impl Stream {
    fn partition(&mut self, p: u32) -> Result<&mut Partition, LogError> {
        let partitions = self.config.partitions;
        self.partitions.get_mut(p as usize).ok_or(LogError::NoSuchPartition { partition: p, partitions })
    }

    fn ends(&self) -> Vec<u64> {
        self.partitions.iter().map(|p| p.next_offset).collect()
    }

    /// What the stream keeps, records staged in this turn included, as its depth limits and
    /// its view count it.
    fn depth(&self) -> Depth {
        let mut depth = Depth::default();
        for p in &self.partitions {
            depth.messages += p.next_offset - p.first_offset();
            depth.bytes += p.bytes() + p.staged_bytes() as u64;
        }
        depth
    }

    fn full(&self, depth: Depth) -> RecordError {
        RecordError::StreamFull {
            depth,
            max_messages: self.config.max_depth_messages,
            max_bytes: self.config.max_depth_bytes,
        }
    }
}

/// What earlier appends of one commit take from a stream, for [`Logs::admit`].
#[derive(Debug, Default)]
pub struct Admitted {
    /// Dedup ids they claim.
    dedup_ids: usize,
    /// Records and bytes they add (bytes as [`Logs::admit`] bounds them).
    depth: Depth,
}

/// Every stream of the store, owned by the writer thread.
pub struct Logs {
    root: PathBuf,
    streams: BTreeMap<String, Stream>,
    next_id: u64,
    /// Partitions with records staged in this turn.
    touched: Vec<(String, u32)>,
    staged_bytes: usize,
    /// Directories of deleted streams: marked by one sweep, removed by the next, once the
    /// deletion is surely durable.
    doomed: Vec<PathBuf>,
    doomed_marked: Vec<PathBuf>,
}

fn damaged(d: Damage) -> LogError {
    LogError::Store(sluice_store::StoreError::Poisoned(format!("{} is damaged: {}", d.file.display(), d.reason)))
}

fn read_error(e: ReadError, partition: u32, offset: u64, p: &Partition) -> LogError {
    match e {
        ReadError::OutOfRange => {
            LogError::OffsetOutOfRange { partition, offset, first_offset: p.first_offset(), next_offset: p.next_offset }
        }
        // Served to nobody: the damaged batch is named in the log, the call fails.
        ReadError::Damaged(d) => {
            tracing::error!("{} is damaged: {}", d.file.display(), d.reason);
            LogError::Store(sluice_store::StoreError::Unavailable(format!(
                "{} is damaged: {}; no record of it is served",
                d.file.display(),
                d.reason
            )))
        }
    }
}

/// A warning found while opening, for the log.
pub struct OpenWarning(pub String);

impl Logs {
    /// Opens every stream recorded in `records` from `data_dir/streams`: sealed segments are
    /// trusted by their checksummed indexes, the active segment of each partition is scanned
    /// (a torn tail is cut), and any damage before the end refuses the open, naming the file.
    pub fn open(data_dir: &Path, records: &mut Records, now: TimeMs) -> Result<(Logs, Vec<OpenWarning>), Damage> {
        let root = data_dir.join("streams");
        let io = |e: std::io::Error| Damage { file: root.clone(), reason: format!("cannot be opened: {e}") };
        std::fs::create_dir_all(&root).map_err(io)?;
        let corrupt =
            |what: String, e: String| Damage { file: data_dir.to_owned(), reason: format!("record {what}: {e}") };
        let next_id = match records.get(KIND_META, "next_id") {
            Some(v) => codec::decode::<u64>(v).map_err(|e| corrupt("stream_meta/next_id".into(), e))?,
            None => 1,
        };
        let mut logs = Logs {
            root: root.clone(),
            streams: BTreeMap::new(),
            next_id,
            touched: Vec::new(),
            staged_bytes: 0,
            doomed: Vec::new(),
            doomed_marked: Vec::new(),
        };
        let mut warnings = Vec::new();
        for r in records.list(KIND_STREAM, "", None, usize::MAX) {
            let rec = stream_record::decode(&r.value).map_err(|e| corrupt(format!("stream/{}", r.key), e))?;
            let mut partitions = Vec::with_capacity(rec.config.partitions as usize);
            for p in 0..rec.config.partitions {
                let opened = Partition::open(root.join(rec.id.to_string()).join(p.to_string()), p, 0)?;
                if let Some((file, at, why)) = opened.torn {
                    warnings.push(OpenWarning(format!(
                        "discarding the end of {} from byte {at} ({why}): a batch cut short by a crash while being written, so never acknowledged",
                        file.display()
                    )));
                }
                partitions.push(opened.partition);
            }
            let mut stream = Stream {
                id: rec.id,
                name: r.key.clone(),
                config: rec.config,
                created_at: rec.created_at,
                partitions,
                groups: BTreeMap::new(),
                round_robin: 0,
                dedup: HashMap::new(),
                dedup_order: VecDeque::new(),
            };
            let prefix = format!("{}/", rec.id);
            for g in records.list(KIND_GROUP, &prefix, None, usize::MAX) {
                let mut group: Group =
                    codec::decode(&g.value).map_err(|e| corrupt(format!("stream_group/{}", g.key), e))?;
                group.restore(now);
                stream.groups.insert(g.key[prefix.len()..].to_owned(), group);
            }
            let mut stale = Vec::new();
            let mut entries = Vec::new();
            for d in records.list(KIND_DEDUP, &prefix, None, usize::MAX) {
                let entry: DedupEntry =
                    codec::decode(&d.value).map_err(|e| corrupt(format!("stream_dedup/{}", d.key), e))?;
                let kept =
                    stream.partitions.get(entry.partition as usize).is_some_and(|p| entry.offset < p.next_offset);
                if entry.expires_at <= now || !kept {
                    stale.push(d.key);
                } else {
                    entries.push((entry, d.key[prefix.len()..].to_owned()));
                }
            }
            entries.sort_by_key(|(e, _)| e.expires_at);
            for (entry, id) in entries {
                stream.dedup_order.push_back((entry.expires_at, id.clone()));
                stream.dedup.insert(id, entry);
            }
            for key in stale {
                records.delete(KIND_DEDUP, &key);
            }
            logs.streams.insert(r.key, stream);
        }
        // Directories no stream owns: a deletion that was durable before its directory went.
        let live: Vec<String> = logs.streams.values().map(|s| s.id.to_string()).collect();
        for entry in std::fs::read_dir(&root).map_err(io)? {
            let entry = entry.map_err(io)?;
            if !live.iter().any(|id| *id == entry.file_name().to_string_lossy()) {
                std::fs::remove_dir_all(entry.path()).map_err(io)?;
            }
        }
        Ok((logs, warnings))
    }

    pub fn staged_bytes(&self) -> usize {
        self.staged_bytes
    }

    pub fn stream(&self, name: &str) -> Result<&Stream, LogError> {
        self.streams.get(name).ok_or_else(|| LogError::StreamNotFound(name.to_owned()))
    }

    pub fn stream_mut(&mut self, name: &str) -> Result<&mut Stream, LogError> {
        self.streams.get_mut(name).ok_or_else(|| LogError::StreamNotFound(name.to_owned()))
    }

    fn put_stream(records: &mut Records, s: &Stream) {
        let rec = stream_record::StreamRecord { id: s.id, config: s.config.clone(), created_at: s.created_at };
        records.put(KIND_STREAM, &s.name, stream_record::encode(&rec));
    }

    pub fn view(&self, name: &str, now: TimeMs) -> Result<StreamView, LogError> {
        let s = self.stream(name)?;
        let partitions = s
            .partitions
            .iter()
            .map(|p| PartitionView { first_offset: p.first_offset(), next_offset: p.next_offset, bytes: p.bytes() })
            .collect();
        let ends = s.ends();
        let groups = s.groups.iter().map(|(n, g)| g.view(n, &ends, now)).collect();
        Ok(StreamView { name: s.name.clone(), config: s.config.clone(), created_at: s.created_at, partitions, groups })
    }

    pub fn group_view(&self, stream: &str, group: &str, now: TimeMs) -> Result<GroupView, LogError> {
        let s = self.stream(stream)?;
        let g = s.groups.get(group).ok_or_else(|| groups::not_found(stream, group))?;
        Ok(g.view(group, &s.ends(), now))
    }

    pub fn list(&self, prefix: &str, after: Option<&str>, limit: usize, now: TimeMs) -> Vec<StreamView> {
        self.streams
            .keys()
            .filter(|n| n.starts_with(prefix) && after.is_none_or(|a| n.as_str() > a))
            .take(limit)
            .filter_map(|n| self.view(n, now).ok())
            .collect()
    }

    pub fn create(
        &mut self,
        records: &mut Records,
        name: &str,
        config: StreamConfig,
        now: TimeMs,
    ) -> Result<(StreamView, bool), LogError> {
        stream::validate_stream_name(name)?;
        config.validate()?;
        if let Some(s) = self.streams.get(name) {
            if s.config == config {
                return Ok((self.view(name, now)?, false));
            }
            return Err(LogError::StreamExists(name.to_owned()));
        }
        if self.streams.len() >= STREAMS_MAX {
            return Err(LogError::LimitExceeded(format!("this server already holds {STREAMS_MAX} streams")));
        }
        let id = self.next_id;
        self.next_id += 1;
        records.put(KIND_META, "next_id", codec::encode(&self.next_id));
        let mut partitions = Vec::new();
        for p in 0..config.partitions {
            let dir = self.root.join(id.to_string()).join(p.to_string());
            partitions.push(Partition::open(dir, p, 0).map_err(damaged)?.partition);
        }
        let s = Stream {
            id,
            name: name.to_owned(),
            config,
            created_at: now,
            partitions,
            groups: BTreeMap::new(),
            round_robin: 0,
            dedup: HashMap::new(),
            dedup_order: VecDeque::new(),
        };
        Self::put_stream(records, &s);
        self.streams.insert(name.to_owned(), s);
        Ok((self.view(name, now)?, true))
    }

    pub fn update(
        &mut self,
        records: &mut Records,
        name: &str,
        patch: StreamConfigPatch,
        now: TimeMs,
    ) -> Result<StreamView, LogError> {
        let root = self.root.clone();
        let s = self.stream_mut(name)?;
        let next = s.config.apply(&patch)?;
        for p in s.config.partitions..next.partitions {
            let dir = root.join(s.id.to_string()).join(p.to_string());
            s.partitions.push(Partition::open(dir, p, 0).map_err(damaged)?.partition);
        }
        s.config = next;
        for (group_name, g) in s.groups.iter_mut() {
            g.resize(s.partitions.len());
            groups::persist(records, s.id, group_name, g);
        }
        Self::put_stream(records, s);
        self.view(name, now)
    }

    pub fn delete(&mut self, records: &mut Records, name: &str) -> Result<(), LogError> {
        let s = self.streams.remove(name).ok_or_else(|| LogError::StreamNotFound(name.to_owned()))?;
        records.delete(KIND_STREAM, name);
        let prefix = format!("{}/", s.id);
        for kind in [KIND_GROUP, KIND_DEDUP] {
            for r in records.list(kind, &prefix, None, usize::MAX) {
                records.delete(kind, &r.key);
            }
        }
        self.touched.retain(|(n, _)| n != name);
        self.doomed.push(self.root.join(s.id.to_string()));
        Ok(())
    }

    /// Stages an append; every record gets its place at once.
    pub fn append(
        &mut self,
        records: &mut Records,
        name: &str,
        new: Vec<NewRecord>,
        expect: Option<Expectation>,
        now: TimeMs,
    ) -> Result<AppendResults, LogError> {
        sluice_store::validate_append(&new)?;
        let s = self.streams.get_mut(name).ok_or_else(|| LogError::StreamNotFound(name.to_owned()))?;
        if let Some(e) = expect {
            let actual = s.partition(e.partition)?.next_offset;
            if actual != e.next_offset {
                return Err(LogError::ExpectationFailed { partition: e.partition, expected: e.next_offset, actual });
            }
            if let Some(bad) = new.iter().position(|r| r.validate(&s.config).is_err()) {
                let error = new[bad].validate(&s.config).expect_err("found above");
                return Err(LogError::Invalid(sluice_core::ValidationError::new(
                    format!("records[{bad}]"),
                    error.to_string(),
                )));
            }
        }
        while s.dedup_order.front().is_some_and(|(at, _)| *at <= now) {
            let (_, id) = s.dedup_order.pop_front().expect("checked");
            if s.dedup.get(&id).is_some_and(|e| e.expires_at <= now) {
                s.dedup.remove(&id);
                records.delete(KIND_DEDUP, &format!("{}/{id}", s.id));
            }
        }
        let mut out = Vec::with_capacity(new.len());
        let bounded = s.config.bounded();
        let mut depth = if bounded { s.depth() } else { Depth::default() };
        for mut r in new {
            if let Some(e) = expect {
                r.partition = Some(e.partition);
            }
            if let Err(e) = r.validate(&s.config) {
                out.push(Err(e));
                continue;
            }
            if let Some(id) = &r.dedup_id {
                if let Some(e) = s.dedup.get(id) {
                    out.push(Ok(Appended {
                        partition: e.partition,
                        offset: e.offset,
                        timestamp_ms: e.timestamp_ms,
                        duplicate: true,
                    }));
                    continue;
                }
                if s.dedup.len() >= STREAM_DEDUP_ENTRIES_MAX {
                    out.push(Err(RecordError::DedupFull));
                    continue;
                }
            }
            let p = stream::partitioner::choose(r.partition, r.key.as_deref(), s.config.partitions, &mut s.round_robin);
            if bounded {
                // Exactly what staging it adds: its encoding, and a batch header when it
                // starts the partition's batch of this turn.
                let fresh = s.partitions[p as usize].staged_bytes() == 0;
                let bytes = format::BatchWriter::encoded_len(&r) + if fresh { format::HEADER_BYTES as u64 } else { 0 };
                if !s.config.fits(depth, bytes) {
                    out.push(Err(s.full(depth)));
                    continue;
                }
                depth.messages += 1;
                depth.bytes += bytes;
            }
            let part = &mut s.partitions[p as usize];
            let before = part.staged_bytes();
            let (offset, timestamp_ms) = part.stage(&r, now);
            self.staged_bytes += part.staged_bytes() - before;
            if before == 0 {
                self.touched.push((name.to_owned(), p));
            }
            if let Some(id) = r.dedup_id {
                let entry = DedupEntry { partition: p, offset, timestamp_ms, expires_at: now + STREAM_DEDUP_WINDOW_MS };
                records.put(KIND_DEDUP, &format!("{}/{id}", s.id), codec::encode(&entry));
                s.dedup_order.push_back((entry.expires_at, id.clone()));
                s.dedup.insert(id, entry);
            }
            out.push(Ok(Appended { partition: p, offset, timestamp_ms, duplicate: false }));
        }
        Ok(out)
    }

    /// For a commit, which is all or nothing: whether [`Logs::append`] would take every record
    /// of `new` into `name` now, or the refusal of the first it would not take. `taken` holds
    /// what earlier appends of the same commit to this stream admitted (and grows by this
    /// one's). Against a depth limit each record counts a batch header of its own, an upper
    /// bound of what the append adds, so what is admitted here is never refused there.
    pub fn admit(
        &self,
        name: &str,
        new: &[NewRecord],
        now: TimeMs,
        taken: &mut Admitted,
    ) -> Result<(), sluice_store::Conflict> {
        use sluice_store::Conflict;
        let s = self.streams.get(name).ok_or_else(|| Conflict::StreamNotFound(name.to_owned()))?;
        // As `append` counts them: after dropping the ids whose window is over.
        let expired = s
            .dedup_order
            .iter()
            .take_while(|(at, _)| *at <= now)
            .filter(|(_, id)| s.dedup.get(id).is_some_and(|e| e.expires_at <= now))
            .count();
        let mut live = s.dedup.len() - expired + taken.dedup_ids;
        let mut fresh: std::collections::HashSet<&str> = std::collections::HashSet::new();
        let kept = if s.config.bounded() { s.depth() } else { Depth::default() };
        for (record, r) in new.iter().enumerate() {
            r.validate(&s.config).map_err(|error| Conflict::RecordRefused { record, error })?;
            // A duplicate (of a live id, or of an earlier record of this append) adds nothing.
            let duplicate = match &r.dedup_id {
                Some(id) if s.dedup.get(id).is_some_and(|e| e.expires_at > now) => true,
                Some(id) if !fresh.insert(id) => true,
                Some(_) => {
                    if live >= STREAM_DEDUP_ENTRIES_MAX {
                        return Err(Conflict::RecordRefused { record, error: RecordError::DedupFull });
                    }
                    live += 1;
                    taken.dedup_ids += 1;
                    false
                }
                None => false,
            };
            if s.config.bounded() && !duplicate {
                let depth =
                    Depth { messages: kept.messages + taken.depth.messages, bytes: kept.bytes + taken.depth.bytes };
                let bytes = format::BatchWriter::encoded_len(r) + format::HEADER_BYTES as u64;
                if !s.config.fits(depth, bytes) {
                    return Err(Conflict::RecordRefused { record, error: s.full(depth) });
                }
                taken.depth.messages += 1;
                taken.depth.bytes += bytes;
            }
        }
        Ok(())
    }

    /// Writes every staged batch (after the turn's fjall batch); returns the records written
    /// and adds the files written to `dirty`.
    pub fn flush(&mut self, now: TimeMs, dirty: &mut Vec<Arc<File>>) -> std::io::Result<u64> {
        let mut written = 0;
        for (name, p) in std::mem::take(&mut self.touched) {
            if let Some(s) = self.streams.get_mut(&name) {
                written += s.partitions[p as usize].flush(now, &s.config, dirty)?;
            }
        }
        self.staged_bytes = 0;
        Ok(written)
    }

    /// Syncs every active segment (at close).
    pub fn sync_all(&self) -> std::io::Result<()> {
        for s in self.streams.values() {
            for p in &s.partitions {
                p.sync()?;
            }
        }
        Ok(())
    }

    pub fn read(&mut self, name: &str, request: ReadRequest) -> Result<ReadBatch, LogError> {
        request.validate()?;
        let s = self.stream_mut(name)?;
        let p = s.partition(request.partition)?;
        let from = match request.from {
            ReadFrom::Offset(o) => o,
            ReadFrom::Time(t) => p.offset_for_time(t).map_err(damaged)?,
        };
        let records = p
            .read(from, request.max as usize, READ_BYTES_MAX)
            .map_err(|e| read_error(e, request.partition, from, p))?;
        Ok(ReadBatch { records, first_offset: p.first_offset(), next_offset: p.next_offset })
    }

    /// Retention over every partition, dedup ids past their window, shared-mode holds past
    /// their ack timeout (exhausted records returned for their dead-letter queues), and the
    /// directories of streams deleted before the previous sweep.
    pub fn sweep(&mut self, records: &mut Records, now: TimeMs) -> Result<(SweepReport, Vec<DeadLetter>), LogError> {
        let mut report = SweepReport::default();
        let mut dead = Vec::new();
        for s in self.streams.values_mut() {
            for p in &mut s.partitions {
                report.records_removed += p.apply_retention(now, &s.config).map_err(|e| {
                    LogError::Store(sluice_store::StoreError::Poisoned(format!("applying retention: {e}")))
                })?;
            }
            let names: Vec<String> = s.groups.keys().cloned().collect();
            for name in names {
                dead.extend(groups::expire(s, records, &name, now)?);
            }
        }
        for dir in std::mem::take(&mut self.doomed_marked) {
            if let Err(e) = std::fs::remove_dir_all(&dir)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!("cannot remove the directory of a deleted stream, {}: {e}", dir.display());
            }
        }
        self.doomed_marked = std::mem::take(&mut self.doomed);
        Ok((report, dead))
    }
}

/// The lag of a group's partition: records from `committed` to the end.
fn lag(committed: u64, end: u64) -> u64 {
    end.saturating_sub(committed)
}

fn partition_view(committed: u64, end: u64, owner: Option<String>) -> GroupPartitionView {
    GroupPartitionView { committed, lag: lag(committed, end), owner }
}
