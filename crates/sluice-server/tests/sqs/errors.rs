//! Error shapes: JSON `__type` plus the `x-amzn-query-error` header that SDKs map typed errors
//! from, XML `<ErrorResponse>`, and AWS's codes, statuses and messages for each rule.

use axum::http::StatusCode;
use serde_json::json;

use crate::support::{Sqs, url};

#[tokio::test]
async fn queue_does_not_exist_in_json() {
    let sqs = Sqs::start();
    let reply = sqs.json("GetQueueUrl", json!({"QueueName": "missing"})).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.header("x-amzn-query-error"), Some("AWS.SimpleQueueService.NonExistentQueue;Sender"));
    assert_eq!(
        reply.json(),
        json!({"__type": "com.amazonaws.sqs#QueueDoesNotExist", "message": "The specified queue does not exist."})
    );
}

#[tokio::test]
async fn queue_does_not_exist_in_xml() {
    let sqs = Sqs::start();
    let reply = sqs.query("/000000000000/missing", &[("Action", "SendMessage"), ("MessageBody", "x")]).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(
        reply.body.contains("<ErrorResponse xmlns=\"http://queue.amazonaws.com/doc/2012-11-05/\">"),
        "{}",
        reply.body
    );
    let root = reply.xml();
    assert_eq!(root.name, "ErrorResponse");
    let error = root.child("Error");
    assert_eq!(error.text_at("Type"), "Sender");
    assert_eq!(error.text_at("Code"), "AWS.SimpleQueueService.NonExistentQueue");
    assert_eq!(error.text_at("Message"), "The specified queue does not exist for this wsdl version.");
    assert!(error.has("Detail"));
    assert_eq!(root.text_at("RequestId"), reply.header("x-amzn-requestid").unwrap());
}

/// One row per rule: the request, then AWS's status, shape, query code and message.
#[tokio::test]
async fn aws_codes_statuses_and_messages() {
    let sqs = Sqs::start();
    let q = sqs.create("errors", json!({"DelaySeconds": "1"})).await;
    let entries = |n: usize| -> Vec<serde_json::Value> {
        (0..n).map(|i| json!({"Id": format!("e{i}"), "MessageBody": "x"})).collect()
    };
    let table: Vec<(&str, serde_json::Value, u16, &str, &str, String)> = vec![
        ("CreateQueue", json!({"QueueName": "errors", "Attributes": {"DelaySeconds": "2"}}), 400, "QueueNameExists", "QueueAlreadyExists",
            "A queue already exists with the same name and a different value for attribute DelaySeconds".into()),
        ("CreateQueue", json!({"QueueName": "q", "Attributes": {"FifoQueue": "false"}}), 400, "InvalidAttributeName", "InvalidAttributeName",
            "Unknown Attribute FifoQueue.".into()),
        ("CreateQueue", json!({"QueueName": "q", "Attributes": {"DeduplicationScope": "queue"}}), 400, "InvalidAttributeName", "InvalidAttributeName",
            "You can specify the DeduplicationScope only when FifoQueue is set to true.".into()),
        ("CreateQueue", json!({"QueueName": "bad name"}), 400, "InvalidParameterValueException", "InvalidParameterValue",
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length".into()),
        ("CreateQueue", json!({"Attributes": {}}), 400, "MissingRequiredParameterException", "MissingParameter",
            "The request must contain the parameter QueueName.".into()),
        ("SendMessage", json!({"QueueUrl": q, "MessageBody": ""}), 400, "MissingRequiredParameterException", "MissingParameter",
            "The request must contain the parameter MessageBody.".into()),
        ("SendMessage", json!({"QueueUrl": q, "MessageBody": "a\u{1}"}), 400, "InvalidMessageContents", "InvalidMessageContents",
            "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF".into()),
        ("SendMessage", json!({"QueueUrl": q, "MessageBody": "x", "MessageAttributes": {"ErrorDetails": {"DataType": "String", "StringValue": ""}}}),
            400, "InvalidParameterValueException", "InvalidParameterValue",
            "Message (user) attribute 'ErrorDetails' must contain a non-empty value of type 'String'.".into()),
        ("SendMessage", json!({"QueueUrl": q, "MessageBody": "x", "MessageDeduplicationId": "d"}), 400, "InvalidParameterValueException", "InvalidParameterValue",
            "Value d for parameter MessageDeduplicationId is invalid. Reason: The request include parameter that is not valid for this queue type.".into()),
        ("SendMessage", json!({"QueueUrl": q, "MessageBody": "x".repeat(1_048_577)}), 400, "InvalidParameterValueException", "InvalidParameterValue",
            "One or more parameters are invalid. Reason: Message must be shorter than 1048576 bytes.".into()),
        ("ReceiveMessage", json!({"QueueUrl": q, "MaxNumberOfMessages": 11}), 400, "InvalidParameterValueException", "InvalidParameterValue",
            "Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.".into()),
        ("ReceiveMessage", json!({"QueueUrl": q, "WaitTimeSeconds": 21}), 400, "InvalidParameterValueException", "InvalidParameterValue",
            "Value 21 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.".into()),
        ("ReceiveMessage", json!({"QueueUrl": q, "WaitTimeSeconds": -1}), 400, "InvalidParameterValueException", "InvalidParameterValue",
            "Value -1 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.".into()),
        ("DeleteMessage", json!({"QueueUrl": q, "ReceiptHandle": "garbage"}), 400, "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid",
            "The input receipt handle \"garbage\" is not a valid receipt handle.".into()),
        ("SendMessageBatch", json!({"QueueUrl": q, "Entries": entries(20)}), 400, "TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
            "Maximum number of entries per request are 10. You have sent 20.".into()),
        ("SendMessageBatch", json!({"QueueUrl": q, "Entries": []}), 400, "EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest",
            "There should be at least one SendMessageBatchRequestEntry in the request.".into()),
        ("DeleteMessageBatch", json!({"QueueUrl": q, "Entries": [{"Id": "invalid:id", "ReceiptHandle": "r"}]}), 400, "InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId",
            "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.".into()),
        ("SendMessageBatch", json!({"QueueUrl": q, "Entries": [{"Id": "a", "MessageBody": "x"}, {"Id": "a", "MessageBody": "y"}]}), 400, "BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
            "Id a repeated.".into()),
        ("SendMessageBatch", json!({"QueueUrl": q, "Entries": [{"Id": "a", "MessageBody": "x".repeat(524_288)}, {"Id": "b", "MessageBody": "x".repeat(524_289)}]}),
            400, "BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong",
            "Batch requests cannot be longer than 1048576 bytes. You have sent 1048577 bytes.".into()),
        ("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["Nope"]}), 400, "InvalidAttributeName", "InvalidAttributeName",
            "Unknown Attribute Nope.".into()),
        ("SetQueueAttributes", json!({"QueueUrl": q, "Attributes": {"VisibilityTimeout": "43201"}}), 400, "InvalidAttributeValue", "InvalidAttributeValue",
            "Invalid value for the parameter VisibilityTimeout.".into()),
        ("SetQueueAttributes", json!({"QueueUrl": q, "Attributes": {"FifoQueue": "true"}}), 400, "InvalidAttributeName", "InvalidAttributeName",
            "Unknown Attribute FifoQueue.".into()),
        ("SetQueueAttributes", json!({"QueueUrl": q, "Attributes": {"RedrivePolicy": json!({"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:nope", "maxReceiveCount": 2}).to_string()}}),
            400, "InvalidParameterValueException", "InvalidParameterValue",
            format!("Value {} for parameter RedrivePolicy is invalid. Reason: Dead letter target does not exist.", json!({"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:nope", "maxReceiveCount": 2})) ),
        ("ListMessageMoveTasks", json!({"SourceArn": "arn:aws:sqs:us-east-1:000000000000:nope"}), 404, "ResourceNotFoundException", "ResourceNotFoundException",
            "The resource that you specified for the SourceArn parameter doesn't exist.".into()),
        ("AddPermission", json!({"QueueUrl": q, "Label": "l", "AWSAccountIds": ["111122223333"], "Actions": vec!["SendMessage"; 8]}),
            403, "OverLimit", "OverLimit", "8 Actions were found, maximum allowed is 7.".into()),
        ("AddPermission", json!({"QueueUrl": q, "Label": "l", "AWSAccountIds": [], "Actions": ["SendMessage"]}),
            400, "InvalidParameterValueException", "InvalidParameterValue",
            "Value [] for parameter PrincipalId is invalid. Reason: Unable to verify.".into()),
        ("AddPermission", json!({"QueueUrl": q, "Label": "l", "AWSAccountIds": ["111122223333"], "Actions": ["RemovePermission"]}),
            400, "InvalidParameterValueException", "InvalidParameterValue",
            "Value SQS:RemovePermission for parameter ActionName is invalid. Reason: Only the queue owner is allowed to invoke this action.".into()),
        ("TagQueue", json!({"QueueUrl": q, "Tags": {}}), 400, "MissingRequiredParameterException", "MissingParameter",
            "The request must contain the parameter Tags.".into()),
        ("UntagQueue", json!({"QueueUrl": q, "TagKeys": []}), 400, "MissingRequiredParameterException", "MissingParameter",
            "The request must contain the parameter TagKeys.".into()),
        // A missing queue is reported before a bad parameter, as AWS does.
        ("ReceiveMessage", json!({"QueueUrl": url("missing"), "MaxNumberOfMessages": 11}), 400, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue",
            "The specified queue does not exist.".into()),
    ];
    for (action, input, status, shape, code, message) in table {
        let got = sqs.err(action, input).await;
        assert_eq!(got, (status, shape.to_string(), code.to_string(), message), "{action}");
    }
}

#[tokio::test]
async fn purge_once_a_minute_and_no_reuse_of_a_deleted_name() {
    let sqs = Sqs::start();
    let q = sqs.create("purged", json!({})).await;
    sqs.ok("PurgeQueue", json!({"QueueUrl": q})).await;
    let got = sqs.err("PurgeQueue", json!({"QueueUrl": q})).await;
    assert_eq!(
        got,
        (
            403,
            "PurgeQueueInProgress".to_string(),
            "AWS.SimpleQueueService.PurgeQueueInProgress".to_string(),
            "Only one PurgeQueue operation on purged is allowed every 60 seconds.".to_string()
        )
    );
    sqs.ok("DeleteQueue", json!({"QueueUrl": q})).await;
    let got = sqs.err("CreateQueue", json!({"QueueName": "purged"})).await;
    assert_eq!((got.0, got.2.as_str()), (400, "AWS.SimpleQueueService.QueueDeletedRecently"));
    assert_eq!(
        got.3,
        "You must wait 60 seconds after deleting a queue before you can create another with the same name."
    );
}
