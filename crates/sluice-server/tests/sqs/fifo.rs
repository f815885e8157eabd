//! FIFO queues through SQS: creation and attributes, the send rules with AWS's codes and
//! messages, `SequenceNumber`, deduplication answers, the FIFO system attributes on receive,
//! `ReceiveRequestAttemptId`, expired FIFO handles, and the dead-letter type rule. Messages
//! are the ones LocalStack recorded against real AWS (`shared/reference/aws-data`).

use serde_json::{Value, json};

use crate::support::{Sqs, url};

async fn receive(sqs: &Sqs, input: Value) -> Vec<Value> {
    let out = sqs.ok("ReceiveMessage", input).await;
    out.get("Messages").and_then(Value::as_array).cloned().unwrap_or_default()
}

fn err(shape: &str, code: &str, message: &str) -> (u16, String, String, String) {
    (400, shape.to_string(), code.to_string(), message.to_string())
}

fn invalid_parameter(message: &str) -> (u16, String, String, String) {
    err("InvalidParameterValueException", "InvalidParameterValue", message)
}

fn seq(v: &Value) -> u64 {
    v["SequenceNumber"].as_str().unwrap_or_else(|| panic!("no SequenceNumber: {v}")).parse().expect("decimal")
}

#[tokio::test]
async fn a_fifo_queue_reports_the_fifo_attribute_set() {
    let sqs = Sqs::start();
    let q = sqs.create("jobs.fifo", json!({"FifoQueue": "true", "ContentBasedDeduplication": "true"})).await;
    assert_eq!(q, url("jobs.fifo"));
    let out = sqs.ok("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["All"]})).await;
    let attrs = out["Attributes"].as_object().unwrap();
    // Real AWS's key set for a fresh FIFO queue (test_fifo_set_content_based_deduplication_strategy).
    let keys: Vec<&str> = attrs.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesDelayed",
            "ApproximateNumberOfMessagesNotVisible",
            "ContentBasedDeduplication",
            "CreatedTimestamp",
            "DeduplicationScope",
            "DelaySeconds",
            "FifoQueue",
            "FifoThroughputLimit",
            "LastModifiedTimestamp",
            "MaximumMessageSize",
            "MessageRetentionPeriod",
            "QueueArn",
            "ReceiveMessageWaitTimeSeconds",
            "SqsManagedSseEnabled",
            "VisibilityTimeout",
        ]
    );
    assert_eq!(
        (
            &attrs["FifoQueue"],
            &attrs["ContentBasedDeduplication"],
            &attrs["DeduplicationScope"],
            &attrs["FifoThroughputLimit"]
        ),
        (&json!("true"), &json!("true"), &json!("queue"), &json!("perQueue"))
    );
    let out = sqs.ok("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["FifoQueue"]})).await;
    assert_eq!(out, json!({"Attributes": {"FifoQueue": "true"}}));
    // Idempotent with the same attributes; a different value is named.
    let again = sqs
        .ok(
            "CreateQueue",
            json!({"QueueName": "jobs.fifo", "Attributes": {"FifoQueue": "true", "ContentBasedDeduplication": "true"}}),
        )
        .await;
    assert_eq!(again["QueueUrl"], q);
    let got = sqs
        .err("CreateQueue", json!({"QueueName": "jobs.fifo", "Attributes": {"FifoQueue": "true", "ContentBasedDeduplication": "false"}}))
        .await;
    assert_eq!(
        got,
        err(
            "QueueNameExists",
            "QueueAlreadyExists",
            "A queue already exists with the same name and a different value for attribute ContentBasedDeduplication"
        )
    );
    // A standard queue shows none of them.
    let standard = sqs.create("plain", json!({})).await;
    let out = sqs.ok("GetQueueAttributes", json!({"QueueUrl": standard, "AttributeNames": ["All"]})).await;
    assert!(out["Attributes"].get("FifoQueue").is_none(), "{out}");
}

#[tokio::test]
async fn name_and_type_must_agree() {
    let sqs = Sqs::start();
    let fifo_name = "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length";
    let standard_name = "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length";
    for (input, message) in [
        (json!({"QueueName": "jobs", "Attributes": {"FifoQueue": "true"}}), fifo_name),
        (json!({"QueueName": "jobs.fifo"}), standard_name),
        (json!({"QueueName": "a.b.fifo", "Attributes": {"FifoQueue": "true"}}), fifo_name),
        (json!({"QueueName": format!("{}.fifo", "a".repeat(76)), "Attributes": {"FifoQueue": "true"}}), fifo_name),
    ] {
        assert_eq!(sqs.err("CreateQueue", input.clone()).await, invalid_parameter(message), "{input}");
    }
    for name in ["jobs", "jobs.fifo"] {
        let (_, shape, _, _) = sqs.err("GetQueueUrl", json!({"QueueName": name})).await;
        assert_eq!(shape, "QueueDoesNotExist", "{name} was not created");
    }
    // 80 characters including the suffix is the longest name.
    sqs.create(&format!("{}.fifo", "a".repeat(75)), json!({"FifoQueue": "true"})).await;
}

#[tokio::test]
async fn set_queue_attributes_follows_the_queue_type() {
    let sqs = Sqs::start();
    let fifo = sqs.create("set.fifo", json!({"FifoQueue": "true"})).await;
    let standard = sqs.create("set", json!({})).await;
    let set = |q: &str, attributes: Value| json!({"QueueUrl": q, "Attributes": attributes});
    // Real AWS (test_set_unsupported_attribute_fifo, test_create_standard_queue_with_fifo_attribute_raises_error).
    sqs.ok("SetQueueAttributes", set(&fifo, json!({"FifoQueue": "true"}))).await;
    assert_eq!(
        sqs.err("SetQueueAttributes", set(&fifo, json!({"FifoQueue": "false"}))).await,
        err(
            "InvalidAttributeValue",
            "InvalidAttributeValue",
            "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported."
        )
    );
    for (attributes, message) in [
        (json!({"FifoQueue": "true"}), "Unknown Attribute FifoQueue."),
        (json!({"ContentBasedDeduplication": "true"}), "Unknown Attribute ContentBasedDeduplication."),
        (
            json!({"DeduplicationScope": "queue"}),
            "You can specify the DeduplicationScope only when FifoQueue is set to true.",
        ),
        (
            json!({"FifoThroughputLimit": "perQueue"}),
            "You can specify the FifoThroughputLimit only when FifoQueue is set to true.",
        ),
    ] {
        let got = sqs.err("SetQueueAttributes", set(&standard, attributes.clone())).await;
        assert_eq!(got, err("InvalidAttributeName", "InvalidAttributeName", message), "{attributes}");
    }
    sqs.ok("SetQueueAttributes", set(&fifo, json!({"ContentBasedDeduplication": "true"}))).await;
    let got = sqs.err("SetQueueAttributes", set(&fifo, json!({"FifoThroughputLimit": "perMessageGroupId"}))).await;
    assert_eq!(
        (got.0, got.2.as_str()),
        (400, "InvalidAttributeValue"),
        "perMessageGroupId needs messageGroup: {got:?}"
    );
    sqs.ok(
        "SetQueueAttributes",
        set(&fifo, json!({"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"})),
    )
    .await;
    let out = sqs.ok("GetQueueAttributes", json!({"QueueUrl": fifo, "AttributeNames": ["All"]})).await;
    let a = &out["Attributes"];
    assert_eq!(
        (&a["ContentBasedDeduplication"], &a["DeduplicationScope"], &a["FifoThroughputLimit"]),
        (&json!("true"), &json!("messageGroup"), &json!("perMessageGroupId"))
    );
    // A missing queue is reported first.
    let got = sqs.err("SetQueueAttributes", set(&url("missing.fifo"), json!({"FifoQueue": "false"}))).await;
    assert_eq!(got.1, "QueueDoesNotExist");
}

#[tokio::test]
async fn send_rules_with_aws_codes_and_messages() {
    let sqs = Sqs::start();
    let q = sqs.create("rules.fifo", json!({"FifoQueue": "true"})).await;
    let send = |extra: Value| {
        let mut input = json!({"QueueUrl": q, "MessageBody": "x"});
        input.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        input
    };
    let table = [
        (
            send(json!({"MessageDeduplicationId": "d"})),
            err(
                "MissingRequiredParameterException",
                "MissingParameter",
                "The request must contain the parameter MessageGroupId.",
            ),
        ),
        (
            send(json!({"MessageGroupId": "g"})),
            invalid_parameter(
                "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
            ),
        ),
        (
            send(json!({"MessageGroupId": "g", "MessageDeduplicationId": "d", "DelaySeconds": 2})),
            invalid_parameter(
                "Value 2 for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.",
            ),
        ),
        (
            send(json!({"MessageGroupId": "group 123", "MessageDeduplicationId": "d"})),
            invalid_parameter(
                "Value group 123 for parameter MessageGroupId is invalid. Reason: MessageGroupId can only include alphanumeric and punctuation characters. 1 to 128 in length.",
            ),
        ),
        (
            send(json!({"MessageGroupId": "g", "MessageDeduplicationId": ""})),
            invalid_parameter(
                "Value  for parameter MessageDeduplicationId is invalid. Reason: MessageDeduplicationId can only include alphanumeric and punctuation characters. 1 to 128 in length.",
            ),
        ),
        (
            send(json!({"MessageGroupId": "g", "MessageDeduplicationId": "a".repeat(129)})),
            invalid_parameter(&format!(
                "Value {} for parameter MessageDeduplicationId is invalid. Reason: MessageDeduplicationId can only include alphanumeric and punctuation characters. 1 to 128 in length.",
                "a".repeat(129)
            )),
        ),
    ];
    for (input, expected) in table {
        assert_eq!(sqs.err("SendMessage", input.clone()).await, expected, "{input}");
    }
    let out =
        sqs.ok("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["ApproximateNumberOfMessages"]})).await;
    assert_eq!(out["Attributes"]["ApproximateNumberOfMessages"], "0", "nothing refused was enqueued");
    // DelaySeconds 0 is accepted on a FIFO queue; the queue's delay applies.
    let sent = sqs
        .ok("SendMessage", send(json!({"MessageGroupId": "g", "MessageDeduplicationId": "z", "DelaySeconds": 0})))
        .await;
    assert!(sent["SequenceNumber"].is_string(), "{sent}");
    // A missing queue comes before a bad parameter.
    let got = sqs.err("SendMessage", json!({"QueueUrl": url("missing.fifo"), "MessageBody": "x"})).await;
    assert_eq!(got.1, "QueueDoesNotExist");
    // The standard queue rules stay: no SequenceNumber, a dedup id refused.
    let standard = sqs.create("rules", json!({})).await;
    let sent = sqs
        .ok("SendMessage", json!({"QueueUrl": standard, "MessageBody": "x", "MessageGroupId": "g", "DelaySeconds": 2}))
        .await;
    assert!(sent.get("SequenceNumber").is_none(), "{sent}");
}

#[tokio::test]
async fn sequence_numbers_and_duplicates() {
    let sqs = Sqs::start();
    let q = sqs.create("seq.fifo", json!({"FifoQueue": "true", "ContentBasedDeduplication": "true"})).await;
    let send = |body: &str, dedup: Option<&str>| {
        let mut input = json!({"QueueUrl": q, "MessageBody": body, "MessageGroupId": "g"});
        if let Some(d) = dedup {
            input["MessageDeduplicationId"] = json!(d);
        }
        input
    };
    let first = sqs.ok("SendMessage", send("one", Some("d1"))).await;
    let second = sqs.ok("SendMessage", send("two", None)).await;
    assert!(seq(&second) > seq(&first), "{first} {second}");
    assert_eq!(first["MD5OfMessageBody"], "f97c5d29941bfb1b2fdab0874906ab82");
    // A duplicate answers with the original's id and sequence number and enqueues nothing.
    let dup = sqs.ok("SendMessage", send("other body, same id", Some("d1"))).await;
    assert_eq!((&dup["MessageId"], seq(&dup)), (&first["MessageId"], seq(&first)));
    let dup = sqs.ok("SendMessage", send("two", None)).await;
    assert_eq!((&dup["MessageId"], seq(&dup)), (&second["MessageId"], seq(&second)), "content-based duplicate");
    let out =
        sqs.ok("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["ApproximateNumberOfMessages"]})).await;
    assert_eq!(out["Attributes"]["ApproximateNumberOfMessages"], "2");

    // The FIFO system attributes on receive, in both protocols' JSON shape.
    let got = receive(&sqs, json!({"QueueUrl": q, "MaxNumberOfMessages": 10, "AttributeNames": ["All"]})).await;
    assert_eq!(got.len(), 2);
    let a = &got[0]["Attributes"];
    assert_eq!(
        (&got[0]["Body"], &a["MessageGroupId"], &a["MessageDeduplicationId"]),
        (&json!("one"), &json!("g"), &json!("d1"))
    );
    assert_eq!(seq(a), seq(&first));
    let a = &got[1]["Attributes"];
    // Content-based: the SHA-256 of the body, as AWS reports it.
    assert_eq!(a["MessageDeduplicationId"], "3fc4ccfe745870e2c0d99f71f30ff0656c8dedd41cc1d7d3d376b0dbe685e2f3");
    assert_eq!(seq(a), seq(&second));
    let only = receive(
        &sqs,
        json!({"QueueUrl": q, "VisibilityTimeout": 0, "MessageSystemAttributeNames": ["SequenceNumber"]}),
    )
    .await;
    assert!(only.is_empty(), "both are in flight, so their group is blocked");

    // Query protocol: <SequenceNumber> in the result.
    let reply = sqs
        .query(
            "/000000000000/seq.fifo",
            &[
                ("Action", "SendMessage"),
                ("MessageBody", "three"),
                ("MessageGroupId", "h"),
                ("MessageDeduplicationId", "d3"),
            ],
        )
        .await;
    let n: u64 = reply.xml().text_at("SendMessageResult/SequenceNumber").parse().unwrap();
    assert!(n > seq(&second), "{}", reply.body);
}

#[tokio::test]
async fn batches_on_a_fifo_queue() {
    let sqs = Sqs::start();
    let q = sqs.create("batch.fifo", json!({"FifoQueue": "true"})).await;
    let entry = |id: &str, extra: Value| {
        let mut e = json!({"Id": id, "MessageBody": format!("body-{id}")});
        e.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        e
    };
    // Whole-request refusals, as real AWS (test_send_batch_missing_*_for_fifo_queue).
    let got = sqs
        .err(
            "SendMessageBatch",
            json!({"QueueUrl": q, "Entries": [
                entry("a", json!({"MessageGroupId": "g", "MessageDeduplicationId": "a"})),
                entry("b", json!({"MessageGroupId": "g"})),
            ]}),
        )
        .await;
    assert_eq!(
        got,
        invalid_parameter(
            "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly"
        )
    );
    let got = sqs
        .err(
            "SendMessageBatch",
            json!({"QueueUrl": q, "Entries": [
                entry("a", json!({"MessageGroupId": "g", "MessageDeduplicationId": "a"})),
                entry("b", json!({"MessageDeduplicationId": "b"})),
            ]}),
        )
        .await;
    assert_eq!(got, invalid_parameter("The request must contain the parameter MessageGroupId."));
    let out =
        sqs.ok("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["ApproximateNumberOfMessages"]})).await;
    assert_eq!(out["Attributes"]["ApproximateNumberOfMessages"], "0", "a refused batch enqueues nothing");

    // Per entry: a delay fails only its entry; duplicates inside the batch answer the original.
    let out = sqs
        .ok(
            "SendMessageBatch",
            json!({"QueueUrl": q, "Entries": [
                entry("a", json!({"MessageGroupId": "g", "MessageDeduplicationId": "a"})),
                entry("b", json!({"MessageGroupId": "g", "MessageDeduplicationId": "b", "DelaySeconds": 5})),
                entry("c", json!({"MessageGroupId": "g", "MessageDeduplicationId": "c"})),
                entry("d", json!({"MessageGroupId": "g", "MessageDeduplicationId": "a"})),
            ]}),
        )
        .await;
    let ok = out["Successful"].as_array().unwrap();
    assert_eq!(ok.iter().map(|e| e["Id"].as_str().unwrap()).collect::<Vec<_>>(), ["a", "c", "d"]);
    assert!(seq(&ok[1]) > seq(&ok[0]));
    assert_eq!((&ok[2]["MessageId"], seq(&ok[2])), (&ok[0]["MessageId"], seq(&ok[0])));
    let failed = out["Failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["Id"], "b");
    assert_eq!(failed[0]["Code"], "InvalidParameterValue");
    assert_eq!(
        failed[0]["Message"],
        "Value 5 for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type."
    );
    let got = receive(&sqs, json!({"QueueUrl": q, "MaxNumberOfMessages": 10})).await;
    let bodies: Vec<&str> = got.iter().map(|m| m["Body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["body-a", "body-c"], "in request order, the duplicate not enqueued");
}

#[tokio::test]
async fn receive_request_attempt_id_retries() {
    let sqs = Sqs::start();
    let q = sqs.create("attempt.fifo", json!({"FifoQueue": "true", "ContentBasedDeduplication": "true"})).await;
    for (body, group) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
        sqs.ok("SendMessage", json!({"QueueUrl": q, "MessageBody": body, "MessageGroupId": group})).await;
    }
    let take = |attempt: &str| json!({"QueueUrl": q, "MaxNumberOfMessages": 2, "ReceiveRequestAttemptId": attempt});
    let first = receive(&sqs, take("try-1")).await;
    let bodies = |ms: &[Value]| ms.iter().map(|m| m["Body"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(bodies(&first), ["a1", "a2"], "as many of one group as possible");
    // The retry gets the same messages and the same receipt handles.
    let retry = receive(&sqs, take("try-1")).await;
    assert_eq!(
        retry.iter().map(|m| &m["ReceiptHandle"]).collect::<Vec<_>>(),
        first.iter().map(|m| &m["ReceiptHandle"]).collect::<Vec<_>>()
    );
    // Another attempt id is a new receive.
    let other = receive(&sqs, take("try-2")).await;
    assert_eq!(bodies(&other), ["b1"]);
    // Once a message of the answer is deleted, the receive is no longer retryable.
    sqs.ok("DeleteMessage", json!({"QueueUrl": q, "ReceiptHandle": first[0]["ReceiptHandle"]})).await;
    let got = sqs.err("ReceiveMessage", take("try-1")).await;
    assert_eq!(
        got,
        invalid_parameter(
            "Value try-1 for parameter ReceiveRequestAttemptId is invalid. Reason: The receiveRequestAttemptId is not valid anymore since the receive call is not retryable."
        )
    );
    // The format rule (FIFO only).
    let got = sqs.err("ReceiveMessage", take("has space")).await;
    assert_eq!(
        got,
        invalid_parameter(
            "Value has space for parameter ReceiveRequestAttemptId is invalid. Reason: ReceiveRequestAttemptId can only include alphanumeric and punctuation characters. 1 to 128 in length."
        )
    );
    // Standard queues ignore it entirely.
    let standard = sqs.create("attempt", json!({})).await;
    sqs.ok("SendMessage", json!({"QueueUrl": standard, "MessageBody": "s1"})).await;
    sqs.ok("SendMessage", json!({"QueueUrl": standard, "MessageBody": "s2"})).await;
    let one = receive(&sqs, json!({"QueueUrl": standard, "ReceiveRequestAttemptId": "has space"})).await;
    let two = receive(&sqs, json!({"QueueUrl": standard, "ReceiveRequestAttemptId": "has space"})).await;
    assert_eq!((one.len(), two.len()), (1, 1));
    assert_ne!(one[0]["Body"], two[0]["Body"], "no retry semantics on a standard queue");
}

#[tokio::test]
async fn an_expired_fifo_handle_cannot_change_visibility() {
    let sqs = Sqs::start();
    let q = sqs.create("expired.fifo", json!({"FifoQueue": "true", "ContentBasedDeduplication": "true"})).await;
    sqs.ok("SendMessage", json!({"QueueUrl": q, "MessageBody": "m", "MessageGroupId": "g"})).await;
    // A zero visibility timeout makes the handle expire at once.
    let got = receive(&sqs, json!({"QueueUrl": q, "VisibilityTimeout": 0})).await;
    let handle = got[0]["ReceiptHandle"].as_str().unwrap().to_string();
    let got = sqs
        .err("ChangeMessageVisibility", json!({"QueueUrl": q, "ReceiptHandle": handle, "VisibilityTimeout": 30}))
        .await;
    assert_eq!(
        got,
        invalid_parameter(&format!(
            "Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired."
        ))
    );
    let out = sqs
        .ok(
            "ChangeMessageVisibilityBatch",
            json!({"QueueUrl": q, "Entries": [{"Id": "old", "ReceiptHandle": handle, "VisibilityTimeout": 60}]}),
        )
        .await;
    assert_eq!(out["Failed"][0]["Id"], "old");
    assert_eq!(out["Failed"][0]["Code"], "InvalidParameterValue");
    assert_eq!(
        out["Failed"][0]["Message"],
        format!("Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.")
    );
    // A live handle still works, singly and in batches.
    let got = receive(&sqs, json!({"QueueUrl": q, "VisibilityTimeout": 30})).await;
    let live = got[0]["ReceiptHandle"].as_str().unwrap().to_string();
    sqs.ok("ChangeMessageVisibility", json!({"QueueUrl": q, "ReceiptHandle": live, "VisibilityTimeout": 60})).await;
    let out = sqs
        .ok(
            "ChangeMessageVisibilityBatch",
            json!({"QueueUrl": q, "Entries": [{"Id": "live", "ReceiptHandle": live, "VisibilityTimeout": 60}]}),
        )
        .await;
    assert_eq!(out, json!({"Successful": [{"Id": "live"}]}));

    // On a standard queue the same sequence succeeds (AWS hides the message again).
    let standard = sqs.create("expired", json!({})).await;
    sqs.ok("SendMessage", json!({"QueueUrl": standard, "MessageBody": "m"})).await;
    let got = receive(&sqs, json!({"QueueUrl": standard, "VisibilityTimeout": 0})).await;
    sqs.ok(
        "ChangeMessageVisibility",
        json!({"QueueUrl": standard, "ReceiptHandle": got[0]["ReceiptHandle"], "VisibilityTimeout": 30}),
    )
    .await;
}

#[tokio::test]
async fn dead_letter_queues_are_of_their_sources_type() {
    let sqs = Sqs::start();
    sqs.create("dlq", json!({})).await;
    sqs.create("dlq.fifo", json!({"FifoQueue": "true"})).await;
    let policy = |target: &str| {
        json!({"deadLetterTargetArn": format!("arn:aws:sqs:us-east-1:000000000000:{target}"), "maxReceiveCount": 2})
            .to_string()
    };
    let mismatch = |p: &str| {
        invalid_parameter(&format!(
            "Value {p} for parameter RedrivePolicy is invalid. Reason: Dead-letter queue must be same type of queue as the source.."
        ))
    };
    let p = policy("dlq");
    let got = sqs
        .err("CreateQueue", json!({"QueueName": "src.fifo", "Attributes": {"FifoQueue": "true", "RedrivePolicy": p}}))
        .await;
    assert_eq!(got, mismatch(&p));
    let p = policy("dlq.fifo");
    let got = sqs.err("CreateQueue", json!({"QueueName": "src", "Attributes": {"RedrivePolicy": p}})).await;
    assert_eq!(got, mismatch(&p));
    let src = sqs.create("src.fifo", json!({"FifoQueue": "true", "RedrivePolicy": policy("dlq.fifo")})).await;
    let p = policy("dlq");
    let got = sqs.err("SetQueueAttributes", json!({"QueueUrl": src, "Attributes": {"RedrivePolicy": p}})).await;
    assert_eq!(got, mismatch(&p));
}

#[tokio::test]
async fn the_dedup_scope_is_fixed_at_creation() {
    let sqs = Sqs::start();
    let q = sqs.create("scope.fifo", json!({"FifoQueue": "true", "DeduplicationScope": "queue"})).await;
    let send = |group: &str, dedup: &str| json!({"QueueUrl": q, "MessageBody": format!("{group}/{dedup}"), "MessageGroupId": group, "MessageDeduplicationId": dedup});
    let first = sqs.ok("SendMessage", send("g1", "same")).await;
    assert_eq!(sqs.ok("SendMessage", send("g2", "same")).await["MessageId"], first["MessageId"]);
    sqs.ok("SetQueueAttributes", json!({"QueueUrl": q, "Attributes": {"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}})).await;
    // Reported as set, but deduplication keeps the scope of the creation (as AWS does).
    assert_eq!(sqs.ok("SendMessage", send("g3", "same")).await["MessageId"], first["MessageId"]);
    let out = sqs.ok("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["DeduplicationScope"]})).await;
    assert_eq!(out["Attributes"]["DeduplicationScope"], "messageGroup");

    // Created with messageGroup: the same id in another group is another message.
    let q = sqs.create("group.fifo", json!({"FifoQueue": "true", "DeduplicationScope": "messageGroup"})).await;
    let send = |group: &str| json!({"QueueUrl": q, "MessageBody": group, "MessageGroupId": group, "MessageDeduplicationId": "same"});
    let a = sqs.ok("SendMessage", send("g1")).await;
    let b = sqs.ok("SendMessage", send("g2")).await;
    assert_ne!(a["MessageId"], b["MessageId"]);
    assert_eq!(sqs.ok("SendMessage", send("g1")).await["MessageId"], a["MessageId"]);
}
