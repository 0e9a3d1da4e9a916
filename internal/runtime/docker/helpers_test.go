package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// newTestRuntime returns a runtime on the local engine whose agent is the
// fake agent in testdata, or skips the test when there is no engine.
func newTestRuntime(t testing.TB) *Runtime {
	t.Helper()
	cli, err := Connect()
	if err == nil {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err = cli.Ping(ctx, client.PingOptions{})
		cancel()
		cli.Close()
	}
	if err != nil {
		t.Skipf("skipping: no Docker engine reachable (set DOCKER_HOST or start dockerd): %v", err)
	}
	rt, err := New(Config{
		AgentPath:   buildFakeAgent(t),
		Instance:    "test-" + randomID(t),
		StopTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// buildFakeAgent compiles testdata/fakeagent as a static binary.
func buildFakeAgent(t testing.TB) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "fakeagent")
	goBin := filepath.Join(goruntime.GOROOT(), "bin", "go")
	cmd := exec.Command(goBin, "build", "-o", out, "./testdata/fakeagent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the fake agent: %v\n%s", err, b)
	}
	return out
}

// importImage imports a tiny image made of the given empty directories,
// with the entrypoint /bin/true, and removes it when the test ends. The
// agent comes from the bind mount, so the image needs nothing else.
func importImage(t testing.TB, rt *Runtime, dirs ...string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range append([]string{"etc/", "tmp/"}, dirs...) {
		hdr := &tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: time.Now()}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ref := "warren-test-" + randomID(t) + ":latest"
	res, err := rt.cli.ImageImport(t.Context(), client.ImageImportSource{Source: &buf, SourceName: "-"}, ref, client.ImageImportOptions{
		Changes: []string{`ENTRYPOINT ["/bin/true"]`, `CMD ["x"]`},
	})
	if err != nil {
		t.Fatalf("importing the test image: %v", err)
	}
	io.Copy(io.Discard, res)
	res.Close()
	t.Cleanup(func() {
		rt.cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true})
	})
	return ref
}

func randomID(t testing.TB) string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// waitAgent polls the agent's /health until it answers 204.
func waitAgent(ctx context.Context, addr string) error {
	hc := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/health", nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func getBody(t testing.TB, url string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b))
}
