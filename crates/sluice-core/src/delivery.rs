//! When to retry an HTTP push that failed: SNS's delivery policy for HTTP/S subscriptions.
//!
//! A policy allows `retries` retries after the first attempt, in four phases (SNS's):
//!
//! | Phase | Retries | Delay before each |
//! |---|---|---|
//! | immediate | `no_delay_retries` | none |
//! | pre-backoff | `min_delay_retries` | `min_delay_ms` |
//! | backoff | what the other phases leave | from `min_delay_ms` growing towards `max_delay_ms` |
//! | post-backoff | `max_delay_retries` | `max_delay_ms` |
//!
//! In the backoff phase the delay of its `k`-th retry is `min_delay_ms` plus a full-jitter draw
//! from [`Backoff`] with base `min_delay_ms` and cap `max_delay_ms - min_delay_ms`: between
//! `min_delay_ms` and `min(max_delay_ms, min_delay_ms · (1 + 2^k))`. SNS's four backoff
//! functions (`linear`, `arithmetic`, `geometric`, `exponential`) are accepted and kept for
//! display, but Sluice spaces every one of them this way; with SNS's default policy (3 retries,
//! 20 s apart) the delays are exactly SNS's.
//!
//! [`DeliveryPolicy::parse`] reads a subscription's `DeliveryPolicy` attribute
//! (`{"healthyRetryPolicy": {...}, "throttlePolicy": {...}, "requestPolicy": {...}}`, delays in
//! seconds) and [`TopicDeliveryPolicy::parse`] a topic's (`{"http": {"defaultHealthyRetryPolicy":
//! ..., "disableSubscriptionOverrides": ..}}`). Missing fields take SNS's defaults; unknown
//! fields are ignored (AWS's own effective policies carry `sicklyRetryPolicy` and `guaranteed`).
//! The error messages are Sluice's (AWS's are not recorded), framed as SNS frames parameter
//! errors: `Invalid parameter: DeliveryPolicy: <reason>`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::TimeMs;
use crate::backoff::Backoff;
use crate::filter::SnsCall;
use crate::limits::{
    DELIVERY_CONTENT_TYPE_LEN_MAX, DELIVERY_DELAY_MS_MAX, DELIVERY_DELAY_MS_MIN, DELIVERY_POLICY_BYTES_MAX,
    DELIVERY_RETRIES_MAX, DELIVERY_RETRY_TIME_MS_MAX,
};

/// How SNS names the shape of the backoff phase. Sluice accepts all four and spaces retries
/// the same way (see the module documentation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackoffFunction {
    #[default]
    Linear,
    Arithmetic,
    Geometric,
    Exponential,
}

impl BackoffFunction {
    pub const fn as_str(self) -> &'static str {
        match self {
            BackoffFunction::Linear => "linear",
            BackoffFunction::Arithmetic => "arithmetic",
            BackoffFunction::Geometric => "geometric",
            BackoffFunction::Exponential => "exponential",
        }
    }
}

/// One subscription's retry schedule and delivery options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryPolicy {
    /// Retries after the first attempt (`numRetries`).
    pub retries: u32,
    /// Retries of the immediate phase (`numNoDelayRetries`).
    pub no_delay_retries: u32,
    /// Retries of the pre-backoff phase (`numMinDelayRetries`).
    pub min_delay_retries: u32,
    /// Retries of the post-backoff phase (`numMaxDelayRetries`).
    pub max_delay_retries: u32,
    /// `minDelayTarget`, in milliseconds.
    pub min_delay_ms: u64,
    /// `maxDelayTarget`, in milliseconds.
    pub max_delay_ms: u64,
    pub backoff_function: BackoffFunction,
    /// `throttlePolicy.maxReceivesPerSecond`: the most deliveries per second to the endpoint.
    pub max_receives_per_second: Option<u32>,
    /// `requestPolicy.headerContentType`: the `Content-Type` of the POSTs.
    pub header_content_type: Option<String>,
}

impl Default for DeliveryPolicy {
    /// SNS's default for HTTP/S: 3 retries, 20 s apart (recorded from AWS).
    fn default() -> Self {
        DeliveryPolicy {
            retries: 3,
            no_delay_retries: 0,
            min_delay_retries: 0,
            max_delay_retries: 0,
            min_delay_ms: 20_000,
            max_delay_ms: 20_000,
            backoff_function: BackoffFunction::Linear,
            max_receives_per_second: None,
            header_content_type: None,
        }
    }
}

/// A delivery policy SNS-style validation refuses. `Display` gives the reason to put after
/// `Invalid parameter: DeliveryPolicy: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryPolicyError {
    /// The text is not JSON (the prefix is SNS's, recorded for other policy attributes).
    #[error("failed to parse JSON. {detail}")]
    Json { detail: String },
    #[error("{reason}")]
    Invalid { reason: String },
}

impl DeliveryPolicyError {
    fn invalid(reason: impl Into<String>) -> Self {
        DeliveryPolicyError::Invalid { reason: reason.into() }
    }

    /// The whole `InvalidParameter` message, framed as SNS frames attribute errors.
    pub fn sns_message(&self, call: SnsCall) -> String {
        match call {
            SnsCall::Subscribe => format!("Invalid parameter: Attributes Reason: DeliveryPolicy: {self}"),
            SnsCall::SetSubscriptionAttributes => format!("Invalid parameter: DeliveryPolicy: {self}"),
        }
    }
}

impl DeliveryPolicy {
    /// Attempts in all: the first and every retry.
    pub fn attempts_max(&self) -> u32 {
        self.retries.saturating_add(1)
    }

    /// When to make the next attempt, after attempt number `attempt` (1 for the first) failed
    /// at `now_ms`; `None` once the last attempt has failed, when the message goes to the
    /// subscription's dead-letter queue. `attempt == 0` (nothing tried yet) is `now_ms`.
    /// `draw` is a uniform random number in `0..=u64::MAX`.
    pub fn next_attempt_at(&self, now_ms: TimeMs, attempt: u32, draw: u64) -> Option<TimeMs> {
        let Some(retry) = attempt.checked_sub(1) else { return Some(now_ms) };
        self.retry_delay_ms(retry, draw).map(|delay| now_ms.saturating_add(delay))
    }

    /// The delay before retry number `retry` (0 for the first retry), `None` past the last.
    pub fn retry_delay_ms(&self, retry: u32, draw: u64) -> Option<u64> {
        if retry >= self.retries {
            return None;
        }
        let pre_backoff_end = self.no_delay_retries.saturating_add(self.min_delay_retries);
        let backoff_end = self.retries.saturating_sub(self.max_delay_retries);
        let delay = if retry < self.no_delay_retries {
            0
        } else if retry < pre_backoff_end {
            self.min_delay_ms
        } else if retry < backoff_end {
            let spread =
                Backoff { base_ms: self.min_delay_ms, cap_ms: self.max_delay_ms.saturating_sub(self.min_delay_ms) };
            self.min_delay_ms.saturating_add(spread.delay_ms(retry - pre_backoff_end, draw))
        } else {
            self.max_delay_ms
        };
        Some(delay)
    }

    /// Checks SNS's documented bounds, and that the retries could fit SNS's hour: even at the
    /// shortest delays each phase allows, they must not take longer than
    /// [`DELIVERY_RETRY_TIME_MS_MAX`].
    pub fn validate(&self) -> Result<(), DeliveryPolicyError> {
        if self.retries > DELIVERY_RETRIES_MAX {
            return Err(DeliveryPolicyError::invalid(format!(
                "numRetries must be between 0 and {DELIVERY_RETRIES_MAX}"
            )));
        }
        let phases =
            u64::from(self.no_delay_retries) + u64::from(self.min_delay_retries) + u64::from(self.max_delay_retries);
        if phases > u64::from(self.retries) {
            return Err(DeliveryPolicyError::invalid(
                "numNoDelayRetries + numMinDelayRetries + numMaxDelayRetries must not exceed numRetries",
            ));
        }
        if !(DELIVERY_DELAY_MS_MIN..=DELIVERY_DELAY_MS_MAX).contains(&self.min_delay_ms) {
            return Err(DeliveryPolicyError::invalid(format!(
                "minDelayTarget must be from {} to {} seconds",
                DELIVERY_DELAY_MS_MIN / 1_000,
                DELIVERY_DELAY_MS_MAX / 1_000
            )));
        }
        if !(self.min_delay_ms..=DELIVERY_DELAY_MS_MAX).contains(&self.max_delay_ms) {
            return Err(DeliveryPolicyError::invalid(format!(
                "maxDelayTarget must be from minDelayTarget to {} seconds",
                DELIVERY_DELAY_MS_MAX / 1_000
            )));
        }
        let backoff_retries = u64::from(self.retries) - phases;
        let shortest_ms = (u64::from(self.min_delay_retries) + backoff_retries) * self.min_delay_ms
            + u64::from(self.max_delay_retries) * self.max_delay_ms;
        if shortest_ms > DELIVERY_RETRY_TIME_MS_MAX {
            return Err(DeliveryPolicyError::invalid(format!(
                "The total retry time must not exceed {} seconds",
                DELIVERY_RETRY_TIME_MS_MAX / 1_000
            )));
        }
        if self.max_receives_per_second == Some(0) {
            return Err(DeliveryPolicyError::invalid("maxReceivesPerSecond must be at least 1"));
        }
        if let Some(content_type) = &self.header_content_type
            && (content_type.is_empty() || content_type.len() > DELIVERY_CONTENT_TYPE_LEN_MAX)
        {
            return Err(DeliveryPolicyError::invalid(format!(
                "headerContentType must be 1 to {DELIVERY_CONTENT_TYPE_LEN_MAX} bytes"
            )));
        }
        Ok(())
    }

    /// Reads a subscription's `DeliveryPolicy` attribute.
    pub fn parse(text: &str) -> Result<DeliveryPolicy, DeliveryPolicyError> {
        let root = parse_object(text)?;
        let mut policy = DeliveryPolicy::default();
        read_sections(&root, "healthyRetryPolicy", "throttlePolicy", "requestPolicy", &mut policy)?;
        policy.validate()?;
        Ok(policy)
    }
}

/// A topic's `DeliveryPolicy` attribute: the HTTP/S default for its subscriptions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicDeliveryPolicy {
    pub http: DeliveryPolicy,
    /// When set, subscriptions' own policies are ignored.
    pub disable_subscription_overrides: bool,
}

impl TopicDeliveryPolicy {
    pub fn parse(text: &str) -> Result<TopicDeliveryPolicy, DeliveryPolicyError> {
        let root = parse_object(text)?;
        let mut topic = TopicDeliveryPolicy::default();
        match root.get("http") {
            None | Some(Value::Null) => {}
            Some(Value::Object(http)) => {
                read_sections(
                    http,
                    "defaultHealthyRetryPolicy",
                    "defaultThrottlePolicy",
                    "defaultRequestPolicy",
                    &mut topic.http,
                )?;
                topic.disable_subscription_overrides = match http.get("disableSubscriptionOverrides") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => {
                        return Err(DeliveryPolicyError::invalid("disableSubscriptionOverrides must be true or false"));
                    }
                };
            }
            Some(_) => return Err(DeliveryPolicyError::invalid("http must be an object")),
        }
        topic.http.validate()?;
        Ok(topic)
    }

    /// The policy a subscription's pushes follow: its own, unless it has none or the topic
    /// disables overrides.
    pub fn effective_for(&self, subscription: Option<&DeliveryPolicy>) -> DeliveryPolicy {
        match subscription {
            Some(own) if !self.disable_subscription_overrides => own.clone(),
            _ => self.http.clone(),
        }
    }
}

fn parse_object(text: &str) -> Result<Map<String, Value>, DeliveryPolicyError> {
    if text.len() > DELIVERY_POLICY_BYTES_MAX {
        return Err(DeliveryPolicyError::invalid(format!(
            "A delivery policy can not be larger than {DELIVERY_POLICY_BYTES_MAX} bytes"
        )));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(DeliveryPolicyError::invalid("The delivery policy must be a JSON object")),
        Err(e) => Err(DeliveryPolicyError::Json { detail: e.to_string() }),
    }
}

/// Reads the retry, throttle and request sections (named as a subscription or a topic names
/// them) into `policy`, over its defaults.
fn read_sections(
    root: &Map<String, Value>,
    retry: &str,
    throttle: &str,
    request: &str,
    policy: &mut DeliveryPolicy,
) -> Result<(), DeliveryPolicyError> {
    if let Some(section) = section(root, retry)? {
        read_retry_policy(section, policy)?;
    }
    if let Some(section) = section(root, throttle)? {
        policy.max_receives_per_second =
            integer(section, "maxReceivesPerSecond", u64::from(u32::MAX))?.map(|n| n as u32);
    }
    if let Some(section) = section(root, request)? {
        policy.header_content_type = match section.get("headerContentType") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(DeliveryPolicyError::invalid("headerContentType must be a string")),
        };
    }
    Ok(())
}

fn read_retry_policy(section: &Map<String, Value>, policy: &mut DeliveryPolicy) -> Result<(), DeliveryPolicyError> {
    let count = |name| integer(section, name, u64::from(DELIVERY_RETRIES_MAX)).map(|n| n.map(|n| n as u32));
    if let Some(n) = count("numRetries")? {
        policy.retries = n;
    }
    if let Some(n) = count("numNoDelayRetries")? {
        policy.no_delay_retries = n;
    }
    if let Some(n) = count("numMinDelayRetries")? {
        policy.min_delay_retries = n;
    }
    if let Some(n) = count("numMaxDelayRetries")? {
        policy.max_delay_retries = n;
    }
    let seconds_max = DELIVERY_DELAY_MS_MAX / 1_000;
    let min = integer(section, "minDelayTarget", seconds_max)?.map(|s| s * 1_000);
    let max = integer(section, "maxDelayTarget", seconds_max)?.map(|s| s * 1_000);
    // One target alone moves the other's default out of its way rather than clash with it.
    match (min, max) {
        (Some(min), Some(max)) => (policy.min_delay_ms, policy.max_delay_ms) = (min, max),
        (Some(min), None) => (policy.min_delay_ms, policy.max_delay_ms) = (min, policy.max_delay_ms.max(min)),
        (None, Some(max)) => (policy.min_delay_ms, policy.max_delay_ms) = (policy.min_delay_ms.min(max), max),
        (None, None) => {}
    }
    match section.get("backoffFunction") {
        None | Some(Value::Null) => {}
        Some(Value::String(name)) => {
            policy.backoff_function = match name.as_str() {
                "linear" => BackoffFunction::Linear,
                "arithmetic" => BackoffFunction::Arithmetic,
                "geometric" => BackoffFunction::Geometric,
                "exponential" => BackoffFunction::Exponential,
                other => {
                    return Err(DeliveryPolicyError::invalid(format!(
                        "backoffFunction must be linear, arithmetic, geometric or exponential, not {other}"
                    )));
                }
            }
        }
        Some(_) => {
            return Err(DeliveryPolicyError::invalid(
                "backoffFunction must be linear, arithmetic, geometric or exponential",
            ));
        }
    }
    Ok(())
}

/// `root[name]` if it is an object; `None` if absent or null.
fn section<'a>(
    root: &'a Map<String, Value>,
    name: &str,
) -> Result<Option<&'a Map<String, Value>>, DeliveryPolicyError> {
    match root.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(_) => Err(DeliveryPolicyError::invalid(format!("{name} must be an object"))),
    }
}

/// `section[name]` as a whole number from 0 to `max`; `None` if absent or null.
fn integer(section: &Map<String, Value>, name: &str, max: u64) -> Result<Option<u64>, DeliveryPolicyError> {
    match section.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n <= max) => Ok(n.as_u64()),
        Some(_) => Err(DeliveryPolicyError::invalid(format!("{name} must be a whole number from 0 to {max}"))),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn parse_err(text: &str) -> String {
        DeliveryPolicy::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn default_is_three_retries_twenty_seconds_apart() {
        let p = DeliveryPolicy::default();
        assert_eq!(p.attempts_max(), 4);
        let at: Vec<Option<TimeMs>> = (0..=4).map(|a| p.next_attempt_at(1_000, a, u64::MAX)).collect();
        assert_eq!(at, [Some(1_000), Some(21_000), Some(21_000), Some(21_000), None]);
        // Recorded from AWS (the EffectiveDeliveryPolicy of a topic without a policy).
        assert_eq!((p.min_delay_ms, p.max_delay_ms, p.retries), (20_000, 20_000, 3));
        assert_eq!((p.no_delay_retries, p.min_delay_retries, p.max_delay_retries), (0, 0, 0));
        assert_eq!(p.backoff_function.as_str(), "linear");
    }

    #[test]
    fn phases_follow_each_other() {
        let p = DeliveryPolicy::parse(
            r#"{"healthyRetryPolicy": {"numRetries": 10, "numNoDelayRetries": 2, "numMinDelayRetries": 2,
                "numMaxDelayRetries": 2, "minDelayTarget": 1, "maxDelayTarget": 60, "backoffFunction": "exponential"}}"#,
        )
        .unwrap();
        let highest: Vec<Option<u64>> = (0..11).map(|r| p.retry_delay_ms(r, u64::MAX)).collect();
        assert_eq!(
            highest,
            [
                Some(0),
                Some(0),
                Some(1_000),
                Some(1_000),
                Some(2_000),
                Some(3_000),
                Some(5_000),
                Some(9_000),
                Some(60_000),
                Some(60_000),
                None
            ]
        );
        let lowest: Vec<Option<u64>> = (4..8).map(|r| p.retry_delay_ms(r, 0)).collect();
        assert_eq!(lowest, [Some(1_000); 4]);
        assert_eq!(p.next_attempt_at(5_000, 11, 7), None);
        assert_eq!(p.next_attempt_at(5_000, 10, 7), Some(65_000));
    }

    #[test]
    fn backoff_never_leaves_the_targets() {
        let p = DeliveryPolicy { retries: 100, min_delay_ms: 2_000, max_delay_ms: 30_000, ..DeliveryPolicy::default() };
        for retry in 0..100 {
            for draw in [0, 1, u64::MAX / 3, u64::MAX / 2, u64::MAX] {
                let d = p.retry_delay_ms(retry, draw).unwrap();
                assert!((2_000..=30_000).contains(&d), "retry {retry} draw {draw}: {d}");
            }
        }
    }

    #[test]
    fn parses_subscription_and_topic_shapes() {
        let p = DeliveryPolicy::parse(r#"{"healthyRetryPolicy":{"numRetries":5}}"#).unwrap();
        assert_eq!(p, DeliveryPolicy { retries: 5, ..DeliveryPolicy::default() });
        let p = DeliveryPolicy::parse(
            r#"{"healthyRetryPolicy": {"minDelayTarget": 5, "maxDelayTarget": 10, "numRetries": 4, "backoffFunction": "geometric"},
                "sicklyRetryPolicy": null, "throttlePolicy": {"maxReceivesPerSecond": 10},
                "requestPolicy": {"headerContentType": "application/json"}, "guaranteed": false}"#,
        )
        .unwrap();
        assert_eq!(
            (p.min_delay_ms, p.max_delay_ms, p.retries, p.backoff_function, p.max_receives_per_second),
            (5_000, 10_000, 4, BackoffFunction::Geometric, Some(10))
        );
        assert_eq!(p.header_content_type.as_deref(), Some("application/json"));
        // One target alone keeps the other out of its way.
        assert_eq!(
            DeliveryPolicy::parse(r#"{"healthyRetryPolicy":{"maxDelayTarget":5}}"#).unwrap().min_delay_ms,
            5_000
        );
        assert_eq!(
            DeliveryPolicy::parse(r#"{"healthyRetryPolicy":{"minDelayTarget":30}}"#).unwrap().max_delay_ms,
            30_000
        );
        assert_eq!(DeliveryPolicy::parse("{}").unwrap(), DeliveryPolicy::default());

        // Recorded from AWS as a topic's DeliveryPolicy.
        let topic = TopicDeliveryPolicy::parse(
            r#"{"http": {"disableSubscriptionOverrides": false, "defaultRequestPolicy": {"headerContentType": "application/json"}}}"#,
        )
        .unwrap();
        assert_eq!(topic.http.header_content_type.as_deref(), Some("application/json"));
        assert_eq!(topic.http.retries, 3);
        let own = DeliveryPolicy { retries: 9, ..DeliveryPolicy::default() };
        assert_eq!(topic.effective_for(Some(&own)).retries, 9);
        assert_eq!(topic.effective_for(None).retries, 3);
        let locked = TopicDeliveryPolicy::parse(
            r#"{"http": {"defaultHealthyRetryPolicy": {"numRetries": 1}, "disableSubscriptionOverrides": true}}"#,
        )
        .unwrap();
        assert_eq!(locked.effective_for(Some(&own)).retries, 1);
    }

    #[test]
    fn refuses_what_cannot_be_honoured() {
        let cases = [
            ("{not json", "failed to parse JSON. "),
            ("[]", "The delivery policy must be a JSON object"),
            (r#"{"healthyRetryPolicy": 5}"#, "healthyRetryPolicy must be an object"),
            (r#"{"healthyRetryPolicy": {"numRetries": 101}}"#, "numRetries must be a whole number from 0 to 100"),
            (r#"{"healthyRetryPolicy": {"numRetries": -1}}"#, "numRetries must be a whole number from 0 to 100"),
            (r#"{"healthyRetryPolicy": {"numRetries": 2.5}}"#, "numRetries must be a whole number from 0 to 100"),
            (r#"{"healthyRetryPolicy": {"numRetries": "3"}}"#, "numRetries must be a whole number from 0 to 100"),
            (r#"{"healthyRetryPolicy": {"minDelayTarget": 0}}"#, "minDelayTarget must be from 1 to 3600 seconds"),
            (
                r#"{"healthyRetryPolicy": {"maxDelayTarget": 3601}}"#,
                "maxDelayTarget must be a whole number from 0 to 3600",
            ),
            (
                r#"{"healthyRetryPolicy": {"minDelayTarget": 10, "maxDelayTarget": 5}}"#,
                "maxDelayTarget must be from minDelayTarget to 3600 seconds",
            ),
            (
                r#"{"healthyRetryPolicy": {"numRetries": 2, "numNoDelayRetries": 2, "numMaxDelayRetries": 1}}"#,
                "numNoDelayRetries + numMinDelayRetries + numMaxDelayRetries must not exceed numRetries",
            ),
            (
                r#"{"healthyRetryPolicy": {"numRetries": 100, "minDelayTarget": 60, "maxDelayTarget": 60}}"#,
                "The total retry time must not exceed 3600 seconds",
            ),
            (
                r#"{"healthyRetryPolicy": {"backoffFunction": "quadratic"}}"#,
                "backoffFunction must be linear, arithmetic, geometric or exponential, not quadratic",
            ),
            (r#"{"throttlePolicy": {"maxReceivesPerSecond": 0}}"#, "maxReceivesPerSecond must be at least 1"),
            (r#"{"requestPolicy": {"headerContentType": ""}}"#, "headerContentType must be 1 to 256 bytes"),
            (r#"{"requestPolicy": {"headerContentType": 7}}"#, "headerContentType must be a string"),
        ];
        for (text, reason) in cases {
            let got = parse_err(text);
            assert!(got.starts_with(reason), "{text}: got {got:?}, want {reason:?}");
        }
        assert_eq!(
            TopicDeliveryPolicy::parse(r#"{"http": {"disableSubscriptionOverrides": "yes"}}"#).unwrap_err().to_string(),
            "disableSubscriptionOverrides must be true or false"
        );
        assert_eq!(
            DeliveryPolicyError::invalid("x").sns_message(SnsCall::SetSubscriptionAttributes),
            "Invalid parameter: DeliveryPolicy: x"
        );
        // 60 retries a minute apart just fit in the hour.
        assert!(
            DeliveryPolicy::parse(
                r#"{"healthyRetryPolicy": {"numRetries": 60, "minDelayTarget": 60, "maxDelayTarget": 60}}"#
            )
            .is_ok()
        );
    }

    proptest! {
        /// Every valid policy: `attempts_max` attempts, then `None`; every delay between the
        /// phase's bounds, and never past `max_delay_ms`.
        #[test]
        fn schedules_stay_within_their_targets(
            retries in 0u32..=100, phases in (0u32..5, 0u32..5, 0u32..5),
            min_s in 1u64..120, extra_s in 0u64..600, draw in any::<u64>(), attempt in 0u32..=102,
        ) {
            let (no_delay_retries, min_delay_retries, max_delay_retries) = phases;
            let p = DeliveryPolicy {
                retries, no_delay_retries, min_delay_retries, max_delay_retries,
                min_delay_ms: min_s * 1_000, max_delay_ms: (min_s + extra_s) * 1_000,
                ..DeliveryPolicy::default()
            };
            prop_assume!(p.validate().is_ok());
            let now = 1_000_000;
            match p.next_attempt_at(now, attempt, draw) {
                None => prop_assert!(attempt > retries),
                Some(at) if attempt == 0 => prop_assert_eq!(at, now),
                Some(at) => {
                    prop_assert!(attempt <= retries);
                    let delay = at - now;
                    prop_assert!(delay <= p.max_delay_ms);
                    if attempt > no_delay_retries {
                        prop_assert!(delay >= p.min_delay_ms);
                    } else {
                        prop_assert_eq!(delay, 0);
                    }
                }
            }
        }
    }
}
