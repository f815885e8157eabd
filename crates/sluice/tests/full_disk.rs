//! Full disk: the data directory on a small filesystem, filled with sends until writes fail.
//!
//! The failing sends must get a clear answer, 507 `insufficient_storage` (not the 503
//! `store_poisoned` of a failed sync, which needs a restart), never an acknowledgement; once a filler file made beforehand on the
//! same filesystem is deleted, the server must serve again without a restart (the store
//! reopens itself from disk, see `sluice-embedded/src/engine.rs`), and every acknowledged
//! message must be received, byte-exact. A restart afterwards must find the acks durable.
//!
//! The small filesystem is a loop-mounted 24 MiB ext4 image (`truncate`, `mkfs.ext4`,
//! `mount -o loop`), or, where loop devices are missing, a 16 MiB tmpfs. Both need root
//! (CAP_SYS_ADMIN); without it the test prints that it was skipped, as the PostgreSQL tests do
//! without a database. A per-process file-size limit (RLIMIT_FSIZE) is no substitute: fjall
//! preallocates each journal to 64 MiB with `set_len`, so a limit below that stops the server
//! from starting at all (EFBIG), and journals rotate before growing much past it, so a limit
//! above it is never reached. Everything is unmounted and removed at the end, even on failure.
//! `SLUICE_FULL_DISK_FS=tmpfs` skips the loop device and uses the tmpfs:
//!
//! ```text
//! SLUICE_FULL_DISK_FS=tmpfs cargo test -p sluice --test full_disk -- --nocapture
//! ```

mod torture;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sluice_api::{CreateQueueRequest, ReceiveRequest, SendMessage, SendRequest};
use sluice_client::{Client, ClientError};

/// The disk here is a few MiB, under load shedding's default free-space watermark (1 GiB),
/// which would refuse every write (503 `shedding`) before the store ever meets a full disk:
/// this test is about the store's own answer to one (507), so the watermark is off. Shedding
/// on free space is tested in `sluice-server/tests/api/backpressure.rs`.
const NO_DISK_SHEDDING: &[&str] = &["--shed-disk-free", "off"];
use torture::{body_random, payload_of};

const QUEUE: &str = "full";
const IMAGE_BYTES: u64 = 24 << 20;
const TMPFS_SIZE: &str = "16m";
/// Written before the server starts; deleting it is how space is freed.
const FILLER_BYTES: usize = 3 << 20;
const BATCH_MESSAGES: usize = 8;
const BODY_BYTES: usize = 16 * 1024;
/// More than the filesystem can hold: the fill must fail before this many batches.
const FILL_BATCHES_MAX: usize = 400;
const RESUME_TIMEOUT: Duration = Duration::from_secs(30);

/// A small filesystem mounted on a temporary directory; dropping it unmounts it.
struct SmallFs {
    mount_point: PathBuf,
    kind: &'static str,
    /// Holds the mount point and the image; removed after the unmount.
    _dir: tempfile::TempDir,
}

fn run(command: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(command).args(args).output().map_err(|e| format!("{command}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{command} {args:?}: {}", String::from_utf8_lossy(&out.stderr).trim()))
    }
}

impl SmallFs {
    /// A loop-mounted ext4 image, else a tmpfs; the reasons both failed otherwise.
    fn mount() -> Result<SmallFs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mount_point = dir.path().join("mnt");
        std::fs::create_dir(&mount_point).map_err(|e| e.to_string())?;
        let image = dir.path().join("disk.img");
        let (mnt, img) = (mount_point.to_str().expect("UTF-8"), image.to_str().expect("UTF-8"));
        let loop_ext4 = (|| {
            if std::env::var("SLUICE_FULL_DISK_FS").is_ok_and(|v| v == "tmpfs") {
                return Err("not tried: SLUICE_FULL_DISK_FS=tmpfs".to_string());
            }
            std::fs::File::create(&image).and_then(|f| f.set_len(IMAGE_BYTES)).map_err(|e| e.to_string())?;
            // No blocks reserved for root: the test runs as root and must see the disk full.
            run("mkfs.ext4", &["-q", "-F", "-m", "0", img])?;
            run("mount", &["-o", "loop", img, mnt])
        })();
        let kind = match loop_ext4 {
            Ok(()) => "a 24 MiB ext4 image on a loop device",
            Err(loop_error) => {
                let _ = std::fs::remove_file(&image);
                run("mount", &["-t", "tmpfs", "-o", &format!("size={TMPFS_SIZE}"), "tmpfs", mnt])
                    .map_err(|tmpfs_error| format!("loop ext4: {loop_error}; tmpfs: {tmpfs_error}"))?;
                "a 16 MiB tmpfs"
            }
        };
        Ok(SmallFs { mount_point, kind, _dir: dir })
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let mnt = self.mount_point.to_str().expect("UTF-8");
        // The server is gone by now; if something still holds the mount, detach it lazily.
        if run("umount", &[mnt]).is_err() {
            let _ = run("umount", &["-l", mnt]);
        }
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0")))
        .unwrap_or(false)
}

fn write_filler(path: &Path) {
    let mut rng = StdRng::seed_from_u64(7);
    let bytes: Vec<u8> = (0..FILLER_BYTES).map(|_| rng.r#gen()).collect();
    let mut file = std::fs::File::create(path).expect("create the filler");
    file.write_all(&bytes).expect("write the filler");
    file.sync_all().expect("sync the filler");
}

/// The refusal a send on a full disk must get.
#[track_caller]
fn assert_full_refusal(e: &ClientError, log: &str) {
    match e {
        ClientError::Api { status: 507, code, .. } if code == "insufficient_storage" => {}
        other => panic!("a send on a full disk got {other:?}, not 507 insufficient_storage; log:\n{log}"),
    }
}

async fn send(client: &Client, messages: &[(String, String)]) -> Result<(), ClientError> {
    let request = SendRequest {
        messages: messages
            .iter()
            .map(|(_, body)| SendMessage { body: Some(body.clone()), ..Default::default() })
            .collect(),
    };
    let response = client.send_messages(QUEUE, &request).await?;
    assert!(response.results.iter().all(|r| r.id.is_some()), "every entry acknowledged: {response:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_loses_nothing_and_resumes_once_space_is_freed() {
    let fs = match SmallFs::mount() {
        Ok(fs) => fs,
        Err(reason) if !is_root() => {
            println!("full-disk test skipped: mounting a small filesystem needs root ({reason})");
            return;
        }
        Err(reason) => panic!("cannot mount a small filesystem as root: {reason}"),
    };
    let started = Instant::now();
    let filler = fs.mount_point.join("filler");
    write_filler(&filler);
    let data_dir = fs.mount_point.join("data");
    let server = torture::start_with(&data_dir, "info", NO_DISK_SHEDDING);
    let client = server.client();
    client.create_queue(&CreateQueueRequest { name: QUEUE.into(), ..Default::default() }).await.expect("create");

    // Fill until a send fails.
    let mut rng = StdRng::seed_from_u64(1);
    let mut acked: HashMap<String, String> = HashMap::new();
    let mut uncertain: HashSet<String> = HashSet::new();
    let mut n = 0;
    let mut next_batch = |rng: &mut StdRng| -> Vec<(String, String)> {
        (0..BATCH_MESSAGES)
            .map(|_| {
                n += 1;
                let payload = format!("f{n}");
                let body = body_random(&payload, BODY_BYTES, rng);
                (payload, body)
            })
            .collect()
    };
    let mut batches = 0;
    let refusal = loop {
        assert!(batches < FILL_BATCHES_MAX, "{} never filled after {batches} batches", fs.kind);
        let batch = next_batch(&mut rng);
        match send(&client, &batch).await {
            Ok(()) => acked.extend(batch),
            Err(e) => {
                uncertain.extend(batch.into_iter().map(|(p, _)| p));
                break e;
            }
        }
        batches += 1;
    };
    assert_full_refusal(&refusal, &server.log());
    let filled_after = started.elapsed();
    // Still full: every further write and read is refused the same way, none acknowledged.
    for _ in 0..3 {
        let batch = next_batch(&mut rng);
        let e = send(&client, &batch).await.expect_err("a send on a full disk is refused");
        assert_full_refusal(&e, &server.log());
        uncertain.extend(batch.into_iter().map(|(p, _)| p));
    }
    let request = ReceiveRequest { max: Some(1), wait_ms: Some(0), visibility_timeout_ms: None };
    let e = client.receive_messages(QUEUE, &request).await.expect_err("nothing runs on a full disk");
    assert_full_refusal(&e, &server.log());

    // Free space; the server must serve again by itself.
    std::fs::remove_file(&filler).expect("delete the filler");
    let freed = Instant::now();
    let resumed_after = loop {
        let batch = next_batch(&mut rng);
        match send(&client, &batch).await {
            Ok(()) => {
                acked.extend(batch);
                break freed.elapsed();
            }
            Err(e) => {
                assert_full_refusal(&e, &server.log());
                uncertain.extend(batch.into_iter().map(|(p, _)| p));
            }
        }
        assert!(
            freed.elapsed() < RESUME_TIMEOUT,
            "no resume {RESUME_TIMEOUT:?} after freeing space; log:\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let log = server.log();
    assert!(log.contains("the disk holding the data directory is full"), "the log says why:\n{log}");
    assert!(log.contains("the disk has room again"), "the log says it resumed:\n{log}");

    // Every acknowledged message, byte-exact; what was refused may or may not be there.
    let mut received: HashMap<String, String> = HashMap::new();
    let mut damaged = Vec::new();
    loop {
        let request = ReceiveRequest { max: Some(50), wait_ms: Some(0), visibility_timeout_ms: Some(60_000) };
        let messages = client.receive_messages(QUEUE, &request).await.expect("receive after resuming").messages;
        if messages.is_empty() {
            break;
        }
        let mut receipts = Vec::new();
        for m in messages {
            let body = m.body.unwrap_or_default();
            match payload_of(&body) {
                Some(p) => assert!(received.insert(p.clone(), body).is_none(), "{p} delivered twice"),
                None => damaged.push(body),
            }
            receipts.extend(m.receipt);
        }
        let acks = client.ack(QUEUE, receipts).await.expect("ack");
        assert!(acks.results.iter().all(|r| r.ok), "{acks:?}");
    }
    let lost: Vec<&String> = acked.keys().filter(|p| !received.contains_key(*p)).collect();
    let changed: Vec<&String> =
        acked.iter().filter(|(p, b)| received.get(*p).is_some_and(|r| r != *b)).map(|(p, _)| p).collect();
    let unexpected: Vec<&String> =
        received.keys().filter(|p| !acked.contains_key(*p) && !uncertain.contains(*p)).collect();
    let refused_but_stored = received.keys().filter(|p| uncertain.contains(*p)).count();
    println!(
        "full disk on {}: filled after {batches} batches ({} acknowledged messages of {BODY_BYTES} B) in {filled_after:.1?}; refused with {refusal}; resumed {resumed_after:.1?} after freeing {FILLER_BYTES} B, without a restart; received {}, lost {}, changed {}, damaged {}, unexpected {}, refused but stored {refused_but_stored}",
        fs.kind,
        acked.len(),
        received.len(),
        lost.len(),
        changed.len(),
        damaged.len(),
        unexpected.len(),
    );
    assert!(lost.is_empty(), "lost acknowledged messages: {lost:?}");
    assert!(changed.is_empty() && damaged.is_empty(), "bodies changed: {changed:?} {damaged:?}");
    assert!(unexpected.is_empty(), "never sent: {unexpected:?}");

    // The acks after resuming are durable: a restart finds the queue empty.
    assert!(server.terminate().success(), "a graceful stop after resuming");
    let server = torture::start_with(&data_dir, "info", NO_DISK_SHEDDING);
    let queue = server.client().get_queue(QUEUE).await.expect("the queue after a restart");
    assert_eq!(
        (queue.counts.visible, queue.counts.in_flight, queue.counts.delayed),
        (0, 0, 0),
        "nothing comes back after a restart"
    );
    server.kill();
    drop(fs);
}
