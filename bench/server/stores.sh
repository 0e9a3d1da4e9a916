#!/usr/bin/env bash
# bench/server/stores.sh: create → first command on the PostgreSQL store against SQLite, in one run
# (see stores.mjs), on the test PostgreSQL of scripts/ensure-postgres.sh (started when it is not).
#   bench/server/stores.sh [--n 30] [--serve-arg=--warm-pool=0 ...] [--json]
# Needs bin/warren, bin/warren-agent (scripts/build.sh) and the warren/base image; each server gets
# a database of its own there, dropped at the end.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/../../test/e2e/npm-deps.sh"
url="$("$here/../../scripts/ensure-postgres.sh" | tail -1)"
export WARREN_STORE="${url#export WARREN_TEST_POSTGRES=}"
exec node "$here/stores.mjs" "$@"
