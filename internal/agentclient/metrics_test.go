package agentclient

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/sandbox"
)

// TestMetrics reads a real agent's /metrics: the disk figures are those of
// the filesystem the agent runs on, and a secure agent wants its token.
func TestMetrics(t *testing.T) {
	addr, _, st := startAgent(t, "")
	st.SetAccessToken("tok")
	c := New()

	_, err := c.Metrics(t.Context(), addr, "")
	if err == nil || sandbox.KindOf(err) != sandbox.KindUnavailable {
		t.Errorf("without the token: %v, want an unavailable error", err)
	}

	m, err := c.Metrics(t.Context(), addr, "tok")
	if err != nil {
		t.Fatal(err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs("/", &fs); err != nil {
		t.Fatal(err)
	}
	if want := int64(fs.Blocks) * fs.Bsize; m.DiskTotal != want {
		t.Errorf("DiskTotal = %d, want %d (statfs of /)", m.DiskTotal, want)
	}
	if m.DiskUsed <= 0 || m.DiskUsed > m.DiskTotal {
		t.Errorf("DiskUsed = %d of %d", m.DiskUsed, m.DiskTotal)
	}
	if m.MemTotal <= 0 || m.CPUCount <= 0 || m.Time.IsZero() {
		t.Errorf("metrics = %+v, want memory, CPUs and a time", m)
	}
}
