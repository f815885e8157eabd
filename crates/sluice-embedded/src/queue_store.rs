//! [`QueueStore`] over the writer thread: each call is a job run on the broker, answered once
//! its batch is durable.

use async_trait::async_trait;
use sluice_core::broker::{MoveOutcome, QueueView};
use sluice_core::message::MessageContent;
use sluice_core::receipt::Receipt;
use sluice_core::{EntryError, MessageId, NewMessage, QueueAttributes, QueueAttributesPatch, Sent};
use sluice_store::{
    Counters, EntryResults, NackEntry, PeekedMessage, QueueStore, ReceiveRequest, ReceivedMessage, StoreError,
    StoreStatus, StoredMessage, VisibilityRule,
};
use tokio::sync::oneshot;

use crate::EmbeddedStore;
use crate::engine::Command;

pub(crate) fn message_id() -> MessageId {
    MessageId(uuid::Uuid::now_v7().as_u128())
}

fn parse_receipt(text: &str) -> Result<Receipt, EntryError> {
    Receipt::decode(text).map_err(|e| EntryError::InvalidReceipt(e.0.to_string()))
}

#[async_trait]
impl QueueStore for EmbeddedStore {
    async fn create_queue(&self, name: &str, attributes: QueueAttributes) -> Result<(QueueView, bool), StoreError> {
        let name = name.to_string();
        self.call(move |e, now| {
            let (id, created) = e.broker.create_queue(&name, attributes, now)?;
            Ok((e.broker.queue_view(id, now).expect("queue exists"), created))
        })
        .await
    }

    async fn get_queue(&self, name: &str) -> Result<QueueView, StoreError> {
        let name = name.to_string();
        self.call(move |e, now| {
            let id = e.broker.queue_id(&name)?;
            Ok(e.broker.queue_view(id, now).expect("queue exists"))
        })
        .await
    }

    async fn list_queues(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Vec<QueueView>, StoreError> {
        let prefix = prefix.to_string();
        let after = after.map(str::to_string);
        self.call(move |e, now| Ok(e.broker.list_queues(&prefix, after.as_deref(), limit, now))).await
    }

    async fn update_queue(&self, name: &str, patch: QueueAttributesPatch) -> Result<QueueView, StoreError> {
        let name = name.to_string();
        self.call(move |e, now| {
            let id = e.broker.update_queue(&name, &patch, now)?;
            Ok(e.broker.queue_view(id, now).expect("queue exists"))
        })
        .await
    }

    async fn delete_queue(&self, name: &str) -> Result<(), StoreError> {
        let name = name.to_string();
        self.call(move |e, _now| {
            let id = e.broker.queue_id(&name)?;
            e.broker.delete_queue(&name)?;
            e.drop_waiters(id);
            Ok(())
        })
        .await
    }

    async fn purge_queue(&self, name: &str) -> Result<u64, StoreError> {
        let name = name.to_string();
        self.call(move |e, _now| Ok(e.broker.purge_queue(&name)?)).await
    }

    async fn send(&self, queue: &str, messages: Vec<NewMessage>) -> Result<EntryResults<Sent>, StoreError> {
        let queue = queue.to_string();
        let shared = self.shared.clone();
        self.call(move |e, now| {
            let id = e.broker.queue_id(&queue)?;
            let mut results = Vec::with_capacity(messages.len());
            for message in messages {
                let message_id = message_id();
                match e.broker.send(id, &message, message_id, now) {
                    // A FIFO duplicate: answered with the original id, nothing enqueued.
                    Ok(sent) if sent.duplicate => results.push(Ok(sent)),
                    Ok(sent) => {
                        let NewMessage { body, body_binary, attributes, system_attributes, envelope, .. } = message;
                        e.stage_body(
                            sent.seq,
                            MessageContent { body, body_binary, attributes, system_attributes, envelope },
                        );
                        results.push(Ok(sent));
                    }
                    Err(err) => results.push(Err(err)),
                }
            }
            let sent = results.iter().filter(|r| r.is_ok()).count() as u64;
            Counters::add(&shared.counters.messages_sent, sent);
            Ok(results)
        })
        .await
    }

    async fn receive(&self, queue: &str, request: ReceiveRequest) -> Result<Vec<ReceivedMessage>, StoreError> {
        if let Some(refusal) = self.refusal() {
            return Err(refusal);
        }
        let (reply, rx) = oneshot::channel();
        self.tx.send(Command::Receive { queue: queue.to_string(), request, reply }).map_err(|_| self.closed_error())?;
        rx.await.map_err(|_| self.closed_error())?
    }

    async fn ack(&self, queue: &str, receipts: Vec<String>) -> Result<EntryResults<()>, StoreError> {
        let queue = queue.to_string();
        let shared = self.shared.clone();
        self.call(move |e, now| {
            let id = e.broker.queue_id(&queue)?;
            let results: EntryResults<()> =
                receipts.iter().map(|r| parse_receipt(r).and_then(|r| e.broker.ack(id, &r, now))).collect();
            let acked = results.iter().filter(|r| r.is_ok()).count() as u64;
            Counters::add(&shared.counters.messages_acked, acked);
            Ok(results)
        })
        .await
    }

    async fn change_visibility(
        &self,
        queue: &str,
        entries: Vec<(String, u64)>,
        rule: VisibilityRule,
    ) -> Result<EntryResults<()>, StoreError> {
        let queue = queue.to_string();
        self.call(move |e, now| {
            let id = e.broker.queue_id(&queue)?;
            Ok(entries
                .iter()
                .map(|(r, timeout_ms)| {
                    parse_receipt(r).and_then(|r| match rule {
                        VisibilityRule::Native => e.broker.change_visibility(id, &r, *timeout_ms, now),
                        VisibilityRule::Sqs => e.broker.change_visibility_lenient(id, &r, *timeout_ms, now),
                    })
                })
                .collect())
        })
        .await
    }

    async fn nack(&self, queue: &str, entries: Vec<NackEntry>) -> Result<EntryResults<()>, StoreError> {
        let queue = queue.to_string();
        self.call(move |e, now| {
            let id = e.broker.queue_id(&queue)?;
            Ok(entries
                .into_iter()
                .map(|entry| {
                    parse_receipt(&entry.receipt).and_then(|r| e.broker.nack(id, &r, entry.delay_ms, entry.error, now))
                })
                .collect())
        })
        .await
    }

    async fn peek(&self, queue: &str, limit: usize) -> Result<Vec<PeekedMessage>, StoreError> {
        let queue = queue.to_string();
        self.call(move |e, now| {
            let id = e.broker.queue_id(&queue)?;
            let mut out = Vec::new();
            for (seq, meta, state) in e.broker.peek(id, limit, now) {
                match e.body(seq) {
                    Ok(content) => out.push(PeekedMessage {
                        state,
                        message: StoredMessage { seq, meta, content: (*content).clone() },
                    }),
                    Err(err) => tracing::error!("peek skips message {}: {err}", meta.id),
                }
            }
            Ok(out)
        })
        .await
    }

    async fn move_messages(&self, from: &str, to: Option<&str>, max: u64) -> Result<MoveOutcome, StoreError> {
        let from = from.to_string();
        let to = to.map(str::to_string);
        self.call(move |e, now| Ok(e.broker.move_messages(&from, to.as_deref(), max, now)?)).await
    }
}
