#!/usr/bin/env bash
# Runs Sluice's whole test suite: formatting, lints, and every crate's tests (core, the store
# conformance suite on the embedded backend, HTTP, end-to-end through the real binary and the
# CLI, and the SIGKILL crash test). Needs only cargo; it installs anything else it needs.
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
