//! Tenants' quotas (`/v1/tenants`): set, view, list and remove.

use reqwest::Method;
use sluice_api::{Tenant, TenantList, TenantQuotas};

use crate::{Client, Result};

impl Client {
    /// `PUT /v1/tenants/{name}`: sets the tenant's quotas, replacing the ones it had.
    pub async fn set_tenant(&self, name: &str, quotas: &TenantQuotas) -> Result<Tenant> {
        self.json(Method::PUT, &["v1", "tenants", name], &[], Some(quotas)).await
    }

    /// `GET /v1/tenants/{name}`: its quotas (none without a record) and what it holds.
    pub async fn get_tenant(&self, name: &str) -> Result<Tenant> {
        self.json(Method::GET, &["v1", "tenants", name], &[], None::<&()>).await
    }

    /// `GET /v1/tenants`: every tenant with quotas.
    pub async fn list_tenants(&self) -> Result<TenantList> {
        self.json(Method::GET, &["v1", "tenants"], &[], None::<&()>).await
    }

    /// `DELETE /v1/tenants/{name}`: removes the quotas; the tenant's queues and topics stay.
    pub async fn remove_tenant(&self, name: &str) -> Result<()> {
        let call = self.call(Method::DELETE, &["v1", "tenants", name], &[], None::<&()>, self.timeout)?;
        let (status, body) = self.execute(call).await?;
        if status.is_success() { Ok(()) } else { Err(crate::error_from(status, &body)) }
    }
}
