//! The completion-webhook worker: drains the callback queue (`sluice_store::JOB_CALLBACK_QUEUE`,
//! where a store puts a job's webhook in the same write that finishes it) and POSTs each job's
//! final view to its `callback_url`, signed as the push worker signs
//! (`x-sluice-timestamp`, `x-sluice-signature: sha256=<HMAC-SHA256(secret, "<ts>.<body>")>`).
//!
//! Delivery is the push worker's (`topics/worker.rs`), reused rather than copied: the same
//! circuit breaker and concurrency bound per endpoint (`Endpoints`, shared with push, since an
//! endpoint is an endpoint), the same retry schedule from a `DeliveryPolicy` (exponential
//! backoff with full jitter between `min_delay_ms` and `max_delay_ms`, `after_failure`), the
//! same error text and jitter draw. A webhook is a queue message, so a node that dies mid-POST
//! leaves it to reappear after its visibility timeout: at least once. After its last attempt a
//! webhook goes to `JOB_CALLBACK_DLQ` with the last error in the `SluicePushError` attribute
//! and the URL in `SluicePushEndpoint` (`sluice dlq redrive sluice-job-callbacks-dlq --to
//! sluice-job-callbacks` sends them again).
//!
//! Attempts are counted as the push worker counts them: the message's receive count, less the
//! receives turned back without a call (an open breaker, an endpoint at its concurrency bound,
//! a store that could not read the job), remembered in memory.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sluice_core::breaker::{Admission, Outcome};
use sluice_core::delivery::DeliveryPolicy;
use sluice_core::jobs::JobError;
use sluice_core::message::{AttributeData, AttributeValue};
use sluice_core::{BrokerError, NewMessage};
use sluice_store::{
    JOB_CALLBACK_DLQ, JOB_CALLBACK_QUEUE, JobCallback, NackEntry, ReceiveRequest, ReceivedMessage, StoreError,
    job_callback_queue_attributes,
};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::Jobs;
use crate::topics::worker::{
    AfterFailure, Endpoints, LAST_ERROR_ATTRIBUTE, PUSH_SKIPS_TRACKED_MAX, PUSH_STORE_RETRY_MS,
    PUSH_VISIBILITY_MARGIN_MS, PushConfig, SIGNATURE_HEADER, TIMESTAMP_HEADER, after_failure, describe, draw,
    endpoint_key, signature, truncate,
};

/// The headers that name the job a webhook is about.
pub const JOB_ID_HEADER: &str = "x-sluice-job-id";
pub const JOB_STATUS_HEADER: &str = "x-sluice-job-status";
/// Webhooks one node POSTs at once at most, over every endpoint.
pub const CALLBACK_IN_FLIGHT_MAX: usize = 64;
/// Webhooks one receive takes at most.
pub const CALLBACK_RECEIVE_COUNT_MAX: u32 = 16;
/// The long poll of a receive, and the pause while the callback queue does not exist yet.
pub const CALLBACK_RECEIVE_WAIT_MS: u64 = 1_000;
/// How soon a webhook whose endpoint is at its concurrency bound is tried again.
pub const CALLBACK_BUSY_RETRY_MS: u64 = 200;

/// The default retries: 8 after the first attempt, from 1 s to 60 s apart, with full jitter.
pub fn default_policy() -> DeliveryPolicy {
    DeliveryPolicy { retries: 8, min_delay_ms: 1_000, max_delay_ms: 60_000, ..DeliveryPolicy::default() }
}

struct Shared {
    jobs: Arc<Jobs>,
    endpoints: Arc<Endpoints>,
    client: reqwest::Client,
    config: PushConfig,
    /// Receives turned back without a POST, by message id (see the module documentation).
    skips: Mutex<HashMap<String, u32>>,
}

/// Starts the worker; it runs until the handle is aborted (a webhook in flight then reappears
/// after its visibility timeout).
pub fn spawn(jobs: Arc<Jobs>, endpoints: Arc<Endpoints>) -> tokio::task::JoinHandle<()> {
    let config = endpoints.config();
    let client = endpoints
        .egress()
        .client(reqwest::Client::builder())
        .timeout(Duration::from_millis(config.request_timeout_ms))
        .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("Sluice-Webhook/", env!("CARGO_PKG_VERSION")))
        .build();
    let client = match client {
        Ok(client) => client,
        Err(e) => {
            tracing::error!("job callback worker not started: cannot build its HTTP client: {e}");
            return tokio::spawn(async {});
        }
    };
    let shared = Arc::new(Shared { jobs, endpoints, client, config, skips: Mutex::default() });
    tokio::spawn(run(shared))
}

async fn run(shared: Arc<Shared>) {
    let permits = Arc::new(Semaphore::new(CALLBACK_IN_FLIGHT_MAX));
    let mut deliveries = JoinSet::new();
    let store = shared.jobs.store.clone();
    loop {
        while deliveries.try_join_next().is_some() {}
        let Ok(first) = permits.clone().acquire_owned().await else { return };
        let mut held = vec![first];
        while held.len() < CALLBACK_RECEIVE_COUNT_MAX as usize {
            match permits.clone().try_acquire_owned() {
                Ok(permit) => held.push(permit),
                Err(_) => break,
            }
        }
        let request = ReceiveRequest {
            max: u32::try_from(held.len()).unwrap_or(1),
            wait_ms: Some(CALLBACK_RECEIVE_WAIT_MS),
            visibility_timeout_ms: Some(shared.config.request_timeout_ms + PUSH_VISIBILITY_MARGIN_MS),
        };
        let received = match store.receive(JOB_CALLBACK_QUEUE, request).await {
            Ok(received) => received,
            Err(e) => {
                drop(held);
                let pause = match e {
                    // No job with a callback has finished yet: nothing to deliver.
                    StoreError::Broker(BrokerError::QueueNotFound(_)) => CALLBACK_RECEIVE_WAIT_MS,
                    e => {
                        tracing::debug!("job callback worker: receive failed: {e}");
                        PUSH_STORE_RETRY_MS
                    }
                };
                // Real time: a pause before asking again, not something the clock decides.
                tokio::time::sleep(Duration::from_millis(pause)).await;
                continue;
            }
        };
        for (message, permit) in received.into_iter().zip(held) {
            let shared = shared.clone();
            deliveries.spawn(async move {
                deliver(&shared, message).await;
                drop(permit);
            });
        }
    }
}

impl Shared {
    fn skips(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.skips.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Remembers a receive that made no attempt, and gives the webhook back for later.
    async fn skip(&self, message: &ReceivedMessage, delay_ms: u64) {
        {
            let mut skips = self.skips();
            if skips.len() >= PUSH_SKIPS_TRACKED_MAX {
                skips.clear();
            }
            *skips.entry(message.message.meta.id.to_string()).or_insert(0) += 1;
        }
        nack(self, message, delay_ms, None).await;
    }
}

/// One webhook: POST it, then ack, retry later, or dead-letter.
async fn deliver(shared: &Shared, message: ReceivedMessage) {
    let message_id = message.message.meta.id.to_string();
    let skipped = shared.skips().get(&message_id).copied().unwrap_or(0);
    let attempt = message.message.meta.receive_count.saturating_sub(skipped).max(1);
    let callback = match JobCallback::from_body(&message.message.content.body) {
        Ok(callback) => callback,
        Err(e) => {
            give_up(shared, &message, "", &e).await;
            return;
        }
    };
    let endpoint = endpoint_key(&callback.url).unwrap_or_else(|| callback.url.clone());
    let Ok(slot) = shared.endpoints.permits(&endpoint).try_acquire_owned() else {
        shared.skip(&message, CALLBACK_BUSY_RETRY_MS).await;
        return;
    };
    let body = match final_view(shared, &callback).await {
        Ok(body) => body,
        Err(e) => {
            tracing::debug!(job = %callback.job_id, "job callback worker: cannot read the job: {e}");
            shared.skip(&message, PUSH_STORE_RETRY_MS).await;
            return;
        }
    };
    let secret = match shared.jobs.callback_secret().await {
        Ok(secret) => secret,
        Err(e) => {
            tracing::debug!("job callback worker: cannot read the signing secret: {e}");
            shared.skip(&message, PUSH_STORE_RETRY_MS).await;
            return;
        }
    };
    let clock = shared.jobs.clock().clone();
    let now = clock.now_ms();
    let permit = match shared.endpoints.allow(&endpoint, now) {
        Admission::Permitted(permit) => permit,
        Admission::Rejected { retry_at_ms } => {
            metrics::counter!("sluice_job_callbacks_total", "outcome" => "rejected").increment(1);
            shared.skip(&message, retry_at_ms.saturating_sub(now)).await;
            return;
        }
    };
    let timestamp = now / 1000;
    let result = match shared.endpoints.egress().check_url(&callback.url) {
        Err(refused) => Err(refused.to_string()),
        Ok(()) => shared
            .client
            .post(&callback.url)
            .header("content-type", "application/json")
            .header(JOB_ID_HEADER, &callback.job_id)
            .header(JOB_STATUS_HEADER, &callback.status)
            .header(TIMESTAMP_HEADER, timestamp.to_string())
            .header(SIGNATURE_HEADER, signature(&secret, timestamp, &body))
            .body(body)
            .send()
            .await
            .map_err(|e| describe(&e))
            .and_then(|r| {
                if r.status().is_success() { Ok(()) } else { Err(format!("the endpoint answered {}", r.status())) }
            }),
    };
    drop(slot);
    let outcome = if result.is_ok() { Outcome::Success } else { Outcome::Failure };
    shared.endpoints.record(&endpoint, clock.now_ms(), permit, outcome);
    let label = if result.is_ok() { "success" } else { "failure" };
    metrics::counter!("sluice_job_callbacks_total", "outcome" => label).increment(1);
    match result {
        Ok(()) => {
            shared.skips().remove(&message_id);
            ack(shared, &message).await;
        }
        Err(error) => {
            let policy = &shared.jobs.config().callback_policy;
            match after_failure(policy, attempt, draw(&message_id, attempt)) {
                AfterFailure::RetryInMs(delay) => {
                    tracing::debug!(job = %callback.job_id, attempt, delay, "job callback failed: {error}");
                    nack(shared, &message, delay, Some(error)).await;
                }
                AfterFailure::DeadLetter => {
                    shared.skips().remove(&message_id);
                    give_up(shared, &message, &callback.url, &error).await;
                }
            }
        }
    }
}

/// The body to POST: the job's final view, or, for a job pruned before its webhook went out,
/// what the webhook itself says of it.
async fn final_view(shared: &Shared, callback: &JobCallback) -> Result<Vec<u8>, StoreError> {
    let id = callback.job_id.parse().map_err(|e| StoreError::Job(JobError::Invalid(e)))?;
    match shared.jobs.get(id, 0).await {
        Ok(view) => Ok(shared.jobs.render(&view)),
        Err(StoreError::Job(JobError::NotFound(_))) => Ok(serde_json::to_vec(&serde_json::json!({
            "id": callback.job_id,
            "queue": callback.queue,
            "type": callback.job_type,
            "status": callback.status,
            "pruned": true,
        }))
        .unwrap_or_default()),
        Err(e) => Err(e),
    }
}

/// After the last attempt: into the dead-letter queue with the last error (created if
/// missing), then acked; kept for later if the dead-letter queue refuses it.
async fn give_up(shared: &Shared, message: &ReceivedMessage, url: &str, error: &str) {
    let store = &shared.jobs.store;
    tracing::warn!(url, "job webhook dead-lettered to {JOB_CALLBACK_DLQ} after its last attempt: {error}");
    let text = |value: String| AttributeValue { data_type: "String".to_string(), value: AttributeData::Text(value) };
    let mut dead = NewMessage { body: message.message.content.body.clone(), ..Default::default() };
    dead.attributes.insert(LAST_ERROR_ATTRIBUTE.to_string(), text(truncate(error.to_string())));
    if !url.is_empty() {
        dead.attributes.insert("SluicePushEndpoint".to_string(), text(url.to_string()));
    }
    let _ = store.create_queue(JOB_CALLBACK_DLQ, job_callback_queue_attributes()).await;
    let sent = store.send(JOB_CALLBACK_DLQ, vec![dead]).await;
    if matches!(&sent, Ok(results) if results.iter().all(Result::is_ok)) {
        metrics::counter!("sluice_job_callbacks_total", "outcome" => "dead_lettered").increment(1);
        ack(shared, message).await;
    } else {
        tracing::warn!("job webhook not dead-lettered ({JOB_CALLBACK_DLQ} refused it), kept: {sent:?}");
        nack(shared, message, PUSH_STORE_RETRY_MS, Some(error.to_string())).await;
    }
}

async fn ack(shared: &Shared, message: &ReceivedMessage) {
    if let Err(e) = shared.jobs.store.ack(JOB_CALLBACK_QUEUE, vec![message.receipt.clone()]).await {
        // The webhook reappears after its visibility timeout and is sent again.
        tracing::warn!("job callback worker: ack failed: {e}");
    }
}

async fn nack(shared: &Shared, message: &ReceivedMessage, delay_ms: u64, error: Option<String>) {
    let entry = NackEntry { receipt: message.receipt.clone(), delay_ms, error };
    if let Err(e) = shared.jobs.store.nack(JOB_CALLBACK_QUEUE, vec![entry]).await {
        tracing::warn!("job callback worker: nack failed: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_policy_is_valid_and_backs_off_with_jitter() {
        let policy = default_policy();
        assert!(policy.validate().is_ok());
        assert_eq!(policy.attempts_max(), 9);
        for seed in 0..32u32 {
            let AfterFailure::RetryInMs(delay) = after_failure(&policy, 4, draw("m", seed)) else {
                panic!("attempt 4 of 9 is retried");
            };
            assert!((1_000..=60_000).contains(&delay), "{delay}");
        }
        assert_eq!(after_failure(&policy, 9, 0), AfterFailure::DeadLetter);
    }
}
