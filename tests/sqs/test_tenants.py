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
