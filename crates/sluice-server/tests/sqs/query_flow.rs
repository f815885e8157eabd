//! The core flow in the Query protocol, read back with a real XML parser: create, send (a
//! body with a carriage return, which must survive XML), receive with attributes, delete,
//! batch, list, delete the queue.

use axum::http::StatusCode;

use crate::support::{ACCOUNT, Node, Sqs, url};

async fn ok(sqs: &Sqs, path: &str, params: &[(&str, &str)]) -> Node {
    let reply = sqs.query(path, params).await;
    assert_eq!(reply.status, StatusCode::OK, "{params:?}: {}", reply.body);
    assert_eq!(reply.header("content-type"), Some("text/xml"));
    let root = reply.xml();
    let action = params.iter().find(|(k, _)| *k == "Action").map(|(_, v)| *v).unwrap();
    assert_eq!(root.name, format!("{action}Response"));
    assert_eq!(root.text_at("ResponseMetadata/RequestId"), reply.header("x-amzn-requestid").unwrap());
    root
}

#[tokio::test]
async fn core_flow_in_xml() {
    let sqs = Sqs::start();
    let created = ok(
        &sqs,
        "/",
        &[
            ("Action", "CreateQueue"),
            ("Version", "2012-11-05"),
            ("QueueName", "xml-flow"),
            ("Attribute.1.Name", "VisibilityTimeout"),
            ("Attribute.1.Value", "45"),
            ("Tag.1.Key", "team"),
            ("Tag.1.Value", "core"),
        ],
    )
    .await;
    let q = created.text_at("CreateQueueResult/QueueUrl");
    assert_eq!(q, url("xml-flow"));

    let body = "line one\r\nline two & <three>";
    let sent = ok(
        &sqs,
        "/",
        &[
            ("Action", "SendMessage"),
            ("QueueUrl", &q),
            ("MessageBody", body),
            ("MessageAttribute.1.Name", "Foo"),
            ("MessageAttribute.1.Value.DataType", "String"),
            ("MessageAttribute.1.Value.StringValue", "Bar"),
        ],
    )
    .await;
    let result = sent.child("SendMessageResult");
    assert_eq!(result.text_at("MD5OfMessageBody"), md5_hex(body));
    assert_eq!(result.text_at("MD5OfMessageAttributes"), "ae7155c6026991b6d54b11589678bf9c");
    let message_id = result.text_at("MessageId");

    // Received on the queue's own path, no QueueUrl parameter.
    let path = format!("/{ACCOUNT}/xml-flow");
    let received = ok(
        &sqs,
        &path,
        &[
            ("Action", "ReceiveMessage"),
            ("AttributeName.1", "All"),
            ("MessageAttributeName.1", "All"),
            ("MaxNumberOfMessages", "1"),
        ],
    )
    .await;
    let messages = received.child("ReceiveMessageResult").all("Message");
    assert_eq!(messages.len(), 1);
    let m = messages[0];
    assert_eq!(m.text_at("MessageId"), message_id);
    assert_eq!(m.text_at("Body"), body, "the carriage return survives the XML parser");
    assert_eq!(m.text_at("MD5OfBody"), md5_hex(body));
    assert_eq!(m.text_at("MD5OfMessageAttributes"), "ae7155c6026991b6d54b11589678bf9c");
    let attributes = m.pairs("Attribute", "Name", "Value");
    let names: Vec<&str> = attributes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["ApproximateFirstReceiveTimestamp", "ApproximateReceiveCount", "SenderId", "SentTimestamp"]);
    let attribute = m.child("MessageAttribute");
    assert_eq!(attribute.text_at("Name"), "Foo");
    assert_eq!(attribute.text_at("Value/DataType"), "String");
    assert_eq!(attribute.text_at("Value/StringValue"), "Bar");
    let handle = m.text_at("ReceiptHandle");

    ok(&sqs, "/", &[("Action", "DeleteMessage"), ("QueueUrl", &q), ("ReceiptHandle", &handle)]).await;
    let empty = ok(&sqs, &path, &[("Action", "ReceiveMessage")]).await;
    assert!(empty.child("ReceiveMessageResult").children.is_empty());

    let batch = ok(
        &sqs,
        &path,
        &[
            ("Action", "SendMessageBatch"),
            ("SendMessageBatchRequestEntry.1.Id", "a"),
            ("SendMessageBatchRequestEntry.1.MessageBody", "first"),
            ("SendMessageBatchRequestEntry.2.Id", "b"),
            ("SendMessageBatchRequestEntry.2.MessageBody", ""),
        ],
    )
    .await;
    let result = batch.child("SendMessageBatchResult");
    let ok_entries = result.all("SendMessageBatchResultEntry");
    assert_eq!(ok_entries.len(), 1);
    assert_eq!(ok_entries[0].text_at("Id"), "a");
    let failed = result.all("BatchResultErrorEntry");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].text_at("Id"), "b");
    assert_eq!(failed[0].text_at("Code"), "MissingParameter");
    assert_eq!(failed[0].text_at("SenderFault"), "true");

    let attrs = ok(&sqs, &path, &[("Action", "GetQueueAttributes"), ("AttributeName.1", "All")]).await;
    let pairs = attrs.child("GetQueueAttributesResult").pairs("Attribute", "Name", "Value");
    assert!(pairs.contains(&("VisibilityTimeout".to_string(), "45".to_string())), "{pairs:?}");
    assert!(pairs.contains(&("ApproximateNumberOfMessages".to_string(), "1".to_string())), "{pairs:?}");

    let tags = ok(&sqs, &path, &[("Action", "ListQueueTags")]).await;
    assert_eq!(
        tags.child("ListQueueTagsResult").pairs("Tag", "Key", "Value"),
        [("team".to_string(), "core".to_string())]
    );

    let listed = ok(&sqs, "/", &[("Action", "ListQueues"), ("QueueNamePrefix", "xml")]).await;
    let urls: Vec<String> = listed.child("ListQueuesResult").all("QueueUrl").iter().map(|n| n.text.clone()).collect();
    assert_eq!(urls, [url("xml-flow")]);

    let deleted = ok(&sqs, "/", &[("Action", "DeleteQueue"), ("QueueUrl", &q)]).await;
    assert!(!deleted.has("DeleteQueueResult"), "no result element for an action without output");
    let gone = sqs.query("/", &[("Action", "GetQueueUrl"), ("QueueName", "xml-flow")]).await;
    assert_eq!(gone.xml().text_at("Error/Code"), "AWS.SimpleQueueService.NonExistentQueue");
}

/// Lowercase hex MD5, computed here independently of the server.
fn md5_hex(text: &str) -> String {
    assert_eq!(hex(b"a\r\nb"), "65d5f03c46e62e3f2babbe712d2ce464", "the helper itself");
    hex(text.as_bytes())
}

fn hex(bytes: &[u8]) -> String {
    use md5::{Digest, Md5};
    Md5::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// One form parameter: name and value.
type Param<'a> = (&'a str, &'a str);

/// boto3 sends an empty list as the list's own name with no value (`TagKeys=`): it reads as
/// the empty list, and the answer is the one the JSON protocol gets for `[]`.
#[tokio::test]
async fn empty_lists_answer_as_in_json() {
    let sqs = Sqs::start();
    let q = sqs.create("xml-empty", serde_json::json!({})).await;
    let cases: [(&[Param], &str, &str); 3] = [
        (
            &[("Action", "UntagQueue"), ("TagKeys", "")],
            "MissingParameter",
            "The request must contain the parameter TagKeys.",
        ),
        (&[("Action", "TagQueue")], "MissingParameter", "The request must contain the parameter Tags."),
        (
            &[("Action", "AddPermission"), ("Label", "l"), ("AWSAccountIds", ""), ("ActionName.1", "SendMessage")],
            "InvalidParameterValue",
            "Value [] for parameter PrincipalId is invalid. Reason: Unable to verify.",
        ),
    ];
    for (params, code, message) in cases {
        let params: Vec<(&str, &str)> = params.iter().copied().chain([("QueueUrl", q.as_str())]).collect();
        let reply = sqs.query("/", &params).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{params:?}");
        let root = reply.xml();
        let error = root.child("Error");
        assert_eq!((error.text_at("Code").as_str(), error.text_at("Message").as_str()), (code, message), "{params:?}");
    }
}
