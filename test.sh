#!/usr/bin/env bash
# Runs Warren's whole test suite: makes sure Docker and debootstrap are there, builds the
# binaries and the images (base and code interpreter), then go vet, the Go tests, and the
# end-to-end tests that drive a real server with the official E2B SDKs (test/e2e) and the
# dashboard's browser tests (Debian's chromium, installed when missing), under runc and
# again under gVisor (WARREN_TEST_GVISOR=0 leaves gVisor out), and a real two-node Kubernetes
# (scripts/kube.sh, test/kube) with its smoke test and the SDK suite against Warren on it
# (test/e2e/kube-run.sh). Every step has a time cap and the
# whole run a budget (see step), so a hang fails its step instead of the run. Exits non-zero if
# any step fails; a summary of every step and its time is printed at the end, with the last
# lines a failed step wrote to standard error.
set -uo pipefail
cd "$(dirname "$0")"

results=()
failed=0

# Time budget: CI stops a run at 90 minutes, so every step runs under a cap, and no step
# starts or runs past the whole run's budget (WARREN_TEST_BUDGET seconds, 85 minutes by
# default). A step that hangs is killed with its process group and reported, and the steps
# after it still run and the summary is still printed.
budget=${WARREN_TEST_BUDGET:-5100}

# step NAME CAP COMMAND...: runs the command for at most CAP seconds (less when the budget
# has less left), records the result. Shell functions run through `bash -c`.
step() {
	local name=$1 cap=$2
	shift 2
	printf '\n=== test.sh: %s\n' "$name"
	local start=$SECONDS left=$((budget - SECONDS - 60)) rc=0
	if [ "$left" -lt 60 ]; then
		echo "test.sh: not started: the run's ${budget}s budget is spent" >&2
		results+=("FAILED     -   $name (not started: time budget spent)")
		failed=1
		return 1
	fi
	[ "$cap" -le "$left" ] || cap=$left
	# (The step's standard error is copied to a file: the summary quotes its end when the step
	# fails. A process substitution, not a pipe, so daemons a step starts cannot hold it up.)
	local errlog
	errlog=$(mktemp)
	if declare -F "$1" >/dev/null; then
		timeout -k 60 "$cap" bash -c "$(declare -f "$1"); $(printf '%q ' "$@")" 2> >(tee "$errlog" >&2) || rc=$?
	else
		timeout -k 60 "$cap" "$@" 2> >(tee "$errlog" >&2) || rc=$?
	fi
	if [ $rc = 0 ]; then
		results+=("ok      $(printf '%4ds' $((SECONDS - start)))  $name")
		rm -f "$errlog"
		return 0
	fi
	if [ $rc = 124 ] || [ $rc = 137 ]; then
		echo "test.sh: '$name' was stopped after its limit of ${cap}s" >&2
		results+=("FAILED  $(printf '%4ds' $((SECONDS - start)))  $name (stopped at its ${cap}s limit)")
	else
		results+=("FAILED  $(printf '%4ds' $((SECONDS - start)))  $name")
	fi
	sleep 1 # (for tee to write the last lines)
	[ -s "$errlog" ] && results+=("$(tail -n 16 "$errlog" | cut -c 1-200 | sed 's/^/          | /')")
	rm -f "$errlog"
	failed=1
	return 1
}
skip() { results+=("skipped        $1 (a step it needs failed)"); }

e2e_install() {
	if [ ! -f test/e2e/package.json ] || [ ! -x test/e2e/run.sh ]; then
		echo "test.sh: the end-to-end tests are missing (need test/e2e/package.json and an executable test/e2e/run.sh)" >&2
		return 1
	fi
	(cd test/e2e && npm ci --no-audit --no-fund)
}

# gvisor_suite runs the gVisor tests, the isolation tests and the end-to-end suites again with
# sandboxes under gVisor (runsc), on a second Docker engine that scripts/setup-gvisor.sh builds
# runsc for and starts, so the main engine's configuration is never touched.
gvisor_suite() {
	local host=unix:///run/warren-gvisor/docker.sock rc=0
	GV_IMAGES="warren/base warren/code-interpreter" scripts/setup-gvisor.sh start || {
		scripts/setup-gvisor.sh stop
		return 1
	}
	WARREN_GVISOR_DOCKER_HOST=$host go test -count=1 -run 'GVisor' ./internal/lifecycle/ || rc=1
	WARREN_GVISOR_DOCKER_HOST=$host WARREN_ISOLATION_RUNTIME=gvisor go test -count=1 ./test/isolation/ || rc=1
	DOCKER_HOST=$host WARREN_E2E_DOCKER_RUNTIME=runsc test/e2e/run.sh || rc=1
	DOCKER_HOST=$host WARREN_RUNTIME=gvisor WARREN_NETWORK=wgvsb \
		WARREN_E2E_LOAD_SANDBOXES=50 test/e2e/server-run.sh || rc=1
	scripts/setup-gvisor.sh stop || rc=1
	return $rc
}

# gvisor_report prints what tells a hung or failed gVisor run apart: the second engine's log,
# the runsc processes left and their states, the load and the memory. Then it stops the engine
# (which a killed step could not do).
gvisor_report() {
	echo "--- gVisor engine: log tail (/run/warren-gvisor/dockerd.log)"
	tail -n 40 /run/warren-gvisor/dockerd.log 2>/dev/null
	echo "--- runsc processes: $(pgrep -c runsc || true); by state:"
	ps -eo stat=,comm= | awk '$2 ~ /runsc/ {n[substr($1,1,1)]++} END {for (s in n) print "  " s, n[s]}'
	echo "--- load: $(cat /proc/loadavg)"
	free -m
	scripts/setup-gvisor.sh stop || true
}

# The Kubernetes test cluster (scripts/kube.sh): binaries built from the Go module proxy (or
# restored from ~/.cache/warren/kube), a cluster of two nodes brought up with the host's state
# recorded first, the smoke test, then down and the check that the host is as it was. Tests
# that need the cluster go between the smoke test and kube_down.
# (Exported: steps run functions in a shell of their own.)
export KUBE_HOST_STATE=/tmp/warren-kube-host-state.before
kube_up() {
	# Packages first: installing them is no change the cluster makes, and the snapshot reads
	# nftables with nft.
	scripts/kube.sh deps &&
		test/kube/host-unchanged.sh snapshot "$KUBE_HOST_STATE" &&
		scripts/kube.sh up &&
		scripts/kube.sh load warren/base
}
kube_down() {
	local rc=0
	scripts/kube.sh down || rc=1
	test/kube/host-unchanged.sh compare "$KUBE_HOST_STATE" || rc=1
	rm -f "$KUBE_HOST_STATE"
	return $rc
}
kube_suite() {
	if ! step "Kubernetes: build or restore the test cluster's binaries (scripts/kube.sh build)" 2400 scripts/kube.sh build; then
		skip "Kubernetes: test cluster"
		return
	fi
	if step "Kubernetes: test cluster up, two nodes, warren/base loaded (scripts/kube.sh up)" 600 kube_up; then
		step "Kubernetes: smoke test: runc and gVisor pods on both nodes (test/kube/smoke.sh)" 600 test/kube/smoke.sh
		step "Kubernetes: the node agent's image API: import, commit (runc, gVisor), export to the other node, remove (test/kube/node-images.sh)" 900 test/kube/node-images.sh
		step "Kubernetes: the SDK end-to-end suite against warren serve --engine kubernetes, pods on both nodes (test/e2e/kube-run.sh)" 2400 test/e2e/kube-run.sh
	else
		scripts/kube.sh logs >&2
		skip "Kubernetes: tests on the cluster"
	fi
	step "Kubernetes: test cluster down, the host as it was (test/kube/host-unchanged.sh)" 300 kube_down
}

ready=1
step "Docker engine and debootstrap (scripts/ensure-docker.sh)" 900 scripts/ensure-docker.sh || ready=0
if [ $ready = 1 ]; then
	step "build binaries (scripts/build.sh)" 900 scripts/build.sh || ready=0
else
	skip "build binaries"
fi
if [ $ready = 1 ]; then
	step "base image (bin/warren image build)" 1200 bin/warren image build || ready=0
else
	skip "base image"
fi
if [ $ready = 1 ]; then
	step "code interpreter image (bin/warren image build code-interpreter)" 1200 bin/warren image build code-interpreter || ready=0
else
	skip "code interpreter image"
fi
if [ $ready = 1 ]; then
	step "MCP gateway image (bin/warren image build mcp-gateway)" 300 bin/warren image build mcp-gateway || ready=0
else
	skip "MCP gateway image"
fi
step "go vet ./..." 600 go vet ./...
step "go test ./..." 1500 go test -count=1 -timeout 20m ./...
if [ $ready = 1 ] && step "end-to-end: npm ci (test/e2e)" 600 e2e_install; then
	step "end-to-end: agent with the SDK (test/e2e/run.sh)" 900 test/e2e/run.sh
	if [ -x test/e2e/server-run.sh ]; then
		step "end-to-end: warren serve with the SDKs (test/e2e/server-run.sh)" 1500 test/e2e/server-run.sh
	fi
	step "dashboard: embedded build matches web/, browser tests in chromium (test/e2e/dashboard/run.sh)" 600 test/e2e/dashboard/run.sh
	kube_suite
	if [ "${WARREN_TEST_GVISOR:-1}" = 0 ]; then
		results+=("skipped        gVisor runtime (WARREN_TEST_GVISOR=0)")
	else
		if step "gVisor runtime: build runsc (scripts/setup-gvisor.sh build)" 1200 scripts/setup-gvisor.sh build; then
			step "gVisor runtime: checkpoint tests, both end-to-end suites under runsc" 2700 gvisor_suite ||
				gvisor_report
		else
			skip "gVisor runtime: tests"
		fi
	fi
else
	[ $ready = 1 ] || skip "end-to-end tests"
	failed=1
fi

printf '\n=== test.sh summary (%ds)\n' "$SECONDS"
printf '%s\n' "${results[@]}"
passed=0 failures=0
for r in "${results[@]}"; do
	case $r in
	ok*) passed=$((passed + 1)) ;;
	FAILED*) failures=$((failures + 1)) ;;
	esac
done
if [ $failed = 1 ]; then
	echo "test.sh: FAILED"
else
	echo "test.sh: all passed"
fi
# The plain closing line CI reads: steps, as listed above.
printf 'steps: %d passed, %d failed\n' "$passed" "$failures"
exit $failed
