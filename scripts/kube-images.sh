#!/usr/bin/env bash
# Builds warren/node (WARREN_NODE_IMAGE), the image of the Kubernetes engine's node agent
# DaemonSet and of the init container that delivers the agent into every sandbox pod:
# warren/base with bin/warren and bin/warren-agent at / (the agent beside warren, where
# `warren node isolate --install-agent` finds it). No registry is involved: the Docker engine builds it
# from local images, and scripts/kube.sh load puts it into the nodes' containerd.
set -euo pipefail
cd "$(dirname "$0")/.."
image=${WARREN_NODE_IMAGE:-warren/node:latest}
base=${WARREN_BASE_IMAGE:-warren/base:latest}
for f in bin/warren bin/warren-agent; do
	[[ -x $f ]] || { echo "kube-images: $f missing: run scripts/build.sh" >&2; exit 1; }
done
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp bin/warren bin/warren-agent "$ctx/"
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $base
COPY warren warren-agent /
ENTRYPOINT ["/warren"]
DOCKERFILE
docker build -q -t "$image" "$ctx" >/dev/null
echo "kube-images: built $image"
