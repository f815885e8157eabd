//! Model-based property test of the job state machine: random operation sequences (enqueues
//! with priorities, delays, attempts, unique keys, timeouts and callbacks; claims over queues
//! and types; heartbeats, completions and failures with current and stale leases; cancels; the
//! clock; restarts) run on the real `JobBoard` and on a reference model simple enough to be
//! obviously right (a `Vec` of `JobRecord`s scanned linearly), and after every step the two
//! must agree on every outcome and every job's whole state.
//!
//! Beside the comparison: a "disk" is built from the effects the board emitted, and after every
//! step it must hold exactly the board's jobs (so a missing effect is caught at the step that
//! forgot it); a restart rebuilds the board from that disk. The contract is also checked on
//! the board's outputs directly: a lease is refused once its attempt is over, a job is never
//! claimed while another attempt's lease is unexpired, and every job ends in at most one
//! terminal state.
//!
//! Failures are reproducible: proptest prints the shrunk operation list and records the seed in
//! `tests/proptest-regressions/jobs_model.txt`, replayed first on every run.
//! `PROPTEST_RNG_SEED=<n>` fixes the seed of the random part.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use sluice_core::jobs::{
    ClaimSpec, DataKind, Enqueued, Jitter, JobBackoff, JobBoard, JobEffect, JobError, JobId, JobLimits, JobRecord,
    JobStatus, Lease, LeaseToken, NewJob, UniqueHold, lapse_error, unique_key_hash,
};

const QUEUES: [&str; 3] = ["a", "b", "c"];
const TYPES: [&str; 2] = ["x", "y"];
const T0: u64 = 1_700_000_000_000;
const LIMITS: JobLimits = JobLimits { result_bytes_per_queue_max: 150, finished_per_queue_max: 4 };

#[derive(Debug, Clone)]
enum Op {
    Enqueue {
        q: usize,
        t: usize,
        priority: u8,
        delay_ms: Option<u64>,
        max_attempts: u32,
        unique: Option<u8>,
        ttl_ms: u64,
        timeout_ms: Option<u64>,
        callback: bool,
        jitter: bool,
    },
    Claim {
        queues: u8,
        t: Option<usize>,
        max: u32,
        lease_ms: u64,
    },
    Heartbeat {
        job: usize,
        stale: bool,
        lease_ms: Option<u64>,
    },
    Complete {
        job: usize,
        stale: bool,
        result_len: usize,
    },
    Fail {
        job: usize,
        stale: bool,
        retry: bool,
        draw: u64,
    },
    Cancel {
        job: usize,
    },
    Advance {
        ms: u64,
    },
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 0..2usize, 0..3u8, prop::option::of(0..3_000u64), 1..4u32, prop::option::of(0..3u8), 300..5_000u64, prop::option::of(200..3_000u64), any::<bool>(), any::<bool>())
            .prop_map(|(q, t, priority, delay_ms, max_attempts, unique, ttl_ms, timeout_ms, callback, jitter)| Op::Enqueue { q, t, priority, delay_ms, max_attempts, unique, ttl_ms, timeout_ms, callback, jitter }),
        4 => (1..8u8, prop::option::of(0..2usize), 1..4u32, 100..2_000u64).prop_map(|(queues, t, max, lease_ms)| Op::Claim { queues, t, max, lease_ms }),
        2 => (0..40usize, prop::bool::weighted(0.2), prop::option::of(100..2_000u64)).prop_map(|(job, stale, lease_ms)| Op::Heartbeat { job, stale, lease_ms }),
        2 => (0..40usize, prop::bool::weighted(0.2), 0..100usize).prop_map(|(job, stale, result_len)| Op::Complete { job, stale, result_len }),
        2 => (0..40usize, prop::bool::weighted(0.2), prop::bool::weighted(0.8), any::<u64>()).prop_map(|(job, stale, retry, draw)| Op::Fail { job, stale, retry, draw }),
        1 => (0..40usize).prop_map(|job| Op::Cancel { job }),
        3 => prop_oneof![0..50u64, 0..1_500u64, 0..6_000u64].prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Restart),
    ]
}

// ----- the reference model ---------------------------------------------------------------

#[derive(Default)]
struct Model {
    jobs: Vec<JobRecord>,
    callbacks: Vec<JobId>,
}

impl Model {
    fn find(&mut self, id: JobId) -> Result<usize, JobError> {
        self.jobs.iter().position(|j| j.id == id).ok_or(JobError::NotFound(id))
    }

    /// Time's consequences, one due event at a time in (time, id) order, as the contract says.
    fn tick(&mut self, now: u64) {
        loop {
            let due = self
                .jobs
                .iter()
                .filter_map(|j| {
                    let at = match j.status {
                        JobStatus::Queued | JobStatus::Failed => None,
                        JobStatus::Running => Some(j.lease.expect("lease").expires_at),
                        _ => j.expires_at(),
                    }?;
                    (at <= now).then_some((at, j.id))
                })
                .min();
            let Some((_, id)) = due else { return };
            let i = self.find(id).expect("due job");
            if self.jobs[i].status == JobStatus::Running {
                let job = &self.jobs[i];
                if job.cancel_requested {
                    self.finish(i, JobStatus::Cancelled, now);
                } else if job.attempt >= job.max_attempts {
                    self.finish(i, JobStatus::Dead, now);
                } else {
                    let job = &mut self.jobs[i];
                    job.status = JobStatus::Queued;
                    job.lease = None;
                    job.run_at = now;
                }
            } else {
                self.jobs.remove(i);
            }
        }
    }

    fn finish(&mut self, i: usize, status: JobStatus, now: u64) {
        let job = &mut self.jobs[i];
        job.status = status;
        job.lease = None;
        job.finished_at = Some(now);
        let (id, queue) = (job.id, job.queue.clone());
        if job.has_callback {
            self.callbacks.push(id);
        }
        loop {
            let finished: Vec<&JobRecord> =
                self.jobs.iter().filter(|j| j.queue == queue && j.status.is_terminal()).collect();
            let bytes: u64 = finished.iter().map(|j| j.result_bytes).sum();
            let over =
                bytes > LIMITS.result_bytes_per_queue_max || finished.len() as u64 > LIMITS.finished_per_queue_max;
            let oldest = finished.iter().map(|j| (j.finished_at, j.id)).min().map(|(_, id)| id);
            match oldest {
                Some(oldest) if over && oldest != id => self.jobs.retain(|j| j.id != oldest),
                _ => return,
            }
        }
    }

    fn check_lease(&mut self, id: JobId, lease: LeaseToken) -> Result<usize, JobError> {
        let i = self.find(id)?;
        let j = &self.jobs[i];
        if j.status == JobStatus::Running
            && j.attempt == lease.attempt
            && j.lease.is_some_and(|l| l.nonce == lease.nonce)
        {
            Ok(i)
        } else {
            Err(JobError::StaleLease { id, status: j.status })
        }
    }
}

fn lease_end(j: &JobRecord, now: u64, lease_ms: u64) -> u64 {
    let end = now + lease_ms;
    match (j.timeout_ms, j.started_at) {
        (Some(t), Some(s)) => end.min(s + t),
        _ => end,
    }
}

// ----- the harness -----------------------------------------------------------------------

struct Harness {
    board: JobBoard,
    model: Model,
    now: u64,
    ids: Vec<JobId>,
    next_id: u128,
    nonce: u64,
    /// What the effects wrote: records, and data by (job, kind).
    disk: BTreeMap<JobId, JobRecord>,
    data: HashMap<(JobId, DataKind), Vec<u8>>,
    board_callbacks: Vec<JobId>,
    /// The terminal status each job reached, to check it is reached once.
    ended: HashMap<JobId, JobStatus>,
}

impl Harness {
    fn new() -> Harness {
        Harness {
            board: JobBoard::new(LIMITS),
            model: Model::default(),
            now: T0,
            ids: Vec::new(),
            next_id: 1,
            nonce: 0,
            disk: BTreeMap::new(),
            data: HashMap::new(),
            board_callbacks: Vec::new(),
            ended: HashMap::new(),
        }
    }

    fn job(&self, index: usize) -> JobId {
        self.ids.get(index % self.ids.len().max(1)).copied().unwrap_or(JobId(u128::MAX))
    }

    /// The lease a worker would hold for `id`: the current one, or a stale one.
    fn lease(&self, id: JobId, stale: bool) -> LeaseToken {
        let current = self.model.jobs.iter().find(|j| j.id == id).and_then(|j| j.lease.map(|l| (j.attempt, l.nonce)));
        match (current, stale) {
            (Some((attempt, nonce)), false) => LeaseToken { attempt, nonce },
            (Some((attempt, nonce)), true) => LeaseToken { attempt: attempt.saturating_sub(1), nonce },
            (None, _) => LeaseToken { attempt: 1, nonce: 1 },
        }
    }

    fn step(&mut self, op: &Op) {
        let now = self.now;
        match *op {
            Op::Enqueue { q, t, priority, delay_ms, max_attempts, unique, ttl_ms, timeout_ms, callback, jitter } => {
                let job = NewJob {
                    queue: QUEUES[q].into(),
                    job_type: TYPES[t].into(),
                    payload: format!("{{\"n\":{}}}", self.next_id).into_bytes(),
                    priority,
                    delay_ms,
                    timeout_ms,
                    max_attempts: Some(max_attempts),
                    backoff: JobBackoff {
                        initial_ms: 100,
                        max_ms: 1_000,
                        multiplier: 2.0,
                        jitter: if jitter { Jitter::Full } else { Jitter::None },
                    },
                    unique_key: unique.map(|u| format!("k{u}")),
                    unique_for_ms: unique.map(|_| 2_000),
                    callback_url: callback.then(|| "http://127.0.0.1:9/hook".into()),
                    result_ttl_ms: Some(ttl_ms),
                    ..NewJob::default()
                };
                let id = JobId(self.next_id);
                self.next_id += 1;
                let got = self.board.enqueue(id, job.clone(), now);
                let want = self.model_enqueue(id, &job, now);
                assert_eq!(got, want, "enqueue");
                if let Ok(Enqueued::Created(id)) = got {
                    self.ids.push(id);
                }
            }
            Op::Claim { queues, t, max, lease_ms } => {
                let spec = ClaimSpec {
                    queues: (0..3).filter(|i| queues & (1 << i) != 0).map(|i| QUEUES[i].to_string()).collect(),
                    types: t.map(|t| vec![TYPES[t].to_string()]).unwrap_or_default(),
                    max,
                    lease_ms,
                };
                let first = self.nonce;
                let mut n = first;
                let got = self.board.claim(&spec, now, || {
                    n += 1;
                    n
                });
                let mut m = first;
                let want = self.model_claim(&spec, now, &mut m);
                self.nonce = n.max(m);
                let got: Vec<(JobId, LeaseToken)> =
                    got.expect("a valid claim").into_iter().map(|c| (c.record.id, c.lease)).collect();
                assert_eq!(got, want, "claim");
            }
            Op::Heartbeat { job, stale, lease_ms } => {
                let id = self.job(job);
                let lease = self.lease(id, stale);
                let got = self.board.heartbeat(id, lease, Some(b"{\"p\":1}".to_vec()), lease_ms, now);
                self.model.tick(now);
                let want = self.model.check_lease(id, lease).map(|i| {
                    let j = &mut self.model.jobs[i];
                    let mut l = j.lease.expect("running");
                    l.lease_ms = lease_ms.unwrap_or(l.lease_ms);
                    l.expires_at = lease_end(j, now, l.lease_ms);
                    j.lease = Some(l);
                    (j.cancel_requested, l.expires_at)
                });
                assert_eq!(got.map(|o| (o.cancel_requested, o.lease_expires_at)), want, "heartbeat");
            }
            Op::Complete { job, stale, result_len } => {
                let id = self.job(job);
                let lease = self.lease(id, stale);
                let got = self.board.complete(id, lease, vec![b'1'; result_len], now);
                self.model.tick(now);
                let want = self.model.check_lease(id, lease).map(|i| {
                    self.model.jobs[i].result_bytes = result_len as u64;
                    self.model.finish(i, JobStatus::Succeeded, now);
                });
                assert_eq!(got, want, "complete");
            }
            Op::Fail { job, stale, retry, draw } => {
                let id = self.job(job);
                let lease = self.lease(id, stale);
                let got = self.board.fail(id, lease, "boom".into(), retry, now, draw);
                self.model.tick(now);
                let want = self.model.check_lease(id, lease).map(|i| {
                    let j = &self.model.jobs[i];
                    if j.cancel_requested {
                        self.model.finish(i, JobStatus::Cancelled, now);
                    } else if !retry || j.attempt >= j.max_attempts {
                        self.model.finish(i, JobStatus::Dead, now);
                    } else {
                        let j = &mut self.model.jobs[i];
                        j.status = JobStatus::Failed;
                        j.lease = None;
                        j.run_at = now + j.backoff.delay_ms(j.attempt - 1, draw);
                    }
                });
                assert_eq!(got, want, "fail");
            }
            Op::Cancel { job } => {
                let id = self.job(job);
                let got = self.board.cancel(id, now);
                self.model.tick(now);
                let want = self.model.find(id).and_then(|i| {
                    match self.model.jobs[i].status {
                        JobStatus::Queued | JobStatus::Failed => self.model.finish(i, JobStatus::Cancelled, now),
                        JobStatus::Running => self.model.jobs[i].cancel_requested = true,
                        JobStatus::Cancelled => {}
                        status => return Err(JobError::Finished { id, status }),
                    }
                    Ok(())
                });
                assert_eq!(got, want, "cancel");
            }
            Op::Advance { ms } => {
                self.now += ms;
                self.board.tick(self.now);
                self.model.tick(self.now);
            }
            Op::Restart => {
                let mut board = JobBoard::new(LIMITS);
                for record in self.disk.values() {
                    board.restore(record, now);
                }
                self.board = board;
            }
        }
        self.check();
    }

    fn model_enqueue(&mut self, id: JobId, job: &NewJob, now: u64) -> Result<Enqueued, JobError> {
        self.model.tick(now);
        let hash = job.unique_key.as_deref().map(|k| unique_key_hash(&job.queue, k));
        if let Some(hash) = hash
            && let Some(holder) =
                self.model.jobs.iter().find(|j| j.unique.is_some_and(|u| u.key_hash == hash && u.until > now))
        {
            return Ok(Enqueued::Existing(holder.id));
        }
        self.model.jobs.push(JobRecord {
            id,
            queue: job.queue.clone(),
            job_type: job.job_type.clone(),
            status: JobStatus::Queued,
            priority: job.priority,
            attempt: 0,
            max_attempts: job.max_attempts(),
            backoff: job.backoff,
            timeout_ms: job.timeout_ms,
            result_ttl_ms: job.result_ttl_ms(),
            created_at: now,
            run_at: job.run_at(now),
            started_at: None,
            finished_at: None,
            lease: None,
            cancel_requested: false,
            unique: hash.map(|key_hash| UniqueHold { key_hash, until: now + job.unique_for_ms() }),
            has_callback: job.callback_url.is_some(),
            payload_bytes: job.payload.len() as u64,
            result_bytes: 0,
        });
        Ok(Enqueued::Created(id))
    }

    fn model_claim(&mut self, spec: &ClaimSpec, now: u64, nonce: &mut u64) -> Vec<(JobId, LeaseToken)> {
        self.model.tick(now);
        let mut candidates: Vec<&mut JobRecord> = self
            .model
            .jobs
            .iter_mut()
            .filter(|j| j.status.is_waiting() && j.run_at <= now && spec.queues.contains(&j.queue))
            .filter(|j| spec.types.is_empty() || spec.types.contains(&j.job_type))
            .collect();
        candidates.sort_by_key(|j| (Reverse(j.priority), j.run_at, j.id));
        let mut out = Vec::new();
        for j in candidates.into_iter().take(spec.max as usize) {
            // The contract, directly: no other attempt's lease is unexpired.
            assert!(j.lease.is_none(), "claimed a job under another lease: {j:?}");
            j.attempt += 1;
            j.status = JobStatus::Running;
            j.started_at = Some(now);
            *nonce += 1;
            let expires_at = lease_end(j, now, spec.lease_ms);
            j.lease = Some(Lease { nonce: *nonce, lease_ms: spec.lease_ms, expires_at });
            out.push((j.id, LeaseToken { attempt: j.attempt, nonce: *nonce }));
        }
        out
    }

    /// Board, model and disk agree; terminal states are reached once.
    fn check(&mut self) {
        let mut effects = Vec::new();
        self.board.swap_effects(&mut effects);
        for effect in effects {
            match effect {
                JobEffect::Put(record) => {
                    self.disk.insert(record.id, record);
                }
                JobEffect::Delete(id) => {
                    self.disk.remove(&id);
                    self.data.retain(|(job, _), _| *job != id);
                }
                JobEffect::Data { id, kind, bytes } => {
                    self.data.insert((id, kind), bytes);
                }
                JobEffect::Details { .. } => {}
                JobEffect::Callback(id) => self.board_callbacks.push(id),
            }
        }
        let mut model: Vec<JobRecord> = self.model.jobs.clone();
        model.sort_by_key(|j| j.id);
        let board: Vec<JobRecord> = self.ids.iter().filter_map(|&id| self.board.get(id)).collect();
        let mut board_sorted = board.clone();
        board_sorted.sort_by_key(|j| j.id);
        assert_eq!(board_sorted, model, "board and model disagree");
        assert_eq!(self.board.len(), model.len());
        let disk: Vec<JobRecord> = self.disk.values().cloned().collect();
        assert_eq!(disk, model, "the effects did not write the board's state");
        assert_eq!(self.board_callbacks, self.model.callbacks, "callbacks");
        for j in &model {
            if j.status.is_terminal() {
                let first = *self.ended.entry(j.id).or_insert(j.status);
                assert_eq!(first, j.status, "job {} ended twice", j.id);
            }
            if j.attempt > 0 && j.status != JobStatus::Running && j.status != JobStatus::Succeeded {
                let error = self.data.get(&(j.id, DataKind::Error));
                assert!(error.is_some() || j.status == JobStatus::Cancelled, "no error kept for {j:?}");
            }
            if j.status == JobStatus::Succeeded {
                assert_eq!(self.data.get(&(j.id, DataKind::Result)).map(Vec::len), Some(j.result_bytes as usize));
            }
        }
        let counted: u64 = self.board.stats().iter().map(|s| s.counts.iter().sum::<u64>()).sum();
        assert_eq!(counted, model.len() as u64, "stats count every job");
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("tests/proptest-regressions/jobs_model.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_job_board_matches_the_model(ops in prop::collection::vec(op(), 1..120)) {
        let mut h = Harness::new();
        for op in &ops {
            h.step(op);
        }
    }
}

#[test]
fn a_lapsed_lease_says_why_and_a_timeout_caps_the_lease() {
    let mut board = JobBoard::new(JobLimits::default());
    let job = NewJob {
        queue: "q".into(),
        job_type: "t".into(),
        payload: b"{}".to_vec(),
        timeout_ms: Some(1_500),
        max_attempts: Some(2),
        ..NewJob::default()
    };
    board.enqueue(JobId(1), job, T0).unwrap();
    let spec = ClaimSpec { queues: vec!["q".into()], types: vec![], max: 1, lease_ms: 1_000 };
    let claimed = board.claim(&spec, T0, || 7).unwrap();
    assert_eq!(claimed[0].record.lease.unwrap().expires_at, T0 + 1_000);
    let hb = board.heartbeat(JobId(1), claimed[0].lease, None, None, T0 + 900).unwrap();
    assert_eq!(hb.lease_expires_at, T0 + 1_500, "capped by the timeout");
    let before = board.get(JobId(1)).unwrap();
    assert_eq!(lapse_error(&before), "attempt 1 timed out after 1500 ms");
    board.tick(T0 + 1_499);
    assert_eq!(board.get(JobId(1)).unwrap().status, JobStatus::Running);
    board.tick(T0 + 1_500);
    let after = board.get(JobId(1)).unwrap();
    assert_eq!((after.status, after.attempt, after.run_at), (JobStatus::Queued, 1, T0 + 1_500));
    assert!(matches!(
        board.complete(JobId(1), claimed[0].lease, b"1".to_vec(), T0 + 1_600),
        Err(JobError::StaleLease { .. })
    ));
    let second = board.claim(&spec, T0 + 1_600, || 8).unwrap();
    assert_eq!(second[0].lease.attempt, 2);
    board.tick(T0 + 2_600);
    assert_eq!(board.get(JobId(1)).unwrap().status, JobStatus::Dead, "the last attempt lapsed");
}
