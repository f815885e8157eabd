//! Tenants as namespaces. Two tenants make queues, topics and subscriptions of the same names
//! and never meet: each lists only its own, the same name is two resources, and every route
//! naming a resource answers another tenant's key as if the resource were absent (404), while
//! the owner's key gets its success. Names holding the separator are refused; a tenant's key
//! reaches only the kinds that are namespaced; errors and metrics name resources as the tenant does.

use serde_json::{Value, json};

use crate::auth::{call, key};
use crate::support::TestServer;

/// A key of `tenant` with every action on every namespaced kind; returns its token.
pub(crate) async fn tenant_key(s: &TestServer, admin: &str, tenant: &str) -> String {
    let kinds = ["queues", "topics", "streams", "jobs", "sagas", "events", "schedules", "schemas", "relays"];
    let scopes: Vec<String> = kinds.iter().map(|k| format!("{k}:*:*")).collect();
    let body = json!({ "name": tenant, "tenant": tenant, "scopes": scopes });
    let (status, _, made) = call(s, "POST", "/v1/keys", Some(&body), Some(admin)).await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["tenant"], tenant);
    made["key"].as_str().unwrap().to_string()
}

pub(crate) async fn ok(s: &TestServer, method: &str, path: &str, body: Value, token: &str) -> Value {
    let body = (!body.is_null()).then_some(body);
    let (status, _, answer) = call(s, method, path, body.as_ref(), Some(token)).await;
    assert!((200..300).contains(&status), "{method} {path}: {status} {answer}");
    answer
}

/// Each route (method, path, body, the code of an absent resource) names the owner's resource:
/// the other tenant's key finds nothing (404 with that code, and no stored name in the answer),
/// then the owner's key succeeds.
pub(crate) async fn absent_to_others(
    s: &TestServer,
    routes: Vec<(&str, String, Value, &str)>,
    other: &str,
    owner: &str,
) {
    for (method, path, body, code) in routes {
        let body_ref = (!body.is_null()).then_some(&body);
        let (status, _, answer) = call(s, method, &path, body_ref, Some(other)).await;
        assert_eq!((status, answer["error"]["code"].as_str()), (404, Some(code)), "other: {method} {path}: {answer}");
        assert!(!answer.to_string().contains('~'), "the answer names the owner's resource as stored: {answer}");
        ok(s, method, &path, body, owner).await;
    }
}

fn names(list: &Value, field: &str) -> Vec<String> {
    list[field].as_array().unwrap().iter().map(|q| q["name"].as_str().unwrap().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_share_names_and_never_see_each_others_resources() {
    let s = TestServer::start();
    let (_, admin) = key(&s, None, "admin", &["*:*:admin"]).await;
    let acme = tenant_key(&s, &admin, "acme").await;
    let beta = tenant_key(&s, &admin, "beta").await;

    // The same names in both tenants, and in the default one.
    for token in [&acme, &beta, &admin] {
        ok(&s, "POST", "/v1/queues", json!({ "name": "dlq" }), token).await;
        let made = ok(
            &s,
            "POST",
            "/v1/queues",
            json!({ "name": "orders", "dead_letter": { "queue": "dlq", "max_receive_count": 3 } }),
            token,
        )
        .await;
        assert_eq!((made["name"].as_str(), made["dead_letter"]["queue"].as_str()), (Some("orders"), Some("dlq")));
        ok(&s, "POST", "/v1/topics", json!({ "name": "events" }), token).await;
        let sub =
            ok(&s, "POST", "/v1/topics/events/subscriptions", json!({ "queue": "orders", "raw": true }), token).await;
        assert_eq!((sub["topic"].as_str(), sub["queue"].as_str()), (Some("events"), Some("orders")), "{sub}");
    }
    ok(&s, "POST", "/v1/queues", json!({ "name": "acme-only" }), &acme).await;
    ok(&s, "POST", "/v1/queues/orders/messages", json!({ "messages": [{ "body": "acme's" }] }), &acme).await;
    ok(&s, "POST", "/v1/topics/events/publish", json!({ "messages": [{ "body": "beta's" }] }), &beta).await;

    // Each tenant lists its own, in its own names; the default tenant lists only its own too.
    let listed = ok(&s, "GET", "/v1/queues", Value::Null, &acme).await;
    assert_eq!(names(&listed, "queues"), ["acme-only", "dlq", "orders"]);
    assert_eq!(names(&ok(&s, "GET", "/v1/queues", Value::Null, &beta).await, "queues"), ["dlq", "orders"]);
    assert_eq!(names(&ok(&s, "GET", "/v1/queues", Value::Null, &admin).await, "queues"), ["dlq", "orders"]);
    assert_eq!(
        names(&ok(&s, "GET", "/v1/queues?prefix=acme", Value::Null, &beta).await, "queues"),
        Vec::<String>::new()
    );
    // Paging within a tenant: one per page, the token in the tenant's names.
    let first = ok(&s, "GET", "/v1/queues?limit=1", Value::Null, &acme).await;
    assert_eq!(names(&first, "queues"), ["acme-only"]);
    let token = first["next_token"].as_str().unwrap();
    let second = ok(&s, "GET", &format!("/v1/queues?limit=2&next_token={token}"), Value::Null, &acme).await;
    assert_eq!(names(&second, "queues"), ["dlq", "orders"]);
    assert_eq!(names(&ok(&s, "GET", "/v1/topics", Value::Null, &beta).await, "topics"), ["events"]);
    let subs = ok(&s, "GET", "/v1/subscriptions", Value::Null, &acme).await;
    assert_eq!(subs["subscriptions"].as_array().unwrap().len(), 1, "{subs}");
    assert_eq!(subs["subscriptions"][0]["queue"], "orders");

    // The same name is three queues: each holds only what its tenant sent.
    let bodies = |list: Value| -> Vec<String> {
        list["messages"].as_array().unwrap().iter().map(|m| m["body"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(bodies(ok(&s, "GET", "/v1/queues/orders/messages", Value::Null, &acme).await), ["acme's"]);
    assert_eq!(bodies(ok(&s, "GET", "/v1/queues/orders/messages", Value::Null, &beta).await), ["beta's"]);
    assert!(bodies(ok(&s, "GET", "/v1/queues/orders/messages", Value::Null, &admin).await).is_empty());

    // Every route naming acme's own resource: acme's key succeeds, beta's finds nothing (404).
    ok(&s, "POST", "/v1/topics", json!({ "name": "events-acme" }), &acme).await;
    let sub = ok(&s, "POST", "/v1/topics/events-acme/subscriptions", json!({ "queue": "orders" }), &acme).await;
    let sub_id = sub["id"].as_str().unwrap().to_string();
    let routes: Vec<(&str, String, Value, &str)> = vec![
        ("GET", "/v1/queues/acme-only".into(), Value::Null, "queue_not_found"),
        ("PATCH", "/v1/queues/acme-only".into(), json!({ "visibility_timeout_ms": 5000 }), "queue_not_found"),
        ("POST", "/v1/queues/acme-only/messages".into(), json!({ "messages": [{ "body": "x" }] }), "queue_not_found"),
        ("GET", "/v1/queues/acme-only/messages".into(), Value::Null, "queue_not_found"),
        ("POST", "/v1/queues/acme-only/receive".into(), json!({}), "queue_not_found"),
        ("POST", "/v1/queues/acme-only/purge".into(), Value::Null, "queue_not_found"),
        ("POST", "/v1/queues/acme-only/redrive".into(), json!({ "to": "dlq" }), "queue_not_found"),
        ("GET", "/v1/topics/events-acme".into(), Value::Null, "topic_not_found"),
        ("POST", "/v1/topics/events-acme/publish".into(), json!({ "messages": [{ "body": "x" }] }), "topic_not_found"),
        ("GET", format!("/v1/topics/events-acme/subscriptions/{sub_id}"), Value::Null, "subscription_not_found"),
        ("DELETE", format!("/v1/topics/events-acme/subscriptions/{sub_id}"), Value::Null, "subscription_not_found"),
        ("DELETE", "/v1/queues/acme-only".into(), Value::Null, "queue_not_found"),
        ("DELETE", "/v1/topics/events-acme".into(), Value::Null, "topic_not_found"),
    ];
    absent_to_others(&s, routes, &beta, &acme).await;

    // A name spelling another tenant's prefix is no name; a subscription or dead-letter queue
    // in another tenant is no queue of this one's.
    let (status, _, answer) = call(&s, "GET", "/v1/queues/acme~orders", None, Some(&beta)).await;
    assert_eq!((status, answer["error"]["details"]["field"].as_str()), (400, Some("name")), "{answer}");
    let (status, _, answer) = call(&s, "POST", "/v1/queues", Some(&json!({ "name": "acme~x" })), Some(&admin)).await;
    assert_eq!(status, 400, "{answer}");
    let acme_orders_arn = subs["subscriptions"][0]["endpoint"].as_str().unwrap().to_string();
    let body = json!({ "queue": acme_orders_arn });
    let (status, _, answer) = call(&s, "POST", "/v1/topics/events/subscriptions", Some(&body), Some(&beta)).await;
    assert_eq!((status, answer["error"]["details"]["field"].as_str()), (400, Some("queue")), "{answer}");

    // Streams: the same name in two tenants is two streams, each listing its own, and a group's
    // dead-letter queue is the tenant's own.
    for (token, body) in [(&acme, "acme's record"), (&beta, "beta's record")] {
        let made = ok(&s, "POST", "/v1/streams", json!({ "name": "clicks", "partitions": 1 }), token).await;
        assert_eq!(made["name"], "clicks");
        ok(&s, "POST", "/v1/streams/clicks/records", json!({ "records": [{ "body": body }] }), token).await;
        let group = json!({ "name": "g", "mode": "shared", "dead_letter_queue": "dlq" });
        let made = ok(&s, "POST", "/v1/streams/clicks/groups", group, token).await;
        assert_eq!(made["dead_letter_queue"], "dlq", "{made}");
    }
    let read = ok(&s, "GET", "/v1/streams/clicks/partitions/0/records", Value::Null, &beta).await;
    let values: Vec<&str> = read["records"].as_array().unwrap().iter().map(|r| r["body"].as_str().unwrap()).collect();
    assert_eq!(values, ["beta's record"], "{read}");
    assert_eq!(names(&ok(&s, "GET", "/v1/streams", Value::Null, &acme).await, "streams"), ["clicks"]);
    assert_eq!(names(&ok(&s, "GET", "/v1/streams", Value::Null, &admin).await, "streams"), Vec::<String>::new());
    ok(&s, "POST", "/v1/streams", json!({ "name": "acme-stream", "partitions": 1 }), &acme).await;
    let (status, _, answer) = call(&s, "GET", "/v1/streams/acme-stream", None, Some(&beta)).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (404, Some("stream_not_found")), "{answer}");
    assert!(!answer.to_string().contains('~'), "{answer}");

    // Jobs: the same job queue name in two tenants; each sees, cancels and claims only its own.
    let job = |n: u64| json!({ "queue": "reports", "type": "pdf", "payload": { "n": n } });
    let acme_job = ok(&s, "POST", "/v1/jobs", job(1), &acme).await;
    assert_eq!(acme_job["queue"], "reports", "{acme_job}");
    let acme_job_id = acme_job["id"].as_str().unwrap().to_string();
    ok(&s, "POST", "/v1/jobs", job(2), &beta).await;
    let listed = ok(&s, "GET", "/v1/jobs", Value::Null, &beta).await;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 1, "beta lists only its own job: {listed}");
    for (method, path) in
        [("GET", format!("/v1/jobs/{acme_job_id}")), ("POST", format!("/v1/jobs/{acme_job_id}/cancel"))]
    {
        let (status, _, answer) = call(&s, method, &path, None, Some(&beta)).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (404, Some("job_not_found")),
            "{method} {path}: {answer}"
        );
    }
    let claimed = ok(&s, "POST", "/v1/jobs/claim", json!({ "queues": ["reports"], "max": 10 }), &beta).await;
    let claimed = claimed["jobs"].as_array().unwrap();
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    assert_eq!((claimed[0]["payload"]["n"].as_u64(), claimed[0]["queue"].as_str()), (Some(2), Some("reports")));
    let stats = ok(&s, "GET", "/v1/jobs/stats", Value::Null, &acme).await;
    assert_eq!(stats["queues"].as_array().unwrap().len(), 1, "{stats}");
    assert_eq!(stats["queues"][0]["queue"], "reports");
    assert_eq!(ok(&s, "GET", &format!("/v1/jobs/{acme_job_id}"), Value::Null, &acme).await["id"], acme_job_id.as_str());
    let (status, _, answer) = call(&s, "GET", "/v1/jobs/callback-secret", None, Some(&acme)).await;
    assert_eq!(status, 403, "the callback secret is the server's: {answer}");

    // What the whole server shares stays the default tenant's alone.
    let (status, _, answer) = call(&s, "GET", "/v1/keys", None, Some(&acme)).await;
    assert_eq!(status, 403, "a tenant's key cannot manage keys: {answer}");

    // Metrics carry the tenant as a label and the queue by its own name.
    let (_, _, bytes) = s.raw(axum::http::Request::get("/metrics").body(axum::body::Body::empty()).unwrap()).await;
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.contains("sluice_queue_visible{queue=\"orders\",tenant=\"beta\"} 1"), "{text}");
    assert!(text.contains("sluice_queue_visible{queue=\"orders\"} 0"), "{text}");
    assert!(!text.contains("acme~"), "{text}");
    let stream_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("sluice_stream_next_offset{")).collect();
    assert!(
        stream_lines.iter().any(|l| l.contains("stream=\"clicks\"") && l.contains("tenant=\"beta\"")),
        "{stream_lines:?}"
    );
}

fn event_ids(read: &Value) -> Vec<String> {
    read["events"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_event_streams_and_subscriptions_are_their_own() {
    let s = TestServer::start();
    let (_, admin) = key(&s, None, "admin", &["*:*:admin"]).await;
    let acme = tenant_key(&s, &admin, "acme").await;
    let beta = tenant_key(&s, &admin, "beta").await;

    // The same stream id in three tenants is three streams, each starting at version 0.
    for (token, id) in [(&acme, "acme-0"), (&beta, "beta-0"), (&admin, "default-0")] {
        let append = json!({ "expected_version": "no_stream", "events": [{ "id": id, "type": "Placed", "data": {} }] });
        let made = ok(&s, "POST", "/v1/events/streams/order-1", append, token).await;
        assert_eq!(made["first_version"], 0, "{made}");
        let sub = json!({ "name": "proj", "from": "start", "stream_prefix": "order-" });
        let made = ok(&s, "POST", "/v1/events/subscriptions", sub, token).await;
        assert_eq!((made["name"].as_str(), made["stream_prefix"].as_str()), (Some("proj"), Some("order-")), "{made}");
    }
    let acme_only = json!({ "expected_version": "any", "events": [{ "id": "acme-1", "type": "Noted", "data": {} }] });
    ok(&s, "POST", "/v1/events/streams/acme-notes", acme_only, &acme).await;

    let read = ok(&s, "GET", "/v1/events/streams/order-1", Value::Null, &beta).await;
    assert_eq!((event_ids(&read), read["stream_id"].as_str()), (vec!["beta-0".to_string()], Some("order-1")));
    assert_eq!(read["events"][0]["stream_id"], "order-1", "{read}");
    // $all holds only the reader's own events, the default tenant's included.
    let all = ok(&s, "GET", "/v1/events/all", Value::Null, &acme).await;
    assert_eq!(event_ids(&all), ["acme-0", "acme-1"], "{all}");
    assert!(!all.to_string().contains('~'), "{all}");
    assert_eq!(event_ids(&ok(&s, "GET", "/v1/events/all", Value::Null, &admin).await), ["default-0"]);
    let prefixed = ok(&s, "GET", "/v1/events/all?stream_prefix=acme", Value::Null, &beta).await;
    assert!(event_ids(&prefixed).is_empty(), "{prefixed}");
    let by_type = ok(&s, "GET", "/v1/events/all?types=Noted", Value::Null, &beta).await;
    assert!(event_ids(&by_type).is_empty(), "{by_type}");
    let (status, _, answer) = call(&s, "GET", "/v1/events/all?stream_prefix=acme~", None, Some(&beta)).await;
    assert_eq!((status, answer["error"]["details"]["field"].as_str()), (400, Some("stream_prefix")), "{answer}");

    // Subscriptions of one name: each lists and fetches its own.
    for (token, id) in [(&acme, "acme-0"), (&beta, "beta-0"), (&admin, "default-0")] {
        let listed = ok(&s, "GET", "/v1/events/subscriptions", Value::Null, token).await;
        assert_eq!(names(&listed, "subscriptions"), ["proj"], "{listed}");
        let fetched = ok(&s, "POST", "/v1/events/subscriptions/proj/fetch", json!({}), token).await;
        assert_eq!(event_ids(&fetched), [id], "{fetched}");
    }
    let acme_sub = json!({ "name": "acme-proj", "from": "start" });
    ok(&s, "POST", "/v1/events/subscriptions", acme_sub, &acme).await;
    let fetched = ok(&s, "POST", "/v1/events/subscriptions/acme-proj/fetch", json!({}), &acme).await;
    assert_eq!(event_ids(&fetched), ["acme-0", "acme-1"], "an unfiltered subscription keeps to its tenant");
    ok(&s, "PUT", "/v1/events/streams/acme-notes/snapshot", json!({ "version": 0, "data": { "n": 1 } }), &acme).await;

    // Every route naming acme's own stream or subscription: beta finds nothing.
    let routes: Vec<(&str, &str, Value, &str)> = vec![
        ("GET", "/v1/events/streams/acme-notes", Value::Null, "event_stream_not_found"),
        ("GET", "/v1/events/streams/acme-notes/snapshot", Value::Null, "snapshot_not_found"),
        ("GET", "/v1/events/subscriptions/acme-proj", Value::Null, "event_subscription_not_found"),
        ("POST", "/v1/events/subscriptions/acme-proj/fetch", json!({}), "event_subscription_not_found"),
        (
            "POST",
            "/v1/events/subscriptions/acme-proj/checkpoint",
            json!({ "position": 0 }),
            "event_subscription_not_found",
        ),
        ("DELETE", "/v1/events/subscriptions/acme-proj", Value::Null, "event_subscription_not_found"),
        ("DELETE", "/v1/events/streams/acme-notes", Value::Null, "event_stream_not_found"),
    ];
    let routes = routes.into_iter().map(|(m, p, b, c)| (m, p.to_string(), b, c)).collect();
    absent_to_others(&s, routes, &beta, &acme).await;

    // Metrics name the subscription as its tenant does, with the tenant as a label.
    let (_, _, bytes) = s.raw(axum::http::Request::get("/metrics").body(axum::body::Body::empty()).unwrap()).await;
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.contains("sluice_event_subscription_lag{subscription=\"proj\",tenant=\"beta\"}"), "{text}");
    assert!(text.contains("sluice_event_subscription_lag{subscription=\"proj\"}"), "{text}");
    assert!(!text.contains("acme~"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_schedules_and_schemas_are_their_own() {
    let s = TestServer::start();
    let (_, admin) = key(&s, None, "admin", &["*:*:admin"]).await;
    let acme = tenant_key(&s, &admin, "acme").await;
    let beta = tenant_key(&s, &admin, "beta").await;

    // Schedules of one name in two tenants, each into its own queue of one name.
    for token in [&acme, &beta] {
        ok(&s, "POST", "/v1/queues", json!({ "name": "orders" }), token).await;
        let schedule = json!({
            "name": "nightly", "every_ms": 60_000, "start_at": "2030-01-01T00:00:00Z",
            "target": { "queue": "orders" }, "message": { "body": "tick" },
        });
        let made = ok(&s, "POST", "/v1/schedules", schedule, token).await;
        assert_eq!((made["name"].as_str(), made["target"]["queue"].as_str()), (Some("nightly"), Some("orders")));
    }
    let job_schedule = json!({
        "name": "acme-only", "every_ms": 60_000, "start_at": "2030-01-01T00:00:00Z",
        "target": { "job": { "queue": "reports", "type": "pdf" } }, "message": { "body": "{}" },
    });
    let made = ok(&s, "POST", "/v1/schedules", job_schedule, &acme).await;
    assert_eq!(made["target"]["job"]["queue"], "reports", "{made}");
    assert_eq!(names(&ok(&s, "GET", "/v1/schedules", Value::Null, &acme).await, "schedules"), ["acme-only", "nightly"]);
    assert_eq!(names(&ok(&s, "GET", "/v1/schedules", Value::Null, &beta).await, "schedules"), ["nightly"]);
    assert!(names(&ok(&s, "GET", "/v1/schedules", Value::Null, &admin).await, "schedules").is_empty());
    let page = ok(&s, "GET", "/v1/schedules?limit=1", Value::Null, &acme).await;
    let token = page["next_token"].as_str().unwrap();
    let rest = ok(&s, "GET", &format!("/v1/schedules?limit=1&next_token={token}"), Value::Null, &acme).await;
    assert_eq!(names(&rest, "schedules"), ["nightly"]);
    let into_other =
        json!({ "name": "x", "every_ms": 60_000, "target": { "queue": "acme~orders" }, "message": { "body": "" } });
    let (status, _, answer) = call(&s, "POST", "/v1/schedules", Some(&into_other), Some(&beta)).await;
    assert_eq!((status, answer["error"]["details"]["field"].as_str()), (400, Some("target.queue")), "{answer}");

    // Schemas: one type name, two tenants' schemas, each queue's door checks its tenant's.
    let requires = |field: &str| json!({ "schema": { "type": "object", "required": [field] } });
    ok(&s, "POST", "/v1/schemas/order/versions", requires("id"), &acme).await;
    ok(&s, "POST", "/v1/schemas/order/versions", requires("sku"), &beta).await;
    ok(&s, "POST", "/v1/schemas/acme-type/versions", requires("id"), &acme).await;
    let types = |list: &Value| -> Vec<String> {
        list["types"].as_array().unwrap().iter().map(|t| t["type"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(types(&ok(&s, "GET", "/v1/schemas", Value::Null, &acme).await), ["acme-type", "order"]);
    assert_eq!(types(&ok(&s, "GET", "/v1/schemas", Value::Null, &beta).await), ["order"]);
    assert!(types(&ok(&s, "GET", "/v1/schemas", Value::Null, &admin).await).is_empty());
    let sku = json!({ "messages": [{ "body": r#"{"sku": 1}"#, "type": "order" }] });
    for (token, taken) in [(&acme, false), (&beta, true)] {
        ok(&s, "POST", "/v1/queues", json!({ "name": "strict", "schema_validation": true }), token).await;
        let sent = ok(&s, "POST", "/v1/queues/strict/messages", sku.clone(), token).await;
        assert_eq!(sent["results"][0]["id"].is_string(), taken, "{sent}");
        let checked = ok(&s, "POST", "/v1/schemas/order/check", json!({ "body": r#"{"sku": 1}"# }), token).await;
        assert_eq!(checked["valid"], taken, "{checked}");
    }
    let sent = ok(&s, "POST", "/v1/queues/strict/messages", sku, &acme).await;
    assert_eq!(sent["results"][0]["error"]["details"]["type"], "order", "{sent}");
    assert!(!sent.to_string().contains('~'), "{sent}");

    // Every route naming acme's own schedule or type: beta finds nothing, acme succeeds.
    let routes: Vec<(&str, &str, Value, &str)> = vec![
        ("GET", "/v1/schedules/acme-only", Value::Null, "schedule_not_found"),
        ("POST", "/v1/schedules/acme-only/pause", Value::Null, "schedule_not_found"),
        ("POST", "/v1/schedules/acme-only/resume", Value::Null, "schedule_not_found"),
        ("GET", "/v1/schemas/acme-type", Value::Null, "schema_not_found"),
        ("GET", "/v1/schemas/acme-type/versions/1", Value::Null, "schema_not_found"),
        ("DELETE", "/v1/schedules/acme-only", Value::Null, "schedule_not_found"),
    ];
    let routes = routes.into_iter().map(|(m, p, b, c)| (m, p.to_string(), b, c)).collect();
    absent_to_others(&s, routes, &beta, &acme).await;
    // Configuring a type of the same name makes the caller's own, and leaves acme's as it was.
    let made = ok(&s, "PUT", "/v1/schemas/acme-type/config", json!({ "compatibility": "none" }), &beta).await;
    assert!(made.get("latest_version").is_none(), "beta's new type has no versions: {made}");
    let acme_type = ok(&s, "GET", "/v1/schemas/acme-type", Value::Null, &acme).await;
    assert_eq!(
        (acme_type["latest_version"].as_u64(), acme_type["compatibility"].as_str()),
        (Some(1), Some("backward"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_quotas_are_set_by_the_admin_and_refuse_with_their_figures() {
    let s = TestServer::start();
    let (_, admin) = key(&s, None, "admin", &["*:*:admin"]).await;
    let acme = tenant_key(&s, &admin, "acme").await;

    let set = ok(&s, "PUT", "/v1/tenants/acme", json!({ "max_resources": 1, "max_stored_bytes": 5 }), &admin).await;
    assert_eq!(set["quotas"], json!({ "max_resources": 1, "max_stored_bytes": 5 }), "{set}");
    assert_eq!(set["usage"], json!({ "resources": 0, "stored_bytes": 0 }));
    // Only the default tenant's admin manages quotas, and the default tenant has none.
    let (status, _, answer) = call(&s, "PUT", "/v1/tenants/acme", Some(&json!({})), Some(&acme)).await;
    assert_eq!(status, 403, "{answer}");
    let (status, _, answer) =
        call(&s, "PUT", "/v1/tenants/default", Some(&json!({ "max_resources": 1 })), Some(&admin)).await;
    assert_eq!((status, answer["error"]["details"]["field"].as_str()), (400, Some("tenant")), "{answer}");
    let (status, _, answer) =
        call(&s, "PUT", "/v1/tenants/acme", Some(&json!({ "max_queues": 1 })), Some(&admin)).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (400, Some("invalid_json")), "{answer}");

    // One resource: the second is refused, making the first again is not.
    ok(&s, "POST", "/v1/queues", json!({ "name": "a" }), &acme).await;
    let (status, headers, bytes) = s
        .raw(
            axum::http::Request::post("/v1/topics")
                .header("authorization", format!("Bearer {acme}"))
                .header("content-type", "application/json")
                .body(axum::body::Body::from(json!({ "name": "t" }).to_string()))
                .unwrap(),
        )
        .await;
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!((status.as_u16(), answer["error"]["code"].as_str()), (429, Some("quota_exceeded")), "{answer}");
    assert_eq!(
        answer["error"]["details"],
        json!({ "tenant": "acme", "quota": "max_resources", "limit": 1, "used": 1 }),
        "{answer}"
    );
    assert!(headers.get("retry-after").is_none(), "waiting does not lift a resource quota");
    ok(&s, "POST", "/v1/queues", json!({ "name": "a" }), &acme).await;

    // Five stored bytes: a 6-byte body does not fit, a 3-byte one does.
    let (status, _, answer) =
        call(&s, "POST", "/v1/queues/a/messages", Some(&json!({ "messages": [{ "body": "sixsix" }] })), Some(&acme))
            .await;
    assert_eq!((status, answer["error"]["details"]["quota"].as_str()), (429, Some("max_stored_bytes")), "{answer}");
    ok(&s, "POST", "/v1/queues/a/messages", json!({ "messages": [{ "body": "abc" }] }), &acme).await;
    // A job's payload is stored bytes too: `{}` fits in the last two, a seven-byte one never.
    ok(&s, "POST", "/v1/jobs", json!({ "queue": "reports", "type": "pdf", "payload": {} }), &acme).await;
    let big = json!({ "queue": "reports", "type": "pdf", "payload": { "a": 1 } });
    let (status, _, answer) = call(&s, "POST", "/v1/jobs", Some(&big), Some(&acme)).await;
    assert_eq!((status, answer["error"]["details"]["quota"].as_str()), (429, Some("max_stored_bytes")), "{answer}");

    let got = ok(&s, "GET", "/v1/tenants/acme", Value::Null, &admin).await;
    assert_eq!(
        got["usage"],
        json!({ "resources": 1, "stored_bytes": 5 }),
        "three of the message, two of the job: {got}"
    );
    let listed = ok(&s, "GET", "/v1/tenants", Value::Null, &admin).await;
    assert_eq!(listed["tenants"].as_array().unwrap().len(), 1);

    // A rate for the tenant's keys together: the burst, then 429 rate_limited.
    ok(&s, "PUT", "/v1/tenants/acme", json!({ "rate_limit": { "per_second": 1, "burst": 2 } }), &admin).await;
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(call(&s, "GET", "/v1/queues", None, Some(&acme)).await.0);
    }
    assert_eq!(statuses, [200, 200, 429]);
    assert_eq!(call(&s, "GET", "/v1/queues", None, Some(&admin)).await.0, 200, "the admin is not held back");

    assert_eq!(call(&s, "DELETE", "/v1/tenants/acme", None, Some(&admin)).await.0, 204);
    let (status, _, answer) = call(&s, "DELETE", "/v1/tenants/acme", None, Some(&admin)).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (404, Some("tenant_not_found")), "{answer}");
}
