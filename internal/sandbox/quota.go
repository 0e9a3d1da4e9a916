package sandbox

import (
	"context"
	"fmt"
	"strings"
)

// Limits are what a team may hold at once: its sandboxes that run or are
// frozen (paused to disk ones hold no CPU or memory, and do not count),
// their vCPUs, memory and disk, how many creates it may start a second,
// and its volumes. Zero means unlimited.
type Limits struct {
	MaxSandboxes        int     `json:"maxSandboxes"`
	MaxVCPUs            int     `json:"maxVCPUs"`
	MaxMemoryMB         int     `json:"maxMemoryMB"`
	MaxDiskMB           int     `json:"maxDiskMB"`
	MaxCreatesPerSecond float64 `json:"maxCreatesPerSecond"`
	MaxVolumes          int     `json:"maxVolumes"`
	MaxVolumeMB         int     `json:"maxVolumeMB"`
}

// Quota is the operator's entry for one team: each field it sets
// overrides the server's default limit for teams (nil = the default; a
// zero value = unlimited for this team).
type Quota struct {
	MaxSandboxes        *int     `json:"maxSandboxes,omitempty"`
	MaxVCPUs            *int     `json:"maxVCPUs,omitempty"`
	MaxMemoryMB         *int     `json:"maxMemoryMB,omitempty"`
	MaxDiskMB           *int     `json:"maxDiskMB,omitempty"`
	MaxCreatesPerSecond *float64 `json:"maxCreatesPerSecond,omitempty"`
	MaxVolumes          *int     `json:"maxVolumes,omitempty"`
	MaxVolumeMB         *int     `json:"maxVolumeMB,omitempty"`
}

// Over returns the limits of a team with quota q on a server whose
// defaults are def.
func (q Quota) Over(def Limits) Limits {
	pick := func(v *int, d int) int {
		if v != nil {
			return *v
		}
		return d
	}
	out := Limits{
		MaxSandboxes: pick(q.MaxSandboxes, def.MaxSandboxes),
		MaxVCPUs:     pick(q.MaxVCPUs, def.MaxVCPUs),
		MaxMemoryMB:  pick(q.MaxMemoryMB, def.MaxMemoryMB),
		MaxDiskMB:    pick(q.MaxDiskMB, def.MaxDiskMB),
		MaxVolumes:   pick(q.MaxVolumes, def.MaxVolumes),
		MaxVolumeMB:  pick(q.MaxVolumeMB, def.MaxVolumeMB),

		MaxCreatesPerSecond: def.MaxCreatesPerSecond,
	}
	if q.MaxCreatesPerSecond != nil {
		out.MaxCreatesPerSecond = *q.MaxCreatesPerSecond
	}
	return out
}

// TeamGetter finds a team by ID: the store.
type TeamGetter interface {
	GetTeam(ctx context.Context, id string) (Team, error)
}

// LimitsOf returns the limits of team, read now from st (so that the
// operator's change holds at once): its quota over def, the server's
// defaults, which an unknown team has.
func LimitsOf(ctx context.Context, st TeamGetter, team string, def Limits) (Limits, error) {
	t, err := st.GetTeam(ctx, team)
	switch {
	case KindOf(err) == KindNotFound:
		return def, nil
	case err != nil:
		return Limits{}, Wrap(KindInternal, err, "cannot read the team's quota")
	}
	return t.Quota.Over(def), nil
}

// Validate refuses negative limits.
func (q Quota) Validate() error {
	for name, v := range map[string]*int{"maxSandboxes": q.MaxSandboxes, "maxVCPUs": q.MaxVCPUs, "maxMemoryMB": q.MaxMemoryMB,
		"maxDiskMB": q.MaxDiskMB, "maxVolumes": q.MaxVolumes, "maxVolumeMB": q.MaxVolumeMB} {
		if v != nil && *v < 0 {
			return Errorf(KindInvalid, "%s must be 0 (unlimited) or more, not %d", name, *v)
		}
	}
	if r := q.MaxCreatesPerSecond; r != nil && !(*r >= 0) {
		return Errorf(KindInvalid, "maxCreatesPerSecond must be 0 (unlimited) or more, not %g", *r)
	}
	return nil
}

// Usage is what a team holds: its sandboxes that run or are frozen (and
// those being created or resumed), with their resources.
type Usage struct {
	Sandboxes int `json:"sandboxes"`
	VCPUs     int `json:"vcpus"`
	MemoryMB  int `json:"memoryMB"`
	DiskMB    int `json:"diskMB"`
}

// Holds reports whether a sandbox in this state holds a place in its
// team's quota: running, being created, or frozen (its memory kept).
func (sb Sandbox) Holds() bool {
	switch sb.State {
	case StateCreating, StateRunning:
		return true
	case StatePaused:
		return sb.PauseMode == PauseFrozen
	}
	return false
}

// Add returns u with sb's resources added.
func (u Usage) Add(cpus, memoryMB, diskMB int) Usage {
	return Usage{Sandboxes: u.Sandboxes + 1, VCPUs: u.VCPUs + cpus, MemoryMB: u.MemoryMB + memoryMB, DiskMB: u.DiskMB + diskMB}
}

// Exceeded returns the error that refuses one more sandbox of the given
// resources to team, which holds u under limits l; nil when it fits.
// The error is KindLimited and names the limit and the use.
func (l Limits) Exceeded(team string, u Usage, cpus, memoryMB, diskMB int) error {
	over := func(max, used, more int) bool { return max > 0 && used+more > max }
	var msg string
	switch {
	case over(l.MaxSandboxes, u.Sandboxes, 1):
		msg = fmt.Sprintf("has %d of %d sandboxes running", u.Sandboxes, l.MaxSandboxes)
	case over(l.MaxVCPUs, u.VCPUs, cpus):
		msg = fmt.Sprintf("uses %d of %d vCPUs, and the sandbox needs %d", u.VCPUs, l.MaxVCPUs, cpus)
	case over(l.MaxMemoryMB, u.MemoryMB, memoryMB):
		msg = fmt.Sprintf("uses %d of %d MiB of memory, and the sandbox needs %d", u.MemoryMB, l.MaxMemoryMB, memoryMB)
	case over(l.MaxDiskMB, u.DiskMB, diskMB):
		msg = fmt.Sprintf("uses %d of %d MiB of disk, and the sandbox needs %d", u.DiskMB, l.MaxDiskMB, diskMB)
	default:
		return nil
	}
	return Limited(fmt.Sprintf("team '%s' %s", team, msg), QuotaRetry)
}

// String says the limits in a line, "unlimited" for zeros.
func (l Limits) String() string {
	n := func(v int, unit string) string {
		if v == 0 {
			return "unlimited"
		}
		return fmt.Sprintf("%d%s", v, unit)
	}
	rate := "unlimited"
	if l.MaxCreatesPerSecond > 0 {
		rate = fmt.Sprintf("%g/s", l.MaxCreatesPerSecond)
	}
	return strings.Join([]string{"sandboxes " + n(l.MaxSandboxes, ""), "vcpus " + n(l.MaxVCPUs, ""),
		"memory " + n(l.MaxMemoryMB, " MiB"), "disk " + n(l.MaxDiskMB, " MiB"), "creates " + rate,
		"volumes " + n(l.MaxVolumes, ""), "volume size " + n(l.MaxVolumeMB, " MiB")}, ", ")
}
