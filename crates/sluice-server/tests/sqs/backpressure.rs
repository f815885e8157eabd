//! Backpressure through SQS: a send into a full queue (or past its rate limit) answers AWS's
//! throttling error `RequestThrottled`, which the SDKs retry, and `SendMessageBatch` per entry.

use serde_json::json;
use sluice_core::QueueAttributesPatch;
use sluice_store::QueueStore;

use crate::support::Sqs;

#[tokio::test]
async fn a_full_queue_answers_request_throttled() {
    let sqs = Sqs::start();
    let q = sqs.create("full", json!({})).await;
    let patch = QueueAttributesPatch { max_depth_messages: Some(Some(1)), ..Default::default() };
    sqs.store().update_queue("full", patch).await.unwrap();
    sqs.ok("SendMessage", json!({"QueueUrl": q, "MessageBody": "first"})).await;
    let (status, shape, code, message) = sqs.err("SendMessage", json!({"QueueUrl": q, "MessageBody": "second"})).await;
    assert_eq!((status, shape.as_str(), code.as_str()), (400, "RequestThrottled", "RequestThrottled"));
    assert!(message.contains("queue is full"), "{message}");
    let out = sqs
        .ok(
            "SendMessageBatch",
            json!({"QueueUrl": q, "Entries": [{"Id": "a", "MessageBody": "x"}, {"Id": "b", "MessageBody": "y"}]}),
        )
        .await;
    let failed = out["Failed"].as_array().unwrap();
    assert_eq!(failed.len(), 2, "{out}");
    assert_eq!(
        (failed[0]["Code"].as_str(), failed[0]["SenderFault"].as_bool()),
        (Some("RequestThrottled"), Some(true))
    );
    assert_eq!(sqs.store().get_queue("full").await.unwrap().stats.refusals.queue_full, 3);
}

#[tokio::test]
async fn a_rate_limit_answers_request_throttled() {
    let sqs = Sqs::start();
    let q = sqs.create("limited", json!({})).await;
    let limit = sluice_core::rate::RateLimit { per_second: 1, burst: 1 };
    let patch = QueueAttributesPatch { rate_limit: Some(Some(limit)), ..Default::default() };
    sqs.store().update_queue("limited", patch).await.unwrap();
    sqs.ok("SendMessage", json!({"QueueUrl": q, "MessageBody": "first"})).await;
    let (status, _, code, _) = sqs.err("SendMessage", json!({"QueueUrl": q, "MessageBody": "second"})).await;
    assert_eq!((status, code.as_str()), (400, "RequestThrottled"));
}
