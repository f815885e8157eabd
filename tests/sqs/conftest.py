"""Starts one real `sluice serve` for the whole SQS compatibility session (port 0, its own data
directory) and hands tests unmodified boto3 clients pointed at it.

The binary is $SLUICE_BIN, else target/debug/sluice; this file builds nothing (scripts/test.sh
runs `cargo build -p sluice` first). With $SLUICE_SQS_ENDPOINT set, the tests run against that
already-running server instead (for debugging one by hand). The server's log of the last run is
kept in target/sluice-sqs-tests.log."""

import contextlib
import os
import pathlib
import select
import subprocess
import tempfile
import threading
import uuid

import pytest

from sqs_support import make_client

REPO = pathlib.Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 30

# Keep the developer's own AWS setup (profiles, endpoints, real keys) out of every client here.
for variable in [name for name in os.environ if name.startswith("AWS_")]:
    del os.environ[variable]
os.environ["AWS_CONFIG_FILE"] = "/dev/null"
os.environ["AWS_SHARED_CREDENTIALS_FILE"] = "/dev/null"


def sluice_binary() -> pathlib.Path:
    binary = pathlib.Path(os.environ.get("SLUICE_BIN") or REPO / "target" / "debug" / "sluice")
    if not binary.is_file():
        pytest.exit(f"no sluice binary at {binary}: run `cargo build -p sluice` or set SLUICE_BIN", returncode=2)
    return binary


@contextlib.contextmanager
def sluice_serve(*args):
    """A `sluice serve` of its own on port 0 with `args` (flags such as `--access-key`), over a
    fresh data directory: yields `(process, url)` and kills it after."""
    data_dir = tempfile.TemporaryDirectory(prefix="sluice-own-")
    server = subprocess.Popen(
        [str(sluice_binary()), "serve", "--addr", "127.0.0.1:0", "--data-dir", os.path.join(data_dir.name, "data"), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "SLUICE_LOG": "warn"},
    )
    try:
        ready, _, _ = select.select([server.stdout], [], [], STARTUP_TIMEOUT_S)
        line = server.stdout.readline().decode() if ready else ""
        assert line.startswith("sluice listening on "), line
        threading.Thread(target=server.stdout.read, daemon=True).start()
        yield server, line.strip()[len("sluice listening on ") :]
    finally:
        server.kill()
        server.wait()
        data_dir.cleanup()


@pytest.fixture(scope="session")
def endpoint():
    """`http://127.0.0.1:PORT` of a running server, as the server announced it."""
    if os.environ.get("SLUICE_SQS_ENDPOINT"):
        yield os.environ["SLUICE_SQS_ENDPOINT"].rstrip("/")
        return
    data_dir = tempfile.TemporaryDirectory(prefix="sluice-sqs-data-")
    log_path = REPO / "target" / "sluice-sqs-tests.log"
    log_path.parent.mkdir(exist_ok=True)
    log = open(log_path, "wb")
    server = subprocess.Popen(
        [str(sluice_binary()), "serve", "--addr", "127.0.0.1:0", "--data-dir", data_dir.name],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=log,
        env={**os.environ, "SLUICE_LOG": "info"},
    )
    try:
        ready, _, _ = select.select([server.stdout], [], [], STARTUP_TIMEOUT_S)
        line = server.stdout.readline().decode() if ready else ""
        prefix = "sluice listening on "
        if not line.startswith(prefix):
            server.kill()
            server.wait()
            pytest.exit(f"sluice serve did not announce itself (got {line!r}); log:\n{log_path.read_text()}")
        # Drain stdout so that the server can never block on a full pipe.
        threading.Thread(target=server.stdout.read, daemon=True).start()
        url = line.strip()[len(prefix) :]
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0"), url
        yield url
    finally:
        server.kill()
        server.wait()
        log.close()
        data_dir.cleanup()


@pytest.fixture(scope="session")
def sqs(endpoint):
    return make_client(endpoint)


@pytest.fixture(scope="session")
def sqs_query(endpoint):
    """An unmodified boto3 SQS client that speaks the Query protocol (see `make_client`)."""
    return make_client(endpoint, protocol="query")


@pytest.fixture(params=["json", "query"])
def sqs_each_protocol(request, sqs, sqs_query):
    """The SQS client of each protocol in turn: a test using it runs once with JSON and once with
    the Query protocol, where AWS answers alike."""
    return sqs if request.param == "json" else sqs_query


@pytest.fixture
def new_queue(sqs):
    """Creates a standard queue with a unique name: `new_queue(Attributes=..., tags=...)` returns
    (name, url)."""

    def create(prefix: str = "q", **kwargs):
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        url = sqs.create_queue(QueueName=name, **kwargs)["QueueUrl"]
        return name, url

    return create


@pytest.fixture
def queue_url(new_queue):
    return new_queue()[1]


@pytest.fixture(scope="session")
def sns(endpoint):
    """An unmodified boto3 SNS client at the same port (SNS is told apart by its signing scope)."""
    return make_client(endpoint, "sns")


@pytest.fixture
def new_topic(sns):
    """Creates a topic with a unique name: `new_topic(fifo=False, Attributes=..., Tags=...)` returns
    its ARN."""

    def create(prefix: str = "t", fifo: bool = False, **kwargs):
        name = f"{prefix}-{uuid.uuid4().hex[:12]}" + (".fifo" if fifo else "")
        if fifo:
            kwargs.setdefault("Attributes", {})["FifoTopic"] = "true"
        return sns.create_topic(Name=name, **kwargs)["TopicArn"]

    return create
