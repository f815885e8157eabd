"""STS on the same port: SDKs and tools ask GetCallerIdentity for the account before they build
queue URLs and ARNs."""

from sqs_support import ACCOUNT, make_client


def test_get_caller_identity_returns_the_default_account(endpoint):
    identity = make_client(endpoint, "sts").get_caller_identity()
    assert identity["Account"] == ACCOUNT
    assert identity["ResponseMetadata"]["HTTPStatusCode"] == 200
