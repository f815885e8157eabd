//! Load shedding at the door: every write path asks the services' `Shedder` before the store,
//! with the write's priority (see `sluice_services::shedding` for the bands), and a refused
//! write is answered 503 `shedding` with `Retry-After` (SQS and SNS: their throttling errors).

use serde_json::json;
use sluice_api::{ErrorBody, ErrorCode};
use sluice_services::shedding::Shed;

use crate::AppState;
use crate::error::ApiError;

/// Takes out of `messages` each one the server sheds now (by its priority), answered with its
/// position; the others go on. `resource` names what is written (`queue:NAME`).
pub fn refuse_shed<M: std::borrow::Borrow<sluice_core::NewMessage>>(
    state: &AppState,
    resource: &str,
    messages: &mut Vec<(usize, M)>,
) -> Vec<(usize, Shed)> {
    let shedder = state.shedder();
    if shedder.shedding().is_none() {
        return Vec::new();
    }
    let mut refused = Vec::new();
    messages.retain(|(position, m)| match shedder.admit(resource, m.borrow().priority) {
        Ok(()) => true,
        Err(shed) => {
            refused.push((*position, shed));
            false
        }
    });
    refused
}

/// A write of `priority` to `resource` as a whole: refused while the server sheds its band.
pub fn admit(state: &AppState, resource: &str, priority: u8) -> Result<(), ApiError> {
    state.shedder().admit(resource, priority).map_err(|shed| shed_error(&shed))
}

/// The whole-call refusal: 503 `shedding` with `Retry-After` and why.
pub fn shed_error(shed: &Shed) -> ApiError {
    let mut error = ApiError::new(ErrorCode::Shedding, shed.to_string()).with_retry_after(shed.retry_after_s);
    error.details = Some(details(shed));
    error
}

/// An entry's refusal in a batch answer.
pub fn shed_body(shed: &Shed) -> ErrorBody {
    ErrorBody {
        code: ErrorCode::Shedding.as_str().to_string(),
        message: shed.to_string(),
        details: Some(details(shed)),
    }
}

fn details(shed: &Shed) -> serde_json::Value {
    json!({ "reason": shed.reason.as_str(), "priority": shed.priority, "retry_after_ms": shed.retry_after_s * 1000 })
}
