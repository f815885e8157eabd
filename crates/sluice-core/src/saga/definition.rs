//! A saga's definition: ordered steps, each an action with an optional compensation, a retry
//! policy and a timeout; and the rules a definition must keep.

use serde::{Deserialize, Serialize};

use super::limits::*;
use super::template;
use crate::jobs::JobBackoff;
use crate::validation::ValidationError;

/// Where one action or compensation goes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepCall {
    /// An HTTP request; a 2xx answer is success (its JSON body is the output), a 4xx other
    /// than 408 and 429 is a failure not worth retrying, anything else is retried.
    Http {
        url: String,
        #[serde(default = "default_method")]
        method: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body: Option<serde_json::Value>,
    },
    /// A message to a queue that a participant answers through `POST /v1/replies` or, when
    /// `reply_queue` is named, with a message to that queue (which the orchestrator consumes);
    /// no answer within `reply_timeout_ms` (default: the step's timeout) is a timed-out attempt.
    Queue {
        queue: String,
        #[serde(default)]
        body: serde_json::Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_timeout_ms: Option<u64>,
        /// Where the participant may send its answer as a message (named to it in the
        /// message's `sluice.saga.reply_queue` attribute).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_queue: Option<String>,
    },
}

fn default_method() -> String {
    "POST".to_owned()
}

/// How often a step is tried and how its retries are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    pub backoff: JobBackoff,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { max_attempts: SAGA_STEP_ATTEMPTS_DEFAULT, backoff: JobBackoff::default() }
    }
}

/// One step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepDef {
    pub name: String,
    pub action: StepCall,
    /// What undoes the action; a step without one needs no undoing (a read, a notification).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensation: Option<StepCall>,
    #[serde(default)]
    pub retry: RetryPolicy,
    /// The longest one attempt may take.
    pub timeout_ms: u64,
}

/// A version of a saga's definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SagaDefinition {
    pub name: String,
    /// 1 for the first definition, one more for each `PUT`.
    pub version: u32,
    pub steps: Vec<StepDef>,
    pub created_at_ms: u64,
}

impl StepCall {
    /// The reply queue this call names, if any.
    pub fn reply_queue(&self) -> Option<&str> {
        match self {
            StepCall::Queue { reply_queue, .. } => reply_queue.as_deref(),
            StepCall::Http { .. } => None,
        }
    }

    /// How long an attempt of this call may take, given the step's timeout.
    pub fn timeout_ms(&self, step_timeout_ms: u64) -> u64 {
        match self {
            StepCall::Queue { reply_timeout_ms: Some(ms), .. } => *ms,
            _ => step_timeout_ms,
        }
    }

    fn validate(&self, step_names: &[&str], field: &str) -> Result<(), ValidationError> {
        let body = match self {
            StepCall::Http { url, method, body } => {
                if url.is_empty() || url.len() > SAGA_URL_LEN_MAX {
                    return Err(ValidationError::new(
                        format!("{field}.http.url"),
                        format!("1 to {SAGA_URL_LEN_MAX} bytes"),
                    ));
                }
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(ValidationError::new(
                        format!("{field}.http.url"),
                        "must start with http:// or https://",
                    ));
                }
                if !["GET", "POST", "PUT", "PATCH", "DELETE"].contains(&method.as_str()) {
                    return Err(ValidationError::new(
                        format!("{field}.http.method"),
                        "must be GET, POST, PUT, PATCH or DELETE",
                    ));
                }
                template::validate_string(url, step_names)
                    .map_err(|m| ValidationError::new(format!("{field}.http.url"), m))?;
                body.as_ref()
            }
            StepCall::Queue { queue, body, reply_timeout_ms, reply_queue } => {
                crate::name::validate_queue_name(queue).map_err(|e| e.within(&format!("{field}.queue")))?;
                if let Some(reply_queue) = reply_queue {
                    crate::name::validate_queue_name(reply_queue)
                        .map_err(|e| ValidationError::new(format!("{field}.queue.reply_queue"), e.message))?;
                    if reply_queue == queue {
                        return Err(ValidationError::new(
                            format!("{field}.queue.reply_queue"),
                            "must not be the queue the step's messages go to (the orchestrator would take them for replies)",
                        ));
                    }
                }
                if let Some(ms) = reply_timeout_ms
                    && (*ms == 0 || *ms > SAGA_STEP_TIMEOUT_MS_MAX)
                {
                    return Err(ValidationError::new(
                        format!("{field}.queue.reply_timeout_ms"),
                        format!("must be 1 to {SAGA_STEP_TIMEOUT_MS_MAX}"),
                    ));
                }
                Some(body)
            }
        };
        if let Some(body) = body {
            let bytes = serde_json::to_vec(body).map_or(usize::MAX, |b| b.len());
            if bytes > SAGA_BODY_BYTES_MAX {
                return Err(ValidationError::new(
                    format!("{field}.body"),
                    format!("at most {SAGA_BODY_BYTES_MAX} bytes"),
                ));
            }
            template::validate(body, step_names).map_err(|m| ValidationError::new(format!("{field}.body"), m))?;
        }
        Ok(())
    }
}

/// A saga's name: `[A-Za-z0-9_.-]`, 1 to [`SAGA_NAME_LEN_MAX`], and not `instances` (the
/// path `/v1/sagas/instances` lists instances).
pub fn validate_saga_name(name: &str) -> Result<(), ValidationError> {
    // A tenant's saga is stored under `<tenant>~<name>`: the rules are the name's within it.
    let name = crate::name::without_tenant(name)?;
    if name == "instances" {
        return Err(ValidationError::new("name", "`instances` is reserved: /v1/sagas/instances lists instances"));
    }
    let ok = !name.is_empty()
        && name.len() <= SAGA_NAME_LEN_MAX
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new("name", format!("1 to {SAGA_NAME_LEN_MAX} characters of A-Z, a-z, 0-9, _ . -")))
    }
}

/// Checks what a start brings: the input's size and the correlation id.
pub fn validate_start(input: &serde_json::Value, correlation_id: Option<&str>) -> Result<(), ValidationError> {
    let bytes = serde_json::to_vec(input).map_or(usize::MAX, |b| b.len());
    if bytes > SAGA_INPUT_BYTES_MAX {
        return Err(ValidationError::new("input", format!("at most {SAGA_INPUT_BYTES_MAX} bytes of JSON")));
    }
    if let Some(id) = correlation_id
        && (id.is_empty() || id.len() > SAGA_CORRELATION_ID_LEN_MAX || !id.bytes().all(|b| b.is_ascii_graphic()))
    {
        return Err(ValidationError::new(
            "correlation_id",
            format!("1 to {SAGA_CORRELATION_ID_LEN_MAX} visible ASCII characters"),
        ));
    }
    Ok(())
}

/// Checks a definition's steps: names, calls, templates (a template may name only the input
/// and steps before its own), retries and timeouts.
pub fn validate_steps(steps: &[StepDef]) -> Result<(), ValidationError> {
    if steps.is_empty() || steps.len() > SAGA_STEPS_MAX {
        return Err(ValidationError::new("steps", format!("a saga has 1 to {SAGA_STEPS_MAX} steps")));
    }
    let mut earlier: Vec<&str> = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let field = format!("steps[{i}]");
        let name_ok = !step.name.is_empty()
            && step.name.len() <= SAGA_STEP_NAME_LEN_MAX
            && step.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !name_ok {
            return Err(ValidationError::new(
                format!("{field}.name"),
                format!("1 to {SAGA_STEP_NAME_LEN_MAX} characters of a-z, 0-9, _"),
            ));
        }
        if earlier.contains(&step.name.as_str()) {
            return Err(ValidationError::new(format!("{field}.name"), format!("two steps are named {:?}", step.name)));
        }
        step.action.validate(&earlier, &format!("{field}.action"))?;
        // A compensation runs after its own action succeeded, so it may use that output too.
        earlier.push(&step.name);
        if let Some(compensation) = &step.compensation {
            compensation.validate(&earlier, &format!("{field}.compensation"))?;
        }
        let retry = &step.retry;
        if retry.max_attempts == 0 || retry.max_attempts > SAGA_STEP_ATTEMPTS_MAX {
            return Err(ValidationError::new(
                format!("{field}.retry.max_attempts"),
                format!("must be 1 to {SAGA_STEP_ATTEMPTS_MAX}"),
            ));
        }
        retry.backoff.validate().map_err(|e| e.within(&format!("{field}.retry")))?;
        if step.timeout_ms == 0 || step.timeout_ms > SAGA_STEP_TIMEOUT_MS_MAX {
            return Err(ValidationError::new(
                format!("{field}.timeout_ms"),
                format!("must be 1 to {SAGA_STEP_TIMEOUT_MS_MAX}"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn step(name: &str, body: serde_json::Value) -> StepDef {
        StepDef {
            name: name.into(),
            action: StepCall::Queue { queue: "inventory".into(), body, reply_timeout_ms: None, reply_queue: None },
            compensation: None,
            retry: RetryPolicy::default(),
            timeout_ms: 1_000,
        }
    }

    #[test]
    fn templates_may_name_the_input_and_earlier_steps_only() {
        let ok =
            [step("reserve", json!({"sku": "{{input.sku}}"})), step("charge", json!("{{steps.reserve.output.id}}"))];
        assert_eq!(validate_steps(&ok), Ok(()));
        let later = [step("reserve", json!("{{steps.charge.output.id}}")), step("charge", json!(1))];
        let e = validate_steps(&later).unwrap_err();
        assert_eq!(e.field, "steps[0].action.body");
        assert!(e.message.contains("charge"), "{e:?}");
    }

    #[test]
    fn names_retries_and_timeouts_are_checked() {
        let cases: [(Vec<StepDef>, &str); 5] = [
            (vec![], "steps"),
            (vec![step("Bad-Name", json!(1))], "steps[0].name"),
            (vec![step("a", json!(1)), step("a", json!(1))], "steps[1].name"),
            (vec![StepDef { timeout_ms: 0, ..step("a", json!(1)) }], "steps[0].timeout_ms"),
            (
                vec![StepDef {
                    retry: RetryPolicy { max_attempts: 0, ..RetryPolicy::default() },
                    ..step("a", json!(1))
                }],
                "steps[0].retry.max_attempts",
            ),
        ];
        for (steps, field) in cases {
            assert_eq!(validate_steps(&steps).unwrap_err().field, field);
        }
        assert!(validate_saga_name("order-saga.v2").is_ok());
        assert!(validate_saga_name("no spaces").is_err());
        assert!(validate_saga_name("acme~order-saga.v2").is_ok(), "a tenant's stored name");
        assert!(validate_saga_name("acme~instances").is_err());
        assert!(validate_saga_name("Not A Tenant~order").is_err());
    }

    #[test]
    fn a_reply_queue_must_be_a_queue_name_other_than_the_steps_own() {
        let with = |reply_queue: &str| StepDef {
            action: StepCall::Queue {
                queue: "inventory".into(),
                body: json!({}),
                reply_timeout_ms: None,
                reply_queue: Some(reply_queue.into()),
            },
            ..step("a", json!(1))
        };
        assert_eq!(validate_steps(&[with("inventory-replies")]), Ok(()));
        assert_eq!(with("inventory-replies").action.reply_queue(), Some("inventory-replies"));
        for bad in ["inventory", "no spaces", ""] {
            assert_eq!(validate_steps(&[with(bad)]).unwrap_err().field, "steps[0].action.queue.reply_queue", "{bad:?}");
        }
    }
}
