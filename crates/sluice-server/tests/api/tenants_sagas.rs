//! Sagas and outbox relays in tenants' namespaces, with their background work running. Two
//! tenants define a saga and a relay of the same names, each over queues of the same names,
//! and never meet: each lists its own, every route naming the other's answers 404 as if absent,
//! a step's message and a relayed row land in the tenant's own queue, a reply answers only the
//! tenant's own instances, and a row routed by a column stays in its relay's tenant.

use std::time::Duration;

use serde_json::{Value, json};

use crate::auth::{call, key};
use crate::relays::outbox;
use crate::support::TestServer;
use crate::tenants::{ok, tenant_key};

/// How long background work (an orchestrator's step, a relay's poll) may take to show.
const WAIT_TRIES_MAX: usize = 200;
const WAIT_STEP_MS: u64 = 100;

/// The call's answer once `done` holds for it.
async fn eventually(s: &TestServer, path: &str, token: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut answer = Value::Null;
    for _ in 0..WAIT_TRIES_MAX {
        answer = ok(s, "GET", path, Value::Null, token).await;
        if done(&answer) {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(WAIT_STEP_MS)).await;
    }
    panic!("GET {path} never became what was awaited: {answer}");
}

/// The next messages of a tenant's queue, waiting for at least one.
async fn receive(s: &TestServer, queue: &str, token: &str) -> Vec<Value> {
    let path = format!("/v1/queues/{queue}/receive");
    for _ in 0..WAIT_TRIES_MAX / 10 {
        let got = ok(s, "POST", &path, json!({ "max": 10, "wait_ms": 1000 }), token).await;
        let messages = got["messages"].as_array().unwrap().clone();
        if !messages.is_empty() {
            return messages;
        }
    }
    panic!("nothing came to {queue}");
}

fn bodies(messages: &[Value]) -> Vec<String> {
    messages.iter().map(|m| m["body"].as_str().unwrap().to_string()).collect()
}

fn definition() -> Value {
    json!({ "steps": [{
        "name": "reserve",
        "action": { "queue": { "queue": "inventory", "body": { "sku": "{{input.sku}}" }, "reply_queue": "inventory-replies" } },
        "timeout_ms": 600000
    }]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_sagas_are_their_own_and_steps_send_to_their_own_queues() {
    let (s, services, running) = TestServer::start_running();
    let (_, admin) = key(&s, None, "admin", &["*:*:admin"]).await;
    let acme = tenant_key(&s, &admin, "acme").await;
    let beta = tenant_key(&s, &admin, "beta").await;

    // The same saga over the same queue names in both tenants: each is version 1, shown with
    // its queues as the tenant names them.
    for token in [&acme, &beta] {
        ok(&s, "POST", "/v1/queues", json!({ "name": "inventory" }), token).await;
        ok(&s, "POST", "/v1/queues", json!({ "name": "inventory-replies" }), token).await;
        let made = ok(&s, "PUT", "/v1/sagas/order", definition(), token).await;
        assert_eq!((made["name"].as_str(), made["version"].as_u64()), (Some("order"), Some(1)), "{made}");
        let queue = &made["steps"][0]["action"]["queue"];
        assert_eq!(
            (queue["queue"].as_str(), queue["reply_queue"].as_str()),
            (Some("inventory"), Some("inventory-replies"))
        );
        let listed = ok(&s, "GET", "/v1/sagas", Value::Null, token).await;
        assert_eq!(listed["sagas"].as_array().unwrap().len(), 1, "{listed}");
        assert_eq!(listed["sagas"][0]["name"], "order");
    }
    ok(&s, "PUT", "/v1/sagas/acme-only", definition(), &acme).await;
    assert_eq!(ok(&s, "GET", "/v1/sagas", Value::Null, &admin).await["sagas"], json!([]), "the default tenant's own");

    // One instance each, under the same correlation id; each step's message lands in its
    // tenant's queue, naming the reply queue as the tenant does.
    let start = |sku: &str| json!({ "input": { "sku": sku }, "correlation_id": "order-1" });
    let acme_started = ok(&s, "POST", "/v1/sagas/order/instances", start("acme-sku"), &acme).await;
    assert_eq!(acme_started["saga"], "order", "{acme_started}");
    let acme_id = acme_started["id"].as_str().unwrap().to_string();
    let beta_id =
        ok(&s, "POST", "/v1/sagas/order/instances", start("beta-sku"), &beta).await["id"].as_str().unwrap().to_string();
    for (token, sku) in [(&acme, "acme-sku"), (&beta, "beta-sku")] {
        let messages = receive(&s, "inventory", token).await;
        assert_eq!(bodies(&messages), [json!({ "sku": sku }).to_string()], "{messages:?}");
        assert_eq!(messages[0]["attributes"]["sluice.saga.reply_queue"]["value"], "inventory-replies");
    }
    let listed = ok(&s, "GET", "/v1/sagas/instances?saga=order", Value::Null, &beta).await;
    let ids: Vec<&str> = listed["instances"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [beta_id.as_str()], "{listed}");
    assert_eq!(ok(&s, "GET", "/v1/sagas/instances", Value::Null, &admin).await["instances"], json!([]));

    // Every route naming acme's saga or instance answers beta as if it were absent, and a
    // reply to acme's step in flight (its message sent) finds nothing waiting.
    let cancellable = ok(&s, "POST", "/v1/sagas/acme-only/instances", json!({ "input": { "sku": "x" } }), &acme).await;
    let cancellable = cancellable["id"].as_str().unwrap().to_string();
    receive(&s, "inventory", &acme).await;
    let stray = json!({ "correlation_id": cancellable, "step": "reserve", "ok": true });
    let (status, _, answer) = call(&s, "POST", "/v1/replies", Some(&stray), Some(&beta)).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (404, Some("saga_reply_unmatched")), "{answer}");
    let absent = [
        ("GET", "/v1/sagas/acme-only".to_string(), Value::Null, "saga_not_found"),
        ("POST", "/v1/sagas/acme-only/instances".to_string(), json!({ "input": {} }), "saga_not_found"),
        ("GET", format!("/v1/sagas/instances/{acme_id}"), Value::Null, "saga_instance_not_found"),
        ("POST", format!("/v1/sagas/instances/{cancellable}/cancel"), Value::Null, "saga_instance_not_found"),
        ("POST", format!("/v1/sagas/instances/{acme_id}/retry"), Value::Null, "saga_instance_not_found"),
    ];
    for (method, path, body, code) in absent {
        let body = (!body.is_null()).then_some(body);
        let (status, _, answer) = call(&s, method, &path, body.as_ref(), Some(&beta)).await;
        assert_eq!((status, answer["error"]["code"].as_str()), (404, Some(code)), "{method} {path}: {answer}");
        assert!(!answer.to_string().contains('~'), "{answer}");
    }
    assert_eq!(ok(&s, "GET", &format!("/v1/sagas/instances/{acme_id}"), Value::Null, &acme).await["saga"], "order");
    let cancelled = ok(&s, "POST", &format!("/v1/sagas/instances/{cancellable}/cancel"), Value::Null, &acme).await;
    assert_eq!(cancelled["cancel_requested"], true, "{cancelled}");
    let (status, _, answer) =
        call(&s, "POST", &format!("/v1/sagas/instances/{acme_id}/retry"), None, Some(&acme)).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (409, Some("saga_wrong_state")), "acme's reaches: {answer}");

    // A reply answers only the replier's tenant's instances, whoever shares the correlation id.
    let reply = json!({ "correlation_id": "order-1", "step": "reserve", "ok": true, "output": { "by": "beta" } });
    assert_eq!(ok(&s, "POST", "/v1/replies", reply, &beta).await["applied"], 1);
    let path = format!("/v1/sagas/instances/{beta_id}");
    eventually(&s, &path, &beta, |i| i["status"] == "completed").await;
    let acme_now = ok(&s, "GET", &format!("/v1/sagas/instances/{acme_id}"), Value::Null, &acme).await;
    assert_eq!(
        (acme_now["status"].as_str(), acme_now["steps"][0]["status"].as_str()),
        (Some("running"), Some("running"))
    );
    // acme answers through its reply queue, which is its own.
    let message = json!({ "body": json!({ "correlation_id": "order-1", "step": "reserve", "ok": true }).to_string() });
    ok(&s, "POST", "/v1/queues/inventory-replies/messages", json!({ "messages": [message] }), &acme).await;
    let done = eventually(&s, &format!("/v1/sagas/instances/{acme_id}"), &acme, |i| i["status"] == "completed").await;
    assert!(!done.to_string().contains('~'), "{done}");

    let (_, _, bytes) = s.raw(axum::http::Request::get("/metrics").body(axum::body::Body::empty()).unwrap()).await;
    let text = String::from_utf8(bytes).unwrap();
    let replies: Vec<&str> = text.lines().filter(|l| l.starts_with("sluice_saga_queue_replies_total{")).collect();
    assert!(
        replies.iter().any(|l| l.contains("queue=\"inventory-replies\"") && l.contains("tenant=\"acme\"")),
        "{replies:?}"
    );
    services.stop();
    running.join().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_relays_are_their_own_and_publish_into_their_own_tenant() {
    let (s, services, running) = TestServer::start_running();
    let (_, admin) = key(&s, None, "admin", &["*:*:admin"]).await;
    let acme = tenant_key(&s, &admin, "acme").await;
    let beta = tenant_key(&s, &admin, "beta").await;
    for token in [&acme, &beta] {
        ok(&s, "POST", "/v1/queues", json!({ "name": "events" }), token).await;
    }

    // acme relays to a fixed queue; beta routes by the aggregate type, and one of its rows
    // names acme's queue by its stored name, which must not reach it.
    let (_acme_db, acme_source) = outbox(&[("order", "o-1", "acme's row")]);
    let (_beta_db, beta_source) =
        outbox(&[("events", "o-1", "beta's row"), ("acme~events", "o-2", "beta's stray row")]);
    // acme's relay names a dead-letter queue, shown back as acme names it (beta's has none, so
    // that its stray row stays an error rather than a message).
    let request = |source: &str, target: &str, route_by: Option<&str>| {
        let dead_letter_queue = route_by.is_none().then_some("events");
        json!({ "name": "outbox", "source": source, "table": "outbox", "target": { "queue": target },
                "route_by": route_by, "poll_ms": 50, "dead_letter_queue": dead_letter_queue })
    };
    let made = ok(&s, "POST", "/v1/relays", request(&acme_source, "events", None), &acme).await;
    assert_eq!(
        (made["name"].as_str(), made["target"]["queue"].as_str(), made["dead_letter_queue"].as_str()),
        (Some("outbox"), Some("events"), Some("events")),
        "{made}"
    );
    let made =
        ok(&s, "POST", "/v1/relays", request(&beta_source, "${routedByValue}", Some("aggregatetype")), &beta).await;
    assert_eq!(made["target"]["queue"], "${routedByValue}", "{made}");
    for token in [&acme, &beta] {
        let listed = ok(&s, "GET", "/v1/relays", Value::Null, token).await;
        let names: Vec<&str> =
            listed["relays"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["outbox"], "{listed}");
    }
    assert_eq!(ok(&s, "GET", "/v1/relays", Value::Null, &admin).await["relays"], json!([]));

    // Each row lands in its tenant's own queue; the stray row is refused (an error of beta's
    // relay, never a message in acme's queue).
    assert_eq!(bodies(&receive(&s, "events", &acme).await), ["acme's row"]);
    assert_eq!(bodies(&receive(&s, "events", &beta).await), ["beta's row"]);
    let relay = eventually(&s, "/v1/relays/outbox", &beta, |r| {
        r["status"]["errors"].as_u64() >= Some(1) && r["status"]["published"] == 1
    })
    .await;
    let error = relay["status"]["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("route_by") && !error.contains("beta~"), "{relay}");
    let again = ok(&s, "POST", "/v1/queues/events/receive", json!({ "max": 10, "wait_ms": 200 }), &acme).await;
    assert_eq!(again["messages"], json!([]), "nothing of beta's reached acme");

    // Every route naming acme's relay answers beta as if it were absent, and acme its success.
    let (_other_db, other_source) = outbox(&[]);
    let mut other = request(&other_source, "events", None);
    other["name"] = json!("acme-only");
    ok(&s, "POST", "/v1/relays", other, &acme).await;
    for (method, path) in [
        ("GET", "/v1/relays/acme-only"),
        ("POST", "/v1/relays/acme-only/pause"),
        ("POST", "/v1/relays/acme-only/resume"),
        ("DELETE", "/v1/relays/acme-only"),
    ] {
        let (status, _, answer) = call(&s, method, path, None, Some(&beta)).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (404, Some("relay_not_found")),
            "{method} {path}: {answer}"
        );
        assert!(!answer.to_string().contains('~'), "{answer}");
    }
    assert_eq!(ok(&s, "POST", "/v1/relays/acme-only/pause", Value::Null, &acme).await["paused"], true);
    assert_eq!(ok(&s, "POST", "/v1/relays/acme-only/resume", Value::Null, &acme).await["paused"], false);
    assert_eq!(ok(&s, "GET", "/v1/relays/acme-only", Value::Null, &acme).await["name"], "acme-only");
    let (status, _, _) = call(&s, "DELETE", "/v1/relays/acme-only", None, Some(&acme)).await;
    assert_eq!(status, 204);

    eventually(&s, "/v1/relays/outbox", &acme, |r| r["status"]["published"] == 1).await;
    let (_, _, bytes) = s.raw(axum::http::Request::get("/metrics").body(axum::body::Body::empty()).unwrap()).await;
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.contains("sluice_relay_rows_published_total{relay=\"outbox\",tenant=\"acme\"} 1"), "{text}");
    assert!(!text.contains("acme~") && !text.contains("beta~"), "{text}");
    services.stop();
    running.join().await;
}
