"""The wire itself, below boto3: the Query protocol as raw SigV4-signed form posts and GETs with
XML answers (the pre-2024 SDKs, curl, test harnesses), and the JSON protocol's exact error body and
headers and its use on a queue-URL path. Element names, namespace and messages are AWS's."""

import base64
import json
import urllib.parse
import uuid
import xml.etree.ElementTree as ET

import pytest

from sqs_support import QUERY_NS, md5_of_attributes, md5_of_body, queue_url_for, signed_request

NS = QUERY_NS
CR_BODY = '{\r\n"machineID" : "d357006e26ff47439e1ef894225d4307"}\r'
BINARY = b"traceparent\x1e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01\r\n\x00\xff"
ATTRIBUTES = {
    "Foo": {"DataType": "String", "StringValue": "Bar"},
    "Bin": {"DataType": "Binary", "BinaryValue": BINARY},
}


def query(url, params, method="POST"):
    """Sends a Query-protocol request and returns (status, parsed XML root, raw response)."""
    params = {"Version": "2012-11-05", **params}
    if method == "POST":
        body = urllib.parse.urlencode(params).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
        response = signed_request("POST", url, body, headers)
    else:
        response = signed_request("GET", f"{url}?{urllib.parse.urlencode(params)}")
    assert response.body, f"empty body (HTTP {response.status})"
    return response.status, ET.fromstring(response.body), response


def text(element, path):
    found = element.find("/".join(NS + part for part in path.split("/")))
    assert found is not None, f"no <{path}> in {ET.tostring(element)[:600]!r}"
    return found.text or ""


def child(element, name):
    return element.find(NS + name)


def name_values(parent, tag):
    """Flattened <tag><Name/><Value/></tag> (or Key/Value) pairs under `parent` as a dict."""
    pairs = {}
    for entry in parent.findall(NS + tag):
        key = child(entry, "Name") if child(entry, "Name") is not None else child(entry, "Key")
        pairs[key.text] = entry.find(NS + "Value")
    return pairs


def assert_response(root, action):
    assert root.tag == f"{NS}{action}Response", root.tag
    assert text(root, "ResponseMetadata/RequestId")


def unique(prefix="query"):
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def test_query_protocol_core_flow(endpoint):
    name = unique()
    status, root, raw = query(
        endpoint + "/",
        {
            "Action": "CreateQueue",
            "QueueName": name,
            "Attribute.1.Name": "VisibilityTimeout",
            "Attribute.1.Value": "5",
            "Tag.1.Key": "team",
            "Tag.1.Value": "query",
        },
    )
    assert status == 200
    assert raw.headers["Content-Type"].split(";")[0].strip() in ("text/xml", "application/xml")
    assert_response(root, "CreateQueue")
    url = text(root, "CreateQueueResult/QueueUrl")
    assert url == queue_url_for(endpoint, name)

    # SendMessage posted to the queue URL itself (the queue comes from the path), with a body
    # holding carriage returns, a string and a binary (base64 on the wire) message attribute.
    status, root, _ = query(
        url,
        {
            "Action": "SendMessage",
            "MessageBody": CR_BODY,
            "MessageAttribute.1.Name": "Foo",
            "MessageAttribute.1.Value.DataType": "String",
            "MessageAttribute.1.Value.StringValue": "Bar",
            "MessageAttribute.2.Name": "Bin",
            "MessageAttribute.2.Value.DataType": "Binary",
            "MessageAttribute.2.Value.BinaryValue": base64.b64encode(BINARY).decode(),
        },
    )
    assert status == 200
    assert_response(root, "SendMessage")
    assert text(root, "SendMessageResult/MD5OfMessageBody") == md5_of_body(CR_BODY)
    assert text(root, "SendMessageResult/MD5OfMessageAttributes") == md5_of_attributes(ATTRIBUTES)
    message_id = text(root, "SendMessageResult/MessageId")

    # ReceiveMessage as a GET on the queue URL.
    status, root, raw = query(
        url,
        {
            "Action": "ReceiveMessage",
            "AttributeName.1": "All",
            "MessageAttributeName.1": "All",
            "VisibilityTimeout": "30",
        },
        method="GET",
    )
    assert status == 200
    assert_response(root, "ReceiveMessage")
    messages = root.find(NS + "ReceiveMessageResult").findall(NS + "Message")
    assert len(messages) == 1
    message = messages[0]
    assert text(message, "MessageId") == message_id
    # An XML parser turns a literal CR into LF; the server must escape it so the body survives.
    assert text(message, "Body") == CR_BODY
    assert text(message, "MD5OfBody") == md5_of_body(CR_BODY)
    assert b"\r" not in raw.body, "a raw carriage return in XML does not survive parsing"
    system = name_values(message, "Attribute")
    assert {"SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp"} <= set(system)
    assert system["ApproximateReceiveCount"].text == "1"
    user = name_values(message, "MessageAttribute")
    assert set(user) == {"Foo", "Bin"}
    assert text(user["Foo"], "StringValue") == "Bar"
    assert text(user["Foo"], "DataType") == "String"
    assert base64.b64decode(text(user["Bin"], "BinaryValue")) == BINARY
    assert text(user["Bin"], "DataType") == "Binary"
    assert text(message, "MD5OfMessageAttributes") == md5_of_attributes(ATTRIBUTES)
    receipt = text(message, "ReceiptHandle")

    # GetQueueAttributes posted to "/" with the QueueUrl parameter.
    status, root, _ = query(endpoint + "/", {"Action": "GetQueueAttributes", "QueueUrl": url, "AttributeName.1": "All"})
    assert status == 200
    assert_response(root, "GetQueueAttributes")
    attributes = {k: v.text for k, v in name_values(root.find(NS + "GetQueueAttributesResult"), "Attribute").items()}
    assert attributes["VisibilityTimeout"] == "5"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "1"
    assert attributes["QueueArn"] == f"arn:aws:sqs:us-east-1:000000000000:{name}"

    status, root, _ = query(endpoint + "/", {"Action": "ListQueues", "QueueNamePrefix": name})
    assert status == 200
    assert [e.text for e in root.find(NS + "ListQueuesResult").findall(NS + "QueueUrl")] == [url]

    status, root, _ = query(url, {"Action": "ListQueueTags"})
    assert status == 200
    tags = root.find(NS + "ListQueueTagsResult").findall(NS + "Tag")
    assert [(text(t, "Key"), text(t, "Value")) for t in tags] == [("team", "query")]

    status, root, _ = query(url, {"Action": "DeleteMessage", "ReceiptHandle": receipt})
    assert status == 200
    assert_response(root, "DeleteMessage")

    status, root, _ = query(url, {"Action": "ReceiveMessage", "WaitTimeSeconds": "0"})
    assert status == 200
    assert root.find(NS + "ReceiveMessageResult").findall(NS + "Message") == []

    status, root, _ = query(url, {"Action": "DeleteQueue"})
    assert status == 200
    assert_response(root, "DeleteQueue")


def test_query_protocol_batches(endpoint):
    name = unique()
    _, root, _ = query(endpoint + "/", {"Action": "CreateQueue", "QueueName": name})
    url = text(root, "CreateQueueResult/QueueUrl")
    status, root, _ = query(
        url,
        {
            "Action": "SendMessageBatch",
            "SendMessageBatchRequestEntry.1.Id": "good",
            "SendMessageBatchRequestEntry.1.MessageBody": "fine",
            "SendMessageBatchRequestEntry.1.MessageAttribute.1.Name": "Foo",
            "SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType": "String",
            "SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue": "Bar",
            "SendMessageBatchRequestEntry.2.Id": "bad",
            "SendMessageBatchRequestEntry.2.MessageBody": "\x01",
        },
    )
    assert status == 200
    assert_response(root, "SendMessageBatch")
    result = root.find(NS + "SendMessageBatchResult")
    (ok,) = result.findall(NS + "SendMessageBatchResultEntry")
    assert text(ok, "Id") == "good"
    assert text(ok, "MD5OfMessageBody") == md5_of_body("fine")
    assert text(ok, "MD5OfMessageAttributes") == "ae7155c6026991b6d54b11589678bf9c"
    (failed,) = result.findall(NS + "BatchResultErrorEntry")
    assert (text(failed, "Id"), text(failed, "Code"), text(failed, "SenderFault")) == (
        "bad",
        "InvalidMessageContents",
        "true",
    )

    _, root, _ = query(url, {"Action": "ReceiveMessage", "MaxNumberOfMessages": "10"})
    (message,) = root.find(NS + "ReceiveMessageResult").findall(NS + "Message")
    status, root, _ = query(
        url,
        {
            "Action": "DeleteMessageBatch",
            "DeleteMessageBatchRequestEntry.1.Id": "m",
            "DeleteMessageBatchRequestEntry.1.ReceiptHandle": text(message, "ReceiptHandle"),
        },
    )
    assert status == 200
    (deleted,) = root.find(NS + "DeleteMessageBatchResult").findall(NS + "DeleteMessageBatchResultEntry")
    assert text(deleted, "Id") == "m"


def query_error(url, params, status):
    got, root, _ = query(url, params)
    assert got == status, ET.tostring(root)
    assert root.tag == f"{NS}ErrorResponse", root.tag
    assert text(root, "RequestId")
    error = root.find(NS + "Error")
    return text(error, "Type"), text(error, "Code"), text(error, "Message")


def test_query_protocol_error_for_a_missing_queue(endpoint):
    # Recorded real-AWS Query response (test_non_existent_queue, queue-does-not-exist-query).
    assert query_error(endpoint + "/", {"Action": "GetQueueUrl", "QueueName": unique("missing")}, 400) == (
        "Sender",
        "AWS.SimpleQueueService.NonExistentQueue",
        "The specified queue does not exist for this wsdl version.",
    )
    missing_url = queue_url_for(endpoint, unique("missing"))
    _, code, _ = query_error(missing_url, {"Action": "SendMessage", "MessageBody": "x"}, 400)
    assert code == "AWS.SimpleQueueService.NonExistentQueue"


def test_query_protocol_unknown_action_and_missing_parameter(endpoint):
    assert query_error(endpoint + "/", {"Action": "FooBar"}, 400)[1:] == (
        "InvalidAction",
        "The action FooBar is not valid for this endpoint.",
    )
    _, root, _ = query(endpoint + "/", {"Action": "CreateQueue", "QueueName": unique()})
    url = text(root, "CreateQueueResult/QueueUrl")
    assert query_error(url, {"Action": "SendMessage"}, 400)[1:] == (
        "MissingParameter",
        "The request must contain the parameter MessageBody.",
    )


def test_query_protocol_purge_in_progress_is_403(endpoint):
    name = unique()
    _, root, _ = query(endpoint + "/", {"Action": "CreateQueue", "QueueName": name})
    url = text(root, "CreateQueueResult/QueueUrl")
    status, root, _ = query(url, {"Action": "PurgeQueue"})
    assert status == 200
    # Recorded real-AWS Query response (test_successive_purge_calls_fail[sqs_query]).
    assert query_error(url, {"Action": "PurgeQueue"}, 403) == (
        "Sender",
        "AWS.SimpleQueueService.PurgeQueueInProgress",
        f"Only one PurgeQueue operation on {name} is allowed every 60 seconds.",
    )


# --- JSON protocol on the wire -------------------------------------------------------------------


def json_call(url, action, payload, content_type="application/x-amz-json-1.0"):
    headers = {"Content-Type": content_type, "X-Amz-Target": f"AmazonSQS.{action}", "x-amzn-query-mode": "true"}
    return signed_request("POST", url, json.dumps(payload).encode(), headers)


def test_json_error_body_and_headers(endpoint):
    response = json_call(endpoint + "/", "GetQueueUrl", {"QueueName": unique("missing")})
    assert response.status == 400
    assert response.headers["Content-Type"].startswith("application/x-amz-json-1.0")
    assert response.headers["x-amzn-query-error"] == "AWS.SimpleQueueService.NonExistentQueue;Sender"
    assert response.headers["x-amzn-RequestId"]
    body = response.json()
    # Clients take the shape name after '#'; the message member is lower-case "message".
    assert body["__type"].split("#")[-1] == "QueueDoesNotExist"
    assert body["message"] == "The specified queue does not exist."


@pytest.mark.parametrize("content_type", ["application/x-amz-json-1.0", "application/x-amz-json-1.0; charset=utf-8"])
def test_json_protocol_posted_to_the_queue_url_path(endpoint, content_type):
    name = unique("json")
    created = json_call(endpoint + "/", "CreateQueue", {"QueueName": name}, content_type)
    assert created.status == 200, created.body
    assert created.headers["x-amzn-RequestId"]
    url = created.json()["QueueUrl"]
    assert url == queue_url_for(endpoint, name)
    # Some SDKs (PHP) post JSON requests to the queue URL rather than to "/".
    sent = json_call(url, "SendMessage", {"QueueUrl": url, "MessageBody": "json on the queue path"}, content_type)
    assert sent.status == 200, sent.body
    assert sent.json()["MD5OfMessageBody"] == md5_of_body("json on the queue path")
    received = json_call(url, "ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 10}, content_type)
    assert [m["Body"] for m in received.json()["Messages"]] == ["json on the queue path"]
    empty = json_call(url, "ReceiveMessage", {"QueueUrl": url}, content_type)
    assert empty.status == 200 and empty.json() == {}
