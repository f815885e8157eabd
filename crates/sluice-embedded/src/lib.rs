//! The embedded backend (being written): fjall on disk, the core broker in memory, one
//! group-commit writer thread.

use std::path::PathBuf;
use std::time::Duration;

/// When a write is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// After the batch holding it is synced to disk (default).
    Fsync,
    /// Before the sync; the journal is synced every interval, so a power loss can lose up to
    /// that much acknowledged work.
    Interval(Duration),
}

impl std::str::FromStr for Durability {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "fsync" {
            return Ok(Durability::Fsync);
        }
        if let Some(ms) = s.strip_prefix("interval:") {
            let ms: u64 = ms.parse().map_err(|_| format!("{ms:?} is not a number of milliseconds"))?;
            if ms == 0 || ms > 60_000 {
                return Err("the interval is 1 to 60000 ms".into());
            }
            return Ok(Durability::Interval(Duration::from_millis(ms)));
        }
        Err(format!("{s:?} is not a durability mode; use fsync or interval:MS (e.g. interval:10)"))
    }
}

#[derive(Debug, Clone)]
pub struct EmbeddedConfig {
    pub data_dir: PathBuf,
    pub durability: Durability,
}

/// Why the store could not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot open the data directory {path}: {reason}")]
    Storage { path: PathBuf, reason: String },
    #[error("the data directory {path} holds a record this version cannot read ({reason}); it was written by another version or is damaged")]
    Corrupt { path: PathBuf, reason: String },
}

/// The embedded store. Cheap to clone? No: share it in an `Arc`.
pub struct EmbeddedStore {
    _private: (),
}

impl EmbeddedStore {
    /// Opens (or creates) the data directory, replays it into memory and starts the writer.
    pub fn open(_config: EmbeddedConfig) -> Result<EmbeddedStore, OpenError> {
        unimplemented!("being written")
    }

    /// Stops the writer after the work already queued; later calls get `ShuttingDown`.
    /// Blocks until the last batch is synced.
    pub fn close(&self) {}
}
