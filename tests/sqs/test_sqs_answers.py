"""SQS calls whose answers once differed from AWS's (issue 25), each run over both SQS protocols
(JSON and Query) with an unmodified boto3: AWS's code, HTTP status and message text, and where a
call must succeed without effect, proof that nothing changed."""

import pytest
from botocore.exceptions import ClientError

from sqs_support import error_of

# How long the newer of two deliveries holds the message, in seconds: long enough to try the
# older receipt on it, short enough to see the hold end on time.
NEWER_HOLD_S = 3


def receive(sqs, url, **kwargs):
    """The one message of the queue, received (waiting up to 5 s for it)."""
    messages = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5, **kwargs)["Messages"]
    assert len(messages) == 1, messages
    return messages[0]


def not_visible(sqs, url):
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"])
    return attributes["Attributes"]["ApproximateNumberOfMessagesNotVisible"]


def change_visibility_succeeds(sqs, url, receipt, timeout, batch):
    """ChangeMessageVisibility, or a ChangeMessageVisibilityBatch of that one entry, must answer
    200 (and the entry must be among the batch's `Successful`)."""
    if batch:
        entries = [{"Id": "e", "ReceiptHandle": receipt, "VisibilityTimeout": timeout}]
        response = sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries)
        assert [e["Id"] for e in response["Successful"]] == ["e"]
        assert not response.get("Failed"), response["Failed"]
    else:
        response = sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=receipt, VisibilityTimeout=timeout)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200


@pytest.mark.parametrize("batch", [False, True], ids=["single", "batch-entry"])
def test_change_visibility_with_an_older_receipt_of_a_message_received_again_succeeds_without_effect(
    sqs_each_protocol, queue_url, batch
):
    sqs = sqs_each_protocol
    sqs.send_message(QueueUrl=queue_url, MessageBody="received twice")
    older = receive(sqs, queue_url, VisibilityTimeout=1)["ReceiptHandle"]
    newer = receive(sqs, queue_url, VisibilityTimeout=NEWER_HOLD_S)["ReceiptHandle"]
    assert newer != older

    # AWS answers 200 to both a release and an extension by the older receipt...
    change_visibility_succeeds(sqs, queue_url, older, 0, batch)
    change_visibility_succeeds(sqs, queue_url, older, 600, batch)
    # ...and neither touches the newer delivery: the release released nothing,
    assert "Messages" not in sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1)
    assert not_visible(sqs, queue_url) == "1"
    # the extension extended nothing: the newer delivery's hold ends on time (within the 5 s
    # this receive waits, where 600 s would have kept the message hidden),
    again = receive(sqs, queue_url, VisibilityTimeout=60, AttributeNames=["ApproximateReceiveCount"])
    assert again["Attributes"]["ApproximateReceiveCount"] == "3"
    # and the newest receipt is the one that counts.
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=again["ReceiptHandle"])
    assert not_visible(sqs, queue_url) == "0"


@pytest.mark.parametrize("batch", [False, True], ids=["single", "batch-entry"])
def test_change_visibility_of_a_deleted_message_stays_invalid(sqs_each_protocol, queue_url, batch):
    sqs = sqs_each_protocol
    sqs.send_message(QueueUrl=queue_url, MessageBody="gone")
    older = receive(sqs, queue_url, VisibilityTimeout=0)["ReceiptHandle"]
    current = receive(sqs, queue_url)["ReceiptHandle"]
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=current)
    for receipt in (current, older):
        expected = (
            f"Value {receipt} for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not "
            "available for visibility timeout change."
        )
        if batch:
            entries = [{"Id": "e", "ReceiptHandle": receipt, "VisibilityTimeout": 30}]
            response = sqs.change_message_visibility_batch(QueueUrl=queue_url, Entries=entries)
            assert response["ResponseMetadata"]["HTTPStatusCode"] == 200
            (failed,) = response["Failed"]
            assert (failed["Id"], failed["Code"], failed["Message"], failed["SenderFault"]) == (
                "e",
                "InvalidParameterValue",
                expected,
                True,
            )
        else:
            with pytest.raises(ClientError) as excinfo:
                sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=receipt, VisibilityTimeout=30)
            assert error_of(excinfo)[:3] == ("InvalidParameterValue", expected, 400)


@pytest.mark.parametrize(
    ("accounts", "actions", "code", "status", "message"),
    [
        (
            ["111122223333"],
            [
                "ChangeMessageVisibility",
                "DeleteMessage",
                "GetQueueAttributes",
                "GetQueueUrl",
                "ListDeadLetterSourceQueues",
                "PurgeQueue",
                "ReceiveMessage",
                "SendMessage",
            ],
            "OverLimit",
            403,
            "8 Actions were found, maximum allowed is 7.",
        ),
        (
            [],
            ["ReceiveMessage"],
            "InvalidParameterValue",
            400,
            "Value [] for parameter PrincipalId is invalid. Reason: Unable to verify.",
        ),
        (
            ["111122223333"],
            ["SendMessage", "RemovePermission"],
            "InvalidParameterValue",
            400,
            "Value SQS:RemovePermission for parameter ActionName is invalid. Reason: Only the queue owner is allowed "
            "to invoke this action.",
        ),
        (
            ["111122223333"],
            ["TagQueue"],
            "InvalidParameterValue",
            400,
            "Value SQS:TagQueue for parameter ActionName is invalid. Reason: Only the queue owner is allowed to "
            "invoke this action.",
        ),
    ],
    ids=["eight-actions", "no-accounts", "owner-only-action", "owner-only-tagging"],
)
def test_add_permission_refusals(sqs_each_protocol, queue_url, accounts, actions, code, status, message):
    sqs = sqs_each_protocol
    with pytest.raises(ClientError) as excinfo:
        sqs.add_permission(QueueUrl=queue_url, Label="shared", AWSAccountIds=accounts, Actions=actions)
    assert error_of(excinfo)[:3] == (code, message, status)
    if code == "OverLimit":
        assert excinfo.value.__class__ is sqs.exceptions.OverLimit
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["Policy"])
    assert "Policy" not in attributes.get("Attributes", {}), "a refused permission changes no policy"


@pytest.mark.parametrize(
    ("call", "kwargs", "parameter"),
    [("tag_queue", {"Tags": {}}, "Tags"), ("untag_queue", {"TagKeys": []}, "TagKeys")],
    ids=["tag-nothing", "untag-nothing"],
)
def test_tagging_nothing_is_missing_parameter(sqs_each_protocol, new_queue, call, kwargs, parameter):
    sqs = sqs_each_protocol
    _, url = new_queue(tags={"team": "core"})
    with pytest.raises(ClientError) as excinfo:
        getattr(sqs, call)(QueueUrl=url, **kwargs)
    assert error_of(excinfo)[:3] == (
        "MissingParameter",
        f"The request must contain the parameter {parameter}.",
        400,
    )
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "core"}


def test_message_attribute_names_follow_aws_rule_not_ascii(sqs_each_protocol, queue_url):
    sqs = sqs_each_protocol
    # AWS takes letters of any script (AWS's recorded test_send_message_with_invalid_string_attributes).
    names = ["attr.1øßä", "ключ-1", "名前_2", "L" * 256]
    attributes = {name: {"DataType": "String", "StringValue": "v"} for name in names}
    sent = sqs.send_message(QueueUrl=queue_url, MessageBody="named", MessageAttributes=attributes)
    got = receive(sqs, queue_url, MessageAttributeNames=["All"])
    assert set(got["MessageAttributes"]) == set(names)
    assert got["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]

    refusals = [
        (
            "a§b",
            "Message (user) attributes name can only contain upper and lower score characters, digits, periods, "
            "hyphens and underscores. ",
        ),
        ("L" * 257, "Message (user) attribute names must be shorter than 256 Bytes"),
        (
            "AWS.reserved",
            "You can't use message attribute names beginning with 'AWS.' or 'Amazon.'. These strings are reserved "
            "for internal use. Additionally, they cannot start or end with '.'.",
        ),
        ("a..b", "Message (user) attribute name 'a..b' can not have successive '.' characters."),
    ]
    for name, message in refusals:
        with pytest.raises(ClientError) as excinfo:
            sqs.send_message(
                QueueUrl=queue_url, MessageBody="x", MessageAttributes={name: {"DataType": "String", "StringValue": "v"}}
            )
        assert error_of(excinfo)[:3] == ("InvalidParameterValue", message, 400), name


def test_deduplication_id_on_a_standard_queue_in_aws_words(sqs_each_protocol, queue_url):
    sqs = sqs_each_protocol
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(QueueUrl=queue_url, MessageBody="x", MessageDeduplicationId="d-1")
    assert error_of(excinfo)[:3] == (
        "InvalidParameterValue",
        "Value d-1 for parameter MessageDeduplicationId is invalid. Reason: The request include parameter that is "
        "not valid for this queue type.",
        400,
    )
    response = sqs.send_message_batch(
        QueueUrl=queue_url, Entries=[{"Id": "e", "MessageBody": "x", "MessageDeduplicationId": "d-1"}]
    )
    (failed,) = response["Failed"]
    assert (failed["Code"], failed["SenderFault"]) == ("InvalidParameterValue", True)
    assert failed["Message"].endswith("Reason: The request include parameter that is not valid for this queue type.")
    assert "Messages" not in sqs.receive_message(QueueUrl=queue_url), "nothing was enqueued"
