#!/usr/bin/env bash
# Builds everything Warren needs and starts the server in the foreground:
#   1. makes sure a Docker engine runs and debootstrap is installed (installs Debian's
#      docker.io/debootstrap when missing, as root);
#   2. builds bin/warren and bin/warren-agent;
#   3. builds the base image warren/base and the code interpreter's warren/code-interpreter
#      (minutes the first time; reused afterwards);
#   4. runs bin/warren serve with this script's arguments.
set -euo pipefail
cd "$(dirname "$0")"

step() { printf '\n=== run.sh: %s\n' "$*"; }

step "1/4 Docker engine and debootstrap (scripts/ensure-docker.sh)"
scripts/ensure-docker.sh
step "2/4 building bin/warren and bin/warren-agent (scripts/build.sh)"
scripts/build.sh
step "3/4 images warren/base and warren/code-interpreter (bin/warren image build; reused when up to date)"
bin/warren image build
bin/warren image build code-interpreter
step "4/4 starting the server: bin/warren serve $*"
exec bin/warren serve "$@"
