#!/usr/bin/env bash
# Makes sure this machine can build and run Warren's sandboxes: a Docker engine that answers
# and debootstrap (for the base image). On Debian/Ubuntu as root, installs what is missing from
# the distribution's own packages (docker.io, debootstrap) and starts dockerd if nothing else
# does; elsewhere prints what to install. Does nothing when everything is there.
set -euo pipefail

say() { printf 'ensure-docker: %s\n' "$*"; }
die() { printf 'ensure-docker: %s\n' "$*" >&2; exit 1; }

can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

apt_updated=
apt_install() {
	if [ -z "$apt_updated" ]; then
		say "apt-get update"
		apt-get update -q
		apt_updated=1
	fi
	say "apt-get install -y $*"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dpkg::Use-Pty=0 -o DPkg::Lock::Timeout=600 --no-install-recommends "$@"
}

docker_answers() { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }

# --- debootstrap -----------------------------------------------------------------------------
if command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ]; then
	:
elif can_apt; then
	say "debootstrap is missing: installing Debian's debootstrap package"
	apt_install debootstrap debian-archive-keyring
else
	die "debootstrap is missing: install it as root (Debian/Ubuntu: apt-get install debootstrap debian-archive-keyring; Fedora: dnf install debootstrap; Arch: pacman -S debootstrap)"
fi

# --- Docker engine -----------------------------------------------------------------------------
if docker_answers; then
	say "Docker engine answers; debootstrap is installed: nothing to do"
	exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
	if can_apt; then
		say "Docker is missing: installing Debian's docker.io package"
		apt_install docker.io
	else
		die "no Docker engine here: as root, install one (Debian/Ubuntu: apt-get install docker.io; Fedora: dnf install moby-engine; Arch: pacman -S docker), start it, and run this again"
	fi
fi

# The package may have started the engine already (systemd).
if docker_answers; then
	say "Docker engine is running"
	exit 0
fi

if [ "$(id -u)" != 0 ]; then
	die "the Docker engine does not answer: start it (sudo systemctl start docker, or sudo dockerd &), or if it runs, add yourself to the docker group or run as root"
fi

if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	say "starting the engine: systemctl start docker"
	systemctl start docker || true
fi

# By hand, as Debian's units run it: containerd first, as a process of its own that outlives a
# restart of dockerd. A dockerd that supervises its own containerd stops it when it stops, and a
# container it was starting at that moment is left running, unknown to the engine once restarted,
# on an address the engine hands out again.
ctrd=/run/containerd/containerd.sock
start_containerd() {
	ctr --address "$ctrd" version >/dev/null 2>&1 && return
	local log=/var/log/warren-containerd.log
	say "starting containerd in the background (log: $log)"
	nohup setsid containerd >"$log" 2>&1 </dev/null &
	for _ in $(seq 60); do
		ctr --address "$ctrd" version >/dev/null 2>&1 && return
		sleep 0.5
	done
	tail -n 20 "$log" >&2
	die "containerd did not answer at $ctrd within 30 s; see the log above ($log)"
}

if ! docker_answers; then
	start_containerd
	log=/var/log/warren-dockerd.log
	say "starting dockerd in the background (log: $log)"
	nohup setsid dockerd --containerd="$ctrd" >"$log" 2>&1 </dev/null &
fi

for _ in $(seq 60); do
	if docker_answers; then
		say "Docker engine is running: $(docker version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}')"
		exit 0
	fi
	sleep 1
done
[ -f /var/log/warren-dockerd.log ] && tail -n 20 /var/log/warren-dockerd.log >&2
die "the Docker engine did not answer within 60 s; see the log above (/var/log/warren-dockerd.log)"
