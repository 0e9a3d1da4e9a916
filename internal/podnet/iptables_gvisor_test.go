package podnet

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// inGVisorEnv marks the run of this test binary inside runsc.
const inGVisorEnv = "WARREN_PODNET_IN_GVISOR"

// gVisor's netstack takes the tables and enforces them: the test binary
// runs itself under `runsc do --net-raw` (the runsc of
// scripts/setup-gvisor.sh, or $WARREN_RUNSC), installs the rules, and
// finds refused networks refused at once and loopback open. It skips
// where there is no runsc or no root to run it.
func TestApplyIPTablesUnderGVisor(t *testing.T) {
	if os.Getenv(inGVisorEnv) == "1" {
		checkIPTablesInGVisor(t)
		return
	}
	runsc := os.Getenv("WARREN_RUNSC")
	if runsc == "" {
		runsc = "/usr/local/lib/warren/runsc"
	}
	if _, err := os.Stat(runsc); err != nil {
		t.Skipf("no runsc (%v): scripts/setup-gvisor.sh build installs it, or set WARREN_RUNSC", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("runsc do needs root")
	}
	cmd := exec.Command(runsc, "--root", t.TempDir(), "--net-raw", "--network=sandbox", "do",
		os.Args[0], "-test.run=^TestApplyIPTablesUnderGVisor$", "-test.v")
	cmd.Env = append(os.Environ(), inGVisorEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("under gVisor:\n%s", out)
	if err != nil {
		t.Fatalf("under gVisor: %v", err)
	}
}

func checkIPTablesInGVisor(t *testing.T) {
	if err := Apply(Rules{}); !errors.Is(err, syscall.EPROTONOSUPPORT) {
		t.Fatalf("nftables under gVisor: %v, want EPROTONOSUPPORT (what node isolate's auto backend goes by)", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	rules := Rules{
		Refuse:    append(DefaultRefused(), netip.MustParsePrefix("203.0.113.7/32")),
		Resolvers: []netip.Addr{netip.MustParseAddr("10.99.7.53")},
		AgentPort: 49983,
	}
	// Twice: a second replaces the first; first with neighbours (which
	// netstack must take too), then without.
	withPeers := rules
	withPeers.Reaches = []netip.Addr{netip.MustParseAddr("10.99.7.9"), netip.MustParseAddr("fd99::9")}
	withPeers.ReachedBy = []netip.Addr{netip.MustParseAddr("10.99.7.8")}
	for _, r := range []Rules{withPeers, rules} {
		if err := ApplyIPTables(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ network, addr string }{
		// runsc's sandbox network NATs to the host: targets no one serves,
		// should the rules ever let them out.
		{"tcp", "10.1.2.3:10250"}, {"tcp", "192.168.255.9:80"}, {"tcp", "203.0.113.7:443"},
		{"udp", "10.1.2.3:53"}, {"tcp", "[fe80::1%eth0]:80"},
	} {
		start := time.Now()
		err := dialOnce(c.network, c.addr)
		if took := time.Since(start); !errors.Is(err, syscall.ECONNREFUSED) || took > time.Second {
			t.Errorf("%s %s: %v after %v, want refused at once", c.network, c.addr, err, took)
		}
	}
	if err := dialOnce("tcp", l.Addr().String()); err != nil {
		t.Errorf("loopback: %v", err)
	}
}

// dialOnce connects (for UDP: sends a datagram and waits for an answer
// or an error) with a 3 s deadline.
func dialOnce(network, addr string) error {
	c, err := net.DialTimeout(network, addr, 3*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if network != "udp" {
		return nil
	}
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte("x")); err != nil {
		return err
	}
	_, err = c.Read(make([]byte, 1))
	return err
}
