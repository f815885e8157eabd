//! The SQS test harness: a server over a fresh embedded store in a temporary directory,
//! requests in both AWS protocols (JSON 1.0 and Query), and a small XML reader built on
//! quick-xml, so that Query answers are read the way a client's XML parser reads them
//! (character references resolved, bare carriage returns normalised away).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use quick_xml::Reader;
use quick_xml::events::Event;
use serde_json::Value;
use sluice_embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use sluice_server::ServerConfig;
use sluice_store::Store;
use tempfile::TempDir;
use tower::ServiceExt;

pub const ACCOUNT: &str = "000000000000";
pub const HOST: &str = "localhost:9324";
pub const JSON_TYPE: &str = "application/x-amz-json-1.0";
pub const FORM_TYPE: &str = "application/x-www-form-urlencoded";

pub struct Sqs {
    app: Router,
    store: Arc<EmbeddedStore>,
    _dir: TempDir,
}

impl Drop for Sqs {
    fn drop(&mut self) {
        self.store.close();
    }
}

/// An answer: status, headers, body text.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn xml(&self) -> Node {
        parse_xml(&self.body)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The `(shape, query code, message)` of a JSON error, checking its fixed parts.
    pub fn json_error(&self) -> (String, String, String) {
        let body = self.json();
        let shape = body["__type"].as_str().unwrap_or_else(|| panic!("no __type: {body}"));
        let shape = shape.strip_prefix("com.amazonaws.sqs#").unwrap_or_else(|| panic!("__type prefix: {shape}"));
        let header = self.header("x-amzn-query-error").unwrap_or_else(|| panic!("no x-amzn-query-error: {body}"));
        let (code, fault) =
            header.split_once(';').unwrap_or_else(|| panic!("query error header without ';': {header}"));
        assert_eq!(fault, if self.status.is_server_error() { "Receiver" } else { "Sender" });
        assert_eq!(self.header("content-type"), Some(JSON_TYPE));
        (shape.to_string(), code.to_string(), body["message"].as_str().unwrap_or_default().to_string())
    }
}

impl Sqs {
    pub fn start() -> Sqs {
        Sqs::start_with(ServerConfig::default())
    }

    pub fn start_with(config: ServerConfig) -> Sqs {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Arc::new(
            EmbeddedStore::open(EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync })
                .expect("open embedded store"),
        );
        let app = sluice_server::app_with(store.clone() as Arc<dyn Store>, config);
        Sqs { app, store, _dir: dir }
    }

    pub async fn send(&self, request: Request<Body>) -> Reply {
        let response = self.app.clone().oneshot(request).await.expect("the router never fails");
        let status = response.status();
        let headers = response.headers().clone();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("read body");
        Reply { status, headers, body: String::from_utf8(body.to_vec()).expect("UTF-8 answer") }
    }

    /// A JSON-protocol call to `/`, as boto3 and aws-sdk-rust make it.
    pub async fn json(&self, action: &str, input: Value) -> Reply {
        self.json_at("/", action, input).await
    }

    pub async fn json_at(&self, path: &str, action: &str, input: Value) -> Reply {
        let request = Request::post(path)
            .header("host", HOST)
            .header("content-type", JSON_TYPE)
            .header("x-amz-target", format!("AmazonSQS.{action}"))
            .header("x-amzn-query-mode", "true")
            .body(Body::from(input.to_string()))
            .expect("request");
        self.send(request).await
    }

    /// A JSON call that must succeed; its output.
    pub async fn ok(&self, action: &str, input: Value) -> Value {
        let reply = self.json(action, input).await;
        assert_eq!(reply.status, StatusCode::OK, "{action}: {}", reply.body);
        assert!(reply.header("x-amzn-requestid").is_some(), "{action}: no request id");
        reply.json()
    }

    /// A JSON call that must fail; `(status, shape, query code, message)`.
    pub async fn err(&self, action: &str, input: Value) -> (u16, String, String, String) {
        let reply = self.json(action, input).await;
        assert_ne!(reply.status, StatusCode::OK, "{action} succeeded: {}", reply.body);
        let (shape, code, message) = reply.json_error();
        (reply.status.as_u16(), shape, code, message)
    }

    /// A Query-protocol form POST.
    pub async fn query(&self, path: &str, params: &[(&str, &str)]) -> Reply {
        let body = form(params);
        let request = Request::post(path)
            .header("host", HOST)
            .header("content-type", FORM_TYPE)
            .body(Body::from(body))
            .expect("request");
        self.send(request).await
    }

    /// A Query-protocol GET with the parameters in the query string.
    pub async fn query_get(&self, path: &str, params: &[(&str, &str)]) -> Reply {
        let request =
            Request::get(format!("{path}?{}", form(params))).header("host", HOST).body(Body::empty()).expect("request");
        self.send(request).await
    }

    /// The store underneath, for what SQS cannot set (Sluice's own queue attributes).
    pub fn store(&self) -> &EmbeddedStore {
        &self.store
    }

    /// Creates a queue through SQS; its URL.
    pub async fn create(&self, name: &str, attributes: Value) -> String {
        let out = self.ok("CreateQueue", serde_json::json!({ "QueueName": name, "Attributes": attributes })).await;
        out["QueueUrl"].as_str().expect("QueueUrl").to_string()
    }

    /// Polls `check` every 20 ms for up to 5 s (for the background redrive task).
    pub async fn eventually<F, Fut>(&self, what: &str, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        for _ in 0..250 {
            if check().await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("{what} did not happen within 5 s");
    }
}

pub fn url(name: &str) -> String {
    format!("http://{HOST}/{ACCOUNT}/{name}")
}

pub fn form(params: &[(&str, &str)]) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (k, v) in params {
        out.append_pair(k, v);
    }
    out.finish()
}

/// An XML element: its name, its text, its children in order.
#[derive(Debug, Default, Clone)]
pub struct Node {
    pub name: String,
    pub text: String,
    pub children: Vec<Node>,
}

impl Node {
    pub fn all(&self, name: &str) -> Vec<&Node> {
        self.children.iter().filter(|c| c.name == name).collect()
    }

    pub fn child(&self, name: &str) -> &Node {
        self.children
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("<{}> has no <{name}>: {self:?}", self.name))
    }

    pub fn has(&self, name: &str) -> bool {
        self.children.iter().any(|c| c.name == name)
    }

    /// The text at a `/`-separated path of child names.
    pub fn text_at(&self, path: &str) -> String {
        path.split('/').fold(self, |node, name| node.child(name)).text.clone()
    }

    /// `<Attribute><Name/><Value/></Attribute>`-style entries as pairs.
    pub fn pairs(&self, element: &str, key: &str, value: &str) -> Vec<(String, String)> {
        self.all(element).iter().map(|e| (e.text_at(key), e.text_at(value))).collect()
    }
}

/// Parses a document into its root element.
pub fn parse_xml(text: &str) -> Node {
    let mut reader = Reader::from_str(text);
    let mut stack = vec![Node::default()];
    let name = |q: quick_xml::name::QName<'_>| q.0.to_string();
    loop {
        match reader.read_event().unwrap_or_else(|e| panic!("bad XML ({e}): {text}")) {
            Event::Start(e) => stack.push(Node { name: name(e.name()), ..Default::default() }),
            Event::Empty(e) => {
                let node = Node { name: name(e.name()), ..Default::default() };
                stack.last_mut().expect("parent").children.push(node);
            }
            Event::End(_) => {
                let node = stack.pop().expect("open element");
                stack.last_mut().expect("parent").children.push(node);
            }
            Event::Text(t) => stack.last_mut().expect("element").text.push_str(&t.xml10_content()),
            Event::GeneralRef(r) => {
                let c = match r.resolve_char_ref().expect("valid reference") {
                    Some(c) => c,
                    None => match &*r {
                        "lt" => '<',
                        "gt" => '>',
                        "amp" => '&',
                        "quot" => '"',
                        "apos" => '\'',
                        other => panic!("unknown entity &{other};"),
                    },
                };
                stack.last_mut().expect("element").text.push(c);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    let mut root = stack.pop().expect("document");
    assert_eq!(root.children.len(), 1, "one root element: {text}");
    root.children.remove(0)
}
