//! The MD5 digests SQS returns with every send and receive, bit-exact with AWS: SDKs (Java,
//! .NET, PHP, Go) recompute them and refuse a mismatch.
//!
//! The attribute digest is AWS's: for each attribute in byte order of its name, the name, the
//! data type and the value, each preceded by its length as a big-endian `u32`, with a one-byte
//! marker before the value (1 = text, 2 = bytes). See `shared/reference/sqs-sns-wire.md` §3.1.

use std::collections::BTreeMap;

use md5::{Digest, Md5};
use sluice_core::AttributeValue;
use sluice_core::message::AttributeData;

const TEXT_MARKER: u8 = 1;
const BYTES_MARKER: u8 = 2;

/// `MD5OfMessageBody` / `MD5OfBody`: lowercase hex of the body's bytes.
pub fn of_body(body: &[u8]) -> String {
    hex(&Md5::digest(body))
}

/// `MD5OfMessageAttributes` (or `MD5OfMessageSystemAttributes`) over exactly these
/// attributes; `None` when there are none, because AWS then omits the field rather than send
/// the digest of nothing. A `BTreeMap` of `String` keys iterates in byte order, which is the
/// order the digest needs.
pub fn of_attributes(attributes: &BTreeMap<String, AttributeValue>) -> Option<String> {
    if attributes.is_empty() {
        return None;
    }
    let mut md5 = Md5::new();
    for (name, value) in attributes {
        put_prefixed(&mut md5, name.as_bytes());
        put_prefixed(&mut md5, value.data_type.as_bytes());
        match &value.value {
            AttributeData::Text(text) => {
                md5.update([TEXT_MARKER]);
                put_prefixed(&mut md5, text.as_bytes());
            }
            AttributeData::Bytes(bytes) => {
                md5.update([BYTES_MARKER]);
                put_prefixed(&mut md5, bytes);
            }
        }
    }
    Some(hex(&md5.finalize()))
}

fn put_prefixed(md5: &mut Md5, bytes: &[u8]) {
    // Attribute names, types and values are bounded far below 4 GiB by the request size.
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    md5.update(len.to_be_bytes());
    md5.update(bytes);
}

fn hex(digest: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(digest.len() * 2);
    for b in digest {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(name: &str, data_type: &str, value: AttributeData) -> BTreeMap<String, AttributeValue> {
        BTreeMap::from([(name.to_string(), AttributeValue { data_type: data_type.to_string(), value })])
    }

    /// The vectors are real AWS answers, recorded by LocalStack's suite (reference §3.1).
    #[test]
    fn aws_vectors() {
        assert_eq!(of_body(b"msg"), "6e2baaf3b97dbeef01c0043275f9a0e7");
        assert_eq!(
            of_attributes(&one("Foo", "String", AttributeData::Text("Bar".into()))).as_deref(),
            Some("ae7155c6026991b6d54b11589678bf9c")
        );
        assert_eq!(
            of_attributes(&one("attr1", "Number", AttributeData::Text("99.12".into()))).as_deref(),
            Some("d302007e9aa062660afc85fd0a482472")
        );
        let binary = b"traceparent\x1e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01".to_vec();
        assert_eq!(
            of_attributes(&one("attr1", "Binary", AttributeData::Bytes(binary))).as_deref(),
            Some("8cbe4db156db8a94db8b801b7addb984")
        );
    }

    /// Three attributes, digested over all of them and over subsets (recorded receive
    /// answers of `test_receive_message_message_attribute_names_filters`).
    #[test]
    fn subsets_digest_like_aws() {
        let text = |v: &str| AttributeValue { data_type: "String".into(), value: AttributeData::Text(v.into()) };
        let all = BTreeMap::from([
            ("Help.Me".to_string(), text("Me")),
            ("Hello".to_string(), text("There")),
            ("General".to_string(), text("Kenobi")),
        ]);
        assert_eq!(of_attributes(&all).as_deref(), Some("4c360f3fdafd970e05fae2f149d997f5"));
        let pick = |names: &[&str]| -> BTreeMap<String, AttributeValue> {
            all.iter().filter(|(k, _)| names.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        assert_eq!(of_attributes(&pick(&["Hello", "General"])).as_deref(), Some("fca026605781cb4126a1e9044df24232"));
        assert_eq!(of_attributes(&pick(&["Hello"])).as_deref(), Some("a311262e065454b75da111d535b8dacd"));
        assert_eq!(of_attributes(&pick(&["Hello", "Help.Me"])).as_deref(), Some("83fee93c1bcd8b9a5a923ffacdc636c7"));
    }

    #[test]
    fn nothing_to_digest_is_no_digest() {
        assert_eq!(of_attributes(&BTreeMap::new()), None);
    }
}
