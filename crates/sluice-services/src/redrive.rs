//! The redrive task manager: one tokio task per running redrive, moving a dead-letter queue's
//! messages back at a bounded rate, and the in-memory registry of tasks and their progress.
//! The rate runs on the services' clock: each step waits for the clock to reach its time.
//!
//! Tasks live in memory only: a restart ends every running redrive, and its record is gone.
//! Nothing is lost or duplicated by that, because each step is one `Store::move_messages` call
//! and each message moves atomically (one metadata rewrite in the store); the operator simply
//! starts the redrive again and it picks up whatever is still in the source.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use sluice_clock::Clock;
use sluice_core::ValidationError;
use sluice_store::{QueueStore, StoreError};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Rate limits of a redrive, in messages per second.
pub const REDRIVE_RATE_DEFAULT: u32 = 500;
pub const REDRIVE_RATE_MAX: u32 = 100_000;
/// Time between steps. Short enough that cancel takes effect quickly, long enough that a slow
/// rate still moves whole messages per step.
pub const REDRIVE_STEP_MS: u64 = 100;
/// Finished tasks kept for `GET /v1/redrives`; the oldest are forgotten first.
pub const REDRIVE_TASKS_KEPT_MAX: usize = 1_000;

/// Why a redrive could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedriveError {
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The source (or destination) queue does not exist, or the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("redrive {id} of queue {queue:?} is still running")]
    Running { queue: String, id: u64 },
    #[error("the server is shutting down")]
    ShuttingDown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Running,
    Completed,
    Cancelled,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Completed => "completed",
            Status::Cancelled => "cancelled",
            Status::Failed => "failed",
        }
    }
}

struct Task {
    source: String,
    to: Option<String>,
    max_per_second: u32,
    status: Status,
    moved: u64,
    failed: u64,
    total: u64,
    started_at_ms: u64,
    finished_at_ms: Option<u64>,
    error: Option<String>,
    /// The error that failed the task (the SQS move-task API reports its code).
    failure: Option<StoreError>,
    /// The rate the client asked for, if it asked (the SQS API reports only that).
    requested_rate: Option<u32>,
    /// Wakes the task from its pause between steps (cancel, shutdown).
    wake: Arc<Notify>,
    handle: Option<JoinHandle<()>>,
}

impl Task {
    fn info(&self, id: u64) -> TaskInfo {
        TaskInfo {
            id,
            source: self.source.clone(),
            to: self.to.clone(),
            max_per_second: self.max_per_second,
            requested_rate: self.requested_rate,
            status: self.status,
            moved: self.moved,
            failed: self.failed,
            total: self.total,
            started_at_ms: self.started_at_ms,
            finished_at_ms: self.finished_at_ms,
            error: self.error.clone(),
            failure: self.failure.clone(),
        }
    }

    fn finish(&mut self, status: Status, error: Option<String>, now_ms: u64) {
        if self.status == Status::Running {
            self.status = status;
            self.error = error;
            self.finished_at_ms = Some(now_ms);
        }
    }
}

/// A task and its progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInfo {
    pub id: u64,
    pub source: String,
    /// `None`: each message back to the queue it was dead-lettered from.
    pub to: Option<String>,
    pub max_per_second: u32,
    /// The rate the client asked for, if it asked (the SQS API reports only that).
    pub requested_rate: Option<u32>,
    pub status: Status,
    pub moved: u64,
    /// Messages that could not move, as the latest step saw them.
    pub failed: u64,
    /// Visible messages in the source when the task started.
    pub total: u64,
    pub started_at_ms: u64,
    pub finished_at_ms: Option<u64>,
    /// Why it failed or was cancelled, in words.
    pub error: Option<String>,
    /// The error that failed it.
    pub failure: Option<StoreError>,
}

#[derive(Default)]
struct Registry {
    tasks: BTreeMap<u64, Task>,
    next_id: u64,
    /// Set at shutdown: no new task starts after it.
    closed: bool,
}

pub struct Redrives {
    store: Arc<dyn QueueStore>,
    clock: Arc<dyn Clock>,
    registry: Mutex<Registry>,
}

impl Redrives {
    pub fn new(store: Arc<dyn QueueStore>, clock: Arc<dyn Clock>) -> Arc<Redrives> {
        Arc::new(Redrives { store, clock, registry: Mutex::new(Registry { next_id: 1, ..Default::default() }) })
    }

    /// The lock is never held across an await, so a panic elsewhere cannot leave the registry
    /// half-updated in a way that matters; recover it rather than fail every later request.
    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts moving `source`'s visible messages to `to` (or each back to the queue it was
    /// dead-lettered from), at most `max_per_second` a second.
    pub async fn start(
        self: &Arc<Self>,
        source: &str,
        to: Option<String>,
        max_per_second: Option<u32>,
    ) -> Result<TaskInfo, RedriveError> {
        let rate = max_per_second.unwrap_or(REDRIVE_RATE_DEFAULT);
        if rate == 0 || rate > REDRIVE_RATE_MAX {
            return Err(ValidationError::new(
                "max_per_second",
                format!("max_per_second must be 1 to {REDRIVE_RATE_MAX}"),
            )
            .into());
        }
        let view = self.store.get_queue(source).await?;
        if let Some(to) = &to {
            if to == source {
                return Err(ValidationError::new("to", "a queue cannot be redriven into itself").into());
            }
            self.store.get_queue(to).await?;
        }
        let mut registry = self.registry();
        if registry.closed {
            return Err(RedriveError::ShuttingDown);
        }
        if let Some((&id, _)) = registry.tasks.iter().find(|(_, t)| t.source == source && t.status == Status::Running) {
            return Err(RedriveError::Running { queue: source.to_string(), id });
        }
        forget_oldest_finished(&mut registry);
        let id = registry.next_id;
        registry.next_id += 1;
        let wake = Arc::new(Notify::new());
        let mut task = Task {
            source: source.to_string(),
            to: to.clone(),
            max_per_second: rate,
            status: Status::Running,
            moved: 0,
            failed: 0,
            total: view.stats.visible,
            started_at_ms: self.clock.now_ms(),
            finished_at_ms: None,
            error: None,
            failure: None,
            requested_rate: max_per_second,
            wake: wake.clone(),
            handle: None,
        };
        let snapshot = task.info(id);
        let this = Arc::clone(self);
        task.handle = Some(tokio::spawn(this.drive(id, source.to_string(), to, rate, wake)));
        registry.tasks.insert(id, task);
        tracing::info!(redrive = id, source, "redrive started");
        Ok(snapshot)
    }

    /// The loop of one task: a token bucket refilled every step, so that the long-run rate is
    /// `rate` per second and a slow rate still moves one whole message at a time.
    async fn drive(self: Arc<Self>, id: u64, source: String, to: Option<String>, rate: u32, wake: Arc<Notify>) {
        let per_step = f64::from(rate) * REDRIVE_STEP_MS as f64 / 1000.0;
        let burst = per_step.max(1.0);
        let mut tokens = burst;
        loop {
            if !self.is_running(id) {
                return;
            }
            let step = tokens.floor() as u64;
            if step > 0 {
                match self.store.move_messages(&source, to.as_deref(), step).await {
                    Ok(outcome) => {
                        tokens -= outcome.moved as f64;
                        // A step that moved fewer than it could has seen every visible message
                        // of the source, so the work present at the start is done. Messages
                        // that cannot move are seen again by each step, so `failed` is the
                        // latest count, not a sum.
                        let done = outcome.moved < step;
                        let mut registry = self.registry();
                        let Some(task) = registry.tasks.get_mut(&id) else {
                            return;
                        };
                        task.moved += outcome.moved;
                        task.failed = outcome.failed;
                        if done {
                            task.finish(Status::Completed, None, self.clock.now_ms());
                            tracing::info!(redrive = id, moved = task.moved, failed = task.failed, "redrive completed");
                            return;
                        }
                    }
                    Err(e) => {
                        let message = e.to_string();
                        let now = self.clock.now_ms();
                        if let Some(task) = self.registry().tasks.get_mut(&id) {
                            task.finish(Status::Failed, Some(message.clone()), now);
                            task.failure = Some(e);
                        }
                        tracing::warn!(redrive = id, error = %message, "redrive failed");
                        return;
                    }
                }
            }
            tokio::select! {
                () = self.clock.sleep_until(self.clock.now_ms().saturating_add(REDRIVE_STEP_MS)) => {}
                () = wake.notified() => {}
            }
            tokens = (tokens + per_step).min(burst);
        }
    }

    fn is_running(&self, id: u64) -> bool {
        self.registry().tasks.get(&id).is_some_and(|t| t.status == Status::Running)
    }

    pub fn get(&self, id: u64) -> Option<TaskInfo> {
        self.registry().tasks.get(&id).map(|t| t.info(id))
    }

    /// Every task (of `source`, when given), oldest first.
    pub fn list(&self, source: Option<&str>) -> Vec<TaskInfo> {
        self.registry()
            .tasks
            .iter()
            .filter(|(_, t)| source.is_none_or(|s| t.source == s))
            .map(|(id, t)| t.info(*id))
            .collect()
    }

    /// Cancels a running task; it stops before its next step. A finished task is returned as it is.
    pub fn cancel(&self, id: u64) -> Option<TaskInfo> {
        let now = self.clock.now_ms();
        let mut registry = self.registry();
        let task = registry.tasks.get_mut(&id)?;
        task.finish(Status::Cancelled, None, now);
        task.wake.notify_one();
        Some(task.info(id))
    }

    /// Stops every running task (at shutdown) and refuses new ones.
    pub fn stop_all(&self) {
        let now = self.clock.now_ms();
        let mut registry = self.registry();
        registry.closed = true;
        for task in registry.tasks.values_mut() {
            task.finish(Status::Cancelled, Some("the server shut down".to_string()), now);
            task.wake.notify_one();
        }
    }

    /// Waits for every task to return; after `stop_all` that is at most one step each.
    pub async fn join_all(&self) {
        let handles: Vec<JoinHandle<()>> = self.registry().tasks.values_mut().filter_map(|t| t.handle.take()).collect();
        for handle in handles {
            if let Err(e) = handle.await {
                tracing::warn!(error = %e, "a redrive task ended abnormally");
            }
        }
    }
}

fn forget_oldest_finished(registry: &mut Registry) {
    while registry.tasks.len() >= REDRIVE_TASKS_KEPT_MAX {
        let oldest = registry.tasks.iter().find(|(_, t)| t.status != Status::Running).map(|(id, _)| *id);
        match oldest {
            Some(id) => {
                registry.tasks.remove(&id);
            }
            // Every kept task is running; running tasks are bounded by the number of queues.
            None => break,
        }
    }
}
