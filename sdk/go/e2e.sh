#!/usr/bin/env bash
# e2e.sh: the Go SDK's tests, its end-to-end suite (go test -tags e2e) included, against a
# real `warren serve`, with go vet and the race detector, after goget.sh (the module as a user
# `go get`s it).
#
#   sdk/go/e2e.sh                 vet, then every test of the module
#   sdk/go/e2e.sh -run TestE2EPty -v   extra `go test` arguments
#
# It starts bin/warren serve on a free 127.0.0.1 port with a temporary state dir and a fresh
# API key through the end-to-end harness (test/e2e/server/harness.mjs: the same server the npm
# SDK suites get), runs the suite with E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN and E2B_API_KEY
# pointing at it, then removes every sandbox, snapshot and container the server made and stops
# it. Needs node, docker, the images warren/base and warren/code-interpreter, and the binaries
# (built when missing).
# Environment: WARREN_E2E_KEEP=1 keeps the server's temp dir.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
say() { printf 'sdk-go-e2e: %s\n' "$*" >&2; }

command -v node >/dev/null || { say "node is not installed"; exit 1; }
command -v docker >/dev/null || { say "docker is not installed"; exit 1; }
if [ ! -x "$repo/bin/warren" ] || [ ! -x "$repo/bin/warren-agent" ] || [ ! -x "$repo/bin/mcp-gateway" ]; then
  say "building bin/warren, bin/warren-agent and bin/mcp-gateway"
  "$repo/scripts/build.sh"
fi
for image in warren/base warren/code-interpreter; do
  docker image inspect "$image" >/dev/null 2>&1 || { say "the image $image is missing: run bin/warren image build"; exit 1; }
done
# The mcp-gateway template's image: the base image plus bin/mcp-gateway, built in about a
# second and reused while the binary is the same.
"$repo/bin/warren" image build mcp-gateway >/dev/null

WARREN_E2E_RUN_ID="$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
WARREN_E2E_RUN_DIR="$(mktemp -d "${TMPDIR:-/tmp}/warren-sdk-go-e2e-XXXXXX")"
export WARREN_E2E_RUN_ID WARREN_E2E_RUN_DIR

# Backstop for a harness that died without cleaning up: kill the server it started (its PID
# is in the run dir) and remove the containers labelled with its name.
cleanup() {
  local rc=$? f pid ids
  for f in "$WARREN_E2E_RUN_DIR"/*.pid; do
    [ -e "$f" ] || continue
    pid="$(cat "$f")"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && grep -q warren "/proc/$pid/cmdline" 2>/dev/null; then
      say "killing leftover server pid $pid"
      kill -9 "$pid" 2>/dev/null || true
    fi
    ids="$(docker ps -aq --filter "label=dev.warren.managed=$(cat "${f%.pid}.label" 2>/dev/null)")"
    [ -n "$ids" ] && docker rm -f -v $ids >/dev/null 2>&1 || true
  done
  rm -rf "$WARREN_E2E_RUN_DIR"
  exit "$rc"
}
trap cleanup EXIT INT TERM

start=$SECONDS
"$here/goget.sh"
cd "$here"
node "$repo/test/e2e/server/harness.mjs" run -- \
  sh -c 'go vet -tags e2e ./... && exec go test -tags e2e -race -count=1 -timeout 15m "$@" ./...' go-test "$@"
say "passed in $((SECONDS - start)) s"
