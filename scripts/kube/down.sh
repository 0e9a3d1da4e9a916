#!/usr/bin/env bash
# down.sh — stops the test cluster and leaves the host as it was before up.sh: pods deleted,
# every process stopped (by its recorded PID, or for what pods leave behind, by its cgroup
# or by paths only this cluster uses), cgroups, bridges, veths, iptables rules, kube-proxy's
# nftables tables, mounts, forwarding setting and $KUBE_WORK removed. Safe to run twice, or
# without a cluster.
set -uo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

T0=$SECONDS
step() { kube_log "[$((SECONDS - T0))s] $*"; }
RUN=$KUBE_WORK/run

# stop_pid PID [SECONDS]: TERM, then KILL after SECONDS (10).
stop_pid() {
	local pid=$1 secs=${2:-10}
	kill -0 "$pid" 2>/dev/null || return 0
	kill "$pid" 2>/dev/null
	for _ in $(seq 1 $((secs * 4))); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.25
	done
	kill -9 "$pid" 2>/dev/null
	sleep 0.2
}

stop_file() { [ -f "$1" ] && stop_pid "$(cat "$1")" "${2:-10}"; }

# kill_cgroup_tree DIR: SIGKILL to every process in the cgroup DIR and below (pod
# containers, runsc sandboxes), thawed first, until none is left.
kill_cgroup_tree() {
	local d=$1 pids
	# A frozen cgroup (a paused sandbox) holds SIGKILL until it is thawed.
	find "$d" -name freezer.state 2>/dev/null | while read -r f; do echo THAWED >"$f" 2>/dev/null; done
	for _ in $(seq 1 20); do
		pids=$(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
		[ -n "$pids" ] || return 0
		# shellcheck disable=SC2086
		kill -9 $pids 2>/dev/null
		sleep 0.25
	done
	kube_log "WARNING: processes still in $d after SIGKILL: $pids"
}

# pids_with TEXT: processes whose command line contains TEXT (a path under $KUBE_WORK, so
# only this cluster's shims and runsc processes match).
pids_with() {
	grep -lsF -- "$1" /proc/[0-9]*/cmdline | cut -d/ -f3 | grep -vx "$$"
}

if [ -f "$KUBECONFIG_FILE" ] && api_ready; then
	step "deleting pods"
	timeout 60 "$KUBE_BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" delete pods --all --all-namespaces \
		--grace-period=2 --wait=true --timeout=45s >/dev/null 2>&1 ||
		kube_log "some pods did not go within 45s; they are killed below"
fi

for i in $(seq 1 "$KUBE_NODES"); do
	dir=$(node_dir "$i")
	name=$(node_name "$i")
	[ -d "$dir" ] || continue
	step "stopping node $name"
	stop_file "$dir/kubelet.pid"
	for h in /sys/fs/cgroup/*/"$name"; do [ -d "$h" ] && kill_cgroup_tree "$h"; done
	# Shims of this node's containerd (their -address is its socket), runsc processes
	# (their --root is the node's).
	for pid in $(pids_with "$dir/"); do
		[ "$pid" = "$(cat "$dir/containerd.pid" 2>/dev/null)" ] || stop_pid "$pid" 5
	done
	stop_file "$dir/containerd.pid"
	stop_file "$RUN/node$i.pid"
done

step "stopping the control plane"
for p in registry registry-pods kube-proxy scheduler controller-manager apiserver etcd; do stop_file "$RUN/$p.pid"; done
# The cache of deploy/kubernetes/buildkitd.yaml's buildkitd (a hostPath).
rm -rf /var/lib/warren-buildkit

step "removing mounts, cgroups, bridges, forwarding rules"
# Node mounts lived in the nodes' namespaces and went with them; anything under
# $KUBE_WORK still mounted on the host (a crash mid-way) goes now, deepest first.
awk -v w="$KUBE_WORK/" 'index($5, w) == 1 {print $5}' /proc/self/mountinfo | sort -r |
	while read -r m; do umount -l "$m" 2>/dev/null; done
for i in $(seq 1 "$KUBE_NODES"); do
	name=$(node_name "$i")
	for h in /sys/fs/cgroup/*/"$name"; do
		[ -d "$h" ] || continue
		find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null
		[ ! -d "$h" ] || kube_log "WARNING: could not remove cgroup $h (processes left: $(find "$h" -name cgroup.procs -exec cat {} + | tr '\n' ' '))"
	done
	# The node agent's egress table (internal/nodeagent TableName: the node's name hashed),
	# which it leaves in the kernel when it stops, so that its sandboxes stay refused.
	table="warren-egress-$(printf %s "$name" | sha256sum | cut -c1-8)"
	! nft list table ip "$table" >/dev/null 2>&1 || nft delete table ip "$table"
	br=$(node_bridge "$i")
	if ip link show "$br" >/dev/null 2>&1; then
		# Veths of pods whose network namespace outlived them.
		for v in $(ip -o link show master "$br" | awk -F': ' '{print $2}' | cut -d@ -f1); do ip link del "$v" 2>/dev/null; done
		ip link del "$br"
	fi
done
while iptables -D FORWARD -j "$KUBE_CHAIN" 2>/dev/null; do :; done
# kube-proxy leaves its tables when it stops; only those of a kube-proxy this cluster ran
# are deleted (another cluster's would have the same names).
if [ -f "$KUBE_WORK/kube-proxy-tables" ]; then
	for f in ip ip6; do
		! nft list table "$f" kube-proxy >/dev/null 2>&1 || nft delete table "$f" kube-proxy
	done
fi
if iptables -S "$KUBE_CHAIN" >/dev/null 2>&1; then
	iptables -F "$KUBE_CHAIN"
	iptables -X "$KUBE_CHAIN"
fi
if [ -f "$KUBE_WORK/ip_forward.orig" ]; then
	cat "$KUBE_WORK/ip_forward.orig" >/proc/sys/net/ipv4/ip_forward
fi
# The mount points up.sh made (each node's own directories were mounted over them).
if [ -f "$KUBE_WORK/made-dirs" ]; then
	while read -r d; do rm -rf "$d"; done <"$KUBE_WORK/made-dirs"
fi
step "removing $KUBE_WORK (the nodes' images and containers)"
rm -rf "$KUBE_WORK"
step "down: the cluster is gone"
