//! The test harness: a server over a fresh embedded store in a temporary directory, request
//! helpers, and `check`, which runs a table of requests against expected statuses and codes.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use serde_json::{Value, json};
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_store::Store;
use tempfile::TempDir;
use tower::ServiceExt;

pub struct TestServer {
    app: Router,
    store: Arc<EmbeddedStore>,
    _dir: TempDir,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        // Syncs the last batch and stops the writer before the directory is removed.
        self.store.close();
    }
}

/// A request body.
pub enum Payload {
    None,
    Json(Value),
    /// Raw bytes with a content type (`None`: no header).
    Raw(Option<&'static str>, Vec<u8>),
}

impl TestServer {
    pub fn start() -> TestServer {
        TestServer::start_with(sluice_server::ServerConfig::default())
    }

    /// A server with this configuration.
    pub fn start_with(config: sluice_server::ServerConfig) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Arc::new(
            EmbeddedStore::open(EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync })
                .expect("open embedded store"),
        );
        let app = sluice_server::app_with(store.clone() as Arc<dyn Store>, config);
        TestServer { app, store, _dir: dir }
    }

    /// A server whose background work runs as under `serve` (the saga orchestrator, the
    /// relays' runners): end it with `Services::stop` and then `Running::join` before the
    /// server is dropped.
    pub fn start_running() -> (TestServer, Arc<sluice_services::Services>, sluice_services::Running) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Arc::new(
            EmbeddedStore::open(EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync })
                .expect("open embedded store"),
        );
        let config = sluice_server::ServerConfig::default();
        let clock = Arc::new(sluice_server::SystemClock);
        let push = sluice_server::PushConfig::default();
        let services = sluice_server::services(store.clone() as Arc<dyn Store>, clock, &config, push);
        let running = services.start();
        let app = sluice_server::router(services.clone(), config);
        (TestServer { app, store, _dir: dir }, services, running)
    }

    /// The router, to drive from another task (a long poll).
    pub fn clone_app(&self) -> Router {
        self.app.clone()
    }

    pub async fn raw(&self, request: Request<Body>) -> (StatusCode, HeaderMap, Vec<u8>) {
        let response = self.app.clone().oneshot(request).await.expect("the router never fails");
        let status = response.status();
        let headers = response.headers().clone();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("read body");
        (status, headers, body.to_vec())
    }

    pub async fn call(&self, method: &str, path: &str, payload: Payload) -> (StatusCode, Value) {
        let builder = Request::builder().method(method).uri(path);
        let request = match payload {
            Payload::None => builder.body(Body::empty()),
            Payload::Json(v) => builder.header("content-type", "application/json").body(Body::from(v.to_string())),
            Payload::Raw(Some(ct), bytes) => builder.header("content-type", ct).body(Body::from(bytes)),
            Payload::Raw(None, bytes) => builder.body(Body::from(bytes)),
        }
        .expect("request");
        let (status, _, body) = self.raw(request).await;
        let value = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&body).unwrap_or_else(|e| {
                panic!("{method} {path}: answer is not JSON ({e}): {}", String::from_utf8_lossy(&body))
            })
        };
        (status, value)
    }

    /// A call that must succeed with `status`; returns the body.
    pub async fn expect(&self, method: &str, path: &str, body: Option<Value>, status: u16) -> Value {
        let payload = body.map_or(Payload::None, Payload::Json);
        let (got, value) = self.call(method, path, payload).await;
        assert_eq!(got.as_u16(), status, "{method} {path}: {value}");
        value
    }

    pub async fn create_queue(&self, body: Value) -> Value {
        self.expect("POST", "/v1/queues", Some(body), 201).await
    }

    /// Sends text bodies and returns their ids; every entry must succeed.
    pub async fn send_texts(&self, queue: &str, bodies: &[&str]) -> Vec<String> {
        let messages: Vec<Value> = bodies.iter().map(|b| json!({ "body": b })).collect();
        let answer = self
            .expect("POST", &format!("/v1/queues/{queue}/messages"), Some(json!({ "messages": messages })), 200)
            .await;
        answer["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| r["id"].as_str().unwrap_or_else(|| panic!("send failed: {r}")).to_string())
            .collect()
    }

    pub async fn receive(&self, queue: &str, body: Value) -> Vec<Value> {
        let answer = self.expect("POST", &format!("/v1/queues/{queue}/receive"), Some(body), 200).await;
        answer["messages"].as_array().expect("messages").clone()
    }

    pub async fn counts(&self, queue: &str) -> Value {
        self.expect("GET", &format!("/v1/queues/{queue}"), None, 200).await["counts"].clone()
    }
}

/// One row of a request table: what to send, and the status and error code to expect.
pub struct Case {
    pub method: &'static str,
    pub path: String,
    pub payload: Payload,
    pub status: u16,
    /// The error code, for error answers.
    pub code: Option<&'static str>,
    /// `details.field`, when the error names one.
    pub field: Option<&'static str>,
}

pub fn case(
    method: &'static str,
    path: impl Into<String>,
    payload: Payload,
    status: u16,
    code: Option<&'static str>,
) -> Case {
    Case { method, path: path.into(), payload, status, code, field: None }
}

impl Case {
    pub fn field(mut self, field: &'static str) -> Case {
        self.field = Some(field);
        self
    }
}

/// Runs every case and reports every mismatch at once.
pub async fn check(server: &TestServer, cases: Vec<Case>) {
    let mut failures = Vec::new();
    for c in cases {
        let label = format!("{} {}", c.method, c.path);
        let (status, body) = server.call(c.method, &c.path, c.payload).await;
        if status.as_u16() != c.status {
            failures.push(format!("{label}: status {status}, want {}: {body}", c.status));
            continue;
        }
        if let Some(code) = c.code {
            if body["error"]["code"] != code {
                failures.push(format!("{label}: code {}, want {code}", body["error"]["code"]));
            }
            if body["error"]["message"].as_str().is_none_or(str::is_empty) {
                failures.push(format!("{label}: error without a message: {body}"));
            }
        }
        if let Some(field) = c.field
            && body["error"]["details"]["field"] != field
        {
            failures.push(format!("{label}: details.field {}, want {field}", body["error"]["details"]["field"]));
        }
    }
    assert!(failures.is_empty(), "{} case(s) failed:\n{}", failures.len(), failures.join("\n"));
}

pub fn json_payload(v: Value) -> Payload {
    Payload::Json(v)
}
