"""FIFO queues through boto3: order within a message group, a group blocked while one of its
messages is in flight, deduplication (by id, by content, per queue or per group, surviving delete,
cleared by purge), SequenceNumber, the FIFO system attributes, ReceiveRequestAttemptId, FIFO
dead-letter queues, and AWS's errors for every rule. Expected codes, messages and attribute sets
are AWS's own, from the real-AWS recordings in shared/reference/aws-data/recorded-sqs.json (test
names in the comments)."""

import hashlib
import json
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from sqs_support import error_of, queue_arn

# GetQueueAttributes(All) on a fresh FIFO queue with ContentBasedDeduplication, recorded against
# real AWS (test_fifo_set_content_based_deduplication_strategy); the volatile ones are checked apart.
FIFO_DEFAULTS = {
    "ApproximateNumberOfMessages": "0",
    "ApproximateNumberOfMessagesDelayed": "0",
    "ApproximateNumberOfMessagesNotVisible": "0",
    "ContentBasedDeduplication": "true",
    "DeduplicationScope": "queue",
    "DelaySeconds": "0",
    "FifoQueue": "true",
    "FifoThroughputLimit": "perQueue",
    "MaximumMessageSize": "1048576",
    "MessageRetentionPeriod": "345600",
    "ReceiveMessageWaitTimeSeconds": "0",
    "SqsManagedSseEnabled": "true",
    "VisibilityTimeout": "30",
}
VOLATILE = {"CreatedTimestamp", "LastModifiedTimestamp", "QueueArn"}
NO_DEDUP = "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly"
NO_GROUP = "The request must contain the parameter MessageGroupId."


@pytest.fixture
def new_fifo(sqs):
    """Creates a FIFO queue with a unique name: `new_fifo(**attributes)` returns (name, url)."""

    def create(prefix: str = "f", **attributes):
        name = f"{prefix}-{uuid.uuid4().hex[:12]}.fifo"
        url = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true", **attributes})["QueueUrl"]
        return name, url

    return create


def receive(sqs, url, **kwargs):
    return sqs.receive_message(QueueUrl=url, **kwargs).get("Messages", [])


def bodies(messages):
    return [m["Body"] for m in messages]


def send(sqs, url, body, group="g", dedup=None, **kwargs):
    if dedup is not None:
        kwargs["MessageDeduplicationId"] = dedup
    return sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group, **kwargs)


def depth(sqs, url):
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesNotVisible"])


def expect_error(call, code, message):
    with pytest.raises(ClientError) as excinfo:
        call()
    got_code, got_message, status, response = error_of(excinfo)
    assert (got_code, got_message, status) == (code, message, 400), response
    return response


# --- creation and attributes ---------------------------------------------------------------------


def test_a_fifo_queue_has_aws_attribute_set(sqs, new_fifo):
    name, url = new_fifo(ContentBasedDeduplication="true")
    assert url.endswith(f"/{name}")
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert set(attributes) == set(FIFO_DEFAULTS) | VOLATILE
    assert {k: v for k, v in attributes.items() if k not in VOLATILE} == FIFO_DEFAULTS
    assert attributes["QueueArn"] == queue_arn(name)
    # The same attributes again return the queue; a different value is named (test_create_fifo_queue_with_different_attributes_raises_error).
    again = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})
    assert again["QueueUrl"] == url
    response = expect_error(
        lambda: sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"}),
        "QueueAlreadyExists",
        "A queue already exists with the same name and a different value for attribute ContentBasedDeduplication",
    )
    assert response["Error"]["QueryErrorCode"] == "QueueNameExists"


def test_set_content_based_deduplication_strategy(sqs, new_fifo):
    # test_fifo_set_content_based_deduplication_strategy
    _, url = new_fifo(ContentBasedDeduplication="true")
    send(sqs, url, "by content")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"ContentBasedDeduplication": "false"})
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert {k: v for k, v in attributes.items() if k not in VOLATILE} == {
        **FIFO_DEFAULTS,
        "ContentBasedDeduplication": "false",
        "ApproximateNumberOfMessages": "1",
    }
    expect_error(lambda: send(sqs, url, "no id any more"), "InvalidParameterValue", NO_DEDUP)


def test_fifo_queue_attribute_cannot_change(sqs, new_fifo, queue_url):
    # test_set_unsupported_attribute_fifo
    _, url = new_fifo()
    expect_error(
        lambda: sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"FifoQueue": "true"}),
        "InvalidAttributeName",
        "Unknown Attribute FifoQueue.",
    )
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "true"})
    expect_error(
        lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "false"}),
        "InvalidAttributeValue",
        "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.",
    )
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["FifoQueue"])["Attributes"] == {"FifoQueue": "true"}


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"FifoQueue": "false"}, "Unknown Attribute FifoQueue."),
        ({"ContentBasedDeduplication": "true"}, "Unknown Attribute ContentBasedDeduplication."),
        ({"DeduplicationScope": "queue"}, "You can specify the DeduplicationScope only when FifoQueue is set to true."),
        ({"FifoThroughputLimit": "perQueue"}, "You can specify the FifoThroughputLimit only when FifoQueue is set to true."),
    ],
    ids=["fifo-queue", "content-based", "scope", "throughput"],
)
def test_fifo_attributes_on_a_standard_queue(sqs, queue_url, attributes, message):
    # test_create_standard_queue_with_fifo_attribute_raises_error
    name = f"std-{uuid.uuid4().hex[:12]}"
    expect_error(lambda: sqs.create_queue(QueueName=name, Attributes=attributes), "InvalidAttributeName", message)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName=name)
    if "FifoQueue" not in attributes:
        expect_error(
            lambda: sqs.set_queue_attributes(QueueUrl=queue_url, Attributes=attributes), "InvalidAttributeName", message
        )


def test_fifo_attribute_values_are_checked(sqs, new_fifo):
    _, url = new_fifo()
    for name, value in [("ContentBasedDeduplication", "yes"), ("DeduplicationScope", "group"), ("FifoThroughputLimit", "x")]:
        expect_error(
            lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes={name: value}),
            "InvalidAttributeValue",
            f"Invalid value for the parameter {name}.",
        )
    # perMessageGroupId only with the messageGroup scope; together they are accepted.
    with pytest.raises(ClientError) as excinfo:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoThroughputLimit": "perMessageGroupId"})
    assert error_of(excinfo)[0] == "InvalidAttributeValue"
    sqs.set_queue_attributes(
        QueueUrl=url, Attributes={"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}
    )
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DeduplicationScope", "FifoThroughputLimit"])
    assert attributes["Attributes"] == {"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}


# --- order and group blocking --------------------------------------------------------------------


def test_order_within_a_group_and_as_many_of_one_group_as_possible(sqs, new_fifo):
    _, url = new_fifo(ContentBasedDeduplication="true")
    for body, group in [("g1", "g"), ("h1", "h"), ("g2", "g"), ("h2", "h"), ("g3", "g")]:
        send(sqs, url, body, group)
    got = receive(sqs, url, MaxNumberOfMessages=10)
    assert bodies(got) == ["g1", "g2", "g3", "h1", "h2"]
    # Two at a time: the oldest group first, in send order (test_fifo_receive_message_group order).
    _, url = new_fifo(ContentBasedDeduplication="true")
    for body, group in [("g1", "g"), ("h1", "h"), ("g2", "g"), ("g3", "g")]:
        send(sqs, url, body, group)
    assert bodies(receive(sqs, url, MaxNumberOfMessages=2)) == ["g1", "g2"]
    assert bodies(receive(sqs, url, MaxNumberOfMessages=2)) == ["h1"]


def test_a_group_in_flight_blocks_only_itself(sqs, new_fifo):
    _, url = new_fifo(ContentBasedDeduplication="true")
    for body, group in [("g1", "g"), ("g2", "g"), ("h1", "h")]:
        send(sqs, url, body, group)
    (first,) = receive(sqs, url)
    assert first["Body"] == "g1"
    # g2 waits behind g1 in flight; h is not held up.
    assert bodies(receive(sqs, url, MaxNumberOfMessages=10)) == ["h1"]
    assert receive(sqs, url, MaxNumberOfMessages=10) == []
    # Released, g1 comes back before g2: a failing head blocks only its own group.
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0)
    (again,) = receive(sqs, url, AttributeNames=["ApproximateReceiveCount"])
    assert (again["Body"], again["Attributes"]["ApproximateReceiveCount"]) == ("g1", "2")
    sqs.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])
    assert bodies(receive(sqs, url)) == ["g2"]


def test_an_emptied_group_takes_new_messages(sqs, new_fifo):
    # test_fifo_empty_message_groups_added_back_to_queue
    _, url = new_fifo()
    send(sqs, url, "Message 1", "g1", dedup="1")
    (message,) = receive(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert receive(sqs, url) == []
    send(sqs, url, "Message 2", "g1", dedup="2")
    assert bodies(receive(sqs, url)) == ["Message 2"]


# --- deduplication -------------------------------------------------------------------------------


def test_dedup_by_id_answers_the_original(sqs, new_fifo):
    _, url = new_fifo()
    first = send(sqs, url, "first", dedup="d-1")
    again = send(sqs, url, "another body, same id", dedup="d-1")
    assert (again["MessageId"], again["SequenceNumber"]) == (first["MessageId"], first["SequenceNumber"])
    assert again["MD5OfMessageBody"] == hashlib.md5(b"another body, same id").hexdigest()
    assert bodies(receive(sqs, url, MaxNumberOfMessages=10)) == ["first"]
    assert depth(sqs, url) == (0, 1)


def test_dedup_by_content(sqs, new_fifo):
    _, url = new_fifo(ContentBasedDeduplication="true")
    first = send(sqs, url, "same body")
    assert send(sqs, url, "same body")["MessageId"] == first["MessageId"]
    other = send(sqs, url, "other body")
    assert other["MessageId"] != first["MessageId"]
    # An explicit id overrides the content.
    explicit = send(sqs, url, "same body", dedup="explicit")
    assert explicit["MessageId"] not in (first["MessageId"], other["MessageId"])
    got = receive(sqs, url, MaxNumberOfMessages=10, AttributeNames=["MessageDeduplicationId"])
    assert bodies(got) == ["same body", "other body", "same body"]
    assert [m["Attributes"]["MessageDeduplicationId"] for m in got] == [
        hashlib.sha256(b"same body").hexdigest(),
        hashlib.sha256(b"other body").hexdigest(),
        "explicit",
    ]


@pytest.mark.parametrize("content_based", [True, False], ids=["content", "id"])
def test_dedup_survives_delete(sqs, new_fifo, content_based):
    # test_fifo_deduplication_arrives_once_after_delete
    _, url = new_fifo(ContentBasedDeduplication=str(content_based).lower())
    dedup = None if content_based else "dedup1"
    item = '{"foo": "bar"}'
    first = send(sqs, url, item, "group-1", dedup=dedup)
    (message,) = receive(sqs, url)
    assert message["Body"] == item
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert send(sqs, url, item, "group-1", dedup=dedup)["MessageId"] == first["MessageId"]
    assert receive(sqs, url, WaitTimeSeconds=1) == []


def test_purge_clears_dedup(sqs, new_fifo):
    # test_purge_queue_clears_fifo_deduplication_cache
    _, url = new_fifo()
    first = send(sqs, url, "before purge", dedup="d")
    sqs.purge_queue(QueueUrl=url)
    again = send(sqs, url, "after purge", dedup="d")
    assert again["MessageId"] != first["MessageId"]
    assert int(again["SequenceNumber"]) > int(first["SequenceNumber"])
    assert bodies(receive(sqs, url)) == ["after purge"]


def test_dedup_scope_queue_is_across_groups(sqs, new_fifo):
    # test_sqs_fifo_same_dedup_id_different_message_groups
    _, url = new_fifo()
    send(sqs, url, "Test", "group1", dedup="same-dedup")
    send(sqs, url, "Test", "group2", dedup="same-dedup")
    assert bodies(receive(sqs, url, MaxNumberOfMessages=10)) == ["Test"]


def test_dedup_scope_message_group(sqs, new_fifo):
    # test_sqs_fifo_message_group_scope_no_throughput_setting
    _, url = new_fifo(DeduplicationScope="messageGroup")
    a = send(sqs, url, "Test", "group1", dedup="same-dedup")
    b = send(sqs, url, "Test", "group2", dedup="same-dedup")
    assert a["MessageId"] != b["MessageId"]
    assert send(sqs, url, "Test", "group1", dedup="same-dedup")["MessageId"] == a["MessageId"]
    got = receive(sqs, url, MaxNumberOfMessages=10, AttributeNames=["MessageGroupId"])
    assert [m["Attributes"]["MessageGroupId"] for m in got] == ["group1", "group2"]


def test_dedup_scope_changed_later_is_reported_but_not_applied(sqs, new_fifo):
    # test_fifo_change_to_high_throughput_after_creation: AWS keeps the scope of the creation.
    _, url = new_fifo(ContentBasedDeduplication="False", DeduplicationScope="queue")
    first = send(sqs, url, "Test1", "group1", dedup="same-dedup")
    sqs.set_queue_attributes(
        QueueUrl=url, Attributes={"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}
    )
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (attributes["DeduplicationScope"], attributes["FifoThroughputLimit"]) == ("messageGroup", "perMessageGroupId")
    assert send(sqs, url, "Test3", "group3", dedup="same-dedup")["MessageId"] == first["MessageId"]
    assert bodies(receive(sqs, url, MaxNumberOfMessages=10)) == ["Test1"]


# --- sequence numbers and the FIFO system attributes ---------------------------------------------


def test_sequence_numbers_increase(sqs, new_fifo, queue_url):
    _, url = new_fifo(ContentBasedDeduplication="true")
    numbers = [send(sqs, url, f"single-{i}", group=f"g{i % 2}")["SequenceNumber"] for i in range(3)]
    batch = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[{"Id": f"b{i}", "MessageBody": f"batch-{i}", "MessageGroupId": "g0"} for i in range(3)],
    )
    assert "Failed" not in batch, batch
    numbers += [entry["SequenceNumber"] for entry in batch["Successful"]]
    assert all(n.isdigit() for n in numbers), numbers
    assert [int(n) for n in numbers] == sorted({int(n) for n in numbers}), f"strictly increasing: {numbers}"
    got = receive(sqs, url, MaxNumberOfMessages=10, AttributeNames=["SequenceNumber"])
    assert sorted(m["Attributes"]["SequenceNumber"] for m in got) == sorted(numbers)
    # Standard queues have none.
    assert "SequenceNumber" not in sqs.send_message(QueueUrl=queue_url, MessageBody="x")


def test_receive_reports_the_fifo_system_attributes(sqs, new_fifo):
    # test_fifo_message_attributes
    _, url = new_fifo(
        ContentBasedDeduplication="true",
        VisibilityTimeout="0",
        DeduplicationScope="messageGroup",
        FifoThroughputLimit="perMessageGroupId",
    )
    sent = send(sqs, url, "message-body-1", "group-1", dedup="dedup-1")
    assert set(sent) - {"ResponseMetadata"} == {"MD5OfMessageBody", "MessageId", "SequenceNumber"}
    assert sent["MD5OfMessageBody"] == "19c9e282d65f9733bc6b35d50062c7ee"
    (first,) = receive(sqs, url, AttributeNames=["All"], WaitTimeSeconds=10)
    attributes = first["Attributes"]
    assert set(attributes) == {
        "ApproximateFirstReceiveTimestamp",
        "ApproximateReceiveCount",
        "MessageDeduplicationId",
        "MessageGroupId",
        "SenderId",
        "SentTimestamp",
        "SequenceNumber",
    }
    assert (attributes["MessageDeduplicationId"], attributes["MessageGroupId"]) == ("dedup-1", "group-1")
    assert (attributes["SequenceNumber"], attributes["ApproximateReceiveCount"]) == (sent["SequenceNumber"], "1")
    (second,) = receive(sqs, url, AttributeNames=["All"], WaitTimeSeconds=10)
    assert second["Attributes"]["ApproximateReceiveCount"] == "2"
    assert second["Attributes"]["SequenceNumber"] == sent["SequenceNumber"]
    assert second["ReceiptHandle"] != first["ReceiptHandle"]
    # Asked by name through MessageSystemAttributeNames as well.
    (third,) = receive(sqs, url, MessageSystemAttributeNames=["SequenceNumber", "MessageDeduplicationId"])
    assert third["Attributes"] == {"SequenceNumber": sent["SequenceNumber"], "MessageDeduplicationId": "dedup-1"}


# --- the send rules, with AWS's errors -----------------------------------------------------------


def test_send_without_group_id_is_missing_parameter(sqs, new_fifo):
    # test_posting_to_fifo_requires_deduplicationid_group_id
    _, url = new_fifo()
    response = expect_error(
        lambda: sqs.send_message(QueueUrl=url, MessageBody="x", MessageDeduplicationId="d"), "MissingParameter", NO_GROUP
    )
    assert response["Error"]["QueryErrorCode"] == "MissingRequiredParameterException"
    response = expect_error(lambda: send(sqs, url, "x"), "InvalidParameterValue", NO_DEDUP)
    assert response["Error"]["QueryErrorCode"] == "InvalidParameterValueException"
    assert depth(sqs, url) == (0, 0)


def test_per_message_delay_is_refused_but_zero_takes_the_queue_delay(sqs, new_fifo):
    # test_fifo_queue_send_message_with_delay_seconds_fails and ..._with_zero_delay_defaults_to_queue_delay
    _, url = new_fifo(ContentBasedDeduplication="true", DelaySeconds="1")
    expect_error(
        lambda: send(sqs, url, "message-1", "1", DelaySeconds=2),
        "InvalidParameterValue",
        "Value 2 for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.",
    )
    send(sqs, url, "message-1", "1", DelaySeconds=0)
    assert receive(sqs, url) == [], "the queue's delay applies"
    deadline = time.monotonic() + 5
    got = []
    while not got and time.monotonic() < deadline:
        got = receive(sqs, url, WaitTimeSeconds=1)
    assert bodies(got) == ["message-1"]


@pytest.mark.parametrize(
    ("value", "shown"),
    [("", ""), ("a" * 129, "a" * 129), ("group 123", "group 123")],
    ids=["empty", "too_long", "spaces"],
)
@pytest.mark.parametrize("parameter", ["MessageDeduplicationId", "MessageGroupId"])
def test_fifo_id_format(sqs, new_fifo, parameter, value, shown):
    # test_message_deduplication_id_invalid, test_send_message_to_standard_queue_with_invalid_message_group_id
    _, url = new_fifo()
    kwargs = {"MessageGroupId": "g", "MessageDeduplicationId": "d", parameter: value}
    expect_error(
        lambda: sqs.send_message(QueueUrl=url, MessageBody="x", **kwargs),
        "InvalidParameterValue",
        f"Value {shown} for parameter {parameter} is invalid. Reason: {parameter} can only include alphanumeric and punctuation characters. 1 to 128 in length.",
    )
    ok = {"MessageGroupId": "g", "MessageDeduplicationId": "d", parameter: "!#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" + "a" * 96}
    assert sqs.send_message(QueueUrl=url, MessageBody="x", **ok)["SequenceNumber"]


def test_a_batch_missing_an_id_is_refused_whole(sqs, new_fifo):
    # test_send_batch_missing_deduplication_id_for_fifo_queue, ..._missing_message_group_id_for_fifo_queue
    _, url = new_fifo(ContentBasedDeduplication="false")
    good = {"Id": "good", "MessageBody": "messageBody", "MessageGroupId": "test-group", "MessageDeduplicationId": "a"}
    for bad, message in [
        ({"Id": "bad", "MessageBody": "messageBody", "MessageGroupId": "test-group"}, NO_DEDUP),
        ({"Id": "bad", "MessageBody": "messageBody", "MessageDeduplicationId": "b"}, NO_GROUP),
    ]:
        response = expect_error(
            lambda: sqs.send_message_batch(QueueUrl=url, Entries=[good, bad]), "InvalidParameterValue", message
        )
        assert response["Error"]["QueryErrorCode"] == "InvalidParameterValueException"
    assert depth(sqs, url) == (0, 0)


def test_a_batch_keeps_request_order_and_fails_a_delayed_entry_alone(sqs, new_fifo):
    _, url = new_fifo(ContentBasedDeduplication="true")
    entries = [{"Id": f"e{i}", "MessageBody": f"m{i}", "MessageGroupId": "g"} for i in range(4)]
    entries[2]["DelaySeconds"] = 5
    entries.append({"Id": "dup", "MessageBody": "m0", "MessageGroupId": "g"})
    response = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert [e["Id"] for e in response["Successful"]] == ["e0", "e1", "e3", "dup"]
    by_id = {e["Id"]: e for e in response["Successful"]}
    assert (by_id["dup"]["MessageId"], by_id["dup"]["SequenceNumber"]) == (
        by_id["e0"]["MessageId"],
        by_id["e0"]["SequenceNumber"],
    )
    (failed,) = response["Failed"]
    assert (failed["Id"], failed["Code"], failed["SenderFault"]) == ("e2", "InvalidParameterValue", True)
    assert bodies(receive(sqs, url, MaxNumberOfMessages=10)) == ["m0", "m1", "m3"]


# --- receive retries, expired handles, dead letters ----------------------------------------------


def test_receive_request_attempt_id_returns_the_same_answer(sqs, new_fifo):
    _, url = new_fifo(ContentBasedDeduplication="true")
    for body, group in [("a1", "a"), ("a2", "a"), ("b1", "b")]:
        send(sqs, url, body, group)
    first = receive(sqs, url, MaxNumberOfMessages=2, ReceiveRequestAttemptId="attempt-1")
    assert bodies(first) == ["a1", "a2"]
    retry = receive(sqs, url, MaxNumberOfMessages=2, ReceiveRequestAttemptId="attempt-1")
    assert [m["ReceiptHandle"] for m in retry] == [m["ReceiptHandle"] for m in first]
    assert [m["MessageId"] for m in retry] == [m["MessageId"] for m in first]
    assert bodies(receive(sqs, url, MaxNumberOfMessages=2, ReceiveRequestAttemptId="attempt-2")) == ["b1"]
    # The handles of the first answer are live: they delete.
    for message in retry:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert depth(sqs, url) == (0, 1)
    # Deleted, the receive is no longer retryable.
    expect_error(
        lambda: receive(sqs, url, MaxNumberOfMessages=2, ReceiveRequestAttemptId="attempt-1"),
        "InvalidParameterValue",
        "Value attempt-1 for parameter ReceiveRequestAttemptId is invalid. Reason: The receiveRequestAttemptId is not valid anymore since the receive call is not retryable.",
    )


def test_an_expired_fifo_handle_cannot_change_visibility(sqs, new_fifo):
    # Reference §3.2: FIFO handles expire with their visibility timeout.
    _, url = new_fifo(ContentBasedDeduplication="true")
    send(sqs, url, "m")
    (message,) = receive(sqs, url, VisibilityTimeout=0)
    handle = message["ReceiptHandle"]
    expect_error(
        lambda: sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=30),
        "InvalidParameterValue",
        f"Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.",
    )


def test_an_expired_fifo_handle_cannot_delete(sqs, new_fifo):
    # Reference §3.2: on FIFO queues delete with an expired handle is refused, so a consumer
    # that lost its hold cannot remove a message out of its group's turn.
    _, url = new_fifo(ContentBasedDeduplication="true")
    send(sqs, url, "m")
    (message,) = receive(sqs, url, VisibilityTimeout=0)
    handle = message["ReceiptHandle"]
    expect_error(
        lambda: sqs.delete_message(QueueUrl=url, ReceiptHandle=handle),
        "InvalidParameterValue",
        f"Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.",
    )
    assert bodies(receive(sqs, url)) == ["m"], "the message is still there"


def test_a_fifo_queue_dead_letters_into_a_fifo_queue(sqs, new_fifo, new_queue):
    # test_dead_letter_queue_with_fifo_and_content_based_deduplication
    dlq_name, dlq_url = new_fifo("dlq", ContentBasedDeduplication="true")
    policy = json.dumps({"deadLetterTargetArn": queue_arn(dlq_name), "maxReceiveCount": 1})
    source_name, source_url = new_fifo("src", ContentBasedDeduplication="true", RedrivePolicy=policy)
    first = send(sqs, source_url, "foobar", "1")
    second = send(sqs, source_url, "foobar2", "1", dedup="explicit")
    assert bodies(receive(sqs, source_url, MaxNumberOfMessages=10, VisibilityTimeout=0)) == ["foobar", "foobar2"]
    assert receive(sqs, source_url, MaxNumberOfMessages=10, VisibilityTimeout=0) == [], "moved instead"
    got = receive(sqs, dlq_url, MaxNumberOfMessages=10, AttributeNames=["All"])
    assert [m["MessageId"] for m in got] == [first["MessageId"], second["MessageId"]], "in order"
    attributes = got[1]["Attributes"]
    assert attributes["DeadLetterQueueSourceArn"] == queue_arn(source_name)
    assert (attributes["MessageGroupId"], attributes["MessageDeduplicationId"]) == ("1", "explicit")
    # The source stays usable for its group.
    third = send(sqs, source_url, "foobar3", "1")
    assert [m["MessageId"] for m in receive(sqs, source_url)] == [third["MessageId"]]
    # A standard queue cannot be a FIFO queue's dead-letter queue, nor the other way round.
    standard_name, _ = new_queue("std-dlq")
    for dlq, fifo in [(standard_name, True), (dlq_name, False)]:
        bad = json.dumps({"deadLetterTargetArn": queue_arn(dlq), "maxReceiveCount": 1})
        name = f"src-{uuid.uuid4().hex[:10]}" + (".fifo" if fifo else "")
        attributes = {"RedrivePolicy": bad, **({"FifoQueue": "true"} if fifo else {})}
        expect_error(
            lambda: sqs.create_queue(QueueName=name, Attributes=attributes),
            "InvalidParameterValue",
            f"Value {bad} for parameter RedrivePolicy is invalid. Reason: Dead-letter queue must be same type of queue as the source..",
        )
