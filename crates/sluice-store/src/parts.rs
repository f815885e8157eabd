//! [`StoreParts`]: a [`Store`](crate::Store) put together from one implementation per concern,
//! so that a wrapper that changes one concern (a test store whose sends fail, a store whose
//! delays run on a manual clock) implements that concern's trait alone and borrows the others
//! from the store it wraps.

use std::sync::Arc;

use async_trait::async_trait;
use sluice_core::broker::{MoveOutcome, QueueView};
use sluice_core::{NewMessage, QueueAttributes, QueueAttributesPatch, Sent};

use std::collections::BTreeMap;

use sluice_core::events::{ExpectedVersion, NewEvent};
use sluice_core::jobs::{ClaimSpec, JobId, NewJob, QueueJobStats};
use sluice_core::stream::{NewRecord, StreamConfig, StreamConfigPatch};

use crate::{
    AllEvents, AllRead, AppendResults, AppendedEvents, ClaimedJob, CommitStore, Committed, EnqueuedJob, EntryResults,
    EventError, EventStore, Expectation, FetchRequest, Fetched, GroupConfig, GroupView, HeartbeatAnswer,
    JobListRequest, JobPage, JobStore, JobView, LogError, LogStore, NackEntry, PeekedMessage, QueueStore, RateStore,
    ReadBatch, ReadRequest, ReceiptResults, ReceiveRequest, ReceivedMessage, Record, RecordStore, SeekTo,
    StoreCounters, StoreError, StoreStatus, StreamEvents, StreamRead, StreamView, SweepReport, VisibilityRule, Write,
};

/// A store made of parts; every call goes to the part of its concern.
pub struct StoreParts {
    pub queues: Arc<dyn QueueStore>,
    pub records: Arc<dyn RecordStore>,
    /// Atomic commits span queues and records, so they have a part of their own.
    pub commits: Arc<dyn CommitStore>,
    pub logs: Arc<dyn LogStore>,
    pub jobs: Arc<dyn JobStore>,
    pub events: Arc<dyn EventStore>,
    pub rates: Arc<dyn RateStore>,
    pub status: Arc<dyn StoreStatus>,
}

#[async_trait]
impl RateStore for StoreParts {
    async fn take_tokens(
        &self,
        key: &str,
        limit: sluice_core::rate::RateLimit,
        asked: u64,
    ) -> Result<sluice_core::rate::Taken, StoreError> {
        self.rates.take_tokens(key, limit, asked).await
    }
}

#[async_trait]
impl QueueStore for StoreParts {
    async fn create_queue(&self, name: &str, attributes: QueueAttributes) -> Result<(QueueView, bool), StoreError> {
        self.queues.create_queue(name, attributes).await
    }

    async fn get_queue(&self, name: &str) -> Result<QueueView, StoreError> {
        self.queues.get_queue(name).await
    }

    async fn list_queues(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Vec<QueueView>, StoreError> {
        self.queues.list_queues(prefix, after, limit).await
    }

    async fn update_queue(&self, name: &str, patch: QueueAttributesPatch) -> Result<QueueView, StoreError> {
        self.queues.update_queue(name, patch).await
    }

    async fn delete_queue(&self, name: &str) -> Result<(), StoreError> {
        self.queues.delete_queue(name).await
    }

    async fn purge_queue(&self, name: &str) -> Result<u64, StoreError> {
        self.queues.purge_queue(name).await
    }

    async fn send(&self, queue: &str, messages: Vec<NewMessage>) -> Result<EntryResults<Sent>, StoreError> {
        self.queues.send(queue, messages).await
    }

    async fn receive(&self, queue: &str, request: ReceiveRequest) -> Result<Vec<ReceivedMessage>, StoreError> {
        self.queues.receive(queue, request).await
    }

    async fn ack(&self, queue: &str, receipts: Vec<String>) -> Result<EntryResults<()>, StoreError> {
        self.queues.ack(queue, receipts).await
    }

    async fn change_visibility(
        &self,
        queue: &str,
        entries: Vec<(String, u64)>,
        rule: VisibilityRule,
    ) -> Result<EntryResults<()>, StoreError> {
        self.queues.change_visibility(queue, entries, rule).await
    }

    async fn nack(&self, queue: &str, entries: Vec<NackEntry>) -> Result<EntryResults<()>, StoreError> {
        self.queues.nack(queue, entries).await
    }

    async fn peek(&self, queue: &str, limit: usize) -> Result<Vec<PeekedMessage>, StoreError> {
        self.queues.peek(queue, limit).await
    }

    async fn move_messages(&self, from: &str, to: Option<&str>, max: u64) -> Result<MoveOutcome, StoreError> {
        self.queues.move_messages(from, to, max).await
    }
}

#[async_trait]
impl RecordStore for StoreParts {
    async fn insert_record(&self, kind: &str, key: &str, value: Vec<u8>) -> Result<bool, StoreError> {
        self.records.insert_record(kind, key, value).await
    }

    async fn put_record(&self, kind: &str, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        self.records.put_record(kind, key, value).await
    }

    async fn replace_record(
        &self,
        kind: &str,
        key: &str,
        expected: Vec<u8>,
        value: Vec<u8>,
    ) -> Result<bool, StoreError> {
        self.records.replace_record(kind, key, expected, value).await
    }

    async fn get_record(&self, kind: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.records.get_record(kind, key).await
    }

    async fn list_records(
        &self,
        kind: &str,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        self.records.list_records(kind, prefix, after, limit).await
    }

    async fn delete_record(&self, kind: &str, key: &str) -> Result<bool, StoreError> {
        self.records.delete_record(kind, key).await
    }
}

#[async_trait]
impl CommitStore for StoreParts {
    async fn commit_all(&self, writes: Vec<Write>) -> Result<Committed, StoreError> {
        self.commits.commit_all(writes).await
    }
}

#[async_trait]
impl LogStore for StoreParts {
    async fn create_stream(&self, name: &str, config: StreamConfig) -> Result<(StreamView, bool), LogError> {
        self.logs.create_stream(name, config).await
    }

    async fn get_stream(&self, name: &str) -> Result<StreamView, LogError> {
        self.logs.get_stream(name).await
    }

    async fn list_streams(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Vec<StreamView>, LogError> {
        self.logs.list_streams(prefix, after, limit).await
    }

    async fn update_stream(&self, name: &str, patch: StreamConfigPatch) -> Result<StreamView, LogError> {
        self.logs.update_stream(name, patch).await
    }

    async fn delete_stream(&self, name: &str) -> Result<(), LogError> {
        self.logs.delete_stream(name).await
    }

    async fn append(
        &self,
        stream: &str,
        records: Vec<NewRecord>,
        expect: Option<Expectation>,
    ) -> Result<AppendResults, LogError> {
        self.logs.append(stream, records, expect).await
    }

    async fn read(&self, stream: &str, request: ReadRequest) -> Result<ReadBatch, LogError> {
        self.logs.read(stream, request).await
    }

    async fn create_group(&self, stream: &str, name: &str, config: GroupConfig) -> Result<(GroupView, bool), LogError> {
        self.logs.create_group(stream, name, config).await
    }

    async fn get_group(&self, stream: &str, group: &str) -> Result<GroupView, LogError> {
        self.logs.get_group(stream, group).await
    }

    async fn delete_group(&self, stream: &str, group: &str) -> Result<(), LogError> {
        self.logs.delete_group(stream, group).await
    }

    async fn fetch(&self, stream: &str, group: &str, request: FetchRequest) -> Result<Fetched, LogError> {
        self.logs.fetch(stream, group, request).await
    }

    async fn commit(
        &self,
        stream: &str,
        group: &str,
        member: &str,
        generation: u64,
        offsets: BTreeMap<u32, u64>,
    ) -> Result<(), LogError> {
        self.logs.commit(stream, group, member, generation, offsets).await
    }

    async fn seek(&self, stream: &str, group: &str, partition: u32, to: SeekTo) -> Result<u64, LogError> {
        self.logs.seek(stream, group, partition, to).await
    }

    async fn ack_shared(&self, stream: &str, group: &str, receipts: Vec<String>) -> Result<ReceiptResults, LogError> {
        self.logs.ack_shared(stream, group, receipts).await
    }

    async fn release_shared(
        &self,
        stream: &str,
        group: &str,
        receipts: Vec<String>,
        error: Option<String>,
    ) -> Result<ReceiptResults, LogError> {
        self.logs.release_shared(stream, group, receipts, error).await
    }

    async fn nack_shared(
        &self,
        stream: &str,
        group: &str,
        receipts: Vec<String>,
        error: Option<String>,
    ) -> Result<ReceiptResults, LogError> {
        self.logs.nack_shared(stream, group, receipts, error).await
    }

    async fn sweep_streams(&self) -> Result<SweepReport, LogError> {
        self.logs.sweep_streams().await
    }
}

#[async_trait]
impl JobStore for StoreParts {
    async fn enqueue_job(&self, job: NewJob) -> Result<EnqueuedJob, StoreError> {
        self.jobs.enqueue_job(job).await
    }

    async fn get_job(&self, id: JobId, wait_ms: u64) -> Result<JobView, StoreError> {
        self.jobs.get_job(id, wait_ms).await
    }

    async fn list_jobs(&self, request: JobListRequest) -> Result<JobPage, StoreError> {
        self.jobs.list_jobs(request).await
    }

    async fn cancel_job(&self, id: JobId) -> Result<JobView, StoreError> {
        self.jobs.cancel_job(id).await
    }

    async fn claim_jobs(&self, spec: ClaimSpec, wait_ms: u64) -> Result<Vec<ClaimedJob>, StoreError> {
        self.jobs.claim_jobs(spec, wait_ms).await
    }

    async fn heartbeat_job(
        &self,
        id: JobId,
        lease: &str,
        progress: Option<Vec<u8>>,
        lease_ms: Option<u64>,
    ) -> Result<HeartbeatAnswer, StoreError> {
        self.jobs.heartbeat_job(id, lease, progress, lease_ms).await
    }

    async fn complete_job(&self, id: JobId, lease: &str, result: Vec<u8>) -> Result<JobView, StoreError> {
        self.jobs.complete_job(id, lease, result).await
    }

    async fn fail_job(&self, id: JobId, lease: &str, error: String, retry: bool) -> Result<JobView, StoreError> {
        self.jobs.fail_job(id, lease, error, retry).await
    }

    async fn job_stats(&self) -> Result<Vec<QueueJobStats>, StoreError> {
        self.jobs.job_stats().await
    }
}

#[async_trait]
impl EventStore for StoreParts {
    async fn append_events(
        &self,
        stream_id: &str,
        expected: ExpectedVersion,
        events: Vec<NewEvent>,
    ) -> Result<AppendedEvents, EventError> {
        self.events.append_events(stream_id, expected, events).await
    }

    async fn read_stream(&self, stream_id: &str, read: StreamRead) -> Result<StreamEvents, EventError> {
        self.events.read_stream(stream_id, read).await
    }

    async fn read_all(&self, read: AllRead) -> Result<AllEvents, EventError> {
        self.events.read_all(read).await
    }

    async fn delete_event_stream(&self, stream_id: &str, hard: bool) -> Result<(), EventError> {
        self.events.delete_event_stream(stream_id, hard).await
    }

    async fn event_stream_version(&self, stream_id: &str) -> Result<Option<u64>, EventError> {
        self.events.event_stream_version(stream_id).await
    }
}

impl StoreStatus for StoreParts {
    fn refusal(&self) -> Option<StoreError> {
        self.status.refusal()
    }

    fn counters(&self) -> StoreCounters {
        self.status.counters()
    }

    fn backlog(&self) -> Option<u64> {
        self.status.backlog()
    }
}
