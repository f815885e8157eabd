"""Runs awscli.sh and awscli_sns.sh, the aws CLI scenarios for SQS and SNS, against the session's
server, so that they count (and fail) with the rest of the suite."""

import os
import pathlib
import shutil
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def aws_executable() -> str:
    # The CLI pinned in requirements.txt lives beside this interpreter in the virtualenv.
    beside = pathlib.Path(sys.executable).parent / "aws"
    found = str(beside) if beside.is_file() else shutil.which("aws")
    assert found, "no aws CLI: install tests/sqs/requirements.txt"
    return found


def run_scenario(script: str, endpoint: str):
    result = subprocess.run(
        ["bash", str(HERE / script), endpoint],
        env={**os.environ, "AWS_CLI": aws_executable(), "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"{script} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    assert "all aws CLI checks passed" in result.stdout


def test_aws_cli_scenario(endpoint):
    run_scenario("awscli.sh", endpoint)


def test_aws_cli_sns_scenario(endpoint):
    run_scenario("awscli_sns.sh", endpoint)
