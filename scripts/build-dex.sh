#!/usr/bin/env bash
# build-dex.sh — Dex (github.com/dexidp/dex), the OpenID Connect provider the dashboard's
# single sign-on test logs in through, built from the Go module proxy and cached.
#
#   scripts/build-dex.sh        prints the path of the dex binary on its last line
#
# The binary (40 MB) is cached as $DEX_CACHE/dex-<version>-r<recipe> (default
# ~/.cache/warren/dex); a hit costs nothing, a miss builds it with a scratch GOCACHE and
# GOMODCACHE deleted at the end (cold: 2 min 43 s of CPU, `go build -p 1` under `nice`; 847 s
# on the 2-core machine shared with a load average of 25). Dex tags its releases v2.x without a /v2 module path, so
# the proxy serves it by pseudo-version only: DEX_VERSION pins one commit of its master.
# Bump DEX_REV whenever the recipe changes, so a stale cache is not used.
set -euo pipefail

DEX_VERSION=${DEX_VERSION:-v0.0.0-20260806151424-ab64ed778070}
# Dex's go.mod replaces its api module with ./api/v2, which a module requiring Dex cannot
# follow: the scratch module requires that module at the same commit (the proxy's
# github.com/dexidp/dex/api/v2@master when DEX_VERSION was master).
DEX_API_VERSION=${DEX_API_VERSION:-v2.4.1-0.20260806151424-ab64ed778070}
DEX_REV=1
DEX_CACHE=${DEX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/warren/dex}

say() { printf 'build-dex: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

bin=$DEX_CACHE/dex-$DEX_VERSION-r$DEX_REV
mkdir -p "$DEX_CACHE"
exec 9>"$DEX_CACHE/.lock"
flock 9
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi
command -v go >/dev/null || die "go is not installed: Dex is built from the Go module proxy"

scratch=$(mktemp -d "$DEX_CACHE/build.XXXXXX")
trap 'chmod -R u+w "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
gobuild() {
	nice -n 10 env GOCACHE="$scratch/gocache" GOMODCACHE="$scratch/gomod" GOFLAGS=-mod=mod \
		GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off go "$@"
}
mkdir -p "$scratch/mod"
cat >"$scratch/mod/go.mod" <<MOD
module warren.local/dexbuild

go 1.25

require (
	github.com/dexidp/dex $DEX_VERSION
	github.com/dexidp/dex/api/v2 $DEX_API_VERSION
)
MOD
printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/dexidp/dex/cmd/dex"\n' >"$scratch/mod/tools.go"

start=$SECONDS
say "no cache at $bin: building Dex $DEX_VERSION (cold: a few minutes)"
(cd "$scratch/mod" && gobuild mod tidy >"$scratch/tidy.log" 2>&1) || {
	grep -v '^go: downloading' "$scratch/tidy.log" | tail -n 30 >&2
	die "go mod tidy failed (above): check the network and GOPROXY ($(go env GOPROXY))"
}
(cd "$scratch/mod" && gobuild build -p 1 -trimpath -ldflags "-s -w" -o "$scratch/dex" github.com/dexidp/dex/cmd/dex)
mv "$scratch/dex" "$bin"
say "built and cached in $((SECONDS - start))s at $bin"
echo "$bin"
