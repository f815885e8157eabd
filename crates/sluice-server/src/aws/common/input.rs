//! Reading an action's parameters, whichever protocol carried them.
//!
//! Both protocols are first turned into the JSON protocol's shape (`query.rs` does that for
//! form parameters), then each action deserialises its own typed input from it. Integers arrive
//! as JSON numbers or, from the Query protocol, as text; [`Int`] takes both and keeps a bad
//! value's text, so that the error can quote it the way AWS does.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::errors::AwsError;

/// Deserialises an action's input, reporting a malformed request the same way for both
/// protocols.
pub fn parse<T: DeserializeOwned>(input: Value) -> Result<T, AwsError> {
    serde_json::from_value(input).map_err(AwsError::malformed)
}

/// An integer parameter as sent: its value, or the text that is not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Int(Result<i64, String>);

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Ok(Int(match &value {
            Value::Number(n) => n.as_i64().ok_or_else(|| n.to_string()),
            Value::String(s) => s.trim().parse::<i64>().map_err(|_| s.clone()),
            other => Err(other.to_string()),
        }))
    }
}

impl Int {
    #[cfg(test)]
    pub fn new(value: i64) -> Int {
        Int(Ok(value))
    }

    /// The value when it lies in `min..=max`; otherwise AWS's "Value X for parameter Y is
    /// invalid. Reason: ..." with `reason`.
    pub fn within(&self, parameter: &str, min: i64, max: i64, reason: &str) -> Result<u64, AwsError> {
        match &self.0 {
            Ok(v) if (min..=max).contains(v) => Ok(u64::try_from(*v).unwrap_or(0)),
            Ok(v) => Err(AwsError::invalid_value(parameter, v, reason)),
            Err(text) => Err(AwsError::invalid_value(parameter, text, reason)),
        }
    }
}

/// An optional integer parameter, checked against its range when present.
pub fn optional_int(
    value: &Option<Int>,
    parameter: &str,
    min: i64,
    max: i64,
    reason: &str,
) -> Result<Option<u64>, AwsError> {
    value.as_ref().map(|v| v.within(parameter, min, max, reason)).transpose()
}

/// A required text parameter; absent or empty is `MissingParameter`, as in AWS.
pub fn required<'a>(value: &'a Option<String>, parameter: &str) -> Result<&'a str, AwsError> {
    match value.as_deref() {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(AwsError::missing_parameter(parameter)),
    }
}

/// A 64-bit count as an `i64` for range checks: SQS ranges all fit.
pub fn signed(limit: u64) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Deserialize)]
    struct Probe {
        n: Option<Int>,
    }

    #[test]
    fn integers_come_as_numbers_or_text() {
        let check = |v: Value| {
            let p: Probe = parse(json!({ "n": v })).unwrap();
            optional_int(&p.n, "MaxNumberOfMessages", 1, 10, "Must be between 1 and 10, if provided.")
        };
        assert_eq!(check(json!(3)), Ok(Some(3)));
        assert_eq!(check(json!("7")), Ok(Some(7)));
        assert_eq!(
            check(json!(11)).unwrap_err().message,
            "Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided."
        );
        assert_eq!(check(json!("x")).unwrap_err().code, "InvalidParameterValue");
        assert_eq!(check(json!(1.5)).unwrap_err().code, "InvalidParameterValue");
        let none: Probe = parse(json!({})).unwrap();
        assert!(none.n.is_none());
    }

    #[test]
    fn required_text() {
        assert_eq!(required(&Some("b".into()), "MessageBody"), Ok("b"));
        let e = required(&Some(String::new()), "MessageBody").unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            ("MissingParameter", "The request must contain the parameter MessageBody.")
        );
        assert!(required(&None, "QueueName").is_err());
    }
}
