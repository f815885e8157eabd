//! Wire types of streams (`/v1/streams...`): partitioned, replayable logs and their consumer
//! groups. Offsets are per partition, gapless, from 0; `from_offset` and commits name the
//! next offset to read. List answers use `records`.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use crate::{ErrorBody, Overflow, RateLimit};

/// `POST /v1/streams`. Omitted settings take their defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateStreamRequest {
    /// 1 to 80 ASCII letters, digits, `-`, `_` and `.`.
    pub name: String,
    /// 1 to 1,024 (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<u32>,
    /// Records older than this are removed, a whole segment at a time (default 7 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_ms: Option<u64>,
    /// Per partition: old segments are removed while the rest still holds this many bytes
    /// (default: no size limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_bytes: Option<u64>,
    /// Largest record: key, body, headers and envelope fields (default and maximum 1 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_bytes_max: Option<u64>,
    /// A segment is rolled once it holds this much (default 64 MiB, at least 4 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_bytes: Option<u64>,
    /// Refuse an appended record whose body breaks the schema registered for its `type` and
    /// `version` (`schema_validation_failed` per entry); default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_validation: Option<bool>,
    /// A token bucket on appends: each record takes one; past it a record is refused as
    /// `rate_limited` (429 with `Retry-After` when every record of the call is). Absent: no
    /// limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// Most records the whole stream keeps (every partition); an append past it is refused as
    /// `queue_full` (429 with `Retry-After` when every record of the call is) until retention
    /// makes room. Absent: no bound but retention's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth_messages: Option<u64>,
    /// Most bytes the whole stream keeps, as `partition_details[].bytes` counts them; at least
    /// `record_bytes_max` + 4 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth_bytes: Option<u64>,
    /// Only `reject` (the default) on a stream: its oldest records go by retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overflow: Option<Overflow>,
}

/// `PATCH /v1/streams/{name}`. Omitted settings stay; `"retention_bytes": null` removes the
/// size limit; partitions can only grow.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateStreamRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_ms: Option<u64>,
    #[serde(default, deserialize_with = "double_option", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<u64>)]
    pub retention_bytes: Option<Option<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_bytes_max: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_validation: Option<bool>,
    /// Absent: unchanged. `null`: remove the limit. An object: set it.
    #[serde(default, deserialize_with = "double_option", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<RateLimit>)]
    pub rate_limit: Option<Option<RateLimit>>,
    /// Absent: unchanged. `null`: remove the bound. A number: set it.
    #[serde(default, deserialize_with = "double_option", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<u64>)]
    pub max_depth_messages: Option<Option<u64>>,
    /// Absent: unchanged. `null`: remove the bound. A number: set it.
    #[serde(default, deserialize_with = "double_option", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<u64>)]
    pub max_depth_bytes: Option<Option<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overflow: Option<Overflow>,
}

fn double_option<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// One partition of a stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StreamPartition {
    pub partition: u32,
    /// The first offset still kept (reads below it are `416 offset_out_of_range`).
    pub first_offset: u64,
    /// The offset the next record appended to the partition gets.
    pub next_offset: u64,
    /// Bytes kept on disk.
    pub bytes: u64,
}

/// A stream: its settings, its partitions, and its groups with their lag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Stream {
    pub name: String,
    pub partitions: u32,
    pub retention_ms: u64,
    pub retention_bytes: Option<u64>,
    pub record_bytes_max: u64,
    pub segment_bytes: u64,
    /// Appends are checked against the schema registry.
    #[serde(default)]
    pub schema_validation: bool,
    /// The token bucket on appends, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// The depth limits, if any, with what the stream keeps now (`depth_messages`,
    /// `depth_bytes`: over every partition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth_messages: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth_bytes: Option<u64>,
    #[serde(default)]
    pub overflow: Overflow,
    #[serde(default)]
    pub depth_messages: u64,
    #[serde(default)]
    pub depth_bytes: u64,
    pub created_at: String,
    pub created_at_ms: u64,
    /// Per partition: `first_offset`, `next_offset`, `bytes`.
    pub partition_details: Vec<StreamPartition>,
    pub groups: Vec<StreamGroup>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StreamList {
    pub streams: Vec<Stream>,
    /// Pass as `next_token` to get the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
}

/// One record to append. Give `body` (UTF-8 text) or `body_base64`, and `key` (text) or
/// `key_base64`, not both.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendRecord {
    /// With a key and no `partition`, the partition is Kafka's default partitioner's choice:
    /// murmur2 of the key's bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_base64: Option<String>,
    /// An explicit partition; without it and without a key, round robin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The record's type; on a stream with `schema_validation`, the schema its body must pass.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub record_type: Option<String>,
    /// The schema version to check against (default: the type's latest), kept as the header
    /// `sluice.version`; `"2"` or `2`.
    #[serde(default, deserialize_with = "crate::schemas::version_text", skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// What caused this record (a message, event, job or saga step id), kept as the header
    /// `sluice.causation_id`: the link `GET /v1/trace/{correlation_id}` orders by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causation_id: Option<String>,
    /// A retried append with the same id within 5 minutes gets the original place back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_id: Option<String>,
}

/// `POST /v1/streams/{name}/records`: up to 1,000 records.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendRequest {
    pub records: Vec<AppendRecord>,
}

/// Per-entry outcome of an append: the record's place, or `error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AppendResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_ms: Option<u64>,
    /// A retry within the dedup window: the original's place, nothing appended.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub duplicate: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AppendResponse {
    pub results: Vec<AppendResult>,
}

/// A record as reads and fetches return it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StreamRecord {
    pub partition: u32,
    pub offset: u64,
    pub timestamp: String,
    pub timestamp_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_base64: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub record_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_id: Option<String>,
    /// Shared mode: pass it to ack, release or nack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
    /// Shared mode: how often the record was handed out, this time included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliveries: Option<u32>,
}

/// `GET /v1/streams/{name}/partitions/{p}/records`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReadResponse {
    pub records: Vec<StreamRecord>,
    pub first_offset: u64,
    pub next_offset: u64,
}

/// Where a new group starts: `"earliest"` (default), `"latest"`, `{"offset": N}` (in every
/// partition) or `{"time_ms": T}` (the first record at or after T).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum GroupStart {
    Named(StartName),
    Offset { offset: u64 },
    Time { time_ms: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StartName {
    Earliest,
    Latest,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum GroupMode {
    /// Partitions shared among live members; commits of offsets, only forward.
    #[default]
    Offsets,
    /// Queue-style: any member takes any record, with a receipt.
    Shared,
}

/// `POST /v1/streams/{name}/groups`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateGroupRequest {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<GroupMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<GroupStart>,
    /// Offsets mode: a member that does not fetch for this long loses its partitions (1 s to
    /// 5 min, default 10 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_timeout_ms: Option<u64>,
    /// Shared mode: how long a delivered record is held (default 30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_timeout_ms: Option<u64>,
    /// Shared mode: failed deliveries (ack timeouts, nacks) before the record goes to the
    /// dead-letter queue (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_deliveries: Option<u32>,
    /// Shared mode: a Sluice queue that gets records past `max_deliveries`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_queue: Option<String>,
    /// Shared mode: no record is handed out while an earlier record of its key is unacked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_ordered: Option<bool>,
}

/// One partition of a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GroupPartition {
    pub partition: u32,
    /// Offsets mode: the committed offset (the next to read); shared mode: the lowest offset
    /// not yet acknowledged.
    pub committed_offset: u64,
    /// Records from `committed_offset` to the partition's end.
    pub lag: u64,
    /// Offsets mode: the live member that owns the partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// A consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StreamGroup {
    pub name: String,
    pub mode: GroupMode,
    pub start: GroupStart,
    pub session_timeout_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_deliveries: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_ordered: Option<bool>,
    /// Offsets mode: the generation, which grows at every reassignment or seek.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    pub members: Vec<String>,
    /// The sum of the partitions' lag.
    pub lag: u64,
    pub partitions: Vec<GroupPartition>,
    /// Shared mode: records held by members now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<u64>,
    pub created_at: String,
    pub created_at_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GroupList {
    pub groups: Vec<StreamGroup>,
}

/// `POST /v1/streams/{name}/groups/{group}/fetch`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FetchRequest {
    /// The member's id: 1 to 255 visible ASCII characters. A member joins by fetching.
    pub member: String,
    /// Most records to return (1 to 1000, default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
    /// Long poll: wait up to this long (at most 20000, default 0) for a record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

/// What a fetch returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FetchResponse {
    pub records: Vec<StreamRecord>,
    /// Offsets mode: the generation to commit with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// Offsets mode: the member's partitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Vec<u32>>,
}

/// `POST /v1/streams/{name}/groups/{group}/commit`: the next offset to read per partition.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CommitRequest {
    pub member: String,
    pub generation: u64,
    /// Partition (as a string, JSON keys are) → next offset to read.
    pub offsets: BTreeMap<String, u64>,
}

/// `POST /v1/streams/{name}/groups/{group}/seek`: give `offset` or `time_ms`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SeekRequest {
    pub partition: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SeekResponse {
    pub partition: u32,
    /// The offset the group's partition now starts at (kept within the partition).
    pub offset: u64,
}

/// `POST .../ack`, `.../release`, `.../nack` (shared mode).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiptsRequest {
    pub receipts: Vec<String>,
    /// Release and nack: why; kept as the record's last error (the dead-letter queue gets it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
