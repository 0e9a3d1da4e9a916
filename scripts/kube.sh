#!/usr/bin/env bash
# kube.sh — a real Kubernetes on this machine, for Warren's tests and CI.
#
#   scripts/kube.sh up               build (or restore from cache) and start the cluster; the
#                                    last line printed is `export KUBECONFIG=...`
#   scripts/kube.sh down             delete pods, stop everything, leave the host as it was
#   scripts/kube.sh status           what runs, the nodes, the pods
#   scripts/kube.sh kubectl ARGS...  kubectl against the cluster
#   scripts/kube.sh load IMAGE...    copy images from the Docker engine into every node's
#                                    containerd (pods use them with imagePullPolicy: Never)
#   scripts/kube.sh build [COMP...]  only build/restore the binaries (kubernetes kube-proxy
#                                    etcd containerd gvisor pause registry)
#   scripts/kube.sh deps             only install the Debian packages it needs (up does too)
#   scripts/kube.sh local-path       (re)install the local-path provisioner and its default
#                                    StorageClass (up does too, once bin/warren is built)
#   scripts/kube.sh logs [NAME]      tails of the daemons' logs (etcd apiserver
#                                    controller-manager scheduler node1-kubelet ...)
#
# The cluster: etcd, kube-apiserver (10.246.1.1:16443, node 1's bridge address),
# kube-controller-manager, kube-scheduler, kube-proxy (nftables), an image registry
# (CNCF Distribution, http://127.0.0.1:15000), and $KUBE_NODES (2) nodes,
# each a kubelet with its own containerd in a private mount namespace, its pods on a
# bridge of its own that the host routes to
# (warren-kube-node<i>: 10.246.<i>.0/24 on wkube<i>). Pods run under runc, or gVisor with
# runtimeClassName: gvisor. Everything is built from the Go module proxy
# (scripts/kube/build.sh) and kept under $KUBE_WORK (/var/lib/warren-kube) while it runs.
# docs/kubernetes.md has the details; scripts/kube/lib.sh every setting.
set -euo pipefail
# shellcheck source=kube/lib.sh
. "$(dirname "$0")/kube/lib.sh"

# rss PIDFILE: the resident memory of the process in PIDFILE, in MiB.
rss() { echo $(($(awk '/VmRSS/ {print $2}' "/proc/$(cat "$1")/status" 2>/dev/null || echo 0) / 1024)); }

status() {
	local p i f
	[ -d "$KUBE_WORK" ] || { echo "no cluster ($KUBE_WORK does not exist): scripts/kube.sh up starts one"; return 1; }
	for p in etcd apiserver controller-manager scheduler registry $(for i in $(seq 1 "$KUBE_NODES"); do echo "node$i/containerd node$i/kubelet"; done); do
		case $p in
		*/*) f=$KUBE_WORK/$p.pid ;;
		*) f=$KUBE_WORK/run/$p.pid ;;
		esac
		if [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; then
			printf '%-20s running (pid %s, RSS %s MiB)\n' "$p" "$(cat "$f")" "$(rss "$f")"
		else
			printf '%-20s NOT running\n' "$p"
		fi
	done
	api_ready || { echo "the apiserver is not ready"; return 1; }
	kctl get nodes -o wide
	kctl get pods -A -o wide
	echo "export KUBECONFIG=$KUBECONFIG_FILE"
}

# load IMAGE...: docker save, then an import into each node's containerd (namespace k8s.io,
# where the kubelet looks), the nodes side by side. Kubernetes names "warren/base"
# docker.io/warren/base:latest, as the import does.
load() {
	[ $# -gt 0 ] || kube_die "usage: scripts/kube.sh load IMAGE..."
	local img i sock start pids
	# Global: the exit trap runs after this function has returned.
	tmp=$(mktemp -d "$KUBE_WORK/load.XXXXXX") || kube_die "no cluster: scripts/kube.sh up first"
	trap 'rm -rf "$tmp"' EXIT
	for img in "$@"; do
		docker image inspect "$img" >/dev/null 2>&1 ||
			kube_die "image $img is not in the Docker engine (docker images lists them; build it first)"
		start=$SECONDS
		kube_log "loading $img: docker save"
		docker save "$img" >"$tmp/image.tar" || kube_die "docker save $img failed"
		pids=()
		for i in $(seq 1 "$KUBE_NODES"); do
			sock=$(node_dir "$i")/containerd.sock
			[ -S "$sock" ] || kube_die "node $(node_name "$i") has no containerd at $sock: scripts/kube.sh up"
			"$KUBE_BIN/ctr" --address "$sock" -n k8s.io images import "$tmp/image.tar" >"$tmp/node$i.log" 2>&1 &
			pids+=($!)
		done
		for i in $(seq 1 "$KUBE_NODES"); do
			wait "${pids[$((i - 1))]}" || {
				cat "$tmp/node$i.log" >&2
				kube_die "importing $img into $(node_name "$i") failed (above; containerd's log: $(node_dir "$i")/containerd.log)"
			}
		done
		kube_log "loaded $img into $KUBE_NODES nodes in $((SECONDS - start))s"
	done
}

logs() {
	local f n=${2:-40}
	for f in "$KUBE_WORK"/run/*.log "$KUBE_WORK"/node*/{containerd,kubelet}.log; do
		[ -f "$f" ] || continue
		case $f in
		*/node[0-9]*/*) label=$(basename "$(dirname "$f")")-$(basename "$f" .log) ;;
		*) label=$(basename "$f" .log) ;;
		esac
		[ -z "${1:-}" ] || [ "$1" = "$label" ] || continue
		echo "--- $label ($f)"
		tail -n "$n" "$f"
	done
}

# local_path: the local-path provisioner of deploy/kubernetes/local-path-provisioner.yaml,
# its StorageClass the default, its volumes under $KUBE_WORK/volumes (down removes them). Its
# image is warren/node of this checkout tagged warren/local-path, so that a later import of
# another warren/node into the nodes leaves the provisioner's as it is.
local_path() {
	local repo
	repo=$(cd "$(dirname "$0")/.." && pwd)
	[ -x "$repo/bin/warren" ] || kube_die "local-path: bin/warren is missing: run scripts/build.sh"
	WARREN_NODE_IMAGE=warren/local-path:latest "$repo/scripts/kube-images.sh" >/dev/null
	load warren/local-path:latest
	sed -e "s#/var/lib/warren/volumes#$KUBE_WORK/volumes#" -e "s#image: warren/node:latest#image: warren/local-path:latest#" \
		"$repo/deploy/kubernetes/local-path-provisioner.yaml" | kctl apply -f - >/dev/null
	kctl -n warren-local-path rollout restart daemonset/warren-local-path >/dev/null
	kctl -n warren-local-path rollout status daemonset/warren-local-path --timeout=120s >/dev/null
	kube_log "local-path provisioner running; StorageClass warren-local-path is the default"
}

cmd=${1:-}
[ $# -eq 0 ] || shift
case $cmd in
up) exec "$KUBE_SCRIPTS/up.sh" ;;
down) exec "$KUBE_SCRIPTS/down.sh" ;;
build) exec "$KUBE_SCRIPTS/build.sh" "$@" ;;
deps) kube_deps ;;
local-path) local_path ;;
status) status ;;
kubectl) kctl "$@" ;;
load) load "$@" ;;
logs) logs "$@" ;;
*)
	sed -n '2,15p' "$0" >&2
	exit 2
	;;
esac
