//! `/v1/schemas`: JSON Schema versions per message type, each type's compatibility mode, and
//! the checks of a schema or a message body before registering or sending it.

use reqwest::{Method, StatusCode};
use sluice_api::{
    CheckSchemaRequest, CheckSchemaResponse, Compatibility, RegisterSchemaRequest, RegisteredSchema, SchemaConfig,
    SchemaType, SchemaTypeList, SchemaVersion,
};

use crate::{Client, Result};

/// What [`Client::register_schema`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredSchemaVersion {
    /// The type and the version the schema is.
    pub registered: RegisteredSchema,
    /// False when the same schema was already that version (nothing was added).
    pub created: bool,
}

impl Client {
    /// `POST /v1/schemas/{type}/versions`: registers `schema` as the type's next version. The
    /// same schema again answers its existing version with `created: false`; a schema that
    /// breaks the type's compatibility mode fails with `schema_incompatible`, whose details
    /// list the reasons.
    pub async fn register_schema(
        &self,
        message_type: &str,
        schema: &serde_json::Value,
    ) -> Result<RegisteredSchemaVersion> {
        let request = RegisterSchemaRequest { schema: schema.clone() };
        let (status, registered) = self
            .json_with_status(Method::POST, &["v1", "schemas", message_type, "versions"], &[], Some(&request))
            .await?;
        Ok(RegisteredSchemaVersion { registered, created: status == StatusCode::CREATED })
    }

    /// `GET /v1/schemas`: one page of types in name order.
    pub async fn list_schemas(&self, limit: Option<u32>, next_token: Option<&str>) -> Result<SchemaTypeList> {
        let limit = limit.map(|l| l.to_string());
        let query: Vec<(&str, &str)> = [("limit", limit.as_deref()), ("next_token", next_token)]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
        self.json(Method::GET, &["v1", "schemas"], &query, None::<&()>).await
    }

    /// Every type, following `next_token` across pages.
    pub async fn list_all_schemas(&self) -> Result<Vec<SchemaType>> {
        let mut all = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self.list_schemas(None, token.as_deref()).await?;
            all.extend(page.types);
            match page.next_token {
                Some(next) if Some(&next) != token.as_ref() => token = Some(next),
                _ => return Ok(all),
            }
        }
    }

    /// `GET /v1/schemas/{type}`: the type, its mode and its versions.
    pub async fn get_schema_type(&self, message_type: &str) -> Result<SchemaType> {
        self.json(Method::GET, &["v1", "schemas", message_type], &[], None::<&()>).await
    }

    /// `GET /v1/schemas/{type}/versions/{version}`: one version's schema; `None` is the latest.
    pub async fn get_schema_version(&self, message_type: &str, version: Option<u32>) -> Result<SchemaVersion> {
        let version = version.map_or_else(|| "latest".to_owned(), |v| v.to_string());
        self.json(Method::GET, &["v1", "schemas", message_type, "versions", &version], &[], None::<&()>).await
    }

    /// `PUT /v1/schemas/{type}/config`: the mode later registrations are checked under (the
    /// type is created, without versions, if it is new).
    pub async fn set_schema_compatibility(
        &self,
        message_type: &str,
        compatibility: Compatibility,
    ) -> Result<SchemaType> {
        let request = SchemaConfig { compatibility };
        self.json(Method::PUT, &["v1", "schemas", message_type, "config"], &[], Some(&request)).await
    }

    /// `POST /v1/schemas/{type}/check`: with `schema`, whether registering it would be
    /// accepted (`compatible`, `reasons`); with `body`, whether a message would pass
    /// (`valid`, `errors` with JSON pointers), against `version` or the latest.
    pub async fn check_schema(&self, message_type: &str, request: &CheckSchemaRequest) -> Result<CheckSchemaResponse> {
        self.json(Method::POST, &["v1", "schemas", message_type, "check"], &[], Some(request)).await
    }
}
