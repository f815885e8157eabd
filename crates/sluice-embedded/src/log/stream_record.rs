//! A stream's settings record (kind `stream`), by format. Format 1 was postcard, whose layout
//! follows the fields' order and types, so a new setting would need a new format each time;
//! since format 2 ([`STREAM_RECORD_VERSION`]) the record is JSON and a setting added with a
//! default (`schema_validation` was the first) needs none. Format 1 records are still read,
//! through the frozen types in [`v1`], and rewritten as format 2 the next time the stream
//! changes.

use serde::{Deserialize, Serialize};
use sluice_core::TimeMs;
use sluice_core::stream::StreamConfig;

use crate::codec;

/// The format of stream records written now.
pub const STREAM_RECORD_VERSION: u8 = 2;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamRecord {
    pub id: u64,
    pub config: StreamConfig,
    pub created_at: TimeMs,
}

pub fn encode(record: &StreamRecord) -> Vec<u8> {
    let mut out = vec![STREAM_RECORD_VERSION];
    out.extend(serde_json::to_vec(record).expect("a stream record encodes"));
    out
}

/// A stream record of format 2 (settings added since take their defaults) or 1.
pub fn decode(value: &[u8]) -> Result<StreamRecord, String> {
    match value.split_first() {
        Some((&STREAM_RECORD_VERSION, rest)) => {
            serde_json::from_slice(rest).map_err(|e| format!("undecodable stream record: {e}"))
        }
        Some((&codec::RECORD_VERSION, _)) => codec::decode::<v1::StreamRecord>(value).map(StreamRecord::from),
        Some((v, _)) => Err(format!("stream record format {v}, this version reads 1 and {STREAM_RECORD_VERSION}")),
        None => Err("empty record".into()),
    }
}

/// Format 1, frozen as it was written: these types must never change.
pub mod v1 {
    use serde::{Deserialize, Serialize};
    use sluice_core::TimeMs;
    use sluice_core::stream::StreamConfig;

    #[derive(Debug, Serialize, Deserialize)]
    pub struct StreamRecord {
        pub id: u64,
        pub config: StreamConfigV1,
        pub created_at: TimeMs,
    }

    #[derive(Debug, Serialize, Deserialize)]
    pub struct StreamConfigV1 {
        pub partitions: u32,
        pub retention_ms: u64,
        pub retention_bytes: Option<u64>,
        pub record_bytes_max: u64,
        pub segment_bytes: u64,
    }

    impl From<StreamRecord> for super::StreamRecord {
        fn from(r: StreamRecord) -> super::StreamRecord {
            let c = r.config;
            let config = StreamConfig {
                partitions: c.partitions,
                retention_ms: c.retention_ms,
                retention_bytes: c.retention_bytes,
                record_bytes_max: c.record_bytes_max,
                segment_bytes: c.segment_bytes,
                ..StreamConfig::default()
            };
            super::StreamRecord { id: r.id, config, created_at: r.created_at }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(schema_validation: bool) -> StreamRecord {
        StreamRecord {
            id: 7,
            config: StreamConfig {
                partitions: 4,
                retention_ms: 604_800_000,
                retention_bytes: None,
                record_bytes_max: 1_048_576,
                segment_bytes: 67_108_864,
                schema_validation,
                rate_limit: None,
                max_depth_messages: None,
                max_depth_bytes: None,
                overflow: sluice_core::overflow::Overflow::Reject,
            },
            created_at: 1_700_000_000_000,
        }
    }

    /// These bytes were written by format 1 (postcard) and must always decode, with every
    /// setting added since at its default.
    #[test]
    fn format_1_fixture() {
        let bytes: [u8; 22] =
            [1, 7, 4, 128, 136, 178, 160, 2, 0, 128, 128, 64, 128, 128, 128, 32, 128, 208, 149, 255, 188, 49];
        assert_eq!(decode(&bytes).unwrap(), record(false));
        let frozen = v1::StreamRecord {
            id: 7,
            config: v1::StreamConfigV1 {
                partitions: 4,
                retention_ms: 604_800_000,
                retention_bytes: None,
                record_bytes_max: 1_048_576,
                segment_bytes: 67_108_864,
            },
            created_at: 1_700_000_000_000,
        };
        assert_eq!(codec::encode(&frozen), bytes, "the frozen types still write what format 1 wrote");
    }

    /// Format 2 is JSON: read back whole; a setting it lacks takes its default; another
    /// format byte is refused.
    #[test]
    fn format_2_records() {
        let json = br#"{"id":7,"config":{"partitions":4,"retention_ms":604800000,"retention_bytes":null,"record_bytes_max":1048576,"segment_bytes":67108864,"schema_validation":true},"created_at":1700000000000}"#;
        let mut bytes = vec![STREAM_RECORD_VERSION];
        bytes.extend(json);
        assert_eq!(decode(&bytes).unwrap(), record(true));
        assert_eq!(encode(&record(true)), bytes, "format 2 writes what it wrote when the fixture was taken");
        let older = String::from_utf8(bytes[1..].to_vec()).unwrap().replace(",\"schema_validation\":true", "");
        let mut older_bytes = vec![STREAM_RECORD_VERSION];
        older_bytes.extend(older.as_bytes());
        assert_eq!(decode(&older_bytes).unwrap(), record(false));
        assert!(decode(&[3, b'{', b'}']).unwrap_err().contains("format 3"));
        // A rate limit (added after the fixture) is written only when set, and read back.
        let mut limited = record(true);
        limited.config.rate_limit = Some(sluice_core::rate::RateLimit { per_second: 5, burst: 9 });
        let written = encode(&limited);
        assert!(String::from_utf8_lossy(&written).contains(r#""rate_limit":{"per_second":5,"burst":9}"#));
        assert_eq!(decode(&written).unwrap(), limited);
        // So are depth limits.
        let mut bounded = record(false);
        bounded.config.max_depth_messages = Some(1_000);
        let written = encode(&bounded);
        assert!(String::from_utf8_lossy(&written).contains(r#""max_depth_messages":1000"#));
        assert!(!String::from_utf8_lossy(&written).contains("overflow"), "the default policy is left out");
        assert_eq!(decode(&written).unwrap(), bounded);
        assert!(decode(&[]).is_err());
    }
}
