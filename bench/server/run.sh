#!/usr/bin/env bash
# bench/server/run.sh: benchmark `warren serve` through the e2b SDK (see server-bench.mjs).
#   bench/server/run.sh [--n 20] [--parallel 20] [--pauses 10] [--list 100] [--runs 300] [--only ...] [--json]
# Needs bin/warren, bin/warren-agent (scripts/build.sh) and the warren/base image; installs the
# e2e tests' npm packages when missing. The benchmark starts and removes its own server.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
e2e="$here/../../test/e2e"
"$e2e/npm-deps.sh"
exec node "$here/server-bench.mjs" "$@"
