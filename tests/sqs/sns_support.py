"""Helpers shared by the SNS tests: subscribing SQS queues to topics and reading back what the
topics delivered to them."""

import json


def queue_arn(sqs, url):
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def subscribe_queue(sns, sqs, topic_arn, url, **attributes):
    """Subscribes the queue at `url`; returns the subscription ARN."""
    attributes = {k: v if isinstance(v, str) else json.dumps(v) for k, v in attributes.items()}
    return sns.subscribe(
        TopicArn=topic_arn, Protocol="sqs", Endpoint=queue_arn(sqs, url), Attributes=attributes
    )["SubscriptionArn"]


def receive_all(sqs, url, expected=None):
    """Every message in the queue now (boto3 checks the body and attribute digests)."""
    messages = []
    for _ in range(20):
        got = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=0 if expected is None or len(messages) >= expected else 1,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])
        if not got:
            break
        messages.extend(got)
        sqs.delete_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]
        )
    return messages
