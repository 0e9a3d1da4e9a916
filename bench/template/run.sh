#!/usr/bin/env bash
# bench/template/run.sh: benchmark template builds through the e2b SDK (see template-bench.mjs).
#   bench/template/run.sh [--n 10] [--json]
# Needs bin/warren, bin/warren-agent (scripts/build.sh) and the warren/base image; installs the
# e2e tests' npm packages when missing. The benchmark starts and removes its own server.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
e2e="$here/../../test/e2e"
"$e2e/npm-deps.sh"
exec node "$here/template-bench.mjs" "$@"
