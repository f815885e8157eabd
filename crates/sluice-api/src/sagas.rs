//! Sagas (`/v1/sagas`, `/v1/replies`): definitions, instances, and participants' replies.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::JobBackoff;

/// An HTTP call: a 2xx answer is success (its JSON body the output); 408, 429, 5xx and
/// transport errors are retried; any other 4xx fails the step for good.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SagaHttpCall {
    /// May use `{{input.x}}` and `{{steps.NAME.output.y}}`.
    pub url: String,
    /// `GET`, `POST` (default), `PUT`, `PATCH` or `DELETE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Sent as JSON, templates rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Object)]
    pub body: Option<serde_json::Value>,
}

/// A message to a queue, answered by `POST /v1/replies` or by a message to `reply_queue`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SagaQueueCall {
    pub queue: String,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub body: serde_json::Value,
    /// How long to wait for the reply (default: the step's `timeout_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_timeout_ms: Option<u64>,
    /// A queue the orchestrator consumes for answers to this call: the participant may send
    /// the JSON of `POST /v1/replies` there as a message (`correlation_id`, `step`, `kind` and
    /// `attempt` may instead be the step message's attributes, copied). Named to the
    /// participant in the attribute `sluice.saga.reply_queue`. Must differ from `queue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_queue: Option<String>,
}

/// One of `http` or `queue`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SagaCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<SagaHttpCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<SagaQueueCall>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SagaRetry {
    /// Attempts in all, 1 to 100 (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<JobBackoff>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SagaStep {
    /// 1 to 64 of `a-z`, `0-9`, `_`, unique in the saga.
    pub name: String,
    pub action: SagaCall,
    /// What undoes the action; absent for a step that needs no undoing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensation: Option<SagaCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<SagaRetry>,
    /// The longest one attempt may take (default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `PUT /v1/sagas/{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DefineSagaRequest {
    pub steps: Vec<SagaStep>,
}

/// A version of a saga's definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Saga {
    pub name: String,
    pub version: u32,
    pub steps: Vec<SagaStep>,
    pub created_at: String,
}

/// `GET /v1/sagas`: the latest version of every saga.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SagaList {
    pub sagas: Vec<Saga>,
}

/// `POST /v1/sagas/{name}/instances`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartSagaRequest {
    /// Any JSON, at most 128 KiB; templates read it as `{{input.…}}`.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub input: serde_json::Value,
    /// Carried by every call as `X-Correlation-Id`; default the instance's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SagaAttempt {
    /// `action` or `compensation`.
    pub kind: String,
    pub number: u32,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// `succeeded`, `failed` or `timed_out`; absent while in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SagaStepState {
    pub name: String,
    /// `pending`, `running`, `succeeded`, `failed`, `timed_out`, `compensating`, `compensated`,
    /// `compensation_failed` or `skipped`.
    pub status: String,
    pub attempts: u32,
    pub compensation_attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Object)]
    pub output: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When the next attempt starts, while one is planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<String>,
    /// When the attempt in flight times out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<String>,
    /// The latest attempts, oldest first (at most 5).
    pub attempts_history: Vec<SagaAttempt>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SagaInstance {
    pub id: String,
    pub saga: String,
    /// The definition version it runs, whatever was defined since.
    pub version: u32,
    /// `running`, `compensating`, `completed`, `compensated` or `failed`.
    pub status: String,
    #[schema(value_type = Object)]
    pub input: serde_json::Value,
    pub correlation_id: String,
    pub cancel_requested: bool,
    /// Why it turned back, or why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub steps: Vec<SagaStepState>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

/// `GET /v1/sagas/instances`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SagaInstanceList {
    pub instances: Vec<SagaInstance>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
}

/// `POST /v1/replies`: a participant's answer to a queue step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SagaReply {
    /// The instance's correlation id (the message's `X-Correlation-Id` attribute).
    pub correlation_id: String,
    /// The step's name (the message's `sluice.saga.step` attribute).
    pub step: String,
    pub ok: bool,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub output: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `false` with `ok: false`: retrying cannot help (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<bool>,
    /// `action` (default) or `compensation` (the message's `sluice.saga.kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The attempt answered (the message's `sluice.saga.attempt`); default the latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SagaReplyResponse {
    /// How many instances took the answer.
    pub applied: usize,
}
