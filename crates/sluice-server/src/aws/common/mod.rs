//! What the AWS protocols of the server share (SQS, SNS, STS): the error type and its
//! rendering in the JSON 1.0 protocol (`json.rs`) and the Query protocol (`query.rs` reads,
//! `xml.rs` answers), parameter parsing (`input.rs`), message attributes as SQS and SNS take
//! them (`message_attributes.rs`), the action-enum macro (`dispatch.rs`), and the limits of
//! the protocols (`limits.rs`). Nothing here knows a particular service's actions.

pub mod dispatch;
pub mod errors;
pub mod input;
pub mod json;
pub mod limits;
pub mod message_attributes;
pub mod query;
pub mod xml;

pub use errors::{AwsError, BatchError};
/// SNS's `MessageAttributes` are SQS's, as sent.
pub use message_attributes::AttributeIn;
