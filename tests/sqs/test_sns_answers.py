"""SNS calls whose answers once differed from AWS's (issue 25), with an unmodified boto3 (SNS has
the Query protocol only) and copies read back through SQS: AWS's code, HTTP status and message
text, or AWS's result where SNS accepts what Sluice refused."""

import pytest
from botocore.exceptions import ClientError

from sns_support import receive_all, subscribe_queue
from sqs_support import error_of


def test_message_attribute_names_follow_sns_rule_not_ascii(sns, sqs, new_topic, new_queue):
    topic = new_topic()
    _, url = new_queue()
    subscribe_queue(sns, sqs, topic, url, RawMessageDelivery="true")
    attributes = {"attr.1øßä": {"DataType": "String", "StringValue": "v"}}
    sns.publish(TopicArn=topic, Message="named", MessageAttributes=attributes)
    (got,) = receive_all(sqs, url, expected=1)
    assert got["MessageAttributes"] == attributes

    # AWS's texts (recorded test_empty_or_wrong_message_attributes): the name whole, not cut at a dot.
    refusals = [
        (
            "attr.1^x",
            "Invalid non-alphanumeric character '#x5E' was found in the message attribute name. Can only include "
            "alphanumeric characters, hyphens, underscores, or dots.",
        ),
        (".attr.1", "Invalid message attribute name starting with character '.' was found."),
        ("attr.1.", "Invalid message attribute name ending with character '.' was found."),
        ("attr..1", "Message attribute name can not have successive '.' character."),
        ("a" * 257, "Length of message attribute name must be less than 256 bytes."),
    ]
    for name, message in refusals:
        for call in ("publish", "publish_batch"):
            with pytest.raises(ClientError) as excinfo:
                value = {name: {"DataType": "String", "StringValue": "v"}}
                if call == "publish":
                    sns.publish(TopicArn=topic, Message="x", MessageAttributes=value)
                else:
                    entry = {"Id": "e", "Message": "x", "MessageAttributes": value}
                    sns.publish_batch(TopicArn=topic, PublishBatchRequestEntries=[entry])
            assert error_of(excinfo)[:3] == ("ParameterValueInvalid", message, 400), (call, name)
    assert receive_all(sqs, url) == [], "nothing refused was delivered"
