//! The limits of topics, subscriptions and publishes, named with their unit last. Most are
//! SNS's, so that an application tested against Sluice does not break on AWS.

/// Longest topic name, `.fifo` included (SNS).
pub const TOPIC_NAME_LEN_MAX: usize = 256;

/// Most subscriptions one topic holds. Every publish is matched against all of them, so this
/// bounds the work of one publish (SNS allows millions; Sluice keeps a topic's subscriptions in
/// memory on every node).
pub const SUBSCRIPTIONS_PER_TOPIC_MAX: usize = 10_000;

/// Most subscriptions of one topic that carry a filter policy (SNS).
pub const FILTER_POLICIES_PER_TOPIC_MAX: usize = 200;

/// Largest published message: the message plus its attributes' names, types and values (SNS).
pub const PUBLISH_BYTES_MAX: usize = 262_144;

/// Longest `Subject`, in characters (SNS: "less than 100").
pub const SUBJECT_LEN_MAX: usize = 99;

/// Most message attributes on one publish (SNS and SQS agree).
pub const PUBLISH_ATTRIBUTES_MAX: usize = 10;

/// Entries in one SNS `PublishBatch`, the longest entry id, and the most messages one native
/// publish request carries.
pub const SNS_BATCH_ENTRIES_MAX: usize = 10;
pub const SNS_BATCH_ENTRY_ID_LEN_MAX: usize = 80;
pub const PUBLISH_BATCH_ENTRIES_MAX: usize = 100;

/// `MessageGroupId` and `MessageDeduplicationId`, in characters (SNS).
pub const FIFO_ID_LEN_MAX: usize = 128;

/// Longest value of one topic attribute (a `Policy` is at most 30 KiB in SNS), and the longest
/// subscription endpoint.
pub const TOPIC_ATTRIBUTE_BYTES_MAX: usize = 30 * 1024;
pub const ENDPOINT_LEN_MAX: usize = 2_048;

/// How long a node serves a topic's subscriptions from memory before reading them again, so
/// that a subscription made through another node (PostgreSQL) receives publishes made here at
/// most this long after it was made. Changes made through this node apply at once.
pub const SUBSCRIPTION_CACHE_MS: u64 = 1_000;

/// Topics kept in that cache before the expired ones are dropped.
pub const SUBSCRIPTION_CACHE_TOPICS_MAX: usize = 4_096;

/// How many times a read-modify-write of a topic or subscription is tried when another writer
/// changed it in between, before the call fails.
pub const RECORD_UPDATE_ATTEMPTS_MAX: usize = 16;

/// Most topics or subscriptions one list call returns.
pub const LIST_LIMIT_MAX: usize = 1_000;
