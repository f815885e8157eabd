//! Sagas between the wire (`sluice_api`) and core's types, in the caller's tenant: the queues a
//! definition names are stored in the definer's namespace and shown back in its names.

use sluice_api as api;
use sluice_core::ValidationError;
use sluice_core::saga::limits::SAGA_STEP_TIMEOUT_MS_DEFAULT;
use sluice_core::saga::{RetryPolicy, SagaDefinition, SagaInstance, StepCall, StepDef, StepState};

use crate::convert::rfc3339;
use crate::jobs::convert::{backoff, backoff_view};
use crate::tenant::Tenant;

fn call(tenant: &Tenant, wire: api::SagaCall, field: &str) -> Result<StepCall, ValidationError> {
    match (wire.http, wire.queue) {
        (Some(h), None) => {
            Ok(StepCall::Http { url: h.url, method: h.method.unwrap_or_else(|| "POST".into()), body: h.body })
        }
        (None, Some(q)) => Ok(StepCall::Queue {
            queue: tenant.0.qualify(&format!("{field}.queue.queue"), &q.queue)?,
            body: q.body,
            reply_timeout_ms: q.reply_timeout_ms,
            reply_queue: q
                .reply_queue
                .map(|r| tenant.0.qualify(&format!("{field}.queue.reply_queue"), &r))
                .transpose()?,
        }),
        _ => Err(ValidationError::new(field, "give exactly one of `http` and `queue`")),
    }
}

fn call_view(tenant: &Tenant, c: &StepCall) -> api::SagaCall {
    match c {
        StepCall::Http { url, method, body } => api::SagaCall {
            http: Some(api::SagaHttpCall { url: url.clone(), method: Some(method.clone()), body: body.clone() }),
            queue: None,
        },
        StepCall::Queue { queue, body, reply_timeout_ms, reply_queue } => api::SagaCall {
            http: None,
            queue: Some(api::SagaQueueCall {
                queue: tenant.show(queue),
                body: body.clone(),
                reply_timeout_ms: *reply_timeout_ms,
                reply_queue: reply_queue.as_deref().map(|r| tenant.show(r)),
            }),
        },
    }
}

/// The steps of a definition, every queue they name in `tenant`'s namespace.
pub fn steps(tenant: &Tenant, wire: Vec<api::SagaStep>) -> Result<Vec<StepDef>, ValidationError> {
    wire.into_iter()
        .enumerate()
        .map(|(i, s)| {
            let field = format!("steps[{i}]");
            let retry = s.retry.unwrap_or_default();
            let policy = RetryPolicy {
                max_attempts: retry.max_attempts.unwrap_or(RetryPolicy::default().max_attempts),
                backoff: backoff(retry.backoff.as_ref()).map_err(|e| e.within(&format!("{field}.retry")))?,
            };
            Ok(StepDef {
                name: s.name,
                action: call(tenant, s.action, &format!("{field}.action"))?,
                compensation: s.compensation.map(|c| call(tenant, c, &format!("{field}.compensation"))).transpose()?,
                retry: policy,
                timeout_ms: s.timeout_ms.unwrap_or(SAGA_STEP_TIMEOUT_MS_DEFAULT),
            })
        })
        .collect()
}

/// A definition as `tenant` sees it: its name and its queues in the tenant's names.
pub fn saga(tenant: &Tenant, d: &SagaDefinition) -> api::Saga {
    api::Saga {
        name: tenant.show(&d.name),
        version: d.version,
        steps: d
            .steps
            .iter()
            .map(|s| api::SagaStep {
                name: s.name.clone(),
                action: call_view(tenant, &s.action),
                compensation: s.compensation.as_ref().map(|c| call_view(tenant, c)),
                retry: Some(api::SagaRetry {
                    max_attempts: Some(s.retry.max_attempts),
                    backoff: Some(backoff_view(&s.retry.backoff)),
                }),
                timeout_ms: Some(s.timeout_ms),
            })
            .collect(),
        created_at: rfc3339(d.created_at_ms),
    }
}

fn text<T: serde::Serialize>(value: T) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// An error text as `tenant` reads it: a queue's stored name in it (a step's message refused by
/// `acme~inventory`) without the tenant's prefix.
fn said(tenant: &Tenant, error: &Option<String>) -> Option<String> {
    let prefix = tenant.0.prefix();
    error.as_ref().map(|e| if prefix.is_empty() { e.clone() } else { e.replace(&prefix, "") })
}

fn step(tenant: &Tenant, s: &StepState) -> api::SagaStepState {
    api::SagaStepState {
        name: s.name.clone(),
        status: text(s.status),
        attempts: s.attempts,
        compensation_attempts: s.compensation_attempts,
        output: s.output.clone(),
        error: said(tenant, &s.error),
        next_attempt_at: s.next_at_ms.map(rfc3339),
        deadline_at: s.in_flight.map(|f| rfc3339(f.deadline_at_ms)),
        attempts_history: s
            .history
            .iter()
            .map(|a| api::SagaAttempt {
                kind: a.kind.as_str().to_owned(),
                number: a.number,
                started_at: rfc3339(a.started_at_ms),
                finished_at: a.finished_at_ms.map(rfc3339),
                outcome: a.outcome.clone(),
                error: said(tenant, &a.error),
            })
            .collect(),
    }
}

/// An instance as `tenant` sees it: its saga by the tenant's name for it.
pub fn instance(tenant: &Tenant, i: &SagaInstance) -> api::SagaInstance {
    api::SagaInstance {
        id: i.id.clone(),
        saga: tenant.show(&i.saga),
        version: i.version,
        status: i.status.as_str().to_owned(),
        input: i.input.clone(),
        correlation_id: i.correlation_id.clone(),
        cancel_requested: i.cancel_requested,
        error: said(tenant, &i.error),
        steps: i.steps.iter().map(|s| step(tenant, s)).collect(),
        created_at: rfc3339(i.created_at_ms),
        updated_at: rfc3339(i.updated_at_ms),
        finished_at: i.finished_at_ms.map(rfc3339),
    }
}
