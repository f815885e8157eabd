//! Fuzz entry points: one function per parser that hostile bytes reach, each of which must
//! return normally for every input. A panic, an abort or a stack overflow is the bug.
//!
//! The same functions are called by the cargo-fuzz targets in `fuzz/` (libFuzzer, coverage
//! guided, needs `RUSTC_BOOTSTRAP=1` on stable) and by this crate's tests, which replay every
//! input kept under `fuzz/regressions/<target>/` and `fuzz/seeds/<target>/` and run bounded,
//! seeded random mutations of them on stable Rust.
//!
//! - [`native_api`] and [`sqs_api`]: the input is a raw HTTP/1.1 request (request line,
//!   headers, body) sent through the real router, extractors, conversions and SQS decoding,
//!   over a store that validates arguments as the core does and keeps nothing ([`store`]).
//! - [`receipt`]: `Receipt::decode`, and that what it accepts re-encodes to the same text.
//! - [`record`]: the embedded store's on-disk record and key decoders, and that what they
//!   accept survives an encode/decode round trip.

mod http;
mod records;
pub mod store;

use sluice_core::Receipt;

/// A fuzz target: returns normally for every input, or has found a bug.
pub type Target = fn(&[u8]);

/// Every target by name, as the folders under `fuzz/` and the binaries in `fuzz/fuzz_targets/`
/// are named.
pub const TARGETS: &[(&str, Target)] =
    &[("native_api", native_api), ("sqs_api", sqs_api), ("receipt", receipt), ("record", record)];

/// A raw HTTP request to the native API. Besides going through the router, the body is
/// deserialised as every request type of the native API, whatever the path says.
pub fn native_api(data: &[u8]) {
    if let Some(body) = http::body_of(data) {
        sluice_api_types(body);
    }
    http::serve(data, http::Keys::None);
}

/// A raw HTTP request in either AWS protocol. The first byte chooses whether the server
/// verifies SigV4 signatures (then the `Authorization` header is parsed and checked before
/// the body is decoded) or accepts anything.
pub fn sqs_api(data: &[u8]) {
    let Some((&first, request)) = data.split_first() else { return };
    let keys = if first & 1 == 1 { http::Keys::Verify } else { http::Keys::None };
    http::serve(request, keys);
}

/// A receipt handle as clients send it back.
pub fn receipt(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(receipt) = Receipt::decode(&text) {
        assert_eq!(receipt.encode(), text, "an accepted receipt re-encodes to the same text");
    }
}

/// A value or key as read back from disk. The first byte chooses the decoder.
pub fn record(data: &[u8]) {
    records::check(data);
}

fn sluice_api_types(body: &[u8]) {
    use sluice_api as api;
    let _ = serde_json::from_slice::<api::CreateQueueRequest>(body);
    let _ = serde_json::from_slice::<api::UpdateQueueRequest>(body);
    let _ = serde_json::from_slice::<api::SendRequest>(body);
    let _ = serde_json::from_slice::<api::ReceiveRequest>(body);
    let _ = serde_json::from_slice::<api::AckRequest>(body);
    let _ = serde_json::from_slice::<api::VisibilityRequest>(body);
    let _ = serde_json::from_slice::<api::NackRequest>(body);
    let _ = serde_json::from_slice::<api::RedriveRequest>(body);
}
