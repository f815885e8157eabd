//! What the jobs scenario (`jobs.rs`) drives: a job system and its connections, implemented
//! by Sluice there and by the peers in `peers/jobs.rs`, a module of its own so that neither
//! imports the other.

use async_trait::async_trait;

/// One claimed job: what completing it needs, and when it was enqueued (micros since the run's
/// epoch, from its payload).
pub(crate) struct Claimed {
    pub id: String,
    pub lease: String,
    pub enqueued_us: u64,
}

/// A job system under test: one per run, preparing a fresh queue per phase.
#[async_trait]
pub(crate) trait JobSystem: Send + Sync {
    /// Its name in the report.
    fn name(&self) -> String;
    /// What an acknowledged enqueue or completion survives, in the system's own settings.
    fn durability(&self) -> String;
    /// Whether its acknowledgements mean "on disk" (compared with Sluice `fsync`).
    fn per_write_durable(&self) -> bool;
    /// A fresh, empty queue named `queue`.
    async fn prepare(&self, queue: &str) -> anyhow::Result<()>;
    /// A connection for one producer or worker.
    async fn handle(&self, queue: &str) -> anyhow::Result<Box<dyn JobHandle>>;
    /// Stops whatever it started.
    async fn stop(self: Box<Self>) -> anyhow::Result<()>;
}

/// One producer's or worker's connection.
#[async_trait]
pub(crate) trait JobHandle: Send {
    async fn enqueue(&mut self, enqueued_us: u64) -> anyhow::Result<()>;
    /// Waits a little for a job; `None` when none came.
    async fn claim(&mut self) -> anyhow::Result<Option<Claimed>>;
    async fn complete(&mut self, job: &Claimed) -> anyhow::Result<()>;
}
