//! Rust client for Sluice's native HTTP API (`/v1/...`).
//!
//! Every call maps to one route and returns the wire types of `sluice-api`, so what this client
//! sees is exactly what the server sends. Failed requests are retried with exponential backoff
//! and full jitter, but only when repeating them cannot apply them twice (see [`RetryPolicy`]).
//!
//! Async jobs: [`Client::enqueue_job`] and [`Client::wait_job`] for callers, [`Worker`] for the
//! processes that run them (see `jobs`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), sluice_client::ClientError> {
//! let client = sluice_client::Client::new("http://127.0.0.1:9324")?;
//! client.create_queue(&sluice_api::CreateQueueRequest { name: "jobs".into(), ..Default::default() }).await?;
//! client.send_text("jobs", "hello").await?;
//! for message in client.receive("jobs", 10, 20_000).await? {
//!     println!("{:?}", message.body);
//!     client.ack("jobs", message.receipt).await?;
//! }
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod alerts;
mod error;
pub mod events;
mod jobs;
mod keys;
mod processed;
pub mod projection;
mod relays;
mod retry;
mod sagas;
mod schedules;
mod schemas;
pub mod streams;
mod tenants;
mod trace;

use std::time::Duration;

use bytes::Bytes;
use reqwest::{Method, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sluice_api::{
    AckRequest, BatchResponse, CreateQueueRequest, CreateTopicRequest, ErrorResponse, Message, MessageList,
    NackRequest, PublishRequest, PublishResponse, PurgeResponse, Queue, QueueList, ReceiveRequest, RedriveRequest,
    RedriveTask, RedriveTaskList, SendMessage, SendRequest, SendResponse, SubscribeRequest, Subscription,
    SubscriptionList, Topic, TopicList, UpdateQueueRequest, UpdateTopicRequest, VisibilityRequest,
};
use sluice_core::backoff::Backoff;
use sluice_core::limits::RECEIVE_WAIT_MS_MAX;

pub use alerts::CreatedAlertRule;
pub use error::ClientError;
pub use jobs::{
    EnqueuedJob, Handled, JobContext, JobFailure, JobQuery, TERMINAL_STATUSES, Worker, WorkerBuilder, WorkerReport,
    is_finished,
};
pub use processed::{BadTableName, PROCESSED_TABLE_DEFAULT, ProcessedMessages, TABLE_NAME_LEN_MAX};
pub use relays::CreatedRelay;
pub use retry::RetryPolicy;
pub use sagas::SagaInstanceQuery;
pub use schedules::CreatedSchedule;
pub use schemas::RegisteredSchemaVersion;
pub use sluice_api;

use retry::Failure;

/// Result of every client call.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;

/// Longest error body kept in [`ClientError::UnexpectedStatus`], in bytes.
const ERROR_BODY_SHOWN_BYTES_MAX: usize = 512;

/// A handle on one Sluice server. Cheap to clone: clones share one connection pool.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
    timeout: Duration,
    retry: RetryPolicy,
    idempotency_keys: bool,
}

/// Settings for a [`Client`]; start with [`Client::builder`].
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    base_url: String,
    timeout: Duration,
    connect_timeout: Duration,
    retry: RetryPolicy,
    idempotency_keys: bool,
    api_key: Option<Redacted>,
    ca_certificates: Vec<Vec<u8>>,
}

/// A secret kept out of debug output.
#[derive(Clone)]
struct Redacted(String);

impl std::fmt::Debug for Redacted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl ClientBuilder {
    /// The API key every call carries (`Authorization: Bearer <key>`); needed once the server
    /// has keys. Never printed, not even in debug output.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(Redacted(key.into()));
        self
    }

    /// Trusts the CA (or self-signed certificate) in this PEM, besides the system's, for an
    /// `https://` server whose certificate it signed. Checked by [`ClientBuilder::build`].
    pub fn ca_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_certificates.push(pem.into());
        self
    }

    /// How long a request may take, connecting included (default 30 s). A long-poll receive
    /// gets its `wait_ms` on top, so a wait never counts against this.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long to wait for a connection (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Attempts per request, the first included (default 4); 1 turns retries off.
    pub fn attempts(mut self, attempts_max: u32) -> Self {
        self.retry.attempts_max = attempts_max.max(1);
        self
    }

    /// Whether mutating calls carry an `Idempotency-Key`, so that they are retried like reads
    /// (default true). Each keyed call keeps an answer on the server for its
    /// `--idempotency-ttl`: a producer making many calls per second may prefer to turn this
    /// off and retry only what cannot apply twice, or the server's bounds must allow for it.
    pub fn idempotency_keys(mut self, on: bool) -> Self {
        self.idempotency_keys = on;
        self
    }

    /// Spacing of retries (default: bound 100 ms doubling up to 2 s, full jitter).
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.retry.backoff = backoff;
        self
    }

    /// Checks the URL and builds the client.
    pub fn build(self) -> Result<Client> {
        let invalid = |reason: &str| ClientError::InvalidUrl { url: self.base_url.clone(), reason: reason.to_owned() };
        let base = Url::parse(&self.base_url)
            .map_err(|e| invalid(&format!("{e}; give a URL such as http://127.0.0.1:9324")))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(invalid("the scheme must be http or https, as in http://127.0.0.1:9324"));
        }
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(Redacted(key)) = &self.api_key {
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                ClientError::InvalidUrl {
                    url: self.base_url.clone(),
                    reason: "the API key holds characters a header cannot carry".to_owned(),
                }
            })?;
            value.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        let mut http = reqwest::Client::builder();
        for pem in &self.ca_certificates {
            let certificates = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| ClientError::InvalidUrl {
                url: self.base_url.clone(),
                reason: format!("the CA certificate is not PEM: {e}"),
            })?;
            for certificate in certificates {
                http = http.add_root_certificate(certificate);
            }
        }
        let http = http
            .default_headers(headers)
            .connect_timeout(self.connect_timeout)
            .user_agent(concat!("sluice-client/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| invalid(&e.to_string()))?;
        Ok(Client { http, base, timeout: self.timeout, retry: self.retry, idempotency_keys: self.idempotency_keys })
    }
}

/// A request body serialized once, so that a retry sends the same bytes.
pub(crate) struct Call {
    method: Method,
    url: Url,
    body: Option<Vec<u8>>,
    timeout: Duration,
    /// The `Idempotency-Key` of a mutating call, drawn once and sent with every attempt, so
    /// that the server runs it once however often it is retried.
    pub(crate) idempotency_key: Option<String>,
}

impl Call {
    /// The call without an `Idempotency-Key`: for the receives and claims, whose answers carry
    /// message bodies or job payloads. Keyed, each answer would be stored on the server for the
    /// key's TTL, a copy of everything received; unkeyed, a receive whose answer is lost gives
    /// its messages back after their visibility timeout, as it always did.
    pub(crate) fn without_key(mut self) -> Call {
        self.idempotency_key = None;
        self
    }
}

/// The most a retry asks the server to wait for its first attempt (`Prefer: wait=N`), in
/// seconds; the server's own bound is 60.
const RETRY_WAIT_S_MAX: u64 = 60;

/// How one attempt ended when it got no answer.
struct AttemptError {
    failure: Failure,
    error: ClientError,
}

impl Client {
    /// A client for the server at `base_url` (such as `http://127.0.0.1:9324`) with default
    /// settings.
    pub fn new(base_url: &str) -> Result<Client> {
        Client::builder(base_url).build()
    }

    /// Settings for a client of the server at `base_url`.
    pub fn builder(base_url: &str) -> ClientBuilder {
        ClientBuilder {
            base_url: base_url.to_owned(),
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            retry: RetryPolicy::default(),
            idempotency_keys: true,
            api_key: None,
            ca_certificates: Vec::new(),
        }
    }

    /// The server's base URL.
    pub fn base_url(&self) -> &Url {
        &self.base
    }

    // ---- queues ----

    /// `POST /v1/queues`: creates a queue. Creating it again with identical attributes succeeds
    /// with `created: false`; with different ones it fails with `queue_exists`.
    pub async fn create_queue(&self, request: &CreateQueueRequest) -> Result<CreatedQueue> {
        let (status, queue) = self.json_with_status(Method::POST, &["v1", "queues"], &[], Some(request)).await?;
        Ok(CreatedQueue { queue, created: status == StatusCode::CREATED })
    }

    /// `GET /v1/queues`: one page of queues whose names start with `prefix`, in name order.
    /// Pass the answer's `next_token` to get the next page.
    pub async fn list_queues(
        &self,
        prefix: Option<&str>,
        limit: Option<u32>,
        next_token: Option<&str>,
    ) -> Result<QueueList> {
        let limit = limit.map(|l| l.to_string());
        let query: Vec<(&str, &str)> = [("prefix", prefix), ("limit", limit.as_deref()), ("next_token", next_token)]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
        self.json(Method::GET, &["v1", "queues"], &query, None::<&()>).await
    }

    /// Every queue whose name starts with `prefix`, following `next_token` across pages.
    pub async fn list_all_queues(&self, prefix: Option<&str>) -> Result<Vec<Queue>> {
        let mut queues = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self.list_queues(prefix, None, token.as_deref()).await?;
            queues.extend(page.queues);
            match page.next_token {
                // A server that hands back the token it was given would loop forever.
                Some(next) if Some(&next) != token.as_ref() => token = Some(next),
                _ => return Ok(queues),
            }
        }
    }

    /// `GET /v1/queues/{name}`: attributes and live counts.
    pub async fn get_queue(&self, name: &str) -> Result<Queue> {
        self.json(Method::GET, &["v1", "queues", name], &[], None::<&()>).await
    }

    /// `PATCH /v1/queues/{name}`: changes the attributes that are set in `request`.
    pub async fn update_queue(&self, name: &str, request: &UpdateQueueRequest) -> Result<Queue> {
        self.json(Method::PATCH, &["v1", "queues", name], &[], Some(request)).await
    }

    /// `DELETE /v1/queues/{name}`: deletes the queue and its messages.
    pub async fn delete_queue(&self, name: &str) -> Result<()> {
        let call = self.call(Method::DELETE, &["v1", "queues", name], &[], None::<&()>, self.timeout)?;
        let (status, body) = self.execute(call).await?;
        if status.is_success() { Ok(()) } else { Err(error_from(status, &body)) }
    }

    /// `POST /v1/queues/{name}/purge`: deletes every message, keeps the queue.
    pub async fn purge_queue(&self, name: &str) -> Result<PurgeResponse> {
        self.json(Method::POST, &["v1", "queues", name, "purge"], &[], None::<&()>).await
    }

    // ---- topics ----

    /// `POST /v1/topics`: creates a topic. Creating it again with matching attributes and tags
    /// succeeds with `created: false`; with different ones it fails with `topic_exists`.
    pub async fn create_topic(&self, request: &CreateTopicRequest) -> Result<CreatedTopic> {
        let (status, topic) = self.json_with_status(Method::POST, &["v1", "topics"], &[], Some(request)).await?;
        Ok(CreatedTopic { topic, created: status == StatusCode::CREATED })
    }

    /// `GET /v1/topics`: one page of topics whose names start with `prefix`, in name order.
    pub async fn list_topics(
        &self,
        prefix: Option<&str>,
        limit: Option<u32>,
        next_token: Option<&str>,
    ) -> Result<TopicList> {
        let limit = limit.map(|l| l.to_string());
        let query: Vec<(&str, &str)> = [("prefix", prefix), ("limit", limit.as_deref()), ("next_token", next_token)]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
        self.json(Method::GET, &["v1", "topics"], &query, None::<&()>).await
    }

    /// Every topic whose name starts with `prefix`, following `next_token` across pages.
    pub async fn list_all_topics(&self, prefix: Option<&str>) -> Result<Vec<Topic>> {
        let mut topics = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self.list_topics(prefix, None, token.as_deref()).await?;
            topics.extend(page.topics);
            match page.next_token {
                Some(next) if Some(&next) != token.as_ref() => token = Some(next),
                _ => return Ok(topics),
            }
        }
    }

    /// `GET /v1/topics/{name}`: the topic with its subscription counts.
    pub async fn get_topic(&self, name: &str) -> Result<Topic> {
        self.json(Method::GET, &["v1", "topics", name], &[], None::<&()>).await
    }

    /// `PATCH /v1/topics/{name}`: changes the settings given, in one write.
    pub async fn update_topic(&self, name: &str, request: &UpdateTopicRequest) -> Result<Topic> {
        self.json(Method::PATCH, &["v1", "topics", name], &[], Some(request)).await
    }

    /// `DELETE /v1/topics/{name}`: deletes the topic and its subscriptions.
    pub async fn delete_topic(&self, name: &str) -> Result<()> {
        let call = self.call(Method::DELETE, &["v1", "topics", name], &[], None::<&()>, self.timeout)?;
        let (status, body) = self.execute(call).await?;
        if status.is_success() { Ok(()) } else { Err(error_from(status, &body)) }
    }

    /// `POST /v1/topics/{topic}/subscriptions`: subscribes a queue or an HTTP(S) endpoint.
    /// Subscribing it again with the same settings succeeds with `created: false`.
    pub async fn subscribe(&self, topic: &str, request: &SubscribeRequest) -> Result<CreatedSubscription> {
        let (status, subscription) =
            self.json_with_status(Method::POST, &["v1", "topics", topic, "subscriptions"], &[], Some(request)).await?;
        Ok(CreatedSubscription { subscription, created: status == StatusCode::CREATED })
    }

    /// `GET /v1/topics/{topic}/subscriptions` (or `GET /v1/subscriptions` for every topic):
    /// one page of subscriptions.
    pub async fn list_subscriptions(
        &self,
        topic: Option<&str>,
        limit: Option<u32>,
        next_token: Option<&str>,
    ) -> Result<SubscriptionList> {
        let limit = limit.map(|l| l.to_string());
        let query: Vec<(&str, &str)> = [("limit", limit.as_deref()), ("next_token", next_token)]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
        match topic {
            Some(topic) => self.json(Method::GET, &["v1", "topics", topic, "subscriptions"], &query, None::<&()>).await,
            None => self.json(Method::GET, &["v1", "subscriptions"], &query, None::<&()>).await,
        }
    }

    /// Every subscription of `topic` (of every topic when `None`), across pages.
    pub async fn list_all_subscriptions(&self, topic: Option<&str>) -> Result<Vec<Subscription>> {
        let mut subscriptions = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self.list_subscriptions(topic, None, token.as_deref()).await?;
            subscriptions.extend(page.subscriptions);
            match page.next_token {
                Some(next) if Some(&next) != token.as_ref() => token = Some(next),
                _ => return Ok(subscriptions),
            }
        }
    }

    /// `DELETE /v1/topics/{topic}/subscriptions/{id}`.
    pub async fn unsubscribe(&self, topic: &str, id: &str) -> Result<()> {
        let path = ["v1", "topics", topic, "subscriptions", id];
        let call = self.call(Method::DELETE, &path, &[], None::<&()>, self.timeout)?;
        let (status, body) = self.execute(call).await?;
        if status.is_success() { Ok(()) } else { Err(error_from(status, &body)) }
    }

    /// `POST /v1/topics/{topic}/publish`: publishes up to 100 messages; each entry of the
    /// answer holds the message's id or why that one was refused or not acknowledged.
    pub async fn publish(&self, topic: &str, request: &PublishRequest) -> Result<PublishResponse> {
        self.json(Method::POST, &["v1", "topics", topic, "publish"], &[], Some(request)).await
    }

    // ---- messages ----

    /// `POST /v1/queues/{queue}/messages`: sends up to 1,000 messages; each entry of the answer
    /// holds the new message's id or why that one was refused.
    pub async fn send_messages(&self, queue: &str, request: &SendRequest) -> Result<SendResponse> {
        self.json(Method::POST, &["v1", "queues", queue, "messages"], &[], Some(request)).await
    }

    /// Sends one text message and returns its id.
    pub async fn send_text(&self, queue: &str, body: impl Into<String>) -> Result<String> {
        let request = SendRequest { messages: vec![SendMessage { body: Some(body.into()), ..Default::default() }] };
        let response = self.send_messages(queue, &request).await?;
        match response.results.into_iter().next() {
            Some(sluice_api::SendResult { id: Some(id), .. }) => Ok(id),
            Some(sluice_api::SendResult { error: Some(error), .. }) => Err(ClientError::from_entry(error)),
            _ => {
                Err(ClientError::Decode { status: 200, reason: "the send answer has no result for the message".into() })
            }
        }
    }

    /// `POST /v1/queues/{queue}/receive`. With `wait_ms`, waits up to that long for a message;
    /// the request's own timeout is extended by the wait.
    pub async fn receive_messages(&self, queue: &str, request: &ReceiveRequest) -> Result<MessageList> {
        // Without `wait_ms` the server uses the queue's receive wait, which can be the maximum.
        let wait_ms = request.wait_ms.unwrap_or(RECEIVE_WAIT_MS_MAX);
        let timeout = self.timeout + Duration::from_millis(wait_ms);
        let call =
            self.call(Method::POST, &["v1", "queues", queue, "receive"], &[], Some(request), timeout)?.without_key();
        let (status, body) = self.execute(call).await?;
        decode(status, &body)
    }

    /// Receives up to `max` messages, waiting up to `wait_ms` for the first one.
    pub async fn receive(&self, queue: &str, max: u32, wait_ms: u64) -> Result<Vec<Message>> {
        let request = ReceiveRequest { max: Some(max), wait_ms: Some(wait_ms), visibility_timeout_ms: None };
        Ok(self.receive_messages(queue, &request).await?.messages)
    }

    /// [`Client::send_messages`] under the caller's own `Idempotency-Key` rather than one the
    /// client draws: an application that keeps its key (with the order it sends, say) can
    /// repeat the send after its own restart, and the server answers from the first one
    /// instead of sending again, for the key's TTL.
    pub async fn send_messages_with_key(&self, queue: &str, request: &SendRequest, key: &str) -> Result<SendResponse> {
        Ok(self.json_with_key(&["v1", "queues", queue, "messages"], request, key).await?.1)
    }

    /// [`Client::publish`] under the caller's own `Idempotency-Key`: a publish repeated after
    /// the caller's own restart delivers nothing again, for the key's TTL.
    pub async fn publish_with_key(&self, topic: &str, request: &PublishRequest, key: &str) -> Result<PublishResponse> {
        Ok(self.json_with_key(&["v1", "topics", topic, "publish"], request, key).await?.1)
    }

    /// `POST /v1/queues/{queue}/ack`: deletes received messages by receipt.
    pub async fn ack<R: Into<String>>(
        &self,
        queue: &str,
        receipts: impl IntoIterator<Item = R>,
    ) -> Result<BatchResponse> {
        let request = AckRequest { receipts: receipts.into_iter().map(Into::into).collect() };
        self.json(Method::POST, &["v1", "queues", queue, "ack"], &[], Some(&request)).await
    }

    /// `POST /v1/queues/{queue}/visibility`: extends or (with `timeout_ms: 0`) releases
    /// in-flight messages.
    pub async fn change_visibility(&self, queue: &str, request: &VisibilityRequest) -> Result<BatchResponse> {
        self.json(Method::POST, &["v1", "queues", queue, "visibility"], &[], Some(request)).await
    }

    /// `POST /v1/queues/{queue}/nack`: gives messages back, optionally after a delay and with
    /// the reason processing failed.
    pub async fn nack(&self, queue: &str, request: &NackRequest) -> Result<BatchResponse> {
        self.json(Method::POST, &["v1", "queues", queue, "nack"], &[], Some(request)).await
    }

    /// `GET /v1/queues/{queue}/messages`: looks at messages without receiving them.
    pub async fn peek(&self, queue: &str, limit: Option<u32>) -> Result<MessageList> {
        let limit = limit.map(|l| l.to_string());
        let query: Vec<(&str, &str)> = limit.as_deref().map(|l| ("limit", l)).into_iter().collect();
        self.json(Method::GET, &["v1", "queues", queue, "messages"], &query, None::<&()>).await
    }

    // ---- redrive ----

    /// `POST /v1/queues/{dlq}/redrive`: starts moving a dead-letter queue's messages back.
    pub async fn start_redrive(&self, dlq: &str, request: &RedriveRequest) -> Result<RedriveTask> {
        self.json(Method::POST, &["v1", "queues", dlq, "redrive"], &[], Some(request)).await
    }

    /// `GET /v1/queues/{dlq}/redrive`: the redrive tasks of a queue, oldest first.
    pub async fn list_redrives(&self, dlq: &str) -> Result<RedriveTaskList> {
        self.json(Method::GET, &["v1", "queues", dlq, "redrive"], &[], None::<&()>).await
    }

    /// `GET /v1/redrives`: every redrive task the server knows, oldest first.
    pub async fn list_all_redrives(&self) -> Result<RedriveTaskList> {
        self.json(Method::GET, &["v1", "redrives"], &[], None::<&()>).await
    }

    /// `GET /v1/redrives/{id}`: one task's progress.
    pub async fn get_redrive(&self, id: &str) -> Result<RedriveTask> {
        self.json(Method::GET, &["v1", "redrives", id], &[], None::<&()>).await
    }

    /// `DELETE /v1/redrives/{id}`: cancels a running task; messages already moved stay moved.
    pub async fn cancel_redrive(&self, id: &str) -> Result<RedriveTask> {
        self.json(Method::DELETE, &["v1", "redrives", id], &[], None::<&()>).await
    }

    // ---- plumbing ----

    pub(crate) async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &[&str],
        query: &[(&str, &str)],
        body: Option<&impl Serialize>,
    ) -> Result<T> {
        Ok(self.json_with_status(method, path, query, body).await?.1)
    }

    pub(crate) async fn json_with_status<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &[&str],
        query: &[(&str, &str)],
        body: Option<&impl Serialize>,
    ) -> Result<(StatusCode, T)> {
        let call = self.call(method, path, query, body, self.timeout)?;
        let (status, bytes) = self.execute(call).await?;
        Ok((status, decode(status, &bytes)?))
    }

    /// A `POST` under the caller's own `Idempotency-Key`, with its status.
    pub(crate) async fn json_with_key<T: DeserializeOwned>(
        &self,
        path: &[&str],
        body: &impl Serialize,
        key: &str,
    ) -> Result<(StatusCode, T)> {
        let mut call = self.call(Method::POST, path, &[], Some(body), self.timeout)?;
        call.idempotency_key = Some(key.to_owned());
        let (status, bytes) = self.execute(call).await?;
        Ok((status, decode(status, &bytes)?))
    }

    pub(crate) fn call(
        &self,
        method: Method,
        path: &[&str],
        query: &[(&str, &str)],
        body: Option<&impl Serialize>,
        timeout: Duration,
    ) -> Result<Call> {
        let mut url = self.base.clone();
        // `build` refused URLs that cannot be a base, so there are always path segments.
        url.path_segments_mut().expect("base URL checked in build").pop_if_empty().extend(path);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let body = body
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| ClientError::Decode { status: 0, reason: format!("cannot encode the request: {e}") })?;
        // Every call but a read carries a key when the client may retry it: a retry after a lost
        // answer then gets the first attempt's answer instead of running again (DESIGN.md §4b).
        // A client that never retries (one attempt) has no use for one and saves the server
        // storing the answer.
        let keyed = self.idempotency_keys && method != Method::GET && self.retry.attempts_max > 1;
        let idempotency_key = keyed.then(|| format!("sluice-client-{:032x}", rand::random::<u128>()));
        Ok(Call { method, url, body, timeout, idempotency_key })
    }

    /// Sends `call`, retrying as the policy allows, and returns the final status and body.
    /// A call with an idempotency key is as safe to repeat as a read: the server answers a
    /// repeat from the first attempt's stored answer.
    pub(crate) async fn execute(&self, call: Call) -> Result<(StatusCode, Bytes)> {
        let safe = call.method == Method::GET || call.idempotency_key.is_some();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (failure, outcome) = match self.attempt(&call, attempt > 1).await {
                Ok((status, body)) if status == StatusCode::SERVICE_UNAVAILABLE => {
                    (Failure::Unavailable, Ok((status, body)))
                }
                Ok(answer) => return Ok(answer),
                Err(AttemptError { failure, error }) => (failure, Err(error)),
            };
            match self.retry.next_delay(attempt, safe, failure, rand::random()) {
                Some(delay) => tokio::time::sleep(delay).await,
                None => return outcome,
            }
        }
    }

    async fn attempt(&self, call: &Call, retry: bool) -> std::result::Result<(StatusCode, Bytes), AttemptError> {
        let mut request = self.http.request(call.method.clone(), call.url.clone()).timeout(call.timeout);
        if let Some(key) = &call.idempotency_key {
            request = request.header("idempotency-key", key);
            if retry {
                // The first attempt may still be running on the server: wait for its answer
                // rather than be told `idempotency_key_in_use`.
                let wait = call.timeout.as_secs().clamp(1, RETRY_WAIT_S_MAX);
                request = request.header("prefer", format!("wait={wait}"));
            }
        }
        if let Some(body) = &call.body {
            request = request.header(reqwest::header::CONTENT_TYPE, "application/json").body(body.clone());
        }
        let transport = |e: reqwest::Error| {
            let url = call.url.to_string();
            let reason = innermost(&e);
            if e.is_connect() {
                AttemptError { failure: Failure::NotSent, error: ClientError::Connect { url, reason } }
            } else {
                let timed_out = e.is_timeout();
                let failure = if timed_out { Failure::Final } else { Failure::AfterSend };
                let reason = if timed_out { format!("no answer within {:?}", call.timeout) } else { reason };
                AttemptError { failure, error: ClientError::Transport { url, reason, timed_out } }
            }
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let body = response.bytes().await.map_err(transport)?;
        Ok((status, body))
    }
}

/// What [`Client::create_queue`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedQueue {
    /// The queue as it is now.
    pub queue: Queue,
    /// False when an identical queue already existed.
    pub created: bool,
}

/// What [`Client::create_topic`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedTopic {
    /// The topic as it is now.
    pub topic: Topic,
    /// False when a matching topic already existed.
    pub created: bool,
}

/// What [`Client::subscribe`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedSubscription {
    /// The subscription as it is now.
    pub subscription: Subscription,
    /// False when the endpoint was subscribed with these settings already.
    pub created: bool,
}

pub(crate) fn decode<T: DeserializeOwned>(status: StatusCode, body: &[u8]) -> Result<T> {
    if !status.is_success() {
        return Err(error_from(status, body));
    }
    serde_json::from_slice(body).map_err(|e| ClientError::Decode { status: status.as_u16(), reason: e.to_string() })
}

pub(crate) fn error_from(status: StatusCode, body: &[u8]) -> ClientError {
    match serde_json::from_slice::<ErrorResponse>(body) {
        Ok(ErrorResponse { error }) => ClientError::Api {
            status: status.as_u16(),
            code: error.code,
            message: error.message,
            details: error.details,
        },
        Err(_) => {
            let shown = &body[..body.len().min(ERROR_BODY_SHOWN_BYTES_MAX)];
            ClientError::UnexpectedStatus { status: status.as_u16(), body: String::from_utf8_lossy(shown).into_owned() }
        }
    }
}

/// The most specific message in an error's source chain ("Connection refused (os error 111)"),
/// which says more than reqwest's outer "error sending request".
fn innermost(e: &reqwest::Error) -> String {
    let mut current: &dyn std::error::Error = e;
    while let Some(source) = current.source() {
        current = source;
    }
    current.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_encode_names_and_keep_a_base_path() {
        let client = Client::new("http://127.0.0.1:9324/base/").unwrap();
        let call = client
            .call(Method::GET, &["v1", "queues", "a b"], &[("prefix", "x&y")], None::<&()>, Duration::ZERO)
            .unwrap();
        assert_eq!(call.url.as_str(), "http://127.0.0.1:9324/base/v1/queues/a%20b?prefix=x%26y");
    }

    #[test]
    fn bad_urls_are_refused_with_an_example() {
        for url in ["127.0.0.1:9324", "ftp://host", "not a url"] {
            let err = Client::new(url).unwrap_err();
            assert!(matches!(err, ClientError::InvalidUrl { .. }), "{url}: {err}");
            assert!(err.to_string().contains("http://127.0.0.1:9324"), "{url}: {err}");
        }
    }

    #[test]
    fn error_bodies_become_api_errors() {
        let body = br#"{"error":{"code":"queue_not_found","message":"no queue named x","details":{"queue":"x"}}}"#;
        let err = error_from(StatusCode::NOT_FOUND, body);
        assert_eq!(err.code(), Some(sluice_api::ErrorCode::QueueNotFound));
        assert_eq!(err.status(), Some(404));
        assert_eq!(err.to_string(), "no queue named x (queue_not_found)");
        let err = error_from(StatusCode::BAD_GATEWAY, b"<html>bad gateway</html>");
        assert!(matches!(err, ClientError::UnexpectedStatus { status: 502, .. }), "{err}");
        assert_eq!(err.code(), None);
    }
}
