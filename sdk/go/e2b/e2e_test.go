//go:build e2e

// The end-to-end suite: the SDK against a real server, configured from E2B_API_URL,
// E2B_SANDBOX_URL, E2B_DOMAIN and E2B_API_KEY (sdk/go/e2e.sh starts a Warren server and runs
// it: go test -tags e2e). Its cases follow the official JavaScript SDK's own tests of the same
// calls, written anew for Go. Without a server it skips, or fails when CI is set.
package e2b_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/warrenhq/warren/sdk/go/e2b"
)

const e2eTemplate = "base"

func e2eClient(t *testing.T) *e2b.Client {
	t.Helper()
	if os.Getenv("E2B_API_URL") == "" || os.Getenv("E2B_API_KEY") == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but no server is given: set E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY (sdk/go/e2e.sh starts one)")
		}
		t.Skip("no server: set E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY, or run sdk/go/e2e.sh")
	}
	return e2b.NewClient()
}

// e2eSandbox creates a sandbox for one test, tagged with the test's name, and kills it after.
func e2eSandbox(t *testing.T, opts e2b.SandboxOptions) (*e2b.Client, *e2b.Sandbox) {
	t.Helper()
	c := e2eClient(t)
	if opts.Template == "" {
		opts.Template = e2eTemplate
	}
	if opts.Metadata == nil {
		opts.Metadata = map[string]string{"sandboxTestId": fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())}
	}
	sbx, err := c.Create(context.Background(), opts)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { sbx.Kill(context.Background()) })
	return c, sbx
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func listed(t *testing.T, c *e2b.Client, opts e2b.ListOptions, id string) bool {
	t.Helper()
	all, err := c.List(opts).All(ctxT(t))
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	for _, s := range all {
		if s.SandboxID == id {
			return true
		}
	}
	return false
}
