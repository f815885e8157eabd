//! `DeliveryPolicy` and `EffectiveDeliveryPolicy` as SNS shows them in `GetTopicAttributes` and
//! `GetSubscriptionAttributes`.
//!
//! SNS does not echo a delivery policy as it was set: it reads it into its own shape and writes
//! that back, with the fields it defaults filled in (recorded from AWS):
//! - a topic's: `{"http": {<sections as set>, "disableSubscriptionOverrides": false}}`, sections
//!   set to `null` left out, other members dropped;
//! - a subscription's: every section (`healthyRetryPolicy`, `sicklyRetryPolicy`,
//!   `throttlePolicy`, `requestPolicy`) as set or `null`, and `"guaranteed": false`.
//!
//! The effective policies add SNS's defaults inside the sections too (the whole retry policy,
//! the topic's `Content-Type`). Sluice keeps the policy text as set (the native API shows that)
//! and normalises it here, on the way out. Members come in SNS's order, so the text reads as
//! AWS's does, although clients compare parsed JSON.

use serde_json::{Map, Value};
use sluice_core::delivery::{DeliveryPolicy, TopicDeliveryPolicy};

/// `Content-Type` of HTTP/S deliveries when the delivery policy names none (SNS's default).
const DEFAULT_CONTENT_TYPE: &str = "text/plain; charset=UTF-8";

/// The sections of a topic's `http` policy before `disableSubscriptionOverrides`, and after it
/// (SNS's order, as its documentation and recorded answers write them).
const TOPIC_SECTIONS_BEFORE: &[&str] = &["defaultHealthyRetryPolicy", "defaultSicklyRetryPolicy"];
const TOPIC_SECTIONS_AFTER: &[&str] = &["defaultThrottlePolicy", "defaultRequestPolicy"];

/// The sections of a subscription's policy, in SNS's order.
const SUBSCRIPTION_SECTIONS: &[&str] = &["healthyRetryPolicy", "sicklyRetryPolicy", "throttlePolicy", "requestPolicy"];

/// A JSON object written with its members in the order given (`serde_json`'s maps sort them).
fn object(members: Vec<(&str, String)>) -> String {
    let members: Vec<String> =
        members.into_iter().map(|(name, value)| format!("{}:{value}", Value::from(name))).collect();
    format!("{{{}}}", members.join(","))
}

fn parsed(text: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}

/// `map[name]` unless it is absent or `null`.
fn present<'a>(map: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    map.get(name).filter(|v| !v.is_null())
}

fn flag(map: &Map<String, Value>, name: &str) -> bool {
    map.get(name).and_then(Value::as_bool).unwrap_or(false)
}

/// A topic's `DeliveryPolicy` as SNS shows it; `None` when it has none. Policies are checked
/// when set, so one that does not parse (which only an older Sluice could have kept) is shown
/// as it was set.
pub fn topic_policy(text: &str) -> Option<String> {
    if text.is_empty() {
        return None;
    }
    let Some(root) = parsed(text) else { return Some(text.to_string()) };
    let http = root.get("http").and_then(Value::as_object).cloned().unwrap_or_default();
    let section = |name: &&'static str| present(&http, name).map(|v| (*name, v.to_string()));
    let mut members: Vec<(&str, String)> = TOPIC_SECTIONS_BEFORE.iter().filter_map(section).collect();
    members.push(("disableSubscriptionOverrides", flag(&http, "disableSubscriptionOverrides").to_string()));
    members.extend(TOPIC_SECTIONS_AFTER.iter().filter_map(section));
    Some(object(vec![("http", object(members))]))
}

/// A topic's `EffectiveDeliveryPolicy`: its `DeliveryPolicy` with SNS's defaults filled in.
pub fn effective_topic_policy(text: Option<&str>) -> String {
    let policy = text.and_then(|t| TopicDeliveryPolicy::parse(t).ok()).unwrap_or_default();
    let content_type = policy.http.header_content_type.clone().unwrap_or_else(|| DEFAULT_CONTENT_TYPE.to_string());
    let mut members = vec![
        ("defaultHealthyRetryPolicy", healthy_retry_policy(&policy.http)),
        ("disableSubscriptionOverrides", policy.disable_subscription_overrides.to_string()),
    ];
    if let Some(rate) = policy.http.max_receives_per_second {
        members.push(("defaultThrottlePolicy", object(vec![("maxReceivesPerSecond", rate.to_string())])));
    }
    members.push(("defaultRequestPolicy", object(vec![("headerContentType", Value::from(content_type).to_string())])));
    object(vec![("http", object(members))])
}

/// A subscription's `DeliveryPolicy` as SNS shows it (see the module documentation).
pub fn subscription_policy(text: &str) -> String {
    let Some(root) = parsed(text) else { return text.to_string() };
    let mut members: Vec<(&str, String)> = SUBSCRIPTION_SECTIONS
        .iter()
        .map(|name| (*name, present(&root, name).map_or_else(|| "null".to_string(), Value::to_string)))
        .collect();
    members.push(("guaranteed", flag(&root, "guaranteed").to_string()));
    object(members)
}

/// An HTTP/S subscription's `EffectiveDeliveryPolicy`: its own policy (or SNS's default) with
/// the retry policy filled in; the sections it does not set stay `null`, as in SNS.
pub fn effective_subscription_policy(text: Option<&str>) -> String {
    let policy = text.and_then(|t| DeliveryPolicy::parse(t).ok()).unwrap_or_default();
    let root = text.and_then(parsed).unwrap_or_default();
    let throttle = policy.max_receives_per_second.map(|rate| object(vec![("maxReceivesPerSecond", rate.to_string())]));
    let request = policy
        .header_content_type
        .as_ref()
        .map(|t| object(vec![("headerContentType", Value::from(t.as_str()).to_string())]));
    object(vec![
        ("healthyRetryPolicy", healthy_retry_policy(&policy)),
        ("sicklyRetryPolicy", "null".to_string()),
        ("throttlePolicy", throttle.unwrap_or_else(|| "null".to_string())),
        ("requestPolicy", request.unwrap_or_else(|| "null".to_string())),
        ("guaranteed", flag(&root, "guaranteed").to_string()),
    ])
}

/// The whole retry policy, delays in seconds, in SNS's order.
fn healthy_retry_policy(p: &DeliveryPolicy) -> String {
    object(vec![
        ("minDelayTarget", (p.min_delay_ms / 1_000).to_string()),
        ("maxDelayTarget", (p.max_delay_ms / 1_000).to_string()),
        ("numRetries", p.retries.to_string()),
        ("numMaxDelayRetries", p.max_delay_retries.to_string()),
        ("numNoDelayRetries", p.no_delay_retries.to_string()),
        ("numMinDelayRetries", p.min_delay_retries.to_string()),
        ("backoffFunction", Value::from(p.backoff_function.as_str()).to_string()),
    ])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn value(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    /// The recorded answers of AWS's `test_topic_delivery_policy_crud`.
    #[test]
    fn topic_policies_as_aws_shows_them() {
        let set = r#"{"http": {"defaultRequestPolicy": {"headerContentType": "application/json"}}}"#;
        assert_eq!(
            topic_policy(set).unwrap(),
            r#"{"http":{"disableSubscriptionOverrides":false,"defaultRequestPolicy":{"headerContentType":"application/json"}}}"#
        );
        let default_retry = json!({"minDelayTarget": 20, "maxDelayTarget": 20, "numRetries": 3, "numMaxDelayRetries": 0,
                   "numNoDelayRetries": 0, "numMinDelayRetries": 0, "backoffFunction": "linear"});
        assert_eq!(
            value(&effective_topic_policy(Some(set))),
            json!({"http": {"defaultHealthyRetryPolicy": default_retry, "disableSubscriptionOverrides": false,
                            "defaultRequestPolicy": {"headerContentType": "application/json"}}})
        );
        let set =
            r#"{"http": {"defaultHealthyRetryPolicy": {"minDelayTarget": 5, "maxDelayTarget": 6, "numRetries": 1}}}"#;
        assert_eq!(
            value(&topic_policy(set).unwrap()),
            json!({"http": {"defaultHealthyRetryPolicy": {"minDelayTarget": 5, "maxDelayTarget": 6, "numRetries": 1},
                            "disableSubscriptionOverrides": false}})
        );
        assert_eq!(
            value(&effective_topic_policy(Some(set)))["http"]["defaultHealthyRetryPolicy"],
            json!({"minDelayTarget": 5, "maxDelayTarget": 6, "numRetries": 1, "numMaxDelayRetries": 0,
                   "numNoDelayRetries": 0, "numMinDelayRetries": 0, "backoffFunction": "linear"})
        );
        let set = r#"{"http": {"defaultHealthyRetryPolicy": null}}"#;
        assert_eq!(topic_policy(set).unwrap(), r#"{"http":{"disableSubscriptionOverrides":false}}"#);
        assert_eq!(
            value(&effective_topic_policy(None)),
            json!({"http": {"defaultHealthyRetryPolicy": default_retry, "disableSubscriptionOverrides": false,
                            "defaultRequestPolicy": {"headerContentType": "text/plain; charset=UTF-8"}}})
        );
        assert_eq!(topic_policy(""), None);
    }

    /// The recorded answer of AWS's `test_subscribe_external_http_endpoint_content_type`.
    #[test]
    fn subscription_policies_as_aws_shows_them() {
        let set = r#"{"requestPolicy": {"headerContentType": "text/csv"}}"#;
        assert_eq!(
            subscription_policy(set),
            r#"{"healthyRetryPolicy":null,"sicklyRetryPolicy":null,"throttlePolicy":null,"requestPolicy":{"headerContentType":"text/csv"},"guaranteed":false}"#
        );
        assert_eq!(
            effective_subscription_policy(Some(set)),
            concat!(
                r#"{"healthyRetryPolicy":{"minDelayTarget":20,"maxDelayTarget":20,"numRetries":3,"numMaxDelayRetries":0,"#,
                r#""numNoDelayRetries":0,"numMinDelayRetries":0,"backoffFunction":"linear"},"sicklyRetryPolicy":null,"#,
                r#""throttlePolicy":null,"requestPolicy":{"headerContentType":"text/csv"},"guaranteed":false}"#
            )
        );
        let set = r#"{"healthyRetryPolicy": {"numRetries": 5}, "throttlePolicy": {"maxReceivesPerSecond": 2}, "guaranteed": true}"#;
        let shown = value(&subscription_policy(set));
        assert_eq!(shown["healthyRetryPolicy"], json!({"numRetries": 5}));
        assert_eq!(shown["guaranteed"], json!(true));
        let effective = value(&effective_subscription_policy(Some(set)));
        assert_eq!(effective["healthyRetryPolicy"]["numRetries"], json!(5));
        assert_eq!(effective["throttlePolicy"], json!({"maxReceivesPerSecond": 2}));
        assert_eq!(effective["requestPolicy"], Value::Null);
    }
}
