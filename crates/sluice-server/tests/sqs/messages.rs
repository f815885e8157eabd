//! Message actions over the JSON protocol: send, receive, delete and visibility, single and
//! batched, with SQS's system attributes and receipt-handle semantics.

use serde_json::{Value, json};

use crate::support::{ACCOUNT, Sqs, url};

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

async fn receive(sqs: &Sqs, input: Value) -> Vec<Value> {
    let out = sqs.ok("ReceiveMessage", input).await;
    out.get("Messages").and_then(Value::as_array).cloned().unwrap_or_default()
}

#[tokio::test]
async fn send_receive_delete() {
    let sqs = Sqs::start();
    let q = sqs.create("flow", json!({})).await;
    assert_eq!(sqs.ok("ReceiveMessage", json!({"QueueUrl": q})).await, json!({}), "empty receive is {{}}");
    let before = now_ms();
    let sent = sqs.ok("SendMessage", json!({"QueueUrl": q, "MessageBody": "hello", "MessageGroupId": "g1"})).await;
    let id = sent["MessageId"].as_str().unwrap().to_string();
    let got =
        receive(&sqs, json!({"QueueUrl": q, "MessageSystemAttributeNames": ["All"], "VisibilityTimeout": 30})).await;
    assert_eq!(got.len(), 1);
    let m = &got[0];
    assert_eq!((m["MessageId"].as_str(), m["Body"].as_str()), (Some(id.as_str()), Some("hello")));
    let attrs = m["Attributes"].as_object().unwrap();
    assert_eq!(attrs["SenderId"], ACCOUNT);
    assert_eq!(attrs["ApproximateReceiveCount"], "1");
    assert_eq!(attrs["MessageGroupId"], "g1", "fair queues: MessageGroupId comes back as a system attribute");
    for stamp in ["SentTimestamp", "ApproximateFirstReceiveTimestamp"] {
        let ms: u64 = attrs[stamp].as_str().unwrap().parse().unwrap();
        assert!(ms >= before && ms <= now_ms(), "{stamp} is epoch milliseconds: {ms}");
    }
    assert!(attrs.get("SequenceNumber").is_none() && attrs.get("AWSTraceHeader").is_none(), "{m}");
    // Hidden while in flight.
    assert!(receive(&sqs, json!({"QueueUrl": q})).await.is_empty());
    sqs.ok("DeleteMessage", json!({"QueueUrl": q, "ReceiptHandle": m["ReceiptHandle"]})).await;
    // Deleting twice is not an error (SQS).
    sqs.ok("DeleteMessage", json!({"QueueUrl": q, "ReceiptHandle": m["ReceiptHandle"]})).await;
    let out = sqs.ok("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["All"]})).await;
    assert_eq!(out["Attributes"]["ApproximateNumberOfMessagesNotVisible"], "0");
    assert_eq!(out["Attributes"]["ApproximateNumberOfMessages"], "0");
}

#[tokio::test]
async fn attribute_names_select_system_attributes() {
    let sqs = Sqs::start();
    let q = sqs.create("sysattrs", json!({"VisibilityTimeout": "0"})).await;
    sqs.ok("SendMessage", json!({"QueueUrl": q, "MessageBody": "msg"})).await;
    let names = |m: &Value| -> Vec<String> {
        m.get("Attributes").and_then(Value::as_object).map(|a| a.keys().cloned().collect()).unwrap_or_default()
    };
    let got = receive(&sqs, json!({"QueueUrl": q})).await;
    assert!(names(&got[0]).is_empty(), "nothing asked, nothing given: {}", got[0]);
    let got = receive(&sqs, json!({"QueueUrl": q, "AttributeNames": ["SenderId"]})).await;
    assert_eq!(names(&got[0]), ["SenderId"]);
    // Both lists count (the deprecated AttributeNames and MessageSystemAttributeNames).
    let got = receive(&sqs, json!({"QueueUrl": q, "AttributeNames": ["SentTimestamp"], "MessageSystemAttributeNames": ["ApproximateReceiveCount"]})).await;
    assert_eq!(names(&got[0]), ["ApproximateReceiveCount", "SentTimestamp"]);
    assert_eq!(got[0]["Attributes"]["ApproximateReceiveCount"], "3");
    let got = receive(&sqs, json!({"QueueUrl": q, "AttributeNames": ["All"]})).await;
    assert_eq!(
        names(&got[0]),
        ["ApproximateFirstReceiveTimestamp", "ApproximateReceiveCount", "SenderId", "SentTimestamp"]
    );
}

#[tokio::test]
async fn a_signed_sender_is_its_key_id() {
    let sqs = Sqs::start();
    let q = sqs.create("signed", json!({})).await;
    let request = axum::http::Request::post("/")
        .header("host", crate::support::HOST)
        .header("content-type", crate::support::JSON_TYPE)
        .header("x-amz-target", "AmazonSQS.SendMessage")
        .header("authorization", "AWS4-HMAC-SHA256 Credential=AKIDSENDER/20240101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=00")
        .body(axum::body::Body::from(json!({"QueueUrl": q, "MessageBody": "x"}).to_string()))
        .unwrap();
    assert_eq!(sqs.send(request).await.status, 200);
    let got = receive(&sqs, json!({"QueueUrl": q, "AttributeNames": ["SenderId"]})).await;
    assert_eq!(got[0]["Attributes"]["SenderId"], "AKIDSENDER");
}

#[tokio::test]
async fn visibility_changes() {
    let sqs = Sqs::start();
    let q = sqs.create("vis", json!({})).await;
    sqs.ok("SendMessage", json!({"QueueUrl": q, "MessageBody": "x"})).await;
    let first = receive(&sqs, json!({"QueueUrl": q})).await;
    let handle = first[0]["ReceiptHandle"].clone();
    // Zero makes it visible again at once.
    sqs.ok("ChangeMessageVisibility", json!({"QueueUrl": q, "ReceiptHandle": handle, "VisibilityTimeout": 0})).await;
    let second = receive(&sqs, json!({"QueueUrl": q, "AttributeNames": ["ApproximateReceiveCount"]})).await;
    assert_eq!(second[0]["Attributes"]["ApproximateReceiveCount"], "2");
    // The first handle's delivery is over, and the message was received again: AWS answers
    // success, and the newer delivery is untouched (a release by the old handle releases nothing).
    sqs.ok("ChangeMessageVisibility", json!({"QueueUrl": q, "ReceiptHandle": handle, "VisibilityTimeout": 0})).await;
    sqs.ok("ChangeMessageVisibility", json!({"QueueUrl": q, "ReceiptHandle": handle, "VisibilityTimeout": 10})).await;
    assert!(receive(&sqs, json!({"QueueUrl": q})).await.is_empty(), "still held by the newer delivery");
    let out = sqs
        .ok("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["ApproximateNumberOfMessagesNotVisible"]}))
        .await;
    assert_eq!(out["Attributes"]["ApproximateNumberOfMessagesNotVisible"], "1");
    let current = second[0]["ReceiptHandle"].clone();
    sqs.ok("ChangeMessageVisibility", json!({"QueueUrl": q, "ReceiptHandle": current, "VisibilityTimeout": 60})).await;
    let (_, shape, _, _) = sqs
        .err("ChangeMessageVisibility", json!({"QueueUrl": q, "ReceiptHandle": "garbage", "VisibilityTimeout": 1}))
        .await;
    assert_eq!(shape, "ReceiptHandleIsInvalid");
    let (_, _, code, _) = sqs
        .err("ChangeMessageVisibility", json!({"QueueUrl": q, "ReceiptHandle": current, "VisibilityTimeout": 43201}))
        .await;
    assert_eq!(code, "InvalidParameterValue");
    // A receipt from another queue is not this queue's.
    let other = sqs.create("vis-other", json!({})).await;
    let (_, shape, _, _) = sqs.err("DeleteMessage", json!({"QueueUrl": other, "ReceiptHandle": current})).await;
    assert_eq!(shape, "ReceiptHandleIsInvalid");
    sqs.ok("DeleteMessage", json!({"QueueUrl": q, "ReceiptHandle": current})).await;
    // A deleted message's handles, the current one and the older one alike, are refused.
    for deleted in [&current, &handle] {
        let (_, _, code, message) = sqs
            .err("ChangeMessageVisibility", json!({"QueueUrl": q, "ReceiptHandle": deleted, "VisibilityTimeout": 1}))
            .await;
        assert_eq!(code, "InvalidParameterValue", "deleted message");
        assert_eq!(
            message,
            format!(
                "Value {} for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.",
                deleted.as_str().unwrap()
            )
        );
    }
}

#[tokio::test]
async fn delays_hide_messages() {
    let sqs = Sqs::start();
    let q = sqs.create("delayed", json!({})).await;
    sqs.ok("SendMessage", json!({"QueueUrl": q, "MessageBody": "later", "DelaySeconds": 900})).await;
    assert!(receive(&sqs, json!({"QueueUrl": q})).await.is_empty());
    let out = sqs
        .ok("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["ApproximateNumberOfMessagesDelayed"]}))
        .await;
    assert_eq!(out["Attributes"]["ApproximateNumberOfMessagesDelayed"], "1");
}

#[tokio::test]
async fn batches_answer_per_entry() {
    let sqs = Sqs::start();
    let q = sqs.create("batch", json!({"MaximumMessageSize": "1024"})).await;
    let out = sqs
        .ok(
            "SendMessageBatch",
            json!({"QueueUrl": q, "Entries": [
                {"Id": "ok-1", "MessageBody": "msg", "MessageAttributes": {"Foo": {"DataType": "String", "StringValue": "Bar"}}},
                {"Id": "too-big", "MessageBody": "x".repeat(1025)},
                {"Id": "ok-2", "MessageBody": "a", "DelaySeconds": 0},
            ]}),
        )
        .await;
    let ok = out["Successful"].as_array().unwrap();
    assert_eq!(ok.len(), 2, "{out}");
    assert_eq!(ok[0]["Id"], "ok-1");
    assert_eq!(ok[0]["MD5OfMessageBody"], "6e2baaf3b97dbeef01c0043275f9a0e7");
    assert_eq!(ok[0]["MD5OfMessageAttributes"], "ae7155c6026991b6d54b11589678bf9c");
    assert!(ok[1].get("MD5OfMessageAttributes").is_none());
    assert_eq!(
        out["Failed"],
        json!([{"Id": "too-big", "Code": "InvalidParameterValue", "SenderFault": true,
                "Message": "One or more parameters cannot be validated. Reason: Message must be shorter than 1024 bytes."}])
    );
    let got = receive(&sqs, json!({"QueueUrl": q, "MaxNumberOfMessages": 10})).await;
    assert_eq!(got.len(), 2);
    let handles: Vec<Value> = got.iter().map(|m| m["ReceiptHandle"].clone()).collect();
    let out = sqs
        .ok(
            "ChangeMessageVisibilityBatch",
            json!({"QueueUrl": q, "Entries": [
                {"Id": "a", "ReceiptHandle": handles[0], "VisibilityTimeout": 60},
                {"Id": "b", "ReceiptHandle": "garbage", "VisibilityTimeout": 60},
            ]}),
        )
        .await;
    assert_eq!(out["Successful"], json!([{"Id": "a"}]));
    assert_eq!(out["Failed"][0]["Id"], "b");
    assert_eq!(out["Failed"][0]["Code"], "ReceiptHandleIsInvalid");
    let out = sqs
        .ok(
            "DeleteMessageBatch",
            json!({"QueueUrl": q, "Entries": [{"Id": "a", "ReceiptHandle": handles[0]}, {"Id": "b", "ReceiptHandle": handles[1]}]}),
        )
        .await;
    assert_eq!(out, json!({"Successful": [{"Id": "a"}, {"Id": "b"}]}), "an empty Failed list is left out");
    let out = sqs.ok("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["All"]})).await;
    assert_eq!(out["Attributes"]["ApproximateNumberOfMessagesNotVisible"], "0");
}

#[tokio::test]
async fn dead_lettered_messages_keep_their_attributes_and_name_their_source() {
    let sqs = Sqs::start();
    let dlq = sqs.create("dl-target", json!({})).await;
    let redrive =
        json!({"deadLetterTargetArn": format!("arn:aws:sqs:us-east-1:{ACCOUNT}:dl-target"), "maxReceiveCount": 1});
    let q = sqs.create("dl-source", json!({"VisibilityTimeout": "0", "RedrivePolicy": redrive.to_string()})).await;
    let trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
    sqs.ok(
        "SendMessage",
        json!({"QueueUrl": q, "MessageBody": "message-1",
               "MessageAttributes": {"MyAttribute": {"DataType": "String", "StringValue": "foobar"}},
               "MessageSystemAttributes": {"AWSTraceHeader": {"DataType": "String", "StringValue": trace}}}),
    )
    .await;
    assert_eq!(receive(&sqs, json!({"QueueUrl": q})).await.len(), 1);
    // The second receive finds the message over its limit and moves it instead.
    assert!(receive(&sqs, json!({"QueueUrl": q})).await.is_empty());
    let got =
        receive(&sqs, json!({"QueueUrl": dlq, "AttributeNames": ["All"], "MessageAttributeNames": ["All"]})).await;
    let m = &got[0];
    assert_eq!(m["Body"], "message-1");
    // The recorded AWS digest of this attribute (`test_dead_letter_queue_message_attributes`).
    assert_eq!(m["MD5OfMessageAttributes"], "adb59cd4678ea5a855436b949cd07ab6");
    assert_eq!(m["Attributes"]["AWSTraceHeader"], trace);
    assert_eq!(m["Attributes"]["DeadLetterQueueSourceArn"], format!("arn:aws:sqs:us-east-1:{ACCOUNT}:dl-source"));
    let sources = sqs.ok("ListDeadLetterSourceQueues", json!({"QueueUrl": url("dl-target")})).await;
    assert_eq!(sources, json!({"queueUrls": [url("dl-source")]}));
}
