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
