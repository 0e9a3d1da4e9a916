package lifecycle

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/sandbox"
)

// TestCodeInterpreterTemplate: code-interpreter-v1 runs its own image
// with the agent's -code-interpreter flag, never a pooled base container,
// and says how to build the image when it is missing.
func TestCodeInterpreterTemplate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, withPool(2))
		synctest.Wait()
		req := CreateRequest{TeamID: team, Template: CodeInterpreterTemplate, Timeout: time.Minute}

		_, err := e.m.Create(context.Background(), req)
		wantKind(t, "create without the image", err, sandbox.KindNotFound)
		if msg := sandbox.Message(err); !strings.Contains(msg, "warren image build code-interpreter") {
			t.Errorf("error %q does not say how to build the image", msg)
		}

		e.rt.Rebuild("warren/code-interpreter") // now it exists
		pool := e.pooledContainers(t)
		sb := e.create(t, req)
		base := e.create(t, CreateRequest{Template: BaseTemplate})
		for _, c := range pool {
			if c.ID == sb.ContainerID {
				t.Errorf("code-interpreter sandbox got pooled base container %s", c.ID)
			}
		}
		ciArgs, _ := e.rt.AgentArgsOf(sb.ContainerID)
		baseArgs, _ := e.rt.AgentArgsOf(base.ContainerID)
		got := []any{sb.TemplateID, sb.Alias, sb.Image, ciArgs, baseArgs, base.ContainerID == pool[0].ID}
		want := []any{"code-interpreter-v1", "code-interpreter-v1", "warren/code-interpreter", []string{"-code-interpreter"}, []string(nil), true}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

// TestCodeInterpreterCopiesKeepAgentArgs: sandboxes made from a snapshot
// or a fork of a code-interpreter sandbox run the agent with its
// arguments (or port 49999 has no server), and a stopped one resumes
// with them; the snapshot keeps them across a restart of the server.
func TestCodeInterpreterCopiesKeepAgentArgs(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.rt.Rebuild("warren/code-interpreter")
	src := e.create(t, CreateRequest{Template: CodeInterpreterTemplate})
	sn, err := e.m.Snapshot(ctx, team, src.ID, "ci", MemoryIfPossible)
	if err != nil {
		t.Fatal(err)
	}
	e.stop()
	e.start(t, nil)

	want := []string{"-code-interpreter"}
	args := func(what string, sb sandbox.Sandbox) {
		t.Helper()
		got, ok := e.rt.AgentArgsOf(sb.ContainerID)
		if !ok {
			t.Fatalf("%s: no container %s", what, sb.ContainerID)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: agent args (-want +got):\n%s", what, diff)
		}
	}
	fromID := e.create(t, CreateRequest{Template: sn.ID})
	args("from snapshot ID", fromID)
	args("from snapshot name", e.create(t, CreateRequest{Template: "ci"}))
	forks, err := e.m.Fork(ctx, team, src.ID, time.Minute, 1)
	if err != nil || forks[0].Err != nil {
		t.Fatalf("fork: %v, %+v", err, forks)
	}
	args("fork", forks[0].Sandbox)
	// A snapshot of a sandbox made from a snapshot keeps them too.
	sn2, err := e.m.Snapshot(ctx, team, fromID.ID, "", MemoryIfPossible)
	if err != nil {
		t.Fatal(err)
	}
	args("from a snapshot's snapshot", e.create(t, CreateRequest{Template: sn2.ID}))

	if err := e.m.Pause(ctx, team, fromID.ID, false); err != nil {
		t.Fatal(err)
	}
	resumed, err := e.m.Resume(ctx, team, fromID.ID, time.Minute, ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	args("resumed from stopped", resumed)
}

// TestMCPGatewayTemplate: mcp-gateway, the template of the SDK's
// Sandbox.create({ mcp }), runs warren/mcp-gateway with the plain agent,
// and says how to build the image when it is missing.
func TestMCPGatewayTemplate(t *testing.T) {
	e := newEnv(t, nil)
	req := CreateRequest{TeamID: team, Template: MCPGatewayTemplate, Timeout: time.Minute}
	_, err := e.m.Create(context.Background(), req)
	wantKind(t, "create without the image", err, sandbox.KindNotFound)
	if msg := sandbox.Message(err); !strings.Contains(msg, "warren image build mcp-gateway") {
		t.Errorf("error %q does not say how to build the image", msg)
	}
	e.rt.Rebuild("warren/mcp-gateway")
	sb := e.create(t, req)
	args, _ := e.rt.AgentArgsOf(sb.ContainerID)
	got := []any{sb.TemplateID, sb.Alias, sb.Image, args}
	want := []any{"mcp-gateway", "mcp-gateway", "warren/mcp-gateway", []string(nil)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
