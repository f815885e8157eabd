//! MD5 digests on the wire, against real-AWS values (reference §3.1): sends return them,
//! receives recompute them over exactly the attributes returned, and nothing is digested when
//! there is nothing to digest.

use serde_json::json;

use crate::support::Sqs;

#[tokio::test]
async fn digests_match_aws_on_send_and_receive() {
    let sqs = Sqs::start();
    let q = sqs.create("md5", json!({})).await;
    let trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
    let sent = sqs
        .ok(
            "SendMessage",
            json!({
                "QueueUrl": q, "MessageBody": "msg",
                "MessageAttributes": {"Foo": {"DataType": "String", "StringValue": "Bar"}},
                "MessageSystemAttributes": {"AWSTraceHeader": {"DataType": "String", "StringValue": trace}},
            }),
        )
        .await;
    assert_eq!(sent["MD5OfMessageBody"], "6e2baaf3b97dbeef01c0043275f9a0e7");
    assert_eq!(sent["MD5OfMessageAttributes"], "ae7155c6026991b6d54b11589678bf9c");
    assert_eq!(sent["MD5OfMessageSystemAttributes"], "5ae4d5d7636402d80f4eb6d213245a88");
    let got = sqs
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": q, "MessageAttributeNames": ["All"], "AttributeNames": ["AWSTraceHeader"]}),
        )
        .await;
    let m = &got["Messages"][0];
    assert_eq!(m["MD5OfBody"], "6e2baaf3b97dbeef01c0043275f9a0e7");
    assert_eq!(m["MD5OfMessageAttributes"], "ae7155c6026991b6d54b11589678bf9c");
    assert_eq!(m["MessageAttributes"], json!({"Foo": {"DataType": "String", "StringValue": "Bar"}}));
    assert_eq!(m["Attributes"], json!({"AWSTraceHeader": trace}));
}

#[tokio::test]
async fn number_and_binary_vectors() {
    let sqs = Sqs::start();
    let q = sqs.create("md5-types", json!({"VisibilityTimeout": "0"})).await;
    let number = json!({"attr1": {"DataType": "Number", "StringValue": "99.12"}});
    let sent = sqs.ok("SendMessage", json!({"QueueUrl": q, "MessageBody": "n", "MessageAttributes": number})).await;
    assert_eq!(sent["MD5OfMessageAttributes"], "d302007e9aa062660afc85fd0a482472");
    // base64 of b"traceparent\x1e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01"
    let binary = "dHJhY2VwYXJlbnQeMDAtNzc0MDYyZDZjMzcwODFhNWEwYjliNWI4OGUzMDYyN2MtMmQyNDgyMjExZjY0ODlkYS0wMQ==";
    let attrs = json!({"attr1": {"DataType": "Binary", "BinaryValue": binary}});
    let sent = sqs.ok("SendMessage", json!({"QueueUrl": q, "MessageBody": "b", "MessageAttributes": attrs})).await;
    assert_eq!(sent["MD5OfMessageAttributes"], "8cbe4db156db8a94db8b801b7addb984");
    let got = sqs
        .ok("ReceiveMessage", json!({"QueueUrl": q, "MaxNumberOfMessages": 10, "MessageAttributeNames": ["All"]}))
        .await;
    let bodies: Vec<(&str, &str)> = got["Messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["Body"].as_str().unwrap(), m["MD5OfMessageAttributes"].as_str().unwrap()))
        .collect();
    assert!(bodies.contains(&("n", "d302007e9aa062660afc85fd0a482472")), "{bodies:?}");
    assert!(bodies.contains(&("b", "8cbe4db156db8a94db8b801b7addb984")), "{bodies:?}");
    let binary_back = got["Messages"].as_array().unwrap().iter().find(|m| m["Body"] == "b").unwrap();
    assert_eq!(binary_back["MessageAttributes"]["attr1"]["BinaryValue"], binary);
}

#[tokio::test]
async fn subsets_are_digested_and_nothing_is_never_digested() {
    let sqs = Sqs::start();
    let q = sqs.create("md5-subsets", json!({"VisibilityTimeout": "0"})).await;
    let plain = sqs.ok("SendMessage", json!({"QueueUrl": q, "MessageBody": "msg"})).await;
    assert!(plain.get("MD5OfMessageAttributes").is_none(), "{plain}");
    assert!(plain.get("MD5OfMessageSystemAttributes").is_none(), "{plain}");
    let got = sqs.ok("ReceiveMessage", json!({"QueueUrl": q, "MessageAttributeNames": ["All"]})).await;
    let m = &got["Messages"][0];
    assert!(m.get("MessageAttributes").is_none() && m.get("MD5OfMessageAttributes").is_none(), "{m}");
    sqs.ok("DeleteMessage", json!({"QueueUrl": q, "ReceiptHandle": m["ReceiptHandle"]})).await;

    let attrs = json!({
        "Help.Me": {"DataType": "String", "StringValue": "Me"},
        "Hello": {"DataType": "String", "StringValue": "There"},
        "General": {"DataType": "String", "StringValue": "Kenobi"},
    });
    let sent = sqs.ok("SendMessage", json!({"QueueUrl": q, "MessageBody": "msg", "MessageAttributes": attrs})).await;
    assert_eq!(sent["MD5OfMessageAttributes"], "4c360f3fdafd970e05fae2f149d997f5");
    // The recorded AWS answers of `test_receive_message_message_attribute_names_filters`.
    let table: &[(&[&str], Option<&str>)] = &[
        (&[], None),
        (&["All"], Some("4c360f3fdafd970e05fae2f149d997f5")),
        (&["*"], Some("4c360f3fdafd970e05fae2f149d997f5")),
        (&[".*"], Some("4c360f3fdafd970e05fae2f149d997f5")),
        (&["Foo", "Help"], None),
        (&["Hello", "General"], Some("fca026605781cb4126a1e9044df24232")),
        (&["Foo", "Hello"], Some("a311262e065454b75da111d535b8dacd")),
        (&["Hel.*"], Some("83fee93c1bcd8b9a5a923ffacdc636c7")),
        (&["AWS."], None),
        (&["..foo"], None),
    ];
    for (names, want) in table {
        let got = sqs.ok("ReceiveMessage", json!({"QueueUrl": q, "MessageAttributeNames": names})).await;
        let m = &got["Messages"][0];
        assert_eq!(m["MD5OfMessageAttributes"].as_str(), *want, "{names:?}: {m}");
        assert_eq!(m.get("MessageAttributes").is_some(), want.is_some(), "{names:?}: {m}");
    }
}
