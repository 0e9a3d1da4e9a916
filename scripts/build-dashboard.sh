#!/usr/bin/env bash
# Builds the dashboard's front end (web/) into internal/web/dist, which
# the warren binary embeds. With --check, builds it into a scratch
# directory instead and fails unless that matches what is committed in
# internal/web/dist byte for byte (CI runs this: the embedded files must
# be a fresh build of the source and its lockfile).
set -euo pipefail
cd "$(dirname "$0")/.."
check=false
[ "${1:-}" = "--check" ] && check=true
cd web
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --prefer-offline
fi
if ! $check; then
  npm run build
  exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
npm run typecheck
npx vite build --outDir "$out/dist" --emptyOutDir --logLevel warn
if ! diff -r "$out/dist" ../internal/web/dist; then
  echo "build-dashboard: internal/web/dist is not a fresh build of web/; run scripts/build-dashboard.sh and commit it" >&2
  exit 1
fi
echo "build-dashboard: internal/web/dist matches a fresh build"
