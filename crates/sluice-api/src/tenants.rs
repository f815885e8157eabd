//! Wire types of `/v1/tenants`: tenants' quotas and what they hold.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `PUT /v1/tenants/{name}`: a tenant's quotas, replacing the ones it had; an omitted quota is
/// unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantQuotas {
    /// Most queues, topics and streams the tenant may have; past it, a creation is 429 `quota_exceeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_resources: Option<u64>,
    /// Most bytes (bodies and attributes) the tenant's queues may hold; past it, sends and
    /// publishes are 429 `quota_exceeded` (receives and deletes never are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_stored_bytes: Option<u64>,
    /// Calls a second of all the tenant's keys together; past it, 429 `rate_limited`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<crate::RateLimit>,
}

/// What a tenant holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TenantUsage {
    /// Queues, topics and streams.
    pub resources: u64,
    /// Bytes of every message in its queues.
    pub stored_bytes: u64,
}

/// A tenant: its quotas and usage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Tenant {
    pub name: String,
    pub quotas: TenantQuotas,
    pub usage: TenantUsage,
    /// RFC 3339: when its quotas were last set; absent for a tenant without quotas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

/// `GET /v1/tenants`: every tenant with quotas, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TenantList {
    pub tenants: Vec<Tenant>,
}
