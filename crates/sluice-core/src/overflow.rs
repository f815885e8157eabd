//! Depth limits: what a send into a queue at its `max_depth_messages` or `max_depth_bytes` does.
//!
//! One pure decision, [`place`], shared by the embedded broker (which applies it on its writer
//! thread) and the PostgreSQL backend (which applies it under the queue row's lock), so both
//! backends refuse, drop and dead-letter by the same rule.

use serde::{Deserialize, Serialize};

/// What a send into a full queue does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overflow {
    /// The new message is refused (`queue_full`); nothing changes.
    #[default]
    Reject,
    /// The oldest messages not in flight move to the dead-letter queue until the new one fits.
    DropHead,
    /// The new message goes to the dead-letter queue instead of this one.
    RejectToDlq,
}

impl Overflow {
    /// The default, which a stored queue record leaves out.
    pub fn is_reject(&self) -> bool {
        *self == Overflow::Reject
    }

    pub const ALL: [Overflow; 3] = [Overflow::Reject, Overflow::DropHead, Overflow::RejectToDlq];

    pub fn as_str(self) -> &'static str {
        match self {
            Overflow::Reject => "reject",
            Overflow::DropHead => "drop_head",
            Overflow::RejectToDlq => "reject_to_dlq",
        }
    }

    pub fn parse(text: &str) -> Option<Overflow> {
        Overflow::ALL.into_iter().find(|o| o.as_str() == text)
    }
}

/// How full a queue is: every message in it, whatever its state, and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Depth {
    pub messages: u64,
    pub bytes: u64,
}

/// A queue's depth after a send and its limits, for the send's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DepthReport {
    pub depth: Depth,
    pub limits: DepthLimits,
}

/// A queue's bounds and policy, as [`place`] reads them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DepthLimits {
    pub max_messages: Option<u64>,
    pub max_bytes: Option<u64>,
    pub overflow: Overflow,
}

impl DepthLimits {
    pub fn of(attributes: &crate::QueueAttributes) -> DepthLimits {
        DepthLimits {
            max_messages: attributes.max_depth_messages,
            max_bytes: attributes.max_depth_bytes,
            overflow: attributes.overflow,
        }
    }

    pub fn is_bounded(&self) -> bool {
        self.max_messages.is_some() || self.max_bytes.is_some()
    }

    /// Whether a message of `size_bytes` fits into a queue at `depth`.
    pub fn fits(&self, depth: Depth, size_bytes: u64) -> bool {
        self.max_messages.is_none_or(|max| depth.messages < max)
            && self.max_bytes.is_none_or(|max| depth.bytes.saturating_add(size_bytes) <= max)
    }
}

/// Where a new message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Into the queue, after the `drop` oldest droppable messages moved to the dead-letter queue.
    Queue { drop: usize },
    /// Into the dead-letter queue (`reject_to_dlq`).
    DeadLetter,
    /// Refused: the queue is full (`reject`, or no dead-letter queue to move to, or nothing
    /// left to drop because every message is in flight).
    Refused,
}

/// Where a message of `size_bytes` goes in a queue at `depth` under `limits`. `droppable` is the
/// size of each message `drop_head` may move, oldest first (messages not in flight: a held
/// message keeps its consumer's receipt valid); `has_dead_letter` is whether the queue's
/// dead-letter queue exists now. A policy that would move a message without a dead-letter queue
/// refuses instead, so that nothing is ever dropped silently.
pub fn place(
    limits: &DepthLimits,
    depth: Depth,
    size_bytes: u64,
    droppable: impl IntoIterator<Item = u64>,
    has_dead_letter: bool,
) -> Placement {
    if limits.fits(depth, size_bytes) {
        return Placement::Queue { drop: 0 };
    }
    match limits.overflow {
        Overflow::Reject => Placement::Refused,
        Overflow::RejectToDlq if has_dead_letter => Placement::DeadLetter,
        Overflow::RejectToDlq => Placement::Refused,
        Overflow::DropHead => {
            // A message that cannot fit even an empty queue must not empty the queue first.
            if !has_dead_letter || !limits.fits(Depth::default(), size_bytes) {
                return Placement::Refused;
            }
            let mut left = depth;
            for (dropped, size) in droppable.into_iter().enumerate() {
                left.messages = left.messages.saturating_sub(1);
                left.bytes = left.bytes.saturating_sub(size);
                if limits.fits(left, size_bytes) {
                    return Placement::Queue { drop: dropped + 1 };
                }
            }
            Placement::Refused
        }
    }
}

/// What a queue's limits did, per reason: sends refused because the queue was full or its rate
/// limit had no token, messages
/// `drop_head` moved out, sends `reject_to_dlq` sent to the dead-letter queue, and messages whose
/// retention ran out that `expired_to_dlq` moved there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusalCounts {
    pub queue_full: u64,
    pub drop_head: u64,
    pub rejected_to_dlq: u64,
    pub expired_to_dlq: u64,
    /// Sends refused by the queue's `rate_limit`.
    #[serde(default)]
    pub rate_limited: u64,
}

/// The reason written as `last_error` on a message moved to the dead-letter queue by a limit
/// rather than by its receives, so that whoever reads the DLQ sees why it is there.
pub const REASON_DROP_HEAD: &str = "drop_head: the queue was full and this was its oldest message";
pub const REASON_REJECT_TO_DLQ: &str = "reject_to_dlq: the queue was full when this message was sent";
pub const REASON_EXPIRED: &str = "expired: the message's retention ran out in its queue";

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_messages: Option<u64>, max_bytes: Option<u64>, overflow: Overflow) -> DepthLimits {
        DepthLimits { max_messages, max_bytes, overflow }
    }

    fn depth(messages: u64, bytes: u64) -> Depth {
        Depth { messages, bytes }
    }

    #[test]
    fn a_message_that_fits_goes_in_whatever_the_policy() {
        for overflow in Overflow::ALL {
            let l = limits(Some(3), Some(100), overflow);
            assert_eq!(place(&l, depth(2, 90), 10, [], false), Placement::Queue { drop: 0 });
        }
    }

    #[test]
    fn a_full_queue_follows_its_policy() {
        let full = depth(3, 30);
        let l = limits(Some(3), None, Overflow::Reject);
        assert_eq!(place(&l, full, 1, [10, 10, 10], true), Placement::Refused);
        let l = limits(Some(3), None, Overflow::RejectToDlq);
        assert_eq!(place(&l, full, 1, [10], true), Placement::DeadLetter);
        assert_eq!(place(&l, full, 1, [10], false), Placement::Refused);
        let l = limits(Some(3), None, Overflow::DropHead);
        assert_eq!(place(&l, full, 1, [10, 10, 10], true), Placement::Queue { drop: 1 });
        assert_eq!(place(&l, full, 1, [10], false), Placement::Refused, "no DLQ: refuse, never drop");
        assert_eq!(place(&l, full, 1, [], true), Placement::Refused, "everything in flight");
    }

    #[test]
    fn drop_head_drops_as_many_as_the_bytes_need() {
        let l = limits(None, Some(100), Overflow::DropHead);
        assert_eq!(place(&l, depth(4, 100), 35, [10, 20, 30, 40], true), Placement::Queue { drop: 3 });
        assert_eq!(place(&l, depth(4, 100), 35, [10, 20], true), Placement::Refused);
        // Larger than the bound: refused without touching the queue.
        assert_eq!(place(&l, depth(1, 10), 101, [10], true), Placement::Refused);
    }

    #[test]
    fn overflow_names_round_trip() {
        for o in Overflow::ALL {
            assert_eq!(Overflow::parse(o.as_str()), Some(o));
            assert_eq!(serde_json::to_string(&o).unwrap(), format!("\"{}\"", o.as_str()));
        }
        assert_eq!(Overflow::parse("drop"), None);
    }
}
