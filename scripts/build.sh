#!/usr/bin/env bash
# Builds Warren's two binaries into bin/: warren-agent (static, mounted into every sandbox)
# and warren (the server and command-line tool).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "build: bin/warren-agent (static)"
CGO_ENABLED=0 go build -o bin/warren-agent ./cmd/warren-agent
echo "build: bin/warren"
go build -o bin/warren ./cmd/warren
