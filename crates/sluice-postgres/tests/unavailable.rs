//! The database going away under a running server: calls answer 503 `store_unavailable`
//! (retry), not `store_poisoned` (restart), change nothing, and work again as soon as the
//! database is back, without a restart.
//!
//! The store reaches the database through a TCP proxy in this test, which cuts every connection
//! it carries and refuses new ones while it is down, as a database that restarts, fails over or
//! drops off the network does.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use serde_json::{Value, json};
use sluice_core::NewMessage;
use sluice_postgres::PostgresStore;
use sluice_store::prelude::*;
use sluice_store::{Store, StoreError};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tower::ServiceExt;

/// A TCP proxy from a port of its own to the test database.
struct Proxy {
    port: u16,
    up: Arc<AtomicBool>,
    carried: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    async fn start(database: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let up = Arc::new(AtomicBool::new(true));
        let carried: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = tokio::spawn({
            let (up, carried) = (up.clone(), carried.clone());
            async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    if !up.load(Ordering::SeqCst) {
                        // Dropped at once: the client sees its connection closed.
                        continue;
                    }
                    let database = database.clone();
                    let task = tokio::spawn(async move {
                        let Ok(mut outbound) = TcpStream::connect(&database).await else { return };
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    });
                    carried.lock().unwrap().push(task);
                }
            }
        });
        Proxy { port, up, carried, accept }
    }

    /// Cuts every connection and refuses new ones.
    fn down(&self) {
        self.up.store(false, Ordering::SeqCst);
        for task in self.carried.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    fn up(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.down();
        self.accept.abort();
    }
}

/// The test database's `host:port`, and `key=value` connection parameters for it with its host
/// and port replaced by the proxy's.
fn through_proxy(url: &str, proxy_port: u16) -> (String, String) {
    let config: tokio_postgres::Config = url.parse().expect("SLUICE_TEST_PG_URL parses");
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        other => panic!("SLUICE_TEST_PG_URL must name a TCP host for this test, not {other:?}"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let quote = |v: &str| format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"));
    let mut params = format!("host=127.0.0.1 port={proxy_port}");
    if let Some(user) = config.get_user() {
        params += &format!(" user={}", quote(user));
    }
    if let Some(password) = config.get_password() {
        params += &format!(" password={}", quote(&String::from_utf8_lossy(password)));
    }
    if let Some(db) = config.get_dbname() {
        params += &format!(" dbname={}", quote(db));
    }
    (format!("{host}:{port}"), params)
}

async fn call(app: &Router, method: &str, path: &str, body: Value) -> (u16, Value) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .expect("request");
    let response = app.clone().oneshot(request).await.expect("the router never fails");
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("read body");
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_is_503_store_unavailable_until_it_is_back() {
    let url = pg_url_or_skip!();
    let schema = support::TestSchema::new(&url);
    let (database, _) = through_proxy(&url, 0);
    let proxy = Proxy::start(database).await;
    let (_, params) = through_proxy(&url, proxy.port);
    let store = Arc::new(
        PostgresStore::connect(&params, schema.options())
            .await
            .unwrap_or_else(|e| panic!("SLUICE_TEST_PG_URL={url} is set but unusable through a proxy: {e}")),
    );
    let app = sluice_server::app(store.clone() as Arc<dyn Store>);
    let send = |body: &str| json!({ "messages": [{ "body": body }] });
    assert_eq!(call(&app, "POST", "/v1/queues", json!({ "name": "q" })).await.0, 201);
    assert_eq!(call(&app, "POST", "/v1/queues/q/messages", send("before")).await.0, 200);

    proxy.down();
    for (method, path, body) in [
        ("POST", "/v1/queues/q/messages", send("during")),
        ("GET", "/v1/queues/q", Value::Null),
        ("POST", "/v1/queues/q/receive", json!({ "max": 10, "wait_ms": 0 })),
    ] {
        let (status, answer) = call(&app, method, path, body).await;
        assert_eq!(status, 503, "{method} {path}: {answer}");
        assert_eq!(answer["error"]["code"], "store_unavailable", "{method} {path}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("Retry") && !message.contains("until restarted"), "{method} {path}: {message}");
    }
    // The store's own answer, and nothing sticky: the store does not call itself poisoned.
    let refused = store.send("q", vec![NewMessage { body: b"during".to_vec(), ..Default::default() }]).await;
    assert!(matches!(refused, Err(StoreError::Unavailable(_))), "{refused:?}");
    assert!(store.refusal().is_none());

    proxy.up();
    // The very next call works, on the same store and server, and the refused sends left nothing.
    let (status, answer) = call(&app, "POST", "/v1/queues/q/receive", json!({ "max": 10, "wait_ms": 0 })).await;
    assert_eq!(status, 200, "{answer}");
    let bodies: Vec<&str> = answer["messages"].as_array().unwrap().iter().filter_map(|m| m["body"].as_str()).collect();
    assert_eq!(bodies, ["before"], "a send refused while the database was away must not be stored");
    assert_eq!(call(&app, "POST", "/v1/queues/q/messages", send("after")).await.0, 200);
}
