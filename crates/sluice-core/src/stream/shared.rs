//! `shared` mode: queue-style consumption of a stream. Any member takes any record; each
//! delivery comes with a receipt; an ack ends it, a release gives it back (not a failure), a
//! nack or an ack timeout gives it back as a failure, and after `max_deliveries` failures the
//! record leaves the group (to its dead-letter queue, which the store writes).
//!
//! Per partition the group keeps a `cursor` (the first offset it has never looked at) and the
//! `pending` records below it that are not yet acknowledged: held by a member, or waiting to be
//! handed out (given back, or behind an earlier record of their key). Everything below the
//! lowest pending offset is done. `pending` is bounded by `SHARED_WINDOW_RECORDS_MAX`, so the
//! state of a group does not grow with the stream.
//!
//! With `key_ordered`, a record is handed out only when no pending record of its key has a
//! lower offset: at most one record of a key is out at once, and a key's records are handed
//! out in offset order, while records of other keys go on in parallel. Keys are compared by a
//! 64-bit hash (`super::key_hash`): a collision orders two keys as one, never the reverse.

use std::collections::{BTreeMap, HashSet};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use super::limits::SHARED_WINDOW_RECORDS_MAX;
use crate::TimeMs;

/// A shared group's delivery settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedSettings {
    pub ack_timeout_ms: u64,
    pub max_deliveries: u32,
    pub key_ordered: bool,
}

/// A member's hold on a delivered record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    pub member: String,
    pub until_ms: TimeMs,
}

/// A record below the cursor that is not yet acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub key: Option<u64>,
    /// Times handed out.
    pub deliveries: u32,
    /// Deliveries that ended in an ack timeout or a nack.
    pub failures: u32,
    pub hold: Option<Hold>,
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedPartition {
    pub cursor: u64,
    pub pending: BTreeMap<u64, Pending>,
}

/// The state of a `shared` group. `uid` tells its receipts from any other group's; `epoch`
/// grows with every seek, so a receipt from before a seek never touches a later delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedGroup {
    pub uid: u64,
    pub epoch: u32,
    pub partitions: Vec<SharedPartition>,
    /// Where the next fetch starts looking, so that partitions take turns.
    pub next_partition: u32,
}

/// A record handed out by [`SharedGroup::take`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub partition: u32,
    pub offset: u64,
    pub deliveries: u32,
    pub receipt: SharedReceipt,
}

/// A record that failed `max_deliveries` times and left the group: the store dead-letters it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exhausted {
    pub partition: u32,
    pub offset: u64,
    pub deliveries: u32,
    pub last_error: Option<String>,
}

/// Names one delivery of one record of one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedReceipt {
    pub group: u64,
    pub epoch: u32,
    pub partition: u32,
    pub offset: u64,
    pub delivery: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReceiptError {
    #[error("the receipt is not one this server issued")]
    Invalid,
    #[error("the receipt belongs to another group")]
    Foreign,
    #[error("the receipt's delivery is over: the record was acked, given back, timed out or sought past")]
    Stale,
}

const RECEIPT_VERSION: u8 = 1;
const RECEIPT_BYTES: usize = 1 + 8 + 4 + 4 + 8 + 4;

impl SharedReceipt {
    pub fn encode(&self) -> String {
        let mut b = Vec::with_capacity(RECEIPT_BYTES);
        b.push(RECEIPT_VERSION);
        b.extend_from_slice(&self.group.to_be_bytes());
        b.extend_from_slice(&self.epoch.to_be_bytes());
        b.extend_from_slice(&self.partition.to_be_bytes());
        b.extend_from_slice(&self.offset.to_be_bytes());
        b.extend_from_slice(&self.delivery.to_be_bytes());
        URL_SAFE_NO_PAD.encode(b)
    }

    pub fn decode(text: &str) -> Result<SharedReceipt, ReceiptError> {
        let b = URL_SAFE_NO_PAD.decode(text.as_bytes()).map_err(|_| ReceiptError::Invalid)?;
        if b.len() != RECEIPT_BYTES || b[0] != RECEIPT_VERSION {
            return Err(ReceiptError::Invalid);
        }
        let u64_at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Ok(SharedReceipt {
            group: u64_at(1),
            epoch: u32_at(9),
            partition: u32_at(13),
            offset: u64_at(17),
            delivery: u32_at(25),
        })
    }
}

impl SharedGroup {
    /// A group whose partition `p` starts at `start[p]`.
    pub fn new(uid: u64, start: Vec<u64>) -> SharedGroup {
        let partitions = start.into_iter().map(|cursor| SharedPartition { cursor, pending: BTreeMap::new() }).collect();
        SharedGroup { uid, epoch: 0, partitions, next_partition: 0 }
    }

    pub fn resize(&mut self, partitions: usize, start: u64) {
        if partitions > self.partitions.len() {
            self.partitions.resize(partitions, SharedPartition { cursor: start, pending: BTreeMap::new() });
        }
    }

    /// The lowest offset of `partition` not yet done: what the group's lag counts from.
    pub fn low_water(&self, partition: u32) -> u64 {
        let p = &self.partitions[partition as usize];
        p.pending.keys().next().copied().unwrap_or(p.cursor)
    }

    /// Records held by members now, in all partitions.
    pub fn in_flight(&self) -> usize {
        self.partitions.iter().map(|p| p.pending.values().filter(|r| r.hold.is_some()).count()).sum()
    }

    /// How many records past the cursor `partition` may look at now (room in its window).
    pub fn room(&self, partition: u32) -> usize {
        SHARED_WINDOW_RECORDS_MAX.saturating_sub(self.partitions[partition as usize].pending.len())
    }

    /// Ends every hold whose ack timeout passed by `now`: a failure each. Records that reached
    /// `max_deliveries` failures leave the group and are returned, for the dead-letter queue.
    pub fn expire(&mut self, now: TimeMs, settings: &SharedSettings) -> Vec<Exhausted> {
        let mut out = Vec::new();
        for (pi, p) in self.partitions.iter_mut().enumerate() {
            let due: Vec<u64> = p
                .pending
                .iter()
                .filter(|(_, r)| r.hold.as_ref().is_some_and(|h| h.until_ms <= now))
                .map(|(o, _)| *o)
                .collect();
            for offset in due {
                let r = p.pending.get_mut(&offset).expect("due record");
                r.hold = None;
                r.failures += 1;
                r.last_error = Some(format!(
                    "the ack timeout of {} ms passed (delivery {})",
                    settings.ack_timeout_ms, r.deliveries
                ));
                if r.failures >= settings.max_deliveries {
                    let r = p.pending.remove(&offset).expect("due record");
                    out.push(Exhausted {
                        partition: pi as u32,
                        offset,
                        deliveries: r.deliveries,
                        last_error: r.last_error,
                    });
                }
            }
        }
        out
    }

    /// When the next hold ends, if any.
    pub fn next_due(&self) -> Option<TimeMs> {
        self.partitions
            .iter()
            .flat_map(|p| p.pending.values())
            .filter_map(|r| r.hold.as_ref().map(|h| h.until_ms))
            .min()
    }

    /// Hands out up to `max` records of `partition` to `member`: first pending records that
    /// may go (in offset order), then records from the cursor on, `fresh` being the records the
    /// store read there (`(offset, key)`, from the cursor, consecutive). A fresh record that must
    /// wait behind its key joins the pending records; the cursor moves past every fresh record
    /// taken in, and stops at the window's bound.
    pub fn take(
        &mut self,
        partition: u32,
        fresh: &[(u64, Option<u64>)],
        max: usize,
        member: &str,
        now: TimeMs,
        settings: &SharedSettings,
    ) -> Vec<Delivery> {
        let (uid, epoch) = (self.uid, self.epoch);
        let p = &mut self.partitions[partition as usize];
        let hold = || Hold { member: member.to_owned(), until_ms: now.saturating_add(settings.ack_timeout_ms) };
        let mut out = Vec::new();
        let mut keys_out: HashSet<u64> = HashSet::new();
        let mut ready = Vec::new();
        for (&offset, r) in &p.pending {
            let blocked = settings.key_ordered && r.key.is_some_and(|k| !keys_out.insert(k));
            if r.hold.is_none() && !blocked && ready.len() < max {
                ready.push(offset);
            }
        }
        for offset in ready {
            let r = p.pending.get_mut(&offset).expect("ready record");
            r.deliveries += 1;
            r.hold = Some(hold());
            let receipt = SharedReceipt { group: uid, epoch, partition, offset, delivery: r.deliveries };
            out.push(Delivery { partition, offset, deliveries: r.deliveries, receipt });
        }
        for &(offset, key) in fresh {
            if out.len() >= max || p.pending.len() >= SHARED_WINDOW_RECORDS_MAX || offset != p.cursor {
                break;
            }
            p.cursor += 1;
            let blocked = settings.key_ordered && key.is_some_and(|k| !keys_out.insert(k));
            let mut r = Pending { key, deliveries: 0, failures: 0, hold: None, last_error: None };
            if !blocked {
                r.deliveries = 1;
                r.hold = Some(hold());
                let receipt = SharedReceipt { group: uid, epoch, partition, offset, delivery: 1 };
                out.push(Delivery { partition, offset, deliveries: 1, receipt });
            }
            p.pending.insert(offset, r);
        }
        out
    }

    /// The pending record a receipt names, if that delivery is still held.
    fn held(&mut self, receipt: &SharedReceipt) -> Result<&mut SharedPartition, ReceiptError> {
        if receipt.group != self.uid {
            return Err(ReceiptError::Foreign);
        }
        if receipt.epoch != self.epoch {
            return Err(ReceiptError::Stale);
        }
        let p = self.partitions.get_mut(receipt.partition as usize).ok_or(ReceiptError::Stale)?;
        match p.pending.get(&receipt.offset) {
            Some(r) if r.hold.is_some() && r.deliveries == receipt.delivery => Ok(p),
            _ => Err(ReceiptError::Stale),
        }
    }

    /// The record is done.
    pub fn ack(&mut self, receipt: &SharedReceipt) -> Result<(), ReceiptError> {
        self.held(receipt)?.pending.remove(&receipt.offset);
        Ok(())
    }

    /// Gives the record back without counting a failure.
    pub fn release(&mut self, receipt: &SharedReceipt, error: Option<String>) -> Result<(), ReceiptError> {
        let r = self.held(receipt)?.pending.get_mut(&receipt.offset).expect("held record");
        r.hold = None;
        if error.is_some() {
            r.last_error = error;
        }
        Ok(())
    }

    /// Gives the record back as a failure; after `max_deliveries` failures it leaves the group
    /// and is returned, for the dead-letter queue.
    pub fn nack(
        &mut self,
        receipt: &SharedReceipt,
        error: Option<String>,
        settings: &SharedSettings,
    ) -> Result<Option<Exhausted>, ReceiptError> {
        let p = self.held(receipt)?;
        let r = p.pending.get_mut(&receipt.offset).expect("held record");
        r.hold = None;
        r.failures += 1;
        r.last_error = error.or_else(|| Some(format!("nacked (delivery {})", r.deliveries)));
        if r.failures < settings.max_deliveries {
            return Ok(None);
        }
        let r = p.pending.remove(&receipt.offset).expect("held record");
        Ok(Some(Exhausted {
            partition: receipt.partition,
            offset: receipt.offset,
            deliveries: r.deliveries,
            last_error: r.last_error,
        }))
    }

    /// Starts `partition` again at `offset`, forgetting its pending records; every receipt
    /// issued before is stale from now on.
    pub fn seek(&mut self, partition: u32, offset: u64) {
        self.epoch = self.epoch.wrapping_add(1);
        if let Some(p) = self.partitions.get_mut(partition as usize) {
            p.cursor = offset;
            p.pending.clear();
        }
    }

    /// Retention removed `partition`'s records below `first_offset`: they can no longer be
    /// delivered. Returns how many pending records were dropped.
    pub fn forget_below(&mut self, partition: u32, first_offset: u64) -> usize {
        let p = &mut self.partitions[partition as usize];
        let kept = p.pending.split_off(&first_offset);
        let dropped = p.pending.len();
        p.pending = kept;
        p.cursor = p.cursor.max(first_offset);
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDERED: SharedSettings = SharedSettings { ack_timeout_ms: 1_000, max_deliveries: 2, key_ordered: true };

    fn offsets(d: &[Delivery]) -> Vec<u64> {
        d.iter().map(|d| d.offset).collect()
    }

    #[test]
    fn key_ordering_holds_back_a_key_until_its_earlier_record_is_acked() {
        let mut g = SharedGroup::new(7, vec![0]);
        // Offsets 0..5 with keys a, b, a, c, a.
        let fresh = [(0, Some(1)), (1, Some(2)), (2, Some(1)), (3, Some(3)), (4, Some(1))];
        let d = g.take(0, &fresh, 10, "m", 0, &ORDERED);
        assert_eq!(offsets(&d), [0, 1, 3], "one record per key out at once");
        assert_eq!(g.partitions[0].cursor, 5);
        assert_eq!(offsets(&g.take(0, &[], 10, "m", 0, &ORDERED)), Vec::<u64>::new());
        g.ack(&d[0].receipt).unwrap();
        assert_eq!(offsets(&g.take(0, &[], 10, "m", 0, &ORDERED)), [2], "a's next record, and only it");
        assert_eq!(g.low_water(0), 1);
    }

    #[test]
    fn timeouts_and_nacks_count_releases_do_not_and_exhausted_records_leave() {
        let mut g = SharedGroup::new(7, vec![0]);
        let d = g.take(0, &[(0, None)], 10, "m", 0, &ORDERED);
        g.release(&d[0].receipt, None).unwrap();
        assert_eq!(g.ack(&d[0].receipt), Err(ReceiptError::Stale), "a released delivery is over");
        let d = g.take(0, &[], 10, "m", 0, &ORDERED);
        assert_eq!(d[0].deliveries, 2);
        assert!(g.expire(999, &ORDERED).is_empty());
        assert!(g.expire(1_000, &ORDERED).is_empty(), "one failure of two");
        let d = g.take(0, &[], 10, "m", 1_000, &ORDERED);
        let gone = g.nack(&d[0].receipt, Some("boom".into()), &ORDERED).unwrap().expect("exhausted");
        assert_eq!((gone.offset, gone.deliveries, gone.last_error.as_deref()), (0, 3, Some("boom")));
        assert_eq!(g.low_water(0), 1);
    }

    #[test]
    fn receipts_round_trip_and_seek_stales_them() {
        let mut g = SharedGroup::new(9, vec![0]);
        let d = g.take(0, &[(0, None)], 1, "m", 0, &ORDERED);
        let text = d[0].receipt.encode();
        assert_eq!(SharedReceipt::decode(&text), Ok(d[0].receipt));
        assert_eq!(SharedReceipt::decode("nope"), Err(ReceiptError::Invalid));
        let foreign = SharedReceipt { group: 1, ..d[0].receipt };
        assert_eq!(g.ack(&foreign), Err(ReceiptError::Foreign));
        g.seek(0, 0);
        assert_eq!(g.ack(&d[0].receipt), Err(ReceiptError::Stale));
    }
}
