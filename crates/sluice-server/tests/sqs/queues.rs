//! Queue actions over the JSON protocol: CreateQueue, GetQueueUrl, ListQueues,
//! GetQueueAttributes, SetQueueAttributes, PurgeQueue, DeleteQueue.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::support::{ACCOUNT, Sqs, url};

fn now_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

#[tokio::test]
async fn create_is_idempotent_on_the_attributes_it_names() {
    let sqs = Sqs::start();
    let attrs = json!({"ReceiveMessageWaitTimeSeconds": "1", "DelaySeconds": "1"});
    let out = sqs.ok("CreateQueue", json!({"QueueName": "q1", "Attributes": attrs, "tags": {"team": "a"}})).await;
    assert_eq!(out, json!({"QueueUrl": url("q1")}));
    // No attributes, or a subset with the same values: the same URL (reference §2.2).
    assert_eq!(sqs.create("q1", json!({})).await, url("q1"));
    assert_eq!(sqs.create("q1", json!({"DelaySeconds": "1"})).await, url("q1"));
    let (_, shape, _, message) =
        sqs.err("CreateQueue", json!({"QueueName": "q1", "Attributes": {"DelaySeconds": "2"}})).await;
    assert_eq!(shape, "QueueNameExists");
    assert!(message.ends_with("attribute DelaySeconds"), "{message}");
    sqs.ok("SetQueueAttributes", json!({"QueueUrl": url("q1"), "Attributes": {"DelaySeconds": "2"}})).await;
    assert_eq!(sqs.create("q1", json!({"ReceiveMessageWaitTimeSeconds": "1", "DelaySeconds": "2"})).await, url("q1"));
    let tags = sqs.ok("ListQueueTags", json!({"QueueUrl": url("q1")})).await;
    assert_eq!(tags, json!({"Tags": {"team": "a"}}));
}

#[tokio::test]
async fn urls_echo_the_host_the_client_used() {
    let sqs = Sqs::start();
    sqs.create("q", json!({})).await;
    let request = axum::http::Request::post("/")
        .header("host", "sqs.example:4566")
        .header("content-type", "application/x-amz-json-1.0")
        .header("x-amz-target", "AmazonSQS.GetQueueUrl")
        .body(axum::body::Body::from(json!({"QueueName": "q"}).to_string()))
        .unwrap();
    let reply = sqs.send(request).await;
    assert_eq!(reply.json()["QueueUrl"], format!("http://sqs.example:4566/{ACCOUNT}/q"));
    let out = sqs.ok("GetQueueUrl", json!({"QueueName": "q", "QueueOwnerAWSAccountId": ACCOUNT})).await;
    assert_eq!(out["QueueUrl"], url("q"));
    let (_, shape, _, _) =
        sqs.err("GetQueueUrl", json!({"QueueName": "q", "QueueOwnerAWSAccountId": "111111111111"})).await;
    assert_eq!(shape, "QueueDoesNotExist");
}

#[tokio::test]
async fn list_queues_by_prefix_and_pages() {
    let sqs = Sqs::start();
    assert_eq!(sqs.ok("ListQueues", json!({})).await, json!({}), "no queues: no QueueUrls member");
    for name in ["test-0", "test-1", "test-2", "other"] {
        sqs.create(name, json!({})).await;
    }
    let all = sqs.ok("ListQueues", json!({"QueueNamePrefix": "test-"})).await;
    assert_eq!(
        all,
        json!({"QueueUrls": [url("test-0"), url("test-1"), url("test-2")]}),
        "no NextToken without MaxResults"
    );
    let first = sqs.ok("ListQueues", json!({"QueueNamePrefix": "test-", "MaxResults": 2})).await;
    assert_eq!(first["QueueUrls"], json!([url("test-0"), url("test-1")]));
    let token = first["NextToken"].as_str().expect("NextToken");
    let rest = sqs.ok("ListQueues", json!({"QueueNamePrefix": "test-", "MaxResults": 2, "NextToken": token})).await;
    assert_eq!(rest, json!({"QueueUrls": [url("test-2")]}), "last page: no NextToken");
    let (_, _, code, _) = sqs.err("ListQueues", json!({"MaxResults": 1001})).await;
    assert_eq!(code, "InvalidParameterValue");
}

#[tokio::test]
async fn get_queue_attributes_returns_what_aws_returns() {
    let sqs = Sqs::start();
    let before = now_s();
    let q = sqs.create("attrs", json!({})).await;
    let out = sqs.ok("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["All"]})).await;
    let attrs = out["Attributes"].as_object().unwrap();
    let names: BTreeSet<&str> = attrs.keys().map(String::as_str).collect();
    // Exactly the set AWS returns for a fresh standard queue (recorded snapshot).
    let want: BTreeSet<&str> = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesDelayed",
        "ApproximateNumberOfMessagesNotVisible",
        "CreatedTimestamp",
        "DelaySeconds",
        "LastModifiedTimestamp",
        "MaximumMessageSize",
        "MessageRetentionPeriod",
        "QueueArn",
        "ReceiveMessageWaitTimeSeconds",
        "SqsManagedSseEnabled",
        "VisibilityTimeout",
    ]
    .into();
    assert_eq!(names, want);
    let fixed = [
        ("ApproximateNumberOfMessages", "0"),
        ("DelaySeconds", "0"),
        ("MaximumMessageSize", "1048576"),
        ("MessageRetentionPeriod", "345600"),
        ("ReceiveMessageWaitTimeSeconds", "0"),
        ("SqsManagedSseEnabled", "true"),
        ("VisibilityTimeout", "30"),
    ];
    for (name, value) in fixed {
        assert_eq!(attrs[name], value, "{name}");
    }
    assert_eq!(attrs["QueueArn"], format!("arn:aws:sqs:us-east-1:{ACCOUNT}:attrs"));
    // Seconds, not milliseconds.
    let created: u64 = attrs["CreatedTimestamp"].as_str().unwrap().parse().unwrap();
    assert!(created >= before && created <= now_s(), "{created}");
    // No names: nothing; some names: those.
    assert_eq!(sqs.ok("GetQueueAttributes", json!({"QueueUrl": q})).await, json!({}));
    let some =
        sqs.ok("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["VisibilityTimeout", "Policy"]})).await;
    assert_eq!(some, json!({"Attributes": {"VisibilityTimeout": "30"}}));
}

#[tokio::test]
async fn set_queue_attributes_round_trips() {
    let sqs = Sqs::start();
    let q = sqs.create("settable", json!({})).await;
    let dlq = sqs.create("settable-dlq", json!({})).await;
    let dlq_arn = format!("arn:aws:sqs:us-east-1:{ACCOUNT}:settable-dlq");
    let policy = json!({"Version": "2012-10-17", "Statement": []}).to_string();
    let set = json!({
        "DelaySeconds": "5",
        "MaximumMessageSize": "2048",
        "MessageRetentionPeriod": "120",
        "ReceiveMessageWaitTimeSeconds": "2",
        "VisibilityTimeout": "60",
        // maxReceiveCount may be a string; AWS returns it as a number.
        "RedrivePolicy": json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "4"}).to_string(),
        "RedriveAllowPolicy": json!({"redrivePermission": "allowAll"}).to_string(),
        "Policy": policy,
        "KmsMasterKeyId": "alias/k",
        "KmsDataKeyReusePeriodSeconds": "600",
    });
    sqs.ok("SetQueueAttributes", json!({"QueueUrl": q, "Attributes": set})).await;
    let out = sqs.ok("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["All"]})).await;
    let a = &out["Attributes"];
    for (name, value) in [
        ("DelaySeconds", "5"),
        ("MaximumMessageSize", "2048"),
        ("MessageRetentionPeriod", "120"),
        ("ReceiveMessageWaitTimeSeconds", "2"),
        ("VisibilityTimeout", "60"),
        ("KmsMasterKeyId", "alias/k"),
        ("KmsDataKeyReusePeriodSeconds", "600"),
        ("SqsManagedSseEnabled", "false"),
    ] {
        assert_eq!(a[name], value, "{name}");
    }
    assert_eq!(a["Policy"].as_str(), Some(policy.as_str()));
    let redrive: Value = serde_json::from_str(a["RedrivePolicy"].as_str().unwrap()).unwrap();
    assert_eq!(redrive, json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 4}));
    let sources = sqs.ok("ListDeadLetterSourceQueues", json!({"QueueUrl": dlq})).await;
    assert_eq!(sources, json!({"queueUrls": [url("settable")]}));
    // Empty values remove.
    sqs.ok(
        "SetQueueAttributes",
        json!({"QueueUrl": q, "Attributes": {"RedrivePolicy": "", "Policy": "", "KmsMasterKeyId": ""}}),
    )
    .await;
    let out = sqs.ok("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["All"]})).await;
    for gone in ["RedrivePolicy", "Policy", "KmsMasterKeyId"] {
        assert!(out["Attributes"].get(gone).is_none(), "{gone}: {out}");
    }
    let sources = sqs.ok("ListDeadLetterSourceQueues", json!({"QueueUrl": dlq})).await;
    assert_eq!(sources, json!({"queueUrls": []}));
}

#[tokio::test]
async fn purge_and_delete() {
    let sqs = Sqs::start();
    let q = sqs.create("doomed", json!({})).await;
    for body in ["a", "b"] {
        sqs.ok("SendMessage", json!({"QueueUrl": q, "MessageBody": body})).await;
    }
    sqs.ok("PurgeQueue", json!({"QueueUrl": q})).await;
    let out =
        sqs.ok("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["ApproximateNumberOfMessages"]})).await;
    assert_eq!(out["Attributes"]["ApproximateNumberOfMessages"], "0");
    assert_eq!(sqs.ok("DeleteQueue", json!({"QueueUrl": q})).await, json!({}));
    let (_, shape, _, _) = sqs.err("GetQueueUrl", json!({"QueueName": "doomed"})).await;
    assert_eq!(shape, "QueueDoesNotExist");
    let (_, shape, _, _) = sqs.err("DeleteQueue", json!({"QueueUrl": q})).await;
    assert_eq!(shape, "QueueDoesNotExist");
}
