package lifecycle

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/warrenhq/warren/internal/sandbox"
	templates "github.com/warrenhq/warren/internal/template"
)

// hugeTemplates resolves every ref to a template asking for far more than
// any server has, on image, as one built before the maxima existed.
type hugeTemplates struct{ image string }

func (h hugeTemplates) Resolve(ctx context.Context, teamID, ref string) (templates.Resolved, error) {
	if ref != "huge" {
		return templates.Resolved{}, sandbox.Errorf(sandbox.KindNotFound, "template '%s' not found", ref)
	}
	return templates.Resolved{ID: "thuge", Alias: "huge", Image: h.image, CPUCount: 100000, MemoryMB: 99999999}, nil
}

func withMaxima(cpus, memMB int, more ...func(*config)) func(*config) {
	return func(c *config) {
		c.MaxCPUCount, c.MaxMemoryMB = cpus, memMB
		for _, f := range more {
			f(c)
		}
	}
}

// A template that asks for more than the server's maxima is held to them
// at each create, straight or from the warm pool: what the container gets
// and what the API reports.
func TestTemplateHeldToMaxima(t *testing.T) {
	for _, tc := range []struct {
		name  string
		image string
		pool  int
	}{
		{"own container", "python:3.12", 0},
		{"warm pool", "warren/base", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, withMaxima(2, 1024, withPool(tc.pool), func(c *config) { c.Templates = hugeTemplates{tc.image} }))
				synctest.Wait()
				pool := e.pooledContainers(t)
				sb := e.create(t, CreateRequest{Template: "huge"})
				if tc.pool > 0 && (len(pool) == 0 || sb.ContainerID != pool[0].ID) {
					t.Fatalf("sandbox on %s, not the pooled %+v", sb.ContainerID, pool)
				}
				if sb.CPUCount != 2 || sb.MemoryMB != 1024 {
					t.Errorf("sandbox has %d CPUs, %d MiB; want the maxima 2, 1024", sb.CPUCount, sb.MemoryMB)
				}
				l, _ := e.rt.LimitsOf(sb.ContainerID)
				if l.CPUCount != 2 || l.MemoryMB != 1024 {
					t.Errorf("container limits %+v; want 2 CPUs, 1024 MiB", l)
				}
				if got := e.state(t, sb.ID); got.CPUCount != 2 || got.MemoryMB != 1024 {
					t.Errorf("stored %d CPUs, %d MiB", got.CPUCount, got.MemoryMB)
				}
			})
		})
	}
}

// The server's own per-sandbox resources are held to its maxima too.
func TestServerResourcesHeldToMaxima(t *testing.T) {
	e := newEnv(t, withMaxima(1, 256, func(c *config) { c.CPUCount, c.MemoryMB = 8, 4096 }))
	if c := e.m.Settings(); c.CPUCount != 1 || c.MemoryMB != 256 {
		t.Errorf("config %d CPUs, %d MiB; want 1, 256", c.CPUCount, c.MemoryMB)
	}
	sb := e.create(t, CreateRequest{Template: "python:3.12"})
	if l, _ := e.rt.LimitsOf(sb.ContainerID); l.CPUCount != 1 || l.MemoryMB != 256 {
		t.Errorf("container limits %+v; want 1 CPU, 256 MiB", l)
	}
}

func TestCheckResources(t *testing.T) {
	e := newEnv(t, withMaxima(4, 2048))
	for _, tc := range []struct {
		cpu, mem int
		want     string // "" = accepted
	}{
		{0, 0, ""},
		{4, 2048, ""},
		{5, 0, "cpuCount 5 is above this server's maximum of 4 CPUs per sandbox (--max-cpu-count)"},
		{100000, 99999999, "--max-cpu-count"},
		{1, 2049, "memoryMB 2049 is above this server's maximum of 2048 MiB per sandbox (--max-memory-mb)"},
	} {
		err := e.m.CheckResources(tc.cpu, tc.mem)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%d CPUs, %d MiB: %v", tc.cpu, tc.mem, err)
		case tc.want != "" && (sandbox.KindOf(err) != sandbox.KindInvalid || !strings.Contains(sandbox.Message(err), tc.want)):
			t.Errorf("%d CPUs, %d MiB: %v, want invalid with %q", tc.cpu, tc.mem, err, tc.want)
		}
	}
}

func TestDefaultMaxima(t *testing.T) {
	c := DefaultSettings()
	if c.MaxCPUCount < 1 || c.MaxMemoryMB < 128 || c.MaxMemoryMB%128 != 0 {
		t.Errorf("default maxima %d CPUs, %d MiB", c.MaxCPUCount, c.MaxMemoryMB)
	}
	meminfo := filepath.Join(t.TempDir(), "meminfo")
	os.WriteFile(meminfo, []byte("MemFree:  100 kB\nMemTotal:       24683652 kB\n"), 0o600)
	if kb, ok := memTotalKB(meminfo); !ok || kb != 24683652 {
		t.Errorf("memTotalKB = %d, %v", kb, ok)
	}
	if _, ok := memTotalKB(filepath.Join(t.TempDir(), "none")); ok {
		t.Error("memTotalKB of a missing file")
	}
}
