//! The on-disk format of stream records: batches, each checked by a CRC-32C.
//!
//! A segment file is a sequence of batches; one writer turn writes one batch per partition it
//! appended to. Every integer is little-endian and of the stated size. A batch:
//!
//! ```text
//! offset  size  field
//!  0      4     magic "SLB1"
//!  4      4     length of the whole batch, header included
//!  8      4     CRC-32C of bytes 12..length
//! 12      1     format version (1)
//! 13      1     flags (bit 0: a record carries a dedup id)
//! 14      2     reserved, 0
//! 16      8     base offset (the first record's)
//! 24      4     record count
//! 28      8     first record's timestamp (ms since the epoch)
//! 36      8     last record's timestamp
//! 44            records
//! ```
//!
//! A record: offset delta `u32`, timestamp `u64`, flags `u8` (bit 0 body was base64, 1 key,
//! 2 type, 3 correlation id, 4 dedup id), then the key (`u32` length + bytes) if flagged, the
//! body (`u32` length + bytes), the headers (`u16` count, each `u16` name length + name, `u32`
//! value length + value), then `type`, `correlation_id` and `dedup_id` (`u16` length + UTF-8)
//! if flagged. Decoding checks every length against the batch's bounds, so a damaged batch is
//! refused, never misread.

use std::collections::BTreeMap;

use sluice_core::stream::{NewRecord, Record};

pub const MAGIC: &[u8; 4] = b"SLB1";
pub const VERSION: u8 = 1;
pub const HEADER_BYTES: usize = 44;
const FLAG_DEDUP: u8 = 1;

const R_BINARY: u8 = 1;
const R_KEY: u8 = 2;
const R_TYPE: u8 = 4;
const R_CORRELATION: u8 = 8;
const R_DEDUP: u8 = 16;

/// A batch's header, as read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub length: u32,
    pub crc: u32,
    pub flags: u8,
    pub base_offset: u64,
    pub count: u32,
    pub first_ts: u64,
    pub last_ts: u64,
}

impl Header {
    /// The offset after this batch's last record.
    pub fn next_offset(&self) -> u64 {
        self.base_offset + u64::from(self.count)
    }
}

/// Why bytes are not a batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadBatch {
    #[error("it ends after {have} of its {need} bytes")]
    Short { have: usize, need: usize },
    #[error("it has no batch magic")]
    Magic,
    #[error("its header is inconsistent ({0})")]
    Header(&'static str),
    #[error("it fails its CRC-32C (stored {stored:#010x}, computed {computed:#010x})")]
    Crc { stored: u32, computed: u32 },
    #[error("a record inside it is malformed ({0})")]
    Record(&'static str),
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"))
}

/// Reads a header from the start of `b` (at least `HEADER_BYTES`), checking what it can
/// without the body.
pub fn header(b: &[u8]) -> Result<Header, BadBatch> {
    if b.len() < HEADER_BYTES {
        return Err(BadBatch::Short { have: b.len(), need: HEADER_BYTES });
    }
    if &b[0..4] != MAGIC {
        return Err(BadBatch::Magic);
    }
    let h = Header {
        length: u32_at(b, 4),
        crc: u32_at(b, 8),
        flags: b[13],
        base_offset: u64_at(b, 16),
        count: u32_at(b, 24),
        first_ts: u64_at(b, 28),
        last_ts: u64_at(b, 36),
    };
    if b[12] != VERSION {
        return Err(BadBatch::Header("unknown version"));
    }
    if (h.length as usize) < HEADER_BYTES || h.count == 0 || h.first_ts > h.last_ts {
        return Err(BadBatch::Header("length, count or timestamps"));
    }
    Ok(h)
}

/// Checks a whole batch (`b` holds at least its length) and returns its header.
pub fn check(b: &[u8]) -> Result<Header, BadBatch> {
    let h = header(b)?;
    let len = h.length as usize;
    if b.len() < len {
        return Err(BadBatch::Short { have: b.len(), need: len });
    }
    let computed = crc32c::crc32c(&b[12..len]);
    if computed != h.crc {
        return Err(BadBatch::Crc { stored: h.crc, computed });
    }
    Ok(h)
}

/// Builds one batch record by record.
pub struct BatchWriter {
    buf: Vec<u8>,
    base_offset: u64,
    count: u32,
    first_ts: u64,
    last_ts: u64,
    flags: u8,
}

impl BatchWriter {
    pub fn new(base_offset: u64) -> BatchWriter {
        BatchWriter { buf: vec![0; HEADER_BYTES], base_offset, count: 0, first_ts: 0, last_ts: 0, flags: 0 }
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// The bytes [`BatchWriter::push`] adds for `r` (a stream's depth limit counts them before
    /// the record is staged).
    pub fn encoded_len(r: &NewRecord) -> u64 {
        let key = r.key.as_ref().map_or(0, |k| 4 + k.len());
        let headers: usize = r.headers.iter().map(|(name, value)| 2 + name.len() + 4 + value.len()).sum();
        let fields: usize =
            [&r.r#type, &r.correlation_id, &r.dedup_id].into_iter().flatten().map(|s| 2 + s.len()).sum();
        (4 + 8 + 1 + key + 4 + r.body.len() + 2 + headers + fields) as u64
    }

    /// Appends `r` as the next record (offset `base_offset + count`) at `ts`.
    pub fn push(&mut self, r: &NewRecord, ts: u64) {
        if self.count == 0 {
            self.first_ts = ts;
        }
        self.last_ts = ts;
        let b = &mut self.buf;
        b.extend_from_slice(&self.count.to_le_bytes());
        b.extend_from_slice(&ts.to_le_bytes());
        let mut flags = 0;
        for (on, bit) in [
            (r.body_binary, R_BINARY),
            (r.key.is_some(), R_KEY),
            (r.r#type.is_some(), R_TYPE),
            (r.correlation_id.is_some(), R_CORRELATION),
            (r.dedup_id.is_some(), R_DEDUP),
        ] {
            if on {
                flags |= bit;
            }
        }
        b.push(flags);
        if let Some(k) = &r.key {
            b.extend_from_slice(&(k.len() as u32).to_le_bytes());
            b.extend_from_slice(k);
        }
        b.extend_from_slice(&(r.body.len() as u32).to_le_bytes());
        b.extend_from_slice(&r.body);
        b.extend_from_slice(&(r.headers.len() as u16).to_le_bytes());
        for (name, value) in &r.headers {
            b.extend_from_slice(&(name.len() as u16).to_le_bytes());
            b.extend_from_slice(name.as_bytes());
            b.extend_from_slice(&(value.len() as u32).to_le_bytes());
            b.extend_from_slice(value.as_bytes());
        }
        for s in [&r.r#type, &r.correlation_id, &r.dedup_id].into_iter().flatten() {
            b.extend_from_slice(&(s.len() as u16).to_le_bytes());
            b.extend_from_slice(s.as_bytes());
        }
        if r.dedup_id.is_some() {
            self.flags |= FLAG_DEDUP;
        }
        self.count += 1;
    }

    /// The finished batch.
    pub fn finish(mut self) -> Vec<u8> {
        let len = self.buf.len() as u32;
        let b = &mut self.buf;
        b[0..4].copy_from_slice(MAGIC);
        b[4..8].copy_from_slice(&len.to_le_bytes());
        b[12] = VERSION;
        b[13] = self.flags;
        b[16..24].copy_from_slice(&self.base_offset.to_le_bytes());
        b[24..28].copy_from_slice(&self.count.to_le_bytes());
        b[28..36].copy_from_slice(&self.first_ts.to_le_bytes());
        b[36..44].copy_from_slice(&self.last_ts.to_le_bytes());
        let crc = crc32c::crc32c(&b[12..]);
        b[8..12].copy_from_slice(&crc.to_le_bytes());
        self.buf
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], BadBatch> {
        if self.b.len() - self.i < n {
            return Err(BadBatch::Record("a length runs past the batch"));
        }
        let s = &self.b[self.i..self.i + n];
        self.i += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, BadBatch> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, BadBatch> {
        Ok(u16_at(self.take(2)?, 0))
    }
    fn u32(&mut self) -> Result<u32, BadBatch> {
        Ok(u32_at(self.take(4)?, 0))
    }
    fn u64(&mut self) -> Result<u64, BadBatch> {
        Ok(u64_at(self.take(8)?, 0))
    }
    fn text(&mut self) -> Result<String, BadBatch> {
        let n = self.u16()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| BadBatch::Record("text that is not UTF-8"))
    }
}

/// The records of a checked batch, of `partition`, from offset `from` on.
pub fn records(b: &[u8], h: &Header, partition: u32, from: u64) -> Result<Vec<Record>, BadBatch> {
    let mut c = Cursor { b: &b[..h.length as usize], i: HEADER_BYTES };
    let mut out = Vec::new();
    for n in 0..h.count {
        let delta = c.u32()?;
        if delta != n {
            return Err(BadBatch::Record("offsets out of sequence"));
        }
        let timestamp_ms = c.u64()?;
        let flags = c.u8()?;
        let key = if flags & R_KEY != 0 {
            let len = c.u32()? as usize;
            Some(c.take(len)?.to_vec())
        } else {
            None
        };
        let len = c.u32()? as usize;
        let body = c.take(len)?;
        let mut headers = BTreeMap::new();
        for _ in 0..c.u16()? {
            let name = c.text()?;
            let len = c.u32()? as usize;
            let value =
                String::from_utf8(c.take(len)?.to_vec()).map_err(|_| BadBatch::Record("a header that is not UTF-8"))?;
            headers.insert(name, value);
        }
        let r#type = if flags & R_TYPE != 0 { Some(c.text()?) } else { None };
        let correlation_id = if flags & R_CORRELATION != 0 { Some(c.text()?) } else { None };
        let dedup_id = if flags & R_DEDUP != 0 { Some(c.text()?) } else { None };
        let offset = h.base_offset + u64::from(n);
        if offset >= from {
            out.push(Record {
                partition,
                offset,
                timestamp_ms,
                key,
                body: body.to_vec(),
                body_binary: flags & R_BINARY != 0,
                headers,
                r#type,
                correlation_id,
                dedup_id,
            });
        }
    }
    if c.i != c.b.len() {
        return Err(BadBatch::Record("bytes after the last record"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_len_is_what_push_adds() {
        let bare = NewRecord { body: b"x".to_vec(), ..Default::default() };
        let full = NewRecord {
            key: Some(b"key".to_vec()),
            body: vec![7; 300],
            body_binary: true,
            headers: [("a".to_string(), "b".to_string()), ("name".to_string(), "value".to_string())].into(),
            r#type: Some("t".into()),
            correlation_id: Some("c-1".into()),
            dedup_id: Some("d".into()),
            partition: None,
        };
        let mut w = BatchWriter::new(0);
        for r in [&bare, &full, &bare] {
            let before = w.len();
            w.push(r, 1);
            assert_eq!((w.len() - before) as u64, BatchWriter::encoded_len(r));
        }
        // Offset delta, timestamp, flags, body length, one body byte, no headers.
        assert_eq!(BatchWriter::encoded_len(&bare), 4 + 8 + 1 + 4 + 1 + 2);
        let records = 2 * BatchWriter::encoded_len(&bare) + BatchWriter::encoded_len(&full);
        assert_eq!(w.finish().len() as u64, HEADER_BYTES as u64 + records);
    }

    #[test]
    fn batches_round_trip_and_damage_is_refused() {
        let full = NewRecord {
            key: Some(vec![0, 255]),
            body: b"body".to_vec(),
            body_binary: true,
            headers: BTreeMap::from([("h".into(), "v".into())]),
            r#type: Some("t".into()),
            correlation_id: Some("c".into()),
            dedup_id: Some("d".into()),
            partition: None,
        };
        let mut w = BatchWriter::new(40);
        w.push(&full, 7);
        w.push(&NewRecord { body: b"x".to_vec(), ..Default::default() }, 9);
        let b = w.finish();
        let h = check(&b).unwrap();
        assert_eq!((h.base_offset, h.count, h.first_ts, h.last_ts, h.flags & FLAG_DEDUP), (40, 2, 7, 9, FLAG_DEDUP));
        let rs = records(&b, &h, 3, 0).unwrap();
        assert_eq!(rs.len(), 2);
        assert_eq!((rs[0].offset, rs[0].partition, &rs[0].key, &rs[0].dedup_id), (40, 3, &full.key, &full.dedup_id));
        assert_eq!((rs[1].offset, rs[1].timestamp_ms, rs[1].body.as_slice()), (41, 9, &b"x"[..]));
        assert_eq!(records(&b, &h, 3, 41).unwrap().len(), 1);
        for i in 0..b.len() {
            let mut bad = b.clone();
            bad[i] ^= 0x10;
            assert!(check(&bad).is_err(), "a flip at byte {i} was not caught");
        }
        assert!(matches!(check(&b[..b.len() - 1]), Err(BadBatch::Short { .. })));
    }
}
