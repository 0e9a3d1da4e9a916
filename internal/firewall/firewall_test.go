package firewall

import (
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/egress"
	"github.com/warrenhq/warren/internal/sandbox"
)

func TestRestoreInput(t *testing.T) {
	c := chainsFor("warren0", "true")
	rules := map[string]sandbox.Egress{
		"iopen": {IP: netip.MustParseAddr("172.30.0.2"), Network: sandbox.Network{AllowInternetAccess: true, DenyOut: []string{"10.0.0.0/8", "::1"}}},
		"iclosed": {IP: netip.MustParseAddr("172.30.0.3"), Network: sandbox.Network{
			AllowInternetAccess: false, AllowOut: []string{"172.30.0.2", "192.168.1.7/24"},
		}},
	}
	got := c.restoreInput(false, rules, egress.Ports{})
	r := strings.NewReplacer("IN", c.input, "FWD", c.forward, "TAG", "warren:warren0:"+c.tag)
	want := []string{
		r.Replace(`-A IN -m comment --comment "TAG sandboxes cannot reach the host" -j REJECT`),
		r.Replace(`-A FWD -o warren0 -p tcp --dport 49983 -m comment`),
		// Sorted by sandbox ID, allow before deny before the catch-all.
		r.Replace(`-A FWD -s 172.30.0.3/32 -d 172.30.0.2/32 -m comment --comment "TAG sandbox=iclosed allowOut" -j RETURN
-A FWD -s 172.30.0.3/32 -d 192.168.1.0/24 -m comment --comment "TAG sandbox=iclosed allowOut" -j RETURN
-A FWD -s 172.30.0.3/32 -m comment --comment "TAG sandbox=iclosed no internet access" -j REJECT
-A FWD -s 172.30.0.3/32 -m comment --comment "TAG sandbox=iclosed allowed" -j RETURN
-A FWD -s 172.30.0.2/32 -d 10.0.0.0/8 -m comment --comment "TAG sandbox=iopen denyOut" -j REJECT
-A FWD -s 172.30.0.2/32 -m comment --comment "TAG sandbox=iopen allowed" -j RETURN
COMMIT
`),
	}
	if c.input != "WRN-warren0-"+c.tag+"-I" || len(c.forward) > 28 {
		t.Errorf("chain names %q %q", c.input, c.forward)
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("restore input lacks\n%s\ngot:\n%s", w, got)
		}
	}
	if strings.Contains(got, "::1") {
		t.Errorf("IPv6 target in IPv4 rules:\n%s", got)
	}
	v6 := c.restoreInput(true, rules, egress.Ports{DNS: 5353, Gateway: 6000})
	if strings.Contains(v6, "sandbox=") || strings.Contains(v6, "REDIRECT") || !strings.Contains(v6, `sandboxes have no IPv6" -j REJECT`) {
		t.Errorf("IPv6 rules should refuse everything:\n%s", v6)
	}
	if strings.Contains(got, "REDIRECT") {
		t.Errorf("redirects without an egress server:\n%s", got)
	}
}

func TestRestoreInputRedirects(t *testing.T) {
	c := chainsFor("warren0", "true")
	rules := map[string]sandbox.Egress{
		// Domains and a denial: redirected.
		"inamed": {IP: netip.MustParseAddr("172.30.0.4"), Network: sandbox.Network{
			AllowInternetAccess: false, AllowOut: []string{"10.1.0.0/16", "*.pypi.org"}, DenyOut: []string{"10.0.0.0/8"},
		}},
		// Domains but nothing denied, or a denial but no domains: not.
		"iopen":   {IP: netip.MustParseAddr("172.30.0.5"), Network: sandbox.Network{AllowInternetAccess: true, AllowOut: []string{"pypi.org"}}},
		"ieither": {IP: netip.MustParseAddr("172.30.0.6"), Network: sandbox.Network{DenyOut: []string{"0.0.0.0/0"}}},
	}
	got := c.restoreInput(false, rules, egress.Ports{DNS: 5353, Gateway: 6000})
	r := strings.NewReplacer("{IN}", c.input, "{NAT}", c.redirect, "{TAG}", "warren:warren0:"+c.tag)
	for _, w := range []string{
		r.Replace(`-A {IN} -m conntrack --ctstate DNAT -m comment --comment "{TAG} redirected to an egress server" -j RETURN
-A {IN} -m comment --comment "{TAG} sandboxes cannot reach the host" -j REJECT`),
		r.Replace(`*nat
:{NAT} - [0:0]
-A {NAT} -s 172.30.0.4/32 -p udp --dport 53 -m comment --comment "{TAG} sandbox=inamed dns" -j REDIRECT --to-ports 5353
-A {NAT} -s 172.30.0.4/32 -p tcp --dport 53 -m comment --comment "{TAG} sandbox=inamed dns" -j REDIRECT --to-ports 5353
-A {NAT} -s 172.30.0.4/32 -m addrtype --dst-type LOCAL -m comment --comment "{TAG} sandbox=inamed host" -j RETURN
-A {NAT} -s 172.30.0.4/32 -d 169.254.0.0/16 -m comment --comment "{TAG} sandbox=inamed link-local" -j RETURN
-A {NAT} -s 172.30.0.4/32 -d 10.1.0.0/16 -m comment --comment "{TAG} sandbox=inamed allowOut" -j RETURN
-A {NAT} -s 172.30.0.4/32 -d 10.0.0.0/8 -p tcp -m comment --comment "{TAG} sandbox=inamed denyOut by name" -j REDIRECT --to-ports 6000
-A {NAT} -s 172.30.0.4/32 -p tcp -m comment --comment "{TAG} sandbox=inamed no internet access but by name" -j REDIRECT --to-ports 6000
COMMIT
`),
	} {
		if !strings.Contains(got, w) {
			t.Errorf("restore input lacks\n%s\ngot:\n%s", w, got)
		}
	}
	for _, id := range []string{"iopen", "ieither"} {
		if strings.Contains(got, "sandbox="+id+" dns") {
			t.Errorf("%s is redirected:\n%s", id, got)
		}
	}
	if len(c.redirect) > 28 {
		t.Errorf("chain name %q too long", c.redirect)
	}
}

func TestValidateBridge(t *testing.T) {
	for _, ok := range []string{"warren0", "br-0123456789ab", "docker0"} {
		if err := validateBridge(ok); err != nil {
			t.Errorf("validateBridge(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a-very-long-bridge-name", "br 0", `br"0`} {
		if validateBridge(bad) == nil {
			t.Errorf("validateBridge(%q) accepted", bad)
		}
	}
}

// TestInstallUninstall installs the chains for an interface that does not
// exist, checks they are listed and hooked, and removes them again.
func TestInstallUninstall(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: iptables needs root")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("skipping: iptables is not installed")
	}
	b := make([]byte, 4)
	rand.Read(b)
	bridge := "wft" + hex.EncodeToString(b)
	ctx := t.Context()
	// A bridge of our own, so that the egress server has an address to
	// listen on and the redirects are installed.
	for _, args := range [][]string{{"link", "add", bridge, "type", "bridge"}, {"addr", "add", "172.31.254.1/24", "dev", bridge}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Skipf("skipping: cannot make a test bridge: %v: %s", err, out)
		}
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", bridge).Run() })
	f, err := New(ctx, Config{Bridge: bridge, DNSUpstream: []string{"127.0.0.1:53"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Uninstall(t.Context()); f.Close() })
	ip := netip.MustParseAddr("172.31.255.9")
	for range 2 { // idempotent
		if err := f.Sync(ctx, map[string]sandbox.Egress{"ia": {IP: ip, Network: sandbox.Network{DenyOut: []string{"0.0.0.0/0"}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	saveTable := func(table string) string {
		out, err := exec.Command("iptables-save", "-t", table).Output()
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	save := func() string { return saveTable("filter") }
	s := save()
	in, fwd := f.Chains()
	tag := "warren:" + bridge + ":" + f.c.tag
	for _, w := range []string{
		"-A INPUT -i " + bridge + ` -m comment --comment "` + tag + ` isolate sandboxes from the host" -j ` + in,
		`-j ` + fwd,
		"-A " + fwd + " -s 172.31.255.9/32 -m comment --comment \"" + tag + " sandbox=ia denyOut\"",
	} {
		if strings.Count(s, w) != 1 {
			t.Errorf("iptables-save has %d copies of %q, want 1", strings.Count(s, w), w)
		}
	}
	// A second server on the same bridge has chains of its own.
	other, err := New(ctx, Config{Bridge: bridge, Instance: "other", DNSUpstream: []string{"127.0.0.1:53"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Uninstall(t.Context()); other.Close() })
	if err := other.Sync(ctx, map[string]sandbox.Egress{"ix": {IP: ip.Next().Next(), Network: sandbox.Network{}}}); err != nil {
		t.Fatal(err)
	}
	if s := save(); !strings.Contains(s, "sandbox=ia denyOut") || !strings.Contains(s, "sandbox=ix no internet") {
		t.Errorf("two servers' rules do not coexist:\n%s", grepWarren(s, bridge))
	}
	if err := other.Uninstall(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Apply(ctx, "ib", ip.Next(), sandbox.Network{AllowInternetAccess: true}); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove(ctx, "ia"); err != nil {
		t.Fatal(err)
	}
	if s := save(); strings.Contains(s, "sandbox=ia") || !strings.Contains(s, "sandbox=ib allowed") {
		t.Errorf("after Apply ib and Remove ia:\n%s", grepWarren(s, bridge))
	}
	if err := f.Apply(ctx, "ic", ip, sandbox.Network{DenyOut: []string{"example.com"}}); sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Errorf("Apply denying a domain: %v, want invalid", err)
	}
	if err := f.Apply(ctx, "id", ip, sandbox.Network{AllowOut: []string{"example.com"}, DenyOut: []string{"0.0.0.0/0"}}); err != nil {
		t.Fatal(err)
	}
	n := saveTable("nat")
	for _, w := range []string{
		"-A PREROUTING -i " + bridge + ` -m comment --comment "` + tag + ` domain rules of sandboxes" -j ` + f.c.redirect,
		"-p udp -m udp --dport 53 -m comment --comment \"" + tag + " sandbox=id dns\" -j REDIRECT",
		"-p tcp -m tcp --dport 53 -m comment --comment \"" + tag + " sandbox=id dns\" -j REDIRECT",
		"sandbox=id denyOut by name",
	} {
		if strings.Count(n, w) != 1 {
			t.Errorf("iptables-save -t nat has %d copies of %q, want 1:\n%s", strings.Count(n, w), w, grepWarren(n, bridge))
		}
	}
	if !strings.Contains(save(), "redirected to an egress server") {
		t.Errorf("no input rule for the egress server:\n%s", grepWarren(save(), bridge))
	}
	if err := f.Uninstall(ctx); err != nil {
		t.Fatal(err)
	}
	if s := save() + saveTable("nat"); strings.Contains(s, bridge) {
		t.Errorf("rules left after Uninstall:\n%s", grepWarren(s, bridge))
	}
}

func grepWarren(s, bridge string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, bridge) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}
