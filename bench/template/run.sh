#!/usr/bin/env bash
# bench/template/run.sh: benchmark template builds through the e2b SDK (see template-bench.mjs).
#   bench/template/run.sh [--n 10] [--json]
# Needs bin/warren, bin/warren-agent (scripts/build.sh) and the warren/base image; installs the
# e2e tests' npm packages when missing. The benchmark starts and removes its own server.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
e2e="$here/../../test/e2e"
if [ ! -f "$e2e/node_modules/.package-lock.json" ] || [ "$e2e/package-lock.json" -nt "$e2e/node_modules/.package-lock.json" ]; then
  (cd "$e2e" && npm ci --no-audit --no-fund --loglevel=error)
fi
exec node "$here/template-bench.mjs" "$@"
