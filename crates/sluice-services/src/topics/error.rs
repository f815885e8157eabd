//! Why a topics call failed, with what each protocol needs to say it: the native API's code
//! and a message for people, and SNS's error code and AWS's exact text.

use sluice_store::StoreError;

use crate::schemas::Violation;

/// SNS's code for more tags than a topic may have (HTTP 400, `TagLimitExceededException`).
pub const TAG_LIMIT_EXCEEDED: &str = "TagLimitExceeded";

/// A parameter that breaks a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The native API's field name (`name`, `attributes.FilterPolicy`, `messages[2].group_id`).
    pub field: String,
    /// For people, in Sluice's words.
    pub message: String,
    /// SNS's error code: `InvalidParameter`, `ParameterValueInvalid` for message attributes,
    /// or [`TAG_LIMIT_EXCEEDED`] for too many tags.
    pub sns_code: &'static str,
    /// SNS's message, as AWS words it (`Invalid parameter: Topic Name`).
    pub sns_message: String,
}

impl Invalid {
    pub fn new(field: impl Into<String>, message: impl Into<String>, sns_message: impl Into<String>) -> Invalid {
        Invalid {
            field: field.into(),
            message: message.into(),
            sns_code: "InvalidParameter",
            sns_message: sns_message.into(),
        }
    }

    /// An invalid message attribute (SNS answers these with `ParameterValueInvalid`).
    pub fn attribute(field: impl Into<String>, message: impl Into<String>, sns_message: impl Into<String>) -> Invalid {
        Invalid { sns_code: "ParameterValueInvalid", ..Invalid::new(field, message, sns_message) }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    #[error("no topic is named {0:?}")]
    TopicNotFound(String),
    #[error("no subscription {0} exists")]
    SubscriptionNotFound(String),
    /// The topic exists with other attributes (`tags == false`) or other tags.
    #[error("topic {name:?} exists with different {}", if *tags { "tags" } else { "attributes" })]
    TopicExists { name: String, tags: bool },
    #[error("the subscription {0} exists with different attributes")]
    SubscriptionExists(String),
    #[error("{}", .0.message)]
    Invalid(Invalid),
    /// A limit on subscriptions or filter policies per topic.
    #[error("{message}")]
    LimitExceeded { message: String, sns_code: &'static str, sns_message: String },
    /// A read-modify-write lost to other writers `RECORD_UPDATE_ATTEMPTS_MAX` times in a row.
    #[error("the record changed under this call too often; try again")]
    Contended,
    /// A stored topic or subscription could not be read (written by a newer Sluice?).
    #[error("a stored record could not be read: {0}")]
    Corrupt(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<Invalid> for TopicError {
    fn from(i: Invalid) -> Self {
        TopicError::Invalid(i)
    }
}

/// Why one published message was not acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublishError {
    #[error("{}", .0.message)]
    Invalid(Invalid),
    /// The topic checks schemas and the message breaks its own (or names none).
    #[error("{0}")]
    Schema(Violation),
    /// The message is durable for some matching subscriptions but the store refused it for
    /// others (poisoned, disk full, shutting down): not acknowledged. A retry may deliver it a
    /// second time to the subscriptions that have it, as at-least-once allows.
    #[error("the message reached {delivered} of {matched} matching subscriptions: {cause}")]
    Incomplete { delivered: usize, matched: usize, cause: StoreError },
    /// A matching subscription's queue is full and its `overflow` is `reject`: the copy there
    /// was refused, so the message is not acknowledged (the other copies are durable, as for
    /// `Incomplete`). Retrying later, once the queue's consumers made room, can succeed.
    #[error("the message reached {delivered} of {matched} matching subscriptions: queue {queue:?} is full")]
    QueueFull { delivered: usize, matched: usize, queue: String },
    /// The topic's `RateLimit` had no token left for the message: nothing was published.
    #[error("the topic's rate limit is reached: retry in {retry_after_ms} ms")]
    RateLimited { retry_after_ms: u64 },
}
