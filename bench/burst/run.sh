#!/usr/bin/env bash
# bench/burst/run.sh: creates against `warren serve` through the e2b SDK, beside the engine floor (see burst.mjs).
#   bench/burst/run.sh [--only bursts,sequential,template,image,first,phases] [--sizes 1,10,50] [--with-100]
#                      [--pause 30] [--n 20] [--gvisor] [--json] [--serve-arg=--warm-pool=0 ...]
# Needs bin/warren, bin/warren-agent (scripts/build.sh) and the warren/base image; installs the
# e2e tests' npm packages when missing. The benchmark starts and removes its own server.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
e2e="$here/../../test/e2e"
"$e2e/npm-deps.sh"
exec node "$here/burst.mjs" "$@"
