//! Disk use under churn: every message is sent, received and acked, so the live data stays
//! near zero; prints the data directory's size (allocated blocks) per keyspace and journals as
//! the run goes, to show whether the LSM tree reclaims deleted bodies and metadata.
//!
//!     cargo run --release -p sluice-embedded --example disk_churn [MESSAGES] [BODY_BYTES]

use std::path::Path;
use std::time::Instant;

use sluice_core::{NewMessage, QueueAttributes};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_store::ReceiveRequest;
use sluice_store::prelude::*;

const BATCH: usize = 100;
const REPORT_EVERY: u64 = 200_000;

fn allocated(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path) else { return 0 };
    if !meta.is_dir() {
        return meta.blocks() * 512;
    }
    std::fs::read_dir(path).map_or(0, |entries| entries.flatten().map(|e| allocated(&e.path())).sum())
}

fn report(dir: &Path, done: u64, started: Instant) {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let journals: u64 = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jnl"))
        .map(|e| allocated(&e.path()))
        .sum();
    let mut keyspaces = String::new();
    for entry in std::fs::read_dir(dir.join("keyspaces")).unwrap().flatten() {
        keyspaces.push_str(&format!(" ks{}={:.0}", entry.file_name().to_string_lossy(), mib(allocated(&entry.path()))));
    }
    println!(
        "{done:>9} messages in {:>5.1}s: total {:.0} MiB, journals {:.0} MiB, keyspaces (MiB){keyspaces}",
        started.elapsed().as_secs_f64(),
        mib(allocated(dir)),
        mib(journals)
    );
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let messages: u64 = args.next().map_or(2_000_000, |a| a.parse().expect("MESSAGES"));
    let body_bytes: usize = args.next().map_or(256, |a| a.parse().expect("BODY_BYTES"));
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(EmbeddedConfig {
        data_dir: dir.path().to_owned(),
        durability: Durability::Interval(std::time::Duration::from_millis(100)),
    })
    .unwrap();
    store.create_queue("churn", QueueAttributes::default()).await.unwrap();
    let started = Instant::now();
    let mut done = 0u64;
    while done < messages {
        let batch = (0..BATCH).map(|_| NewMessage { body: vec![b'x'; body_bytes], ..Default::default() }).collect();
        store.send("churn", batch).await.unwrap();
        let received = store
            .receive(
                "churn",
                ReceiveRequest { max: BATCH as u32, wait_ms: Some(0), visibility_timeout_ms: Some(30_000) },
            )
            .await
            .unwrap();
        let receipts = received.into_iter().map(|m| m.receipt).collect();
        store.ack("churn", receipts).await.unwrap();
        done += BATCH as u64;
        if done.is_multiple_of(REPORT_EVERY) {
            report(dir.path(), done, started);
        }
    }
    store.close();
}
