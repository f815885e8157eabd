//! Jobs in the embedded store: the core's [`JobBoard`] on the writer thread, its records on
//! disk, and the long polls parked on it.
//!
//! Two keyspaces (see `ARCHITECTURE.md`, "How a job is stored"): `jobs` (job id, 16 bytes
//! big-endian → the [`JobRecord`], rewritten at every transition; small) and `job_data`
//! (job id + one byte naming the value → the payload, result, progress, last error or
//! details, each written whole and read only to show the job). At open every record is read
//! and the board rebuilt; payloads and results stay on disk.
//!
//! Every call runs on the writer thread: the board decides and appends effects, which are
//! absorbed at once ([`JobState::absorb`]) into this batch's pending writes (so that a later
//! call of the same batch reads them) and written with the batch the writer commits next; the
//! caller is answered after that batch is durable, like every other write. A job that finishes
//! with a callback URL leaves its webhook here, which the writer sends into the callback queue
//! ([`callback_message`]) before it commits the batch, so both are in the same write.
//!
//! Long polls (claims, and waits for a job to finish) park here and are answered by the turn
//! that made a job claimable or finished one (`serve`), or with nothing at their deadline,
//! which is real time.
//!
//! This module knows nothing of the writer loop: the loop calls it (`engine.rs`), and the
//! `JobStore` impl (`job_store.rs`) runs its calls on the loop.

mod waiters;

use std::collections::HashMap;

use fjall::{Keyspace, OwnedWriteBatch};
use sluice_core::jobs::{DataKind, JobBoard, JobDetails, JobEffect, JobId, JobLimits, JobRecord};
use sluice_core::message::MessageContent;
use sluice_core::{Broker, MessageId, NewMessage, TimeMs};
use sluice_store::{JOB_CALLBACK_QUEUE, JobCallback, JobView, StoreError, job_callback_queue_attributes};

use crate::codec;
pub use waiters::{Waiters, claim_now, serve};

/// The byte after the job id that names a job's details in `job_data` (the values of
/// [`DataKind`] use their own tags, 0 to 3).
const DETAILS_TAG: u8 = 0x10;
const DATA_TAGS: [u8; 5] = [0, 1, 2, 3, DETAILS_TAG];

fn record_key(id: JobId) -> [u8; 16] {
    id.0.to_be_bytes()
}

fn data_key(id: JobId, tag: u8) -> [u8; 17] {
    let mut key = [0u8; 17];
    key[..16].copy_from_slice(&id.0.to_be_bytes());
    key[16] = tag;
    key
}

/// Which of a job's values a view reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parts {
    /// Everything.
    All,
    /// All but the payload and the result (lists, and the answers of transitions).
    Summary,
    /// The payload, and what a claimed job's worker may want (a claim).
    Claim,
}

/// The writer thread's job state.
pub struct JobState {
    pub board: JobBoard,
    /// The keyspaces; `None` between [`JobState::release_disk`] and the reopen that replaces
    /// this state (a handle kept would keep the database open, and the reopen locked out).
    jobs: Option<Keyspace>,
    data: Option<Keyspace>,
    /// Writes of the batch being built: encoded records (`None`: delete) and values.
    pending_records: HashMap<JobId, Option<Vec<u8>>>,
    pending_data: HashMap<[u8; 17], Option<Vec<u8>>>,
    effects: Vec<JobEffect>,
    /// Webhooks of jobs that finished in this batch, for the writer to send with it.
    callbacks: Vec<JobCallback>,
    pub waiters: Waiters,
}

/// Opens the job keyspaces and rebuilds the board from them.
pub fn recover(jobs: Keyspace, data: Keyspace, now: TimeMs, limits: JobLimits) -> Result<(JobState, usize), String> {
    let mut board = JobBoard::new(limits);
    let mut count = 0;
    for item in jobs.iter() {
        let (k, v) = item.into_inner().map_err(|e| format!("reading jobs: {e}"))?;
        let record: JobRecord = codec::decode(&v).map_err(|e| format!("jobs/{}: {e}", hex(&k)))?;
        board.restore(&record, now);
        count += 1;
    }
    let state = JobState {
        board,
        jobs: Some(jobs),
        data: Some(data),
        pending_records: HashMap::new(),
        pending_data: HashMap::new(),
        effects: Vec::new(),
        callbacks: Vec::new(),
        waiters: Waiters::default(),
    };
    Ok((state, count))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl JobState {
    /// Puts the staged writes into `batch`; returns how many.
    pub fn write_pending(&mut self, batch: &mut OwnedWriteBatch) -> usize {
        let (Some(jobs), Some(data)) = (&self.jobs, &self.data) else {
            // Released: the writer commits nothing until the reopen replaces this state.
            return 0;
        };
        let count = self.pending_records.len() + self.pending_data.len();
        for (id, value) in self.pending_records.drain() {
            match value {
                Some(v) => batch.insert(jobs, record_key(id), v),
                None => batch.remove(jobs, record_key(id)),
            }
        }
        for (key, value) in self.pending_data.drain() {
            match value {
                Some(v) => batch.insert(data, key, v),
                None => batch.remove(data, key),
            }
        }
        count
    }

    /// Lets go of the keyspaces, so that the database can close before a reopen after a full
    /// disk ([`JobState::reopened`] then takes the state rebuilt from disk).
    pub fn release_disk(&mut self) {
        self.jobs = None;
        self.data = None;
    }

    /// Forgets the staged writes (the batch failed; the store reopens from disk).
    pub fn clear_pending(&mut self) {
        self.pending_records.clear();
        self.pending_data.clear();
        self.callbacks.clear();
    }

    /// Takes the state rebuilt from disk after a full disk, keeping the parked long polls and
    /// the limits.
    pub fn reopened(&mut self, mut fresh: JobState) {
        fresh.waiters = std::mem::take(&mut self.waiters);
        fresh.board.set_limits(self.board.limits());
        *self = fresh;
    }

    /// Applies what time made due (leases lapse, delays end, finished jobs are pruned).
    pub fn tick(&mut self, now: TimeMs) {
        self.board.tick(now);
        self.absorb();
    }

    /// The webhooks to send with this batch.
    pub fn take_callbacks(&mut self) -> Vec<JobCallback> {
        std::mem::take(&mut self.callbacks)
    }

    /// A value of job `id`, from this batch or from disk. A value that cannot be read is
    /// logged and shown as absent: it is never replaced by another.
    fn value(&self, id: JobId, tag: u8) -> Option<Vec<u8>> {
        let key = data_key(id, tag);
        if let Some(pending) = self.pending_data.get(&key) {
            return pending.as_ref().and_then(|v| codec::decode::<Vec<u8>>(v).ok());
        }
        match self.data.as_ref()?.get(key) {
            Ok(Some(v)) => match codec::decode::<Vec<u8>>(&v) {
                Ok(bytes) => Some(bytes),
                Err(e) => {
                    tracing::error!(job = %id, "an unreadable value of a job: {e}");
                    None
                }
            },
            Ok(None) => None,
            Err(e) => {
                tracing::error!(job = %id, "reading a value of a job: {e}");
                None
            }
        }
    }

    fn details(&self, id: JobId) -> JobDetails {
        self.value(id, DETAILS_TAG).and_then(|bytes| postcard::from_bytes(&bytes).ok()).unwrap_or_default()
    }

    /// The job as a store shows it, with the values `parts` asks for.
    pub fn view(&self, id: JobId, parts: Parts) -> Option<JobView> {
        let record = self.board.get(id)?;
        Some(self.view_of(record, parts))
    }

    pub fn view_of(&self, record: JobRecord, parts: Parts) -> JobView {
        let id = record.id;
        let text = |tag: DataKind| self.value(id, tag.tag());
        let full = parts == Parts::All;
        JobView {
            details: self.details(id),
            payload: if full || parts == Parts::Claim { text(DataKind::Payload) } else { None },
            result: if full { text(DataKind::Result) } else { None },
            progress: text(DataKind::Progress),
            error: text(DataKind::Error).map(|b| String::from_utf8_lossy(&b).into_owned()),
            record,
        }
    }
}

impl JobState {
    /// Moves the board's new effects into the batch's pending writes, and keeps the webhooks of
    /// jobs that finished for the writer to send with the same batch.
    pub fn absorb(&mut self) {
        let mut effects = std::mem::take(&mut self.effects);
        self.board.swap_effects(&mut effects);
        let mut latest: HashMap<JobId, JobRecord> = HashMap::new();
        let mut finished = Vec::new();
        for effect in effects.drain(..) {
            match effect {
                JobEffect::Put(record) => {
                    self.pending_records.insert(record.id, Some(codec::encode(&record)));
                    latest.insert(record.id, record);
                }
                JobEffect::Delete(id) => {
                    self.pending_records.insert(id, None);
                    for tag in DATA_TAGS {
                        self.pending_data.insert(data_key(id, tag), None);
                    }
                    latest.remove(&id);
                }
                JobEffect::Data { id, kind, bytes } => {
                    self.pending_data.insert(data_key(id, kind.tag()), Some(codec::encode(&bytes)));
                }
                JobEffect::Details { id, details } => {
                    let bytes = postcard::to_stdvec(&details).expect("postcard encodes plain structs");
                    self.pending_data.insert(data_key(id, DETAILS_TAG), Some(codec::encode(&bytes)));
                }
                JobEffect::Callback(id) => finished.push(id),
            }
        }
        self.effects = effects;
        for id in finished {
            let Some(record) = latest.get(&id).cloned().or_else(|| self.board.get(id)) else { continue };
            if let Some(url) = self.details(id).callback_url {
                self.callbacks.push(JobCallback::new(&record, &url));
            }
        }
    }

    /// The error every parked long poll gets when the store stops serving.
    pub fn fail_waiters(&mut self, refusal: &StoreError) {
        self.waiters.fail_all(refusal);
    }
}

/// One webhook as a message of the callback queue (created first if it is missing): its
/// sequence number and content, for the writer to stage with the batch.
pub fn callback_message(
    broker: &mut Broker,
    callback: &JobCallback,
    now: TimeMs,
) -> Result<(u64, MessageContent), String> {
    let queue = match broker.queue_id(JOB_CALLBACK_QUEUE) {
        Ok(id) => id,
        Err(_) => broker
            .create_queue(JOB_CALLBACK_QUEUE, job_callback_queue_attributes(), now)
            .map(|(id, _)| id)
            .map_err(|e| format!("cannot create {JOB_CALLBACK_QUEUE}: {e}"))?,
    };
    let message = NewMessage { body: callback.to_body(), ..NewMessage::default() };
    let id = MessageId(uuid::Uuid::now_v7().as_u128());
    let sent = broker.send(queue, &message, id, now).map_err(|e| format!("{JOB_CALLBACK_QUEUE} refused it: {e}"))?;
    let content = MessageContent {
        body: message.body,
        body_binary: false,
        attributes: Default::default(),
        system_attributes: Default::default(),
        envelope: Default::default(),
    };
    Ok((sent.seq, content))
}

/// A random 64-bit number (for lease nonces and backoff jitter): the random bits of a UUIDv7.
pub(crate) fn random_u64() -> u64 {
    uuid::Uuid::now_v7().as_u128() as u64
}
