//! Wire types of alert rules and alerts (`/v1/alerts`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What a rule measures and compares with its `threshold`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// Messages (visible, in flight, delayed) in each dead-letter queue `target` matches.
    DlqDepthAbove,
    /// Age in milliseconds of the oldest message of each queue `target` matches.
    OldestAgeAboveMs,
    /// Backlog of each subscription (`<topic>/<subscription id>`) `target` matches.
    LagAbove,
    /// Growth of that backlog over the last `for_ms`, compared with `threshold`.
    LagGrowing,
    /// Refusals per second of each resource `target` matches (figures arrive with backpressure).
    RejectedRateAbove,
    /// Saga instances that are `failed` (a compensation kept failing), one alert per instance
    /// (subject `<saga>/<instance id>`) of each saga whose name `target` matches; it resolves
    /// once the instance is retried (`POST /v1/sagas/instances/{id}/retry`) and leaves `failed`.
    /// The built-in rule `saga-failed` watches every saga.
    SagaFailed,
}

/// Where a rule's changes are told.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AlertNotify {
    /// An `http://` or `https://` URL that gets a signed JSON POST when an alert fires and
    /// when it resolves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
}

/// `POST /v1/alerts/rules`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAlertRuleRequest {
    /// 1 to 60 letters, digits, `-` or `_`.
    pub name: String,
    pub kind: AlertKind,
    /// A name, or a pattern where `*` is any run of characters and `?` one character.
    pub target: String,
    /// The alert's condition is `figure > threshold`.
    pub threshold: f64,
    /// How long the condition must hold before the alert fires (default 0, at most a day);
    /// for `lag_growing`, the window the growth is measured over (1 ms to an hour).
    #[serde(default)]
    pub for_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<AlertNotify>,
}

/// A rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AlertRule {
    pub name: String,
    pub kind: AlertKind,
    pub target: String,
    pub threshold: f64,
    pub for_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<AlertNotify>,
    /// With a webhook: the key of the `x-sluice-signature` HMAC-SHA256 on every POST.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
    /// The built-in rule (`dlq-not-empty`), as it stands or as replaced.
    pub builtin: bool,
    /// Absent on the built-in rule as it stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at_ms: Option<u64>,
}

/// `GET /v1/alerts/rules`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AlertRuleList {
    pub rules: Vec<AlertRule>,
}

/// One rule's verdict on one subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Alert {
    pub rule: String,
    pub kind: AlertKind,
    pub target: String,
    /// What the alert is about: a queue's name, or `<topic>/<subscription id>`.
    pub subject: String,
    /// `firing`, or `pending` (the condition holds, for less than `for_ms` so far).
    pub status: String,
    /// Firing since (or pending since).
    pub since: String,
    pub since_ms: u64,
    /// The figure at the latest stored evaluation.
    pub value: f64,
    pub threshold: f64,
    pub evaluated_at: String,
    pub evaluated_at_ms: u64,
}

/// `GET /v1/alerts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AlertList {
    /// Firing first, then by rule and subject.
    pub alerts: Vec<Alert>,
}
