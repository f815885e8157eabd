//! Sagas: an orchestrator's rules as data. A definition (`definition.rs`) lists steps, each an
//! action with an optional compensation; an instance (`instance.rs`) moves forward through the
//! actions and, when one fails for good or the instance is cancelled, back through the
//! compensations of what took effect, in reverse order. Bodies may use the input and earlier
//! outputs (`template.rs`). Time and randomness are arguments; the services layer persists the
//! instance and makes the calls.

pub mod definition;
pub mod instance;
pub mod limits;
#[cfg(test)]
mod model;
pub mod template;

pub use definition::{
    RetryPolicy, SagaDefinition, StepCall, StepDef, validate_saga_name, validate_start, validate_steps,
};
pub use instance::{
    Applied, Attempt, CallKind, Dispatch, InFlight, Outcome, SagaInstance, SagaStatus, StepState, StepStatus,
};
