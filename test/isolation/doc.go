// Package isolation holds Go tests that attack sandboxes from inside, on
// the real Docker engine with the iptables firewall: reaching the host,
// another sandbox (of another team, or not named in allowOut) or its
// agent or a denied address, reaching the host or a sandbox from a
// template build's RUN step, changing the agent binary, forking and
// allocating without end. Each test is an escape that must
// fail. They need Docker, root and iptables, and skip saying so without
// them; they only ever send traffic to the host's own addresses and to
// the containers they create.
//
// By default they run under runc on the engine DOCKER_HOST names.
// WARREN_ISOLATION_RUNTIME=gvisor runs every one under gVisor (runsc) on
// the engine WARREN_GVISOR_DOCKER_HOST names, as test.sh's gvisor_suite
// does with the engine scripts/setup-gvisor.sh starts. Where the runtimes
// protect the host differently (seccomp, the pids and memory limits), the
// test says so and checks what protects it under each.
package isolation
