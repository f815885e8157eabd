//! API keys (`/v1/keys`): make, list, view and revoke.

use reqwest::Method;
use sluice_api::{ApiKey, CreateKeyRequest, CreatedKey, KeyList};

use crate::{Client, Result};

impl Client {
    /// `POST /v1/keys`: makes a key; the answer's `key` is its token, shown this once. Sent
    /// without an `Idempotency-Key` (the server would not keep an answer holding a secret), so
    /// a call whose answer is lost is not retried: list the keys and revoke the one it made.
    pub async fn create_key(&self, request: &CreateKeyRequest) -> Result<CreatedKey> {
        let call = self.call(Method::POST, &["v1", "keys"], &[], Some(request), self.timeout)?.without_key();
        let (status, bytes) = self.execute(call).await?;
        crate::decode(status, &bytes)
    }

    /// `GET /v1/keys`: every key, revoked ones too, without secrets.
    pub async fn list_keys(&self) -> Result<KeyList> {
        self.json(Method::GET, &["v1", "keys"], &[], None::<&()>).await
    }

    /// `GET /v1/keys/{id}`.
    pub async fn get_key(&self, id: &str) -> Result<ApiKey> {
        self.json(Method::GET, &["v1", "keys", id], &[], None::<&()>).await
    }

    /// `DELETE /v1/keys/{id}`: revokes the key, on every node within a second.
    pub async fn revoke_key(&self, id: &str) -> Result<ApiKey> {
        self.json(Method::DELETE, &["v1", "keys", id], &[], None::<&()>).await
    }
}
