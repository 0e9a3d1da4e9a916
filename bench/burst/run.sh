#!/usr/bin/env bash
# bench/burst/run.sh: bursts of creates against `warren serve` through the e2b SDK (see burst.mjs).
#   bench/burst/run.sh [--sizes 1,10,50] [--with-100] [--pause 30] [--json] [--serve-arg=--warm-pool=0 ...]
# Needs bin/warren, bin/warren-agent (scripts/build.sh) and the warren/base image; installs the
# e2e tests' npm packages when missing. The benchmark starts and removes its own server.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
e2e="$here/../../test/e2e"
"$e2e/npm-deps.sh"
exec node "$here/burst.mjs" "$@"
