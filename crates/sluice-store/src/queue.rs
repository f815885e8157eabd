//! The queue store: queues and their messages (send, receive, ack, visibility, nack, peek,
//! redrive moves), the calls every queue feature above the store makes.

use async_trait::async_trait;
use sluice_core::broker::{MoveOutcome, QueueView};
use sluice_core::limits::{RECEIVE_MESSAGES_MAX, RECEIVE_WAIT_MS_MAX, VISIBILITY_TIMEOUT_MS_MAX};
use sluice_core::message::MessageContent;
use sluice_core::{
    EntryError, MessageMeta, MessageState, NewMessage, QueueAttributes, QueueAttributesPatch, Sent, ValidationError,
};

use crate::StoreError;

/// A receive call's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiveRequest {
    /// At most this many messages (1 to `RECEIVE_MESSAGES_MAX`).
    pub max: u32,
    /// Long-poll wait when nothing is visible; the queue's `receive_wait_ms` when `None`.
    pub wait_ms: Option<u64>,
    /// Visibility timeout for these deliveries; the queue's when `None`.
    pub visibility_timeout_ms: Option<u64>,
}

impl ReceiveRequest {
    pub fn validate(&self) -> Result<(), ValidationError> {
        if self.max == 0 || self.max > RECEIVE_MESSAGES_MAX {
            return Err(ValidationError::new("max", format!("must be 1 to {RECEIVE_MESSAGES_MAX}")));
        }
        if let Some(w) = self.wait_ms
            && w > RECEIVE_WAIT_MS_MAX
        {
            return Err(ValidationError::new("wait_ms", format!("must be at most {RECEIVE_WAIT_MS_MAX}")));
        }
        if let Some(v) = self.visibility_timeout_ms
            && v > VISIBILITY_TIMEOUT_MS_MAX
        {
            return Err(ValidationError::new(
                "visibility_timeout_ms",
                format!("must be at most {VISIBILITY_TIMEOUT_MS_MAX}"),
            ));
        }
        Ok(())
    }
}

/// A message with everything stored about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    /// The message's sequence number: unique, increasing in send order; FIFO queues show it as
    /// the message's sequence number.
    pub seq: u64,
    pub meta: MessageMeta,
    pub content: MessageContent,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    pub receipt: String,
    pub message: StoredMessage,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeekedMessage {
    pub state: MessageState,
    pub message: StoredMessage,
}

/// One entry of a nack call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NackEntry {
    pub receipt: String,
    pub delay_ms: u64,
    pub error: Option<String>,
}

pub type EntryResults<T> = Vec<Result<T, EntryError>>;

/// Which rule a visibility change follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VisibilityRule {
    /// Sluice's: only a message still held by this receipt's delivery can be changed;
    /// anything else is refused (`NotInFlight`, `StaleReceipt`).
    Native,
    /// SQS's (`Broker::change_visibility_lenient`): a message whose visibility timeout passed
    /// and that nobody received since is hidden again instead of refused.
    Sqs,
}

/// The operations of a queue engine. Every mutating call returns only after its effect is
/// durable (in the default durability mode); a call that returns an error changed nothing.
/// Batch calls answer per entry, in the order given; a bad entry never fails the others.
#[async_trait]
pub trait QueueStore: Send + Sync + 'static {
    /// Creates a queue; `true` when it is new. The same name with the same attributes (tags
    /// aside) returns the existing queue; different attributes are `BrokerError::QueueExists`.
    async fn create_queue(&self, name: &str, attributes: QueueAttributes) -> Result<(QueueView, bool), StoreError>;
    async fn get_queue(&self, name: &str) -> Result<QueueView, StoreError>;
    /// Queues whose names start with `prefix`, after `after` in name order, at most `limit`.
    async fn list_queues(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Vec<QueueView>, StoreError>;
    async fn update_queue(&self, name: &str, patch: QueueAttributesPatch) -> Result<QueueView, StoreError>;
    /// Deletes the queue and every message in it.
    async fn delete_queue(&self, name: &str) -> Result<(), StoreError>;
    /// Deletes every message in the queue, in flight or not; returns how many.
    async fn purge_queue(&self, name: &str) -> Result<u64, StoreError>;
    /// Accepts messages; each entry gets the new message's id and sequence number (for a FIFO
    /// duplicate inside the dedup window: the original's, with `duplicate` set and nothing
    /// enqueued) or why it was refused.
    async fn send(&self, queue: &str, messages: Vec<NewMessage>) -> Result<EntryResults<Sent>, StoreError>;
    /// Delivers up to `request.max` messages, waiting up to the long-poll time for the first
    /// one; an empty vector when none came in time.
    async fn receive(&self, queue: &str, request: ReceiveRequest) -> Result<Vec<ReceivedMessage>, StoreError>;
    async fn ack(&self, queue: &str, receipts: Vec<String>) -> Result<EntryResults<()>, StoreError>;
    /// Sets each in-flight message's remaining visibility (`0` releases it), by `rule`.
    async fn change_visibility(
        &self,
        queue: &str,
        entries: Vec<(String, u64)>,
        rule: VisibilityRule,
    ) -> Result<EntryResults<()>, StoreError>;
    async fn nack(&self, queue: &str, entries: Vec<NackEntry>) -> Result<EntryResults<()>, StoreError>;
    /// Up to `limit` messages in send order, without receiving them.
    async fn peek(&self, queue: &str, limit: usize) -> Result<Vec<PeekedMessage>, StoreError>;
    /// One redrive step: moves up to `max` visible messages of `from` to `to`, or each back to
    /// the queue it was dead-lettered from when `to` is `None`.
    async fn move_messages(&self, from: &str, to: Option<&str>, max: u64) -> Result<MoveOutcome, StoreError>;
}
