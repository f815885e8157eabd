//! Sagas (`/v1/sagas...`, `/v1/replies`): define versions, start instances, watch, list,
//! cancel, retry a failed compensation, and reply to a queue step as a participant.

use reqwest::{Method, StatusCode};
use sluice_api::{
    DefineSagaRequest, Saga, SagaInstance, SagaInstanceList, SagaList, SagaReply, SagaReplyResponse, StartSagaRequest,
};

use crate::{Client, Result};

/// Filters of [`Client::list_saga_instances`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SagaInstanceQuery {
    /// Only instances of this saga.
    pub saga: Option<String>,
    /// `running`, `compensating`, `completed`, `compensated` or `failed`.
    pub status: Option<String>,
    /// Most instances per page (1 to 1000).
    pub limit: Option<u32>,
    /// The previous page's `next_token`.
    pub next_token: Option<String>,
}

impl Client {
    /// `PUT /v1/sagas/{name}`: a new version (`true`), or the latest when its steps are the
    /// same (`false`).
    pub async fn define_saga(&self, name: &str, request: &DefineSagaRequest) -> Result<(Saga, bool)> {
        let (status, saga) = self.json_with_status(Method::PUT, &["v1", "sagas", name], &[], Some(request)).await?;
        Ok((saga, status == StatusCode::CREATED))
    }

    /// `GET /v1/sagas/{name}`: a version (the latest when `None`).
    pub async fn get_saga(&self, name: &str, version: Option<u32>) -> Result<Saga> {
        let version = version.map(|v| v.to_string());
        let query: Vec<(&str, &str)> = version.as_deref().map(|v| ("version", v)).into_iter().collect();
        self.json(Method::GET, &["v1", "sagas", name], &query, None::<&()>).await
    }

    /// `GET /v1/sagas`: the latest version of every saga.
    pub async fn list_sagas(&self) -> Result<SagaList> {
        self.json(Method::GET, &["v1", "sagas"], &[], None::<&()>).await
    }

    /// `POST /v1/sagas/{name}/instances`: starts an instance (`202`); the orchestrator runs it.
    pub async fn start_saga(&self, name: &str, request: &StartSagaRequest) -> Result<SagaInstance> {
        self.json(Method::POST, &["v1", "sagas", name, "instances"], &[], Some(request)).await
    }

    /// [`Client::start_saga`] under the caller's own `Idempotency-Key` (an order id, say), so
    /// that a start repeated after the caller's own restart starts nothing new: the server
    /// answers with the first start's instance for the key's TTL.
    pub async fn start_saga_with_key(&self, name: &str, request: &StartSagaRequest, key: &str) -> Result<SagaInstance> {
        Ok(self.json_with_key(&["v1", "sagas", name, "instances"], request, key).await?.1)
    }

    /// `GET /v1/sagas/instances/{id}`.
    pub async fn get_saga_instance(&self, id: &str) -> Result<SagaInstance> {
        self.json(Method::GET, &["v1", "sagas", "instances", id], &[], None::<&()>).await
    }

    /// `GET /v1/sagas/instances`: a page of instances in start order.
    pub async fn list_saga_instances(&self, query: &SagaInstanceQuery) -> Result<SagaInstanceList> {
        let limit = query.limit.map(|l| l.to_string());
        let pairs: Vec<(&str, &str)> = [
            ("saga", query.saga.as_deref()),
            ("status", query.status.as_deref()),
            ("limit", limit.as_deref()),
            ("next_token", query.next_token.as_deref()),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();
        self.json(Method::GET, &["v1", "sagas", "instances"], &pairs, None::<&()>).await
    }

    /// `POST /v1/sagas/instances/{id}/cancel`: compensates what completed, in reverse order.
    pub async fn cancel_saga_instance(&self, id: &str) -> Result<SagaInstance> {
        self.json(Method::POST, &["v1", "sagas", "instances", id, "cancel"], &[], None::<&()>).await
    }

    /// `POST /v1/sagas/instances/{id}/retry`: a new round of a failed instance's compensation.
    pub async fn retry_saga_instance(&self, id: &str) -> Result<SagaInstance> {
        self.json(Method::POST, &["v1", "sagas", "instances", id, "retry"], &[], None::<&()>).await
    }

    /// `POST /v1/replies`: a participant's answer to a queue step (echo the message's
    /// `X-Correlation-Id`, `sluice.saga.step`, `sluice.saga.kind` and `sluice.saga.attempt`).
    pub async fn reply_saga_step(&self, reply: &SagaReply) -> Result<SagaReplyResponse> {
        self.json(Method::POST, &["v1", "replies"], &[], Some(reply)).await
    }
}
