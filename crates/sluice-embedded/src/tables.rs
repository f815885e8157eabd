//! Checks fjall's table and version files, and names the damaged one.
//!
//! Two uses. At every open, after fjall opened the data directory, [`check_structure`]
//! checks each table's table of contents and its index, filter and metadata blocks (a small
//! part of a table, read by fjall at open or on the first lookup anyway): damage there makes
//! every body of the table unreadable although the bodies are intact, so the store refuses to
//! start, naming the file, rather than start without them. Data blocks are not read at open
//! (bodies stay on disk); a damaged one costs the messages whose bodies it holds, each named
//! in the log when a receive takes it. And when fjall refuses to open over a checksum, its
//! error says what failed but not where: [`locate_damage`] checks everything, data blocks
//! included, and names the first damaged file.
//!
//! The format is fjall 3's (through `lsm-tree`). Each file is an `sfa` archive (sections listed in a checksummed table of contents
//! at the end); a table's sections are runs of blocks, each a 33-byte header (`LSM\x03`, block
//! type u8, xxh3-128 of the data u128, stored length u32, uncompressed length u32, low 32 bits
//! of the xxh3-128 of the 29 bytes before) followed by the data (`lsm-tree`'s
//! `table/block/header.rs`). Little-endian throughout.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

const BLOCK_MAGIC: &[u8; 4] = b"LSM\x03";
const BLOCK_HEADER_BYTES: usize = 33;
const BLOCK_TYPE_MAX: u8 = 3;
/// The sections of a table made of blocks (`linked_blob_files` is not).
const BLOCK_SECTIONS: [&[u8]; 6] = [b"data", b"index", b"tli", b"filter", b"filter_tli", b"meta"];

/// The first table or version file under `data_dir/keyspaces` whose table of contents, index,
/// filter or metadata blocks are damaged, and what is wrong.
pub fn check_structure(data_dir: &Path) -> Option<(PathBuf, String)> {
    first_damage(data_dir, false)
}

/// The first damaged table or version file under `data_dir/keyspaces`, data blocks included.
pub fn locate_damage(data_dir: &Path) -> Option<(PathBuf, String)> {
    first_damage(data_dir, true)
}

fn first_damage(data_dir: &Path, with_data: bool) -> Option<(PathBuf, String)> {
    let mut files = Vec::new();
    for keyspace in std::fs::read_dir(data_dir.join("keyspaces")).ok()?.flatten() {
        let dir = keyspace.path();
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = entry.file_name();
            if name.to_str().is_some_and(|n| n.starts_with('v') && n[1..].parse::<u64>().is_ok()) {
                files.push((entry.path(), false));
            }
        }
        for table in std::fs::read_dir(dir.join("tables")).into_iter().flatten().flatten() {
            files.push((table.path(), true));
        }
    }
    files.sort();
    files.into_iter().find_map(|(path, is_table)| match check_file(&path, is_table, with_data) {
        Ok(()) => None,
        // Compaction may remove a file between the listing and the check.
        Err(_) if !path.exists() => None,
        Err(reason) => Some((path, reason)),
    })
}

fn check_file(path: &Path, is_table: bool, with_data: bool) -> Result<(), String> {
    let archive = sfa::Reader::new(path).map_err(|e| format!("its table of contents cannot be read: {e:?}"))?;
    if !is_table {
        return Ok(());
    }
    let mut file = File::open(path).map_err(|e| format!("cannot read it: {e}"))?;
    let mut sections: Vec<(u64, u64)> = archive
        .toc()
        .iter()
        .filter(|entry| BLOCK_SECTIONS.contains(&entry.name()) && (with_data || entry.name() != b"data"))
        .map(|entry| (entry.pos(), entry.pos() + entry.len()))
        .collect();
    // Data blocks run from the start of the file to the first other section when the table
    // of contents does not list them.
    if with_data
        && archive.toc().section(b"data").is_none()
        && let Some(first) = archive.toc().iter().map(|e| e.pos()).min()
    {
        sections.push((0, first));
    }
    for (start, end) in sections {
        check_blocks(&mut file, start, end)?;
    }
    Ok(())
}

/// Checks every block header and block checksum in `[start, end)`.
fn check_blocks(file: &mut File, start: u64, end: u64) -> Result<(), String> {
    let mut at = start;
    let mut header = [0u8; BLOCK_HEADER_BYTES];
    let mut data = Vec::new();
    while at < end {
        let io = |e: std::io::Error| format!("the block at byte {at} cannot be read: {e}");
        file.seek(SeekFrom::Start(at)).map_err(io)?;
        file.read_exact(&mut header).map_err(io)?;
        let header_sum = u32::from_le_bytes(header[29..33].try_into().expect("4 bytes"));
        if &header[..4] != BLOCK_MAGIC || header[4] > BLOCK_TYPE_MAX {
            return Err(format!("the block at byte {at} has a damaged header"));
        }
        if xxhash_rust::xxh3::xxh3_128(&header[..29]) as u32 != header_sum {
            return Err(format!("the header of the block at byte {at} fails its checksum"));
        }
        let data_sum = u128::from_le_bytes(header[5..21].try_into().expect("16 bytes"));
        let len = u32::from_le_bytes(header[21..25].try_into().expect("4 bytes")) as usize;
        if at + (BLOCK_HEADER_BYTES + len) as u64 > end {
            return Err(format!("the block at byte {at} runs past its section"));
        }
        data.resize(len, 0);
        file.read_exact(&mut data).map_err(io)?;
        if xxhash_rust::xxh3::xxh3_128(&data) != data_sum {
            return Err(format!("the block at byte {at} fails its checksum"));
        }
        at += (BLOCK_HEADER_BYTES + len) as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A data directory with tables, written and flushed by fjall.
    fn flushed(dir: &Path) {
        let db = fjall::Database::builder(dir).open().unwrap();
        let ks = db.keyspace("k", fjall::KeyspaceCreateOptions::default).unwrap();
        for i in 0..2_000u32 {
            ks.insert(i.to_be_bytes(), format!("value number {i}").repeat(10)).unwrap();
        }
        ks.rotate_memtable_and_wait().unwrap();
    }

    fn tables(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for keyspace in std::fs::read_dir(dir.join("keyspaces")).unwrap().flatten() {
            out.extend(
                std::fs::read_dir(keyspace.path().join("tables")).into_iter().flatten().flatten().map(|e| e.path()),
            );
        }
        out
    }

    #[test]
    fn the_structure_check_finds_damage_outside_the_data_blocks_only() {
        let dir = tempfile::tempdir().unwrap();
        flushed(dir.path());
        assert_eq!(check_structure(dir.path()), None);
        let table = tables(dir.path()).into_iter().max_by_key(|p| std::fs::metadata(p).unwrap().len()).unwrap();
        let pristine = std::fs::read(&table).unwrap();
        let archive = sfa::Reader::new(&table).unwrap();
        let data = archive.toc().section(b"data").expect("a data section");
        let index = archive.toc().section(b"tli").expect("an index");
        for (offset, found) in [(data.pos() as usize + 100, false), (index.pos() as usize + 40, true)] {
            let mut bytes = pristine.clone();
            bytes[offset] ^= 0x01;
            std::fs::write(&table, &bytes).unwrap();
            assert_eq!(check_structure(dir.path()).is_some(), found, "byte {offset}");
            assert!(locate_damage(dir.path()).is_some(), "byte {offset}");
        }
    }

    #[test]
    fn finds_nothing_in_intact_tables_and_the_flipped_byte_in_a_damaged_one() {
        let dir = tempfile::tempdir().unwrap();
        flushed(dir.path());
        assert_eq!(locate_damage(dir.path()), None);
        let table = tables(dir.path()).into_iter().max_by_key(|p| std::fs::metadata(p).unwrap().len()).unwrap();
        let pristine = std::fs::read(&table).unwrap();
        // Bytes all over the file, densely in its last 2 KiB (index, filter, meta, table of
        // contents), each in a fresh copy: wherever the damage is, this file is named. The
        // last 8 bytes are the archive's table-of-contents length, which no reader uses.
        let end = pristine.len() - 8;
        for offset in (0..end).step_by(997).chain((end - 2048..end).step_by(7)) {
            let mut bytes = pristine.clone();
            bytes[offset] ^= 0x08;
            std::fs::write(&table, &bytes).unwrap();
            let found = locate_damage(dir.path());
            assert_eq!(found.as_ref().map(|(p, _)| p), Some(&table), "byte {offset} of {}", pristine.len());
        }
    }
}
