package lifecycle

import (
	"context"

	"github.com/warrenhq/warren/internal/sandbox"
)

// A call a control-plane replica forwarded to its leader carries a key
// (internal/server): when the leader is lost during the call, the replica
// sends it again, with the same key, to the next one. A create under a key
// makes its sandbox with the ID the key derives, so that the create sent
// again finds the sandbox the first one made instead of making a second.

type callKeyContext struct{}

// WithCallKey returns ctx serving the call named by key ("" = none).
func WithCallKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, callKeyContext{}, key)
}

func callKey(ctx context.Context) string {
	key, _ := ctx.Value(callKeyContext{}).(string)
	return key
}

// keyedCreate returns, for a create under a call key, the ID its sandbox
// takes and, when an earlier try of the same call made that sandbox and
// it runs, the sandbox. A try still making it here is waited for (it
// holds the sandbox's lock); one a lost leader left half-made, or killed
// since, leaves the ID taken: the create makes its sandbox afresh under a
// new one.
func (m *Manager) keyedCreate(ctx context.Context, teamID string) (id string, made sandbox.Sandbox, ok bool) {
	key := callKey(ctx)
	if key == "" {
		return sandbox.NewID(), sandbox.Sandbox{}, false
	}
	id = sandbox.IDForKey(key)
	unlock := m.locks.lock(id)
	sb, found := m.cached(id)
	unlock()
	switch {
	case !found:
		return id, sandbox.Sandbox{}, false
	case sb.TeamID == teamID && sb.State == sandbox.StateRunning:
		m.log.Info("a create sent again finds the sandbox it made", "sandbox", id)
		return id, sb, true
	}
	return sandbox.NewID(), sandbox.Sandbox{}, false
}
