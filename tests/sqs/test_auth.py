"""SigV4 verification: a server started with `--access-key ID:SECRET` accepts requests that
boto3 signs with that key and refuses others with the error codes AWS uses (403)."""

import os
import select
import subprocess
import tempfile
import threading

import boto3
import botocore.exceptions
import pytest
from botocore.config import Config

from conftest import sluice_binary

KEY_ID = "AKIDVERIFIED"
SECRET = "s3cr3t/verified+key"


@pytest.fixture(scope="module")
def verifying_endpoint():
    data_dir = tempfile.TemporaryDirectory(prefix="sluice-auth-")
    server = subprocess.Popen(
        [str(sluice_binary()), "serve", "--addr", "127.0.0.1:0", "--data-dir", data_dir.name, "--access-key", f"{KEY_ID}:{SECRET}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "SLUICE_LOG": "warn"},
    )
    try:
        ready, _, _ = select.select([server.stdout], [], [], 30)
        line = server.stdout.readline().decode() if ready else ""
        assert line.startswith("sluice listening on "), line
        threading.Thread(target=server.stdout.read, daemon=True).start()
        yield line.strip()[len("sluice listening on ") :]
    finally:
        server.kill()
        server.wait()
        data_dir.cleanup()


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
