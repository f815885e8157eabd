//! A model test of the saga state machine: seeded random participants (success, failure,
//! permanent failure, a lost answer after the effect, a lost request), late answers, cancels,
//! restarts (the instance through its JSON form, answers in flight lost) and a person retrying a
//! failed compensation, all on simulated time. Every run must settle, and what the idempotent
//! participants hold at the end must match the state the instance settled in.

use proptest::prelude::*;
use serde_json::json;

use super::limits::SAGA_COMPENSATION_ATTEMPTS_DEFAULT;
use super::*;

/// splitmix64: a small, seedable generator (proptest picks and prints the seed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn definition(steps: usize, compensations: &[bool]) -> SagaDefinition {
    let steps = (0..steps)
        .map(|i| StepDef {
            name: format!("s{i}"),
            action: StepCall::Queue { queue: format!("q{i}"), body: json!({ "prev": if i == 0 { json!("{{input.order}}") } else { json!(format!("{{{{steps.s{}.output.id}}}}", i - 1)) } }), reply_timeout_ms: None, reply_queue: None },
            compensation: compensations[i].then(|| StepCall::Queue { queue: format!("undo{i}"), body: json!("{{input.order}}"), reply_timeout_ms: None, reply_queue: None }),
            retry: RetryPolicy {
                max_attempts: 3,
                backoff: crate::jobs::JobBackoff { initial_ms: 100, max_ms: 1_000, ..Default::default() },
            },
            timeout_ms: 1_000,
        })
        .collect();
    SagaDefinition { name: "order".into(), version: 1, steps, created_at_ms: 0 }
}

/// Idempotent participants: each key's effect happens at most once.
#[derive(Default)]
struct Participants {
    applied: Vec<bool>,
    ever_applied: Vec<bool>,
    undone: Vec<u32>,
    actions_keys: std::collections::HashSet<String>,
}

struct Reply {
    at: u64,
    step: usize,
    kind: CallKind,
    attempt: u32,
    outcome: Outcome,
}

fn run(seed: u64, steps: usize) -> (SagaStatus, bool) {
    let mut rng = Rng(seed);
    let compensations: Vec<bool> = (0..steps).map(|_| rng.below(5) != 0).collect();
    let def = definition(steps, &compensations);
    validate_steps(&def.steps).unwrap();
    let mut now = 1_000u64;
    let mut instance = SagaInstance::new("i1".into(), &def, json!({ "order": 7 }), "c1".into(), now);
    let mut world = Participants {
        applied: vec![false; steps],
        ever_applied: vec![false; steps],
        undone: vec![0; steps],
        ..Default::default()
    };
    let mut replies: Vec<Reply> = Vec::new();
    let mut log: Vec<(CallKind, usize)> = Vec::new();
    let cancel_at = (rng.below(3) == 0).then(|| now + rng.below(5_000));
    let mut cancelled = false;
    let mut retried_compensation = false;
    for _round in 0..10_000 {
        if instance.status == SagaStatus::Failed && !retried_compensation && rng.below(2) == 0 {
            retried_compensation = true;
            assert!(instance.retry_compensation(now));
        }
        if instance.status.is_settled() {
            break;
        }
        // Make every call that is due.
        while let Some(d) = instance.dispatch(&def, now, rng.next()) {
            assert_eq!(d.idempotency_key, format!("i1/s{}/{}", d.step, d.kind.as_str()));
            assert!(d.deadline_at_ms > now);
            log.push((d.kind, d.step));
            let roll = rng.below(100);
            // A later attempt after a restart-free timeout may still see a reply from an older one.
            let delay = rng.below(1_500);
            let mut reply = |outcome| {
                replies.push(Reply { at: now + delay, step: d.step, kind: d.kind, attempt: d.attempt, outcome })
            };
            match d.kind {
                CallKind::Action => {
                    let ok = Outcome::Succeeded(json!({ "id": format!("r{}", d.step) }));
                    let key_new = world.actions_keys.insert(d.idempotency_key.clone());
                    let apply = |w: &mut Participants| {
                        // The same key never applies twice, even after its undo.
                        if key_new {
                            w.applied[d.step] = true;
                            w.ever_applied[d.step] = true;
                        }
                    };
                    match roll {
                        0..60 => {
                            apply(&mut world);
                            reply(ok);
                        }
                        60..75 => reply(Outcome::Failed { error: "busy".into(), retry: true }),
                        75..80 => reply(Outcome::Failed { error: "refused".into(), retry: false }),
                        80..90 => apply(&mut world),
                        _ => {}
                    }
                    if !matches!(roll, 0..60 | 80..90) {
                        world.actions_keys.remove(&d.idempotency_key);
                    }
                }
                CallKind::Compensation => {
                    let undo = |w: &mut Participants| {
                        if w.applied[d.step] {
                            w.applied[d.step] = false;
                            w.undone[d.step] += 1;
                        }
                    };
                    match roll {
                        0..70 => {
                            undo(&mut world);
                            reply(Outcome::Succeeded(json!(null)));
                        }
                        70..80 => reply(Outcome::Failed { error: "later".into(), retry: true }),
                        80..83 => reply(Outcome::Failed { error: "cannot undo".into(), retry: false }),
                        83..93 => undo(&mut world),
                        _ => {}
                    }
                }
            }
        }
        // A restart: the instance is read back from its stored form; answers on the way are lost.
        if rng.below(40) == 0 {
            let text = serde_json::to_string(&instance).unwrap();
            let back: SagaInstance = serde_json::from_str(&text).unwrap();
            assert_eq!(back, instance);
            instance = back;
            replies.clear();
        }
        if instance.status.is_settled() {
            continue;
        }
        // Advance to the next thing that happens.
        let mut next = [instance.next_due_at(), replies.iter().map(|r| r.at).min(), cancel_at.filter(|_| !cancelled)]
            .into_iter()
            .flatten()
            .min()
            .expect("an unsettled instance always has something due");
        next = next.max(now);
        now = next;
        if let Some(at) = cancel_at
            && !cancelled
            && at <= now
        {
            cancelled = true;
            instance.cancel(&def, now);
        }
        let (due, later): (Vec<Reply>, Vec<Reply>) = replies.into_iter().partition(|r| r.at <= now);
        replies = later;
        for r in due {
            instance.on_result(&def, r.step, r.kind, r.attempt, r.outcome, now, rng.next());
        }
    }
    assert!(instance.status.is_settled(), "seed {seed}: not settled: {instance:#?}");
    // No action is called once compensation has begun, and compensations go backwards.
    if let Some(first) = log.iter().position(|(k, _)| *k == CallKind::Compensation) {
        assert!(log[first..].iter().all(|(k, _)| *k == CallKind::Compensation), "seed {seed}: {log:?}");
        let order: Vec<usize> = log[first..].iter().map(|(_, s)| *s).collect();
        assert!(order.windows(2).all(|w| w[0] >= w[1]), "seed {seed}: compensations out of order {order:?}");
    }
    match instance.status {
        SagaStatus::Completed => {
            assert!(instance.steps.iter().all(|s| s.status == StepStatus::Succeeded), "seed {seed}");
            assert!(world.applied.iter().all(|a| *a), "seed {seed}: completed but not applied {:?}", world.applied);
            assert!(!log.iter().any(|(k, _)| *k == CallKind::Compensation));
        }
        SagaStatus::Compensated => {
            for (i, step) in instance.steps.iter().enumerate() {
                // Whatever took effect and has a compensation was undone exactly once.
                if compensations[i] {
                    assert!(!world.applied[i], "seed {seed}: step {i} still applied: {instance:#?}");
                    assert_eq!(world.undone[i], u32::from(world.ever_applied[i]), "seed {seed}: step {i}");
                }
                assert_ne!(step.status, StepStatus::Running, "seed {seed}");
            }
        }
        SagaStatus::Failed => {
            let stuck = instance.active;
            assert_eq!(instance.steps[stuck].status, StepStatus::CompensationFailed, "seed {seed}");
            for (i, has_compensation) in compensations.iter().enumerate().skip(stuck + 1) {
                if *has_compensation {
                    assert!(!world.applied[i], "seed {seed}: a later step {i} was left applied");
                }
            }
        }
        other => panic!("seed {seed}: settled as {other:?}"),
    }
    (instance.status, cancelled)
}

#[test]
fn the_model_reaches_every_ending() {
    let mut seen = std::collections::HashMap::new();
    for seed in 0..3_000 {
        *seen.entry(run(seed, 1 + (seed % 5) as usize)).or_insert(0) += 1;
    }
    for ending in [SagaStatus::Completed, SagaStatus::Compensated, SagaStatus::Failed] {
        assert!(seen.get(&(ending, false)).copied().unwrap_or(0) >= 10, "{ending:?} too rare: {seen:?}");
    }
    assert!(seen.get(&(SagaStatus::Compensated, true)).copied().unwrap_or(0) >= 10, "cancels too rare: {seen:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if std::env::var_os("SLUICE_SAGA_MODEL_LONG").is_some() { 50_000 } else { 2_000 }))]

    #[test]
    fn every_instance_settles_consistently(seed in any::<u64>(), steps in 1usize..6) {
        run(seed, steps);
    }
}

#[test]
fn a_failing_step_compensates_the_completed_ones_in_reverse() {
    let def = definition(3, &[true, true, true]);
    let mut i = SagaInstance::new("i".into(), &def, json!({ "order": 1 }), "c".into(), 0);
    let d0 = i.dispatch(&def, 0, 0).unwrap();
    assert_eq!(
        d0.call,
        StepCall::Queue { queue: "q0".into(), body: json!({ "prev": 1 }), reply_timeout_ms: None, reply_queue: None }
    );
    assert_eq!(i.on_result(&def, 0, CallKind::Action, 1, Outcome::Succeeded(json!({ "id": "A" })), 5, 0), Applied::Yes);
    let d1 = i.dispatch(&def, 5, 0).unwrap();
    assert_eq!(
        d1.call,
        StepCall::Queue { queue: "q1".into(), body: json!({ "prev": "A" }), reply_timeout_ms: None, reply_queue: None }
    );
    i.on_result(&def, 1, CallKind::Action, 1, Outcome::Succeeded(json!({ "id": "B" })), 6, 0);
    let d2 = i.dispatch(&def, 6, 0).unwrap();
    i.on_result(
        &def,
        2,
        CallKind::Action,
        d2.attempt,
        Outcome::Failed { error: "card declined".into(), retry: false },
        7,
        0,
    );
    assert_eq!((i.status, i.steps[2].status), (SagaStatus::Compensating, StepStatus::Failed));
    assert!(i.error.as_deref().unwrap().contains("card declined"));
    let c1 = i.dispatch(&def, 7, 0).unwrap();
    assert_eq!((c1.kind, c1.step, c1.idempotency_key.as_str()), (CallKind::Compensation, 1, "i/s1/compensation"));
    // A stale answer (the old action) changes nothing.
    assert_eq!(i.on_result(&def, 1, CallKind::Action, 1, Outcome::Succeeded(json!(1)), 8, 0), Applied::Stale);
    i.on_result(&def, 1, CallKind::Compensation, 1, Outcome::Succeeded(json!(null)), 8, 0);
    let c0 = i.dispatch(&def, 8, 0).unwrap();
    assert_eq!((c0.kind, c0.step), (CallKind::Compensation, 0));
    i.on_result(&def, 0, CallKind::Compensation, 1, Outcome::Succeeded(json!(null)), 9, 0);
    assert_eq!(i.status, SagaStatus::Compensated);
    let statuses: Vec<StepStatus> = i.steps.iter().map(|s| s.status).collect();
    assert_eq!(statuses, [StepStatus::Compensated, StepStatus::Compensated, StepStatus::Failed]);
    assert_eq!((i.next_due_at(), i.finished_at_ms), (None, Some(9)));
}

#[test]
fn timeouts_retry_with_backoff_and_a_timed_out_step_is_compensated() {
    let def = definition(2, &[true, true]);
    let mut i = SagaInstance::new("i".into(), &def, json!({ "order": 1 }), "c".into(), 0);
    i.dispatch(&def, 0, 0).unwrap();
    i.on_result(&def, 0, CallKind::Action, 1, Outcome::Succeeded(json!({ "id": "A" })), 1, 0);
    let first = i.dispatch(&def, 1, 0).unwrap();
    assert_eq!(first.deadline_at_ms, 1_001);
    assert_eq!(i.next_due_at(), Some(1_001));
    assert_eq!(i.dispatch(&def, 1_000, 0), None, "not before the deadline");
    // The deadline passes: a retry after the first backoff (draw at the top: the whole bound).
    assert_eq!(i.dispatch(&def, 1_001, u64::MAX), None);
    assert_eq!((i.steps[1].status, i.next_due_at()), (StepStatus::Pending, Some(1_101)));
    let second = i.dispatch(&def, 1_101, u64::MAX).unwrap();
    assert_eq!(second.attempt, 2);
    // The first attempt's failure, arriving late, is not the second's.
    let late = Outcome::Failed { error: "late".into(), retry: true };
    assert_eq!(i.on_result(&def, 1, CallKind::Action, 1, late, 1_102, 0), Applied::Stale);
    assert_eq!(i.steps[1].in_flight.map(|f| f.number), Some(2));
    assert_eq!(i.dispatch(&def, 2_101, u64::MAX), None);
    assert_eq!(i.next_due_at(), Some(2_301), "the second retry's bound is 200 ms");
    i.dispatch(&def, 2_301, 0).unwrap();
    let c = i.dispatch(&def, 3_301, 0).unwrap();
    assert_eq!((i.steps[1].status, c.kind, c.step), (StepStatus::Compensating, CallKind::Compensation, 1));
    assert!(i.steps[1].maybe_applied);
    assert_eq!(i.steps[1].history.iter().filter(|a| a.outcome.as_deref() == Some("timed_out")).count(), 3);
}

#[test]
fn cancel_waits_for_the_action_in_flight_then_undoes_it() {
    let def = definition(2, &[true, true]);
    let mut i = SagaInstance::new("i".into(), &def, json!({ "order": 1 }), "c".into(), 0);
    i.dispatch(&def, 0, 0).unwrap();
    assert!(i.cancel(&def, 1));
    assert_eq!(i.status, SagaStatus::Running, "the action in flight may be taking effect");
    assert_eq!(i.dispatch(&def, 2, 0), None);
    i.on_result(&def, 0, CallKind::Action, 1, Outcome::Succeeded(json!({ "id": "A" })), 3, 0);
    let c = i.dispatch(&def, 3, 0).unwrap();
    assert_eq!((i.status, c.kind, c.step), (SagaStatus::Compensating, CallKind::Compensation, 0));
    assert_eq!(i.steps[1].status, StepStatus::Skipped);
    assert!(!i.cancel(&def, 4), "a second cancel changes nothing");
}

#[test]
fn a_compensation_that_keeps_failing_fails_the_instance_until_retried() {
    let def = definition(1, &[true]);
    let mut i = SagaInstance::new("i".into(), &def, json!({ "order": 1 }), "c".into(), 0);
    i.dispatch(&def, 0, 0).unwrap();
    i.on_result(&def, 0, CallKind::Action, 1, Outcome::Succeeded(json!({ "id": "A" })), 1, 0);
    assert_eq!(i.status, SagaStatus::Completed);
    let mut i = SagaInstance::new("j".into(), &def, json!({ "order": 1 }), "c".into(), 0);
    i.dispatch(&def, 0, 0).unwrap();
    assert!(i.cancel(&def, 0));
    i.on_result(&def, 0, CallKind::Action, 1, Outcome::Succeeded(json!({ "id": "A" })), 1, 0);
    let mut now = 1;
    for attempt in 1..=SAGA_COMPENSATION_ATTEMPTS_DEFAULT {
        now = i.next_due_at().unwrap();
        let d = i.dispatch(&def, now, 0).unwrap();
        assert_eq!(d.attempt, attempt);
        i.on_result(
            &def,
            0,
            CallKind::Compensation,
            attempt,
            Outcome::Failed { error: "down".into(), retry: true },
            now,
            0,
        );
    }
    assert_eq!((i.status, i.steps[0].status), (SagaStatus::Failed, StepStatus::CompensationFailed));
    assert!(i.error.as_deref().unwrap().contains("after 10 attempts: down"));
    assert_eq!(i.next_due_at(), None);
    assert!(i.retry_compensation(now + 5));
    let d = i.dispatch(&def, now + 5, 0).unwrap();
    assert_eq!((d.kind, d.attempt), (CallKind::Compensation, 1));
    i.on_result(&def, 0, CallKind::Compensation, 1, Outcome::Succeeded(json!(null)), now + 6, 0);
    assert_eq!(i.status, SagaStatus::Compensated);
}

#[test]
fn a_body_naming_nothing_fails_the_step_without_a_call() {
    let mut def = definition(1, &[false]);
    def.steps[0].action = StepCall::Queue {
        queue: "q".into(),
        body: json!("{{input.missing}}"),
        reply_timeout_ms: None,
        reply_queue: None,
    };
    let mut i = SagaInstance::new("i".into(), &def, json!({}), "c".into(), 0);
    assert_eq!(i.dispatch(&def, 0, 0), None);
    assert_eq!((i.status, i.steps[0].status), (SagaStatus::Compensated, StepStatus::Failed));
    assert!(i.error.as_deref().unwrap().contains("names nothing"));
}
