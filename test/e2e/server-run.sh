#!/usr/bin/env bash
# server-run.sh: end-to-end tests of `warren serve` with the official e2b SDKs (newest 2.x and
# 2.19) against a real server on the real Docker engine.
#
#   test/e2e/server-run.sh                          every test in test/e2e/server/
#   test/e2e/server-run.sh server/pause.test.mjs    some files [more node --test arguments]
#
# It installs the npm packages when needed, builds Warren's binaries when they are missing
# (scripts/build.sh) and the image warren/mcp-gateway when it is not up to date with
# bin/mcp-gateway, then `node server/harness.mjs run` starts a shared server on
# a free 127.0.0.1 port with a fresh state dir and a generated WARREN_API_KEY, runs the tests
# one file at a time with E2B_API_URL/E2B_SANDBOX_URL/E2B_DOMAIN/E2B_API_KEY pointing at it,
# and removes every sandbox, snapshot and container the server made. Some files start their
# own private server (restart tests). Whatever happens, the trap below kills the servers this
# run started (by PID, from the run dir) and removes the containers labelled with their names.
#
# Environment:
#   WARREN_E2E_RESTART_DOCKERD=1  also run the dockerd restart test (on by default when CI is set;
#                                 it stops every container on the engine, so it is off on
#                                 developer machines; =0 turns it off in CI)
#   WARREN_E2E_KEEP=1             keep the servers' temp dirs (state, server.log)
#   WARREN_E2E_SHOW_LOG=1         print the shared server's log tail even when all pass
#   WARREN_STORE=postgres://...   run every server on PostgreSQL: each gets a database of its own
#                                 on that server, made from this URL's database with psql and
#                                 dropped at its end (scripts/ensure-postgres.sh prints a URL)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$here"

say() { printf 'e2e-server: %s\n' "$*" >&2; }

command -v node >/dev/null || { say "node is not installed"; exit 1; }
command -v docker >/dev/null || { say "docker is not installed"; exit 1; }

./npm-deps.sh
if [ ! -x "$repo/bin/warren" ] || [ ! -x "$repo/bin/warren-agent" ] || [ ! -x "$repo/bin/mcp-gateway" ]; then
  say "building bin/warren, bin/warren-agent and bin/mcp-gateway"
  "$repo/scripts/build.sh"
fi
if ! docker image inspect warren/base >/dev/null 2>&1; then
  say "the base image warren/base is missing: run bin/warren image build"
  exit 1
fi
# The mcp-gateway template's image: the base image plus bin/mcp-gateway, built in about a second,
# and reused while the binary is the same.
"$repo/bin/warren" image build mcp-gateway >/dev/null

WARREN_E2E_RUN_ID="$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
WARREN_E2E_RUN_DIR="$(mktemp -d "${TMPDIR:-/tmp}/warren-e2e-run-XXXXXX")"
export WARREN_E2E_RUN_ID WARREN_E2E_RUN_DIR

# Backstop for a test process that died without cleaning up: kill the servers it started (their
# PIDs are in the run dir), remove the containers labelled with their names and the network
# namespaces of its outside hosts (outside.mjs).
cleanup() {
  local rc=$? f pid name dir db ids ns
  for f in "$WARREN_E2E_RUN_DIR"/*.pid; do
    [ -e "$f" ] || continue
    pid="$(cat "$f")"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && grep -q warren "/proc/$pid/cmdline" 2>/dev/null; then
      say "killing leftover server pid $pid"
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
  for f in "$WARREN_E2E_RUN_DIR"/*.label; do
    [ -e "$f" ] || continue
    name="$(cat "$f")"
    ids="$(docker ps -aq --filter "label=dev.warren.managed=$name" 2>/dev/null || true)"
    if [ -n "$ids" ]; then
      say "removing leftover containers of $name: $(echo $ids)"
      docker rm -f -v $ids >/dev/null 2>&1 || true
    fi
    db="$(cat "${f%.label}.database" 2>/dev/null || true)"
    if [ -n "$db" ] && [ -n "${WARREN_STORE:-}" ]; then
      say "dropping leftover database $db"
      psql -X -q -d "$WARREN_STORE" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
    fi
    dir="$(cat "${f%.label}.dir" 2>/dev/null || true)"
    if [ -n "$dir" ] && [ "${WARREN_E2E_KEEP:-}" != 1 ]; then
      # Volumes' filesystems (--volume-size-mb) stay mounted after their server.
      awk -v p="$dir/" 'index($2, p) == 1 {print $2}' /proc/self/mounts | xargs -r -n1 umount -l 2>/dev/null || true
      rm -rf "$dir"
    fi
  done
  for ns in $(ip netns list 2>/dev/null | awk -v p="warren-e2e-$WARREN_E2E_RUN_ID-out-" 'index($1, p) == 1 {print $1}'); do
    say "removing leftover network namespace $ns"
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$WARREN_E2E_RUN_DIR"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# node 20 wants options before the files: split the arguments.
opts=()
files=()
for a in "$@"; do
  case "$a" in
    -*) opts+=("$a") ;;
    *) if [ "${#opts[@]}" -gt 0 ] && [[ "${opts[-1]}" == --test-name-pattern || "${opts[-1]}" == --test-skip-pattern ]] && [[ "$a" != *.mjs ]]; then opts+=("$a"); else files+=("$a"); fi ;;
  esac
done
if [ "${#files[@]}" -eq 0 ]; then
  files=(server/*.test.mjs)
fi

say "running node --test ${opts[*]} ${files[*]}"
set +e
node server/harness.mjs run -- \
  node --test --test-concurrency=1 --test-timeout="${WARREN_E2E_TEST_TIMEOUT:-300000}" \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=./failures-reporter.mjs --test-reporter-destination="$WARREN_E2E_RUN_DIR/failures" \
  "${opts[@]}" "${files[@]}"
status=$?
set -e
if [ "$status" -eq 0 ]; then
  say "all server end-to-end tests passed"
else
  # Last, after the servers' log tails: what failed and why (what a summary of the run quotes),
  # after the servers' last errors, which say why a call got a 500.
  if [ -s "$WARREN_E2E_RUN_DIR/errors" ]; then
    say "the servers' last errors:"
    tail -n 3 "$WARREN_E2E_RUN_DIR/errors" | sed 's/^/  /' >&2
  fi
  if [ -s "$WARREN_E2E_RUN_DIR/failures" ]; then
    say "failed ($(wc -l <"$WARREN_E2E_RUN_DIR/failures")):"
    head -n 10 "$WARREN_E2E_RUN_DIR/failures" | sed 's/^/  /' >&2
  fi
  say "server end-to-end tests FAILED (exit $status)"
fi
exit "$status"
