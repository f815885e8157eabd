//! `Idempotency-Key` over the HTTP surface, on the embedded store with a manual clock: a table
//! of every mutating route, each checked by one function (first call, replay, mismatch, the
//! key in flight and waited for, a restart, expiry), and the layer's own rules (key checks,
//! answers not stored, scopes, bounds, claims left by a dead process, a race of many clients).

mod rules;
mod support;

use std::time::Duration;

use serde_json::{Value, json};
use sluice_server::NOT_STORED;
use sluice_services::idempotency::{Claim, Scope, StoredAnswer, fingerprint};

use support::{Node, TTL_MS, config, manual_clock};

/// One mutating route: the calls that prepare it (without keys), the keyed call, another body
/// for the mismatch, and what shows its effect happened once.
struct Route {
    name: &'static str,
    setup: Vec<(&'static str, &'static str, Option<Value>)>,
    method: &'static str,
    /// `{id}` is replaced by the `id` of the last setup answer that has one (or of its first
    /// claimed job), in the path and the bodies; `{lease}` by the lease of the last claim.
    path: &'static str,
    body: Option<Value>,
    other: Value,
    /// A GET, a JSON pointer into its answer, and the value it must hold after the first call
    /// and its replays (`null` for nothing there).
    once: Option<(&'static str, &'static str, Value)>,
}

fn route(name: &'static str, method: &'static str, path: &'static str, body: Option<Value>, other: Value) -> Route {
    Route { name, setup: Vec::new(), method, path, body, other, once: None }
}

impl Route {
    fn after(mut self, method: &'static str, path: &'static str, body: Option<Value>) -> Route {
        self.setup.push((method, path, body));
        self
    }

    fn once(mut self, path: &'static str, pointer: &'static str, value: Value) -> Route {
        self.once = Some((path, pointer, value));
        self
    }
}

fn queue(name: &str) -> Option<Value> {
    Some(json!({ "name": name }))
}

fn schedule(every_ms: u64) -> Value {
    json!({
        "name": "nightly", "every_ms": every_ms, "start_at": "2030-01-01T00:00:00Z",
        "target": { "queue": "q" }, "message": { "body": "tick" },
    })
}

fn rule(threshold: u64) -> Value {
    json!({
        "name": "late", "kind": "oldest_age_above_ms", "target": "q", "threshold": threshold,
        "for_ms": 30000, "notify": { "webhook": "https://hooks.example/alerts" }
    })
}

fn job(report: u64) -> Value {
    json!({ "queue": "jq", "type": "pdf", "payload": { "report": report } })
}

fn relay(queue: &str) -> Value {
    // A create checks its source: an SQLite outbox table, made once per run (never polled: the
    // router runs without its background work here).
    let path = std::env::temp_dir().join(format!("sluice-idempotency-relay-{}.db", std::process::id()));
    let conn = rusqlite::Connection::open(&path).expect("create the outbox database");
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, aggregatetype TEXT, aggregateid TEXT, type TEXT, payload TEXT, published_at TEXT)",
    )
    .expect("outbox table");
    json!({ "name": "orders", "source": format!("sqlite://{}", path.display()), "table": "outbox", "target": { "queue": queue } })
}

fn commit(offset: u64) -> Value {
    json!({ "member": "m1", "generation": 99, "offsets": { "0": offset } })
}

fn events(types: &[&str]) -> Value {
    let events: Vec<Value> = types.iter().map(|t| json!({ "type": t, "data": { "t": t } })).collect();
    json!({ "expected_version": "any", "events": events })
}

fn saga(timeout_ms: u64) -> Value {
    json!({ "steps": [{ "name": "reserve", "action": { "http": { "url": "http://127.0.0.1:9/reserve" } }, "timeout_ms": timeout_ms }] })
}

fn routes() -> Vec<Route> {
    let q = ("POST", "/v1/queues", queue("q"));
    let t = ("POST", "/v1/topics", Some(json!({ "name": "t" })));
    let s = ("POST", "/v1/streams", Some(json!({ "name": "s", "partitions": 1 })));
    let g = ("POST", "/v1/streams/s/groups", Some(json!({ "name": "g", "start": "earliest" })));
    let one = ("POST", "/v1/queues/q/messages", Some(json!({ "messages": [{ "body": "m" }] })));
    let enqueue = ("POST", "/v1/jobs", Some(job(1)));
    let claim = ("POST", "/v1/jobs/claim", Some(json!({ "queues": ["jq"], "max": 1 })));
    let shared = ("POST", "/v1/streams/s/groups", Some(json!({ "name": "sg", "mode": "shared" })));
    let placed = ("POST", "/v1/events/streams/order-1", Some(events(&["Placed"])));
    let billing = ("POST", "/v1/events/subscriptions", Some(json!({ "name": "billing" })));
    let define = ("PUT", "/v1/sagas/order", Some(saga(5000)));
    let start = ("POST", "/v1/sagas/order/instances", Some(json!({ "input": {} })));
    let mut routes = vec![
        route("create queue", "POST", "/v1/queues", queue("made"), json!({ "name": "made", "delay_ms": 5 })).once(
            "/v1/queues",
            "/queues/0/name",
            json!("made"),
        ),
        route("update queue", "PATCH", "/v1/queues/q", Some(json!({ "delay_ms": 10 })), json!({ "delay_ms": 20 }))
            .after(q.0, q.1, q.2.clone()),
        route("delete queue", "DELETE", "/v1/queues/q", None, json!({})).after(q.0, q.1, q.2.clone()),
        route("purge queue", "POST", "/v1/queues/q/purge", None, json!({})).after(q.0, q.1, q.2.clone()),
        route(
            "send",
            "POST",
            "/v1/queues/q/messages",
            Some(json!({ "messages": [{ "body": "a" }, { "body": "b", "priority": 12 }, { "body": "c" }] })),
            json!({ "messages": [{ "body": "other" }] }),
        )
        .after(q.0, q.1, q.2.clone())
        .once("/v1/queues/q", "/counts/visible", json!(2)),
        route("receive", "POST", "/v1/queues/q/receive", Some(json!({ "max": 1 })), json!({ "max": 2 }))
            .after(q.0, q.1, q.2.clone())
            .after(one.0, one.1, one.2.clone())
            .once("/v1/queues/q", "/counts/in_flight", json!(1)),
        route("ack", "POST", "/v1/queues/q/ack", Some(json!({ "receipts": ["nope"] })), json!({ "receipts": ["x"] }))
            .after(q.0, q.1, q.2.clone()),
        route(
            "visibility",
            "POST",
            "/v1/queues/q/visibility",
            Some(json!({ "entries": [{ "receipt": "nope", "timeout_ms": 0 }] })),
            json!({ "entries": [] }),
        )
        .after(q.0, q.1, q.2.clone()),
        route(
            "nack",
            "POST",
            "/v1/queues/q/nack",
            Some(json!({ "entries": [{ "receipt": "nope" }] })),
            json!({ "entries": [] }),
        )
        .after(q.0, q.1, q.2.clone()),
        route("redrive", "POST", "/v1/queues/d/redrive", Some(json!({ "max_per_second": 10 })), json!({}))
            .after("POST", "/v1/queues", queue("d"))
            .after(
                "POST",
                "/v1/queues",
                Some(json!({ "name": "q", "dead_letter": { "queue": "d", "max_receive_count": 1 } })),
            ),
        route("cancel redrive", "DELETE", "/v1/redrives/nope", None, json!({})),
        route(
            "create topic",
            "POST",
            "/v1/topics",
            Some(json!({ "name": "t" })),
            json!({ "name": "t", "display_name": "T" }),
        ),
        route(
            "update topic",
            "PATCH",
            "/v1/topics/t",
            Some(json!({ "display_name": "T" })),
            json!({ "display_name": "U" }),
        )
        .after(t.0, t.1, t.2.clone()),
        route("delete topic", "DELETE", "/v1/topics/t", None, json!({})).after(t.0, t.1, t.2.clone()),
        route(
            "subscribe",
            "POST",
            "/v1/topics/t/subscriptions",
            Some(json!({ "queue": "q", "raw": true })),
            json!({ "queue": "q" }),
        )
        .after(t.0, t.1, t.2.clone())
        .after(q.0, q.1, q.2.clone()),
        route(
            "publish",
            "POST",
            "/v1/topics/t/publish",
            Some(json!({ "messages": [{ "body": "p" }] })),
            json!({ "messages": [] }),
        )
        .after(t.0, t.1, t.2.clone())
        .after(q.0, q.1, q.2.clone())
        .after("POST", "/v1/topics/t/subscriptions", Some(json!({ "queue": "q", "raw": true })))
        .once("/v1/queues/q", "/counts/visible", json!(1)),
        route(
            "create stream",
            "POST",
            "/v1/streams",
            Some(json!({ "name": "s", "partitions": 1 })),
            json!({ "name": "s", "partitions": 2 }),
        ),
        route("update stream", "PATCH", "/v1/streams/s", Some(json!({ "partitions": 2 })), json!({ "partitions": 3 }))
            .after(s.0, s.1, s.2.clone()),
        route("delete stream", "DELETE", "/v1/streams/s", None, json!({})).after(s.0, s.1, s.2.clone()),
        route(
            "append",
            "POST",
            "/v1/streams/s/records",
            Some(json!({ "records": [{ "body": "r1" }, { "body": "r2", "partition": 7 }, { "body": "r3" }] })),
            json!({ "records": [{ "body": "other" }] }),
        )
        .after(s.0, s.1, s.2.clone())
        .once("/v1/streams/s/partitions/0/records", "/next_offset", json!(2)),
        route("create group", "POST", "/v1/streams/s/groups", g.2.clone(), json!({ "name": "g", "start": "latest" }))
            .after(s.0, s.1, s.2.clone()),
        route(
            "fetch",
            "POST",
            "/v1/streams/s/groups/g/fetch",
            Some(json!({ "member": "m1", "max": 10 })),
            json!({ "member": "m2" }),
        )
        .after(s.0, s.1, s.2.clone())
        .after(g.0, g.1, g.2.clone()),
        route("delete group", "DELETE", "/v1/streams/s/groups/g", None, json!({})).after(s.0, s.1, s.2.clone()).after(
            g.0,
            g.1,
            g.2.clone(),
        ),
        route("enqueue job", "POST", "/v1/jobs", Some(job(7)), job(8)).once(
            "/v1/jobs?queue=jq",
            "/jobs/0/type",
            json!("pdf"),
        ),
        route(
            "claim jobs",
            "POST",
            "/v1/jobs/claim",
            Some(json!({ "queues": ["jq"], "max": 1 })),
            json!({ "queues": ["jq"], "max": 2 }),
        )
        .after(enqueue.0, enqueue.1, enqueue.2.clone())
        .once("/v1/jobs?queue=jq", "/jobs/0/status", json!("running")),
        route("cancel job", "POST", "/v1/jobs/{id}/cancel", None, json!({})).after(
            enqueue.0,
            enqueue.1,
            enqueue.2.clone(),
        ),
        route(
            "heartbeat",
            "POST",
            "/v1/jobs/{id}/heartbeat",
            Some(json!({ "lease": "{lease}" })),
            json!({ "lease": "2" }),
        )
        .after(enqueue.0, enqueue.1, enqueue.2.clone())
        .after(claim.0, claim.1, claim.2.clone()),
        route(
            "complete job",
            "POST",
            "/v1/jobs/{id}/complete",
            Some(json!({ "lease": "{lease}" })),
            json!({ "lease": "2" }),
        )
        .after(enqueue.0, enqueue.1, enqueue.2.clone())
        .after(claim.0, claim.1, claim.2.clone()),
        route("fail job", "POST", "/v1/jobs/{id}/fail", Some(json!({ "lease": "{lease}" })), json!({ "lease": "2" }))
            .after(enqueue.0, enqueue.1, enqueue.2.clone())
            .after(claim.0, claim.1, claim.2.clone()),
        route("create schedule", "POST", "/v1/schedules", Some(schedule(60_000)), schedule(120_000)),
        route("pause schedule", "POST", "/v1/schedules/nightly/pause", None, json!({})).after(
            "POST",
            "/v1/schedules",
            Some(schedule(60_000)),
        ),
        route("resume schedule", "POST", "/v1/schedules/nightly/resume", None, json!({})).after(
            "POST",
            "/v1/schedules",
            Some(schedule(60_000)),
        ),
        route("delete schedule", "DELETE", "/v1/schedules/nightly", None, json!({})).after(
            "POST",
            "/v1/schedules",
            Some(schedule(60_000)),
        ),
        route(
            "register schema",
            "POST",
            "/v1/schemas/order/versions",
            Some(json!({ "schema": { "type": "object" } })),
            json!({ "schema": { "type": "string" } }),
        ),
        route(
            "set tenant quotas",
            "PUT",
            "/v1/tenants/acme",
            Some(json!({ "max_resources": 10 })),
            json!({ "max_resources": 1 }),
        ),
        route("remove tenant quotas", "DELETE", "/v1/tenants/acme", None, json!({})).after(
            "PUT",
            "/v1/tenants/acme",
            Some(json!({ "max_resources": 10 })),
        ),
        route("create alert rule", "POST", "/v1/alerts/rules", Some(rule(60_000)), rule(1)),
        route("delete alert rule", "DELETE", "/v1/alerts/rules/late", None, json!({})).after(
            "POST",
            "/v1/alerts/rules",
            Some(rule(60_000)),
        ),
        route("delete relay", "DELETE", "/v1/relays/nope", None, json!({})),
        route("pause relay", "POST", "/v1/relays/nope/pause", None, json!({})),
        route("resume relay", "POST", "/v1/relays/nope/resume", None, json!({})),
        route("create relay", "POST", "/v1/relays", Some(relay("out")), relay("other")),
        route("unsubscribe", "DELETE", "/v1/topics/t/subscriptions/{id}", None, json!({}))
            .after(t.0, t.1, t.2.clone())
            .after(q.0, q.1, q.2.clone())
            .after("POST", "/v1/topics/t/subscriptions", Some(json!({ "queue": "q" }))),
        route("commit offsets", "POST", "/v1/streams/s/groups/g/commit", Some(commit(7)), commit(8))
            .after(s.0, s.1, s.2.clone())
            .after(g.0, g.1, g.2.clone()),
        route(
            "seek",
            "POST",
            "/v1/streams/s/groups/g/seek",
            Some(json!({ "partition": 0, "offset": 0 })),
            json!({ "partition": 0 }),
        )
        .after(s.0, s.1, s.2.clone())
        .after(g.0, g.1, g.2.clone()),
        route(
            "ack records",
            "POST",
            "/v1/streams/s/groups/sg/ack",
            Some(json!({ "receipts": ["nope"] })),
            json!({ "receipts": [] }),
        )
        .after(s.0, s.1, s.2.clone())
        .after(shared.0, shared.1, shared.2.clone()),
        route(
            "nack records",
            "POST",
            "/v1/streams/s/groups/sg/nack",
            Some(json!({ "receipts": ["nope"] })),
            json!({ "receipts": [] }),
        )
        .after(s.0, s.1, s.2.clone())
        .after(shared.0, shared.1, shared.2.clone()),
        route(
            "release records",
            "POST",
            "/v1/streams/s/groups/sg/release",
            Some(json!({ "receipts": ["nope"] })),
            json!({ "receipts": [] }),
        )
        .after(s.0, s.1, s.2.clone())
        .after(shared.0, shared.1, shared.2.clone()),
        route(
            "append events",
            "POST",
            "/v1/events/streams/order-1",
            Some(events(&["Placed", "Paid"])),
            events(&["Other"]),
        )
        .once("/v1/events/streams/order-1", "/last_version", json!(1)),
        route("delete event stream", "DELETE", "/v1/events/streams/order-1", None, json!({})).after(
            placed.0,
            placed.1,
            placed.2.clone(),
        ),
        route(
            "put snapshot",
            "PUT",
            "/v1/events/streams/order-1/snapshot",
            Some(json!({ "version": 0, "data": { "n": 1 } })),
            json!({ "version": 0, "data": {} }),
        )
        .after(placed.0, placed.1, placed.2.clone()),
        route(
            "create event subscription",
            "POST",
            "/v1/events/subscriptions",
            Some(json!({ "name": "billing" })),
            json!({ "name": "billing", "from": "end" }),
        ),
        route("delete event subscription", "DELETE", "/v1/events/subscriptions/billing", None, json!({})).after(
            billing.0,
            billing.1,
            billing.2.clone(),
        ),
        route(
            "checkpoint",
            "POST",
            "/v1/events/subscriptions/billing/checkpoint",
            Some(json!({ "position": 0 })),
            json!({ "position": 1 }),
        )
        .after(placed.0, placed.1, placed.2.clone())
        .after(billing.0, billing.1, billing.2.clone()),
        route(
            "fetch events",
            "POST",
            "/v1/events/subscriptions/billing/fetch",
            Some(json!({ "max": 1 })),
            json!({ "max": 2 }),
        )
        .after(placed.0, placed.1, placed.2.clone())
        .after(billing.0, billing.1, billing.2.clone()),
        route("define saga", "PUT", "/v1/sagas/order", Some(saga(5000)), saga(6000)),
        route(
            "start saga",
            "POST",
            "/v1/sagas/order/instances",
            Some(json!({ "input": { "n": 1 } })),
            json!({ "input": { "n": 2 } }),
        )
        .after(define.0, define.1, define.2.clone())
        .once("/v1/sagas/instances?saga=order", "/instances/1", Value::Null),
        route("cancel saga", "POST", "/v1/sagas/instances/{id}/cancel", None, json!({}))
            .after(define.0, define.1, define.2.clone())
            .after(start.0, start.1, start.2.clone()),
        route("retry saga", "POST", "/v1/sagas/instances/{id}/retry", None, json!({}))
            .after(define.0, define.1, define.2.clone())
            .after(start.0, start.1, start.2.clone()),
        route(
            "reply",
            "POST",
            "/v1/replies",
            Some(json!({ "correlation_id": "none", "step": "reserve", "ok": true })),
            json!({ "correlation_id": "none", "step": "charge", "ok": true }),
        ),
        route(
            "check schema",
            "POST",
            "/v1/schemas/order/check",
            Some(json!({ "body": "{}" })),
            json!({ "body": "[]" }),
        )
        .after("POST", "/v1/schemas/order/versions", Some(json!({ "schema": { "type": "object" } }))),
        route(
            "configure schema",
            "PUT",
            "/v1/schemas/order/config",
            Some(json!({ "compatibility": "none" })),
            json!({ "compatibility": "full" }),
        ),
    ];
    routes.sort_by_key(|r| r.name);
    routes
}

/// Runs every step of the contract for one route; returns what went wrong.
async fn check(route: &Route) -> Vec<String> {
    let mut failures = Vec::new();
    let mut fail = |what: String| failures.push(format!("{}: {what}", route.name));
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = manual_clock();
    let node = Node::open(&dir, &clock, config());
    let (mut id, mut lease) = (None, None);
    for (method, path, body) in &route.setup {
        let answer = node.call(method, path, None, body.as_ref()).await;
        assert!(
            answer.status < 300,
            "{}: setup {method} {path}: {}",
            route.name,
            String::from_utf8_lossy(&answer.body)
        );
        let json = answer.json();
        let text = |pointer: &str| json.pointer(pointer).and_then(Value::as_str).map(str::to_string);
        id = text("/id").or(text("/jobs/0/id")).or(id);
        lease = text("/jobs/0/lease").or(lease);
    }
    let fill = |text: &str| {
        let text = id.as_ref().map_or(text.to_string(), |id| text.replace("{id}", id));
        lease.as_ref().map_or(text.clone(), |lease| text.replace("{lease}", lease))
    };
    let path = fill(route.path);
    let filled = route.body.as_ref().map(|b| serde_json::from_str::<Value>(&fill(&b.to_string())).expect("json"));
    let (method, body) = (route.method, filled.as_ref());

    // First call: executed, not replayed, and an answer the contract stores.
    let first = node.call(method, &path, Some("k-1"), body).await;
    if first.replayed() || NOT_STORED.contains(&first.status) {
        fail(format!("first call: {} {}", first.status, String::from_utf8_lossy(&first.body)));
        return failures;
    }
    // Replay: the same status, body and Location, marked as replayed.
    let same = |a: &support::Answer| {
        a.replayed()
            && a.status == first.status
            && a.body == first.body
            && a.headers.get("location") == first.headers.get("location")
    };
    let again = node.call(method, &path, Some("k-1"), body).await;
    if !same(&again) {
        fail(format!("replay: {} {}", again.status, String::from_utf8_lossy(&again.body)));
    }
    // Mismatch: another body under the key is refused, and nothing runs.
    let other = node.call(method, &path, Some("k-1"), Some(&route.other)).await;
    if other.status != 409 || other.code() != "idempotency_key_mismatch" {
        fail(format!("mismatch: {} {}", other.status, String::from_utf8_lossy(&other.body)));
    }
    if let Some((probe, pointer, want)) = &route.once {
        let seen = node.expect("GET", probe, None, 200).await;
        let got = seen.pointer(pointer).cloned().unwrap_or(Value::Null);
        if got != *want {
            fail(format!("executed once: {probe} {pointer} is {got}, want {want}"));
        }
    }

    // In flight: a request of this node holds another key; a retry is `in_use`, and one that
    // waits gets the first one's answer once it is stored.
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let scope =
        Scope { principal: "anonymous".into(), method: method.into(), path: path.clone(), key: "k-held".into() };
    let idempotency = node.services.idempotency().clone();
    let Claim::Execute(ticket) = idempotency.claim(&scope, &fingerprint(&bytes)).await.expect("claim") else {
        panic!("{}: a fresh key is claimed", route.name)
    };
    let busy = node.call(method, &path, Some("k-held"), body).await;
    if busy.status != 409 || busy.code() != "idempotency_key_in_use" {
        fail(format!("in flight: {} {}", busy.status, String::from_utf8_lossy(&busy.body)));
    }
    let waiter = {
        let (method, path, body) = (method.to_string(), path.clone(), body.cloned());
        let node = node.clone();
        tokio::spawn(async move {
            let headers = [("idempotency-key", "k-held"), ("prefer", "wait=30")];
            node.send(&method, &path, &headers, body.as_ref()).await
        })
    };
    let answer = StoredAnswer { status: 299, location: None, content_type: None, body: b"held".to_vec() };
    // Let the waiter find the key in use before the answer arrives; it is correct either way.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(idempotency.complete(ticket, &answer).await.expect("complete"));
    let waited = waiter.await.expect("waiter");
    if waited.status != 299 || waited.body != b"held" || !waited.replayed() {
        fail(format!("wait mode: {} {}", waited.status, String::from_utf8_lossy(&waited.body)));
    }

    // Restart: the stored answer survives.
    node.close().await;
    let node = Node::open(&dir, &clock, config());
    let after_restart = node.call(method, &path, Some("k-1"), body).await;
    if !same(&after_restart) {
        fail(format!("after restart: {} {}", after_restart.status, String::from_utf8_lossy(&after_restart.body)));
    }
    // Expiry: past the TTL the key is free, and the request runs again.
    clock.advance_by(TTL_MS);
    let expired = node.call(method, &path, Some("k-1"), body).await;
    if expired.replayed() {
        fail("after the TTL the request is replayed instead of run".to_string());
    }
    let report = node.services.idempotency().sweep_once().await.expect("sweep");
    if report.expired_deleted < 1 {
        fail(format!("the sweep deleted nothing: {report:?}"));
    }
    node.close().await;
    failures
}

/// True when `path` (a call's, without its query) is an instance of the OpenAPI `template`.
fn instance_of(path: &str, template: &str) -> bool {
    let path: Vec<&str> = path.split('?').next().unwrap_or_default().split('/').collect();
    let template: Vec<&str> = template.split('/').collect();
    path.len() == template.len()
        && path.iter().zip(&template).all(|(p, t)| p == t || (t.starts_with('{') && t.ends_with('}')))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_table_holds_every_mutating_route_of_the_api() {
    let dir = tempfile::tempdir().expect("temp dir");
    let node = Node::open(&dir, &manual_clock(), config());
    let doc = node.expect("GET", "/v1/openapi.json", None, 200).await;
    node.close().await;
    let routes = routes();
    let mut missing = Vec::new();
    for (template, item) in doc["paths"].as_object().expect("paths") {
        for method in ["post", "put", "patch", "delete"] {
            if !template.starts_with("/v1/") || item.get(method).is_none() {
                continue;
            }
            // Key calls ignore Idempotency-Key on purpose: a made key's answer holds its token,
            // which must never be stored (tests/api/auth.rs shows two calls make two keys), and
            // revoking is idempotent by itself.
            if template.starts_with("/v1/keys") {
                continue;
            }
            let upper = method.to_uppercase();
            if !routes.iter().any(|r| r.method == upper && instance_of(r.path, template)) {
                missing.push(format!("{upper} {template}"));
            }
        }
    }
    assert!(missing.is_empty(), "mutating routes without a row in the table: {missing:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mutating_route_keeps_the_contract() {
    let mut failures = Vec::new();
    let routes = routes();
    for route in &routes {
        failures.extend(check(route).await);
    }
    assert!(
        failures.is_empty(),
        "{} failure(s) over {} routes:\n{}",
        failures.len(),
        routes.len(),
        failures.join("\n")
    );
}
