#!/usr/bin/env bash
# The aws CLI's sns commands, unmodified, against a running Sluice: create-topic, subscribe an SQS
# queue (raw and enveloped), publish with attributes, read the copies back with `aws sqs`,
# list-topics, get-topic-attributes, list-subscriptions-by-topic, an error, delete-topic.
#
# Usage: tests/sqs/awscli_sns.sh ENDPOINT_URL   (test_awscli.py runs it against the session's server)
# AWS_CLI, PYTHON: see awscli_common.sh.
set -euo pipefail

# shellcheck source=awscli_common.sh
source "$(dirname "$0")/awscli_common.sh"

suffix="$("$python" -c 'import uuid; print(uuid.uuid4().hex[:12])')"
topic="cli-topic-$suffix"

topic_arn="$(aws sns create-topic --name "$topic" | json 'd["TopicArn"]')"
expect_eq "create-topic TopicArn" "$topic_arn" "arn:aws:sns:us-east-1:000000000000:$topic"
expect_eq "list-topics" "$(aws sns list-topics | json "'$topic_arn' in [t['TopicArn'] for t in d['Topics']]")" True

raw_url="$(aws sqs create-queue --queue-name "cli-raw-$suffix" | json 'd["QueueUrl"]')"
env_url="$(aws sqs create-queue --queue-name "cli-env-$suffix" | json 'd["QueueUrl"]')"
aws sns subscribe --topic-arn "$topic_arn" --protocol sqs \
    --notification-endpoint "arn:aws:sqs:us-east-1:000000000000:cli-raw-$suffix" \
    --attributes RawMessageDelivery=true >/dev/null
sub_arn="$(aws sns subscribe --topic-arn "$topic_arn" --protocol sqs \
    --notification-endpoint "arn:aws:sqs:us-east-1:000000000000:cli-env-$suffix" | json 'd["SubscriptionArn"]')"
[[ "$sub_arn" == "$topic_arn:"* ]] || fail "subscribe SubscriptionArn: $sub_arn"
expect_eq "list-subscriptions-by-topic" \
    "$(aws sns list-subscriptions-by-topic --topic-arn "$topic_arn" | json 'len(d["Subscriptions"])')" 2

message_id="$(aws sns publish --topic-arn "$topic_arn" --message "hello from the aws cli" --subject greeting \
    --message-attributes '{"kind":{"DataType":"String","StringValue":"created"}}' | json 'd["MessageId"]')"
[[ -n "$message_id" ]] || fail "publish returned no MessageId"

raw="$(aws sqs receive-message --queue-url "$raw_url" --wait-time-seconds 1 --message-attribute-names All)"
expect_eq "raw Body" "$(json 'd["Messages"][0]["Body"]' <<<"$raw")" "hello from the aws cli"
expect_eq "raw attribute" "$(json 'd["Messages"][0]["MessageAttributes"]["kind"]["StringValue"]' <<<"$raw")" created

enveloped="$(aws sqs receive-message --queue-url "$env_url" --wait-time-seconds 1)"
body="$(json 'd["Messages"][0]["Body"]' <<<"$enveloped")"
expect_eq "envelope Type" "$(json 'd["Type"]' <<<"$body")" Notification
expect_eq "envelope MessageId" "$(json 'd["MessageId"]' <<<"$body")" "$message_id"
expect_eq "envelope Message" "$(json 'd["Message"]' <<<"$body")" "hello from the aws cli"
expect_eq "envelope Subject" "$(json 'd["Subject"]' <<<"$body")" greeting
expect_eq "envelope attribute" "$(json 'd["MessageAttributes"]["kind"]["Value"]' <<<"$body")" created

attributes="$(aws sns get-topic-attributes --topic-arn "$topic_arn")"
expect_eq "SubscriptionsConfirmed" "$(json 'd["Attributes"]["SubscriptionsConfirmed"]' <<<"$attributes")" 2

# A missing topic: a non-zero exit and SNS's error code.
if error="$(aws sns publish --topic-arn "$topic_arn-missing" --message x 2>&1)"; then
    fail "publish to a missing topic succeeded: $error"
fi
[[ "$error" == *"(NotFound)"*"Topic does not exist"* ]] || fail "publish error: $error"

aws sns unsubscribe --subscription-arn "$sub_arn" >/dev/null
aws sns delete-topic --topic-arn "$topic_arn" >/dev/null
expect_eq "list-topics after delete-topic" \
    "$(aws sns list-topics | json "'$topic_arn' in [t['TopicArn'] for t in d['Topics']]")" False

echo "awscli_sns.sh: all aws CLI checks passed"
