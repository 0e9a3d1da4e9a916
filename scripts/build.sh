#!/usr/bin/env bash
# Builds Warren's binaries into bin/: warren-agent (static, mounted into every sandbox),
# mcp-gateway (static, put into the warren/mcp-gateway image) and warren (the server and
# command-line tool).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "build: bin/warren-agent (static)"
CGO_ENABLED=0 go build -o bin/warren-agent ./cmd/warren-agent
echo "build: bin/mcp-gateway (static)"
CGO_ENABLED=0 go build -o bin/mcp-gateway ./cmd/mcp-gateway
echo "build: bin/warren"
go build -o bin/warren ./cmd/warren
