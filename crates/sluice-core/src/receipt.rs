//! Receipts: the handle a consumer gets with each delivery and returns to ack, extend or nack.
//!
//! A receipt names the queue incarnation, the message and the delivery epoch. The broker accepts
//! it only while that exact delivery is current, so a stale receipt can never touch a newer
//! delivery of the same message. Layout (version 1), base64url without padding:
//! `[version: u8 = 1][queue: u64 BE][seq: u64 BE][epoch: u32 BE]` — 21 bytes, 28 characters.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

const RECEIPT_VERSION: u8 = 1;
const RECEIPT_BYTES: usize = 21;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Receipt {
    pub queue: u64,
    pub seq: u64,
    pub epoch: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a Sluice receipt: {0}")]
pub struct ReceiptParseError(pub &'static str);

impl Receipt {
    pub fn encode(&self) -> String {
        let mut raw = [0u8; RECEIPT_BYTES];
        raw[0] = RECEIPT_VERSION;
        raw[1..9].copy_from_slice(&self.queue.to_be_bytes());
        raw[9..17].copy_from_slice(&self.seq.to_be_bytes());
        raw[17..21].copy_from_slice(&self.epoch.to_be_bytes());
        URL_SAFE_NO_PAD.encode(raw)
    }

    pub fn decode(text: &str) -> Result<Receipt, ReceiptParseError> {
        // Checked before decoding so that a huge string costs nothing.
        if text.len() != 28 {
            return Err(ReceiptParseError("wrong length"));
        }
        let raw = URL_SAFE_NO_PAD.decode(text).map_err(|_| ReceiptParseError("not base64url"))?;
        if raw.len() != RECEIPT_BYTES {
            return Err(ReceiptParseError("wrong length"));
        }
        if raw[0] != RECEIPT_VERSION {
            return Err(ReceiptParseError("unknown version"));
        }
        let u64_at = |i: usize| u64::from_be_bytes(raw[i..i + 8].try_into().expect("8 bytes"));
        Ok(Receipt {
            queue: u64_at(1),
            seq: u64_at(9),
            epoch: u32::from_be_bytes(raw[17..21].try_into().expect("4 bytes")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let r = Receipt { queue: 7, seq: u64::MAX - 3, epoch: 42 };
        let text = r.encode();
        assert_eq!(text.len(), 28);
        assert_eq!(Receipt::decode(&text).unwrap(), r);
    }

    #[test]
    fn garbage_is_rejected() {
        assert!(Receipt::decode("").is_err());
        assert!(Receipt::decode("not-a-receipt").is_err());
        assert!(Receipt::decode(&"!".repeat(28)).is_err());
        let mut text = Receipt { queue: 1, seq: 2, epoch: 3 }.encode();
        text.replace_range(0..2, "Ag"); // version 2
        assert!(Receipt::decode(&text).is_err());
    }
}
