//! Sluice's semantics as plain data and pure functions.
//!
//! Nothing in this crate performs I/O, reads the clock, sleeps or spawns: every operation that
//! depends on time takes `now_ms` (milliseconds since the Unix epoch) as an argument, and every
//! random choice takes its randomness as an argument. That keeps the rules testable in
//! microseconds and replayable from a seed, and lets every storage backend share them.

pub mod attributes;
pub mod backoff;
pub mod breaker;
pub mod broker;
pub mod delivery;
pub mod events;
pub mod filter;
pub mod jobs;
pub mod limits;
pub mod message;
pub mod name;
pub mod overflow;
pub mod queue;
pub mod rate;
pub mod receipt;
pub mod saga;
pub mod stream;
pub mod validation;

pub use attributes::{DeadLetter, QueueAttributes, QueueAttributesPatch};
pub use broker::{Admission, Broker, BrokerError, Effect, EntryError, QueueId, QueueStats, Sent};
pub use message::{AttributeValue, MessageEnvelope, MessageId, MessageMeta, MessageState, NewMessage};
pub use receipt::Receipt;
pub use validation::ValidationError;

/// Milliseconds since the Unix epoch. Every time in Sluice's state machines is one of these.
pub type TimeMs = u64;
