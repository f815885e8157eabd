//! The SNS Query API next to SQS on the same router: topics, subscriptions, fan-out into SQS
//! queues read back through SQS, and SNS's XML shapes and error texts (reference §5).

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::support::{ACCOUNT, Node, Reply, Sqs, url};

const VERSION: (&str, &str) = ("Version", "2010-03-31");

/// One SNS Query call: its action and its form parameters, in order. The methods write out the
/// numbered parameters AWS uses for lists (`Attributes.entry.N.key`, `Tags.member.N.Key`, ...),
/// so that a test states only its values.
#[derive(Debug, Clone)]
struct Call {
    action: String,
    params: Vec<(String, String)>,
}

impl Call {
    fn new(action: &str, params: &[(&str, &str)]) -> Call {
        Call { action: action.to_owned(), params: Vec::new() }.params(params)
    }

    fn params(mut self, params: &[(&str, &str)]) -> Call {
        self.params.extend(params.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        self
    }

    /// `Attributes.entry.N.key` and `.value`, for topics and subscriptions.
    fn attributes(self, pairs: &[(&str, &str)]) -> Call {
        self.numbered("Attributes.entry", pairs.iter().map(|&(k, v)| [("key", k), ("value", v)]))
    }

    /// `Tags.member.N.Key` and `.Value`.
    fn tags(self, pairs: &[(&str, &str)]) -> Call {
        self.numbered("Tags.member", pairs.iter().map(|&(k, v)| [("Key", k), ("Value", v)]))
    }

    /// `MessageAttributes.entry.N.Name`, `.Value.DataType` and `.Value.StringValue`.
    fn message_attributes(self, attributes: &[(&str, &str, &str)]) -> Call {
        let fields =
            |&(name, data_type, value)| [("Name", name), ("Value.DataType", data_type), ("Value.StringValue", value)];
        self.numbered("MessageAttributes.entry", attributes.iter().map(fields))
    }

    /// `PREFIX.N.FIELD` for every field of the Nth member, N from 1.
    fn numbered<'a>(
        mut self,
        prefix: &str,
        members: impl IntoIterator<Item = impl IntoIterator<Item = (&'a str, &'a str)>>,
    ) -> Call {
        for (i, fields) in members.into_iter().enumerate() {
            for (field, value) in fields {
                self.params.push((format!("{prefix}.{}.{field}", i + 1), value.to_owned()));
            }
        }
        self
    }

    async fn reply(&self, sqs: &Sqs) -> Reply {
        let mut all = vec![("Action", self.action.as_str()), VERSION];
        all.extend(self.params.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        sqs.query("/", &all).await
    }

    /// The call must succeed; its `<{Action}Result>`.
    async fn ok(&self, sqs: &Sqs) -> Node {
        let action = &self.action;
        let reply = self.reply(sqs).await;
        assert_eq!(reply.status, StatusCode::OK, "{action}: {}", reply.body);
        let root = reply.xml();
        assert_eq!(root.name, format!("{action}Response"));
        assert!(!root.text_at("ResponseMetadata/RequestId").is_empty());
        root.children.iter().find(|c| c.name == format!("{action}Result")).cloned().unwrap_or_default()
    }

    /// The call must fail; `(status, code, message)`.
    async fn err(&self, sqs: &Sqs) -> (u16, String, String) {
        let reply = self.reply(sqs).await;
        assert_ne!(reply.status, StatusCode::OK, "{} succeeded: {}", self.action, reply.body);
        assert!(reply.body.contains("http://sns.amazonaws.com/doc/2010-03-31/"), "{}", reply.body);
        let error = reply.xml().child("Error").clone();
        (reply.status.as_u16(), error.text_at("Code"), error.text_at("Message"))
    }
}

/// `CreateTopic` named `name`.
fn create_topic(name: &str) -> Call {
    Call::new("CreateTopic", &[("Name", name)])
}

/// `Subscribe` `endpoint` over `protocol` to `topic`.
fn subscribe(topic: &str, protocol: &str, endpoint: &str) -> Call {
    Call::new("Subscribe", &[("TopicArn", topic), ("Protocol", protocol), ("Endpoint", endpoint)])
}

/// `Publish` `message` to `topic`.
fn publish(topic: &str, message: &str) -> Call {
    Call::new("Publish", &[("TopicArn", topic), ("Message", message)])
}

/// `PublishBatch` to `topic`, each entry given as its fields (`Id`, `Message`, ...).
fn publish_batch(topic: &str, entries: &[&[(&str, &str)]]) -> Call {
    Call::new("PublishBatch", &[("TopicArn", topic)])
        .numbered("PublishBatchRequestEntries.member", entries.iter().map(|fields| fields.iter().copied()))
}

/// `SetTopicAttributes` or `SetSubscriptionAttributes` (`action`) of the topic or
/// subscription `arn`: `name` to `value`.
fn set_attribute(action: &str, arn: &str, name: &str, value: &str) -> Call {
    let arn_name = if action == "SetTopicAttributes" { "TopicArn" } else { "SubscriptionArn" };
    Call::new(action, &[(arn_name, arn), ("AttributeName", name), ("AttributeValue", value)])
}

/// An SNS call without list parameters that must succeed; its `<{Action}Result>`.
async fn ok(sqs: &Sqs, action: &str, params: &[(&str, &str)]) -> Node {
    Call::new(action, params).ok(sqs).await
}

/// An SNS call without list parameters that must fail; `(status, code, message)`.
async fn err(sqs: &Sqs, action: &str, params: &[(&str, &str)]) -> (u16, String, String) {
    Call::new(action, params).err(sqs).await
}

/// One row of an error table: the call, and the `(status, code, message)` AWS answers.
type ErrorCase<'a> = (Call, (u16, &'a str, &'a str));

/// Runs every row and reports every mismatch at once.
async fn check_errors(sqs: &Sqs, cases: Vec<ErrorCase<'_>>) {
    let mut failures = Vec::new();
    for (call, (status, code, message)) in cases {
        let got = call.err(sqs).await;
        if got != (status, code.to_string(), message.to_string()) {
            failures.push(format!("{} {:?}: got {got:?}", call.action, call.params));
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
    let arn = create_topic("t")
        .attributes(&[("DisplayName", "Tee")])
        .tags(&[("k1", "v1")])
        .ok(&sqs)
        .await
        .text_at("TopicArn");
    assert_eq!(arn, format!("arn:aws:sns:us-east-1:{ACCOUNT}:t"));
    // Idempotent without attributes; refused with different ones.
    assert_eq!(ok(&sqs, "CreateTopic", &[("Name", "t")]).await.text_at("TopicArn"), arn);
    assert_eq!(
        create_topic("t").attributes(&[("DisplayName", "Other")]).err(&sqs).await,
        (
            400,
            "InvalidParameter".into(),
            "Invalid parameter: Attributes Reason: Topic already exists with different attributes".into()
        )
    );
    assert_eq!(
        create_topic("t").tags(&[("k2", "v2")]).err(&sqs).await.2,
        "Invalid parameter: Tags Reason: Topic already exists with different tags"
    );
    for bad in ["", "a.fifo", "bad name"] {
        assert_eq!(err(&sqs, "CreateTopic", &[("Name", bad)]).await.2, "Invalid parameter: Topic Name", "{bad:?}");
    }
    let fifo_arn = create_topic("f.fifo").attributes(&[("FifoTopic", "true")]).ok(&sqs).await.text_at("TopicArn");

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

    set_attribute("SetTopicAttributes", &arn, "DisplayName", "New").ok(&sqs).await;
    let attrs = ok(&sqs, "GetTopicAttributes", &[("TopicArn", &arn)]).await;
    assert_eq!(attribute(&attrs, "DisplayName").as_deref(), Some("New"));
    assert_eq!(
        set_attribute("SetTopicAttributes", &arn, "FifoTopic", "false").err(&sqs).await.2,
        "Invalid parameter: AttributeName"
    );

    Call::new("TagResource", &[("ResourceArn", &arn)]).tags(&[("k2", "v2")]).ok(&sqs).await;
    ok(&sqs, "UntagResource", &[("ResourceArn", &arn), ("TagKeys.member.1", "k1")]).await;
    let tags = ok(&sqs, "ListTagsForResource", &[("ResourceArn", &arn)]).await;
    assert_eq!(
        tags.child("Tags").all("member").iter().map(|m| (m.text_at("Key"), m.text_at("Value"))).collect::<Vec<_>>(),
        [("k2".to_string(), "v2".to_string())]
    );
    assert_eq!(
        Call::new("TagResource", &[("ResourceArn", &arn)]).tags(&[("a", "1"), ("a", "2")]).err(&sqs).await.2,
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
    let arn = create_topic("orders").ok(&sqs).await.text_at("TopicArn");
    for q in ["env", "raw", "red"] {
        sqs.create(q, json!({})).await;
    }
    let env_sub = subscribe(&arn, "sqs", &queue_arn("env")).ok(&sqs).await.text_at("SubscriptionArn");
    assert!(env_sub.starts_with(&format!("{arn}:")), "{env_sub}");
    subscribe(&arn, "sqs", &queue_arn("raw")).attributes(&[("RawMessageDelivery", "true")]).ok(&sqs).await;
    subscribe(&arn, "sqs", &queue_arn("red"))
        .attributes(&[("FilterPolicy", r#"{"color": ["red"]}"#), ("RawMessageDelivery", "true")])
        .ok(&sqs)
        .await;
    // Subscribing again answers the same ARN.
    assert_eq!(subscribe(&arn, "sqs", &queue_arn("env")).ok(&sqs).await.text_at("SubscriptionArn"), env_sub);

    let published = publish(&arn, "hello")
        .params(&[("Subject", "greeting")])
        .message_attributes(&[("color", "String", "red")])
        .ok(&sqs)
        .await;
    let message_id = published.text_at("MessageId");
    publish(&arn, "plain").ok(&sqs).await;

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
    let arn = create_topic("t").ok(&sqs).await.text_at("TopicArn");
    let sub = subscribe(&arn, "sqs", &queue_arn("q")).ok(&sqs).await.text_at("SubscriptionArn");
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
    set_attribute("SetSubscriptionAttributes", &sub, "FilterPolicy", r#"{"a": ["b"]}"#).ok(&sqs).await;
    let attrs = ok(&sqs, "GetSubscriptionAttributes", &[("SubscriptionArn", &sub)]).await;
    assert_eq!(attribute(&attrs, "FilterPolicyScope").as_deref(), Some("MessageAttributes"));

    let (q, q_fifo, zeros) = (queue_arn("q"), queue_arn("q.fifo"), "0".repeat(64));
    let unknown_sub = format!("{arn}:00000000-0000-0000-0000-000000000000");
    let cases: Vec<ErrorCase<'_>> = vec![
        (
            set_attribute("SetSubscriptionAttributes", &sub, "Fake", "x"),
            (400, "InvalidParameter", "Invalid parameter: AttributeName"),
        ),
        (
            set_attribute("SetSubscriptionAttributes", &sub, "RawMessageDelivery", ""),
            (
                400,
                "InvalidParameter",
                "Invalid parameter: RawMessageDelivery: Invalid value []. Must be true or false.",
            ),
        ),
        (
            set_attribute("SetSubscriptionAttributes", &sub, "RedrivePolicy", r#"{"deadLetterTargetArn": "fake"}"#),
            (400, "InvalidParameter", "Invalid parameter: RedrivePolicy: deadLetterTargetArn is an invalid arn"),
        ),
        (
            subscribe(&arn, "test-protocol", "x"),
            (
                400,
                "InvalidParameter",
                "Invalid parameter: Amazon SNS does not support this protocol string: test-protocol",
            ),
        ),
        (
            subscribe(&arn, "sqs", "http://localhost:9324/000000000000/q"),
            (400, "InvalidParameter", "Invalid parameter: SQS endpoint ARN"),
        ),
        (
            subscribe(&arn, "sqs", &q).attributes(&[("RawMessageDelivery", "wrongvalue")]),
            (
                400,
                "InvalidParameter",
                "Invalid parameter: Attributes Reason: RawMessageDelivery: Invalid value [wrongvalue]. Must be true or false.",
            ),
        ),
        (
            subscribe(&arn, "sqs", &q).attributes(&[("RawMessageDelivery", "true")]),
            (
                400,
                "InvalidParameter",
                "Invalid parameter: Attributes Reason: Subscription already exists with different attributes",
            ),
        ),
        (subscribe("arn:aws:sns:us-east-1:000000000000:nope", "sqs", &q), (404, "NotFound", "Topic does not exist")),
        (
            subscribe(&arn, "sqs", &q_fifo),
            (
                400,
                "InvalidParameter",
                "Invalid parameter: Invalid parameter: Endpoint Reason: FIFO SQS Queues can not be subscribed to standard SNS topics",
            ),
        ),
        (
            Call::new("GetSubscriptionAttributes", &[("SubscriptionArn", &unknown_sub)]),
            (404, "NotFound", "Subscription does not exist"),
        ),
        (
            Call::new("Unsubscribe", &[("SubscriptionArn", "a:b:c:d:e")]),
            (
                400,
                "InvalidParameter",
                "Invalid parameter: SubscriptionArn Reason: An ARN must have at least 6 elements, not 5",
            ),
        ),
        (
            Call::new("Unsubscribe", &[("SubscriptionArn", &arn)]),
            (400, "InvalidParameter", "Invalid parameter: SubscriptionId"),
        ),
        (
            Call::new("Unsubscribe", &[("SubscriptionArn", "")]),
            (400, "InvalidParameter", "Invalid parameter: SubscriptionArn Reason: no value for required parameter"),
        ),
        (
            Call::new("ConfirmSubscription", &[("TopicArn", &arn), ("Token", "x")]),
            (400, "InvalidParameter", "Invalid token"),
        ),
        (
            Call::new("ConfirmSubscription", &[("TopicArn", &arn), ("Token", &zeros)]),
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
    let arn = create_topic("t").ok(&sqs).await.text_at("TopicArn");
    let pending = subscribe(&arn, "https", "https://example.com/hook").ok(&sqs).await;
    assert_eq!(pending.text_at("SubscriptionArn"), "pending confirmation");
    let listed = ok(&sqs, "ListSubscriptionsByTopic", &[("TopicArn", &arn)]).await;
    assert_eq!(listed.child("Subscriptions").all("member")[0].text_at("SubscriptionArn"), "PendingConfirmation");
    let with_arn = subscribe(&arn, "https", "https://example.com/hook")
        .params(&[("ReturnSubscriptionArn", "true")])
        .ok(&sqs)
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
    let lambda = "arn:aws:lambda:us-east-1:000000000000:function:f";
    assert_eq!(subscribe(&arn, "lambda", lambda).err(&sqs).await.1, "InvalidParameter");
}

#[tokio::test]
async fn publish_errors_and_batches() {
    let sqs = Sqs::start();
    let arn = create_topic("t").ok(&sqs).await.text_at("TopicArn");
    let fifo = create_topic("t.fifo").attributes(&[("FifoTopic", "true")]).ok(&sqs).await.text_at("TopicArn");
    sqs.create("q.fifo", json!({ "FifoQueue": "true" })).await;
    subscribe(&fifo, "sqs", &queue_arn("q.fifo")).attributes(&[("RawMessageDelivery", "true")]).ok(&sqs).await;
    let missing = format!("arn:aws:sns:us-east-1:{ACCOUNT}:nope");
    let cases: Vec<ErrorCase<'_>> = vec![
        (publish(&arn, ""), (400, "InvalidParameter", "Invalid parameter: Empty message")),
        (publish(&missing, "m"), (404, "NotFound", "Topic does not exist")),
        (
            publish("x:y", "m"),
            (
                400,
                "InvalidParameter",
                "Invalid parameter: TopicArn Reason: An ARN must have at least 6 elements, not 2",
            ),
        ),
        (
            Call::new(
                "Publish",
                &[("TargetArn", "arn:aws:sns:us-east-1:000000000000:endpoint/APNS/app/x"), ("Message", "m")],
            ),
            (
                400,
                "InvalidParameter",
                "Invalid parameter: TargetArn Reason: No endpoint found for the target arn specified",
            ),
        ),
        (publish(&arn, "m").params(&[("Subject", "")]), (400, "InvalidParameter", "Invalid parameter: Subject")),
        (
            publish(&arn, "m").params(&[("MessageStructure", "json")]),
            (400, "InvalidParameter", "Invalid parameter: Message Structure - JSON message body failed to parse"),
        ),
        (
            // A value-less attribute: `message_attributes` always writes a value.
            publish(&arn, "m").numbered("MessageAttributes.entry", [[("Name", "attr1"), ("Value.DataType", "String")]]),
            (
                400,
                "ParameterValueInvalid",
                "The message attribute 'attr1' must contain non-empty message attribute value for message attribute type 'String'.",
            ),
        ),
        (
            publish(&fifo, "m"),
            (400, "InvalidParameter", "Invalid parameter: The MessageGroupId parameter is required for FIFO topics"),
        ),
        (
            publish(&fifo, "m").params(&[("MessageGroupId", "g")]),
            (
                400,
                "InvalidParameter",
                "Invalid parameter: The topic should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
            ),
        ),
        (
            publish(&arn, "m").params(&[("MessageDeduplicationId", "d")]),
            (
                400,
                "InvalidParameter",
                "Invalid parameter: MessageDeduplicationId Reason: The request includes MessageDeduplicationId parameter that is not valid for this topic type",
            ),
        ),
        (publish_batch(&arn, &[]), (400, "EmptyBatchRequest", "The batch request doesn't contain any entries.")),
        (
            publish_batch(&arn, &[&[("Id", "a"), ("Message", "m")], &[("Id", "a"), ("Message", "m")]]),
            (400, "BatchEntryIdsNotDistinct", "Two or more batch entries in the request have the same Id."),
        ),
        (
            publish_batch(&fifo, &[&[("Id", "a"), ("Message", "m")]]),
            (400, "InvalidParameter", "Invalid parameter: The MessageGroupId parameter is required for FIFO topics"),
        ),
        (publish_batch(&missing, &[&[("Id", "a"), ("Message", "m")]]), (404, "NotFound", "Topic does not exist")),
    ];
    check_errors(&sqs, cases).await;

    let result = publish_batch(
        &fifo,
        &[
            &[("Id", "one"), ("Message", "first"), ("MessageGroupId", "g"), ("MessageDeduplicationId", "1")],
            &[("Id", "two"), ("Message", "second"), ("MessageGroupId", "g"), ("MessageDeduplicationId", "2")],
        ],
    )
    .ok(&sqs)
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

/// SNS's answers where Sluice once answered otherwise (issue 25): the topic checked before the
/// endpoint, exact policy numbers within SNS's range, attribute names of any script with AWS's
/// texts for bad ones, a `String.Array` that is no array, the tag limit's own error, and
/// delivery policies shown in SNS's normalised form.
#[tokio::test]
async fn sns_answers_as_aws_words_them() {
    let sqs = Sqs::start();
    let arn = create_topic("t").ok(&sqs).await.text_at("TopicArn");
    let missing = format!("arn:aws:sns:us-east-1:{ACCOUNT}:nope");
    let tags: Vec<(String, String)> = (0..51).map(|i| (format!("k{i}"), "v".to_string())).collect();
    let tags: Vec<(&str, &str)> = tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let cases: Vec<ErrorCase<'_>> = vec![
        (subscribe(&missing, "sqs", "not-an-arn"), (404, "NotFound", "Topic does not exist")),
        (subscribe(&missing, "https", "ftp://x"), (404, "NotFound", "Topic does not exist")),
        (
            subscribe(&arn, "sqs", &queue_arn("q")).attributes(&[("FilterPolicy", r#"{"store": [1000000001]}"#)]),
            (
                400,
                "InvalidParameter",
                "Invalid parameter: Attributes Reason: FilterPolicy: Value must be between -1.0E9 and 1.0E9, inclusive",
            ),
        ),
        (
            publish(&arn, "m").message_attributes(&[("attr.1^x", "String", "v")]),
            (
                400,
                "ParameterValueInvalid",
                "Invalid non-alphanumeric character '#x5E' was found in the message attribute name. Can only include alphanumeric characters, hyphens, underscores, or dots.",
            ),
        ),
        (
            publish(&arn, "m").message_attributes(&[("attr..1", "String", "v")]),
            (400, "ParameterValueInvalid", "Message attribute name can not have successive '.' character."),
        ),
        (
            Call::new("TagResource", &[("ResourceArn", &arn)]).tags(&tags),
            (400, "TagLimitExceeded", "Could not complete request: tag quota of per resource exceeded"),
        ),
        (
            create_topic("many-tags").tags(&tags),
            (400, "TagLimitExceeded", "Could not complete request: tag quota of per resource exceeded"),
        ),
    ];
    check_errors(&sqs, cases).await;
    Call::new("TagResource", &[("ResourceArn", &arn)]).tags(&tags[..50]).ok(&sqs).await;

    // A String.Array that holds one JSON value is filtered on that value; names of any script
    // arrive as sent.
    sqs.create("arrays", json!({})).await;
    subscribe(&arn, "sqs", &queue_arn("arrays"))
        .attributes(&[("RawMessageDelivery", "true"), ("FilterPolicy", r#"{"price": [100]}"#)])
        .ok(&sqs)
        .await;
    publish(&arn, "match")
        .message_attributes(&[("price", "String.Array", "100"), ("attr.1øßä", "String", "v")])
        .ok(&sqs)
        .await;
    publish(&arn, "other").message_attributes(&[("price", "String.Array", "200")]).ok(&sqs).await;
    let got = receive(&sqs, "arrays").await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["Body"], "match");
    assert_eq!(got[0]["MessageAttributes"]["attr.1øßä"]["StringValue"], "v");
    assert_eq!(got[0]["MessageAttributes"]["price"]["DataType"], "String.Array");

    // Delivery policies as SNS shows them (recorded from AWS).
    let set = r#"{"http": {"defaultRequestPolicy": {"headerContentType": "application/json"}}}"#;
    set_attribute("SetTopicAttributes", &arn, "DeliveryPolicy", set).ok(&sqs).await;
    let attrs = ok(&sqs, "GetTopicAttributes", &[("TopicArn", &arn)]).await;
    assert_eq!(
        attribute(&attrs, "DeliveryPolicy").as_deref(),
        Some(
            r#"{"http":{"disableSubscriptionOverrides":false,"defaultRequestPolicy":{"headerContentType":"application/json"}}}"#
        )
    );
    set_attribute("SetTopicAttributes", &arn, "DeliveryPolicy", "").ok(&sqs).await;
    let attrs = ok(&sqs, "GetTopicAttributes", &[("TopicArn", &arn)]).await;
    assert_eq!(attribute(&attrs, "DeliveryPolicy"), None);
    let sub = subscribe(&arn, "http", "http://127.0.0.1:9/hook")
        .params(&[("ReturnSubscriptionArn", "true")])
        .attributes(&[("DeliveryPolicy", r#"{"requestPolicy": {"headerContentType": "text/csv"}}"#)])
        .ok(&sqs)
        .await
        .text_at("SubscriptionArn");
    let attrs = ok(&sqs, "GetSubscriptionAttributes", &[("SubscriptionArn", &sub)]).await;
    assert_eq!(
        attribute(&attrs, "DeliveryPolicy").as_deref(),
        Some(
            r#"{"healthyRetryPolicy":null,"sicklyRetryPolicy":null,"throttlePolicy":null,"requestPolicy":{"headerContentType":"text/csv"},"guaranteed":false}"#
        )
    );
    let effective: Value = serde_json::from_str(&attribute(&attrs, "EffectiveDeliveryPolicy").unwrap()).unwrap();
    assert_eq!(effective["healthyRetryPolicy"]["numRetries"], 3);
    assert_eq!(effective["requestPolicy"]["headerContentType"], "text/csv");
}

/// The native trace of `correlation_id`: each entry's `(kind, target, depth)`.
async fn traced(sqs: &Sqs, correlation_id: &str) -> Vec<(String, String, u64)> {
    let request = axum::http::Request::get(format!("/v1/trace/{correlation_id}")).body(axum::body::Body::empty());
    let reply = sqs.send(request.unwrap()).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let trace = reply.json();
    let entries = trace["entries"].as_array().unwrap().iter();
    entries
        .map(|e| {
            (e["kind"].as_str().unwrap().into(), e["target"].as_str().unwrap().into(), e["depth"].as_u64().unwrap())
        })
        .collect()
}

#[tokio::test]
async fn sqs_sends_and_sns_publishes_with_a_correlation_attribute_are_traced_with_their_copies() {
    let sqs = Sqs::start();
    let arn = create_topic("orders").ok(&sqs).await.text_at("TopicArn");
    for q in ["work", "copies"] {
        sqs.create(q, json!({})).await;
    }
    subscribe(&arn, "sqs", &queue_arn("copies")).ok(&sqs).await;
    let correlated = json!({ "sluice.correlation_id": { "DataType": "String", "StringValue": "flow-1" } });
    let sent = sqs
        .ok("SendMessage", json!({ "QueueUrl": url("work"), "MessageBody": "one", "MessageAttributes": correlated }))
        .await;
    let batch = json!({ "QueueUrl": url("work"), "Entries": [
        { "Id": "a", "MessageBody": "two", "MessageAttributes": correlated },
        { "Id": "b", "MessageBody": "not traced" },
    ]});
    assert_eq!(sqs.ok("SendMessageBatch", batch).await["Successful"].as_array().unwrap().len(), 2);
    let first = sent["MessageId"].as_str().unwrap();
    let published = publish(&arn, "placed")
        .message_attributes(&[("sluice.correlation_id", "String", "flow-1"), ("sluice.causation_id", "String", first)])
        .ok(&sqs)
        .await;
    publish(&arn, "not traced").ok(&sqs).await;

    let mut entries = traced(&sqs, "flow-1").await;
    // The first send is the root, the publish its effect and the copy the publish's; the batch's
    // correlated send is a root of its own.
    let copy = entries.iter().position(|e| e.0 == "message" && e.1 == "queue:copies").expect("the copy is traced");
    assert_eq!(entries.remove(copy), ("message".into(), "queue:copies".into(), 2));
    entries.sort();
    assert_eq!(
        entries,
        vec![
            ("message".into(), "queue:work".into(), 0),
            ("message".into(), "queue:work".into(), 0),
            ("publish".into(), "topic:orders".into(), 1),
        ]
    );
    // The copy carries the publish as its cause for a native consumer.
    let request = axum::http::Request::post("/v1/queues/copies/receive")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(json!({ "max": 10 }).to_string()))
        .unwrap();
    let got = sqs.send(request).await.json();
    let copy = got["messages"].as_array().unwrap().iter().find(|m| m["correlation_id"] == "flow-1").cloned();
    assert_eq!(copy.expect("a correlated copy")["causation_id"], published.text_at("MessageId").as_str());
}

#[tokio::test]
async fn a_topics_rate_limit_throttles_sns_publishes() {
    let sqs = Sqs::start();
    let limit = r#"{"per_second": 1, "burst": 1}"#;
    let arn = create_topic("limited").attributes(&[("RateLimit", limit)]).ok(&sqs).await.text_at("TopicArn");
    let attributes = ok(&sqs, "GetTopicAttributes", &[("TopicArn", &arn)]).await;
    assert_eq!(attribute(&attributes, "RateLimit").as_deref(), Some(r#"{"per_second":1,"burst":1}"#));
    publish(&arn, "first").ok(&sqs).await;
    let (status, code, message) = publish(&arn, "second").err(&sqs).await;
    assert_eq!((status, code.as_str()), (429, "Throttled"), "{message}");
    let bad =
        set_attribute("SetTopicAttributes", &arn, "RateLimit", r#"{"per_second": 0, "burst": 1}"#).err(&sqs).await;
    assert_eq!((bad.0, bad.1.as_str()), (400, "InvalidParameter"), "{}", bad.2);
}
