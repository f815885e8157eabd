#!/usr/bin/env bash
# Runs Sluice's whole test suite: formatting, lints, and every crate's tests (core, the store
# conformance suite on the embedded backend, HTTP, end-to-end through the real binary and the
# CLI, the SIGKILL crash test, and the SQS compatibility suite with unmodified boto3, aws CLI and
# aws-sdk-rust), the dashboard in a real browser (headless Debian Chromium driven by
# playwright-core), then a bounded coverage-guided fuzz run of every parser. Needs only cargo,
# python3 and node with npm; it installs anything else it needs.
#
# SLUICE_TEST_PG_URL: when set, PostgreSQL must answer there or this script fails (CI sets it).
# SLUICE_TEST_MYSQL_URL: when set (mysql://USER[:PASSWORD]@HOST:PORT/DB), MySQL or MariaDB must
# answer there or this script fails (CI sets it); the outbox relay's MySQL tests use it.
# SLUICE_FUZZ_SECONDS: how long each fuzz target runs (default 25; 0 skips the fuzz step).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -n "${SLUICE_TEST_PG_URL:-}" ]]; then
    # The PostgreSQL tests (store conformance, several nodes, vacuum) run against this database;
    # check it first so that an unreachable server fails the run at once, with a clear message,
    # instead of after the build.
    if command -v pg_isready >/dev/null; then
        pg_isready -d "$SLUICE_TEST_PG_URL" -t 10 || { echo "error: PostgreSQL at SLUICE_TEST_PG_URL is unreachable" >&2; exit 1; }
    else
        echo "error: SLUICE_TEST_PG_URL is set but pg_isready is not installed to check it" >&2
        exit 1
    fi
fi

if [[ -n "${SLUICE_TEST_MYSQL_URL:-}" ]]; then
    # The outbox relay's MySQL/MariaDB tests run against this database; check it the same way.
    if ! [[ "$SLUICE_TEST_MYSQL_URL" =~ ^mysql://([^:@/]+)(:([^@/]*))?@([^:/]+)(:([0-9]+))?/([^?]+) ]]; then
        echo "error: SLUICE_TEST_MYSQL_URL is not mysql://USER[:PASSWORD]@HOST[:PORT]/DB" >&2
        exit 1
    fi
    mysql_user="${BASH_REMATCH[1]}" mysql_password="${BASH_REMATCH[3]}" mysql_host="${BASH_REMATCH[4]}"
    mysql_port="${BASH_REMATCH[6]:-3306}"
    admin="$(command -v mariadb-admin || command -v mysqladmin || true)"
    if [[ -z "$admin" ]]; then
        echo "error: SLUICE_TEST_MYSQL_URL is set but neither mariadb-admin nor mysqladmin is installed to check it" >&2
        exit 1
    fi
    MYSQL_PWD="$mysql_password" "$admin" --protocol=TCP -h "$mysql_host" -P "$mysql_port" -u "$mysql_user" \
        --connect-timeout=10 ping >/dev/null ||
        { echo "error: MySQL/MariaDB at SLUICE_TEST_MYSQL_URL is unreachable" >&2; exit 1; }
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

echo "==> dashboard in a browser (headless Chromium, playwright-core) against target/debug/sluice"
# Debian's Chromium, never a downloaded browser; playwright-core is pinned in tests/ui's
# package-lock.json and (re)installed only when that file changes, like the Python clients.
if [[ ! -x /usr/bin/chromium ]]; then
    if [[ "$(id -u)" == 0 ]]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    fi
fi
ui_lock=tests/ui/package-lock.json
ui_stamp=tests/ui/node_modules/.lock.sha256
ui_wanted="$(sha256sum "$ui_lock" | cut -d' ' -f1)"
if [[ "$(cat "$ui_stamp" 2>/dev/null || true)" != "$ui_wanted" ]]; then
    (cd tests/ui && npm ci --no-audit --no-fund --loglevel=error)
    echo "$ui_wanted" >"$ui_stamp"
fi
SLUICE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/sluice" \
    SLUICE_UI_SCREENSHOTS="${CARGO_TARGET_DIR:-$PWD/target}/ui-screenshots" \
    node --test --test-concurrency=1 tests/ui/dashboard.test.mjs

fuzz_seconds="${SLUICE_FUZZ_SECONDS:-25}"
if [[ "$fuzz_seconds" == 0 ]]; then
    echo "==> fuzz: skipped (SLUICE_FUZZ_SECONDS=0)"
    exit 0
fi
echo "==> fuzz (cargo-fuzz, libFuzzer): ${fuzz_seconds}s per target"
# cargo fuzz needs nightly compiler flags; RUSTC_BOOTSTRAP=1 lets the stable toolchain take
# them. No address sanitizer: Sluice's crates forbid unsafe code, and without it the build is
# about twice as fast and so is every run. Crash inputs are copied to fuzz/regressions/<target>/,
# which `cargo test` (crates/sluice-fuzz/tests/regressions.rs) replays from then on.
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked --version 0.13.2
fi
fuzz=(env RUSTC_BOOTSTRAP=1 cargo fuzz)
fuzz_flags=(--sanitizer none --codegen-units 16)
"${fuzz[@]}" build "${fuzz_flags[@]}"
targets=(native_api sqs_api receipt record filter_policy authorization)
for target in "${targets[@]}"; do
    corpus=fuzz/corpus/$target
    mkdir -p "$corpus"
    inputs=("$corpus" "fuzz/seeds/$target")
    [[ -d "fuzz/regressions/$target" ]] && inputs+=("fuzz/regressions/$target")
    log="$(mktemp)"
    # -max_len: HTTP requests need room for bodies and long names; -timeout: one input may
    # take at most 10 s; -rss_limit_mb: one input may not grow the process past 2 GiB.
    if "${fuzz[@]}" run "${fuzz_flags[@]}" "$target" "${inputs[@]}" -- \
        -max_total_time="$fuzz_seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 >"$log" 2>&1; then
        echo "fuzz $target: $(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1)"
        rm -f "$log"
    else
        tail -40 "$log"
        mkdir -p "fuzz/regressions/$target"
        cp fuzz/artifacts/"$target"/* "fuzz/regressions/$target/" 2>/dev/null || true
        echo "error: fuzz target $target crashed; its input is now in fuzz/regressions/$target/ (keep it, fix the bug)" >&2
        exit 1
    fi
done
echo "fuzz: ${#targets[@]} passed, 0 failed"
