//! Wire types of `/v1/keys`: API keys, their tenants and scopes.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /v1/keys`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKeyRequest {
    /// 1 to 63 of `[a-z0-9-]`, starting with a letter or digit; `default` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// What the key is for, shown in lists (1 to 128 bytes).
    pub name: String,
    /// 1 to 64 scopes `kind:name-pattern:actions`, e.g. `queues:orders-*:send,receive`,
    /// `streams:*:read`, `*:*:admin`.
    pub scopes: Vec<String>,
    /// Also make an AWS access key (`aws_access_key_id`, `aws_secret_access_key`) for SigV4
    /// clients (boto3, the AWS SDKs), with the same scopes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub aws: bool,
    /// The key's own token bucket, shared by every node: each call takes a token; past it,
    /// 429 `rate_limited` with `Retry-After` (SQS/SNS: `RequestThrottled`/`Throttled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<crate::RateLimit>,
}

/// An API key, without its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ApiKey {
    /// The key's public id (16 hex digits), also inside its token.
    pub id: String,
    pub tenant: String,
    pub name: String,
    /// In canonical form (actions in a fixed order, `*` for every action).
    pub scopes: Vec<String>,
    /// The AWS access key id of a key made with `aws: true` (`SLK` and the id in upper case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws_access_key_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<crate::RateLimit>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339; a revoked key is refused everywhere and kept in the list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<String>,
}

/// The answer to `POST /v1/keys`: the key and, this once, its token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreatedKey {
    /// The bearer token (`slk_...`): shown only here and stored only as a hash, so keep it now.
    pub key: String,
    /// The AWS secret access key of a key made with `aws: true`, shown only here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws_secret_access_key: Option<String>,
    #[serde(flatten)]
    pub api_key: ApiKey,
}

/// `GET /v1/keys`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct KeyList {
    pub keys: Vec<ApiKey>,
}
