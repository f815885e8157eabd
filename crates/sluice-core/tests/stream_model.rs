//! Model-based property tests of stream consumer groups (`sluice_core::stream`).
//!
//! `offsets` mode: random joins (fetches), silences (the clock moving past session timeouts),
//! appends, commits (with the member's latest generation or an older one, forward, backward or
//! past the end), seeks and restarts (the state through JSON and `restore`, as a store keeps
//! it) run on the real `OffsetsGroup` beside a model that knows what must hold whatever the
//! assignment algorithm: the committed offsets (they move only by an accepted commit, never
//! back, or by a seek), the live members (those heard from within the session timeout), and the
//! commit rule. After every step: the group's members are the model's live members, every
//! partition is owned by exactly one live member (or none without members), the shares differ
//! by at most one, no two members are told they own one partition, generations never go back,
//! and the committed offsets are the model's. A commit is accepted exactly when its member is
//! live, owns the partition, gives a generation no older than the partition's last assignment,
//! and an offset between the committed offset and the end.
//!
//! `shared` mode: random takes by several members, acks, releases, nacks, ack timeouts and
//! seeks beside a model of each record's fate. With `key_ordered`, no two records of a key are
//! ever held at once, and a key's records are first handed out in offset order; nothing is
//! handed out twice at once; a record acked or dead-lettered never comes back.
//!
//! Failures are reproducible: proptest prints the shrunk operation list and records the seed
//! in `tests/proptest-regressions/stream_model.txt`; `PROPTEST_RNG_SEED=<n>` fixes the seed.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use sluice_core::stream::group::{CommitError, OffsetsGroup};
use sluice_core::stream::shared::{Delivery, SharedGroup, SharedSettings};

const PARTITIONS: usize = 5;
const SESSION_MS: u64 = 1_000;
const MEMBERS: [&str; 4] = ["a", "b", "c", "d"];

#[derive(Debug, Clone)]
enum Op {
    Fetch(usize),
    Advance(u64),
    Append(usize, u64),
    /// Member, partition, offset delta from committed (may be negative), use an older generation.
    Commit(usize, usize, i64, bool),
    Seek(usize, u64),
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..MEMBERS.len()).prop_map(Op::Fetch),
        2 => prop_oneof![Just(100u64), Just(400), Just(1_200)].prop_map(Op::Advance),
        2 => (0..PARTITIONS, 1..20u64).prop_map(|(p, n)| Op::Append(p, n)),
        5 => (0..MEMBERS.len(), 0..PARTITIONS, -3..8i64, any::<bool>()).prop_map(|(m, p, d, old)| Op::Commit(m, p, d, old)),
        1 => (0..PARTITIONS, 0..30u64).prop_map(|(p, o)| Op::Seek(p, o)),
        1 => Just(Op::Restart),
    ]
}

struct Model {
    now: u64,
    ends: Vec<u64>,
    committed: Vec<u64>,
    seen: BTreeMap<&'static str, u64>,
    /// The generation each member's last fetch returned, and the one before.
    generations: HashMap<&'static str, (u64, u64)>,
}

impl Model {
    fn live(&self) -> BTreeSet<&'static str> {
        self.seen.iter().filter(|&(_, &t)| self.now - t < SESSION_MS).map(|(m, _)| *m).collect()
    }

    fn expire(&mut self) {
        let live = self.live();
        self.seen.retain(|m, _| live.contains(m));
    }
}

fn check_invariants(g: &OffsetsGroup, model: &Model, last_generation: u64) {
    assert!(g.generation >= last_generation, "the generation went back");
    let members: BTreeSet<&str> = g.members.keys().map(String::as_str).collect();
    let owners: Vec<Option<&str>> = g.partitions.iter().map(|p| p.owner.as_deref()).collect();
    for owner in owners.iter().flatten() {
        assert!(members.contains(owner), "partition owned by {owner}, not a member");
    }
    if members.is_empty() {
        assert!(owners.iter().all(Option::is_none), "partitions owned without members");
    } else {
        assert!(owners.iter().all(Option::is_some), "a partition without an owner: {owners:?}");
        let shares: Vec<usize> = members.iter().map(|m| owners.iter().filter(|o| **o == Some(*m)).count()).collect();
        let (lo, hi) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
        assert!(hi - lo <= 1, "unbalanced shares {shares:?}");
    }
    let mut told = BTreeSet::new();
    for m in &members {
        for (p, _) in g.assignment(m).partitions {
            assert!(told.insert(p), "two members told they own partition {p}");
        }
    }
    let committed: Vec<u64> = g.partitions.iter().map(|p| p.committed).collect();
    assert_eq!(committed, model.committed, "committed offsets differ from the model");
}

fn run_offsets(ops: Vec<Op>) {
    let mut g = OffsetsGroup::new(vec![0; PARTITIONS]);
    let mut model = Model {
        now: 0,
        ends: vec![0; PARTITIONS],
        committed: vec![0; PARTITIONS],
        seen: BTreeMap::new(),
        generations: HashMap::new(),
    };
    let mut last_generation = 0;
    for op in ops {
        match op {
            Op::Fetch(m) => {
                let member = MEMBERS[m];
                model.expire();
                let a = g.fetch(member, model.now, SESSION_MS).expect("few members");
                model.seen.insert(member, model.now);
                let prev = model.generations.get(member).map_or(a.generation, |g| g.0);
                model.generations.insert(member, (a.generation, prev));
                let members: BTreeSet<&str> = g.members.keys().map(String::as_str).collect();
                assert_eq!(members, model.live(), "members after a fetch");
                for (p, position) in a.partitions {
                    assert!(position >= model.committed[p as usize], "a position below the committed offset");
                    // Read what is there: the next fetch continues after it.
                    g.advance(member, p, position, model.ends[p as usize].max(position));
                }
            }
            Op::Advance(ms) => model.now += ms,
            Op::Append(p, n) => model.ends[p] += n,
            Op::Commit(m, p, delta, old) => {
                let member = MEMBERS[m];
                let Some(&(latest, previous)) = model.generations.get(member) else { continue };
                let generation = if old { previous } else { latest };
                let offset = (model.committed[p] as i64 + delta).max(0) as u64;
                // The rule, judged on the group as the commit finds it (after silent members leave).
                let mut before = g.clone();
                before.expire(model.now, SESSION_MS);
                model.expire();
                let live = model.live().contains(member);
                let state = &before.partitions[p];
                let owns = state.owner.as_deref() == Some(member);
                let fresh = generation >= state.assigned_generation && generation <= before.generation;
                let in_range = offset >= model.committed[p] && offset <= model.ends[p];
                let outcome = g.commit(
                    member,
                    generation,
                    &BTreeMap::from([(p as u32, offset)]),
                    &model.ends,
                    model.now,
                    SESSION_MS,
                );
                let expected = live && owns && fresh && in_range;
                assert_eq!(
                    outcome.is_ok(),
                    expected,
                    "commit {member} gen {generation} p{p} offset {offset}: {outcome:?}"
                );
                match outcome {
                    Ok(()) => {
                        model.committed[p] = offset;
                        model.seen.insert(member, model.now);
                    }
                    Err(CommitError::UnknownMember { .. }) => assert!(!live),
                    Err(CommitError::Regression { .. }) => assert!(offset < model.committed[p]),
                    Err(_) => {}
                }
                if live {
                    model.seen.insert(member, model.now);
                }
            }
            Op::Seek(p, offset) => {
                let offset = offset.min(model.ends[p]);
                g.seek(p as u32, offset);
                model.committed[p] = offset;
            }
            Op::Restart => {
                let text = serde_json::to_string(&g).expect("state serializes");
                g = serde_json::from_str(&text).expect("state deserializes");
                g.restore(model.now);
                for seen in model.seen.values_mut() {
                    *seen = model.now;
                }
                for (p, state) in g.partitions.iter().enumerate() {
                    assert_eq!(state.position, model.committed[p], "a restart reads again from the committed offset");
                }
            }
        }
        check_invariants(&g, &model, last_generation);
        last_generation = g.generation;
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn offsets_groups_follow_the_model(ops in proptest::collection::vec(op(), 1..120)) {
        run_offsets(ops);
    }

    #[test]
    fn shared_groups_keep_keys_in_order(
        keys in proptest::collection::vec(proptest::option::of(0..4u64), 1..60),
        ops in proptest::collection::vec(shared_op(), 1..150),
        key_ordered in any::<bool>(),
    ) {
        run_shared(keys, ops, key_ordered);
    }
}

#[derive(Debug, Clone)]
enum SharedOp {
    Take(usize, usize),
    Ack(usize),
    Release(usize),
    Nack(usize),
    Advance(u64),
    Seek(u64),
}

fn shared_op() -> impl Strategy<Value = SharedOp> {
    prop_oneof![
        4 => (0..3usize, 1..6usize).prop_map(|(m, n)| SharedOp::Take(m, n)),
        4 => (0..64usize).prop_map(SharedOp::Ack),
        1 => (0..64usize).prop_map(SharedOp::Release),
        1 => (0..64usize).prop_map(SharedOp::Nack),
        2 => prop_oneof![Just(300u64), Just(1_100)].prop_map(SharedOp::Advance),
        1 => (0..10u64).prop_map(SharedOp::Seek),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    New,
    Out,
    Back,
    Done,
}

fn run_shared(keys: Vec<Option<u64>>, ops: Vec<SharedOp>, key_ordered: bool) {
    let settings = SharedSettings { ack_timeout_ms: 1_000, max_deliveries: 3, key_ordered };
    let mut g = SharedGroup::new(1, vec![0]);
    let mut fate = vec![Fate::New; keys.len()];
    let mut out: Vec<Delivery> = Vec::new();
    let mut now = 0;
    // Per key, the highest offset first handed out so far.
    let mut first_out: HashMap<u64, u64> = HashMap::new();
    for op in ops {
        match op {
            SharedOp::Take(m, n) => {
                let cursor = g.partitions[0].cursor as usize;
                let fresh: Vec<(u64, Option<u64>)> =
                    (cursor..keys.len()).take(g.room(0)).map(|o| (o as u64, keys[o])).collect();
                for d in g.take(0, &fresh, n, ["x", "y", "z"][m], now, &settings) {
                    let o = d.offset as usize;
                    assert!(matches!(fate[o], Fate::New | Fate::Back), "record {o} handed out while {:?}", fate[o]);
                    if fate[o] == Fate::New
                        && let Some(k) = keys[o]
                        && key_ordered
                    {
                        let prev = first_out.insert(k, d.offset);
                        assert!(prev.is_none_or(|p| p < d.offset), "key {k} first handed out out of order");
                    }
                    fate[o] = Fate::Out;
                    out.push(d);
                }
            }
            SharedOp::Ack(i) | SharedOp::Release(i) | SharedOp::Nack(i) if !out.is_empty() => {
                let d = out[i % out.len()].clone();
                let o = d.offset as usize;
                let result = match op {
                    SharedOp::Ack(_) => g.ack(&d.receipt).map(|()| Fate::Done),
                    SharedOp::Release(_) => g.release(&d.receipt, None).map(|()| Fate::Back),
                    _ => g.nack(&d.receipt, None, &settings).map(|e| if e.is_some() { Fate::Done } else { Fate::Back }),
                };
                match result {
                    Ok(f) => {
                        assert_eq!(fate[o], Fate::Out, "a receipt worked for record {o} not out");
                        fate[o] = f;
                        out.retain(|x| x.offset != d.offset);
                    }
                    Err(_) => assert!(!out.iter().any(|x| x.receipt == d.receipt) || fate[o] != Fate::Out),
                }
            }
            SharedOp::Ack(_) | SharedOp::Release(_) | SharedOp::Nack(_) => {}
            SharedOp::Advance(ms) => {
                now += ms;
                for gone in g.expire(now, &settings) {
                    fate[gone.offset as usize] = Fate::Done;
                }
                out.retain(|d| {
                    let held = g.partitions[0]
                        .pending
                        .get(&d.offset)
                        .is_some_and(|p| p.hold.is_some() && p.deliveries == d.deliveries);
                    if !held && fate[d.offset as usize] == Fate::Out {
                        fate[d.offset as usize] = Fate::Back;
                    }
                    held
                });
            }
            SharedOp::Seek(offset) => {
                let offset = offset.min(keys.len() as u64);
                g.seek(0, offset);
                out.clear();
                for (o, f) in fate.iter_mut().enumerate() {
                    *f = if (o as u64) < offset { Fate::Done } else { Fate::New };
                }
                first_out.clear();
            }
        }
        // No two deliveries of one record at once, and with key order none of one key.
        let held: Vec<(u64, Option<u64>)> =
            g.partitions[0].pending.iter().filter(|(_, p)| p.hold.is_some()).map(|(o, p)| (*o, p.key)).collect();
        if key_ordered {
            let mut seen = BTreeSet::new();
            for (o, key) in &held {
                if let Some(k) = key {
                    assert!(seen.insert(*k), "two records of key {k} out at once (offset {o})");
                }
            }
        }
        for (o, f) in fate.iter().enumerate() {
            let pending = g.partitions[0].pending.contains_key(&(o as u64));
            if *f == Fate::Done {
                assert!(!pending, "record {o} is done but still pending");
            }
        }
    }
}
