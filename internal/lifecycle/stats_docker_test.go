package lifecycle_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/agentclient"
	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

// TestDiskMetricsDocker runs a secure sandbox on the local engine and
// checks that its sampled metrics carry the disk its agent sees: the total
// of the root filesystem as statfs inside the sandbox gives it (or the
// enforced disk size, on an engine with quotas), and some of it used. It
// needs Docker and $WARREN_TEST_IMAGE (default warren/base).
func TestDiskMetricsDocker(t *testing.T) {
	rt := dockerRuntime(t)
	image, _ := dockerTestImage(t, rt)
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ac := agentclient.New()
	set := noPools()
	set.BaseImage, set.MetricsInterval = image, 200*time.Millisecond
	m, err := lifecycle.New(lifecycle.Deps{Runtime: rt, Agent: ac, Store: st, Commands: ac}, set)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	sb, err := m.Create(t.Context(), lifecycle.CreateRequest{TeamID: sandbox.DefaultTeamID, Timeout: time.Minute, Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Kill(t.Context(), sandbox.DefaultTeamID, sb.ID)

	var blocks, bsize int64
	if _, err := fmt.Sscan(run(t, sb, "stat -f -c '%b %S' /"), &blocks, &bsize); err != nil {
		t.Fatal(err)
	}
	inside := blocks * bsize

	deadline := time.Now().Add(15 * time.Second)
	for {
		samples, err := m.Metrics(t.Context(), sandbox.DefaultTeamID, sb.ID, time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(samples); n > 0 && samples[n-1].DiskTotal > 0 {
			got := samples[n-1]
			t.Logf("sample: %+v; statfs of / inside: %d bytes", got, inside)
			if got.DiskTotal != inside && got.DiskTotal != int64(sb.DiskSizeMB)<<20 {
				t.Errorf("disk total %d, want %d (statfs of / inside) or the sandbox's %d MB", got.DiskTotal, inside, sb.DiskSizeMB)
			}
			if got.DiskUsed <= 0 || got.DiskUsed > got.DiskTotal {
				t.Errorf("disk used %d of %d", got.DiskUsed, got.DiskTotal)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sample with disk figures in 15 s: %+v", samples)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
