package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/moby/moby/client"

	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/runtime/docker"
	"github.com/warrenhq/warren/internal/sandbox"
)

// The paused-RAM measurement: for each pause mode, n sandboxes each run a
// process holding holdMB of random bytes (plus the agent), are paused in
// that mode, and the RAM they still hold is measured on the host, two
// ways:
//
//   - cgroups: the sum of the containers' memory cgroups' usage (v1
//     memory.usage_in_bytes, v2 memory.current: anonymous memory, page
//     cache and, under gVisor, the sentry's memory file), read at the
//     paths the containers' processes were in while they ran; a cgroup
//     that no longer exists holds nothing;
//   - MemAvailable: how much /proc/meminfo's MemAvailable fell from just
//     before the sandboxes were created, as is and net of the free pages
//     parked on per-CPU lists, which MemAvailable does not count (see
//     hostMem). It also counts what lives outside the containers' cgroups
//     (containerd shims, docker-proxy, the engine's bookkeeping) but
//     everything else the machine does too, so the drop left once the
//     sandboxes are removed again is printed beside it.
//
// Then check of them are resumed: where the mode promises to keep
// processes (frozen, checkpointed) the process must answer with the digest
// of its memory, where it does not (stopped) it must be gone.

// pausedRun is what one paused-RAM measurement does.
type pausedRun struct {
	modes  []pauseMode
	n      int // sandboxes per mode
	holdMB int // MiB each sandbox's process holds
	check  int // sandboxes per mode resumed to check their process
	par    int // sandboxes created, paused or removed at once
	// idle is the host's memory before the measurement: each mode
	// starts once the per-CPU lists are back near its level.
	idle hostMem
}

// pauseMode is one way of pausing the measurement compares.
type pauseMode struct {
	name    string
	runtime sandbox.OCIRuntime
	want    sandbox.PauseMode
	// keeps says whether processes survive the pause.
	keeps bool
}

var pauseModes = []pauseMode{
	{"runc-frozen", sandbox.RuntimeRunc, sandbox.PauseFrozen, true},
	{"runc-stopped", sandbox.RuntimeRunc, sandbox.PauseStopped, false},
	{"gvisor-frozen", sandbox.RuntimeGVisor, sandbox.PauseFrozen, true},
	{"gvisor-checkpointed", sandbox.RuntimeGVisor, sandbox.PauseCheckpointed, true},
}

// selectModes returns the modes named in list (comma-separated), in the
// order of pauseModes; "" or "all" means all of them.
func selectModes(list string) ([]pauseMode, error) {
	if list == "" || list == "all" {
		return pauseModes, nil
	}
	want := map[string]bool{}
	for name := range strings.SplitSeq(list, ",") {
		want[strings.TrimSpace(name)] = true
	}
	var out []pauseMode
	for _, m := range pauseModes {
		if want[m.name] {
			out = append(out, m)
			delete(want, m.name)
		}
	}
	if len(want) > 0 {
		var names []string
		for _, m := range pauseModes {
			names = append(names, m.name)
		}
		return nil, fmt.Errorf("unknown pause modes %v (known: %s)", slices.Sorted(maps.Keys(want)), strings.Join(names, ", "))
	}
	return out, nil
}

// pausedSandbox is one sandbox of the measurement.
type pausedSandbox struct {
	sb     sandbox.Sandbox
	digest string // of its process's memory
	cgroup string // memory cgroup file read for its usage
	pause  time.Duration
}

// pausedResult is what one mode measured; memory in bytes.
type pausedResult struct {
	mode pauseMode
	n    int
	// cgroups' usage, running and paused, and how many cgroups are left
	// once paused.
	cgRunning, cgPaused int64
	cgLeft              int
	// MemAvailable drops net of per-CPU free pages (see memDrop):
	// running, paused (and raw), and once the sandboxes are removed again.
	runNet           int64
	pausRaw, pausNet int64
	afterNet         int64
	perCPU           int64         // per-CPU free pages above the baseline when paused
	waited           time.Duration // before the paused reading
	disk             int64         // checkpoints
	pause, resume    []time.Duration
	checked          int
	load             string
}

func (b *bench) paused(ctx context.Context, pr pausedRun) error {
	fmt.Printf("\npaused RAM: %d sandboxes per mode, each with a process holding %d MiB of random bytes; %d per mode resumed to check it\n",
		pr.n, pr.holdMB, pr.check)
	var err error
	if pr.idle, err = readHostMem(); err != nil {
		return err
	}
	var results []pausedResult
	for _, mode := range pr.modes {
		start := time.Now()
		res, err := b.pausedMode(ctx, pr, mode)
		if err != nil {
			return fmt.Errorf("%s: %w", mode.name, err)
		}
		fmt.Printf("  %s: %s to %s, load average then %s\n", mode.name,
			start.UTC().Format(time.TimeOnly), time.Now().UTC().Format(time.TimeOnly), res.load)
		results = append(results, res)
	}
	printPaused(results, pr.par)
	return nil
}

func (b *bench) pausedMode(ctx context.Context, pr pausedRun, mode pauseMode) (res pausedResult, err error) {
	m := b.ms[mode.runtime]
	res = pausedResult{mode: mode, n: pr.n}
	base, _, err := settleHostMem(pr.idle)
	if err != nil {
		return res, err
	}
	sbs := make([]*pausedSandbox, pr.n)
	defer b.killAll(context.WithoutCancel(ctx), m, mode, sbs, pr.par)

	err = each(pr.n, pr.par, func(i int) error {
		ps, err := b.pausedStart(ctx, m, pr.holdMB)
		sbs[i] = ps
		return err
	})
	if err != nil {
		return res, err
	}
	cgroups := make([]string, pr.n)
	for i, ps := range sbs {
		cgroups[i] = ps.cgroup
	}
	h, _, err := settleHostMem(base)
	if err != nil {
		return res, err
	}
	_, res.runNet = memDrop(base, h)
	if res.cgRunning, _, err = cgroupsUsage(cgroups); err != nil {
		return res, err
	}

	err = each(pr.n, pr.par, func(i int) error {
		start := time.Now()
		err := pauseAs(ctx, m, sbs[i].sb.ID, mode.want)
		sbs[i].pause = time.Since(start)
		return err
	})
	if err != nil {
		return res, err
	}
	if err := b.readPaused(ctx, &res, sbs, cgroups, base); err != nil {
		return res, err
	}
	if err := b.resumeSample(ctx, m, &res, sbs[:pr.check]); err != nil {
		return res, err
	}

	if err := b.killAll(ctx, m, mode, sbs, pr.par); err != nil {
		return res, err
	}
	h, _, err = settleHostMem(base)
	if err != nil {
		return res, err
	}
	_, res.afterNet = memDrop(base, h)
	res.load = loadAverage()
	return res, nil
}

// readPaused fills in what res measures of the paused sandboxes: the
// host's memory, their cgroups, and their checkpoints; it checks on the
// engine that each container is as its mode says.
func (b *bench) readPaused(ctx context.Context, res *pausedResult, sbs []*pausedSandbox, cgroups []string, base hostMem) error {
	h, waited, err := settleHostMem(base)
	if err != nil {
		return err
	}
	res.waited = waited
	res.pausRaw, res.pausNet = memDrop(base, h)
	res.perCPU = h.perCPU - base.perCPU
	if res.cgPaused, res.cgLeft, err = cgroupsUsage(cgroups); err != nil {
		return err
	}
	for _, ps := range sbs {
		res.pause = append(res.pause, ps.pause)
		if err := b.checkPausedContainer(ctx, ps, res.mode); err != nil {
			return err
		}
		if res.mode.want == sandbox.PauseCheckpointed {
			size, err := docker.CheckpointSize(b.dataRoot, ps.sb.ContainerID)
			if err != nil {
				return err
			}
			res.disk += size
		}
	}
	return nil
}

// resumeSample resumes the sandboxes of sample one at a time and checks
// their holding process.
func (b *bench) resumeSample(ctx context.Context, m *lifecycle.Manager, res *pausedResult, sample []*pausedSandbox) error {
	for _, ps := range sample {
		start := time.Now()
		sb, resumed, err := m.Connect(ctx, sandbox.DefaultTeamID, ps.sb.ID, 10*time.Minute, true)
		if err != nil {
			return err
		}
		if !resumed {
			return fmt.Errorf("sandbox %s was not paused", sb.ID)
		}
		res.resume = append(res.resume, time.Since(start))
		ps.sb = sb
		if err := b.checkHolder(ctx, sb, ps.digest, res.mode.keeps); err != nil {
			return fmt.Errorf("sandbox %s after resume: %w", sb.ID, err)
		}
		res.checked++
	}
	return nil
}

// killAll kills the sandboxes of sbs still there, and forgets them.
func (b *bench) killAll(ctx context.Context, m *lifecycle.Manager, mode pauseMode, sbs []*pausedSandbox, par int) error {
	return each(len(sbs), par, func(i int) error {
		ps := sbs[i]
		if ps == nil {
			return nil
		}
		// Removing a frozen gVisor container leaks its runsc state and
		// containerd shim (runsc will not signal a paused container), so
		// thaw it first; resumed ones are running already.
		if mode.runtime == sandbox.RuntimeGVisor && mode.want == sandbox.PauseFrozen {
			if sb, err := m.Get(ctx, sandbox.DefaultTeamID, ps.sb.ID); err == nil && sb.State == sandbox.StatePaused {
				b.rts[mode.runtime].Thaw(ctx, ps.sb.ContainerID)
			}
		}
		err := m.Kill(ctx, sandbox.DefaultTeamID, ps.sb.ID)
		if sandbox.KindOf(err) == sandbox.KindNotFound {
			err = nil
		}
		if err == nil {
			sbs[i] = nil
		}
		return err
	})
}

// pausedStart creates a sandbox, starts its holding process and finds its
// memory cgroup.
func (b *bench) pausedStart(ctx context.Context, m *lifecycle.Manager, holdMB int) (*pausedSandbox, error) {
	sb, err := m.Create(ctx, lifecycle.CreateRequest{TeamID: sandbox.DefaultTeamID, Timeout: 30 * time.Minute})
	if err != nil {
		return nil, err
	}
	ps := &pausedSandbox{sb: sb}
	if ps.digest, err = b.cmd(ctx, sb, fmt.Sprintf(holder, holdMB)); err != nil {
		return ps, err
	}
	if len(ps.digest) != 64 {
		return ps, fmt.Errorf("the holding process reports %q, not a digest", ps.digest)
	}
	in, err := b.cli.ContainerInspect(ctx, sb.ContainerID, client.ContainerInspectOptions{})
	if err != nil {
		return ps, err
	}
	if in.Container.State == nil || in.Container.State.Pid == 0 {
		return ps, fmt.Errorf("container %s has no process", sb.ContainerID)
	}
	ps.cgroup, err = memoryCgroup(in.Container.State.Pid)
	return ps, err
}

// pauseAs pauses a sandbox in mode and checks that it got that mode.
func pauseAs(ctx context.Context, m *lifecycle.Manager, id string, mode sandbox.PauseMode) error {
	var err error
	switch mode {
	case sandbox.PauseFrozen:
		err = m.Pause(ctx, sandbox.DefaultTeamID, id, true)
	case sandbox.PauseStopped:
		err = m.Pause(ctx, sandbox.DefaultTeamID, id, false)
	case sandbox.PauseCheckpointed:
		_, err = m.Stop(ctx, sandbox.DefaultTeamID, id)
	}
	if err != nil {
		return err
	}
	sb, err := m.Get(ctx, sandbox.DefaultTeamID, id)
	if err == nil && (sb.State != sandbox.StatePaused || sb.PauseMode != mode) {
		err = fmt.Errorf("sandbox %s is %s %s, not paused %s", id, sb.State, sb.PauseMode, mode)
	}
	return err
}

// checkPausedContainer checks on the engine that a paused sandbox's
// container is frozen or not running, as its mode says.
func (b *bench) checkPausedContainer(ctx context.Context, ps *pausedSandbox, mode pauseMode) error {
	c, err := b.rts[mode.runtime].Inspect(ctx, ps.sb.ContainerID)
	if err != nil {
		return err
	}
	if frozen := mode.want == sandbox.PauseFrozen; c.Running != frozen || c.Paused != frozen {
		return fmt.Errorf("container %s of a sandbox paused %s: running %v, frozen %v", c.ID, mode.want, c.Running, c.Paused)
	}
	return nil
}

// checkHolder checks that a resumed sandbox's holding process still has
// the memory it had (keeps) or is gone (!keeps).
func (b *bench) checkHolder(ctx context.Context, sb sandbox.Sandbox, digest string, keeps bool) error {
	if !keeps {
		got, err := b.cmd(ctx, sb, "if pgrep -f '[h]ashlib' >/dev/null; then echo alive; else echo gone; fi")
		if err == nil && got != "gone" {
			err = fmt.Errorf("the holding process is %s; a stopped sandbox should have lost it", got)
		}
		return err
	}
	got, err := b.cmd(ctx, sb, askDigest)
	if err == nil && got != digest {
		err = fmt.Errorf("the holding process reports %q, want %q: memory not kept", got, digest)
	}
	return err
}

// each runs f(0) … f(n-1), par at a time, and joins their errors.
func each(n, par int, f func(i int) error) error {
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	errs := make([]error, n)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = f(i)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// printPaused prints the results with one column per mode.
func printPaused(results []pausedResult, par int) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, f func(r pausedResult) string) {
		fmt.Fprint(w, name+"\t")
		for _, r := range results {
			fmt.Fprint(w, f(r)+"\t")
		}
		fmt.Fprintln(w)
	}
	fmt.Println("\nMiB; cgroups: sum of the containers' memory cgroups; MemAvailable drop: host MemAvailable before creating − now;")
	fmt.Println("net: without the change in free pages on per-CPU lists, which MemAvailable leaves out")
	row("", func(r pausedResult) string { return r.mode.name })
	row("sandboxes", func(r pausedResult) string { return strconv.Itoa(r.n) })
	row("running: cgroups", func(r pausedResult) string { return mib(r.cgRunning) })
	row("running: MemAvailable drop, net", func(r pausedResult) string { return mib(r.runNet) })
	row("paused: cgroups", func(r pausedResult) string { return mib(r.cgPaused) })
	row("paused: cgroups per sandbox", func(r pausedResult) string { return mibPer(r.cgPaused, r.n) })
	row("paused: cgroups still there", func(r pausedResult) string { return strconv.Itoa(r.cgLeft) })
	row("paused: MemAvailable drop", func(r pausedResult) string { return mib(r.pausRaw) })
	row("paused: per-CPU free pages above baseline", func(r pausedResult) string { return mib(r.perCPU) })
	row("paused: MemAvailable drop, net", func(r pausedResult) string { return mib(r.pausNet) })
	row("paused: net drop per sandbox", func(r pausedResult) string { return mibPer(r.pausNet, r.n) })
	row("paused: waited for the reading", func(r pausedResult) string { return r.waited.Round(time.Second).String() })
	row("removed again: MemAvailable drop, net", func(r pausedResult) string { return mib(r.afterNet) })
	row("checkpoints on disk", func(r pausedResult) string { return ifCheckpointed(r, mib(r.disk)) })
	row("checkpoints per sandbox", func(r pausedResult) string { return ifCheckpointed(r, mibPer(r.disk, r.n)) })
	row(fmt.Sprintf("pause p50 / p95 (%d at once)", par), func(r pausedResult) string { return pct(r.pause, 50) + " / " + pct(r.pause, 95) })
	row("resume p50 (one at a time)", func(r pausedResult) string { return pct(r.resume, 50) })
	row("resumed and checked", func(r pausedResult) string { return strconv.Itoa(r.checked) })
	w.Flush()
}

func ifCheckpointed(r pausedResult, s string) string {
	if r.mode.want != sandbox.PauseCheckpointed {
		return "-"
	}
	return s
}

func mib(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

func mibPer(b int64, n int) string { return fmt.Sprintf("%.1f", float64(b)/float64(n)/(1<<20)) }
