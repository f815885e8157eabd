"""Helpers shared by the SQS compatibility tests: AWS's MD5 digests written out from the published
algorithm, error unpacking, SigV4-signed raw HTTP for the Query protocol, and polling."""

import hashlib
import json
import pathlib
import struct
import time
import urllib.error
import urllib.request

import boto3
import botocore.session
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

ACCOUNT = "000000000000"
REGION = "us-east-1"
ACCESS_KEY = "AKIDSLUICE"
SECRET_KEY = "secret"
QUERY_NS = "{http://queue.amazonaws.com/doc/2012-11-05/}"


# The last SQS model of the Query protocol (botocore commit 79c92132e, Apache-2.0; its
# documentation strings left out), which botocore no longer ships: with it first on the data path
# an unmodified boto3 speaks the Query protocol to SQS, as boto3 < 1.34.90 and other older SDKs do.
QUERY_MODEL_PATH = pathlib.Path(__file__).resolve().parent / "query_model"


def make_client(endpoint: str, service: str = "sqs", protocol: str = "json"):
    """An unmodified boto3 client for `service` at `endpoint`, with the dummy keys. For SQS,
    `protocol="query"` gives one that speaks the Query protocol (form posts, XML answers)."""
    botocore_session = botocore.session.Session()
    if protocol == "query":
        assert service == "sqs", "only SQS has two protocols"
        botocore_session.get_component("data_loader").search_paths.insert(0, str(QUERY_MODEL_PATH))
    session = boto3.session.Session(
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
        botocore_session=botocore_session,
    )
    # No retries: a compatibility failure must show as the first response, not be retried away.
    config = Config(retries={"mode": "standard", "max_attempts": 1}, read_timeout=40, connect_timeout=5)
    client = session.client(service, endpoint_url=endpoint, config=config)
    if service == "sqs":
        assert client.meta.service_model.protocol == protocol, client.meta.service_model.protocol
    return client


def md5_of_body(body: str) -> str:
    return hashlib.md5(body.encode("utf-8")).hexdigest()


def md5_of_attributes(attributes: dict) -> str:
    """MD5OfMessageAttributes as the Java SDK's MessageMD5ChecksumInterceptor computes it: for each
    name in byte order, length-prefixed name and data type, then a transport byte (1 = string,
    2 = binary) and the length-prefixed value. Lengths are big-endian u32."""

    def framed(data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + data

    out = bytearray()
    for name in sorted(attributes, key=lambda n: n.encode("utf-8")):
        value = attributes[name]
        out += framed(name.encode("utf-8"))
        out += framed(value["DataType"].encode("utf-8"))
        if "StringValue" in value:
            out += b"\x01" + framed(value["StringValue"].encode("utf-8"))
        else:
            out += b"\x02" + framed(bytes(value["BinaryValue"]))
    return hashlib.md5(bytes(out)).hexdigest()


def error_of(excinfo):
    """(Error.Code, Error.Message, HTTP status, the whole response) of a botocore ClientError."""
    response = excinfo.value.response
    error = response["Error"]
    return error["Code"], error.get("Message"), response["ResponseMetadata"]["HTTPStatusCode"], response


def queue_url_for(endpoint: str, name: str) -> str:
    return f"{endpoint}/{ACCOUNT}/{name}"


def queue_arn(name: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"


def wait_for(condition, timeout_s: float, what: str, interval_s: float = 0.1):
    """Polls `condition` until it returns a truthy value, for work the server does in the
    background (message move tasks); fails with `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(interval_s)


class RawResponse:
    def __init__(self, status: int, headers, body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)


def signed_request(method: str, url: str, body: bytes = b"", headers=None, service: str = "sqs") -> RawResponse:
    """Sends one HTTP request signed with SigV4 and the dummy keys, as any SDK would, and returns
    the response whatever its status."""
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), service, REGION).add_auth(request)
    prepared = request.prepare()
    raw = urllib.request.Request(url, data=body if method != "GET" else None, method=method)
    for name, value in prepared.headers.items():
        raw.add_header(name, value)
    try:
        with urllib.request.urlopen(raw, timeout=30) as response:
            return RawResponse(response.status, response.headers, response.read())
    except urllib.error.HTTPError as error:
        return RawResponse(error.code, error.headers, error.read())
