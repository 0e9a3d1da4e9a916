#!/usr/bin/env bash
# bench/run.sh: benchmark warren-agent in a warren/base container through the e2b SDK.
#   bench/run.sh [--runs N] [--json]
# Starts its own debug sandbox on 127.0.0.1:49985 (test/e2e/debug-sandbox.sh), runs
# bench/agent/sdk-bench.mjs against it, and removes the sandbox afterwards.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
e2e="$here/../test/e2e"
port="${WARREN_BENCH_PORT:-49985}"

"$e2e/npm-deps.sh"
trap '"$e2e/debug-sandbox.sh" stop --port "$port" || true' EXIT
name="$("$e2e/debug-sandbox.sh" start --port "$port" --no-publish)"
node "$here/agent/sdk-bench.mjs" --url "http://localhost:$port" --container "$name" "$@"
