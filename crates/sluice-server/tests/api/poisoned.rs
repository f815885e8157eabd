//! A poisoned store: readiness fails with `store_poisoned`, writes answer 503, and neither
//! shows the cause (which names files on the server) to the client.

use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::Request;
use serde_json::Value;
use sluice_core::broker::{MoveOutcome, QueueView};
use sluice_core::jobs::{ClaimSpec, JobId, NewJob, QueueJobStats};
use sluice_core::{QueueAttributes, QueueAttributesPatch};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_store::{ClaimedJob, EnqueuedJob, HeartbeatAnswer, JobListRequest, JobPage, JobStore, JobView};
use sluice_store::{
    CommitStore, Committed, EntryResults, NackEntry, PeekedMessage, QueueStore, ReceiveRequest, ReceivedMessage,
    Record, RecordStore, Store, StoreCounters, StoreError, StoreStatus, VisibilityRule, Write,
};
use tower::ServiceExt;

const CAUSE: &str = "fsync of /var/lib/sluice/journal failed: EIO";

/// The embedded store, reporting itself poisoned and refusing queue creation as a poisoned
/// store does; every other call goes through.
struct Poisoned(EmbeddedStore);

#[async_trait]
impl QueueStore for Poisoned {
    async fn create_queue(&self, _: &str, _: QueueAttributes) -> Result<(QueueView, bool), StoreError> {
        Err(StoreError::Poisoned(CAUSE.to_string()))
    }
    async fn get_queue(&self, name: &str) -> Result<QueueView, StoreError> {
        self.0.get_queue(name).await
    }
    async fn list_queues(&self, prefix: &str, after: Option<&str>, limit: usize) -> Result<Vec<QueueView>, StoreError> {
        self.0.list_queues(prefix, after, limit).await
    }
    async fn update_queue(&self, name: &str, patch: QueueAttributesPatch) -> Result<QueueView, StoreError> {
        self.0.update_queue(name, patch).await
    }
    async fn delete_queue(&self, name: &str) -> Result<(), StoreError> {
        self.0.delete_queue(name).await
    }
    async fn purge_queue(&self, name: &str) -> Result<u64, StoreError> {
        self.0.purge_queue(name).await
    }
    async fn send(
        &self,
        queue: &str,
        messages: Vec<sluice_core::NewMessage>,
    ) -> Result<EntryResults<sluice_core::Sent>, StoreError> {
        self.0.send(queue, messages).await
    }
    async fn receive(&self, queue: &str, request: ReceiveRequest) -> Result<Vec<ReceivedMessage>, StoreError> {
        self.0.receive(queue, request).await
    }
    async fn ack(&self, queue: &str, receipts: Vec<String>) -> Result<EntryResults<()>, StoreError> {
        self.0.ack(queue, receipts).await
    }
    async fn change_visibility(
        &self,
        queue: &str,
        entries: Vec<(String, u64)>,
        rule: VisibilityRule,
    ) -> Result<EntryResults<()>, StoreError> {
        self.0.change_visibility(queue, entries, rule).await
    }
    async fn nack(&self, queue: &str, entries: Vec<NackEntry>) -> Result<EntryResults<()>, StoreError> {
        self.0.nack(queue, entries).await
    }
    async fn peek(&self, queue: &str, limit: usize) -> Result<Vec<PeekedMessage>, StoreError> {
        self.0.peek(queue, limit).await
    }
    async fn move_messages(&self, from: &str, to: Option<&str>, max: u64) -> Result<MoveOutcome, StoreError> {
        self.0.move_messages(from, to, max).await
    }
}

/// Keeps no streams: every stream call is refused (`LogError::Unsupported`).
impl sluice_store::LogStore for Poisoned {}
impl sluice_store::RateStore for Poisoned {}

/// Keeps no events: every event store call is refused (`EventError::Unsupported`).
impl sluice_store::EventStore for Poisoned {}

#[async_trait]
impl RecordStore for Poisoned {
    async fn insert_record(&self, kind: &str, key: &str, value: Vec<u8>) -> Result<bool, StoreError> {
        self.0.insert_record(kind, key, value).await
    }
    async fn put_record(&self, kind: &str, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        self.0.put_record(kind, key, value).await
    }
    async fn replace_record(&self, kind: &str, key: &str, old: Vec<u8>, new: Vec<u8>) -> Result<bool, StoreError> {
        self.0.replace_record(kind, key, old, new).await
    }
    async fn get_record(&self, kind: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.0.get_record(kind, key).await
    }
    async fn list_records(
        &self,
        kind: &str,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        self.0.list_records(kind, prefix, after, limit).await
    }
    async fn delete_record(&self, kind: &str, key: &str) -> Result<bool, StoreError> {
        self.0.delete_record(kind, key).await
    }
}

#[async_trait]
impl CommitStore for Poisoned {
    async fn commit_all(&self, writes: Vec<Write>) -> Result<Committed, StoreError> {
        self.0.commit_all(writes).await
    }
}

#[async_trait]
impl JobStore for Poisoned {
    async fn enqueue_job(&self, job: NewJob) -> Result<EnqueuedJob, StoreError> {
        self.0.enqueue_job(job).await
    }
    async fn get_job(&self, id: JobId, wait_ms: u64) -> Result<JobView, StoreError> {
        self.0.get_job(id, wait_ms).await
    }
    async fn list_jobs(&self, request: JobListRequest) -> Result<JobPage, StoreError> {
        self.0.list_jobs(request).await
    }
    async fn cancel_job(&self, id: JobId) -> Result<JobView, StoreError> {
        self.0.cancel_job(id).await
    }
    async fn claim_jobs(&self, spec: ClaimSpec, wait_ms: u64) -> Result<Vec<ClaimedJob>, StoreError> {
        self.0.claim_jobs(spec, wait_ms).await
    }
    async fn heartbeat_job(
        &self,
        id: JobId,
        lease: &str,
        progress: Option<Vec<u8>>,
        lease_ms: Option<u64>,
    ) -> Result<HeartbeatAnswer, StoreError> {
        self.0.heartbeat_job(id, lease, progress, lease_ms).await
    }
    async fn complete_job(&self, id: JobId, lease: &str, result: Vec<u8>) -> Result<JobView, StoreError> {
        self.0.complete_job(id, lease, result).await
    }
    async fn fail_job(&self, id: JobId, lease: &str, error: String, retry: bool) -> Result<JobView, StoreError> {
        self.0.fail_job(id, lease, error, retry).await
    }
    async fn job_stats(&self) -> Result<Vec<QueueJobStats>, StoreError> {
        self.0.job_stats().await
    }
}

impl StoreStatus for Poisoned {
    fn refusal(&self) -> Option<StoreError> {
        Some(StoreError::Poisoned(CAUSE.to_string()))
    }
    fn counters(&self) -> StoreCounters {
        self.0.counters()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poisoned_store_is_not_ready_and_hides_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let inner =
        EmbeddedStore::open(EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync })
            .unwrap();
    let store = Arc::new(Poisoned(inner));
    let app = sluice_server::app(store.clone() as Arc<dyn Store>);

    let cases = [
        (Request::get("/readyz").body(Body::empty()).unwrap(), 503, "store_poisoned"),
        (
            Request::post("/v1/queues")
                .header("content-type", "application/json")
                .body(Body::from(r#"{"name":"q"}"#))
                .unwrap(),
            503,
            "store_poisoned",
        ),
    ];
    for (request, status, code) in cases {
        let label = format!("{} {}", request.method(), request.uri());
        let response = app.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{label}");
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert!(!text.contains("/var/lib/sluice"), "{label} leaks the cause: {text}");
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["error"]["code"], code, "{label}");
    }
    // Liveness is not readiness: the process still answers.
    let response = app.clone().oneshot(Request::get("/healthz").body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    store.0.close();
}
