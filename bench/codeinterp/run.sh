#!/usr/bin/env bash
# bench/codeinterp/run.sh: benchmark the code interpreter through `warren serve` with the npm
# @e2b/code-interpreter SDK (see codeinterp-bench.mjs).
#   bench/codeinterp/run.sh [--runs 200] [--creates 10] [--json]
# Needs bin/warren, bin/warren-agent (scripts/build.sh) and the warren/code-interpreter image
# (bin/warren image build code-interpreter); installs the e2e tests' npm packages when missing.
# The benchmark starts and removes its own server.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
e2e="$here/../../test/e2e"
"$e2e/npm-deps.sh"
exec node "$here/codeinterp-bench.mjs" "$@"
