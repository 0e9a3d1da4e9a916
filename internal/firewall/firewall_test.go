package firewall

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/egress"
	"github.com/warrenhq/warren/internal/sandbox"
)

func TestRestoreInput(t *testing.T) {
	c := chainsFor("warren0", "", "true")
	rules := map[string]sandbox.Egress{
		"iopen": {IP: netip.MustParseAddr("172.30.0.2"), Network: sandbox.Network{AllowInternetAccess: true, DenyOut: []string{"10.0.0.0/8", "::1"}}},
		"iclosed": {IP: netip.MustParseAddr("172.30.0.3"), Network: sandbox.Network{
			AllowInternetAccess: false, AllowOut: []string{"172.30.0.2", "192.168.1.7/24"},
		}},
	}
	got := restoreInput(c, false, rules, egress.Ports{})
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
	v6 := restoreInput(c, true, rules, egress.Ports{DNS: 5353, Gateway: 6000})
	if strings.Contains(v6, "sandbox=") || strings.Contains(v6, "REDIRECT") || !strings.Contains(v6, `sandboxes have no IPv6" -j REJECT`) {
		t.Errorf("IPv6 rules should refuse everything:\n%s", v6)
	}
	if strings.Contains(got, "REDIRECT") {
		t.Errorf("redirects without an egress server:\n%s", got)
	}
}

func TestRestoreInputRedirects(t *testing.T) {
	c := chainsFor("warren0", "", "true")
	rules := map[string]sandbox.Egress{
		// Domains and a denial: redirected.
		"inamed": {IP: netip.MustParseAddr("172.30.0.4"), Network: sandbox.Network{
			AllowInternetAccess: false, AllowOut: []string{"10.1.0.0/16", "*.pypi.org"}, DenyOut: []string{"10.0.0.0/8"},
		}},
		// Domains but nothing denied, or a denial but no domains: not.
		"iopen":   {IP: netip.MustParseAddr("172.30.0.5"), Network: sandbox.Network{AllowInternetAccess: true, AllowOut: []string{"pypi.org"}}},
		"ieither": {IP: netip.MustParseAddr("172.30.0.6"), Network: sandbox.Network{DenyOut: []string{"0.0.0.0/0"}}},
	}
	got := restoreInput(c, false, rules, egress.Ports{DNS: 5353, Gateway: 6000})
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

// TestRestoreInputGateway: a sandbox with header rules or an egress proxy
// has all its TCP but the host's and link-local sent to the gateway, and
// its DNS only when a rule is keyed by a name.
func TestRestoreInputGateway(t *testing.T) {
	c := chainsFor("warren0", "", "true")
	rules := map[string]sandbox.Egress{
		"irules": {IP: netip.MustParseAddr("172.30.0.7"), Network: sandbox.Network{
			AllowInternetAccess: true, AllowOut: []string{"10.1.0.0/16"},
			Rules: map[string][]sandbox.NetworkRule{"api.example.com": {{Headers: map[string]string{"X-A": "b"}}}},
		}},
		"iproxy": {IP: netip.MustParseAddr("172.30.0.8"), Network: sandbox.Network{
			AllowInternetAccess: true, EgressProxy: &sandbox.EgressProxy{Address: "127.0.0.1:1080"},
		}},
	}
	got := restoreInput(c, false, rules, egress.Ports{DNS: 5353, Gateway: 6000})
	r := strings.NewReplacer("{NAT}", c.redirect, "{TAG}", "warren:warren0:"+c.tag)
	for _, w := range []string{
		r.Replace(`-A {NAT} -s 172.30.0.7/32 -p udp --dport 53 -m comment --comment "{TAG} sandbox=irules dns" -j REDIRECT --to-ports 5353
-A {NAT} -s 172.30.0.7/32 -p tcp --dport 53 -m comment --comment "{TAG} sandbox=irules dns" -j REDIRECT --to-ports 5353
-A {NAT} -s 172.30.0.7/32 -m addrtype --dst-type LOCAL -m comment --comment "{TAG} sandbox=irules host" -j RETURN
-A {NAT} -s 172.30.0.7/32 -d 169.254.0.0/16 -m comment --comment "{TAG} sandbox=irules link-local" -j RETURN
-A {NAT} -s 172.30.0.7/32 -p tcp -m comment --comment "{TAG} sandbox=irules header rules or egress proxy: all TCP through the gateway" -j REDIRECT --to-ports 6000
`),
		r.Replace(`-A {NAT} -s 172.30.0.8/32 -m addrtype --dst-type LOCAL -m comment --comment "{TAG} sandbox=iproxy host" -j RETURN
-A {NAT} -s 172.30.0.8/32 -d 169.254.0.0/16 -m comment --comment "{TAG} sandbox=iproxy link-local" -j RETURN
-A {NAT} -s 172.30.0.8/32 -p tcp -m comment --comment "{TAG} sandbox=iproxy header rules or egress proxy: all TCP through the gateway" -j REDIRECT --to-ports 6000
`),
	} {
		if !strings.Contains(got, w) {
			t.Errorf("restore input lacks\n%s\ngot:\n%s", w, got)
		}
	}
	for _, bad := range []string{"sandbox=iproxy dns", "-A " + c.redirect + " -s 172.30.0.7/32 -d 10.1.0.0/16"} {
		if strings.Contains(got, bad) {
			t.Errorf("restore input has %q:\n%s", bad, got)
		}
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
// newTestFirewall returns a firewall on a bridge of its own (and one for
// builds), so that the egress server has an address to listen on and the
// redirects are installed; everything is removed when the test ends.
func newTestFirewall(t *testing.T) (f *Firewall, bridge, build string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: iptables needs root")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("skipping: iptables is not installed")
	}
	b := make([]byte, 4)
	rand.Read(b)
	bridge = "wft" + hex.EncodeToString(b)
	build = bridge + "b"
	for _, args := range [][]string{{"link", "add", bridge, "type", "bridge"}, {"addr", "add", "172.31.254.1/24", "dev", bridge},
		{"link", "add", build, "type", "bridge"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Skipf("skipping: cannot make a test bridge: %v: %s", err, out)
		}
	}
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", bridge).Run()
		exec.Command("ip", "link", "del", build).Run()
	})
	f, err := New(t.Context(), Config{Bridge: bridge, BuildBridge: build, DNSUpstream: []string{"127.0.0.1:53"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Uninstall(context.Background()); f.Close() })
	return f, bridge, build
}

func TestInstallUninstall(t *testing.T) {
	f, bridge, build := newTestFirewall(t)
	ctx := t.Context()
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
		"-A INPUT -i " + build + ` -m comment --comment "` + tag + ` isolate template builds from the host" -j ` + in,
		"-i " + bridge + ` -m comment --comment "` + tag + ` egress rules of sandboxes" -j ` + fwd,
		"-i " + build + ` -m comment --comment "` + tag + ` egress rules of template builds" -j ` + fwd,
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
	if err := f.Apply(ctx, "ib", sandbox.Egress{IP: ip.Next(), Network: sandbox.Network{AllowInternetAccess: true}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove(ctx, "ia"); err != nil {
		t.Fatal(err)
	}
	// Only this bridge's lines: other servers' sandbox IDs may start with "ia" too.
	if s := grepWarren(save(), bridge); strings.Contains(s, "sandbox=ia") || !strings.Contains(s, "sandbox=ib allowed") {
		t.Errorf("after Apply ib and Remove ia:\n%s", s)
	}
	if err := f.Apply(ctx, "ic", sandbox.Egress{IP: ip, Network: sandbox.Network{DenyOut: []string{"example.com"}}}); sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Errorf("Apply denying a domain: %v, want invalid", err)
	}
	if err := f.Apply(ctx, "id", sandbox.Egress{IP: ip, Network: sandbox.Network{AllowOut: []string{"example.com"}, DenyOut: []string{"0.0.0.0/0"}}}); err != nil {
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

// packet is what verdict judges: a new connection arriving from interface
// in, leaving by out.
type packet struct {
	in, out  string
	src, dst string
	port     int
}

// verdict runs p through the forward chain of an iptables-restore input
// as the kernel would for a new connection: true when no rule refuses it.
func verdict(t *testing.T, restore, chain string, p packet) bool {
	t.Helper()
	comment := regexp.MustCompile(`-m comment --comment "[^"]*" `)
	for l := range strings.Lines(restore) {
		l = strings.TrimSpace(comment.ReplaceAllString(l, ""))
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "-A" || f[1] != chain {
			continue
		}
		match, target := true, ""
		for i := 2; i < len(f); i++ {
			opt := f[i]
			if opt == "-m" && f[i+1] == "conntrack" {
				match = false // replies and redirects: not a new connection
				break
			}
			i++
			v := f[i]
			switch opt {
			case "-s":
				match = match && netip.MustParsePrefix(v).Contains(netip.MustParseAddr(p.src))
			case "-d":
				match = match && netip.MustParsePrefix(v).Contains(netip.MustParseAddr(p.dst))
			case "-i":
				match = match && v == p.in
			case "-o":
				match = match && v == p.out
			case "--dport":
				match = match && v == strconv.Itoa(p.port)
			case "-p", "-m":
			case "-j":
				target = v
			default:
				t.Fatalf("verdict: cannot read %q in %q", opt, l)
			}
		}
		if match {
			return target != "REJECT"
		}
	}
	return true
}

// TestNeighbours: a sandbox reaches another only when both are of the
// same team and its allowOut names the other's address, whatever else its
// rules allow; template builds reach no sandbox and no other build.
func TestNeighbours(t *testing.T) {
	c := chainsFor("warren0", "warren0-build", "true")
	net := func(internet bool, allowOut ...string) sandbox.Network {
		return sandbox.Network{AllowInternetAccess: internet, AllowOut: allowOut}
	}
	rules := map[string]sandbox.Egress{
		"target":   {IP: netip.MustParseAddr("172.30.0.2"), TeamID: "a", Network: net(true)},
		"named":    {IP: netip.MustParseAddr("172.30.0.3"), TeamID: "a", Network: net(true, "172.30.0.2")},
		"named32":  {IP: netip.MustParseAddr("172.30.0.4"), TeamID: "a", Network: sandbox.Network{AllowOut: []string{"172.30.0.2/32"}, DenyOut: []string{"0.0.0.0/0"}}},
		"allowall": {IP: netip.MustParseAddr("172.30.0.5"), TeamID: "a", Network: net(false, "0.0.0.0/0")},
		"wide":     {IP: netip.MustParseAddr("172.30.0.6"), TeamID: "a", Network: net(false, "172.30.0.0/16", "172.30.0.2/31")},
		"other":    {IP: netip.MustParseAddr("172.30.0.7"), TeamID: "b", Network: net(true, "172.30.0.2")},
		"noteam":   {IP: netip.MustParseAddr("172.30.0.8"), Network: net(true, "172.30.0.2")},
	}
	restore := restoreInput(c, false, rules, egress.Ports{})
	sb := func(src, dst string, port int) packet { return packet{"warren0", "warren0", src, dst, port} }
	for _, tt := range []struct {
		name string
		p    packet
		want bool
	}{
		{"same team, named", sb("172.30.0.3", "172.30.0.2", 3000), true},
		{"same team, named as a /32, all else denied", sb("172.30.0.4", "172.30.0.2", 3000), true},
		{"named, but the agent port", sb("172.30.0.3", "172.30.0.2", sandbox.AgentPort), false},
		{"the other way round", sb("172.30.0.2", "172.30.0.3", 3000), false},
		{"same team, default rules", sb("172.30.0.2", "172.30.0.5", 3000), false},
		{"allowOut 0.0.0.0/0", sb("172.30.0.5", "172.30.0.2", 3000), false},
		{"allowOut the network and a /31", sb("172.30.0.6", "172.30.0.2", 3000), false},
		{"another team, named", sb("172.30.0.7", "172.30.0.2", 3000), false},
		{"no team, named", sb("172.30.0.8", "172.30.0.2", 3000), false},
		{"not a sandbox of this server's", sb("172.30.0.99", "172.30.0.2", 3000), false},
		{"to an address that is no sandbox", sb("172.30.0.2", "172.30.0.99", 3000), false},
		{"allowOut 0.0.0.0/0 still opens the internet", packet{"warren0", "eth0", "172.30.0.5", "192.0.2.80", 443}, true},
		{"no internet access", packet{"warren0", "eth0", "172.30.0.6", "192.0.2.80", 443}, false},
		{"default rules open the internet", packet{"warren0", "eth0", "172.30.0.2", "192.0.2.80", 443}, true},
		{"build to the internet", packet{"warren0-build", "eth0", "172.31.0.2", "192.0.2.80", 80}, true},
		{"build to another build", packet{"warren0-build", "warren0-build", "172.31.0.2", "172.31.0.3", 80}, false},
		{"build to a sandbox", packet{"warren0-build", "warren0", "172.31.0.2", "172.30.0.2", 3000}, false},
		{"build claiming a named sandbox's address", packet{"warren0-build", "warren0", "172.30.0.3", "172.30.0.2", 3000}, false},
		{"build to cloud metadata", packet{"warren0-build", "eth0", "172.31.0.2", "169.254.169.254", 80}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := verdict(t, restore, c.forward, tt.p); got != tt.want {
				t.Errorf("%+v passes = %v, want %v\n%s", tt.p, got, tt.want, restore)
			}
		})
	}
}

// TestBridgeFiltered: the firewall refuses to run where iptables would not
// see the packets between two ports of the bridge, saying how to fix it.
func TestBridgeFiltered(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name, content string
		ok            bool
	}{
		{"on", "1\n", true},
		{"off", "0\n", false},
		{"missing", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := dir + "/" + tt.name
			if tt.content != "" {
				if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := bridgeFiltered(path)
			if tt.ok != (err == nil) {
				t.Fatalf("bridgeFiltered = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "sysctl -w net.bridge.bridge-nf-call-iptables=1") {
				t.Errorf("the error does not say what to do: %v", err)
			}
		})
	}
}

// TestGroupCommit checks that Apply and Remove calls made while a write
// runs are carried together by the next one, and that each gets its
// rules.
func TestGroupCommit(t *testing.T) {
	f, bridge, _ := newTestFirewall(t)
	ctx := t.Context()
	if err := f.Sync(ctx, nil); err != nil {
		t.Fatal(err)
	}
	const n = 20
	// burst runs n calls while the test holds the writer's lock, so that
	// all of them queue, then lets them go.
	burst := func(call func(i int) error) {
		t.Helper()
		f.mu.Lock()
		before := f.restores
		errs := make(chan error, n)
		for i := range n {
			go func() { errs <- call(i) }()
		}
		for queued := 0; queued < n; {
			time.Sleep(time.Millisecond)
			f.qmu.Lock()
			queued = len(f.pending)
			f.qmu.Unlock()
		}
		f.mu.Unlock()
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if got := f.restores - before; got != 1 {
			t.Errorf("%d calls queued together took %d writes, want 1", n, got)
		}
	}
	ip := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{172, 31, 254, byte(10 + i)}) }
	burst(func(i int) error {
		return f.Apply(ctx, fmt.Sprintf("g%d", i), sandbox.Egress{IP: ip(i), Network: sandbox.Network{AllowInternetAccess: true}})
	})
	out, err := exec.Command("iptables-save", "-t", "filter").Output()
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if w := fmt.Sprintf("-s %s/32 -m comment --comment \"warren:%s:%s sandbox=g%d allowed", ip(i), bridge, f.c.tag, i); !strings.Contains(string(out), w) {
			t.Errorf("no rule %q after the burst:\n%s", w, grepWarren(string(out), bridge))
		}
		if _, ok := f.policy(ip(i)); !ok {
			t.Errorf("the egress server does not know %s", ip(i))
		}
	}
	burst(func(i int) error { return f.Remove(ctx, fmt.Sprintf("g%d", i)) })
	if out, _ := exec.Command("iptables-save", "-t", "filter").Output(); strings.Contains(string(out), "sandbox=g") {
		t.Errorf("rules left after removing every sandbox:\n%s", grepWarren(string(out), bridge))
	}
	before := f.restores
	if err := f.Remove(ctx, "never-there"); err != nil {
		t.Fatal(err)
	}
	if f.restores != before {
		t.Error("removing a sandbox without rules wrote to the kernel")
	}
}

// TestUnchangedChainsNotRewritten: a change that leaves a family's chains
// as they were (the IPv6 ones never change with the rules) does not run
// iptables-restore for it; Restore rewrites all, whatever was written.
func TestUnchangedChainsNotRewritten(t *testing.T) {
	f, bridge, _ := newTestFirewall(t)
	ctx := t.Context()
	if err := f.Sync(ctx, nil); err != nil {
		t.Fatal(err)
	}
	e := sandbox.Egress{IP: netip.AddrFrom4([4]byte{172, 31, 254, 9}), Network: sandbox.Network{AllowInternetAccess: true}}
	if err := f.Apply(ctx, "u1", e); err != nil {
		t.Fatal(err)
	}
	_, fwd := f.Chains()
	// Flushed behind the firewall's back, the chain stays flushed after an
	// Apply that renders it as it was written...
	if out, err := exec.Command("iptables", "-F", fwd).CombinedOutput(); err != nil {
		t.Fatalf("iptables -F %s: %v: %s", fwd, err, out)
	}
	if err := f.Apply(ctx, "u1", e); err != nil {
		t.Fatal(err)
	}
	has := func() bool {
		out, err := exec.Command("iptables-save", "-t", "filter").Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(out), "sandbox=u1 allowed")
	}
	if has() {
		t.Error("an Apply that changed nothing rewrote the chains")
	}
	// ...and Restore, which reconcile runs to repair such losses, rewrites it.
	if err := f.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if !has() {
		t.Errorf("Restore did not rewrite the flushed chain:\n%s", grepWarren(func() string {
			out, _ := exec.Command("iptables-save", "-t", "filter").Output()
			return string(out)
		}(), bridge))
	}
}

// TestAddressHasOneOwner: rules applied for an address replace those of
// any other sandbox at it (its last holder, whose removal was missed), so
// that they cannot judge the new holder's packets first.
func TestAddressHasOneOwner(t *testing.T) {
	f, bridge, _ := newTestFirewall(t)
	ctx := t.Context()
	if err := f.Sync(ctx, nil); err != nil {
		t.Fatal(err)
	}
	ip := netip.AddrFrom4([4]byte{172, 31, 254, 20})
	if err := f.Apply(ctx, "old", sandbox.Egress{IP: ip, Network: sandbox.Network{AllowInternetAccess: true}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Apply(ctx, "new", sandbox.Egress{IP: ip, TeamID: "t", Network: sandbox.Network{}}); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("iptables-save", "-t", "filter").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "sandbox=old") || !strings.Contains(string(out), "sandbox=new no internet access") {
		t.Errorf("rules at %s after a second sandbox took it, want the new one's only:\n%s", ip, grepWarren(string(out), bridge))
	}
	if p, ok := f.policy(ip); !ok || p.ID != "new" || p.TeamID != "t" {
		t.Errorf("the egress server sees %+v at %s, want sandbox new of team t", p, ip)
	}
	before := f.restores
	if err := f.Remove(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if f.restores != before {
		t.Error("removing the evicted sandbox's rules wrote to the kernel")
	}
	if _, ok := f.policy(ip); !ok {
		t.Error("removing the evicted sandbox's rules dropped the new holder's")
	}
}

// TestRefuseToBuilds: networks refused to template builds get a rule of
// their own on the build bridge, are rewritten when they change, and an
// unchanged set writes nothing.
func TestRefuseToBuilds(t *testing.T) {
	f, bridge, build := newTestFirewall(t)
	ctx := t.Context()
	if err := f.Sync(ctx, nil); err != nil {
		t.Fatal(err)
	}
	pods := []netip.Prefix{netip.MustParsePrefix("10.246.2.0/24"), netip.MustParsePrefix("10.246.1.0/24")}
	if err := f.RefuseToBuilds(ctx, pods); err != nil {
		t.Fatal(err)
	}
	save := func() string {
		out, err := exec.Command("iptables-save", "-t", "filter").Output()
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	for _, p := range pods {
		if w := fmt.Sprintf("-d %s -i %s -m comment --comment \"warren:%s:%s no template build reaches %s\" -j REJECT", p, build, bridge, f.c.tag, p); !strings.Contains(save(), w) {
			t.Errorf("no rule %q:\n%s", w, grepWarren(save(), bridge))
		}
	}
	before := f.restores
	if err := f.RefuseToBuilds(ctx, []netip.Prefix{pods[1], pods[0], pods[1]}); err != nil {
		t.Fatal(err)
	}
	if f.restores != before {
		t.Error("the same networks in another order rewrote the chains")
	}
	if err := f.RefuseToBuilds(ctx, pods[:1]); err != nil {
		t.Fatal(err)
	}
	if out := save(); strings.Contains(out, "reaches "+pods[1].String()) || !strings.Contains(out, "reaches "+pods[0].String()) {
		t.Errorf("after dropping %s:\n%s", pods[1], grepWarren(out, bridge))
	}
}

// restoreInput is the iptables-restore input that writes c's chains whole.
func restoreInput(c chains, v6 bool, rules map[string]sandbox.Egress, ports egress.Ports) string {
	in, _ := c.ruleset(v6, rules, ports).restore(nil)
	return in
}
