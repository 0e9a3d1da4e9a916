//go:build e2e

// End to end: the control plane's sandbox calls.

package e2b_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/sdk/go/e2b"
)

// api/info, api/kill, sandbox/create, sandbox/kill
func TestE2ECreateInfoListKill(t *testing.T) {
	t.Parallel()
	c, sbx := e2eSandbox(t, e2b.SandboxOptions{Metadata: map[string]string{"test-key": "test-value-" + t.Name()}})
	ctx := ctxT(t)
	if ok, err := sbx.IsRunning(ctx); !ok || err != nil {
		t.Fatalf("isRunning = %v %v", ok, err)
	}
	info, err := sbx.GetInfo(ctx)
	if err != nil || info.SandboxID != sbx.ID || info.State != e2b.StateRunning || info.Metadata["test-key"] != "test-value-"+t.Name() {
		t.Fatalf("info = %+v %v", info, err)
	}
	byMeta := e2b.ListOptions{Metadata: map[string]string{"test-key": "test-value-" + t.Name()}}
	if !listed(t, c, byMeta, sbx.ID) {
		t.Error("not listed by its metadata")
	}
	if killed, err := sbx.Kill(ctx); !killed || err != nil {
		t.Fatalf("kill = %v %v", killed, err)
	}
	if listed(t, c, byMeta, sbx.ID) {
		t.Error("listed after kill")
	}
	if killed, err := c.Kill(ctx, "nonexistingsandbox"); killed || err != nil {
		t.Errorf("kill of an unknown sandbox = %v %v", killed, err)
	}
	if _, err := c.GetInfo(ctx, sbx.ID); !errors.As(err, new(*e2b.SandboxNotFoundError)) {
		t.Errorf("info after kill: %T %v", err, err)
	}
}

// api/list: pagination, state filter
func TestE2EListPagesAndStates(t *testing.T) {
	t.Parallel()
	tag := map[string]string{"list": fmt.Sprint(time.Now().UnixNano())}
	c, a := e2eSandbox(t, e2b.SandboxOptions{Metadata: tag})
	_, b := e2eSandbox(t, e2b.SandboxOptions{Metadata: tag})
	ctx := ctxT(t)
	p := c.List(e2b.ListOptions{Metadata: tag, Limit: 1})
	first, err := p.NextItems(ctx)
	if err != nil || len(first) != 1 || !p.HasNext() || p.NextToken() == "" {
		t.Fatalf("first page %v %v, more %v", first, err, p.HasNext())
	}
	second, err := p.NextItems(ctx)
	if err != nil || len(second) != 1 || second[0].SandboxID == first[0].SandboxID {
		t.Fatalf("second page %v %v", second, err)
	}
	if paused, err := b.Pause(ctx, e2b.PauseOptions{}); !paused || err != nil {
		t.Fatalf("pause = %v %v", paused, err)
	}
	pausedOnly := e2b.ListOptions{Metadata: tag, States: []e2b.SandboxState{e2b.StatePaused}}
	runningOnly := e2b.ListOptions{Metadata: tag, States: []e2b.SandboxState{e2b.StateRunning}}
	if !listed(t, c, pausedOnly, b.ID) || listed(t, c, pausedOnly, a.ID) || !listed(t, c, runningOnly, a.ID) || listed(t, c, runningOnly, b.ID) {
		t.Error("the state filter does not separate running and paused")
	}
}

// api/snapshot, sandbox/connect, sandbox/snapshot
func TestE2EPauseAndConnect(t *testing.T) {
	t.Parallel()
	c, sbx := e2eSandbox(t, e2b.SandboxOptions{Envs: map[string]string{"KEPT": "yes"}})
	ctx := ctxT(t)
	if _, err := sbx.Files.Write(ctx, "/home/user/kept.txt", []byte("still here"), e2b.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if paused, err := sbx.Pause(ctx, e2b.PauseOptions{}); !paused || err != nil {
		t.Fatalf("pause = %v %v", paused, err)
	}
	if running, err := sbx.IsRunning(ctx); running || err != nil {
		t.Errorf("isRunning while paused = %v %v", running, err)
	}
	if paused, err := sbx.Pause(ctx, e2b.PauseOptions{}); paused || err != nil {
		t.Errorf("pause of a paused sandbox = %v %v", paused, err)
	}
	again, err := c.Connect(ctx, sbx.ID, e2b.ConnectOptions{})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if running, err := again.IsRunning(ctx); !running || err != nil {
		t.Errorf("isRunning after connect = %v %v", running, err)
	}
	if b, err := again.Files.Read(ctx, "/home/user/kept.txt", e2b.ReadOptions{}); string(b) != "still here" || err != nil {
		t.Errorf("file after resume = %q %v", b, err)
	}
	if res, err := again.Commands.Run(ctx, "echo $KEPT", e2b.CommandOptions{}); err != nil || res.Stdout != "yes\n" {
		t.Errorf("env after resume = %+v %v", res, err)
	}
	sbx.Kill(ctx)
	if _, err := c.Connect(ctx, sbx.ID, e2b.ConnectOptions{}); !errors.As(err, new(*e2b.SandboxNotFoundError)) {
		t.Errorf("connect to a killed sandbox: %T %v", err, err)
	}
}

// sandbox/timeout, sandbox/connect (never shortens)
func TestE2ETimeouts(t *testing.T) {
	t.Parallel()
	c, sbx := e2eSandbox(t, e2b.SandboxOptions{Timeout: 10 * time.Minute})
	ctx := ctxT(t)
	before, err := sbx.GetInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Connect(ctx, sbx.ID, e2b.ConnectOptions{Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	after, _ := sbx.GetInfo(ctx)
	if after.EndAt.Before(before.EndAt) {
		t.Errorf("connect shortened the sandbox's life: %v → %v", before.EndAt, after.EndAt)
	}
	if err := sbx.SetTimeout(ctx, 20*time.Minute); err != nil {
		t.Fatal(err)
	}
	longer, _ := sbx.GetInfo(ctx)
	if !longer.EndAt.After(after.EndAt) {
		t.Errorf("setTimeout did not lengthen: %v → %v", after.EndAt, longer.EndAt)
	}
	if err := sbx.SetTimeout(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the sandbox ends at its shortened timeout", func() bool {
		running, err := sbx.IsRunning(ctx)
		return err == nil && !running
	})
}

// sandbox/snapshot-api
func TestE2ESnapshots(t *testing.T) {
	t.Parallel()
	c, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	sbx.Files.Write(ctx, "/home/user/snap.txt", []byte("snapshotted"), e2b.WriteOptions{})
	snap, err := sbx.CreateSnapshot(ctx, "")
	if err != nil {
		t.Fatalf("create snapshot: %v", err)
	}
	t.Cleanup(func() { c.DeleteSnapshot(context.Background(), snap.SnapshotID) })
	all, err := sbx.ListSnapshots(e2b.SnapshotListOptions{}).All(ctx)
	if err != nil || len(all) != 1 || all[0].SnapshotID != snap.SnapshotID {
		t.Errorf("snapshots of the sandbox = %+v %v", all, err)
	}
	_, from := e2eSandbox(t, e2b.SandboxOptions{Template: snap.SnapshotID})
	if b, err := from.Files.Read(ctx, "/home/user/snap.txt", e2b.ReadOptions{}); string(b) != "snapshotted" || err != nil {
		t.Errorf("file in a sandbox from the snapshot = %q %v", b, err)
	}
	if deleted, err := c.DeleteSnapshot(ctx, snap.SnapshotID); !deleted || err != nil {
		t.Errorf("delete = %v %v", deleted, err)
	}
	if deleted, err := c.DeleteSnapshot(ctx, snap.SnapshotID); deleted || err != nil {
		t.Errorf("delete again = %v %v", deleted, err)
	}
}

// sandbox/fork
func TestE2EFork(t *testing.T) {
	t.Parallel()
	c, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	sbx.Files.Write(ctx, "/home/user/fork.txt", []byte("original"), e2b.WriteOptions{})
	forks, err := sbx.Fork(ctx, e2b.ForkOptions{})
	if err != nil || len(forks) != 1 || forks[0].Err != nil {
		t.Fatalf("fork = %+v %v", forks, err)
	}
	child := forks[0].Sandbox
	t.Cleanup(func() { child.Kill(context.Background()) })
	if b, err := child.Files.Read(ctx, "/home/user/fork.txt", e2b.ReadOptions{}); string(b) != "original" || err != nil {
		t.Errorf("file in the fork = %q %v", b, err)
	}
	child.Files.Write(ctx, "/home/user/fork.txt", []byte("changed"), e2b.WriteOptions{})
	if b, _ := sbx.Files.Read(ctx, "/home/user/fork.txt", e2b.ReadOptions{}); string(b) != "original" {
		t.Errorf("the fork changed its parent: %q", b)
	}
	if _, err := c.Fork(ctx, "nonexistingsandbox", e2b.ForkOptions{}); !errors.As(err, new(*e2b.SandboxNotFoundError)) {
		t.Errorf("fork of an unknown sandbox: %T %v", err, err)
	}
}

// sandbox/metrics
func TestE2EMetrics(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	var m []e2b.SandboxMetrics
	eventually(t, 30*time.Second, "metrics appear", func() bool {
		var err error
		m, err = sbx.GetMetrics(ctx, e2b.MetricsOptions{})
		return err == nil && len(m) > 0
	})
	if m[0].CPUCount == 0 || m[0].MemTotal == 0 || m[0].Timestamp.IsZero() {
		t.Errorf("metric %+v", m[0])
	}
	old, err := sbx.GetMetrics(ctx, e2b.MetricsOptions{Start: time.Now().Add(-2 * time.Hour), End: time.Now().Add(-time.Hour)})
	if err != nil || len(old) != 0 {
		t.Errorf("metrics of an hour before the sandbox = %v %v", old, err)
	}
}

// The sandbox log (E2B's CLI reads it; the JS SDK has no test of it).
func TestE2ELogs(t *testing.T) {
	t.Parallel()
	c, sbx := e2eSandbox(t, e2b.SandboxOptions{})
	ctx := ctxT(t)
	var logs []e2b.LogEntry
	eventually(t, 30*time.Second, "the sandbox has log entries", func() bool {
		var err error
		logs, err = sbx.GetLogs(ctx, e2b.LogsOptions{})
		return err == nil && len(logs) > 0
	})
	if logs[0].Message == "" || logs[0].Timestamp.IsZero() {
		t.Errorf("entry %+v", logs[0])
	}
	if one, err := sbx.GetLogs(ctx, e2b.LogsOptions{Limit: 1, Backward: true}); err != nil || len(one) != 1 {
		t.Errorf("limit 1 = %v %v", one, err)
	}
	if _, err := c.GetLogs(ctx, "nonexistingsandbox", e2b.LogsOptions{}); !errors.As(err, new(*e2b.SandboxNotFoundError)) {
		t.Errorf("logs of an unknown sandbox: %T %v", err, err)
	}
}

// sandbox/create: an MCP gateway that does not start kills the sandbox
func TestE2EMCPGatewayFailureKillsTheSandbox(t *testing.T) {
	t.Parallel()
	c := e2eClient(t)
	ctx := ctxT(t)
	tag := map[string]string{"mcp": fmt.Sprint(time.Now().UnixNano())}
	_, err := c.Create(ctx, e2b.SandboxOptions{MCP: map[string]any{"nosuch": map[string]any{}}, Metadata: tag})
	var se *e2b.SandboxError
	if !errors.As(err, &se) || !strings.Contains(se.Message, "Failed to start MCP gateway") {
		t.Fatalf("err = %T %v", err, err)
	}
	if len(mustList(t, c, tag)) != 0 {
		t.Error("the sandbox outlived its failed gateway")
	}
}

func mustList(t *testing.T, c *e2b.Client, meta map[string]string) []e2b.SandboxInfo {
	t.Helper()
	all, err := c.List(e2b.ListOptions{Metadata: meta}).All(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// sandbox/lifecyclePayload: pause on timeout; the API refuses what cannot be
func TestE2ELifecycle(t *testing.T) {
	t.Parallel()
	yes := true
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{Timeout: 2 * time.Second, Lifecycle: &e2b.Lifecycle{OnTimeout: "pause", AutoResume: &yes}})
	ctx := ctxT(t)
	info, err := sbx.GetInfo(ctx)
	if err != nil || info.Lifecycle == nil || info.Lifecycle.OnTimeout != "pause" || !info.Lifecycle.AutoResume {
		t.Errorf("lifecycle in info = %+v %v", info, err)
	}
	eventually(t, 30*time.Second, "the sandbox pauses at its timeout", func() bool {
		info, err := sbx.GetInfo(ctx)
		return err == nil && info.State == e2b.StatePaused
	})
}

// sandbox/network (what needs no internet): updateNetwork reaches the sandbox's info
func TestE2EUpdateNetwork(t *testing.T) {
	t.Parallel()
	_, sbx := e2eSandbox(t, e2b.SandboxOptions{Network: &e2b.NetworkOptions{DenyOut: []string{e2b.AllTraffic}}})
	ctx := ctxT(t)
	info, err := sbx.GetInfo(ctx)
	if err != nil || info.Network == nil || len(info.Network.DenyOut) != 1 {
		t.Fatalf("network at create = %+v %v", info.Network, err)
	}
	if err := sbx.UpdateNetwork(ctx, e2b.NetworkUpdate{AllowOut: []string{"10.1.2.3"}, DenyOut: []string{e2b.AllTraffic}}); err != nil {
		t.Fatal(err)
	}
	info, err = sbx.GetInfo(ctx)
	if err != nil || info.Network == nil || len(info.Network.AllowOut) != 1 || info.Network.AllowOut[0] != "10.1.2.3" {
		t.Errorf("network after update = %+v %v", info.Network, err)
	}
	if err := e2eClient(t).UpdateNetwork(ctx, "nonexistingsandbox", e2b.NetworkUpdate{}); !errors.As(err, new(*e2b.SandboxNotFoundError)) {
		t.Errorf("update of an unknown sandbox: %T %v", err, err)
	}
}
