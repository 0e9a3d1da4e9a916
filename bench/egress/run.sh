#!/usr/bin/env bash
# bench/egress/run.sh: what the egress gateway adds to a sandbox's HTTPS (see egress-bench.mjs).
#   bench/egress/run.sh [--runs 200] [--mb 100] [--json]
# Needs bin/warren, bin/warren-agent (scripts/build.sh), the warren/base image, openssl and root
# (the firewall); installs the e2e tests' npm packages when missing. It starts and removes its own
# server and sandboxes.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
e2e="$here/../../test/e2e"
"$e2e/npm-deps.sh"
exec node "$here/egress-bench.mjs" "$@"
