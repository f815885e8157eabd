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
//! - [`filter_policy`]: an SNS filter policy parsed and matched against a message's attributes
//!   and body.
//! - [`authorization`]: the `Authorization` header's parsers (bearer tokens, SigV4) and scope
//!   texts, then the raw request through a router that asks for a key.

mod http;
mod records;
pub mod store;

use std::collections::BTreeMap;

use sluice_core::Receipt;
use sluice_core::filter::{FilterPolicy, FilterScope, MessageView, SnsCall};
use sluice_core::message::{AttributeData, AttributeValue};

/// A fuzz target: returns normally for every input, or has found a bug.
pub type Target = fn(&[u8]);

/// Every target by name, as the folders under `fuzz/` and the binaries in `fuzz/fuzz_targets/`
/// are named.
pub const TARGETS: &[(&str, Target)] = &[
    ("native_api", native_api),
    ("sqs_api", sqs_api),
    ("receipt", receipt),
    ("record", record),
    ("filter_policy", filter_policy),
    ("authorization", authorization),
];

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

/// An SNS filter policy and a message to match. The first byte chooses the scope (odd: the
/// body); the rest is NUL-separated: the policy text, the body, then one attribute per part as
/// `name<TAB>data type<TAB>value` (a Binary attribute's value is its bytes). Besides not
/// panicking: a policy the attributes scope accepts, the body scope accepts too; over the
/// attributes scope the body changes nothing; a refusal reads as SNS's message.
pub fn filter_policy(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else { return };
    let mut parts = rest.split(|&b| b == 0);
    let policy_text = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let body = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let mut attributes = BTreeMap::new();
    for part in parts {
        let mut fields = part.splitn(3, |&b| b == b'\t');
        let (Some(name), Some(data_type), Some(value)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let data_type = String::from_utf8_lossy(data_type).into_owned();
        let value = if data_type.starts_with("Binary") {
            AttributeData::Bytes(value.to_vec())
        } else {
            AttributeData::Text(String::from_utf8_lossy(value).into_owned())
        };
        attributes.insert(String::from_utf8_lossy(name).into_owned(), AttributeValue { data_type, value });
    }
    let scope = if first & 1 == 1 { FilterScope::MessageBody } else { FilterScope::MessageAttributes };
    match FilterPolicy::parse(&policy_text, scope) {
        Ok(policy) => {
            let matched = policy.matches(&MessageView::new(&attributes, &body));
            if scope == FilterScope::MessageAttributes {
                assert_eq!(
                    matched,
                    policy.matches(&MessageView::new(&attributes, "")),
                    "the attributes scope ignores the body"
                );
                assert!(
                    FilterPolicy::parse(&policy_text, FilterScope::MessageBody).is_ok(),
                    "a policy valid over attributes is valid over the body"
                );
            }
        }
        Err(e) => {
            assert!(!e.to_string().is_empty(), "a refusal says why");
            assert!(e.sns_message(SnsCall::Subscribe).starts_with("Invalid parameter: "));
        }
    }
}

/// Hostile `Authorization` headers and scopes. Every line of the input is tried as a SigV4
/// header, an API key token and a scope (a scope that parses prints in a form that parses back
/// to it); then the whole input goes through a router with authentication on, as a raw request.
pub fn authorization(data: &[u8]) {
    use sluice_services::auth::{Scope, token};
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        let value = line.strip_prefix("Authorization: ").unwrap_or(line);
        let _ = sluice_server::auth::parse_authorization(value);
        if let Some(id) = token::key_id(value.strip_prefix("Bearer ").unwrap_or(value)) {
            assert_eq!(id.len(), 16, "a key id is 16 hex digits");
        }
        if let Ok(scope) = Scope::parse(line) {
            let again = Scope::parse(&scope.to_string()).expect("a printed scope parses");
            assert_eq!(again, scope, "a scope prints as what it is");
        }
    }
    http::serve(data, http::Keys::Bearer);
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
    // The second half of the toolbox: streams, events, jobs, sagas, topics, schedules,
    // schemas, relays and alerts.
    let _ = serde_json::from_slice::<api::events::AppendEventsRequest>(body);
    let _ = serde_json::from_slice::<api::streams::AppendRequest>(body);
    let _ = serde_json::from_slice::<api::schemas::CheckSchemaRequest>(body);
    let _ = serde_json::from_slice::<api::events::CheckpointRequest>(body);
    let _ = serde_json::from_slice::<api::jobs::ClaimJobsRequest>(body);
    let _ = serde_json::from_slice::<api::streams::CommitRequest>(body);
    let _ = serde_json::from_slice::<api::jobs::CompleteJobRequest>(body);
    let _ = serde_json::from_slice::<api::alerts::CreateAlertRuleRequest>(body);
    let _ = serde_json::from_slice::<api::events::CreateEventSubscriptionRequest>(body);
    let _ = serde_json::from_slice::<api::streams::CreateGroupRequest>(body);
    let _ = serde_json::from_slice::<api::relays::CreateRelayRequest>(body);
    let _ = serde_json::from_slice::<api::schedules::CreateScheduleRequest>(body);
    let _ = serde_json::from_slice::<api::streams::CreateStreamRequest>(body);
    let _ = serde_json::from_slice::<api::topics::CreateTopicRequest>(body);
    let _ = serde_json::from_slice::<api::sagas::DefineSagaRequest>(body);
    let _ = serde_json::from_slice::<api::jobs::EnqueueJobRequest>(body);
    let _ = serde_json::from_slice::<api::jobs::FailJobRequest>(body);
    let _ = serde_json::from_slice::<api::events::FetchEventsRequest>(body);
    let _ = serde_json::from_slice::<api::streams::FetchRequest>(body);
    let _ = serde_json::from_slice::<api::jobs::HeartbeatRequest>(body);
    let _ = serde_json::from_slice::<api::topics::PublishRequest>(body);
    let _ = serde_json::from_slice::<api::events::PutSnapshotRequest>(body);
    let _ = serde_json::from_slice::<api::streams::ReceiptsRequest>(body);
    let _ = serde_json::from_slice::<api::schemas::RegisterSchemaRequest>(body);
    let _ = serde_json::from_slice::<api::streams::SeekRequest>(body);
    let _ = serde_json::from_slice::<api::sagas::StartSagaRequest>(body);
    let _ = serde_json::from_slice::<api::topics::SubscribeRequest>(body);
    let _ = serde_json::from_slice::<api::streams::UpdateStreamRequest>(body);
    let _ = serde_json::from_slice::<api::topics::UpdateTopicRequest>(body);
}
