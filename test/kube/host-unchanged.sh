#!/usr/bin/env bash
# host-unchanged.sh — proves that the test cluster leaves the host as it found it.
#
#   test/kube/host-unchanged.sh snapshot FILE   record the host's state (before scripts/kube.sh up)
#   test/kube/host-unchanged.sh compare FILE    record it again (after scripts/kube.sh down) and
#                                               fail, showing the difference, if it changed
#
# What is recorded: every sysctl of the host's namespaces, iptables-save and ip6tables-save
# of every table (without packet counters), the nftables tables (and the rules of those
# iptables-nft does not manage, such as kube-proxy's), the mount table (mount point, type, source,
# options), every cgroup directory, network links (name, kind, master, and state but for
# bridges), addresses and routes, and the directories the kubelet and containerd are known to create when
# misconfigured (/var/lib/kubelet, /var/lib/cni, /var/log/pods, /var/log/containers,
# /etc/cni, /opt/cni, /run/netns, /opt/containerd, /run/containerd). Counters that move on their own (entropy,
# inode and file counts, conntrack entries, PIDs) are left out.
#
# The Docker engines' own objects are left out of both readings, as test.sh runs the Docker
# suites beside the cluster (see without_others): their bridges and the containers' veths on
# them (and every line naming one: sysctls, addresses, routes), the rules in Docker's and
# Warren's iptables chains and Docker's hairpin rules of published ports, the mounts under the
# engines' roots, the containers' cgroups, the end-to-end tests' outside hosts, and the cgroups
# this machine's own job runner makes for the commands it runs (process_api/<id>). Everything
# else on the host is compared, the order of lines included. HOST_UNCHANGED_IGNORE=REGEX leaves
# out more lines (on a machine where other things run); CI sets none.
set -euo pipefail

# links prints every network link: name, kind, master, state. A bridge's state is left out: it
# is its carrier, which follows its ports (listed themselves) and reaches the link's state a
# while after a port goes (Docker's sandbox bridge reads UP for seconds after its last container
# is removed).
links() {
	ip -o -d link show | awk '{
		name=$2; master="-"; kind="-"
		for (i=3; i<=NF; i++) { if ($i == "master") master=$(i+1); if ($i == "state") state=$(i+1) }
		if (match($0, / (bridge|veth|vxlan|bridge_slave|tun|dummy) /)) kind=substr($0, RSTART+1, RLENGTH-2)
		if (kind == "bridge") state="-"
		print name, kind, master, state
	}' | sort
}

# snapshot prints the host's state once two readings a second apart agree (for at most 30 s): a
# step that just ended may still be settling. The kernel removes the host ends of containers just
# removed in the background, and their sysctls, addresses and cgroups go with them.
snapshot() {
	local prev cur i
	prev=$(read_state | without_others)
	for i in $(seq 30); do
		sleep 1
		cur=$(read_state | without_others)
		[ "$cur" = "$prev" ] && break
		prev=$cur
	done
	printf '%s\n' "$prev"
}

# The Docker engines' bridges (the main engine's docker0 and br-*, Warren's networks warren*,
# the gVisor test engine's wgv*) and the end-to-end tests' outside hosts (wo<id>h). The
# cluster's own are wkube<i>, which no pattern here matches.
docker_bridges='docker0|br-[0-9a-f]+|warren[0-9a-z-]*|wgv[0-9a-z-]*'

# without_others reads a state on stdin and leaves out the lines of objects that the Docker
# engines and the end-to-end tests on them own (see the top of this file): the interfaces among
# the links of this very reading, and lines of the other sections by their owners' names.
without_others() {
	local state names
	state=$(cat)
	names=$(mktemp)
	awk -v b="^($docker_bridges)$" '
		/^## / { links = ($0 == "## links" || $0 == "## links first") ; next }
		links {
			name = $1; sub(/@.*/, "", name); sub(/:$/, "", name)
			if (name ~ b || $3 ~ b || name ~ /^wo[0-9a-z]+h$/) print name
		}' <<<"$state" | sort -u >"$names"
	awk '/^## / { first = ($0 == "## links first") } !first' <<<"$state" |
		grep -vE -- '(^|[ :-])(DOCKER|WRN-)|^-A POSTROUTING -s ([0-9.]+)/32 -d \3/32 -p tcp -m tcp --dport [0-9]+ -j MASQUERADE$|"?warren(-gvisor)?:|/var/lib/docker/|/run/docker/|/var/lib/warren-gvisor|/run/warren-gvisor|/run/containerd/io\.containerd\.runtime\.v2\.task/moby/|/tmp/warren-|/run/netns/warren-e2e-|^/sys/fs/cgroup/[^ ]*/(docker|warren-gvisor|process_api)(/|$)' |
		if [ -s "$names" ]; then grep -v -w -F -f "$names"; else cat; fi
	rm -f "$names"
}

read_state() {
	# (The links first as well as last: an interface made or removed while the rest is read
	# is then known by name either way.)
	echo "## links first"
	links
	echo "## sysctl"
	# Values that move by themselves, not by anything a cluster sets.
	sysctl -a 2>/dev/null | grep -vE '^(kernel\.random\.|kernel\.ns_last_pid|kernel\.pty\.nr|fs\.dentry-state|fs\.inode-|fs\.file-nr|fs\.quota\.|net\.netfilter\.nf_conntrack_count|kernel\.sched_|vm\.stat_|net\.ipv4\.tcp_mem|net\.ipv4\.udp_mem|fs\.aio-nr|kernel\.perf_event_max|kernel\.tainted|net\.core\.netdev_rss_key)' | sort
	echo "## iptables"
	for t in iptables-save ip6tables-save; do
		command -v "$t" >/dev/null || continue
		"$t" 2>/dev/null | sed -E -e '/^#/d' -e 's/ \[[0-9]+:[0-9]+\]$//' -e 's/^(:[^ ]+ [^ ]+) \[[0-9]+:[0-9]+\]/\1/'
	done
	echo "## nftables"
	# Tables of nftables' own (kube-proxy's): their rules without counters. Those iptables-nft
	# manages are in iptables-save's output above.
	nft list tables | sort
	local t
	nft list tables | while read -r _ fam name; do
		# iptables' own tables are in iptables-save's output above: iptables-nft marks a table
		# as its own only once it holds a rule, so an empty one would read as nftables' here
		# and as iptables' a moment later.
		case $fam/$name in ip/filter | ip/nat | ip/mangle | ip/raw | ip/security | ip6/filter | ip6/nat | ip6/mangle | ip6/raw | ip6/security) continue ;; esac
		t=$(nft list table "$fam" "$name" 2>&1)
		# (nft names them on stderr: "table ip filter is managed by iptables-nft").
		grep -q 'managed by iptables-nft' <<<"$t" || sed -E 's/ counter packets [0-9]+ bytes [0-9]+/ counter/' <<<"$t"
	done
	echo "## mounts"
	awk '{sep=0; for (i=7; i<=NF; i++) if ($i == "-") {sep=i; break}; print $5, $(sep+1), $(sep+2), $6}' /proc/self/mountinfo | sort
	echo "## cgroups"
	find /sys/fs/cgroup -mindepth 1 -type d 2>/dev/null | sort
	echo "## links"
	links
	echo "## addresses"
	ip -o addr show | awk '{print $2, $3, $4}' | sort
	echo "## routes"
	# (A route's "linkdown" is its bridge's carrier: see links.)
	ip route show table all 2>/dev/null | grep -v '^local\|^broadcast' | sed 's/ linkdown//' | sort
	echo "## paths"
	for p in /var/lib/kubelet /var/lib/cni /var/log/pods /var/log/containers /etc/cni /opt/cni /opt/containerd /run/containerd /var/lib/warren-kube; do
		[ -e "$p" ] && echo "$p exists"
	done
	# (Network namespaces by name: the end-to-end tests' outside hosts come and go there, and
	# `ip netns add` leaves the directory.)
	[ -d /run/netns ] && ls -1 /run/netns | sed 's|^|/run/netns/|'
	return 0
}

case ${1:-} in
snapshot)
	command -v nft >/dev/null || {
		echo "host-unchanged: nft is missing (scripts/kube.sh deps, or apt-get install nftables): the cluster's kube-proxy writes nftables tables, which this checks" >&2
		exit 1
	}
	snapshot >"${2:?usage: host-unchanged.sh snapshot FILE}"
	echo "host-unchanged: recorded the host's state in $2 ($(wc -l <"$2") lines)"
	;;
compare)
	before=${2:?usage: host-unchanged.sh compare FILE}
	[ -f "$before" ] || { echo "host-unchanged: $before is missing: run 'host-unchanged.sh snapshot $before' before scripts/kube.sh up" >&2; exit 1; }
	after=$(mktemp)
	snapshot >"$after"
	if [ -n "${HOST_UNCHANGED_IGNORE:-}" ]; then
		grep -vE -- "$HOST_UNCHANGED_IGNORE" "$before" >"$after.b" || true
		grep -vE -- "$HOST_UNCHANGED_IGNORE" "$after" >"$after.a" || true
		mv "$after.a" "$after"
		before=$after.b
	fi
	if diff -u "$before" "$after" >"$after.diff"; then
		echo "host-unchanged: the host is as it was (sysctls, iptables, nftables, mounts, cgroups, links, addresses, routes, paths)"
		rm -f "$after" "$after.diff" "$after.b"
		exit 0
	fi
	echo "host-unchanged: FAILED: the host differs from before the cluster ran (- before, + after):" >&2
	tail -n +3 "$after.diff" | grep -E '^[-+]' >&2
	rm -f "$after" "$after.diff" "$after.b"
	exit 1
	;;
*)
	sed -n '2,6p' "$0" >&2
	exit 2
	;;
esac
