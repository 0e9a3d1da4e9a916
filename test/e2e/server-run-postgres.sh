#!/usr/bin/env bash
# server-run-postgres.sh: end-to-end tests of `warren serve --store postgres://...` with the SDKs,
# the files of server-run.sh (default: the ones that exercise the store: sandboxes, events and
# webhooks, restarts, secrets) on the test PostgreSQL cluster of scripts/ensure-postgres.sh,
# which it starts when it is not running. Each server of the run gets a database of its own
# there, dropped at its end (harness.mjs).
#
#   test/e2e/server-run-postgres.sh                        the default files
#   test/e2e/server-run-postgres.sh server/x.test.mjs ...  these instead [node --test arguments]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

url="$("$repo/scripts/ensure-postgres.sh" | tail -1)"
export WARREN_STORE="${url#export WARREN_TEST_POSTGRES=}"
[ "$#" -gt 0 ] || set -- server/sandbox.test.mjs server/events.test.mjs server/restart.test.mjs server/secrets.test.mjs
exec "$here/server-run.sh" "$@"
