"""TLS end to end: `sluice serve --tls-cert --tls-key` with a certificate from a test CA made here
with openssl, reached by boto3 with that CA as its bundle, by the native API and by the sluice
CLI (`--ca-cert`); refused by a client that does not trust the CA; and a renewed certificate
served after SIGHUP without a restart."""

import json
import os
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request

import boto3
import botocore.exceptions
import pytest
from botocore.config import Config

from conftest import sluice_binary, sluice_serve


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(directory):
    """A test CA: ca.key and ca.pem."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=sluice test CA", cwd=directory)


def make_leaf(directory, name):
    """A server certificate for localhost and 127.0.0.1 signed by the test CA: NAME.pem, NAME.key."""
    with open(os.path.join(directory, "leaf.ext"), "w") as f:
        f.write("basicConstraints=CA:FALSE\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n"
                "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", "/CN=localhost", cwd=directory)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-out", f"{name}.pem", "-days", "2",
            "-extfile", "leaf.ext", cwd=directory)


def der_of(pem_path):
    with open(pem_path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


@pytest.fixture(scope="module")
def tls_server():
    directory = tempfile.TemporaryDirectory(prefix="sluice-tls-")
    d = directory.name
    make_ca(d)
    make_leaf(d, "first")
    make_leaf(d, "second")
    for ext in ("pem", "key"):
        with open(os.path.join(d, f"first.{ext}")) as src, open(os.path.join(d, f"served.{ext}"), "w") as dst:
            dst.write(src.read())
    try:
        with sluice_serve("--tls-cert", os.path.join(d, "served.pem"), "--tls-key", os.path.join(d, "served.key")) as (server, url):
            assert url.startswith("https://127.0.0.1:"), url
            yield server, url, d
    finally:
        directory.cleanup()


def served_certificate(endpoint, ca):
    """The DER of the certificate a fresh TLS connection to the server is given."""
    host, port = endpoint[len("https://") :].split(":")
    context = ssl.create_default_context(cafile=ca)
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            return tls.getpeercert(binary_form=True)


def test_boto3_with_the_ca_bundle_sends_and_receives(tls_server):
    _, endpoint, d = tls_server
    session = boto3.session.Session(aws_access_key_id="AKIDTLS", aws_secret_access_key="secret", region_name="us-east-1")
    sqs = session.client("sqs", endpoint_url=endpoint, verify=os.path.join(d, "ca.pem"),
                         config=Config(retries={"mode": "standard", "max_attempts": 1}))
    url = sqs.create_queue(QueueName="over-tls")["QueueUrl"]
    assert url.startswith("https://"), url
    sqs.send_message(QueueUrl=url, MessageBody="encrypted on the wire")
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"][0]["Body"] == "encrypted on the wire"

    untrusting = session.client("sqs", endpoint_url=endpoint, config=Config(retries={"mode": "standard", "max_attempts": 1}))
    with pytest.raises(botocore.exceptions.SSLError):
        untrusting.list_queues()


def test_the_native_api_and_the_cli_speak_https(tls_server):
    _, endpoint, d = tls_server
    context = ssl.create_default_context(cafile=os.path.join(d, "ca.pem"))
    with urllib.request.urlopen(endpoint + "/healthz", context=context) as answer:
        assert answer.status == 200
    request = urllib.request.Request(endpoint + "/v1/queues", method="POST", data=json.dumps({"name": "cli-tls"}).encode(),
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, context=context) as answer:
        assert answer.status == 201
    listed = subprocess.run([str(sluice_binary()), "queue", "list", "--server", endpoint, "--ca-cert", os.path.join(d, "ca.pem")],
                            capture_output=True, text=True, timeout=30)
    assert listed.returncode == 0, listed.stderr
    assert "cli-tls" in listed.stdout
    untrusting = subprocess.run([str(sluice_binary()), "queue", "list", "--server", endpoint],
                                capture_output=True, text=True, timeout=30)
    assert untrusting.returncode == 1, untrusting


def test_a_renewed_certificate_is_served_after_sighup(tls_server):
    server, endpoint, d = tls_server
    ca = os.path.join(d, "ca.pem")
    assert served_certificate(endpoint, ca) == der_of(os.path.join(d, "first.pem"))
    for ext in ("pem", "key"):
        with open(os.path.join(d, f"second.{ext}")) as src, open(os.path.join(d, f"served.{ext}"), "w") as dst:
            dst.write(src.read())
    server.send_signal(signal.SIGHUP)
    second = der_of(os.path.join(d, "second.pem"))
    deadline = time.monotonic() + 10
    while served_certificate(endpoint, ca) != second:
        assert time.monotonic() < deadline, "the renewed certificate was not served within 10 s of SIGHUP"
        time.sleep(0.05)
    # A broken file on the next SIGHUP keeps the certificate being served.
    with open(os.path.join(d, "served.pem"), "w") as f:
        f.write("not a certificate\n")
    server.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    assert server.poll() is None, "the server keeps running"
    assert served_certificate(endpoint, ca) == second
