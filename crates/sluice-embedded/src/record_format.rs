//! The on-disk record format, public for fuzzers: the record types and the value and key
//! codecs that the store runs on what it reads back from disk at open (`codec.rs` owns them).
//! `sluice-fuzz` feeds them hostile bytes; nothing else should use them, as the format is the
//! store's to change (with a new format byte) and the store's API is the `Store` trait.

pub use crate::codec::{
    DedupRecord, HighWater, QUEUE_RECORD_VERSION, QueueRecord, RECORD_VERSION, decode, decode_dedup_key, decode_key,
    decode_queue, dedup_key, encode, encode_queue, key,
};
