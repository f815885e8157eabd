//! Bearer authentication of the native API. Routes × keys: no key, a token that is not a key,
//! a forged secret for a real key id, a revoked key, a key without the route's scope, a key
//! with exactly that scope, and a key of another tenant with that scope →
//! 401/401/401/401/403 (with `details.scope_needed`)/success/404 as if absent (or its own
//! namespace's success; 403 on the server's admin routes). Open endpoints stay open; a server
//! without keys asks for none until the first is made.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};

use crate::support::TestServer;

/// A call with an optional bearer token: status, `WWW-Authenticate` and body.
pub(crate) async fn call(
    s: &TestServer,
    method: &str,
    path: &str,
    body: Option<&Value>,
    token: Option<&str>,
) -> (u16, Option<String>, Value) {
    let mut builder = Request::builder().method(method).uri(path);
    if let Some(token) = token {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    let request = match body {
        Some(b) => builder.header("content-type", "application/json").body(Body::from(b.to_string())),
        None => builder.body(Body::empty()),
    }
    .unwrap();
    let (status, headers, bytes) = s.raw(request).await;
    let challenge = headers.get("www-authenticate").map(|v| v.to_str().unwrap().to_string());
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status.as_u16(), challenge, value)
}

/// Makes a key with these scopes (with `admin`'s token) and returns its id and token.
pub(crate) async fn key(s: &TestServer, admin: Option<&str>, name: &str, scopes: &[&str]) -> (String, String) {
    let (status, _, made) = call(s, "POST", "/v1/keys", Some(&json!({ "name": name, "scopes": scopes })), admin).await;
    assert_eq!(status, 201, "{made}");
    (made["id"].as_str().unwrap().to_string(), made["key"].as_str().unwrap().to_string())
}

/// One route of the matrix: the call, the scope it needs, a scope that is near but not enough,
/// and its success status.
struct Route {
    method: &'static str,
    path: &'static str,
    body: Option<Value>,
    needs: &'static str,
    near_miss: &'static str,
    ok: u16,
    /// What a key of another tenant with the scope gets: the default tenant's resource is
    /// absent to it (404), a list or a creation is its own namespace's (`ok`), the server's
    /// admin routes are refused (403).
    other: u16,
    /// Text a 200 to the other tenant's key must not hold (the default tenant's names).
    absent: Option<&'static str>,
}

impl Route {
    fn other(mut self, status: u16) -> Route {
        self.other = status;
        self
    }

    fn absent(mut self, text: &'static str) -> Route {
        self.absent = Some(text);
        self
    }
}

fn route(
    method: &'static str,
    path: &'static str,
    body: Option<Value>,
    needs: &'static str,
    near_miss: &'static str,
    ok: u16,
) -> Route {
    let other = if needs.starts_with("admin:") { 403 } else { ok };
    Route { method, path, body, needs, near_miss, ok, other, absent: None }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_takes_exactly_its_scope_and_refuses_every_other_key() {
    let s = TestServer::start();
    // No key exists: the server asks for none (a developer's loopback server).
    assert_eq!(call(&s, "GET", "/v1/queues", None, None).await.0, 200);
    let (_, admin) = key(&s, None, "admin", &["*:*:admin"]).await;
    // The first key turned authentication on.
    let (status, challenge, refused) = call(&s, "GET", "/v1/queues", None, None).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (401, Some("unauthenticated")), "{refused}");
    assert_eq!(challenge.as_deref(), Some("Bearer realm=\"sluice\""));

    // The resources the routes act on, made with the admin key.
    let setup = [
        ("POST", "/v1/queues", json!({ "name": "orders" })),
        ("POST", "/v1/topics", json!({ "name": "news" })),
        ("POST", "/v1/streams", json!({ "name": "clicks", "partitions": 1 })),
        ("POST", "/v1/queues/orders/messages", json!({ "messages": [{ "body": "first" }] })),
    ];
    for (method, path, body) in setup {
        let (status, _, answer) = call(&s, method, path, Some(&body), Some(&admin)).await;
        assert!(status < 300, "{method} {path}: {status} {answer}");
    }

    let routes = vec![
        route("GET", "/v1/queues", None, "queues:*:read", "queues:orders:read", 200).absent("orders"),
        route(
            "POST",
            "/v1/queues",
            Some(json!({ "name": "orders-eu" })),
            "queues:orders-eu:manage",
            "queues:billing-*:manage",
            201,
        ),
        route("GET", "/v1/queues/orders", None, "queues:orders:read", "queues:orders:send", 200).other(404),
        route(
            "POST",
            "/v1/queues/orders/messages",
            Some(json!({ "messages": [{ "body": "x" }] })),
            "queues:orders:send",
            "queues:orders:receive",
            200,
        )
        .other(404),
        route(
            "POST",
            "/v1/queues/orders/receive",
            Some(json!({ "max": 1 })),
            "queues:orders:receive",
            "queues:order:receive",
            200,
        )
        .other(404),
        route("POST", "/v1/queues/orders/purge", None, "queues:orders:manage", "topics:*:manage", 200).other(404),
        route("GET", "/v1/topics", None, "topics:*:read", "queues:*:read", 200).absent("news"),
        route(
            "POST",
            "/v1/topics/news/publish",
            Some(json!({ "messages": [{ "body": "x" }] })),
            "topics:news:publish",
            "topics:news:subscribe",
            200,
        )
        .other(404),
        route(
            "POST",
            "/v1/streams/clicks/records",
            Some(json!({ "records": [{ "body": "x" }] })),
            "streams:clicks:append",
            "streams:clicks:read",
            200,
        )
        .other(404),
        route(
            "GET",
            "/v1/streams/clicks/partitions/0/records",
            None,
            "streams:clicks:read",
            "streams:clicks:append",
            200,
        )
        .other(404),
        route(
            "POST",
            "/v1/events/streams/order-1",
            Some(json!({ "events": [{ "type": "Placed", "data": {} }] })),
            "events:order-1:append",
            "events:order-2:append",
            200,
        ),
        route("GET", "/v1/events/all", None, "events:*:read", "events:order-*:read", 200),
        route(
            "POST",
            "/v1/jobs",
            Some(json!({ "queue": "mail", "type": "send", "payload": {} })),
            "jobs:mail:enqueue",
            "jobs:mail:work",
            202,
        ),
        route(
            "POST",
            "/v1/jobs/claim",
            Some(json!({ "queues": ["mail"] })),
            "jobs:mail:work",
            "jobs:mail:enqueue",
            200,
        ),
        route("GET", "/v1/schedules", None, "schedules:*:read", "schemas:*:read", 200),
        route("GET", "/v1/schemas", None, "schemas:*:read", "schedules:*:read", 200),
        route("GET", "/v1/sagas", None, "sagas:*:read", "relays:*:read", 200),
        route("GET", "/v1/relays", None, "relays:*:read", "sagas:*:read", 200),
        route("GET", "/v1/stats", None, "admin:stats:read", "admin:trace:read", 200),
        route("GET", "/v1/alerts", None, "admin:alerts:read", "admin:stats:read", 200),
        route("GET", "/v1/trace/c-1", None, "admin:trace:read", "admin:stats:read", 200),
        route("GET", "/v1/keys", None, "admin:keys:read", "admin:keys:manage", 200),
        route(
            "POST",
            "/v1/keys",
            Some(json!({ "name": "made", "scopes": ["queues:*:read"] })),
            "admin:keys:manage",
            "admin:keys:read",
            201,
        ),
        route("DELETE", "/v1/queues/orders-eu", None, "queues:orders-eu:manage", "queues:orders-eu:read", 204),
    ];

    // A key revoked, a token of no key, and a forged secret for a real key's id.
    let (revoked_id, revoked) = key(&s, Some(&admin), "revoked", &["*:*:admin"]).await;
    assert_eq!(call(&s, "DELETE", &format!("/v1/keys/{revoked_id}"), None, Some(&admin)).await.0, 200);
    let forged = format!("slk_{revoked_id}_{}", "A".repeat(43));
    let (real_id, _) = key(&s, Some(&admin), "real", &["queues:*:read"]).await;
    let forged_real = format!("slk_{real_id}_{}", "B".repeat(43));

    for r in &routes {
        let what = format!("{} {}", r.method, r.path);
        for (token, why) in [
            (None, "no key"),
            (Some("not-a-key"), "not a key"),
            (Some(forged.as_str()), "forged"),
            (Some(forged_real.as_str()), "forged secret"),
            (Some(revoked.as_str()), "revoked"),
        ] {
            let (status, challenge, answer) = call(&s, r.method, r.path, r.body.as_ref(), token).await;
            assert_eq!(status, 401, "{what} with {why}: {answer}");
            assert_eq!(answer["error"]["code"], "unauthenticated", "{what} with {why}");
            assert!(challenge.is_some(), "{what} with {why}: a 401 names the scheme");
        }
        let (_, near) = key(&s, Some(&admin), "near", &[r.near_miss]).await;
        let (status, _, answer) = call(&s, r.method, r.path, r.body.as_ref(), Some(&near)).await;
        assert_eq!(status, 403, "{what} with {}: {answer}", r.near_miss);
        assert_eq!(answer["error"]["code"], "forbidden", "{what}");
        assert_eq!(answer["error"]["details"]["scope_needed"], r.needs, "{what}");
        let (_, right) = key(&s, Some(&admin), "right", &[r.needs]).await;
        let (status, _, answer) = call(&s, r.method, r.path, r.body.as_ref(), Some(&right)).await;
        assert_eq!(status, r.ok, "{what} with {}: {answer}", r.needs);
        let body = json!({ "name": "other", "tenant": "acme", "scopes": [r.needs] });
        let (status, _, made) = call(&s, "POST", "/v1/keys", Some(&body), Some(&admin)).await;
        assert_eq!(status, 201, "{made}");
        let other = made["key"].as_str().unwrap();
        let (status, _, answer) = call(&s, r.method, r.path, r.body.as_ref(), Some(other)).await;
        assert_eq!(status, r.other, "{what} with {} of tenant acme: {answer}", r.needs);
        if let Some(text) = r.absent {
            assert!(
                !answer.to_string().contains(text),
                "{what} of tenant acme shows the default tenant's {text}: {answer}"
            );
        }
        if status == 403 {
            assert_eq!(answer["error"]["details"]["tenant"], "acme", "{what}: {answer}");
        }
    }

    // The revoked key's message says so; the others say the key is not valid.
    let (_, _, answer) = call(&s, "GET", "/v1/queues", None, Some(&revoked)).await;
    assert!(answer["error"]["message"].as_str().unwrap().contains("revoked"), "{answer}");

    // Open whatever the keys: probes, metrics, the OpenAPI document, the dashboard's files.
    for path in ["/healthz", "/readyz", "/metrics", "/v1/openapi.json", "/ui/"] {
        assert_eq!(call(&s, "GET", path, None, None).await.0, 200, "{path}");
    }
    // The AWS door is SigV4's: with keys on the server, an unsigned request is refused as AWS
    // refuses it (tests/sqs/test_api_keys.py signs with keys' AWS access keys).
    let request = Request::post("/")
        .header("content-type", "application/x-amz-json-1.0")
        .header("x-amz-target", "AmazonSQS.ListQueues")
        .body(Body::from("{}"))
        .unwrap();
    let (status, headers, _) = s.raw(request).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(headers.get("x-amzn-query-error").unwrap(), "MissingAuthenticationToken;Sender");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_listed_without_secrets_and_bad_ones_are_refused_with_their_field() {
    let s = TestServer::start();
    let (admin_id, admin) = key(&s, None, "admin", &["*:*:admin"]).await;
    let (status, _, made) = call(
        &s,
        "POST",
        "/v1/keys",
        Some(&json!({ "tenant": "acme", "name": "ci", "scopes": ["queues:orders-*:receive,send"] })),
        Some(&admin),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let token = made["key"].as_str().unwrap().to_string();
    assert!(token.starts_with("slk_"));
    assert_eq!(made["tenant"], "acme");
    assert_eq!(made["scopes"], json!(["queues:orders-*:send,receive"]), "scopes come back canonical");

    let (_, _, listed) = call(&s, "GET", "/v1/keys", None, Some(&admin)).await;
    let text = listed.to_string();
    assert!(!text.contains(&token) && !text.contains("argon2") && !text.contains("\"key\""), "{text}");
    let ids: Vec<&str> = listed["keys"].as_array().unwrap().iter().map(|k| k["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&admin_id.as_str()));

    for (body, field) in [
        (json!({ "name": "x", "scopes": ["queues:*:fly"] }), "scopes"),
        (json!({ "name": "x", "scopes": [] }), "scopes"),
        (json!({ "name": "", "scopes": ["queues:*:read"] }), "name"),
        (json!({ "tenant": "ACME", "name": "x", "scopes": ["queues:*:read"] }), "tenant"),
    ] {
        let (status, _, answer) = call(&s, "POST", "/v1/keys", Some(&body), Some(&admin)).await;
        assert_eq!((status, answer["error"]["details"]["field"].as_str()), (400, Some(field)), "{body}: {answer}");
    }
    let (status, _, answer) = call(&s, "GET", "/v1/keys/0123456789abcdef", None, Some(&admin)).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (404, Some("key_not_found")));

    // An Idempotency-Key on a key call is ignored: the answer holding the token is never
    // stored, so the same key asked twice makes two keys.
    let mut tokens = Vec::new();
    for _ in 0..2 {
        let request = Request::post("/v1/keys")
            .header("authorization", format!("Bearer {admin}"))
            .header("content-type", "application/json")
            .header("idempotency-key", "same")
            .body(Body::from(json!({ "name": "twice", "scopes": ["queues:*:read"] }).to_string()))
            .unwrap();
        let (status, _, body) = s.raw(request).await;
        assert_eq!(status, 201);
        tokens.push(serde_json::from_slice::<Value>(&body).unwrap()["key"].as_str().unwrap().to_string());
    }
    assert_ne!(tokens[0], tokens[1]);

    // The key works, within its scopes and in its tenant: the default tenant's orders-1 is no
    // queue of acme's, acme's own is.
    assert_eq!(call(&s, "POST", "/v1/queues", Some(&json!({ "name": "orders-1" })), Some(&admin)).await.0, 201);
    let send = json!({ "messages": [{ "body": "x" }] });
    assert_eq!(call(&s, "POST", "/v1/queues/orders-1/messages", Some(&send), Some(&token)).await.0, 404);
    let manager = json!({ "tenant": "acme", "name": "manager", "scopes": ["queues:*:manage"] });
    let (_, _, manager) = call(&s, "POST", "/v1/keys", Some(&manager), Some(&admin)).await;
    let manager = manager["key"].as_str().unwrap();
    assert_eq!(call(&s, "POST", "/v1/queues", Some(&json!({ "name": "orders-1" })), Some(manager)).await.0, 201);
    assert_eq!(call(&s, "POST", "/v1/queues/orders-1/messages", Some(&send), Some(&token)).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_with_a_rate_limit_is_refused_429_past_its_bucket() {
    let s = TestServer::start();
    let (_, admin) = key(&s, None, "admin", &["*:*:admin"]).await;
    let body = json!({ "name": "limited", "scopes": ["queues:*:read"], "rate_limit": { "per_second": 1, "burst": 2 } });
    let (status, _, made) = call(&s, "POST", "/v1/keys", Some(&body), Some(&admin)).await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["rate_limit"], json!({ "per_second": 1, "burst": 2 }));
    let token = made["key"].as_str().unwrap().to_string();
    let mut statuses = Vec::new();
    let mut refused = Value::Null;
    for _ in 0..3 {
        let (status, _, answer) = call(&s, "GET", "/v1/queues", None, Some(&token)).await;
        statuses.push(status);
        refused = answer;
    }
    // The burst of 2 goes through; the third call, well within a second, finds no token.
    assert_eq!(statuses, [200, 200, 429], "{refused}");
    assert_eq!(refused["error"]["code"], "rate_limited");
    assert!(refused["error"]["details"]["retry_after_ms"].as_u64().is_some_and(|ms| ms <= 1_000), "{refused}");
    // Another key is not held back by it, and a bad limit is refused with its field.
    assert_eq!(call(&s, "GET", "/v1/queues", None, Some(&admin)).await.0, 200);
    let bad = json!({ "name": "bad", "scopes": ["queues:*:read"], "rate_limit": { "per_second": 0, "burst": 1 } });
    let (status, _, answer) = call(&s, "POST", "/v1/keys", Some(&bad), Some(&admin)).await;
    assert_eq!(
        (status, answer["error"]["details"]["field"].as_str()),
        (400, Some("rate_limit.per_second")),
        "{answer}"
    );
}
