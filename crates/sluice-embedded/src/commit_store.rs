//! [`CommitStore`] over the writer thread: one job checks every write, then applies them all,
//! so they land in the same fjall batch and are answered after the same sync. Nothing is applied
//! unless every check passed: the broker cannot take back a send, so sends are checked with
//! `Broker::admit` first, appends with `Logs::admit`, and record conditions against the records
//! as earlier writes of the commit leave them. An append's records are staged in their
//! partitions by the same job, so the writer writes them with this turn's batch and the sync
//! stage syncs their segment files before it answers, as for a plain append.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use sluice_core::broker::PendingDepth;
use sluice_core::message::MessageContent;
use sluice_core::overflow::{Depth, Placement};
use sluice_core::{Admission, EntryError, NewMessage};
use sluice_store::{
    CommitStore, Committed, Conflict, Counters, Refused, StoreError, Write, WriteOutcome, validate_commit,
    with_outcomes,
};

use crate::EmbeddedStore;
use crate::engine::Engine;
use crate::queue_store::message_id;

#[async_trait]
impl CommitStore for EmbeddedStore {
    async fn commit_all(&self, writes: Vec<Write>) -> Result<Committed, StoreError> {
        validate_commit(&writes)?;
        let shared = self.shared.clone();
        let streams: Vec<String> = writes
            .iter()
            .filter_map(|w| match w {
                Write::Append { stream, .. } => Some(stream.clone()),
                _ => None,
            })
            .collect();
        let committed = self
            .call(move |e, now| {
                if let Err(refused) = check(e, &writes, now)? {
                    return Ok(Err(refused));
                }
                let mut outcomes = Vec::with_capacity(writes.len());
                let mut sent_count = 0;
                for write in writes {
                    outcomes.push(match write {
                        Write::Send { queue, messages } => {
                            let id = e.broker.queue_id(&queue)?;
                            let mut sent = Vec::with_capacity(messages.len());
                            for message in messages {
                                let s = e
                                    .broker
                                    .send_unlimited(id, &message, message_id(), now)
                                    .expect("admitted by `check`");
                                if !s.duplicate {
                                    let NewMessage {
                                        body, body_binary, attributes, system_attributes, envelope, ..
                                    } = message;
                                    let content =
                                        MessageContent { body, body_binary, attributes, system_attributes, envelope };
                                    e.stage_body(s.seq, content);
                                    sent_count += 1;
                                }
                                sent.push(s);
                            }
                            WriteOutcome::Sent(sent)
                        }
                        Write::PutRecord { kind, key, value }
                        | Write::InsertRecord { kind, key, value }
                        | Write::ReplaceRecord { kind, key, value, .. } => {
                            e.records.put(&kind, &key, value);
                            WriteOutcome::Recorded
                        }
                        Write::DeleteRecord { kind, key } => {
                            e.records.delete(&kind, &key);
                            WriteOutcome::Recorded
                        }
                        Write::RecordOutcomes { kind, key, value, .. } => {
                            e.records.put(&kind, &key, with_outcomes(&value, &outcomes));
                            WriteOutcome::Recorded
                        }
                        Write::Append { stream, records } => {
                            let results = e
                                .logs
                                .append(&mut e.records, &stream, records, None, now)
                                .expect("the stream exists and the append's size was checked");
                            let places = results.into_iter().map(|r| r.expect("admitted by `check`")).collect();
                            WriteOutcome::Appended(places)
                        }
                    });
                }
                Counters::add(&shared.counters.messages_sent, sent_count);
                Ok(Ok(outcomes))
            })
            .await?;
        // Long polls on the streams appended to look again, as after a plain append.
        if committed.is_ok() {
            for stream in &streams {
                self.shared.stream_wakers.wake(stream);
            }
        }
        Ok(committed)
    }
}

/// Every write's checks, in order, as the earlier writes would leave the records. An unknown
/// queue fails the call; a refused message or a failed condition refuses the commit.
fn check(e: &Engine, writes: &[Write], now: u64) -> Result<Result<(), Refused>, StoreError> {
    // Records as the commit's earlier writes leave them (`None`: deleted).
    let mut written: HashMap<(&str, &str), Option<&[u8]>> = HashMap::new();
    // Dedup ids and depth that earlier appends of the commit take, per stream.
    let mut taken: HashMap<&str, crate::log::Admitted> = HashMap::new();
    // What earlier sends of the commit do to each queue's depth, and the FIFO dedup keys they
    // take (a later send with one of them is a duplicate and adds nothing).
    let mut pending: HashMap<u64, PendingDepth> = HashMap::new();
    let mut keys: HashSet<(u64, String)> = HashSet::new();
    for (index, write) in writes.iter().enumerate() {
        let refuse = |conflict| Ok(Err(Refused { write: index, conflict }));
        match write {
            Write::Send { queue, messages } => {
                let id = e.broker.queue_id(queue)?;
                // Messages of one commit into one FIFO queue may share a dedup key: the later
                // ones are duplicates of the first, which `send` answers when it applies them.
                for (message, m) in messages.iter().enumerate() {
                    match e.broker.admit(id, m, now) {
                        Ok(Admission::Duplicate(_)) => {}
                        Ok(Admission::New { dedup_key, size_bytes, .. }) => {
                            if let Some(key) = dedup_key
                                && !keys.insert((id, key))
                            {
                                continue;
                            }
                            // A full queue whose policy refuses refuses the whole commit, as
                            // any refused message does; `drop_head` and `reject_to_dlq` apply.
                            if e.broker.placement(id, size_bytes, pending.entry(id).or_default()) == Placement::Refused
                            {
                                let view = e.broker.queue_view(id, now).expect("the queue exists");
                                let error = EntryError::QueueFull {
                                    depth: Depth {
                                        messages: view.stats.depth_messages(),
                                        bytes: view.stats.depth_bytes,
                                    },
                                    max_messages: view.attributes.max_depth_messages,
                                    max_bytes: view.attributes.max_depth_bytes,
                                };
                                return refuse(Conflict::MessageRefused { message, error });
                            }
                        }
                        Err(error) => return refuse(Conflict::MessageRefused { message, error }),
                    }
                }
            }
            Write::PutRecord { kind, key, value } => {
                written.insert((kind, key), Some(value));
            }
            Write::InsertRecord { kind, key, value } => {
                let now_there = written
                    .get(&(kind.as_str(), key.as_str()))
                    .copied()
                    .unwrap_or_else(|| e.records.get(kind, key).map(Vec::as_slice));
                if now_there.is_some() {
                    return refuse(Conflict::RecordExists);
                }
                written.insert((kind, key), Some(value));
            }
            Write::ReplaceRecord { kind, key, expected, value } => {
                let now_there = written
                    .get(&(kind.as_str(), key.as_str()))
                    .copied()
                    .unwrap_or_else(|| e.records.get(kind, key).map(Vec::as_slice));
                if now_there != Some(expected.as_slice()) {
                    return refuse(Conflict::RecordChanged);
                }
                written.insert((kind, key), Some(value));
            }
            Write::DeleteRecord { kind, key } => {
                written.insert((kind, key), None);
            }
            Write::RecordOutcomes { kind, key, expected, value } => {
                if let Some(expected) = expected {
                    let now_there = written
                        .get(&(kind.as_str(), key.as_str()))
                        .copied()
                        .unwrap_or_else(|| e.records.get(kind, key).map(Vec::as_slice));
                    if now_there != Some(expected.as_slice()) {
                        return refuse(Conflict::RecordChanged);
                    }
                }
                written.insert((kind, key), Some(value));
            }
            Write::Append { stream, records } => {
                if let Err(conflict) = e.logs.admit(stream, records, now, taken.entry(stream).or_default()) {
                    return refuse(conflict);
                }
            }
        }
    }
    Ok(Ok(()))
}
