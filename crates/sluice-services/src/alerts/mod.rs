//! Alerts: rules stored as records, evaluated by the server on the services' clock, and
//! webhooks told when an alert fires and when it resolves.
//!
//! - `model.rs`: rules and alert states as stored, the limits, the built-in rule.
//! - `figures.rs`: what rules measure, read from the store once per evaluation (the seam where
//!   streams and backpressure add their figures).
//! - `eval.rs`: an alert's life as pure functions (pending, firing after `for_ms`, resolved).
//! - `lease.rs`: the lease that makes one node of a shared database the evaluator.
//! - `notify.rs`: webhook notifications through the push worker, one per change.
//! - `pattern.rs`: targets as names or `*`/`?` patterns.
//!
//! Every `evaluate_ms` the evaluator (the lease holder) reads the rules, the figures and the
//! stored alerts, steps each (rule, subject) alert, and writes what changed; an alert's state is
//! a record, so it survives restarts and a change of evaluator. The built-in rules
//! `dlq-not-empty` (any dead-letter queue holding messages) and `saga-failed` (any saga
//! instance left `failed`) are there unless turned off by deleting them, and a rule posted
//! under a built-in's name replaces it (to add a webhook, say).

mod eval;
mod figures;
mod lease;
mod model;
mod notify;
mod pattern;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use sluice_clock::Clock;
use sluice_core::ValidationError;
use sluice_store::{RECORD_LIST_LIMIT_MAX, Store, StoreError};

pub use figures::Figures;
pub use lease::{LEASE_KEY, LEASE_KIND};
pub use model::{
    ALERT_FOR_MS_MAX, ALERT_GROWTH_WINDOW_MS_MAX, ALERT_RULE_NAME_LEN_MAX, ALERT_RULES_MAX,
    ALERT_SUBJECTS_PER_RULE_MAX, ALERT_TARGET_LEN_MAX, ALERT_WEBHOOK_LEN_MAX, BUILTIN_DLQ_RULE, BUILTIN_RULES,
    BUILTIN_SAGA_RULE, Kind, RULE_KIND, RuleRecord, RuleSpec, STATE_KIND, StateRecord, Status, is_builtin,
};
pub use notify::{ALERT_DELIVERY_POLICY, ALERT_QUEUE_PREFIX, payload as notification_payload, queue_name};

use eval::{Change, Growth, Rates};
use model::{ALERT_FORMAT, Notice, decode, encode, state_key};

/// How often the evaluator runs unless configured.
pub const ALERT_EVALUATE_MS_DEFAULT: u64 = 5_000;
/// How long the evaluator's lease lasts past each renewal.
pub const ALERT_LEASE_MS_DEFAULT: u64 = 15_000;
/// A firing or pending alert's stored figure is refreshed at most this often (a change of
/// status is written at once).
pub const ALERT_VALUE_REFRESH_MS: u64 = 30_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlertsConfig {
    pub evaluate_ms: u64,
    pub lease_ms: u64,
}

impl Default for AlertsConfig {
    fn default() -> Self {
        AlertsConfig { evaluate_ms: ALERT_EVALUATE_MS_DEFAULT, lease_ms: ALERT_LEASE_MS_DEFAULT }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AlertError {
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("no alert rule is named {0:?}")]
    RuleNotFound(String),
    #[error("an alert rule named {0:?} exists with other settings; delete it first")]
    RuleExists(String),
    #[error("this server already holds {ALERT_RULES_MAX} alert rules")]
    TooManyRules,
    #[error("a stored alert record is unreadable: {0}")]
    Corrupt(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A rule as callers see it.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleView {
    pub record: RuleRecord,
    /// The built-in rule, as it stands or as replaced.
    pub builtin: bool,
}

/// What one evaluation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evaluation {
    /// False when another node holds the lease (nothing was evaluated here).
    pub evaluated: bool,
    pub fired: u64,
    pub resolved: u64,
    /// Notifications handed to webhooks' queues.
    pub notified: u64,
    pub firing: u64,
}

/// What the evaluator remembers between passes (lost on restart, see `eval.rs`).
#[derive(Default)]
struct Memory {
    growth: Growth,
    rates: Rates,
}

/// The alerts service. One per server.
pub struct Alerts {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: AlertsConfig,
    /// This node's id in the lease.
    node: String,
    memory: Mutex<Memory>,
    /// One evaluation at a time on this node (the loop and a test's call).
    evaluating: tokio::sync::Mutex<()>,
}

fn corrupt(e: String) -> AlertError {
    AlertError::Corrupt(e)
}

fn random_secret() -> String {
    let mut seed = uuid::Uuid::now_v7().as_bytes().to_vec();
    seed.extend_from_slice(uuid::Uuid::now_v7().as_bytes());
    sluice_core::broker::content_dedup_id(&seed)
}

impl Alerts {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, config: AlertsConfig) -> Alerts {
        Alerts {
            store,
            clock,
            config,
            node: uuid::Uuid::now_v7().to_string(),
            memory: Mutex::new(Memory::default()),
            evaluating: tokio::sync::Mutex::new(()),
        }
    }

    pub fn config(&self) -> AlertsConfig {
        self.config
    }

    async fn stored_rule(&self, name: &str) -> Result<Option<(RuleRecord, Vec<u8>)>, AlertError> {
        let Some(bytes) = self.store.get_record(RULE_KIND, name).await? else { return Ok(None) };
        Ok(Some((decode::<RuleRecord>(&bytes, "alert rule").map_err(corrupt)?, bytes)))
    }

    /// Creates a rule: `(rule, true)` when new (or replacing the built-in one as it stood),
    /// `(rule, false)` when one with these settings exists, `RuleExists` when one with other
    /// settings does.
    pub async fn create_rule(&self, spec: RuleSpec) -> Result<(RuleView, bool), AlertError> {
        model::validate(&spec)?;
        let builtin = is_builtin(&spec.name);
        let existing = self.stored_rule(&spec.name).await?;
        match &existing {
            Some((rule, _)) if rule.matches(&spec) => return Ok((RuleView { record: rule.clone(), builtin }, false)),
            Some((rule, _)) if !rule.disabled => return Err(AlertError::RuleExists(spec.name)),
            _ => {}
        }
        if !builtin && existing.is_none() {
            let stored = self.store.list_records(RULE_KIND, "", None, RECORD_LIST_LIMIT_MAX).await?;
            let counted = stored.iter().filter(|r| !is_builtin(&r.key)).count();
            if counted >= ALERT_RULES_MAX {
                return Err(AlertError::TooManyRules);
            }
        }
        let record = RuleRecord {
            format: ALERT_FORMAT,
            signing_secret: spec.webhook.as_ref().map(|_| random_secret()),
            name: spec.name,
            kind: spec.kind,
            target: spec.target,
            threshold: spec.threshold,
            for_ms: spec.for_ms,
            webhook: spec.webhook,
            disabled: false,
            created_at_ms: self.clock.now_ms(),
        };
        if record.webhook.is_some() {
            notify::create_queue(self.store.as_ref(), &record.name).await?;
        }
        let written = match existing {
            Some((_, bytes)) => self.store.replace_record(RULE_KIND, &record.name, bytes, encode(&record)).await?,
            None => self.store.insert_record(RULE_KIND, &record.name, encode(&record)).await?,
        };
        if !written {
            // Another call wrote the rule meanwhile: the same answer as if it had come first.
            let spec = RuleSpec {
                name: record.name.clone(),
                kind: record.kind,
                target: record.target.clone(),
                threshold: record.threshold,
                for_ms: record.for_ms,
                webhook: record.webhook.clone(),
            };
            return match self.stored_rule(&record.name).await? {
                Some((rule, _)) if rule.matches(&spec) => Ok((RuleView { record: rule, builtin }, false)),
                _ => Err(AlertError::RuleExists(record.name)),
            };
        }
        Ok((RuleView { record, builtin }, true))
    }

    /// Every rule in name order, the built-in one included unless it is turned off.
    pub async fn list_rules(&self) -> Result<Vec<RuleView>, AlertError> {
        let mut rules = Vec::new();
        let mut builtins_stored = HashSet::new();
        let mut after: Option<String> = None;
        loop {
            let page = self.store.list_records(RULE_KIND, "", after.as_deref(), RECORD_LIST_LIMIT_MAX).await?;
            let last = page.len() < RECORD_LIST_LIMIT_MAX;
            after = page.last().map(|r| r.key.clone());
            for record in page {
                let rule = decode::<RuleRecord>(&record.value, "alert rule").map_err(corrupt)?;
                let builtin = is_builtin(&rule.name);
                if builtin {
                    builtins_stored.insert(rule.name.clone());
                }
                if !rule.disabled {
                    rules.push(RuleView { record: rule, builtin });
                }
            }
            if last {
                break;
            }
        }
        for name in BUILTIN_RULES.into_iter().filter(|n| !builtins_stored.contains(*n)) {
            rules.extend(model::builtin(name).map(|record| RuleView { record, builtin: true }));
        }
        rules.sort_by(|a, b| a.record.name.cmp(&b.record.name));
        Ok(rules)
    }

    pub async fn get_rule(&self, name: &str) -> Result<RuleView, AlertError> {
        let builtin = is_builtin(name);
        match self.stored_rule(name).await? {
            Some((rule, _)) if !rule.disabled => Ok(RuleView { record: rule, builtin }),
            None if builtin => Ok(RuleView { record: model::builtin(name).expect("a built-in rule"), builtin }),
            _ => Err(AlertError::RuleNotFound(name.to_string())),
        }
    }

    /// Deletes a rule, its alerts and its notification queue (notifications not yet delivered
    /// go with it). Deleting the built-in rule turns it off until a rule of its name is posted.
    pub async fn delete_rule(&self, name: &str) -> Result<(), AlertError> {
        let view = self.get_rule(name).await?;
        if view.builtin {
            let mut off = model::builtin(name).expect("a built-in rule");
            off.disabled = true;
            off.created_at_ms = self.clock.now_ms();
            self.store.put_record(RULE_KIND, name, encode(&off)).await?;
        } else {
            self.store.delete_record(RULE_KIND, name).await?;
        }
        notify::delete_queue(self.store.as_ref(), name).await?;
        for (key, _) in self.states(&format!("{name}/")).await? {
            self.store.delete_record(STATE_KIND, &key).await?;
        }
        Ok(())
    }

    /// Stored alerts whose keys start with `prefix`, by key.
    async fn states(&self, prefix: &str) -> Result<Vec<(String, StateRecord)>, AlertError> {
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self.store.list_records(STATE_KIND, prefix, after.as_deref(), RECORD_LIST_LIMIT_MAX).await?;
            let last = page.len() < RECORD_LIST_LIMIT_MAX;
            after = page.last().map(|r| r.key.clone());
            for record in page {
                out.push((record.key, decode::<StateRecord>(&record.value, "alert").map_err(corrupt)?));
            }
            if last {
                return Ok(out);
            }
        }
    }

    /// The alerts firing now (and, with `pending`, those waiting out their `for_ms`), with the
    /// rule each belongs to, firing ones first, then by rule and subject.
    pub async fn alerts(&self, pending: bool) -> Result<Vec<(StateRecord, RuleRecord)>, AlertError> {
        let rules: HashMap<String, RuleRecord> =
            self.list_rules().await?.into_iter().map(|view| (view.record.name.clone(), view.record)).collect();
        let mut out: Vec<(StateRecord, RuleRecord)> = self
            .states("")
            .await?
            .into_iter()
            .filter(|(_, s)| s.status == Status::Firing || (pending && s.status == Status::Pending))
            .filter_map(|(_, s)| {
                let rule = rules.get(&s.rule)?.clone();
                Some((s, rule))
            })
            .collect();
        out.sort_by(|(a, _), (b, _)| {
            (a.status != Status::Firing, &a.rule, &a.subject).cmp(&(b.status != Status::Firing, &b.rule, &b.subject))
        });
        Ok(out)
    }

    /// One evaluation pass, if this node holds (or takes) the lease.
    pub async fn evaluate(&self) -> Result<Evaluation, AlertError> {
        let _one = self.evaluating.lock().await;
        let now = self.clock.now_ms();
        let held = lease::acquire(self.store.as_ref(), &self.node, now, self.config.lease_ms).await?;
        metrics::gauge!("sluice_alert_evaluator").set(if held { 1.0 } else { 0.0 });
        if !held {
            return Ok(Evaluation::default());
        }
        let mut outcome = Evaluation { evaluated: true, ..Evaluation::default() };
        let rules: Vec<RuleRecord> = self.list_rules().await?.into_iter().map(|v| v.record).collect();
        let figures = Figures::read(self.store.as_ref()).await?;
        let mut states: HashMap<String, StateRecord> = self.states("").await?.into_iter().collect();
        let mut live = HashSet::new();
        for rule in &rules {
            let mut subjects = figures.subjects(rule.kind, &rule.target);
            if subjects.len() > ALERT_SUBJECTS_PER_RULE_MAX {
                let skipped = (subjects.len() - ALERT_SUBJECTS_PER_RULE_MAX) as u64;
                metrics::counter!("sluice_alert_subjects_skipped_total", "rule" => rule.name.clone())
                    .increment(skipped);
                subjects.truncate(ALERT_SUBJECTS_PER_RULE_MAX);
            }
            for (subject, raw) in subjects {
                let key = state_key(&rule.name, &subject);
                let value = {
                    let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
                    match rule.kind {
                        Kind::LagGrowing => memory.growth.record(&key, now, raw, rule.for_ms),
                        Kind::RejectedRateAbove => memory.rates.record(&key, now, raw as u64),
                        _ => Some(raw),
                    }
                };
                let existing = states.remove(&key);
                self.apply(rule, &subject, existing, value, now, &mut outcome).await?;
                live.insert(key);
            }
            // Alerts whose subject is gone (a queue deleted): its condition no longer holds.
            let prefix = format!("{}/", rule.name);
            let gone: Vec<String> = states.keys().filter(|k| k.starts_with(&prefix)).cloned().collect();
            for key in gone {
                if let Some(state) = states.remove(&key) {
                    let subject = state.subject.clone();
                    self.apply(rule, &subject, Some(state), Some(0.0), now, &mut outcome).await?;
                }
            }
        }
        // What is left belongs to rules deleted or turned off meanwhile.
        for key in states.into_keys() {
            self.store.delete_record(STATE_KIND, &key).await?;
        }
        {
            let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
            memory.growth.retain(&live);
            memory.rates.retain(&live);
        }
        metrics::gauge!("sluice_alerts_firing").set(outcome.firing as f64);
        Ok(outcome)
    }

    /// Steps one alert with the figure `value` (`None`: not measured) and stores the result,
    /// notifying its webhook of a change.
    async fn apply(
        &self,
        rule: &RuleRecord,
        subject: &str,
        existing: Option<StateRecord>,
        value: Option<f64>,
        now: u64,
        outcome: &mut Evaluation,
    ) -> Result<(), AlertError> {
        let key = state_key(&rule.name, subject);
        let stored = existing.is_some();
        let mut state = existing.unwrap_or_else(|| StateRecord {
            format: ALERT_FORMAT,
            rule: rule.name.clone(),
            subject: subject.to_string(),
            status: Status::Resolved,
            since_ms: now,
            value: value.unwrap_or(0.0),
            evaluated_at_ms: 0,
            changes: 0,
            notice: None,
        });
        // A notice left by a pass that stopped half-way goes out first (deduplicated if it had).
        if let Some(notice) = state.notice.take() {
            self.notify(rule, subject, &notice, outcome).await?;
        }
        let phase = (stored && state.status != Status::Resolved).then_some((state.status, state.since_ms));
        // `lag_growing` measures over its `for_ms` already, so it fires at once.
        let for_ms = if rule.kind == Kind::LagGrowing { 0 } else { rule.for_ms };
        let (next, change) = eval::step(phase, value.map(|v| v > rule.threshold), now, for_ms);
        let Some((status, since_ms)) = next else {
            if stored {
                self.store.delete_record(STATE_KIND, &key).await?;
            }
            return Ok(());
        };
        let refresh = value.is_some_and(|v| v != state.value)
            && now.saturating_sub(state.evaluated_at_ms) >= ALERT_VALUE_REFRESH_MS;
        let changed = Some((status, since_ms)) != phase;
        if let Some(v) = value {
            state.value = v;
        }
        let notice = change.map(|change| {
            metrics::counter!("sluice_alert_changes_total", "rule" => rule.name.clone(),
                "status" => if change == Change::Fired { "firing" } else { "resolved" })
            .increment(1);
            match change {
                Change::Fired => outcome.fired += 1,
                Change::Resolved => outcome.resolved += 1,
            }
            state.changes += 1;
            Notice {
                sequence: state.changes,
                status,
                at_ms: now,
                value: state.value,
                // A resolve names the firing it ends.
                since_ms: if change == Change::Resolved { state.since_ms } else { since_ms },
            }
        });
        state.status = status;
        state.since_ms = since_ms;
        if status == Status::Firing {
            outcome.firing += 1;
        }
        if !(changed || refresh || notice.is_some() || !stored) {
            return Ok(());
        }
        state.evaluated_at_ms = now;
        match notice.filter(|_| rule.webhook.is_some()) {
            Some(notice) => {
                state.notice = Some(notice.clone());
                self.store.put_record(STATE_KIND, &key, encode(&state)).await?;
                self.notify(rule, subject, &notice, outcome).await?;
                state.notice = None;
            }
            None if status == Status::Resolved => {}
            None => return Ok(self.store.put_record(STATE_KIND, &key, encode(&state)).await?),
        }
        if status == Status::Resolved {
            self.store.delete_record(STATE_KIND, &key).await?;
        } else {
            self.store.put_record(STATE_KIND, &key, encode(&state)).await?;
        }
        Ok(())
    }

    async fn notify(
        &self,
        rule: &RuleRecord,
        subject: &str,
        notice: &Notice,
        outcome: &mut Evaluation,
    ) -> Result<(), AlertError> {
        if rule.webhook.is_none() {
            return Ok(());
        }
        notify::send(self.store.as_ref(), rule, subject, notice).await?;
        outcome.notified += 1;
        Ok(())
    }

    /// Evaluates every `evaluate_ms` until aborted, the first time at once.
    ///
    /// The cadence is real time, a polling cadence (see `sluice-clock`): it decides only how
    /// soon a change is noticed. Everything an evaluation decides (`for_ms`, the lease's expiry,
    /// the times of alerts and notifications) is on the services' clock, and two evaluations at
    /// the same clock time change nothing the first did not.
    pub fn spawn(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let alerts = self.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(std::time::Duration::from_millis(alerts.config.evaluate_ms.max(1)));
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                if let Err(e) = alerts.evaluate().await {
                    tracing::warn!("alert evaluation failed: {e}");
                }
            }
        })
    }

    /// Gives up the lease if this node holds it (at shutdown).
    pub async fn release(&self) {
        if let Err(e) = lease::release(self.store.as_ref(), &self.node).await {
            tracing::debug!("alert lease not released: {e}");
        }
    }

    /// The push worker's source of webhook targets.
    pub fn webhook_targets(&self) -> Arc<dyn crate::topics::worker::TargetSource> {
        Arc::new(notify::WebhookTargets { store: self.store.clone() })
    }
}
