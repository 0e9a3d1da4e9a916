package nodeagent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Cgroups finds and changes pods' cgroups under a cgroup filesystem root
// (the host's /sys/fs/cgroup, mounted into the node agent's pod), v1 or v2,
// whichever driver the kubelet uses (cgroupfs: .../pod<uid>; systemd:
// ...-pod<uid_with_underscores>.slice).
type Cgroups struct {
	root string
	v2   bool
	proc string // where the pods' processes are: the host's /proc

	mu    sync.Mutex
	paths map[string]string // pod UID → its cgroup, relative to a hierarchy's root
}

// maxDepth bounds the search for a pod's cgroup: kubepods/<qos>/pod<uid>
// sits at depth 3, under a per-node cgroup root at 4 or 5.
const maxDepth = 6

// NewCgroups returns the cgroups under root, detecting the version.
func NewCgroups(root string) (*Cgroups, error) {
	if _, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("cgroup root: %w", err)
	}
	c := &Cgroups{root: root, proc: "/proc", paths: map[string]string{}}
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		c.v2 = true
	} else if _, err := os.Stat(filepath.Join(root, "freezer")); err != nil {
		return nil, fmt.Errorf("%s is neither a cgroup v2 root nor a v1 root with a freezer hierarchy", root)
	}
	return c, nil
}

// uidPattern is the shape of a pod UID; anything else is refused before
// it reaches a path.
var uidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// ValidUID reports whether s has the shape of a pod UID.
func ValidUID(s string) bool { return uidPattern.MatchString(s) }

// hierarchy is the directory of a v1 controller's hierarchy, or the v2
// root.
func (c *Cgroups) hierarchy(controller string) string {
	if c.v2 {
		return c.root
	}
	if controller == "cpuacct" {
		for _, name := range []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu"} {
			if _, err := os.Stat(filepath.Join(c.root, name)); err == nil {
				return filepath.Join(c.root, name)
			}
		}
	}
	return filepath.Join(c.root, controller)
}

// find returns the pod's cgroup relative to a hierarchy's root, searching
// the freezer hierarchy (v1) or the root (v2) once per pod.
func (c *Cgroups) find(uid string) (string, error) {
	if !ValidUID(uid) {
		return "", sandbox.Errorf(sandbox.KindInvalid, "%q is not a pod UID", uid)
	}
	base := c.hierarchy("freezer")
	c.mu.Lock()
	rel, ok := c.paths[uid]
	c.mu.Unlock()
	if ok {
		if _, err := os.Stat(filepath.Join(base, rel)); err == nil {
			return rel, nil
		}
	}
	names := []string{"pod" + uid, "pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"}
	rel, err := search(base, "", names, 0)
	if err != nil {
		return "", err
	}
	if rel == "" {
		return "", sandbox.Errorf(sandbox.KindNotFound, "no cgroup of pod %s on this node", uid)
	}
	c.mu.Lock()
	c.paths[uid] = rel
	c.mu.Unlock()
	return rel, nil
}

// search looks depth-first under base/rel for a directory
// whose name ends with one of names.
func search(base, rel string, names []string, depth int) (string, error) {
	entries, err := os.ReadDir(filepath.Join(base, rel))
	if err != nil {
		if depth > 0 && errors.Is(err, os.ErrNotExist) {
			return "", nil // removed while we looked
		}
		return "", err
	}
	var dirs []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		for _, n := range names {
			if strings.HasSuffix(e.Name(), n) {
				return filepath.Join(rel, e.Name()), nil
			}
		}
		dirs = append(dirs, e.Name())
	}
	if depth+1 >= maxDepth {
		return "", nil
	}
	for _, d := range dirs {
		if found, err := search(base, filepath.Join(rel, d), names, depth+1); err != nil || found != "" {
			return found, err
		}
	}
	return "", nil
}

// Freeze freezes every process of the pod and waits until they are.
func (c *Cgroups) Freeze(ctx context.Context, uid string) error { return c.setFrozen(ctx, uid, true) }

// Thaw thaws the pod's processes.
func (c *Cgroups) Thaw(ctx context.Context, uid string) error { return c.setFrozen(ctx, uid, false) }

func (c *Cgroups) setFrozen(ctx context.Context, uid string, frozen bool) error {
	rel, err := c.find(uid)
	if err != nil {
		return err
	}
	dir := filepath.Join(c.hierarchy("freezer"), rel)
	var file, value string
	var done func() (bool, error)
	if c.v2 {
		file, value = "cgroup.freeze", map[bool]string{true: "1", false: "0"}[frozen]
		done = func() (bool, error) {
			kv, err := readKeyValues(filepath.Join(dir, "cgroup.events"))
			return kv["frozen"] == value, err
		}
	} else {
		file, value = "freezer.state", map[bool]string{true: "FROZEN", false: "THAWED"}[frozen]
		done = func() (bool, error) {
			b, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
			return strings.TrimSpace(string(b)) == value, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("%s %s: %w", file, value, err)
	}
	// A v1 freeze passes through FREEZING until every task has stopped;
	// one stuck there (a task in uninterruptible sleep) is written again,
	// as runc does.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			if frozen {
				_ = os.WriteFile(filepath.Join(dir, file), []byte(map[bool]string{true: "0", false: "THAWED"}[c.v2]), 0)
			}
			return sandbox.Errorf(sandbox.KindUnavailable, "pod %s did not reach %s", uid, value)
		case <-time.After(wait):
		}
		if !c.v2 && frozen {
			_ = os.WriteFile(filepath.Join(dir, file), []byte(value), 0)
		}
	}
}

// Frozen reports whether the pod's cgroup is frozen.
func (c *Cgroups) Frozen(uid string) (bool, error) {
	rel, err := c.find(uid)
	if err != nil {
		return false, err
	}
	dir := filepath.Join(c.hierarchy("freezer"), rel)
	if c.v2 {
		kv, err := readKeyValues(filepath.Join(dir, "cgroup.events"))
		return kv["frozen"] == "1", err
	}
	b, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
	return strings.TrimSpace(string(b)) == "FROZEN", err
}

// podTasks is what a pod holds beside its containers' processes: the
// pause process that keeps its namespaces.
const podTasks = 1

// SetPidsLimit caps the processes of each of the pod's containers at
// limit, as under Docker, where a sandbox sees its cap in its own
// /sys/fs/cgroup, and the pod's at limit plus podTasks, a cap that holds
// also for a container that starts after the call.
func (c *Cgroups) SetPidsLimit(uid string, limit int) error {
	if limit <= 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "a process limit must be positive")
	}
	rel, err := c.find(uid)
	if err != nil {
		return err
	}
	dir := filepath.Join(c.hierarchy("pids"), rel)
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(limit+podTasks)), 0); err != nil {
		return err
	}
	value := []byte(strconv.Itoa(limit))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		file := filepath.Join(dir, e.Name(), "pids.max")
		if _, err := os.Stat(file); err != nil {
			continue // not a cgroup with the controller, or gone meanwhile
		}
		if err := os.WriteFile(file, value, 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Stats is one resource sample of a pod's cgroup.
type Stats struct {
	CPUNanos uint64 `json:"cpuNanos"` // cumulative CPU time
	MemUsed  int64  `json:"memUsed"`  // bytes, reclaimable page cache excluded
	MemLimit int64  `json:"memLimit"` // bytes; 0 = no limit
	MemCache int64  `json:"memCache"` // bytes of page cache
}

// Stats samples the pod's CPU and memory use.
func (c *Cgroups) Stats(uid string) (Stats, error) {
	rel, err := c.find(uid)
	if err != nil {
		return Stats{}, err
	}
	var s Stats
	if c.v2 {
		dir := filepath.Join(c.root, rel)
		cpu, err := readKeyValues(filepath.Join(dir, "cpu.stat"))
		if err != nil {
			return Stats{}, err
		}
		usec, _ := strconv.ParseUint(cpu["usage_usec"], 10, 64)
		s.CPUNanos = usec * 1000
		cur, err := readInt(filepath.Join(dir, "memory.current"))
		if err != nil {
			return Stats{}, err
		}
		s.MemLimit, _ = readInt(filepath.Join(dir, "memory.max")) // "max": 0
		mem, err := readKeyValues(filepath.Join(dir, "memory.stat"))
		if err != nil {
			return Stats{}, err
		}
		inactive, _ := strconv.ParseInt(mem["inactive_file"], 10, 64)
		s.MemCache, _ = strconv.ParseInt(mem["file"], 10, 64)
		s.MemUsed = cur - min(inactive, cur)
		return s, nil
	}
	n, err := readInt(filepath.Join(c.hierarchy("cpuacct"), rel, "cpuacct.usage"))
	if err != nil {
		return Stats{}, err
	}
	s.CPUNanos = uint64(n)
	memDir := filepath.Join(c.hierarchy("memory"), rel)
	cur, err := readInt(filepath.Join(memDir, "memory.usage_in_bytes"))
	if err != nil {
		return Stats{}, err
	}
	if lim, err := readInt(filepath.Join(memDir, "memory.limit_in_bytes")); err == nil && lim < 1<<62 {
		s.MemLimit = lim // v1 says "no limit" with a huge number
	}
	mem, err := readKeyValues(filepath.Join(memDir, "memory.stat"))
	if err != nil {
		return Stats{}, err
	}
	inactive, _ := strconv.ParseInt(mem["total_inactive_file"], 10, 64)
	s.MemCache, _ = strconv.ParseInt(mem["total_cache"], 10, 64)
	s.MemUsed = cur - min(inactive, cur)
	return s, nil
}

// readInt reads a file holding one integer.
func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// readKeyValues reads a cgroup file of "key value" lines.
func readKeyValues(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok {
			out[k] = v
		}
	}
	return out, sc.Err()
}
