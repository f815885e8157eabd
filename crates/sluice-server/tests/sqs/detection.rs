//! How a request is recognised: JSON by `X-Amz-Target` (any header case, content type by
//! prefix), Query by form body or query string, on `/` or a queue-URL path, with `QueueUrl`
//! winning over the path; the service by target, credential scope, then action; and
//! everything else keeps the native API's 404.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::json;
use sluice_server::{AccessKey, ServerConfig};

use crate::support::{ACCOUNT, FORM_TYPE, HOST, JSON_TYPE, Sqs, form, url};

fn scope(service: &str) -> String {
    format!(
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=00"
    )
}

/// Each way a client may send CreateQueue reaches the action and is answered in its protocol.
#[tokio::test]
async fn every_request_form_reaches_sqs() {
    let sqs = Sqs::start();
    let json_body = |name: &str| json!({ "QueueName": name }).to_string();
    let requests = [
        // boto3 / aws-sdk-rust.
        (
            "json",
            Request::post("/")
                .header("Content-Type", JSON_TYPE)
                .header("X-Amz-Target", "AmazonSQS.CreateQueue")
                .body(Body::from(json_body("json"))),
        ),
        // Ruby and JS send the header in lowercase.
        (
            "json-lower",
            Request::post("/")
                .header("content-type", JSON_TYPE)
                .header("x-amz-target", "AmazonSQS.CreateQueue")
                .body(Body::from(json_body("json-lower"))),
        ),
        (
            "json-charset",
            Request::post("/")
                .header("content-type", "application/x-amz-json-1.0; charset=utf-8")
                .header("x-amz-target", "AmazonSQS.CreateQueue")
                .body(Body::from(json_body("json-charset"))),
        ),
        (
            "query-post",
            Request::post("/").header("content-type", FORM_TYPE).body(Body::from(form(&[
                ("Action", "CreateQueue"),
                ("Version", "2012-11-05"),
                ("QueueName", "query-post"),
            ]))),
        ),
        (
            "query-post-charset",
            Request::post("/")
                .header("content-type", "application/x-www-form-urlencoded; charset=utf-8")
                .body(Body::from(form(&[("Action", "CreateQueue"), ("QueueName", "query-post-charset")]))),
        ),
        (
            "query-get",
            Request::get(format!("/?{}", form(&[("Action", "CreateQueue"), ("QueueName", "query-get")])))
                .body(Body::empty()),
        ),
    ];
    for (name, request) in requests {
        let reply = sqs.send(request.unwrap_or_else(|e| panic!("{name}: {e}"))).await;
        assert_eq!(reply.status, StatusCode::OK, "{name}: {}", reply.body);
        let queue_url = if name.starts_with("json") {
            assert_eq!(reply.header("content-type"), Some(JSON_TYPE), "{name}");
            reply.json()["QueueUrl"].as_str().unwrap().to_string()
        } else {
            assert_eq!(reply.header("content-type"), Some("text/xml"), "{name}");
            reply.xml().text_at("CreateQueueResult/QueueUrl")
        };
        assert!(queue_url.ends_with(&format!("/{ACCOUNT}/{name}")), "{name}: {queue_url}");
    }
}

#[tokio::test]
async fn query_get_on_a_queue_url_path() {
    let sqs = Sqs::start();
    sqs.create("orders", json!({})).await;
    let reply = sqs
        .query_get(&format!("/{ACCOUNT}/orders"), &[("Action", "GetQueueAttributes"), ("AttributeName.1", "QueueArn")])
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let result = reply.xml().child("GetQueueAttributesResult").clone();
    assert_eq!(
        result.pairs("Attribute", "Name", "Value"),
        [("QueueArn".to_string(), format!("arn:aws:sqs:us-east-1:{ACCOUNT}:orders"))]
    );
}

/// A `QueueUrl` parameter names the queue even when the request went to another queue's path,
/// whatever its host and port; a bare name works too.
#[tokio::test]
async fn queue_url_parameter_overrides_the_path() {
    let sqs = Sqs::start();
    sqs.create("a", json!({})).await;
    sqs.create("b", json!({})).await;
    let path_a = format!("/{ACCOUNT}/a");
    let via_query = sqs
        .query(
            &path_a,
            &[
                ("Action", "SendMessage"),
                ("QueueUrl", &format!("http://other-host:1234/{ACCOUNT}/b")),
                ("MessageBody", "1"),
            ],
        )
        .await;
    assert_eq!(via_query.status, StatusCode::OK, "{}", via_query.body);
    let via_json = sqs.json_at(&path_a, "SendMessage", json!({"QueueUrl": "b", "MessageBody": "2"})).await;
    assert_eq!(via_json.status, StatusCode::OK, "{}", via_json.body);
    // PHP posts JSON to the queue URL itself, without a QueueUrl member.
    let via_path = sqs.json_at(&path_a, "SendMessage", json!({"MessageBody": "3"})).await;
    assert_eq!(via_path.status, StatusCode::OK, "{}", via_path.body);
    let sqs = &sqs;
    let count = |name: &'static str| async move {
        let out = sqs
            .ok("GetQueueAttributes", json!({"QueueUrl": url(name), "AttributeNames": ["ApproximateNumberOfMessages"]}))
            .await;
        out["Attributes"]["ApproximateNumberOfMessages"].as_str().unwrap().to_string()
    };
    assert_eq!(count("a").await, "1");
    assert_eq!(count("b").await, "2");
    let other_account =
        sqs.err("SendMessage", json!({"QueueUrl": "http://x/111111111111/b", "MessageBody": "x"})).await;
    assert_eq!(other_account.1, "QueueDoesNotExist");
}

#[tokio::test]
async fn non_aws_requests_keep_the_native_404() {
    let sqs = Sqs::start();
    let requests = [
        Request::get("/nope").body(Body::empty()),
        Request::post("/").header("content-type", "application/json").body(Body::from("{}")),
        Request::get("/v1/nope").body(Body::empty()),
        // Even an SQS-looking request is native under /v1.
        Request::post("/v1/nope").header("x-amz-target", "AmazonSQS.ListQueues").body(Body::from("{}")),
        // A form without an Action and without a signature is not AWS.
        Request::post("/somewhere").header("content-type", FORM_TYPE).body(Body::from("a=b")),
    ];
    for request in requests {
        let reply = sqs.send(request.unwrap()).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.body);
        assert_eq!(reply.json()["error"]["code"], "not_found", "{}", reply.body);
    }
    // The native API itself is untouched.
    let reply = sqs.send(Request::get("/healthz").body(Body::empty()).unwrap()).await;
    assert_eq!(reply.status, StatusCode::OK);
}

#[tokio::test]
async fn sts_caller_identity_in_both_protocols() {
    let sqs = Sqs::start_with(ServerConfig { account: "123456789012".into(), ..Default::default() });
    let reply = sqs.query("/", &[("Action", "GetCallerIdentity"), ("Version", "2011-06-15")]).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert!(reply.body.contains("xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\""), "{}", reply.body);
    let result = reply.xml().child("GetCallerIdentityResult").clone();
    assert_eq!(result.text_at("Account"), "123456789012");
    assert_eq!(result.text_at("Arn"), "arn:aws:iam::123456789012:root");
    assert_eq!(result.text_at("UserId"), "123456789012");
    // Signed for STS, without a Version: the scope decides, and the key id is the user.
    let signed = Request::post("/")
        .header("content-type", FORM_TYPE)
        .header("authorization", scope("sts"))
        .body(Body::from("Action=GetCallerIdentity"))
        .unwrap();
    let reply = sqs.send(signed).await;
    assert_eq!(reply.xml().text_at("GetCallerIdentityResult/UserId"), "AKIDEXAMPLE");
    let json = Request::post("/")
        .header("content-type", JSON_TYPE)
        .header("x-amz-target", "AWSSecurityTokenServiceV20110615.GetCallerIdentity")
        .body(Body::from("{}"))
        .unwrap();
    let reply = sqs.send(json).await;
    assert_eq!(reply.json()["Account"], "123456789012", "{}", reply.body);
}

#[tokio::test]
async fn service_comes_from_target_then_scope_then_action() {
    let sqs = Sqs::start();
    // SNS is recognised by an SNS-only action or by the scope, and answered in SNS's namespace.
    for (request, root) in [
        (
            Request::post("/").header("content-type", FORM_TYPE).body(Body::from("Action=CreateTopic&Name=t")),
            "CreateTopicResponse",
        ),
        (
            Request::post("/")
                .header("content-type", FORM_TYPE)
                .header("authorization", scope("sns"))
                .body(Body::from("Action=ListTopics")),
            "ListTopicsResponse",
        ),
    ] {
        let reply = sqs.send(request.unwrap()).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert!(reply.body.contains("xmlns=\"http://sns.amazonaws.com/doc/2010-03-31/\""), "{}", reply.body);
        assert_eq!(reply.xml().name, root);
    }
    // An SNS action SQS shares a name with is SQS's unless the version or scope says SNS.
    let reply = sqs.query("/", &[("Action", "AddPermission"), ("Version", "2010-03-31")]).await;
    assert_eq!(reply.xml().text_at("Error/Message"), "The action AddPermission is not valid for this endpoint.");
    assert!(reply.body.contains("sns.amazonaws.com"), "{}", reply.body);
    // Signed for SQS, an STS action is an unknown SQS action.
    let reply = sqs
        .send(
            Request::post("/")
                .header("content-type", FORM_TYPE)
                .header("authorization", scope("sqs"))
                .body(Body::from("Action=GetCallerIdentity"))
                .unwrap(),
        )
        .await;
    assert_eq!(reply.xml().text_at("Error/Code"), "InvalidAction");
    let reply = sqs.query("/", &[("Action", "FooBar")]).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.xml().text_at("Error/Message"), "The action FooBar is not valid for this endpoint.");
    let (status, _, code, _) = sqs.err("FooBar", json!({})).await;
    assert_eq!((status, code.as_str()), (400, "InvalidAction"));
}

#[tokio::test]
async fn every_answer_carries_a_request_id() {
    let sqs = Sqs::start();
    let ok = sqs.query("/", &[("Action", "ListQueues")]).await;
    let id = ok.header("x-amzn-requestid").expect("header").to_string();
    assert_eq!(ok.xml().text_at("ResponseMetadata/RequestId"), id);
    let err = sqs.query("/", &[("Action", "GetQueueUrl"), ("QueueName", "missing")]).await;
    let id = err.header("x-amzn-requestid").expect("header").to_string();
    assert_eq!(err.xml().text_at("RequestId"), id);
    let json_err = sqs.json("GetQueueUrl", json!({"QueueName": "missing"})).await;
    assert!(json_err.header("x-amzn-requestid").is_some());
    assert_ne!(json_err.header("x-amzn-requestid"), Some(id.as_str()), "ids are unique");
}

#[tokio::test]
async fn configured_keys_are_enforced_with_aws_errors() {
    let key = AccessKey { id: "AKIDEXAMPLE".into(), secret: "secret".into() };
    let sqs = Sqs::start_with(ServerConfig { access_keys: vec![key], ..Default::default() });
    let unsigned = sqs.json("ListQueues", json!({})).await;
    assert_eq!(unsigned.status, StatusCode::FORBIDDEN, "{}", unsigned.body);
    let unknown = Request::post("/")
        .header("host", HOST)
        .header("content-type", JSON_TYPE)
        .header("x-amz-target", "AmazonSQS.ListQueues")
        .header("authorization", scope("sqs").replace("AKIDEXAMPLE", "AKIDOTHER"))
        .body(Body::from("{}"))
        .unwrap();
    let reply = sqs.send(unknown).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(reply.json_error().1, "InvalidClientTokenId");
    let now = time::OffsetDateTime::now_utc();
    let amz_date = now.format(time::macros::format_description!("[year][month][day]T[hour][minute][second]Z")).unwrap();
    let bad_signature = Request::post("/")
        .header("host", HOST)
        .header("content-type", JSON_TYPE)
        .header("x-amz-target", "AmazonSQS.ListQueues")
        .header("x-amz-date", &amz_date)
        .header("authorization", scope("sqs").replace("20240101", &amz_date[..8]))
        .body(Body::from("{}"))
        .unwrap();
    let reply = sqs.send(bad_signature).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
    assert_eq!(reply.json_error().1, "SignatureDoesNotMatch");
}
