//! The three services the order saga calls, each small and idempotent (steps are
//! at-least-once: every attempt of one call carries the same `Idempotency-Key`, so a
//! participant that remembers the keys it handled makes it exactly-once).
//!
//! - Inventory (HTTP): `POST /reserve {order, sku, qty}` holds stock and answers `{hold}`;
//!   `POST /release {hold}` puts it back.
//! - Payment (a queue participant): takes `{order, amount}` charges and `{refund}` refunds from
//!   the `payments` queue and answers each with a message to the reply queue the message names
//!   (`sluice.saga.reply_queue`); a charge above its limit is declined for good.
//! - Shipping (HTTP): `POST /ship {order}` answers `{tracking}`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use serde::Serialize;
use serde_json::{Value, json};
use sluice_api::{Attribute, SendMessage, SendRequest};
use sluice_client::Client;

/// What the participants did, for the report and the test.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Ledger {
    /// Units in stock per SKU now.
    pub stock: BTreeMap<String, i64>,
    /// Holds made and released, by hold id.
    pub reserved: Vec<String>,
    pub released: Vec<String>,
    /// Orders charged, declined and refunded.
    pub charged: Vec<String>,
    pub declined: Vec<String>,
    pub refunded: Vec<String>,
    pub shipped: Vec<String>,
    /// Calls that repeated an `Idempotency-Key` already handled (answered as the first time).
    pub duplicates: u64,
}

#[derive(Default)]
struct Inner {
    ledger: Ledger,
    /// Every answer by `Idempotency-Key`, so that a retried call gets the first answer.
    answers: HashMap<String, Value>,
    holds: HashMap<String, (String, i64)>,
}

/// The participants' shared state (they are one process here; in production, three services).
#[derive(Clone, Default)]
pub struct Participants {
    inner: Arc<Mutex<Inner>>,
    charge_limit: i64,
}

impl Participants {
    pub fn new(stock: &[(&str, i64)], charge_limit: i64) -> Participants {
        let p = Participants { inner: Arc::default(), charge_limit };
        p.lock().ledger.stock = stock.iter().map(|(sku, n)| (sku.to_string(), *n)).collect();
        p
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn ledger(&self) -> Ledger {
        self.lock().ledger.clone()
    }

    /// Runs `handle` once per idempotency key: a repeated key gets the stored answer.
    fn once(&self, key: &str, handle: impl FnOnce(&mut Inner) -> Value) -> Value {
        let mut inner = self.lock();
        if let Some(answer) = inner.answers.get(key) {
            let answer = answer.clone();
            inner.ledger.duplicates += 1;
            return answer;
        }
        let answer = handle(&mut inner);
        inner.answers.insert(key.to_owned(), answer.clone());
        answer
    }
}

fn key(headers: &HeaderMap) -> String {
    headers.get("idempotency-key").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

async fn reserve(State(p): State<Participants>, headers: HeaderMap, Json(body): Json<Value>) -> Json<Value> {
    let sku = body["sku"].as_str().unwrap_or_default().to_owned();
    let qty = body["qty"].as_i64().unwrap_or(1);
    let hold = format!("hold-{}", body["order"].as_str().unwrap_or_default());
    Json(p.once(&key(&headers), |inner| {
        *inner.ledger.stock.entry(sku.clone()).or_default() -= qty;
        inner.holds.insert(hold.clone(), (sku, qty));
        inner.ledger.reserved.push(hold.clone());
        json!({ "hold": hold })
    }))
}

async fn release(State(p): State<Participants>, headers: HeaderMap, Json(body): Json<Value>) -> Json<Value> {
    let hold = body["hold"].as_str().unwrap_or_default().to_owned();
    Json(p.once(&key(&headers), |inner| {
        // Nothing to undo is fine: a compensation may run for a reservation that never was.
        if let Some((sku, qty)) = inner.holds.remove(&hold) {
            *inner.ledger.stock.entry(sku).or_default() += qty;
            inner.ledger.released.push(hold.clone());
        }
        json!({ "released": hold })
    }))
}

async fn ship(State(p): State<Participants>, headers: HeaderMap, Json(body): Json<Value>) -> Json<Value> {
    let order = body["order"].as_str().unwrap_or_default().to_owned();
    Json(p.once(&key(&headers), |inner| {
        inner.ledger.shipped.push(order.clone());
        json!({ "tracking": format!("T-{order}") })
    }))
}

/// Serves inventory and shipping on 127.0.0.1, port 0; answers their base URL.
pub async fn serve_http(p: Participants) -> anyhow::Result<String> {
    let app = Router::new()
        .route("/reserve", post(reserve))
        .route("/release", post(release))
        .route("/ship", post(ship))
        .with_state(p);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("participants: the HTTP server stopped: {e}");
        }
    });
    Ok(url)
}

fn text(value: impl Into<String>) -> Attribute {
    Attribute { data_type: "String".into(), value: value.into() }
}

/// The payment service: takes messages from `queue` until the task is dropped, answering each
/// through the reply queue its message names.
pub async fn serve_payments(p: Participants, sluice: Client, queue: String) {
    loop {
        let messages = match sluice.receive(&queue, 10, 1_000).await {
            Ok(messages) => messages,
            Err(e) => {
                eprintln!("payments: receive failed: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        for message in messages {
            let attribute = |name: &str| message.attributes.get(name).map(|a| a.value.clone());
            let body: Value = message.body.as_deref().and_then(|b| serde_json::from_str(b).ok()).unwrap_or_default();
            let idempotency_key = attribute("Idempotency-Key").unwrap_or_default();
            let reply = p.once(&idempotency_key, |inner| {
                if let Some(order) = body["refund"].as_str() {
                    // Only what was charged is refunded; a refund of a declined charge does nothing.
                    if inner.ledger.charged.iter().any(|c| c == order) {
                        inner.ledger.refunded.push(order.to_owned());
                    }
                    return json!({ "ok": true, "output": { "refunded": order } });
                }
                let order = body["order"].as_str().unwrap_or_default().to_owned();
                if body["amount"].as_i64().unwrap_or(0) > p.charge_limit {
                    inner.ledger.declined.push(order);
                    return json!({ "ok": false, "retry": false, "error": "card declined" });
                }
                inner.ledger.charged.push(order.clone());
                json!({ "ok": true, "output": { "charge": format!("ch-{order}") } })
            });
            // The reply names what it answers by the message's own attributes, copied.
            let copied: BTreeMap<String, Attribute> =
                ["X-Correlation-Id", "sluice.saga.step", "sluice.saga.kind", "sluice.saga.attempt"]
                    .iter()
                    .filter_map(|name| Some((name.to_string(), text(attribute(name)?))))
                    .collect();
            let Some(reply_queue) = attribute("sluice.saga.reply_queue") else {
                eprintln!("payments: message {} names no reply queue; dropped", message.id);
                continue;
            };
            let send = SendRequest {
                messages: vec![SendMessage { body: Some(reply.to_string()), attributes: copied, ..Default::default() }],
            };
            // Acknowledged only once the answer is durable: a crash in between answers twice,
            // and the orchestrator ignores the second answer.
            match sluice.send_messages(&reply_queue, &send).await {
                Ok(_) => {
                    if let Some(receipt) = message.receipt.clone()
                        && let Err(e) = sluice.ack(&queue, [receipt]).await
                    {
                        eprintln!("payments: ack failed: {e}");
                    }
                }
                Err(e) => eprintln!("payments: the answer could not be sent ({e}); the charge comes again"),
            }
        }
    }
}
