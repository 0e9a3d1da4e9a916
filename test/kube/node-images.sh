#!/usr/bin/env bash
# node-images.sh — the node agent's image API on the real cluster: runs the node agent
# DaemonSet of deploy/kubernetes/node-agent.yaml (in a namespace of its own, so that it
# runs beside test/e2e/kube-run.sh's), then TestImagesOnCluster (internal/nodeagent), which
# talks to the agents over HTTP: import of a `docker save`, pods of it with
# imagePullPolicy Never, commit of a runc and of a gVisor pod's container, export from one
# node and import into the other, docker load of an export, removal and garbage collection.
#
# Needs a cluster from scripts/kube.sh up (it fails, saying so, without one), Docker, and
# bin/warren (scripts/build.sh). WARREN_NODE_IMAGE names the node agent's image
# (default warren/node:latest, built here by scripts/kube-images.sh and loaded into the
# nodes). Leaves nothing behind: its namespace is deleted at the end, whatever happened;
# the test removes its images from the nodes and from Docker.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/kube/lib.sh

NS=${NODE_IMAGES_NAMESPACE:-warren-node-images}
image=${WARREN_NODE_IMAGE:-warren/node:latest}
fail() {
	echo "node-images: FAILED: $*" >&2
	exit 1
}
k() { kctl -n "$NS" "$@"; }

api_ready || fail "no cluster answers at https://127.0.0.1:$KUBE_API_PORT: run scripts/kube.sh up first"
[ -x bin/warren ] && [ -x bin/warren-agent ] || scripts/build.sh
WARREN_NODE_IMAGE=$image scripts/kube-images.sh
scripts/kube.sh load "$image"

cleanup() { kctl delete namespace "$NS" --wait=true --timeout=90s >/dev/null 2>&1 || true; }
trap cleanup EXIT
kctl create namespace "$NS" >/dev/null
kctl -n "$NS" create serviceaccount warren-node >/dev/null
token=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
k create secret generic warren-node-token --from-literal=token="$token" >/dev/null
# The manifest as it is, but for its namespace and image.
# The volumes' directory under the cluster's work dir, a shared mount in every node (the agents
# see it HostToContainer).
kube_share_volumes
node_agent_manifest | sed -e "s/^  namespace: warren$/  namespace: $NS/" -e "s#image: warren/node:latest#image: $image#" |
	kctl apply -f - >/dev/null
k rollout status daemonset/warren-node --timeout=180s
ready=$(k get daemonset warren-node -o jsonpath='{.status.numberReady}')
[ "$ready" = "$KUBE_NODES" ] || fail "node agents ready on $ready of $KUBE_NODES nodes"

WARREN_NODE_IMAGES_TEST=1 WARREN_NODE_IMAGES_NAMESPACE=$NS WARREN_NODE_TOKEN=$token \
	WARREN_E2E_KUBECTL="$KUBE_BIN/kubectl" KUBECONFIG="$KUBE_WORK/admin.kubeconfig" \
	WARREN_KUBE_CTR="$KUBE_BIN/ctr" WARREN_KUBE_WORK="$KUBE_WORK" \
	go test -count=1 -timeout 15m -run 'TestImagesOnCluster' -v ./internal/nodeagent/
