//! Every limit Sluice enforces, named with its unit last.
//!
//! A limit is checked before anything is allocated for the request it guards. The README's
//! "Limits" table is generated from the same numbers by hand; keep them in step.

/// Longest queue name, in characters (SQS uses the same bound).
pub const QUEUE_NAME_LEN_MAX: usize = 80;

/// Default and largest visibility timeout.
pub const VISIBILITY_TIMEOUT_MS_DEFAULT: u64 = 30_000;
pub const VISIBILITY_TIMEOUT_MS_MAX: u64 = 12 * 60 * 60 * 1000;

/// Default retention (4 days, as SQS) and its bounds. Sluice allows up to 365 days.
pub const RETENTION_MS_DEFAULT: u64 = 4 * 24 * 60 * 60 * 1000;
pub const RETENTION_MS_MIN: u64 = 60_000;
pub const RETENTION_MS_MAX: u64 = 365 * 24 * 60 * 60 * 1000;

/// Largest message body (after base64 decoding) plus attributes, and the default per queue.
pub const MESSAGE_BYTES_LIMIT: u64 = 1024 * 1024;
pub const MESSAGE_BYTES_MAX_DEFAULT: u64 = MESSAGE_BYTES_LIMIT;

/// Longest long poll a single receive may wait.
pub const RECEIVE_WAIT_MS_MAX: u64 = 20_000;

/// Most messages in one send, ack, visibility or nack request.
pub const BATCH_ENTRIES_MAX: usize = 1_000;

/// Most messages one receive returns, and the most body bytes it returns in total (a receive
/// always returns at least one message if one is ready, even when that one is larger).
pub const RECEIVE_MESSAGES_MAX: u32 = 1_000;
pub const RECEIVE_BYTES_MAX: u64 = 16 * 1024 * 1024;

/// Most messages one peek returns.
pub const PEEK_MESSAGES_MAX: u32 = 1_000;

/// Largest HTTP request body the native API accepts (a full batch of base64 bodies fits).
pub const REQUEST_BYTES_MAX: usize = 32 * 1024 * 1024;

/// How long a client may take to send a request's head (request line and headers), counted
/// from when its connection opens or its previous answer is sent; an idle keep-alive
/// connection is closed after this long too. Without it a client that never finishes its
/// headers holds a connection (and a file descriptor) forever.
pub const REQUEST_HEAD_READ_MS_MAX: u64 = 30_000;

/// How long a client may take to send a request's body, counted from the end of its head.
/// Past it the answer is `408 request_timeout` and the connection is closed, so a body
/// trickled a byte at a time cannot hold its buffer (up to [`REQUEST_BYTES_MAX`]) forever.
pub const REQUEST_BODY_READ_MS_MAX: u64 = 30_000;

/// Highest priority; priorities run from 0 (default) to this, higher first.
pub const PRIORITY_MAX: u8 = 9;

/// Bounds on max receive count for a dead-letter policy (SQS uses the same).
pub const MAX_RECEIVE_COUNT_MAX: u32 = 1_000;

/// Message attributes: how many per message, and the longest name (in characters).
pub const MESSAGE_ATTRIBUTES_MAX: usize = 10;
pub const ATTRIBUTE_NAME_LEN_MAX: usize = 256;

/// Tags: how many per queue, the longest key and value.
pub const TAGS_MAX: usize = 50;
pub const TAG_KEY_LEN_MAX: usize = 128;
pub const TAG_VALUE_LEN_MAX: usize = 256;

/// Envelope fields (`type`, `source`, `correlation_id`, `group_id`, `dedup_id`) and the error
/// reason recorded by a nack: longest value in bytes.
pub const ENVELOPE_FIELD_LEN_MAX: usize = 256;
pub const ERROR_REASON_LEN_MAX: usize = 4096;

/// Most queues a list call returns per page.
pub const LIST_QUEUES_LIMIT_MAX: u32 = 1_000;
pub const LIST_QUEUES_LIMIT_DEFAULT: u32 = 100;

/// Largest delay a message may carry: anything within the longest retention.
pub const DELAY_MS_MAX: u64 = RETENTION_MS_MAX;

/// The largest `max_depth_messages` and `max_depth_bytes` a queue may set (1 TiB).
pub const QUEUE_DEPTH_MESSAGES_LIMIT: u64 = 1_000_000_000;
pub const QUEUE_DEPTH_BYTES_LIMIT: u64 = 1 << 40;

/// A token bucket's largest `per_second` and `burst` (`rate_limit` on queues, topics, streams
/// and job queues).
pub const RATE_PER_SECOND_MAX: u64 = 10_000_000;
pub const RATE_BURST_MAX: u64 = 10_000_000;

/// Most queues one server holds.
pub const QUEUES_MAX: usize = 100_000;

/// Opaque SQS attributes kept per queue (Policy and friends): how many, and the largest value
/// (an SQS policy is at most 20 KiB).
pub const SQS_ATTRIBUTES_MAX: usize = 16;
pub const SQS_ATTRIBUTE_BYTES_MAX: usize = 20 * 1024;

/// System attributes (such as SQS's `AWSTraceHeader`) per message, and the largest value.
pub const SYSTEM_ATTRIBUTES_MAX: usize = 4;
pub const SYSTEM_ATTRIBUTE_BYTES_MAX: usize = 16 * 1024;

/// FIFO deduplication window: default (5 minutes, as SQS) and the longest allowed.
pub const DEDUP_WINDOW_MS_DEFAULT: u64 = 5 * 60 * 1000;
pub const DEDUP_WINDOW_MS_MAX: u64 = 24 * 60 * 60 * 1000;

/// Suffix that marks a FIFO queue's name (required through the SQS API, optional natively).
pub const FIFO_SUFFIX: &str = ".fifo";

/// SNS subscription filter policies (`sluice_core::filter`), with SNS's own limits: the largest
/// policy text, the most keys (distinct leaf keys, nested ones as `a.b`), the most value
/// combinations (AWS's complexity measure), the magnitude of numbers compared numerically, and
/// the decimal places to which numbers are compared (more are rounded, not refused).
pub const FILTER_POLICY_BYTES_MAX: usize = 256 * 1024;
pub const FILTER_POLICY_KEYS_MAX: usize = 5;
pub const FILTER_POLICY_COMBINATIONS_MAX: u64 = 150;
pub const FILTER_POLICY_NUMBER_MAGNITUDE_MAX: f64 = 1e9;
pub const FILTER_POLICY_NUMBER_DECIMALS_MAX: u32 = 5;

/// Circuit breakers of push endpoints (`sluice_core::breaker`): the shortest and longest
/// sliding window, the largest minimum number of calls, the longest cooldown and probe timeout.
pub const BREAKER_WINDOW_MS_MIN: u64 = 1_000;
pub const BREAKER_WINDOW_MS_MAX: u64 = 60 * 60 * 1000;
pub const BREAKER_CALLS_MIN_MAX: u32 = 100_000;
pub const BREAKER_COOLDOWN_MS_MAX: u64 = 60 * 60 * 1000;
pub const BREAKER_PROBE_TIMEOUT_MS_MAX: u64 = 60 * 60 * 1000;

/// Delivery policies of HTTP/S push subscriptions (`sluice_core::delivery`), with SNS's
/// documented bounds: the most retries, the shortest and longest delay target, the longest the
/// retries may take in all, the longest `Content-Type`, and the largest policy text.
pub const DELIVERY_RETRIES_MAX: u32 = 100;
pub const DELIVERY_DELAY_MS_MIN: u64 = 1_000;
pub const DELIVERY_DELAY_MS_MAX: u64 = 60 * 60 * 1000;
pub const DELIVERY_RETRY_TIME_MS_MAX: u64 = 60 * 60 * 1000;
pub const DELIVERY_CONTENT_TYPE_LEN_MAX: usize = 256;
pub const DELIVERY_POLICY_BYTES_MAX: usize = 64 * 1024;
