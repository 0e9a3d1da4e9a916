#!/usr/bin/env bash
# npm-deps.sh: installs test/e2e's npm packages (the e2b SDKs, the code-interpreter SDK, the e2b
# CLI) from its lockfile with `npm ci` when they are missing or older than the lockfile. The
# end-to-end tests and the benchmarks call it before they start.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  printf 'npm-deps: installing npm packages (npm ci in test/e2e)\n' >&2
  npm ci --no-audit --no-fund --loglevel=error
fi
