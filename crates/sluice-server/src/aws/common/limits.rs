//! The limits every AWS protocol of the server shares (SQS, SNS, STS), as AWS documents and
//! enforces them, named with their unit last. Each is checked before anything is allocated for
//! the request it guards. SQS's own are in `aws/sqs/limits.rs`, SNS's in the topics service.

/// Largest AWS request body the server reads. A batch holds at most 1 MiB of payload, but
/// form encoding can triple non-ASCII text and base64 grows binary attributes by a third.
pub const REQUEST_BYTES_MAX: usize = 8 * 1024 * 1024;

/// Most form or query-string parameters one Query-protocol request may carry (a full batch
/// of ten entries with ten attributes each needs about 500).
pub const QUERY_PARAMS_MAX: usize = 4_096;

/// Most `.`-separated parts in one Query-protocol parameter name. The deepest name SQS defines,
/// `SendMessageBatchRequestEntry.N.MessageAttribute.N.Value.StringListValue.N`, has seven.
/// Names are split into a tree that is walked recursively, so without this bound one
/// parameter made of 100,000 dots would overflow the stack and abort the server.
pub const QUERY_PARAM_NAME_PARTS_MAX: usize = 8;

/// Message attributes (SQS's, which SNS shares): how many per message, the longest name (in
/// characters) and the longest data type (in bytes).
pub const MESSAGE_ATTRIBUTES_MAX: usize = 10;
pub const ATTRIBUTE_NAME_LEN_MAX: usize = 256;
pub const ATTRIBUTE_TYPE_LEN_MAX: usize = 256;
