package jupyter

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// python is Debian's interpreter; the one first on PATH may lack ipykernel.
const python = "/usr/bin/python3"

// startIPyKernel starts a real ipykernel and connects to it, or skips the
// test when this machine has no ipykernel.
func startIPyKernel(t *testing.T) *Client {
	t.Helper()
	if err := exec.Command(python, "-c", "import ipykernel").Run(); err != nil {
		t.Skipf("skipping: %s has no ipykernel (apt-get install python3-ipykernel): %v", python, err)
	}
	info, err := NewConnectionInfo()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kernel.json")
	if err := info.WriteFile(path, -1, -1); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-m", "ipykernel_launcher", "-f", path)
	cmd.Env = append(os.Environ(), "PYDEVD_DISABLE_FILE_VALIDATION=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c, err := Dial(info, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("kernel not ready: %v", err)
	}
	return c
}

func TestExecuteWithIPyKernel(t *testing.T) {
	c := startIPyKernel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var types []string
	var result string
	start := time.Now()
	reply, err := c.Execute(ctx, ExecuteRequest{Code: "print('hi')\n1+1", StoreHistory: true}, func(m *Message) {
		types = append(types, m.Header.MsgType)
		if m.Header.MsgType == "execute_result" {
			var content struct {
				Data map[string]any `json:"data"`
			}
			json.Unmarshal(m.Content, &content)
			result, _ = content.Data["text/plain"].(string)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("round trip %v, outputs %v", time.Since(start), types)
	if reply.Status != "ok" || result != "2" {
		t.Fatalf("reply %+v, result %q; want ok and \"2\"", reply, result)
	}
}
