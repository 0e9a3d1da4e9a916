#!/usr/bin/env bash
# Runs Warren's whole test suite: makes sure Docker and debootstrap are there, builds the
# binaries and the images (base and code interpreter), then go vet, the Go tests, and the
# end-to-end tests that drive a real server with the official E2B SDKs (test/e2e), under runc and
# again under gVisor (WARREN_TEST_GVISOR=0 leaves gVisor out). Exits non-zero if any step fails;
# a summary of every step and its time is printed at the end.
set -uo pipefail
cd "$(dirname "$0")"

results=()
failed=0

# step NAME COMMAND...: runs the command, records the result. Steps after a failed prerequisite
# are recorded as not run.
step() {
	local name=$1
	shift
	printf '\n=== test.sh: %s\n' "$name"
	local start=$SECONDS
	if "$@"; then
		results+=("ok      $(printf '%4ds' $((SECONDS - start)))  $name")
		return 0
	fi
	results+=("FAILED  $(printf '%4ds' $((SECONDS - start)))  $name")
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

# gvisor_suite runs the gVisor tests and the end-to-end suites again with sandboxes under
# gVisor (runsc), on a second Docker engine that scripts/setup-gvisor.sh builds runsc for and
# starts, so the main engine's configuration is never touched.
gvisor_suite() {
	local host=unix:///run/warren-gvisor/docker.sock rc=0
	GV_IMAGES="warren/base warren/code-interpreter" scripts/setup-gvisor.sh start || {
		scripts/setup-gvisor.sh stop
		return 1
	}
	WARREN_GVISOR_DOCKER_HOST=$host go test -count=1 -run 'GVisor' ./internal/lifecycle/ || rc=1
	DOCKER_HOST=$host WARREN_E2E_DOCKER_RUNTIME=runsc test/e2e/run.sh || rc=1
	# The dockerd restart test is written for the main engine; it ran above.
	DOCKER_HOST=$host WARREN_RUNTIME=gvisor WARREN_NETWORK=wgvsb WARREN_E2E_RESTART_DOCKERD=0 \
		test/e2e/server-run.sh || rc=1
	scripts/setup-gvisor.sh stop || rc=1
	return $rc
}

ready=1
step "Docker engine and debootstrap (scripts/ensure-docker.sh)" scripts/ensure-docker.sh || ready=0
if [ $ready = 1 ]; then
	step "build binaries (scripts/build.sh)" scripts/build.sh || ready=0
else
	skip "build binaries"
fi
if [ $ready = 1 ]; then
	step "base image (bin/warren image build)" bin/warren image build || ready=0
else
	skip "base image"
fi
if [ $ready = 1 ]; then
	step "code interpreter image (bin/warren image build code-interpreter)" bin/warren image build code-interpreter || ready=0
else
	skip "code interpreter image"
fi
step "go vet ./..." go vet ./...
step "go test ./..." go test -count=1 -timeout 20m ./...
if [ $ready = 1 ] && step "end-to-end: npm ci (test/e2e)" e2e_install; then
	step "end-to-end: agent with the SDK (test/e2e/run.sh)" test/e2e/run.sh
	if [ -x test/e2e/server-run.sh ]; then
		step "end-to-end: warren serve with the SDKs (test/e2e/server-run.sh)" test/e2e/server-run.sh
	fi
	if [ "${WARREN_TEST_GVISOR:-1}" = 0 ]; then
		results+=("skipped        gVisor runtime (WARREN_TEST_GVISOR=0)")
	else
		step "gVisor runtime: runsc, checkpoint tests, both end-to-end suites (scripts/setup-gvisor.sh)" gvisor_suite
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
