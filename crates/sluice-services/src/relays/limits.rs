//! The limits of outbox relays, named with their unit last. Each is checked before anything is
//! allocated for it: request fields when a relay is created, row fields in the SQL that reads
//! them (a column longer than its limit is cut by the database, then refused here).

/// Most relays one server (or one PostgreSQL deployment) holds. Every node lists them all once
/// per `RELAY_SCAN_MS`, so this bounds that work.
pub const RELAYS_MAX: usize = 100;

/// Longest relay name: letters, digits, `-` and `_`.
pub const RELAY_NAME_LEN_MAX: usize = 80;

/// Longest source URL, in bytes.
pub const RELAY_SOURCE_LEN_MAX: usize = 2_048;

/// Longest table or column name, in bytes (PostgreSQL's 63; MySQL allows 64). A table may be
/// qualified once (`schema.table`), each part within this.
pub const RELAY_IDENTIFIER_LEN_MAX: usize = 63;

/// `poll_ms`: how long a relay waits after a poll that found fewer than `batch_max` rows.
pub const RELAY_POLL_MS_MIN: u64 = 10;
pub const RELAY_POLL_MS_MAX: u64 = 60_000;
pub const RELAY_POLL_MS_DEFAULT: u64 = 200;

/// `batch_max`: most rows one poll reads, publishes and marks.
pub const RELAY_BATCH_MAX_MAX: u32 = 1_000;
pub const RELAY_BATCH_MAX_DEFAULT: u32 = 100;

/// Most bytes of payload one poll holds in memory; a poll stops reading rows past it (always
/// taking at least one row).
pub const RELAY_BATCH_BYTES_MAX: u64 = 16 * 1024 * 1024;

/// Largest payload a relay reads: the largest message a queue takes. A larger payload is not
/// read (the SQL returns its length only); its row goes to the dead-letter queue.
pub const RELAY_PAYLOAD_BYTES_MAX: u64 = sluice_core::limits::MESSAGE_BYTES_LIMIT;

/// Longest row id, aggregate id, aggregate type, event type and routing value, in bytes: a
/// FIFO group id and dedup id are at most 128 characters.
pub const RELAY_ROW_FIELD_BYTES_MAX: usize = 128;

/// Largest `headers` column value (a JSON object of strings), in bytes.
pub const RELAY_HEADERS_BYTES_MAX: usize = 16 * 1024;

/// Message attributes every relayed message carries (`outbox_id`, `outbox_type`,
/// `aggregate_type`, `aggregate_id`); the `headers` column may add the rest of a message's 10.
pub const RELAY_RESERVED_ATTRIBUTES: usize = 4;

/// How long a node holds a relay's lease without renewing it. A node that dies is replaced by
/// another within this time (plus one scan).
pub const RELAY_LEASE_MS: u64 = 10_000;

/// How often the node holding a lease renews it (with the relay's state) when nothing else
/// made it write.
pub const RELAY_LEASE_RENEW_MS: u64 = 3_000;

/// How often every node reads the relay configurations, to start, stop and take over relays.
pub const RELAY_SCAN_MS: u64 = 1_000;

/// The longest pause after a failed poll (the pauses double from `poll_ms`).
pub const RELAY_BACKOFF_MS_MAX: u64 = 10_000;

/// A row the target refuses (missing target, too large, invalid) goes to the dead-letter queue
/// once it was refused at least this many times over at least this long, so that a target
/// created a moment after the relay does not send the first rows to the dead-letter queue.
pub const RELAY_REFUSALS_MAX: u32 = 3;
pub const RELAY_REFUSAL_GRACE_MS: u64 = 10_000;

/// How long a relay waits for its source to connect, and for one query to answer (real time:
/// a caller's patience, not a decision).
pub const RELAY_CONNECT_MS: u64 = 5_000;
pub const RELAY_QUERY_MS: u64 = 30_000;

/// MySQL/MariaDB: how long the relay's locking read waits for a transaction that has inserted
/// rows and not committed yet, in seconds (`innodb_lock_wait_timeout`), before trying again.
pub const RELAY_MYSQL_LOCK_WAIT_S: u64 = 2;

/// The window over which `rows_per_second` is measured.
pub const RELAY_RATE_WINDOW_MS: u64 = 10_000;

/// Longest error text kept in a relay's state.
pub const RELAY_ERROR_LEN_MAX: usize = 1_024;
