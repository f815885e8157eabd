//! The embedded store's record and key decoders, fed bytes as they might be found on disk:
//! `sluice_embedded::record_format`, the functions the store runs at open.

use std::fmt::Debug;

use serde::Serialize;
use serde::de::DeserializeOwned;
use sluice_core::MessageMeta;
use sluice_core::message::MessageContent;
use sluice_embedded::record_format;

pub fn check(data: &[u8]) {
    let Some((&kind, raw)) = data.split_first() else { return };
    match kind % 7 {
        0 => queue_round_trip(raw),
        1 => round_trip::<record_format::HighWater>(raw),
        2 => round_trip::<record_format::DedupRecord>(raw),
        3 => round_trip::<MessageMeta>(raw),
        4 => round_trip::<MessageContent>(raw),
        5 => {
            if let Ok(n) = record_format::decode_key(raw) {
                assert_eq!(record_format::key(n), raw, "a decoded key encodes back to its bytes");
            }
        }
        _ => {
            if let Ok((queue, key)) = record_format::decode_dedup_key(raw) {
                assert_eq!(record_format::dedup_key(queue, &key), raw, "a decoded dedup key encodes back to its bytes");
            }
        }
    }
}

/// Queue records have their own codec (format 2 is JSON, format 1 postcard is still read):
/// whatever decodes, in either format, must encode as format 2 and decode again to the same value.
fn queue_round_trip(raw: &[u8]) {
    if let Ok(value) = record_format::decode_queue(raw) {
        let bytes = record_format::encode_queue(&value);
        assert_eq!(bytes[0], record_format::QUEUE_RECORD_VERSION, "queue records are written in the current format");
        let again = record_format::decode_queue(&bytes).expect("a re-encoded queue record decodes");
        assert_eq!(again, value, "a decoded queue record survives a round trip");
    }
}

/// Whatever decodes must encode and decode again to the same value.
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(raw: &[u8]) {
    if let Ok(value) = record_format::decode::<T>(raw) {
        let again: T = record_format::decode(&record_format::encode(&value)).expect("a re-encoded record decodes");
        assert_eq!(again, value, "a decoded record survives a round trip");
    }
}
