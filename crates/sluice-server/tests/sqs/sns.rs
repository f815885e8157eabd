//! The SNS Query API next to SQS on the same router: topics, subscriptions, fan-out into SQS
//! queues read back through SQS, and SNS's XML shapes and error texts (reference §5).

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::support::{ACCOUNT, Node, Reply, Sqs, url};

const VERSION: (&str, &str) = ("Version", "2010-03-31");

async fn sns(sqs: &Sqs, action: &str, params: &[(&str, &str)]) -> Reply {
    let mut all = vec![("Action", action), VERSION];
    all.extend_from_slice(params);
    sqs.query("/", &all).await
}

/// An SNS call that must succeed; its `<{Action}Result>`.
async fn ok(sqs: &Sqs, action: &str, params: &[(&str, &str)]) -> Node {
    let reply = sns(sqs, action, params).await;
    assert_eq!(reply.status, StatusCode::OK, "{action}: {}", reply.body);
    let root = reply.xml();
    assert_eq!(root.name, format!("{action}Response"));
    assert!(!root.text_at("ResponseMetadata/RequestId").is_empty());
    root.children.iter().find(|c| c.name == format!("{action}Result")).cloned().unwrap_or_default()
}

/// An SNS call that must fail; `(status, code, message)`.
async fn err(sqs: &Sqs, action: &str, params: &[(&str, &str)]) -> (u16, String, String) {
    let reply = sns(sqs, action, params).await;
    assert_ne!(reply.status, StatusCode::OK, "{action} succeeded: {}", reply.body);
    assert!(reply.body.contains("http://sns.amazonaws.com/doc/2010-03-31/"), "{}", reply.body);
    let error = reply.xml().child("Error").clone();
    (reply.status.as_u16(), error.text_at("Code"), error.text_at("Message"))
}

/// One row of an error table: action, parameters, and the `(status, code, message)` AWS
/// answers.
type ErrorCase<'a> = (&'a str, Vec<(&'a str, &'a str)>, (u16, &'a str, &'a str));

/// Runs every row and reports every mismatch at once.
async fn check_errors(sqs: &Sqs, cases: Vec<ErrorCase<'_>>) {
    let mut failures = Vec::new();
    for (action, params, (status, code, message)) in cases {
        let got = err(sqs, action, &params).await;
        if got != (status, code.to_string(), message.to_string()) {
            failures.push(format!("{action} {params:?}: got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `<Attributes><entry><key/><value/></entry>...</Attributes>` as pairs.
fn entries(result: &Node) -> Vec<(String, String)> {
    result.child("Attributes").pairs("entry", "key", "value")
}

fn attribute(result: &Node, name: &str) -> Option<String> {
    entries(result).into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

fn queue_arn(name: &str) -> String {
    format!("arn:aws:sqs:us-east-1:{ACCOUNT}:{name}")
}

async fn receive(sqs: &Sqs, queue: &str) -> Vec<Value> {
    let url = url(queue);
    let out = sqs
        .ok("ReceiveMessage", json!({ "QueueUrl": url, "MaxNumberOfMessages": 10, "MessageAttributeNames": ["All"], "MessageSystemAttributeNames": ["All"] }))
        .await;
    out["Messages"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn topics_crud_tags_and_attributes() {
    let sqs = Sqs::start();
    let arn = ok(
        &sqs,
        "CreateTopic",
        &[
            ("Name", "t"),
            ("Attributes.entry.1.key", "DisplayName"),
            ("Attributes.entry.1.value", "Tee"),
            ("Tags.member.1.Key", "k1"),
            ("Tags.member.1.Value", "v1"),
        ],
    )
    .await
    .text_at("TopicArn");
    assert_eq!(arn, format!("arn:aws:sns:us-east-1:{ACCOUNT}:t"));
    // Idempotent without attributes; refused with different ones.
    assert_eq!(ok(&sqs, "CreateTopic", &[("Name", "t")]).await.text_at("TopicArn"), arn);
    assert_eq!(
        err(
            &sqs,
            "CreateTopic",
            &[("Name", "t"), ("Attributes.entry.1.key", "DisplayName"), ("Attributes.entry.1.value", "Other")]
        )
        .await,
        (
            400,
            "InvalidParameter".into(),
            "Invalid parameter: Attributes Reason: Topic already exists with different attributes".into()
        )
    );
    assert_eq!(
        err(&sqs, "CreateTopic", &[("Name", "t"), ("Tags.member.1.Key", "k2"), ("Tags.member.1.Value", "v2")]).await.2,
        "Invalid parameter: Tags Reason: Topic already exists with different tags"
    );
    for bad in ["", "a.fifo", "bad name"] {
        assert_eq!(err(&sqs, "CreateTopic", &[("Name", bad)]).await.2, "Invalid parameter: Topic Name", "{bad:?}");
    }
    let fifo = ok(
        &sqs,
        "CreateTopic",
        &[("Name", "f.fifo"), ("Attributes.entry.1.key", "FifoTopic"), ("Attributes.entry.1.value", "true")],
    )
    .await;
    let fifo_arn = fifo.text_at("TopicArn");

    let listed = ok(&sqs, "ListTopics", &[]).await;
    let arns: Vec<String> = listed.child("Topics").all("member").iter().map(|m| m.text_at("TopicArn")).collect();
    assert_eq!(arns, [fifo_arn.clone(), arn.clone()]);

    let attrs = ok(&sqs, "GetTopicAttributes", &[("TopicArn", &arn)]).await;
    assert_eq!(attribute(&attrs, "DisplayName").as_deref(), Some("Tee"));
    assert_eq!(attribute(&attrs, "Owner").as_deref(), Some(ACCOUNT));
    assert_eq!(attribute(&attrs, "SubscriptionsConfirmed").as_deref(), Some("0"));
    let effective: Value = serde_json::from_str(&attribute(&attrs, "EffectiveDeliveryPolicy").unwrap()).unwrap();
    assert_eq!(effective["http"]["defaultHealthyRetryPolicy"]["numRetries"], 3);
    let policy: Value = serde_json::from_str(&attribute(&attrs, "Policy").unwrap()).unwrap();
    assert_eq!(policy["Statement"][0]["Resource"], arn.as_str());
    assert_eq!(attribute(&attrs, "FifoTopic"), None);
    let fifo_attrs = ok(&sqs, "GetTopicAttributes", &[("TopicArn", &fifo_arn)]).await;
    assert_eq!(attribute(&fifo_attrs, "FifoTopic").as_deref(), Some("true"));
    assert_eq!(attribute(&fifo_attrs, "ContentBasedDeduplication").as_deref(), Some("false"));

    ok(&sqs, "SetTopicAttributes", &[("TopicArn", &arn), ("AttributeName", "DisplayName"), ("AttributeValue", "New")])
        .await;
    let attrs = ok(&sqs, "GetTopicAttributes", &[("TopicArn", &arn)]).await;
    assert_eq!(attribute(&attrs, "DisplayName").as_deref(), Some("New"));
    assert_eq!(
        err(
            &sqs,
            "SetTopicAttributes",
            &[("TopicArn", &arn), ("AttributeName", "FifoTopic"), ("AttributeValue", "false")]
        )
        .await
        .2,
        "Invalid parameter: AttributeName"
    );

    ok(&sqs, "TagResource", &[("ResourceArn", &arn), ("Tags.member.1.Key", "k2"), ("Tags.member.1.Value", "v2")]).await;
    ok(&sqs, "UntagResource", &[("ResourceArn", &arn), ("TagKeys.member.1", "k1")]).await;
    let tags = ok(&sqs, "ListTagsForResource", &[("ResourceArn", &arn)]).await;
    assert_eq!(
        tags.child("Tags").all("member").iter().map(|m| (m.text_at("Key"), m.text_at("Value"))).collect::<Vec<_>>(),
        [("k2".to_string(), "v2".to_string())]
    );
    assert_eq!(
        err(
            &sqs,
            "TagResource",
            &[
                ("ResourceArn", &arn),
                ("Tags.member.1.Key", "a"),
                ("Tags.member.1.Value", "1"),
                ("Tags.member.2.Key", "a"),
                ("Tags.member.2.Value", "2")
            ]
        )
        .await
        .2,
        "Invalid parameter: Duplicated keys are not allowed."
    );
    let missing = format!("arn:aws:sns:us-east-1:{ACCOUNT}:nope");
    assert_eq!(err(&sqs, "ListTagsForResource", &[("ResourceArn", &missing)]).await.1, "ResourceNotFound");

    assert_eq!(
        err(&sqs, "GetTopicAttributes", &[("TopicArn", &missing)]).await,
        (404, "NotFound".into(), "Topic does not exist".into())
    );
    assert_eq!(
        err(&sqs, "GetTopicAttributes", &[("TopicArn", "nope")]).await.2,
        "Invalid parameter: TopicArn Reason: An ARN must have at least 6 elements, not 1"
    );
    ok(&sqs, "DeleteTopic", &[("TopicArn", &arn)]).await;
    ok(&sqs, "DeleteTopic", &[("TopicArn", &arn)]).await;
    assert_eq!(err(&sqs, "GetTopicAttributes", &[("TopicArn", &arn)]).await.1, "NotFound");
}

#[tokio::test]
async fn fan_out_to_sqs_with_envelope_raw_and_filters() {
    let sqs = Sqs::start();
    let arn = ok(&sqs, "CreateTopic", &[("Name", "orders")]).await.text_at("TopicArn");
    for q in ["env", "raw", "red"] {
        sqs.create(q, json!({})).await;
    }
    let env_sub = ok(&sqs, "Subscribe", &[("TopicArn", &arn), ("Protocol", "sqs"), ("Endpoint", &queue_arn("env"))])
        .await
        .text_at("SubscriptionArn");
    assert!(env_sub.starts_with(&format!("{arn}:")), "{env_sub}");
    ok(
        &sqs,
        "Subscribe",
        &[
            ("TopicArn", &arn),
            ("Protocol", "sqs"),
            ("Endpoint", &queue_arn("raw")),
            ("Attributes.entry.1.key", "RawMessageDelivery"),
            ("Attributes.entry.1.value", "true"),
        ],
    )
    .await;
    ok(
        &sqs,
        "Subscribe",
        &[
            ("TopicArn", &arn),
            ("Protocol", "sqs"),
            ("Endpoint", &queue_arn("red")),
            ("Attributes.entry.1.key", "FilterPolicy"),
            ("Attributes.entry.1.value", r#"{"color": ["red"]}"#),
            ("Attributes.entry.2.key", "RawMessageDelivery"),
            ("Attributes.entry.2.value", "true"),
        ],
    )
    .await;
    // Subscribing again answers the same ARN.
    assert_eq!(
        ok(&sqs, "Subscribe", &[("TopicArn", &arn), ("Protocol", "sqs"), ("Endpoint", &queue_arn("env"))])
            .await
            .text_at("SubscriptionArn"),
        env_sub
    );

    let published = ok(
        &sqs,
        "Publish",
        &[
            ("TopicArn", &arn),
            ("Message", "hello"),
            ("Subject", "greeting"),
            ("MessageAttributes.entry.1.Name", "color"),
            ("MessageAttributes.entry.1.Value.DataType", "String"),
            ("MessageAttributes.entry.1.Value.StringValue", "red"),
        ],
    )
    .await;
    let message_id = published.text_at("MessageId");
    ok(&sqs, "Publish", &[("TopicArn", &arn), ("Message", "plain")]).await;

    let env = receive(&sqs, "env").await;
    assert_eq!(env.len(), 2);
    let envelope: Value = serde_json::from_str(env[0]["Body"].as_str().unwrap()).unwrap();
    assert_eq!(envelope["Type"], "Notification");
    assert_eq!(envelope["MessageId"], message_id.as_str());
    assert_eq!(envelope["TopicArn"], arn.as_str());
    assert_eq!(envelope["Subject"], "greeting");
    assert_eq!(envelope["Message"], "hello");
    assert_eq!(envelope["MessageAttributes"]["color"], json!({ "Type": "String", "Value": "red" }));
    assert_eq!(
        envelope["UnsubscribeURL"],
        format!("http://localhost:9324/?Action=Unsubscribe&SubscriptionArn={env_sub}")
    );
    assert!(env[0].get("MessageAttributes").is_none());
    let raw = receive(&sqs, "raw").await;
    assert_eq!(raw[0]["Body"], "hello");
    assert_eq!(raw[0]["MessageAttributes"]["color"], json!({ "DataType": "String", "StringValue": "red" }));
    let red = receive(&sqs, "red").await;
    assert_eq!(red.len(), 1, "the filter lets only the red message through");

    // The unsubscribe URL works as written.
    let reply = sqs.query_get("/", &[("Action", "Unsubscribe"), ("SubscriptionArn", &env_sub)]).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let by_topic = ok(&sqs, "ListSubscriptionsByTopic", &[("TopicArn", &arn)]).await;
    assert_eq!(by_topic.child("Subscriptions").all("member").len(), 2);
    let all = ok(&sqs, "ListSubscriptions", &[]).await;
    let first = all.child("Subscriptions").all("member")[0].clone();
    assert_eq!(first.text_at("Protocol"), "sqs");
    assert_eq!(first.text_at("Owner"), ACCOUNT);
    assert_eq!(first.text_at("TopicArn"), arn);
}

#[tokio::test]
async fn subscription_attributes_and_errors() {
    let sqs = Sqs::start();
    let arn = ok(&sqs, "CreateTopic", &[("Name", "t")]).await.text_at("TopicArn");
    let sub = ok(&sqs, "Subscribe", &[("TopicArn", &arn), ("Protocol", "sqs"), ("Endpoint", &queue_arn("q"))])
        .await
        .text_at("SubscriptionArn");
    let attrs = ok(&sqs, "GetSubscriptionAttributes", &[("SubscriptionArn", &sub)]).await;
    let names: Vec<String> = entries(&attrs).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        names,
        [
            "ConfirmationWasAuthenticated",
            "Endpoint",
            "Owner",
            "PendingConfirmation",
            "Protocol",
            "RawMessageDelivery",
            "SubscriptionArn",
            "SubscriptionPrincipal",
            "TopicArn"
        ]
    );
    assert_eq!(attribute(&attrs, "PendingConfirmation").as_deref(), Some("false"));
    ok(
        &sqs,
        "SetSubscriptionAttributes",
        &[("SubscriptionArn", &sub), ("AttributeName", "FilterPolicy"), ("AttributeValue", r#"{"a": ["b"]}"#)],
    )
    .await;
    let attrs = ok(&sqs, "GetSubscriptionAttributes", &[("SubscriptionArn", &sub)]).await;
    assert_eq!(attribute(&attrs, "FilterPolicyScope").as_deref(), Some("MessageAttributes"));

    let (q, q_fifo, zeros) = (queue_arn("q"), queue_arn("q.fifo"), "0".repeat(64));
    let unknown_sub = format!("{arn}:00000000-0000-0000-0000-000000000000");
    let cases: Vec<ErrorCase<'_>> = vec![
        (
            "SetSubscriptionAttributes",
            vec![("SubscriptionArn", &sub), ("AttributeName", "Fake"), ("AttributeValue", "x")],
            (400, "InvalidParameter", "Invalid parameter: AttributeName"),
        ),
        (
            "SetSubscriptionAttributes",
            vec![("SubscriptionArn", &sub), ("AttributeName", "RawMessageDelivery"), ("AttributeValue", "")],
            (
                400,
                "InvalidParameter",
                "Invalid parameter: RawMessageDelivery: Invalid value []. Must be true or false.",
            ),
        ),
        (
            "SetSubscriptionAttributes",
            vec![
                ("SubscriptionArn", &sub),
                ("AttributeName", "RedrivePolicy"),
                ("AttributeValue", r#"{"deadLetterTargetArn": "fake"}"#),
            ],
            (400, "InvalidParameter", "Invalid parameter: RedrivePolicy: deadLetterTargetArn is an invalid arn"),
        ),
        (
            "Subscribe",
            vec![("TopicArn", &arn), ("Protocol", "test-protocol"), ("Endpoint", "x")],
            (
                400,
                "InvalidParameter",
                "Invalid parameter: Amazon SNS does not support this protocol string: test-protocol",
            ),
        ),
        (
            "Subscribe",
            vec![("TopicArn", &arn), ("Protocol", "sqs"), ("Endpoint", "http://localhost:9324/000000000000/q")],
            (400, "InvalidParameter", "Invalid parameter: SQS endpoint ARN"),
        ),
        (
            "Subscribe",
            vec![
                ("TopicArn", &arn),
                ("Protocol", "sqs"),
                ("Endpoint", &q),
                ("Attributes.entry.1.key", "RawMessageDelivery"),
                ("Attributes.entry.1.value", "wrongvalue"),
            ],
            (
                400,
                "InvalidParameter",
                "Invalid parameter: Attributes Reason: RawMessageDelivery: Invalid value [wrongvalue]. Must be true or false.",
            ),
        ),
        (
            "Subscribe",
            vec![
                ("TopicArn", &arn),
                ("Protocol", "sqs"),
                ("Endpoint", &q),
                ("Attributes.entry.1.key", "RawMessageDelivery"),
                ("Attributes.entry.1.value", "true"),
            ],
            (
                400,
                "InvalidParameter",
                "Invalid parameter: Attributes Reason: Subscription already exists with different attributes",
            ),
        ),
        (
            "Subscribe",
            vec![("TopicArn", "arn:aws:sns:us-east-1:000000000000:nope"), ("Protocol", "sqs"), ("Endpoint", &q)],
            (404, "NotFound", "Topic does not exist"),
        ),
        (
            "Subscribe",
            vec![("TopicArn", &arn), ("Protocol", "sqs"), ("Endpoint", &q_fifo)],
            (
                400,
                "InvalidParameter",
                "Invalid parameter: Invalid parameter: Endpoint Reason: FIFO SQS Queues can not be subscribed to standard SNS topics",
            ),
        ),
        (
            "GetSubscriptionAttributes",
            vec![("SubscriptionArn", &unknown_sub)],
            (404, "NotFound", "Subscription does not exist"),
        ),
        (
            "Unsubscribe",
            vec![("SubscriptionArn", "a:b:c:d:e")],
            (
                400,
                "InvalidParameter",
                "Invalid parameter: SubscriptionArn Reason: An ARN must have at least 6 elements, not 5",
            ),
        ),
        (
            "Unsubscribe",
            vec![("SubscriptionArn", &arn)],
            (400, "InvalidParameter", "Invalid parameter: SubscriptionId"),
        ),
        (
            "Unsubscribe",
            vec![("SubscriptionArn", "")],
            (400, "InvalidParameter", "Invalid parameter: SubscriptionArn Reason: no value for required parameter"),
        ),
        ("ConfirmSubscription", vec![("TopicArn", &arn), ("Token", "x")], (400, "InvalidParameter", "Invalid token")),
        (
            "ConfirmSubscription",
            vec![("TopicArn", &arn), ("Token", &zeros)],
            (400, "InvalidParameter", "Invalid parameter: Token"),
        ),
    ];
    check_errors(&sqs, cases).await;
    // Unsubscribing twice succeeds.
    ok(&sqs, "Unsubscribe", &[("SubscriptionArn", &sub)]).await;
    ok(&sqs, "Unsubscribe", &[("SubscriptionArn", &sub)]).await;
}

#[tokio::test]
async fn http_subscriptions_confirm_with_the_token_they_were_sent() {
    let sqs = Sqs::start();
    let arn = ok(&sqs, "CreateTopic", &[("Name", "t")]).await.text_at("TopicArn");
    let pending =
        ok(&sqs, "Subscribe", &[("TopicArn", &arn), ("Protocol", "https"), ("Endpoint", "https://example.com/hook")])
            .await;
    assert_eq!(pending.text_at("SubscriptionArn"), "pending confirmation");
    let listed = ok(&sqs, "ListSubscriptionsByTopic", &[("TopicArn", &arn)]).await;
    assert_eq!(listed.child("Subscriptions").all("member")[0].text_at("SubscriptionArn"), "PendingConfirmation");
    let with_arn = ok(
        &sqs,
        "Subscribe",
        &[
            ("TopicArn", &arn),
            ("Protocol", "https"),
            ("Endpoint", "https://example.com/hook"),
            ("ReturnSubscriptionArn", "true"),
        ],
    )
    .await;
    let sub = with_arn.text_at("SubscriptionArn");
    let id = sub.rsplit(':').next().unwrap();
    // The confirmation request waits in the subscription's delivery queue (twice: subscribed twice).
    let waiting = receive(&sqs, &format!("sluice-push-{id}")).await;
    assert_eq!(waiting.len(), 2);
    let delivery: Value = serde_json::from_str(waiting[0]["Body"].as_str().unwrap()).unwrap();
    let confirmation: Value = serde_json::from_str(delivery["body"].as_str().unwrap()).unwrap();
    let token = confirmation["Token"].as_str().unwrap();
    assert_eq!(
        ok(&sqs, "ConfirmSubscription", &[("TopicArn", &arn), ("Token", token)]).await.text_at("SubscriptionArn"),
        sub
    );
    let attrs = ok(&sqs, "GetSubscriptionAttributes", &[("SubscriptionArn", &sub)]).await;
    assert_eq!(attribute(&attrs, "PendingConfirmation").as_deref(), Some("false"));
    assert!(attribute(&attrs, "EffectiveDeliveryPolicy").is_some());
    assert_eq!(
        err(
            &sqs,
            "Subscribe",
            &[
                ("TopicArn", &arn),
                ("Protocol", "lambda"),
                ("Endpoint", "arn:aws:lambda:us-east-1:000000000000:function:f")
            ]
        )
        .await
        .1,
        "InvalidParameter"
    );
}

#[tokio::test]
async fn publish_errors_and_batches() {
    let sqs = Sqs::start();
    let arn = ok(&sqs, "CreateTopic", &[("Name", "t")]).await.text_at("TopicArn");
    let fifo = ok(
        &sqs,
        "CreateTopic",
        &[("Name", "t.fifo"), ("Attributes.entry.1.key", "FifoTopic"), ("Attributes.entry.1.value", "true")],
    )
    .await
    .text_at("TopicArn");
    sqs.create("q.fifo", json!({ "FifoQueue": "true" })).await;
    ok(
        &sqs,
        "Subscribe",
        &[
            ("TopicArn", &fifo),
            ("Protocol", "sqs"),
            ("Endpoint", &queue_arn("q.fifo")),
            ("Attributes.entry.1.key", "RawMessageDelivery"),
            ("Attributes.entry.1.value", "true"),
        ],
    )
    .await;
    let missing = format!("arn:aws:sns:us-east-1:{ACCOUNT}:nope");
    let cases: Vec<ErrorCase<'_>> = vec![
        (
            "Publish",
            vec![("TopicArn", &arn), ("Message", "")],
            (400, "InvalidParameter", "Invalid parameter: Empty message"),
        ),
        ("Publish", vec![("TopicArn", &missing), ("Message", "m")], (404, "NotFound", "Topic does not exist")),
        (
            "Publish",
            vec![("TopicArn", "x:y"), ("Message", "m")],
            (
                400,
                "InvalidParameter",
                "Invalid parameter: TopicArn Reason: An ARN must have at least 6 elements, not 2",
            ),
        ),
        (
            "Publish",
            vec![("TargetArn", "arn:aws:sns:us-east-1:000000000000:endpoint/APNS/app/x"), ("Message", "m")],
            (
                400,
                "InvalidParameter",
                "Invalid parameter: TargetArn Reason: No endpoint found for the target arn specified",
            ),
        ),
        (
            "Publish",
            vec![("TopicArn", &arn), ("Message", "m"), ("Subject", "")],
            (400, "InvalidParameter", "Invalid parameter: Subject"),
        ),
        (
            "Publish",
            vec![("TopicArn", &arn), ("Message", "m"), ("MessageStructure", "json")],
            (400, "InvalidParameter", "Invalid parameter: Message Structure - JSON message body failed to parse"),
        ),
        (
            "Publish",
            vec![
                ("TopicArn", &arn),
                ("Message", "m"),
                ("MessageAttributes.entry.1.Name", "attr1"),
                ("MessageAttributes.entry.1.Value.DataType", "String"),
            ],
            (
                400,
                "ParameterValueInvalid",
                "The message attribute 'attr1' must contain non-empty message attribute value for message attribute type 'String'.",
            ),
        ),
        (
            "Publish",
            vec![("TopicArn", &fifo), ("Message", "m")],
            (400, "InvalidParameter", "Invalid parameter: The MessageGroupId parameter is required for FIFO topics"),
        ),
        (
            "Publish",
            vec![("TopicArn", &fifo), ("Message", "m"), ("MessageGroupId", "g")],
            (
                400,
                "InvalidParameter",
                "Invalid parameter: The topic should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
            ),
        ),
        (
            "Publish",
            vec![("TopicArn", &arn), ("Message", "m"), ("MessageDeduplicationId", "d")],
            (
                400,
                "InvalidParameter",
                "Invalid parameter: MessageDeduplicationId Reason: The request includes MessageDeduplicationId parameter that is not valid for this topic type",
            ),
        ),
        (
            "PublishBatch",
            vec![("TopicArn", &arn)],
            (400, "EmptyBatchRequest", "The batch request doesn't contain any entries."),
        ),
        (
            "PublishBatch",
            vec![
                ("TopicArn", &arn),
                ("PublishBatchRequestEntries.member.1.Id", "a"),
                ("PublishBatchRequestEntries.member.1.Message", "m"),
                ("PublishBatchRequestEntries.member.2.Id", "a"),
                ("PublishBatchRequestEntries.member.2.Message", "m"),
            ],
            (400, "BatchEntryIdsNotDistinct", "Two or more batch entries in the request have the same Id."),
        ),
        (
            "PublishBatch",
            vec![
                ("TopicArn", &fifo),
                ("PublishBatchRequestEntries.member.1.Id", "a"),
                ("PublishBatchRequestEntries.member.1.Message", "m"),
            ],
            (400, "InvalidParameter", "Invalid parameter: The MessageGroupId parameter is required for FIFO topics"),
        ),
        (
            "PublishBatch",
            vec![
                ("TopicArn", &missing),
                ("PublishBatchRequestEntries.member.1.Id", "a"),
                ("PublishBatchRequestEntries.member.1.Message", "m"),
            ],
            (404, "NotFound", "Topic does not exist"),
        ),
    ];
    check_errors(&sqs, cases).await;

    let result = ok(
        &sqs,
        "PublishBatch",
        &[
            ("TopicArn", &fifo),
            ("PublishBatchRequestEntries.member.1.Id", "one"),
            ("PublishBatchRequestEntries.member.1.Message", "first"),
            ("PublishBatchRequestEntries.member.1.MessageGroupId", "g"),
            ("PublishBatchRequestEntries.member.1.MessageDeduplicationId", "1"),
            ("PublishBatchRequestEntries.member.2.Id", "two"),
            ("PublishBatchRequestEntries.member.2.Message", "second"),
            ("PublishBatchRequestEntries.member.2.MessageGroupId", "g"),
            ("PublishBatchRequestEntries.member.2.MessageDeduplicationId", "2"),
        ],
    )
    .await;
    let successful = result.child("Successful").all("member");
    assert_eq!(successful.iter().map(|m| m.text_at("Id")).collect::<Vec<_>>(), ["one", "two"]);
    assert!(successful[0].text_at("SequenceNumber") < successful[1].text_at("SequenceNumber"));
    assert!(result.child("Failed").children.is_empty());
    let got = receive(&sqs, "q.fifo").await;
    assert_eq!(got.iter().map(|m| m["Body"].as_str().unwrap()).collect::<Vec<_>>(), ["first", "second"]);
    assert_eq!(got[0]["Attributes"]["MessageGroupId"], "g");
    assert_eq!(got[0]["Attributes"]["MessageDeduplicationId"], "1");
}
