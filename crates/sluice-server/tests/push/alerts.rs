//! Alert webhooks through the push worker, on a manual clock: an alert that fires is POSTed,
//! signed with the rule's secret and retried on the alerts' schedule when the receiver fails;
//! its resolve follows, in order, and each change arrives exactly once.

use serde_json::{Value, json};

use super::*;

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
    let server = Server::start_on(config(), &clock).await;
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

    // The evaluator ran at start and sleeps until T0 + 5 s: then it fires.
    eventually("the evaluator to sleep on the clock", async || {
        clock.deadlines_ms().contains(&(T0_MS + 5_000)).then_some(())
    })
    .await;
    clock.advance_to(T0_MS + 5_000);
    let first = receiver.wait_for(|hits| hits.first().cloned()).await;
    assert_eq!(first.path, "/alerts");
    assert_eq!(first.header("x-sluice-message-type"), "Alert");
    assert_eq!(first.header("content-type"), "application/json");
    assert_eq!(first.header("x-amz-sns-message-type"), "", "no SNS headers on alerts");
    verify_at(&secret, &first, (T0_MS + 5_000) / 1000);
    let body: Value = serde_json::from_str(&first.body).expect("JSON");
    assert_eq!(
        (&body["status"], &body["rule"], &body["subject"], &body["value"], &body["sequence"]),
        (&json!("firing"), &json!("jobs-dlq"), &json!("jobs-dlq"), &json!(1.0), &json!(1))
    );
    assert_eq!(body["since_ms"], T0_MS + 5_000);

    // The receiver failed: retried one second later (the alerts' schedule), on the clock.
    eventually("the failed POST's nack", async || (server.nack_count() == 1).then_some(())).await;
    assert_eq!(server.nacks(), [T0_MS + 6_000]);
    receiver.set(Answer::Ok);
    clock.advance_to(T0_MS + 6_000);
    let second = receiver.wait_for(|hits| hits.get(1).cloned()).await;
    assert_eq!(second.body, first.body, "the same notification");
    assert_eq!(second.header("x-sluice-message-id"), first.header("x-sluice-message-id"));

    // Emptied: the next evaluation resolves it, and the webhook hears that once.
    server.call("POST", "/v1/queues/jobs-dlq/purge", None).await;
    eventually("the evaluator to sleep until T0 + 10 s", async || {
        clock.deadlines_ms().contains(&(T0_MS + 10_000)).then_some(())
    })
    .await;
    clock.advance_to(T0_MS + 10_000);
    let third = receiver.wait_for(|hits| hits.get(2).cloned()).await;
    let body: Value = serde_json::from_str(&third.body).expect("JSON");
    assert_eq!(
        (&body["status"], &body["sequence"], &body["since_ms"]),
        (&json!("resolved"), &json!(2), &json!(T0_MS + 5_000))
    );
    verify_at(&secret, &third, (T0_MS + 10_000) / 1000);
    eventually("the notification queue to drain", async || {
        server.queue_empty("sluice-alert-jobs-dlq.fifo").await.then_some(())
    })
    .await;
    // Two more evaluations change nothing.
    for at in [T0_MS + 15_000, T0_MS + 20_000] {
        eventually("the evaluator's next sleep", async || clock.deadlines_ms().contains(&at).then_some(())).await;
        clock.advance_to(at);
    }
    eventually("the evaluator's next sleep", async || clock.deadlines_ms().contains(&(T0_MS + 25_000)).then_some(()))
        .await;
    assert_eq!(receiver.hits().len(), 3, "{:#?}", receiver.hits());
}
