//! The embedded store's record and key decoders, fed bytes as they might be found on disk.
//!
//! `codec.rs` is private to `sluice-embedded`, so it is compiled here from its own source file:
//! the functions under test are exactly the ones the store runs at open.

#[allow(dead_code)] // `encode`-side helpers the store uses but the fuzzer needs only in part.
#[path = "../../sluice-embedded/src/codec.rs"]
mod codec;

use std::fmt::Debug;

use serde::Serialize;
use serde::de::DeserializeOwned;
use sluice_core::MessageMeta;
use sluice_core::message::MessageContent;

pub fn check(data: &[u8]) {
    let Some((&kind, raw)) = data.split_first() else { return };
    match kind % 7 {
        0 => round_trip::<codec::QueueRecord>(raw),
        1 => round_trip::<codec::HighWater>(raw),
        2 => round_trip::<codec::DedupRecord>(raw),
        3 => round_trip::<MessageMeta>(raw),
        4 => round_trip::<MessageContent>(raw),
        5 => {
            if let Ok(n) = codec::decode_key(raw) {
                assert_eq!(codec::key(n), raw, "a decoded key encodes back to its bytes");
            }
        }
        _ => {
            if let Ok((queue, key)) = codec::decode_dedup_key(raw) {
                assert_eq!(codec::dedup_key(queue, &key), raw, "a decoded dedup key encodes back to its bytes");
            }
        }
    }
}

/// Whatever decodes must encode and decode again to the same value.
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(raw: &[u8]) {
    if let Ok(value) = codec::decode::<T>(raw) {
        let again: T = codec::decode(&codec::encode(&value)).expect("a re-encoded record decodes");
        assert_eq!(again, value, "a decoded record survives a round trip");
    }
}
