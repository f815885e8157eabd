//! What a trace entry is, how it is stored, the feature's limits, and causal order.
//!
//! An entry is the record `trace/<len>.<correlation id>/<at ms, 20 digits>/<entry id>`: the
//! correlation id's length before it keeps one id's prefix from matching a longer id that
//! starts with it (`ab/` is not a prefix of `2.ab/...` when the id is `ab/c`), and the time after
//! it lists one correlation's entries oldest first.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use serde::{Deserialize, Serialize};

/// The record kind of trace entries.
pub const TRACE_KIND: &str = "trace";
/// The format of an entry's JSON; a reader skips others rather than guess.
pub const TRACE_FORMAT: u8 = 1;
/// Longest correlation id, causation id and entry id, in bytes (the envelope fields' limit).
pub const TRACE_ID_LEN_MAX: usize = 256;
/// How long an entry is kept when `--trace-retention` is not given: 7 days.
pub const TRACE_RETENTION_MS_DEFAULT: u64 = 7 * 24 * 60 * 60 * 1000;
/// Most entries one trace answer holds; a correlation with more answers its oldest this many
/// with `truncated: true`. Read before anything is ordered, so a huge correlation costs at most
/// this much memory.
pub const TRACE_ENTRIES_READ_MAX: usize = 10_000;
/// How often expired entries are swept.
pub const TRACE_SWEEP_MS: u64 = 60_000;
/// Most entries one sweep page reads.
pub const TRACE_SWEEP_PAGE_MAX: usize = 1_000;

/// What an entry stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceKind {
    /// A message sent to a queue (`target` `queue:NAME`).
    Message,
    /// A message published to a topic (`topic:NAME`).
    Publish,
    /// A topic's copy pushed to an HTTP/S endpoint (`push:ENDPOINT`), once it was answered 2xx.
    Push,
    /// A record appended to a stream (`stream:NAME`; the id is `partition/offset`).
    Record,
    /// An event appended to the event store (`events:STREAM ID`).
    Event,
    /// A job enqueued (`job:QUEUE`).
    Job,
    /// A saga instance started (`saga:NAME`).
    Saga,
    /// One attempt of a saga step's action or compensation (`saga:NAME`; the id is
    /// `instance/step/kind/attempt`).
    SagaStep,
}

impl TraceKind {
    pub const ALL: [TraceKind; 8] = [
        TraceKind::Message,
        TraceKind::Publish,
        TraceKind::Push,
        TraceKind::Record,
        TraceKind::Event,
        TraceKind::Job,
        TraceKind::Saga,
        TraceKind::SagaStep,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TraceKind::Message => "message",
            TraceKind::Publish => "publish",
            TraceKind::Push => "push",
            TraceKind::Record => "record",
            TraceKind::Event => "event",
            TraceKind::Job => "job",
            TraceKind::Saga => "saga",
            TraceKind::SagaStep => "saga_step",
        }
    }
}

/// One thing that carried a correlation id, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceEntry {
    pub kind: TraceKind,
    /// The thing's own id: a message id, an event id, a job id, `partition/offset`, ...
    pub id: String,
    pub correlation_id: String,
    /// The id of the entry that caused this one, when the writer named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causation_id: Option<String>,
    /// Where it went: `queue:NAME`, `topic:NAME`, `stream:NAME`, `events:ID`, `job:QUEUE`,
    /// `saga:NAME`, `push:ENDPOINT`.
    pub target: String,
    /// The message, record or event type, or the saga step's name and outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// When it was recorded, on the services' clock.
    pub at_ms: u64,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    format: u8,
    #[serde(flatten)]
    entry: TraceEntry,
}

impl TraceEntry {
    /// The entry with the ids cut to [`TRACE_ID_LEN_MAX`] bytes (at a character boundary), so
    /// that its key always fits a record key.
    pub fn new(kind: TraceKind, id: impl Into<String>, correlation_id: &str, target: impl Into<String>) -> TraceEntry {
        TraceEntry {
            kind,
            id: cut(id.into()),
            correlation_id: cut(correlation_id.to_string()),
            causation_id: None,
            target: cut(target.into()),
            detail: None,
            at_ms: 0,
        }
    }

    pub fn caused_by(mut self, causation_id: Option<&str>) -> TraceEntry {
        self.causation_id = causation_id.map(|c| cut(c.to_string()));
        self
    }

    pub fn detail(mut self, detail: Option<&str>) -> TraceEntry {
        self.detail = detail.map(|d| cut(d.to_string()));
        self
    }

    /// The record key; `unique` tells apart two entries of one id at one millisecond.
    pub fn key(&self, unique: &str) -> String {
        format!("{}{:020}/{unique}", correlation_prefix(&self.correlation_id), self.at_ms)
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(&Stored { format: TRACE_FORMAT, entry: self.clone() }).expect("an entry serializes")
    }

    /// `None` for a record of another format (written by a newer version).
    pub fn decode(bytes: &[u8]) -> Option<TraceEntry> {
        serde_json::from_slice::<Stored>(bytes).ok().filter(|s| s.format == TRACE_FORMAT).map(|s| s.entry)
    }
}

/// The key prefix of one correlation's entries.
pub fn correlation_prefix(correlation_id: &str) -> String {
    format!("{}.{correlation_id}/", correlation_id.len())
}

/// The time a key was recorded at, read from the key alone (the sweep needs no decode).
pub fn key_at_ms(key: &str) -> Option<u64> {
    let (len, rest) = key.split_once('.')?;
    let rest = rest.get(len.parse::<usize>().ok()? + 1..)?;
    rest.split('/').next()?.parse().ok()
}

fn cut(mut text: String) -> String {
    if text.len() > TRACE_ID_LEN_MAX {
        let mut end = TRACE_ID_LEN_MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// `entries` (oldest first) in causal order: every entry after the entry it names as its
/// cause, when that one is in the list; otherwise oldest first, ties kept in the given order.
/// Each entry comes with its depth: 0 for an entry whose cause is not in the list, its cause's
/// depth plus one otherwise. A cycle of causes (ids a writer reused) cannot stall the order:
/// its entries come oldest first once nothing outside the cycle is left.
pub fn causal_order(entries: Vec<TraceEntry>) -> Vec<(TraceEntry, usize)> {
    let mut by_id: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        by_id.entry(e.id.as_str()).or_default().push(i);
    }
    // The cause of each entry: its first earlier-listed holder of the causation id.
    let cause: Vec<Option<usize>> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let holders = by_id.get(e.causation_id.as_deref()?)?;
            holders.iter().copied().find(|&h| h != i)
        })
        .collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); entries.len()];
    for (i, c) in cause.iter().enumerate() {
        if let Some(c) = c {
            children[*c].push(i);
        }
    }
    let mut depth = vec![0usize; entries.len()];
    let mut done = vec![false; entries.len()];
    let mut ready: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    for (i, e) in entries.iter().enumerate() {
        if cause[i].is_none() {
            ready.push(Reverse((e.at_ms, i)));
        }
    }
    let mut order = Vec::with_capacity(entries.len());
    while order.len() < entries.len() {
        let next = match ready.pop() {
            Some(Reverse((_, i))) => i,
            // Only cycles are left: the oldest of what remains starts.
            None => (0..entries.len()).filter(|&i| !done[i]).min_by_key(|&i| (entries[i].at_ms, i)).expect("left"),
        };
        if done[next] {
            continue;
        }
        done[next] = true;
        order.push(next);
        for &child in &children[next] {
            if !done[child] {
                depth[child] = depth[next] + 1;
                ready.push(Reverse((entries[child].at_ms, child)));
            }
        }
    }
    let mut slots: Vec<Option<TraceEntry>> = entries.into_iter().map(Some).collect();
    order.into_iter().map(|i| (slots[i].take().expect("each once"), depth[i])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, cause: Option<&str>, at_ms: u64) -> TraceEntry {
        TraceEntry { at_ms, ..TraceEntry::new(TraceKind::Message, id, "c", "queue:q").caused_by(cause) }
    }

    fn ids(order: &[(TraceEntry, usize)]) -> Vec<(&str, usize)> {
        order.iter().map(|(e, d)| (e.id.as_str(), *d)).collect()
    }

    #[test]
    fn an_effect_follows_its_cause_even_when_its_clock_said_earlier() {
        // `b` was caused by `a` but recorded a millisecond earlier (another node's clock).
        let order = causal_order(vec![entry("b", Some("a"), 9), entry("a", None, 10), entry("x", None, 11)]);
        assert_eq!(ids(&order), vec![("a", 0), ("b", 1), ("x", 0)]);
    }

    #[test]
    fn siblings_come_oldest_first_and_a_missing_cause_makes_a_root() {
        let order = causal_order(vec![
            entry("root", None, 1),
            entry("late", Some("root"), 5),
            entry("early", Some("root"), 3),
            entry("grandchild", Some("early"), 4),
            entry("orphan", Some("gone"), 2),
        ]);
        assert_eq!(ids(&order), vec![("root", 0), ("orphan", 0), ("early", 1), ("grandchild", 2), ("late", 1)]);
    }

    #[test]
    fn a_cycle_of_reused_ids_still_lists_every_entry_once() {
        let order = causal_order(vec![entry("a", Some("b"), 1), entry("b", Some("a"), 2), entry("c", None, 3)]);
        let mut seen: Vec<&str> = ids(&order).into_iter().map(|(id, _)| id).collect();
        assert_eq!(seen[0], "c");
        seen.sort();
        assert_eq!(seen, vec!["a", "b", "c"]);
    }

    #[test]
    fn keys_list_one_correlation_oldest_first_and_never_a_longer_one() {
        let mut a = TraceEntry::new(TraceKind::Job, "j", "ab", "job:q");
        a.at_ms = 42;
        let key = a.key("u");
        assert_eq!(key, "2.ab/00000000000000000042/u");
        assert!(key.starts_with(&correlation_prefix("ab")));
        let longer = TraceEntry { at_ms: 1, ..TraceEntry::new(TraceKind::Job, "j", "ab/c", "job:q") };
        assert!(!longer.key("u").starts_with(&correlation_prefix("ab")));
        assert_eq!(key_at_ms(&key), Some(42));
        assert_eq!(key_at_ms(&longer.key("u")), Some(1));
        let later = TraceEntry { at_ms: 100, ..a.clone() };
        assert!(later.key("a") > key);
    }

    #[test]
    fn long_ids_are_cut_at_a_character_boundary_and_entries_round_trip() {
        let long = "é".repeat(TRACE_ID_LEN_MAX);
        let e = TraceEntry::new(TraceKind::Event, long.clone(), &long, "events:s").detail(Some("OrderPlaced"));
        assert!(e.id.len() <= TRACE_ID_LEN_MAX && e.correlation_id.len() <= TRACE_ID_LEN_MAX);
        assert!(long.starts_with(&e.id));
        assert_eq!(TraceEntry::decode(&e.encode()), Some(e));
        assert_eq!(TraceEntry::decode(br#"{"format":9,"kind":"job"}"#), None);
    }
}
