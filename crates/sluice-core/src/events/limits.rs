//! Every limit of the event store, named with its unit last. Each is checked before anything is
//! allocated for the request it guards; the README's "Event store" section lists them.

/// Events in one append (all or nothing).
pub const EVENTS_PER_APPEND_MAX: usize = 1_000;
/// One event: its data, metadata, type, id and correlation/causation ids together, in bytes.
pub const EVENT_BYTES_MAX: usize = 1024 * 1024;
/// One append, all its events together, in bytes.
pub const APPEND_BYTES_MAX: usize = 8 * 1024 * 1024;
/// A stream id: 1 to this many bytes of ASCII letters, digits and `-_.:@`, not starting with `$`.
pub const EVENT_STREAM_ID_LEN_MAX: usize = 256;
/// An event id (any visible ASCII; a UUID is the usual choice), in bytes.
pub const EVENT_ID_LEN_MAX: usize = 128;
/// An event type (visible ASCII), in bytes.
pub const EVENT_TYPE_LEN_MAX: usize = 256;
/// A correlation or causation id (visible ASCII), in bytes.
pub const EVENT_LINK_ID_LEN_MAX: usize = 256;
/// Events one read (of a stream, of `$all`, or a subscription's fetch) answers at most, and by
/// default.
pub const EVENT_READ_MAX: u32 = 1_000;
pub const EVENT_READ_DEFAULT: u32 = 100;
/// Longest long poll of `$all` and of a subscription's fetch.
pub const EVENT_WAIT_MS_MAX: u64 = 20_000;
/// Events a filtered read of `$all` passes over at most before it answers (with fewer events,
/// or none, and the position to go on from), so that a rare type cannot make one read scan
/// the whole log.
pub const EVENT_SCAN_MAX: u64 = 10_000;
/// Types one filter names at most.
pub const EVENT_FILTER_TYPES_MAX: usize = 32;
/// A subscription's name: 1 to this many ASCII letters, digits, `-`, `_` and `.`.
pub const EVENT_SUBSCRIPTION_NAME_LEN_MAX: usize = 80;
/// Subscriptions one server keeps.
pub const EVENT_SUBSCRIPTIONS_MAX: usize = 1_000;
/// A snapshot's data, as JSON text, in bytes.
pub const EVENT_SNAPSHOT_BYTES_MAX: usize = 512 * 1024;
