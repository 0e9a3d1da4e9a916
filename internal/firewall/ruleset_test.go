package firewall

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/egress"
	"github.com/warrenhq/warren/internal/sandbox"
)

// simKernel plays iptables-restore inputs on chains held as rule lines.
type simKernel map[string][]string

func (k simKernel) play(t *testing.T, in string) {
	t.Helper()
	table := ""
	for l := range strings.Lines(in) {
		l = strings.TrimSuffix(l, "\n")
		f := strings.Fields(l)
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case l == "COMMIT":
		case strings.HasPrefix(l, ":"):
			k[table+" "+f[0][1:]] = nil
		case f[0] == "-A":
			key := table + " " + f[1]
			k[key] = append(k[key], strings.Join(f[2:], " "))
		case f[0] == "-I":
			key := table + " " + f[1]
			pos, err := strconv.Atoi(f[2])
			if err != nil || pos < 1 || pos > len(k[key])+1 {
				t.Fatalf("insert at %q into a chain of %d rules", f[2], len(k[key]))
			}
			k[key] = slices.Insert(k[key], pos-1, strings.Join(f[3:], " "))
		default:
			t.Fatalf("cannot play %q", l)
		}
	}
}

// input renders chain of table as an iptables-restore input, for verdict.
func (k simKernel) input(table, chain string) string {
	var b strings.Builder
	for _, r := range k[table+" "+chain] {
		b.WriteString("-A " + chain + " " + r + "\n")
	}
	return b.String()
}

// bySource is the rules of a chain that judge packets from ip, in order.
func bySource(rules []string, ip netip.Addr) []string {
	var out []string
	for _, r := range rules {
		if strings.Contains(r, "-s "+ip.String()+"/32 ") {
			out = append(out, r)
		}
	}
	return out
}

// TestRulesetAdditions makes random changes to the sandboxes' rules and
// writes each as the firewall does, from what the chains held: the chains
// it leaves judge every packet as the chains written whole would, its
// record of them is what they hold, and a change that only brings a new
// sandbox adds rules without rewriting (so deleting) any.
func TestRulesetAdditions(t *testing.T) {
	c := chainsFor("warren0", "warren0-build", "true")
	ports := egress.Ports{DNS: 5353, Gateway: 6000}
	ips := make([]netip.Addr, 8)
	for i := range ips {
		ips[i] = netip.AddrFrom4([4]byte{172, 30, 0, byte(2 + i)})
	}
	networks := []sandbox.Network{
		{AllowInternetAccess: true},
		{},
		{AllowInternetAccess: true, DenyOut: []string{"10.0.0.0/8"}},
		{AllowOut: []string{"192.0.2.0/24"}},
		{AllowInternetAccess: true, AllowOut: []string{ips[0].String()}},
		{AllowInternetAccess: true, AllowOut: []string{ips[1].String(), ips[2].String()}},
		{AllowOut: []string{"example.com"}, DenyOut: []string{"0.0.0.0/0"}},
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	rules := map[string]sandbox.Egress{}
	k := simKernel{}
	in, held := c.ruleset(false, rules, ports).restore(nil) // as Sync leaves them
	k.play(t, in)
	incremental := 0
	for step := range 400 {
		id := fmt.Sprintf("s%d", rnd.IntN(10))
		_, had := rules[id]
		if had && rnd.IntN(3) == 0 {
			delete(rules, id)
		} else {
			e := sandbox.Egress{IP: ips[rnd.IntN(len(ips))], TeamID: []string{"a", "b", ""}[rnd.IntN(3)], Network: networks[rnd.IntN(len(networks))]}
			for other, o := range rules {
				if other != id && o.IP == e.IP {
					delete(rules, other) // an address has one owner (Firewall.evict)
				}
			}
			rules[id] = e
		}
		_, fresh := rules[id]
		fresh = fresh && !had && !holdsAddress(held, rules[id].IP)
		want := c.ruleset(false, rules, ports)
		in, now := want.restore(held)
		k.play(t, in)
		held = now

		for _, ch := range now {
			var flat []string
			for _, g := range ch.groups {
				flat = append(flat, g.rules...)
			}
			if diff := cmp.Diff(flat, k[ch.table+" "+ch.name]); diff != "" {
				t.Fatalf("step %d: the record of %s differs from what it holds (-record +held):\n%s", step, ch.name, diff)
			}
		}
		if fresh && in != "" {
			incremental++
			if strings.Contains(in, "\n:") {
				t.Errorf("step %d: a new sandbox's rules rewrote a chain:\n%s", step, in)
			}
		}

		whole := simKernel{}
		full, _ := want.restore(nil)
		whole.play(t, full)
		for _, src := range append(slices.Clone(ips), netip.MustParseAddr("172.30.0.99")) {
			for _, dst := range append(slices.Clone(ips), netip.MustParseAddr("192.0.2.80"), netip.MustParseAddr("10.1.2.3")) {
				out := "warren0"
				if !strings.HasPrefix(dst.String(), "172.30.") {
					out = "eth0"
				}
				for _, port := range []int{3000, sandbox.AgentPort} {
					p := packet{"warren0", out, src.String(), dst.String(), port}
					if got, want := verdict(t, k.input("filter", c.forward), c.forward, p), verdict(t, whole.input("filter", c.forward), c.forward, p); got != want {
						t.Fatalf("step %d: %+v passes = %v, written whole it would be %v\nchain:\n%s", step, p, got, want, k.input("filter", c.forward))
					}
				}
			}
			if diff := cmp.Diff(bySource(whole["nat "+c.redirect], src), bySource(k["nat "+c.redirect], src)); diff != "" {
				t.Fatalf("step %d: redirects from %s differ from those written whole (-whole +held):\n%s", step, src, diff)
			}
		}
	}
	if incremental < 20 {
		t.Errorf("only %d new sandboxes in 400 steps: the test does not try the additions", incremental)
	}
}

// holdsAddress reports whether the chains rs records judge ip, which a
// new sandbox's rules then replace.
func holdsAddress(rs ruleset, ip netip.Addr) bool {
	for _, ch := range rs {
		for _, g := range ch.groups {
			for _, r := range g.rules {
				if strings.Contains(r, " "+ip.String()+"/32 ") || strings.HasPrefix(r, "-s "+ip.String()+"/32 ") {
					return true
				}
			}
		}
	}
	return false
}

// TestNewSandboxAddsRules: on the kernel, a new sandbox's rules are
// inserted into the chains, which then hold what the firewall records, in
// its order, and judge as the chains written whole would.
func TestNewSandboxAddsRules(t *testing.T) {
	f, bridge, _ := newTestFirewall(t)
	ctx := t.Context()
	if err := f.Sync(ctx, nil); err != nil {
		t.Fatal(err)
	}
	comments := func(rules []string) []string {
		re := regexp.MustCompile(`--comment "?([^"]*)"?`)
		var out []string
		for _, r := range rules {
			if m := re.FindStringSubmatch(r); m != nil {
				out = append(out, strings.Trim(m[1], `"`))
			}
		}
		return out
	}
	ip := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{172, 31, 254, byte(30 + i)}) }
	for i, n := range []sandbox.Network{
		{AllowInternetAccess: true},
		{AllowOut: []string{ip(0).String()}},
		{AllowInternetAccess: true, DenyOut: []string{"10.0.0.0/8"}},
		{AllowOut: []string{"example.com"}, DenyOut: []string{"0.0.0.0/0"}},
	} {
		if err := f.Apply(ctx, fmt.Sprintf("n%d", i), sandbox.Egress{IP: ip(i), TeamID: "t", Network: n}); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	held := f.kernel["iptables"]
	f.mu.Unlock()
	for _, ch := range held {
		out, err := exec.Command("iptables", "-w", "-t", ch.table, "-S", ch.name).Output()
		if err != nil {
			t.Fatal(err)
		}
		var kernel []string
		for l := range strings.Lines(string(out)) {
			if strings.HasPrefix(l, "-A ") {
				kernel = append(kernel, l)
			}
		}
		var record []string
		for _, g := range ch.groups {
			record = append(record, g.rules...)
		}
		if diff := cmp.Diff(comments(record), comments(kernel)); diff != "" {
			t.Errorf("%s holds other rules than recorded (-record +kernel):\n%s", ch.name, diff)
		}
	}
	if s := grepWarren(saveAll(t), bridge); !strings.Contains(s, "sandbox=n1 reaches sandbox=n0") || !strings.Contains(s, "sandbox=n3 dns") {
		t.Errorf("rules missing:\n%s", s)
	}
	// Flushed behind the firewall's back, the chain has no room for the
	// insertions: the next write is of the chains whole.
	if out, err := exec.Command("iptables", "-w", "-F", f.c.forward).CombinedOutput(); err != nil {
		t.Fatalf("iptables -F: %v: %s", err, out)
	}
	if err := f.Apply(ctx, "n9", sandbox.Egress{IP: ip(9), Network: sandbox.Network{AllowInternetAccess: true}}); err != nil {
		t.Fatalf("Apply after a flush: %v", err)
	}
	if s := grepWarren(saveAll(t), bridge); !strings.Contains(s, "sandbox=n0 allowed") || !strings.Contains(s, "sandbox=n9 allowed") {
		t.Errorf("after a flush and an Apply, rules missing:\n%s", s)
	}
}

func saveAll(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{"filter", "nat"} {
		out, err := exec.Command("iptables-save", "-t", table).Output()
		if err != nil {
			t.Fatal(err)
		}
		b.Write(out)
	}
	return b.String()
}
