"""SigV4 verification: a server started with `--access-key ID:SECRET` accepts requests that
boto3 signs with that key and refuses others with the error codes AWS uses (403)."""


import boto3
import botocore.exceptions
import pytest
from botocore.config import Config

from conftest import sluice_serve

KEY_ID = "AKIDVERIFIED"
SECRET = "s3cr3t/verified+key"


@pytest.fixture(scope="module")
def verifying_endpoint():
    with sluice_serve("--access-key", f"{KEY_ID}:{SECRET}") as (_, url):
        yield url


def client(endpoint, key_id, secret):
    session = boto3.session.Session(aws_access_key_id=key_id, aws_secret_access_key=secret, region_name="us-east-1")
    config = Config(retries={"mode": "standard", "max_attempts": 1})
    return session.client("sqs", endpoint_url=endpoint, config=config)


def test_the_configured_key_works(verifying_endpoint):
    sqs = client(verifying_endpoint, KEY_ID, SECRET)
    url = sqs.create_queue(QueueName="signed")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="hello")
    messages = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert messages[0]["Body"] == "hello"


def test_a_wrong_secret_is_refused(verifying_endpoint):
    sqs = client(verifying_endpoint, KEY_ID, "not-the-secret")
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        sqs.list_queues()
    assert raised.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_an_unknown_key_is_refused(verifying_endpoint):
    sqs = client(verifying_endpoint, "AKIDUNKNOWN", SECRET)
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        sqs.list_queues()
    assert raised.value.response["Error"]["Code"] == "InvalidClientTokenId"
