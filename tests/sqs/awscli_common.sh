# Sourced by awscli.sh and awscli_sns.sh: the aws CLI pointed at the Sluice at ENDPOINT_URL ($1),
# with dummy credentials, no profile or config of the developer's and no pager, and the checks
# both scenarios use. Sets `endpoint`, `aws_cli`, `python`; defines aws, fail, json, expect_eq.
# AWS_CLI: the aws executable (default: aws on PATH); PYTHON: a python3 to parse JSON with.

script="$(basename "$0")"
endpoint="${1:?usage: $script ENDPOINT_URL}"
aws_cli="${AWS_CLI:-aws}"
python="${PYTHON:-python3}"

export AWS_ACCESS_KEY_ID=AKIDSLUICE AWS_SECRET_ACCESS_KEY=secret AWS_DEFAULT_REGION=us-east-1
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_PAGER=""
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL AWS_ENDPOINT_URL_SQS AWS_ENDPOINT_URL_SNS

aws() {
    "$aws_cli" --endpoint-url "$endpoint" --region us-east-1 --output json "$@"
}

fail() {
    echo "$script: FAIL: $*" >&2
    exit 1
}

# json EXPR: evaluates a Python expression over the JSON document on stdin (as `d`); prints str().
json() {
    "$python" -c 'import json, sys; d = json.loads(sys.stdin.read().strip() or "{}"); print(eval(sys.argv[1]))' "$1"
}

expect_eq() { # expect_eq WHAT ACTUAL EXPECTED
    [[ "$2" == "$3" ]] || fail "$1: expected '$3', got '$2'"
}
