package lifecycle

import (
	"fmt"
	"runtime"
	"time"

	"github.com/warrenhq/warren/internal/agentclient"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Settings are the values a Manager runs with: images, resources, timers
// and pool sizes. Every field is taken as given, so there is no zero that
// secretly means a default: start from DefaultSettings and change what
// differs; New refuses Settings that Validate refuses. Where a limit can
// be switched off it takes a negative value for that; 0 is refused
// (except for the pools, where 0 is no pool).
type Settings struct {
	BaseImage   string // image of the "base" template; default sandbox.BaseImage
	EnvdVersion string // reported to clients; default the agent's (agentclient.EnvdVersion)
	DefaultUser string // the agent's default user; default "user"
	// CodeInterpreterImage is the image of the "code-interpreter-v1"
	// template (warren image build code-interpreter); default
	// sandbox.CodeInterpreterImage.
	CodeInterpreterImage string
	// MCPGatewayImage is the image of the "mcp-gateway" template (warren
	// image build mcp-gateway); default sandbox.MCPGatewayImage.
	MCPGatewayImage string
	// DesktopImage is the image of the "desktop" template (warren image
	// build desktop); default sandbox.DesktopImage.
	DesktopImage string

	CPUCount int // CPUs per sandbox unless its template asks; default 2
	MemoryMB int // memory per sandbox unless its template asks, in MiB; default 512
	// MaxCPUCount and MaxMemoryMB are the most CPUs and memory (MiB) one
	// sandbox gets, whatever its template asks: CheckResources refuses a
	// client more, a template that asked for more before is held to them
	// at each create, and so are CPUCount and MemoryMB (New lowers them,
	// warning). Defaults: the machine's CPUs (runtime.NumCPU) and half its
	// memory (DefaultMaxMemoryMB).
	MaxCPUCount int
	MaxMemoryMB int
	// ServerMemoryMB is the memory, in MiB, that the running and frozen
	// sandboxes of every team, and the creates in flight, may reserve in
	// all: a create past it finds the server full and is refused before
	// anything starts (503, Retry-After FullRetry). Default the machine's
	// memory (MemTotal, DefaultServerMemoryMB); 0 = no limit (warren serve
	// --engine kubernetes, whose scheduler places pods on the cluster's
	// nodes).
	ServerMemoryMB int
	// DiskSizeMB is each sandbox's disk size: reported to clients, and the
	// limit of its writable layer where the engine's storage has quotas
	// (overlay2 on xfs mounted with pquota). Default 10240.
	DiskSizeMB int
	// PidsLimit is the most processes and threads a sandbox holds; negative
	// means none. Default 1024: fewer than the default memory holds of a
	// shell's smallest processes (512 MiB held ~2,800 forked bash), so a
	// fork bomb meets the pids limit, which the agent's limit guard sees
	// and ends at once, before the memory limit, which starves the agent
	// with the bomb (docs/security.md).
	PidsLimit int

	// WarmPool is how many started, not yet initialised containers of the
	// base template are kept for creates to claim (internal/warmpool): a
	// size, 0 = no pool, or WarmPoolAuto (the default), a size learned
	// from demand, which also gives every other template in use a pool of
	// its own.
	WarmPool int
	// WarmPoolCodeInterpreter is the same for the code-interpreter-v1
	// template: containers whose python and javascript kernels are up.
	// None are kept while CodeInterpreterImage is not built. Default
	// WarmPoolAuto, 0 = no pool.
	WarmPoolCodeInterpreter int
	// WarmPoolMemoryMB bounds the memory, in MiB, that auto-sized pools
	// hold beyond their floors; default DefaultWarmPoolMemoryMB.
	WarmPoolMemoryMB int

	MaxTimeout  time.Duration // longest TTL a client may ask for; default 24h
	InitTimeout time.Duration // how long to wait for the agent; default 30s
	// ReadyTimeout bounds how long a template's ready command may keep
	// failing before create gives up; default 60s.
	ReadyTimeout time.Duration

	// FreezeMaxAge demotes frozen sandboxes to stopped after this long;
	// default 10m, negative = never.
	FreezeMaxAge time.Duration
	// MaxFrozen caps frozen sandboxes; the oldest beyond it are demoted to
	// stopped. Default 16, negative = no cap.
	MaxFrozen int
	// StoppedMaxAge removes sandboxes paused (stopped or checkpointed)
	// for longer than this; default 168h (7 days), negative = never.
	StoppedMaxAge time.Duration
	// SandboxRuntime is what new sandboxes' containers run under;
	// default sandbox.RuntimeRunc. Under sandbox.RuntimeGVisor, with a
	// Runtime that is a sandbox.Checkpointer, demotion checkpoints frozen
	// sandboxes (PauseCheckpointed) instead of stopping them.
	SandboxRuntime sandbox.OCIRuntime
	// PauseToDisk makes a pause that keeps memory checkpoint a gVisor
	// sandbox straight away instead of freezing it: no RAM is held, and
	// resume takes a restore (a fraction of a second) instead of a thaw.
	// Default false.
	PauseToDisk bool
	// CheckpointMaxAge deletes the checkpoints of sandboxes paused this
	// long, freeing their disk; they become stopped (filesystem kept,
	// memory lost). Default 24h, negative = never.
	CheckpointMaxAge time.Duration
	// KilledRetention keeps killed sandboxes' records (and their logs)
	// this long before deleting them; default 1h.
	KilledRetention time.Duration
	// TeamLimits are the limits of a team whose quota (sandbox.Team.Quota,
	// set by the operator) does not say otherwise: the only settings where
	// 0 means no limit, their default.
	TeamLimits sandbox.Limits

	TickInterval      time.Duration // how often timers are checked; default 1s
	ReconcileInterval time.Duration // how often the engine is re-checked; default 30s
	MetricsInterval   time.Duration // metrics sampling period; default 5s
	MetricsHistory    int           // samples per sandbox kept at full resolution, older ones thinned; default 720
}

// DefaultSettings returns the settings warren serve runs with when no
// flag says otherwise.
func DefaultSettings() Settings {
	const memoryMB = 512
	return Settings{
		BaseImage:               sandbox.BaseImage,
		EnvdVersion:             agentclient.EnvdVersion,
		DefaultUser:             "user",
		CodeInterpreterImage:    sandbox.CodeInterpreterImage,
		MCPGatewayImage:         sandbox.MCPGatewayImage,
		DesktopImage:            sandbox.DesktopImage,
		CPUCount:                2,
		MemoryMB:                memoryMB,
		MaxCPUCount:             runtime.NumCPU(),
		MaxMemoryMB:             DefaultMaxMemoryMB(memoryMB),
		ServerMemoryMB:          DefaultServerMemoryMB(),
		DiskSizeMB:              10240,
		PidsLimit:               1024,
		WarmPool:                WarmPoolAuto,
		WarmPoolCodeInterpreter: WarmPoolAuto,
		WarmPoolMemoryMB:        DefaultWarmPoolMemoryMB(),
		MaxTimeout:              24 * time.Hour,
		InitTimeout:             30 * time.Second,
		ReadyTimeout:            time.Minute,
		FreezeMaxAge:            10 * time.Minute,
		MaxFrozen:               16,
		StoppedMaxAge:           7 * 24 * time.Hour,
		SandboxRuntime:          sandbox.RuntimeRunc,
		CheckpointMaxAge:        24 * time.Hour,
		KilledRetention:         time.Hour,
		TickInterval:            time.Second,
		ReconcileInterval:       30 * time.Second,
		MetricsInterval:         5 * time.Second,
		MetricsHistory:          720,
	}
}

// A SettingError is a setting Validate refused. Name is the setting's
// name in lower case with dashes (max-frozen for MaxFrozen), which warren
// serve's flags and WARREN_* variables are named after, so that serve can
// report the flag; Problem says what to give instead.
type SettingError struct {
	Name    string
	Problem string
}

func (e *SettingError) Error() string {
	return "lifecycle: setting " + e.Name + " " + e.Problem + " (lifecycle.DefaultSettings has every default)"
}

// What a numeric setting may hold.
type bound int

const (
	positive bound = iota // > 0
	orNever               // != 0; negative = never, or no limit
	orNone                // >= 0; 0 = none
	orAuto                // >= 0, 0 = none, or WarmPoolAuto
)

// Validate refuses settings a Manager cannot run with, naming the first
// one (a *SettingError) and saying what to give instead.
func (s Settings) Validate() error {
	for _, f := range []struct {
		name, value string
	}{
		{"base-image", s.BaseImage},
		{"code-interpreter-image", s.CodeInterpreterImage},
		{"mcp-gateway-image", s.MCPGatewayImage},
		{"desktop-image", s.DesktopImage},
		{"envd-version", s.EnvdVersion},
		{"default-user", s.DefaultUser},
	} {
		if f.value == "" {
			return &SettingError{f.name, "must not be empty"}
		}
	}
	for _, f := range []struct {
		name  string
		value int64
		bound bound
	}{
		{"cpu-count", int64(s.CPUCount), positive},
		{"memory-mb", int64(s.MemoryMB), positive},
		{"max-cpu-count", int64(s.MaxCPUCount), positive},
		{"max-memory-mb", int64(s.MaxMemoryMB), positive},
		{"server-memory-mb", int64(s.ServerMemoryMB), orNone},
		{"disk-size-mb", int64(s.DiskSizeMB), positive},
		{"pids-limit", int64(s.PidsLimit), orNever},
		{"warm-pool", int64(s.WarmPool), orAuto},
		{"warm-pool-code-interpreter", int64(s.WarmPoolCodeInterpreter), orAuto},
		{"warm-pool-memory-mb", int64(s.WarmPoolMemoryMB), positive},
		{"max-timeout", int64(s.MaxTimeout), positive},
		{"init-timeout", int64(s.InitTimeout), positive},
		{"ready-timeout", int64(s.ReadyTimeout), positive},
		{"freeze-max-age", int64(s.FreezeMaxAge), orNever},
		{"max-frozen", int64(s.MaxFrozen), orNever},
		{"stopped-max-age", int64(s.StoppedMaxAge), orNever},
		{"checkpoint-max-age", int64(s.CheckpointMaxAge), orNever},
		{"killed-retention", int64(s.KilledRetention), positive},
		{"tick-interval", int64(s.TickInterval), positive},
		{"metrics-interval", int64(s.MetricsInterval), positive},
		{"metrics-history", int64(s.MetricsHistory), positive},
		{"reconcile-interval", int64(s.ReconcileInterval), positive},
		{"team-max-sandboxes", int64(s.TeamLimits.MaxSandboxes), orNone},
		{"team-max-vcpus", int64(s.TeamLimits.MaxVCPUs), orNone},
		{"team-max-memory-mb", int64(s.TeamLimits.MaxMemoryMB), orNone},
		{"team-max-disk-mb", int64(s.TeamLimits.MaxDiskMB), orNone},
		{"team-max-volumes", int64(s.TeamLimits.MaxVolumes), orNone},
		{"team-max-volume-mb", int64(s.TeamLimits.MaxVolumeMB), orNone},
	} {
		switch {
		case f.bound == positive && f.value <= 0:
			return &SettingError{f.name, "must be positive"}
		case f.bound == orNever && f.value == 0:
			return &SettingError{f.name, "must not be 0: give a positive value, or a negative one for never (no limit)"}
		case f.bound == orNone && f.value < 0:
			return &SettingError{f.name, "must not be negative: give 0 for none"}
		case f.bound == orAuto && f.value < 0 && f.value != WarmPoolAuto:
			return &SettingError{f.name, "must not be negative: give a size, 0 for none, or auto"}
		}
	}
	if r := s.TeamLimits.MaxCreatesPerSecond; !(r >= 0) {
		return &SettingError{"team-max-creates-per-second", "must not be negative: give 0 for no limit"}
	}
	if _, err := sandbox.ParseOCIRuntime(string(s.SandboxRuntime)); err != nil || s.SandboxRuntime == "" {
		return &SettingError{"runtime", fmt.Sprintf("must be %s or %s, not %q", sandbox.RuntimeRunc, sandbox.RuntimeGVisor, s.SandboxRuntime)}
	}
	return nil
}

// clampResources holds the server's own per-sandbox resources to its
// maxima, and says which it lowered.
func (s *Settings) clampResources() (lowered []string) {
	if s.CPUCount > s.MaxCPUCount {
		s.CPUCount = s.MaxCPUCount
		lowered = append(lowered, "cpu")
	}
	if s.MemoryMB > s.MaxMemoryMB {
		s.MemoryMB = s.MaxMemoryMB
		lowered = append(lowered, "memory")
	}
	return lowered
}
