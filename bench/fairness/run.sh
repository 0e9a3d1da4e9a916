#!/usr/bin/env bash
# bench/fairness/run.sh: team A bursts creates while team B creates one a second (see fairness.mjs).
#   bench/fairness/run.sh [--burst 200] [--n 20] [--json] [--bin PATH] [--serve-arg=--warm-pool=0 ...]
# Needs bin/warren, bin/warren-agent (scripts/build.sh) and the warren/base image; installs the
# e2e tests' npm packages when missing. The benchmark starts and removes its own server.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
e2e="$here/../../test/e2e"
"$e2e/npm-deps.sh"
exec node "$here/fairness.mjs" "$@"
