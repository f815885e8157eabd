//! Alert rules and alert states as stored (store records, JSON with a format number), the
//! built-in rule, and the checks a rule passes before it is stored.
//!
//! A rule is the record `alert_rule/<name>`. An alert, one rule's verdict on one subject (a
//! queue, a subscription), is `alert_state/<rule>/<subject>` while it is pending or firing, and
//! a little longer while a notification of its last change still has to be handed to the push
//! worker. The lease that names the node that evaluates is `alert_lease/evaluator`
//! (`lease.rs`).

use serde::{Deserialize, Serialize};
use sluice_core::ValidationError;

use super::pattern;

pub const RULE_KIND: &str = "alert_rule";
pub const STATE_KIND: &str = "alert_state";
/// The format of every alert record; a reader refuses others rather than guess.
pub const ALERT_FORMAT: u8 = 1;

/// Rules a server holds at most (the built-in one not counted).
pub const ALERT_RULES_MAX: usize = 1_000;
/// A rule's name: 1 to this many of `[A-Za-z0-9_-]` (its notification queue's name,
/// `sluice-alert-<name>.fifo`, must fit a queue name's 80 characters).
pub const ALERT_RULE_NAME_LEN_MAX: usize = 60;
/// A target, a name or a pattern with `*` and `?`, in bytes.
pub const ALERT_TARGET_LEN_MAX: usize = 256;
/// The longest `for_ms`: a day.
pub const ALERT_FOR_MS_MAX: u64 = 24 * 60 * 60 * 1000;
/// The longest window of `lag_growing` (its `for_ms`): an hour, the span of the in-memory lag
/// history it compares against.
pub const ALERT_GROWTH_WINDOW_MS_MAX: u64 = 60 * 60 * 1000;
/// A webhook URL, in bytes.
pub const ALERT_WEBHOOK_LEN_MAX: usize = 2_048;
/// Subjects one rule evaluates at most per pass (queues or subscriptions its target matches,
/// in name order); the rest are skipped and counted in `sluice_alert_subjects_skipped_total`.
pub const ALERT_SUBJECTS_PER_RULE_MAX: usize = 1_000;

/// The rule every server has unless it is turned off: any dead-letter queue holding messages.
pub const BUILTIN_DLQ_RULE: &str = "dlq-not-empty";
/// The other built-in rule: any saga instance left `failed` (a compensation that kept
/// failing: a person must look).
pub const BUILTIN_SAGA_RULE: &str = "saga-failed";
/// Every built-in rule's name.
pub const BUILTIN_RULES: [&str; 2] = [BUILTIN_DLQ_RULE, BUILTIN_SAGA_RULE];

/// Whether `name` is a built-in rule's.
pub fn is_builtin(name: &str) -> bool {
    BUILTIN_RULES.contains(&name)
}

/// What a rule measures and compares with its threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Messages (visible, in flight, delayed) in each dead-letter queue the target matches.
    DlqDepthAbove,
    /// Age in milliseconds of the oldest message of each queue the target matches.
    OldestAgeAboveMs,
    /// Backlog of each subscription (`<topic>/<id>`) the target matches; streams add their
    /// consumer groups (`<stream>/<group>`).
    LagAbove,
    /// Growth of that backlog over the last `for_ms`.
    LagGrowing,
    /// Refusals per second of each resource the target matches (filled in by backpressure).
    RejectedRateAbove,
    /// Failed saga instances, one subject (`<saga>/<instance id>`, figure 1) per instance of
    /// each saga whose name the target matches.
    SagaFailed,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::DlqDepthAbove,
        Kind::OldestAgeAboveMs,
        Kind::LagAbove,
        Kind::LagGrowing,
        Kind::RejectedRateAbove,
        Kind::SagaFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::DlqDepthAbove => "dlq_depth_above",
            Kind::OldestAgeAboveMs => "oldest_age_above_ms",
            Kind::LagAbove => "lag_above",
            Kind::LagGrowing => "lag_growing",
            Kind::RejectedRateAbove => "rejected_rate_above",
            Kind::SagaFailed => "saga_failed",
        }
    }

    pub fn parse(text: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

/// A rule as a caller gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSpec {
    pub name: String,
    pub kind: Kind,
    pub target: String,
    pub threshold: f64,
    pub for_ms: u64,
    pub webhook: Option<String>,
}

/// A rule as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleRecord {
    pub format: u8,
    pub name: String,
    pub kind: Kind,
    pub target: String,
    pub threshold: f64,
    pub for_ms: u64,
    pub webhook: Option<String>,
    /// The key of the `x-sluice-signature` HMAC on every webhook POST, 64 hex digits.
    pub signing_secret: Option<String>,
    /// Only on the built-in rule's name: it was turned off (deleted); nothing else of this
    /// record counts.
    #[serde(default)]
    pub disabled: bool,
    pub created_at_ms: u64,
}

impl RuleRecord {
    /// Whether `spec` asks for this rule as it is (creating it again is then a no-op).
    pub fn matches(&self, spec: &RuleSpec) -> bool {
        !self.disabled
            && self.kind == spec.kind
            && self.target == spec.target
            && self.threshold == spec.threshold
            && self.for_ms == spec.for_ms
            && self.webhook == spec.webhook
    }
}

/// The built-in rule named `name` as it stands when nothing is stored under its name.
pub fn builtin(name: &str) -> Option<RuleRecord> {
    let kind = match name {
        BUILTIN_DLQ_RULE => Kind::DlqDepthAbove,
        BUILTIN_SAGA_RULE => Kind::SagaFailed,
        _ => return None,
    };
    Some(RuleRecord {
        format: ALERT_FORMAT,
        name: name.to_string(),
        kind,
        target: "*".to_string(),
        threshold: 0.0,
        for_ms: 0,
        webhook: None,
        signing_secret: None,
        disabled: false,
        created_at_ms: 0,
    })
}

pub fn validate(spec: &RuleSpec) -> Result<(), ValidationError> {
    let name_ok = !spec.name.is_empty()
        && spec.name.len() <= ALERT_RULE_NAME_LEN_MAX
        && spec.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !name_ok {
        return Err(ValidationError::new(
            "name",
            format!("a rule name is 1 to {ALERT_RULE_NAME_LEN_MAX} letters, digits, '-' or '_'"),
        ));
    }
    pattern::validate(&spec.target, ALERT_TARGET_LEN_MAX)?;
    if !spec.threshold.is_finite() || spec.threshold < 0.0 {
        return Err(ValidationError::new("threshold", "the threshold is a finite number, 0 or more"));
    }
    let for_max = if spec.kind == Kind::LagGrowing { ALERT_GROWTH_WINDOW_MS_MAX } else { ALERT_FOR_MS_MAX };
    if spec.for_ms > for_max {
        return Err(ValidationError::new("for_ms", format!("for_ms is at most {for_max} for {}", spec.kind.as_str())));
    }
    if spec.kind == Kind::LagGrowing && spec.for_ms == 0 {
        return Err(ValidationError::new("for_ms", "lag_growing needs for_ms, the window its growth is measured over"));
    }
    if let Some(url) = &spec.webhook {
        let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
        if url.len() > ALERT_WEBHOOK_LEN_MAX || !scheme_ok || reqwest::Url::parse(url).is_err() {
            return Err(ValidationError::new(
                "notify.webhook",
                format!("a webhook is an http:// or https:// URL of at most {ALERT_WEBHOOK_LEN_MAX} bytes"),
            ));
        }
    }
    Ok(())
}

/// Where an alert stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The condition holds, for less than the rule's `for_ms` so far.
    Pending,
    Firing,
    /// It fired and stopped; the record stays only until its notification is handed over.
    Resolved,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Firing => "firing",
            Status::Resolved => "resolved",
        }
    }
}

/// A change of an alert that its webhook must hear about, kept in the alert's record until it
/// is in the rule's notification queue (deduplicated there by `(rule, subject, sequence)`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notice {
    /// The alert's how-many-th change (1 for the first firing), unique per alert.
    pub sequence: u64,
    /// `firing` or `resolved`.
    pub status: Status,
    pub at_ms: u64,
    pub value: f64,
    /// When the alert began to fire (for a resolve: the firing it ends).
    pub since_ms: u64,
}

/// One alert as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateRecord {
    pub format: u8,
    pub rule: String,
    pub subject: String,
    pub status: Status,
    /// Pending since, or firing since.
    pub since_ms: u64,
    /// The figure at the latest evaluation.
    pub value: f64,
    pub evaluated_at_ms: u64,
    /// Changes notified so far (the sequence of the latest notice).
    pub changes: u64,
    /// A notice not yet in the notification queue.
    pub notice: Option<Notice>,
}

pub fn state_key(rule: &str, subject: &str) -> String {
    format!("{rule}/{subject}")
}

pub fn encode<T: Serialize>(record: &T) -> Vec<u8> {
    // Plain structs of strings and numbers (thresholds are checked finite) always serialise.
    serde_json::to_vec(record).unwrap_or_default()
}

pub fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, String> {
    #[derive(Deserialize)]
    struct Format {
        format: u8,
    }
    let format: Format = serde_json::from_slice(bytes).map_err(|e| format!("{what}: {e}"))?;
    if format.format != ALERT_FORMAT {
        return Err(format!("{what}: record format {}, this version reads {ALERT_FORMAT}", format.format));
    }
    serde_json::from_slice(bytes).map_err(|e| format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, kind: Kind, for_ms: u64) -> RuleSpec {
        RuleSpec { name: name.into(), kind, target: "orders-*".into(), threshold: 5.0, for_ms, webhook: None }
    }

    #[test]
    fn rules_are_checked_before_they_are_stored() {
        assert!(validate(&spec("orders-late", Kind::OldestAgeAboveMs, 60_000)).is_ok());
        let field = |s: RuleSpec| validate(&s).unwrap_err().field;
        assert_eq!(field(spec("", Kind::LagAbove, 0)), "name");
        assert_eq!(field(spec("a/b", Kind::LagAbove, 0)), "name");
        assert_eq!(field(spec(&"n".repeat(ALERT_RULE_NAME_LEN_MAX + 1), Kind::LagAbove, 0)), "name");
        assert!(validate(&spec(&"n".repeat(ALERT_RULE_NAME_LEN_MAX), Kind::LagAbove, 0)).is_ok());
        assert_eq!(field(spec("x", Kind::LagAbove, ALERT_FOR_MS_MAX + 1)), "for_ms");
        assert_eq!(field(spec("x", Kind::LagGrowing, 0)), "for_ms");
        assert_eq!(field(spec("x", Kind::LagGrowing, ALERT_GROWTH_WINDOW_MS_MAX + 1)), "for_ms");
        assert_eq!(field(RuleSpec { threshold: f64::NAN, ..spec("x", Kind::LagAbove, 0) }), "threshold");
        assert_eq!(field(RuleSpec { threshold: -1.0, ..spec("x", Kind::LagAbove, 0) }), "threshold");
        assert_eq!(field(RuleSpec { target: String::new(), ..spec("x", Kind::LagAbove, 0) }), "target");
        let hook = |url: &str| RuleSpec { webhook: Some(url.into()), ..spec("x", Kind::LagAbove, 0) };
        assert!(validate(&hook("https://hooks.example/alerts")).is_ok());
        assert_eq!(field(hook("ftp://x")), "notify.webhook");
        assert_eq!(field(hook(&format!("http://x/{}", "a".repeat(ALERT_WEBHOOK_LEN_MAX)))), "notify.webhook");
    }

    #[test]
    fn kinds_have_the_contract_names() {
        let names: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "dlq_depth_above",
                "oldest_age_above_ms",
                "lag_above",
                "lag_growing",
                "rejected_rate_above",
                "saga_failed"
            ]
        );
        for kind in Kind::ALL {
            assert_eq!(Kind::parse(kind.as_str()), Some(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
    }

    #[test]
    fn records_carry_their_format() {
        let rule = builtin(BUILTIN_DLQ_RULE).unwrap();
        assert_eq!(decode::<RuleRecord>(&encode(&rule), "rule").unwrap(), rule);
        let other = encode(&RuleRecord { format: 9, ..rule });
        assert!(decode::<RuleRecord>(&other, "rule").unwrap_err().contains("format 9"));
    }
}
