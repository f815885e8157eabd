"""SNS with unmodified boto3 against Sluice, and SNS-to-SQS fan-out read back with boto3's SQS
client: topics, subscriptions, the JSON envelope and raw delivery, filter policies on attributes
and on the body, FIFO topics into FIFO queues, PublishBatch, and SNS's errors (codes and texts
as recorded against AWS)."""

import base64
import hashlib
import json

import pytest
from botocore.exceptions import ClientError

from sns_support import queue_arn, receive_all, subscribe_queue
from sqs_support import ACCOUNT, error_of

# The envelope's keys, in the order AWS delivers them to SQS (standard topics).
ENVELOPE_KEYS = [
    "Type",
    "MessageId",
    "TopicArn",
    "Subject",
    "Message",
    "Timestamp",
    "SignatureVersion",
    "Signature",
    "SigningCertURL",
    "UnsubscribeURL",
    "MessageAttributes",
]


def ordered_keys(text):
    return [k for k, _ in json.loads(text, object_pairs_hook=lambda pairs: pairs)]


def test_topic_lifecycle_attributes_and_tags(sns, new_topic):
    arn = new_topic(Attributes={"DisplayName": "Orders"}, Tags=[{"Key": "team", "Value": "core"}])
    assert arn.startswith(f"arn:aws:sns:us-east-1:{ACCOUNT}:t-")
    assert sns.create_topic(Name=arn.split(":")[-1])["TopicArn"] == arn, "CreateTopic is idempotent"
    listed = [t["TopicArn"] for t in sns.list_topics()["Topics"]]
    assert arn in listed

    attributes = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert attributes["DisplayName"] == "Orders"
    assert attributes["TopicArn"] == arn
    assert attributes["Owner"] == ACCOUNT
    assert attributes["SubscriptionsConfirmed"] == "0"
    assert json.loads(attributes["EffectiveDeliveryPolicy"])["http"]["defaultHealthyRetryPolicy"]["numRetries"] == 3
    assert json.loads(attributes["Policy"])["Statement"][0]["Resource"] == arn
    sns.set_topic_attributes(TopicArn=arn, AttributeName="DisplayName", AttributeValue="Renamed")
    assert sns.get_topic_attributes(TopicArn=arn)["Attributes"]["DisplayName"] == "Renamed"

    sns.tag_resource(ResourceArn=arn, Tags=[{"Key": "env", "Value": "prod"}])
    sns.untag_resource(ResourceArn=arn, TagKeys=["team"])
    assert sns.list_tags_for_resource(ResourceArn=arn)["Tags"] == [{"Key": "env", "Value": "prod"}]

    with pytest.raises(ClientError) as e:
        sns.create_topic(Name=arn.split(":")[-1], Attributes={"DisplayName": "Other"})
    assert error_of(e)[:3] == (
        "InvalidParameter",
        "Invalid parameter: Attributes Reason: Topic already exists with different attributes",
        400,
    )
    sns.delete_topic(TopicArn=arn)
    sns.delete_topic(TopicArn=arn)  # deleting twice succeeds, as in SNS
    with pytest.raises(sns.exceptions.NotFoundException) as e:
        sns.get_topic_attributes(TopicArn=arn)
    assert error_of(e)[:3] == ("NotFound", "Topic does not exist", 404)


def test_fan_out_with_envelope_and_raw_delivery(sns, sqs, new_topic, new_queue):
    arn = new_topic()
    _, enveloped = new_queue("env")
    _, raw = new_queue("raw")
    envelope_sub = subscribe_queue(sns, sqs, arn, enveloped)
    subscribe_queue(sns, sqs, arn, raw, RawMessageDelivery="true")
    attributes = {
        "store": {"DataType": "String", "StringValue": "example_corp"},
        "price": {"DataType": "Number", "StringValue": "99.12"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x02\x03\x04"},
    }
    message_id = sns.publish(TopicArn=arn, Message="hello \u00e9", Subject="greeting", MessageAttributes=attributes)[
        "MessageId"
    ]

    [message] = receive_all(sqs, enveloped, expected=1)
    assert "MessageAttributes" not in message, "enveloped copies carry attributes in the envelope"
    assert ordered_keys(message["Body"]) == ENVELOPE_KEYS
    envelope = json.loads(message["Body"])
    assert envelope["Type"] == "Notification"
    assert envelope["MessageId"] == message_id
    assert envelope["TopicArn"] == arn
    assert envelope["Subject"] == "greeting"
    assert envelope["Message"] == "hello \u00e9"
    assert envelope["Timestamp"].endswith("Z") and len(envelope["Timestamp"]) == 24
    assert envelope["SignatureVersion"] == "1"
    assert len(base64.b64decode(envelope["Signature"])) == 32
    assert envelope["UnsubscribeURL"].endswith(f"/?Action=Unsubscribe&SubscriptionArn={envelope_sub}")
    assert envelope["MessageAttributes"] == {
        "blob": {"Type": "Binary", "Value": "AgME"},
        "price": {"Type": "Number", "Value": "99.12"},
        "store": {"Type": "String", "Value": "example_corp"},
    }

    [message] = receive_all(sqs, raw, expected=1)
    assert message["Body"] == "hello \u00e9"
    assert message["MessageAttributes"] == attributes
    assert message["Attributes"]["SenderId"]


def test_filter_policy_on_attributes(sns, sqs, new_topic, new_queue):
    arn = new_topic()
    _, url = new_queue("filtered")
    policy = {"store": ["example_corp"], "price_usd": [{"numeric": [">=", 100]}]}
    subscribe_queue(sns, sqs, arn, url, RawMessageDelivery="true", FilterPolicy=policy)
    cases = [
        ("match", {"store": "example_corp", "price_usd": "210.75"}),
        ("too cheap", {"store": "example_corp", "price_usd": "5"}),
        ("other store", {"store": "other", "price_usd": "500"}),
        ("no price", {"store": "example_corp"}),
    ]
    for body, values in cases:
        attributes = {
            k: {"DataType": "Number" if k == "price_usd" else "String", "StringValue": v} for k, v in values.items()
        }
        sns.publish(TopicArn=arn, Message=body, MessageAttributes=attributes)
    assert [m["Body"] for m in receive_all(sqs, url, expected=1)] == ["match"]


def test_filter_policy_on_the_body(sns, sqs, new_topic, new_queue):
    arn = new_topic()
    _, url = new_queue("body")
    policy = {"order": {"total": [{"numeric": [">", 100]}], "kind": [{"prefix": "rush"}]}}
    subscribe_queue(sns, sqs, arn, url, RawMessageDelivery="true", FilterPolicy=policy, FilterPolicyScope="MessageBody")
    bodies = [
        {"order": {"total": 150, "kind": "rush-eu"}},
        {"order": {"total": 50, "kind": "rush-eu"}},
        {"order": {"total": 150, "kind": "normal"}},
        "not json at all",
    ]
    for body in bodies:
        sns.publish(TopicArn=arn, Message=body if isinstance(body, str) else json.dumps(body))
    got = [json.loads(m["Body"]) for m in receive_all(sqs, url, expected=1)]
    assert got == [bodies[0]]
    attributes = sns.get_subscription_attributes(
        SubscriptionArn=sns.list_subscriptions_by_topic(TopicArn=arn)["Subscriptions"][0]["SubscriptionArn"]
    )["Attributes"]
    assert attributes["FilterPolicyScope"] == "MessageBody"
    assert json.loads(attributes["FilterPolicy"]) == policy


def test_fifo_topic_into_a_fifo_queue(sns, sqs, new_topic, new_queue):
    arn = new_topic(fifo=True, Attributes={"ContentBasedDeduplication": "true"})
    name, url = new_queue("ordered")
    sqs.delete_queue(QueueUrl=url)
    url = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    subscription = subscribe_queue(sns, sqs, arn, url)
    sequence_numbers = []
    for body in ["one", "two", "three", "one"]:  # the last is a duplicate of the first
        published = sns.publish(TopicArn=arn, Message=body, MessageGroupId="g1")
        sequence_numbers.append(int(published["SequenceNumber"]))
    assert sequence_numbers == sorted(sequence_numbers) and len(set(sequence_numbers)) == 4
    messages = receive_all(sqs, url, expected=3)
    envelopes = [json.loads(m["Body"]) for m in messages]
    assert [e["Message"] for e in envelopes] == ["one", "two", "three"], "in order, the duplicate dropped"
    first = messages[0]
    assert first["Attributes"]["MessageGroupId"] == "g1"
    assert first["Attributes"]["MessageDeduplicationId"] == hashlib.sha256(b"one").hexdigest()
    assert int(first["Attributes"]["SequenceNumber"]) > 0
    assert ordered_keys(first["Body"]) == ["Type", "MessageId", "SequenceNumber", "TopicArn", "Message", "Timestamp", "UnsubscribeURL"]
    assert envelopes[0]["SequenceNumber"] == str(sequence_numbers[0]).zfill(20)
    assert envelopes[0]["UnsubscribeURL"].endswith(subscription)

    with pytest.raises(ClientError) as e:
        sns.publish(TopicArn=arn, Message="no group")
    assert error_of(e)[:2] == ("InvalidParameter", "Invalid parameter: The MessageGroupId parameter is required for FIFO topics")
    standard = new_topic()
    with pytest.raises(ClientError) as e:
        subscribe_queue(sns, sqs, standard, url)
    assert error_of(e)[1] == (
        "Invalid parameter: Invalid parameter: Endpoint Reason: FIFO SQS Queues can not be subscribed to standard SNS topics"
    )


def test_publish_batch(sns, sqs, new_topic, new_queue):
    arn = new_topic()
    _, url = new_queue("batch")
    subscribe_queue(sns, sqs, arn, url, RawMessageDelivery="true")
    entries = [
        {"Id": "1", "Message": "one attribute", "MessageAttributes": {"attr1": {"DataType": "Number", "StringValue": "19.12"}}},
        {
            "Id": "2",
            "Message": "two attributes",
            "MessageAttributes": {
                "attr1": {"DataType": "Number", "StringValue": "99.12"},
                "attr2": {"DataType": "Number", "StringValue": "109.12"},
            },
        },
        {"Id": "3", "Message": "no attributes", "Subject": "s"},
    ]
    result = sns.publish_batch(TopicArn=arn, PublishBatchRequestEntries=entries)
    assert [s["Id"] for s in result["Successful"]] == ["1", "2", "3"]
    assert result["Failed"] == []
    got = {m["Body"]: m for m in receive_all(sqs, url, expected=3)}
    assert set(got) == {"one attribute", "two attributes", "no attributes"}
    # The digests AWS computes for these attributes (recorded).
    assert got["one attribute"]["MD5OfMessageAttributes"] == "1f07082409022a373fa2a2601f82b3cb"
    assert got["two attributes"]["MD5OfMessageAttributes"] == "9b720b3af309c1c4b0d395c53b08c502"
    assert "MessageAttributes" not in got["no attributes"]

    def batch_error(**kwargs):
        with pytest.raises(ClientError) as e:
            sns.publish_batch(TopicArn=arn, **kwargs)
        return error_of(e)[:2]

    message = {"Message": "m"}
    assert batch_error(PublishBatchRequestEntries=[{"Id": "a", **message}, {"Id": "a", **message}]) == (
        "BatchEntryIdsNotDistinct",
        "Two or more batch entries in the request have the same Id.",
    )
    assert batch_error(PublishBatchRequestEntries=[{"Id": f"{i}", **message} for i in range(11)]) == (
        "TooManyEntriesInBatchRequest",
        "The batch request contains more entries than permissible.",
    )
    assert batch_error(PublishBatchRequestEntries=[{"Id": "message.id", **message}]) == (
        "InvalidBatchEntryId",
        "The Id of a batch entry in the batch request contains an impermissible character: message.id",
    )
    assert batch_error(PublishBatchRequestEntries=[{"Id": "a", "Message": "x" * 200_000}, {"Id": "b", "Message": "x" * 100_000}]) == (
        "BatchRequestTooLong",
        "The length of all the messages put together is more than the limit.",
    )


def test_message_structure_json_picks_the_sqs_text(sns, sqs, new_topic, new_queue):
    arn = new_topic()
    _, url = new_queue("structured")
    subscribe_queue(sns, sqs, arn, url, RawMessageDelivery="true")
    sns.publish(TopicArn=arn, MessageStructure="json", Message=json.dumps({"default": "everyone", "sqs": "queues only"}))
    assert [m["Body"] for m in receive_all(sqs, url, expected=1)] == ["queues only"]
    with pytest.raises(ClientError) as e:
        sns.publish(TopicArn=arn, MessageStructure="json", Message=json.dumps({"sqs": "x"}))
    assert error_of(e)[1] == "Invalid parameter: Message Structure - No default entry in JSON message body"


def test_subscriptions_list_set_and_unsubscribe(sns, sqs, new_topic, new_queue):
    arn = new_topic()
    _, url = new_queue("subs")
    subscription = subscribe_queue(sns, sqs, arn, url)
    assert subscribe_queue(sns, sqs, arn, url) == subscription, "subscribing again answers the same ARN"
    attributes = sns.get_subscription_attributes(SubscriptionArn=subscription)["Attributes"]
    assert attributes["Protocol"] == "sqs"
    assert attributes["Endpoint"] == queue_arn(sqs, url)
    assert attributes["PendingConfirmation"] == "false"
    assert attributes["RawMessageDelivery"] == "false"
    sns.set_subscription_attributes(SubscriptionArn=subscription, AttributeName="RawMessageDelivery", AttributeValue="true")
    assert sns.get_subscription_attributes(SubscriptionArn=subscription)["Attributes"]["RawMessageDelivery"] == "true"
    listed = sns.list_subscriptions_by_topic(TopicArn=arn)["Subscriptions"]
    assert listed == [
        {"SubscriptionArn": subscription, "Owner": ACCOUNT, "Protocol": "sqs", "Endpoint": queue_arn(sqs, url), "TopicArn": arn}
    ]
    assert subscription in [s["SubscriptionArn"] for s in sns.list_subscriptions()["Subscriptions"]]
    pending = sns.subscribe(TopicArn=arn, Protocol="http", Endpoint="http://127.0.0.1:9/hook")
    assert pending["SubscriptionArn"] == "pending confirmation"
    sns.unsubscribe(SubscriptionArn=subscription)
    sns.unsubscribe(SubscriptionArn=subscription)  # unsubscribing twice succeeds, as in SNS
    with pytest.raises(sns.exceptions.NotFoundException) as e:
        sns.get_subscription_attributes(SubscriptionArn=subscription)
    assert error_of(e)[:3] == ("NotFound", "Subscription does not exist", 404)
    sns.publish(TopicArn=arn, Message="after unsubscribe")
    assert receive_all(sqs, url) == []


@pytest.mark.parametrize(
    "call, code, message",
    [
        (
            lambda sns, arn: sns.publish(TopicArn=arn + "-missing", Message="m"),
            "NotFound",
            "Topic does not exist",
        ),
        (
            lambda sns, arn: sns.publish(TopicArn="not-an-arn", Message="m"),
            "InvalidParameter",
            "Invalid parameter: TopicArn Reason: An ARN must have at least 6 elements, not 1",
        ),
        (lambda sns, arn: sns.publish(TopicArn=arn, Message=""), "InvalidParameter", "Invalid parameter: Empty message"),
        (
            lambda sns, arn: sns.publish(TopicArn=arn, Message="x" * 262_145),
            "InvalidParameter",
            "Invalid parameter: Message too long",
        ),
        (
            lambda sns, arn: sns.publish(
                TopicArn=arn, Message="m", MessageAttributes={"attr1": {"DataType": "String", "BinaryValue": b"x"}}
            ),
            "ParameterValueInvalid",
            "The message attribute 'attr1' with type 'String' must use field 'String'.",
        ),
        (
            lambda sns, arn: sns.subscribe(TopicArn=arn, Protocol="test-protocol", Endpoint="x"),
            "InvalidParameter",
            "Invalid parameter: Amazon SNS does not support this protocol string: test-protocol",
        ),
        (
            lambda sns, arn: sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint="http://localhost/000000000000/q"),
            "InvalidParameter",
            "Invalid parameter: SQS endpoint ARN",
        ),
        (
            lambda sns, arn: sns.subscribe(
                TopicArn=arn,
                Protocol="sqs",
                Endpoint=f"arn:aws:sqs:us-east-1:{ACCOUNT}:q",
                Attributes={"FilterPolicy": '{"a": {"b": ["c"]}}'},
            ),
            "InvalidParameter",
            "Invalid parameter: Attributes Reason: Filter policy scope MessageAttributes does not support nested filter policy",
        ),
        (
            lambda sns, arn: sns.subscribe(
                TopicArn=arn,
                Protocol="sqs",
                Endpoint=f"arn:aws:sqs:us-east-1:{ACCOUNT}:q",
                Attributes={"FilterPolicy": json.dumps({f"k{i}": ["v"] for i in range(6)})},
            ),
            "InvalidParameter",
            "Invalid parameter: Attributes Reason: FilterPolicy: Filter policy can not have more than 5 keys",
        ),
        (
            lambda sns, arn: sns.create_topic(Name="has.dot"),
            "InvalidParameter",
            "Invalid parameter: Topic Name",
        ),
        (
            lambda sns, arn: sns.confirm_subscription(TopicArn=arn, Token="0" * 64),
            "InvalidParameter",
            "Invalid parameter: Token",
        ),
    ],
)
def test_errors_as_aws_words_them(sns, new_topic, call, code, message):
    arn = new_topic()
    with pytest.raises(ClientError) as e:
        call(sns, arn)
    assert error_of(e)[:2] == (code, message)
