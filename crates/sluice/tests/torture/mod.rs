//! What the torture tests (`crash.rs`, `corruption.rs`, `full_disk.rs`) share: message bodies
//! that carry their own checksum, and a `sluice serve` process that may be killed at any
//! moment, may refuse to start, and keeps its log in a file (a [`process`] in `fsync` mode).

#![allow(dead_code)] // Each test crate uses a different part of this module.

#[path = "../process/mod.rs"]
mod process;

use std::path::Path;

// Like the dead-code allowance above: each test crate uses a different part.
#[allow(unused_imports)]
pub use process::{Process, Refused, Serve, client};

/// Every torture test runs in `fsync` mode, whatever `SLUICE_DURABILITY` says: an acknowledged
/// write must survive a crash.
const FSYNC: &[&str] = &["--durability", "fsync"];

/// A body that carries its own checksum, so that any damage is detected:
/// `payload|len|filler|sum`, about `64 + 3 × payload` bytes.
pub fn body_for(payload: &str) -> String {
    body_sized(payload, 64 + payload.len() * 3)
}

/// As [`body_for`], with `filler_bytes` of filler.
pub fn body_sized(payload: &str, filler_bytes: usize) -> String {
    assert!(!payload.contains('|') && !payload.is_empty());
    let filler: String = payload.chars().cycle().take(filler_bytes).collect();
    let sum = fnv(payload.as_bytes(), filler.as_bytes());
    format!("{payload}|{}|{filler}|{sum:016x}", filler.len())
}

/// The payload of a body made by [`body_for`], or `None` if the body is damaged.
pub fn payload_of(body: &str) -> Option<String> {
    let mut parts = body.split('|');
    let payload = parts.next()?;
    let len: usize = parts.next()?.parse().ok()?;
    let filler = parts.next()?;
    let sum = u64::from_str_radix(parts.next()?, 16).ok()?;
    (parts.next().is_none() && filler.len() == len && fnv(payload.as_bytes(), filler.as_bytes()) == sum)
        .then(|| payload.to_string())
}

fn fnv(a: &[u8], b: &[u8]) -> u64 {
    a.iter().chain(b).fold(0xcbf2_9ce4_8422_2325, |h, &x| (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3))
}

/// Spawns `sluice serve` on port 0 over `data_dir` in `fsync` mode, logging at `log_level`
/// into a temporary file.
pub fn spawn(data_dir: &Path, log_level: &str) -> Process {
    process::spawn(data_dir, log_level, FSYNC)
}

/// Spawns and waits for the announcement; panics with the log if the server does not start.
pub fn start(data_dir: &Path, log_level: &str) -> Serve {
    process::start(data_dir, log_level, FSYNC)
}

/// A body with `filler_bytes` of random letters and digits: fjall compresses journal values
/// of 4 KiB and more, and random filler keeps such a body as large on disk as on the wire.
pub fn body_random(payload: &str, filler_bytes: usize, rng: &mut impl rand::Rng) -> String {
    assert!(!payload.contains('|') && !payload.is_empty());
    let filler: String = (0..filler_bytes).map(|_| char::from(rng.sample(rand::distributions::Alphanumeric))).collect();
    let sum = fnv(payload.as_bytes(), filler.as_bytes());
    format!("{payload}|{}|{filler}|{sum:016x}", filler.len())
}
