//! One partition of a stream on disk: its sealed segments (known by their metadata, read on
//! demand), its active segment (written, with its indexes in memory), the records staged for
//! the writer's current batch, reads by offset and time, and retention.
//!
//! Memory per partition is the active segment's sparse indexes (bounded by `segment_bytes`),
//! one `SegmentMeta` per sealed segment and the indexes of the last sealed segment read:
//! nothing grows with the number of records.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_core::TimeMs;
use sluice_core::stream::{NewRecord, Record, StreamConfig};

use super::format::{self, BatchWriter};
use super::segment::{self, Damage, Indexes, SegmentMeta};

/// Why a read failed.
#[derive(Debug)]
pub enum ReadError {
    /// Below the first offset still kept.
    OutOfRange,
    Damaged(Damage),
}

pub struct Partition {
    pub index: u32,
    dir: PathBuf,
    pub sealed: Vec<SegmentMeta>,
    active: SegmentMeta,
    active_ix: Indexes,
    active_file: Arc<File>,
    /// The next offset an append gets (staged records included).
    pub next_offset: u64,
    /// The latest timestamp given: a partition's timestamps never go back.
    last_ts: TimeMs,
    staged: Option<BatchWriter>,
    /// The indexes and file of the sealed segment read last.
    cached: Option<(u64, Indexes, Arc<File>)>,
}

fn open_append(path: &Path) -> std::io::Result<Arc<File>> {
    Ok(Arc::new(OpenOptions::new().create(true).append(true).read(true).open(path)?))
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// What opening a partition found worth a warning.
pub struct Opened {
    pub partition: Partition,
    /// A torn tail cut from the active segment: (file, byte, why).
    pub torn: Option<(PathBuf, u64, String)>,
}

impl Partition {
    /// Opens the partition in `dir`, creating it (empty, from offset `start`) if missing.
    pub fn open(dir: PathBuf, index: u32, start: u64) -> Result<Opened, Damage> {
        let io = |e: std::io::Error| Damage { file: dir.clone(), reason: format!("cannot be opened: {e}") };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let mut bases = segment::list(&dir).map_err(io)?;
        if bases.is_empty() {
            File::create(segment::log_path(&dir, start)).map_err(io)?;
            sync_dir(&dir).map_err(io)?;
            bases.push(start);
        }
        let last = *bases.last().expect("a segment");
        let mut sealed: Vec<SegmentMeta> = Vec::with_capacity(bases.len() - 1);
        for &base in &bases[..bases.len() - 1] {
            let path = segment::log_path(&dir, base);
            let len = std::fs::metadata(&path).map_err(io)?.len();
            let meta = match segment::load_indexes(&dir, base, len) {
                Some((meta, _)) => meta,
                None => {
                    // Derived data: rebuilt from the segment, which is checked whole on the way.
                    let scan = segment::scan(&path, base)?;
                    if let Some((at, why)) = scan.torn_at {
                        return Err(Damage {
                            file: path,
                            reason: format!("a sealed segment cannot be read from byte {at} ({why})"),
                        });
                    }
                    segment::write_indexes(&dir, &scan.meta, &scan.indexes).map_err(io)?;
                    scan.meta
                }
            };
            if let Some(prev) = sealed.last()
                && prev.next != meta.base
            {
                return Err(Damage {
                    file: path,
                    reason: format!("starts at offset {}, but the segment before ends at {}", meta.base, prev.next),
                });
            }
            sealed.push(meta);
        }
        let path = segment::log_path(&dir, last);
        let scan = segment::scan(&path, last)?;
        if let Some(prev) = sealed.last()
            && prev.next != last
        {
            return Err(Damage {
                file: path,
                reason: format!("starts at offset {last}, but the segment before ends at {}", prev.next),
            });
        }
        let mut torn = None;
        if let Some((at, why)) = &scan.torn_at {
            let f = OpenOptions::new().write(true).open(&path).map_err(io)?;
            f.set_len(*at).map_err(io)?;
            f.sync_all().map_err(io)?;
            torn = Some((path.clone(), *at, why.to_string()));
        }
        let active_file = open_append(&path).map_err(io)?;
        let last_ts = if scan.meta.is_empty() { sealed.last().map_or(0, |s| s.last_ts) } else { scan.meta.last_ts };
        let partition = Partition {
            index,
            dir,
            sealed,
            active: scan.meta,
            active_ix: scan.indexes,
            active_file,
            next_offset: scan.meta.next,
            last_ts,
            staged: None,
            cached: None,
        };
        Ok(Opened { partition, torn })
    }

    pub fn first_offset(&self) -> u64 {
        self.sealed.first().map_or(self.active.base, |s| s.base)
    }

    /// Bytes kept on disk.
    pub fn bytes(&self) -> u64 {
        self.sealed.iter().map(|s| s.bytes).sum::<u64>() + self.active.bytes
    }

    /// Bytes staged for the current batch.
    pub fn staged_bytes(&self) -> usize {
        self.staged.as_ref().map_or(0, BatchWriter::len)
    }

    /// Stages `r` for the writer's current batch: its offset and timestamp.
    pub fn stage(&mut self, r: &NewRecord, now: TimeMs) -> (u64, TimeMs) {
        let ts = now.max(self.last_ts);
        self.last_ts = ts;
        let offset = self.next_offset;
        self.staged.get_or_insert_with(|| BatchWriter::new(offset)).push(r, ts);
        self.next_offset += 1;
        (offset, ts)
    }

    /// Writes the staged batch to the active segment (rolling it first when full, or when its
    /// first record is past retention), unsynced; adds the file to `dirty` for the sync stage.
    /// Returns how many records were written.
    pub fn flush(&mut self, now: TimeMs, config: &StreamConfig, dirty: &mut Vec<Arc<File>>) -> std::io::Result<u64> {
        let Some(batch) = self.staged.take() else { return Ok(0) };
        let count = u64::from(batch.count());
        let full = self.active.bytes + batch.len() as u64 > config.segment_bytes;
        let old = self.active.first_ts.saturating_add(config.retention_ms) <= now;
        if !self.active.is_empty() && (full || old) {
            self.roll()?;
        }
        let bytes = batch.finish();
        let h = format::header(&bytes).expect("a batch just built");
        (&*self.active_file).write_all(&bytes)?;
        self.active_ix.add(&self.active, self.active.bytes, &h);
        self.active.extend(&h);
        dirty.push(self.active_file.clone());
        Ok(count)
    }

    /// Seals the active segment (synced, with its index files) and starts a new one at the
    /// next offset.
    fn roll(&mut self) -> std::io::Result<()> {
        self.active_file.sync_data()?;
        segment::write_indexes(&self.dir, &self.active, &self.active_ix)?;
        let base = self.active.next;
        let file = open_append(&segment::log_path(&self.dir, base))?;
        sync_dir(&self.dir)?;
        self.sealed.push(self.active);
        self.active = SegmentMeta::empty(base);
        self.active_ix = Indexes::default();
        self.active_file = file;
        Ok(())
    }

    /// Removes old segments: by age (every record older than `retention_ms`), then by size
    /// (while the rest still holds `retention_bytes`). The active segment goes too once all of
    /// it is past retention (a new, empty one takes its place). Returns the records removed.
    pub fn apply_retention(&mut self, now: TimeMs, config: &StreamConfig) -> std::io::Result<u64> {
        let cutoff = now.saturating_sub(config.retention_ms);
        if self.staged.is_none() && !self.active.is_empty() && self.active.last_ts < cutoff {
            self.roll()?;
        }
        let mut removed = 0;
        let mut total = self.bytes();
        while let Some(first) = self.sealed.first().copied() {
            let by_age = first.last_ts < cutoff;
            let by_size = config.retention_bytes.is_some_and(|limit| total - first.bytes >= limit);
            if !by_age && !by_size {
                break;
            }
            segment::remove(&self.dir, first.base)?;
            if self.cached.as_ref().is_some_and(|(b, _, _)| *b == first.base) {
                self.cached = None;
            }
            self.sealed.remove(0);
            total -= first.bytes;
            removed += first.next - first.base;
        }
        Ok(removed)
    }

    /// The indexes and file of segment `i` (the active one when `i == sealed.len()`).
    fn segment(&mut self, i: usize) -> Result<(SegmentMeta, Indexes, Arc<File>, PathBuf), Damage> {
        if i == self.sealed.len() {
            let path = segment::log_path(&self.dir, self.active.base);
            return Ok((self.active, self.active_ix.clone(), self.active_file.clone(), path));
        }
        let meta = self.sealed[i];
        let path = segment::log_path(&self.dir, meta.base);
        if let Some((base, ix, file)) = &self.cached
            && *base == meta.base
        {
            return Ok((meta, ix.clone(), file.clone(), path));
        }
        let damage = |reason: String| Damage { file: path.clone(), reason };
        let file = Arc::new(File::open(&path).map_err(|e| damage(format!("cannot be opened: {e}")))?);
        let ix = match segment::load_indexes(&self.dir, meta.base, meta.bytes) {
            Some((_, ix)) => ix,
            None => segment::scan(&path, meta.base)?.indexes,
        };
        self.cached = Some((meta.base, ix.clone(), file.clone()));
        Ok((meta, ix, file, path))
    }

    /// Which segment holds `offset` (the active one when past every sealed one).
    fn segment_of(&self, offset: u64) -> usize {
        self.sealed.partition_point(|s| s.next <= offset)
    }

    /// Up to `max` records from `from` on, at most `max_bytes` of bodies (at least one record
    /// if one is there); only what was written (not what is staged).
    pub fn read(&mut self, from: u64, max: usize, max_bytes: u64) -> Result<Vec<Record>, ReadError> {
        if from < self.first_offset() {
            return Err(ReadError::OutOfRange);
        }
        let mut out: Vec<Record> = Vec::new();
        let mut bytes = 0u64;
        let mut i = self.segment_of(from);
        while i <= self.sealed.len() && out.len() < max {
            let (meta, ix, file, path) = self.segment(i).map_err(ReadError::Damaged)?;
            let start = ix.position_for(meta.base, from);
            let partition = self.index;
            let mut done = false;
            let read = segment::read_batches(&file, &path, start, meta.bytes, |buf, h| {
                if h.next_offset() <= from {
                    return Ok(true);
                }
                for r in format::records(buf, h, partition, from)? {
                    if out.len() >= max || (!out.is_empty() && bytes + r.body.len() as u64 > max_bytes) {
                        done = true;
                        return Ok(false);
                    }
                    bytes += r.body.len() as u64;
                    out.push(r);
                }
                // Full: the next batch is not read, so damage after this one is no reason to
                // withhold what is here.
                done = out.len() >= max;
                Ok(!done)
            });
            match read {
                Ok(()) => {}
                // Every record before the damaged batch was checked and is served; the read
                // that starts at the damaged batch fails.
                Err(damage) if !out.is_empty() => {
                    tracing::error!("{} is damaged: {}", damage.file.display(), damage.reason);
                    break;
                }
                Err(damage) => return Err(ReadError::Damaged(damage)),
            }
            if done {
                break;
            }
            i += 1;
        }
        Ok(out)
    }

    /// The first offset whose record's timestamp is `ts` or later (the end if none is).
    pub fn offset_for_time(&mut self, ts: TimeMs) -> Result<u64, Damage> {
        let count = self.sealed.len() + 1;
        for i in 0..count {
            let (meta, ix, file, path) = self.segment(i)?;
            if meta.is_empty() || meta.last_ts < ts {
                continue;
            }
            let mut found = None;
            let partition = self.index;
            segment::read_batches(&file, &path, ix.position_for_time(ts), meta.bytes, |buf, h| {
                if h.last_ts < ts {
                    return Ok(true);
                }
                found =
                    format::records(buf, h, partition, 0)?.into_iter().find(|r| r.timestamp_ms >= ts).map(|r| r.offset);
                Ok(found.is_none())
            })?;
            if let Some(offset) = found {
                return Ok(offset);
            }
        }
        Ok(self.next_offset)
    }

    /// Syncs the active segment (at close).
    pub fn sync(&self) -> std::io::Result<()> {
        self.active_file.sync_data()
    }
}
