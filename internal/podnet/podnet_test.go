package podnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestNameservers(t *testing.T) {
	got := Nameservers([]byte("# comment\nsearch x\nnameserver 10.255.255.53\nnameserver fe80::1%eth0\nnameserver bogus\noptions ndots:5\n"))
	want := []netip.Addr{netip.MustParseAddr("10.255.255.53"), netip.MustParseAddr("fe80::1")}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Fatalf("Nameservers (-want +got):\n%s", diff)
	}
}

// netns is a network namespace of the test's own, named for `ip netns`.
type netns struct {
	name string
	fd   int
}

// run calls f on an OS thread inside the namespace.
func (n netns) run(t *testing.T, f func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with its namespace
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	return <-errc
}

func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// pair makes two namespaces joined by a veth pair: the pod (10.99.7.1)
// and a neighbour (10.99.7.2, and fd99:7::2 beside fd99:7::1).
func pair(t *testing.T) (pod, other netns) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces, nftables)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	suffix := fmt.Sprint(os.Getpid())
	names := []string{"wpodnet-a" + suffix, "wpodnet-b" + suffix}
	for _, n := range names {
		ip(t, "netns", "add", n)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", n).Run() })
	}
	ip(t, "link", "add", "wpn"+suffix, "netns", names[0], "type", "veth", "peer", "name", "eth0", "netns", names[1])
	ip(t, "-n", names[0], "link", "set", "wpn"+suffix, "name", "eth0")
	for i, n := range names {
		ip(t, "-n", n, "addr", "add", fmt.Sprintf("10.99.7.%d/24", i+1), "dev", "eth0")
		ip(t, "-n", n, "addr", "add", fmt.Sprintf("fd99:7::%d/64", i+1), "dev", "eth0", "nodad")
		ip(t, "-n", n, "link", "set", "eth0", "up")
		ip(t, "-n", n, "link", "set", "lo", "up")
	}
	open := func(n string) netns {
		f, err := os.Open("/run/netns/" + n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return netns{name: n, fd: int(f.Fd())}
	}
	return open(names[0]), open(names[1])
}

// listen serves TCP on port in n until the test ends.
func listen(t *testing.T, n netns, port int) {
	t.Helper()
	err := n.run(t, func() error {
		ln, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			return err
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// dial connects from n to addr, within 3 s.
func dial(t *testing.T, n netns, network, addr string) error {
	t.Helper()
	return n.run(t, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return err
		}
		if network == "udp" {
			// A refused datagram comes back as an error on the next read.
			c.SetDeadline(time.Now().Add(time.Second))
			c.Write([]byte("x"))
			_, err = c.Read(make([]byte, 1))
		}
		c.Close()
		return err
	})
}

func TestApply(t *testing.T) {
	pod, other := pair(t)
	listen(t, other, 8080)
	listen(t, pod, 49983)
	listen(t, pod, 8000)
	if err := dial(t, pod, "tcp", "10.99.7.2:8080"); err != nil {
		t.Fatalf("before the rules, the neighbour must be reachable: %v", err)
	}
	rules := Rules{
		Refuse:    append(DefaultRefused(), netip.MustParsePrefix("203.0.113.7/32")),
		Resolvers: []netip.Addr{netip.MustParseAddr("10.99.7.2")},
		AgentPort: 49983,
	}
	if err := pod.run(t, func() error { return Apply(rules) }); err != nil {
		if errors.Is(err, syscall.EPROTONOSUPPORT) || errors.Is(err, syscall.ENOENT) {
			t.Skipf("no nf_tables here: %v", err)
		}
		t.Fatal(err)
	}
	// Twice: a rerun replaces the table.
	if err := pod.run(t, func() error { return Apply(rules) }); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: connected, want refused", what)
		} else if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.EHOSTUNREACH) && !errors.Is(err, syscall.EACCES) {
			t.Errorf("%s: %v, want a quick refusal", what, err)
		}
	}
	t0 := time.Now()
	refused("out to a private address", dial(t, pod, "tcp", "10.99.7.2:8080"))
	refused("out over IPv6 to a unique-local address", dial(t, pod, "tcp", "[fd99:7::2]:8080"))
	// The neighbour would answer port unreachable (ECONNREFUSED): the
	// rules' refusal is administratively prohibited.
	if err := dial(t, pod, "udp", "10.99.7.2:9999"); !errors.Is(err, syscall.EHOSTUNREACH) && !errors.Is(err, syscall.EACCES) {
		t.Errorf("out over UDP to a private address: %v, want administratively prohibited", err)
	}
	refused("in to a port other than the agent's", dial(t, other, "tcp", "10.99.7.1:8000"))
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("the refusals took %v: they must be quick, not timeouts", d)
	}
	if err := dial(t, other, "tcp", "10.99.7.1:49983"); err != nil {
		t.Errorf("in to the agent's port: %v", err)
	}
	if err := dial(t, pod, "tcp", "127.0.0.1:8000"); err != nil {
		t.Errorf("loopback: %v", err)
	}
	// DNS to the resolver passes: nothing listens there, so the
	// neighbour's own kernel answers port unreachable, not the rules.
	err := dial(t, pod, "udp", "10.99.7.2:53")
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("DNS to the resolver: %v, want the resolver's own refusal", err)
	}
	listen(t, other, 53)
	if err := dial(t, pod, "tcp", "10.99.7.2:53"); err != nil {
		t.Errorf("DNS over TCP to the resolver: %v", err)
	}
}

// A pair opened by Reaches and ReachedBy: the pod reaches one neighbour's
// every port, is reached by the other on every port, and nothing else
// changes: the neighbour it reaches still cannot open a connection to it.
func TestApplyNeighbours(t *testing.T) {
	pod, other := pair(t)
	listen(t, other, 8080)
	listen(t, pod, 8000)
	peer := netip.MustParseAddr("10.99.7.2")
	rules := Rules{Refuse: DefaultRefused(), AgentPort: 49983, Reaches: []netip.Addr{peer}}
	if err := pod.run(t, func() error { return Apply(rules) }); err != nil {
		if errors.Is(err, syscall.EPROTONOSUPPORT) || errors.Is(err, syscall.ENOENT) {
			t.Skipf("no nf_tables here: %v", err)
		}
		t.Fatal(err)
	}
	if err := dial(t, pod, "tcp", "10.99.7.2:8080"); err != nil {
		t.Errorf("out to the neighbour it reaches: %v", err)
	}
	if err := dial(t, other, "tcp", "10.99.7.1:8000"); err == nil {
		t.Error("the neighbour it reaches opened a connection to it")
	}
	if err := dial(t, pod, "tcp", "[fd99:7::2]:8080"); err == nil {
		t.Error("the neighbour's other address is open")
	}
	rules.Reaches, rules.ReachedBy = nil, []netip.Addr{peer}
	if err := pod.run(t, func() error { return Apply(rules) }); err != nil {
		t.Fatal(err)
	}
	if err := dial(t, other, "tcp", "10.99.7.1:8000"); err != nil {
		t.Errorf("in from the neighbour that reaches it: %v", err)
	}
	if err := dial(t, pod, "tcp", "10.99.7.2:8080"); err == nil {
		t.Error("out to a neighbour that only reaches it")
	}
}
