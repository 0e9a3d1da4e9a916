#!/usr/bin/env bash
# bench/idle/run.sh: N idle sandboxes against `warren serve` through the e2b SDK (see idle.mjs):
# PSS per sandbox (agent, shim, docker-proxy), the server's RSS, listing them, creating them.
#   bench/idle/run.sh [--n 500] [--parallel 8] [--lists 30] [--settle 15] [--json] [--serve-arg=...]
# (under gVisor: see idle.mjs; the server needs a network of the second engine's own, wgv*)
# Needs root (every process's smaps_rollup), bin/warren, bin/warren-agent (scripts/build.sh) and
# the warren/base image; installs the e2e tests' npm packages when missing. The benchmark starts
# and removes its own server and everything it made.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
e2e="$here/../../test/e2e"
"$e2e/npm-deps.sh"
exec node "$here/idle.mjs" "$@"
