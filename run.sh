#!/usr/bin/env bash
# Builds everything Warren needs and starts the server in the foreground:
#   1. makes sure a Docker engine runs and debootstrap is installed (installs Debian's
#      docker.io/debootstrap when missing, as root);
#   2. builds bin/warren, bin/warren-agent and bin/mcp-gateway;
#   3. builds the base image warren/base, the code interpreter's warren/code-interpreter and
#      the desktop's warren/desktop (minutes each the first time; reused afterwards) and the
#      MCP gateway's warren/mcp-gateway (the base image plus bin/mcp-gateway: a second);
#   4. creates an API key when there is none (and WARREN_API_KEY is unset) and prints it;
#   5. runs bin/warren serve with this script's arguments.
# Settings: flags after run.sh, or WARREN_* environment variables (bin/warren serve --help);
# use WARREN_STATE_DIR and WARREN_STORE rather than --state-dir and --store so that step 4 looks
# in the same place.
set -euo pipefail
cd "$(dirname "$0")"

step() { printf '\n=== run.sh: %s\n' "$*"; }

step "1/5 Docker engine and debootstrap (scripts/ensure-docker.sh)"
scripts/ensure-docker.sh
step "2/5 building bin/warren, bin/warren-agent and bin/mcp-gateway (scripts/build.sh)"
scripts/build.sh
step "3/5 images warren/base, warren/code-interpreter, warren/mcp-gateway and warren/desktop (bin/warren image build; reused when up to date)"
bin/warren image build
bin/warren image build code-interpreter
bin/warren image build mcp-gateway
bin/warren image build desktop
if [ -z "${WARREN_API_KEY:-}" ] && [ "$(bin/warren keys list | wc -l)" -le 1 ]; then
	step "4/5 no API key yet: creating one (bin/warren keys create); set it as E2B_API_KEY"
	bin/warren keys create --name run.sh
else
	step "4/5 API keys: using the existing ones (bin/warren keys list)"
fi
step "5/5 starting the server: bin/warren serve $*"
exec bin/warren serve "$@"
