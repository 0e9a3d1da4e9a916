#!/usr/bin/env bash
# up.sh — brings the test cluster up (see scripts/kube.sh). Idempotent: a healthy cluster is
# left as it is; leftovers of a stopped or broken one are cleaned up (down.sh) first.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

T0=$SECONDS
step() { kube_log "[$((SECONDS - T0))s] $*"; }
RUN=$KUBE_WORK/run
PKI=$KUBE_WORK/pki

# healthy: every process runs, the apiserver is ready and every node is Ready.
healthy() {
	local p i
	for p in etcd apiserver controller-manager scheduler registry; do pid_alive "$p" || return 1; done
	for i in $(seq 1 "$KUBE_NODES"); do pid_alive "node$i" || return 1; done
	# A cluster an older up.sh started has no kube-proxy: it stays as it is (others may be
	# using it); a down and an up bring it.
	[ "$KUBE_PROXY" != 1 ] || [ ! -f "$RUN/kube-proxy.pid" ] || pid_alive kube-proxy || return 1
	api_ready || return 1
	for i in $(seq 1 "$KUBE_NODES"); do
		[ "$(kctl get node "$(node_name "$i")" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] || return 1
	done
}

# start NAME COMMAND...: runs a daemon in a session of its own (so a CI step's timeout does
# not take it along), logging to $RUN/NAME.log, its PID in $RUN/NAME.pid.
start() {
	local name=$1
	shift
	setsid "$@" >"$RUN/$name.log" 2>&1 </dev/null &
	echo $! >"$RUN/$name.pid"
}

# wait_for WHAT SECONDS LOGNAME COMMAND...: polls COMMAND until it succeeds; fails with the
# log's tail if the daemon LOGNAME exits or the time runs out.
wait_for() {
	local what=$1 secs=$2 name=$3 end
	shift 3
	end=$((SECONDS + secs))
	until "$@"; do
		if ! pid_alive "$name"; then
			tail -n 25 "$RUN/$name.log" >&2
			kube_die "$name exited before $what (log above; full log $RUN/$name.log)"
		fi
		if [ $SECONDS -ge $end ]; then
			tail -n 25 "$RUN/$name.log" >&2
			kube_die "no $what after ${secs}s (log above; full log $RUN/$name.log); scripts/kube.sh down cleans up"
		fi
		sleep 0.5
	done
}

preflight() {
	[ "$(id -u)" = 0 ] || kube_die "the test cluster needs root (cgroups, bridges, mounts): run as root"
	kube_deps
	[ -d /sys/fs/cgroup/memory ] ||
		kube_die "this script drives cgroup v1 (cgroupfs), and /sys/fs/cgroup/memory is missing; on a cgroup v2 host set failCgroupV1 back and test it"
}

# ports_free: nothing listens where the cluster is about to.
ports_free() {
	local i p
	for i in $(seq 1 "$KUBE_NODES"); do
		for p in $(node_kubelet_port "$i") $(($(node_kubelet_port "$i") - 2)); do
			! ss -Hltn "sport = :$p" | grep -q . ||
				kube_die "port $p (node $i's kubelet) is in use: stop what listens there (ss -ltnp) or set KUBE_KUBELET_PORT_BASE"
		done
	done
	for p in $KUBE_ETCD_PORT $KUBE_ETCD_PEER_PORT $KUBE_API_PORT $((KUBE_API_PORT + 1)) $((KUBE_API_PORT + 2)) \
		$KUBE_PROXY_HEALTH_PORT $KUBE_PROXY_METRICS_PORT $KUBE_REGISTRY_PORT; do
		! ss -Hltn "sport = :$p" | grep -q . ||
			kube_die "port $p is in use: stop what listens there (ss -ltnp) or set KUBE_ETCD_PORT/KUBE_API_PORT/KUBE_PROXY_*_PORT/KUBE_REGISTRY_PORT"
	done
	if [ "$KUBE_PROXY" = 1 ]; then
		local f
		for f in ip ip6; do
			! nft list table "$f" kube-proxy >/dev/null 2>&1 ||
				kube_die "the nftables table '$f kube-proxy' exists: another cluster's kube-proxy runs on this host (its table names are fixed). Run this cluster with KUBE_PROXY=0, or stop the other (a leftover: nft delete table $f kube-proxy)"
		done
	fi
}

# host_network: a bridge per node holding the gateway of its pod CIDR (the host routes to
# every pod through them), forwarding on, and the chain $KUBE_CHAIN: pods reach pods (on
# their node and across nodes, through the host), nothing else is forwarded to or from them
# (no route out, however the host's FORWARD policy is set). The jump is appended to FORWARD,
# after Docker's chains, so rules a Warren server puts into DOCKER-USER for these bridges
# come first.
host_network() {
	local i br
	if [ "$(cat /proc/sys/net/ipv4/ip_forward)" != 1 ]; then
		echo 0 >"$KUBE_WORK/ip_forward.orig"
		echo 1 >/proc/sys/net/ipv4/ip_forward
	fi
	for i in $(seq 1 "$KUBE_NODES"); do
		br=$(node_bridge "$i")
		ip link show "$br" >/dev/null 2>&1 || ip link add "$br" type bridge
		ip addr replace "$(node_gw "$i")/24" dev "$br"
		ip link set "$br" up
	done
	iptables -N "$KUBE_CHAIN" 2>/dev/null || iptables -F "$KUBE_CHAIN"
	local b=$KUBE_BRIDGE_PREFIX+
	iptables -A "$KUBE_CHAIN" -i "$b" -o "$b" -j ACCEPT
	iptables -A "$KUBE_CHAIN" -i "$b" -j DROP
	iptables -A "$KUBE_CHAIN" -o "$b" -j DROP
	iptables -C FORWARD -j "$KUBE_CHAIN" 2>/dev/null || iptables -A FORWARD -j "$KUBE_CHAIN"
	# containerd's CNI cache (/var/lib/cni) and the kubelet's device plugin socket
	# (/var/lib/kubelet/device-plugins) ignore the configured directories, and the node
	# agent's hostPath is the usual /run/containerd; each node mounts its own over them in
	# its namespace, which needs the directories to exist. down.sh removes those that up made.
	local d
	for d in /var/lib/cni /var/lib/kubelet /run/containerd; do
		if [ ! -d "$d" ]; then
			mkdir "$d"
			echo "$d" >>"$KUBE_WORK/made-dirs"
		fi
	done
}

# cgroup_roots: node I's pods live under /warren-kube-nodeI in every hierarchy. cpuset
# children start with no CPUs or memory nodes: give them the parent's.
cgroup_roots() {
	local i h d
	for i in $(seq 1 "$KUBE_NODES"); do
		for h in /sys/fs/cgroup/*/; do
			[ -f "$h/cgroup.procs" ] || continue
			d=$h$(node_name "$i")
			mkdir -p "$d"
			if [ -f "$h/cpuset.cpus" ]; then
				cat "$h/cpuset.cpus" >"$d/cpuset.cpus"
				cat "$h/cpuset.mems" >"$d/cpuset.mems"
			fi
		done
	done
}

control_plane() {
	mkdir -p "$KUBE_WORK/etcd"
	step "starting etcd $ETCD_VERSION (127.0.0.1:$KUBE_ETCD_PORT)"
	# --unsafe-no-fsync: a throwaway test store on a shared disk; down deletes it.
	start etcd "$KUBE_BIN/etcd" --name "$KUBE_NAME" --data-dir "$KUBE_WORK/etcd" \
		--listen-client-urls "http://127.0.0.1:$KUBE_ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$KUBE_ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$KUBE_ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$KUBE_ETCD_PEER_PORT" \
		--initial-cluster "$KUBE_NAME=http://127.0.0.1:$KUBE_ETCD_PEER_PORT" --unsafe-no-fsync
	wait_for "etcd health" 60 etcd curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$KUBE_ETCD_PORT/health"

	step "starting kube-apiserver $KUBE_VERSION (https://$KUBE_API_ADDR:$KUBE_API_PORT)"
	# On node 1's bridge address, which pods reach (through the host); the Service
	# "kubernetes" points there (the endpoint reconciler writes the advertised address).
	# Kubelets are reached at their InternalIP (the node's bridge address).
	start apiserver "$KUBE_BIN/kube-apiserver" \
		--bind-address "$KUBE_API_ADDR" --advertise-address "$KUBE_API_ADDR" --secure-port "$KUBE_API_PORT" \
		--etcd-servers "http://127.0.0.1:$KUBE_ETCD_PORT" --service-cluster-ip-range "$KUBE_SERVICE_CIDR" \
		--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" --client-ca-file "$PKI/ca.crt" \
		--kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types InternalIP \
		--service-account-issuer https://kubernetes.default.svc --service-account-key-file "$PKI/sa.pub" \
		--service-account-signing-key-file "$PKI/sa.key" --authorization-mode Node,RBAC \
		--enable-admission-plugins NodeRestriction --allow-privileged=true --profiling=false
	wait_for "apiserver /readyz" 120 apiserver api_ready

	kubeconfig "$KUBE_WORK/controller-manager.kubeconfig" controller-manager
	kubeconfig "$KUBE_WORK/scheduler.kubeconfig" scheduler
	step "starting kube-controller-manager and kube-scheduler"
	start controller-manager "$KUBE_BIN/kube-controller-manager" \
		--kubeconfig "$KUBE_WORK/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$KUBE_WORK/controller-manager.kubeconfig" \
		--authorization-kubeconfig "$KUBE_WORK/controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port $((KUBE_API_PORT + 1)) --leader-elect=false \
		--service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
		--cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
		--use-service-account-credentials --service-cluster-ip-range "$KUBE_SERVICE_CIDR" --profiling=false
	start scheduler "$KUBE_BIN/kube-scheduler" --kubeconfig "$KUBE_WORK/scheduler.kubeconfig" \
		--authentication-kubeconfig "$KUBE_WORK/scheduler.kubeconfig" \
		--authorization-kubeconfig "$KUBE_WORK/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port $((KUBE_API_PORT + 2)) --leader-elect=false --profiling=false
}

# registry: CNCF Distribution on loopback, its store under $KUBE_WORK (down.sh deletes it).
registry() {
	mkdir -p "$KUBE_WORK/registry"
	cat >"$KUBE_WORK/registry.yml" <<YAML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $KUBE_WORK/registry
  delete:
    enabled: true
http:
  addr: $KUBE_REGISTRY
YAML
	step "starting the image registry $DISTRIBUTION_VERSION (http://$KUBE_REGISTRY)"
	start registry env OTEL_TRACES_EXPORTER=none "$KUBE_BIN/registry" serve "$KUBE_WORK/registry.yml"
	wait_for "the registry's /v2/" 30 registry curl -sf -o /dev/null --max-time 2 "http://$KUBE_REGISTRY/v2/"
}

# registry_pods: a second Distribution on the same store, on node 1's bridge address, where
# pods reach it (the first is on loopback, where the kubelets pull): buildkitd pushes there.
registry_pods() {
	pid_alive registry-pods && return
	sed "s|^  addr: .*|  addr: $KUBE_REGISTRY_PODS|" "$KUBE_WORK/registry.yml" >"$KUBE_WORK/registry-pods.yml"
	step "starting the image registry for pods (http://$KUBE_REGISTRY_PODS, the same store)"
	start registry-pods env OTEL_TRACES_EXPORTER=none "$KUBE_BIN/registry" serve "$KUBE_WORK/registry-pods.yml"
	wait_for "the pods' registry's /v2/" 30 registry-pods curl -sf -o /dev/null --max-time 2 "http://$KUBE_REGISTRY_PODS/v2/"
}

# registry_pods_http: the nodes' containerd pulls from the pods' registry address in plain HTTP
# too (a control plane in a pod names its images there); containerd reads certs.d at each pull.
registry_pods_http() {
	local i d
	for i in $(seq 1 "$KUBE_NODES"); do
		d=$(node_dir "$i")/certs.d/$KUBE_REGISTRY_PODS
		mkdir -p "$d"
		printf 'server = "http://%s"\n[host."http://%s"]\n  capabilities = ["pull", "resolve"]\n' \
			"$KUBE_REGISTRY_PODS" "$KUBE_REGISTRY_PODS" >"$d/hosts.toml"
	done
}

nodes() {
	local i
	for i in $(seq 1 "$KUBE_NODES"); do
		step "starting node $(node_name "$i"): containerd $CONTAINERD_VERSION + kubelet (pods $(node_cidr "$i") on $(node_bridge "$i"))"
		"$KUBE_SCRIPTS/node.sh" config "$i"
		start "node$i" unshare --mount --propagation private "$KUBE_SCRIPTS/node.sh" run "$i"
	done
	for i in $(seq 1 "$KUBE_NODES"); do
		wait_for "node $(node_name "$i") Ready" 180 "node$i" node_ready "$i"
		# Recorded for whoever routes to pods; the CNI config holds the same range.
		kctl patch node "$(node_name "$i")" --type merge \
			-p "{\"spec\":{\"podCIDR\":\"$(node_cidr "$i")\",\"podCIDRs\":[\"$(node_cidr "$i")\"]}}" >/dev/null 2>&1 || true
	done
	step "nodes Ready: $(kctl get nodes -o name | tr '\n' ' ')"
}

node_ready() {
	[ "$(kctl get node "$(node_name "$1")" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

default_sa() { kctl get serviceaccount default -n default >/dev/null 2>&1; }

# kube_proxy: Services' virtual IPs, in nftables mode, for the host's network namespace
# (both nodes' pods are routed through it), as node 1's kube-proxy. It changes no sysctl:
# the conntrack settings it would raise are left as they are (0), and it keeps its own OOM
# score (lowering it needs CAP_SYS_RESOURCE). down.sh deletes its tables.
kube_proxy() {
	kubeconfig "$KUBE_WORK/kube-proxy.kubeconfig" kube-proxy
	cat >"$KUBE_WORK/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: $KUBE_WORK/kube-proxy.kubeconfig
hostnameOverride: $(node_name 1)
clusterCIDR: $KUBE_CLUSTER_CIDR
detectLocalMode: ClusterCIDR
healthzBindAddress: 127.0.0.1:$KUBE_PROXY_HEALTH_PORT
metricsBindAddress: 127.0.0.1:$KUBE_PROXY_METRICS_PORT
oomScoreAdj: 0
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
YAML
	step "starting kube-proxy $KUBE_VERSION (nftables; Services $KUBE_SERVICE_CIDR)"
	# Recorded before it starts: down.sh deletes the tables of a kube-proxy this cluster ran.
	touch "$KUBE_WORK/kube-proxy-tables"
	start kube-proxy "$KUBE_BIN/kube-proxy" --config "$KUBE_WORK/kube-proxy.yaml"
	wait_for "kube-proxy's rules for the Service kubernetes" 60 kube-proxy service_programmed
}

# service_programmed: kube-proxy is healthy and has the Service "kubernetes" in its table.
service_programmed() {
	curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$KUBE_PROXY_HEALTH_PORT/healthz" &&
		nft list table ip kube-proxy 2>/dev/null | grep -qF "${KUBE_SERVICE_CIDR%.*}.1 . tcp . 443"
}

cluster_objects() {
	# The handler is containerd's runtime "runsc" on every node (node.sh).
	kctl apply -f - >/dev/null <<YAML
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: gvisor
handler: runsc
YAML
	# Pods need the namespace's default ServiceAccount, which the controller manager makes.
	wait_for "default ServiceAccount" 60 controller-manager default_sa
}

# ready_for_warren: what a `warren serve --engine kubernetes` on the host needs in the cluster,
# the chart's node side in the namespace warren (controlPlane.enabled=false): the RBAC of its
# service account, the node agents' token Secret (made once, kept by upgrades) and their DaemonSet
# running warren/node, built from this tree's bin/ and imported into every node. Under the
# cluster's lock: test/e2e/kube-run.sh applies and deletes the same namespace.
ready_for_warren() {
	local repo=$KUBE_REPO
	step "warren/node: bin/ (scripts/build.sh), warren/base and the image (scripts/kube-images.sh)"
	[ -x "$repo/bin/warren" ] && [ -x "$repo/bin/warren-agent" ] || (cd "$repo" && scripts/build.sh)
	docker image inspect warren/base >/dev/null 2>&1 || (cd "$repo" && bin/warren image build)
	(cd "$repo" && scripts/kube-images.sh)
	kube_lock
	"$repo/scripts/kube.sh" load warren/node
	# Nodes started before node.sh shared the volumes' directory (the node agents see it
	# HostToContainer).
	kube_share_volumes
	step "the chart's node side in the namespace warren (helm upgrade --install warren deploy/helm/warren)"
	khelm upgrade --install warren "$repo/deploy/helm/warren" -n warren --create-namespace \
		--set controlPlane.enabled=false --set runtimeClass.create=false \
		--set nodeAgent.volumesDir="$KUBE_WORK/volumes" --set nodeAgent.sysResource="$(kube_sys_resource)" \
		--set buildkit.registryHost="$KUBE_REGISTRY_PODS" --wait --timeout 3m >/dev/null ||
		kube_die "the node agents did not become ready: scripts/kube.sh kubectl -n warren get pods"
	step "ready for warren serve --engine kubernetes --kubeconfig $KUBECONFIG_FILE: node agents on $(kctl -n warren get daemonset warren-node -o 'jsonpath={.status.numberReady}') nodes"
}

preflight
if [ -d "$KUBE_WORK" ] && healthy; then
	step "the cluster is already up"
	registry_pods
	registry_pods_http
	"$KUBE_SCRIPTS/buildkit.sh"
	[ "$KUBE_PROXY" != 1 ] || [ -f "$RUN/kube-proxy.pid" ] ||
		step "NOTE: it runs without kube-proxy (an older up.sh, or KUBE_PROXY=0 started it): Services have no virtual IPs; scripts/kube.sh down, then up, brings it"
else
	if [ -d "$KUBE_WORK" ] || ip link show "$(node_bridge 1)" >/dev/null 2>&1 ||
		iptables -S "$KUBE_CHAIN" >/dev/null 2>&1; then
		step "cleaning up what an earlier run left (scripts/kube/down.sh)"
		"$KUBE_SCRIPTS/down.sh"
	fi
	ports_free
	step "binaries (scripts/kube/build.sh: cached under $KUBE_CACHE)"
	if [ "$KUBE_PROXY" = 1 ]; then "$KUBE_SCRIPTS/build.sh"; else "$KUBE_SCRIPTS/build.sh" kubernetes etcd containerd gvisor pause registry helm buildkit; fi
	mkdir -p "$RUN" "$KUBE_WORK/images"
	step "certificates (openssl) and images (pause, busybox)"
	"$KUBE_SCRIPTS/pki.sh"
	kubeconfig "$KUBECONFIG_FILE" admin
	"$KUBE_SCRIPTS/images.sh" "$KUBE_WORK/images"
	step "host network: bridges, forwarding rules (chain $KUBE_CHAIN), cgroups"
	host_network
	cgroup_roots
	control_plane
	registry
	registry_pods
	nodes
	registry_pods_http
	[ "$KUBE_PROXY" != 1 ] || kube_proxy
	cluster_objects
	"$KUBE_SCRIPTS/buildkit.sh"
	step "up: $KUBE_NODES nodes, RuntimeClass gvisor$([ "$KUBE_PROXY" != 1 ] || echo ", kube-proxy"), registry $KUBE_REGISTRY (pods: $KUBE_REGISTRY_PODS), image $BUILDKIT_IMAGE; scripts/kube.sh down removes it all"
fi
# KUBE_UP_READY=0: the cluster alone (test.sh, whose node-images test runs node agents of its own
# first: two DaemonSets of them cannot share a node's port).
if [ "${KUBE_UP_READY:-1}" != 0 ]; then
	"$KUBE_SCRIPTS/build.sh" helm
	ready_for_warren
fi
# The local-path provisioner (scripts/kube.sh local_path) needs warren's binary: once built.
if ! kctl get storageclass warren-local-path >/dev/null 2>&1; then
	if [ -x "$KUBE_SCRIPTS/../../bin/warren" ]; then
		step "the local-path provisioner, the default StorageClass"
		"$KUBE_SCRIPTS/../kube.sh" local-path
	else
		step "NOTE: no StorageClass yet: scripts/build.sh, then scripts/kube.sh local-path"
	fi
fi
echo "export KUBECONFIG=$KUBECONFIG_FILE"
