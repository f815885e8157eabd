//! Load shedding: when the write pipeline's backlog, the process's memory (RSS) or the data
//! disk's free space passes its watermark, writes of lower priority are refused first (503
//! `shedding`, `Retry-After`) while higher priorities are still taken.
//!
//! Priority bands, by a write's priority (a message's `priority`, 0 to 9; writes without one,
//! such as SQS and SNS messages and stream records, are priority 0):
//! - low, 0 to 2: refused from the watermark on;
//! - normal, 3 to 6: refused from the hard watermark on (1.25 × the backlog or memory
//!   watermark; half the free-space watermark);
//! - high, 7 to 9: never refused by shedding, only by the store's own refusal (a full disk is
//!   507, a failed sync 503).
//!
//! The figures are sampled on the clock (`SHED_SAMPLE_MS_DEFAULT`), not read per request, so a
//! watermark is checked at most that late; watermarks are set below the point of trouble
//! (defaults: memory at 80 % of the machine's, free space at 1 GiB) so that the sample's delay
//! is absorbed. The decision is the pure [`decide`], tested
//! on figures; the sampler only feeds it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use sluice_clock::Clock;

/// How often the figures are sampled.
pub const SHED_SAMPLE_MS_DEFAULT: u64 = 250;
/// Default backlog watermark: calls waiting for the store's write pipeline.
pub const SHED_BACKLOG_DEFAULT: u64 = 20_000;
/// Default memory watermark, as a share of the machine's memory (in per cent).
pub const SHED_MEMORY_PERCENT_DEFAULT: u64 = 80;
/// Default free-space watermark. A fixed amount rather than a share of the disk: a share of a
/// large disk would shed on a machine with plenty of room (5 % of 270 GB is 13.5 GB), and what
/// the store needs to finish its writes does not grow with the disk.
pub const SHED_DISK_FREE_BYTES_DEFAULT: u64 = 1 << 30;
/// `Retry-After` of a shed write, in seconds: watermarks clear on the time scale of a
/// consumer draining a backlog or a sweep freeing memory.
pub const SHED_RETRY_AFTER_S: u64 = 1;

/// The highest priority of each band (see the module docs).
pub const LOW_PRIORITY_MAX: u8 = 2;
pub const NORMAL_PRIORITY_MAX: u8 = 6;

/// The watermarks. `None` turns a signal off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShedConfig {
    /// Calls waiting for the store's writer (`StoreStatus::backlog`).
    pub backlog_max: Option<u64>,
    /// The process's resident memory, in bytes.
    pub memory_bytes_max: Option<u64>,
    /// Free bytes on the disk holding `data_dir`; shedding starts below it.
    pub disk_free_bytes_min: Option<u64>,
    /// The data directory whose disk is watched (embedded store only).
    pub data_dir: Option<PathBuf>,
    pub sample_ms: u64,
}

impl Default for ShedConfig {
    /// Every signal off, so that a server built as a library (tests, embedding programs) sheds
    /// nothing and runs no sampler unless told; `sluice serve` turns each on with its flag's
    /// default (`SHED_BACKLOG_DEFAULT`, [`ShedConfig::with_machine_defaults`]).
    fn default() -> Self {
        ShedConfig {
            backlog_max: None,
            memory_bytes_max: None,
            disk_free_bytes_min: None,
            data_dir: None,
            sample_ms: SHED_SAMPLE_MS_DEFAULT,
        }
    }
}

/// Which figure passed its watermark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ShedReason {
    Backlog,
    Memory,
    Disk,
}

impl ShedReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ShedReason::Backlog => "backlog",
            ShedReason::Memory => "memory",
            ShedReason::Disk => "disk",
        }
    }
}

/// How hard the server sheds: the highest priority refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ShedLevel {
    /// Past a watermark: the low band is refused.
    Low,
    /// Past a hard watermark: the low and normal bands are refused.
    Normal,
}

impl ShedLevel {
    pub fn refuses(self, priority: u8) -> bool {
        match self {
            ShedLevel::Low => priority <= LOW_PRIORITY_MAX,
            ShedLevel::Normal => priority <= NORMAL_PRIORITY_MAX,
        }
    }
}

/// One sample of the figures (`None`: not known on this platform or store).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    pub backlog: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub disk_free_bytes: Option<u64>,
}

/// Whether the server sheds with these figures, how hard, and why (the hardest signal).
pub fn decide(config: &ShedConfig, figures: &Figures) -> Option<(ShedLevel, ShedReason)> {
    let above = |value: Option<u64>, max: Option<u64>| -> Option<ShedLevel> {
        let (value, max) = (value?, max?);
        if value >= max.saturating_add(max / 4) {
            Some(ShedLevel::Normal)
        } else if value >= max {
            Some(ShedLevel::Low)
        } else {
            None
        }
    };
    let below = |value: Option<u64>, min: Option<u64>| -> Option<ShedLevel> {
        let (value, min) = (value?, min?);
        if value <= min / 2 {
            Some(ShedLevel::Normal)
        } else if value <= min {
            Some(ShedLevel::Low)
        } else {
            None
        }
    };
    [
        (above(figures.backlog, config.backlog_max), ShedReason::Backlog),
        (above(figures.memory_bytes, config.memory_bytes_max), ShedReason::Memory),
        (below(figures.disk_free_bytes, config.disk_free_bytes_min), ShedReason::Disk),
    ]
    .into_iter()
    .filter_map(|(level, reason)| level.map(|l| (l, reason)))
    .max_by_key(|(level, reason)| (*level, std::cmp::Reverse(*reason)))
}

/// A write refused by shedding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the server is shedding load ({}): writes of priority {priority} are refused for now", reason.as_str())]
pub struct Shed {
    pub reason: ShedReason,
    pub priority: u8,
    pub retry_after_s: u64,
}

#[derive(Debug, Default)]
struct State {
    figures: Figures,
    shedding: Option<(ShedLevel, ShedReason)>,
    /// Refused writes by resource (`queue:NAME`, `topic:NAME`, ...).
    refused: BTreeMap<String, u64>,
}

/// The server's shedding state: the last sample's decision, and what it refused.
pub struct Shedder {
    config: ShedConfig,
    state: Mutex<State>,
}

impl Shedder {
    pub fn new(config: ShedConfig) -> Shedder {
        Shedder { config, state: Mutex::new(State::default()) }
    }

    pub fn config(&self) -> &ShedConfig {
        &self.config
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a sample of the figures (tests give their own through [`Shedder::observe`]).
    pub fn sample(&self, backlog: Option<u64>) {
        let figures = Figures {
            backlog,
            memory_bytes: self.config.memory_bytes_max.and(resident_bytes()),
            disk_free_bytes: match (&self.config.data_dir, self.config.disk_free_bytes_min) {
                (Some(dir), Some(_)) => disk_space(dir).map(|(free, _)| free),
                _ => None,
            },
        };
        self.observe(figures);
    }

    pub fn observe(&self, figures: Figures) {
        let shedding = decide(&self.config, &figures);
        let mut state = self.state();
        if state.shedding != shedding {
            match shedding {
                Some((level, reason)) => {
                    tracing::warn!(
                        reason = reason.as_str(),
                        ?level,
                        ?figures,
                        "shedding load: refusing low-priority writes"
                    )
                }
                None => tracing::info!(?figures, "load shedding over: taking every write again"),
            }
        }
        state.figures = figures;
        state.shedding = shedding;
    }

    /// Whether the server sheds now, and why.
    pub fn shedding(&self) -> Option<(ShedLevel, ShedReason)> {
        self.state().shedding
    }

    pub fn figures(&self) -> Figures {
        self.state().figures
    }

    /// Admits or refuses a write of `priority` to `resource`; a refusal is counted.
    pub fn admit(&self, resource: &str, priority: u8) -> Result<(), Shed> {
        let mut state = self.state();
        match state.shedding {
            Some((level, reason)) if level.refuses(priority) => {
                *state.refused.entry(resource.to_string()).or_default() += 1;
                Err(Shed { reason, priority, retry_after_s: SHED_RETRY_AFTER_S })
            }
            _ => Ok(()),
        }
    }

    /// Refused writes by resource since the server started.
    pub fn refused(&self) -> BTreeMap<String, u64> {
        self.state().refused.clone()
    }

    /// Whether any watermark is set (otherwise nothing is sampled and nothing shed).
    pub fn watches(&self) -> bool {
        let c = &self.config;
        c.backlog_max.is_some() || c.memory_bytes_max.is_some() || c.disk_free_bytes_min.is_some()
    }

    /// Samples every `sample_ms` of `clock`, with the backlog `backlog` reads; `None` when no
    /// watermark is set.
    pub fn spawn(
        self: &Arc<Self>,
        clock: Arc<dyn Clock>,
        backlog: impl Fn() -> Option<u64> + Send + 'static,
    ) -> Option<tokio::task::JoinHandle<()>> {
        if !self.watches() {
            return None;
        }
        let shedder = self.clone();
        Some(tokio::spawn(async move {
            loop {
                shedder.sample(backlog());
                let next = clock.now_ms().saturating_add(shedder.config.sample_ms);
                clock.sleep_until(next).await;
            }
        }))
    }
}

/// The process's resident set size, from `/proc/self/statm` (Linux); `None` elsewhere.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * rustix::param::page_size() as u64)
}

/// The machine's memory in bytes, from `/proc/meminfo` (Linux); `None` elsewhere.
pub fn machine_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Free (for unprivileged users) and total bytes of the file system holding `dir`.
pub fn disk_space(dir: &std::path::Path) -> Option<(u64, u64)> {
    let stat = rustix::fs::statvfs(dir).ok()?;
    Some((stat.f_bavail * stat.f_frsize, stat.f_blocks * stat.f_frsize))
}

impl ShedConfig {
    /// Fills the memory and disk watermarks left `None` with the defaults: 80 % of the machine's
    /// memory; 1 GiB free on the data disk (when there is a data directory).
    pub fn with_machine_defaults(mut self) -> ShedConfig {
        if self.memory_bytes_max.is_none() {
            self.memory_bytes_max = machine_memory_bytes().map(|m| m / 100 * SHED_MEMORY_PERCENT_DEFAULT);
        }
        if self.disk_free_bytes_min.is_none() && self.data_dir.is_some() {
            self.disk_free_bytes_min = Some(SHED_DISK_FREE_BYTES_DEFAULT);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ShedConfig {
        ShedConfig {
            backlog_max: Some(100),
            memory_bytes_max: Some(1_000),
            disk_free_bytes_min: Some(400),
            data_dir: None,
            sample_ms: 10,
        }
    }

    fn figures(backlog: u64, memory: u64, disk: u64) -> Figures {
        Figures { backlog: Some(backlog), memory_bytes: Some(memory), disk_free_bytes: Some(disk) }
    }

    #[test]
    fn each_watermark_sheds_the_low_band_then_the_normal_band() {
        let c = config();
        assert_eq!(decide(&c, &figures(99, 999, 401)), None);
        assert_eq!(decide(&c, &figures(100, 0, 10_000)), Some((ShedLevel::Low, ShedReason::Backlog)));
        assert_eq!(decide(&c, &figures(125, 0, 10_000)), Some((ShedLevel::Normal, ShedReason::Backlog)));
        assert_eq!(decide(&c, &figures(0, 1_000, 10_000)), Some((ShedLevel::Low, ShedReason::Memory)));
        assert_eq!(decide(&c, &figures(0, 1_250, 10_000)), Some((ShedLevel::Normal, ShedReason::Memory)));
        assert_eq!(decide(&c, &figures(0, 0, 400)), Some((ShedLevel::Low, ShedReason::Disk)));
        assert_eq!(decide(&c, &figures(0, 0, 200)), Some((ShedLevel::Normal, ShedReason::Disk)));
        // The hardest signal wins.
        assert_eq!(decide(&c, &figures(100, 1_300, 10_000)), Some((ShedLevel::Normal, ShedReason::Memory)));
        // Signals turned off or unknown never shed.
        let off = ShedConfig { backlog_max: None, memory_bytes_max: None, disk_free_bytes_min: None, ..c };
        assert_eq!(decide(&off, &figures(1 << 40, 1 << 40, 0)), None);
        assert_eq!(decide(&config(), &Figures::default()), None);
    }

    #[test]
    fn bands_refuse_by_priority_and_count_what_they_refuse() {
        let s = Shedder::new(config());
        s.observe(figures(100, 0, 10_000));
        let refused: Vec<u8> = (0..=9).filter(|&p| s.admit("queue:q", p).is_err()).collect();
        assert_eq!(refused, [0, 1, 2]);
        s.observe(figures(200, 0, 10_000));
        let refused: Vec<u8> = (0..=9).filter(|&p| s.admit("queue:q", p).is_err()).collect();
        assert_eq!(refused, [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(s.refused()["queue:q"], 10);
        let shed = s.admit("queue:q", 0).unwrap_err();
        assert_eq!((shed.reason, shed.retry_after_s), (ShedReason::Backlog, SHED_RETRY_AFTER_S));
        s.observe(figures(0, 0, 10_000));
        assert!((0..=9).all(|p| s.admit("queue:q", p).is_ok()));
    }

    #[test]
    fn the_process_memory_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            let rss = resident_bytes().expect("/proc/self/statm");
            assert!(rss > 0 && rss < machine_memory_bytes().expect("/proc/meminfo"));
        }
    }
}
