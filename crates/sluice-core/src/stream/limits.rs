//! Every limit of streams, named with its unit last (the README's "Streams" table lists them).

/// Partitions of a stream: 1 (default) to this many.
pub const STREAM_PARTITIONS_MAX: u32 = 1_024;
/// Longest stream, group or member name, in bytes.
pub const STREAM_NAME_LEN_MAX: usize = 80;
pub const GROUP_NAME_LEN_MAX: usize = 80;
pub const MEMBER_ID_LEN_MAX: usize = 255;
/// Streams one server holds.
pub const STREAMS_MAX: usize = 10_000;
/// Groups per stream.
pub const GROUPS_PER_STREAM_MAX: usize = 100;
/// Live members per group.
pub const GROUP_MEMBERS_MAX: usize = 1_000;

/// Retention by age: default (7 days, as Kafka) and bounds.
pub const STREAM_RETENTION_MS_DEFAULT: u64 = 7 * 24 * 60 * 60 * 1000;
pub const STREAM_RETENTION_MS_MIN: u64 = 1_000;
pub const STREAM_RETENTION_MS_MAX: u64 = 10 * 365 * 24 * 60 * 60 * 1000;
/// Retention by size, per partition (as Kafka's `retention.bytes`): none by default; at least
/// one segment.
pub const STREAM_RETENTION_BYTES_MIN: u64 = 4 * 1024;
/// What a stream's `max_depth_bytes` must hold beyond `record_bytes_max`: the framing the
/// embedded log writes around one record (a batch header and the record's fields' lengths).
pub const STREAM_DEPTH_BYTES_SLACK: u64 = 4 * 1024;

/// Largest record (key, body, headers and envelope fields), and the default per stream.
pub const RECORD_BYTES_LIMIT: u64 = 1024 * 1024;
pub const RECORD_BYTES_MAX_DEFAULT: u64 = RECORD_BYTES_LIMIT;
/// Longest key, in bytes.
pub const RECORD_KEY_BYTES_MAX: usize = 4 * 1024;
/// Headers per record, longest header name.
pub const RECORD_HEADERS_MAX: usize = 64;
pub const RECORD_HEADER_NAME_LEN_MAX: usize = 256;
/// Longest `type`, `correlation_id` and `dedup_id`, in bytes.
pub const RECORD_FIELD_LEN_MAX: usize = 256;

/// Segment size (a segment is rolled once it holds this much): default (64 MiB) and bounds.
pub const SEGMENT_BYTES_DEFAULT: u64 = 64 * 1024 * 1024;
pub const SEGMENT_BYTES_MIN: u64 = 4 * 1024;
pub const SEGMENT_BYTES_MAX: u64 = 1024 * 1024 * 1024;

/// Records per append call (as every batch of the native API).
pub const APPEND_RECORDS_MAX: usize = 1_000;
/// How long a `dedup_id` is remembered: a retried append within it gets the original offset.
pub const STREAM_DEDUP_WINDOW_MS: u64 = 5 * 60 * 1000;
/// Dedup ids remembered per stream at once by the embedded store, which keeps them all in
/// memory; an append with a new id past it is refused. (PostgreSQL keeps them on disk and does
/// not count them: see `sluice-postgres/src/streams/append.rs`.)
pub const STREAM_DEDUP_ENTRIES_MAX: usize = 1_000_000;

/// Records and body bytes one read or fetch returns (at least one record if one is there).
pub const READ_RECORDS_MAX: u32 = 1_000;
pub const READ_RECORDS_DEFAULT: u32 = 100;
pub const READ_BYTES_MAX: u64 = 16 * 1024 * 1024;
/// Longest long poll of a read or fetch.
pub const READ_WAIT_MS_MAX: u64 = 20_000;

/// Group sessions: a member that does not fetch for this long loses its partitions.
pub const SESSION_TIMEOUT_MS_MIN: u64 = 1_000;
pub const SESSION_TIMEOUT_MS_MAX: u64 = 5 * 60 * 1000;
pub const SESSION_TIMEOUT_MS_DEFAULT: u64 = 10_000;

/// Shared mode: how long a delivered record is held for its member (default 30 s, as queues).
pub const ACK_TIMEOUT_MS_MIN: u64 = 100;
pub const ACK_TIMEOUT_MS_MAX: u64 = 12 * 60 * 60 * 1000;
pub const ACK_TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// Shared mode: failed deliveries (ack timeouts, nacks) before a record is dead-lettered
/// (Kafka share groups' default delivery count limit is 5).
pub const MAX_DELIVERIES_DEFAULT: u32 = 5;
pub const MAX_DELIVERIES_MAX: u32 = 1_000;
/// Shared mode: records of one partition handed out or waiting behind an earlier record of their
/// key at once (Kafka share groups' `record.lock.partition.limit` is 200 by default). It bounds
/// the memory and the stored state of a shared group whatever the stream's length.
pub const SHARED_WINDOW_RECORDS_MAX: usize = 2_000;
/// Longest error text a nack or release records.
pub const RECORD_ERROR_LEN_MAX: usize = 4_096;
