#!/usr/bin/env bash
# The aws CLI, unmodified, against a running Sluice: create-queue, send-message, receive-message,
# delete-message, get-queue-attributes, list-queues and an error, each output checked.
#
# Usage: tests/sqs/awscli.sh ENDPOINT_URL   (test_awscli.py runs it against the session's server)
# AWS_CLI, PYTHON: see awscli_common.sh.
set -euo pipefail

# shellcheck source=awscli_common.sh
source "$(dirname "$0")/awscli_common.sh"

sqs() {
    aws sqs "$@"
}

name="cli-$("$python" -c 'import uuid; print(uuid.uuid4().hex[:12])')"
body='hello from the aws cli'
body_md5="$(printf '%s' "$body" |
    "$python" -c 'import hashlib, sys; print(hashlib.md5(sys.stdin.buffer.read()).hexdigest())')"

created="$(sqs create-queue --queue-name "$name" --attributes VisibilityTimeout=45)"
url="$(json 'd["QueueUrl"]' <<<"$created")"
expect_eq "create-queue QueueUrl" "$url" "$endpoint/000000000000/$name"

listed="$(sqs list-queues --queue-name-prefix "$name")"
expect_eq "list-queues" "$(json 'd["QueueUrls"]' <<<"$listed")" "['$url']"

sent="$(sqs send-message --queue-url "$url" --message-body "$body" \
    --message-attributes '{"Foo":{"DataType":"String","StringValue":"Bar"}}')"
expect_eq "send-message MD5OfMessageBody" "$(json 'd["MD5OfMessageBody"]' <<<"$sent")" "$body_md5"
expect_eq "send-message MD5OfMessageAttributes" "$(json 'd["MD5OfMessageAttributes"]' <<<"$sent")" \
    "ae7155c6026991b6d54b11589678bf9c"
message_id="$(json 'd["MessageId"]' <<<"$sent")"
[[ -n "$message_id" ]] || fail "send-message returned no MessageId"

attributes="$(sqs get-queue-attributes --queue-url "$url" --attribute-names All)"
expect_eq "ApproximateNumberOfMessages after send" \
    "$(json 'd["Attributes"]["ApproximateNumberOfMessages"]' <<<"$attributes")" 1
expect_eq "VisibilityTimeout" "$(json 'd["Attributes"]["VisibilityTimeout"]' <<<"$attributes")" 45
expect_eq "QueueArn" "$(json 'd["Attributes"]["QueueArn"]' <<<"$attributes")" "arn:aws:sqs:us-east-1:000000000000:$name"

received="$(sqs receive-message --queue-url "$url" --wait-time-seconds 1 \
    --message-system-attribute-names All --message-attribute-names All)"
expect_eq "receive-message count" "$(json 'len(d["Messages"])' <<<"$received")" 1
expect_eq "receive-message MessageId" "$(json 'd["Messages"][0]["MessageId"]' <<<"$received")" "$message_id"
expect_eq "receive-message Body" "$(json 'd["Messages"][0]["Body"]' <<<"$received")" "$body"
expect_eq "receive-message MD5OfBody" "$(json 'd["Messages"][0]["MD5OfBody"]' <<<"$received")" "$body_md5"
expect_eq "receive-message attribute" \
    "$(json 'd["Messages"][0]["MessageAttributes"]["Foo"]["StringValue"]' <<<"$received")" Bar
expect_eq "receive-message ApproximateReceiveCount" \
    "$(json 'd["Messages"][0]["Attributes"]["ApproximateReceiveCount"]' <<<"$received")" 1
receipt="$(json 'd["Messages"][0]["ReceiptHandle"]' <<<"$received")"

attributes="$(sqs get-queue-attributes --queue-url "$url" \
    --attribute-names ApproximateNumberOfMessages ApproximateNumberOfMessagesNotVisible)"
expect_eq "counts while in flight" "$(json 'sorted(d["Attributes"].items())' <<<"$attributes")" \
    "[('ApproximateNumberOfMessages', '0'), ('ApproximateNumberOfMessagesNotVisible', '1')]"

sqs delete-message --queue-url "$url" --receipt-handle "$receipt" >/dev/null

attributes="$(sqs get-queue-attributes --queue-url "$url" \
    --attribute-names ApproximateNumberOfMessages ApproximateNumberOfMessagesNotVisible)"
expect_eq "counts after delete" "$(json 'sorted(d["Attributes"].items())' <<<"$attributes")" \
    "[('ApproximateNumberOfMessages', '0'), ('ApproximateNumberOfMessagesNotVisible', '0')]"

empty="$(sqs receive-message --queue-url "$url")"
expect_eq "receive-message on an empty queue" "$(json '"Messages" in d' <<<"$empty")" False

# A missing queue: a non-zero exit and the legacy error code in the message.
if error="$(sqs get-queue-url --queue-name "missing-$name" 2>&1)"; then
    fail "get-queue-url of a missing queue succeeded: $error"
fi
[[ "$error" == *"AWS.SimpleQueueService.NonExistentQueue"* ]] || fail "get-queue-url error: $error"

sqs delete-queue --queue-url "$url" >/dev/null
listed="$(sqs list-queues --queue-name-prefix "$name")"
expect_eq "list-queues after delete-queue" "$(json 'd.get("QueueUrls", [])' <<<"$listed")" "[]"

echo "awscli.sh: all aws CLI checks passed"
