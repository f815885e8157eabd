//! A saga instance and its life as pure functions of `now` and a random draw.
//!
//! One step is active at a time. Forward, the active step's action is tried until it succeeds
//! (the next step becomes active) or fails for good (compensation starts). Backward, every step
//! whose action took effect, or may have (an attempt that timed out), is compensated in reverse
//! order. Each attempt is written down as in flight, with its deadline, before the call is made
//! (the runner persists the instance between [`SagaInstance::dispatch`] and the call), so after
//! a crash the attempt's deadline passes and it is retried: steps are at-least-once, and every
//! call carries the same `Idempotency-Key` for all attempts of one action or compensation so
//! that a participant can make them exactly-once.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::definition::{SagaDefinition, StepCall};
use super::limits::*;
use super::template;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SagaStatus {
    /// Steps are being done, forward.
    Running,
    /// A step failed or the instance was cancelled: completed steps are being undone.
    Compensating,
    /// Every step succeeded.
    Completed,
    /// Every step that took effect was undone.
    Compensated,
    /// A compensation kept failing: a person must look (see [`SagaInstance::retry_compensation`]).
    Failed,
}

impl SagaStatus {
    pub const ALL: [SagaStatus; 5] = [
        SagaStatus::Running,
        SagaStatus::Compensating,
        SagaStatus::Completed,
        SagaStatus::Compensated,
        SagaStatus::Failed,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            SagaStatus::Running => "running",
            SagaStatus::Compensating => "compensating",
            SagaStatus::Completed => "completed",
            SagaStatus::Compensated => "compensated",
            SagaStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<SagaStatus> {
        SagaStatus::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Nothing happens any more on its own (a `failed` instance waits for a person).
    pub const fn is_settled(self) -> bool {
        !matches!(self, SagaStatus::Running | SagaStatus::Compensating)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not started, or waiting for its next attempt.
    Pending,
    /// An attempt of the action is in flight.
    Running,
    Succeeded,
    /// The action failed for good; it took no effect.
    Failed,
    /// The action's last attempt timed out: it may have taken effect, so it is compensated.
    TimedOut,
    /// Its compensation is in flight or waiting for its next attempt.
    Compensating,
    Compensated,
    /// Its compensation kept failing.
    CompensationFailed,
    /// Never run: the instance turned back before reaching it.
    Skipped,
}

/// Which call of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    Action,
    Compensation,
}

impl CallKind {
    /// `action` or `compensation`.
    pub fn parse(s: &str) -> Option<CallKind> {
        match s {
            "action" => Some(CallKind::Action),
            "compensation" => Some(CallKind::Compensation),
            _ => None,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            CallKind::Action => "action",
            CallKind::Compensation => "compensation",
        }
    }
}

/// One attempt, as the instance remembers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub kind: CallKind,
    /// 1 for the first attempt of this call.
    pub number: u32,
    pub started_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at_ms: Option<u64>,
    /// `succeeded`, `failed` or `timed_out`; absent while in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The attempt in flight now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlight {
    pub kind: CallKind,
    pub number: u32,
    pub deadline_at_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepState {
    pub name: String,
    pub status: StepStatus,
    /// Attempts of the action, and of the compensation in its current round.
    pub attempts: u32,
    pub compensation_attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<InFlight>,
    /// When the next attempt may start (while pending or compensating with none in flight).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_at_ms: Option<u64>,
    /// An attempt of the action timed out: it may have taken effect.
    #[serde(default)]
    pub maybe_applied: bool,
    /// The latest attempts, oldest first, at most [`SAGA_ATTEMPTS_KEPT_MAX`].
    #[serde(default)]
    pub history: Vec<Attempt>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SagaInstance {
    pub id: String,
    pub saga: String,
    /// The definition version it runs, whatever was defined since.
    pub version: u32,
    pub input: Value,
    pub correlation_id: String,
    pub status: SagaStatus,
    pub steps: Vec<StepState>,
    /// The step being done or undone.
    pub active: usize,
    #[serde(default)]
    pub cancel_requested: bool,
    /// Why it turned back, or why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at_ms: Option<u64>,
}

/// A call the runner must make now. The instance has recorded it as in flight.
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatch {
    pub step: usize,
    pub step_name: String,
    pub kind: CallKind,
    pub attempt: u32,
    /// `<instance>/<step>/<action|compensation>`: the same for every attempt of this call.
    pub idempotency_key: String,
    /// The call with its URL and body rendered from the input and earlier outputs.
    pub call: StepCall,
    pub deadline_at_ms: u64,
}

/// What a participant answered, or what went wrong making the call.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Succeeded(Value),
    /// `retry: false` for failures a retry cannot mend (an HTTP 4xx, a refused message).
    Failed {
        error: String,
        retry: bool,
    },
}

/// Whether a result changed the instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Yes,
    /// For a call that is no longer waited for (an older attempt's failure, an instance that has
    /// moved on): ignored.
    Stale,
}

/// Cuts an error text to `max` bytes on a character boundary.
fn bounded(mut error: String, max: usize) -> String {
    if error.len() > max {
        let mut cut = max;
        while !error.is_char_boundary(cut) {
            cut -= 1;
        }
        error.truncate(cut);
    }
    error
}

impl StepState {
    fn record(&mut self, attempt: Attempt) {
        if self.history.len() == SAGA_ATTEMPTS_KEPT_MAX {
            self.history.remove(0);
        }
        self.history.push(attempt);
    }

    fn finish_attempt(&mut self, kind: CallKind, number: u32, now: u64, outcome: &str, error: Option<String>) {
        if let Some(a) = self.history.iter_mut().rev().find(|a| a.kind == kind && a.number == number) {
            a.finished_at_ms = Some(now);
            a.outcome = Some(outcome.to_owned());
            a.error = error.map(|e| bounded(e, SAGA_ATTEMPT_ERROR_BYTES_MAX));
        }
    }
}

impl SagaInstance {
    /// A new instance of `definition`, its first step due now.
    pub fn new(
        id: String,
        definition: &SagaDefinition,
        input: Value,
        correlation_id: String,
        now: u64,
    ) -> SagaInstance {
        let steps = definition
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| StepState {
                name: s.name.clone(),
                status: StepStatus::Pending,
                attempts: 0,
                compensation_attempts: 0,
                output: None,
                error: None,
                in_flight: None,
                next_at_ms: (i == 0).then_some(now),
                maybe_applied: false,
                history: Vec::new(),
            })
            .collect();
        SagaInstance {
            id,
            saga: definition.name.clone(),
            version: definition.version,
            input,
            correlation_id,
            status: SagaStatus::Running,
            steps,
            active: 0,
            cancel_requested: false,
            error: None,
            created_at_ms: now,
            updated_at_ms: now,
            finished_at_ms: None,
        }
    }

    /// When something is next due: an attempt to start or a deadline to pass. `None` once
    /// settled.
    pub fn next_due_at(&self) -> Option<u64> {
        if self.status.is_settled() {
            return None;
        }
        let step = &self.steps[self.active];
        step.in_flight.map(|f| f.deadline_at_ms).or(step.next_at_ms)
    }

    /// Applies what `now` brings: an attempt whose deadline passed counts as a failure that may
    /// have taken effect; then, if the active step's next attempt is due, records it as in
    /// flight and returns the call to make.
    pub fn dispatch(&mut self, definition: &SagaDefinition, now: u64, draw: u64) -> Option<Dispatch> {
        loop {
            if self.status.is_settled() {
                return None;
            }
            let step = &self.steps[self.active];
            if let Some(f) = step.in_flight {
                if now < f.deadline_at_ms {
                    return None;
                }
                let error = format!("no answer within {} ms", f.deadline_at_ms.saturating_sub(self.started_at(f)));
                self.fail(definition, self.active, f, error, true, true, now, draw);
                continue;
            }
            match step.next_at_ms {
                Some(at) if at <= now => {}
                _ => return None,
            }
            let (index, kind) = (self.active, self.phase());
            let def = &definition.steps[index];
            let call = match kind {
                CallKind::Action => &def.action,
                CallKind::Compensation => {
                    def.compensation.as_ref().expect("only steps with a compensation are compensated")
                }
            };
            let step = &mut self.steps[index];
            let number = match kind {
                CallKind::Action => {
                    step.attempts += 1;
                    step.status = StepStatus::Running;
                    step.attempts
                }
                CallKind::Compensation => {
                    step.compensation_attempts += 1;
                    step.compensation_attempts
                }
            };
            let deadline_at_ms = now.saturating_add(call.timeout_ms(def.timeout_ms));
            let flight = InFlight { kind, number, deadline_at_ms };
            step.in_flight = Some(flight);
            step.next_at_ms = None;
            step.record(Attempt { kind, number, started_at_ms: now, finished_at_ms: None, outcome: None, error: None });
            self.updated_at_ms = now;
            match self.render(call) {
                Ok(call) => {
                    return Some(Dispatch {
                        step: index,
                        step_name: def.name.clone(),
                        kind,
                        attempt: number,
                        idempotency_key: format!("{}/{}/{}", self.id, def.name, kind.as_str()),
                        call,
                        deadline_at_ms,
                    });
                }
                // A body that names what is not there will not render on a retry either.
                Err(error) => self.fail(definition, index, flight, error, false, false, now, draw),
            }
        }
    }

    /// Applies a participant's answer to an attempt. A success of any attempt of the call still
    /// waited for is taken (it did happen); a failure counts only for the attempt in flight.
    #[allow(clippy::too_many_arguments)]
    pub fn on_result(
        &mut self,
        definition: &SagaDefinition,
        step: usize,
        kind: CallKind,
        attempt: u32,
        outcome: Outcome,
        now: u64,
        draw: u64,
    ) -> Applied {
        if self.status.is_settled() || step != self.active || kind != self.phase() {
            return Applied::Stale;
        }
        let state = &self.steps[step];
        let tried = match kind {
            CallKind::Action => state.attempts,
            CallKind::Compensation => state.compensation_attempts,
        };
        if attempt == 0 || attempt > tried {
            return Applied::Stale;
        }
        match outcome {
            Outcome::Succeeded(output) => self.succeed(definition, step, kind, attempt, output, now),
            Outcome::Failed { error, retry } => match state.in_flight {
                Some(f) if f.kind == kind && f.number == attempt => {
                    self.fail(definition, step, f, error, retry, false, now, draw);
                }
                _ => return Applied::Stale,
            },
        }
        self.updated_at_ms = now;
        Applied::Yes
    }

    /// Asks the instance to turn back. With an action in flight, it waits for that attempt's
    /// answer or deadline (the action may be taking effect right now), then compensates; otherwise
    /// compensation starts at once. No effect once compensating or settled.
    pub fn cancel(&mut self, definition: &SagaDefinition, now: u64) -> bool {
        if self.status != SagaStatus::Running {
            return false;
        }
        self.cancel_requested = true;
        self.updated_at_ms = now;
        if self.steps[self.active].in_flight.is_none() {
            let step = &mut self.steps[self.active];
            step.next_at_ms = None;
            step.status = if step.maybe_applied { StepStatus::TimedOut } else { StepStatus::Skipped };
            self.turn_back(definition, "cancelled".to_owned(), now);
        }
        true
    }

    /// Starts a new round of the compensation that kept failing, from where it stopped.
    pub fn retry_compensation(&mut self, now: u64) -> bool {
        if self.status != SagaStatus::Failed {
            return false;
        }
        let step = &mut self.steps[self.active];
        if step.status != StepStatus::CompensationFailed {
            return false;
        }
        step.status = StepStatus::Compensating;
        step.compensation_attempts = 0;
        step.next_at_ms = Some(now);
        self.status = SagaStatus::Compensating;
        self.finished_at_ms = None;
        self.updated_at_ms = now;
        true
    }

    fn phase(&self) -> CallKind {
        if self.status == SagaStatus::Running { CallKind::Action } else { CallKind::Compensation }
    }

    fn started_at(&self, flight: InFlight) -> u64 {
        let step = &self.steps[self.active];
        step.history
            .iter()
            .rev()
            .find(|a| a.kind == flight.kind && a.number == flight.number)
            .map_or(flight.deadline_at_ms, |a| a.started_at_ms)
    }

    /// `{"input": …, "steps": {NAME: {"output": …}}}` of the steps that succeeded.
    fn context(&self) -> Value {
        let steps: serde_json::Map<String, Value> = self
            .steps
            .iter()
            .filter_map(|s| s.output.as_ref().map(|o| (s.name.clone(), serde_json::json!({ "output": o }))))
            .collect();
        serde_json::json!({ "input": self.input, "steps": steps })
    }

    fn render(&self, call: &StepCall) -> Result<StepCall, String> {
        let context = self.context();
        Ok(match call {
            StepCall::Http { url, method, body } => {
                let url = match template::render_string(url, &context)? {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                let body = body.as_ref().map(|b| template::render(b, &context)).transpose()?;
                StepCall::Http { url, method: method.clone(), body }
            }
            StepCall::Queue { queue, body, reply_timeout_ms, reply_queue } => StepCall::Queue {
                queue: queue.clone(),
                body: template::render(body, &context)?,
                reply_timeout_ms: *reply_timeout_ms,
                reply_queue: reply_queue.clone(),
            },
        })
    }

    fn succeed(
        &mut self,
        definition: &SagaDefinition,
        index: usize,
        kind: CallKind,
        attempt: u32,
        output: Value,
        now: u64,
    ) {
        let bytes = serde_json::to_vec(&output).map_or(usize::MAX, |b| b.len());
        let kept: usize = self
            .steps
            .iter()
            .filter_map(|s| s.output.as_ref())
            .map(|o| serde_json::to_vec(o).map_or(0, |b| b.len()))
            .sum();
        let step = &mut self.steps[index];
        step.finish_attempt(kind, attempt, now, "succeeded", None);
        step.in_flight = None;
        step.next_at_ms = None;
        step.error = None;
        match kind {
            CallKind::Action => {
                // An output the instance cannot keep is kept as null, said in the error: the
                // action did take effect, so it must count as succeeded (and be compensated).
                if bytes > SAGA_OUTPUT_BYTES_MAX || kept + bytes > SAGA_OUTPUTS_BYTES_MAX {
                    step.error = Some(format!(
                        "the output ({bytes} bytes) is over {SAGA_OUTPUT_BYTES_MAX}, or the instance's outputs \
                         over {SAGA_OUTPUTS_BYTES_MAX}, and was not kept"
                    ));
                    step.output = Some(Value::Null);
                } else {
                    step.output = Some(output);
                }
                step.status = StepStatus::Succeeded;
                if self.cancel_requested {
                    self.turn_back(definition, "cancelled".to_owned(), now);
                } else if index + 1 == self.steps.len() {
                    self.settle(SagaStatus::Completed, now);
                } else {
                    self.active = index + 1;
                    self.steps[index + 1].next_at_ms = Some(now);
                }
            }
            CallKind::Compensation => {
                step.status = StepStatus::Compensated;
                self.compensate_before(definition, index, now);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn fail(
        &mut self,
        definition: &SagaDefinition,
        index: usize,
        flight: InFlight,
        error: String,
        retry: bool,
        timed_out: bool,
        now: u64,
        draw: u64,
    ) {
        let def = &definition.steps[index];
        let error = bounded(error, SAGA_ERROR_BYTES_MAX);
        let step = &mut self.steps[index];
        step.finish_attempt(
            flight.kind,
            flight.number,
            now,
            if timed_out { "timed_out" } else { "failed" },
            Some(error.clone()),
        );
        step.in_flight = None;
        step.error = Some(error.clone());
        match flight.kind {
            CallKind::Action => {
                step.maybe_applied |= timed_out;
                if retry && step.attempts < def.retry.max_attempts && !self.cancel_requested {
                    step.status = StepStatus::Pending;
                    step.next_at_ms = Some(now.saturating_add(def.retry.backoff.delay_ms(step.attempts - 1, draw)));
                    return;
                }
                step.status = if step.maybe_applied { StepStatus::TimedOut } else { StepStatus::Failed };
                let why = if self.cancel_requested {
                    "cancelled".to_owned()
                } else {
                    format!("step {} failed after {} attempts: {error}", def.name, step.attempts)
                };
                self.turn_back(definition, why, now);
            }
            CallKind::Compensation => {
                let attempts_max = def.retry.max_attempts.max(SAGA_COMPENSATION_ATTEMPTS_DEFAULT);
                if retry && step.compensation_attempts < attempts_max {
                    step.next_at_ms =
                        Some(now.saturating_add(def.retry.backoff.delay_ms(step.compensation_attempts - 1, draw)));
                    return;
                }
                step.status = StepStatus::CompensationFailed;
                self.error = Some(format!(
                    "the compensation of step {} failed after {} attempts: {error}",
                    def.name, step.compensation_attempts
                ));
                self.settle(SagaStatus::Failed, now);
            }
        }
    }

    /// Starts compensating from the active step backwards (the active step itself when it took
    /// effect or may have).
    fn turn_back(&mut self, definition: &SagaDefinition, why: String, now: u64) {
        self.status = SagaStatus::Compensating;
        self.error = Some(why);
        for later in &mut self.steps[self.active + 1..] {
            later.status = StepStatus::Skipped;
        }
        self.compensate_from(definition, self.active, now);
    }

    fn compensate_before(&mut self, definition: &SagaDefinition, index: usize, now: u64) {
        if index == 0 {
            self.settle(SagaStatus::Compensated, now);
        } else {
            self.compensate_from(definition, index - 1, now);
        }
    }

    /// Makes the nearest step at or before `index` that needs undoing the active one.
    fn compensate_from(&mut self, definition: &SagaDefinition, index: usize, now: u64) {
        for i in (0..=index).rev() {
            let step = &mut self.steps[i];
            let took_effect = matches!(step.status, StepStatus::Succeeded | StepStatus::TimedOut);
            if took_effect && definition.steps[i].compensation.is_some() {
                step.status = StepStatus::Compensating;
                step.next_at_ms = Some(now);
                self.active = i;
                return;
            }
        }
        self.settle(SagaStatus::Compensated, now);
    }

    fn settle(&mut self, status: SagaStatus, now: u64) {
        self.status = status;
        self.finished_at_ms = Some(now);
        self.updated_at_ms = now;
    }
}
