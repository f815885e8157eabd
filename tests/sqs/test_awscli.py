"""Runs awscli.sh, the aws CLI scenario, against the session's server, so that it counts (and
fails) with the rest of the suite."""

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


def test_aws_cli_scenario(endpoint):
    result = subprocess.run(
        ["bash", str(HERE / "awscli.sh"), endpoint],
        env={**os.environ, "AWS_CLI": aws_executable(), "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"awscli.sh failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    assert "all aws CLI checks passed" in result.stdout
