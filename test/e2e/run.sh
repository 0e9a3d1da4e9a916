#!/usr/bin/env bash
# run.sh: end-to-end tests of warren-agent with the official e2b SDK in debug mode.
#
#   test/e2e/run.sh                 run every test in test/e2e/debug/
#   test/e2e/run.sh debug/pty.test.mjs [more node --test arguments]
#
# It installs the npm packages (npm ci) when node_modules is missing or older than
# package-lock.json, starts two debug sandboxes (debug-sandbox.sh): the plain one on
# 127.0.0.1:49983 (+8000) that the SDK uses in debug mode, and a "secure" one with an access
# token on 127.0.0.1:49984 for the signed-URL tests, runs `node --test`, removes both sandboxes
# whatever happens, and exits with the tests' status.
# WARREN_E2E_KEEP=1 leaves the sandboxes running afterwards (debug-sandbox.sh stop --all).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

say() { printf 'e2e: %s\n' "$*" >&2; }

command -v node >/dev/null || { say "node is not installed"; exit 1; }
command -v docker >/dev/null || { say "docker is not installed"; exit 1; }

./npm-deps.sh

secure_port="${WARREN_E2E_SECURE_PORT:-49984}"
secure_token="e2e-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
started=()

cleanup() {
  local rc=$?
  if [ "${WARREN_E2E_KEEP:-}" = 1 ]; then
    say "WARREN_E2E_KEEP=1: leaving the debug sandboxes running (${started[*]:-none})"
  else
    local port
    for port in "${started[@]}"; do
      ./debug-sandbox.sh stop --port "$port" || true
    done
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

started+=(49983)
./debug-sandbox.sh start --port 49983 >/dev/null
started+=("$secure_port")
./debug-sandbox.sh start --port "$secure_port" --token "$secure_token" --no-publish >/dev/null

if [ $# -eq 0 ]; then
  set -- debug/*.test.mjs
fi

say "running node --test $*"
set +e
E2B_DEBUG=true \
  WARREN_E2E_SECURE_PORT="$secure_port" \
  WARREN_E2E_SECURE_TOKEN="$secure_token" \
  node --test --test-reporter=spec --test-force-exit --test-concurrency="${WARREN_E2E_CONCURRENCY:-3}" --test-timeout=120000 "$@"
status=$?
set -e
if [ "$status" -eq 0 ]; then say "all end-to-end tests passed"; else say "end-to-end tests FAILED (exit $status)"; fi
exit "$status"
