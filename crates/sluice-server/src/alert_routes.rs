//! Alert handlers (`/v1/alerts...`): create, list, get and delete rules, and list the alerts
//! firing now. The alerts service (`sluice_services::alerts`) holds the rules and evaluates them.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use serde::Deserialize;
use sluice_api::{
    Alert, AlertKind, AlertList, AlertNotify, AlertRule, AlertRuleList, CreateAlertRuleRequest, ErrorResponse,
};
use sluice_services::alerts::{Kind, RuleSpec, RuleView, StateRecord, Status};
use utoipa::{IntoParams, OpenApi};

use crate::AppState;
use crate::convert::rfc3339;
use crate::error::ApiError;
use crate::extract::{Json, Path, Query};

type JsonResult<T> = Result<axum::Json<T>, ApiError>;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/alerts", get(list_alerts))
        .route("/v1/alerts/rules", get(list_rules).post(create_rule))
        .route("/v1/alerts/rules/{name}", get(get_rule).delete(delete_rule))
}

#[derive(OpenApi)]
#[openapi(
    paths(create_rule, list_rules, get_rule, delete_rule, list_alerts),
    tags((name = "alerts", description = "Alert rules evaluated by the server, and the alerts firing now"))
)]
pub struct AlertsDoc;

fn kind_in(kind: AlertKind) -> Kind {
    match kind {
        AlertKind::DlqDepthAbove => Kind::DlqDepthAbove,
        AlertKind::OldestAgeAboveMs => Kind::OldestAgeAboveMs,
        AlertKind::LagAbove => Kind::LagAbove,
        AlertKind::LagGrowing => Kind::LagGrowing,
        AlertKind::RejectedRateAbove => Kind::RejectedRateAbove,
        AlertKind::SagaFailed => Kind::SagaFailed,
    }
}

fn kind_out(kind: Kind) -> AlertKind {
    match kind {
        Kind::DlqDepthAbove => AlertKind::DlqDepthAbove,
        Kind::OldestAgeAboveMs => AlertKind::OldestAgeAboveMs,
        Kind::LagAbove => AlertKind::LagAbove,
        Kind::LagGrowing => AlertKind::LagGrowing,
        Kind::RejectedRateAbove => AlertKind::RejectedRateAbove,
        Kind::SagaFailed => AlertKind::SagaFailed,
    }
}

fn rule_view(view: &RuleView) -> AlertRule {
    let r = &view.record;
    let created = (r.created_at_ms != 0).then_some(r.created_at_ms);
    AlertRule {
        name: r.name.clone(),
        kind: kind_out(r.kind),
        target: r.target.clone(),
        threshold: r.threshold,
        for_ms: r.for_ms,
        notify: r.webhook.as_ref().map(|url| AlertNotify { webhook: Some(url.clone()) }),
        signing_secret: r.signing_secret.clone(),
        builtin: view.builtin,
        created_at: created.map(rfc3339),
        created_at_ms: created,
    }
}

fn alert_view(state: &StateRecord, rule: &sluice_services::alerts::RuleRecord) -> Alert {
    Alert {
        rule: rule.name.clone(),
        kind: kind_out(rule.kind),
        target: rule.target.clone(),
        subject: state.subject.clone(),
        status: if state.status == Status::Firing { "firing" } else { "pending" }.to_string(),
        since: rfc3339(state.since_ms),
        since_ms: state.since_ms,
        value: state.value,
        threshold: rule.threshold,
        evaluated_at: rfc3339(state.evaluated_at_ms),
        evaluated_at_ms: state.evaluated_at_ms,
    }
}

#[utoipa::path(
    post, path = "/v1/alerts/rules", tag = "alerts",
    request_body = CreateAlertRuleRequest,
    responses(
        (status = 201, description = "Created (or the built-in rule replaced)", body = AlertRule),
        (status = 200, description = "A rule with these settings exists", body = AlertRule),
        (status = 400, description = "`invalid_argument`, `invalid_json`, or `limit_exceeded` (1,000 rules)", body = ErrorResponse),
        (status = 409, description = "`alert_rule_exists`: the name is taken by other settings", body = ErrorResponse),
    )
)]
pub async fn create_rule(
    State(state): State<AppState>,
    Json(request): Json<CreateAlertRuleRequest>,
) -> Result<(StatusCode, axum::Json<AlertRule>), ApiError> {
    if let Some(url) = request.notify.as_ref().and_then(|n| n.webhook.as_deref()) {
        state.push().egress().check_url(url).map_err(|e| ApiError::invalid("notify.webhook", e.to_string()))?;
    }
    let spec = RuleSpec {
        name: request.name,
        kind: kind_in(request.kind),
        target: request.target,
        threshold: request.threshold,
        for_ms: request.for_ms,
        webhook: request.notify.and_then(|n| n.webhook),
    };
    let (view, created) = state.alerts().create_rule(spec).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, axum::Json(rule_view(&view))))
}

#[utoipa::path(
    get, path = "/v1/alerts/rules", tag = "alerts",
    responses((status = 200, description = "Every rule by name, the built-in one included unless turned off", body = AlertRuleList))
)]
pub async fn list_rules(State(state): State<AppState>) -> JsonResult<AlertRuleList> {
    let rules = state.alerts().list_rules().await?;
    Ok(axum::Json(AlertRuleList { rules: rules.iter().map(rule_view).collect() }))
}

#[utoipa::path(
    get, path = "/v1/alerts/rules/{name}", tag = "alerts",
    params(("name" = String, Path, description = "The rule's name")),
    responses(
        (status = 200, description = "The rule", body = AlertRule),
        (status = 404, description = "`alert_rule_not_found`", body = ErrorResponse),
    )
)]
pub async fn get_rule(State(state): State<AppState>, Path(name): Path<String>) -> JsonResult<AlertRule> {
    Ok(axum::Json(rule_view(&state.alerts().get_rule(&name).await?)))
}

#[utoipa::path(
    delete, path = "/v1/alerts/rules/{name}", tag = "alerts",
    params(("name" = String, Path, description = "The rule's name; `dlq-not-empty` turns the built-in rule off")),
    responses(
        (status = 204, description = "Deleted, with its alerts and undelivered notifications"),
        (status = 404, description = "`alert_rule_not_found`", body = ErrorResponse),
    )
)]
pub async fn delete_rule(State(state): State<AppState>, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    state.alerts().delete_rule(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Default, Deserialize, IntoParams)]
pub struct AlertsQuery {
    /// Also list pending alerts (their condition holds, for less than `for_ms` so far).
    #[serde(default)]
    pending: bool,
}

#[utoipa::path(
    get, path = "/v1/alerts", tag = "alerts",
    params(AlertsQuery),
    responses((status = 200, description = "The alerts firing now, since when, firing first", body = AlertList))
)]
pub async fn list_alerts(State(state): State<AppState>, Query(query): Query<AlertsQuery>) -> JsonResult<AlertList> {
    let alerts = state.alerts().alerts(query.pending).await?;
    Ok(axum::Json(AlertList { alerts: alerts.iter().map(|(s, r)| alert_view(s, r)).collect() }))
}
