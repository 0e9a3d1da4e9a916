// Package isolation holds Go tests that attack sandboxes from inside, on
// the real Docker engine with the iptables firewall: reaching the host,
// another sandbox's agent or a denied address, changing the agent binary,
// forking and allocating without end. Each test is an escape that must
// fail. They need Docker, root and iptables, and skip saying so without
// them; they only ever send traffic to the host's own addresses and to
// the containers they create.
package isolation
