"""Queue management through boto3 (JSON protocol): CreateQueue, GetQueueUrl, ListQueues,
DeleteQueue, Get/SetQueueAttributes, PurgeQueue, tags and permissions. Expected values are AWS's
own, from the recorded real-AWS responses in shared/reference/aws-data."""

import json
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from sqs_support import ACCOUNT, error_of, queue_arn, queue_url_for

# GetQueueAttributes(All) on a fresh standard queue, recorded against real AWS
# (test_set_queue_attributes_default_values); timestamps and the ARN are checked separately.
STANDARD_DEFAULTS = {
    "ApproximateNumberOfMessages": "0",
    "ApproximateNumberOfMessagesDelayed": "0",
    "ApproximateNumberOfMessagesNotVisible": "0",
    "DelaySeconds": "0",
    "MaximumMessageSize": "1048576",
    "MessageRetentionPeriod": "345600",
    "ReceiveMessageWaitTimeSeconds": "0",
    "SqsManagedSseEnabled": "true",
    "VisibilityTimeout": "30",
}
VOLATILE = {"CreatedTimestamp", "LastModifiedTimestamp", "QueueArn"}


def unique(prefix="q"):
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def all_attributes(sqs, url):
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]


def counts(sqs, url):
    attributes = all_attributes(sqs, url)
    return (
        attributes["ApproximateNumberOfMessages"],
        attributes["ApproximateNumberOfMessagesNotVisible"],
        attributes["ApproximateNumberOfMessagesDelayed"],
    )


# --- CreateQueue / GetQueueUrl -------------------------------------------------------------------


def test_create_queue_returns_the_url_and_get_queue_url_finds_it(sqs, endpoint):
    name = unique()
    created = sqs.create_queue(QueueName=name)
    assert created["QueueUrl"] == queue_url_for(endpoint, name)
    assert created["ResponseMetadata"]["HTTPStatusCode"] == 200
    # x-amzn-RequestId becomes boto3's RequestId.
    assert created["ResponseMetadata"]["RequestId"]
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == queue_url_for(endpoint, name)


def test_get_all_attributes_of_a_fresh_standard_queue_has_exactly_the_aws_key_set(sqs, new_queue):
    before_s = int(time.time())
    name, url = new_queue()
    after_s = int(time.time())
    attributes = all_attributes(sqs, url)
    assert set(attributes) == set(STANDARD_DEFAULTS) | VOLATILE
    assert {k: v for k, v in attributes.items() if k not in VOLATILE} == STANDARD_DEFAULTS
    assert attributes["QueueArn"] == queue_arn(name)
    # Timestamps are epoch seconds, not milliseconds.
    for key in ("CreatedTimestamp", "LastModifiedTimestamp"):
        assert before_s - 2 <= int(attributes[key]) <= after_s + 2, (key, attributes[key])


def test_create_queue_with_attributes_and_update_them(sqs, new_queue):
    # The scenario of AWS's recorded test_create_and_update_queue_attributes.
    name, url = new_queue(
        Attributes={
            "MessageRetentionPeriod": "604800",
            "ReceiveMessageWaitTimeSeconds": "10",
            "VisibilityTimeout": "20",
        }
    )
    created = all_attributes(sqs, url)
    assert {k: v for k, v in created.items() if k not in VOLATILE} == {
        **STANDARD_DEFAULTS,
        "MessageRetentionPeriod": "604800",
        "ReceiveMessageWaitTimeSeconds": "10",
        "VisibilityTimeout": "20",
    }
    sqs.set_queue_attributes(
        QueueUrl=url, Attributes={"DelaySeconds": "420", "MaximumMessageSize": "2048", "VisibilityTimeout": "69"}
    )
    updated = all_attributes(sqs, url)
    assert {k: v for k, v in updated.items() if k not in VOLATILE} == {
        **STANDARD_DEFAULTS,
        "DelaySeconds": "420",
        "MaximumMessageSize": "2048",
        "MessageRetentionPeriod": "604800",
        "ReceiveMessageWaitTimeSeconds": "10",
        "VisibilityTimeout": "69",
    }
    assert updated["CreatedTimestamp"] == created["CreatedTimestamp"]
    assert int(updated["LastModifiedTimestamp"]) >= int(created["LastModifiedTimestamp"])


def test_get_queue_attributes_returns_only_the_names_asked_for(sqs, queue_url):
    only = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["VisibilityTimeout", "DelaySeconds"])
    assert only["Attributes"] == {"VisibilityTimeout": "30", "DelaySeconds": "0"}
    # No AttributeNames at all: no attributes.
    assert sqs.get_queue_attributes(QueueUrl=queue_url).get("Attributes", {}) == {}


def test_create_queue_with_tags(sqs, new_queue):
    _, url = new_queue(tags={"team": "payments", "env": "test"})
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "payments", "env": "test"}


def test_create_queue_is_idempotent_with_the_same_attributes(sqs, endpoint):
    name = unique()
    attributes = {"VisibilityTimeout": "45", "DelaySeconds": "2"}
    first = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    again = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    assert first == again == queue_url_for(endpoint, name)
    assert all_attributes(sqs, first)["VisibilityTimeout"] == "45"


def test_create_queue_with_different_attributes_is_queue_name_exists(sqs):
    name = unique()
    sqs.create_queue(QueueName=name, Attributes={"DelaySeconds": "1"})
    with pytest.raises(sqs.exceptions.QueueNameExists) as excinfo:
        sqs.create_queue(QueueName=name, Attributes={"DelaySeconds": "2"})
    code, message, status, response = error_of(excinfo)
    assert (code, status) == ("QueueAlreadyExists", 400)
    assert response["Error"]["QueryErrorCode"] == "QueueNameExists"
    assert message == "A queue already exists with the same name and a different value for attribute DelaySeconds"
    # The existing queue is untouched.
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    assert all_attributes(sqs, url)["DelaySeconds"] == "1"


def test_a_fifo_queue_is_created_with_its_fifo_name(sqs, endpoint):
    name = f"fifo-{uuid.uuid4().hex[:10]}.fifo"
    url = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true"})["QueueUrl"]
    assert url == queue_url_for(endpoint, name)
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url
    assert sqs.list_queues(QueueNamePrefix=name)["QueueUrls"] == [url]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["FifoQueue", "QueueArn"])["Attributes"]
    assert attributes == {"FifoQueue": "true", "QueueArn": queue_arn(name)}


@pytest.mark.parametrize(
    ("name", "attributes", "message"),
    [
        (
            "fifo-{}",
            {"FifoQueue": "true"},
            "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length",
        ),
        ("fifo-{}.fifo", {}, "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"),
        # The name is checked before the attributes, as LocalStack found AWS does.
        ("fifo-{}.fifo", {"FifoQueue": "false"}, "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"),
    ],
    ids=["fifo-attribute-only", "fifo-name-only", "fifo-name-standard-attribute"],
)
def test_fifo_name_and_queue_type_must_agree(sqs, name, attributes, message):
    name = name.format(uuid.uuid4().hex[:10])
    with pytest.raises(ClientError) as excinfo:
        sqs.create_queue(QueueName=name, Attributes=attributes)
    code, got, status, _ = error_of(excinfo)
    assert (code, got, status) == ("InvalidParameterValue", message, 400), excinfo.value.response
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName=name)


@pytest.mark.parametrize("name", ["has space", "bang!", "x" * 81])
def test_invalid_queue_names_are_refused(sqs, name):
    with pytest.raises(ClientError) as excinfo:
        sqs.create_queue(QueueName=name)
    code, _, status, _ = error_of(excinfo)
    assert (code, status) == ("InvalidParameterValue", 400)


def test_create_queue_with_an_out_of_range_attribute_is_invalid_attribute_value(sqs):
    with pytest.raises(ClientError) as excinfo:
        sqs.create_queue(QueueName=unique(), Attributes={"VisibilityTimeout": "43201"})
    code, _, status, _ = error_of(excinfo)
    assert (code, status) == ("InvalidAttributeValue", 400)


def test_fifo_only_attributes_on_a_standard_queue_are_invalid_attribute_name(sqs, queue_url):
    # Recorded real-AWS error (test_set_unsupported_attribute_standard).
    with pytest.raises(ClientError) as excinfo:
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"FifoQueue": "true"})
    code, message, status, _ = error_of(excinfo)
    assert (code, message, status) == ("InvalidAttributeName", "Unknown Attribute FifoQueue.", 400)


def test_get_queue_url_of_a_missing_queue_is_queue_does_not_exist(sqs):
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as excinfo:
        sqs.get_queue_url(QueueName=unique("missing"))
    code, message, status, response = error_of(excinfo)
    # Recorded real-AWS response (test_non_existent_queue).
    assert code == "AWS.SimpleQueueService.NonExistentQueue"
    assert message == "The specified queue does not exist."
    assert status == 400
    assert response["Error"]["QueryErrorCode"] == "QueueDoesNotExist"
    assert response["Error"]["Type"] == "Sender"
    headers = response["ResponseMetadata"]["HTTPHeaders"]
    assert headers["x-amzn-query-error"] == "AWS.SimpleQueueService.NonExistentQueue;Sender"
    assert headers["content-type"].startswith("application/x-amz-json-1.0")
    assert response["ResponseMetadata"]["RequestId"]


def test_operations_on_a_missing_queue_url_are_queue_does_not_exist(sqs, endpoint):
    url = queue_url_for(endpoint, unique("missing"))
    calls = [
        lambda: sqs.send_message(QueueUrl=url, MessageBody="x"),
        lambda: sqs.receive_message(QueueUrl=url),
        lambda: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]),
        lambda: sqs.purge_queue(QueueUrl=url),
        lambda: sqs.delete_queue(QueueUrl=url),
        lambda: sqs.list_queue_tags(QueueUrl=url),
    ]
    for call in calls:
        with pytest.raises(sqs.exceptions.QueueDoesNotExist) as excinfo:
            call()
        assert error_of(excinfo)[0] == "AWS.SimpleQueueService.NonExistentQueue"


def test_the_queue_is_found_from_its_url_path_whatever_the_host(sqs, new_queue):
    name, _ = new_queue()
    sqs.send_message(QueueUrl=f"http://some-other-host:4566/{ACCOUNT}/{name}", MessageBody="via another host")
    attributes = sqs.get_queue_attributes(
        QueueUrl=f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/{name}", AttributeNames=["ApproximateNumberOfMessages"]
    )
    assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "1"


# --- ListQueues / DeleteQueue --------------------------------------------------------------------


def test_list_queues_filters_by_prefix(sqs, endpoint):
    prefix = unique("lst")
    names = [f"{prefix}-{i}" for i in range(3)]
    for name in names:
        sqs.create_queue(QueueName=name)
    other = unique("other")
    sqs.create_queue(QueueName=other)
    listed = sqs.list_queues(QueueNamePrefix=prefix)
    assert sorted(listed["QueueUrls"]) == sorted(queue_url_for(endpoint, n) for n in names)
    # Without MaxResults there is no NextToken.
    assert "NextToken" not in listed
    everything = sqs.list_queues()["QueueUrls"]
    assert queue_url_for(endpoint, other) in everything
    assert set(queue_url_for(endpoint, n) for n in names) <= set(everything)
    assert sqs.list_queues(QueueNamePrefix=unique("nothing-has-this-prefix")).get("QueueUrls", []) == []


def test_list_queues_paginates_with_max_results_and_next_token(sqs, endpoint):
    prefix = unique("page")
    names = [f"{prefix}-{i}" for i in range(5)]
    for name in names:
        sqs.create_queue(QueueName=name)
    seen = []
    pages = 0
    kwargs = {"QueueNamePrefix": prefix, "MaxResults": 2}
    while True:
        page = sqs.list_queues(**kwargs)
        pages += 1
        assert 1 <= len(page["QueueUrls"]) <= 2, page
        seen += page["QueueUrls"]
        if "NextToken" not in page:
            break
        assert pages < 5, "pagination does not end"
        kwargs["NextToken"] = page["NextToken"]
    assert pages == 3
    assert sorted(seen) == sorted(queue_url_for(endpoint, n) for n in names)
    # boto3's own paginator reaches the same queues.
    paginator = sqs.get_paginator("list_queues")
    paged = [
        url
        for p in paginator.paginate(QueueNamePrefix=prefix, PaginationConfig={"PageSize": 2})
        for url in p["QueueUrls"]
    ]
    assert sorted(paged) == sorted(seen)


def test_delete_queue_removes_it(sqs, new_queue):
    name, url = new_queue()
    sqs.send_message(QueueUrl=url, MessageBody="goes with the queue")
    sqs.delete_queue(QueueUrl=url)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName=name)
    assert url not in sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", [])
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.send_message(QueueUrl=url, MessageBody="x")


# --- SetQueueAttributes with policies ------------------------------------------------------------


def test_redrive_policy_round_trips_and_an_empty_value_removes_it(sqs, new_queue):
    dlq_name, _ = new_queue("dlq")
    _, url = new_queue()
    policy = {"deadLetterTargetArn": queue_arn(dlq_name), "maxReceiveCount": 3}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": json.dumps(policy)})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"]
    assert json.loads(got["RedrivePolicy"]) == policy
    assert "RedrivePolicy" in all_attributes(sqs, url)

    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": ""})
    assert "RedrivePolicy" not in all_attributes(sqs, url)


def test_redrive_policy_is_accepted_at_creation(sqs, new_queue):
    dlq_name, _ = new_queue("dlq")
    policy = {"deadLetterTargetArn": queue_arn(dlq_name), "maxReceiveCount": 5}
    _, url = new_queue(Attributes={"RedrivePolicy": json.dumps(policy)})
    assert json.loads(all_attributes(sqs, url)["RedrivePolicy"]) == policy


def test_redrive_policy_without_max_receive_count_is_invalid(sqs, new_queue, queue_url):
    dlq_name, _ = new_queue("dlq")
    with pytest.raises(ClientError) as excinfo:
        sqs.set_queue_attributes(
            QueueUrl=queue_url, Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": queue_arn(dlq_name)})}
        )
    code, _, status, _ = error_of(excinfo)
    assert status == 400 and code in ("InvalidParameterValue", "InvalidAttributeValue"), code


def test_redrive_allow_policy_round_trips(sqs, new_queue):
    source_name, _ = new_queue("src")
    _, url = new_queue("dlq")
    allow = {"redrivePermission": "byQueue", "sourceQueueArns": [queue_arn(source_name)]}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedriveAllowPolicy": json.dumps(allow)})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedriveAllowPolicy"])["Attributes"]
    assert json.loads(got["RedriveAllowPolicy"]) == allow


def test_policy_round_trips(sqs, new_queue):
    name, url = new_queue()
    policy = {
        "Version": "2012-10-17",
        "Id": "sluice-test-policy",
        "Statement": [
            {
                "Sid": "AllowSend",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn(name),
            }
        ],
    }
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(policy)})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]
    assert json.loads(got["Policy"]) == policy
    assert json.loads(all_attributes(sqs, url)["Policy"]) == policy


# --- Tags ----------------------------------------------------------------------------------------


def test_tag_untag_and_list_queue_tags(sqs, queue_url):
    # The scenario of AWS's recorded test_tag_untag_queue.
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=queue_url)
    sqs.tag_queue(QueueUrl=queue_url, Tags={"tag1": "value1", "tag2": "value2", "tag3": ""})
    assert sqs.list_queue_tags(QueueUrl=queue_url)["Tags"] == {"tag1": "value1", "tag2": "value2", "tag3": ""}
    sqs.untag_queue(QueueUrl=queue_url, TagKeys=["tag1", "tag3", "never-set"])
    assert sqs.list_queue_tags(QueueUrl=queue_url)["Tags"] == {"tag2": "value2"}
    # A key tagged again is overwritten; keys are case-sensitive.
    sqs.tag_queue(QueueUrl=queue_url, Tags={"tag2": "changed", "TAG2": "upper"})
    assert sqs.list_queue_tags(QueueUrl=queue_url)["Tags"] == {"tag2": "changed", "TAG2": "upper"}
    sqs.untag_queue(QueueUrl=queue_url, TagKeys=["tag2", "TAG2"])
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=queue_url)


# --- AddPermission / RemovePermission ------------------------------------------------------------


def statements(sqs, url):
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"]).get("Attributes", {})
    if "Policy" not in attributes:
        return None
    return json.loads(attributes["Policy"])


def test_add_and_remove_permission_edit_the_policy(sqs, new_queue):
    # The scenario and responses of AWS's recorded test_sqs_permission_lifecycle.
    name, url = new_queue()
    arn = queue_arn(name)
    sqs.add_permission(
        QueueUrl=url, Label="crossaccountpermission", AWSAccountIds=[ACCOUNT], Actions=["ReceiveMessage"]
    )
    policy = statements(sqs, url)
    assert policy is not None, "AddPermission must create a Policy"
    assert policy["Version"] == "2008-10-17"
    assert policy["Statement"] == [
        {
            "Sid": "crossaccountpermission",
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
            "Action": "SQS:ReceiveMessage",
            "Resource": arn,
        }
    ]

    with pytest.raises(ClientError) as excinfo:
        sqs.add_permission(
            QueueUrl=url, Label="crossaccountpermission", AWSAccountIds=[ACCOUNT], Actions=["SendMessage"]
        )
    code, message, status, _ = error_of(excinfo)
    assert (code, status) == ("InvalidParameterValue", 400)
    assert message == "Value crossaccountpermission for parameter Label is invalid. Reason: Already exists."

    sqs.add_permission(
        QueueUrl=url, Label="crossaccountpermission2", AWSAccountIds=[ACCOUNT], Actions=["ReceiveMessage"]
    )
    assert [s["Sid"] for s in statements(sqs, url)["Statement"]] == [
        "crossaccountpermission",
        "crossaccountpermission2",
    ]

    sqs.remove_permission(QueueUrl=url, Label="crossaccountpermission")
    assert [s["Sid"] for s in statements(sqs, url)["Statement"]] == ["crossaccountpermission2"]
    sqs.remove_permission(QueueUrl=url, Label="crossaccountpermission2")
    # With no statement left the Policy attribute is gone.
    assert statements(sqs, url) is None

    with pytest.raises(ClientError) as excinfo:
        sqs.remove_permission(QueueUrl=url, Label="crossaccountpermission2")
    code, message, status, _ = error_of(excinfo)
    assert (code, status) == ("InvalidParameterValue", 400)
    assert message == "Value crossaccountpermission2 for parameter Label is invalid. Reason: can't find label."


def test_add_permission_for_two_accounts_lists_both_principals(sqs, new_queue):
    _, url = new_queue()
    sqs.add_permission(QueueUrl=url, Label="two", AWSAccountIds=[ACCOUNT, "668614515564"], Actions=["SendMessage"])
    (statement,) = statements(sqs, url)["Statement"]
    assert sorted(statement["Principal"]["AWS"]) == sorted(
        [f"arn:aws:iam::{ACCOUNT}:root", "arn:aws:iam::668614515564:root"]
    )
    assert statement["Action"] == "SQS:SendMessage"


# --- PurgeQueue ----------------------------------------------------------------------------------


def test_purge_queue_removes_visible_in_flight_and_delayed_messages(sqs, new_queue):
    name, url = new_queue()
    sqs.send_message(QueueUrl=url, MessageBody="visible")
    sqs.send_message(QueueUrl=url, MessageBody="will be in flight")
    sqs.send_message(QueueUrl=url, MessageBody="delayed", DelaySeconds=600)
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=600)
    assert len(received["Messages"]) == 1
    assert counts(sqs, url) == ("1", "1", "1")

    sqs.purge_queue(QueueUrl=url)
    assert counts(sqs, url) == ("0", "0", "0")
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)

    # A second purge within 60 seconds (recorded real-AWS response, test_successive_purge_calls_fail).
    with pytest.raises(sqs.exceptions.PurgeQueueInProgress) as excinfo:
        sqs.purge_queue(QueueUrl=url)
    code, message, status, response = error_of(excinfo)
    assert (code, status) == ("AWS.SimpleQueueService.PurgeQueueInProgress", 403)
    assert message == f"Only one PurgeQueue operation on {name} is allowed every 60 seconds."
    assert response["Error"]["QueryErrorCode"] == "PurgeQueueInProgress"


# --- ListDeadLetterSourceQueues ------------------------------------------------------------------


def test_list_dead_letter_source_queues(sqs, new_queue):
    dlq_name, dlq_url = new_queue("dlq")
    policy = json.dumps({"deadLetterTargetArn": queue_arn(dlq_name), "maxReceiveCount": 2})
    sources = [new_queue("src", Attributes={"RedrivePolicy": policy})[1] for _ in range(2)]
    new_queue("unrelated")
    listed = sqs.list_dead_letter_source_queues(QueueUrl=dlq_url)
    assert sorted(listed["queueUrls"]) == sorted(sources)

    # A queue that is nobody's dead-letter queue has an empty (but present, required) list.
    _, lonely = new_queue("lonely")
    assert sqs.list_dead_letter_source_queues(QueueUrl=lonely)["queueUrls"] == []


# --- More of CreateQueue, GetQueueUrl and policies -----------------------------------------------


def test_queue_urls_use_the_host_the_client_used(endpoint):
    from sqs_support import make_client

    port = endpoint.rsplit(":", 1)[1]
    via_localhost = make_client(f"http://localhost:{port}")
    name = unique()
    assert via_localhost.create_queue(QueueName=name)["QueueUrl"] == f"http://localhost:{port}/{ACCOUNT}/{name}"
    assert via_localhost.get_queue_url(QueueName=name)["QueueUrl"] == f"http://localhost:{port}/{ACCOUNT}/{name}"


def test_get_queue_url_with_the_owner_account(sqs, new_queue, endpoint):
    name, url = new_queue()
    assert sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=ACCOUNT)["QueueUrl"] == url


def test_get_queue_attributes_with_an_unknown_name_is_invalid_attribute_name(sqs, queue_url):
    with pytest.raises(sqs.exceptions.InvalidAttributeName) as excinfo:
        sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["NoSuchAttribute"])
    code, _, status, _ = error_of(excinfo)
    assert (code, status) == ("InvalidAttributeName", 400)


@pytest.mark.parametrize(
    "policy",
    [
        {"maxReceiveCount": 0},
        {"maxReceiveCount": 1001},
        {"maxReceiveCount": 3, "deadLetterTargetArn": f"arn:aws:sqs:us-east-1:{ACCOUNT}:no-such-queue-anywhere"},
    ],
    ids=["count-0", "count-1001", "missing-target"],
)
def test_invalid_redrive_policies_are_refused(sqs, new_queue, queue_url, policy):
    dlq_name, _ = new_queue("dlq")
    policy = {"deadLetterTargetArn": queue_arn(dlq_name), **policy}
    with pytest.raises(ClientError) as excinfo:
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"RedrivePolicy": json.dumps(policy)})
    code, _, status, _ = error_of(excinfo)
    assert (code, status) == ("InvalidParameterValue", 400)
    assert "RedrivePolicy" not in all_attributes(sqs, queue_url)


def test_redrive_policy_accepts_max_receive_count_as_a_string(sqs, new_queue, queue_url):
    dlq_name, _ = new_queue("dlq")
    policy = {"deadLetterTargetArn": queue_arn(dlq_name), "maxReceiveCount": "4"}
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"RedrivePolicy": json.dumps(policy)})
    got = json.loads(all_attributes(sqs, queue_url)["RedrivePolicy"])
    assert got["deadLetterTargetArn"] == queue_arn(dlq_name)
    assert int(got["maxReceiveCount"]) == 4
