"""SNS calls whose answers once differed from AWS's (issue 25), with an unmodified boto3 (SNS has
the Query protocol only) and copies read back through SQS: AWS's code, HTTP status and message
text, or AWS's result where SNS accepts what Sluice refused."""

import json

import pytest
from botocore.exceptions import ClientError

from sns_support import receive_all, subscribe_queue
from sqs_support import ACCOUNT, REGION, error_of

TOPIC_MISSING = f"arn:aws:sns:{REGION}:{ACCOUNT}:no-such-topic"


@pytest.mark.parametrize(
    ("protocol", "subscriber"),
    [("sqs", "not-an-arn"), ("https", "ftp://example.com"), ("http", "")],
    ids=["sqs-not-an-arn", "https-wrong-scheme", "http-empty"],
)
def test_subscribe_to_a_missing_topic_is_not_found_before_the_endpoint_is_checked(sns, protocol, subscriber):
    with pytest.raises(sns.exceptions.NotFoundException) as excinfo:
        sns.subscribe(TopicArn=TOPIC_MISSING, Protocol=protocol, Endpoint=subscriber)
    assert error_of(excinfo)[:3] == ("NotFound", "Topic does not exist", 404)


def test_a_string_array_that_is_no_json_array_is_published_and_filtered_on_its_value(
    sns, sqs, new_topic, new_queue
):
    topic = new_topic()
    _, url = new_queue()
    subscribe_queue(sns, sqs, topic, url, RawMessageDelivery="true", FilterPolicy={"price": [100, 500]})
    for body, value in [("match", "100"), ("no-match", "200"), ("array-match", "[500, 7]")]:
        response = sns.publish(
            TopicArn=topic, Message=body, MessageAttributes={"price": {"DataType": "String.Array", "StringValue": value}}
        )
        assert response["ResponseMetadata"]["HTTPStatusCode"] == 200
    got = receive_all(sqs, url, expected=2)
    assert sorted(m["Body"] for m in got) == ["array-match", "match"]
    by_body = {m["Body"]: m for m in got}
    assert by_body["match"]["MessageAttributes"]["price"] == {"DataType": "String.Array", "StringValue": "100"}


@pytest.mark.parametrize("number", [1000000001, -1000000001, 1e10])
def test_filter_policy_numbers_outside_sns_range_are_refused(sns, sqs, new_topic, new_queue, number):
    topic = new_topic()
    _, url = new_queue()
    policy = json.dumps({"store": [number]})
    reason = "FilterPolicy: Value must be between -1.0E9 and 1.0E9, inclusive"
    with pytest.raises(sns.exceptions.InvalidParameterException) as excinfo:
        subscribe_queue(sns, sqs, topic, url, FilterPolicy=policy)
    assert error_of(excinfo)[:3] == ("InvalidParameter", f"Invalid parameter: Attributes Reason: {reason}", 400)
    subscription = subscribe_queue(sns, sqs, topic, url)
    with pytest.raises(sns.exceptions.InvalidParameterException) as excinfo:
        sns.set_subscription_attributes(
            SubscriptionArn=subscription, AttributeName="FilterPolicy", AttributeValue=policy
        )
    assert error_of(excinfo)[:3] == ("InvalidParameter", f"Invalid parameter: {reason}", 400)
    # The edge of the range is SNS's too.
    edge = json.dumps({"store": [1000000000, -1000000000]})
    sns.set_subscription_attributes(SubscriptionArn=subscription, AttributeName="FilterPolicy", AttributeValue=edge)


def test_more_than_fifty_tags_is_tag_limit_exceeded(sns, new_topic):
    message = "Could not complete request: tag quota of per resource exceeded"
    tags = [{"Key": f"k{i}", "Value": "v"} for i in range(51)]
    topic = new_topic(Tags=tags[:1])
    with pytest.raises(sns.exceptions.TagLimitExceededException) as excinfo:
        sns.tag_resource(ResourceArn=topic, Tags=tags[1:])
    assert error_of(excinfo)[:3] == ("TagLimitExceeded", message, 400)
    assert sns.list_tags_for_resource(ResourceArn=topic)["Tags"] == tags[:1], "a refused call changes no tag"
    sns.tag_resource(ResourceArn=topic, Tags=tags[1:50])
    assert len(sns.list_tags_for_resource(ResourceArn=topic)["Tags"]) == 50
    with pytest.raises(sns.exceptions.TagLimitExceededException) as excinfo:
        new_topic(Tags=tags)
    assert error_of(excinfo)[:3] == ("TagLimitExceeded", message, 400)


def test_delivery_policies_are_shown_normalised(sns, new_topic):
    # The recorded answers of AWS's test_topic_delivery_policy_crud and
    # test_subscribe_external_http_endpoint_content_type.
    set_policy = {"http": {"defaultRequestPolicy": {"headerContentType": "application/json"}}}
    topic = new_topic(Attributes={"DeliveryPolicy": json.dumps(set_policy)})
    attributes = sns.get_topic_attributes(TopicArn=topic)["Attributes"]
    assert json.loads(attributes["DeliveryPolicy"]) == {
        "http": {"disableSubscriptionOverrides": False, "defaultRequestPolicy": {"headerContentType": "application/json"}}
    }
    retry = {"minDelayTarget": 5, "maxDelayTarget": 6, "numRetries": 1}
    sns.set_topic_attributes(
        TopicArn=topic, AttributeName="DeliveryPolicy", AttributeValue=json.dumps({"http": {"defaultHealthyRetryPolicy": retry}})
    )
    attributes = sns.get_topic_attributes(TopicArn=topic)["Attributes"]
    assert json.loads(attributes["DeliveryPolicy"]) == {
        "http": {"defaultHealthyRetryPolicy": retry, "disableSubscriptionOverrides": False}
    }
    assert json.loads(attributes["EffectiveDeliveryPolicy"]) == {
        "http": {
            "defaultHealthyRetryPolicy": {
                **retry,
                "numMaxDelayRetries": 0,
                "numNoDelayRetries": 0,
                "numMinDelayRetries": 0,
                "backoffFunction": "linear",
            },
            "disableSubscriptionOverrides": False,
            "defaultRequestPolicy": {"headerContentType": "text/plain; charset=UTF-8"},
        }
    }
    sns.set_topic_attributes(
        TopicArn=topic, AttributeName="DeliveryPolicy", AttributeValue=json.dumps({"http": {"defaultHealthyRetryPolicy": None}})
    )
    attributes = sns.get_topic_attributes(TopicArn=topic)["Attributes"]
    assert json.loads(attributes["DeliveryPolicy"]) == {"http": {"disableSubscriptionOverrides": False}}
    sns.set_topic_attributes(TopicArn=topic, AttributeName="DeliveryPolicy", AttributeValue="")
    assert "DeliveryPolicy" not in sns.get_topic_attributes(TopicArn=topic)["Attributes"]

    subscription = sns.subscribe(
        TopicArn=topic,
        Protocol="http",
        Endpoint="http://127.0.0.1:9/sns-endpoint",
        Attributes={"DeliveryPolicy": json.dumps({"requestPolicy": {"headerContentType": "text/csv"}})},
        ReturnSubscriptionArn=True,
    )["SubscriptionArn"]
    attributes = sns.get_subscription_attributes(SubscriptionArn=subscription)["Attributes"]
    request_policy = {"headerContentType": "text/csv"}
    assert json.loads(attributes["DeliveryPolicy"]) == {
        "healthyRetryPolicy": None,
        "sicklyRetryPolicy": None,
        "throttlePolicy": None,
        "requestPolicy": request_policy,
        "guaranteed": False,
    }
    assert json.loads(attributes["EffectiveDeliveryPolicy"]) == {
        "healthyRetryPolicy": {
            "minDelayTarget": 20,
            "maxDelayTarget": 20,
            "numRetries": 3,
            "numMaxDelayRetries": 0,
            "numNoDelayRetries": 0,
            "numMinDelayRetries": 0,
            "backoffFunction": "linear",
        },
        "sicklyRetryPolicy": None,
        "throttlePolicy": None,
        "requestPolicy": request_policy,
        "guaranteed": False,
    }


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


def test_an_http_subscription_to_cloud_metadata_is_refused(sns, new_topic):
    """Sluice's own rule (DESIGN.md, egress): outbound calls never go to link-local addresses,
    so SNS Subscribe refuses such an endpoint with the InvalidParameter AWS uses for a bad one."""
    topic = new_topic()
    with pytest.raises(ClientError) as excinfo:
        sns.subscribe(TopicArn=topic, Protocol="http", Endpoint="http://169.254.169.254/latest/meta-data/")
    code, message, status = error_of(excinfo)[:3]
    assert (code, status) == ("InvalidParameter", 400)
    assert "link-local" in message
