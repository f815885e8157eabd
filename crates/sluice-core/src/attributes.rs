//! Queue attributes: defaults, partial updates and validation.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::limits::*;
use crate::name::validate_queue_name;
use crate::overflow::Overflow;
use crate::rate::RateLimit;
use crate::validation::ValidationError;

/// What a FIFO deduplication id is unique within.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum DedupScope {
    /// The whole queue (default, as SQS).
    #[default]
    Queue,
    /// Each message group separately.
    MessageGroup,
}

/// Where messages go after too many receives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// Name of the dead-letter queue; it must exist when the policy is set.
    pub queue: String,
    /// A message received this many times moves to `queue` instead of being delivered again.
    pub max_receive_count: u32,
}

impl DeadLetter {
    /// The receive count at which a message has used up its receives under this policy: from
    /// then on it moves to `queue` instead of being delivered again, when a receive meets it or
    /// its hold ends. It is the number [`DeadLetter::is_exhausted`] compares with, so a backend
    /// that tests the rule in a query keeps this (sluice-postgres: `queues.max_receive_count`).
    pub fn exhausted_receive_count(&self) -> u32 {
        self.max_receive_count
    }

    /// Core's dead-letter rule: whether a message received `receive_count` times has used up
    /// its receives under a policy whose [`exhausted_receive_count`](Self::exhausted_receive_count)
    /// is `exhausted_receive_count`. (It then moves only if the dead-letter queue exists and is of
    /// the queue's type; `Broker` checks that.) SQL restating it compares `receive_count >=
    /// exhausted_receive_count`.
    pub fn is_exhausted(receive_count: u32, exhausted_receive_count: u32) -> bool {
        receive_count >= exhausted_receive_count
    }
}

/// A queue's configuration. Every field has a default, so `QueueAttributes::default()` is a
/// valid queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueAttributes {
    pub visibility_timeout_ms: u64,
    pub delay_ms: u64,
    pub retention_ms: u64,
    pub message_bytes_max: u64,
    pub receive_wait_ms: u64,
    pub dead_letter: Option<DeadLetter>,
    /// Strict order within each message group; set at creation, never changed.
    pub fifo: bool,
    /// FIFO: a send without a dedup id is deduplicated by the SHA-256 of its body.
    pub content_based_dedup: bool,
    /// FIFO: how long a deduplication id is remembered after its first send.
    pub dedup_window_ms: u64,
    /// FIFO: whether dedup ids are unique per queue or per message group.
    pub dedup_scope: DedupScope,
    /// Free-form labels. Not compared when a create meets an existing queue (as in SQS).
    pub tags: BTreeMap<String, String>,
    /// SQS attributes Sluice keeps and returns verbatim but does not act on (`Policy`,
    /// `RedriveAllowPolicy`, `KmsMasterKeyId`, `KmsDataKeyReusePeriodSeconds`,
    /// `SqsManagedSseEnabled`), so that SQS clients read back what they set.
    pub sqs_attributes: BTreeMap<String, String>,
    /// Refuse a message whose body breaks the JSON Schema registered for its `type` and
    /// `version` (checked at the door, by the services; the broker does not act on it).
    #[serde(default)]
    pub schema_validation: bool,
    // The attributes below are written only when set, so that a queue that uses none of them
    // is stored byte for byte as before they existed (the format-2 fixture test holds to it).
    /// Most messages the queue holds, whatever their state (visible, delayed, in flight); a send
    /// past it follows `overflow`. `None`: no bound but the store's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth_messages: Option<u64>,
    /// Most bytes (bodies and attributes, as `message_bytes_max` counts them) the queue holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth_bytes: Option<u64>,
    /// What a send into a full queue does (see [`Overflow`]).
    #[serde(default, skip_serializing_if = "Overflow::is_reject")]
    pub overflow: Overflow,
    /// Messages whose retention ran out move to the dead-letter queue instead of being
    /// deleted (the policy's queue must exist then; otherwise they are deleted, as without it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expired_to_dlq: bool,
    /// A token bucket every send takes one token a message from (`rate_limited` when empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
}

impl Default for QueueAttributes {
    fn default() -> Self {
        QueueAttributes {
            visibility_timeout_ms: VISIBILITY_TIMEOUT_MS_DEFAULT,
            delay_ms: 0,
            retention_ms: RETENTION_MS_DEFAULT,
            message_bytes_max: MESSAGE_BYTES_MAX_DEFAULT,
            receive_wait_ms: 0,
            dead_letter: None,
            fifo: false,
            content_based_dedup: false,
            dedup_window_ms: DEDUP_WINDOW_MS_DEFAULT,
            dedup_scope: DedupScope::Queue,
            tags: BTreeMap::new(),
            sqs_attributes: BTreeMap::new(),
            schema_validation: false,
            max_depth_messages: None,
            max_depth_bytes: None,
            overflow: Overflow::Reject,
            expired_to_dlq: false,
            rate_limit: None,
        }
    }
}

/// A partial update: `None` leaves a field as it is. `dead_letter: Some(None)` removes the policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueAttributesPatch {
    pub visibility_timeout_ms: Option<u64>,
    pub delay_ms: Option<u64>,
    pub retention_ms: Option<u64>,
    pub message_bytes_max: Option<u64>,
    pub receive_wait_ms: Option<u64>,
    pub dead_letter: Option<Option<DeadLetter>>,
    pub content_based_dedup: Option<bool>,
    pub dedup_window_ms: Option<u64>,
    pub tags: Option<BTreeMap<String, String>>,
    /// Entries to set (`Some`) or remove (`None`) in `sqs_attributes`.
    pub sqs_attributes: BTreeMap<String, Option<String>>,
    pub schema_validation: Option<bool>,
    /// `Some(None)` removes the bound.
    pub max_depth_messages: Option<Option<u64>>,
    pub max_depth_bytes: Option<Option<u64>>,
    pub overflow: Option<Overflow>,
    pub expired_to_dlq: Option<bool>,
    /// `Some(None)` removes the limit.
    pub rate_limit: Option<Option<RateLimit>>,
}

impl QueueAttributes {
    /// True when `other` configures the same queue, ignoring tags.
    pub fn same_config(&self, other: &QueueAttributes) -> bool {
        QueueAttributes { tags: BTreeMap::new(), ..self.clone() }
            == QueueAttributes { tags: BTreeMap::new(), ..other.clone() }
    }

    pub fn apply(&self, patch: &QueueAttributesPatch) -> QueueAttributes {
        let mut next = self.clone();
        if let Some(v) = patch.visibility_timeout_ms {
            next.visibility_timeout_ms = v;
        }
        if let Some(v) = patch.delay_ms {
            next.delay_ms = v;
        }
        if let Some(v) = patch.retention_ms {
            next.retention_ms = v;
        }
        if let Some(v) = patch.message_bytes_max {
            next.message_bytes_max = v;
        }
        if let Some(v) = patch.receive_wait_ms {
            next.receive_wait_ms = v;
        }
        if let Some(v) = &patch.dead_letter {
            next.dead_letter = v.clone();
        }
        if let Some(v) = patch.content_based_dedup {
            next.content_based_dedup = v;
        }
        if let Some(v) = patch.dedup_window_ms {
            next.dedup_window_ms = v;
        }
        if let Some(v) = &patch.tags {
            next.tags = v.clone();
        }
        if let Some(v) = patch.schema_validation {
            next.schema_validation = v;
        }
        if let Some(v) = patch.max_depth_messages {
            next.max_depth_messages = v;
        }
        if let Some(v) = patch.max_depth_bytes {
            next.max_depth_bytes = v;
        }
        if let Some(v) = patch.overflow {
            next.overflow = v;
        }
        if let Some(v) = patch.expired_to_dlq {
            next.expired_to_dlq = v;
        }
        if let Some(v) = patch.rate_limit {
            next.rate_limit = v;
        }
        for (name, value) in &patch.sqs_attributes {
            match value {
                Some(v) => next.sqs_attributes.insert(name.clone(), v.clone()),
                None => next.sqs_attributes.remove(name),
            };
        }
        next
    }

    /// Checks every bound. Whether the dead-letter queue exists is the broker's business.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_range("visibility_timeout_ms", self.visibility_timeout_ms, 0, VISIBILITY_TIMEOUT_MS_MAX)?;
        check_range("retention_ms", self.retention_ms, RETENTION_MS_MIN, RETENTION_MS_MAX)?;
        // A default delay as long as retention would make every send expire before delivery.
        check_range("delay_ms", self.delay_ms, 0, self.retention_ms - 1)?;
        check_range("message_bytes_max", self.message_bytes_max, 1, MESSAGE_BYTES_LIMIT)?;
        check_range("receive_wait_ms", self.receive_wait_ms, 0, RECEIVE_WAIT_MS_MAX)?;
        if let Some(dl) = &self.dead_letter {
            validate_queue_name(&dl.queue).map_err(|e| e.within("dead_letter").rename("dead_letter.queue"))?;
            check_range(
                "dead_letter.max_receive_count",
                u64::from(dl.max_receive_count),
                1,
                u64::from(MAX_RECEIVE_COUNT_MAX),
            )?;
        }
        self.validate_depth()?;
        if let Some(limit) = &self.rate_limit {
            limit.validate("rate_limit")?;
        }
        if self.fifo {
            if self.delay_ms > 0 && self.delay_ms >= self.retention_ms {
                return Err(ValidationError::new("delay_ms", "must be shorter than retention_ms"));
            }
            check_range("dedup_window_ms", self.dedup_window_ms, 1, DEDUP_WINDOW_MS_MAX)?;
        } else {
            if self.content_based_dedup {
                return Err(ValidationError::new(
                    "content_based_dedup",
                    "only FIFO queues deduplicate; set fifo: true",
                ));
            }
            if self.dedup_scope != DedupScope::Queue {
                return Err(ValidationError::new("dedup_scope", "only FIFO queues deduplicate; set fifo: true"));
            }
            if self.dedup_window_ms != DEDUP_WINDOW_MS_DEFAULT {
                return Err(ValidationError::new("dedup_window_ms", "only FIFO queues deduplicate; set fifo: true"));
            }
        }
        if self.tags.len() > TAGS_MAX {
            return Err(ValidationError::new("tags", format!("a queue has at most {TAGS_MAX} tags")));
        }
        for (k, v) in &self.tags {
            if k.is_empty() || k.len() > TAG_KEY_LEN_MAX {
                return Err(ValidationError::new("tags", format!("tag keys are 1 to {TAG_KEY_LEN_MAX} bytes")));
            }
            if v.len() > TAG_VALUE_LEN_MAX {
                return Err(ValidationError::new(
                    format!("tags.{k}"),
                    format!("tag values are at most {TAG_VALUE_LEN_MAX} bytes"),
                ));
            }
        }
        if self.sqs_attributes.len() > SQS_ATTRIBUTES_MAX {
            return Err(ValidationError::new("sqs_attributes", format!("at most {SQS_ATTRIBUTES_MAX} entries")));
        }
        for (k, v) in &self.sqs_attributes {
            if v.len() > SQS_ATTRIBUTE_BYTES_MAX {
                return Err(ValidationError::new(
                    format!("sqs_attributes.{k}"),
                    format!("values are at most {SQS_ATTRIBUTE_BYTES_MAX} bytes"),
                ));
            }
        }
        Ok(())
    }
}

impl QueueAttributes {
    /// The depth limits' bounds, and the rule that a policy moving messages to the dead-letter
    /// queue needs one: without it `drop_head` would have to delete acknowledged messages, and
    /// Sluice refuses the configuration rather than drop anything silently.
    fn validate_depth(&self) -> Result<(), ValidationError> {
        if let Some(n) = self.max_depth_messages {
            check_range("max_depth_messages", n, 1, QUEUE_DEPTH_MESSAGES_LIMIT)?;
        }
        if let Some(n) = self.max_depth_bytes {
            // Every message the queue may take must fit in an empty queue, or it could never be sent.
            check_range("max_depth_bytes", n, self.message_bytes_max, QUEUE_DEPTH_BYTES_LIMIT)?;
        }
        if self.dead_letter.is_none() {
            if self.overflow != Overflow::Reject {
                return Err(ValidationError::new(
                    "overflow",
                    format!(
                        "overflow {} moves messages to the dead-letter queue; set dead_letter first (or use reject)",
                        self.overflow.as_str()
                    ),
                ));
            }
            if self.expired_to_dlq {
                return Err(ValidationError::new(
                    "expired_to_dlq",
                    "expired messages can move only to a dead-letter queue; set dead_letter first",
                ));
            }
        }
        Ok(())
    }

    /// Whether the queue has a depth bound at all (queues without one skip every depth check).
    pub fn has_depth_limit(&self) -> bool {
        self.max_depth_messages.is_some() || self.max_depth_bytes.is_some()
    }
}

impl ValidationError {
    fn rename(self, field: &str) -> Self {
        ValidationError { field: field.to_string(), message: self.message }
    }
}

fn check_range(field: &str, value: u64, min: u64, max: u64) -> Result<(), ValidationError> {
    if value < min || value > max {
        return Err(ValidationError::new(field, format!("must be between {min} and {max} (got {value})")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        QueueAttributes::default().validate().unwrap();
    }

    #[test]
    fn bounds_name_the_field() {
        let attrs = QueueAttributes { visibility_timeout_ms: VISIBILITY_TIMEOUT_MS_MAX + 1, ..Default::default() };
        assert_eq!(attrs.validate().unwrap_err().field, "visibility_timeout_ms");
        let attrs = QueueAttributes {
            dead_letter: Some(DeadLetter { queue: "dlq".into(), max_receive_count: 0 }),
            ..Default::default()
        };
        assert_eq!(attrs.validate().unwrap_err().field, "dead_letter.max_receive_count");
        let attrs = QueueAttributes {
            dead_letter: Some(DeadLetter { queue: "bad name".into(), max_receive_count: 3 }),
            ..Default::default()
        };
        assert_eq!(attrs.validate().unwrap_err().field, "dead_letter.queue");
        let attrs = QueueAttributes { retention_ms: 120_000, delay_ms: 120_001, ..Default::default() };
        assert_eq!(attrs.validate().unwrap_err().field, "delay_ms");
    }

    #[test]
    fn a_message_is_exhausted_once_received_max_receive_count_times() {
        let policy = DeadLetter { queue: "dlq".into(), max_receive_count: 3 };
        let exhausted_at = policy.exhausted_receive_count();
        let exhausted: Vec<bool> = (0..5).map(|n| DeadLetter::is_exhausted(n, exhausted_at)).collect();
        assert_eq!(exhausted, [false, false, false, true, true]);
    }

    #[test]
    fn policies_that_move_messages_need_a_dead_letter_queue() {
        for overflow in [Overflow::DropHead, Overflow::RejectToDlq] {
            let attrs = QueueAttributes { max_depth_messages: Some(10), overflow, ..Default::default() };
            assert_eq!(attrs.validate().unwrap_err().field, "overflow");
            let dead_letter = Some(DeadLetter { queue: "dlq".into(), max_receive_count: 3 });
            QueueAttributes { dead_letter, ..attrs }.validate().unwrap();
        }
        let attrs = QueueAttributes { expired_to_dlq: true, ..Default::default() };
        assert_eq!(attrs.validate().unwrap_err().field, "expired_to_dlq");
        let attrs = QueueAttributes { max_depth_messages: Some(0), ..Default::default() };
        assert_eq!(attrs.validate().unwrap_err().field, "max_depth_messages");
        // A byte bound below the largest message would refuse that message into an empty queue.
        let attrs = QueueAttributes { max_depth_bytes: Some(1_000), message_bytes_max: 1_001, ..Default::default() };
        assert_eq!(attrs.validate().unwrap_err().field, "max_depth_bytes");
        QueueAttributes { max_depth_bytes: Some(1_000), message_bytes_max: 1_000, ..Default::default() }
            .validate()
            .unwrap();
    }

    #[test]
    fn same_config_ignores_tags() {
        let a = QueueAttributes::default();
        let mut b = a.clone();
        b.tags.insert("team".into(), "x".into());
        assert!(a.same_config(&b));
        b.delay_ms = 5;
        assert!(!a.same_config(&b));
    }
}
