#!/usr/bin/env python3
"""Push delivery rate: how fast Sluice's push worker POSTs a topic's messages to a local HTTP
receiver, beside that receiver's own ceiling measured in the same run.

Starts `sluice serve` (fsync mode, fresh data directory), a receiver on 127.0.0.1 (Python's
threading HTTP server, keep-alive), creates a topic with one raw http subscription to it,
confirms the subscription through the SubscribeURL the confirmation POST carries, publishes
MESSAGES messages in batches of 10 from 4 threads, and waits until every one was POSTed.

    python3 scripts/bench_push.py [--sluice target/release/sluice] [--messages 20000]

The receiver is Python and shares the two cores with the server, so it can be the bottleneck:
its ceiling (16 keep-alive clients POSTing 256 B straight at it) is printed beside the push
rate, and the push rate means something only well below that ceiling. Standard library only.
"""

import argparse
import http.client
import http.server
import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

BODY = "x" * 256
BATCH = 10
PUBLISHERS = 4
CEILING_CLIENTS = 16
CEILING_SECONDS = 3.0


class Receiver(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.notifications = 0
        self.last_at = None
        self.confirmed = threading.Event()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        kind = self.headers.get("x-amz-sns-message-type")
        if kind == "SubscriptionConfirmation":
            url = json.loads(body)["SubscribeURL"]
            threading.Thread(target=confirm, args=(url, self.server), daemon=True).start()
        elif kind == "Notification":
            with self.server.lock:
                self.server.notifications += 1
                self.server.last_at = time.monotonic()
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def confirm(url, server):
    with urllib.request.urlopen(url, timeout=10) as answer:
        answer.read()
    server.confirmed.set()


def call(base, method, path, payload=None):
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(base + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read() or b"null")


def receiver_ceiling(port):
    """POSTs per second the receiver answers from CEILING_CLIENTS keep-alive clients."""
    done = [0] * CEILING_CLIENTS
    deadline = time.monotonic() + CEILING_SECONDS

    def client(i):
        conn = http.client.HTTPConnection("127.0.0.1", port)
        headers = {"x-amz-sns-message-type": "Probe", "Content-Type": "text/plain"}
        while time.monotonic() < deadline:
            conn.request("POST", "/", BODY, headers)
            conn.getresponse().read()
            done[i] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CEILING_CLIENTS)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.monotonic() - started)


def start_sluice(binary, data_dir):
    process = subprocess.Popen(
        [binary, "serve", "--addr", "127.0.0.1:0", "--durability", "fsync", "--data-dir", data_dir],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = process.stdout.readline()
    prefix = "sluice listening on "
    if not line.startswith(prefix):
        process.kill()
        sys.exit(f"sluice serve did not start: {line!r}")
    return process, line[len(prefix):].split()[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sluice", default="target/release/sluice", help="the sluice binary [%(default)s]")
    parser.add_argument("--messages", type=int, default=20_000, help="messages to publish [%(default)s]")
    args = parser.parse_args()

    receiver = Receiver()
    port = receiver.server_address[1]
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    ceiling = receiver_ceiling(port)

    with tempfile.TemporaryDirectory() as data_dir:
        process, base = start_sluice(args.sluice, data_dir)
        try:
            call(base, "POST", "/v1/topics", {"name": "push-bench"})
            call(base, "POST", "/v1/topics/push-bench/subscriptions", {"endpoint": f"http://127.0.0.1:{port}/", "raw": True})
            if not receiver.confirmed.wait(30):
                sys.exit("the subscription confirmation never arrived")

            per_thread = args.messages // PUBLISHERS
            total = per_thread * PUBLISHERS

            def publish():
                for _ in range(per_thread // BATCH):
                    call(base, "POST", "/v1/topics/push-bench/publish", {"messages": [{"body": BODY}] * BATCH})

            started = time.monotonic()
            threads = [threading.Thread(target=publish) for _ in range(PUBLISHERS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            published = time.monotonic() - started
            deadline = time.monotonic() + 300
            while receiver.notifications < total and time.monotonic() < deadline:
                time.sleep(0.05)
            delivered = receiver.notifications
            elapsed = (receiver.last_at or time.monotonic()) - started
        finally:
            process.terminate()
            process.wait(10)

    print(f"push delivery: {delivered} of {total} messages POSTed to one raw http subscription in {elapsed:.1f} s")
    print(f"  publish rate        {total / published:>9,.0f} msg/s (4 threads, batches of {BATCH}, fsync)")
    print(f"  push delivery rate  {delivered / elapsed:>9,.0f} msg/s (first publish to last POST received)")
    print(f"  receiver ceiling    {ceiling:>9,.0f} POST/s ({CEILING_CLIENTS} keep-alive clients, {CEILING_SECONDS:.0f} s, same process)")
    print(f"  push / ceiling      {delivered / elapsed / ceiling:>9.2f}")
    if delivered < total:
        sys.exit(f"only {delivered} of {total} deliveries arrived within 300 s")


if __name__ == "__main__":
    main()
