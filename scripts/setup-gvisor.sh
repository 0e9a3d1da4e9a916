#!/usr/bin/env bash
# setup-gvisor.sh — gVisor for Warren's tests and benchmarks, without
# touching the main Docker engine.
#
#   scripts/setup-gvisor.sh build          build runsc from the Go module proxy (the cluster's gvisor build, cached)
#   scripts/setup-gvisor.sh start          start a second engine with runsc registered
#   scripts/setup-gvisor.sh restart        stop its dockerd (SIGTERM, as a service manager
#                                          would) and start it again, keeping its data
#   scripts/setup-gvisor.sh stop           stop it and remove its bridge and directories
#   scripts/setup-gvisor.sh env            print the variables the tests read
#
# The second engine has its own data root, exec root, socket and bridge, and
# a containerd of its own that outlives its dockerd, as Debian's docker.service
# runs the main engine (start_containerd says why); it
# runs with --iptables=false --ip-masq=false so it cannot clash with the main
# engine's rules (published ports go through docker-proxy), in experimental
# mode so that `docker checkpoint` works, and with --live-restore (see
# start). Sandboxes on it cannot reach the internet: there is no NAT for its
# bridges. Warren servers run against it should use networks named wgv*
# (e.g. WARREN_NETWORK=wgvsb): `stop` removes their firewall chains.
#
# After `start`, Warren's gVisor tests run with:
#   WARREN_GVISOR_DOCKER_HOST=unix:///run/warren-gvisor/docker.sock go test ./...
#
# Environment (defaults in brackets):
#   GVISOR_VERSION  module version of gvisor.dev/gvisor  [the one the tests were last run with]
#   RUNSC           where runsc is installed              [/usr/local/lib/warren/runsc]
#   RUNSC_WRAPPER   where its wrapper is installed        [$RUNSC-warren] (the engine's runtime,
#                   restoring Warren's memory images in place: internal/runtime/docker/runsc-warren.sh)
#   GV_ROOT         data root of the second engine        [/var/lib/warren-gvisor]
#   GV_RUN          exec root, socket and pid file        [/run/warren-gvisor]
#   GV_BRIDGE       its bridge interface                  [wgv0]
#   GV_BIP          the bridge's address                  [10.213.0.1/24]
#   GV_POOL         address pool of its networks          [10.214.0.0/16]
#   GV_IMAGES       images copied from the main engine    [warren/base]
#   GV_CGROUP       cgroup parent of its containers       [warren-gvisor]
set -euo pipefail

# The proxy serves the repository's "go" branch (plain Go, no Bazel) as pseudo-versions; this is
# the one Warren's tests last passed with. GVISOR_VERSION=latest takes the newest.
GVISOR_VERSION=${GVISOR_VERSION:-v0.0.0-20260905035102-160fafc42237}
RUNSC=${RUNSC:-/usr/local/lib/warren/runsc}
RUNSC_WRAPPER=${RUNSC_WRAPPER:-$RUNSC-warren}
GV_ROOT=${GV_ROOT:-/var/lib/warren-gvisor}
GV_RUN=${GV_RUN:-/run/warren-gvisor}
GV_BRIDGE=${GV_BRIDGE:-wgv0}
GV_BIP=${GV_BIP:-10.213.0.1/24}
GV_POOL=${GV_POOL:-10.214.0.0/16}
GV_IMAGES=${GV_IMAGES:-warren/base}
GV_CGROUP=${GV_CGROUP:-warren-gvisor}
SOCK="unix://$GV_RUN/docker.sock"
CTRD_SOCK="$GV_RUN/containerd/containerd.sock"
GV_FORWARD="-i wgv+ -o wgv+ -m comment --comment warren-gvisor:intra-bridge -j ACCEPT"
# The tests' stand-ins for hosts on the internet (test/e2e/server/outside.mjs) are network
# namespaces on these ranges, never routed off the machine; the engine forwards its sandboxes
# there (and their replies back), and nowhere else.
GV_OUTSIDE=(
	"-i wgv+ -d 198.18.0.0/15 -m comment --comment warren-gvisor:outside -j ACCEPT"
	"-i wgv+ -d 203.0.113.0/24 -m comment --comment warren-gvisor:outside -j ACCEPT"
	"-o wgv+ -m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment warren-gvisor:outside -j ACCEPT"
)

log() { echo "setup-gvisor: $*" >&2; }

build() {
	if [ -x "$RUNSC" ] && [ "${FORCE:-}" != 1 ]; then
		log "runsc already at $RUNSC ($("$RUNSC" --version 2>/dev/null | head -1)); FORCE=1 rebuilds"
		return
	fi
	# runsc is the gvisor component of the test cluster's binaries too, of the same version: one
	# build, cached in the cluster's cache, serves both (a cold one takes a few minutes).
	local cache=${KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/warren/kube}
	log "runsc from gvisor.dev/gvisor@$GVISOR_VERSION: built, or restored from $cache (scripts/kube/build.sh gvisor)"
	GVISOR_VERSION=$GVISOR_VERSION KUBE_CACHE=$cache "$(dirname "$0")/kube/build.sh" gvisor
	install -D -m 0755 "$cache/bin/runsc" "$RUNSC"
	log "installed $RUNSC"
}

start() {
	[ -x "$RUNSC" ] || build
	if [ -S "$GV_RUN/docker.sock" ] && DOCKER_HOST=$SOCK docker version >/dev/null 2>&1; then
		log "engine already running at $SOCK"
	else
		mkdir -p "$GV_ROOT" "$GV_RUN"
		start_containerd
		if ! ip link show "$GV_BRIDGE" >/dev/null 2>&1; then
			ip link add "$GV_BRIDGE" type bridge
			ip addr add "$GV_BIP" dev "$GV_BRIDGE"
			ip link set "$GV_BRIDGE" up
		fi
		# The runtime is runsc behind runsc-warren.sh, which
		# restores Warren's memory images in place (--warren-image-refs
		# tells Warren it may). --overlay2=none: the container's writes go
		# to the engine's layer, as under runc, so docker commit
		# (snapshots) and stopped sandboxes keep them. --allow-suid: sudo
		# works inside.
		install_wrapper
		cat >"$GV_RUN/daemon.json" <<EOF
{
  "experimental": true,
  "runtimes": {"runsc": {"path": "$RUNSC_WRAPPER", "runtimeArgs": ["--warren-image-refs", "--overlay2=none", "--allow-suid"]}}
}
EOF
		# --live-restore is not optional: a dockerd that restarts on an
		# existing data root with --default-address-pool and without it
		# deletes the interface named docker0 -- the MAIN engine's bridge
		# (moby's removeDefaultBridgeInterface), whatever --bridge says.
		local had_docker0=0
		ip link show docker0 >/dev/null 2>&1 && had_docker0=1
		dockerd --config-file "$GV_RUN/daemon.json" --live-restore \
			--data-root "$GV_ROOT" --exec-root "$GV_RUN/exec" --pidfile "$GV_RUN/docker.pid" \
			-H "$SOCK" --containerd "$CTRD_SOCK" \
			--bridge "$GV_BRIDGE" --iptables=false --ip-masq=false --ip-forward=false \
			--default-address-pool "base=$GV_POOL,size=24" --cgroup-parent "$GV_CGROUP" \
			>>"$GV_RUN/dockerd.log" 2>&1 &
		for _ in $(seq 1 60); do
			DOCKER_HOST=$SOCK docker version >/dev/null 2>&1 && break
			sleep 0.5
		done
		DOCKER_HOST=$SOCK docker version >/dev/null || { tail -20 "$GV_RUN/dockerd.log" >&2; exit 1; }
		if [ $had_docker0 = 1 ] && ! ip link show docker0 >/dev/null 2>&1; then
			log "ERROR: the main engine's bridge docker0 vanished while this engine started; recreate it with:"
			log "  ip link add docker0 type bridge && ip addr add 172.17.0.1/16 dev docker0 && ip link set docker0 up"
			exit 1
		fi
		log "engine up at $SOCK (log $GV_RUN/dockerd.log)"
	fi
	for img in $GV_IMAGES; do
		if ! docker image inspect "$img" >/dev/null 2>&1; then
			log "image $img is not on the main engine; skipped"
			continue
		fi
		if [ "$(docker image inspect -f '{{.Id}}' "$img")" != "$(DOCKER_HOST=$SOCK docker image inspect -f '{{.Id}}' "$img" 2>/dev/null)" ]; then
			docker save "$img" | DOCKER_HOST=$SOCK docker load >/dev/null
			log "copied $img"
		fi
	done
	# With --iptables=false the engine adds no FORWARD accept for its
	# bridges, and the main engine's FORWARD policy is DROP: let sandboxes on
	# one of our bridges reach each other and the tests' outside hosts, as an
	# engine with iptables would. (Warren's own egress rules come first, in
	# DOCKER-USER.)
	iptables -C FORWARD $GV_FORWARD 2>/dev/null || iptables -A FORWARD $GV_FORWARD
	for r in "${GV_OUTSIDE[@]}"; do
		iptables -C FORWARD $r 2>/dev/null || iptables -A FORWARD $r
	done
	# A tiny check that runsc runs containers and checkpoints them.
	DOCKER_HOST=$SOCK docker run --rm --runtime runsc --network none "${GV_IMAGES%% *}" true
	log "runsc works"
}

# install_wrapper installs runsc-warren.sh as $RUNSC_WRAPPER,
# naming $RUNSC, through a temporary file (a running wrapper is never
# overwritten in place).
install_wrapper() {
	local tmp
	tmp=$(mktemp "$(dirname "$RUNSC_WRAPPER")/.runsc-warren-XXXXXX")
	sed "s#^RUNSC=.*#RUNSC=$RUNSC#" "$(dirname "$0")/../internal/runtime/docker/runsc-warren.sh" >"$tmp"
	chmod 0755 "$tmp"
	mv -f "$tmp" "$RUNSC_WRAPPER"
}

# start_containerd starts the engine's containerd unless it answers. A
# dockerd that supervises its own containerd stops it when it stops, and a
# container it was starting at that moment is left half made: dockerd's
# clean-up of the failed start cannot reach containerd, and the runsc
# sandbox keeps running, unknown to the engine, on an address the engine
# hands out again once restarted (the next sandbox there is unreachable).
start_containerd() {
	if [ -S "$CTRD_SOCK" ] && ctr --address "$CTRD_SOCK" version >/dev/null 2>&1; then
		return
	fi
	mkdir -p "$GV_RUN/containerd"
	cat >"$GV_RUN/containerd.toml" <<EOF
version = 2
root = "$GV_ROOT/containerd"
state = "$GV_RUN/containerd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$CTRD_SOCK"
[ttrpc]
  address = "$CTRD_SOCK.ttrpc"
[debug]
  address = "$GV_RUN/containerd/debug.sock"
EOF
	# Its temporary directories under the engine's root, emptied at each start: it unpacks every
	# checkpoint a container starts from into one (ctrd-checkpoint*) and never removes it, a whole
	# memory image for a restore that is not by reference.
	rm -rf "$GV_ROOT/tmp"
	mkdir -p -m 0700 "$GV_ROOT/tmp"
	env -u XDG_RUNTIME_DIR TMPDIR="$GV_ROOT/tmp" containerd --config "$GV_RUN/containerd.toml" >>"$GV_RUN/containerd.log" 2>&1 &
	echo $! >"$GV_RUN/containerd.pid"
	for _ in $(seq 1 60); do
		ctr --address "$CTRD_SOCK" version >/dev/null 2>&1 && return
		sleep 0.5
	done
	tail -20 "$GV_RUN/containerd.log" >&2
	log "containerd did not answer at $CTRD_SOCK within 30 s (its log above)"
	exit 1
}

# stop_pid PID: SIGTERM, then up to 20 s for it to exit.
stop_pid() {
	kill "$1" 2>/dev/null || return 0
	for _ in $(seq 1 40); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.5; done
}

# cleanup_firewall removes the iptables chains (and the jumps to them) that
# Warren servers left for networks of this engine; by convention the tests
# and benchmarks name those networks wgv* (WRN-<bridge>-<id>-{I,F}).
cleanup_firewall() {
	local ipt line chain
	for ipt in iptables ip6tables; do
		command -v "$ipt" >/dev/null || continue
		{ "$ipt" -S 2>/dev/null | grep -E -- '^-A .* -j WRN-wgv' || true; } | while read -r line; do
			eval "$ipt ${line/#-A/-D}" || true
		done
		for chain in $("$ipt" -S 2>/dev/null | awk '/^-N WRN-wgv/ {print $2}'); do
			"$ipt" -F "$chain" && "$ipt" -X "$chain" || true
		done
	done
}

stop() {
	if [ -f "$GV_RUN/docker.pid" ]; then
		# Containers first, so that no runsc sandbox outlives the engine.
		DOCKER_HOST=$SOCK docker ps -aq 2>/dev/null | xargs -r env DOCKER_HOST=$SOCK docker rm -f >/dev/null 2>&1 || true
		stop_pid "$(cat "$GV_RUN/docker.pid")"
	fi
	if [ -f "$GV_RUN/containerd.pid" ]; then stop_pid "$(cat "$GV_RUN/containerd.pid")"; fi
	cleanup_firewall
	while iptables -D FORWARD $GV_FORWARD 2>/dev/null; do :; done
	for r in "${GV_OUTSIDE[@]}"; do
		while iptables -D FORWARD $r 2>/dev/null; do :; done
	done
	if ip link show "$GV_BRIDGE" >/dev/null 2>&1; then ip link del "$GV_BRIDGE"; fi
	# Bridges of the engine's own networks (br-*) whose addresses are in
	# our pool are left by a killed engine; remove them.
	ip -o -4 addr show | awk -v p="${GV_POOL%.*.*}." '$4 ~ "^"p {print $2}' | sort -u | xargs -r -n1 ip link del 2>/dev/null || true
	# containerd shims, and the runsc sandboxes under them, outlive a killed
	# engine; these name this engine's containerd socket or runsc root.
	pkill -9 -f -- "-address $CTRD_SOCK" 2>/dev/null || true
	pkill -9 -f -- "--root=$GV_RUN/" 2>/dev/null || true
	awk -v r="$GV_RUN/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount 2>/dev/null || true
	# dockerd bind-mounts its data root onto itself.
	while grep -q " $GV_ROOT " /proc/mounts; do umount "$GV_ROOT" || break; done
	rm -rf "$GV_RUN" "$GV_ROOT"
	find /sys/fs/cgroup -depth -type d -path "*/$GV_CGROUP*" -exec rmdir {} + 2>/dev/null || true
	log "stopped and removed"
}

# restart stops the engine's dockerd and starts it again on the same data
# root. With --live-restore its containers keep running meanwhile, and so
# does its containerd.
restart() {
	if [ -f "$GV_RUN/docker.pid" ]; then
		local pid
		pid=$(cat "$GV_RUN/docker.pid")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
		if kill -0 "$pid" 2>/dev/null; then
			log "dockerd (pid $pid) did not stop within 60 s"
			exit 1
		fi
		log "dockerd (pid $pid) stopped"
	fi
	start
}

case "${1:-}" in
build) build ;;
start) start ;;
restart) restart ;;
stop) stop ;;
env) echo "export WARREN_GVISOR_DOCKER_HOST=$SOCK" ;;
*)
	sed -n '2,10p' "$0" >&2
	exit 2
	;;
esac
