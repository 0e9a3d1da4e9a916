# shellcheck shell=bash
# lib.sh — settings and helpers shared by scripts/kube/*.sh (sourced, not run).
#
# Every path and port the test cluster uses is set here, so up, down, status and
# the tests agree on them. Override by exporting the variable before calling
# scripts/kube.sh.

# Versions of what is built from the Go module proxy.
KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.7.0}
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
# CNCF Distribution: the registry the nodes pull from when Warren runs with --registry.
DISTRIBUTION_VERSION=${DISTRIBUTION_VERSION:-v3.1.2}
# Helm: lints, renders and installs the chart deploy/helm/warren.
HELM_VERSION=${HELM_VERSION:-v4.3.2}
# BuildKit: the daemon that builds templates in the cluster (no Docker socket).
BUILDKIT_VERSION=${BUILDKIT_VERSION:-v0.34.2}

KUBE_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KUBE_REPO=$(cd "$KUBE_SCRIPTS/../.." && pwd)

# gVisor: the same version scripts/setup-gvisor.sh builds for the Docker engine's
# gVisor tests, so one version of runsc is tested everywhere.
if [ -z "${GVISOR_VERSION:-}" ]; then
	GVISOR_VERSION=$(sed -n 's/^GVISOR_VERSION=\${GVISOR_VERSION:-\(.*\)}$/\1/p' "$KUBE_REPO/scripts/setup-gvisor.sh")
	[ -n "$GVISOR_VERSION" ] || {
		echo "kube: cannot read the default GVISOR_VERSION from scripts/setup-gvisor.sh; set GVISOR_VERSION" >&2
		exit 1
	}
fi

# Where the built binaries are cached (tar.zst per component and version) and unpacked.
KUBE_CACHE=${KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/warren/kube}
KUBE_BIN=$KUBE_CACHE/bin

# Where a running cluster keeps its state; `down` removes all of it.
KUBE_WORK=${KUBE_WORK:-/var/lib/warren-kube}
KUBECONFIG_FILE=$KUBE_WORK/admin.kubeconfig

# Control plane: etcd, the controller manager's and the scheduler's health ports on loopback.
KUBE_ETCD_PORT=${KUBE_ETCD_PORT:-12379}
KUBE_ETCD_PEER_PORT=${KUBE_ETCD_PEER_PORT:-12380}
KUBE_API_PORT=${KUBE_API_PORT:-16443}
KUBE_SERVICE_CIDR=${KUBE_SERVICE_CIDR:-10.247.0.0/24}

# The cluster's image registry (plain HTTP, on loopback, which the nodes share with the
# host): Warren's builder pushes there (Docker takes 127.0.0.0/8 registries as insecure) and
# the kubelets pull (each node's containerd is told it is HTTP). Its store is under $KUBE_WORK.
KUBE_REGISTRY_PORT=${KUBE_REGISTRY_PORT:-15000}
KUBE_REGISTRY=127.0.0.1:$KUBE_REGISTRY_PORT

# Nodes. Node i (1-based) is named warren-kube-node<i>, has pod CIDR 10.246.<i>.0/24 on
# the bridge wkube<i> (gateway .1, also the node's IP), and its kubelet listens there on
# port 20250 + 10(i-1). A second cluster beside the first (to test these scripts while
# another is in use) needs its own KUBE_NAME, KUBE_BRIDGE_PREFIX, KUBE_CHAIN, KUBE_POD_NET,
# KUBE_WORK and ports.
KUBE_NAME=${KUBE_NAME:-warren-kube}
KUBE_NODES=${KUBE_NODES:-2}
KUBE_POD_NET=${KUBE_POD_NET:-10.246}
KUBE_BRIDGE_PREFIX=${KUBE_BRIDGE_PREFIX:-wkube}
KUBE_KUBELET_PORT_BASE=${KUBE_KUBELET_PORT_BASE:-20250}
# The iptables chain holding every rule the cluster adds (jumped to from FORWARD).
KUBE_CHAIN=${KUBE_CHAIN:-WARREN-KUBE}
# Every pod CIDR: what kube-proxy counts as traffic from inside the cluster.
KUBE_CLUSTER_CIDR=$KUBE_POD_NET.0.0/16

# The apiserver listens on node 1's bridge address (the host's address on the pod network,
# as a control plane co-located with node 1 would), so that pods reach it: at this address,
# or at the Service "kubernetes" (the first address of KUBE_SERVICE_CIDR), which kube-proxy
# forwards here. The host reaches it there too; the bridge is up before the apiserver.
KUBE_API_ADDR=${KUBE_API_ADDR:-$KUBE_POD_NET.1.1}

# The registry as pods reach it (buildkitd pushes there): the same store, served again on node
# 1's bridge address. deploy/kubernetes/buildkitd.yaml names this address.
KUBE_REGISTRY_PODS=$KUBE_API_ADDR:$KUBE_REGISTRY_PORT
# The image of the cluster's buildkitd (scripts/kube/buildkit.sh).
BUILDKIT_IMAGE=${BUILDKIT_IMAGE:-warren/buildkitd:latest}

# kube-proxy (nftables mode, its own tables "ip kube-proxy" and "ip6 kube-proxy") gives
# Services their virtual IPs, for pods and for the host. One runs for the host's network
# namespace, which both nodes share. Its table names are fixed, so two clusters on one host
# cannot both run it: a second cluster beside one with kube-proxy sets KUBE_PROXY=0.
KUBE_PROXY=${KUBE_PROXY:-1}
# Its health and metrics ports, on loopback.
KUBE_PROXY_HEALTH_PORT=${KUBE_PROXY_HEALTH_PORT:-$((KUBE_API_PORT + 3))}
KUBE_PROXY_METRICS_PORT=${KUBE_PROXY_METRICS_PORT:-$((KUBE_API_PORT + 4))}

kube_log() { printf 'kube: %s\n' "$*" >&2; }
kube_die() {
	printf 'kube: ERROR: %s\n' "$*" >&2
	exit 1
}

node_name() { echo "$KUBE_NAME-node$1"; }
node_bridge() { echo "$KUBE_BRIDGE_PREFIX$1"; }
node_cidr() { echo "$KUBE_POD_NET.$1.0/24"; }
node_gw() { echo "$KUBE_POD_NET.$1.1"; }
node_dir() { echo "$KUBE_WORK/node$1"; }
node_kubelet_port() { echo $((KUBE_KUBELET_PORT_BASE + 10 * ($1 - 1))); }

# share_volumes: in the calling mount namespace (a node's), makes $KUBE_WORK/volumes a shared
# mount of its own, as a node whose / is shared (systemd's) has it: the local-path
# provisioner's filesystems for sized volumes, mounted there from its pod (Bidirectional),
# reach the node's kubelet and its node agent (HostToContainer), which the runtime refuses on a
# private mount. Idempotent.
share_volumes() {
	local d=$KUBE_WORK/volumes
	mkdir -p "$d"
	mountpoint -q "$d" || mount --bind "$d" "$d"
	mount --make-shared "$d"
}

# kube_share_volumes: share_volumes in every running node's mount namespace (a cluster made
# before node.sh did it at start).
kube_share_volumes() {
	local i pid
	for i in $(seq 1 "$KUBE_NODES"); do
		pid=$(cat "$(node_dir "$i")/containerd.pid" 2>/dev/null) || kube_die "node $i: no containerd.pid: is the cluster up?"
		nsenter -t "$pid" -m -- bash -c "$(declare -f share_volumes); KUBE_WORK='$KUBE_WORK' share_volumes" ||
			kube_die "node $i: cannot make $KUBE_WORK/volumes a shared mount in its namespace"
	done
}

# with_heartbeat LABEL COMMAND...: runs the command and prints a line every minute
# while it runs, so a long silent step (a Go build) shows that it is alive.
with_heartbeat() {
	local label=$1 start=$SECONDS hb rc=0
	shift
	(
		# Not holding the caller's lock (fd 9), and taking its sleep along when stopped.
		exec 9>&-
		trap 'kill $s 2>/dev/null; exit 0' TERM
		while :; do
			sleep 60 &
			s=$!
			wait $s
			kube_log "... still $label ($((SECONDS - start))s)"
		done
	) &
	hb=$!
	"$@" || rc=$?
	kill "$hb" 2>/dev/null || true
	wait "$hb" 2>/dev/null || true
	return $rc
}

# kubeconfig FILE CERT: a kubeconfig for the cluster's apiserver authenticating with the
# client certificate $KUBE_WORK/pki/CERT.{crt,key}.
kubeconfig() {
	local pki=$KUBE_WORK/pki
	cat >"$1" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: warren-kube
  cluster:
    server: https://$KUBE_API_ADDR:$KUBE_API_PORT
    certificate-authority: $pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $pki/$2.crt
    client-key: $pki/$2.key
contexts:
- name: warren-kube
  context: {cluster: warren-kube, user: $2}
current-context: warren-kube
YAML
}

# kube_deps: installs (apt-get) the Debian packages the cluster needs that are missing.
kube_deps() {
	local missing=()
	[ -d /usr/lib/cni ] && [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
	[ -x /bin/busybox ] || missing+=(busybox-static)
	command -v runc >/dev/null || missing+=(runc)
	command -v openssl >/dev/null || missing+=(openssl)
	command -v curl >/dev/null || missing+=(curl)
	command -v iptables >/dev/null || missing+=(iptables)
	command -v zstd >/dev/null || missing+=(zstd)
	command -v nft >/dev/null || missing+=(nftables)
	[ ${#missing[@]} -gt 0 ] || return 0
	command -v apt-get >/dev/null ||
		kube_die "missing: ${missing[*]} (Debian package names): install them and run this again"
	kube_log "installing ${missing[*]} (apt-get)"
	apt-get update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}" >/dev/null ||
		kube_die "apt-get install ${missing[*]} failed: install them by hand and run this again"
}

kctl() { "$KUBE_BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

# pid_alive NAME: whether the process recorded in $KUBE_WORK/run/NAME.pid runs.
pid_alive() {
	local f=$KUBE_WORK/run/$1.pid
	[ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

# api_url: the apiserver's URL, as the running cluster's admin kubeconfig has it (a cluster
# started by an older up.sh may listen elsewhere than KUBE_API_ADDR says).
api_url() {
	local u
	u=$(sed -n 's/^ *server: //p' "$KUBECONFIG_FILE" 2>/dev/null | head -n 1)
	echo "${u:-https://$KUBE_API_ADDR:$KUBE_API_PORT}"
}

# api_ready: whether the apiserver answers /readyz.
api_ready() {
	curl -sf --max-time 3 --cacert "$KUBE_WORK/pki/ca.crt" --cert "$KUBE_WORK/pki/admin.crt" \
		--key "$KUBE_WORK/pki/admin.key" "$(api_url)/readyz" >/dev/null 2>&1
}

# kube_lock: one user of the cluster's namespaces and node agents at a time: the lock that
# test/e2e/kube-run.sh takes (fd 9 on $KUBE_WORK/e2e.lock). A process started under the lock
# (KUBE_LOCK_HELD=1, exported) has it already: a second open of the file would wait for itself.
kube_lock() {
	[ "${KUBE_LOCK_HELD:-}" != 1 ] || return 0
	exec 9>"$KUBE_WORK/e2e.lock"
	if ! flock -n 9; then
		kube_log "another user of the cluster holds $KUBE_WORK/e2e.lock (test/e2e/kube-run.sh): waiting for it"
		flock 9
	fi
	export KUBE_LOCK_HELD=1
}

khelm() { "$KUBE_BIN/helm" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

# kube_sys_resource: the chart's nodeAgent.sysResource for this host's nodes: false where no
# process here can have the capability SYS_RESOURCE (bit 24 of CapBnd off: the container
# runtime refuses a container asking for it), true otherwise.
kube_sys_resource() {
	local bnd
	bnd=$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)
	if (((16#$bnd >> 24) & 1)); then echo true; else echo false; fi
}

# node_agent_manifest: deploy/kubernetes/node-agent.yaml as this host's test cluster runs it: the
# volumes under the cluster's work dir, and without SYS_RESOURCE where no process here can have it
# (kube_sys_resource), since the container runtime would refuse the node agents' containers.
node_agent_manifest() {
	local caps=
	[ "$(kube_sys_resource)" = true ] || caps='s/, SYS_RESOURCE\]/]/'
	sed -e "s#/var/lib/warren/volumes#$KUBE_WORK/volumes#" ${caps:+-e "$caps"} "$KUBE_REPO/deploy/kubernetes/node-agent.yaml"
}
