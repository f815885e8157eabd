//! Torn and corrupted stream segment files: records are appended one request each (so each is
//! one batch), the server is SIGKILLed, a copy of its data directory is damaged, and the server
//! is started on it. It must either start and serve, byte-exact, every record the damage did
//! not destroy (all those before it), never a wrong one, or refuse to start naming the file.
//!
//! - `torn_segment_tails_keep_every_earlier_batch`: the active segment cut at a random byte;
//!   the server starts with exactly the records whose batch ends before the cut.
//! - `flipped_active_segment_bytes_are_refused_or_cut_at_the_end`: a byte of the active segment
//!   flipped: in its last batch, that batch is cut as a torn tail (it cannot be told from one);
//!   anywhere before, the server refuses to start, naming the file.
//! - `flipped_sealed_segment_bytes_are_never_served`: a byte of a sealed segment flipped (sealed
//!   segments are trusted at start by their checksummed indexes, so restarts stay fast): the
//!   server starts, every record before the damaged batch is served, and the damaged batch is
//!   refused (503) whenever read, never served wrong.
//! - `damaged_indexes_are_rebuilt`: an index file damaged or removed is rebuilt from its
//!   segment; every record is served.
//!
//! `SLUICE_CORRUPTION_SEED` fixes the first seed and `SLUICE_CORRUPTION_CASES` the cases per
//! test (default 4): `SLUICE_CORRUPTION_CASES=100 cargo test -p sluice --release --test
//! corruption_streams -- --nocapture`.

mod torture;

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sluice_api::{AppendRecord, CreateStreamRequest};
use sluice_client::streams::From;
use torture::{body_sized, payload_of};

const STREAM: &str = "c";
/// Records appended at least; then more until the active segment holds `ACTIVE_BATCHES_MIN`.
const RECORDS_MIN: usize = 200;
const ACTIVE_BATCHES_MIN: usize = 10;

fn cases() -> u64 {
    std::env::var("SLUICE_CORRUPTION_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(4)
}

fn first_seed() -> u64 {
    std::env::var("SLUICE_CORRUPTION_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().r#gen())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
}

struct Fixture {
    dir: tempfile::TempDir,
    bodies: Vec<String>,
}

/// At least 200 records of 150–400 bytes, one append each, in 8 KiB segments, until the active
/// segment holds at least 10 batches; then SIGKILL.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let server = torture::start(&data, "info");
    let c = server.client();
    let bodies = runtime().block_on(async {
        let request = CreateStreamRequest { name: STREAM.into(), segment_bytes: Some(8_192), ..Default::default() };
        c.create_stream(&request).await.expect("create");
        let mut bodies = Vec::new();
        for i in 0.. {
            if i >= RECORDS_MIN {
                let active = segments(&data).pop().expect("an active segment");
                if batches(&active).len() >= ACTIVE_BATCHES_MIN {
                    break;
                }
            }
            let body = body_sized(&format!("r{i:04}"), 150 + (i * 37) % 250);
            let record = AppendRecord { body: Some(body.clone()), ..Default::default() };
            let r = c.append(STREAM, vec![record]).await.expect("append");
            assert_eq!(r[0].offset, Some(i as u64));
            bodies.push(body);
        }
        bodies
    });
    server.kill();
    Fixture { dir, bodies }
}

/// The segment files of partition 0, oldest first.
fn segments(data: &Path) -> Vec<PathBuf> {
    let streams = data.join("streams");
    let id = std::fs::read_dir(&streams).expect("streams").flatten().next().expect("a stream").path();
    let mut logs: Vec<PathBuf> = std::fs::read_dir(id.join("0"))
        .expect("partition")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs
}

/// Byte ranges of the batches of a segment file.
fn batches(file: &Path) -> Vec<(usize, usize)> {
    let bytes = std::fs::read(file).expect("segment");
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 8 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().unwrap()) as usize;
        out.push((pos, pos + len));
        pos += len;
    }
    out
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read dir").flatten() {
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &target)
        } else {
            std::fs::copy(e.path(), &target).map(|_| ()).expect("copy")
        }
    }
}

fn damaged_copy(f: &Fixture) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    copy_dir(&f.dir.path().join("data"), &data);
    (dir, data)
}

/// What a read of every offset gave: the record's body, or the error status.
fn read_each(server: &torture::Serve, count: usize) -> Vec<Result<String, Option<u16>>> {
    let c = server.client();
    runtime().block_on(async {
        let mut out = Vec::new();
        for o in 0..count as u64 {
            out.push(match c.read_records(STREAM, 0, From::Offset(o), 1, 0).await {
                Ok(b) => b.records.first().filter(|r| r.offset == o).and_then(|r| r.body.clone()).ok_or(None),
                Err(e) => Err(e.status()),
            });
        }
        out
    })
}

/// A segment's base offset, from its file name. Records are one per batch, so the base plus a
/// batch's index in the file is that batch's record's offset.
fn base_of(file: &Path) -> usize {
    file.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse().ok()).expect("a segment's base offset")
}

#[test]
fn torn_segment_tails_keep_every_earlier_batch() {
    let f = fixture();
    let seed = first_seed();
    for case in 0..cases() {
        let mut rng = StdRng::seed_from_u64(seed + case);
        let (_dir, data) = damaged_copy(&f);
        let active = segments(&data).pop().expect("an active segment");
        let base = base_of(&active);
        let len = std::fs::metadata(&active).expect("meta").len() as usize;
        let cut = rng.gen_range(0..len.max(1));
        let whole = batches(&active).iter().filter(|(_, end)| *end <= cut).count();
        std::fs::OpenOptions::new().write(true).open(&active).expect("open").set_len(cut as u64).expect("cut");
        let server = torture::spawn(&data, "info")
            .wait_started()
            .unwrap_or_else(|r| panic!("seed {}: refused a torn tail: {}", seed + case, r.log));
        let expected = base + whole;
        let got = read_each(&server, f.bodies.len());
        for (o, r) in got.iter().enumerate() {
            if o < expected {
                assert_eq!(r.as_ref().ok(), Some(&f.bodies[o]), "seed {}: record {o} before the cut", seed + case);
            } else {
                assert!(r.is_err(), "seed {}: record {o} after the cut at byte {cut} was served", seed + case);
            }
        }
        println!("torn tail: {} cut at byte {cut}: {expected} of {} records kept", active.display(), f.bodies.len());
    }
}

#[test]
fn flipped_active_segment_bytes_are_refused_or_cut_at_the_end() {
    let f = fixture();
    let seed = first_seed();
    let (mut refused, mut cut) = (0, 0);
    for case in 0..cases() {
        let mut rng = StdRng::seed_from_u64(seed + case);
        let (_dir, data) = damaged_copy(&f);
        let active = segments(&data).pop().expect("an active segment");
        let base = base_of(&active);
        let ranges = batches(&active);
        // Half of the cases in the last batch, half anywhere.
        let len = ranges.last().map_or(0, |r| r.1);
        let at = if case % 2 == 0 { rng.gen_range(ranges.last().unwrap().0..len) } else { rng.gen_range(0..len) };
        let batch = ranges.iter().position(|(s, e)| (*s..*e).contains(&at)).expect("in a batch");
        let mut bytes = std::fs::read(&active).expect("read");
        bytes[at] ^= rng.gen_range(1..=255u8);
        std::fs::write(&active, &bytes).expect("write");
        match torture::spawn(&data, "info").wait_started() {
            Ok(server) => {
                assert_eq!(
                    batch,
                    ranges.len() - 1,
                    "seed {}: started with damage at byte {at} before the last batch",
                    seed + case
                );
                let got = read_each(&server, f.bodies.len());
                for (o, r) in got.iter().enumerate().take(base + batch) {
                    assert_eq!(r.as_ref().ok(), Some(&f.bodies[o]), "seed {}: record {o}", seed + case);
                }
                assert!(
                    got[base + batch..].iter().all(Result::is_err),
                    "seed {}: the damaged last batch was served",
                    seed + case
                );
                cut += 1;
            }
            Err(r) => {
                let named = active.to_str().expect("UTF-8");
                assert!(
                    r.log.contains("is damaged") && r.log.contains(named),
                    "seed {}: the refusal names no file:\n{}",
                    seed + case,
                    r.log
                );
                refused += 1;
            }
        }
    }
    println!(
        "flipped active segments: {} cases, {refused} refused naming the file, {cut} cut the damaged last batch",
        cases()
    );
}

#[test]
fn flipped_sealed_segment_bytes_are_never_served() {
    let f = fixture();
    let seed = first_seed();
    for case in 0..cases() {
        let mut rng = StdRng::seed_from_u64(seed + case);
        let (_dir, data) = damaged_copy(&f);
        let mut all = segments(&data);
        all.pop();
        let sealed = all[rng.gen_range(0..all.len())].clone();
        let base = base_of(&sealed);
        let ranges = batches(&sealed);
        let at = rng.gen_range(0..ranges.last().unwrap().1);
        let batch = ranges.iter().position(|(s, e)| (*s..*e).contains(&at)).expect("in a batch");
        let mut bytes = std::fs::read(&sealed).expect("read");
        bytes[at] ^= rng.gen_range(1..=255u8);
        std::fs::write(&sealed, &bytes).expect("write");
        let server = torture::spawn(&data, "info")
            .wait_started()
            .unwrap_or_else(|r| panic!("seed {}: refused: {}", seed + case, r.log));
        let got = read_each(&server, f.bodies.len());
        let mut refused = 0;
        for (o, r) in got.iter().enumerate() {
            match r {
                Ok(body) => {
                    assert_eq!(body, &f.bodies[o], "seed {}: record {o} served with other bytes", seed + case);
                    assert!(payload_of(body).is_some());
                }
                Err(status) => {
                    assert!(o >= base + batch, "seed {}: record {o}, before the damage, was refused", seed + case);
                    assert_eq!(*status, Some(503), "seed {}: a damaged record is a 503", seed + case);
                    refused += 1;
                }
            }
        }
        assert!(
            refused >= 1,
            "seed {}: the damaged batch at byte {at} of {} was served",
            seed + case,
            sealed.display()
        );
        println!(
            "flipped sealed segment {} byte {at}: {refused} records refused, {} served",
            sealed.display(),
            f.bodies.len() - refused
        );
    }
}

#[test]
fn damaged_indexes_are_rebuilt() {
    let f = fixture();
    let (_dir, data) = damaged_copy(&f);
    let all = segments(&data);
    let idx = all[0].with_extension("idx");
    let mut bytes = std::fs::read(&idx).expect("an index");
    bytes[10] ^= 0x55;
    std::fs::write(&idx, &bytes).expect("write");
    std::fs::remove_file(all[1].with_extension("tix")).expect("remove a time index");
    let server = torture::spawn(&data, "info").wait_started().unwrap_or_else(|r| panic!("refused: {}", r.log));
    let got = read_each(&server, f.bodies.len());
    for (o, r) in got.iter().enumerate() {
        assert_eq!(r.as_ref().ok(), Some(&f.bodies[o]), "record {o}");
    }
}
