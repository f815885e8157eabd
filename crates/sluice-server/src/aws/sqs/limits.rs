//! The limits of the SQS API, as AWS documents and enforces them, named with their unit last.
//!
//! They are AWS's even where the native API allows more (longer retention, bigger batches), so
//! that an application tested against Sluice does not break on AWS. Each is checked before
//! anything is allocated for the request it guards.

/// Entries in one batch request, the longest entry id, and the payload of the whole batch.
pub const BATCH_ENTRIES_MAX: usize = 10;
pub const BATCH_ENTRY_ID_LEN_MAX: usize = 80;
pub const BATCH_PAYLOAD_BYTES_MAX: u64 = 1_048_576;

/// `MaximumMessageSize` bounds, in bytes (body plus attribute names, types and values).
pub const MESSAGE_BYTES_MIN: u64 = 1_024;
pub const MESSAGE_BYTES_MAX: u64 = 1_048_576;

/// `DelaySeconds`, per queue and per message.
pub const DELAY_SECONDS_MAX: u64 = 900;

/// `MessageRetentionPeriod`.
pub const RETENTION_SECONDS_MIN: u64 = 60;
pub const RETENTION_SECONDS_MAX: u64 = 1_209_600;

/// `ReceiveMessageWaitTimeSeconds` and a receive's `WaitTimeSeconds`.
pub const WAIT_SECONDS_MAX: u64 = 20;

/// `VisibilityTimeout` of a queue, a receive, or a visibility change.
pub const VISIBILITY_TIMEOUT_SECONDS_MAX: u64 = 43_200;

/// `KmsDataKeyReusePeriodSeconds` bounds and default (the default is not stored, as in AWS).
pub const KMS_REUSE_SECONDS_MIN: u64 = 60;
pub const KMS_REUSE_SECONDS_MAX: u64 = 86_400;
pub const KMS_REUSE_SECONDS_DEFAULT: u64 = 300;

/// `maxReceiveCount` of a redrive policy.
pub const MAX_RECEIVE_COUNT_MAX: u64 = 1_000;

/// Messages one receive returns.
pub const RECEIVE_MESSAGES_MAX: u64 = 10;

/// `MessageGroupId` and `MessageDeduplicationId` length, in characters.
pub const FIFO_ID_LEN_MAX: usize = 128;

/// `ListQueues` and `ListDeadLetterSourceQueues` page size.
pub const LIST_RESULTS_MAX: u64 = 1_000;

/// Permission labels (`AddPermission`), in characters.
pub const LABEL_LEN_MAX: usize = 80;

/// Actions one `AddPermission` grants: "An Amazon SQS policy can have a maximum of seven
/// actions per statement" (AddPermission's reference page).
pub const PERMISSION_ACTIONS_MAX: usize = 7;

/// Move tasks: the fastest rate a task may ask for, and how many tasks one list returns.
pub const MOVE_TASK_RATE_MAX: u64 = 500;
pub const MOVE_TASK_LIST_MAX: u64 = 10;

/// `ReceiveRequestAttemptId` length, in characters.
pub const RECEIVE_ATTEMPT_ID_LEN_MAX: usize = 128;
