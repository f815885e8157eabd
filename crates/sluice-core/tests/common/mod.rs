//! What the broker tests share. Here, the "disk" they restart a broker from: every `Effect`
//! applied in order to plain maps, the way a store would, and the restore sequence a store runs
//! at start. `model` and `harness` are the reference model and the side-by-side runner of the
//! two model tests (`model.rs`, `fifo_model.rs`).
//!
//! Keeping it a `BTreeMap` makes restore deterministic (records come back in key order, as
//! from an LSM tree), and makes a missing or wrong effect show up as a difference after
//! `restart` instead of being hidden by the live broker's memory.

// Every test that declares `mod common` compiles all of it, and `script.rs` uses only the disk:
// the model tests' harness would be dead code there.
#[allow(dead_code)]
pub mod harness;
#[allow(dead_code)]
pub mod model;

use std::collections::BTreeMap;

use sluice_core::queue::DedupEntry;
use sluice_core::{Broker, Effect, MessageMeta, QueueAttributes, QueueId, TimeMs};

/// A queue record as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueRecord {
    pub name: String,
    pub attributes: QueueAttributes,
    pub created_at: TimeMs,
    pub modified_at: TimeMs,
}

#[derive(Debug, Clone, Default)]
pub struct Disk {
    pub queues: BTreeMap<QueueId, QueueRecord>,
    pub messages: BTreeMap<u64, MessageMeta>,
    /// Bodies by sequence number: written by the caller of `send`, removed by `DeleteMessage`.
    pub bodies: BTreeMap<u64, Vec<u8>>,
    /// The high-water marks: next sequence number and next queue id.
    pub high_water: Option<(u64, QueueId)>,
    /// FIFO deduplication records by queue and key.
    pub dedup: BTreeMap<(QueueId, String), DedupEntry>,
}

impl Disk {
    /// Writes the body of a message `send` just accepted under `seq`.
    pub fn put_body(&mut self, seq: u64, body: &[u8]) {
        self.bodies.insert(seq, body.to_vec());
    }

    pub fn apply(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::PutQueue { id, name, attributes, created_at, modified_at } => {
                    self.queues.insert(id, QueueRecord { name, attributes, created_at, modified_at });
                }
                Effect::DeleteQueue { id } => {
                    self.queues.remove(&id);
                }
                Effect::PutMessage { seq, meta } => {
                    self.messages.insert(seq, meta);
                }
                Effect::DeleteMessage { seq } => {
                    self.messages.remove(&seq);
                    self.bodies.remove(&seq);
                }
                Effect::PutHighWater { next_seq, next_queue_id } => {
                    self.high_water = Some((next_seq, next_queue_id));
                }
                Effect::PutDedup { queue, key, id, seq, expires_at } => {
                    self.dedup.insert((queue, key), DedupEntry { id, seq, expires_at });
                }
                Effect::DeleteDedup { queue, key } => {
                    self.dedup.remove(&(queue, key));
                }
            }
        }
    }

    /// Starts a fresh broker from the records, as a store does at start, then runs the timers
    /// that are due (a server's timer loop does so at once). Orphaned messages are dropped from
    /// the disk, as the embedded store does.
    pub fn restore(&mut self, now_ms: TimeMs) -> Broker {
        let mut broker = Broker::new();
        if let Some((next_seq, next_queue_id)) = self.high_water {
            broker.restore_high_water(next_seq, next_queue_id);
        }
        for (&id, q) in &self.queues {
            broker.restore_queue(id, q.name.clone(), q.attributes.clone(), q.created_at, q.modified_at);
        }
        let mut orphans = Vec::new();
        for (&seq, meta) in &self.messages {
            if !broker.restore_message(seq, meta.clone(), now_ms) {
                orphans.push(seq);
            }
        }
        for seq in orphans {
            self.messages.remove(&seq);
            self.bodies.remove(&seq);
        }
        let mut stale = Vec::new();
        for ((queue, key), entry) in &self.dedup {
            if !broker.restore_dedup(*queue, key.clone(), entry.clone(), now_ms) {
                stale.push((*queue, key.clone()));
            }
        }
        for k in stale {
            self.dedup.remove(&k);
        }
        broker.finish_restore();
        broker.tick(now_ms);
        let effects = broker.take_effects();
        self.apply(effects);
        broker
    }
}
