package isolation

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
)

// The environment that picks what the tests attack. By default: the
// engine DOCKER_HOST names (the local socket) under runc.
// WARREN_ISOLATION_RUNTIME=gvisor runs every test under runsc instead, on
// the engine WARREN_GVISOR_DOCKER_HOST names (the variable the lifecycle
// package's gVisor tests read; scripts/setup-gvisor.sh start makes such an
// engine), or on DOCKER_HOST's when that is unset. A runtime of its own
// keeps the two apart: `WARREN_GVISOR_DOCKER_HOST=... go test ./...`, as
// setup-gvisor.sh suggests, adds the gVisor tests of other packages and
// leaves these under runc.
const (
	runtimeEnv    = "WARREN_ISOLATION_RUNTIME"
	gvisorHostEnv = "WARREN_GVISOR_DOCKER_HOST"
)

// target is the engine and runtime the tests attack.
type target struct {
	runtime sandbox.OCIRuntime
	// host is the engine's DOCKER_HOST; "" = the environment's.
	host string
	// explicit is whether the environment asked for this target, in which
	// case an engine that is missing fails the tests instead of skipping
	// them.
	explicit bool
}

// targetFromEnv reads the target from the environment; a runtime it
// does not know fails the test.
func targetFromEnv(t *testing.T) target {
	t.Helper()
	name := os.Getenv(runtimeEnv)
	rt, err := sandbox.ParseOCIRuntime(name)
	if err != nil {
		t.Fatalf("%s=%s: %v", runtimeEnv, name, err)
	}
	tg := target{runtime: rt, explicit: name != ""}
	if rt == sandbox.RuntimeGVisor {
		tg.host = os.Getenv(gvisorHostEnv)
	}
	return tg
}

func (tg target) gvisor() bool { return tg.runtime == sandbox.RuntimeGVisor }

// networkName is a name for the test's network, unique per run. Under
// gVisor it starts with "wgv": scripts/setup-gvisor.sh stop removes the
// firewall chains of such bridges that a killed test leaves behind.
func (tg target) networkName() string {
	if tg.gvisor() {
		return "wgv" + randomHex(4)
	}
	return "wt" + randomHex(4)
}

// allowWithinBridge accepts traffic between the containers of bridge
// when the engine did not: an engine run with --iptables=false, like
// setup-gvisor.sh's, adds no rules for its bridges, and the host's FORWARD
// policy (DROP, set by the main engine) then drops everything between two
// sandboxes. The tests' controls (sandbox A reaches B's server) need the
// accept rule an engine with iptables adds; the rule goes after the jump
// to DOCKER-USER, where Warren's chains refuse what they must, as the
// engine's own does.
func allowWithinBridge(t *testing.T, bridge string) {
	t.Helper()
	rule := []string{"FORWARD", "-i", bridge, "-o", bridge, "-m", "comment", "--comment", "warren isolation test: the engine's intra-bridge accept", "-j", "ACCEPT"}
	engines := []string{"FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"}
	if exec.Command("iptables", append([]string{"-w", "-C"}, engines...)...).Run() == nil {
		return // the engine has its own
	}
	if out, err := exec.Command("iptables", append([]string{"-w", "-A"}, rule...)...).CombinedOutput(); err != nil {
		t.Fatalf("accept traffic within the test bridge %s: %v: %s", bridge, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.CommandContext(context.Background(), "iptables", append([]string{"-w", "-D"}, rule...)...).CombinedOutput(); err != nil {
			t.Errorf("removing the test bridge's accept rule: %v: %s", err, out)
		}
	})
}
