package warmpool

import (
	"context"
	"errors"
	"net"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
)

func TestPoolFillsAndRefills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, settings(2, 0), nil)
		synctest.Wait()
		pool := e.pooled()
		if len(pool) != 2 || e.p.Ready() != 2 {
			t.Fatalf("pool after start: %d containers, %d ready; want 2", len(pool), e.p.Ready())
		}
		for _, c := range pool {
			if l, _ := e.rt.LimitsOf(c.ID); l.CPUCount != 2 || l.MemoryMB != 512 || l.PidsLimit != 4096 {
				t.Errorf("pooled container %s made with %+v, want the settings' 2 CPUs, 512 MiB, 4096 processes", c.ID, l)
			}
		}
		sb := e.sandboxOf(t, "base")
		c, ok := e.claim(t, sb)
		if !ok {
			t.Fatal("nothing to claim from a full pool")
		}
		// The oldest: its sandbox ID and agent secret are the claim's.
		if c.Container.ID != pool[0].ID || c.SandboxID != pool[0].SandboxID || c.AgentSecret != pool[0].AgentSecret || !c.Prepared {
			t.Errorf("claimed %s (%s), prepared %v; want the oldest, %s (%s), prepared", c.Container.ID, c.SandboxID, c.Prepared,
				pool[0].ID, pool[0].SandboxID)
		}
		// Its agent answered before it was pooled.
		if _, ok := e.agent.Inited(c.Container.AgentAddr); ok {
			t.Error("the pooled agent was initialised without a CA to give it")
		}
		c.Settled()
		c.Done()
		synctest.Wait()
		if got := e.pooled(); len(got) != 2 || e.p.Ready() != 2 {
			t.Errorf("pool after a claim: %d containers, %d ready; want 2", len(got), e.p.Ready())
		}
		// A claim of another image or runtime finds nothing.
		if _, ok := e.claim(t, e.sandboxOf(t, "python:3.12")); ok {
			t.Error("a python:3.12 create claimed from the base pool")
		}
		gv := e.sandboxOf(t, "base")
		gv.Runtime = sandbox.RuntimeGVisor
		if _, ok := e.claim(t, gv); ok {
			t.Error("a gVisor create claimed a runc container")
		}
		// Nor does one with volume mounts, fixed at a container's create.
		mounted := e.sandboxOf(t, "base")
		mounted.VolumeMounts = []sandbox.VolumeMount{{Name: "v", Path: "/data"}}
		if _, ok := e.p.KindOf(mounted); ok {
			t.Error("a create with volume mounts is served by the pool")
		}
	})
}

// The pool gives its agents the server's CA once they answer, so that a
// claim's init need not install it.
func TestPoolInstallsTheCA(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
		e := newEnv(t, settings(1, 0), func(d *Deps) { d.CABundle = ca })
		synctest.Wait()
		pool := e.pooled()
		if len(pool) != 1 {
			t.Fatalf("pool = %d, want 1", len(pool))
		}
		inits := e.agent.Inits(pool[0].AgentAddr)
		want := sandbox.AgentInit{AgentSecret: pool[0].AgentSecret, CABundle: ca, Answered: true}
		if len(inits) != 1 || inits[0].AgentSecret != want.AgentSecret || inits[0].CABundle != ca || !inits[0].Answered {
			t.Errorf("pooled agent's inits = %+v, want one of the CA alone", inits)
		}
	})
}

func TestPoolWaitsForTheAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, settings(1, 0), nil)
		synctest.Wait()
		first := e.pooled()[0]
		// The refill after the claim makes the next container: its agent
		// never answers, so it is removed, not pooled, and the one after
		// it is.
		host, port, _ := net.SplitHostPort(first.AgentAddr)
		n, _ := strconv.Atoi(port)
		silent := net.JoinHostPort(host, strconv.Itoa(n+1))
		e.agent.Silence(silent)
		e.create(t, "base")
		time.Sleep(e.set.InitTimeout + BackoffMax)
		synctest.Wait()
		pool := e.pooled()
		if len(pool) != 1 || pool[0].AgentAddr == silent {
			t.Fatalf("pool = %+v; want one container, not the silent one at %s", pool, silent)
		}
		for _, c := range e.rt.Containers() {
			if c.AgentAddr == silent {
				t.Errorf("the container whose agent never answered is still there: %s", c.ID)
			}
		}
	})
}

func TestPoolDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, settings(0, 0), nil)
		advance(time.Minute)
		if id := e.create(t, "base"); id != "" {
			t.Errorf("a create claimed %s from no pool", id)
		}
		advance(time.Minute)
		if got := len(e.rt.Containers()); got != 0 || e.p.Ready() != 0 {
			t.Errorf("%d containers, pool %d; want none", got, e.p.Ready())
		}
	})
}

func TestPoolImageRebuilt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, settings(2, 0), nil)
		synctest.Wait()
		old := e.pooled()
		e.rt.Rebuild(baseImage)
		if id := e.create(t, "base"); id != "" {
			t.Fatalf("a create claimed %s, of the old image", id)
		}
		synctest.Wait() // the miss woke the refill
		newID, _ := e.rt.ImageIDOf(baseImage)
		got := e.pooled()
		if len(got) != 2 {
			t.Fatalf("pool = %d containers, want 2", len(got))
		}
		for _, c := range got {
			if c.ImageID != newID {
				t.Errorf("pooled container %s runs %s, want %s", c.ID, c.ImageID, newID)
			}
		}
		all := e.rt.Containers()
		for _, c := range old {
			if slices.ContainsFunc(all, func(a sandbox.Container) bool { return a.ID == c.ID }) {
				t.Errorf("old-image container %s kept", c.ID)
			}
		}
	})
}

func TestPoolRefillBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, settings(2, 0), func(d *Deps) {
			d.Runtime.(*fake.Runtime).Fail("Create", errors.New("no space left on device"))
		})
		// Creates keep missing while the pool is broken; their misses must
		// not cut the refill's backoff short.
		for range 10 {
			if id := e.create(t, "base"); id != "" {
				t.Fatalf("a create claimed %s from a broken pool", id)
			}
			advance(time.Second)
		}
		advance(10 * time.Minute)
		// 1, 2, 4, ... 60 s apart: about 16 attempts in 10m10s.
		if refills := e.creates(); refills < 5 || refills > 20 {
			t.Errorf("%d refill attempts in ~10 minutes, want 5..20", refills)
		}
		e.rt.Fail("Create", nil)
		advance(time.Minute)
		if got := e.p.Ready(); got != 2 {
			t.Errorf("pool after the engine recovered = %d, want 2", got)
		}
	})
}

func TestPoolDropsStoppedContainers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, settings(2, 0), nil)
		synctest.Wait()
		old := e.pooled()
		e.rt.StopAll() // dockerd restarted
		e.reconcile(t)
		synctest.Wait()
		all := e.rt.Containers()
		for _, c := range old {
			if slices.ContainsFunc(all, func(a sandbox.Container) bool { return a.ID == c.ID }) {
				t.Errorf("stopped pooled container %s kept", c.ID)
			}
		}
		got := e.pooled()
		if len(got) != 2 || !got[0].Running || !got[1].Running {
			t.Fatalf("pool after reconcile: %+v", got)
		}
		if id := e.create(t, "base"); id != got[0].ID {
			t.Errorf("claimed %q, want the fresh %s", id, got[0].ID)
		}
	})
}

// slowStarts is an engine whose containers take start to make, as a pod
// on a busy cluster does; it counts the most made at once.
type slowStarts struct {
	*fake.Runtime
	start time.Duration

	mu         sync.Mutex // guards inFlight and inFlightHi
	inFlight   int
	inFlightHi int
}

func (s *slowStarts) Create(ctx context.Context, spec sandbox.ContainerSpec) (sandbox.Container, error) {
	s.mu.Lock()
	s.inFlight++
	s.inFlightHi = max(s.inFlightHi, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	time.Sleep(s.start)
	return s.Runtime.Create(ctx, spec)
}

func (s *slowStarts) most() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlightHi
}

// parallel is an engine that starts containers elsewhere, n at once
// (sandbox.ParallelStarter).
type parallel struct {
	sandbox.Runtime
	n int
}

func (p parallel) ParallelStarts() int { return p.n }

// On an engine that says nothing of its parallelism, as Docker, the pool
// makes at most as many containers at once as this machine has CPUs (at
// least 2); on one that says, as many as it starts.
func TestPoolFillers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		parallel int
		want     int
	}{
		{"this machine", 0, max(runtime.NumCPU(), 2)},
		{"elsewhere", 24, max(runtime.NumCPU(), 24)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rt *slowStarts
				e := newEnv(t, settings(32, 0), func(d *Deps) {
					rt = &slowStarts{Runtime: d.Runtime.(*fake.Runtime), start: 2 * time.Second}
					d.Runtime = rt
					if tc.parallel > 0 {
						d.Runtime = parallel{rt, tc.parallel}
					}
				})
				advance(time.Minute)
				if got := e.p.Ready(); got != 32 {
					t.Fatalf("pool = %d, want 32", got)
				}
				if got := rt.most(); got != tc.want {
					t.Errorf("%d containers made at once, want %d", got, tc.want)
				}
			})
		})
	}
}

// crowded is an engine that hands its giveWay to the test
// (sandbox.Crowdable), as a cluster short of room calls it.
type crowded struct {
	*fake.Runtime
	giveWay func(context.Context) bool
}

func (c *crowded) OnCrowded(giveWay func(context.Context) bool) { c.giveWay = giveWay }

// When the engine has no room for a sandbox, the pools give way: each call
// removes one idle pooled container from the engine, and the pools make no
// more until CrowdedHold has passed, then fill up again. An empty pool
// has nothing to give.
func TestPoolGivesWayWhenTheEngineIsFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rt *crowded
		e := newEnv(t, settings(3, 0), func(d *Deps) {
			rt = &crowded{Runtime: d.Runtime.(*fake.Runtime)}
			d.Runtime = rt
		})
		advance(10 * time.Second)
		if got := e.p.Ready(); got != 3 {
			t.Fatalf("pool = %d, want 3", got)
		}
		if rt.giveWay == nil {
			t.Fatal("the pool did not hand its giveWay to a sandbox.Crowdable engine")
		}
		for want := 2; want >= 0; want-- {
			if !rt.giveWay(context.Background()) {
				t.Fatalf("giveWay found nothing to remove with %d pooled", want+1)
			}
			if got := e.p.Ready(); got != want {
				t.Fatalf("pool after giving way = %d, want %d", got, want)
			}
			if got := len(e.rt.Containers()); got != want {
				t.Fatalf("%d containers on the engine after giving way, want %d", got, want)
			}
		}
		if rt.giveWay(context.Background()) {
			t.Error("an empty pool reported that it gave way")
		}
		advance(CrowdedHold - 5*time.Second)
		if got := e.p.Ready(); got != 0 {
			t.Errorf("pool %v after giving way = %d, want 0 (held)", CrowdedHold-5*time.Second, got)
		}
		advance(5*time.Second + Recheck + time.Second)
		if got := e.p.Ready(); got != 3 {
			t.Errorf("pool after the hold = %d, want 3", got)
		}
	})
}

// The refill that replaces a claimed container on this machine waits for
// the claims in flight to pass, for at most ClaimHold; on an engine that
// starts containers elsewhere it does not wait.
func TestPoolRefillHoldsForClaims(t *testing.T) {
	tests := []struct {
		name      string
		elsewhere bool // the engine is a sandbox.ParallelStarter
		claim     time.Duration
		// wantMade is how many containers the refill has made at half
		// the hold, and after it.
		wantMade [2]int
	}{
		{"claims pass", false, ClaimHold / 4, [2]int{1, 1}},
		{"held", false, 3 * ClaimHold / 2, [2]int{0, 1}},
		{"engine elsewhere", true, 3 * ClaimHold / 2, [2]int{1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, settings(2, 0), func(d *Deps) {
					if tt.elsewhere {
						d.Runtime = parallel{d.Runtime, 8}
					}
				})
				synctest.Wait()
				before := e.creates()
				c, ok := e.claim(t, e.sandboxOf(t, "base"))
				if !ok {
					t.Fatal("nothing to claim from a full pool")
				}
				// The claim takes tt.claim to make its sandbox.
				time.AfterFunc(tt.claim, func() {
					c.Settled()
					c.Done()
				})
				time.Sleep(ClaimHold / 2)
				synctest.Wait()
				if got := e.creates() - before; got != tt.wantMade[0] {
					t.Errorf("containers made at half the hold = %d, want %d", got, tt.wantMade[0])
				}
				time.Sleep(ClaimHold/2 + ClaimPoll)
				synctest.Wait()
				if got := e.creates() - before; got != tt.wantMade[1] {
					t.Errorf("containers made after the hold = %d, want %d", got, tt.wantMade[1])
				}
				advance(ClaimHold)
				if got := e.p.Ready(); got != 2 {
					t.Errorf("pool = %d, want 2", got)
				}
			})
		})
	}
}

// TestRefillKeepsToTheBurstsShare: while team a's burst holds its share of
// the gate, with more of its creates waiting, beside team b, which
// creates one a second from the pool, the refill makes b's containers (as
// many as b begins within a refill and a spare, ready and as many in the
// making) in its own slots and none for a: a's share is full. It made them
// on top of a's share, in the fillers' and the gate's spare slots, and
// filled the pool for a's claims. Once a's burst is through, the pool
// fills up.
func TestRefillKeepsToTheBurstsShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, settings(32, 0), func(d *Deps) {
			d.Runtime = &slowStarts{Runtime: d.Runtime.(*fake.Runtime), start: 2 * time.Second}
		})
		b := func() bool {
			sb := e.sandboxOf(t, "base")
			sb.TeamID = "b"
			defer e.p.Begin(sb)()
			c, ok := e.claim(t, sb)
			if ok {
				c.Settled()
				c.Done()
			}
			return ok
		}
		b()
		burstOver := make(chan struct{})
		var through sync.WaitGroup
		for range e.p.ColdSlots() + 4 {
			through.Go(func() {
				release, _, err := e.p.AdmitCold(context.Background(), "a", func() bool { return false })
				if err != nil {
					t.Errorf("a's create: %v", err)
					return
				}
				<-burstOver
				release()
			})
		}
		advance(5 * time.Second) // what the refill began before a's burst is made
		missed := 0
		for range 20 {
			if !b() {
				missed++
			}
			advance(time.Second)
		}
		// b's creates within a refill's span (2 s: three, a second apart)
		// and a spare, twice.
		if got, most := e.p.Ready(), 8; got > most {
			t.Errorf("during a's burst the pool holds %d, want at most %d", got, most)
		}
		if missed > 0 {
			t.Errorf("%d of b's 20 creates found no pooled container", missed)
		}
		close(burstOver)
		through.Wait()
		advance(time.Minute)
		if got := e.p.Ready(); got != 32 {
			t.Errorf("after a's burst the pool holds %d, want 32", got)
		}
	})
}
