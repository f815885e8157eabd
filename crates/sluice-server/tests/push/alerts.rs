//! Alert webhooks through the push worker, on a manual clock: an alert that fires is POSTed,
//! signed with the rule's secret and retried on the alerts' schedule when the receiver fails;
//! its resolve follows, in order, and each change arrives exactly once.
//!
//! The evaluator polls every 20 ms of real time here (its cadence is real time, like every
//! polling cadence); what it decides, and the retry delays, are on the manual clock.

use serde_json::{Value, json};

use super::*;

/// `Server::start_on`, evaluating alerts every 20 ms.
async fn start_evaluating(clock: &ManualClock) -> Server {
    let dir = tempfile::tempdir().expect("temp dir");
    let embedded = EmbeddedConfig { data_dir: dir.path().to_path_buf(), durability: Durability::Fsync };
    let store = Arc::new(EmbeddedStore::open(embedded).expect("open embedded store"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let clocked = ClockedStore::new(store.clone(), clock.clone());
    let nacks = clocked.nacks();
    let shared = clocked.into_store();
    let server_config = ServerConfig { alert_evaluate_ms: 20, ..ServerConfig::default() };
    let clock: Arc<dyn Clock> = Arc::new(clock.clone());
    tokio::spawn(async move {
        let shutdown = async move {
            let _ = rx.await;
        };
        sluice_server::run_with_clock(listener, shared, server_config, config(), clock, shutdown).await
    });
    Server { base, client: reqwest::Client::new(), store, nacks, shutdown: Some(tx), _dir: dir }
}

/// The timestamp and signature a webhook POST carries, checked against `secret` at `at_s`.
fn verify_at(secret: &str, hit: &Hit, at_s: u64) {
    assert_eq!(hit.header(TIMESTAMP_HEADER), at_s.to_string(), "signed at the manual clock's time");
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(format!("{at_s}.{}", hit.body).as_bytes());
    let expected: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hit.header(SIGNATURE_HEADER), format!("sha256={expected}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alert_webhook_hears_of_firing_and_resolving_once_each_signed_and_retried() {
    let clock = ManualClock::new(T0_MS);
    let server = start_evaluating(&clock).await;
    let receiver = Receiver::start_on(Answer::Fail, &clock).await;
    server.call("POST", "/v1/queues", Some(json!({ "name": "jobs-dlq" }))).await;
    let policy = json!({ "queue": "jobs-dlq", "max_receive_count": 1 });
    server.call("POST", "/v1/queues", Some(json!({ "name": "jobs", "dead_letter": policy }))).await;
    let webhook = format!("{}/alerts", receiver.base);
    let rule = json!({ "name": "jobs-dlq", "kind": "dlq_depth_above", "target": "jobs-*", "threshold": 0,
        "notify": { "webhook": webhook } });
    let rule = server.call("POST", "/v1/alerts/rules", Some(rule)).await;
    let secret = rule["signing_secret"].as_str().expect("a signing secret").to_string();
    server.call("POST", "/v1/queues/jobs-dlq/messages", Some(json!({ "messages": [{ "body": "dead" }] }))).await;

    // The next evaluation fires it, at T0 on the clock.
    let first = receiver.wait_for(|hits| hits.first().cloned()).await;
    assert_eq!(first.path, "/alerts");
    assert_eq!(first.header("x-sluice-message-type"), "Alert");
    assert_eq!(first.header("content-type"), "application/json");
    assert_eq!(first.header("x-amz-sns-message-type"), "", "no SNS headers on alerts");
    verify_at(&secret, &first, T0_MS / 1000);
    let body: Value = serde_json::from_str(&first.body).expect("JSON");
    assert_eq!(
        (&body["status"], &body["rule"], &body["subject"], &body["value"], &body["sequence"]),
        (&json!("firing"), &json!("jobs-dlq"), &json!("jobs-dlq"), &json!(1.0), &json!(1))
    );
    assert_eq!(body["since_ms"], T0_MS);

    // The receiver failed: retried one second later (the alerts' schedule), on the clock.
    eventually("the failed POST's nack", async || (server.nack_count() == 1).then_some(())).await;
    assert_eq!(server.nacks(), [T0_MS + 1_000]);
    receiver.set(Answer::Ok);
    clock.advance_to(T0_MS + 1_000);
    let second = receiver.wait_for(|hits| hits.get(1).cloned()).await;
    assert_eq!(second.body, first.body, "the same notification");
    assert_eq!(second.header("x-sluice-message-id"), first.header("x-sluice-message-id"));

    // Emptied: the next evaluation resolves it, and the webhook hears that once.
    server.call("POST", "/v1/queues/jobs-dlq/purge", None).await;
    // (The clock stays at T0 + 1 s: the evaluator resolves it at that time.)
    let third = receiver.wait_for(|hits| hits.get(2).cloned()).await;
    let body: Value = serde_json::from_str(&third.body).expect("JSON");
    assert_eq!((&body["status"], &body["sequence"], &body["since_ms"]), (&json!("resolved"), &json!(2), &json!(T0_MS)));
    assert_eq!(body["at_ms"], T0_MS + 1_000);
    verify_at(&secret, &third, (T0_MS + 1_000) / 1000);
    eventually("the notification queue to drain", async || {
        server.queue_empty("sluice-alert-jobs-dlq.fifo").await.then_some(())
    })
    .await;
    // Later evaluations change nothing: the alert stays resolved and nothing more is sent.
    clock.advance_to(T0_MS + 60_000);
    let alerts = server.call("GET", "/v1/alerts?pending=true", None).await;
    let rules: Vec<&str> = alerts["alerts"].as_array().unwrap().iter().map(|a| a["rule"].as_str().unwrap()).collect();
    assert!(!rules.contains(&"jobs-dlq"), "{alerts}");
    assert!(server.queue_empty("sluice-alert-jobs-dlq.fifo").await);
    assert_eq!(receiver.hits().len(), 3, "{:#?}", receiver.hits());
    for status in ["firing", "resolved"] {
        let labels = [("rule", "jobs-dlq"), ("status", status)];
        assert_eq!(server.metric("sluice_alert_changes_total", &labels).await, Some(1.0), "{status}");
    }
    assert_eq!(
        server
            .metric("sluice_push_deliveries_total", &[("endpoint", &receiver.endpoint()), ("outcome", "failure")])
            .await,
        Some(1.0)
    );
}
