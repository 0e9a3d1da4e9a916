package limitguard

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeProc writes a stat file per process: pid → (pgid, threads).
func fakeProc(t *testing.T, procs map[int][2]int) string {
	t.Helper()
	dir := t.TempDir()
	for pid, p := range procs {
		d := filepath.Join(dir, fmt.Sprint(pid))
		os.MkdirAll(d, 0o755)
		// A comm with a space and a parenthesis, as a process may name itself.
		stat := fmt.Sprintf("%d (a) b) S 1 %d %d 0 -1 4194304 1 0 0 0 0 0 0 0 20 0 %d 0 1 1 1\n", pid, p[0], p[0], p[1])
		if err := os.WriteFile(filepath.Join(d, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(dir, "self"), 0o755) // not a pid: skipped
	return dir
}

func TestBiggest(t *testing.T) {
	tests := []struct {
		name  string
		procs map[int][2]int
		spare []int
		want  int
	}{
		{"the group with most processes", map[int][2]int{10: {10, 1}, 11: {10, 1}, 12: {10, 1}, 20: {20, 1}}, nil, 10},
		{"threads count", map[int][2]int{10: {10, 1}, 11: {10, 1}, 20: {20, 30}}, nil, 20},
		{"spare groups never", map[int][2]int{1: {1, 40}, 10: {10, 1}}, []int{1}, 10},
		{"nothing but spare groups", map[int][2]int{1: {1, 40}}, []int{1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := biggest(fakeProc(t, tt.procs), tt.spare)
			if got != tt.want {
				t.Errorf("biggest = %d, want %d", got, tt.want)
			}
		})
	}
}

// A sample of a bomb's processes names the bomb: 4000 of its processes
// beside 30 of others.
func TestBiggestSamplesABomb(t *testing.T) {
	procs := map[int][2]int{}
	for pid := 100; pid < 4100; pid++ {
		procs[pid] = [2]int{100, 1}
	}
	for pid := 5000; pid < 5030; pid++ {
		procs[pid] = [2]int{pid, 1}
	}
	if got, share := biggest(fakeProc(t, procs), nil); got != 100 || share < 0.8 {
		t.Errorf("biggest = %d (share %.2f), want the bomb's group 100", got, share)
	}
}

// cgroup is a fake cgroup holding tasks of its limit of 200, whose
// counts of refused forks (v2's pids.events), OOM kills (v1's
// memory.oom_control) and met memory limits (v1's memory.failcnt) the
// test raises.
type cgroup struct {
	dir                       string
	tasks, forks, kills, fail int
}

func newCgroup(t *testing.T) *cgroup {
	c := &cgroup{dir: t.TempDir(), tasks: 200}
	os.WriteFile(filepath.Join(c.dir, "pids.max"), []byte("200\n"), 0o644)
	c.write()
	return c
}

func (c *cgroup) counters() []Counter {
	return []Counter{
		{filepath.Join(c.dir, "missing"), "max"},
		{filepath.Join(c.dir, "pids.events"), "max"},
		{filepath.Join(c.dir, "memory.oom_control"), "oom_kill"},
		{filepath.Join(c.dir, "memory.failcnt"), ""},
	}
}

func (c *cgroup) write() {
	os.WriteFile(filepath.Join(c.dir, "pids.current"), []byte(fmt.Sprintf("%d\n", c.tasks)), 0o644)
	os.WriteFile(filepath.Join(c.dir, "memory.failcnt"), []byte(fmt.Sprintf("%d\n", c.fail)), 0o644)
	os.WriteFile(filepath.Join(c.dir, "pids.events"), []byte(fmt.Sprintf("max %d\n", c.forks)), 0o644)
	os.WriteFile(filepath.Join(c.dir, "memory.oom_control"), []byte(fmt.Sprintf("oom_kill_disable 0\nunder_oom 0\noom_kill %d\n", c.kills)), 0o644)
}

func TestGuard(t *testing.T) {
	tests := []struct {
		name string
		// fight says what rises in the interval that ends at check i
		// (1-based): refused forks, OOM kills, met memory limits.
		fight func(i int) (forks, kills, fail int)
		tasks int   // held throughout, of 200
		want  []int // the groups killed over 12 checks
	}{
		{"forks refused at every check: killed after patience", func(int) (int, int, int) { return 3, 0, 0 }, 200, []int{10, 10}},
		{"OOM kills at every check: killed after patience", func(int) (int, int, int) { return 0, 1, 0 }, 150, []int{10, 10}},
		{"refused forks or a met memory limit at every check", func(i int) (int, int, int) { return i % 2, 0, 1 - i%2 }, 200, []int{10, 10}},
		{"refused now and then: never killed", func(i int) (int, int, int) { return min(i%3, 1), 0, 0 }, 200, nil},
		{"the memory limit met with few tasks (a memory hog, a big copy): never killed", func(int) (int, int, int) { return 0, 1, 5 }, 20, nil},
		{"no fight: never killed", func(int) (int, int, int) { return 0, 0, 0 }, 200, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cg := newCgroup(t)
				cg.tasks = tt.tasks
				cg.write()
				var mu sync.Mutex
				var killed []int
				g := Start(Config{
					PidsDirs: []string{t.TempDir(), cg.dir},
					Counters: cg.counters(),
					Proc:     fakeProc(t, map[int][2]int{10: {10, 1}, 11: {10, 1}, 20: {20, 1}}),
					Interval: time.Second,
					Patience: 4 * time.Second,
					Kill: func(pgid int) error {
						mu.Lock()
						defer mu.Unlock()
						killed = append(killed, pgid)
						return nil
					},
					Spare: []int{1},
				})
				defer g.Close()
				for i := 1; i <= 12; i++ {
					forks, kills, fail := tt.fight(i)
					cg.forks += forks
					cg.kills += kills
					cg.fail += fail
					cg.write()
					time.Sleep(time.Second)
					synctest.Wait()
				}
				mu.Lock()
				defer mu.Unlock()
				if diff := cmp.Diff(tt.want, killed); diff != "" {
					t.Errorf("killed (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// A check that runs late fights too: the agent is starved of CPU. A busy
// host does not make an uncrowded sandbox fight.
func TestFighting(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const interval = time.Second
	tests := []struct {
		name         string
		prev, cur    sample
		wantFighting bool
	}{
		{"crowded, forks refused", sample{at: t0, events: 1}, sample{at: t0.Add(interval), tasks: 100, max: 200, events: 2}, true},
		{"crowded, on time, nothing refused", sample{at: t0, events: 2}, sample{at: t0.Add(interval), tasks: 190, max: 200, events: 2}, false},
		{"crowded, late", sample{at: t0}, sample{at: t0.Add(5 * interval), tasks: 2800, max: 4096}, true},
		{"late but not crowded (a busy host)", sample{at: t0}, sample{at: t0.Add(5 * interval), tasks: 40, max: 4096}, false},
		{"no limit", sample{at: t0}, sample{at: t0.Add(5 * interval), tasks: 5000, events: 3}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fighting(tt.prev, tt.cur, interval); got != tt.wantFighting {
				t.Errorf("fighting = %v, want %v", got, tt.wantFighting)
			}
		})
	}
}

// Under gVisor the sandbox shows no pids cgroup: nothing to guard.
func TestTasks(t *testing.T) {
	c := newCgroup(t)
	c.tasks = 150
	c.write()
	if tasks, limit := Tasks([]string{t.TempDir(), c.dir}); tasks != 150 || limit != 200 {
		t.Errorf("Tasks: %d of %d, want 150 of 200 from the directory that has the files", tasks, limit)
	}
	os.WriteFile(filepath.Join(c.dir, "pids.max"), []byte("max\n"), 0o644)
	if _, limit := Tasks([]string{c.dir}); limit != 0 {
		t.Errorf("limit %d for max, want 0", limit)
	}
	if tasks, limit := Tasks([]string{t.TempDir()}); tasks != 0 || limit != 0 {
		t.Errorf("Tasks without a cgroup: %d of %d", tasks, limit)
	}
}

func TestNoCgroupNoGuard(t *testing.T) {
	if g := Start(Config{PidsDirs: []string{t.TempDir()}}); g != nil {
		g.Close()
		t.Fatal("Start found a pids cgroup in an empty directory")
	}
}

// A check makes next to no garbage: the guard checks twice a second for the
// whole life of an idle sandbox, and what it drops stays resident until
// the heap reaches the collector's 4 MiB (bench/idle).
func TestCheckGarbage(t *testing.T) {
	cg := newCgroup(t)
	g := &Guard{cfg: withDefaults(Config{Counters: cg.counters()[1:]}), pids: cg.dir}
	want := sample{tasks: 200, max: 200}
	if got := g.sample(); got.tasks != want.tasks || got.max != want.max {
		t.Fatalf("sample = %+v, want tasks and max %+v", got, want)
	}
	const checks = 100
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range checks {
		g.sample()
	}
	runtime.ReadMemStats(&after)
	if perCheck := (after.TotalAlloc - before.TotalAlloc) / checks; perCheck > 512 {
		t.Errorf("a check allocates %d bytes, want at most 512", perCheck)
	}
}
