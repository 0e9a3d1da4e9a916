#!/usr/bin/env bash
# ensure-postgres.sh — a throwaway PostgreSQL cluster for Warren's store tests, apart from any
# PostgreSQL the machine runs.
#
#   scripts/ensure-postgres.sh          install Debian's postgresql package if missing, start the
#                                       test cluster if it is not running, print its URL last:
#                                       export WARREN_TEST_POSTGRES=postgres://...
#   scripts/ensure-postgres.sh stop     stop the test cluster (its data stays; start again reuses it)
#   scripts/ensure-postgres.sh purge    stop it and remove its data directory
#
# The cluster has a data directory of its own, listens on 127.0.0.1 only, on a port of its own,
# with a unix socket directory of its own, and trusts local connections only (host 127.0.0.1/32
# and the socket): it is for tests, never for data anyone keeps. It never touches a cluster of
# the system's (pg_lsclusters, port 5432, /var/lib/postgresql). Each test run creates a database
# of its own in it and drops it at the end.
#
# Environment (defaults in brackets):
#   PG_ROOT  data directory, socket directory and log   [/var/lib/warren-test-postgres as root,
#                                                         /tmp/warren-test-postgres-$UID otherwise]
#   PG_PORT  the port on 127.0.0.1                      [54329]
#   PG_LISTEN  more addresses to listen on, comma-separated, and PG_TRUST the networks (CIDRs,
#            comma-separated) trusted there: for a cluster's pods (test/e2e/kube-control-plane.sh
#            on the test cluster's bridge). Read when the data directory is made.   [none]
set -euo pipefail

say() { printf 'ensure-postgres: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

if [ "$(id -u)" = 0 ]; then
	PG_ROOT=${PG_ROOT:-/var/lib/warren-test-postgres}
	# initdb and postgres refuse to run as root: Debian's package makes the postgres user.
	RUN_AS=postgres
else
	PG_ROOT=${PG_ROOT:-/tmp/warren-test-postgres-$(id -u)}
	RUN_AS=
fi
PG_PORT=${PG_PORT:-54329}
PG_LISTEN=${PG_LISTEN:-}
PG_TRUST=${PG_TRUST:-}
DATA=$PG_ROOT/data
SOCK=$PG_ROOT/run
LOG=$PG_ROOT/postgres.log
URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable"

as_owner() {
	if [ -n "$RUN_AS" ]; then
		runuser -u "$RUN_AS" -- "$@"
	else
		"$@"
	fi
}

# bindir is the newest installed server's bin directory (Debian keeps them out of PATH).
bindir() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
	[ -n "$d" ] && [ -x "$d/initdb" ] && echo "$d"
}

install_postgres() {
	[ -n "$(bindir)" ] && return
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		die "PostgreSQL's server is not installed: install it as root (Debian/Ubuntu: apt-get install postgresql)"
	fi
	say "PostgreSQL's server is missing: installing Debian's postgresql package"
	apt-get update -q >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dpkg::Use-Pty=0 -o DPkg::Lock::Timeout=600 \
		--no-install-recommends postgresql >&2
	[ -n "$(bindir)" ] || die "postgresql is installed but no server binaries were found in /usr/lib/postgresql"
}

running() { [ -f "$DATA/postmaster.pid" ] && as_owner "$(bindir)/pg_ctl" status -D "$DATA" >/dev/null 2>&1; }

init_cluster() {
	[ -f "$DATA/PG_VERSION" ] && return
	say "initialising a test cluster in $DATA"
	mkdir -p "$PG_ROOT"
	[ -n "$RUN_AS" ] && chown "$RUN_AS": "$PG_ROOT"
	as_owner mkdir -p "$DATA" "$SOCK"
	as_owner "$(bindir)/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >/dev/null
	# Local connections only: the socket and the loopback address, nothing else.
	as_owner tee "$DATA/pg_hba.conf" >/dev/null <<-EOF
		local all all trust
		host all all 127.0.0.1/32 trust
	EOF
	local net
	for net in ${PG_TRUST//,/ }; do
		echo "host all all $net trust" | as_owner tee -a "$DATA/pg_hba.conf" >/dev/null
	done
	as_owner tee -a "$DATA/postgresql.conf" >/dev/null <<-EOF
		# ensure-postgres.sh: a test cluster of its own
		listen_addresses = '127.0.0.1${PG_LISTEN:+,$PG_LISTEN}'
		port = $PG_PORT
		unix_socket_directories = '$SOCK'
		max_connections = 200
	EOF
}

start() {
	install_postgres
	if running; then
		say "the test cluster in $DATA is running on 127.0.0.1:$PG_PORT"
	else
		init_cluster
		as_owner mkdir -p "$SOCK"
		say "starting the test cluster in $DATA on 127.0.0.1:$PG_PORT (log: $LOG)"
		as_owner "$(bindir)/pg_ctl" start -D "$DATA" -l "$LOG" -w -t 60 >/dev/null ||
			die "the test cluster did not start; its log $LOG ends: $(tail -5 "$LOG" 2>/dev/null)"
	fi
	as_owner "$(bindir)/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -t 30 ||
		die "the test cluster does not answer on 127.0.0.1:$PG_PORT"
	echo "export WARREN_TEST_POSTGRES=$URL"
}

stop() {
	if [ -z "$(bindir)" ] || ! running; then
		say "the test cluster in $DATA is not running"
		return
	fi
	as_owner "$(bindir)/pg_ctl" stop -D "$DATA" -m fast -w >/dev/null
	say "stopped the test cluster in $DATA"
}

case "${1:-start}" in
start) start ;;
stop) stop ;;
purge)
	stop
	rm -rf "$PG_ROOT"
	say "removed $PG_ROOT"
	;;
*) die "usage: $0 [start|stop|purge]" ;;
esac
