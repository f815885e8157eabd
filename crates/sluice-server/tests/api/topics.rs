//! Topics through the native API: create (201/200/409), list, get, delete; subscribe queues
//! and HTTP endpoints, list and remove subscriptions; publish with per-message results into
//! raw, enveloped and filtered subscriptions; and the errors of each.

use serde_json::{Value, json};

use crate::support::{Payload, TestServer, case, check, json_payload};

async fn publish(s: &TestServer, topic: &str, messages: Value) -> Vec<Value> {
    let answer =
        s.expect("POST", &format!("/v1/topics/{topic}/publish"), Some(json!({ "messages": messages })), 200).await;
    answer["results"].as_array().expect("results").clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_lifecycle() {
    let s = TestServer::start();
    let created = s
        .expect(
            "POST",
            "/v1/topics",
            Some(json!({ "name": "orders", "display_name": "Orders", "tags": { "team": "a" } })),
            201,
        )
        .await;
    assert_eq!(created["arn"], "arn:aws:sns:us-east-1:000000000000:orders");
    assert_eq!((created["fifo"].clone(), created["display_name"].clone()), (json!(false), json!("Orders")));
    let fifo =
        s.expect("POST", "/v1/topics", Some(json!({ "name": "events.fifo", "content_based_dedup": true })), 201).await;
    assert_eq!((fifo["fifo"].clone(), fifo["content_based_dedup"].clone()), (json!(true), json!(true)));
    for i in 0..3 {
        s.expect("POST", "/v1/topics", Some(json!({ "name": format!("t-{i}") })), 201).await;
    }
    let page = s.expect("GET", "/v1/topics?prefix=t-&limit=2", None, 200).await;
    assert_eq!(page["topics"].as_array().unwrap().len(), 2);
    let token = page["next_token"].as_str().unwrap();
    let rest = s.expect("GET", &format!("/v1/topics?prefix=t-&limit=2&next_token={token}"), None, 200).await;
    assert_eq!(rest["topics"][0]["name"], "t-2");
    assert!(rest.get("next_token").is_none());
    let got = s.expect("GET", "/v1/topics/orders", None, 200).await;
    assert_eq!(got["subscriptions"], json!({ "confirmed": 0, "pending": 0 }));
    check(
        &s,
        vec![
            case("POST", "/v1/topics", json_payload(json!({ "name": "orders" })), 200, None),
            case(
                "POST",
                "/v1/topics",
                json_payload(json!({ "name": "orders", "display_name": "Other" })),
                409,
                Some("topic_exists"),
            ),
            case("POST", "/v1/topics", json_payload(json!({ "name": "bad name" })), 400, Some("invalid_argument"))
                .field("name"),
            case(
                "POST",
                "/v1/topics",
                json_payload(json!({ "name": "x.fifo", "fifo": false })),
                400,
                Some("invalid_argument"),
            )
            .field("name"),
            case(
                "POST",
                "/v1/topics",
                json_payload(json!({ "name": "x", "content_based_dedup": true })),
                400,
                Some("invalid_argument"),
            )
            .field("content_based_dedup"),
            case(
                "POST",
                "/v1/topics",
                json_payload(json!({ "name": "x", "delivery_policy": { "http": 1 } })),
                400,
                Some("invalid_argument"),
            )
            .field("delivery_policy"),
            case("GET", "/v1/topics/nope", Payload::None, 404, Some("topic_not_found")),
            case("GET", "/v1/topics?limit=0", Payload::None, 400, Some("invalid_argument")).field("limit"),
            case("DELETE", "/v1/topics/orders", Payload::None, 204, None),
            case("DELETE", "/v1/topics/orders", Payload::None, 404, Some("topic_not_found")),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_fans_out_into_raw_enveloped_and_filtered_queues() {
    let s = TestServer::start();
    s.expect("POST", "/v1/topics", Some(json!({ "name": "t" })), 201).await;
    for q in ["raw", "env", "red", "big"] {
        s.create_queue(json!({ "name": q })).await;
    }
    let raw = s.expect("POST", "/v1/topics/t/subscriptions", Some(json!({ "queue": "raw", "raw": true })), 201).await;
    assert_eq!((raw["protocol"].clone(), raw["pending_confirmation"].clone()), (json!("sqs"), json!(false)));
    assert_eq!(raw["endpoint"], "arn:aws:sqs:us-east-1:000000000000:raw");
    s.expect(
        "POST",
        "/v1/topics/t/subscriptions",
        Some(json!({ "queue": "arn:aws:sqs:us-east-1:000000000000:env" })),
        201,
    )
    .await;
    s.expect(
        "POST",
        "/v1/topics/t/subscriptions",
        Some(json!({ "queue": "red", "raw": true, "filter_policy": { "color": ["red"] } })),
        201,
    )
    .await;
    s.expect(
        "POST",
        "/v1/topics/t/subscriptions",
        Some(json!({ "queue": "big", "raw": true, "filter_policy": { "size": [{ "numeric": [">", 10] }] }, "filter_policy_scope": "body" })),
        201,
    )
    .await;
    // The same subscription again is the same subscription.
    let again = s.expect("POST", "/v1/topics/t/subscriptions", Some(json!({ "queue": "raw", "raw": true })), 200).await;
    assert_eq!(again["id"], raw["id"]);

    let results = publish(
        &s,
        "t",
        json!([
            { "body": "{\"size\": 20}", "attributes": { "color": { "type": "String", "value": "red" } }, "subject": "s" },
            { "body": "{\"size\": 1}", "attributes": { "color": { "type": "String", "value": "blue" } } },
            { "body": "" },
            { "body": "x", "attributes": { "n": { "type": "Number", "value": "not a number" } } },
        ]),
    )
    .await;
    assert_eq!(results[0]["deliveries"], 4);
    assert_eq!(results[1]["deliveries"], 2);
    assert_eq!(results[2]["error"]["code"], "invalid_argument");
    assert_eq!(results[2]["error"]["details"]["field"], "messages[2].body");
    assert_eq!(results[3]["error"]["code"], "invalid_argument");

    let raw_messages = s.receive("raw", json!({ "max": 10 })).await;
    assert_eq!(raw_messages.len(), 2);
    assert_eq!(raw_messages[0]["body"], "{\"size\": 20}");
    assert_eq!(raw_messages[0]["attributes"]["color"], json!({ "type": "String", "value": "red" }));
    let env = s.receive("env", json!({ "max": 10 })).await;
    let envelope: Value = serde_json::from_str(env[0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(envelope["Type"], "Notification");
    assert_eq!(envelope["MessageId"], results[0]["id"]);
    assert_eq!(envelope["Subject"], "s");
    assert_eq!(envelope["MessageAttributes"]["color"]["Value"], "red");
    assert_eq!(s.receive("red", json!({ "max": 10 })).await.len(), 1);
    let big = s.receive("big", json!({ "max": 10 })).await;
    assert_eq!(big.len(), 1);
    assert_eq!(big[0]["body"], "{\"size\": 20}");

    let listed = s.expect("GET", "/v1/topics/t/subscriptions?limit=3", None, 200).await;
    assert_eq!(listed["subscriptions"].as_array().unwrap().len(), 3);
    let token = listed["next_token"].as_str().unwrap();
    let rest = s.expect("GET", &format!("/v1/topics/t/subscriptions?limit=3&next_token={token}"), None, 200).await;
    assert_eq!(rest["subscriptions"].as_array().unwrap().len(), 1);
    assert_eq!(s.expect("GET", "/v1/subscriptions", None, 200).await["subscriptions"].as_array().unwrap().len(), 4);
    let id = raw["id"].as_str().unwrap();
    let one = s.expect("GET", &format!("/v1/topics/t/subscriptions/{id}"), None, 200).await;
    assert_eq!(one["raw"], true);
    check(
        &s,
        vec![
            case(
                "POST",
                "/v1/topics/t/subscriptions",
                json_payload(json!({ "queue": "raw", "raw": false })),
                409,
                Some("subscription_exists"),
            ),
            case(
                "POST",
                "/v1/topics/t/subscriptions",
                json_payload(json!({ "queue": "q", "filter_policy": { "a": "b" } })),
                400,
                Some("invalid_argument"),
            )
            .field("filter_policy"),
            case("POST", "/v1/topics/t/subscriptions", json_payload(json!({})), 400, Some("invalid_argument"))
                .field("queue"),
            case(
                "POST",
                "/v1/topics/t/subscriptions",
                json_payload(json!({ "endpoint": "ftp://x" })),
                400,
                Some("invalid_argument"),
            )
            .field("endpoint"),
            case(
                "POST",
                "/v1/topics/nope/subscriptions",
                json_payload(json!({ "queue": "q" })),
                404,
                Some("topic_not_found"),
            ),
            case(
                "POST",
                "/v1/topics/nope/publish",
                json_payload(json!({ "messages": [{ "body": "x" }] })),
                404,
                Some("topic_not_found"),
            ),
            case("POST", "/v1/topics/t/publish", json_payload(json!({ "messages": [] })), 400, Some("empty_batch")),
            case("DELETE", &format!("/v1/topics/t/subscriptions/{id}") as &str, Payload::None, 204, None),
            case(
                "DELETE",
                &format!("/v1/topics/t/subscriptions/{id}") as &str,
                Payload::None,
                404,
                Some("subscription_not_found"),
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_topic_into_a_fifo_queue() {
    let s = TestServer::start();
    s.expect("POST", "/v1/topics", Some(json!({ "name": "t.fifo" })), 201).await;
    s.create_queue(json!({ "name": "q.fifo", "fifo": true })).await;
    s.expect("POST", "/v1/topics/t.fifo/subscriptions", Some(json!({ "queue": "q.fifo", "raw": true })), 201).await;
    let results = publish(
        &s,
        "t.fifo",
        json!([
            { "body": "a", "group_id": "g", "dedup_id": "1" },
            { "body": "b", "group_id": "g", "dedup_id": "2" },
            { "body": "a again", "group_id": "g", "dedup_id": "1" },
            { "body": "no group", "dedup_id": "3" },
            { "body": "no dedup", "group_id": "g" },
        ]),
    )
    .await;
    let seq = |i: usize| results[i]["sequence_number"].as_str().unwrap().to_string();
    assert!(seq(0) < seq(1));
    assert_eq!(results[3]["error"]["details"]["field"], "messages[3].group_id");
    assert_eq!(results[4]["error"]["details"]["field"], "messages[4].dedup_id");
    let got = s.receive("q.fifo", json!({ "max": 10 })).await;
    let bodies: Vec<&str> = got.iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["a", "b"], "in order, the duplicate dropped");
    assert_eq!(got[0]["group_id"], "g");
    // A standard topic refuses FIFO queues.
    s.expect("POST", "/v1/topics", Some(json!({ "name": "std" })), 201).await;
    check(
        &s,
        vec![
            case(
                "POST",
                "/v1/topics/std/subscriptions",
                json_payload(json!({ "queue": "q.fifo" })),
                400,
                Some("invalid_argument"),
            )
            .field("queue"),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_subscriptions_are_pending_until_confirmed() {
    let s = TestServer::start();
    s.expect("POST", "/v1/topics", Some(json!({ "name": "t" })), 201).await;
    let sub = s
        .expect("POST", "/v1/topics/t/subscriptions", Some(json!({ "endpoint": "https://example.com/hook" })), 201)
        .await;
    assert_eq!((sub["protocol"].clone(), sub["pending_confirmation"].clone()), (json!("https"), json!(true)));
    let queue = sub["queue"].as_str().unwrap();
    assert!(queue.starts_with("sluice-push-"), "{queue}");
    let results = publish(&s, "t", json!([{ "body": "x" }])).await;
    assert_eq!(results[0]["deliveries"], 0, "nothing goes to an unconfirmed endpoint");
    let waiting = s.receive(queue, json!({ "max": 10 })).await;
    assert_eq!(waiting.len(), 1, "only the confirmation request waits");
    let delivery: Value = serde_json::from_str(waiting[0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(delivery["message_type"], "SubscriptionConfirmation");
    let topic = s.expect("GET", "/v1/topics/t", None, 200).await;
    assert_eq!(topic["subscriptions"], json!({ "confirmed": 0, "pending": 1 }));
    s.expect("DELETE", "/v1/topics/t", None, 204).await;
    check(&s, vec![case("GET", format!("/v1/queues/{queue}"), Payload::None, 404, Some("queue_not_found"))]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_subscription_to_a_refused_destination_is_refused_with_why() {
    let s = TestServer::start();
    s.expect("POST", "/v1/topics", Some(json!({ "name": "hooks" })), 201).await;
    for url in ["http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/x", "http://2852039166/x"] {
        let (status, answer) =
            s.call("POST", "/v1/topics/hooks/subscriptions", json_payload(json!({ "endpoint": url }))).await;
        assert_eq!(status.as_u16(), 400, "{url}: {answer}");
        assert_eq!(answer["error"]["details"]["field"], "endpoint", "{answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains("link-local"), "{answer}");
    }

    // The other outbound calls are checked when they are made too: an alert's webhook, a job's
    // completion callback, a saga step's URL (one without a template).
    let metadata = "http://169.254.169.254/hook";
    for (path, body, field) in [
        (
            "/v1/alerts/rules",
            json!({ "name": "r", "kind": "dlq_depth_above", "target": "q", "threshold": 1, "for_ms": 0, "notify": { "webhook": metadata } }),
            "notify.webhook",
        ),
        (
            "/v1/jobs",
            json!({ "queue": "mail", "type": "send", "payload": {}, "callback_url": metadata }),
            "callback_url",
        ),
    ] {
        let (status, answer) = s.call("POST", path, json_payload(body)).await;
        assert_eq!((status.as_u16(), answer["error"]["details"]["field"].as_str()), (400, Some(field)), "{answer}");
    }
    let saga = json!({ "steps": [{ "name": "charge", "action": { "http": { "url": metadata } } }] });
    let (status, answer) = s.call("PUT", "/v1/sagas/pay", json_payload(saga)).await;
    assert_eq!(status.as_u16(), 400, "{answer}");
    assert_eq!(answer["error"]["details"]["field"], "steps[0].action.http.url", "{answer}");

    // With --egress-deny, a denied address or host pattern is refused too; others are taken.
    let egress = sluice_server::egress::Egress::new(
        Vec::new(),
        vec!["127.0.0.0/8".parse().unwrap(), "*.internal".parse().unwrap()],
    );
    let s = TestServer::start_with(sluice_server::ServerConfig { egress, ..Default::default() });
    s.expect("POST", "/v1/topics", Some(json!({ "name": "hooks" })), 201).await;
    for url in ["http://127.0.0.1:9/hook", "https://billing.internal/hook"] {
        let (status, answer) =
            s.call("POST", "/v1/topics/hooks/subscriptions", json_payload(json!({ "endpoint": url }))).await;
        assert_eq!(status.as_u16(), 400, "{url}: {answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains("--egress-deny"), "{answer}");
    }
    let (status, answer) = s
        .call(
            "POST",
            "/v1/topics/hooks/subscriptions",
            json_payload(json!({ "endpoint": "https://hooks.example.com/x" })),
        )
        .await;
    assert_eq!(status.as_u16(), 201, "{answer}");
}
