//! Tags and permissions over the JSON protocol.

use serde_json::{Value, json};

use crate::support::{ACCOUNT, Sqs};

#[tokio::test]
async fn tag_untag_list() {
    let sqs = Sqs::start();
    let q = sqs.create("tagged", json!({})).await;
    assert_eq!(sqs.ok("ListQueueTags", json!({"QueueUrl": q})).await, json!({}));
    sqs.ok("TagQueue", json!({"QueueUrl": q, "Tags": {"tag1": "value1", "tag2": "value2", "tag3": ""}})).await;
    let out = sqs.ok("ListQueueTags", json!({"QueueUrl": q})).await;
    assert_eq!(out, json!({"Tags": {"tag1": "value1", "tag2": "value2", "tag3": ""}}));
    // Same key again overwrites; removing a missing key is not an error.
    sqs.ok("TagQueue", json!({"QueueUrl": q, "Tags": {"tag2": "new"}})).await;
    sqs.ok("UntagQueue", json!({"QueueUrl": q, "TagKeys": ["tag1", "tag3", "never"]})).await;
    assert_eq!(sqs.ok("ListQueueTags", json!({"QueueUrl": q})).await, json!({"Tags": {"tag2": "new"}}));
    sqs.ok("UntagQueue", json!({"QueueUrl": q, "TagKeys": ["tag2"]})).await;
    assert_eq!(sqs.ok("ListQueueTags", json!({"QueueUrl": q})).await, json!({}));
    let (_, _, code, _) = sqs.err("TagQueue", json!({"QueueUrl": q})).await;
    assert_eq!(code, "MissingParameter");
}

async fn policy(sqs: &Sqs, q: &str) -> Option<Value> {
    let out = sqs.ok("GetQueueAttributes", json!({"QueueUrl": q, "AttributeNames": ["Policy"]})).await;
    out["Attributes"]["Policy"].as_str().map(|p| serde_json::from_str(p).unwrap())
}

#[tokio::test]
async fn permissions_edit_the_policy() {
    let sqs = Sqs::start();
    let q = sqs.create("shared", json!({})).await;
    let arn = format!("arn:aws:sqs:us-east-1:{ACCOUNT}:shared");
    sqs.ok(
        "AddPermission",
        json!({"QueueUrl": q, "Label": "crossaccountpermission", "AWSAccountIds": ["668614515564", ACCOUNT], "Actions": ["ReceiveMessage"]}),
    )
    .await;
    // The document AWS writes (recorded `test_sqs_permission_lifecycle`).
    assert_eq!(
        policy(&sqs, &q).await,
        Some(json!({
            "Version": "2008-10-17",
            "Id": format!("{arn}/SQSDefaultPolicy"),
            "Statement": [{
                "Sid": "crossaccountpermission",
                "Effect": "Allow",
                "Principal": {"AWS": ["arn:aws:iam::668614515564:root", format!("arn:aws:iam::{ACCOUNT}:root")]},
                "Action": "SQS:ReceiveMessage",
                "Resource": arn,
            }],
        }))
    );
    let (_, _, code, message) = sqs
        .err("AddPermission", json!({"QueueUrl": q, "Label": "crossaccountpermission", "AWSAccountIds": [ACCOUNT], "Actions": ["SendMessage"]}))
        .await;
    assert_eq!(code, "InvalidParameterValue");
    assert_eq!(message, "Value crossaccountpermission for parameter Label is invalid. Reason: Already exists.");
    sqs.ok("AddPermission", json!({"QueueUrl": q, "Label": "second", "AWSAccountIds": [ACCOUNT], "Actions": ["SendMessage", "DeleteMessage"]})).await;
    let doc = policy(&sqs, &q).await.unwrap();
    assert_eq!(doc["Statement"][1]["Action"], json!(["SQS:SendMessage", "SQS:DeleteMessage"]));
    assert_eq!(doc["Statement"][1]["Principal"], json!({"AWS": format!("arn:aws:iam::{ACCOUNT}:root")}));
    sqs.ok("RemovePermission", json!({"QueueUrl": q, "Label": "crossaccountpermission"})).await;
    let doc = policy(&sqs, &q).await.unwrap();
    assert_eq!(doc["Statement"].as_array().unwrap().len(), 1);
    sqs.ok("RemovePermission", json!({"QueueUrl": q, "Label": "second"})).await;
    assert_eq!(policy(&sqs, &q).await, None, "no statements left: no policy");
    let (_, _, _, message) = sqs.err("RemovePermission", json!({"QueueUrl": q, "Label": "second"})).await;
    assert_eq!(message, "Value second for parameter Label is invalid. Reason: can't find label.");
}
