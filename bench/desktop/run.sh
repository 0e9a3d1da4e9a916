#!/usr/bin/env bash
# bench/desktop/run.sh: desktop sandboxes with @e2b/desktop (see desktop.mjs): create → first
# screenshot cold and warm, screenshot latency, an idle desktop's memory.
#   bench/desktop/run.sh [--kube] [--n 5] [--shots 20] [--settle 30] [--refill 25] [--json]
# --kube: on the Kubernetes engine, on the cluster of scripts/kube.sh up, through
# test/e2e/kube-run.sh --exec (its lock, its node agents, warren/desktop imported into the nodes);
# otherwise on the local Docker engine. Needs bin/warren, bin/warren-agent and warren/desktop
# (warren image build desktop); starts and removes its own servers.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/../../test/e2e/npm-deps.sh"
if [ "${1:-}" = --kube ]; then
  shift
  exec "$here/../../test/e2e/kube-run.sh" --exec node "$here/desktop.mjs" "$@"
fi
exec node "$here/desktop.mjs" "$@"
