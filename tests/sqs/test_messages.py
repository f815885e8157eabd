"""Messages through boto3 (JSON protocol): SendMessage(+Batch) with AWS's MD5 digests,
ReceiveMessage with system and message attributes and long polling, DeleteMessage(+Batch) and
ChangeMessageVisibility(+Batch). Expected digests, codes and messages are AWS's own (recorded
real-AWS responses in shared/reference/aws-data) and the published MD5 algorithm."""

import threading
import time

import pytest
from botocore.exceptions import ClientError

from sqs_support import error_of, make_client, md5_of_attributes, md5_of_body

TRACE_HEADER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
BINARY_TRACEPARENT = b"traceparent\x1e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01"

# (message attributes, MD5OfMessageAttributes that real AWS returned for them)
AWS_ATTRIBUTE_VECTORS = [
    ({"Foo": {"DataType": "String", "StringValue": "Bar"}}, "ae7155c6026991b6d54b11589678bf9c"),
    ({"attr1": {"DataType": "Number", "StringValue": "99.12"}}, "d302007e9aa062660afc85fd0a482472"),
    ({"attr1": {"DataType": "Binary", "BinaryValue": BINARY_TRACEPARENT}}, "8cbe4db156db8a94db8b801b7addb984"),
    ({"timestamp": {"DataType": "Number", "StringValue": "1493147359900"}}, "235c5c510d26fb653d073faed50ae77c"),
    ({"MyAttribute": {"DataType": "String", "StringValue": "foobar"}}, "adb59cd4678ea5a855436b949cd07ab6"),
    (
        {
            "Help.Me": {"DataType": "String", "StringValue": "Me"},
            "Hello": {"DataType": "String", "StringValue": "There"},
            "General": {"DataType": "String", "StringValue": "Kenobi"},
        },
        "4c360f3fdafd970e05fae2f149d997f5",
    ),
]


def receive_one(sqs, url, **kwargs):
    response = sqs.receive_message(QueueUrl=url, **kwargs)
    assert len(response.get("Messages", [])) == 1, response
    return response["Messages"][0]


def counts(sqs, url):
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return (
        attributes["ApproximateNumberOfMessages"],
        attributes["ApproximateNumberOfMessagesNotVisible"],
        attributes["ApproximateNumberOfMessagesDelayed"],
    )


def in_background(function):
    """Runs `function` on a thread; returns a getter that joins it and yields (result, seconds)."""
    outcome = {}

    def run():
        started = time.monotonic()
        try:
            outcome["result"] = function()
        except BaseException as error:  # re-raised in the test's thread
            outcome["error"] = error
        outcome["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def join():
        thread.join(timeout=30)
        assert not thread.is_alive(), "the background call did not return"
        if "error" in outcome:
            raise outcome["error"]
        return outcome["result"], outcome["seconds"]

    return join


# --- SendMessage and digests ---------------------------------------------------------------------


def test_send_message_returns_id_and_body_md5_and_no_attribute_md5(sqs, queue_url):
    sent = sqs.send_message(QueueUrl=queue_url, MessageBody="msg")
    assert sent["MD5OfMessageBody"] == "6e2baaf3b97dbeef01c0043275f9a0e7" == md5_of_body("msg")
    assert sent["MessageId"]
    # Without attributes AWS sends no attribute digest at all (never the MD5 of "").
    for absent in ("MD5OfMessageAttributes", "MD5OfMessageSystemAttributes", "SequenceNumber"):
        assert absent not in sent, sent
    message = receive_one(sqs, queue_url, MessageAttributeNames=["All"])
    assert message["MessageId"] == sent["MessageId"]
    assert message["Body"] == "msg"
    assert message["MD5OfBody"] == sent["MD5OfMessageBody"]
    assert "MessageAttributes" not in message and "MD5OfMessageAttributes" not in message


@pytest.mark.parametrize(("attributes", "aws_md5"), AWS_ATTRIBUTE_VECTORS, ids=lambda v: str(v)[:24])
def test_attribute_md5_matches_aws_and_the_published_algorithm(sqs, queue_url, attributes, aws_md5):
    assert md5_of_attributes(attributes) == aws_md5  # our implementation against AWS's value
    sent = sqs.send_message(QueueUrl=queue_url, MessageBody="test", MessageAttributes=attributes)
    assert sent["MD5OfMessageAttributes"] == aws_md5
    assert sent["MD5OfMessageBody"] == md5_of_body("test")
    message = receive_one(sqs, queue_url, MessageAttributeNames=["All"])
    assert message["MD5OfMessageAttributes"] == aws_md5
    assert message["MessageAttributes"] == attributes


def test_custom_data_types_and_values_are_kept_byte_exact(sqs, queue_url):
    attributes = {
        "price": {"DataType": "Number.float", "StringValue": "1.50"},
        "big": {"DataType": "Number", "StringValue": "000123.4500"},
        "blob": {"DataType": "Binary.gzip", "BinaryValue": bytes(range(256))},
        "note": {"DataType": "String.utf8", "StringValue": "grüße \u2603 \U0001f680"},
    }
    sent = sqs.send_message(QueueUrl=queue_url, MessageBody="typed", MessageAttributes=attributes)
    assert sent["MD5OfMessageAttributes"] == md5_of_attributes(attributes)
    message = receive_one(sqs, queue_url, MessageAttributeNames=["All"])
    assert message["MessageAttributes"] == attributes
    assert message["MD5OfMessageAttributes"] == md5_of_attributes(attributes)


@pytest.mark.parametrize(
    "body",
    [
        '{\r\n"machineID" : "d357006e26ff47439e1ef894225d4307"}',
        "tabs\tand\nnewlines\r\n",
        "ünïcødé \u2603 \U0001f680",
        "<xml>&amp;\"'</xml>",
    ],
    ids=["carriage-return", "whitespace", "unicode", "xml-special"],
)
def test_bodies_round_trip_exactly(sqs, queue_url, body):
    sent = sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    assert sent["MD5OfMessageBody"] == md5_of_body(body)
    message = receive_one(sqs, queue_url)
    assert message["Body"] == body
    assert message["MD5OfBody"] == md5_of_body(body)


def test_empty_body_is_missing_parameter(sqs, queue_url):
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(QueueUrl=queue_url, MessageBody="")
    code, message, status, response = error_of(excinfo)
    assert (code, message, status) == ("MissingParameter", "The request must contain the parameter MessageBody.", 400)
    assert response["Error"]["QueryErrorCode"] == "MissingRequiredParameterException"


def test_body_with_a_forbidden_character_is_invalid_message_contents(sqs, queue_url):
    with pytest.raises(sqs.exceptions.InvalidMessageContents) as excinfo:
        sqs.send_message(QueueUrl=queue_url, MessageBody="bell \x01")
    assert error_of(excinfo)[0] == "InvalidMessageContents"


def test_message_larger_than_maximum_message_size_is_refused(sqs, new_queue):
    _, url = new_queue(Attributes={"MaximumMessageSize": "1024"})
    sqs.send_message(QueueUrl=url, MessageBody="a" * 1024)
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(QueueUrl=url, MessageBody="a" * 1025)
    code, message, status, _ = error_of(excinfo)
    assert (code, status) == ("InvalidParameterValue", 400)
    assert message == "One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes."


def test_empty_string_attribute_value_is_invalid(sqs, queue_url):
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(
            QueueUrl=queue_url,
            MessageBody="x",
            MessageAttributes={"ErrorDetails": {"DataType": "String", "StringValue": ""}},
        )
    code, message, status, _ = error_of(excinfo)
    assert (code, status) == ("InvalidParameterValue", 400)
    assert message == "Message (user) attribute 'ErrorDetails' must contain a non-empty value of type 'String'."


def test_invalid_message_group_id_on_a_standard_queue(sqs, queue_url):
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(QueueUrl=queue_url, MessageBody="x", MessageGroupId="group 123")
    code, message, status, _ = error_of(excinfo)
    assert (code, status) == ("InvalidParameterValue", 400)
    assert message == (
        "Value group 123 for parameter MessageGroupId is invalid. Reason: MessageGroupId can only include "
        "alphanumeric and punctuation characters. 1 to 128 in length."
    )


def test_queue_url_may_be_a_bare_queue_name(sqs, new_queue):
    name, url = new_queue()
    sqs.send_message(QueueUrl=name, MessageBody="by name")
    assert receive_one(sqs, url)["Body"] == "by name"


# --- System attributes ---------------------------------------------------------------------------


def test_trace_header_system_attribute_and_its_md5(sqs, queue_url):
    system = {"AWSTraceHeader": {"DataType": "String", "StringValue": TRACE_HEADER}}
    user = {"MyAttribute": {"DataType": "String", "StringValue": "foobar"}}
    sent = sqs.send_message(
        QueueUrl=queue_url, MessageBody="traced", MessageAttributes=user, MessageSystemAttributes=system
    )
    # The digest AWS returned for this very header (LocalStack's AWS-validated
    # test_system_attributes_have_no_effect_on_attr_md5), and the published algorithm's.
    assert sent["MD5OfMessageSystemAttributes"] == "5ae4d5d7636402d80f4eb6d213245a88" == md5_of_attributes(system)
    # The system attribute does not enter the user-attribute digest.
    assert sent["MD5OfMessageAttributes"] == "adb59cd4678ea5a855436b949cd07ab6"
    message = receive_one(sqs, queue_url, MessageSystemAttributeNames=["AWSTraceHeader"], MessageAttributeNames=["All"])
    assert message["Attributes"] == {"AWSTraceHeader": TRACE_HEADER}
    assert message["MessageAttributes"] == user


def test_receive_all_system_attributes(sqs, queue_url):
    before_ms = int(time.time() * 1000)
    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody="all of them",
        MessageGroupId="tenant-7",
        MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String", "StringValue": TRACE_HEADER}},
    )
    first = receive_one(sqs, queue_url, MessageSystemAttributeNames=["All"], VisibilityTimeout=0)
    after_ms = int(time.time() * 1000)
    attributes = first["Attributes"]
    assert set(attributes) == {
        "SenderId",
        "SentTimestamp",
        "ApproximateReceiveCount",
        "ApproximateFirstReceiveTimestamp",
        "AWSTraceHeader",
        "MessageGroupId",
    }, attributes
    assert attributes["SenderId"]
    assert attributes["ApproximateReceiveCount"] == "1"
    assert attributes["AWSTraceHeader"] == TRACE_HEADER
    assert attributes["MessageGroupId"] == "tenant-7"
    # Timestamps are epoch milliseconds.
    sent_ms, first_ms = int(attributes["SentTimestamp"]), int(attributes["ApproximateFirstReceiveTimestamp"])
    assert before_ms - 1000 <= sent_ms <= first_ms <= after_ms + 1000, attributes

    # The deprecated AttributeNames parameter is honoured too; the count goes on, the first-receive
    # timestamp stays.
    second = receive_one(sqs, queue_url, AttributeNames=["All"])
    assert second["MessageId"] == first["MessageId"]
    assert second["Attributes"]["ApproximateReceiveCount"] == "2"
    assert second["Attributes"]["ApproximateFirstReceiveTimestamp"] == attributes["ApproximateFirstReceiveTimestamp"]
    assert second["Attributes"]["SentTimestamp"] == attributes["SentTimestamp"]


def test_message_group_id_on_a_standard_queue_is_accepted_and_returned(sqs, queue_url):
    # AWS's recorded test_fair_queue_with_message_group_id.
    sent = sqs.send_message(QueueUrl=queue_url, MessageBody="message", MessageGroupId="test")
    assert sent["MD5OfMessageBody"] == "78e731027d8fd50ed642340b7c9a63b3"
    assert "SequenceNumber" not in sent
    message = receive_one(sqs, queue_url, WaitTimeSeconds=1, AttributeNames=["All"])
    assert set(message["Attributes"]) == {
        "ApproximateFirstReceiveTimestamp",
        "ApproximateReceiveCount",
        "MessageGroupId",
        "SenderId",
        "SentTimestamp",
    }
    assert message["Attributes"]["MessageGroupId"] == "test"


def test_system_attribute_name_filters(sqs, new_queue):
    # AWS's recorded test_receive_message_attribute_names_filters and
    # test_message_system_attribute_names_with_attribute_names.
    _, url = new_queue(Attributes={"VisibilityTimeout": "0"})
    sqs.send_message(
        QueueUrl=url, MessageBody="msg", MessageAttributes={"Foo": {"DataType": "String", "StringValue": "Bar"}}
    )

    def names(**kwargs):
        message = receive_one(sqs, url, **kwargs)
        return set(message.get("Attributes", {}))

    everything = {"ApproximateFirstReceiveTimestamp", "ApproximateReceiveCount", "SenderId", "SentTimestamp"}
    assert names(AttributeNames=["All"]) == everything
    assert names(MessageSystemAttributeNames=["All"]) == everything
    assert names(AttributeNames=["SenderId"]) == {"SenderId"}
    assert names(MessageSystemAttributeNames=["SenderId", "SequenceNumber"]) == {"SenderId"}
    assert names(MessageSystemAttributeNames=["All"], AttributeNames=["SenderId"]) == everything
    assert names(MessageSystemAttributeNames=["SentTimestamp"], AttributeNames=["ApproximateReceiveCount"]) == {
        "SentTimestamp",
        "ApproximateReceiveCount",
    }
    assert names() == set()


def test_message_attribute_name_filters_and_the_md5_of_the_returned_subset(sqs, new_queue):
    # AWS's recorded test_receive_message_message_attribute_names_filters, digests included.
    _, url = new_queue(Attributes={"VisibilityTimeout": "0"})
    attributes = AWS_ATTRIBUTE_VECTORS[-1][0]
    sent = sqs.send_message(QueueUrl=url, MessageBody="msg", MessageAttributes=attributes)
    assert sent["MD5OfMessageAttributes"] == "4c360f3fdafd970e05fae2f149d997f5"

    cases = [
        ([], set(), None),
        (["All"], {"General", "Hello", "Help.Me"}, "4c360f3fdafd970e05fae2f149d997f5"),
        (["*"], {"General", "Hello", "Help.Me"}, "4c360f3fdafd970e05fae2f149d997f5"),
        ([".*"], {"General", "Hello", "Help.Me"}, "4c360f3fdafd970e05fae2f149d997f5"),
        (["Foo", "Help"], set(), None),
        (["Hello", "General"], {"General", "Hello"}, "fca026605781cb4126a1e9044df24232"),
        (["Foo", "Hello"], {"Hello"}, "a311262e065454b75da111d535b8dacd"),
        (["Hel.*"], {"Hello", "Help.Me"}, "83fee93c1bcd8b9a5a923ffacdc636c7"),
        (["AWS."], set(), None),
        (["..foo"], set(), None),
    ]
    for requested, expected_names, expected_md5 in cases:
        message = receive_one(sqs, url, MessageAttributeNames=requested)
        returned = message.get("MessageAttributes", {})
        assert set(returned) == expected_names, requested
        assert message.get("MD5OfMessageAttributes") == expected_md5, requested
        if expected_md5:
            assert md5_of_attributes(returned) == expected_md5
            assert returned == {name: attributes[name] for name in expected_names}


# --- ReceiveMessage ------------------------------------------------------------------------------


def test_receive_on_an_empty_queue_has_no_messages_key(sqs, queue_url):
    response = sqs.receive_message(QueueUrl=queue_url)
    assert "Messages" not in response
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_empty_long_poll_waits_the_full_wait_time(sqs, queue_url):
    started = time.monotonic()
    response = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1)
    elapsed = time.monotonic() - started
    assert "Messages" not in response
    assert 0.9 <= elapsed < 3, elapsed


def test_queue_receive_wait_time_is_the_default_wait(sqs, new_queue):
    _, url = new_queue(Attributes={"ReceiveMessageWaitTimeSeconds": "1"})
    started = time.monotonic()
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    assert 0.9 <= time.monotonic() - started < 3


def test_long_poll_is_woken_by_a_send(sqs, endpoint, queue_url):
    poller = make_client(endpoint)
    join = in_background(lambda: poller.receive_message(QueueUrl=queue_url, WaitTimeSeconds=10))
    time.sleep(0.5)  # let the poll reach the server and start waiting
    sqs.send_message(QueueUrl=queue_url, MessageBody="wake up")
    response, seconds = join()
    assert [m["Body"] for m in response["Messages"]] == ["wake up"]
    assert 0.4 <= seconds < 3, f"the long poll returned after {seconds:.2f} s for a send at 0.5 s"


def test_long_poll_is_woken_by_a_delayed_message_coming_due(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="later", DelaySeconds=1)
    assert "Messages" not in sqs.receive_message(QueueUrl=queue_url)  # not yet
    started = time.monotonic()
    response = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=10)
    elapsed = time.monotonic() - started
    assert [m["Body"] for m in response["Messages"]] == ["later"]
    assert elapsed < 3, f"a message due in 1 s came after {elapsed:.2f} s of a 10 s poll"


def test_long_poll_is_woken_by_a_visibility_timeout_expiring(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="comes back")
    receive_one(sqs, queue_url, VisibilityTimeout=1)
    started = time.monotonic()
    response = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=10, AttributeNames=["ApproximateReceiveCount"])
    elapsed = time.monotonic() - started
    assert response["Messages"][0]["Attributes"]["ApproximateReceiveCount"] == "2"
    assert elapsed < 3, elapsed


def test_long_poll_is_woken_by_a_visibility_release(sqs, endpoint, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="released")
    receipt = receive_one(sqs, queue_url, VisibilityTimeout=60)["ReceiptHandle"]
    poller = make_client(endpoint)
    join = in_background(lambda: poller.receive_message(QueueUrl=queue_url, WaitTimeSeconds=10))
    time.sleep(0.5)
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=receipt, VisibilityTimeout=0)
    response, seconds = join()
    assert [m["Body"] for m in response["Messages"]] == ["released"]
    assert seconds < 3, seconds


def test_delay_seconds_hide_a_message(sqs, new_queue, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="delayed", DelaySeconds=60)
    assert "Messages" not in sqs.receive_message(QueueUrl=queue_url)
    assert counts(sqs, queue_url) == ("0", "0", "1")
    # The queue's own DelaySeconds applies when the message sets none.
    _, delayed_queue = new_queue(Attributes={"DelaySeconds": "60"})
    sqs.send_message(QueueUrl=delayed_queue, MessageBody="delayed by the queue")
    assert "Messages" not in sqs.receive_message(QueueUrl=delayed_queue)
    assert counts(sqs, delayed_queue) == ("0", "0", "1")


def test_approximate_counts_follow_send_receive_and_delete(sqs, queue_url):
    assert counts(sqs, queue_url) == ("0", "0", "0")
    sqs.send_message(QueueUrl=queue_url, MessageBody="one")
    sqs.send_message(QueueUrl=queue_url, MessageBody="two")
    assert counts(sqs, queue_url) == ("2", "0", "0")
    sqs.send_message(QueueUrl=queue_url, MessageBody="later", DelaySeconds=60)
    assert counts(sqs, queue_url) == ("2", "0", "1")
    receipt = receive_one(sqs, queue_url, MaxNumberOfMessages=1)["ReceiptHandle"]
    assert counts(sqs, queue_url) == ("1", "1", "1")
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=receipt)
    assert counts(sqs, queue_url) == ("1", "0", "1")


def test_receive_up_to_max_number_of_messages(sqs, queue_url):
    bodies = {f"m{i}" for i in range(12)}
    for body in bodies:
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    got = []
    for _ in range(12):
        batch = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
        assert len(batch) <= 10
        got += [m["Body"] for m in batch]
        if len(got) >= 12:
            break
    assert sorted(got) == sorted(bodies)
    assert len(set(m for m in got)) == 12, "a message in flight was delivered twice"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"MaxNumberOfMessages": 11},
            "Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.",
        ),
        (
            {"WaitTimeSeconds": 21},
            "Value 21 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.",
        ),
        (
            {"WaitTimeSeconds": -1},
            "Value -1 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.",
        ),
    ],
    ids=["max-11", "wait-21", "wait-negative"],
)
def test_receive_parameter_limits(sqs, queue_url, kwargs, message):
    with pytest.raises(ClientError) as excinfo:
        sqs.receive_message(QueueUrl=queue_url, **kwargs)
    code, got, status, response = error_of(excinfo)
    assert (code, got, status) == ("InvalidParameterValue", message, 400)
    # The unmodeled error's JSON shape, as boto3 reports it from real AWS.
    assert response["Error"]["QueryErrorCode"] == "InvalidParameterValueException"


def test_receive_request_attempt_id_is_accepted_and_ignored_on_a_standard_queue(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="once")
    first = receive_one(sqs, queue_url, ReceiveRequestAttemptId="attempt-1", VisibilityTimeout=60)
    assert first["Body"] == "once"
    # On a FIFO queue the same attempt id would return the same messages again; a standard queue
    # treats it as an ordinary receive, so the message (now in flight) is not returned.
    assert "Messages" not in sqs.receive_message(QueueUrl=queue_url, ReceiveRequestAttemptId="attempt-1")


# --- SendMessageBatch ----------------------------------------------------------------------------


def test_send_message_batch_reports_each_entry(sqs, queue_url):
    attributes = {"Foo": {"DataType": "String", "StringValue": "Bar"}}
    system = {"AWSTraceHeader": {"DataType": "String", "StringValue": TRACE_HEADER}}
    entries = [
        {"Id": "plain", "MessageBody": "one"},
        {"Id": "with-attributes", "MessageBody": "two", "MessageAttributes": attributes},
        {"Id": "traced_and_grouped", "MessageBody": "three", "MessageSystemAttributes": system, "MessageGroupId": "g"},
        {"Id": "delayed", "MessageBody": "four", "DelaySeconds": 60},
    ]
    response = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert "Failed" not in response, response  # AWS omits an empty Failed list
    by_id = {entry["Id"]: entry for entry in response["Successful"]}
    assert set(by_id) == {"plain", "with-attributes", "traced_and_grouped", "delayed"}
    for entry in entries:
        result = by_id[entry["Id"]]
        assert result["MessageId"]
        assert result["MD5OfMessageBody"] == md5_of_body(entry["MessageBody"])
    assert "MD5OfMessageAttributes" not in by_id["plain"]
    assert by_id["with-attributes"]["MD5OfMessageAttributes"] == "ae7155c6026991b6d54b11589678bf9c"
    assert by_id["traced_and_grouped"]["MD5OfMessageSystemAttributes"] == md5_of_attributes(system)
    assert "MD5OfMessageSystemAttributes" not in by_id["plain"]
    assert len({r["MessageId"] for r in by_id.values()}) == 4
    assert counts(sqs, queue_url) == ("3", "0", "1")


def test_send_message_batch_per_entry_failures_are_http_200(sqs, new_queue):
    # AWS's recorded test_send_batch_message_size, plus a forbidden character.
    _, url = new_queue(Attributes={"MaximumMessageSize": "1024"})
    response = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "fits", "MessageBody": "a" * 1024},
            {"Id": "too-big", "MessageBody": "a" * 1025},
            {"Id": "bad-char", "MessageBody": "\x01"},
        ],
    )
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert [(e["Id"], e["MD5OfMessageBody"]) for e in response["Successful"]] == [
        ("fits", "c9a34cfc85d982698c6ac89f76071abd")
    ]
    failed = {entry["Id"]: entry for entry in response["Failed"]}
    assert set(failed) == {"too-big", "bad-char"}
    assert failed["too-big"]["Code"] == "InvalidParameterValue"
    assert failed["too-big"]["SenderFault"] is True
    assert (
        failed["too-big"]["Message"]
        == "One or more parameters cannot be validated. Reason: Message must be shorter than 1024 bytes."
    )
    assert failed["bad-char"]["Code"] == "InvalidMessageContents"
    assert failed["bad-char"]["SenderFault"] is True
    assert counts(sqs, url) == ("1", "0", "0")


def test_send_message_batch_with_too_many_entries(sqs, queue_url):
    entries = [{"Id": f"e{i}", "MessageBody": "x"} for i in range(20)]
    with pytest.raises(sqs.exceptions.TooManyEntriesInBatchRequest) as excinfo:
        sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
    code, message, status, response = error_of(excinfo)
    assert (code, status) == ("AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 400)
    assert message == "Maximum number of entries per request are 10. You have sent 20."
    assert response["Error"]["QueryErrorCode"] == "TooManyEntriesInBatchRequest"
    assert counts(sqs, queue_url) == ("0", "0", "0")


def test_send_message_batch_with_duplicate_ids(sqs, queue_url):
    with pytest.raises(sqs.exceptions.BatchEntryIdsNotDistinct) as excinfo:
        sqs.send_message_batch(
            QueueUrl=queue_url, Entries=[{"Id": "same", "MessageBody": "a"}, {"Id": "same", "MessageBody": "b"}]
        )
    code, _, status, _ = error_of(excinfo)
    assert (code, status) == ("AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400)
    assert counts(sqs, queue_url) == ("0", "0", "0")


def test_send_message_batch_with_an_invalid_entry_id(sqs, queue_url):
    with pytest.raises(sqs.exceptions.InvalidBatchEntryId) as excinfo:
        sqs.send_message_batch(QueueUrl=queue_url, Entries=[{"Id": "invalid:id", "MessageBody": "a"}])
    code, message, status, _ = error_of(excinfo)
    assert (code, status) == ("AWS.SimpleQueueService.InvalidBatchEntryId", 400)
    assert message == (
        "A batch entry id can only contain alphanumeric characters, hyphens and underscores. "
        "It can be at most 80 letters long."
    )


def test_send_message_batch_longer_than_1_mib_is_refused(sqs, queue_url):
    # AWS's recorded test_send_message_batch_with_oversized_contents: 1 MiB + 1 byte in total.
    half = 1024 * 1024 // 2
    entries = [{"Id": "a", "MessageBody": "a" * half}, {"Id": "b", "MessageBody": "b" * (half + 1)}]
    with pytest.raises(sqs.exceptions.BatchRequestTooLong) as excinfo:
        sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
    code, message, status, _ = error_of(excinfo)
    assert (code, status) == ("AWS.SimpleQueueService.BatchRequestTooLong", 400)
    assert message == "Batch requests cannot be longer than 1048576 bytes. You have sent 1048577 bytes."


# --- DeleteMessage(+Batch) -----------------------------------------------------------------------


def test_delete_message_removes_it(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="bye")
    receipt = receive_one(sqs, queue_url, VisibilityTimeout=0)["ReceiptHandle"]
    # VisibilityTimeout=0 made it visible again, yet the current receipt still deletes it.
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=receipt)
    assert counts(sqs, queue_url) == ("0", "0", "0")
    # Deleting again is not an error.
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=receipt)


def test_delete_with_a_stale_receipt_succeeds(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="received twice")
    stale = receive_one(sqs, queue_url, VisibilityTimeout=0)["ReceiptHandle"]
    current = receive_one(sqs, queue_url, VisibilityTimeout=60)["ReceiptHandle"]
    assert stale != current, "every receive gives a new receipt handle"
    response = sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=stale)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=current)
    assert counts(sqs, queue_url) == ("0", "0", "0")


def test_delete_with_a_garbage_receipt_is_receipt_handle_is_invalid(sqs, queue_url):
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid) as excinfo:
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle="garbage")
    code, message, status, _ = error_of(excinfo)
    assert (code, message, status) == (
        "ReceiptHandleIsInvalid",
        'The input receipt handle "garbage" is not a valid receipt handle.',
        400,
    )


def test_delete_message_batch_reports_each_entry(sqs, queue_url):
    for body in ("a", "b", "c"):
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    received = []
    for _ in range(6):
        received += sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=60).get(
            "Messages", []
        )
        if len(received) == 3:
            break
    assert len(received) == 3
    entries = [{"Id": f"m{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(received[:2])]
    entries.append({"Id": "garbage", "ReceiptHandle": "garbage"})
    response = sqs.delete_message_batch(QueueUrl=queue_url, Entries=entries)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert sorted(e["Id"] for e in response["Successful"]) == ["m0", "m1"]
    (failed,) = response["Failed"]
    assert failed["Id"] == "garbage"
    assert failed["Code"] == "ReceiptHandleIsInvalid"
    assert failed["SenderFault"] is True
    assert counts(sqs, queue_url) == ("0", "1", "0")


def test_delete_message_batch_limits(sqs, queue_url):
    with pytest.raises(sqs.exceptions.TooManyEntriesInBatchRequest) as excinfo:
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=[{"Id": f"e{i}", "ReceiptHandle": "x"} for i in range(20)])
    assert error_of(excinfo)[1] == "Maximum number of entries per request are 10. You have sent 20."
    with pytest.raises(sqs.exceptions.InvalidBatchEntryId):
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=[{"Id": "invalid:id", "ReceiptHandle": "x"}])
    with pytest.raises(sqs.exceptions.BatchEntryIdsNotDistinct):
        sqs.delete_message_batch(
            QueueUrl=queue_url, Entries=[{"Id": "same", "ReceiptHandle": "x"}, {"Id": "same", "ReceiptHandle": "y"}]
        )


# --- ChangeMessageVisibility(+Batch) -------------------------------------------------------------


def test_change_visibility_to_zero_makes_the_message_receivable_at_once(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="again")
    first = receive_one(sqs, queue_url, VisibilityTimeout=60)
    assert "Messages" not in sqs.receive_message(QueueUrl=queue_url)
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0)
    again = receive_one(sqs, queue_url, AttributeNames=["ApproximateReceiveCount"])
    assert again["MessageId"] == first["MessageId"]
    assert again["Attributes"]["ApproximateReceiveCount"] == "2"


def test_change_visibility_extends_the_timeout(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="kept hidden")
    receipt = receive_one(sqs, queue_url, VisibilityTimeout=1)["ReceiptHandle"]
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=receipt, VisibilityTimeout=60)
    # Without the change the message would be back after 1 s.
    assert "Messages" not in sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=2)


def test_change_visibility_after_the_timeout_expired_succeeds(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="expired")
    receipt = receive_one(sqs, queue_url, VisibilityTimeout=0)["ReceiptHandle"]
    response = sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=receipt, VisibilityTimeout=2)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_change_visibility_of_a_deleted_message_is_invalid(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="gone")
    receipt = receive_one(sqs, queue_url)["ReceiptHandle"]
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=receipt)
    with pytest.raises(ClientError) as excinfo:
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=receipt, VisibilityTimeout=42)
    code, message, status, _ = error_of(excinfo)
    assert (code, status) == ("InvalidParameterValue", 400)
    assert message == (
        f"Value {receipt} for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not "
        "available for visibility timeout change."
    )


def test_change_visibility_with_a_garbage_receipt(sqs, queue_url):
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle="garbage", VisibilityTimeout=1)


def test_change_message_visibility_batch(sqs, queue_url):
    for body in ("a", "b"):
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    received = []
    for _ in range(4):
        received += sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=60).get(
            "Messages", []
        )
        if len(received) == 2:
            break
    assert len(received) == 2
    entries = [
        {"Id": f"m{i}", "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0} for i, m in enumerate(received)
    ]
    entries.append({"Id": "garbage", "ReceiptHandle": "garbage", "VisibilityTimeout": 0})
    response = sqs.change_message_visibility_batch(QueueUrl=queue_url, Entries=entries)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert sorted(e["Id"] for e in response["Successful"]) == ["m0", "m1"]
    (failed,) = response["Failed"]
    assert (failed["Id"], failed["Code"], failed["SenderFault"]) == ("garbage", "ReceiptHandleIsInvalid", True)
    again = []
    for _ in range(4):
        again += [
            m["Body"] for m in sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
        ]
        if len(again) == 2:
            break
    assert sorted(again) == ["a", "b"], "both released messages are receivable at once"

    with pytest.raises(sqs.exceptions.TooManyEntriesInBatchRequest) as excinfo:
        sqs.change_message_visibility_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": f"e{i}", "ReceiptHandle": "x", "VisibilityTimeout": 1} for i in range(20)],
        )
    assert error_of(excinfo)[1] == "Maximum number of entries per request are 10. You have sent 20."


# --- Limits and validation -----------------------------------------------------------------------


def test_message_size_counts_utf8_bytes_and_attributes_but_not_the_trace_header(sqs, new_queue):
    _, url = new_queue(Attributes={"MaximumMessageSize": "1024"})
    sqs.send_message(QueueUrl=url, MessageBody="é" * 512)  # 1,024 bytes in UTF-8
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(QueueUrl=url, MessageBody="é" * 513)
    assert error_of(excinfo)[0] == "InvalidParameterValue"
    # Attribute names, types and values count toward the size: 1000 + 6 + 6 + 13 bytes.
    attributes = {"attr-6": {"DataType": "String", "StringValue": "x" * 13}}
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(QueueUrl=url, MessageBody="a" * 1000, MessageAttributes=attributes)
    assert error_of(excinfo)[0] == "InvalidParameterValue"
    # The AWSTraceHeader system attribute does not.
    trace = {"AWSTraceHeader": {"DataType": "String", "StringValue": TRACE_HEADER}}
    sqs.send_message(QueueUrl=url, MessageBody="a" * 1024, MessageSystemAttributes=trace)


@pytest.mark.parametrize(
    "attributes",
    [
        {f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(11)},
        {"AWS.reserved": {"DataType": "String", "StringValue": "v"}},
        {"amazon.reserved": {"DataType": "String", "StringValue": "v"}},
        {"bad..name": {"DataType": "String", "StringValue": "v"}},
        {"typed": {"DataType": "Integer", "StringValue": "1"}},
    ],
    ids=["eleven-attributes", "aws-prefix", "amazon-prefix", "double-dot", "unknown-type"],
)
def test_invalid_message_attributes_are_refused(sqs, queue_url, attributes):
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(QueueUrl=queue_url, MessageBody="x", MessageAttributes=attributes)
    code, _, status, _ = error_of(excinfo)
    assert (code, status) == ("InvalidParameterValue", 400)
    assert counts(sqs, queue_url) == ("0", "0", "0")


@pytest.mark.parametrize(
    ("call", "kwargs"),
    [
        ("send_message", {"MessageBody": "x", "DelaySeconds": 901}),
        ("receive_message", {"VisibilityTimeout": 43201}),
        ("receive_message", {"MaxNumberOfMessages": 0}),
    ],
    ids=["delay-901", "visibility-43201", "max-0"],
)
def test_out_of_range_parameters_are_invalid_parameter_value(sqs, queue_url, call, kwargs):
    with pytest.raises(ClientError) as excinfo:
        getattr(sqs, call)(QueueUrl=queue_url, **kwargs)
    assert error_of(excinfo)[0] == "InvalidParameterValue"


def test_change_visibility_beyond_12_hours_is_invalid(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="x")
    receipt = receive_one(sqs, queue_url)["ReceiptHandle"]
    with pytest.raises(ClientError) as excinfo:
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=receipt, VisibilityTimeout=43201)
    assert error_of(excinfo)[0] == "InvalidParameterValue"


@pytest.mark.parametrize("call", ["send_message_batch", "delete_message_batch", "change_message_visibility_batch"])
def test_empty_batches_are_empty_batch_request(sqs, queue_url, call):
    with pytest.raises(sqs.exceptions.EmptyBatchRequest) as excinfo:
        getattr(sqs, call)(QueueUrl=queue_url, Entries=[])
    code, _, status, _ = error_of(excinfo)
    assert (code, status) == ("AWS.SimpleQueueService.EmptyBatchRequest", 400)


def test_trace_header_from_the_x_ray_http_header(sqs, endpoint, queue_url):
    # AWS's recorded test_aws_trace_header_propagation: SQS takes X-Amzn-Trace-Id from the request.
    client = make_client(endpoint)
    trace = "Root=1-3152b799-8954dae64eda91bc9a23a7e8;Parent=7fa8c0f79203be72;Sampled=1"

    def add_trace_header(request, **_):
        request.headers["X-Amzn-Trace-Id"] = trace

    client.meta.events.register("before-send.sqs.SendMessage", add_trace_header)
    client.send_message(
        QueueUrl=queue_url,
        MessageBody="test",
        MessageAttributes={"timestamp": {"DataType": "Number", "StringValue": "1493147359900"}},
    )
    message = receive_one(
        sqs, queue_url, MessageSystemAttributeNames=["AWSTraceHeader", "SentTimestamp"], MessageAttributeNames=["All"]
    )
    assert set(message["Attributes"]) == {"AWSTraceHeader", "SentTimestamp"}
    assert message["Attributes"]["AWSTraceHeader"] == trace
    assert message["MD5OfMessageAttributes"] == "235c5c510d26fb653d073faed50ae77c"
