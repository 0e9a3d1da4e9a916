#!/usr/bin/env bash
# kube.sh — a real Kubernetes on this machine, for Warren's tests and CI.
#
#   scripts/kube.sh up               build (or restore from cache) and start the cluster, ready
#                                    for a `warren serve --engine kubernetes` on the host (the
#                                    chart's node side in the namespace warren); the last line
#                                    printed is `export KUBECONFIG=...`
#   scripts/kube.sh deploy [--replicas N] [--namespace NS]
#                                    Warren in the cluster with its Helm chart: N (3) replicas on a
#                                    PostgreSQL of its own; the last lines are the SDK's
#                                    `export E2B_API_URL=... E2B_API_KEY=...`
#   scripts/kube.sh undeploy [--namespace NS]   uninstall it, leaving nothing
#   scripts/kube.sh down             delete pods, stop everything, leave the host as it was
#   scripts/kube.sh status           what runs, the nodes, the pods
#   scripts/kube.sh kubectl ARGS...  kubectl against the cluster
#   scripts/kube.sh load IMAGE...    copy images from the Docker engine into every node's
#                                    containerd (pods use them with imagePullPolicy: Never)
#   scripts/kube.sh build [COMP...]  only build/restore the binaries (kubernetes kube-proxy
#                                    etcd containerd gvisor pause registry helm buildkit)
#   scripts/kube.sh deps             only install the Debian packages it needs (up does too)
#   scripts/kube.sh local-path       (re)install the local-path provisioner and its
#                                    StorageClasses (up does too, once bin/warren is built)
#   scripts/kube.sh shared           (re)install MooseFS and its FUSE mount on every node, and
#                                    the StorageClass warren-shared (ReadWriteMany volumes)
#   scripts/kube.sh share-volumes    make the volumes' directory a shared mount in every
#                                    node (node start does; for a cluster started before)
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

# node_digest I REF: the digest node I's containerd has for the image REF.
node_digest() {
	"$KUBE_BIN/ctr" --address "$(node_dir "$1")/containerd.sock" -n k8s.io images ls "name==$2" 2>/dev/null | awk 'NR == 2 {print $3}'
}

# loaded IMAGE ID: whether every node has IMAGE as the Docker engine's image ID names it: the
# record of an earlier load (under $KUBE_WORK, so a new cluster has none: the engine's image ID
# and the digest the import gave) matches, and the node's containerd still has that digest under
# the name (another worktree's load of the same name replaces it).
loaded() {
	local i ref rec
	ref=$(kube_image_ref "$1")
	for i in $(seq 1 "$KUBE_NODES"); do
		rec=$(cat "$(node_dir "$i")/loaded/${ref//[\/:]/_}" 2>/dev/null) || return 1
		[ "${rec% *}" = "$2" ] && [ "${rec#* }" = "$(node_digest "$i" "$ref")" ] || return 1
	done
}

# kube_image_ref IMAGE: the name containerd gives a docker-saved IMAGE (warren/base ->
# docker.io/warren/base:latest).
kube_image_ref() {
	local r=$1
	case ${r##*/} in *:*) ;; *) r=$r:latest ;; esac
	case ${r%%/*} in *.* | *:* | localhost) ;; *) r=docker.io/$r ;; esac
	case $r in docker.io/*/*) ;; docker.io/*) r=docker.io/library/${r#docker.io/} ;; esac
	echo "$r"
}

# load IMAGE...: docker save, then an import into each node's containerd (namespace k8s.io,
# where the kubelet looks), the nodes side by side. Kubernetes names "warren/base"
# docker.io/warren/base:latest, as the import does. An image the nodes have already (the same
# image ID, loaded by an earlier call) is skipped.
load() {
	[ $# -gt 0 ] || kube_die "usage: scripts/kube.sh load IMAGE..."
	local img i sock start pids id ref
	# Global: the exit trap runs after this function has returned.
	tmp=$(mktemp -d "$KUBE_WORK/load.XXXXXX") || kube_die "no cluster: scripts/kube.sh up first"
	trap 'rm -rf "$tmp"' EXIT
	for img in "$@"; do
		id=$(docker image inspect -f '{{.Id}}' "$img" 2>/dev/null) ||
			kube_die "image $img is not in the Docker engine (docker images lists them; build it first)"
		if loaded "$img" "$id"; then
			kube_log "$img: every node has it already (${id:7:12})"
			continue
		fi
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
			ref=$(kube_image_ref "$img")
			mkdir -p "$(node_dir "$i")/loaded"
			echo "$id $(node_digest "$i" "$ref")" >"$(node_dir "$i")/loaded/${ref//[\/:]/_}"
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

# local_path: the local-path provisioner of scripts/kube/local-path-provisioner.yaml,
# its StorageClass the default, its volumes under $KUBE_WORK/volumes (down removes them). Its
# image is warren/node of this checkout tagged warren/local-path, so that a later import of
# another warren/node into the nodes leaves the provisioner's as it is.
local_path() {
	local repo
	repo=$(cd "$(dirname "$0")/.." && pwd)
	[ -x "$repo/bin/warren" ] || kube_die "local-path: bin/warren is missing: run scripts/build.sh"
	WARREN_NODE_IMAGE=warren/local-path:latest "$repo/scripts/kube-images.sh" >/dev/null
	load warren/local-path:latest
	kube_share_volumes
	sed -e "s#/var/lib/warren/volumes#$KUBE_WORK/volumes#" -e "s#image: warren/node:latest#image: warren/local-path:latest#" \
		"$repo/scripts/kube/local-path-provisioner.yaml" | kctl apply -f - >/dev/null
	# Its pods restarted only when they run another image than the one just loaded (a restart
	# leaves the volumes' filesystems mounted on the nodes).
	local want
	want=$(docker image inspect -f '{{.Id}}' warren/local-path:latest)
	if kctl -n warren-local-path get pods -l app.kubernetes.io/name=warren-local-path \
		-o 'jsonpath={range .items[*]}{.status.containerStatuses[0].imageID}{"\n"}{end}' | grep . | grep -qvxF "$want"; then
		kctl -n warren-local-path rollout restart daemonset/warren-local-path >/dev/null
	fi
	kctl -n warren-local-path rollout status daemonset/warren-local-path --timeout=300s >/dev/null
	kube_log "local-path provisioner running; StorageClass warren-local-path is the default"
}

# shared: MooseFS (scripts/kube/moosefs.yaml) for the StorageClass warren-shared, whose
# ReadWriteMany volumes the local-path provisioner (installed first) makes on it. Its image,
# warren/moosefs, is warren/base with Debian's MooseFS packages (master, chunk server, FUSE
# client: ~3 MB), built by the Docker engine as warren/postgres is (an unchanged recipe is the
# engine's build cache); the master's password is a Secret made once.
shared() {
	local repo want secret
	repo=$(cd "$(dirname "$0")/.." && pwd)
	local_path
	docker image inspect warren/base:latest >/dev/null 2>&1 || kube_die "shared: warren/base is missing: bin/warren image build"
	docker build -q -t warren/moosefs:latest - >/dev/null <<-'DOCKERFILE' || kube_die "shared: docker build of warren/moosefs failed"
		FROM warren/base:latest
		RUN apt-get update \
		 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends moosefs-master moosefs-chunkserver moosefs-client \
		 && apt-get clean \
		 && rm -rf /var/lib/apt/lists/*
	DOCKERFILE
	load warren/moosefs:latest
	# The password is made once, and applied with the manifest so that its pods find it.
	secret=
	kctl -n warren-moosefs get secret moosefs-password >/dev/null 2>&1 ||
		secret=$(kctl -n warren-moosefs create secret generic moosefs-password --dry-run=client -o yaml \
			--from-literal=password="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')")
	{
		sed -e "s#/var/lib/warren/volumes#$KUBE_WORK/volumes#" "$repo/scripts/kube/moosefs.yaml"
		[ -z "$secret" ] || printf -- '---\n%s\n' "$secret"
	} | kctl apply -f - >/dev/null
	want=$(docker image inspect -f '{{.Id}}' warren/moosefs:latest)
	if kctl -n warren-moosefs get pods -o 'jsonpath={range .items[*]}{.status.containerStatuses[0].imageID}{"\n"}{end}' |
		grep . | grep -qvxF "$want"; then
		kctl -n warren-moosefs rollout restart deployment/moosefs daemonset/moosefs-mount >/dev/null
	fi
	kctl -n warren-moosefs rollout status deployment/moosefs --timeout=300s >/dev/null
	kctl -n warren-moosefs rollout status daemonset/moosefs-mount --timeout=300s >/dev/null
	kube_log "MooseFS running and mounted on every node; StorageClass warren-shared is ReadWriteMany"
}

cmd=${1:-}
[ $# -eq 0 ] || shift
case $cmd in
up) exec "$KUBE_SCRIPTS/up.sh" ;;
down) exec "$KUBE_SCRIPTS/down.sh" ;;
build) exec "$KUBE_SCRIPTS/build.sh" "$@" ;;
deploy | undeploy) exec "$KUBE_SCRIPTS/deploy.sh" "$cmd" "$@" ;;
deps) kube_deps ;;
local-path) local_path ;;
shared) shared ;;
share-volumes) kube_share_volumes ;;
status) status ;;
kubectl) kctl "$@" ;;
load) load "$@" ;;
logs) logs "$@" ;;
*)
	sed -n '2,22p' "$0" >&2
	exit 2
	;;
esac
