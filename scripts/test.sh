#!/usr/bin/env bash
# Runs Sluice's whole test suite: formatting, lints, and every crate's tests (core, the store
# conformance suite on the embedded backend, HTTP, end-to-end through the real binary and the
# CLI, the SIGKILL crash test, and the SQS compatibility suite with unmodified boto3, aws CLI and
# aws-sdk-rust). Needs only cargo and python3; it installs anything else it needs.
#
# SLUICE_TEST_PG_URL: when set, PostgreSQL must answer there or this script fails (CI sets it).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -n "${SLUICE_TEST_PG_URL:-}" ]]; then
    # No PostgreSQL backend exists yet; check the database anyway so that a CI run with the
    # variable set fails loudly on an unreachable server instead of silently testing less.
    if command -v pg_isready >/dev/null; then
        pg_isready -d "$SLUICE_TEST_PG_URL" -t 10 || { echo "error: PostgreSQL at SLUICE_TEST_PG_URL is unreachable" >&2; exit 1; }
    else
        echo "error: SLUICE_TEST_PG_URL is set but pg_isready is not installed to check it" >&2
        exit 1
    fi
fi

echo "==> cargo fmt --check"
cargo fmt --all -- --check
echo "==> cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "==> cargo test"
cargo test --workspace --locked -- --test-threads 2

echo "==> SQS compatibility suite (boto3, aws CLI) against target/debug/sluice"
# The Python clients are pinned in tests/sqs/requirements.txt and live in .venv; they are
# (re)installed only when that file changes, recorded by its hash in a stamp file.
requirements=tests/sqs/requirements.txt
stamp=.venv/.sqs-requirements.sha256
if [[ ! -x .venv/bin/python ]]; then
    python3 -m venv .venv
fi
wanted="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ "$(cat "$stamp" 2>/dev/null || true)" != "$wanted" ]]; then
    .venv/bin/pip install -q --disable-pip-version-check -r "$requirements"
    echo "$wanted" >"$stamp"
fi
cargo build -p sluice --locked
# No .pytest_cache or __pycache__ in the work tree.
PYTHONDONTWRITEBYTECODE=1 SLUICE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/sluice" .venv/bin/python -m pytest tests/sqs -q -p no:cacheprovider
