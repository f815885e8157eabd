//! A store with no state and no disk, for fuzzing the layers above the store.
//!
//! Every queue name that the core accepts names an empty queue (FIFO when the name ends in
//! `.fifo`). Each call checks its arguments the way the core does (queue names, attributes,
//! messages, receipts) and then answers as an empty queue would, so that a request's parsing,
//! conversion and validation run in full and nothing accumulates between fuzz inputs. Records
//! are checked and forgotten: every record read finds nothing. Jobs are checked by a board
//! made for each enqueue and dropped after it: every other job call finds no job. Events are
//! checked and decided against an empty log, and forgotten.

use std::collections::BTreeMap;

use async_trait::async_trait;
use sluice_core::broker::{MoveOutcome, QueueStats, QueueView};
use sluice_core::events::{
    AppendError, Decision, ExpectedVersion, NewEvent, StreamState, decide_append, validate_stream_id,
};
use sluice_core::jobs::{ClaimSpec, JobBoard, JobError, JobId, NewJob, QueueJobStats};
use sluice_core::limits::FIFO_SUFFIX;
use sluice_core::name::validate_queue_name;
use sluice_core::stream::{NewRecord, StreamConfigPatch};
use sluice_core::{EntryError, MessageId, NewMessage, QueueAttributes, QueueAttributesPatch, Receipt, Sent};
use sluice_store::{
    AllEvents, AllRead, AppendedEvents, EventError, EventStore, StreamEvents, StreamRead, validate_append_events,
};
use sluice_store::{
    AppendResults, Expectation, FetchRequest, Fetched, GroupConfig, GroupView, LogError, ReadBatch, ReadRequest,
    ReceiptResults, SeekTo, StreamView,
};
use sluice_store::{
    ClaimedJob, CommitStore, Committed, Conflict, EnqueuedJob, EntryResults, HeartbeatAnswer, JobListRequest, JobPage,
    JobStore, JobView, NackEntry, PeekedMessage, QueueStore, ReceiveRequest, ReceivedMessage, Record, RecordStore,
    Refused, StoreCounters, StoreError, StoreStatus, VisibilityRule, Write, WriteOutcome, parse_lease, validate_commit,
    validate_record_key, validate_record_list, validate_record_value, validate_wait_ms,
};

pub struct ParseOnlyStore;

fn view(name: &str, attributes: QueueAttributes) -> Result<QueueView, StoreError> {
    validate_queue_name(name)?;
    Ok(QueueView {
        id: 1,
        name: name.to_string(),
        attributes,
        created_at: 0,
        modified_at: 0,
        stats: QueueStats::default(),
    })
}

fn existing(name: &str) -> Result<QueueView, StoreError> {
    let attributes = QueueAttributes { fifo: name.ends_with(FIFO_SUFFIX), ..QueueAttributes::default() };
    view(name, attributes)
}

/// What an empty queue answers for a receipt: never one of its current deliveries.
fn receipt_result(receipt: &str) -> Result<(), EntryError> {
    match Receipt::decode(receipt) {
        Ok(_) => Err(EntryError::StaleReceipt),
        Err(e) => Err(EntryError::InvalidReceipt(e.to_string())),
    }
}

#[async_trait]
impl QueueStore for ParseOnlyStore {
    async fn create_queue(&self, name: &str, attributes: QueueAttributes) -> Result<(QueueView, bool), StoreError> {
        attributes.validate()?;
        Ok((view(name, attributes)?, true))
    }
    async fn get_queue(&self, name: &str) -> Result<QueueView, StoreError> {
        existing(name)
    }
    async fn list_queues(&self, _: &str, _: Option<&str>, _: usize) -> Result<Vec<QueueView>, StoreError> {
        Ok(Vec::new())
    }
    async fn update_queue(&self, name: &str, patch: QueueAttributesPatch) -> Result<QueueView, StoreError> {
        let current = existing(name)?;
        let attributes = current.attributes.apply(&patch);
        attributes.validate()?;
        view(name, attributes)
    }
    async fn delete_queue(&self, name: &str) -> Result<(), StoreError> {
        existing(name).map(|_| ())
    }
    async fn purge_queue(&self, name: &str) -> Result<u64, StoreError> {
        existing(name).map(|_| 0)
    }
    async fn send(&self, queue: &str, messages: Vec<NewMessage>) -> Result<EntryResults<Sent>, StoreError> {
        existing(queue)?;
        Ok(messages
            .iter()
            .zip(1u64..)
            .map(|(m, seq)| {
                m.validate()?;
                Ok(Sent::new(seq, MessageId(u128::from(seq))))
            })
            .collect())
    }
    async fn receive(&self, queue: &str, request: ReceiveRequest) -> Result<Vec<ReceivedMessage>, StoreError> {
        existing(queue)?;
        request.validate()?;
        Ok(Vec::new())
    }
    async fn ack(&self, queue: &str, receipts: Vec<String>) -> Result<EntryResults<()>, StoreError> {
        existing(queue)?;
        Ok(receipts.iter().map(|r| receipt_result(r)).collect())
    }
    async fn change_visibility(
        &self,
        queue: &str,
        entries: Vec<(String, u64)>,
        _rule: VisibilityRule,
    ) -> Result<EntryResults<()>, StoreError> {
        existing(queue)?;
        Ok(entries.iter().map(|(r, _)| receipt_result(r)).collect())
    }
    async fn nack(&self, queue: &str, entries: Vec<NackEntry>) -> Result<EntryResults<()>, StoreError> {
        existing(queue)?;
        Ok(entries.iter().map(|e| receipt_result(&e.receipt)).collect())
    }
    async fn peek(&self, queue: &str, _: usize) -> Result<Vec<PeekedMessage>, StoreError> {
        existing(queue).map(|_| Vec::new())
    }
    async fn move_messages(&self, from: &str, to: Option<&str>, _: u64) -> Result<MoveOutcome, StoreError> {
        existing(from)?;
        if let Some(to) = to {
            existing(to)?;
        }
        Ok(MoveOutcome::default())
    }
}

/// Keeps no streams: a stream named by a call is one that does not exist, as in an empty log
/// (creating one is refused, `LogError::Unsupported`).
#[async_trait]
impl sluice_store::LogStore for ParseOnlyStore {
    async fn get_stream(&self, name: &str) -> Result<StreamView, LogError> {
        Err(no_stream(name))
    }
    async fn list_streams(&self, _: &str, _: Option<&str>, _: usize) -> Result<Vec<StreamView>, LogError> {
        Ok(Vec::new())
    }
    async fn update_stream(&self, name: &str, _: StreamConfigPatch) -> Result<StreamView, LogError> {
        Err(no_stream(name))
    }
    async fn delete_stream(&self, name: &str) -> Result<(), LogError> {
        Err(no_stream(name))
    }
    async fn append(&self, stream: &str, _: Vec<NewRecord>, _: Option<Expectation>) -> Result<AppendResults, LogError> {
        Err(no_stream(stream))
    }
    async fn read(&self, stream: &str, _: ReadRequest) -> Result<ReadBatch, LogError> {
        Err(no_stream(stream))
    }
    async fn create_group(&self, stream: &str, _: &str, _: GroupConfig) -> Result<(GroupView, bool), LogError> {
        Err(no_stream(stream))
    }
    async fn get_group(&self, stream: &str, _: &str) -> Result<GroupView, LogError> {
        Err(no_stream(stream))
    }
    async fn delete_group(&self, stream: &str, _: &str) -> Result<(), LogError> {
        Err(no_stream(stream))
    }
    async fn fetch(&self, stream: &str, _: &str, _: FetchRequest) -> Result<Fetched, LogError> {
        Err(no_stream(stream))
    }
    async fn commit(&self, stream: &str, _: &str, _: &str, _: u64, _: BTreeMap<u32, u64>) -> Result<(), LogError> {
        Err(no_stream(stream))
    }
    async fn seek(&self, stream: &str, _: &str, _: u32, _: SeekTo) -> Result<u64, LogError> {
        Err(no_stream(stream))
    }
    async fn ack_shared(&self, stream: &str, _: &str, _: Vec<String>) -> Result<ReceiptResults, LogError> {
        Err(no_stream(stream))
    }
    async fn release_shared(
        &self,
        stream: &str,
        _: &str,
        _: Vec<String>,
        _: Option<String>,
    ) -> Result<ReceiptResults, LogError> {
        Err(no_stream(stream))
    }
    async fn nack_shared(
        &self,
        stream: &str,
        _: &str,
        _: Vec<String>,
        _: Option<String>,
    ) -> Result<ReceiptResults, LogError> {
        Err(no_stream(stream))
    }
}

fn no_stream(name: &str) -> LogError {
    LogError::StreamNotFound(name.to_owned())
}
impl sluice_store::RateStore for ParseOnlyStore {}

/// An empty log of events: an append is checked and decided against a stream never written
/// (so `expected_version` rules run), then forgotten; every stream read finds no stream and
/// `$all` holds nothing.
#[async_trait]
impl EventStore for ParseOnlyStore {
    async fn append_events(
        &self,
        stream_id: &str,
        expected: ExpectedVersion,
        events: Vec<NewEvent>,
    ) -> Result<AppendedEvents, EventError> {
        validate_append_events(stream_id, &events)?;
        let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
        let first_version = match decide_append(&StreamState::NONE, expected, &ids, None)? {
            Decision::Append { first_version } | Decision::Duplicate { first_version } => first_version,
        };
        let count = events.len() as u64;
        Ok(AppendedEvents::span(first_version, 0, count, false))
    }

    async fn read_stream(&self, stream_id: &str, read: StreamRead) -> Result<StreamEvents, EventError> {
        validate_stream_id(stream_id)?;
        read.validate()?;
        Err(AppendError::StreamNotFound.into())
    }

    async fn read_all(&self, read: AllRead) -> Result<AllEvents, EventError> {
        read.validate()?;
        Ok(AllEvents { events: Vec::new(), next_position: read.from_position, head: 0 })
    }

    async fn delete_event_stream(&self, stream_id: &str, _hard: bool) -> Result<(), EventError> {
        validate_stream_id(stream_id)?;
        Err(AppendError::StreamNotFound.into())
    }

    async fn event_stream_version(&self, stream_id: &str) -> Result<Option<u64>, EventError> {
        validate_stream_id(stream_id)?;
        Ok(None)
    }
}

#[async_trait]
impl RecordStore for ParseOnlyStore {
    async fn insert_record(&self, kind: &str, key: &str, value: Vec<u8>) -> Result<bool, StoreError> {
        validate_record_key(kind, key)?;
        validate_record_value(&value)?;
        Ok(true)
    }
    async fn put_record(&self, kind: &str, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        self.insert_record(kind, key, value).await.map(|_| ())
    }
    async fn replace_record(&self, kind: &str, key: &str, _: Vec<u8>, value: Vec<u8>) -> Result<bool, StoreError> {
        self.insert_record(kind, key, value).await.map(|_| false)
    }
    async fn get_record(&self, kind: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        validate_record_key(kind, key)?;
        Ok(None)
    }
    async fn list_records(
        &self,
        kind: &str,
        prefix: &str,
        _: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        validate_record_list(kind, prefix, limit)?;
        Ok(Vec::new())
    }
    async fn delete_record(&self, kind: &str, key: &str) -> Result<bool, StoreError> {
        validate_record_key(kind, key)?;
        Ok(false)
    }
}

#[async_trait]
impl CommitStore for ParseOnlyStore {
    /// Checks every write as the other calls do; records are forgotten, so a condition on one
    /// never holds.
    async fn commit_all(&self, writes: Vec<Write>) -> Result<Committed, StoreError> {
        validate_commit(&writes)?;
        let mut outcomes = Vec::with_capacity(writes.len());
        for (index, write) in writes.into_iter().enumerate() {
            outcomes.push(match write {
                Write::Send { queue, messages } => match self
                    .send(&queue, messages)
                    .await?
                    .into_iter()
                    .enumerate()
                    .find_map(|(message, r)| r.err().map(|error| (message, error)))
                {
                    Some((message, error)) => {
                        return Ok(Err(Refused {
                            write: index,
                            conflict: Conflict::MessageRefused { message, error },
                        }));
                    }
                    None => WriteOutcome::Sent(Vec::new()),
                },
                Write::ReplaceRecord { .. } => {
                    return Ok(Err(Refused { write: index, conflict: Conflict::RecordChanged }));
                }
                _ => WriteOutcome::Recorded,
            });
        }
        Ok(Ok(outcomes))
    }
}

#[async_trait]
impl JobStore for ParseOnlyStore {
    async fn enqueue_job(&self, job: NewJob) -> Result<EnqueuedJob, StoreError> {
        let mut board = JobBoard::default();
        let id = board.enqueue(JobId(1), job, 0)?.id();
        let record = board.get(id).ok_or(JobError::NotFound(id))?;
        let view =
            JobView { record, details: Default::default(), payload: None, result: None, progress: None, error: None };
        Ok(EnqueuedJob { view, created: true })
    }
    async fn get_job(&self, id: JobId, wait_ms: u64) -> Result<JobView, StoreError> {
        validate_wait_ms(wait_ms)?;
        Err(JobError::NotFound(id).into())
    }
    async fn list_jobs(&self, _: JobListRequest) -> Result<JobPage, StoreError> {
        Ok(JobPage::default())
    }
    async fn cancel_job(&self, id: JobId) -> Result<JobView, StoreError> {
        Err(JobError::NotFound(id).into())
    }
    async fn claim_jobs(&self, spec: ClaimSpec, wait_ms: u64) -> Result<Vec<ClaimedJob>, StoreError> {
        validate_wait_ms(wait_ms)?;
        spec.validate().map_err(JobError::from)?;
        Ok(Vec::new())
    }
    async fn heartbeat_job(
        &self,
        id: JobId,
        lease: &str,
        _: Option<Vec<u8>>,
        _: Option<u64>,
    ) -> Result<HeartbeatAnswer, StoreError> {
        parse_lease(lease)?;
        Err(JobError::NotFound(id).into())
    }
    async fn complete_job(&self, id: JobId, lease: &str, _: Vec<u8>) -> Result<JobView, StoreError> {
        parse_lease(lease)?;
        Err(JobError::NotFound(id).into())
    }
    async fn fail_job(&self, id: JobId, lease: &str, _: String, _: bool) -> Result<JobView, StoreError> {
        parse_lease(lease)?;
        Err(JobError::NotFound(id).into())
    }
    async fn job_stats(&self) -> Result<Vec<QueueJobStats>, StoreError> {
        Ok(Vec::new())
    }
}

impl StoreStatus for ParseOnlyStore {
    fn refusal(&self) -> Option<StoreError> {
        None
    }
    fn counters(&self) -> StoreCounters {
        StoreCounters::default()
    }
}
