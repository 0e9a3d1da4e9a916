// Package limitguard ends what holds a sandbox's processes once the sandbox
// has been crowded and fighting for a while. A fork bomb outlives the
// command that started it (under `timeout 20 bash -c ':(){ :|:& };:'` the
// bomb's first shell exits at once, so timeout has nothing left to kill)
// and keeps thousands of processes in the sandbox, against its pids or its
// memory limit, and runnable: no command can start, and the agent, one
// runnable task among thousands in the sandbox's CPU cgroup, answers too
// late to be of use — for minutes, until the bomb burns out. Measured with
// the default limits (4096 pids, 1 GiB): ~2,800 bash processes held for
// over 4 minutes, no fork refused nor process OOM-killed after the first
// seconds, the memory limit met all the time, and every request to the
// agent timed out (its checks ran on time: what starved it was memory).
//
// The guard checks every Interval. A check is fighting when the sandbox
// holds at least half its pids limit and, since the check before, a fork
// was refused for the pids limit, the memory limit was met (the OOM killer
// ended a process, or reclaim ran), or the check itself ran late (the
// agent is starved of CPU). Once the checks have
// been fighting for Patience without a break, the guard kills the process
// group holding the most of the sandbox's tasks, as the OOM killer ends
// what holds its memory. A busy host alone does not make a check fight:
// the sandbox must be crowded too.
//
// It does not set the limits (the engine does: Docker, the Kubernetes
// node agent) nor refuse starts (the kernel does; the process service
// names the limit). Where the sandbox shows no pids cgroup (gVisor) it
// does nothing.
package limitguard

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// PidsDirs are where a sandbox sees its own pids cgroup, under cgroup v2
// and v1.
var PidsDirs = []string{"/sys/fs/cgroup", "/sys/fs/cgroup/pids"}

// Counter is a count of the sandbox's cgroup that rises while the sandbox
// fights a limit: the line Key of File, "Key N", or with no Key the whole
// of File.
type Counter struct{ File, Key string }

// Counters are the counts a sandbox sees of its own cgroup, under cgroup
// v2 and v1: forks refused for the pids limit, processes the OOM killer
// ended, and allocations that met the memory limit (and so reclaimed,
// the agent's own code among what is evicted: the thrashing that kept it
// deaf while ~2,800 bash processes held 1 GiB).
var Counters = []Counter{
	{"/sys/fs/cgroup/pids.events", "max"},
	{"/sys/fs/cgroup/pids/pids.events", "max"},
	{"/sys/fs/cgroup/memory.events", "oom_kill"},
	{"/sys/fs/cgroup/memory.events", "max"},
	{"/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"},
	{"/sys/fs/cgroup/memory/memory.failcnt", ""},
}

// Defaults of Config.
const (
	DefaultInterval = 500 * time.Millisecond
	DefaultPatience = 2 * time.Second
	// sampleSize is how many processes are read to find the biggest
	// group: reading all of a bomb's thousands, one slice of CPU in
	// thousands, would take minutes; a sample names the bomb as surely.
	sampleSize = 64
)

// Config says where to look and how long to wait. Zero values take the
// defaults.
type Config struct {
	// PidsDirs are the candidate pids cgroup directories; the first with
	// pids.max and pids.current wins. Default PidsDirs.
	PidsDirs []string
	// Counters are the counts to watch; those that cannot be read are
	// left out. Default Counters.
	Counters []Counter
	// Proc is the proc filesystem of the sandbox's pid namespace.
	// Default "/proc".
	Proc string
	// Interval is the time between checks. Default DefaultInterval.
	Interval time.Duration
	// Patience is how long the checks must go on fighting before the
	// guard kills. Default DefaultPatience.
	Patience time.Duration
	// Kill ends the process group pgid. Default: SIGKILL to the group.
	Kill func(pgid int) error
	// Spare are process groups never killed. Default: the agent's own
	// and PID 1's.
	Spare []int
	Log   *slog.Logger
}

// Guard is one running watcher; Close stops it.
type Guard struct {
	cfg    Config
	pids   string // the pids cgroup directory
	files  files  // reads the cgroup's files for the checks
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start starts watching, or returns nil when the sandbox shows no pids
// cgroup (gVisor).
func Start(cfg Config) *Guard {
	cfg = withDefaults(cfg)
	g := &Guard{cfg: cfg}
	for _, d := range cfg.PidsDirs {
		if _, _, err := g.files.readPids(d); err == nil {
			g.pids = d
			break
		}
	}
	if g.pids == "" {
		cfg.Log.Info("no pids cgroup: the sandbox's limits go unguarded")
		return nil
	}
	var readable []Counter
	for _, c := range cfg.Counters {
		if _, err := g.files.count(c); err == nil {
			readable = append(readable, c)
		}
	}
	g.cfg.Counters = readable
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	g.wg.Go(func() { g.run(ctx) })
	return g
}

// Close stops the guard and waits for it. A nil Guard is fine.
func (g *Guard) Close() {
	if g == nil {
		return
	}
	g.cancel()
	g.wg.Wait()
}

func withDefaults(cfg Config) Config {
	if cfg.PidsDirs == nil {
		cfg.PidsDirs = PidsDirs
	}
	if cfg.Counters == nil {
		cfg.Counters = Counters
	}
	if cfg.Proc == "" {
		cfg.Proc = "/proc"
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Patience <= 0 {
		cfg.Patience = DefaultPatience
	}
	if cfg.Kill == nil {
		cfg.Kill = func(pgid int) error { return syscall.Kill(-pgid, syscall.SIGKILL) }
	}
	if cfg.Spare == nil {
		cfg.Spare = []int{syscall.Getpgrp(), 1}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// sample is what one check sees.
type sample struct {
	at         time.Time
	tasks, max uint64 // pids.current and pids.max; max 0 when there is no limit
	events     uint64 // sum of the counters
}

// fighting tells whether the check that saw cur, after the one that saw
// prev, is fighting (see the package doc).
func fighting(prev, cur sample, interval time.Duration) bool {
	crowded := cur.max > 0 && cur.tasks*2 >= cur.max
	late := cur.at.Sub(prev.at) > 2*interval
	return crowded && (cur.events > prev.events || late)
}

func (g *Guard) sample() sample {
	s := sample{at: time.Now()}
	s.tasks, s.max, _ = g.files.readPids(g.pids)
	for _, c := range g.cfg.Counters {
		v, _ := g.files.count(c)
		s.events += v
	}
	return s
}

// run checks every Interval and kills once the checks have been fighting
// for Patience without a break.
func (g *Guard) run(ctx context.Context) {
	t := time.NewTicker(g.cfg.Interval)
	defer t.Stop()
	prev := g.sample()
	var since time.Time // when the current run of fighting checks began; zero when none
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur := g.sample()
		switch {
		case !fighting(prev, cur, g.cfg.Interval):
			since = time.Time{}
		case since.IsZero():
			since = cur.at
		case cur.at.Sub(since) >= g.cfg.Patience:
			g.killbiggest(cur)
			since = time.Time{}
		}
		prev = cur
	}
}

// killBiggest kills the process group with the most of a sample of the
// sandbox's tasks (threads count: the limit counts them).
func (g *Guard) killbiggest(cur sample) {
	pgid, share := biggest(g.cfg.Proc, g.cfg.Spare)
	if pgid <= 0 {
		return
	}
	err := g.cfg.Kill(pgid)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		g.cfg.Log.Warn("cannot end the process group holding the sandbox's limits", "pgid", pgid, "err", err)
		return
	}
	g.cfg.Log.Warn("the sandbox stayed crowded against its limits: ended the process group holding the most of its tasks",
		"pgid", pgid, "share", share, "tasks", cur.tasks, "limit", cur.max, "patience", g.cfg.Patience.String())
}

// Tasks reads the sandbox's pids cgroup, the first of dirs that has one:
// how many tasks it holds and its limit; limit 0 when it has none (no
// cgroup, as under gVisor, or "max").
func Tasks(dirs []string) (tasks, limit uint64) {
	var f files
	for _, d := range dirs {
		if tasks, limit, err := f.readPids(d); err == nil {
			return tasks, limit
		}
	}
	return 0, 0
}

// EndBiggestGroup kills (SIGKILL) the process group holding the most of a
// sample of the tasks under proc (a /proc), the spare groups aside, and
// returns it; 0 when there is none. The init calls it when the sandbox's
// processes hold every pid and the agent, whose guard would have ended
// them, cannot be started again.
func EndBiggestGroup(proc string, spare []int) (int, error) {
	pgid, _ := biggest(proc, spare)
	if pgid <= 0 {
		return 0, nil
	}
	return pgid, syscall.Kill(-pgid, syscall.SIGKILL)
}

// biggest returns the process group holding the most tasks among a random
// sample of the processes in proc, leaving out the spare groups, and the
// fraction of the sampled tasks it holds; 0 when there is none.
func biggest(proc string, spare []int) (pgid int, share float64) {
	entries, err := os.ReadDir(proc)
	if err != nil {
		return 0, 0
	}
	pids := make([]string, 0, len(entries))
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, e.Name())
		}
	}
	rand.Shuffle(len(pids), func(i, j int) { pids[i], pids[j] = pids[j], pids[i] })
	tasks := map[int]int{}
	total := 0
	for _, pid := range pids[:min(len(pids), sampleSize)] {
		group, threads, ok := groupOf(filepath.Join(proc, pid, "stat"))
		if !ok {
			continue // ended meanwhile
		}
		total += threads
		if !spared(group, spare) {
			tasks[group] += threads
		}
	}
	for group, n := range tasks {
		if n > tasks[pgid] || (n == tasks[pgid] && group < pgid) {
			pgid = group
		}
	}
	if pgid == 0 {
		return 0, 0
	}
	return pgid, float64(tasks[pgid]) / float64(total)
}

func spared(pgid int, spare []int) bool {
	return pgid <= 0 || slices.Contains(spare, pgid)
}

// groupOf reads a process's group and thread count from its stat file:
// "pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt
// majflt cmajflt utime stime cutime cstime priority nice num_threads ...".
// comm may hold spaces and parentheses, so fields count from the last ')'.
func groupOf(stat string) (pgid, threads int, ok bool) {
	b, err := os.ReadFile(stat)
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is state: pgrp is f[2], num_threads f[17].
	if len(f) < 18 {
		return 0, 0, false
	}
	pgid, err1 := strconv.Atoi(f[2])
	threads, err2 := strconv.Atoi(f[17])
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return pgid, threads, true
}
