#!/usr/bin/env bash
# run.sh: the dashboard's checks: that internal/web/dist is a fresh build of web/ (byte for
# byte), then its browser tests (dashboard.test.mjs) in Debian's chromium with playwright-core,
# against a private `warren serve`, and its single sign-on through Dex (sso.test.mjs; Dex built
# from the Go module proxy, or restored from its cache, by scripts/build-dex.sh). Installs chromium with apt-get when it is missing (saying
# so). Screenshots land in $WARREN_DASHBOARD_SHOTS (default test/e2e/dashboard/shots, kept as
# CI artefacts; the directory is printed at the end).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
say() { printf 'e2e-dashboard: %s\n' "$*" >&2; }

"$repo/scripts/build-dashboard.sh" --check
if [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
  say "chromium is missing: installing Debian's chromium (apt-get install -y chromium)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 chromium >/dev/null
fi
"$here/../npm-deps.sh"
if [ ! -x "$repo/bin/warren" ] || [ ! -x "$repo/bin/warren-agent" ]; then
  say "building bin/warren and bin/warren-agent"
  "$repo/scripts/build.sh"
fi
export WARREN_DASHBOARD_SHOTS="${WARREN_DASHBOARD_SHOTS:-$here/shots}"
rm -rf "$WARREN_DASHBOARD_SHOTS"
DEX_BIN=$("$repo/scripts/build-dex.sh" | tail -n 1)
export DEX_BIN
cd "$here/.."
node --test --test-timeout=300000 dashboard/dashboard.test.mjs dashboard/sso.test.mjs
