package buildkit

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/registry"
	"github.com/warrenhq/warren/internal/sandbox"
)

// testBuilder is a Builder of the buildkitd at WARREN_TEST_BUILDKIT
// (tcp://host:port) pushing to WARREN_TEST_BUILDKIT_REGISTRY (the
// control plane's address of its registry, host[:port]); buildkitd
// reaches that at WARREN_TEST_BUILDKIT_PUSH_REGISTRY when set. The test
// skips without them: test/e2e/kube-run.sh runs the template suites on
// the test cluster's buildkitd.
func testBuilder(t *testing.T) *Builder {
	addr, reg := os.Getenv("WARREN_TEST_BUILDKIT"), os.Getenv("WARREN_TEST_BUILDKIT_REGISTRY")
	if addr == "" || reg == "" {
		t.Skip("no buildkitd: set WARREN_TEST_BUILDKIT and WARREN_TEST_BUILDKIT_REGISTRY (deploy/kubernetes/buildkitd.yaml)")
	}
	var nonce [4]byte
	rand.Read(nonce[:])
	store, err := registry.New(reg+"/go-test-"+hex.EncodeToString(nonce[:]), registry.PlainHTTP(reg))
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(context.Background(), Config{Addr: addr, Images: store, RegistryHost: os.Getenv("WARREN_TEST_BUILDKIT_PUSH_REGISTRY"), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// buildContext is a context tar of a Dockerfile and files.
func buildContext(t *testing.T, files map[string]string) *bytes.Reader {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	return bytes.NewReader(buf.Bytes())
}

// A build is pushed and found in the registry; the same build again
// comes from the cache; a step that fails is a BuildFailure.
func TestBuildOnBuildKit(t *testing.T) {
	b := testBuilder(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var nonce [4]byte
	rand.Read(nonce[:])
	files := map[string]string{"Dockerfile": "FROM scratch\nENV A=b\nCOPY hello.txt /hello.txt\n", "hello.txt": hex.EncodeToString(nonce[:])}
	for i, wantCached := range []bool{false, true} {
		var lines []string
		if err := b.Build(ctx, buildContext(t, files), "warren-template/go-test:b1", false, func(l string) { lines = append(lines, l) }); err != nil {
			t.Fatalf("build %d: %v (output %q)", i+1, err, lines)
		}
		if !slices.Contains(lines, "Step 3/3 : COPY hello.txt /hello.txt") || slices.Contains(lines, " ---> Using cache") != wantCached {
			t.Errorf("build %d: output %q, want the COPY's step (from the cache: %v)", i+1, lines, wantCached)
		}
	}
	env, err := b.ImageEnv(ctx, "warren-template/go-test:b1")
	if err != nil || !slices.Contains(env, "A=b") {
		t.Errorf("env %q, %v", env, err)
	}
	if err := b.RemoveImage(ctx, "warren-template/go-test:b1"); err != nil {
		t.Error(err)
	}
	files["Dockerfile"] = "FROM scratch\nCOPY missing.txt /x\n"
	err = b.Build(ctx, buildContext(t, files), "warren-template/go-test:b2", false, func(string) {})
	var bf *sandbox.BuildFailure
	if !errors.As(err, &bf) {
		t.Fatalf("a COPY of a missing file: %v, want a BuildFailure", err)
	}
	t.Logf("failure: %s", bf.Message)
}
