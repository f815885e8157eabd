"""SigV4 on API keys: a server with authentication on (a bootstrap admin key) lets boto3 in with
the AWS access key of an API key made with `"aws": true`, within that key's scopes, for SQS and
SNS alike, and refuses the rest with AWS's own codes (all 403): InvalidClientTokenId (unknown or
revoked), SignatureDoesNotMatch (wrong secret), AccessDenied (SQS) and AuthorizationError (SNS)
for a scope the key lacks."""

import json
import os
import tempfile
import urllib.request

import boto3
import botocore.exceptions
import pytest
from botocore.config import Config

from conftest import sluice_serve

ADMIN = "boto3-admin-key-0123456789abcdefgh"


@pytest.fixture(scope="module")
def secured_endpoint():
    with tempfile.TemporaryDirectory(prefix="sluice-keys-") as directory:
        key_file = os.path.join(directory, "admin-key")
        with open(key_file, "w") as f:
            f.write(ADMIN + "\n")
        with sluice_serve("--admin-key-file", key_file) as (_, url):
            yield url


def native(endpoint, method, path, body=None):
    request = urllib.request.Request(
        endpoint + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"authorization": f"Bearer {ADMIN}", "content-type": "application/json"},
    )
    with urllib.request.urlopen(request) as answer:
        return json.loads(answer.read() or b"null")


def aws_key(endpoint, scopes):
    made = native(endpoint, "POST", "/v1/keys", {"name": "boto3", "scopes": scopes, "aws": True})
    assert made["aws_access_key_id"].startswith("SLK") and len(made["aws_secret_access_key"]) == 40
    return made["id"], made["aws_access_key_id"], made["aws_secret_access_key"]


def client(service, endpoint, key_id, secret):
    session = boto3.session.Session(aws_access_key_id=key_id, aws_secret_access_key=secret, region_name="us-east-1")
    config = Config(retries={"mode": "standard", "max_attempts": 1})
    return session.client(service, endpoint_url=endpoint, config=config)


def refused(call, code):
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        call()
    assert raised.value.response["Error"]["Code"] == code, raised.value.response
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    return raised.value.response["Error"].get("Message", "")


def test_sqs_calls_take_the_scopes_of_the_key(secured_endpoint):
    native(secured_endpoint, "POST", "/v1/queues", {"name": "orders-1"})
    native(secured_endpoint, "POST", "/v1/queues", {"name": "billing"})
    key, key_id, secret = aws_key(secured_endpoint, ["queues:orders-*:send,read"])
    sqs = client("sqs", secured_endpoint, key_id, secret)
    url = sqs.get_queue_url(QueueName="orders-1")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="hello")
    assert "queues:orders-1:receive" in refused(lambda: sqs.receive_message(QueueUrl=url), "AccessDenied")
    billing = url.replace("orders-1", "billing")
    refused(lambda: sqs.send_message(QueueUrl=billing, MessageBody="x"), "AccessDenied")
    refused(lambda: sqs.create_queue(QueueName="orders-2"), "AccessDenied")
    # Listing spans every queue, so it needs the pattern `*`.
    refused(lambda: sqs.list_queues(), "AccessDenied")

    refused(lambda: client("sqs", secured_endpoint, key_id, "x" * 40).send_message(QueueUrl=url, MessageBody="x"),
            "SignatureDoesNotMatch")
    refused(lambda: client("sqs", secured_endpoint, "AKIDUNKNOWN", secret).list_queues(), "InvalidClientTokenId")

    native(secured_endpoint, "DELETE", f"/v1/keys/{key}")
    refused(lambda: sqs.send_message(QueueUrl=url, MessageBody="after revoking"), "InvalidClientTokenId")
    # One message went in: the one sent before every refusal.
    counts = native(secured_endpoint, "GET", "/v1/queues/orders-1")["counts"]
    assert counts["visible"] == 1, counts


def test_sns_calls_take_the_scopes_of_the_key(secured_endpoint):
    native(secured_endpoint, "POST", "/v1/topics", {"name": "news"})
    native(secured_endpoint, "POST", "/v1/topics", {"name": "alerts"})
    _, key_id, secret = aws_key(secured_endpoint, ["topics:news:publish", "topics:*:read"])
    sns = client("sns", secured_endpoint, key_id, secret)
    arns = sorted(t["TopicArn"] for t in sns.list_topics()["Topics"])
    news = next(a for a in arns if a.endswith(":news"))
    alerts = next(a for a in arns if a.endswith(":alerts"))
    assert sns.publish(TopicArn=news, Message="hello")["MessageId"]
    refused(lambda: sns.publish(TopicArn=alerts, Message="x"), "AuthorizationError")
    refused(lambda: sns.create_topic(Name="news-2"), "AuthorizationError")
    refused(lambda: sns.subscribe(TopicArn=news, Protocol="sqs", Endpoint="arn:aws:sqs:us-east-1:000000000000:q"),
            "AuthorizationError")


def test_unsigned_calls_are_refused_once_keys_are_asked_for(secured_endpoint):
    request = urllib.request.Request(
        secured_endpoint + "/",
        method="POST",
        data=b"{}",
        headers={"content-type": "application/x-amz-json-1.0", "x-amz-target": "AmazonSQS.ListQueues"},
    )
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request)
    assert raised.value.code == 403
    assert "MissingAuthenticationToken" in raised.value.read().decode()
