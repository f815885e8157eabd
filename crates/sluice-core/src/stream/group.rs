//! `offsets` mode: a consumer group whose partitions are shared among its live members.
//!
//! A member joins by fetching. Whenever the set of live members changes (a join, or a member
//! that has not fetched or committed for `session_timeout_ms`), the group's `generation` grows
//! and the partitions are reassigned: balanced (every member owns `P / M` or one more) and
//! sticky (a partition stays with its owner unless the balance needs it elsewhere). Each
//! partition remembers the generation at which it was last given to its owner
//! (`assigned_generation`).
//!
//! A commit names the member and the generation it read at. It is accepted only if the member
//! still owns every partition it commits, the partition has not been reassigned (or sought)
//! since that generation, and every offset lies between the committed offset and the
//! partition's end: committed offsets only move forward. `seek` is the one way back; it also
//! makes every commit from before it stale. All of a commit's offsets are checked before any
//! is applied.
//!
//! Besides the committed offset (durable), each partition has a `position`: where the owner's
//! next fetch reads. It starts at the committed offset whenever the partition changes hands and
//! is not durable: after a restart [`OffsetsGroup::restore`] puts it back at the committed
//! offset, so a record fetched but never committed is fetched again (at least once).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::limits::GROUP_MEMBERS_MAX;
use crate::TimeMs;

/// One partition's place in the group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    pub owner: Option<String>,
    pub assigned_generation: u64,
    /// The next offset to read, as committed.
    pub committed: u64,
    /// The next offset the owner's fetch reads.
    pub position: u64,
}

/// The state of an `offsets` group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetsGroup {
    pub generation: u64,
    /// Live members and when each was last heard from.
    pub members: BTreeMap<String, TimeMs>,
    pub partitions: Vec<PartitionState>,
}

/// What a fetch may read: the member's partitions at the group's generation, each from its
/// position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub generation: u64,
    pub partitions: Vec<(u32, u64)>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("the group has {GROUP_MEMBERS_MAX} live members, the most it may have")]
    TooManyMembers,
}

/// Why a commit was refused; nothing of it was applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitError {
    #[error("member {member} is not in the group (it joins by fetching, and leaves after its session timeout)")]
    UnknownMember { member: String },
    #[error(
        "generation {given} is stale for partition {partition}: it was reassigned or sought at generation {assigned}, or is no longer this member's (the group is at generation {current}); fetch again"
    )]
    StaleGeneration { partition: u32, given: u64, assigned: u64, current: u64 },
    #[error(
        "offset {offset} for partition {partition} is below its committed offset {committed}: commits only move forward; use seek to go back"
    )]
    Regression { partition: u32, offset: u64, committed: u64 },
    #[error("offset {offset} for partition {partition} is past its end ({next_offset})")]
    BeyondEnd { partition: u32, offset: u64, next_offset: u64 },
    #[error("partition {partition} does not exist: the stream has {partitions}")]
    NoSuchPartition { partition: u32, partitions: u32 },
}

impl OffsetsGroup {
    /// A group with no members, each partition starting at `start[p]`.
    pub fn new(start: Vec<u64>) -> OffsetsGroup {
        let partitions = start
            .into_iter()
            .map(|o| PartitionState { owner: None, assigned_generation: 0, committed: o, position: o })
            .collect();
        OffsetsGroup { generation: 0, members: BTreeMap::new(), partitions }
    }

    /// After a restart: every member is given a full session from `now`, and every position is
    /// put back at its committed offset.
    pub fn restore(&mut self, now: TimeMs) {
        for seen in self.members.values_mut() {
            *seen = now;
        }
        for p in &mut self.partitions {
            p.position = p.committed;
        }
    }

    /// The stream grew to `partitions`; new ones start at `start` (0: their beginning).
    pub fn resize(&mut self, partitions: usize, start: u64) {
        if partitions > self.partitions.len() {
            self.partitions.resize(
                partitions,
                PartitionState { owner: None, assigned_generation: 0, committed: start, position: start },
            );
            self.generation += 1;
            self.rebalance();
        }
    }

    /// Drops members silent for `session_timeout_ms`; reassigns if any was dropped.
    pub fn expire(&mut self, now: TimeMs, session_timeout_ms: u64) -> bool {
        let before = self.members.len();
        self.members.retain(|_, seen| now.saturating_sub(*seen) < session_timeout_ms);
        let changed = self.members.len() != before;
        if changed {
            self.generation += 1;
            self.rebalance();
        }
        changed
    }

    /// A fetch by `member`: it joins if new (and the group reassigns), is marked alive, and is
    /// told its partitions and their positions.
    pub fn fetch(&mut self, member: &str, now: TimeMs, session_timeout_ms: u64) -> Result<Assignment, GroupError> {
        self.expire(now, session_timeout_ms);
        if !self.members.contains_key(member) {
            if self.members.len() >= GROUP_MEMBERS_MAX {
                return Err(GroupError::TooManyMembers);
            }
            self.members.insert(member.to_owned(), now);
            self.generation += 1;
            self.rebalance();
        }
        self.members.insert(member.to_owned(), now);
        Ok(self.assignment(member))
    }

    /// `member`'s partitions now.
    pub fn assignment(&self, member: &str) -> Assignment {
        let partitions = self
            .partitions
            .iter()
            .enumerate()
            .filter(|(_, p)| p.owner.as_deref() == Some(member))
            .map(|(i, p)| (i as u32, p.position.max(p.committed)))
            .collect();
        Assignment { generation: self.generation, partitions }
    }

    /// After a fetch read `partition` from `from` up to `to` (exclusive): the owner's next
    /// fetch reads from `to`. Ignored if the partition changed hands or moved meanwhile.
    pub fn advance(&mut self, member: &str, partition: u32, from: u64, to: u64) {
        if let Some(p) = self.partitions.get_mut(partition as usize)
            && p.owner.as_deref() == Some(member)
            && p.position.max(p.committed) == from
        {
            p.position = to;
        }
    }

    /// Commits `offsets` (partition → next offset to read) for `member` at `generation`;
    /// `ends[p]` is partition `p`'s next offset. All or nothing.
    pub fn commit(
        &mut self,
        member: &str,
        generation: u64,
        offsets: &BTreeMap<u32, u64>,
        ends: &[u64],
        now: TimeMs,
        session_timeout_ms: u64,
    ) -> Result<(), CommitError> {
        self.expire(now, session_timeout_ms);
        if !self.members.contains_key(member) {
            return Err(CommitError::UnknownMember { member: member.to_owned() });
        }
        self.members.insert(member.to_owned(), now);
        let partitions = self.partitions.len() as u32;
        for (&partition, &offset) in offsets {
            let Some(p) = self.partitions.get(partition as usize) else {
                return Err(CommitError::NoSuchPartition { partition, partitions });
            };
            let owned = p.owner.as_deref() == Some(member);
            if !owned || generation < p.assigned_generation || generation > self.generation {
                return Err(CommitError::StaleGeneration {
                    partition,
                    given: generation,
                    assigned: p.assigned_generation,
                    current: self.generation,
                });
            }
            if offset < p.committed {
                return Err(CommitError::Regression { partition, offset, committed: p.committed });
            }
            let next_offset = ends.get(partition as usize).copied().unwrap_or(0);
            if offset > next_offset {
                return Err(CommitError::BeyondEnd { partition, offset, next_offset });
            }
        }
        for (&partition, &offset) in offsets {
            let p = &mut self.partitions[partition as usize];
            p.committed = offset;
            p.position = p.position.max(offset);
        }
        Ok(())
    }

    /// Sets partition `partition`'s committed offset and position to `offset` (the caller
    /// keeps it within the partition), and makes every commit from before it stale.
    pub fn seek(&mut self, partition: u32, offset: u64) {
        self.generation += 1;
        let generation = self.generation;
        if let Some(p) = self.partitions.get_mut(partition as usize) {
            p.committed = offset;
            p.position = offset;
            p.assigned_generation = generation;
        }
    }

    /// Balanced, sticky assignment of every partition to the members, in member-name order.
    fn rebalance(&mut self) {
        let members: Vec<&String> = self.members.keys().collect();
        let generation = self.generation;
        if members.is_empty() {
            for p in &mut self.partitions {
                if p.owner.take().is_some() {
                    p.assigned_generation = generation;
                }
            }
            return;
        }
        let count = self.partitions.len();
        let (base, extra) = (count / members.len(), count % members.len());
        // Members that already own more get the extra partitions first, so fewer move.
        let mut owned: BTreeMap<&str, usize> = members.iter().map(|m| (m.as_str(), 0)).collect();
        for p in &self.partitions {
            if let Some(o) = p.owner.as_deref()
                && let Some(n) = owned.get_mut(o)
            {
                *n += 1;
            }
        }
        let mut by_holding: Vec<&str> = members.iter().map(|m| m.as_str()).collect();
        by_holding.sort_by_key(|m| std::cmp::Reverse(owned[m]));
        let quota: BTreeMap<&str, usize> =
            by_holding.iter().enumerate().map(|(i, m)| (*m, base + usize::from(i < extra))).collect();
        let mut kept: BTreeMap<&str, usize> = members.iter().map(|m| (m.as_str(), 0)).collect();
        let mut free = Vec::new();
        for (i, p) in self.partitions.iter().enumerate() {
            match p.owner.as_deref().filter(|o| quota.contains_key(o)) {
                Some(o) if kept[o] < quota[o] => *kept.get_mut(o).expect("member") += 1,
                _ => free.push(i),
            }
        }
        let mut wanting = members.iter().map(|m| m.as_str()).filter(|m| kept[m] < quota[m]).collect::<Vec<_>>();
        let mut next: Vec<(usize, String)> = Vec::new();
        for i in free {
            let m = wanting[0];
            next.push((i, m.to_owned()));
            *kept.get_mut(m).expect("member") += 1;
            if kept[m] >= quota[m] {
                wanting.remove(0);
            }
        }
        for (i, m) in next {
            let p = &mut self.partitions[i];
            p.owner = Some(m);
            p.assigned_generation = generation;
            p.position = p.committed;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(g: &mut OffsetsGroup, member: &str, generation: u64, p: u32, o: u64) -> Result<(), CommitError> {
        g.commit(member, generation, &BTreeMap::from([(p, o)]), &[100; 4], 0, 10_000)
    }

    #[test]
    fn members_share_partitions_and_commits_need_a_current_owner() {
        let mut g = OffsetsGroup::new(vec![0; 4]);
        let a = g.fetch("a", 0, 10_000).unwrap();
        assert_eq!((a.generation, a.partitions.len()), (1, 4));
        let b = g.fetch("b", 0, 10_000).unwrap();
        assert_eq!((b.generation, b.partitions.len()), (2, 2));
        let a2 = g.assignment("a");
        assert_eq!(a2.partitions.len(), 2, "two moved to b, two stayed with a");
        let (pa, pb) = (a2.partitions[0].0, b.partitions[0].0);
        // a's commit at the generation it first read: its partition never moved, so accepted.
        assert_eq!(commit(&mut g, "a", 1, pa, 10), Ok(()));
        // b's partition moved at generation 2: a commit of it by a is stale.
        assert!(matches!(commit(&mut g, "a", 2, pb, 10), Err(CommitError::StaleGeneration { .. })));
        assert!(matches!(commit(&mut g, "a", 2, pa, 5), Err(CommitError::Regression { committed: 10, .. })));
        assert!(matches!(commit(&mut g, "a", 2, pa, 101), Err(CommitError::BeyondEnd { .. })));
        assert!(matches!(commit(&mut g, "c", 2, pa, 11), Err(CommitError::UnknownMember { .. })));
        // b goes silent: a gets everything back at a new generation.
        g.fetch("a", 9_000, 10_000).unwrap();
        let a3 = g.fetch("a", 10_500, 10_000).unwrap();
        assert_eq!((a3.generation, a3.partitions.len()), (3, 4));
        assert!(matches!(commit(&mut g, "b", 2, pb, 1), Err(CommitError::UnknownMember { .. })));
    }

    #[test]
    fn seek_goes_back_and_stales_earlier_commits() {
        let mut g = OffsetsGroup::new(vec![0]);
        let a = g.fetch("a", 0, 10_000).unwrap();
        commit(&mut g, "a", a.generation, 0, 50).unwrap();
        g.seek(0, 20);
        assert_eq!((g.partitions[0].committed, g.partitions[0].position), (20, 20));
        assert!(matches!(commit(&mut g, "a", a.generation, 0, 60), Err(CommitError::StaleGeneration { .. })));
        let a = g.fetch("a", 1, 10_000).unwrap();
        assert_eq!(a.partitions, vec![(0, 20)]);
        commit(&mut g, "a", a.generation, 0, 60).unwrap();
    }

    #[test]
    fn positions_advance_on_fetch_and_restart_from_committed() {
        let mut g = OffsetsGroup::new(vec![5]);
        g.fetch("a", 0, 10_000).unwrap();
        g.advance("a", 0, 5, 9);
        assert_eq!(g.assignment("a").partitions, vec![(0, 9)]);
        g.advance("a", 0, 5, 12);
        assert_eq!(g.assignment("a").partitions, vec![(0, 9)], "a stale advance is ignored");
        g.restore(100);
        assert_eq!(g.assignment("a").partitions, vec![(0, 5)]);
        assert_eq!(g.members["a"], 100);
    }
}
