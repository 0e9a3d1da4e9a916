#!/usr/bin/env bash
# buildkit.sh — the image of the test cluster's buildkitd (deploy/kubernetes/buildkitd.yaml),
# loaded into every node:
#
#   warren/buildkitd   warren/base with buildkitd built from the Go module proxy (build.sh's
#                      component buildkit, cached), and Debian's runc (with seccomp, which
#                      BuildKit's steps get), CNI plugins (the steps' bridge), iptables (their
#                      NAT) and nftables (their refusals)
#
# Docker builds it from warren/base (its apt layer cached by the engine); a node that has the
# image with the same ID (loaded by an earlier run) is left alone, so a second run takes a few
# seconds.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

"$KUBE_SCRIPTS/build.sh" buildkit
docker image inspect warren/base >/dev/null 2>&1 || kube_die "warren/base is not in the Docker engine: build it first (warren image build, or scripts/build.sh)"
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$KUBE_BIN/buildkitd" "$ctx/"
cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM warren/base
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	runc containernetworking-plugins iptables nftables >/dev/null && rm -rf /var/lib/apt/lists/*
COPY buildkitd /usr/local/bin/
ENTRYPOINT ["/usr/local/bin/buildkitd"]
DOCKERFILE
start=$SECONDS
docker build -q -t "$BUILDKIT_IMAGE" "$ctx" >/dev/null || kube_die "building $BUILDKIT_IMAGE failed"
id=$(docker image inspect -f '{{.Id}}' "$BUILDKIT_IMAGE")
kube_log "buildkit: $BUILDKIT_IMAGE is $id (built in $((SECONDS - start))s)"
# The ID last loaded into this cluster's nodes (down.sh removes it with the cluster).
stamp=$KUBE_WORK/buildkitd-image.id
if [ "$(cat "$stamp" 2>/dev/null)" != "$id" ]; then
	"$KUBE_SCRIPTS/../kube.sh" load "$BUILDKIT_IMAGE"
	echo "$id" >"$stamp"
fi
