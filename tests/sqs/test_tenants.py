"""Tenants over SQS and SNS: two tenants' AWS access keys each make a queue and a topic of the
same names and see only their own: ListQueues, GetQueueUrl, ListTopics, ListSubscriptions, a
URL or ARN of the other tenant's resource (QueueDoesNotExist / NotFound, as if absent), and a
subscription or dead-letter target in the other tenant (refused). The default tenant's admin
does not see them either."""

import json

import botocore.exceptions
import pytest

from test_api_keys import client, native, secured_endpoint  # noqa: F401 (the fixture)


def tenant_key(endpoint, tenant):
    body = {"name": f"{tenant}-aws", "tenant": tenant, "scopes": ["queues:*:*", "topics:*:*"], "aws": True}
    made = native(endpoint, "POST", "/v1/keys", body)
    assert made["tenant"] == tenant
    return made["aws_access_key_id"], made["aws_secret_access_key"]


def error_code(call):
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        call()
    return raised.value.response["Error"]["Code"]


def test_each_tenant_sees_only_its_own_queues_and_topics(secured_endpoint):  # noqa: F811
    endpoint = secured_endpoint
    acme = {s: client(s, endpoint, *tenant_key(endpoint, "acme")) for s in ("sqs", "sns")}
    beta = {s: client(s, endpoint, *tenant_key(endpoint, "beta")) for s in ("sqs", "sns")}

    acme_url = acme["sqs"].create_queue(QueueName="orders")["QueueUrl"]
    beta_url = beta["sqs"].create_queue(QueueName="orders")["QueueUrl"]
    assert acme_url != beta_url
    acme["sqs"].create_queue(QueueName="acme-only")
    acme["sqs"].send_message(QueueUrl=acme_url, MessageBody="for acme")

    # The same name is two queues: beta's is empty.
    assert "Messages" not in beta["sqs"].receive_message(QueueUrl=beta_url)
    got = acme["sqs"].receive_message(QueueUrl=acme_url)["Messages"]
    assert [m["Body"] for m in got] == ["for acme"]

    assert sorted(acme["sqs"].list_queues()["QueueUrls"]) == sorted(
        [acme_url, acme["sqs"].get_queue_url(QueueName="acme-only")["QueueUrl"]])
    assert beta["sqs"].list_queues()["QueueUrls"] == [beta_url]
    assert beta["sqs"].list_queues(QueueNamePrefix="acme").get("QueueUrls", []) == []
    assert error_code(lambda: beta["sqs"].get_queue_url(QueueName="acme-only")) == "AWS.SimpleQueueService.NonExistentQueue"
    # Acme's URL in beta's hands names no queue, whatever beta may do to queues.
    assert error_code(lambda: beta["sqs"].send_message(QueueUrl=acme_url, MessageBody="x")) == \
        "AWS.SimpleQueueService.NonExistentQueue"
    assert error_code(lambda: beta["sqs"].purge_queue(QueueUrl=acme_url)) == "AWS.SimpleQueueService.NonExistentQueue"
    acme_arn = acme["sqs"].get_queue_attributes(QueueUrl=acme_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": acme_arn, "maxReceiveCount": "3"})
    assert error_code(lambda: beta["sqs"].create_queue(QueueName="sneaky", Attributes={"RedrivePolicy": policy})) == \
        "InvalidParameterValue"
    # A name that spells another tenant's prefix is no valid name.
    assert error_code(lambda: beta["sqs"].create_queue(QueueName="acme~orders")) == "InvalidParameterValue"

    # The default tenant's admin lists none of them.
    listed = native(endpoint, "GET", "/v1/queues")["queues"]
    assert not [q for q in listed if q["name"] in ("orders", "acme-only")], listed

    # Topics: the same name twice, each listing only its own, a subscription only to one's own queue.
    acme_topic = acme["sns"].create_topic(Name="events")["TopicArn"]
    beta_topic = beta["sns"].create_topic(Name="events")["TopicArn"]
    assert acme_topic != beta_topic
    assert [t["TopicArn"] for t in acme["sns"].list_topics()["Topics"]] == [acme_topic]
    assert [t["TopicArn"] for t in beta["sns"].list_topics()["Topics"]] == [beta_topic]
    assert error_code(lambda: beta["sns"].get_topic_attributes(TopicArn=acme_topic)) == "NotFound"
    assert error_code(lambda: beta["sns"].publish(TopicArn=acme_topic, Message="x")) == "NotFound"
    assert error_code(lambda: beta["sns"].subscribe(TopicArn=beta_topic, Protocol="sqs", Endpoint=acme_arn)) == \
        "InvalidParameter"
    acme["sns"].subscribe(TopicArn=acme_topic, Protocol="sqs", Endpoint=acme_arn, Attributes={"RawMessageDelivery": "true"})
    assert len(acme["sns"].list_subscriptions()["Subscriptions"]) == 1
    assert beta["sns"].list_subscriptions()["Subscriptions"] == []
    acme["sns"].publish(TopicArn=acme_topic, Message="fanned out")
    got = acme["sqs"].receive_message(QueueUrl=acme_url, WaitTimeSeconds=2)["Messages"]
    assert [m["Body"] for m in got] == ["fanned out"]


def test_tenant_quotas_answer_in_aws_words(secured_endpoint):  # noqa: F811
    endpoint = secured_endpoint
    native(endpoint, "PUT", "/v1/tenants/gamma", {"max_resources": 1, "max_stored_bytes": 8})
    gamma = {s: client(s, endpoint, *tenant_key(endpoint, "gamma")) for s in ("sqs", "sns")}
    url = gamma["sqs"].create_queue(QueueName="only")["QueueUrl"]
    assert gamma["sqs"].create_queue(QueueName="only")["QueueUrl"] == url, "making it again is no new resource"
    assert error_code(lambda: gamma["sqs"].create_queue(QueueName="second")) == "OverLimit"
    assert error_code(lambda: gamma["sns"].create_topic(Name="second")) == "TopicLimitExceeded"
    gamma["sqs"].send_message(QueueUrl=url, MessageBody="five!")
    # Throttling, which SDKs retry: one attempt only here (the client is made so).
    assert error_code(lambda: gamma["sqs"].send_message(QueueUrl=url, MessageBody="way past eight bytes")) == \
        "RequestThrottled"
    used = native(endpoint, "GET", "/v1/tenants/gamma")["usage"]
    assert used == {"resources": 1, "stored_bytes": 5}, used
    # The tenant's rate, all its keys together, in each service's throttling words.
    native(endpoint, "PUT", "/v1/tenants/gamma", {"rate_limit": {"per_second": 1, "burst": 1}})
    gamma["sns"].list_topics()
    assert error_code(lambda: gamma["sns"].list_topics()) == "Throttled"
    # Calls faster than the bucket refills (one a second): some are refused.
    codes = []
    for _ in range(5):
        try:
            gamma["sqs"].list_queues()
            codes.append("ok")
        except botocore.exceptions.ClientError as e:
            codes.append(e.response["Error"]["Code"])
    assert "RequestThrottled" in codes and set(codes) <= {"ok", "RequestThrottled"}, codes


def test_every_action_on_another_tenants_resource_finds_nothing(secured_endpoint):  # noqa: F811
    """The other-tenant column of the SigV4 matrix: each SQS action naming acme's queue and each
    SNS action naming acme's topic or subscription, made with beta's key (whose scopes allow
    everything), answers as if the resource did not exist; acme's own key gets its success."""
    endpoint = secured_endpoint
    acme = {s: client(s, endpoint, *tenant_key(endpoint, "acme2")) for s in ("sqs", "sns")}
    beta = {s: client(s, endpoint, *tenant_key(endpoint, "beta2")) for s in ("sqs", "sns")}
    url = acme["sqs"].create_queue(QueueName="private")["QueueUrl"]
    arn = acme["sqs"].get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    acme["sqs"].send_message(QueueUrl=url, MessageBody="m")
    handle = acme["sqs"].receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"][0]["ReceiptHandle"]
    topic = acme["sns"].create_topic(Name="private")["TopicArn"]
    sub = acme["sns"].subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, ReturnSubscriptionArn=True)
    sub = sub["SubscriptionArn"]

    missing = "AWS.SimpleQueueService.NonExistentQueue"
    sqs_calls = {
        "GetQueueAttributes": lambda c: c.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]),
        "SetQueueAttributes": lambda c: c.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "0"}),
        "SendMessage": lambda c: c.send_message(QueueUrl=url, MessageBody="x"),
        "SendMessageBatch": lambda c: c.send_message_batch(QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "x"}]),
        "ReceiveMessage": lambda c: c.receive_message(QueueUrl=url),
        "ChangeMessageVisibility": lambda c: c.change_message_visibility(
            QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0),
        "DeleteMessageBatch": lambda c: c.delete_message_batch(
            QueueUrl=url, Entries=[{"Id": "1", "ReceiptHandle": handle}]),
        "TagQueue": lambda c: c.tag_queue(QueueUrl=url, Tags={"a": "b"}),
        "ListQueueTags": lambda c: c.list_queue_tags(QueueUrl=url),
        "ListDeadLetterSourceQueues": lambda c: c.list_dead_letter_source_queues(QueueUrl=url),
        "PurgeQueue": lambda c: c.purge_queue(QueueUrl=url),
    }
    for action, call in sqs_calls.items():
        assert error_code(lambda: call(beta["sqs"])) == missing, action
        call(acme["sqs"])
    assert error_code(lambda: beta["sqs"].start_message_move_task(SourceArn=arn)) == "ResourceNotFoundException"

    sns_calls = {
        "GetTopicAttributes": (lambda c: c.get_topic_attributes(TopicArn=topic), "NotFound"),
        "SetTopicAttributes": (lambda c: c.set_topic_attributes(
            TopicArn=topic, AttributeName="DisplayName", AttributeValue="x"), "NotFound"),
        "ListSubscriptionsByTopic": (lambda c: c.list_subscriptions_by_topic(TopicArn=topic), "NotFound"),
        "Publish": (lambda c: c.publish(TopicArn=topic, Message="x"), "NotFound"),
        "TagResource": (lambda c: c.tag_resource(ResourceArn=topic, Tags=[{"Key": "a", "Value": "b"}]),
                        "ResourceNotFound"),
        "ListTagsForResource": (lambda c: c.list_tags_for_resource(ResourceArn=topic), "ResourceNotFound"),
        "GetSubscriptionAttributes": (lambda c: c.get_subscription_attributes(SubscriptionArn=sub), "NotFound"),
    }
    for action, (call, code) in sns_calls.items():
        got = error_code(lambda: call(beta["sns"]))
        assert got == code, (action, got)
        call(acme["sns"])
    # Unsubscribing what is not one's own succeeds, as SNS answers for what is not subscribed,
    # and leaves acme's subscription in place.
    beta["sns"].unsubscribe(SubscriptionArn=sub)
    acme["sns"].get_subscription_attributes(SubscriptionArn=sub)
    # Deletes last: beta's attempts leave acme's resources in place.
    beta["sns"].delete_topic(TopicArn=topic)  # SNS deletes a missing topic without an error
    assert error_code(lambda: beta["sqs"].delete_queue(QueueUrl=url)) == missing
    assert acme["sqs"].get_queue_url(QueueName="private")["QueueUrl"] == url
    assert [t["TopicArn"] for t in acme["sns"].list_topics()["Topics"]] == [topic]
