//! Segment files and their indexes.
//!
//! A partition's directory holds segments named by their base offset (20 digits, so that they
//! sort): `<base>.log` (batches, `format.rs`), and for a sealed segment `<base>.idx`, its sparse
//! offset index (an entry per `INDEX_INTERVAL_BYTES` of log: offset relative to the base, byte
//! position), and `<base>.tix`, its time index (an entry per interval too: the first timestamp
//! of the batch there, offset relative to the base). An index file starts with a header (magic,
//! version, base offset, next offset, log length, first and last timestamps, entry count) and
//! ends with a CRC-32C of everything before it; an index that fails it, or names another length
//! than its segment's, is rebuilt from the segment, never trusted.
//!
//! The newest segment of a partition is the active one; its indexes live in memory and are
//! rebuilt at start by scanning it, which also finds a torn tail.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::format::{self, BadBatch, Header};

/// Log bytes between two index entries.
pub const INDEX_INTERVAL_BYTES: u64 = 16 * 1024;
const IDX_MAGIC: &[u8; 4] = b"SLIX";
const TIX_MAGIC: &[u8; 4] = b"SLTX";
const INDEX_HEADER_BYTES: usize = 4 + 4 + 8 + 8 + 8 + 8 + 8 + 4;

/// What is known of a segment without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentMeta {
    pub base: u64,
    /// The offset after its last record.
    pub next: u64,
    pub bytes: u64,
    pub first_ts: u64,
    pub last_ts: u64,
}

impl SegmentMeta {
    pub fn empty(base: u64) -> SegmentMeta {
        SegmentMeta { base, next: base, bytes: 0, first_ts: 0, last_ts: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.next == self.base
    }

    /// Adds a written batch.
    pub fn extend(&mut self, h: &Header) {
        if self.is_empty() {
            self.first_ts = h.first_ts;
        }
        self.next = h.next_offset();
        self.bytes += u64::from(h.length);
        self.last_ts = h.last_ts;
    }
}

/// A segment's sparse indexes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Indexes {
    /// (offset − base, byte position).
    pub offsets: Vec<(u32, u32)>,
    /// (first timestamp of the batch, offset − base).
    pub times: Vec<(u64, u32)>,
    /// Log bytes since the last entry.
    pub since_entry: u64,
}

impl Indexes {
    /// Notes a batch written at `position`.
    pub fn add(&mut self, meta: &SegmentMeta, position: u64, h: &Header) {
        if self.offsets.is_empty() || self.since_entry >= INDEX_INTERVAL_BYTES {
            let rel = (h.base_offset - meta.base) as u32;
            self.offsets.push((rel, position as u32));
            self.times.push((h.first_ts, rel));
            self.since_entry = 0;
        }
        self.since_entry += u64::from(h.length);
    }

    /// The byte position to start reading at for `offset`.
    pub fn position_for(&self, base: u64, offset: u64) -> u64 {
        let rel = offset.saturating_sub(base).min(u64::from(u32::MAX)) as u32;
        let i = self.offsets.partition_point(|&(o, _)| o <= rel);
        if i == 0 { 0 } else { u64::from(self.offsets[i - 1].1) }
    }

    /// A byte position from which the first record at or after `ts` can be found.
    pub fn position_for_time(&self, ts: u64) -> u64 {
        let i = self.times.partition_point(|&(t, _)| t < ts);
        if i == 0 {
            return 0;
        }
        let rel = self.times[i - 1].1;
        let j = self.offsets.partition_point(|&(o, _)| o <= rel);
        if j == 0 { 0 } else { u64::from(self.offsets[j - 1].1) }
    }
}

pub fn log_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.log"))
}
fn idx_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.idx"))
}
fn tix_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.tix"))
}

/// The base offsets of the segments in `dir`, in order.
pub fn list(dir: &Path) -> std::io::Result<Vec<u64>> {
    let mut bases = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if let Some(base) = name.strip_suffix(".log").and_then(|b| b.parse::<u64>().ok()) {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

fn index_bytes(magic: &[u8; 4], meta: &SegmentMeta, entries: &[(u64, u64)], wide_first: bool) -> Vec<u8> {
    let mut b = Vec::with_capacity(INDEX_HEADER_BYTES + entries.len() * 12 + 4);
    b.extend_from_slice(magic);
    b.extend_from_slice(&1u32.to_le_bytes());
    for v in [meta.base, meta.next, meta.bytes, meta.first_ts, meta.last_ts] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for &(a, c) in entries {
        if wide_first {
            b.extend_from_slice(&a.to_le_bytes());
        } else {
            b.extend_from_slice(&(a as u32).to_le_bytes());
        }
        b.extend_from_slice(&(c as u32).to_le_bytes());
    }
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = File::create(path)?;
    f.write_all(bytes)?;
    f.sync_data()
}

/// Writes a sealed segment's two index files, synced.
pub fn write_indexes(dir: &Path, meta: &SegmentMeta, ix: &Indexes) -> std::io::Result<()> {
    let offsets: Vec<(u64, u64)> = ix.offsets.iter().map(|&(o, p)| (u64::from(o), u64::from(p))).collect();
    let times: Vec<(u64, u64)> = ix.times.iter().map(|&(t, o)| (t, u64::from(o))).collect();
    write_synced(&idx_path(dir, meta.base), &index_bytes(IDX_MAGIC, meta, &offsets, false))?;
    write_synced(&tix_path(dir, meta.base), &index_bytes(TIX_MAGIC, meta, &times, true))
}

/// Reads one index file; `None` if it is missing or fails its checks.
fn read_index(path: &Path, magic: &[u8; 4], wide_first: bool) -> Option<(SegmentMeta, Vec<(u64, u64)>)> {
    let b = std::fs::read(path).ok()?;
    if b.len() < INDEX_HEADER_BYTES + 4 || &b[0..4] != magic {
        return None;
    }
    let (body, crc) = b.split_at(b.len() - 4);
    if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().ok()?) {
        return None;
    }
    let u64_at = |i: usize| u64::from_le_bytes(body[i..i + 8].try_into().expect("8 bytes"));
    let meta =
        SegmentMeta { base: u64_at(8), next: u64_at(16), bytes: u64_at(24), first_ts: u64_at(32), last_ts: u64_at(40) };
    let count = u32::from_le_bytes(body[48..52].try_into().ok()?) as usize;
    let width = if wide_first { 12 } else { 8 };
    if body.len() != INDEX_HEADER_BYTES + count * width {
        return None;
    }
    let entries = (0..count)
        .map(|i| {
            let at = INDEX_HEADER_BYTES + i * width;
            let a = if wide_first {
                u64_at(at)
            } else {
                u64::from(u32::from_le_bytes(body[at..at + 4].try_into().expect("4 bytes")))
            };
            let c = u32::from_le_bytes(body[at + width - 4..at + width].try_into().expect("4 bytes"));
            (a, u64::from(c))
        })
        .collect();
    Some((meta, entries))
}

/// A sealed segment's indexes from disk, if both are intact and describe a log of `log_bytes`.
pub fn load_indexes(dir: &Path, base: u64, log_bytes: u64) -> Option<(SegmentMeta, Indexes)> {
    let (meta, offsets) = read_index(&idx_path(dir, base), IDX_MAGIC, false)?;
    let (tmeta, times) = read_index(&tix_path(dir, base), TIX_MAGIC, true)?;
    if meta != tmeta || meta.base != base || meta.bytes != log_bytes {
        return None;
    }
    let ix = Indexes {
        offsets: offsets.into_iter().map(|(o, p)| (o as u32, p as u32)).collect(),
        times: times.into_iter().map(|(t, o)| (t, o as u32)).collect(),
        since_entry: 0,
    };
    Some((meta, ix))
}

pub fn remove(dir: &Path, base: u64) -> std::io::Result<()> {
    for path in [log_path(dir, base), idx_path(dir, base), tix_path(dir, base)] {
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// What a scan of a segment found.
pub struct Scan {
    pub meta: SegmentMeta,
    pub indexes: Indexes,
    /// Where the intact batches end, if something follows them that is not a batch.
    pub torn_at: Option<(u64, BadBatch)>,
}

/// Why a segment cannot be used: damage before its end.
#[derive(Debug)]
pub struct Damage {
    pub file: PathBuf,
    pub reason: String,
}

/// Reads `file` from the start, checking every batch. A bad batch followed by nothing that
/// reads as a batch is a torn tail (`torn_at`); one followed by a good batch is damage.
pub fn scan(path: &Path, base: u64) -> Result<Scan, Damage> {
    let damage = |reason: String| Damage { file: path.to_owned(), reason };
    let bytes = std::fs::read(path).map_err(|e| damage(format!("cannot be read: {e}")))?;
    let mut meta = SegmentMeta::empty(base);
    let mut indexes = Indexes::default();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let h = match format::check(&bytes[pos..]) {
            Ok(h) => h,
            Err(bad) => {
                if let Some(next) = find_batch(&bytes, pos + 1) {
                    return Err(damage(format!(
                        "the batch at byte {pos} cannot be read ({bad}), yet a complete batch follows at byte {next}"
                    )));
                }
                return Ok(Scan { meta, indexes, torn_at: Some((pos as u64, bad)) });
            }
        };
        if h.base_offset != meta.next {
            return Err(damage(format!(
                "the batch at byte {pos} starts at offset {}, but the one before ends at {}",
                h.base_offset, meta.next
            )));
        }
        if let Err(e) = format::records(&bytes[pos..], &h, 0, 0) {
            return Err(damage(format!("the batch at byte {pos} passes its CRC-32C but {e}")));
        }
        indexes.add(&meta, pos as u64, &h);
        meta.extend(&h);
        pos += h.length as usize;
    }
    Ok(Scan { meta, indexes, torn_at: None })
}

/// The position of the first complete, intact batch at or after `from`.
fn find_batch(bytes: &[u8], from: usize) -> Option<usize> {
    (from..bytes.len().saturating_sub(format::HEADER_BYTES - 1))
        .filter(|&i| &bytes[i..i + 4] == format::MAGIC)
        .find(|&i| format::check(&bytes[i..]).is_ok())
}

/// Reads batches of a segment from byte `position` up to `end`, calling `each` with every
/// intact batch until it returns false. A batch that fails its check is damage: an error naming
/// the file and byte, never wrong data.
pub fn read_batches(
    file: &File,
    path: &Path,
    mut position: u64,
    end: u64,
    mut each: impl FnMut(&[u8], &Header) -> Result<bool, BadBatch>,
) -> Result<(), Damage> {
    let damage =
        |at: u64, reason: String| Damage { file: path.to_owned(), reason: format!("the batch at byte {at}: {reason}") };
    let mut head = [0u8; format::HEADER_BYTES];
    let mut buf = Vec::new();
    while position < end {
        file.read_exact_at(&mut head, position).map_err(|e| damage(position, e.to_string()))?;
        let h = format::header(&head).map_err(|e| damage(position, e.to_string()))?;
        // A damaged length must not make the read allocate past the segment's end.
        if u64::from(h.length) > end - position {
            return Err(damage(position, format!("its length {} runs past the segment's end at {end}", h.length)));
        }
        buf.resize(h.length as usize, 0);
        file.read_exact_at(&mut buf, position).map_err(|e| damage(position, e.to_string()))?;
        let h = format::check(&buf).map_err(|e| damage(position, e.to_string()))?;
        match each(&buf, &h) {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(e) => return Err(damage(position, e.to_string())),
        }
        position += u64::from(h.length);
    }
    Ok(())
}
