//! Message move tasks over the JSON protocol, on the redrive task manager.

use serde_json::{Value, json};

use crate::support::{ACCOUNT, Sqs};

fn arn(name: &str) -> String {
    format!("arn:aws:sqs:us-east-1:{ACCOUNT}:{name}")
}

/// A source queue with a dead-letter queue holding `count` dead-lettered messages.
async fn dead_letters(sqs: &Sqs, count: usize) -> (String, String) {
    let dlq = sqs.create("dlq", json!({})).await;
    let redrive = json!({"deadLetterTargetArn": arn("dlq"), "maxReceiveCount": 1}).to_string();
    let source = sqs.create("source", json!({"VisibilityTimeout": "0", "RedrivePolicy": redrive})).await;
    for i in 0..count {
        sqs.ok("SendMessage", json!({"QueueUrl": source, "MessageBody": format!("m{i}")})).await;
    }
    // Each message is received once, then moved by the next receive.
    for _ in 0..count * 2 {
        sqs.ok("ReceiveMessage", json!({"QueueUrl": source, "MaxNumberOfMessages": 10})).await;
    }
    let out =
        sqs.ok("GetQueueAttributes", json!({"QueueUrl": dlq, "AttributeNames": ["ApproximateNumberOfMessages"]})).await;
    assert_eq!(out["Attributes"]["ApproximateNumberOfMessages"], count.to_string());
    (source, dlq)
}

async fn depth(sqs: &Sqs, q: &str) -> String {
    let out =
        sqs.ok("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["ApproximateNumberOfMessages"]})).await;
    out["Attributes"]["ApproximateNumberOfMessages"].as_str().unwrap().to_string()
}

async fn tasks(sqs: &Sqs, source: &str) -> Vec<Value> {
    let out = sqs.ok("ListMessageMoveTasks", json!({"SourceArn": source, "MaxResults": 10})).await;
    out["Results"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn move_back_to_the_original_source() {
    let sqs = Sqs::start();
    let (source, _dlq) = dead_letters(&sqs, 2).await;
    let (_, _, _, message) = sqs.err("StartMessageMoveTask", json!({"SourceArn": arn("source")})).await;
    assert_eq!(message, "Source queue must be configured as a Dead Letter Queue.");
    let out = sqs.ok("StartMessageMoveTask", json!({"SourceArn": arn("dlq")})).await;
    assert!(out["TaskHandle"].as_str().is_some_and(|h| !h.is_empty()), "{out}");
    sqs.eventually("the task to complete", || async { tasks(&sqs, &arn("dlq")).await[0]["Status"] == "COMPLETED" })
        .await;
    let task = &tasks(&sqs, &arn("dlq")).await[0];
    assert_eq!(task["SourceArn"], arn("dlq"));
    assert_eq!(task["ApproximateNumberOfMessagesMoved"], 2);
    assert_eq!(task["ApproximateNumberOfMessagesToMove"], 2);
    assert!(task["StartedTimestamp"].as_u64().is_some_and(|t| t > 1_600_000_000_000), "epoch ms: {task}");
    for absent in ["TaskHandle", "DestinationArn", "MaxNumberOfMessagesPerSecond", "FailureReason"] {
        assert!(task.get(absent).is_none(), "{absent}: {task}");
    }
    assert_eq!(depth(&sqs, &source).await, "2");
}

#[tokio::test]
async fn move_to_a_destination_and_cancel() {
    let sqs = Sqs::start();
    let (_source, dlq) = dead_letters(&sqs, 10).await;
    let elsewhere = sqs.create("elsewhere", json!({})).await;
    let (status, _, _, message) =
        sqs.err("StartMessageMoveTask", json!({"SourceArn": arn("dlq"), "DestinationArn": arn("nope")})).await;
    assert_eq!(
        (status, message.as_str()),
        (404, "The resource that you specified for the DestinationArn parameter doesn't exist.")
    );
    let (_, _, code, _) =
        sqs.err("StartMessageMoveTask", json!({"SourceArn": arn("dlq"), "MaxNumberOfMessagesPerSecond": 501})).await;
    assert_eq!(code, "InvalidParameterValue");
    let out = sqs
        .ok(
            "StartMessageMoveTask",
            json!({"SourceArn": arn("dlq"), "DestinationArn": arn("elsewhere"), "MaxNumberOfMessagesPerSecond": 1}),
        )
        .await;
    let handle = out["TaskHandle"].as_str().unwrap().to_string();
    let (_, _, _, message) = sqs.err("StartMessageMoveTask", json!({"SourceArn": arn("dlq")})).await;
    assert_eq!(
        message,
        "There is already a task running. Only one active task is allowed for a source queue arn at a given time."
    );
    let running = &tasks(&sqs, &arn("dlq")).await[0];
    assert_eq!(running["Status"], "RUNNING");
    assert_eq!(running["TaskHandle"], handle.as_str());
    assert_eq!(running["DestinationArn"], arn("elsewhere"));
    assert_eq!(running["MaxNumberOfMessagesPerSecond"], 1);
    let cancelled = sqs.ok("CancelMessageMoveTask", json!({"TaskHandle": handle})).await;
    let moved = cancelled["ApproximateNumberOfMessagesMoved"].as_u64().expect("moved count");
    assert!(moved < 10, "a 1/s task cannot have finished: {moved}");
    let after = &tasks(&sqs, &arn("dlq")).await[0];
    assert_eq!(after["Status"], "CANCELLED");
    assert!(after.get("TaskHandle").is_none());
    let in_dlq: u64 = depth(&sqs, &dlq).await.parse().unwrap();
    let in_destination: u64 = depth(&sqs, &elsewhere).await.parse().unwrap();
    assert_eq!(in_dlq + in_destination, 10, "nothing lost or doubled");
}

#[tokio::test]
async fn cancel_with_bad_handles() {
    let sqs = Sqs::start();
    let (_, _, _, message) = sqs.err("CancelMessageMoveTask", json!({"TaskHandle": "garbage"})).await;
    assert_eq!(message, "Value for parameter TaskHandle is invalid.");
    use base64::Engine;
    let encode = |v: Value| base64::engine::general_purpose::STANDARD.encode(v.to_string());
    let missing_source = encode(json!({"taskId": "1", "sourceArn": arn("nope"), "startedTimestamp": 1}));
    let (status, _, _, message) = sqs.err("CancelMessageMoveTask", json!({"TaskHandle": missing_source})).await;
    assert_eq!(
        (status, message.as_str()),
        (404, "The resource that you specified for the SourceArn parameter doesn't exist.")
    );
    sqs.create("real", json!({})).await;
    let missing_task = encode(json!({"taskId": "99", "sourceArn": arn("real"), "startedTimestamp": 1}));
    let (status, _, _, message) = sqs.err("CancelMessageMoveTask", json!({"TaskHandle": missing_task})).await;
    assert_eq!((status, message.as_str()), (404, "Task does not exist."));
}
