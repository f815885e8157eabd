//! Torn and corrupted files: the server is stopped after acknowledged sends (`fsync` mode),
//! its data directory is damaged, and it is started again. It must either
//! - start and serve every acknowledged message the damage did not destroy, each body
//!   byte-exact (checked against the send and against the checksum the body carries), never
//!   dropping a record from the middle of the journal while later ones survive, and naming in
//!   its log every message whose body it can no longer read; or
//! - refuse to start (exit non-zero) with a message naming the damaged file.
//!
//! - `torn_journal_tails_keep_every_earlier_batch`: the newest journal cut at a random byte
//!   (what a crash in the middle of a write leaves). The server must start with exactly the
//!   messages whose batch ends before the cut.
//! - `flipped_journal_bytes_never_lose_the_middle`: random bytes of the journal flipped, half
//!   of them in the batch markers no checksum covers (tags, counts, sequence numbers), after
//!   a fixed case that damages the last batch's trailer.
//! - `flipped_table_bytes_are_refused_or_named`: random bytes of a table file of the bodies
//!   keyspace (half of them in its last 4 KiB: index, filter, metadata, table of contents), or
//!   of a journal, in a data directory big enough (over 64 MiB of bodies) that fjall flushed
//!   its memtable to a table.
//!
//! Each case has its own seed, printed with its damage; `SLUICE_CORRUPTION_SEED` fixes the
//! first seed and `SLUICE_CORRUPTION_CASES` the number of cases per test (default 4):
//!
//! ```text
//! SLUICE_CORRUPTION_CASES=100 cargo test -p sluice --release --test corruption -- --nocapture
//! ```

mod torture;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sluice_api::{CreateQueueRequest, ReceiveRequest, SendMessage, SendRequest};
use sluice_client::ClientError;
use torture::{body_sized, payload_of};

const QUEUE: &str = "c";
const CASES_DEFAULT: u64 = 4;
/// Small messages, each sent alone so that each is one journal batch, in send order.
const SMALL_MESSAGES: usize = 300;
/// Big messages: together over fjall's 64 MiB memtable, so that the bodies reach a table.
const BIG_MESSAGES: usize = 150;
const BIG_BODY_BYTES: usize = 480_000;

fn cases() -> u64 {
    std::env::var("SLUICE_CORRUPTION_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CASES_DEFAULT)
}

fn first_seed() -> u64 {
    std::env::var("SLUICE_CORRUPTION_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().r#gen())
}

/// A message acknowledged before the damage.
#[derive(Debug, Clone)]
struct Sent {
    payload: String,
    id: String,
    body: String,
}

/// A data directory as the server left it, and what it acknowledged, in send order.
struct Fixture {
    dir: tempfile::TempDir,
    sent: Vec<Sent>,
}

impl Fixture {
    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
}

/// Starts a server on a fresh directory, sends `count` messages one request each (each its
/// own journal batch, so journal order is send order), and stops it with `stop`.
fn build_fixture(
    count: usize,
    body_bytes: impl Fn(usize) -> usize,
    stop: impl FnOnce(torture::Serve, &Path),
) -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("data");
    let server = torture::start(&data_dir, "info");
    let client = server.client();
    let sent = runtime().block_on(async {
        client.create_queue(&CreateQueueRequest { name: QUEUE.into(), ..Default::default() }).await.expect("create");
        let mut sent = Vec::new();
        for i in 0..count {
            let payload = format!("m{i:05}");
            let body = body_sized(&payload, body_bytes(i));
            let request =
                SendRequest { messages: vec![SendMessage { body: Some(body.clone()), ..Default::default() }] };
            let response = client.send_messages(QUEUE, &request).await.expect("send before any damage");
            let id = response.results[0].id.clone().expect("an acknowledged send");
            sent.push(Sent { payload, id, body });
        }
        sent
    });
    stop(server, &data_dir);
    Fixture { dir, sent }
}

/// 300 small messages; the server is then SIGKILLed, so everything is in the journal. Each
/// test builds its own (a fixture in a static would never be removed from disk).
fn journal_fixture() -> Fixture {
    build_fixture(SMALL_MESSAGES, |i| 20 + (i * 37) % 600, |server, _| server.kill())
}

/// 150 big messages; once fjall has flushed the bodies to a table, the server is stopped
/// gracefully, started once more (so the fixture is a directory that recovered cleanly) and
/// stopped again.
fn table_fixture() -> Fixture {
    build_fixture(
        BIG_MESSAGES,
        |_| BIG_BODY_BYTES,
        |server, data_dir| {
            let started = Instant::now();
            while biggest_table(data_dir).is_none_or(|(_, len)| len < 32 << 20) {
                assert!(started.elapsed() < Duration::from_secs(60), "fjall never flushed the bodies to a table");
                std::thread::sleep(Duration::from_millis(100));
            }
            assert!(server.terminate().success());
            assert!(torture::start(data_dir, "info").terminate().success());
        },
    )
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read a directory").flatten() {
        let path = entry.path();
        if path.is_dir() { out.extend(files_under(&path)) } else { out.push(path) }
    }
    out.sort();
    out
}

fn biggest_table(data_dir: &Path) -> Option<(PathBuf, u64)> {
    files_under(&data_dir.join("keyspaces"))
        .into_iter()
        .filter(|p| p.parent().is_some_and(|d| d.ends_with("tables")))
        .map(|p| {
            let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
            (p, len)
        })
        .max_by_key(|(_, len)| *len)
}

/// fjall's journals (`N.jnl` in the data directory), oldest first.
fn journals(data_dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<(u64, PathBuf)> = std::fs::read_dir(data_dir)
        .expect("the data directory")
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let id = path.file_name()?.to_str()?.strip_suffix(".jnl")?.parse().ok()?;
            Some((id, path))
        })
        .collect();
    out.sort();
    out.into_iter().map(|(_, p)| p).collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create a directory");
    for entry in std::fs::read_dir(from).expect("read a directory").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a file");
        }
    }
}

/// The journal's bytes up to its last non-zero byte (fjall preallocates with zeros).
fn used_bytes(path: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(path).expect("read the journal");
    let used = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    bytes.truncate(used);
    bytes
}

/// A batch of an intact fjall 3 journal: its byte range and its largest value (uncompressed).
#[derive(Debug, Clone, Copy)]
struct Batch {
    start: usize,
    end: usize,
    value_max: usize,
}

impl Batch {
    fn holds_any(&self, offsets: &[(usize, u8)]) -> bool {
        offsets.iter().any(|(o, _)| (self.start..self.end).contains(o))
    }
}

/// The batches of an intact fjall 3 journal: `Start` (tag 1, u32 count, u64 seqno), items
/// (tag 2, u8, u8, u64, u16 key length, u32 value length, u32 stored length, key, value) or
/// clears (tag 4, u64), `End` (tag 3, u64 checksum, 4-byte magic).
fn batch_ranges(journal: &[u8]) -> Vec<Batch> {
    let le = |at: usize, n: usize| journal[at..at + n].iter().rev().fold(0usize, |v, &b| (v << 8) | usize::from(b));
    let mut batches = Vec::new();
    let mut at = 0;
    while at < journal.len() {
        assert_eq!(journal[at], 1, "a batch starts at byte {at}");
        let (start, mut value_max) = (at, 0);
        at += 13;
        loop {
            match journal[at] {
                2 => {
                    value_max = value_max.max(le(at + 13, 4));
                    at += 21 + le(at + 11, 2) + le(at + 17, 4);
                }
                4 => at += 9,
                3 => {
                    at += 13;
                    break;
                }
                other => panic!("unexpected tag {other} at byte {at}"),
            }
        }
        batches.push(Batch { start, end: at, value_max });
    }
    batches
}

/// For the big fixture, each message's journal and batch: in send order, the batches that
/// hold a body of `BIG_BODY_BYTES` (stored compressed, so not found by their text).
fn big_message_batches(data_dir: &Path) -> Vec<(PathBuf, Batch)> {
    journals(data_dir)
        .into_iter()
        .flat_map(|journal| {
            let batches = batch_ranges(&used_bytes(&journal));
            batches.into_iter().filter(|b| b.value_max >= BIG_BODY_BYTES).map(move |b| (journal.clone(), b))
        })
        .collect()
}

/// For each message of a fixture whose bodies are in the journal uncompressed (under fjall's
/// 4 KiB compression threshold), the batch that holds it.
fn message_batches(fixture: &Fixture) -> Vec<Batch> {
    let journal = journals(&fixture.data_dir()).pop().expect("a journal");
    let bytes = used_bytes(&journal);
    let batches = batch_ranges(&bytes);
    fixture
        .sent
        .iter()
        .map(|m| {
            let needle = m.body.as_bytes();
            let at = bytes.windows(needle.len()).position(|w| w == needle).expect("the body is in the journal");
            *batches.iter().find(|b| (b.start..b.end).contains(&at)).expect("a batch holds the body")
        })
        .collect()
}

/// What a start on a damaged directory gave.
enum Outcome {
    Refused(torture::Refused),
    /// Payloads received (each with its body), and the server's log.
    Served {
        received: HashMap<String, String>,
        damaged: Vec<String>,
        log: String,
    },
}

/// Starts a server on `data_dir` and, if it starts, receives everything it holds.
fn start_and_drain(data_dir: &Path) -> Outcome {
    let server = match torture::spawn(data_dir, "info").wait_started() {
        Ok(server) => server,
        Err(refused) => return Outcome::Refused(refused),
    };
    let client = server.client();
    let (received, damaged) = runtime().block_on(async {
        let mut received = HashMap::new();
        let mut damaged = Vec::new();
        loop {
            let request = ReceiveRequest { max: Some(20), wait_ms: Some(0), visibility_timeout_ms: Some(600_000) };
            let messages = match client.receive_messages(QUEUE, &request).await {
                Ok(list) => list.messages,
                // The damage took the queue's own record: nothing to receive.
                Err(ClientError::Api { code, .. }) if code == "queue_not_found" => break,
                Err(e) => panic!("receive failed: {e}\n{}", server.log()),
            };
            // A receive may come back short or empty while messages remain: those whose body
            // cannot be read are left out (and logged). The count says when all were taken.
            if messages.is_empty() && client.get_queue(QUEUE).await.expect("the queue").counts.visible == 0 {
                break;
            }
            for m in messages {
                let body = m.body.unwrap_or_default();
                match payload_of(&body) {
                    Some(p) => assert!(received.insert(p.clone(), body).is_none(), "{p} delivered twice"),
                    None => damaged.push(body),
                }
            }
        }
        (received, damaged)
    });
    let log = server.log();
    server.kill();
    Outcome::Served { received, damaged, log }
}

/// Bodies come back byte-exact and nothing unknown comes back.
#[track_caller]
fn check_bodies(fixture: &Fixture, received: &HashMap<String, String>, damaged: &[String], context: &str) {
    assert!(damaged.is_empty(), "{context}: bodies that fail their checksum were served: {damaged:?}");
    let sent: HashMap<&str, &str> = fixture.sent.iter().map(|m| (m.payload.as_str(), m.body.as_str())).collect();
    for (payload, body) in received {
        let original = sent.get(payload.as_str()).unwrap_or_else(|| panic!("{context}: {payload} was never sent"));
        assert!(body == original, "{context}: the body of {payload} differs from what was sent");
    }
}

#[track_caller]
fn check_refusal_names(refused: &torture::Refused, file: &Path, context: &str) {
    assert!(!refused.status.success(), "{context}: a refusal exits non-zero: {refused:?}");
    let named = file.to_str().expect("a UTF-8 path");
    assert!(
        refused.log.contains("is damaged") && refused.log.contains(named),
        "{context}: the refusal does not name {named}:\n{}",
        refused.log
    );
}

/// A fresh copy of the fixture's data directory.
fn damaged_copy(fixture: &Fixture) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("data");
    copy_dir(&fixture.data_dir(), &data_dir);
    (dir, data_dir)
}

/// Flips 1 to 3 random bytes at the offsets `pick` chooses; returns them, lowest first.
fn flip_bytes(file: &Path, rng: &mut StdRng, mut pick: impl FnMut(&mut StdRng) -> usize) -> Vec<(usize, u8)> {
    let mut bytes = std::fs::read(file).expect("read the file");
    let mut flips: Vec<(usize, u8)> =
        (0..rng.gen_range(1..=3)).map(|_| (pick(rng), rng.gen_range(1..=255u8))).collect();
    flips.sort();
    for &(offset, mask) in &flips {
        bytes[offset] ^= mask;
    }
    std::fs::write(file, &bytes).expect("write the file");
    flips
}

#[test]
fn torn_journal_tails_keep_every_earlier_batch() {
    let fixture = &journal_fixture();
    let batches = message_batches(fixture);
    let journal_len = used_bytes(&journals(&fixture.data_dir()).pop().expect("a journal")).len();
    let first = first_seed();
    let mut kept_total = 0;
    for case in 0..cases() {
        let seed = first.wrapping_add(case);
        let mut rng = StdRng::seed_from_u64(seed);
        let (_dir, data_dir) = damaged_copy(fixture);
        let journal = journals(&data_dir).pop().expect("a journal");
        let cut = rng.gen_range(0..journal_len);
        let file = std::fs::OpenOptions::new().write(true).open(&journal).expect("open the journal");
        file.set_len(cut as u64).expect("truncate the journal");
        drop(file);
        let context = format!("seed {seed} (SLUICE_CORRUPTION_SEED={seed}): {} cut at byte {cut}", journal.display());
        let Outcome::Served { received, damaged, .. } = start_and_drain(&data_dir) else {
            panic!("{context}: a torn tail is what a crash leaves; the server must start");
        };
        check_bodies(fixture, &received, &damaged, &context);
        let expected: HashSet<&str> =
            fixture.sent.iter().zip(&batches).filter(|(_, b)| b.end <= cut).map(|(m, _)| m.payload.as_str()).collect();
        let got: HashSet<&str> = received.keys().map(String::as_str).collect();
        let lost: Vec<&&str> = expected.difference(&got).collect();
        let resurrected: Vec<&&str> = got.difference(&expected).collect();
        assert!(lost.is_empty(), "{context}: lost messages whose batch ends before the cut: {lost:?}");
        assert!(resurrected.is_empty(), "{context}: served messages whose batch was cut: {resurrected:?}");
        println!("torn tail, {context}: started, served {} of {} messages, as expected", got.len(), fixture.sent.len());
        kept_total += got.len();
    }
    println!("torn tails: {} cases, {kept_total} messages served, lost 0, damaged 0", cases());
}

/// Damages a copy of the journal fixture with `flip` and checks the outcome; returns the
/// number of messages served, or `None` if the server refused (naming the journal).
fn journal_flip_case(
    fixture: &Fixture,
    batches: &[Batch],
    label: &str,
    flip: impl FnOnce(&Path) -> Vec<(usize, u8)>,
) -> Option<usize> {
    let (_dir, data_dir) = damaged_copy(fixture);
    let journal = journals(&data_dir).pop().expect("a journal");
    let flips = flip(&journal);
    let context = format!("{label}: {} flipped {flips:?}", journal.display());
    match start_and_drain(&data_dir) {
        Outcome::Refused(refused) => {
            check_refusal_names(&refused, &journal, &context);
            println!("flipped journal, {context}: refused: {}", last_error_line(&refused.log));
            None
        }
        Outcome::Served { received, damaged, .. } => {
            check_bodies(fixture, &received, &damaged, &context);
            // Every batch the flips did not touch is served: the damage may take its own
            // batch, never an intact one (later batches above all).
            for (m, batch) in fixture.sent.iter().zip(batches) {
                if !batch.holds_any(&flips) {
                    assert!(received.contains_key(&m.payload), "{context}: lost {}, whose batch is intact", m.payload);
                }
            }
            println!("flipped journal, {context}: started, served {} of {}", received.len(), fixture.sent.len());
            Some(received.len())
        }
    }
}

#[test]
fn flipped_journal_bytes_never_lose_the_middle() {
    let fixture = &journal_fixture();
    let batches = message_batches(fixture);
    let pristine = used_bytes(&journals(&fixture.data_dir()).pop().expect("a journal"));
    let (journal_len, all_batches) = (pristine.len(), batch_ranges(&pristine));
    // First a fixed case: the last batch's trailer, which cannot be told from a write cut
    // short, so the server must start without that one batch and with all the others.
    let last = *all_batches.last().expect("batches");
    let served = journal_flip_case(fixture, &batches, "the last batch's trailer", |journal| {
        let mut bytes = std::fs::read(journal).expect("read the journal");
        bytes[last.end - 2] ^= 0x01;
        std::fs::write(journal, &bytes).expect("write the journal");
        vec![(last.end - 2, 0x01)]
    });
    assert_eq!(served, Some(fixture.sent.len() - 1), "only the last batch is lost");
    let first = first_seed();
    let (mut refused_count, mut served_count) = (0, 0);
    for case in 0..cases() {
        let seed = first.wrapping_add(case);
        let mut rng = StdRng::seed_from_u64(seed);
        let label = format!("seed {seed} (SLUICE_CORRUPTION_SEED={seed})");
        // Half the flips hit a batch's start or end marker (tags, counts, sequence numbers,
        // trailers: what no checksum covers); the rest land anywhere, mostly in values.
        let outcome = journal_flip_case(fixture, &batches, &label, |journal| {
            flip_bytes(journal, &mut rng, |rng| {
                if rng.gen_bool(0.5) {
                    let b = all_batches[rng.gen_range(0..all_batches.len())];
                    if rng.gen_bool(0.5) {
                        rng.gen_range(b.start..b.start + 13)
                    } else {
                        rng.gen_range(b.end - 13..b.end)
                    }
                } else {
                    rng.gen_range(0..journal_len)
                }
            })
        });
        match outcome {
            None => refused_count += 1,
            Some(_) => served_count += 1,
        }
    }
    println!(
        "flipped journals: {} random cases, {refused_count} refused naming the journal, {served_count} started with every intact batch",
        cases()
    );
}

#[test]
fn flipped_table_bytes_are_refused_or_named() {
    let fixture = &table_fixture();
    let first = first_seed();
    let (mut refused_count, mut served_count, mut named_total) = (0, 0, 0);
    for case in 0..cases() {
        let seed = first.wrapping_add(case);
        let mut rng = StdRng::seed_from_u64(seed);
        let (_dir, data_dir) = damaged_copy(fixture);
        // Mostly the bodies' table; sometimes a journal, sealed or active.
        let (file, tail_bias) = if rng.gen_ratio(7, 10) {
            (biggest_table(&data_dir).expect("a table").0, true)
        } else {
            let all = journals(&data_dir);
            (all[rng.gen_range(0..all.len())].clone(), false)
        };
        let len = if tail_bias {
            std::fs::metadata(&file).expect("the table").len() as usize
        } else {
            used_bytes(&file).len()
        };
        let flips = flip_bytes(&file, &mut rng, |rng| {
            if tail_bias && rng.gen_bool(0.5) {
                rng.gen_range(len.saturating_sub(4096)..len)
            } else {
                rng.gen_range(0..len)
            }
        });
        let context = format!("seed {seed} (SLUICE_CORRUPTION_SEED={seed}): {} flipped {flips:?}", file.display());
        match start_and_drain(&data_dir) {
            Outcome::Refused(refused) => {
                check_refusal_names(&refused, &file, &context);
                println!("flipped table, {context}: refused: {}", last_error_line(&refused.log));
                refused_count += 1;
            }
            Outcome::Served { received, damaged, log } => {
                check_bodies(fixture, &received, &damaged, &context);
                // Every message not served is named in the log as unreadable (table damage),
                // or its own journal batch was damaged (journal damage); an intact batch
                // is never lost.
                let batches = big_message_batches(&fixture.data_dir());
                assert_eq!(batches.len(), fixture.sent.len(), "one journal batch per message");
                let named: Vec<&Sent> = fixture
                    .sent
                    .iter()
                    .filter(|m| {
                        !received.contains_key(&m.payload) && log.contains(&format!("not delivering message {}", m.id))
                    })
                    .collect();
                let silent: Vec<&str> = fixture
                    .sent
                    .iter()
                    .zip(&batches)
                    .filter(|(m, _)| !received.contains_key(&m.payload) && !named.iter().any(|n| n.id == m.id))
                    .filter(|(_, (journal, batch))| {
                        tail_bias || journal.file_name() != file.file_name() || !batch.holds_any(&flips)
                    })
                    .map(|(m, _)| m.payload.as_str())
                    .collect();
                assert!(
                    silent.is_empty(),
                    "{context}: messages neither served nor named, their batch intact: {silent:?}"
                );
                println!(
                    "flipped table, {context}: started, served {}, named unreadable {}, lost with their damaged batch {}",
                    received.len(),
                    named.len(),
                    fixture.sent.len() - received.len() - named.len()
                );
                named_total += named.len();
                served_count += 1;
            }
        }
    }
    println!(
        "flipped tables: {} cases, {refused_count} refused naming the file, {served_count} started ({named_total} unreadable messages named in the log)",
        cases()
    );
}

fn last_error_line(log: &str) -> &str {
    log.lines().rev().find(|l| l.starts_with("error:")).unwrap_or("")
}
