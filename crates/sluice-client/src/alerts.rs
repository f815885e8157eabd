//! Alert rules and alerts (`/v1/alerts...`), and the dashboard's figures (`/v1/stats...`).

use reqwest::{Method, StatusCode};
use sluice_api::{AlertList, AlertRule, AlertRuleList, CreateAlertRuleRequest, QueueHistory, QueueRatesList, Stats};

use crate::{Client, Result, error_from};

/// What [`Client::create_alert_rule`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct CreatedAlertRule {
    /// The rule as it is now.
    pub rule: AlertRule,
    /// False when a rule with these settings already existed.
    pub created: bool,
}

impl Client {
    /// `POST /v1/alerts/rules`: creates a rule. Creating it again with the same settings
    /// succeeds with `created: false`; with others it fails with `alert_rule_exists`.
    pub async fn create_alert_rule(&self, request: &CreateAlertRuleRequest) -> Result<CreatedAlertRule> {
        let (status, rule) =
            self.json_with_status(Method::POST, &["v1", "alerts", "rules"], &[], Some(request)).await?;
        Ok(CreatedAlertRule { rule, created: status == StatusCode::CREATED })
    }

    /// `GET /v1/alerts/rules`: every rule by name, the built-in one included unless turned off.
    pub async fn list_alert_rules(&self) -> Result<AlertRuleList> {
        self.json(Method::GET, &["v1", "alerts", "rules"], &[], None::<&()>).await
    }

    /// `GET /v1/alerts/rules/{name}`.
    pub async fn get_alert_rule(&self, name: &str) -> Result<AlertRule> {
        self.json(Method::GET, &["v1", "alerts", "rules", name], &[], None::<&()>).await
    }

    /// `DELETE /v1/alerts/rules/{name}`: deletes a rule with its alerts (a built-in rule,
    /// `dlq-not-empty` or `saga-failed`, is turned off).
    pub async fn delete_alert_rule(&self, name: &str) -> Result<()> {
        let call = self.call(Method::DELETE, &["v1", "alerts", "rules", name], &[], None::<&()>, self.timeout)?;
        let (status, body) = self.execute(call).await?;
        if status.is_success() { Ok(()) } else { Err(error_from(status, &body)) }
    }

    /// `GET /v1/alerts`: the alerts firing now (with `pending`, also those waiting out their
    /// `for_ms`).
    pub async fn alerts(&self, pending: bool) -> Result<AlertList> {
        let query: &[(&str, &str)] = if pending { &[("pending", "true")] } else { &[] };
        self.json(Method::GET, &["v1", "alerts"], query, None::<&()>).await
    }

    /// `GET /v1/stats`: totals, recent rates, firing alerts and the store's health.
    pub async fn stats(&self) -> Result<Stats> {
        self.json(Method::GET, &["v1", "stats"], &[], None::<&()>).await
    }

    /// `GET /v1/stats/queues`: every sampled queue's latest sample.
    pub async fn queue_rates(&self) -> Result<QueueRatesList> {
        self.json(Method::GET, &["v1", "stats", "queues"], &[], None::<&()>).await
    }

    /// `GET /v1/stats/queues/{name}`: one queue's recent samples.
    pub async fn queue_history(&self, name: &str) -> Result<QueueHistory> {
        self.json(Method::GET, &["v1", "stats", "queues", name], &[], None::<&()>).await
    }
}
