//! [`LogStore`] over the writer thread: each call is a job on the log engine (`log/`), answered
//! once its batch is durable. Long polls wait outside the writer: a read or fetch that finds
//! nothing subscribes to its stream's wake-ups (`log::wake`) and tries again when an append
//! (or a shared-mode ack, release or nack) through that stream is durable, or at the latest
//! every `LONG_POLL_RECHECK_MS` (so that a fetching member stays alive, and shared-mode ack
//! timeouts and rebalances are noticed), until its wait is over.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use sluice_core::stream::{NewRecord, StreamConfig, StreamConfigPatch};
use sluice_core::{MessageId, NewMessage};
use sluice_store::{
    AppendResults, Expectation, FetchRequest, Fetched, GroupConfig, GroupView, LogError, LogStore, ReadBatch,
    ReadRequest, ReceiptResults, SeekTo, StreamView, SweepReport,
};

use crate::EmbeddedStore;
use crate::engine::Engine;
use crate::log::DeadLetter;
use crate::log::groups_api::{self, Give};

/// Longest a long poll waits before it looks again by itself.
const LONG_POLL_RECHECK_MS: u64 = 250;

/// Sends each dead letter to its queue in the current batch; one whose queue is gone (or
/// refuses it) is dropped with a warning. Answers how many went to a queue and how many not.
fn dead_letter(e: &mut Engine, dead: Vec<DeadLetter>, now: u64) -> (u64, u64) {
    let (mut sent, mut dropped) = (0, 0);
    for d in dead {
        let Some(queue) = d.queue else {
            dropped += 1;
            continue;
        };
        let result = e.broker.queue_id(&queue).map_err(|err| err.to_string()).and_then(|id| {
            e.broker.send(id, &d.message, MessageId(uuid::Uuid::now_v7().as_u128()), now).map_err(|err| err.to_string())
        });
        match result {
            Ok(s) => {
                let NewMessage { body, body_binary, attributes, system_attributes, envelope, .. } = d.message;
                let content =
                    sluice_core::message::MessageContent { body, body_binary, attributes, system_attributes, envelope };
                e.stage_body(s.seq, content);
                sent += 1;
            }
            Err(err) => {
                tracing::warn!(
                    "dropping an exhausted stream record: its dead-letter queue {queue:?} refused it: {err}"
                );
                dropped += 1;
            }
        }
    }
    (sent, dropped)
}

impl EmbeddedStore {
    /// Runs `f` on the log engine; a store-level failure keeps its meaning.
    async fn log_call<T, F>(&self, f: F) -> Result<T, LogError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Engine, u64) -> Result<T, LogError> + Send + 'static,
    {
        let outcome = self.call(move |e, now| Ok(f(e, now))).await;
        match outcome {
            Ok(result) => result,
            Err(store) => Err(LogError::Store(store)),
        }
    }

    /// Tries `attempt` until it returns something or `wait_ms` is over, woken by `stream`.
    async fn long_poll<T, F, Fut>(
        &self,
        stream: &str,
        wait_ms: u64,
        empty: impl Fn(&T) -> bool + Send,
        mut attempt: F,
    ) -> Result<T, LogError>
    where
        F: FnMut() -> Fut + Send,
        Fut: std::future::Future<Output = Result<T, LogError>> + Send,
    {
        let deadline = Instant::now() + Duration::from_millis(wait_ms);
        loop {
            let mut woken = self.shared.stream_wakers.subscribe(stream);
            let got = attempt().await?;
            let now = Instant::now();
            if !empty(&got) || now >= deadline {
                return Ok(got);
            }
            let pause = (deadline - now).min(Duration::from_millis(LONG_POLL_RECHECK_MS));
            let _ = tokio::time::timeout(pause, woken.changed()).await;
        }
    }
}

#[async_trait]
impl LogStore for EmbeddedStore {
    async fn create_stream(&self, name: &str, config: StreamConfig) -> Result<(StreamView, bool), LogError> {
        let name = name.to_owned();
        self.log_call(move |e, now| e.logs.create(&mut e.records, &name, config, now)).await
    }

    async fn get_stream(&self, name: &str) -> Result<StreamView, LogError> {
        let name = name.to_owned();
        self.log_call(move |e, now| e.logs.view(&name, now)).await
    }

    async fn list_streams(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Vec<StreamView>, LogError> {
        let (prefix, after) = (prefix.to_owned(), after.map(str::to_owned));
        self.log_call(move |e, now| Ok(e.logs.list(&prefix, after.as_deref(), limit, now))).await
    }

    async fn update_stream(&self, name: &str, patch: StreamConfigPatch) -> Result<StreamView, LogError> {
        let name = name.to_owned();
        self.log_call(move |e, now| e.logs.update(&mut e.records, &name, patch, now)).await
    }

    async fn delete_stream(&self, name: &str) -> Result<(), LogError> {
        let name = name.to_owned();
        let result = self
            .log_call({
                let name = name.clone();
                move |e, _| e.logs.delete(&mut e.records, &name)
            })
            .await;
        // Long polls on it end at once (and find it gone).
        self.shared.stream_wakers.wake(&name);
        result
    }

    async fn append(
        &self,
        stream: &str,
        records: Vec<NewRecord>,
        expect: Option<Expectation>,
    ) -> Result<AppendResults, LogError> {
        let name = stream.to_owned();
        let results = self.log_call(move |e, now| e.logs.append(&mut e.records, &name, records, expect, now)).await?;
        if results.iter().any(|r| r.as_ref().is_ok_and(|a| !a.duplicate)) {
            self.shared.stream_wakers.wake(stream);
        }
        Ok(results)
    }

    async fn read(&self, stream: &str, request: ReadRequest) -> Result<ReadBatch, LogError> {
        request.validate()?;
        let name = stream.to_owned();
        self.long_poll(
            stream,
            request.wait_ms,
            |b: &ReadBatch| b.records.is_empty(),
            || {
                let name = name.clone();
                self.log_call(move |e, _| e.logs.read(&name, request))
            },
        )
        .await
    }

    async fn create_group(&self, stream: &str, name: &str, config: GroupConfig) -> Result<(GroupView, bool), LogError> {
        let (stream, name) = (stream.to_owned(), name.to_owned());
        self.log_call(move |e, now| {
            if let Some(q) = &config.dead_letter_queue
                && e.broker.queue_id(q).is_err()
            {
                return Err(LogError::DeadLetterQueueNotFound(q.clone()));
            }
            let s = e.logs.stream_mut(&stream)?;
            groups_api::create(s, &mut e.records, &name, config, now)
        })
        .await
    }

    async fn get_group(&self, stream: &str, group: &str) -> Result<GroupView, LogError> {
        let (stream, group) = (stream.to_owned(), group.to_owned());
        self.log_call(move |e, now| e.logs.group_view(&stream, &group, now)).await
    }

    async fn delete_group(&self, stream: &str, group: &str) -> Result<(), LogError> {
        let (stream, group) = (stream.to_owned(), group.to_owned());
        self.log_call(move |e, _| groups_api::delete(e.logs.stream_mut(&stream)?, &mut e.records, &group)).await
    }

    async fn fetch(&self, stream: &str, group: &str, request: FetchRequest) -> Result<Fetched, LogError> {
        use sluice_core::stream::limits::{READ_RECORDS_MAX, READ_WAIT_MS_MAX};
        if request.max == 0 || request.max > READ_RECORDS_MAX {
            return Err(sluice_core::ValidationError::new("max", format!("must be 1 to {READ_RECORDS_MAX}")).into());
        }
        if request.wait_ms > READ_WAIT_MS_MAX {
            return Err(
                sluice_core::ValidationError::new("wait_ms", format!("must be at most {READ_WAIT_MS_MAX}")).into()
            );
        }
        let shared = self.shared.clone();
        let (name, group) = (stream.to_owned(), group.to_owned());
        self.long_poll(
            stream,
            request.wait_ms,
            |f: &Fetched| f.records.is_empty(),
            || {
                let (name, group, member, max) = (name.clone(), group.clone(), request.member.clone(), request.max);
                let shared = shared.clone();
                self.log_call(move |e, now| {
                    let s = e.logs.stream_mut(&name)?;
                    let (fetched, dead) = groups_api::fetch(s, &mut e.records, &group, &member, max as usize, now)?;
                    let (sent, dropped) = dead_letter(e, dead, now);
                    sluice_store::Counters::add(&shared.counters.messages_dead_lettered, sent + dropped);
                    Ok(fetched)
                })
            },
        )
        .await
    }

    async fn commit(
        &self,
        stream: &str,
        group: &str,
        member: &str,
        generation: u64,
        offsets: BTreeMap<u32, u64>,
    ) -> Result<(), LogError> {
        let (stream, group, member) = (stream.to_owned(), group.to_owned(), member.to_owned());
        self.log_call(move |e, now| {
            groups_api::commit(e.logs.stream_mut(&stream)?, &mut e.records, &group, &member, generation, &offsets, now)
        })
        .await
    }

    async fn seek(&self, stream: &str, group: &str, partition: u32, to: SeekTo) -> Result<u64, LogError> {
        let (name, group) = (stream.to_owned(), group.to_owned());
        let offset = self
            .log_call(move |e, _| groups_api::seek(e.logs.stream_mut(&name)?, &mut e.records, &group, partition, to))
            .await?;
        self.shared.stream_wakers.wake(stream);
        Ok(offset)
    }

    async fn ack_shared(&self, stream: &str, group: &str, receipts: Vec<String>) -> Result<ReceiptResults, LogError> {
        self.settle(stream, group, receipts, Give::Ack, None).await
    }

    async fn release_shared(
        &self,
        stream: &str,
        group: &str,
        receipts: Vec<String>,
        error: Option<String>,
    ) -> Result<ReceiptResults, LogError> {
        self.settle(stream, group, receipts, Give::Release, error).await
    }

    async fn nack_shared(
        &self,
        stream: &str,
        group: &str,
        receipts: Vec<String>,
        error: Option<String>,
    ) -> Result<ReceiptResults, LogError> {
        self.settle(stream, group, receipts, Give::Nack, error).await
    }

    async fn sweep_streams(&self) -> Result<SweepReport, LogError> {
        let shared = self.shared.clone();
        self.log_call(move |e, now| {
            let (mut report, dead) = e.logs.sweep(&mut e.records, now)?;
            let (sent, dropped) = dead_letter(e, dead, now);
            report.dead_lettered = sent;
            report.dropped = dropped;
            sluice_store::Counters::add(&shared.counters.messages_dead_lettered, sent + dropped);
            Ok(report)
        })
        .await
    }
}

impl EmbeddedStore {
    async fn settle(
        &self,
        stream: &str,
        group: &str,
        receipts: Vec<String>,
        give: Give,
        error: Option<String>,
    ) -> Result<ReceiptResults, LogError> {
        use sluice_core::stream::limits::RECORD_ERROR_LEN_MAX;
        if receipts.is_empty() || receipts.len() > sluice_core::limits::BATCH_ENTRIES_MAX {
            return Err(sluice_core::ValidationError::new("receipts", "1 to 1000 receipts").into());
        }
        if error.as_ref().is_some_and(|e| e.len() > RECORD_ERROR_LEN_MAX) {
            return Err(
                sluice_core::ValidationError::new("error", format!("at most {RECORD_ERROR_LEN_MAX} bytes")).into()
            );
        }
        let (name, group_name) = (stream.to_owned(), group.to_owned());
        let results = self
            .log_call(move |e, now| {
                let s = e.logs.stream_mut(&name)?;
                let (results, dead) = groups_api::settle(s, &mut e.records, &group_name, receipts, give, error)?;
                dead_letter(e, dead, now);
                Ok(results)
            })
            .await?;
        if give != Give::Ack || results.iter().any(Result::is_ok) {
            self.shared.stream_wakers.wake(stream);
        }
        Ok(results)
    }
}
