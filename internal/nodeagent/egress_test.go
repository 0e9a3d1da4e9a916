package nodeagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/egress"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/tlsca"
)

// fakeKernel records the tables an Egress writes instead of writing them.
type fakeKernel struct {
	writes  []nodeTable
	removes []string
	fail    error
}

func testEgress(t *testing.T) (*Egress, *fakeKernel) {
	t.Helper()
	e, err := newEgress(netip.MustParseAddr("127.0.0.1"), "node-a", nil, egress.Ports{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	k := &fakeKernel{}
	e.write = func(t nodeTable) error {
		if k.fail != nil {
			return k.fail
		}
		k.writes = append(k.writes, t)
		return nil
	}
	e.remove = func(name string) error {
		if k.fail != nil {
			return k.fail
		}
		k.removes = append(k.removes, name)
		return nil
	}
	return e, k
}

func restricted(id, ip string) EgressSandbox {
	return EgressSandbox{ID: id, IP: netip.MustParseAddr(ip), TeamID: "team",
		Network: sandbox.Network{AllowOut: []string{"203.0.113.7", "api.example.com", "198.51.100.0/24"}, DenyOut: []string{"0.0.0.0/0", "2001:db8::/32"}}}
}

func TestEgressSet(t *testing.T) {
	e, k := testEgress(t)
	a, b := restricted("sbx-a", "10.1.0.2"), restricted("sbx-b", "10.1.0.3")
	if err := e.Set(EgressRules{Instance: "i1", Sandboxes: []EgressSandbox{b, a}}); err != nil {
		t.Fatal(err)
	}
	if len(k.writes) != 1 {
		t.Fatalf("writes: %d", len(k.writes))
	}
	got := k.writes[0]
	want := nodeTable{name: TableName("node-a"), node: netip.MustParseAddr("127.0.0.1"), ports: e.ports, sandboxes: []tableSandbox{
		{ip: a.IP, allow: []netip.Prefix{netip.MustParsePrefix("203.0.113.7/32"), netip.MustParsePrefix("198.51.100.0/24")}, deny: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}},
		{ip: b.IP, allow: []netip.Prefix{netip.MustParsePrefix("203.0.113.7/32"), netip.MustParsePrefix("198.51.100.0/24")}, deny: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}},
	}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(nodeTable{}, tableSandbox{}), cmp.Comparer(func(x, y netip.Addr) bool { return x == y }),
		cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })); diff != "" {
		t.Fatalf("table (-want +got):\n%s", diff)
	}
	if sb, ok := e.policy(a.IP); !ok || sb.ID != "sbx-a" || sb.TeamID != "team" {
		t.Errorf("the gateway does not know sbx-a: %+v %v", sb, ok)
	}

	// The same rules again: nothing to write.
	if err := e.Set(EgressRules{Instance: "i1", Sandboxes: []EgressSandbox{a, b}}); err != nil || len(k.writes) != 1 {
		t.Fatalf("unchanged rules written again: %v, %d writes", err, len(k.writes))
	}

	// A failed write keeps the gateway's view as it was.
	k.fail = errors.New("kernel says no")
	if err := e.Set(EgressRules{Instance: "i1", Sandboxes: []EgressSandbox{a}}); sandbox.KindOf(err) != sandbox.KindInternal {
		t.Fatalf("a failed write: %v", err)
	}
	if _, ok := e.policy(b.IP); !ok {
		t.Error("a failed write dropped sbx-b from the gateway")
	}

	// No sandbox left: the table goes.
	k.fail = nil
	if err := e.Set(EgressRules{Instance: "i1"}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{TableName("node-a")}, k.removes); diff != "" {
		t.Errorf("removes (-want +got):\n%s", diff)
	}
	if _, ok := e.policy(a.IP); ok {
		t.Error("the gateway still knows sbx-a")
	}
}

// TestEgressInstances: control planes sharing the node agents each
// replace only their own sandboxes' rules, and each sandbox's queries go
// to its own control plane's resolvers.
func TestEgressInstances(t *testing.T) {
	e, k := testEgress(t)
	a, b := restricted("sbx-a", "10.1.0.2"), restricted("sbx-b", "10.1.0.3")
	if err := e.Set(EgressRules{Instance: "one", Sandboxes: []EgressSandbox{a}, DNS: []string{"127.0.0.1:5353"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Set(EgressRules{Instance: "two", Sandboxes: []EgressSandbox{b}}); err != nil {
		t.Fatal(err)
	}
	if got := k.writes[len(k.writes)-1].sandboxes; len(got) != 2 {
		t.Fatalf("the second instance replaced the first's rules: %+v", got)
	}
	if sb, ok := e.policy(a.IP); !ok || !slices.Equal(sb.Upstream, []string{"127.0.0.1:5353"}) {
		t.Errorf("sbx-a: %+v, %v", sb, ok)
	}
	if sb, ok := e.policy(b.IP); !ok || sb.Upstream != nil {
		t.Errorf("sbx-b: %+v, %v", sb, ok)
	}
	if err := e.Set(EgressRules{Instance: "one"}); err != nil {
		t.Fatal(err)
	}
	if got := k.writes[len(k.writes)-1].sandboxes; len(got) != 1 || got[0].ip != b.IP || len(k.removes) != 0 {
		t.Fatalf("after the first instance emptied its set: %+v, removes %v", got, k.removes)
	}
	if _, ok := e.policy(a.IP); ok {
		t.Error("the gateway still knows sbx-a")
	}
}

func TestEgressRulesRefused(t *testing.T) {
	e, k := testEgress(t)
	a := restricted("sbx-a", "10.1.0.2")
	withRules := restricted("sbx-r", "10.1.0.4")
	withRules.Network.Rules = map[string][]sandbox.NetworkRule{"api.example.com": {{Headers: map[string]string{"A": "b"}}}}
	badDeny := restricted("sbx-d", "10.1.0.5")
	badDeny.Network.DenyOut = []string{"example.com"}
	for name, r := range map[string]EgressRules{
		"IPv6 pod":        {Instance: "i1", Sandboxes: []EgressSandbox{{ID: "x", IP: netip.MustParseAddr("fd00::1")}}},
		"shared address":  {Instance: "i1", Sandboxes: []EgressSandbox{a, restricted("sbx-z", "10.1.0.2")}},
		"no ID":           {Instance: "i1", Sandboxes: []EgressSandbox{restricted("", "10.1.0.2")}},
		"ID with a space": {Instance: "i1", Sandboxes: []EgressSandbox{restricted("a b", "10.1.0.2")}},
		"not a CA":        {Instance: "i1", Sandboxes: []EgressSandbox{withRules}, TLS: &EgressTLS{CACert: "x", CAKey: "y"}},
		"denied domain":   {Instance: "i1", Sandboxes: []EgressSandbox{badDeny}},
		"bad resolver":    {Instance: "i1", Sandboxes: []EgressSandbox{a}, DNS: []string{"resolver"}},
		"no instance":     {Sandboxes: []EgressSandbox{a}},
	} {
		if err := e.Set(r); sandbox.KindOf(err) != sandbox.KindInvalid {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(k.writes)+len(k.removes) != 0 {
		t.Errorf("refused rules were written: %d, %d", len(k.writes), len(k.removes))
	}
}

// TestEgressHeaderRules: a sandbox with header rules and an egress proxy
// is sent to the gateway with its instance's CA and roots, and its
// placeholders resolve to what the control plane resolved, or fail with
// the control plane's reason, or fail when it sent nothing for them.
func TestEgressHeaderRules(t *testing.T) {
	e, k := testEgress(t)
	ca, err := tlsca.LoadAuthority(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	sb := EgressSandbox{ID: "sbx-r", IP: netip.MustParseAddr("10.1.0.4"), TeamID: "team", Network: sandbox.Network{
		AllowInternetAccess: true,
		Rules:               map[string][]sandbox.NetworkRule{"api.example.com": {{Headers: map[string]string{"A": "${e2b.secrets.k}"}}}},
		EgressProxy:         &sandbox.EgressProxy{Address: "127.0.0.1:1080"},
	}, Resolved: map[string]Resolution{"${e2b.secrets.k}": {Value: "v1"}, "${e2b.secrets.gone}": {Refusal: "placeholder ${e2b.secrets.gone} does not resolve: no such secret"}}}
	if !NodeEnforced(sb.Network) {
		t.Fatal("rules with internet access are not enforced on the node")
	}
	tls := &EgressTLS{CACert: string(ca.CertPEM()), CAKey: string(key)}
	if err := e.Set(EgressRules{Instance: "i1", Sandboxes: []EgressSandbox{sb}, TLS: tls}); err != nil {
		t.Fatal(err)
	}
	if len(k.writes) != 1 || len(k.writes[0].sandboxes) != 1 {
		t.Fatalf("writes: %+v", k.writes)
	}
	got, ok := e.policy(sb.IP)
	if !ok || got.Authority == nil || got.RootCAs == nil || got.Network.EgressProxy == nil {
		t.Fatalf("the gateway's view: %+v, %v", got, ok)
	}
	ctx := t.Context()
	for value, want := range map[string]string{"Bearer ${e2b.secrets.k}": "Bearer v1", "plain": "plain"} {
		if v, err := got.Expander.Expand(ctx, "sbx-r", "team", value); err != nil || v != want {
			t.Errorf("%q: %q, %v", value, v, err)
		}
	}
	for value, why := range map[string]string{"${e2b.secrets.gone}": "no such secret", "${e2b.identity.tokens.t}": "did not send it"} {
		if _, err := got.Expander.Expand(ctx, "sbx-r", "team", value); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v", value, err)
		}
	}
	// The same CA sent again keeps its Authority (and the certificates issued).
	if err := e.Set(EgressRules{Instance: "i1", Sandboxes: []EgressSandbox{sb}, TLS: tls}); err != nil {
		t.Fatal(err)
	}
	if again, _ := e.policy(sb.IP); again.Authority != got.Authority {
		t.Error("the same CA parsed again")
	}
}

// TestSetEgressOverTLS sends rules as the control plane does.
func TestSetEgressOverTLS(t *testing.T) {
	srv := newTestServer(t)
	e, k := testEgress(t)
	srv.ServeEgress(e)
	ts := tlsServer(t, srv)
	addr := strings.TrimPrefix(ts.URL, "https://")
	r := EgressRules{Instance: "i1", Sandboxes: []EgressSandbox{restricted("sbx-a", "10.1.0.2")}, DNS: []string{"127.0.0.1:5353"}, Refuse: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	if err := NewClient(token).SetEgress(t.Context(), addr, r); err != nil {
		t.Fatal(err)
	}
	if len(k.writes) != 1 || len(k.writes[0].sandboxes) != 1 {
		t.Fatalf("writes: %+v", k.writes)
	}
	r.Sandboxes[0].IP = netip.MustParseAddr("fd00::2")
	if err := NewClient(token).SetEgress(t.Context(), addr, r); sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Fatalf("an IPv6 pod: %v", err)
	}
}

// FuzzEgressRules: whatever body reaches PUT /v1/egress, decoding,
// validating and planning the table neither panic nor plan an address
// the rules did not name.
func FuzzEgressRules(f *testing.F) {
	seed, _ := json.Marshal(EgressRules{Instance: "i1", Sandboxes: []EgressSandbox{restricted("sbx-a", "10.1.0.2")}, DNS: []string{"127.0.0.1:53"}})
	f.Add(seed)
	f.Add([]byte(`{"instance":"x","sandboxes":[{"id":"a","ip":"10.0.0.1","network":{"AllowOut":["*.x.com","1.2.3.4/33"],"DenyOut":["::/0"]}}]}`))
	f.Add([]byte(`{"instance":"x","sandboxes":[{"id":"a","ip":"::ffff:10.0.0.1"}],"refuse":["10.0.0.0/8"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var r EgressRules
		if json.Unmarshal(body, &r) != nil || r.validate() != nil {
			return
		}
		tb := planTable("t", netip.MustParseAddr("10.9.9.9"), egress.Ports{Gateway: 1, DNS: 2}, r.Sandboxes, r.Refuse)
		if len(tb.sandboxes) != len(r.Sandboxes) {
			t.Fatalf("%d sandboxes planned of %d", len(tb.sandboxes), len(r.Sandboxes))
		}
		for _, s := range tb.sandboxes {
			for _, p := range append(s.allow, s.deny...) {
				if !p.Addr().Is4() {
					t.Fatalf("a non-IPv4 target planned: %v", p)
				}
			}
		}
	})
}

// TestWriteTable writes a table into a network namespace of the test's
// own and reads it back with nft.
func TestWriteTable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a network namespace, nftables)")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft to read the table back")
	}
	ns := fmt.Sprintf("wnodeegress%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	inNS := func(f func() error) error {
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		errc := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread dies in the namespace
			if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
				errc <- err
				return
			}
			errc <- f()
		}()
		return <-errc
	}
	list := func() string {
		out, _ := exec.Command("ip", "netns", "exec", ns, "nft", "list", "table", "ip", "warren-egress-test").CombinedOutput()
		return string(out)
	}
	a := restricted("sbx-a", "10.1.0.2")
	a.Network.AllowInternetAccess = false
	a.Network.AllowOut = append(a.Network.AllowOut, "10.1.0.9", "10.1.0.0/24")
	tb := planTable("warren-egress-test", netip.MustParseAddr("10.1.0.1"), egress.Ports{Gateway: 49991, DNS: 49992}, []EgressSandbox{a},
		[]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	if err := inNS(func() error { return writeTable(tb) }); err != nil {
		t.Fatal(err)
	}
	got := list()
	for _, want := range []string{
		"ip saddr 10.1.0.2 ip daddr 10.1.0.9 accept", // a neighbour: direct
		"ip saddr 10.1.0.2 udp dport 53 dnat to 10.1.0.1:49992",
		"ip saddr 10.1.0.2 tcp dport 53 dnat to 10.1.0.1:49992",
		"ip saddr 10.1.0.2 meta l4proto tcp dnat to 10.1.0.1:49991",
		"ct state established,related accept",
		"ip saddr 10.1.0.2 ip daddr 203.0.113.7 accept",
		"ip saddr 10.1.0.2 ip daddr 198.51.100.0/24 accept",
		"ip saddr 10.1.0.2 ip daddr 0.0.0.0/0 jump refuse",
		"ip saddr 10.1.0.2 jump refuse",
		"reject with tcp reset",
		"\treject\n", // ICMP port unreachable, the default nft lists bare
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "ip daddr 10.1.0.9 accept") > strings.Index(got, "meta l4proto tcp dnat") || strings.Count(got, "ip daddr 10.1.0.0/24 accept") != 1 {
		t.Errorf("only the named single address goes direct, before the gateway:\n%s", got)
	}
	// Written again with no sandbox: replaced whole, in one transaction.
	empty := planTable("warren-egress-test", netip.MustParseAddr("10.1.0.1"), egress.Ports{Gateway: 49991, DNS: 49992}, nil, nil)
	if err := inNS(func() error { return writeTable(empty) }); err != nil {
		t.Fatal(err)
	}
	if got := list(); strings.Contains(got, "10.1.0.2") {
		t.Errorf("a rewrite kept the old rules:\n%s", got)
	}
	if err := inNS(func() error { return removeTable("warren-egress-test") }); err != nil {
		t.Fatal(err)
	}
	if got := list(); !strings.Contains(got, "No such file") {
		t.Errorf("the table is still there: %s", got)
	}
}
