//! A check of fjall's journal files before fjall replays them, for the damage fjall would
//! otherwise pass over in silence.
//!
//! fjall 3 replays its journals batch by batch and, at the first entry it cannot decode, cuts
//! the file there and carries on: the right thing for the one batch a crash left half written
//! at the end, and the wrong thing for a damaged byte in the middle, where it would drop every
//! later batch (acknowledged sends among them) without a word. It also trusts each batch's
//! sequence number, which no checksum covers. So before opening, Sluice reads every journal
//! itself and refuses to start, naming the file and the byte, when
//! - a batch that cannot be read is followed by a batch that can (damage in the middle),
//! - a sealed (older) journal has anything unreadable at all (they are synced in full before
//!   the next one is started, so a crash cannot tear them),
//! - a complete batch fails its checksum or holds the wrong number of entries,
//! - sequence numbers do not increase from batch to batch.
//!
//! A batch cut short at the very end of the newest journal is a crash in the middle of a
//! write, which in `fsync` mode was never acknowledged; fjall discards it and so do we.
//!
//! The format read here is fjall 3's (`fjall/src/journal/entry.rs`): a batch is `Start`
//! (tag 1, item count u32, seqno u64), then its items (tag 2: value type u8, compression u8,
//! keyspace u64, key length u16, value length u32, stored value length u32, key, value) or
//! keyspace clears (tag 4, keyspace u64), then `End` (tag 3, xxh3 of the items u64, `FJL\x03`).
//! Integers are little-endian. `tests::reads_what_fjall_writes` fails if fjall changes it.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

const TAG_START: u8 = 1;
const TAG_ITEM: u8 = 2;
const TAG_END: u8 = 3;
const TAG_CLEAR: u8 = 4;
const ITEM_HEADER_BYTES: usize = 21;
const CLEAR_BYTES: usize = 9;
const TRAILER_MAGIC: &[u8; 4] = b"FJL\x03";
/// Value types fjall writes to its journal: value, tombstone, weak tombstone.
const VALUE_TYPE_MAX: u8 = 2;
/// Compression types: none, lz4.
const COMPRESSION_MAX: u8 = 1;
/// How much of a file is read at a time while looking for its last non-zero byte.
const TAIL_CHUNK_BYTES: u64 = 1 << 20;
/// How much of a journal is read at a time while checking its batches.
const READ_CHUNK_BYTES: u64 = 4 << 20;

/// What the check found in good order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Audit {
    pub journals: usize,
    pub batches: u64,
    /// A batch cut short at the end of the newest journal, which fjall will discard:
    /// (file, byte where it starts).
    pub torn_tail: Option<(PathBuf, u64)>,
}

/// Damage that must stop the start: the file and what is wrong at which byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub file: PathBuf,
    pub reason: String,
}

/// The number of a journal file (`7.jnl` is 7); `None` for any other file. fjall names each
/// new journal one more than the last, so the highest number is the journal being written.
pub fn journal_id(path: &Path) -> Option<u64> {
    path.file_name()?.to_str()?.strip_suffix(".jnl")?.parse().ok()
}

/// Checks every `*.jnl` file directly inside `data_dir` (where fjall 3 keeps them).
pub fn audit(data_dir: &Path) -> Result<Audit, Damage> {
    let mut journals = Vec::new();
    let entries = match std::fs::read_dir(data_dir) {
        Ok(entries) => entries,
        // A new data directory: nothing to check yet.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Audit::default()),
        Err(e) => return Err(Damage { file: data_dir.to_owned(), reason: format!("cannot list it: {e}") }),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Damage { file: data_dir.to_owned(), reason: format!("cannot list it: {e}") })?;
        let path = entry.path();
        let Some(id) = journal_id(&path) else { continue };
        journals.push((id, path));
    }
    journals.sort();
    let mut audit = Audit { journals: journals.len(), ..Audit::default() };
    let mut last_seqno: Option<(u64, PathBuf, u64)> = None;
    let newest = journals.len().saturating_sub(1);
    for (index, (_, path)) in journals.iter().enumerate() {
        let damage = |reason: String| Damage { file: path.clone(), reason };
        let scan = scan_file(path).map_err(|e| damage(format!("cannot read it: {e}")))?;
        for &(offset, seqno) in &scan.batches {
            if let Some((previous, ref previous_file, previous_offset)) = last_seqno
                && seqno <= previous
            {
                let place = if previous_file == path {
                    format!("byte {previous_offset}")
                } else {
                    format!("byte {previous_offset} of {}", previous_file.display())
                };
                return Err(damage(format!(
                    "sequence numbers go backwards from {previous} (the batch at {place}) to {seqno} (the batch at byte {offset}); one of the two is damaged, and a damaged sequence number would let older writes win over newer ones"
                )));
            }
            last_seqno = Some((seqno, path.clone(), offset));
        }
        audit.batches += scan.batches.len() as u64;
        let Some(stop) = scan.stop else { continue };
        if let Some(hard) = stop.hard {
            return Err(damage(format!("the batch at byte {} {hard}", stop.offset)));
        }
        if let Some(later) = scan.later_valid_batch {
            return Err(damage(format!(
                "the batch at byte {} cannot be read ({}), yet a complete batch follows at byte {later}: the damage is in the middle of the journal, and starting would silently drop every batch after it",
                stop.offset, stop.reason
            )));
        }
        if index != newest {
            return Err(damage(format!(
                "the batch at byte {} cannot be read ({}); this journal was sealed and synced whole, so this is damage, not a write cut short by a crash",
                stop.offset, stop.reason
            )));
        }
        audit.torn_tail = Some((path.clone(), stop.offset));
    }
    Ok(audit)
}

/// Where reading a file's batches stopped before its data ended.
struct Stop {
    offset: u64,
    /// Why the bytes there are not a batch.
    reason: String,
    /// Set when the batch is complete but wrong (checksum, count): never a torn write.
    hard: Option<String>,
}

struct FileScan {
    /// (offset, seqno) of every readable batch, in order.
    batches: Vec<(u64, u64)>,
    stop: Option<Stop>,
    /// Offset of a readable batch somewhere after `stop`.
    later_valid_batch: Option<u64>,
}

/// Reads the batches of one journal file from the start. The file may run on with zeros
/// (fjall preallocates journals); the data ends at the last non-zero byte. The file is read
/// in chunks of `READ_CHUNK_BYTES`, more when one batch is larger.
fn scan_file(path: &Path) -> std::io::Result<FileScan> {
    let mut file = File::open(path)?;
    let data_end = last_non_zero(&mut file)?;
    file.seek(SeekFrom::Start(0))?;
    let mut file = file.take(data_end);
    // `buf` holds the file from byte `buf_offset`; `at` is the next batch's place in it.
    let (mut buf, mut buf_offset, mut at) = (Vec::new(), 0u64, 0usize);
    let mut batches = Vec::new();
    loop {
        let offset = buf_offset + at as u64;
        if offset >= data_end {
            return Ok(FileScan { batches, stop: None, later_valid_batch: None });
        }
        match read_batch(&buf[at..]) {
            Ok((len, seqno)) => {
                batches.push((offset, seqno));
                at += len;
            }
            Err(Bad::Ends(_)) if buf_offset + (buf.len() as u64) < data_end => {
                // Keep the unread rest, and read at least as much again.
                buf.drain(..at);
                buf_offset = offset;
                at = 0;
                let more = (buf.len() as u64).max(READ_CHUNK_BYTES);
                (&mut file).take(more).read_to_end(&mut buf)?;
            }
            Err(Bad::Ends(reason)) | Err(Bad::Broken(reason)) => {
                // Not a batch here: look for a complete batch anywhere after it. Only this
                // rare path holds the rest of the file in memory.
                file.read_to_end(&mut buf)?;
                let rest = &buf[at..];
                let later_valid_batch = (1..rest.len())
                    .find(|&i| rest[i] == TAG_START && read_batch(&rest[i..]).is_ok())
                    .map(|i| offset + i as u64);
                return Ok(FileScan { batches, stop: Some(Stop { offset, reason, hard: None }), later_valid_batch });
            }
            Err(Bad::Wrong(reason)) => {
                let stop = Stop { offset, reason: reason.clone(), hard: Some(reason) };
                return Ok(FileScan { batches, stop: Some(stop), later_valid_batch: None });
            }
        }
    }
}

/// Why the bytes at an offset are not a batch.
enum Bad {
    /// The data ends inside the batch: what a crash in the middle of a write leaves.
    Ends(String),
    /// Bytes that are not a batch's structure (an unknown tag, a bad trailer).
    Broken(String),
    /// A batch that is complete but wrong: its checksum or item count does not match.
    Wrong(String),
}

/// A cursor over bytes in memory.
struct Cursor<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], Bad> {
        let bytes = self
            .data
            .get(self.at..self.at.saturating_add(len))
            .ok_or_else(|| Bad::Ends("the data ends inside it".into()))?;
        self.at += len;
        Ok(bytes)
    }

    fn byte(&mut self) -> Result<u8, Bad> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, Bad> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    fn u64(&mut self) -> Result<u64, Bad> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
}

/// Reads one whole batch from the start of `data` and checks it; returns its length and
/// sequence number.
fn read_batch(data: &[u8]) -> Result<(usize, u64), Bad> {
    let mut r = Cursor { data, at: 0 };
    let tag = r.byte()?;
    if tag != TAG_START {
        return Err(Bad::Broken(format!("it starts with byte {tag:#04x}, not a batch start")));
    }
    let count = r.u32()?;
    let seqno = r.u64()?;
    let mut hasher = xxhash_rust::xxh3::Xxh3::default();
    let mut items = 0u32;
    loop {
        let entry_start = r.at;
        match r.byte()? {
            TAG_ITEM => {
                let header = r.take(ITEM_HEADER_BYTES - 1)?;
                let (value_type, compression) = (header[0], header[1]);
                if value_type > VALUE_TYPE_MAX {
                    return Err(Bad::Broken(format!("item {items} has value type {value_type}")));
                }
                if compression > COMPRESSION_MAX {
                    return Err(Bad::Broken(format!("item {items} has compression type {compression}")));
                }
                let key_len = u16::from_le_bytes([header[10], header[11]]) as usize;
                let stored_len = u32::from_le_bytes([header[16], header[17], header[18], header[19]]) as usize;
                r.take(key_len + stored_len)?;
                hasher.update(&data[entry_start..r.at]);
                items += 1;
            }
            TAG_CLEAR => {
                r.take(CLEAR_BYTES - 1)?;
                hasher.update(&data[entry_start..r.at]);
                items += 1;
            }
            TAG_END => {
                let checksum = r.u64()?;
                if r.take(TRAILER_MAGIC.len())? != TRAILER_MAGIC {
                    return Err(Bad::Broken("its end marker has a damaged trailer".into()));
                }
                if items != count {
                    return Err(Bad::Wrong(format!("(sequence {seqno}) announces {count} entries but holds {items}")));
                }
                if hasher.digest() != checksum {
                    return Err(Bad::Wrong(format!(
                        "(sequence {seqno}) fails its checksum: its contents changed after they were written"
                    )));
                }
                return Ok((r.at, seqno));
            }
            other => return Err(Bad::Broken(format!("entry {items} has tag {other:#04x}"))),
        }
        if items > count {
            return Err(Bad::Wrong(format!("(sequence {seqno}) announces {count} entries but holds more")));
        }
    }
}

/// The length of the file up to its last non-zero byte.
fn last_non_zero(file: &mut File) -> std::io::Result<u64> {
    let mut end = file.metadata()?.len();
    let mut buf = vec![0u8; TAIL_CHUNK_BYTES as usize];
    while end > 0 {
        let start = end.saturating_sub(TAIL_CHUNK_BYTES);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b != 0) {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `batches` single-item batches through fjall and returns the journal's path.
    fn journal_with(dir: &Path, batches: u32) -> PathBuf {
        let db = fjall::Database::builder(dir).manual_journal_persist(true).open().unwrap();
        let ks = db.keyspace("k", fjall::KeyspaceCreateOptions::default).unwrap();
        for i in 0..batches {
            let mut batch = db.batch();
            batch.insert(&ks, i.to_be_bytes(), format!("value {i}").repeat(3));
            batch.insert(&ks, (i + 1_000).to_be_bytes(), b"second");
            batch.durability(Some(fjall::PersistMode::SyncData)).commit().unwrap();
        }
        drop(ks);
        drop(db);
        let mut journals: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jnl"))
            .collect();
        journals.sort();
        journals.pop().expect("a journal")
    }

    /// Offsets of the batch starts in a journal written by `journal_with`.
    fn batch_offsets(path: &Path) -> Vec<u64> {
        scan_file(path).unwrap().batches.iter().map(|&(o, _)| o).collect()
    }

    #[test]
    fn reads_what_fjall_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = journal_with(dir.path(), 20);
        let audit = audit(dir.path()).expect("an intact journal");
        assert_eq!(audit.journals, 1);
        assert!(audit.batches >= 20, "{audit:?}");
        assert_eq!(audit.torn_tail, None);
        // Every batch was read, up to the zeros fjall preallocates.
        let scan = scan_file(&path).unwrap();
        assert!(scan.stop.is_none());
        let seqnos: Vec<u64> = scan.batches.iter().map(|&(_, s)| s).collect();
        assert!(seqnos.windows(2).all(|w| w[0] < w[1]), "{seqnos:?}");
    }

    #[test]
    fn a_torn_last_batch_is_tolerated_and_fjall_drops_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = journal_with(dir.path(), 10);
        let last = *batch_offsets(&path).last().unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(last + 20).unwrap();
        let audit = audit(dir.path()).expect("a torn tail is not damage");
        assert_eq!(audit.torn_tail, Some((path.clone(), last)));
        // fjall agrees: it opens and has every batch but the torn one.
        let db = fjall::Database::builder(dir.path()).open().unwrap();
        let ks = db.keyspace("k", fjall::KeyspaceCreateOptions::default).unwrap();
        assert!(ks.get(8u32.to_be_bytes()).unwrap().is_some());
        assert!(ks.get(9u32.to_be_bytes()).unwrap().is_none());
    }

    #[test]
    fn damage_in_the_middle_is_refused_with_file_and_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = journal_with(dir.path(), 10);
        let third = batch_offsets(&path)[3];
        let mut bytes = std::fs::read(&path).unwrap();
        // The start tag of a batch in the middle: fjall would cut the journal here.
        bytes[third as usize] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let damage = audit(dir.path()).unwrap_err();
        assert_eq!(damage.file, path);
        assert!(damage.reason.contains(&format!("byte {third}")), "{}", damage.reason);
        assert!(damage.reason.contains("middle"), "{}", damage.reason);
    }

    /// Why the check exists: fjall alone opens such a journal without an error and without
    /// the batches after the damage. If this starts failing, fjall has learnt to refuse, and
    /// the check can be reconsidered.
    #[test]
    fn fjall_alone_drops_the_batches_after_damage_in_the_middle() {
        let dir = tempfile::tempdir().unwrap();
        let path = journal_with(dir.path(), 10);
        let third = batch_offsets(&path)[3];
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[third as usize] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let db = fjall::Database::builder(dir.path()).open().expect("fjall opens it");
        let ks = db.keyspace("k", fjall::KeyspaceCreateOptions::default).unwrap();
        assert!(ks.get(1u32.to_be_bytes()).unwrap().is_some());
        assert!(ks.get(9u32.to_be_bytes()).unwrap().is_none(), "the later batches are gone");
    }

    #[test]
    fn a_changed_value_fails_the_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let path = journal_with(dir.path(), 10);
        let last = *batch_offsets(&path).last().unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        // Inside the first item's value of the last batch: even the last batch is refused,
        // because a complete batch with a wrong checksum is not a torn write.
        // A batch start is 13 bytes; the item's key (4 bytes here) follows its header.
        bytes[last as usize + 13 + ITEM_HEADER_BYTES + 4 + 2] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let damage = audit(dir.path()).unwrap_err();
        assert!(damage.reason.contains("checksum"), "{}", damage.reason);
    }

    #[test]
    fn a_damaged_sequence_number_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = journal_with(dir.path(), 10);
        let fifth = batch_offsets(&path)[5];
        let mut bytes = std::fs::read(&path).unwrap();
        // The high byte of the sequence number: no checksum covers it.
        bytes[fifth as usize + 12] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();
        let damage = audit(dir.path()).unwrap_err();
        assert!(damage.reason.contains("sequence number"), "{}", damage.reason);
    }

    #[test]
    fn an_empty_or_missing_directory_has_nothing_to_check() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(audit(&dir.path().join("missing")), Ok(Audit::default()));
        assert_eq!(audit(dir.path()), Ok(Audit::default()));
    }
}
