//! The official aws-sdk-sqs, unmodified, against the real `sluice` binary: the create, send,
//! receive and delete flow over the SDK's JSON protocol, and the typed errors the SDK only raises
//! when the server sends AWS's `x-amzn-query-error` header. Expected digests are real AWS values.

mod common;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::retry::RetryConfig;
use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata};
use aws_sdk_sqs::types::{
    MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName, SendMessageBatchRequestEntry,
};
use common::Server;

/// MD5 of the body "msg" and of the attribute `Foo: String "Bar"`, as real AWS returned them.
const MSG_BODY_MD5: &str = "6e2baaf3b97dbeef01c0043275f9a0e7";
const FOO_BAR_ATTRIBUTES_MD5: &str = "ae7155c6026991b6d54b11589678bf9c";

/// An SDK client for `server` with dummy keys, over plain HTTP, without retries (so that the
/// first answer is the one checked).
fn sqs(server: &Server) -> Client {
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("AKIDSLUICE", "secret", None, None, "sluice-tests"))
        .endpoint_url(&server.url)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .retry_config(RetryConfig::disabled())
        .build();
    Client::from_conf(config)
}

fn start() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().expect("a temporary data directory");
    let server = Server::start(dir.path());
    (dir, server)
}

#[tokio::test]
async fn create_send_receive_delete() {
    let (_dir, server) = start();
    let sqs = sqs(&server);

    let created = sqs
        .create_queue()
        .queue_name("sdk-flow")
        .attributes(QueueAttributeName::VisibilityTimeout, "40")
        .send()
        .await
        .unwrap_or_else(|e| panic!("create_queue: {}", DisplayErrorContext(e)));
    let url = created.queue_url().expect("a queue URL").to_owned();
    assert_eq!(url, format!("{}/000000000000/sdk-flow", server.url));
    let found = sqs.get_queue_url().queue_name("sdk-flow").send().await.expect("get_queue_url");
    assert_eq!(found.queue_url(), Some(url.as_str()));

    let foo = MessageAttributeValue::builder().data_type("String").string_value("Bar").build().expect("an attribute");
    let sent = sqs
        .send_message()
        .queue_url(&url)
        .message_body("msg")
        .message_attributes("Foo", foo)
        .send()
        .await
        .unwrap_or_else(|e| panic!("send_message: {}", DisplayErrorContext(e)));
    assert_eq!(sent.md5_of_message_body(), Some(MSG_BODY_MD5));
    assert_eq!(sent.md5_of_message_attributes(), Some(FOO_BAR_ATTRIBUTES_MD5));
    let message_id = sent.message_id().expect("a message id").to_owned();

    let received = sqs
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .message_attribute_names("All")
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .unwrap_or_else(|e| panic!("receive_message: {}", DisplayErrorContext(e)));
    let [message] = received.messages() else { panic!("one message expected: {received:?}") };
    assert_eq!(message.message_id(), Some(message_id.as_str()));
    assert_eq!(message.body(), Some("msg"));
    assert_eq!(message.md5_of_body(), Some(MSG_BODY_MD5));
    assert_eq!(message.md5_of_message_attributes(), Some(FOO_BAR_ATTRIBUTES_MD5));
    let attribute = message.message_attributes().and_then(|a| a.get("Foo")).expect("attribute Foo");
    assert_eq!((attribute.data_type(), attribute.string_value()), ("String", Some("Bar")));
    let system = message.attributes().expect("system attributes");
    assert_eq!(system.get(&MessageSystemAttributeName::ApproximateReceiveCount).map(String::as_str), Some("1"));
    assert!(system.contains_key(&MessageSystemAttributeName::SentTimestamp), "{system:?}");

    let in_flight = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .expect("get_queue_attributes");
    let attributes = in_flight.attributes().expect("queue attributes");
    assert_eq!(attributes.get(&QueueAttributeName::VisibilityTimeout).map(String::as_str), Some("40"));
    assert_eq!(
        attributes.get(&QueueAttributeName::ApproximateNumberOfMessagesNotVisible).map(String::as_str),
        Some("1")
    );

    sqs.delete_message()
        .queue_url(&url)
        .receipt_handle(message.receipt_handle().expect("a receipt handle"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("delete_message: {}", DisplayErrorContext(e)));
    let after = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .expect("get_queue_attributes");
    let counts = after.attributes().expect("queue attributes");
    assert_eq!(counts.get(&QueueAttributeName::ApproximateNumberOfMessages).map(String::as_str), Some("0"));
    assert_eq!(counts.get(&QueueAttributeName::ApproximateNumberOfMessagesNotVisible).map(String::as_str), Some("0"));

    // An empty receive is a success with no messages.
    let empty = sqs.receive_message().queue_url(&url).send().await.expect("an empty receive");
    assert!(empty.messages().is_empty(), "{empty:?}");
}

#[tokio::test]
async fn send_message_batch_and_list_queues() {
    let (_dir, server) = start();
    let sqs = sqs(&server);
    let url = sqs.create_queue().queue_name("sdk-batch").send().await.expect("create_queue").queue_url.expect("url");

    let entries = ["one", "two", "three"]
        .iter()
        .map(|body| SendMessageBatchRequestEntry::builder().id(format!("id-{body}")).message_body(*body).build())
        .collect::<Result<Vec<_>, _>>()
        .expect("batch entries");
    let sent = sqs
        .send_message_batch()
        .queue_url(&url)
        .set_entries(Some(entries))
        .send()
        .await
        .unwrap_or_else(|e| panic!("send_message_batch: {}", DisplayErrorContext(e)));
    let mut ids: Vec<&str> = sent.successful().iter().map(|entry| entry.id()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["id-one", "id-three", "id-two"]);
    assert!(sent.failed().is_empty(), "{sent:?}");

    let listed = sqs.list_queues().queue_name_prefix("sdk-").send().await.expect("list_queues");
    assert_eq!(listed.queue_urls(), [url]);
}

#[tokio::test]
async fn a_missing_queue_is_a_typed_queue_does_not_exist() {
    let (_dir, server) = start();
    let sqs = sqs(&server);

    let error = sqs.get_queue_url().queue_name("sdk-missing").send().await.expect_err("the queue does not exist");
    let error = error.into_service_error();
    assert!(error.is_queue_does_not_exist(), "expected QueueDoesNotExist, got {}", DisplayErrorContext(&error));
    assert_eq!(error.code(), Some("AWS.SimpleQueueService.NonExistentQueue"));
    assert_eq!(error.message(), Some("The specified queue does not exist."));

    let missing_url = format!("{}/000000000000/sdk-missing", server.url);
    let error = sqs.receive_message().queue_url(&missing_url).send().await.expect_err("no queue to receive from");
    let error = error.into_service_error();
    assert!(error.is_queue_does_not_exist(), "expected QueueDoesNotExist, got {}", DisplayErrorContext(&error));

    let error = sqs.send_message().queue_url(&missing_url).message_body("x").send().await.expect_err("no queue");
    assert!(error.into_service_error().is_queue_does_not_exist());
}

#[tokio::test]
async fn a_garbage_receipt_handle_is_a_typed_receipt_handle_is_invalid() {
    let (_dir, server) = start();
    let sqs = sqs(&server);
    let url = sqs.create_queue().queue_name("sdk-receipts").send().await.expect("create_queue").queue_url.expect("url");

    let error = sqs
        .delete_message()
        .queue_url(&url)
        .receipt_handle("garbage")
        .send()
        .await
        .expect_err("a garbage receipt handle is refused");
    let error = error.into_service_error();
    assert!(
        error.is_receipt_handle_is_invalid(),
        "expected ReceiptHandleIsInvalid, got {}",
        DisplayErrorContext(&error)
    );
    assert_eq!(error.message(), Some("The input receipt handle \"garbage\" is not a valid receipt handle."));
}

#[tokio::test]
async fn other_modeled_errors_are_typed() {
    let (_dir, server) = start();
    let sqs = sqs(&server);

    sqs.create_queue().queue_name("sdk-errors").attributes(QueueAttributeName::DelaySeconds, "1").send().await.unwrap();
    let error = sqs
        .create_queue()
        .queue_name("sdk-errors")
        .attributes(QueueAttributeName::DelaySeconds, "2")
        .send()
        .await
        .expect_err("different attributes");
    let error = error.into_service_error();
    assert!(error.is_queue_name_exists(), "expected QueueNameExists, got {}", DisplayErrorContext(&error));
    assert_eq!(error.code(), Some("QueueAlreadyExists"));

    let url = format!("{}/000000000000/sdk-errors", server.url);
    sqs.purge_queue().queue_url(&url).send().await.expect("the first purge");
    let error = sqs.purge_queue().queue_url(&url).send().await.expect_err("a purge within 60 s");
    let error = error.into_service_error();
    assert!(error.is_purge_queue_in_progress(), "expected PurgeQueueInProgress, got {}", DisplayErrorContext(&error));

    let entries = (0..11)
        .map(|i| SendMessageBatchRequestEntry::builder().id(format!("e{i}")).message_body("x").build())
        .collect::<Result<Vec<_>, _>>()
        .expect("batch entries");
    let error =
        sqs.send_message_batch().queue_url(&url).set_entries(Some(entries)).send().await.expect_err("11 entries");
    let error = error.into_service_error();
    assert!(
        error.is_too_many_entries_in_batch_request(),
        "expected TooManyEntriesInBatchRequest, got {}",
        DisplayErrorContext(&error)
    );
}
