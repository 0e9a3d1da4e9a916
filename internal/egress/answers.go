package egress

import (
	"net/netip"
	"sync"
	"time"
)

// Bounds of what the table keeps: how long an answer opens its addresses
// (its TTL, at least minHold, plus holdGrace, since programs cache answers
// past their TTL), and how many addresses one sandbox may hold open.
const (
	minHold   = time.Minute
	holdGrace = 10 * time.Minute
	maxAddrs  = 4096
)

// answers remembers, per sandbox, the addresses the forwarder gave it for
// allowed names, and until when.
type answers struct {
	mu  sync.Mutex
	now func() time.Time
	by  map[netip.Addr]map[netip.Addr]map[string]time.Time // sandbox -> address -> name -> until
}

func newAnswers() *answers {
	return &answers{now: time.Now, by: map[netip.Addr]map[netip.Addr]map[string]time.Time{}}
}

// add records that src was given addr for name, for ttl.
func (a *answers) add(src, addr netip.Addr, name string, ttl time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	until := now.Add(max(ttl, minHold) + holdGrace)
	addrs := a.by[src]
	if addrs == nil {
		addrs = map[netip.Addr]map[string]time.Time{}
		a.by[src] = addrs
	}
	if _, ok := addrs[addr]; !ok && len(addrs) >= maxAddrs {
		a.prune(addrs, now)
		if len(addrs) >= maxAddrs {
			return // full of live answers: the oldest keep their place
		}
	}
	names := addrs[addr]
	if names == nil {
		names = map[string]time.Time{}
		addrs[addr] = names
	}
	if until.After(names[name]) {
		names[name] = until
	}
}

// has reports whether src was given addr for name, and it still holds.
func (a *answers) has(src, addr netip.Addr, name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	until, ok := a.by[src][addr.Unmap()][name]
	return ok && a.now().Before(until)
}

// forget drops everything src was given.
func (a *answers) forget(src netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.by, src)
}

// prune drops the expired answers of one sandbox. The caller holds a.mu.
func (a *answers) prune(addrs map[netip.Addr]map[string]time.Time, now time.Time) {
	for addr, names := range addrs {
		for name, until := range names {
			if !now.Before(until) {
				delete(names, name)
			}
		}
		if len(names) == 0 {
			delete(addrs, addr)
		}
	}
}
