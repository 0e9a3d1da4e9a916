#!/usr/bin/env bash
# goget.sh: the Go SDK as a user gets it. It serves this module's files from a module proxy
# of its own (a file:// GOPROXY holding the module's zip, as proxy.golang.org serves a tagged
# version), then, in a new module elsewhere, `go get`s it with no replace directive, builds
# and vets a program that uses it, and renders its package docs. So a published tag works
# the same: nothing of Warren's own module, no replace, no file outside sdk/go is needed.
#
#   sdk/go/goget.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
say() { printf 'sdk-go-get: %s\n' "$*" >&2; }

mod=github.com/warrenhq/warren/sdk/go
ver=v0.0.0-local
work="$(mktemp -d "${TMPDIR:-/tmp}/warren-sdk-go-get-XXXXXX")"
trap 'rm -rf "$work"' EXIT

proxy="$work/proxy/$mod/@v"
src="$work/src/$mod@$ver"
mkdir -p "$proxy" "$src" "$work/user"
(cd "$here" && git ls-files -co --exclude-standard -z) | (cd "$here" && xargs -0 cp --parents -t "$src")
(cd "$work/src" && zip -qr "$proxy/$ver.zip" "$mod@$ver")
cp "$here/go.mod" "$proxy/$ver.mod"
printf '{"Version":"%s"}\n' "$ver" >"$proxy/$ver.info"
echo "$ver" >"$proxy/list"

cd "$work/user"
export GOPROXY="file://$work/proxy,$(go env GOPROXY)" GONOSUMDB="$mod" GOFLAGS=-mod=mod
go mod init example.test/agent >/dev/null 2>&1
cat >main.go <<'GO'
// Command agent lists the sandboxes of the E2B-compatible server its environment names.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/warrenhq/warren/sdk/go/e2b"
)

func main() {
	pages := e2b.NewClient().List(e2b.ListOptions{})
	n := 0
	for pages.HasNext() {
		page, err := pages.NextItems(context.Background())
		if err != nil {
			log.Fatal(err)
		}
		n += len(page)
	}
	fmt.Println(n, "sandboxes")
}
GO
go get "$mod@$ver" 2>&1 | sed 's/^/  /' >&2
if grep -q replace go.mod; then
  say "the user's go.mod needs a replace directive"; exit 1
fi
go build -o /dev/null . && go vet .
go doc github.com/warrenhq/warren/sdk/go/e2b Client >/dev/null
say "go get $mod@$ver, build, vet and go doc in a new module: ok"
