package lifecycle

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Teams' quotas: a create, a fork or a resume from disk takes a place in
// its team's limits (sandbox.Limits: its own quota over Settings.TeamLimits,
// read from the store at each admission, so that the operator's change
// holds at once) before anything starts, and is refused with a
// KindLimited error when the place is not there. The count and the taking
// are one step under one lock, so that a burst of creates cannot pass a
// limit together: what the team holds is its cached sandboxes that hold a
// place (sandbox.Sandbox.Holds) plus the admissions in flight. An
// admission gives its place back when its create or resume ends; by then
// a sandbox that came of it is counted as running. One Manager counts:
// Warren runs one control-plane replica (docs/kubernetes.md).

// quotas is the Manager's ledger of admissions in flight and of the
// teams' create rates.
type quotas struct {
	mu       sync.Mutex                     // guards the fields below
	inFlight map[string]map[*admission]bool // by team
	rates    map[string]*bucket             // by team
	draining bool                           // creates are refused (SetDraining)
}

// admission is one sandbox's place taken in its team's quota. Once the
// sandbox it admitted is in the cache (id, set by save under both locks)
// and holds its place there, the admission is not counted again.
type admission struct {
	cpus, memoryMB, diskMB int
	id                     string // the admitted sandbox's ID; "" until saved
}

type admissionKey struct{}

// withAdmission returns ctx carrying a, for save to bind it to the
// sandbox it saves.
func withAdmission(ctx context.Context, a *admission) context.Context {
	return context.WithValue(ctx, admissionKey{}, a)
}

func admissionOf(ctx context.Context) *admission {
	a, _ := ctx.Value(admissionKey{}).(*admission)
	return a
}

// DrainRetry is the Retry-After of a create refused while the server
// drains: maintenance takes minutes, not seconds.
const DrainRetry = 30 * time.Second

// FullRetry is the Retry-After of a create refused because the server's
// memory is reserved (Settings.ServerMemoryMB): a sandbox that ends, or
// pauses to disk, makes room.
const FullRetry = 10 * time.Second

// SetDraining switches the server's drain mode: while on, creates and
// forks are refused (503, Retry-After) and every sandbox there is keeps
// being served, resumed, paused and killed.
func (m *Manager) SetDraining(on bool) {
	m.quotas.mu.Lock()
	m.quotas.draining = on
	m.quotas.mu.Unlock()
	m.log.Info("drain mode", "on", on)
}

// Draining reports whether the server drains (SetDraining).
func (m *Manager) Draining() bool {
	m.quotas.mu.Lock()
	defer m.quotas.mu.Unlock()
	return m.quotas.draining
}

// TeamLimits returns the limits of team: its quota over the server's
// defaults. An unknown team has the defaults.
func (m *Manager) TeamLimits(ctx context.Context, team string) (sandbox.Limits, error) {
	return sandbox.LimitsOf(ctx, m.cfg.Store, team, m.cfg.TeamLimits)
}

// TeamUsage returns what each team holds now, by team ID: its
// sandboxes that hold a place, and the creates and resumes in flight.
func (m *Manager) TeamUsage() map[string]sandbox.Usage {
	m.quotas.mu.Lock()
	defer m.quotas.mu.Unlock()
	out := map[string]sandbox.Usage{}
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, sb := range m.sandboxes {
		if sb.Holds() {
			out[sb.TeamID] = out[sb.TeamID].Add(sb.CPUCount, sb.MemoryMB, sb.DiskSizeMB)
		}
	}
	for team := range m.quotas.inFlight {
		out[team] = m.inFlightUsage(team, out[team])
	}
	return out
}

// usage is TeamUsage of one team; the caller holds m.quotas.mu.
func (m *Manager) usage(team string) sandbox.Usage {
	var u sandbox.Usage
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, sb := range m.sandboxes {
		if sb.TeamID == team && sb.Holds() {
			u = u.Add(sb.CPUCount, sb.MemoryMB, sb.DiskSizeMB)
		}
	}
	return m.inFlightUsage(team, u)
}

// serverMemory is the memory, in MiB, that every team's sandboxes
// holding a place and admissions in flight reserve; the caller holds
// m.quotas.mu.
func (m *Manager) serverMemory() int {
	mb := 0
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, sb := range m.sandboxes {
		if sb.Holds() {
			mb += sb.MemoryMB
		}
	}
	for team := range m.quotas.inFlight {
		mb += m.inFlightUsage(team, sandbox.Usage{}).MemoryMB
	}
	return mb
}

// inFlightUsage adds to u team's admissions whose sandbox does not hold
// its place in the cache yet; the caller holds m.quotas.mu and m.mu.
func (m *Manager) inFlightUsage(team string, u sandbox.Usage) sandbox.Usage {
	for a := range m.quotas.inFlight[team] {
		if sb, ok := m.sandboxes[a.id]; ok && a.id != "" && sb.Holds() {
			continue
		}
		u = u.Add(a.cpus, a.memoryMB, a.diskMB)
	}
	return u
}

// admitCreate takes a place for a new sandbox of team with the given
// resources, after the drain mode and the team's create rate, and
// returns the function that gives it back.
func (m *Manager) admitCreate(ctx context.Context, team string, cpus, memoryMB, diskMB int) (context.Context, func(), error) {
	a, release, err := m.admit(ctx, team, "", cpus, memoryMB, diskMB, true)
	if err != nil {
		return ctx, nil, err
	}
	return withAdmission(ctx, a), release, nil
}

// admitResume takes a place for sb, paused to disk, to run again.
func (m *Manager) admitResume(ctx context.Context, sb sandbox.Sandbox) (release func(), err error) {
	_, release, err = m.admit(ctx, sb.TeamID, sb.ID, sb.CPUCount, sb.MemoryMB, sb.DiskSizeMB, false)
	return release, err
}

func (m *Manager) admit(ctx context.Context, team, id string, cpus, memoryMB, diskMB int, create bool) (*admission, func(), error) {
	limits, err := m.TeamLimits(ctx, team)
	if err != nil {
		return nil, nil, err
	}
	q := &m.quotas
	q.mu.Lock()
	defer q.mu.Unlock()
	if create && q.draining {
		return nil, nil, sandbox.Busy("the server is draining for maintenance and creates no sandbox; running ones are served", DrainRetry)
	}
	if err := limits.Exceeded(team, m.usage(team), cpus, memoryMB, diskMB); err != nil {
		return nil, nil, err
	}
	if create && m.cfg.ServerMemoryMB > 0 {
		if used := m.serverMemory(); used+memoryMB > m.cfg.ServerMemoryMB {
			return nil, nil, sandbox.Busy(fmt.Sprintf("this server is full: its sandboxes reserve %d of its %d MiB of memory, and this one needs %d", used, m.cfg.ServerMemoryMB, memoryMB), FullRetry)
		}
	}
	if create && limits.MaxCreatesPerSecond > 0 {
		if wait := q.bucket(team, limits.MaxCreatesPerSecond).take(time.Now()); wait > 0 {
			return nil, nil, sandbox.Limited(fmt.Sprintf("team '%s' may start %g sandboxes a second, and started as many", team, limits.MaxCreatesPerSecond), wait)
		}
	}
	a := &admission{cpus: cpus, memoryMB: memoryMB, diskMB: diskMB, id: id}
	if q.inFlight == nil {
		q.inFlight = map[string]map[*admission]bool{}
	}
	if q.inFlight[team] == nil {
		q.inFlight[team] = map[*admission]bool{}
	}
	q.inFlight[team][a] = true
	return a, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		delete(q.inFlight[team], a)
		if len(q.inFlight[team]) == 0 {
			delete(q.inFlight, team)
		}
	}, nil
}

// bucket returns team's token bucket at rate r a second (made full, or
// changed to r when the operator changed it); the caller holds q.mu.
func (q *quotas) bucket(team string, r float64) *bucket {
	if q.rates == nil {
		q.rates = map[string]*bucket{}
	}
	b := q.rates[team]
	if b == nil {
		b = &bucket{tokens: burstOf(r)}
		q.rates[team] = b
	}
	b.rate = r
	return b
}

// bucket is a token bucket: rate tokens a second, up to burstOf(rate).
type bucket struct {
	rate   float64
	tokens float64
	last   time.Time
}

// burstOf is how many creates a team of rate r may start at once: one
// second's worth, and at least one.
func burstOf(r float64) float64 { return max(1, math.Floor(r)) }

// take takes a token at now, or returns how long until there is one.
func (b *bucket) take(now time.Time) time.Duration {
	if !b.last.IsZero() {
		b.tokens = min(burstOf(b.rate), b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}

// KillTeam kills every sandbox of team, running or paused, and returns
// how many it killed: the operator's "kill all". Creates in flight are
// not stopped; a sandbox that is gone meanwhile is not counted.
func (m *Manager) KillTeam(ctx context.Context, team string) (int, error) {
	n := 0
	for _, sb := range m.snapshotAll() {
		if sb.TeamID != team || (sb.State != sandbox.StateRunning && sb.State != sandbox.StatePaused) {
			continue
		}
		err := m.Kill(ctx, team, sb.ID)
		switch {
		case err == nil:
			n++
		case sandbox.KindOf(err) != sandbox.KindNotFound:
			return n, err
		}
	}
	m.log.Info("killed every sandbox of a team", logkey.Team, team, "killed", n)
	return n, nil
}
