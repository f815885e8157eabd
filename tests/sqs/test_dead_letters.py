"""Dead-letter queues and redrive through boto3: a RedrivePolicy moves a message received more
than maxReceiveCount times, ListDeadLetterSourceQueues finds the sources, and
Start/List/CancelMessageMoveTask move messages back. Expected shapes and messages are from AWS's
recorded test_dead_letter_queue_message_attributes and test_sqs_move_task snapshots."""

import json

import pytest
from botocore.exceptions import ClientError

from sqs_support import error_of, md5_of_attributes, queue_arn, wait_for

TRACE_HEADER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
MOVE_TASK_TIMEOUT_S = 10


def dlq_pipe(new_queue, max_receive_count):
    """Creates a dead-letter queue and a source queue that dead-letters into it:
    returns ((source name, url), (dlq name, url))."""
    dlq = new_queue("dlq")
    policy = json.dumps({"deadLetterTargetArn": queue_arn(dlq[0]), "maxReceiveCount": max_receive_count})
    source = new_queue("src", Attributes={"RedrivePolicy": policy})
    return source, dlq


def receive_all(sqs, url, **kwargs):
    return sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, **kwargs).get("Messages", [])


def dead_letter(sqs, source_url, max_receive_count, expected):
    """Receives every message of `source_url` `max_receive_count` times with VisibilityTimeout=0,
    then once more, which moves them all to the dead-letter queue."""
    for round_number in range(1, max_receive_count + 1):
        got = []
        for _ in range(4):
            got += receive_all(sqs, source_url, VisibilityTimeout=0, AttributeNames=["ApproximateReceiveCount"])
            if len(got) >= expected:
                break
        assert len(got) == expected, f"receive round {round_number}: {got}"
        assert {m["Attributes"]["ApproximateReceiveCount"] for m in got} == {str(round_number)}
    assert receive_all(sqs, source_url, VisibilityTimeout=0) == [], "the next receive dead-letters instead"


@pytest.mark.parametrize("max_receive_count", [1, 2])
def test_message_lands_in_the_dead_letter_queue_with_its_source_arn(sqs, new_queue, max_receive_count):
    (source_name, source_url), (_, dlq_url) = dlq_pipe(new_queue, max_receive_count)
    user = {"MyAttribute": {"StringValue": "foobar", "DataType": "String"}}
    system = {"AWSTraceHeader": {"StringValue": TRACE_HEADER, "DataType": "String"}}
    sent = sqs.send_message(
        QueueUrl=source_url, MessageBody="message-1", MessageAttributes=user, MessageSystemAttributes=system
    )

    dead_letter(sqs, source_url, max_receive_count, expected=1)

    (message,) = receive_all(sqs, dlq_url, AttributeNames=["All"], MessageAttributeNames=["All"])
    assert message["MessageId"] == sent["MessageId"]
    assert message["Body"] == "message-1"
    assert message["MD5OfBody"] == sent["MD5OfMessageBody"]
    assert message["MessageAttributes"] == user
    assert message["MD5OfMessageAttributes"] == "adb59cd4678ea5a855436b949cd07ab6" == md5_of_attributes(user)
    attributes = message["Attributes"]
    assert attributes["DeadLetterQueueSourceArn"] == queue_arn(source_name)
    assert attributes["AWSTraceHeader"] == TRACE_HEADER
    # The receive count goes on from the source queue's receives.
    assert attributes["ApproximateReceiveCount"] == str(max_receive_count + 1)
    source_counts = sqs.get_queue_attributes(QueueUrl=source_url, AttributeNames=["All"])["Attributes"]
    assert (source_counts["ApproximateNumberOfMessages"], source_counts["ApproximateNumberOfMessagesNotVisible"]) == (
        "0",
        "0",
    )


def test_list_dead_letter_source_queues_after_a_redrive_policy_is_set(sqs, new_queue):
    (_, source_url), (_, dlq_url) = dlq_pipe(new_queue, 3)
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq_url)["queueUrls"] == [source_url]


def test_move_task_moves_messages_back_to_their_source(sqs, new_queue):
    # AWS's recorded test_move_task_workflow_with_default_destination.
    # No DestinationArn: each message goes back to the queue it was dead-lettered from.
    (_, source_url), (dlq_name, dlq_url) = dlq_pipe(new_queue, 1)
    sent = [sqs.send_message(QueueUrl=source_url, MessageBody=f"message-{i}")["MessageId"] for i in range(2)]
    dead_letter(sqs, source_url, 1, expected=2)
    dlq_arn = queue_arn(dlq_name)

    task = sqs.start_message_move_task(SourceArn=dlq_arn)
    assert task["TaskHandle"]

    def completed():
        results = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
        return results if results and results[0]["Status"] == "COMPLETED" else None

    (result,) = wait_for(completed, MOVE_TASK_TIMEOUT_S, "the move task to complete")
    assert result["SourceArn"] == dlq_arn
    assert result["ApproximateNumberOfMessagesMoved"] == 2
    assert result["ApproximateNumberOfMessagesToMove"] == 2
    assert isinstance(result["StartedTimestamp"], int) and result["StartedTimestamp"] > 10**12  # epoch ms
    # No destination was given, and a finished task has no handle any more.
    assert "DestinationArn" not in result
    assert "TaskHandle" not in result

    back = []
    for _ in range(4):
        back += receive_all(sqs, source_url, VisibilityTimeout=60)
        if len(back) >= 2:
            break
    assert sorted(m["MessageId"] for m in back) == sorted(sent)
    assert sorted(m["Body"] for m in back) == ["message-0", "message-1"]
    assert receive_all(sqs, dlq_url) == []


def test_move_task_to_an_explicit_destination(sqs, new_queue):
    # AWS's recorded test_basic_move_task_workflow.
    (_, source_url), (dlq_name, _) = dlq_pipe(new_queue, 1)
    destination_name, destination_url = new_queue("dest")
    for i in range(2):
        sqs.send_message(QueueUrl=source_url, MessageBody=f"message-{i}")
    dead_letter(sqs, source_url, 1, expected=2)
    dlq_arn = queue_arn(dlq_name)

    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=queue_arn(destination_name))

    def completed():
        results = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
        return results if results and results[0]["Status"] == "COMPLETED" else None

    (result,) = wait_for(completed, MOVE_TASK_TIMEOUT_S, "the move task to complete")
    assert result["DestinationArn"] == queue_arn(destination_name)
    assert result["ApproximateNumberOfMessagesMoved"] == 2
    moved = []
    for _ in range(4):
        moved += receive_all(sqs, destination_url, VisibilityTimeout=60)
        if len(moved) >= 2:
            break
    assert sorted(m["Body"] for m in moved) == ["message-0", "message-1"]
    assert receive_all(sqs, source_url) == []


def test_cancel_a_running_move_task(sqs, new_queue):
    # AWS's recorded test_move_task_cancel and test_start_multiple_move_tasks.
    (_, source_url), (dlq_name, dlq_url) = dlq_pipe(new_queue, 1)
    destination_name, _ = new_queue("dest")
    for i in range(6):
        sqs.send_message(QueueUrl=source_url, MessageBody=f"message-{i}")
    dead_letter(sqs, source_url, 1, expected=6)
    dlq_arn = queue_arn(dlq_name)

    handle = sqs.start_message_move_task(
        SourceArn=dlq_arn, DestinationArn=queue_arn(destination_name), MaxNumberOfMessagesPerSecond=1
    )["TaskHandle"]
    (running,) = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
    assert running["Status"] == "RUNNING"
    assert running["TaskHandle"] == handle
    assert running["MaxNumberOfMessagesPerSecond"] == 1
    assert running["ApproximateNumberOfMessagesToMove"] == 6
    assert running["DestinationArn"] == queue_arn(destination_name)

    with pytest.raises(ClientError) as excinfo:
        sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=queue_arn(destination_name))
    code, message, status, _ = error_of(excinfo)
    assert (code, status) == ("InvalidParameterValue", 400)
    assert message == (
        "There is already a task running. Only one active task is allowed for a source queue arn at a given time."
    )

    cancelled = sqs.cancel_message_move_task(TaskHandle=handle)
    moved = cancelled["ApproximateNumberOfMessagesMoved"]
    assert 0 <= moved < 6, "at one message per second the task cannot have finished"

    def settled():
        (result,) = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
        return result if result["Status"] == "CANCELLED" else None

    result = wait_for(settled, MOVE_TASK_TIMEOUT_S, "the task to be cancelled")
    assert result["ApproximateNumberOfMessagesMoved"] < 6
    left = int(
        sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"][
            "ApproximateNumberOfMessages"
        ]
    )
    assert left == 6 - result["ApproximateNumberOfMessagesMoved"]


def test_move_task_errors(sqs, new_queue):
    # Recorded real-AWS errors from test_sqs_move_task.
    not_a_dlq, _ = new_queue("plain")
    destination, _ = new_queue("dest")
    with pytest.raises(ClientError) as excinfo:
        sqs.start_message_move_task(SourceArn=queue_arn(not_a_dlq), DestinationArn=queue_arn(destination))
    assert error_of(excinfo)[:3] == (
        "InvalidParameterValue",
        "Source queue must be configured as a Dead Letter Queue.",
        400,
    )

    _, (dlq_name, _) = dlq_pipe(new_queue, 1)
    with pytest.raises(sqs.exceptions.ResourceNotFoundException) as excinfo:
        sqs.start_message_move_task(
            SourceArn=queue_arn(dlq_name), DestinationArn=queue_arn(destination) + "doesntexist"
        )
    assert error_of(excinfo)[:3] == (
        "ResourceNotFoundException",
        "The resource that you specified for the DestinationArn parameter doesn't exist.",
        404,
    )

    with pytest.raises(ClientError) as excinfo:
        sqs.cancel_message_move_task(TaskHandle="foobared")
    assert error_of(excinfo)[:3] == ("InvalidParameterValue", "Value for parameter TaskHandle is invalid.", 400)


def test_list_message_move_tasks_of_a_dlq_without_tasks_is_empty(sqs, new_queue):
    _, (dlq_name, _) = dlq_pipe(new_queue, 1)
    assert sqs.list_message_move_tasks(SourceArn=queue_arn(dlq_name)).get("Results", []) == []


def test_list_message_move_tasks_returns_the_most_recent_first(sqs, new_queue):
    (_, source_url), (dlq_name, _) = dlq_pipe(new_queue, 1)
    sqs.send_message(QueueUrl=source_url, MessageBody="one")
    dead_letter(sqs, source_url, 1, expected=1)
    dlq_arn = queue_arn(dlq_name)

    def newest_completed(expected_count):
        def check():
            results = sqs.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=10)["Results"]
            return results if len(results) == expected_count and results[0]["Status"] == "COMPLETED" else None

        return check

    sqs.start_message_move_task(SourceArn=dlq_arn)
    wait_for(newest_completed(1), MOVE_TASK_TIMEOUT_S, "the first move task to complete")
    # A second task over the now empty dead-letter queue moves nothing.
    sqs.start_message_move_task(SourceArn=dlq_arn)
    results = wait_for(newest_completed(2), MOVE_TASK_TIMEOUT_S, "the second move task to complete")
    assert [r["ApproximateNumberOfMessagesMoved"] for r in results] == [0, 1]
    assert results[0]["StartedTimestamp"] >= results[1]["StartedTimestamp"]
    # MaxResults defaults to 1: only the most recent task.
    (latest,) = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
    assert latest["ApproximateNumberOfMessagesMoved"] == 0


def test_start_move_task_from_a_missing_queue(sqs):
    with pytest.raises(sqs.exceptions.ResourceNotFoundException) as excinfo:
        sqs.start_message_move_task(SourceArn=queue_arn("no-such-queue-anywhere"))
    code, message, status, _ = error_of(excinfo)
    assert (code, status) == ("ResourceNotFoundException", 404)
    assert message == "The resource that you specified for the SourceArn parameter doesn't exist."
