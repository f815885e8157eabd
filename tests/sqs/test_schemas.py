"""Schema validation seen by unmodified boto3 clients: a queue or topic with schema_validation
refuses a message that breaks the schema its `sluice.type` / `sluice.version` attributes name,
with InvalidParameterValue (SendMessage, SendMessageBatch per entry, Publish, PublishBatch per
entry), and takes the messages that pass. Schemas are registered over the native API."""

import json
import urllib.request
import uuid

import pytest
from botocore.exceptions import ClientError

from sns_support import receive_all, subscribe_queue
from sqs_support import error_of

ORDER = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "total": {"type": "integer", "minimum": 0}},
    "required": ["id", "total"],
}


def native(endpoint, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(endpoint + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read() or b"null")


@pytest.fixture
def order_type(endpoint):
    name = f"order-{uuid.uuid4().hex[:8]}"
    assert native(endpoint, "POST", f"/v1/schemas/{name}/versions", {"schema": ORDER})["version"] == 1
    return name


def typed(name, version=None):
    attributes = {"sluice.type": {"DataType": "String", "StringValue": name}}
    if version is not None:
        attributes["sluice.version"] = {"DataType": "String", "StringValue": str(version)}
    return attributes


def test_sqs_send_is_checked_when_the_queue_validates(sqs, new_queue, endpoint, order_type):
    name, url = new_queue()
    native(endpoint, "PATCH", f"/v1/queues/{name}", {"schema_validation": True})
    good = json.dumps({"id": "o-1", "total": 3})
    sqs.send_message(QueueUrl=url, MessageBody=good, MessageAttributes=typed(order_type, 1))
    with pytest.raises(ClientError) as refused:
        sqs.send_message(QueueUrl=url, MessageBody='{"id": "o-2", "total": -1}', MessageAttributes=typed(order_type))
    code, message, status, _ = error_of(refused)
    assert (code, status) == ("InvalidParameterValue", 400)
    assert "/total" in message, message
    with pytest.raises(ClientError) as untyped:
        sqs.send_message(QueueUrl=url, MessageBody=good)
    assert error_of(untyped)[0] == "InvalidParameterValue"

    batch = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "ok", "MessageBody": good, "MessageAttributes": typed(order_type)},
            {"Id": "bad", "MessageBody": '{"id": 5, "total": 1}', "MessageAttributes": typed(order_type)},
            {"Id": "nover", "MessageBody": good, "MessageAttributes": typed(order_type, 7)},
        ],
    )
    assert [s["Id"] for s in batch["Successful"]] == ["ok"]
    failed = {f["Id"]: f for f in batch["Failed"]}
    assert set(failed) == {"bad", "nover"}
    assert all(f["Code"] == "InvalidParameterValue" and f["SenderFault"] for f in failed.values())
    assert "/id" in failed["bad"]["Message"]

    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])["Messages"]
    assert len(received) == 2, "only the two messages that passed were taken"
    assert received[0]["MessageAttributes"]["sluice.type"]["StringValue"] == order_type


def test_a_queue_without_validation_takes_anything(sqs, queue_url, order_type):
    sqs.send_message(QueueUrl=queue_url, MessageBody="not json", MessageAttributes=typed(order_type))


def test_sns_publish_is_checked_when_the_topic_validates(sns, sqs, new_topic, new_queue, order_type):
    topic = new_topic()
    sns.set_topic_attributes(TopicArn=topic, AttributeName="SchemaValidation", AttributeValue="true")
    assert sns.get_topic_attributes(TopicArn=topic)["Attributes"]["SchemaValidation"] == "true"
    _, url = new_queue()
    subscribe_queue(sns, sqs, topic, url, RawMessageDelivery="true")

    sns.publish(TopicArn=topic, Message=json.dumps({"id": "o-1", "total": 1}), MessageAttributes=typed(order_type))
    with pytest.raises(ClientError) as refused:
        sns.publish(TopicArn=topic, Message='{"id": "o-1"}', MessageAttributes=typed(order_type))
    code, message, status, _ = error_of(refused)
    assert (code, status) == ("InvalidParameterValue", 400)
    assert "total" in message, message

    batch = sns.publish_batch(
        TopicArn=topic,
        PublishBatchRequestEntries=[
            {"Id": "a", "Message": json.dumps({"id": "o-2", "total": 2}), "MessageAttributes": typed(order_type)},
            {"Id": "b", "Message": "[]", "MessageAttributes": typed(order_type)},
        ],
    )
    assert [s["Id"] for s in batch["Successful"]] == ["a"]
    assert [(f["Id"], f["Code"]) for f in batch["Failed"]] == [("b", "InvalidParameterValue")]

    bodies = sorted(m["Body"] for m in receive_all(sqs, url, expected=2))
    assert [json.loads(b)["id"] for b in bodies] == ["o-1", "o-2"], "only messages that passed were delivered"

    with pytest.raises(ClientError) as bad_value:
        sns.set_topic_attributes(TopicArn=topic, AttributeName="SchemaValidation", AttributeValue="maybe")
    assert error_of(bad_value)[2] == 400
