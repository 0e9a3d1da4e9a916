package firewall

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// A ruleset is what our chains of one address family hold, chain by chain
// (the filter table's before the nat table's), as iptables-restore writes
// them. Writing it again after a change costs little when the change only
// adds rules: the kernel commits additions at once, but a commit that
// deletes rules, as declaring (so flushing) a chain does, waits for the
// kernel to stop using them, an RCU grace period (10–20 ms on a small
// machine). So restore inserts what a create adds where its order allows,
// and rewrites a chain whole only when rules go or change.
type ruleset []*chainRules

// chainRules is one chain's rules, in groups of consecutive rules.
type chainRules struct {
	table, name string
	groups      []*ruleGroup
}

// ruleGroup is a run of a chain's rules. The rules of a bag have one
// target, so their order among themselves does not matter. A sandbox's
// group only judges packets from its own address, which is no other
// sandbox's, so such groups, which end their chain, may come in any order.
type ruleGroup struct {
	key     string
	bag     bool
	sandbox bool
	rules   []string // iptables arguments, after "-A <chain>"
}

// chain appends an empty chain of table to rs.
func (rs *ruleset) chain(table, name string) *chainRules {
	c := &chainRules{table: table, name: name}
	*rs = append(*rs, c)
	return c
}

// group appends an empty group to c.
func (c *chainRules) group(key string, bag bool) *ruleGroup {
	g := &ruleGroup{key: key, bag: bag}
	c.groups = append(c.groups, g)
	return g
}

// sandboxGroup appends the empty group of a sandbox's rules to c; a
// chain's sandbox groups come after all its other groups.
func (c *chainRules) sandboxGroup(id string) *ruleGroup {
	g := c.group("sandbox="+id, false)
	g.sandbox = true
	return g
}

// add appends a rule, its arguments joined by spaces.
func (g *ruleGroup) add(args ...string) {
	g.rules = append(g.rules, strings.Join(args, " "))
}

// restore returns the iptables-restore --noflush input that turns our
// chains, holding was (nil when unknown), into rs, and what they hold
// once it is written (rs's rules, in the kernel's order); in is "" when
// nothing changes. Each table's commands are one atomic commit.
func (rs ruleset) restore(was ruleset) (in string, now ruleset) {
	old := make(map[string]*chainRules, len(was))
	for _, c := range was {
		old[c.table+" "+c.name] = c
	}
	var b strings.Builder
	for _, table := range []string{"filter", "nat"} {
		var cmds []string
		for _, c := range rs {
			if c.table != table {
				continue
			}
			add, held, ok := c.additions(old[table+" "+c.name])
			if !ok {
				add, held = c.rewrite(), c
			}
			cmds = append(cmds, add...)
			now = append(now, held)
		}
		if len(cmds) > 0 {
			b.WriteString("*" + table + "\n" + strings.Join(cmds, "\n") + "\nCOMMIT\n")
		}
	}
	return b.String(), now
}

// rewrite is the commands that replace the chain's rules with c's.
func (c *chainRules) rewrite() []string {
	cmds := []string{":" + c.name + " - [0:0]"}
	for _, g := range c.groups {
		for _, r := range g.rules {
			cmds = append(cmds, "-A "+c.name+" "+r)
		}
	}
	return cmds
}

// additions is the commands that make the chain holding was hold c's
// rules by adding rules only, and what it holds then; ok is false when
// that cannot be done: a rule goes or changes, or would land where its
// order matters (within a group that is no bag).
func (c *chainRules) additions(was *chainRules) (cmds []string, now *chainRules, ok bool) {
	if was == nil {
		return nil, nil, false
	}
	head, tail := c.split()
	wasHead, wasTail := was.split()
	if len(head) != len(wasHead) {
		return nil, nil, false
	}
	now = &chainRules{table: c.table, name: c.name}
	pos := 0 // rules before the end of the group at hand
	for i, g := range head {
		w := wasHead[i]
		added, ok := added(w.rules, g.rules)
		if w.key != g.key || !ok || len(added) > 0 && !g.bag {
			return nil, nil, false
		}
		pos += len(w.rules)
		for _, r := range added {
			pos++
			cmds = append(cmds, "-I "+c.name+" "+strconv.Itoa(pos)+" "+r)
		}
		now.groups = append(now.groups, &ruleGroup{key: g.key, bag: g.bag, rules: append(slices.Clone(w.rules), added...)})
	}
	want := make(map[string]*ruleGroup, len(tail))
	for _, g := range tail {
		want[g.key] = g
	}
	for _, w := range wasTail {
		if g, ok := want[w.key]; !ok || !slices.Equal(g.rules, w.rules) {
			return nil, nil, false
		}
		now.groups = append(now.groups, w)
		delete(want, w.key)
	}
	for _, g := range tail {
		if want[g.key] == nil {
			continue
		}
		for _, r := range g.rules {
			cmds = append(cmds, "-A "+c.name+" "+r)
		}
		now.groups = append(now.groups, g)
	}
	return cmds, now, true
}

// split returns c's groups before its sandbox groups, and those.
func (c *chainRules) split() (head, tail []*ruleGroup) {
	i := slices.IndexFunc(c.groups, func(g *ruleGroup) bool { return g.sandbox })
	if i < 0 {
		return c.groups, nil
	}
	return c.groups[:i], c.groups[i:]
}

// added returns the rules of want that are not in was, in want's order;
// ok is false when a rule of was is not in want.
func added(was, want []string) (_ []string, ok bool) {
	left := make(map[string]int, len(was))
	for _, r := range was {
		left[r]++
	}
	var add []string
	for _, r := range want {
		if left[r] > 0 {
			left[r]--
		} else {
			add = append(add, r)
		}
	}
	for n := range maps.Values(left) {
		if n > 0 {
			return nil, false
		}
	}
	return add, true
}
