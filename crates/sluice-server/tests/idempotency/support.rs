//! The harness of the idempotency tests: a node (services and router over a store, on one
//! manual clock) that can be restarted over the same data directory, and keyed requests.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request};
use serde_json::Value;
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_server::idempotency_settings::IdempotencyConfig;
use sluice_server::{ManualClock, PushConfig, ServerConfig};
use sluice_services::Services;
use sluice_store::Store;
use tempfile::TempDir;
use tower::ServiceExt;

/// The TTL every test runs with: one minute on the manual clock.
pub const TTL_MS: u64 = 60_000;
pub const START_MS: u64 = 1_700_000_000_000;

/// One answer: status, headers, body bytes.
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn replayed(&self) -> bool {
        self.headers.get("idempotency-replayed").is_some_and(|v| v == "true")
    }

    pub fn code(&self) -> Value {
        self.json()["error"]["code"].clone()
    }
}

pub fn config() -> ServerConfig {
    let idempotency = IdempotencyConfig { ttl_ms: TTL_MS, single_process: true, ..IdempotencyConfig::default() };
    ServerConfig { idempotency, ..ServerConfig::default() }
}

/// A server over an embedded store in `dir`, on `clock`.
#[derive(Clone)]
pub struct Node {
    pub app: Router,
    pub services: Arc<Services>,
    store: Arc<EmbeddedStore>,
}

impl Node {
    pub fn open(dir: &TempDir, clock: &Arc<ManualClock>, config: ServerConfig) -> Node {
        let store = Arc::new(
            EmbeddedStore::open(EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync })
                .expect("open the embedded store"),
        );
        let services = sluice_server::services(
            store.clone() as Arc<dyn Store>,
            clock.clone() as Arc<dyn sluice_server::Clock>,
            &config,
            PushConfig::default(),
        );
        let app = sluice_server::router(services.clone(), config);
        Node { app, services, store }
    }

    /// Stops this node: its store syncs and lets go of the directory.
    pub async fn close(self) {
        let Node { app, services, store } = self;
        drop(app);
        drop(services);
        tokio::task::spawn_blocking(move || store.close()).await.expect("close");
    }

    pub async fn call(&self, method: &str, path: &str, key: Option<&str>, body: Option<&Value>) -> Answer {
        self.send(method, path, &[key.map(|k| ("idempotency-key", k))].into_iter().flatten().collect::<Vec<_>>(), body)
            .await
    }

    pub async fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&Value>) -> Answer {
        self.send_bytes(method, path, headers, body.map(|v| v.to_string().into_bytes())).await
    }

    /// A request with a body of exactly these bytes (JSON when given).
    pub async fn send_bytes(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Answer {
        let mut builder = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let request = match body {
            Some(bytes) => builder.header("content-type", "application/json").body(Body::from(bytes)),
            None => builder.body(Body::empty()),
        }
        .expect("request");
        let response = self.app.clone().oneshot(request).await.expect("the router never fails");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body").to_vec();
        Answer { status, headers, body }
    }

    /// A call without a key that must answer `status`.
    pub async fn expect(&self, method: &str, path: &str, body: Option<Value>, status: u16) -> Value {
        let answer = self.call(method, path, None, body.as_ref()).await;
        assert_eq!(answer.status, status, "{method} {path}: {}", String::from_utf8_lossy(&answer.body));
        answer.json()
    }
}

pub fn manual_clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(START_MS))
}
